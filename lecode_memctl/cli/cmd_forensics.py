"""``memctl grep``, ``memctl secrets``, ``memctl redact``: transcript search,
the credential audit and its erasure.

detect-secrets (the detector library behind ``secrets`` and ``redact``) is
imported only inside those commands, never at start-up or while completing.
"""


import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .completion import (
    GREP_FORMAT_NAMES,
    SECRETS_FORMAT_NAMES,
    complete_detector,
    complete_grep_format,
    complete_grep_purpose,
    complete_grep_role,
    complete_secrets_format,
    complete_session_id,
)
from .options import JsonOpt, LockWaitOpt, OffsetOpt, count_type
from .registry import command
from .state import STATE, stdin_is_tty

if TYPE_CHECKING:
    from lecode_memctl.core.grep import GrepHit

GREP_FORMATS = GREP_FORMAT_NAMES


# ---------------------------------------------------------------- grep

@command(epilog="""\
\b
Examples:
  memctl grep 'connection refused'             visible hits in every session
  memctl grep -F -i 'api_key' --role tool      literal, any case, tool results only
  memctl grep -c deploy                        hits per session
  memctl grep -l 'AKIA[0-9A-Z]{16}' --include-hidden
  memctl grep --session 2026-05-01-a1b2 -C 2 error --json
""")
def grep(
    pattern: Annotated[str, typer.Argument(metavar="PATTERN",
                                           help="A Python regular expression (or literal text with -F); "
                                                "an empty one matches every line, as ^ does.")],
    fixed: Annotated[bool, typer.Option("--fixed-strings", "-F",
                                        help="PATTERN is literal text, not a regex.")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Ignore case.")] = False,
    count: Annotated[bool, typer.Option("--count", "-c",
                                        help="Print the number of hits per session only.")] = False,
    files_with_matches: Annotated[bool, typer.Option(
        "--files-with-matches", "-l", help="Print only the ids of sessions with a hit.")] = False,
    session: Annotated[list[str] | None, typer.Option(
        "--session", metavar="ID", autocompletion=complete_session_id,
        help="Only this session (an exact id; repeatable).")] = None,
    role: Annotated[list[str] | None, typer.Option(
        "--role", metavar="ROLE", autocompletion=complete_grep_role,
        help="Only fields of this role: user, assistant, tool, system, or summary "
             "(compaction summaries, path $.summary, and any message of that role); "
             "repeatable.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="WHEN",
        help="Only records at or after WHEN: a date, an RFC 3339 time or an age such as "
             "7d or 12h (a record's own ts/time/created, else its session's created).")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", metavar="WHEN",
        help="Only records at or before WHEN (a date: the end of that day).")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", "-m", metavar="N", click_type=count_type(1), help="Stop after N hits.")] = None,
    offset: OffsetOpt = None,
    context: Annotated[int, typer.Option(
        "--context", "-C", metavar="N", click_type=count_type(0, 100),
        help="N lines of the field's text before and after each hit (each its first 400 "
             "characters); the text output merges the context of nearby hits of a field, "
             "as grep prints it.")] = 0,
    purpose: Annotated[str, typer.Option(
        "--purpose", metavar="PURPOSE", autocompletion=complete_grep_purpose,
        help="Visibility purpose: working (default; a clear hides what precedes it) or "
             "durable.")] = "working",
    include_hidden: Annotated[bool, typer.Option(
        "--include-hidden",
        help="Forensic view: also hits the agent cannot see, each labelled with the "
             "reason (excluded, undone, cleared, epoch, inert).")] = False,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_grep_format,
        help="table or human (default: one line per hit, as grep prints), json, jsonl (one "
             "hit per line, streamed), csv or tsv.")] = None,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Search transcripts: message text, tool-call arguments, tool results and
    compaction summaries.

    Each hit names session:seq, the role and the field (its JSON path in the
    record, e.g. $.content, $.content[1].text, $.tool_calls[0].arguments.cmd,
    $.summary) and the line of the field holding the match.  By default only
    what the agent may see is searched (the store's visibility rule: not
    excluded by a forget, not undone, not before a clear for purpose
    working, not generated before the current exclusion generation);
    compaction summaries are hidden before a clear (working) or when inert:
    the agent does not use them, and validate --deep says why (compact.*:
    no lineage, a lineage chunk excluded, undone, missing or stale, a prior
    that does not match).  --include-hidden
    shows the rest too, labelled.  Sessions of another project, symbolic
    links, unreadable files and a sessions/ directory that cannot be listed
    are skipped (listed on stderr and in "skipped").  Reads only; a bad
    regex exits 2.

    --offset N skips the first N hits (in every format; -c and -l count
    the hits that are left).

    A damaged transcript is said, one warning a session on stderr and in
    "damaged": its lines that could hold a match and are no record (not
    UTF-8, not JSON, no seq: not searched) and, where a record held a
    match, its records whose seq repeats or goes back (their visibility
    uncertain).

    Exit status: 0 when something matched, 1 when nothing did, 5 when
    nothing did and a line that could hold a match was not searched (a
    damaged transcript); when every session named by --session was skipped
    (nothing searched), the status read gives: 4 refused (another project,
    a symbolic link, a bad header), 5 unreadable (a FIFO, a directory, an
    I/O error), 5 when both.
    --json prints one shape whatever the options: {"type": "grep",
    "schema_version", "pattern", "offset", "limit", "hits": [match rows]
    (empty with -c or -l), "truncated", "count", "sessions_searched",
    "skipped": [{"session_id", "reason"}], "damaged": [{"session_id",
    "reason", "lines", "first_line"}], "sessions": [match_count rows]},
    streamed in constant memory: the hits as they are found, then what only
    the end of the search knows (an error after the first hit ends the
    document with an "error" member).
    --format jsonl, csv and tsv give the match rows, or with -c/-l the
    match_count rows {type, session_id, count}.  Fields: docs/OUTPUT.md.
    """
    import itertools

    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.grep import grep as core_grep
    from lecode_memctl.core.rowmodel import MATCH, MATCH_COUNT, SCHEMA_VERSION, parse_when
    from lecode_memctl.core.sessions import SEQ_DUPLICATE, SEQ_REGRESSION

    from .output import (
        REPORT_ALIASES,
        echo,
        emit_csv,
        emit_json_document,
        emit_jsonl,
        fixed_format,
        safe,
    )

    fmt = fixed_format(fmt, json_flag=json_, choices=GREP_FORMATS, aliases=REPORT_ALIASES)
    if count and files_with_matches:
        raise UsageError("--count conflicts with --files-with-matches")
    # a pattern, a session id or a time that no store can make right is
    # refused (exit 2) before the store is looked for (3) or its facts
    # database opened (5)
    from lecode_memctl.core.grep import compile_pattern
    from lecode_memctl.core.sourceref import check_session_id

    from .output import warn_line

    # (what Python's re warns of, [[:alpha:]], is one warning line, here only)
    compile_pattern(pattern, fixed=fixed, ignore_case=ignore_case, warn=warn_line)
    for given in session or ():
        check_session_id(given)
    t_since = parse_when(since, option="--since") if since is not None else None
    t_until = parse_when(until, option="--until", until=True) if until is not None else None
    run = core_grep(STATE.existing_store(), pattern, fixed=fixed, ignore_case=ignore_case,
                    session_ids=session, roles=role, since=t_since, until=t_until,
                    purpose=purpose, include_hidden=include_hidden, context=context,
                    lock_wait=lock_wait)
    per_session: dict[str, int] = {}
    truncated = False
    n = 0
    matched = 0
    by_session = count or files_with_matches

    def matches() -> "Iterator[GrepHit]":
        """The hits after --offset and within --limit, counted per session on the way."""
        nonlocal n, matched, truncated
        for hit in run.hits():
            matched += 1
            if matched <= (offset or 0):
                continue
            if limit is not None and n >= limit:
                truncated = True
                return
            n += 1
            per_session[hit.session_id] = per_session.get(hit.session_id, 0) + 1
            yield hit

    def counts() -> list[dict[str, Any]]:
        return [MATCH_COUNT.row(session_id=sid, count=per_session[sid])
                for sid in sorted(per_session)]

    if fmt == "json":
        # Streamed: the hits as they come, then what only the end of the
        # search knows.  Nothing is written before the first hit (or the
        # end of the search), so that an error the search finds at once (a
        # --session that does not exist, a bad --role, an unreadable
        # database) is main's error document, as before.
        found = matches()
        first = next(found, None)

        def rows() -> "Iterator[dict[str, Any]]":
            for hit in found if first is None else itertools.chain((first,), found):
                if not by_session:
                    yield hit.to_json()

        emit_json_document(
            {"type": "grep", "schema_version": SCHEMA_VERSION, "pattern": pattern,
             "offset": offset or 0, "limit": limit},
            "hits", rows(),
            lambda: {"truncated": truncated, "count": n,
                     "sessions_searched": run.sessions_searched,
                     "skipped": [{"session_id": s, "reason": r} for s, r in run.skipped],
                     "damaged": [{"session_id": s, "reason": k, "lines": n, "first_line": f}
                                 for s, k, n, f in run.damaged],
                     "sessions": counts()},
            dict.fromkeys(("truncated", "count", "sessions_searched", "skipped", "damaged",
                           "sessions")))
    elif fmt in ("csv", "tsv") and not by_session:
        emit_csv((h.to_json() for h in matches()), MATCH.names, fmt)
    elif fmt == "jsonl" and not by_session:
        emit_jsonl(h.to_json() for h in matches())
    else:
        printer = _HitPrinter(context)
        for hit in matches():
            if not by_session:
                printer.hit(hit)
        printer.end()
    for sid, reason in run.skipped:
        what = (f"session {safe(sid)} skipped" if sid is not None
                else "no session searched")
        echo(f"memctl: warning: {what}: {safe(reason)}", err=True)
    for sid, kinds in itertools.groupby(run.damaged, key=lambda d: d[0]):
        echo(f"memctl: warning: session {safe(sid)} damaged: " + "; ".join(
            (f"{n} record{'s' if n > 1 else ''} {kind} (first: line {first}), visibility "
             "uncertain" if kind in (SEQ_DUPLICATE, SEQ_REGRESSION) else
             f"{n} {kind} line{'s' if n > 1 else ''} not searched (first: line {first})")
            for _sid, kind, n, first in kinds), err=True)
    code = 0 if matched else 1
    # (nothing found where lines could not be searched is no "no match")
    code = run.nothing_searched_status() or (run.damaged_status() if code else None) or code
    if by_session and fmt != "json":
        if fmt == "jsonl":
            emit_jsonl(counts())
        elif fmt in ("csv", "tsv"):
            emit_csv(counts(), MATCH_COUNT.names, fmt)
        else:
            for row in counts():
                echo(f"{safe(row['session_id'])}:{row['count']}" if count
                     else safe(row["session_id"]))
    if truncated and fmt == "human":
        echo(f"memctl: stopped after {limit} hits (--limit)", err=True)
    raise typer.Exit(code)


class _HitPrinter:
    """The text output: one line per hit, ``SESSION:SEQ ROLE PATH: LINE``
    (`` line N`` after the path past a field's first line, `` [hidden:
    REASON]`` for a hidden hit); with -C, as grep(1) prints context: each
    line of a field once, context lines ``SESSION:SEQ ROLE PATH-N- LINE``,
    the context of hits of one field that overlaps or touches merged into
    one group (two records are never one group, even with one seq), and
    ``--`` between groups that do not touch, never after the last.  (Before
    2026-12-07 each hit printed its context alone: a line twice, under two
    labels, and a ``--`` after every hit.)"""

    def __init__(self, context: int) -> None:
        self._context = context
        self._key: tuple[str, int, str] | None = None   # the field of the group open
        self._base = ""
        self._last = 0                                  # its last line printed
        self._after: list[tuple[int, str]] = []         # its last hit's lines after, pending

    def hit(self, hit) -> None:  # noqa: ANN001
        from .output import echo, safe

        # the role is any string a transcript holds: escaped (\n, \t) as the
        # path and the line are, so that a newline in it cannot forge a hit line;
        # a message without a string role (role null) is "message", as
        # read --text labels it
        role = safe(hit.role) if hit.role is not None else "message"
        base = f"{safe(hit.session_id)}:{hit.seq} {role} {safe(hit.path)}"
        hidden = f" [hidden: {hit.hidden}]" if hit.hidden is not None else ""
        label = base + (f" line {hit.line_no}" if hit.line_no > 1 else "") + hidden
        if not self._context:
            echo(f"{label}: {safe(hit.line)}")
            return
        # (the record by where its line ends: two records may share a seq;
        # before 2026-12-07 the key was the seq, and two records of one seq
        # were one group, with neither's context)
        key = (hit.session_id, hit.record_end, hit.path)
        first = hit.line_no - len(hit.before)
        ctx: dict[int, str] = {}
        if key == self._key and first <= self._last + len(self._after) + 1:
            ctx.update((no, ln) for no, ln in self._after if no < hit.line_no)
        else:
            self._flush()
            if self._key is not None:
                echo("--")
            self._key, self._last = key, 0
        self._after = []
        self._base = base + hidden
        ctx.update((first + i, ln) for i, ln in enumerate(hit.before))
        for no in sorted(n for n in ctx if n > self._last):
            echo(f"{self._base}-{no}- {safe(ctx[no])}")
        echo(f"{label}: {safe(hit.line)}")
        self._last = hit.line_no
        self._after = [(hit.line_no + 1 + i, ln) for i, ln in enumerate(hit.after)]

    def _flush(self) -> None:
        from .output import echo, safe

        for no, ln in self._after:
            echo(f"{self._base}-{no}- {safe(ln)}")
        if self._after:
            self._last = self._after[-1][0]
        self._after = []

    def end(self) -> None:
        """After the last hit: the lines after it."""
        self._flush()


# ---------------------------------------------------------------- secrets

SECRETS_FORMATS = SECRETS_FORMAT_NAMES


def _allowlist(value: str | None) -> Path | None:
    """``--allowlist FILE`` (an empty path is a usage error), else the default."""
    from .state import path_option

    value = path_option("--allowlist", value)
    return Path(value) if value is not None else _default_allowlist()


def _default_allowlist() -> Path | None:
    p = STATE.config_dir().path / "memctl-secrets-allowlist"
    return p if p.exists() else None


def _linked_store(path: Path, name: str) -> Any:
    """The scan row of an entry of <config dir>/memory/ that is a symbolic
    link (secrets --all-projects): never followed, its one skipped entry
    the store itself, on purpose (as a link in a store is skipped), as
    validate --all-projects reports it (layout.symlink)."""
    import os

    from lecode_memctl.core.secrets import SecretsReport, Skipped

    try:
        target = f" to {os.readlink(path)!r}"
    except OSError:
        target = ""
    return SecretsReport(name, os.fspath(path), skipped=[Skipped(
        ".", f"the store directory is a symbolic link{target}; not followed", False)])


def _not_a_store(entry: Any) -> Any:
    """The scan row of an entry of <config dir>/memory/ that is neither a
    directory nor a symbolic link (secrets --all-projects): a file in a
    store's place, or an entry that cannot be looked up; its one skipped
    entry the store itself, not read (it may hold a value: exit 1), as
    projects and validate --all-projects report it."""
    import os

    from lecode_memctl.core.secrets import SecretsReport, Skipped

    return SecretsReport(entry.name, os.fspath(entry.path), skipped=[Skipped(
        ".", f"{entry.why_not_store()}; not read", True)])


def _jobs(n: int) -> int:
    import os

    if n > 0:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _write_output(output: Path, data: bytes) -> None:
    """``--output FILE``: temporary file in FILE's directory, fsync, rename."""
    from lecode_memctl.core.atomic import atomic_write

    atomic_write(Path(output), data, backup=False, make_parent=False)


