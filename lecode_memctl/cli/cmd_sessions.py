"""``memctl sessions`` and ``memctl read``: session transcripts.

Also :func:`complete_session_id`, the shell completion of session ids that
every command taking a SESSION argument uses.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .app import app
from .options import FormatOpt, JsonOpt, LimitOpt, OffsetOpt, SinceOpt, UntilOpt, sort_option
from .state import STATE


def complete_session_id(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Session ids of the store for shell completion.

    Lists ``sessions/*.jsonl`` (symbolic links left out) and opens nothing
    else: no rich, sqlite3 or tabulate import, nothing written.  The app
    callback has not run during completion, so the store comes from the
    root context's parsed options (``--store``, ``--config-dir``,
    ``--project``) and the environment.
    """
    import os

    try:
        from lecode_memctl.core.sourceref import SESSION_ID_RE

        sessions = os.path.join(os.fspath(_completion_store(ctx).path), "sessions")
        if os.path.islink(sessions):
            return []
        prefix = incomplete or ""
        out = []
        with os.scandir(sessions) as it:
            for entry in it:
                name = entry.name
                if not name.endswith(".jsonl") or entry.is_symlink():
                    continue
                sid = name[:-6]
                if sid.startswith(prefix) and SESSION_ID_RE.match(sid):
                    out.append(sid)
        return sorted(out)
    except Exception:  # noqa: BLE001 - completion must never fail loudly
        return []


def _completion_store(ctx):  # noqa: ANN001,ANN202
    """The store named by the root context's parsed options (--store,
    --config-dir, --project) and the environment, while completing."""
    import os

    from .state import State

    root = ctx.find_root() if ctx is not None else None
    params = dict(root.params) if root is not None and root.params else {}

    def opt(name: str) -> str | None:
        v = params.get(name)
        return os.fspath(v) if v else None

    return State(config_dir_option=opt("config_dir"), project=opt("project"),
                 store_option=opt("store")).store()


def _exclusions(store):  # -> ExclusionReader, closer
    """The facts database's ExclusionReader, opened read-only (no file created)."""
    import os

    from lecode_memctl.core.sourceref import NoExclusions

    if not os.path.lexists(store.facts_db):
        return NoExclusions(), None
    from lecode_memctl.core.facts import FactStore

    fs = FactStore.open_readonly(store.facts_db)
    return fs, fs.close


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


@app.command(epilog="""\
\b
Examples:
  memctl sessions
  memctl sessions --format csv > sessions.csv
  memctl sessions --since 7d --sort=-last_time
  memctl sessions --format jsonl | jq -r 'select(.state != "ok") | .id'

\b
State: ok; torn tail (the last line is an append still in flight, which
is normal while lecode runs and hides nothing before it); corrupt
(with the kind: not_json, not_object, no_seq, invalid_utf8, seq_gap,
seq_duplicate, seq_regression); refused (refused_symlink, refused_header,
refused_project); unreadable.
""")
def sessions(
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    sort: Annotated[Optional[str], sort_option(SESSION_SORTS, "id")] = None,
    offset: OffsetOpt = None,
    limit: LimitOpt = None,
) -> None:
    """List the project's session transcripts, one row per session.

    Each row: id, created (from the header), last_time (the time of the last
    append: the file's modification time), records (complete records, the
    header included), messages, compactions (compact events), size in bytes,
    and state with its reason.  The state comes from the header and the tail
    of each file plus a byte-level pass that parses only lines holding
    "event": it is cheap on large transcripts but is not a full check;
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
    t_since = parse_when(since, option="--since") if since else None
    t_until = parse_when(until, option="--until", until=True) if until else None
    store = STATE.store().require()
    infos = SessionStore(store).list_sessions()
    rows = [SESSION.row(**i.to_json()) for i in infos]
    rows = [r for r in rows if in_window(r["last_time"], t_since, t_until)]
    rows = sort_rows(rows, sort, SESSION_SORTS, "id")
    render_records(SESSION, window(rows, offset, limit), fmt_name,
                   columns=["id", "created", "last_time", "records", "messages", "compactions",
                            "size", "state"],
                   labels={"last_time": "last"}, display=_session_display)


def _text_page(doc: dict) -> None:
    from .output import echo, safe

    src = doc["source"]
    seqs = src["seqs"]
    echo(f"session:  {safe(doc['session_id'])}  range {doc['start']}-{doc['end']} "
         f"(transcript ends at {doc['last_seq']})")
    echo(f"visible:  {len(seqs)} message(s): {', '.join(str(s) for s in seqs)}")
    for reason, where in sorted(doc["hidden"].items()):
        echo(f"hidden:   {reason}: {', '.join(str(s) for s in where)}")
    echo(f"digest:   {src['digest']}")
    end = doc["offset"] + len(doc["source_text"])
    nxt = doc["next_offset"]
    echo(f"page:     characters {doc['offset']}-{end} of {doc['total_chars']}; "
         + (f"next: --offset {nxt}" if nxt is not None else "last page"))
    echo("")
    echo(safe(doc["source_text"]))


@app.command(epilog="""\
\b
Examples:
  memctl read 20260301-a1b2 10 40
  memctl read 20260301-a1b2 10 40 --offset 4096
  memctl read 20260301-a1b2 10 40 --text
  memctl read 20260301-a1b2 10 40 | jq -r .source_text

