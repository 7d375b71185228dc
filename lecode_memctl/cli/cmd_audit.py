"""``memctl validate``, ``memctl usage``, ``memctl projects``: the forensic audit for cron."""


import collections
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .completion import (
    VALIDATE_FORMAT_NAMES,
    complete_finding_code,
    complete_session_id,
    complete_validate_format,
)
from .options import FormatOpt, JsonOpt, LimitOpt, LockWaitOpt, OffsetOpt, SinceOpt, UntilOpt, sort_option
from .registry import command
from .state import STATE, require_store

if TYPE_CHECKING:  # the core is imported inside the commands (start-up time)
    from collections.abc import Callable, Iterator

    from lecode_memctl.core.audit import Finding
    from lecode_memctl.core.held import HeldRows
    from lecode_memctl.core.layout import Store

VALIDATE_FORMATS = VALIDATE_FORMAT_NAMES

CRON_LINE = ("*/15 * * * * memctl validate --all-projects --format prometheus "
             "--output /var/lib/node_exporter/textfile_collector/memctl.prom")


@command(epilog=f"""\
\b
Examples:
  memctl validate                         audit the current project's store
  memctl validate --deep --strict         every transcript line too; warnings fail
  memctl validate --store /evidence/copy --json
  memctl validate --all-projects --quiet || echo "memory needs attention"
  memctl validate --ignore fact.unverified --ignore 'layout.*'
  memctl validate --format csv > findings.csv
  memctl validate --list-codes            every finding code, its severity and meaning
\b
Cron, with node_exporter's textfile collector (one crontab line; the file is
replaced atomically whatever the findings; alert on memctl_validate_ok == 0,
on memctl_validate_stores == 0 (no store found: the wrong HOME?) or on a
stale memctl_validate_run_timestamp_seconds):
  {CRON_LINE}
""")
def validate(
    store_dir: Annotated[str | None, typer.Option(  # str: "" is refused, not "."
        "--store", metavar="DIR",
        help="Audit this store directory (same as the global --store).")] = None,
    all_projects: Annotated[bool, typer.Option(
        "--all-projects", help="Audit every store under <config dir>/memory/.")] = False,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Also parse every line of every transcript: corrupt lines, seq gaps, "
                       "compaction chains and learning events.")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Warnings count as failures for the exit status and memctl_validate_ok.")] = False,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", metavar="CODE", autocompletion=complete_finding_code,
        help="Do not report this finding code (repeatable; 'PREFIX.*' or 'GROUP.*' ignores a "
             "whole check: a code's prefix, compact.*, or its group as --list-codes shows it, "
             "compaction.*).")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print nothing on stdout or stderr but errors; the exit status "
                              "is the answer (--output still writes its file).")] = False,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress",
        help="A progress bar on stderr (default: when stderr is a terminal and not --quiet).")] = None,
    output: Annotated[str | None, typer.Option(  # str: "" is refused, not "."
        "--output", "-o", metavar="FILE",
        help="Write the report to FILE instead of stdout, atomically (a temporary file in "
             "FILE's directory, fsync, rename), whatever the findings.  FILE is a regular "
             "file or a new name in a directory that exists (exit 7 otherwise), outside "
             "the stores audited (with --all-projects: outside <config dir>/memory/); a "
             "symbolic link is refused: give the file itself (exit 2).  '-' is stdout.")] = None,
    list_codes: Annotated[bool, typer.Option(
        "--list-codes", help="List every finding code with its severity, group and meaning "
                             "(with --json or --format: as rows; --output writes them to "
                             "FILE), and exit.")] = False,
    lock_wait: LockWaitOpt = 5.0,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_validate_format,
        help="table or human (default: the text report), json, jsonl (one finding per line, "
             "streamed, then one summary per store), csv or tsv (finding rows), or "
             "prometheus.")] = None,
) -> None:
    """Audit a store and report every problem found; changes nothing.

    The model is 'git fsck': each finding has a stable code, a severity
    (error, warning, info), a location (file, line or byte offset, session and
    seq, fact id and revision) and a one-line message.  'memctl validate
    --list-codes' lists the codes and what they mean (also in docs/FORMAT.md,
    "Validate findings").

    Checks: the store layout (unexpected files, leftover temp files,
    group/other permissions, symlinks); Markdown (invalid UTF-8, a .bak
    without its file); [memory] in config.toml; facts.sqlite3
    (integrity_check, foreign_key_check, schema version, generation against
    exclusions and retry markers, contiguous revisions, dangling refs; the
    generation and exclusion count against the highest memctl saw for the
    store, a mark kept outside it, in $XDG_STATE_HOME/lecode-memctl, which
    validate raises unless --no-state, and the ids of the forgotten facts it
    saw: a lower one, or an id no longer forgotten, is a rolled-back forget;
    a live fact whose id is forgotten); every
    fact revision's evidence (missing, stale, hidden with its reason,
    unverified legacy provenance, suppressed by an exclusion); transcripts
    (torn tails: a warning when the file changed in the last minute, since a
    writer may be appending, an error otherwise; headers; refused sessions).

    Each transcript is read once (a part of a large one again where the
    records its facts cite, or --deep's lineage chunks, are too many to keep
    in memory).  Without --deep, one that no fact
    cites is read only at its header and last bytes (back to its last
    generated message, 16 MiB at most, for its epoch: a limit, as after a
    rolled-back facts database the agent stamps the lower generation, and a
    session that went on after the restore hides session.epoch_ahead from
    this mode; a cron job that must catch rollbacks runs --deep, or keeps
    the mark); one that facts cite is
    read once from start to end, parsing only the cited spans and the event
    lines (a later undo, redo or clear decides a span's visibility).
    --deep parses every line once (in parallel worker processes): corrupt
    lines, seq gaps, undo/redo targets, each compact event's prior and
    lineage (exactly cumulative, in chunks of at most 200 positions whose
    digests still hold; summaries made inert by a later forget, undo or clear,
    and summaries written before lineage existed, are info, and the summary
    rebuilt after one need not chain to it; a summary over positions an undo
    or clear had already hidden when it was written is an error), and learning
    events' statuses and reason codes.  The facts of a store of 20,000 or
    more are checked by two processes where two CPUs are free (a child
    checks the second half of the ids): the same findings, in the same
    order.

    Exit status: 0 when nothing is at error severity (with --strict: nothing
    at warning either), 1 otherwise, also with --output; 2 usage (an
    --output inside a store, or a symbolic link, say), 3 no such store (with
    --all-projects: a config directory named on the command line that does
    not exist), 5
    unreadable (a symlinked store directory), 6 busy (the facts database
    kept changing while its snapshot was taken), 7 --output could not be
    written (its directory missing, say; the previous file is left as it
    was), or the private copy of a store's facts database could not be
    made (a full $TMPDIR; with --all-projects that store is reported not
    audited instead).
    --json prints {"type": "validate", "schema_version", "ok", "strict",
    "deep", "exit_code", "generated", "stores", "totals", "projects":
    [summary rows], "findings": [finding rows]}; --format jsonl streams the
    finding rows ({"type": "finding", ...}) and ends each store with its
    summary row ({"type": "summary", ...}).  The fields are listed in
    docs/OUTPUT.md.  The Prometheus text also carries the exit status, the
    time of the run and the number of stores audited.
    """
    import time

    from lecode_memctl.core.atomic import fenced
    from lecode_memctl.core.audit import Audit, check_ignore_codes
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.layout import memory_names, memory_root, store_at, store_given

    from .state import output_file, path_option

    store_dir = path_option("--store", store_dir)
    output = path_option("--output", output)
    from .output import (
        REPORT_ALIASES,
        atomic_output,
        check_format,
        csv_line,
        dumps,
        emit_jsonl,
        fixed_format,
        held_rows,
        stdout_is_tty,
    )

    fmt = fixed_format(fmt, json_flag=json_, choices=None, aliases=REPORT_ALIASES)
    if list_codes:
        listed_fmt = check_format(None if fmt == "human" else fmt)
        # (--output honoured as for the report: before 2026-12-07 the list
        # went to stdout and no file was written)
        # (and refused inside the store it names, or with --all-projects
        # inside <config>/memory/, exit 2, as the report: before 2026-12-07
        # no store was fenced and the list could be written into one)
        codes_out = output_file(output, _list_codes_fences(store_dir, all_projects),
                                command="validate",
                                config_dir=STATE.config_dir().path if all_projects else None)
        if codes_out is None:
            _list_codes(listed_fmt)
            return
        with atomic_output(str(codes_out)):
            _list_codes(listed_fmt)
        return
    fmt = fixed_format(fmt, json_flag=False, choices=VALIDATE_FORMATS)
    ignored = check_ignore_codes(ignore or [])
    if all_projects and (store_dir or STATE.store_option or STATE.slug_option):
        raise UsageError("--all-projects conflicts with --store and --slug")
    cfg = STATE.listed_config_dir() if all_projects else STATE.config_dir()
    if all_projects:
        # every entry of memory/: a symbolic link or a stray file is reported (issue 16.2)
        stores = [store_at(memory_root(cfg.path) / n) for n in memory_names(cfg.path)]
    elif store_dir:
        stores = [require_store(store_given(store_dir, STATE.slug_option))]
    else:
        stores = [STATE.existing_store()]
    out = output_file(output, stores, command="validate",
                      config_dir=cfg.path if all_projects else None)
    # (no temporary file or directory is made in one of them: the held rows'
    # file, another store's snapshot)
    from lecode_memctl.core.seen import lock_wait_at_most

    # (one run of marks: the state directory's lock waited for no longer than
    # --lock-wait, and once in vain, not again for the stores after it)
    with fenced(*(st.path for st in stores)), lock_wait_at_most(lock_wait):
        STATE.quiet = quiet
        to_stdout = not quiet or out is not None
        show_progress = (progress if progress is not None else not quiet) and _stderr_tty()
        # (only the stores audited count: an entry of memory/ refused as a
        # symbolic link, never followed, may resolve above the state directory)
        record_state = STATE.may_record_marks([st for st in stores if _a_directory(st.path)])
        summaries = []
        audited = 0
        all_findings: list[Finding] = []
        stream_jsonl = fmt == "jsonl" and to_stdout
        # --json in a pipe or a file: the findings held encoded (compact, as the
        # document has them), not as objects (on a terminal it is indented)
        # (csv and tsv: their lines as the end writes them)
        held = (held_rows(HELD_IN_MEMORY, b",") if fmt == "json" and to_stdout
                and HELD_IN_MEMORY is not None and (out is not None or not stdout_is_tty())
                else held_rows(HELD_IN_MEMORY, b"") if fmt in ("csv", "tsv") and to_stdout
                and HELD_IN_MEMORY is not None else None)
        # the report for people: each finding's line, held by its place in it
        report = (_HeldReport(HELD_IN_MEMORY)
                  if fmt == "human" and to_stdout and HELD_IN_MEMORY is not None else None)
        sink = atomic_output(str(out)) if out is not None else None
        try:
            if sink is not None and stream_jsonl:
                sink.__enter__()
            config_once: Path | None = cfg.path
            for st in stores:
                prog, finish = _progress_bar(st.slug) if show_progress else (None, lambda: None)
                # config.toml is shared by every store: checked once, reported with the first
                # store (the first not gone since memory/ was listed)
                audit = Audit(st, config_dir=config_once, deep=deep, ignore=ignored,
                              progress=prog, lock_wait=lock_wait, state=STATE.state_dir(),
                              record_state=record_state, listed=all_projects)
                try:
                    if stream_jsonl:
                        from lecode_memctl.core.rowmodel import FINDING, SUMMARY

                        emit_jsonl(FINDING.row(**f.to_json()) for f in audit.run())
                        if not audit.gone:
                            emit_jsonl([SUMMARY.row(**audit.summary.to_json(strict))])
                    elif held is not None:
                        from lecode_memctl.core.rowmodel import FINDING

                        encode = dumps if fmt == "json" else csv_line(FINDING.names, fmt)
                        for f in audit.run():
                            held.add(encode(FINDING.row(**f.to_json())))
                    elif report is not None:
                        for f in audit.run():
                            report.add(f)
                    elif to_stdout:
                        all_findings.extend(audit.run())
                    else:
                        # -q: only the summaries are read (the exit status), and a
                        # store of 100,000 unverified legacy facts held as many
                        # findings (42 MiB) that nothing printed
                        collections.deque(audit.run(), maxlen=0)
                finally:
                    finish()
                if audit.gone:
                    # --all-projects: removed since memory/ was listed, before its
                    # audit began: left out, as if removed before the listing
                    # (before 2026-12-07 the run stopped there, exit 3, no report)
                    continue
                config_once = None
                summaries.append(audit.summary)
                # (a stray file or link in memory/ is reported, not a store
                # audited: a wrong config directory holding only a .DS_Store
                # counted one store, and the README's "stores == 0" alert
                # stayed silent)
                audited += not audit.refused
            ok = all(s.ok(strict) for s in summaries)
            code = 0 if ok else 1
            if not to_stdout or stream_jsonl:
                if sink is not None:
                    sink.__exit__(None, None, None)
                    sink = None
                raise typer.Exit(code)
            if sink is not None:
                sink.__enter__()
            _render_validate(fmt, summaries, all_findings, ok=ok, code=code, strict=strict,
                             deep=deep, cfg=cfg, started=time.time(), held=held, report=report,
                             audited=audited)
            if sink is not None:
                sink.__exit__(None, None, None)
                sink = None
        except BaseException as exc:
            if sink is not None and sink.stream is not None:
                sink.__exit__(type(exc), exc, None)
            raise
        finally:
            # (their temporary file, once rendered or when the audit stopped
            # before the end: the one place they are closed)
            if held is not None:
                held.close()
            if report is not None:
                report.close()
        raise typer.Exit(code)


