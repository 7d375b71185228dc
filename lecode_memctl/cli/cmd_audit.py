"""``memctl validate``, ``memctl usage``, ``memctl projects``: the forensic audit for cron."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .completion import complete_session_id
from .options import JsonOpt
from .registry import command
from .state import STATE, require_store

if TYPE_CHECKING:  # the core is imported inside the commands (start-up time)
    from lecode_memctl.core.audit import Finding

VALIDATE_FORMATS = ("human", "json", "jsonl", "prometheus")


@command(epilog="""\
\b
Examples:
  memctl validate                         audit the current project's store
  memctl validate --deep --strict         every transcript line too; warnings fail
  memctl validate --store /evidence/copy --json
  memctl validate --all-projects --quiet || echo "memory needs attention"
  memctl validate --ignore fact.unverified --ignore 'layout.*'
\b
Cron, with node_exporter's textfile collector:
  */15 * * * * memctl validate --all-projects --format prometheus \\
      > /var/lib/node_exporter/memctl.prom.$$ && \\
      mv /var/lib/node_exporter/memctl.prom.$$ /var/lib/node_exporter/memctl.prom
  (alert on memctl_validate_ok == 0)
""")
def validate(
    store_dir: Annotated[Path | None, typer.Option(
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
        "--ignore", metavar="CODE",
        help="Do not report this finding code (repeatable; 'group.*' ignores a whole check).")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print nothing; the exit status is the answer.")] = False,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT",
        help="human (default), json, jsonl (one finding per line, streamed) or prometheus.")] = None,
) -> None:
    """Audit a store and report every problem found; changes nothing.

    The model is 'git fsck': each finding has a stable code, a severity
    (error, warning, info), a location (file, line or byte offset, session and
    seq, fact id and revision) and a one-line message.  The codes and what
    they mean are listed in docs/FORMAT.md, "Validate findings".

    Checks: the store layout (unexpected files, leftover temp files,
    group/other permissions, symlinks); Markdown (invalid UTF-8, a .bak
    without its file); [memory] in config.toml; facts.sqlite3
    (integrity_check, foreign_key_check, schema version, generation against
    exclusions and retry markers, contiguous revisions, dangling refs; the
    generation and exclusion count against the highest memctl saw for the
    store, a mark kept outside it, in $XDG_STATE_HOME/lecode-memctl, which
    validate raises unless --no-state: a lower one is a rolled-back forget); every
    fact revision's evidence (missing, stale, hidden with its reason,
    unverified legacy provenance, suppressed by an exclusion); transcripts
    (torn tails: a warning when the file changed in the last minute, since a
    writer may be appending, an error otherwise; headers; refused sessions).

    Each transcript is read at most once.  Without --deep, one that no fact
    cites is read only at its header and last bytes; one that facts cite is
    read once from start to end, parsing only the cited spans and the event
    lines (a later undo, redo or clear decides a span's visibility).
    --deep parses every line once (in parallel worker processes): corrupt
    lines, seq gaps, undo/redo targets, each compact event's prior and
    lineage (exactly cumulative, in chunks of at most 200 positions whose
    digests still hold; summaries made inert by a later forget, undo or clear,
    and summaries written before lineage existed, are info), and learning
    events' statuses and reason codes.

    Exit status: 0 when nothing is at error severity (with --strict: nothing
    at warning either), 1 otherwise; 2 usage, 3 no such store, 5 unreadable
    (a symlinked store directory), 6 busy (the facts database kept changing
    while its snapshot was taken).
    --json prints {"ok", "strict", "deep", "exit_code", "totals", "projects":
    [summary...], "findings": [finding...]}; a finding has code, severity,
    check, project, file, line, offset, seq, session_id, fact_id, revision,
    reason, key, table, message (absent location fields are null).
    --format jsonl streams the same finding objects one per line and ends
    with one {"summary": ...} line per project.
    """
    import sys
    import time

    from lecode_memctl.core.audit import Audit, check_ignore_codes, sort_findings
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.layout import store_dirs, store_given

    from .output import dumps, echo, emit_json, safe, write_bytes
    from .render_prometheus import prometheus_text

    if json_:
        if fmt and fmt != "json":
            raise UsageError(f"--json conflicts with --format {fmt}")
        fmt = "json"
    fmt = fmt or "human"
    if fmt == "table":
        fmt = "human"
    if fmt not in VALIDATE_FORMATS:
        raise UsageError(f"unknown format {fmt!r}; use one of {', '.join(VALIDATE_FORMATS)}")
    ignored = check_ignore_codes(ignore or [])
    cfg = STATE.config_dir()
    if all_projects:
        if store_dir or STATE.store_option or STATE.slug_option:
            raise UsageError("--all-projects conflicts with --store and --slug")
        stores = store_dirs(cfg.path)
    elif store_dir:
        stores = [require_store(store_given(store_dir, STATE.slug_option))]
    else:
        stores = [STATE.existing_store()]

    show_progress = not quiet and _stderr_tty()
    summaries = []
    all_findings: list[Finding] = []
    for i, st in enumerate(stores):
        progress, finish = _progress_bar(st.slug) if show_progress else (None, lambda: None)
        # config.toml is shared by every store: checked once, reported with the first store
        audit = Audit(st, config_dir=cfg.path if i == 0 else None, deep=deep, ignore=ignored,
                      progress=progress, state=STATE.state_dir(), record_state=not STATE.no_state)
        try:
            if fmt == "jsonl" and not quiet:
                for f in audit.run():
                    write_bytes(dumps(f.to_json()) + b"\n")
                write_bytes(dumps({"summary": audit.summary.to_json(strict)}) + b"\n")
            else:
                all_findings.extend(audit.run())
        finally:
            finish()
        summaries.append(audit.summary)

    ok = all(s.ok(strict) for s in summaries)
    code = 0 if ok else 1
    if quiet or fmt == "jsonl":
        raise typer.Exit(code)
    if fmt == "prometheus":
        sys.stdout.write(prometheus_text(summaries, strict=strict))
        sys.stdout.flush()
        raise typer.Exit(code)
    totals = {"error": 0, "warning": 0, "info": 0, "ignored": 0}
    for s in summaries:
        for k in ("error", "warning", "info"):
            totals[k] += s.by_severity[k]
        totals["ignored"] += s.ignored
    if fmt == "json":
        emit_json({"ok": ok, "strict": strict, "deep": deep, "exit_code": code,
                   "generated": time.time(), "totals": totals,
                   "projects": [s.to_json(strict) for s in summaries],
                   "findings": [f.to_json() for f in all_findings]})
        raise typer.Exit(code)
    # human
    by_project: dict[str, list] = {}
    for f in all_findings:
        by_project.setdefault(f.project, []).append(f)
    for s in summaries:
        fs = sort_findings(by_project.get(s.project, []))
        sev = s.by_severity
        facts = ", ".join(f"{n} {k}" for k, n in s.facts.items() if n) or "none"
        echo(f"{safe(s.project)}: {'OK' if s.ok(strict) else 'PROBLEMS'}  "
             f"{sev['error']} error{'s' if sev['error'] != 1 else ''}, "
             f"{sev['warning']} warning{'s' if sev['warning'] != 1 else ''}, {sev['info']} info"
             + (f", {s.ignored} ignored" if s.ignored else ""))
        echo(f"  store {safe(s.store)}; {s.sessions} session{'s' if s.sessions != 1 else ''}; "
             f"facts: {s.facts_total} ({facts}){'; deep' if deep else ''}")
        check = None
        for f in fs:
            if f.check != check:
                check = f.check
                echo(f"  [{check}]")
            echo(f"    {f.severity:<7} {f.code:<24} {safe(f.location(), keep_newlines=False)}: "
                 f"{safe(f.message, keep_newlines=False)}")
    if not summaries:
        echo(f"no stores under {safe(str(cfg.path / 'memory'))}")
    raise typer.Exit(code)


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
  memctl usage --since 2026-05-01 --json | jq '.total'
""")
def usage(
    session: Annotated[str | None, typer.Option(
        "--session", metavar="ID", autocompletion=complete_session_id,
        help="Only this session (an exact id).")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DATE",
        help="Only calls at or after DATE (YYYY-MM-DD, or an ISO 8601 time; UTC unless it "
             "has an offset).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Model-call accounting from the transcripts: tokens and cost per purpose.

    Counts every compact event (one successful summarization, its usage on
    the event) and every memory_usage event (learning calls, rejected
    summarization attempts, and any other purpose lecode records, such as
    answering), per purpose.  Token and cost figures are KNOWN SUBTOTALS:
    a call whose usage was not reported (usage null) is counted in
    unknown_usage_calls and never as zero tokens; a call with tokens but a
    null cost adds its tokens and counts in unknown_cost_calls.  A purpose
    is 'complete' only when neither count is above zero.  --since compares
    an event's own ts/time/created when it has one, else its session's
    header 'created'.  Refused sessions (symbolic links, other projects)
    are skipped and listed.

    --json prints {"project", "since", "session", "sessions",
    "sessions_counted", "refused_sessions": [id...], "corrupt_lines",
    "purposes": [P...], "total": P}, where P is {"purpose", "calls",
    "known_usage_calls", "unknown_usage_calls", "input_tokens",
    "output_tokens" (known subtotals), "cost" (known subtotal; null when no
    call reported a cost), "unknown_cost_calls", "complete",
    "compact_events", "memory_usage_events"}.
    """
    from lecode_memctl.core.usage import parse_since, usage_report

    from .output import echo, emit_json, render_rows, safe

    when = parse_since(since) if since else None
    store = STATE.existing_store()
    rep = usage_report(store, session=session, since=when)
    doc = rep.to_json()
    if json_:
        emit_json(doc)
        return
    rows = []
    for p in doc["purposes"] + [doc["total"]]:
        unknown = p["unknown_usage_calls"]
        rows.append({
            "purpose": p["purpose"], "calls": p["calls"],
            "input tokens": f"{p['input_tokens']}{'+?' if unknown else ''}",
            "output tokens": f"{p['output_tokens']}{'+?' if unknown else ''}",
            "cost": ("?" if p["cost"] is None else f"{p['cost']:.6g}")
                    + ("+?" if p["cost"] is not None and (unknown or p["unknown_cost_calls"]) else ""),
            "unknown usage": unknown, "unknown cost": p["unknown_cost_calls"]})
    echo(f"{safe(rep.project)}: {rep.sessions_counted} session(s) counted"
         + (f", since {rep.since}" if rep.since else "")
         + (f"; refused: {', '.join(safe(s) for s in rep.refused)}" if rep.refused else ""))
    if not doc["purposes"]:
        echo("no compact or memory_usage events")
        return
    render_rows(rows, ["purpose", "calls", "input tokens", "output tokens", "cost",
                       "unknown usage", "unknown cost"], "table")
    if doc["total"]["unknown_usage_calls"] or doc["total"]["unknown_cost_calls"]:
        echo("'+?': known subtotal; some calls reported no usage or no cost (not zero).")


@command(epilog="""\
\b
Examples:
  memctl projects
  memctl projects --root ~/src/app --root ~/src/lib
  memctl projects --json | jq -r '.[] | select(.root_exists == false) | .slug'
""")
def projects(
    root: Annotated[list[Path] | None, typer.Option(
        "--root", metavar="PATH",
        help="A project you know of (repeatable): lets memctl name its store's root and "
             "recognise legacy stores of directories inside it.")] = None,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT",
        help="table (default), json, jsonl, csv, tsv, or a tabulate format name.")] = None,
) -> None:
    """List every store under <config dir>/memory/ with what is in it.

    For each store: its slug; the project root when it can be verified (a
    candidate path whose slug equals the store's: from optional root/cwd
    keys in its session headers, the current project, or --root), else
    unknown, since the slug's hash cannot be reversed; whether that root
    still exists; the number of sessions and facts (read-only); the size;
    the last activity (newest file mtime); and its kind: project, legacy
    (a cwd-scoped store of a directory inside a known project: run
    'memctl migrate-legacy' there), unclaimed, or symlink.  An unclaimed
    store with Markdown but no sessions and no facts database is flagged
    'possibly legacy'.  Reads only.

    --json prints a list of {"slug", "path", "kind", "root", "root_source",
    "root_exists", "legacy_of", "legacy_directory", "possibly_legacy",
    "sessions", "facts", "facts_error", "size", "files", "last_activity"};
    root and root_exists are null when unknown, facts is null when the
    database cannot be read.
    """
    from lecode_memctl.core.projects import list_projects

    from .output import check_format, render_rows

    fmt_name = check_format(fmt, json_flag=json_)
    cfg = STATE.config_dir()
    from lecode_memctl.core.errors import MemctlError

    try:
        current = STATE.project_dir()
    except (OSError, MemctlError):  # a deleted working directory: no current project
        current = None
    infos = list_projects(cfg.path, current=current, roots=root or [])
    docs = [i.to_json() for i in infos]
    if fmt_name in ("json", "jsonl"):
        render_rows(docs, [], fmt_name)
        return
    rows = []
    for d in docs:
        kind = d["kind"] + (" (possibly legacy)" if d["possibly_legacy"] else "")
        if d["legacy_of"]:
            kind += f" of {d['legacy_of']}"
        rows.append({"slug": d["slug"], "kind": kind,
                     "root": d["root"] or "unknown",
                     "root exists": "?" if d["root_exists"] is None else d["root_exists"],
                     "sessions": d["sessions"],
                     "facts": "?" if d["facts"] is None else d["facts"],
                     "size": d["size"], "last activity": d["last_activity"] or "-"})
    render_rows(rows, ["slug", "kind", "root", "root exists", "sessions", "facts", "size",
                       "last activity"], fmt_name)