\b
Read every page and parse the array:
  o=0; while [ "$o" != null ]; do
    memctl read S 10 40 --offset $o > page.json
    jq -j .source_text page.json >> all.json; o=$(jq .next_offset page.json)
  done; jq . all.json

\b
Exit status: 0 ok; 2 bad id, range, offset or limit; 3 no such session, or
START after its last record; 4 refused session (symbolic link, another
project, bad header) or no visible message in the range; 5 a corrupt line
or seq gap inside the range.
""")
def read(
    session: Annotated[str, typer.Argument(
        metavar="SESSION", help="An exact session id (never a path or prefix).",
        autocompletion=complete_session_id, show_default=False)],
    start: Annotated[int, typer.Argument(metavar="START", help="First seq (inclusive).",
                                         show_default=False)],
    end: Annotated[int, typer.Argument(metavar="END", help="Last seq (inclusive); at most "
                                       "200 positions from START.", show_default=False)],
    offset: Annotated[int, typer.Option(
        "--offset", metavar="N", help="Character offset into source_text (the previous "
        "page's next_offset).")] = 0,
    limit: Annotated[int, typer.Option(
        "--limit", metavar="N", help="Page size in characters (clamped to 8192; smaller "
        "when JSON escaping needs it).")] = 4096,
    text: Annotated[bool, typer.Option(
        "--text", help="A human rendering of the same page (control characters escaped).")] = False,
    json_: JsonOpt = False,
) -> None:
    """Print the visible messages of a session range, paged, with its source reference.

    This is direct session recall, as lecode's '/memory read' and
    memory_recall(session_id, start_seq, end_seq): the range START..END
    (inclusive, at most 200 positions) is captured as a validated snapshot
    for purpose working: undone, cleared, excluded (forgotten) and
    epoch-invalidated messages are left out, and events are never shown.
    END past the transcript's end is clamped.

    Output is one JSON document of at most 16,384 UTF-8 bytes (pretty on a
    terminal): session_id, start, end, last_seq, purpose, status (valid),
    source {session_id, seqs, digest} (the visible message positions and
    the SHA-256 of every complete record from the first to the last of
    them), hidden {reason: [seq, ...]}, source_text (a character page of
    the JSON array [[seq, message], ...]; binary attachments replaced by
    {"type": "binary", "media_type": ..., "omitted_bytes": N}), offset,
    next_offset (pass it back as --offset; null on the last page), limit and
    total_chars.  Each page is a new snapshot: compare source.digest before
    joining pages.  Changes nothing.
    """
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.sourceref import check_session_id

    check_session_id(session)   # before any file access
    if text and json_:
        raise UsageError("--text conflicts with --json")

    from lecode_memctl.core.paging import page_document
    from lecode_memctl.core.sessions import SessionStore, check_range

    from .output import emit_json

    check_range(start, end, max_span=200)
    store = STATE.store()
    import os

    if os.path.islink(store.path):
        from lecode_memctl.core.errors import StoreCorrupt

        raise StoreCorrupt(f"{store.path}: store directory is a symbolic link; refusing to follow it")
    reader, closer = _exclusions(store)
    try:
        snap = SessionStore(store, exclusions=reader).source_snapshot(session, start, end, "working")
    finally:
        if closer:
            closer()
    hidden: dict[str, list[int]] = {}
    for seq, reason in sorted(snap.hidden.items()):
        hidden.setdefault(reason, []).append(seq)
    meta = {"session_id": session, "start": start, "end": end, "last_seq": snap.last_seq,
            "purpose": "working", "status": "valid", "source": snap.ref.to_json(),
            "hidden": hidden}
    doc, _page = page_document(meta, snap.messages(), offset=offset, limit=limit)
    if text:
        _text_page(doc)
        return
    emit_json(doc)
