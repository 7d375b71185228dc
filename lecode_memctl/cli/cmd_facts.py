"""memctl commands on source-linked facts: facts, recall, history, correct,
forget, context.

Read commands (facts, recall, history, context, forget --dry-run) open the
facts database read-only: they create and modify nothing in the store, not
even a ``-wal``/``-shm`` file, and still see what a live agent committed.
"""


import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .completion import FACT_STATUSES, complete_fact_id, complete_fact_status, complete_session_id
from .options import FormatOpt, JsonOpt, LockWaitOpt, count_type
from .registry import command
from .state import (
    STATE,
    path_option,
    stdin_is_tty as _stdin_is_tty,  # (the tests replace it here)
)

if TYPE_CHECKING:
    from collections.abc import Callable

FactIdArg = Annotated[str, typer.Argument(
    metavar="FACT_ID", help="A fact id (16 hex digits, as 'memctl facts' shows it).",
    autocompletion=complete_fact_id, show_default=False)]


# ---------------------------------------------------------------- opening

def _store() -> Any:
    """The command's store: NotFound when it does not exist; a store directory
    that is a symbolic link is refused."""
    return STATE.existing_store()


def _require_known(store: Any, fact_id: str, *, forgotten_ok: bool,
                   lock_wait: float = 5.0) -> None:
    """Answer 'no fact' from a read-only open, before a writer opens (and so
    migrates) the database: a write refused for an unknown id changes nothing.
    The writer checks again inside its transaction.  Without ``forgotten_ok``
    (correct), a live fact whose id is forgotten (its rows stored again after
    the forget) is a Conflict, before any question about it."""
    from lecode_memctl.core.errors import Conflict
    from lecode_memctl.core.facts import FactStore

    fs = FactStore.open_readonly(store.facts_db, busy_timeout=lock_wait)
    try:
        if fs.get(fact_id) is None:
            if not (forgotten_ok and fs.was_forgotten(fact_id)):
                fs.require(fact_id)  # NotFound: "no fact X" or "fact X was forgotten"
        elif not forgotten_ok and fs.was_forgotten(fact_id):
            raise Conflict(f"fact {fact_id} was forgotten; its id is retired (its rows were "
                           f"stored again after the forget: 'memctl forget {fact_id}' deletes "
                           "them), and nothing is revised")
    finally:
        fs.close()