def _render_validate(fmt: str, summaries: list, all_findings: list, *, ok: bool, code: int,
                     strict: bool, deep: bool, cfg, started: float,  # noqa: ANN001
                     held: "HeldRows | None" = None, report: "_HeldReport | None" = None,
                     audited: int | None = None) -> None:
    import sys
    import time

    from lecode_memctl.core.rowmodel import FINDING, SCHEMA_VERSION, SUMMARY, utc_time

    from .output import dumps, emit_csv, emit_csv_lines, emit_json, write_bytes
    from .render_prometheus import prometheus_text

    if fmt == "prometheus":
        sys.stdout.write(prometheus_text(summaries, strict=strict))
        stores = len(summaries) if audited is None else audited
        sys.stdout.write(_prometheus_run(code, stores))
        sys.stdout.flush()
        return
    if fmt in ("csv", "tsv"):
        if held is None:
            emit_csv((FINDING.row(**f.to_json()) for f in all_findings), FINDING.names, fmt)
            return
        # the lines emit_csv writes, as they were held
        emit_csv_lines(held.pieces(), FINDING.names, fmt)
        return
    totals = {"error": 0, "warning": 0, "info": 0, "ignored": 0}
    for s in summaries:
        for k in ("error", "warning", "info"):
            totals[k] += s.by_severity[k]
        totals["ignored"] += s.ignored
    if fmt == "json":
        doc = {"type": "validate", "schema_version": SCHEMA_VERSION, "ok": ok,
               "strict": strict, "deep": deep, "exit_code": code,
               "generated": utc_time(time.time()),
               "stores": len(summaries) if audited is None else audited,
               "totals": totals,
               "projects": [SUMMARY.row(**s.to_json(strict)) for s in summaries]}
        if held is None:
            emit_json({**doc, "findings": [FINDING.row(**f.to_json()) for f in all_findings]})
            return
        # the same compact bytes emit_json writes, the findings as they were held
        write_bytes(dumps(doc)[:-1] + b',"findings":[')
        for piece in held.pieces():
            write_bytes(piece)
        write_bytes(b"]}\n")
        return
    # human
    by_project: dict[str, list] = {}
    for f in all_findings:
        by_project.setdefault(f.project, []).append(f)
    _human_report(summaries, by_project, report, strict=strict, deep=deep, cfg=cfg)


