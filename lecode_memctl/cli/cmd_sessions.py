"""``memctl sessions`` and ``memctl read``: session transcripts."""


from typing import Annotated, Any

import typer

from .completion import complete_session_id
from .options import (
    FormatOpt,
    JsonOpt,
    LimitOpt,
    LockWaitOpt,
    OffsetOpt,
    SinceOpt,
    UntilOpt,
    count_type,
    sort_option,
)
from .registry import command
from .state import STATE

_STATE_LABEL = {"ok": "ok", "torn_tail": "torn tail", "corrupt": "corrupt", "refused": "refused",
                "unreadable": "unreadable"}


def _session_display(row: dict) -> dict:
    out = dict(row)
    state = _STATE_LABEL.get(row["state"], row["state"])
    if row["reason"] and row["state"] != "torn_tail":
        state += f" ({row['reason']})"
    out["state"] = state
    return out


SESSION_SORTS = ("id", "created", "last_time", "size")


@command(epilog="""\
\b
Examples:
  memctl sessions
  memctl sessions --format csv > sessions.csv
  memctl sessions --since 7d --sort=-last_time
  memctl sessions --format jsonl | jq -r 'select(.state != "ok") | .id'

\b
State: ok; torn tail (reason torn_tail: the last line is an append still
in flight, which is normal while lecode runs and hides nothing before
it); corrupt
(with the kind: not_json, not_object, no_seq, invalid_utf8, seq_gap,
seq_duplicate, seq_regression, or too_large: valid JSON too large for the
memory at hand or nested too deeply to parse); refused (refused_symlink, refused_header,
refused_project, or invalid_ref: a *.jsonl whose name is not a valid
session id, listed under that name and never opened); unreadable
(session_unreadable: a directory, a FIFO or a file that cannot be read
in its place).
""")
def sessions(
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    sort: Annotated[str | None, sort_option(SESSION_SORTS, "id")] = None,
    offset: OffsetOpt = None,
    limit: LimitOpt = None,
) -> None:
    """List the project's session transcripts, one row per session.

    Each row: id, created (from the header), last_time (the time of the last
    append: the file's modification time), records (the last complete
    line's seq + 1: the records, the header included, when the state is
    ok), messages, compactions (compact events), size in bytes, and state
    with its reason (a corrupt state names the first problem found, with
    its line number).  The state comes from the header and the tail
    of each file plus a byte-level pass that parses only lines holding
    "event" or not beginning as the writer writes a record ({"seq":N,
    "type":"T"): it is cheap on large transcripts but is not a full check;
    'memctl validate --deep' parses every line.  Sessions of another project,
    symbolic links and files without a valid header are listed as refused,
    never read further.  --since/--until select by the last record's time.
    Changes nothing.  --json prints an array of session rows; the fields
    (the same in every format) are listed in docs/OUTPUT.md.
    """
    from lecode_memctl.core.rowmodel import SESSION, in_window, parse_when
    from lecode_memctl.core.sessions import SessionStore

    from .output import check_format, render_records, sort_rows, window

    fmt_name = check_format(fmt, json_flag=json_)
    t_since = parse_when(since, option="--since") if since is not None else None
    t_until = parse_when(until, option="--until", until=True) if until is not None else None
    store = STATE.existing_store()
    by_id = sort in (None, "id")
    if not by_id:
        sort_rows([], sort, SESSION_SORTS, "id")     # (an unknown key: refused before any read)
    # in id order (the default) each transcript is read as its row is
    # printed: a page reads its own sessions, memory holds no row per session
    infos = SessionStore(store).iter_sessions()
    rows: Any = (r for r in (SESSION.row(**i.to_json()) for i in infos)
                 if in_window(r["last_time"], t_since, t_until))
    if not by_id:
        rows = sort_rows(rows, sort, SESSION_SORTS, "id")
    render_records(SESSION, window(rows, offset, limit), fmt_name,
                   columns=["id", "created", "last_time", "records", "messages", "compactions",
                            "size", "state"],
                   labels={"last_time": "last"}, display=_session_display)