def _open_read(lock_wait: float = 5.0) -> tuple[Any, Any, Any]:
    """(store, read-only FactStore, SessionStore using it for exclusions)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore

    store = _store()
    facts = FactStore.open_readonly(store.facts_db, busy_timeout=lock_wait)
    return store, facts, SessionStore(store, exclusions=facts)


def _needs_migration_note(facts: Any) -> None:
    from .output import echo, safe

    if getattr(facts, "needs_migration", False):
        echo(f"memctl: note: {safe(str(facts.path))} needs migration "
             "(schema version "
             f"{facts.schema_version}); read-only, nothing was changed", err=True)


def _status_cell(status: str, reason: str | None) -> str:
    return status if not reason else f"{status} ({reason})"


# ---------------------------------------------------------------- facts

FACTS_COLUMNS = ["fact_id", "revision", "status", "source", "text"]


def _row_for_table(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["status"] = _status_cell(row["status"], row["reason"])
    out["text"] = row["text"] + (" [...]" if row["fact_text_truncated"] else "")
    out["source"] = row["source"] or "-"
    return out


def _print_learning(learning: dict[str, Any] | None, session: str | None,
                    transcript: bool = True) -> None:
    from .output import echo, safe

    if learning is None:
        if session and not transcript:
            echo(f"learning: none (session {safe(session)} has no transcript)")
            return
        echo("learning: no learning event"
             + (f" in session {safe(session)}" if session else ""))
        return
    def one(value: Any) -> str:   # stored values, one line each (issue 16.6)
        return safe(str(value))

    counts = ", ".join(f"{one(k)}={one(v)}" for k, v in sorted(learning["reason_counts"].items(),
                                                               key=lambda kv: str(kv[0])))
    echo(f"learning: {one(learning['status'])} (session {one(learning['session_id'])}, "
         f"seq {one(learning['seq'])})" + (f"; reasons: {counts}" if counts else ""))
    if learning["facts"]:
        echo("  facts: " + ", ".join(one(f) for f in learning["facts"]))
    for p in learning["proposals"]:
        src = p["source"]
        echo(f"  proposal from {one(src['session_id'])}:{','.join(map(str, src['seqs']))}: "
             + safe(p["text"])
             + (" [...]" if p["fact_text_truncated"] else ""))
    if learning.get("proposals_hidden"):
        echo(f"  ({learning['proposals_hidden']} proposal(s) hidden: evidence, epoch or "
             "conflicts no longer valid)")


def _fact_filter(query: str | None, since: Any, until: Any) -> Any:
    """The predicate on a stored Fact for --query/--since/--until (None: every fact).
    --query is the core's literal search: a substring of the current text,
    case-insensitive for ASCII letters only (like SQLite's lower())."""
    from lecode_memctl.core.rowmodel import in_window

    if query is None and since is None and until is None:
        return None
    needle = query.translate(_ASCII_LOWER) if query is not None else None

    def where(fact: Any) -> bool:
        if needle is not None and needle not in fact.text.translate(_ASCII_LOWER):
            return False
        if since is not None or until is not None:
            return in_window(fact.created, since, until) or in_window(fact.updated, since, until)
        return True

    return where


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@command(epilog="""\
\b
Examples:
  memctl facts                      the first page (20 facts), as the agent sees them
  memctl facts --offset 20          the next page
  memctl facts --format jsonl | jq -r 'select(.status != "valid") | .fact_id'
  memctl facts --status stale --since 7d --format csv > stale.csv
  memctl facts --query 'indentation'          literal text search (unverified, administrative)
  memctl facts --session 2026-06-01-a1b2 --json
""")
def facts(
    offset: Annotated[int | None, typer.Option(
        "--offset", click_type=count_type(0), metavar="N",
        help="Skip the first N facts (after filtering); an N over 0 with --all: exit 2.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", click_type=count_type(1), metavar="N",
        help="At most N facts.  A page of the table holds at most 20: an N over 20 is "
             "refused in a table format (table, github, html...: exit 2; use a machine "
             "format or --all); with --all: exit 2.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="The table too lists every fact, not "
                                       "one page; exit 2 with --limit or an --offset over "
                                       "0, in every format.")] = False,
    session: Annotated[str | None, typer.Option(
        "--session", metavar="ID", autocompletion=complete_session_id,
        help="Only facts with evidence in this session (missing when its transcript is "
             "gone); learning status of this session.")] = None,
    status: Annotated[str | None, typer.Option(
        "--status", metavar="STATUS", autocompletion=complete_fact_status,
        help="Only facts with this evidence status: valid, stale, missing, hidden or "
             "unverified.")] = None,
    query: Annotated[str | None, typer.Option(
        "--query", metavar="TEXT",
        help="Only facts whose current text contains TEXT (literal, ASCII case-insensitive; "
             "an administrative, unverified search).")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="WHEN",
        help="Only facts created or updated at or after WHEN: a date, an RFC 3339 time or "
             "an age such as 7d or 12h.")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", metavar="WHEN", help="Only facts created or updated at or before WHEN.")] = None,
    fmt: FormatOpt = None,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """List facts with their revision, evidence status, source and text.

    Each fact: its id, current revision, status (valid, missing, stale,
    hidden, unverified) with its machine-readable reason, source
    (session:positions) and text, capped at 512 characters (marked
    fact_text_truncated).  A fact is valid only when the evidence of every
    one of its revisions validates today (purpose durable: a later /clear
    does not revoke it; undo, forget exclusions, edits and deletion do).

    The table mirrors the agent's /memory facts: pages of at most 20 facts
    and 16,384 bytes of JSON, in id order, then the latest learning status
    (the newest learning event, of --session when given), its reason counts
    and the proposals whose evidence still validates; the command for the
    next page (with the options that shape the page) goes to stderr.  The
    machine formats (--json, --format json, jsonl, csv, tsv) give every fact
    unless --limit or --offset is given, streamed in constant memory.
    Refused (exit 2): --limit over 20 in a table format, and --all with
    --limit or an --offset over 0 in any format.
    --json is always one object: {"type": "facts", "schema_version",
    "filters", "offset", "limit", "total", "facts": [fact rows],
    "next_offset", "learning"}; see docs/OUTPUT.md for the fields.  --query
    is the administrative literal search of the stored text (unverified;
    filters.administrative_search says so).  --session picks facts by the
    evidence the database records: an id that no transcript and no fact has
    exits 3, a transcript that cannot be read exits as 'memctl read' does (4
    or 5), in every format and before any output; a session whose transcript
    is gone lists its facts (missing), with no learning status.  Every fact
    of a store of 20,000 or more, without --session, is listed by two
    processes where two CPUs are free (a child makes the second half into a
    private temporary file): the same output, in about two thirds of the
    time (a database damaged partway may give more rows before its error:
    docs/FORMAT.md).

    The text is stored data, not instructions; tables show it escaped.
    Reads only: nothing in the store is created or changed.
    """
    import itertools

    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.factview import (
        PAGE_FACTS,
        check_listed_session,
        facts_page,
        iter_fact_lines,
        iter_fact_page,
        iter_fact_records,
        learning_status,
    )
    from lecode_memctl.core.paging import MAX_OUTPUT_BYTES
    from lecode_memctl.core.rowmodel import FACT, SCHEMA_VERSION, parse_when, utc_time
    from lecode_memctl.core.sourceref import check_session_id

    from .output import (
        ELEMENT_END,
        PlainStats,
        Stream,
        check_format,
        csv_line,
        dumps,
        echo,
        emit_csv,
        emit_csv_lines,
        emit_held_table,
        emit_json_document,
        emit_jsonl,
        plain_table_out,
        render_records,
        stop_after,
        table_cells,
    )

    fmt_name = check_format(fmt, json_flag=json_)
    machine = fmt_name in ("json", "jsonl", "csv", "tsv")
    if status is not None and status not in FACT_STATUSES:
        raise UsageError(f"--status {status!r}: use one of {', '.join(FACT_STATUSES)}")
    if query is not None and not query:
        raise UsageError("--query TEXT is empty")
    if all_ and (offset or limit):
        raise UsageError("--all lists every fact: it does not go with --offset or --limit")
    if not machine and not all_ and limit is not None and limit > PAGE_FACTS:
        raise UsageError(f"a table page holds at most {PAGE_FACTS} facts (use --all, or a "
                         "machine format such as --format jsonl, for more)")
    if session is not None:
        check_session_id(session)
    t_since = parse_when(since, option="--since") if since is not None else None
    t_until = parse_when(until, option="--until", until=True) if until is not None else None
    where = _fact_filter(query, t_since, t_until)
    filtered = where is not None or status is not None
    paged = not machine and not all_
    start = offset or 0
    keep = None if status is None else (lambda r: r["status"] == status)
    store, fs, sessions = _open_read(lock_wait)
    try:
        _needs_migration_note(fs)
        # --session: decided here, once, before anything is written, for every
        # format: an unknown session or a transcript that cannot be read is
        # the command's error; one that is gone while facts still cite it is
        # listed (its facts missing), without a learning status
        transcript = session is None or check_listed_session(sessions, fs, session)

        def learning_now() -> dict[str, Any] | None:
            return learning_status(sessions, fs, session) if transcript else None

        def stream() -> Any:
            if not fs.exists:
                return iter(())
            rows = iter_fact_records(fs, sessions, session_id=session, where=where,
                                    parallel=True)
            return rows if keep is None else filter(keep, rows)

        rows: list[dict[str, Any]] | _Counted
        printed: int | None = None          # the rows of a plain table written whole
        if paged and not filtered:
            # the agent's view: memory_list's page, byte cap included
            doc = facts_page(fs, sessions, offset=start, limit=limit or PAGE_FACTS,
                             session_id=session, transcript=transcript)
            rows = [FACT.row(**r) for r in doc["facts"]]
            total: int | None = doc["total"]
            next_offset = doc["next_offset"]
            learning = doc["learning"]
        elif paged:
            want = limit or PAGE_FACTS
            rows = []
            size = 0
            more = False
            for r in itertools.islice(stream(), start, None):
                size += len(dumps(r)) + 2
                if len(rows) >= want or (rows and size > MAX_OUTPUT_BYTES - 1024):
                    more = True
                    break
                rows.append(r)
            total = None
            next_offset = start + len(rows) if more else None
            learning = learning_now()
        else:
            end = stop_after(start, limit)

            def upto(stop: int | None) -> Any:
                # rows start..stop of the listing: a bounded page (of every
                # fact, or of a session's) evaluates the sources of its own
                # facts only
                if stop is not None and not filtered and fs.exists:
                    return iter_fact_page(fs, sessions, start, stop, session)
                return itertools.islice(stream(), start, stop)

            body = upto(end)
            # (every fact from the first, or every one a filter keeps)
            whole = start == 0 and end is None and fs.exists
            if fmt_name == "json":
                # (no database is no fact: 0, with --session too; before
                # 2026-12-07 null, which OUTPUT.md keeps for the filters)
                total = None if filtered else 0 if not fs.exists else (
                    fs.count() if session is None else len(fs.ids_with_evidence_in(session)))
                head = {"type": "facts", "schema_version": SCHEMA_VERSION,
                        "filters": {"session": session, "status": status, "query": query,
                                    "since": utc_time(t_since), "until": utc_time(t_until),
                                    "administrative_search": query is not None},
                        "offset": start, "limit": limit, "total": total}
                # read before the document starts: an error in it is the
                # error document, and nothing after the rows can fail
                learning = learning_now()
                n = 0
                more = False

                def page() -> Any:
                    nonlocal n, more
                    # one row past the page (when --limit is given) says whether
                    # there is more
                    for r in upto(None if end is None else stop_after(end, 1)):
                        if end is not None and start + n == end:
                            more = True
                            return
                        yield r
                        n += 1

                if whole:
                    # the whole listing: its rows as each process encodes them
                    emit_json_document(
                        head, "facts", iter_fact_lines(
                            fs, sessions, lambda r: dumps(r) + ELEMENT_END, session_id=session,
                            where=where, keep=keep, parallel=True),
                        lambda: {"next_offset": None, "learning": learning},
                        {"next_offset": None, "learning": None}, encoded=True)
                    return
                emit_json_document(
                    head, "facts", page(),
                    lambda: {"next_offset": start + n if more else None,
                             "learning": learning},
                    {"next_offset": None, "learning": None})
                return
            if fmt_name == "jsonl":
                if whole:
                    # the whole listing: its pieces as they are encoded (a
                    # child's part of a split listing is never decoded here)
                    with Stream() as write:
                        for piece in iter_fact_lines(
                                fs, sessions, lambda r: dumps(r) + b"\n", session_id=session,
                                where=where, keep=keep, parallel=True):
                            write(piece)
                    return
                emit_jsonl(body)
                return
            if fmt_name in ("csv", "tsv"):
                if whole:
                    # the same: each process writes the lines of its own part
                    emit_csv_lines(iter_fact_lines(fs, sessions, csv_line(FACT.names, fmt_name),
                                                   session_id=session, where=where, keep=keep,
                                                   parallel=True),
                                   FACT.names, fmt_name)
                    return
                emit_csv(body, FACT.names, fmt_name)
                return
            # (streamed into the table, which holds its cells compactly:
            # 100,000 facts held as rows were 276 MiB)
            learning = None

            def learned() -> None:
                # read once the listing is (as it was before the table
                # streamed: an error of either is the one it was)
                nonlocal learning
                learning = learning_now()

            total = None
            next_offset = None
            if fmt_name == "table" and whole and plain_table_out():
                # the whole listing as a plain table: each process of a
                # split listing makes its own rows' cells and their widths
                # (the child's are never decoded here until they are written)
                stats = PlainStats(FACTS_COLUMNS)
                cells = table_cells(FACTS_COLUMNS)
                printed = emit_held_table(
                    iter_fact_lines(fs, sessions, lambda r: stats.held(cells(_row_for_table(r))),
                                    session_id=session, where=where,
                                    keep=keep, parallel=True, tail=(stats.state, stats.merge),
                                    lines=False),
                    FACTS_COLUMNS, stats, held_all=learned, none_if_empty=True)
                rows = []
            else:
                rows = _Counted(iter(body), learned)
        if rows:
            render_records(FACT, rows, fmt_name, columns=FACTS_COLUMNS, display=_row_for_table)
        if query is not None:
            echo("memctl: note: --query is an administrative, unverified literal search of the "
                 "stored text, not what the agent recalls; each row's status is its evidence "
                 "check", err=True)
        if machine:
            return
        # (every table format: its page, footer, hint and learning status)
        n = len(rows) if printed is None else printed
        if n == 0:
            echo("no facts" + (f" with evidence in session {session}" if session else "")
                 + (" matching the filters" if filtered else ""))
        else:
            if total is None and (isinstance(rows, _Counted) or printed is not None):
                total = n                   # (every fact, after the table)
            echo(f"facts {start + 1}-{start + n}" + (f" of {total}" if total is not None else ""))
        if next_offset is not None:
            # the options that chose the store and those that shape the
            # page, so that the command gives the next one wherever it is run
            chose = " ".join(STATE.store_args())
            opts = " ".join(_filter_args(session, status, query,
                                         _absolute(since, t_since), _absolute(until, t_until))
                            + ([f"--limit {limit}"] if limit is not None else []))
            echo(f"memctl: more facts: memctl {chose + ' ' if chose else ''}facts"
                 f"{' ' + opts if opts else ''} --offset {next_offset}", err=True)
        _print_learning(learning, session, transcript)
    finally:
        fs.close()


class _Counted:
    """The rows of ``facts --all`` as a table, streamed: true when there is
    a first row, ``len`` the rows it gave (read after the table);
    ``at_end`` is called once the rows are all read (every table reads
    them all before it writes), or at once when there is none."""

    def __init__(self, rows: Any, at_end: "Callable[[], None]") -> None:
        self._rows = rows
        self._n = 0
        self._at_end = at_end
        self._first: Any = next(rows, None)      # (a row is a dict: never None)
        self._any = self._first is not None
        if not self._any:
            at_end()

    def __bool__(self) -> bool:
        return self._any

    def __iter__(self) -> Any:
        if not self._any:
            return
        first, self._first = self._first, None
        self._n += 1
        yield first
        for r in self._rows:
            self._n += 1
            yield r
        self._at_end()

    def __len__(self) -> int:
        return self._n


def _absolute(given: str | None, when: Any) -> str | None:
    """A --since/--until value for the next-page hint: an age (``7d``) as
    the time it meant, RFC 3339 UTC to the microsecond, the window it chose
    (run later, the age would shift it; before 2026-12-07 it was repeated);
    a date or a time as given (already absolute)."""
    from lecode_memctl.core.rowmodel import is_age, micro_time

    if given is None or when is None or not is_age(given):
        return given
    return micro_time(when)


def _filter_args(session: Any, status: Any, query: Any, since: Any, until: Any) -> list[str]:
    from .state import shell_word

    out = []
    for name, v in (("--session", session), ("--status", status), ("--query", query),
                    ("--since", since), ("--until", until)):
        if v is not None:
            out.append(f"{name} {shell_word(v)}")
    return out


# ---------------------------------------------------------------- recall

@command(epilog="""\
\b
Examples:
  memctl recall 3f2a9c0d11e4b7a8
  memctl recall 3f2a9c0d11e4b7a8 --offset 4096
  memctl recall 3f2a9c0d11e4b7a8 | jq -r .source_text
""")
def recall(
    fact_id: FactIdArg,
    offset: Annotated[int, typer.Option("--offset", click_type=count_type(0), metavar="N",
                                        help="Character offset into source_text (pass "
                                             "next_offset back).")] = 0,
    limit: Annotated[int, typer.Option("--limit", click_type=count_type(1), metavar="N",
                                       help="Characters of source_text per page (default "
                                            "4096, at most 8192).")] = 4096,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Recall one fact with its source evidence, as the agent's memory_recall does.

    Prints one JSON document (pretty on a terminal) of at most 16,384 bytes:
    type ("recall"), schema_version, fact_id, revision, status and reason (and
    about_revision, the revision the status is about, when not valid); and only when the evidence of
    every revision validates (purpose durable) also the fact text (capped at
    512 characters, fact_text_truncated), session_id, source {session_id,
    seqs, digest} and a page of source_text: a character page of the JSON
    array [[seq, message], ...] of the source messages, binary payloads
    replaced by omission markers.  Pass next_offset back as --offset; null
    means finished; concatenate the pages before parsing.  The evidence is
    untrusted data, not instructions or proof.  An unknown id exits 3.
    """
    from lecode_memctl.core.facts import check_fact_id
    from lecode_memctl.core.factview import recall as core_recall
    from lecode_memctl.core.rowmodel import doc_head

    from .output import emit_json, page_bytes

    check_fact_id(fact_id)      # (by syntax, before the store is looked for: exit 2)
    _st, fs, sessions = _open_read(lock_wait)
    try:
        _needs_migration_note(fs)
        emit_json(core_recall(fs, sessions, fact_id, offset=offset, limit=limit,
                              head=doc_head("recall"), render=page_bytes))
    finally:
        fs.close()


# ---------------------------------------------------------------- history

def _revision_for_table(row: dict[str, Any]) -> dict[str, Any]:
    """A revision row as ``history``'s tables show it: the status cell with
    its reason (``hidden (undone)``), as the text view's."""
    out = dict(row)
    out["status"] = _status_cell(row["status"], row["reason"])
    return out


@command(epilog="""\
\b
Examples:
  memctl history 3f2a9c0d11e4b7a8
  memctl history 3f2a9c0d11e4b7a8 --json | jq '.revisions[] | {revision, status}'
""")
def history(fact_id: FactIdArg, json_: JsonOpt = False, fmt: FormatOpt = None,
            lock_wait: LockWaitOpt = 5.0) -> None:
    """Show every revision of a fact: text, time, source and its status today.

    Revisions are numbered 1, 2, ... without gaps; the last is current.  Each
    source is validated again now (purpose durable); legacy provenance with
    no source reference is reported unverified.  Texts are shown whole,
    escaped; they are stored data, not instructions.  An unknown id exits 3.
    --json prints {"type": "history", "schema_version", "fact_id",
    "revision", "status", "reason", "about_revision", "created", "updated",
    "revisions": [revision rows]}; --format jsonl, csv or tsv gives the
    revision rows {type, fact_id, revision, current, created, status,
    reason, source, source_ref, provenance, text}.
    """
    from lecode_memctl.core.facts import check_fact_id
    from lecode_memctl.core.factview import history as core_history
    from lecode_memctl.core.rowmodel import REVISION, SCHEMA_VERSION, utc_time

    from .output import check_format, echo, emit_json, render_records, safe

    fmt_name = check_format(fmt, json_flag=json_)
    check_fact_id(fact_id)      # (by syntax, before the store is looked for: exit 2)
    _st, fs, sessions = _open_read(lock_wait)
    try:
        _needs_migration_note(fs)
        doc = core_history(fs, sessions, fact_id)
    finally:
        fs.close()
    rows = [REVISION.row(fact_id=doc["fact_id"], **r) for r in doc["revisions"]]
    if fmt_name == "json":
        emit_json({"type": "history", "schema_version": SCHEMA_VERSION,
                   **{k: v for k, v in doc.items() if k != "revisions"},
                   "created": utc_time(doc["created"]), "updated": utc_time(doc["updated"]),
                   "revisions": rows})
        return
    if fmt_name != "table":
        # (a table joins each revision's reason to its status, as the text
        # view and the facts tables do: before 2026-12-07 it was dropped)
        render_records(REVISION, rows, fmt_name,
                       columns=["revision", "current", "created", "status", "source", "text"],
                       display=_revision_for_table)
        return
    def number(value: object) -> str:
        # a revision stored as no integer is null (FORMAT.md): "-", as a
        # missing source here, never Python's None
        return "-" if value is None else str(value)

    echo(f"fact {doc['fact_id']}  revision {number(doc['revision'])}  "
         f"{_status_cell(doc['status'], doc['reason'])}")
    for r in rows:
        mark = "*" if r["current"] else " "
        echo(f"{mark} revision {number(r['revision'])}  "
             f"{safe(r['created'] or '-')}  "
             f"source {safe(r['source'] or '-')}  "
             f"{_status_cell(r['status'], r['reason'])}")
        # (its newlines alone: str.splitlines broke a U+2028 too, before 2026-12-07)
        for line in safe(r["text"], keep_newlines=True).split("\n"):
            echo(f"    {line}")


# ---------------------------------------------------------------- correct

#: The longest text SQLite stores (its default SQLITE_MAX_LENGTH): a
#: correction's --text-file longer than this can never be written.
MAX_TEXT_BYTES = 1_000_000_000


def _parse_seq(text: str, what: str) -> int:
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.sourceref import MAX_POSITION

    from .options import parse_count, shown_number

    got, _why = parse_count(text, 0, MAX_POSITION)
    if got is None:
        if text.isascii() and text.isdigit():   # (only digits: too many of them)
            raise UsageError(f"{what} is too large: {shown_number(text.lstrip('0'))}; a position "
                             f"is at most {MAX_POSITION}")
        raise UsageError(f"{what} must be a non-negative integer, not {text!r:.60}")
    return got


def parse_evidence(session: str, rest: list[str]) -> tuple[str, int, int, str | None]:
    """(session id, start, end, text or None) from ``SESSION START END [TEXT]``
    or ``SESSION:RANGE [TEXT]``, where RANGE is how memctl prints a source:
    ``N``, ``N-M``, or runs such as ``3-5,8``, ascending (the span from the
    first to the last position is captured).  Bad syntax is a UsageError
    (exit 2).  The one parser of a range: ``read`` and ``correct``."""
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.sourceref import check_session_id

    if ":" in session:
        sid, _, spec = session.partition(":")
        check_session_id(sid)
        if len(rest) > 1:
            raise UsageError(f"{session!r} already names the range: give only the TEXT after "
                             f"it, not {' '.join(rest[:-1])!r}")
        seqs: list[int] = []
        for run in spec.split(","):
            lo, dash, hi = run.partition("-")
            a = _parse_seq(lo, f"the range in {session!r}")
            b = _parse_seq(hi, f"the range in {session!r}") if dash else a
            if b < a:
                raise UsageError(f"bad range {run!r} in {session!r}: the end is before the start")
            if seqs and a <= seqs[-1]:
                # (as memctl prints a source: before 2026-12-07 '7,4' was read
                # as 4..7 while '7-4' was refused; read and correct alike)
                raise UsageError(f"bad range {run!r} in {session!r}: the runs must be "
                                 "ascending, each after the one before it (as memctl prints "
                                 "a source)")
            seqs += [a, b]
        return sid, min(seqs), max(seqs), (rest[0] if rest else None)
    check_session_id(session)
    if len(rest) < 2:
        raise UsageError("give the evidence as SESSION START END or SESSION:START-END")
    if len(rest) > 3:
        raise UsageError(f"too many arguments: {' '.join(rest[3:])!r} (quote the TEXT)")
    start = _parse_seq(rest[0], "START")
    end = _parse_seq(rest[1], "END")
    return session, start, end, (rest[2] if len(rest) == 3 else None)


def _invalid_revisions(store: Any, fact_id: str) -> tuple[int, list[dict[str, Any]]]:
    """(current revision, the revisions whose evidence does not validate today,
    purpose durable), from a read-only open: what stays wrong after a
    correction, since a correction only appends a revision."""
    from lecode_memctl.core.facts import FactStore, revision_taken
    from lecode_memctl.core.factview import history
    from lecode_memctl.core.sessions import SessionStore

    fs = FactStore.open_readonly(store.facts_db)
    try:
        doc = history(fs, SessionStore(store, exclusions=fs), fact_id)
    finally:
        fs.close()
    current = doc["revision"]
    if type(current) is int and any(r["revision"] == current + 1 for r in doc["revisions"]):
        # (the revision a correction appends has a row: no question about
        # --yes, whose write would meet it; the write checks it again)
        raise revision_taken(fact_id, current)
    bad = [{"revision": r["revision"], "status": r["status"], "reason": r["reason"]}
           for r in doc["revisions"] if r["status"] != "valid"]
    if doc["status"] != "valid" and not any(b["revision"] == doc["about_revision"] for b in bad):
        # the fact fails where no revision row does (a revision with no row,
        # rows not exactly 1..current, evidence its legacy provenance shares
        # with an exclusion): a correction repairs that no more
        bad.append({"revision": doc["about_revision"], "status": doc["status"],
                    "reason": doc["reason"]})
    return doc["revision"], bad


def _stays_invalid_message(fact_id: str, bad: list[dict[str, Any]]) -> str:
    which = "; ".join(f"revision {b['revision']} is {b['status']}"
                      + (f" ({b['reason']})" if b["reason"] else "") for b in bad)
    return (f"fact {fact_id} stays invalid after this correction: {which}.  A fact is "
            "injected and recalled only when the evidence of every revision validates, and a "
            "correction appends a revision without repairing the old ones.  To replace the "
            f"fact, forget it (memctl forget {fact_id}) and have the agent record a fresh fact "
            "from valid evidence (memctl corrects and forgets facts; only the agent records "
            "new ones).")


@command(epilog="""\
\b
Examples:
  memctl correct 3f2a9c0d11e4b7a8 1 2026-06-01-a1b2:14-15 "We use tabs, width 4."
  memctl correct 3f2a9c0d11e4b7a8 1 2026-06-01-a1b2 14 15 "We use tabs, width 4."
  printf 'We use tabs.\\n' | memctl correct 3f2a9c0d11e4b7a8 2 2026-06-01-a1b2:20 --text-file -
""")
def correct(
    fact_id: FactIdArg,
    revision: Annotated[int, typer.Argument(metavar="REVISION", click_type=count_type(1),
                                            help="The revision you are correcting (the "
                                                 "current one), checked atomically.")],
    session: Annotated[str, typer.Argument(
        metavar="SESSION[:START-END]", autocompletion=complete_session_id,
        help="The exact session id holding the evidence, or SESSION:START-END as memctl "
             "prints a source (SESSION:N for one position).")],
    rest: Annotated[list[str] | None, typer.Argument(
        metavar="[START END] [TEXT]", show_default=False,
        help="START and END (first and last seq, inclusive, at most 200 positions) when "
             "SESSION has no range; then the corrected fact text.")] = None,
    text_file: Annotated[str | None, typer.Option(
        "--text-file", metavar="FILE", help="Read the text from FILE ('-' for stdin).")] = None,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Correct without asking when the fact stays invalid (required "
                            "then when stdin is not a terminal).")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Correct a fact: append a revision justified by persisted evidence.

    The evidence is SESSION START END, or SESSION:START-END as memctl prints
    sources (facts, history).  Captures that range as it is now (purpose
    working: visible messages only) and requires at least one user or
    assistant message with text in it, not a synthetic notification (a
    user message the agent wrote, synthetic: true); tool output alone
    cannot justify a correction.  The expected REVISION and the exclusion generation are
    checked inside the write transaction: if the fact changed or a forget
    happened meanwhile, nothing is written and the exit status is 4.
    Excluded evidence is refused (4).  A fact is valid only when the
    evidence of every revision validates, and a correction does not repair
    older revisions: when one is stale, missing, hidden or unverified, the
    fact stays invalid after the correction.  memctl says so before writing,
    asks on a terminal and otherwise refuses without --yes (exit 2); to
    replace such a fact, forget it and record a fresh one.  Prints the old
    and the new text.
    """
    from lecode_memctl.core.errors import EXIT_PROBLEMS, NotFound, UsageError
    from lecode_memctl.core.facts import FactStore, check_fact_id
    from lecode_memctl.core.rowmodel import doc_head
    from lecode_memctl.core.sessions import SessionStore, check_range

    from .output import confirm, echo, emit_json, interrupted_after, safe, uncut_from

    check_fact_id(fact_id)
    session, start, end, text = parse_evidence(session, list(rest or ()))
    check_range(start, end, max_span=None)
    if (text is None) == (text_file is None):
        raise UsageError("give the corrected TEXT or --text-file (not both)")
    if text_file is not None:
        from lecode_memctl.core.atomic import read_at_most, read_file_or_pipe

        path_option("--text-file", text_file)
        try:
            # FILE: a regular file (or a link to one) or a pipe (<(...)), opened
            # without blocking: a FIFO no process writes is empty at once, a
            # device refused, never read without end
            if text_file == "-" and sys.stdin is None:   # started with stdin closed (<&-)
                raise UsageError("--text-file -: standard input is closed")
            data = (read_at_most(sys.stdin.buffer, MAX_TEXT_BYTES + 1) if text_file == "-"
                    else read_file_or_pipe(text_file, MAX_TEXT_BYTES))
            if len(data) > MAX_TEXT_BYTES:
                raise UsageError(f"{text_file}: more than {MAX_TEXT_BYTES:,} bytes, the most "
                                 "SQLite stores in one text")
        except MemoryError:
            raise UsageError(f"{text_file}: too large to read into memory") from None
        except OSError as exc:
            raise UsageError(f"{text_file}: cannot read: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{text_file}: not valid UTF-8") from None
        if text.endswith("\n"):
            text = text[:-1]
    assert text is not None
    store = _store()
    if not store.facts_db.exists() and not store.facts_db.is_symlink():
        raise NotFound(f"no fact {fact_id} (no facts database in {store.path})")
    _require_known(store, fact_id, forgotten_ok=False, lock_wait=lock_wait)
    current, bad = _invalid_revisions(store, fact_id)
    # A stale expected REVISION is refused by the write itself (exit 4): ask
    # only about a correction that would be written.
    if bad and current == revision and not yes:
        message = _stays_invalid_message(fact_id, bad)
        if text_file == "-" or json_ or not _stdin_is_tty():
            raise UsageError(f"refusing to correct without --yes: {message}")
        echo(f"memctl: warning: {safe(message)}", err=True)
        if not confirm(f"Correct fact {fact_id} anyway?"):
            echo("nothing corrected", err=True)
            raise typer.Exit(EXIT_PROBLEMS)
    # (a signal that lands from the COMMIT on stops the command once it has
    # named the correction as written: uncut_from)
    with uncut_from() as committing:
        fs = FactStore(store.facts_db, busy_timeout=lock_wait, before_commit=committing)
        try:
            old = fs.require(fact_id)
            sessions = SessionStore(store, exclusions=fs)
            generation = fs.generation()
            snap = sessions.source_snapshot(session, start, end, purpose="working")
            new = fs.correct(fact_id, text, expected_revision=revision, ref=snap.ref,
                             sessions=sessions, expected_generation=generation)
            # (an interrupt from here on says it was done)
            interrupted_after(f"the correction of {fact_id} was written (revision "
                              f"{new.revision})")
        finally:
            fs.close()
    doc = {**doc_head("correct"), "fact_id": fact_id, "old_revision": old.revision,
           "revision": new.revision, "old_text": old.text, "text": new.text, "source": snap.ref.to_json(),
           "generation": generation, "stays_invalid": bool(bad), "invalid_revisions": bad}
    if json_:
        emit_json(doc)
        return
    echo(f"corrected fact {fact_id}: revision {old.revision} -> {new.revision}")
    echo(f"  source: {safe(snap.ref.label())} "
         f"(positions {','.join(map(str, snap.ref.seqs))})")
    echo("  old: " + safe(old.text))
    echo("  new: " + safe(new.text))
    if bad:
        echo("  note: " + safe(_stays_invalid_message(fact_id, bad)))


# ---------------------------------------------------------------- forget

def _print_impact(fact_id: str, impact: dict[str, Any], *, err: bool = False) -> None:
    """forget's impact (``factview.forget_impact``) as the dry run prints it,
    and as forget shows it before its question (on stderr)."""
    from lecode_memctl.core.factview import unexcluded_line

    from .output import echo, safe

    if not impact["exists"]:
        echo(f"fact {fact_id} was already forgotten; forget would change nothing", err=err)
        return
    excl = impact["exclusions"]
    echo(f"would forget fact {fact_id}:", err=err)
    echo(f"  exclusions to install: {len(excl)}"
         + (": " + ", ".join(f"{safe(e['session_id'])}:{e['seq']}"
                             for e in excl) if excl else ""),
         err=err)
    if impact["already_excluded"]:
        echo(f"  already excluded: {len(impact['already_excluded'])}", err=err)
    for row in impact["unexcluded"]:
        echo("  " + unexcluded_line(fact_id, row), err=err)
    changes = impact["status_changes"]
    echo(f"  other facts whose status changes: {len(changes)}", err=err)
    for c in changes:
        echo(f"    {c['fact_id']}: {_status_cell(c['status'], c['reason'])} -> "
             f"{_status_cell(c['new_status'], c['new_reason'])}", err=err)
    echo(f"  generation: {impact['generation']} -> {impact['new_generation']}", err=err)
    echo(f"  generated messages invalidated: {impact['generated_messages_invalidated']}", err=err)
    inert = impact["summaries_inert"]
    echo(f"  compaction summaries made inert: {len(inert)}"
         + (": " + ", ".join(f"{safe(s['session_id'])}:{s['seq']}"
                             for s in inert) if inert else ""),
         err=err)


@command(epilog="""\
\b
Examples:
  memctl forget 3f2a9c0d11e4b7a8 --dry-run      what it would do; writes nothing
  memctl forget 3f2a9c0d11e4b7a8                asks on a terminal
  memctl forget 3f2a9c0d11e4b7a8 --yes --json   for scripts
""")
def forget(
    fact_id: FactIdArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the impact; write nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Forget one fact, all its revisions, and the evidence behind them.

    In one transaction: installs content-free exclusions (session id and
    position) for every position of every revision's evidence, superseded
    revisions included; records a retry marker; advances the exclusion
    generation by one (which invalidates older generated messages
    project-wide); deletes the fact, its revisions, provenance and source
    references.  Other facts that share the evidence are kept but stop
    validating.  Raw transcripts are not changed.  A revision whose stored
    source does not parse (a damaged database) names no position: its
    evidence cannot be excluded, and the fact is forgotten all the same;
    the plan and the result name each such revision ('unexcluded').  --dry-run prints the
    exclusions, the new generation, every other fact whose status changes
    (evidence that overlaps the new exclusions, or that holds generated
    messages the new generation hides) with its status before and after, as
    'memctl facts' will list it, how many generated messages the new
    generation invalidates and which compaction summaries become inert.
    Without --yes it prints that impact and asks, on a terminal, and refuses
    otherwise; what is confirmed is what is done: if the fact or the
    exclusions changed between the impact shown and the answer (a
    correction or another forget committed meanwhile), nothing is forgotten
    and the exit status is 4.  Says
    whether this call forgot the fact or it was already forgotten; an
    unknown id exits 3.  The new generation and the forgotten ids are
    recorded outside the store (unless --no-state), so that 'memctl validate'
    reports a facts database later put back from an older copy
    (db.rolled_back): by its numbers, and by the forgotten ids, which a
    later forget does not bring back.
    """
    from lecode_memctl.core.errors import EXIT_PROBLEMS, NotFound, UsageError
    from lecode_memctl.core.facts import FactStore, check_fact_id
    from lecode_memctl.core.factview import forget_impact, unexcluded_line, unexcluded_rows
    from lecode_memctl.core.rowmodel import doc_head
    from lecode_memctl.core.seen import lock_wait_at_most

    from .output import confirm, echo, emit_json, interrupted_after, uncut_from

    check_fact_id(fact_id)
    if dry_run:
        _st, fs, sessions = _open_read(lock_wait)
        try:
            impact = forget_impact(fs, sessions, fact_id)
        finally:
            fs.close()
        if json_:
            emit_json({**doc_head("forget"), "dry_run": True, **impact})
            return
        _print_impact(fact_id, impact)
        return
    store = _store()
    if not store.facts_db.exists() and not store.facts_db.is_symlink():
        raise NotFound(f"no fact {fact_id} (no facts database in {store.path})")
    _require_known(store, fact_id, forgotten_ok=True, lock_wait=lock_wait)
    expected: Any = None    # (the plan shown on a terminal, checked by the forget)
    if not yes:
        if not _stdin_is_tty():   # (None when memctl was started with stdin closed)
            raise UsageError("refusing to forget without --yes: stdin is not a terminal")
        # what the forget would do, before the question (the dry run's
        # lines, on stderr with the prompt): other facts it hides, summaries
        # it makes inert (before 2026-12-07 only the question was asked)
        _st, rfs, rsessions = _open_read(lock_wait)
        try:
            # (the plan shown, read from the same snapshot: the forget below
            # checks it again inside its transaction, exit 4 if it changed)
            shown = rfs.plan_forget(fact_id)
            impact = forget_impact(rfs, rsessions, fact_id)
        finally:
            rfs.close()
        # (a fact already forgotten: nothing to ask, as with --yes)
        if impact["exists"]:
            _print_impact(fact_id, impact, err=True)
        if impact["exists"] and not confirm(f"Forget fact {fact_id} and exclude its evidence?"):
            echo("nothing forgotten", err=True)
            raise typer.Exit(EXIT_PROBLEMS)
        if shown.exists:
            expected = shown
    # (a signal that lands from the COMMIT on stops the command once it has
    # named the forget as written and recorded the mark: uncut_from)
    with uncut_from() as committing:
        fs = FactStore(store.facts_db, busy_timeout=lock_wait, before_commit=committing)
        unexcluded: list[tuple[int | None, str]] = []
        try:
            forgot = fs.forget(fact_id, unexcluded=unexcluded, expected=expected)
            if forgot:      # (an interrupt from here on says it was done)
                interrupted_after(f"the forget of {fact_id} was written")
            generation = fs.generation()
            # (the state directory's lock: waited for no longer than --lock-wait)
            with lock_wait_at_most(lock_wait):
                STATE.record_mark(store, generation, fs.exclusion_count(), fs.database_id(),
                                  fs.forgotten_ids())
        finally:
            fs.close()
    if json_:
        emit_json({**doc_head("forget"), "dry_run": False, "fact_id": fact_id,
                   "forgotten": forgot, "already_forgotten": not forgot,
                   "generation": generation, "unexcluded": unexcluded_rows(unexcluded)})
        return
    if forgot:
        echo(f"forgot fact {fact_id}; exclusion generation is now {generation}")
        for row in unexcluded_rows(unexcluded):
            echo("  " + unexcluded_line(fact_id, row))
    else:
        echo(f"fact {fact_id} was already forgotten; nothing changed")


# ---------------------------------------------------------------- context

#: The files of the memory section that a legacy store can provide.
_SECTION_FILES = ("MEMORY.md", "scratchpad.md")


def _first_use_copies(store_path: Any = None) -> str | None:
    """What ``context`` says when the agent, started in the project directory
    (``-C PATH`` or the working directory), would first copy Markdown of the
    section (MEMORY.md, scratchpad.md) from that directory's legacy store
    into the project store, as it does on first use (``migrate_legacy``:
    only where the store has none), so that its section would hold what
    this one cannot show; None when it would not (or with ``--store``: no
    working directory is named).  One ``lstat`` when there is no legacy
    store; a plan that cannot be made says nothing (reads only)."""
    from lecode_memctl.core.errors import MemctlError
    from lecode_memctl.core.layout import existing_legacy_store

    if STATE.store_option:
        return None
    try:
        config_dir = STATE.config_dir().path
        cwd = STATE.project_dir()
        legacy = existing_legacy_store(config_dir, cwd, store_path)
        if legacy is None:
            return None
        from lecode_memctl.core.migrate import plan_migration

        plan = plan_migration(config_dir, cwd, cwd_only=True)
    except (MemctlError, OSError):
        return None
    names = [i.destination.name for i in plan.copies
             if i.destination is not None and i.destination.name in _SECTION_FILES
             and i.destination.parent == plan.discovery.store.path]
    if not names:
        return None
    from .output import safe

    return (f"the agent started in {safe(str(cwd))} would first copy "
            f"{' and '.join(names)} from the legacy store {safe(str(legacy.path))} "
            "(memory older lecode kept per working directory, copied on first use where the "
            "store has none), so its section would hold what this one does not show; "
            "'memctl migrate-legacy' copies it now")

@command(epilog="""\
\b
Examples:
  memctl context                  the section the agent would inject next
  memctl context --explain        plus every fact left out and the byte accounting
  memctl context --json | jq .omitted
""")
def context(
    explain: Annotated[bool, typer.Option("--explain", help="After the section, list every fact "
                                          "left out and why, and the byte accounting.")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Print the memory section the agent would inject at its next request.

    Built offline by the same core code the agent uses: facts first, within
    [memory] facts_max_bytes (default 8192): only whole facts whose every
    revision's evidence validates, each labelled untrusted evidence with its
    id, revision and exact source reference; oversized facts are omitted,
    never cut.  Then MEMORY.md and scratchpad.md in the rest of max_bytes
    (default 32768), each truncated with a marker when it does not fit
    (MEMORY.md leaves room for the scratchpad's heading and marker; a part
    with no room at all is named in a note on stderr).  The first 50 facts
    in id order are inspected.  --explain lists every fact left out (invalid
    evidence, too large, over budget, not inspected) and the byte
    accounting.  Control characters of the stored Markdown are shown
    escaped; --json keeps the exact text.  Reads only: when the agent,
    started in the project directory, would first copy MEMORY.md or
    scratchpad.md from that directory's legacy store (as it does on first
    use), a note says so ('memctl migrate-legacy' copies them).
    """
    from lecode_memctl.core.context import build_memory_section, section_to_json
    from lecode_memctl.core.errors import NotFound
    from lecode_memctl.core.memory_config import load_memory_config
    from lecode_memctl.core.rowmodel import doc_head

    from .output import echo, emit_json, safe, write_bytes

    config = load_memory_config(STATE.config_dir().path)
    try:
        store, fs, sessions = _open_read(lock_wait)
    except NotFound as exc:
        first = _first_use_copies()
        if first is None:
            raise
        raise NotFound(exc.message, hint=f"{exc.hint}; {first}" if exc.hint else first) from None
    try:
        _needs_migration_note(fs)
        section = build_memory_section(store, config, fs if fs.exists else None, sessions,
                                       explain=explain)
    finally:
        fs.close()
    first = _first_use_copies(store.path)
    if first is not None:
        import dataclasses

        section = dataclasses.replace(section, notes=(*section.notes, first))
    if json_:
        emit_json({**doc_head("context"), **section_to_json(section)})
        return
    # Stored Markdown is untrusted: control characters are shown escaped, as
    # 'memctl show' does (--json keeps the exact text).
    write_bytes(safe(section.text, keep_newlines=True).encode("utf-8"))
    if not explain:
        for note in section.notes:
            echo(f"memctl: note: {safe(note)}", err=True)
        return
    err = False
    echo("--- explain ---", err=err)
    for note in section.notes:
        echo(safe(note, keep_newlines=True), err=err)
    echo(f"section: {section.bytes} of max_bytes {section.max_bytes}", err=err)
    echo(f"facts: {section.facts_bytes} of facts budget {section.facts_budget} "
         f"(facts_max_bytes {section.facts_max_bytes}); {len(section.included)} included of "
         f"{section.facts_total}; generation {section.generation}", err=err)
    for p in section.parts:
        echo(f"  {p.name}: {p.bytes} bytes (source {p.source_bytes})"
             + (f", truncated, {p.omitted_bytes} bytes left out" if p.truncated else ""), err=err)
    echo(f"markdown budget: {section.markdown_budget}", err=err)
    for o in section.omitted:
        why = o.reason
        if o.status:
            why += f": {o.status} ({o.status_reason})"
            if o.about_revision is not None:
                why += f" at revision {o.about_revision}"
        if o.bytes is not None:
            why += f", {o.bytes} bytes"
        echo(f"  omitted {safe(o.fact_id)}: {why}", err=err)