def _human_report(summaries: list, by_project: dict[str, list], report: "_HeldReport | None", *,
                  strict: bool, deep: bool, cfg) -> None:  # noqa: ANN001
    from lecode_memctl.core.audit import sort_findings

    from .output import echo, safe

    line_of = _finding_lines()
    for s in summaries:
        entries = (report.entries(s.project) if report is not None
                   else ((f.check, line_of(f)) for f in sort_findings(by_project.get(s.project, []))))
        sev = s.by_severity
        facts = ", ".join(f"{n} {k}" for k, n in s.facts.items() if n) or "none"
        echo(f"{safe(s.project)}: {'OK' if s.ok(strict) else 'PROBLEMS'}  "
             f"{sev['error']} error{'s' if sev['error'] != 1 else ''}, "
             f"{sev['warning']} warning{'s' if sev['warning'] != 1 else ''}, {sev['info']} info"
             + (f", {s.ignored} ignored" if s.ignored else ""))
        echo(f"  store {safe(s.store)}; "
             + ("sessions unknown; " if s.sessions is None
                else f"{s.sessions} session{'s' if s.sessions != 1 else ''}; ")
             + (f"facts: {s.facts_total} ({facts})" if s.facts_total is not None
                else "facts unknown (the database was not read)")
             + ("; deep" if deep else ""))
        check = None
        for f_check, line in entries:
            if f_check != check:
                check = f_check
                echo(f"  [{check}]")
            echo(line)
    if not summaries:
        echo(f"no stores under {safe(str(cfg.path / 'memory'))}")