@command(epilog="""\
\b
Examples:
  memctl read 20260301-a1b2 10 40
  memctl read 20260301-a1b2:10-40           the range as memctl facts prints a source
  memctl read 20260301-a1b2 10 40 --offset 4096
  memctl read 20260301-a1b2 10 40 --text     the range as a transcript to read
  memctl read 20260301-a1b2 10 40 | jq -r .source_text

\b
Read every page and parse the array:
  memctl read S 10 40 --all | jq -j .source_text | jq .

\b
Exit status: 0 ok; 2 bad id, range, offset or limit; 3 no such session, or
START after its last record; 4 refused session (symbolic link, another
project, bad header) or no visible message in the range; 5 a corrupt line
or seq gap inside the range.
""")
def read(
    session: Annotated[str, typer.Argument(
        metavar="SESSION", help="An exact session id (never a path or prefix), or "
        "SESSION:RANGE as memctl prints a source (10-40, or runs such as 10-12,15: the span "
        "from the first to the last position), without START and END.",
        autocompletion=complete_session_id, show_default=False)],
    # (text, read by the SESSION:RANGE form's parser: ASCII digits only,
    # where an int argument took "٤", "4_0" and "+4")
    start_text: Annotated[str | None, typer.Argument(
        metavar="START", help="First seq (inclusive; ASCII digits).",
        show_default=False)] = None,
    end_text: Annotated[str | None, typer.Argument(
        metavar="END", help="Last seq (inclusive; ASCII digits); at most 200 positions "
        "from START.", show_default=False)] = None,
    offset: Annotated[int, typer.Option(
        "--offset", click_type=count_type(0), metavar="N", help="Character offset into source_text (the "
        "previous page's next_offset).")] = 0,
    limit: Annotated[int, typer.Option(
        "--limit", click_type=count_type(1), metavar="N", help="Page size in characters (clamped to 8192; "
        "smaller when JSON escaping needs it).")] = 4096,
    text: Annotated[bool, typer.Option(
        "--text", help="The whole range as a transcript to read: role-labelled, wrapped "
        "messages, tool calls and results summarised, binary parts named, hidden positions "
        "marked with their reason (control characters escaped; not paged: --offset is "
        "refused, and --all, every page, adds nothing to it).")] = False,
    all_: Annotated[bool, typer.Option(
        "--all", help="Every page from --offset to the end, one compact JSON document a "
        "line, all from one capture (one source.digest).")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Print the visible messages of a session range, paged, with its source reference.

    This is direct session recall, as lecode's '/memory read' and
    memory_recall(session_id, start_seq, end_seq): the range START..END
    (inclusive, at most 200 positions) is captured as a validated snapshot
    for purpose working: undone, cleared, excluded (forgotten) and
    epoch-invalidated messages are left out, and events are never shown.
    END past the transcript's end is clamped.

    Output is one JSON document of at most 16,384 UTF-8 bytes (pretty on a
    terminal): type ("read"), schema_version, session_id, start, end,
    last_seq, purpose, status (valid)
    and reason (null), source {session_id, seqs, digest} (the visible
    message positions and the SHA-256 of every complete record from the
    first to the last of them), hidden {reason: [seq, ...]},
    hidden_reasons {"seq": reason} (cleared, undone, excluded, epoch, for
    each hidden position), source_text (a character page of
    the JSON array [[seq, message], ...]; binary attachments replaced by
    {"type": "binary", "media_type": ..., "omitted_bytes": N}), offset,
    next_offset (pass it back as --offset; null on the last page), limit and
    total_chars.  Each page is a new snapshot: compare source.digest before
    joining pages, or use --all, which prints every page of one capture as
    JSON Lines.  --text prints the whole range for a person instead:
    role-labelled messages wrapped to the terminal width, tool calls and
    results summarised (a result's first 3 lines, at most 1,000
    characters of them; the JSON output holds it whole), binary parts
    named, hidden positions marked with their reason.  A range with no visible message exits 4 and its JSON
    says why: status hidden (stale for a range of events only), reason,
    seq (the first hidden position), source null, hidden and
    hidden_reasons.  Changes nothing.
    """
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.sourceref import check_session_id

    from .cmd_facts import parse_evidence

    if ":" in session:          # SESSION:RANGE, as a source is printed
        if start_text is not None:
            raise UsageError(f"{session!r} already names the range: give no START or END")
        session, start, end, _none = parse_evidence(session, [])
    elif start_text is None or end_text is None:
        raise UsageError("give the range as SESSION START END or SESSION:START-END")
    else:                       # (the same numbers as the range form takes)
        session, start, end, _none = parse_evidence(session, [start_text, end_text])
    check_session_id(session)   # before any file access
    if text and json_:
        raise UsageError("--text conflicts with --json")
    if text and offset:
        raise UsageError("--text prints the whole range; --offset pages the JSON output")

    from lecode_memctl.core.paging import page_document
    from lecode_memctl.core.project import hidden_range, range_meta
    from lecode_memctl.core.rowmodel import doc_head
    from lecode_memctl.core.sessions import SessionStore, SpanHidden, StoreExclusions, check_range

    from .output import emit_json, page_bytes

    check_range(start, end, max_span=200)
    store = STATE.existing_store()
    # The store's facts.sqlite3, read-only, for exclusions (--lock-wait for its snapshot).
    with SessionStore(store, StoreExclusions(store.facts_db, lock_wait)) as sessions:
        try:
            snap = sessions.source_snapshot(session, start, end, "working")
        except SpanHidden as exc:
            # Reasons are data: the status and reason of the range, and of
            # each hidden position, as recall gives them; still exit 4.
            from .output import echo, safe

            hidden_doc = {**doc_head("read"), **hidden_range(session, start, end, exc)}
            if text:
                from . import transcript

                transcript.render(hidden_doc, (), (), exc.hidden)
            else:
                emit_json(hidden_doc, pretty=False if all_ else None)
            echo(f"memctl: error: {safe(exc.message)}", err=True)
            raise typer.Exit(exc.exit_code) from None
    meta = {**doc_head("read"), **range_meta(session, start, end, snap)}
    if text:
        from . import transcript

        transcript.render(meta, snap.records, snap.visible, snap.hidden)
        return
    if all_:
        from lecode_memctl.core.paging import iter_pages

        from .output import emit_jsonl

        emit_jsonl(iter_pages(meta, snap.messages(), offset=offset, limit=limit,
                              render=page_bytes))
        return
    doc, _page = page_document(meta, snap.messages(), offset=offset, limit=limit,
                               render=page_bytes)
    emit_json(doc)