SECRETS_CRON_LINE = ("0 * * * * memctl secrets --all-projects --format prometheus "
                     "--output /var/lib/node_exporter/textfile_collector/memctl_secrets.prom")


@command(epilog=f"""\
\b
Examples:
  memctl secrets                              audit the current project's store
  memctl secrets --all-projects --json
  memctl secrets --allowlist ~/.config/lecode/memctl-secrets-allowlist
\b
Cron, with node_exporter's textfile collector (one crontab line; the file is
replaced atomically whatever the findings; alert on memctl_secrets_ok == 0,
and on memctl_secrets_stores == 0: a crontab with the wrong HOME scans none):
  {SECRETS_CRON_LINE}
""")
def secrets(
    all_projects: Annotated[bool, typer.Option(
        "--all-projects", help="Audit every store under <config dir>/memory/.")] = False,
    allowlist: Annotated[str | None, typer.Option(  # str: "" is refused, not "." (Path(""))
        "--allowlist", metavar="FILE",
        help="Known false positives: SHA-256 hashes of values, one per line (default: "
             "<config dir>/memctl-secrets-allowlist when it exists).")] = None,
    output: Annotated[str | None, typer.Option(  # str: "" is refused, not "."
        "--output", "-o", metavar="FILE",
        help="Write the report to FILE atomically (temporary file, fsync, rename) "
             "instead of stdout.  FILE is a regular file or a new name in a directory "
             "that exists (exit 7 otherwise), outside the stores audited (with "
             "--all-projects: outside <config dir>/memory/); a symbolic link is refused: "
             "give the file itself (exit 2).  '-' is stdout.")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print nothing; the exit status is the answer.")] = False,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", metavar="N", click_type=count_type(0),
        help="Worker processes for scanning a store whose files hold 1 MiB or more "
             "(default 0: one per available CPU; a smaller store is scanned in one).")] = 0,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_secrets_format,
        help="table or human (default: the text report), json, jsonl (each store's secrets, "
             "then its scan row), csv, tsv (the secrets) or prometheus.")] = None,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Audit a store for credentials: cloud keys, tokens, private keys,
    passwords in URLs, high-entropy strings.  Never prints a value.

    The detectors are detect-secrets' plugins and memctl's own patterns
    (AWS, GitHub, GitLab, Slack, Stripe, npm, PyPI, OpenAI, Anthropic,
    Hugging Face and other tokens, Google API keys, private keys, JWTs,
    basic-auth URLs, Authorization: Bearer and Basic headers, keyword
    assignments such as password = "...", and high-entropy quoted strings
    with its own thresholds) and its default filters; public IP addresses
    are not reported, and nothing is ever sent over the network to verify
    a value.  Store text is prose, read with
    detect-secrets' rules for text: a keyword assignment or a high-entropy
    string is found when its value is quoted; an unquoted one (password =
    hunter2, export AWS_SECRET_ACCESS_KEY=...) is not (in prose it is as
    likely a sentence, and redact would erase the words), unless its value
    has a pattern of its own (an AWS key id, a GitHub token, ...).  A
    transcript's structured members (a tool call's arguments) are also read
    as JSON writes them, "password": "...", by the detectors that need a
    key before the value (keyword assignments; AWS's, Cloudant's, IBM
    Cloud's and SoftLayer's secret keys), not by the high-entropy ones: a
    commit's SHA or an identifier in a tool call is no credential.  Nor,
    anywhere, is a hex value under a key whose last word names a hash
    ("sha": "...", checksum = "...", digest, commit, oid, etag, rev, tree,
    parent, blob) and none a credential, or a lockfile's "integrity":
    "sha512-..." string.

    Every place text persists is read: every record of every transcript,
    hidden ones included (a forgotten message is still on disk); MEMORY.md,
    scratchpad.md, daily logs, notes, every .bak and any other file of the
    store; the text of every revision of every fact; and the raw bytes of
    facts.sqlite3, its -wal and its -journal (free pages keep deleted text);
    and the names of the store's files and directories.  Symbolic links are
    never followed (listed as skipped).  Reads only.

    Each finding names the detector, the place (file and line, or "(its
    name)"; session:seq and the JSON path; fact id and revision; byte offset
    in the database; a value in a session id or file name shown as its
    marker) and a
    masked preview: at most four leading characters and the length.  The
    hash is the value's SHA-256 (the text report shows its first 12 digits;
    --json, jsonl and csv give it whole): put the whole hash in the allowlist
    to silence a known false positive ('memctl redact' erases the rest).

    Exit status: 0 nothing found, 1 something found or a file or directory
    could not be read (listed as skipped: it may hide a value), 2 usage (an
    --output inside a store, or a symbolic link, say), 3 no store (with
    --all-projects: a config directory named on the command line that does
    not exist), 6 the
    facts database busy (one store), 7 --output could not be written (its
    directory missing, say: it is never created; the previous file is left
    as it was) or, for one store, the private copy of its facts database
    could not be made (a full $TMPDIR: this machine's failure, not the
    store's).
    --json prints {"type": "secrets", "schema_version", "ok", "exit_code",
    "generated" (RFC 3339 UTC), "projects": [scan rows], "findings": [secret
    rows]}; a secret row has type, detector, kind (transcript, file, fact,
    database), project, file, session_id, seq, path, line, offset, fact_id,
    revision, preview, length, hash (docs/OUTPUT.md).  --format prometheus
    prints counts only.
    """
    from lecode_memctl.core.errors import MemctlError, UsageError
    from lecode_memctl.core.inventory import store_entries
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import (
        Detector,
        SecretsReport,
        load_allowlist,
        mask_store_names,
        reports_values,
        scan_store,
    )

    from .output import REPORT_ALIASES, fixed_format, spill
    from .state import output_file, path_option

    output = path_option("--output", output)
    fmt = fixed_format(fmt, json_flag=json_, choices=SECRETS_FORMATS, aliases=REPORT_ALIASES)
    allowed = load_allowlist(_allowlist(allowlist))
    if all_projects:
        if STATE.store_option:
            raise UsageError("--all-projects conflicts with --store")
        # every entry of memory/ gets a row, as in projects and validate
        # --all-projects: a link (never followed), and a file in a store's
        # place or an entry that cannot be looked up (not read: exit 1;
        # before 2026-12-07 left out, exit 0)
        entries = store_entries(STATE.listed_config_dir().path, every=True)
        stores = [store_at(e.path) for e in entries if not e.is_link and e.other is None]
    else:
        entries = None
        stores = [STATE.existing_store()]
    detector = Detector()
    try:
        out = output_file(output, stores, command="secrets",
                          config_dir=STATE.config_dir().path if all_projects else None)
    except MemctlError as err:
        # (before any scan: what the detectors find in the store's path it
        # names is masked, as every output of secrets)
        from lecode_memctl.core.secrets import hide_found

        raise type(err)(hide_found(detector, err.message),
                        hint=hide_found(detector, err.hint) if err.hint else None) from None

    # (the findings of every store wait encoded, past 1 MiB of them in one
    # unnamed temporary file outside the stores: memory does not follow
    # their number; closed, whatever happens, once the report is written)
    held = spill()
    try:
        def scanned(st: Any) -> SecretsReport:
            return scan_store(st, detector=detector, allowlist=allowed, jobs=_jobs(jobs),
                              lock_wait=lock_wait, spill=held)

        if entries is None:
            reports = [scanned(stores[0])]
        else:
            reports = [_linked_store(e.path, e.name) if e.is_link
                       else _not_a_store(e) if e.other is not None
                       else scanned(store_at(e.path)) for e in entries]
        # every value found, in any store: masked in every store's name and
        # in any error message from here on (a value naming a store's directory)
        STATE.hidden_values = reports_values(reports)
        mask_store_names(reports, STATE.hidden_values)
        if entries is None:
            _refuse_machine_failure(reports[0])
        ok = all(r.ok for r in reports)
        code = 0 if ok else 1
        if out is None and quiet:
            raise typer.Exit(code)
        stored = (1 if entries is None
                  else sum(1 for e in entries if not e.is_link and e.other is None))
        if out is not None:
            # (the file is written whole, atomically: its bytes wait here)
            parts: list[bytes] = []
            _secrets_report(reports, fmt, parts.append, ok=ok, code=code, stores=stored)
            _write_output(out, b"".join(parts))
        else:
            from .output import write_bytes

            _secrets_report(reports, fmt, write_bytes, ok=ok, code=code, stores=stored)
    finally:
        held.close()
    raise typer.Exit(code)


#: Bytes of ``secrets``' report gathered before they are written.
REPORT_PIECE = 1 << 20


class _Gathered:
    """Bytes given to ``emit`` about :data:`REPORT_PIECE` at a time."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self.emit = emit
        self.buf: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> None:
        self.buf.append(data)
        self.size += len(data)
        if self.size >= REPORT_PIECE:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            data = b"".join(self.buf)
            self.buf, self.size = [], 0
            self.emit(data)


class _TextPieces(io.StringIO):
    """A stdout for :func:`~.output.emit_csv` that gives what it is written
    to ``emit``, encoded, about a quarter of :data:`REPORT_PIECE` characters
    at a time (at most that many bytes in UTF-8; the text a ``StringIO``
    holds takes up to 4 bytes a character)."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        import sys

        super().__init__()
        self.emit = emit
        self.stdout = sys.stdout        # (the one ``emit`` writes to, not this)

    def write(self, text: str) -> int:
        n = super().write(text)
        if self.tell() >= REPORT_PIECE // 4:
            self.flush_pieces()
        return n

    def flush_pieces(self) -> None:
        import sys

        data = self.getvalue()
        self.seek(0)
        self.truncate()
        if data:
            held, sys.stdout = sys.stdout, self.stdout
            try:
                self.emit(data.encode("utf-8"))
            finally:
                sys.stdout = held


def _secrets_report(reports: list[Any], fmt: str, emit: Callable[[bytes], None], *,
                    ok: bool, code: int, stores: int) -> None:
    """``secrets``' report in ``fmt``, given to ``emit`` in pieces of about
    :data:`REPORT_PIECE` bytes: each store's findings read back one at a
    time, never all of them made at once (before 2026-12-07 the whole
    report was made, as objects and as bytes, before a byte was written)."""
    import time

    from lecode_memctl.core.rowmodel import SCHEMA_VERSION, SECRET, utc_time

    from .output import dumps, safe

    if fmt == "prometheus":
        from .render_prometheus import secrets_prometheus_text

        emit(secrets_prometheus_text(reports, now=time.time(), stores=stores).encode("utf-8"))
        return
    if fmt in ("csv", "tsv"):
        import contextlib

        from .output import emit_csv

        sink = _TextPieces(emit)
        with contextlib.redirect_stdout(sink):
            emit_csv((f.to_json() for r in reports for f in r.findings), SECRET.names, fmt)
        sink.flush_pieces()
        return
    out = _Gathered(emit)
    if fmt == "json":
        # (the document's last member, "findings", written a row at a time:
        # the bytes dumps() gives of the whole)
        head = dumps({"type": "secrets", "schema_version": SCHEMA_VERSION, "ok": ok,
                      "exit_code": code, "generated": utc_time(time.time()),
                      "projects": [r.summary() for r in reports]})
        out.add(head[:-1] + b',"findings":[')
        sep = b""
        for r in reports:
            for f in r.findings:
                out.add(sep + dumps(f.to_json()))
                sep = b","
        out.add(b"]}\n")
    elif fmt == "jsonl":
        for r in reports:
            for f in r.findings:
                out.add(dumps(f.to_json()) + b"\n")
            out.add(dumps(r.summary()) + b"\n")
    else:
        for r in reports:
            # nothing found but something not read is not OK, and no secret either
            verdict = "OK" if r.ok else "SECRETS FOUND" if r.findings else "UNREADABLE"
            n = len(r.findings)
            out.add((f"{safe(r.shown_project)}: {verdict}  "
                     f"{n} finding{'s' if n != 1 else ''}"
                     + (f", {r.allowlisted} allowlisted" if r.allowlisted else "")
                     + (f", {len(r.unreadable)} unreadable" if r.unreadable else "")
                     + f"; {r.files_scanned} files, {r.bytes_scanned} bytes read\n"
                     ).encode("utf-8"))
            for f in r.findings:
                out.add((f"  {f.detector:<24} {safe(f.place())}  "
                         f"{safe(f.preview)}  sha256:{f.hash[:12]}\n"
                         ).encode())
            for sk in r.skipped:
                out.add((f"  skipped {safe(sk.file)}: "
                         f"{safe(sk.reason)}\n").encode())
        if not reports:
            out.add(b"no stores\n")
    out.flush()


def _refuse_machine_failure(report: Any) -> None:
    """The scan of one store: a database not read because it was busy (exit
    6) or this machine's temporary space failed (exit 7, $TMPDIR named) is
    no verdict on the store, so no report of one (before 2026-12-07 a full
    $TMPDIR gave "UNREADABLE", exit 1, as if the store were at fault;
    ``validate`` does the same).  With --all-projects the store is reported
    unreadable and the run goes on."""
    from lecode_memctl.core.errors import LocalResourceError, StoreBusy

    for s in report.unreadable:
        if isinstance(s.error, StoreBusy | LocalResourceError):
            raise s.error


# ---------------------------------------------------------------- redact

@command(epilog="""\
\b
Examples:
  memctl redact --dry-run                      what would change; writes nothing
  memctl redact                                shows the plan and asks (on a terminal)
  memctl redact --detector aws-access-key --yes
  memctl redact --session 2026-05-01-a1b2 --seq 42 --yes --json
""")
def redact(
    session: Annotated[list[str] | None, typer.Option(
        "--session", metavar="ID", autocompletion=complete_session_id,
        help="Only findings in this session (repeatable).")] = None,
    seq: Annotated[list[int] | None, typer.Option(
        "--seq", metavar="N", click_type=count_type(0),
        help="Only findings in the record at seq N (repeatable; with --session).")] = None,
    detector: Annotated[list[str] | None, typer.Option(
        "--detector", metavar="NAME", autocompletion=complete_detector,
        help="Only findings of this detector, e.g. aws-access-key (repeatable).")] = None,
    pattern: Annotated[str | None, typer.Option(
        "--pattern", metavar="REGEX",
        help="Only findings whose value matches this Python regular expression (not "
             "empty).")] = None,
    allowlist: Annotated[str | None, typer.Option(  # str: "" is refused, not "." (Path(""))
        "--allowlist", metavar="FILE",
        help="Hashes of values to leave alone (as for 'memctl secrets').")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", metavar="N", click_type=count_type(0),
        help="Worker processes for scanning a store whose files hold 1 MiB or more "
             "(default 0: one per available CPU; a smaller store is scanned in one).")] = 0,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Erase the credentials 'memctl secrets' finds (all, or those picked).

    The options pick values, and a picked value is erased wherever it is in
    the store, found by a detector there or not (a password repeated
    without its URL): every file the scan reads and every fact's text (any
    revision) are searched for it, and every one that holds it is in the
    plan.  A value of fewer than 12 letters alone counts elsewhere only at
    word boundaries (the value test is not in pytest or latest); any other
    counts wherever it is; where a detector found the value
    it is always erased.  A value shorter than 8 characters is erased only where
    a detector found it, never searched for elsewhere (the plan says so).
    Transcripts are rewritten atomically under the session's lock (exit 6
    while lecode holds it), every record and seq kept: only the value is
    replaced, by [REDACTED:<detector>:<first 6 hex digits of its SHA-256>],
    so that two redactions of one value can be matched.  Markdown files,
    notes, logs and every .bak are rewritten the same way (no new .bak: the
    old content is what must go).  A fact whose text (any revision) holds
    a value is forgotten (content-free exclusions, as 'memctl forget' does), then the
    database is cleaned so the bytes leave the file: secure_delete, VACUUM,
    the -wal checkpointed and truncated.  Free-page findings in the database
    are erased by that clean alone; the database's own files (-wal,
    -journal) are never rewritten as files (SQLite recovers a hot -journal
    when redact opens the database for writing, then the clean runs).

    The plan (--dry-run, and what a terminal sees before the question) lists
    each file with its replacements (where found, and copies elsewhere) and
    rewritten records, the facts to forget (those only holding a copy
    marked so), every fact whose evidence digest the rewrite changes (it becomes
    stale), every compaction summary whose lineage covers a rewritten record
    or whose prior record (the compaction before it) is rewritten, and what
    the forgets do to the exclusion generation.  Without --yes it
    asks on a terminal and refuses otherwise.  A kill at any point leaves
    each file whole, before or after; running redact again finishes.

    A credential that is (in) a session id cannot be erased: the transcript
    keeps its name and its header (no record's seq or type, nor the
    header's session_id, project or format, is ever rewritten), and the
    facts citing it keep it in their evidence (live rows of the database,
    as the exclusions of a forget are, which must keep naming the session:
    deleting the transcript does not erase it); nor can one in a file's
    name (no file is renamed), nor any value the database clean leaves in a
    live row (checked after it: never reported as redacted).  Every other
    copy, found by a detector or not, is erased; the plan and the
    result list the value under "kept" with its reasons, every output shows
    that session id or file name with the marker in place of the value, and
    the run ends with a warning and exit status 1.

    Exit status: 0 done (or nothing to do), 1 declined, or a value kept (a
    session id, a file name, a live database row), 2 usage (a pattern
    that is not a valid regex, or empty; --seq without --session; a --detector
    name no detector has; no --yes off a terminal), 3 no store or session, 4 a Markdown file changed since the
    plan was made, or a value left only in facts written since the plan (the agent
    remembered it while redact ran; such a fact is not forgotten unseen): run
    again, 5 a file of the store that cannot be
    read, or another application's database, 6 a session, the database or
    the Markdown writers' turn busy (another writer of the Markdown memory,
    the agent say, held it; --lock-wait bounds each wait), 7 write
    failed.  An error (or an interrupt) after a change names what was
    already redacted and what was not; running redact again finishes the
    job.
    --json prints {"type": "redact", "schema_version", "dry_run", "plan":
    {..., "files": [rewrite rows], ..., "kept"}, "result": {..., "kept"} or
    null}; never a value.
    """
    import os

    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.redact import apply_redaction, plan_redaction
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION
    from lecode_memctl.core.secrets import (
        Detector,
        detector_slug,
        found_values,
        hide_in_location,
        load_allowlist,
        scan_store,
        select,
        session_id_values,
    )
    from lecode_memctl.core.sourceref import check_session_id

    from .output import emit_json

    if seq and not session:
        raise UsageError("--seq needs --session")
    for sid in session or ():
        check_session_id(sid)
    rx = None
    if pattern == "":
        # (a pick that picks everything, an unset shell variable, say: refused,
        # as an empty --session or --detector is; grep's empty pattern is taken)
        raise UsageError("--pattern is empty; leave it out to pick every finding")
    if pattern is not None:
        from lecode_memctl.core.grep import compile_pattern

        from .output import warn_line

        # (the pattern never quoted: it may be the credential itself)
        rx = compile_pattern(pattern, show=False, warn=warn_line)
    scanner = Detector()
    if detector:
        # a name no detector has would pick nothing: "nothing to do", exit 0
        known = sorted({detector_slug(p.secret_type) for p in scanner.plugins})
        for name in detector:
            if name not in known:
                raise UsageError(f"--detector {name!r}: no such detector; use one of "
                                 + ", ".join(known))

    store = STATE.existing_store()
    store.require()
    if session:
        from lecode_memctl.core.layout import session_file_exists
        from lecode_memctl.core.sessions import SessionStore

        ss = SessionStore(store)
        for sid in session:
            if not session_file_exists(ss.dir, sid):
                # (the close matches it offers are session ids, which may
                # be credentials: shown masked, as every output of redact)
                from lecode_memctl.core.secrets import hide_found

                err = ss.not_found(sid)
                raise type(err)(hide_found(scanner, err.message),
                                hint=hide_found(scanner, err.hint) if err.hint else None)
    allowed = load_allowlist(_allowlist(allowlist))
    report = scan_store(store, detector=scanner, allowlist=allowed, jobs=_jobs(jobs),
                        lock_wait=lock_wait, revisions=True)
    # (every value found: masked in any error message from here on, and in
    # the store's name, which may hold one)
    STATE.hidden_values = found_values(report.findings)
    if report.unreadable:
        from lecode_memctl.core.errors import StoreBusy, StoreCorrupt, StoreWriteError

        bad = report.unreadable[0]
        more = len(report.unreadable) - 1
        # a read stopped by a full $TMPDIR (its private copy) or a busy store
        # keeps its exit status; anything else unreadable is exit 5
        refuse = (type(bad.error) if isinstance(bad.error, (StoreWriteError, StoreBusy))
                  else StoreCorrupt)
        masks = session_id_values(report.findings, (u.file for u in report.unreadable))
        raise refuse(f"cannot read {hide_in_location(bad.file, masks)} ({bad.reason}) and so "
                     "cannot tell what it "
                     "holds; nothing was changed"
                     + (f" ({more} more unreadable)" if more > 0 else ""))
    picked = select(report.findings, sessions=session, seqs=seq, detectors=detector, pattern=rx)
    plan = plan_redaction(store, picked, lock_wait=lock_wait,
                          masks=session_id_values(report.findings,
                                                  (s.file for s in report.skipped),
                                                  (store.slug, os.fspath(store.path))),
                          scanned=report.fact_revisions)
    doc = plan.to_json()
    if dry_run or plan.empty:
        if json_:
            emit_json({"type": "redact", "schema_version": SCHEMA_VERSION,
                       "dry_run": dry_run, "plan": doc, "result": None})
        else:
            _print_plan(doc, dry_run=True)
        if not dry_run:
            _kept_outcome(doc["kept"])
        return
    if not yes:
        if not stdin_is_tty():      # (closed too: <&-)
            raise UsageError("refusing to redact without --yes: stdin is not a terminal "
                             "(see the plan with --dry-run)")
        _print_plan(doc, dry_run=True, err=True)
        from .output import confirm, echo

        if not confirm("Rewrite these files and forget these facts?"):
            echo("nothing redacted", err=True)
            raise typer.Exit(1)
    from lecode_memctl.core.redact import RedactInterrupted, WrittenSinceThePlan

    from .output import interrupted_after

    try:
        result = apply_redaction(store, plan, lock_wait=lock_wait)
    except RedactInterrupted as exc:
        # the interrupt's message says what was already redacted (as an
        # error's does), then memctl exits 130 or 143 as for any interrupt
        interrupted_after(exc.progress)
        raise
    except WrittenSinceThePlan as exc:
        # the run is done but for values facts written since the plan hold
        # (exit 4, run redact again): its forgets' mark is recorded, and a
        # value it cannot erase is said, as after a run that ends well
        if exc.result is not None and exc.result.forgotten:
            _record_forget_mark(store, lock_wait)
        if exc.result is not None:
            _kept_warning(exc.result.to_json()["kept"])
        raise
    interrupted_after(f"the redaction was written ({len(result.files)} file(s) rewritten"
                      + (f", {len(result.forgotten)} fact(s) forgotten" if result.forgotten
                         else "") + ")")
    if result.forgotten:
        _record_forget_mark(store, lock_wait)
    rdoc = result.to_json()
    if json_:
        emit_json({"type": "redact", "schema_version": SCHEMA_VERSION,
                   "dry_run": False, "plan": doc, "result": rdoc})
        _kept_outcome(rdoc["kept"])
        return
    from .output import echo, safe

    # (the result's kept: the plan's, and any value the clean left in a
    # live row of the database)
    erased = doc["values"] - len(rdoc["kept"])
    echo(f"redacted {erased} value{'s' if erased != 1 else ''}: "
         f"{len(result.files)} file{'s' if len(result.files) != 1 else ''} rewritten"
         + (f", {len(result.forgotten)} fact(s) forgotten" if result.forgotten else "")
         + (", database cleaned" if result.database_cleaned else ""))
    for f in rdoc["files"]:
        echo(f"  {safe(f)}")
    if rdoc["unexcluded"]:
        from lecode_memctl.core.factview import unexcluded_line

        for row in rdoc["unexcluded"]:
            echo("  " + unexcluded_line(row["fact_id"], row))
    if doc["stale_facts"]:
        echo(f"  {len(doc['stale_facts'])} fact revision(s) now stale: "
             + ", ".join(sorted({s['fact_id'] for s in doc['stale_facts']})))
    _kept_outcome(rdoc["kept"])


def _record_forget_mark(store: Any, lock_wait: float | None) -> None:
    """The mark ``forget`` records (FORMAT.md, "memctl's mark, outside the
    store"), once redact forgot facts: a database put back from before the
    redaction is then ``db.rolled_back``, as after a forget (it was not
    reported before 2026-12-07).  The redaction is done whatever happens
    here: a mark that cannot be recorded is a note, not the command's error."""
    from lecode_memctl.core.errors import MemctlError
    from lecode_memctl.core.facts import BUSY_TIMEOUT, FactStore
    from lecode_memctl.core.seen import lock_wait_at_most

    from .output import echo, safe

    try:
        fs = FactStore(store.facts_db,
                       busy_timeout=BUSY_TIMEOUT if lock_wait is None else lock_wait)
        try:
            with lock_wait_at_most(lock_wait):      # (the state directory's lock too)
                STATE.record_mark(store, fs.generation(), fs.exclusion_count(),
                                  fs.database_id(), fs.forgotten_ids())
        finally:
            fs.close()
    except (MemctlError, OSError) as exc:
        echo(safe(f"memctl: note: the exclusion generation the redaction raised is not "
                  f"recorded: {exc}"), err=True)


def _kept_place(k: dict) -> str:
    """Where a kept value stays, by its ``reasons`` (redact.KEPT_REASONS)."""
    from .output import safe

    def names(items: list[str]) -> str:
        return ", ".join(safe(x) for x in items)

    sids = k["session_ids"]
    reasons = k.get("reasons", ["session_id"])
    where = []
    if "session_id" in reasons:
        where.append(f"the session id of {names(sids)}")
    if "identifying_field" in reasons:
        where.append(f"an identifying field, role or key of a record of {names(sids)}")
    if "file_name" in reasons:
        where.append(f"the file name {names(k['files'])}")
    if "database" in reasons:
        where.append("live rows of facts.sqlite3 naming that session" if "session_id" in reasons
                     else f"live rows of facts.sqlite3 naming the session {names(sids)}" if sids
                     else "the facts database's files, after their clean")
    return (f"{k['detector']} {safe(k['preview'])}: "
            + ", ".join(where) + f" (sha256:{k['hash'][:12]})")


_KEPT_WHY = ("redact never renames a file or rewrites a transcript's structure (identifying "
             "fields, roles, the keys the store contract names), "
             "and no clean removes a live row of the database")


def _kept_outcome(kept: list[dict]) -> None:
    """After a run that left values it cannot erase (a session id, a file's
    name, a live row of the database): one warning line with what the user
    can do, and exit status 1."""
    if not kept:
        return
    _kept_warning(kept)
    raise typer.Exit(1)


def _kept_warning(kept: list[dict]) -> None:
    """:func:`_kept_outcome`'s warning line, without the exit."""
    if not kept:
        return
    from lecode_memctl.core.redact import KEPT_HINT

    from .output import echo

    echo(f"memctl: warning: cannot erase {len(kept)} value{'s' if len(kept) != 1 else ''}: "
         + "; ".join(_kept_place(k) for k in kept)
         + f"; {_KEPT_WHY}: {KEPT_HINT}",
         err=True)


def _print_plan(doc: dict, *, dry_run: bool, err: bool = False) -> None:
    from lecode_memctl.core.factview import unexcluded_line
    from lecode_memctl.core.secrets import MIN_COPY_LENGTH

    from .output import echo, safe

    def out(text: str) -> None:
        echo(text, err=err)

    if not doc["files"] and not doc["forget_facts"] and not doc["clean_database"] \
            and not doc["kept"]:
        out(f"{safe(doc['project'])}: nothing to redact "
            f"({doc['findings']} findings picked)")
        return
    erasable = doc["values"] - len(doc["kept"])
    out(f"{safe(doc['project'])}: would redact {erasable} value"
        f"{'s' if erasable != 1 else ''} ({doc['findings']} findings):")
    for f in doc["files"]:
        what = f"{f['replacements']} replacement{'s' if f['replacements'] != 1 else ''}"
        parts = ([f"{f['found']} where found"] if f["found"] else []) + \
            ([f"{f['copies']} cop{'ies' if f['copies'] != 1 else 'y'}"] if f["copies"] else [])
        what += f" ({', '.join(parts)})"
        if f["records"]:
            what += " in records " + ", ".join(str(s) for s in f["records"])
        out(f"  rewrite {safe(f['file'])}: {what}")
    for k in doc["kept"]:
        out(f"  cannot erase {_kept_place(k)}: {_KEPT_WHY} (every other copy is erased)")
    for v in doc["found_only"]:
        out(f"  {v['detector']} {safe(v['preview'])}: value of {v['length']} characters: "
            f"erased only where found (shorter than {MIN_COPY_LENGTH}, never searched "
            "for elsewhere)")
    copies = set(doc["forget_copies"])
    for fid in doc["forget_facts"]:
        out(f"  forget fact {fid} (its text holds "
            + ("a copy of a value found elsewhere)" if fid in copies else "a value)"))
    for row in doc["unexcluded"]:
        out("  " + unexcluded_line(row["fact_id"], row))
    if doc["clean_database"]:
        out("  clean facts.sqlite3: secure_delete, VACUUM, -wal checkpointed and truncated")
    if doc["forget_facts"]:
        out(f"  exclusion generation {doc['generation']} -> {doc['new_generation']}: "
            f"{doc['generated_messages_invalidated']} generated message(s) invalidated")
        sup, inert = doc["suppressed_facts"], doc["summaries_inert"]
        out(f"  other facts the forgets suppress (evidence excluded): {len(sup)}"
            + (": " + ", ".join(sup) if sup else ""))
        out(f"  compaction summaries the forgets make inert: {len(inert)}"
            + (": " + ", ".join(f"{safe(s['session_id'])}:{s['seq']}" for s in inert)
               if inert else ""))
    stale = doc["stale_facts"]
    out(f"  facts whose evidence digest changes (become stale): {len(stale)}"
        + (": " + ", ".join(f"{s['fact_id']} r{s['revision']} ({safe(s['session_id'])})"
                            for s in stale) if stale else ""))
    sums = doc["summaries"]
    out(f"  compaction summaries covering or following a rewritten record: {len(sums)}"
        + (": " + ", ".join(f"{safe(s['session_id'])}:{s['seq']}"
                            + ("" if s.get("reasons") == ["lineage"]
                               else f" ({', '.join(s.get('reasons') or [])})")
                            for s in sums) if sums else ""))