def _finding_lines() -> "Callable[[Finding], str]":
    """A finding's line in the report for people (``safe`` bound once: an
    import in a function costs a lookup per call)."""
    from .output import safe

    def line(f: "Finding") -> str:
        return (f"    {f.severity:<7} {f.code:<24} {safe(f.location())}: "
                f"{safe(f.message)}")

    return line


class _HeldReport:
    """``validate``'s report for people, held: each finding's check and line
    (:func:`~.output.hold_value`), one :class:`~lecode_memctl.core.held.HeldRows` per
    project, check and severity, so that a project's lines come back in
    the order :func:`~lecode_memctl.core.audit.sort_findings` gives (the
    findings of one part in the order the audit gave them) without every
    finding held as an object (100,000 findings: 115 MiB).  Past ``limit``
    bytes held in memory by all the parts together, every part's go to one
    unnamed temporary file they share (:func:`~.output.spill`): nothing
    in $TMPDIR below that, one descriptor for them all (a file per part
    held one each to the end, and a later store's audit ran out of them).
    :meth:`close` closes the file."""

    def __init__(self, limit: int) -> None:
        from lecode_memctl.core.audit import finding_rank
        from lecode_memctl.core.held import HeldRows

        from .output import hold_value, spill

        self._limit = limit
        self._rank = finding_rank()
        self._spill = spill()
        self._held = 0              # bytes the parts hold in memory
        self._parts: dict[str, dict[tuple[int, int], HeldRows]] = {}
        self._new, self._hold, self._line = HeldRows, hold_value, _finding_lines()

    def add(self, f: "Finding") -> None:
        import sys

        by_rank = self._parts.get(f.project)
        if by_rank is None:
            by_rank = self._parts[f.project] = {}
        rank = self._rank(f)
        part = by_rank.get(rank)
        if part is None:
            # (flushed by this report, and by itself past 1 MiB once it has
            # written some: HeldRows' own bound after its first chunk)
            part = by_rank[rank] = self._new(sys.maxsize, b"", self._spill)
        before = part.held
        self._hold(part, (f.check, self._line(f)))
        self._held += part.held - before
        if self._held > self._limit and not self._spill.failed:
            for parts in self._parts.values():
                for p in parts.values():
                    p.flush()
            self._held = sum(p.held for parts in self._parts.values() for p in parts.values())

    def entries(self, project: str) -> "Iterator[tuple[str, str]]":
        from .output import held_values

        by_rank = self._parts.get(project, {})
        for rank in sorted(by_rank):
            yield from held_values(by_rank[rank].pieces())

    def close(self) -> None:
        self._spill.close()


#: Bytes of encoded findings ``validate --json`` holds in memory before it
#: holds them in an unnamed temporary file (None: every finding held as an
#: object, the document made whole, as before 2026-12-06).
HELD_IN_MEMORY: int | None = 1 << 20


PROM_RUN_METRICS = (
    ("memctl_validate_exit_status", "Exit status of the last memctl validate run (0: nothing "
     "at error severity, 1: problems)."),
    ("memctl_validate_run_timestamp_seconds", "Unix time at which the last memctl validate "
     "run finished."),
    ("memctl_validate_stores", "Stores audited by the last memctl validate run."),
)


def _prometheus_run(code: int, stores: int) -> str:
    """The run-level samples (no labels) that follow the per-store ones."""
    import time

    values = (str(code), f"{time.time():.3f}", str(stores))
    out = []
    for (name, help_), v in zip(PROM_RUN_METRICS, values, strict=True):
        out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name} {v}"]
    return "\n".join(out) + "\n"


def _a_directory(path: Path) -> bool:
    """Whether ``path`` is a directory, not followed: a store the audit reads
    (:meth:`Audit._refused_store` reports the rest, a symbolic link
    included, without reading them)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _list_codes_fences(store_dir: str | None, all_projects: bool) -> list["Store"]:
    """The stores ``validate --list-codes --output FILE`` may not write in:
    those the same options would audit.  The list itself needs no store, so a
    store that does not exist (or no project at all) fences only its path,
    or nothing."""
    from lecode_memctl.core.errors import MemctlError
    from lecode_memctl.core.layout import store_at

    if all_projects:
        return []   # <config>/memory/ is fenced as a whole (config_dir)
    if store_dir:
        return [store_at(store_dir)]
    try:
        return [STATE.store()]
    except MemctlError:
        return []


def _list_codes(fmt: str) -> None:
    from lecode_memctl.core.audit import CODES
    from lecode_memctl.core.rowmodel import CODE

    from .output import render_records

    # (the two codes reported as a WARNING when their transcript changed in
    # the last 60 s, an ERROR otherwise: their meaning says which; and a
    # temporary file, INFO when it changed in the last 60 s)
    two = ("session.torn_tail", "session.missing_header")
    rows = [CODE.row(code=c, severity=("warning or error" if c in two else
                                       "warning or info" if c == "layout.temp_file"
                                       else i.severity),
                     group=i.check, deep=i.deep_only, meaning=i.meaning)
            for c, i in sorted(CODES.items())]
    render_records(CODE, rows, fmt, columns=["code", "severity", "group", "meaning"])


def _stderr_tty() -> bool:
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _progress_bar(label: str):
    """A rich progress bar on stderr: (callback(done, total), finish())."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .output import console, safe

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    console=console(stderr=True), transient=True)
    prog.start()
    task = prog.add_task(f"sessions of {safe(label)}", total=None)

    def update(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    return update, prog.stop


@command(epilog="""\
\b
Examples:
  memctl usage                          every session of the current project
  memctl usage --session 2026-05-01-a1b2
  memctl usage --since 7d --json | jq '.total'
  memctl usage --since 2026-05-01 --until 2026-05-31 --format csv
""")
def usage(
    session: Annotated[list[str] | None, typer.Option(
        "--session", metavar="ID", autocompletion=complete_session_id,
        help="Only this session (an exact id; repeatable: the sessions given are "
             "counted together, each once).")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Model-call accounting from the transcripts: tokens and cost per purpose.

    Counts every compact event (one successful summarization, its usage on
    the event) and every memory_usage event (learning calls, rejected
    summarization attempts, and any other purpose lecode records, such as
    answering), per purpose.  Token and cost figures are KNOWN SUBTOTALS:
    a call whose usage was not reported (usage null) is counted in
    unknown_usage_calls and never as zero tokens; a call with tokens but a
    null cost adds its tokens and counts in unknown_cost_calls.  A purpose
    is 'complete' only when neither count is above zero, nor
    repeated_events: an event whose seq is not above every seq read before
    it in its transcript (a record written twice, or out of place: the
    transcript is corrupt) is not counted as a call.  A call whose
    tokens would carry a subtotal past 2^63-1 counts as unknown usage
    (docs/FORMAT.md, Usage accounting).  --since/--until
    compare an event's own ts/time/created when it has one, else its
    session's header 'created'.  Refused sessions (symbolic links, a
    directory, FIFO or other non-regular file, other projects, a first line
    that is not this session's header: every reader refuses them) are
    skipped and listed, exit 0; a sessions/ directory that cannot be
    listed exits 5, as for 'memctl sessions'.

    --json prints {"type": "usage", "schema_version", "project", "since",
    "until", "session" (the id when one --session is given, else null),
    "session_ids" (the --session ids, each once; null without --session),
    "sessions", "sessions_counted", "refused_sessions":
    [id...], "corrupt_lines", "purposes": [purpose rows], "total": total
    row}; jsonl, csv and tsv give the purpose rows then the total row
    ({"type": "total"}).  A row is {"purpose" (null for memory_usage
    events that name no purpose; in a table the total row reads (total),
    that row (none), and a purpose beginning with ( or " is shown as a
    JSON string), "calls", "known_usage_calls",
    "unknown_usage_calls", "input_tokens", "output_tokens" (known
    subtotals), "cost" (known subtotal; null when no call reported a cost),
    "unknown_cost_calls", "complete", "compact_events",
    "memory_usage_events", "repeated_events"}.
    """
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION, USAGE, parse_when, utc_time
    from lecode_memctl.core.usage import usage_report

    from .output import (
        MARKUP_FORMATS,
        check_format,
        echo,
        emit_json,
        render_records,
        render_rows,
        safe,
    )

    fmt_name = check_format(fmt, json_flag=json_)
    t_since = parse_when(since, option="--since") if since is not None else None
    t_until = parse_when(until, option="--until", until=True) if until is not None else None
    if session is not None:     # (by syntax, before the store is looked for: exit 2, not 3)
        from lecode_memctl.core.sourceref import check_session_id

        for sid in session:
            check_session_id(sid)
    store = STATE.existing_store()
    rep = usage_report(store, session=session, since=t_since, until=t_until)
    doc = rep.to_json()
    purposes = [USAGE.row(**p) for p in doc["purposes"]]
    total = {**USAGE.row(**doc["total"]), "type": "total"}
    if fmt_name == "json":
        emit_json({"type": "usage", "schema_version": SCHEMA_VERSION, "project": doc["project"],
                   "since": utc_time(t_since), "until": utc_time(t_until),
                   "session": doc["session"], "session_ids": doc["session_ids"],
                   "sessions": doc["sessions"],
                   "sessions_counted": doc["sessions_counted"],
                   "refused_sessions": doc["refused_sessions"],
                   "corrupt_lines": doc["corrupt_lines"], "purposes": purposes, "total": total})
        return
    if fmt_name in ("jsonl", "csv", "tsv"):
        render_records(USAGE, [*purposes, total], fmt_name)
        return
    import orjson

    rows = []
    for p in [*purposes, total]:
        unknown = p["unknown_usage_calls"]
        rows.append({
            "purpose": _purpose_cell(p), "calls": p["calls"],
            "input tokens": f"{p['input_tokens']}{'+?' if unknown else ''}",
            "output tokens": f"{p['output_tokens']}{'+?' if unknown else ''}",
            # (the figure the JSON gives, never rounded: 12345.678, not 12345.7)
            "cost": ("?" if p["cost"] is None else orjson.dumps(p["cost"]).decode())
                    + ("+?" if p["cost"] is not None and (unknown or p["unknown_cost_calls"]) else ""),
            "unknown usage": unknown, "unknown cost": p["unknown_cost_calls"]})
    window = "".join([f", since {utc_time(t_since)}" if t_since else "",
                      f", until {utc_time(t_until)}" if t_until else ""])
    # (with a markup format stdout holds the table alone: the lines for
    # people go to stderr, those before it as those after it)
    aside = fmt_name in MARKUP_FORMATS
    echo(f"{safe(rep.project)}: {rep.sessions_counted} session(s) counted{window}"
         + (f"; refused: {', '.join(safe(s) for s in rep.refused)}"
            if rep.refused else ""),
         err=aside)
    if not purposes:
        echo("no compact or memory_usage events", err=aside)
        return
    render_rows(rows, ["purpose", "calls", "input tokens", "output tokens", "cost",
                       "unknown usage", "unknown cost"], fmt_name)
    if total["unknown_usage_calls"] or total["unknown_cost_calls"]:
        echo("'+?': known subtotal; some calls reported no usage or no cost (not zero).")
    if total["repeated_events"]:
        echo(f"not complete: {total['repeated_events']} event(s) whose seq repeats or goes "
             "back in its transcript, not counted (see 'memctl sessions').", err=aside)


def _purpose_cell(row: dict[str, object]) -> str:
    """A usage row's purpose in a table, which has no type column: ``(total)``
    for the total row, ``(none)`` for the calls of no purpose, and a purpose
    that begins with ``(`` or ``"`` as a JSON string, so that no purpose's
    name can be taken for either (before 2026-12-07 a purpose named "total"
    looked like the total row)."""
    import orjson

    if row["type"] == "total":
        return "(total)"
    name = row["purpose"]
    if not isinstance(name, str):
        return "(none)"
    return orjson.dumps(name).decode() if name.startswith(("(", '"')) else name


PROJECT_SORTS = ("slug", "size", "sessions", "last_activity")


@command(epilog="""\
\b
Examples:
  memctl projects
  memctl projects --root ~/src/app --root ~/src/lib
  memctl projects --json | jq -r '.[] | select(.root_exists == false) | .slug'
""")
def projects(
    root: Annotated[list[str] | None, typer.Option(  # str: "" is refused, not "." (Path(""))
        "--root", metavar="PATH",
        help="A project you know of (repeatable): lets memctl name its store's root and "
             "recognise legacy stores of directories inside it.")] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    sort: Annotated[str | None, sort_option(PROJECT_SORTS, "slug")] = None,
    offset: OffsetOpt = None,
    limit: LimitOpt = None,
) -> None:
    """List every store under <config dir>/memory/ with what is in it.

    For each store: its slug; the project root when it can be verified (a
    candidate path whose slug equals the store's: from optional root/cwd
    keys in its session headers, the current project, or --root), else
    unknown, since the slug's hash cannot be reversed; whether that root
    still exists; the number of sessions and facts (read-only); the size;
    the last activity (newest file mtime); and its kind: project, legacy
    (a cwd-scoped store of a directory inside a known project -- the
    current one, a --root, or one verified for another store, whether or
    not its own store exists: run 'memctl migrate-legacy' there), unclaimed, symlink, not_a_directory (a
    file or FIFO in a store's place; facts_error says which) or unreadable
    (an entry that cannot be looked up): every entry is a row.  An unclaimed
    store with Markdown but no sessions and no facts database is flagged
    'possibly legacy'.  Reads only.

    --json prints an array of project rows {"type", "slug", "path", "kind",
    "root", "root_source", "root_exists", "legacy_of", "legacy_directory",
    "possibly_legacy", "sessions", "facts", "facts_error", "size", "files",
    "last_activity"}, the same fields in every format; root and root_exists
    are null when unknown, facts is null when the database cannot be read,
    sessions when sessions/ cannot be listed, size and files when any
    directory of the store cannot be, and all three for a store that is a
    symbolic link, not followed (? in a table: never a count too low).
    """
    from lecode_memctl.core.projects import list_projects
    from lecode_memctl.core.rowmodel import PROJECT

    from .output import check_format, render_records, sort_rows, window

    fmt_name = check_format(fmt, json_flag=json_)
    cfg = STATE.listed_config_dir()
    from lecode_memctl.core.errors import MemctlError

    try:
        current = STATE.project_dir()
    except (OSError, MemctlError):
        # a deleted working directory: no current project; a --project that
        # cannot be one is the error it is everywhere (before 2026-12-07 it
        # was ignored here, every store unclaimed, exit 0)
        if STATE.project is not None:
            raise
        current = None
    from .state import path_option

    roots = [Path(str(path_option("--root", r))) for r in root or ()]
    infos = list_projects(cfg.path, current=current, roots=roots)
    rows = sort_rows([PROJECT.row(**i.to_json()) for i in infos], sort, PROJECT_SORTS, "slug")
    render_records(PROJECT, window(rows, offset, limit), fmt_name,
                   columns=["slug", "kind", "root", "root_exists", "sessions", "facts", "size",
                            "last_activity"],
                   labels={"root_exists": "root exists", "last_activity": "last activity"},
                   display=_project_display)




def _project_display(d: dict) -> dict:
    kind = d["kind"] + (" (possibly legacy)" if d["possibly_legacy"] else "")
    if d["legacy_of"]:
        kind += f" of {d['legacy_of']}"
    return {**d, "kind": kind, "root": d["root"] or "unknown",
            "root_exists": "?" if d["root_exists"] is None else d["root_exists"],
            "facts": "?" if d["facts"] is None else d["facts"],
            "sessions": "?" if d["sessions"] is None else d["sessions"],
            "size": "?" if d["size"] is None else d["size"],
            "last_activity": d["last_activity"] or "-"}
