"""``memctl migrate-legacy``: copy cwd-scoped memory into the project store, losing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from .app import app
from .options import JsonOpt
from .state import STATE

_ORIGIN_LABEL = {"cwd": "cwd", "ancestor": "ancestor", "tree": "tree",
                 "worktree": "worktree", "from": "--from"}


def _item_rows(plan) -> list[dict]:
    from lecode_memctl.core.rowmodel import PLAN_ITEM

    return [PLAN_ITEM.row(source=str(i.source),
                          destination=str(i.destination) if i.destination else None,
                          action=i.action, reason=i.reason, conflict=i.conflict,
                          result=i.result, store=i.store, name=i.name, size=i.size,
                          sha256=i.sha256,
                          provided_by=str(i.provided_by) if i.provided_by else None,
                          detail=i.detail) for i in plan.items]


def _emit(plan, fmt: str, *, dry_run: bool) -> None:
    from lecode_memctl.core.rowmodel import PLAN_ITEM

    from .output import emit_json, render_records

    if fmt == "json":
        emit_json(_doc(plan, dry_run=dry_run))
    else:
        render_records(PLAN_ITEM, _item_rows(plan), fmt)


def _doc(plan, *, dry_run: bool) -> dict:
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION

    d = plan.discovery
    return {
        "type": "migration", "schema_version": SCHEMA_VERSION,
        "project": {"root": str(d.project.root), "kind": d.project.kind,
                    "cwd": str(d.project.cwd), "slug": d.store.slug, "store": str(d.store.path)},
        "dry_run": dry_run,
        "applied": plan.applied,
        "legacy_stores": [{"index": s.index, "path": str(s.path), "slug": s.slug,
                           "directory": str(s.directory) if s.directory else None,
                           "origin": s.origin} for s in d.legacy],
        "worktrees": [str(w) for w in d.worktrees],
        "dirs_scanned": d.dirs_scanned,
        "truncated": d.truncated,
        "notes": list(d.notes),
        "items": _item_rows(plan),
        "summary": {"copy": len(plan.copies),
                    "skip": sum(1 for i in plan.items if i.action != "copy"),
                    "conflicts": len(plan.conflicts), "copied": plan.copied},
        "exit_code": plan.exit_code,
    }


def _print_plan(plan) -> None:
    from .output import echo, safe

    d = plan.discovery
    echo(f"project:  {safe(str(d.project.root))}")
    echo(f"from:     {safe(str(d.project.cwd))} ({safe(d.project.detail)})")
    echo(f"store:    {safe(str(d.store.path))}"
         + ("" if d.store.exists() else "  (does not exist yet)"))
    if not d.legacy:
        echo("legacy stores: none found")
    else:
        echo("legacy stores, in migration order (for each file the first store wins):")
        for s in d.legacy:
            label = _ORIGIN_LABEL.get(s.origin, s.origin)
            where = f"  (of {safe(str(s.directory))})" if s.directory else ""
            echo(f"  #{s.index:<3} {label:<8} {safe(str(s.path))}{where}")
    if not plan.items:
        echo("plan: nothing to migrate")
        return
    echo("plan:")
    width = min(40, max(len(safe(i.name, keep_newlines=False)) for i in plan.items))
    for i in plan.items:
        name = safe(i.name, keep_newlines=False)
        if i.action == "copy":
            echo(f"  copy  #{i.store:<3} {name}")
        else:
            echo(f"  skip  #{i.store:<3} {name:<{width}}  {i.reason}: "
                 f"{safe(i.detail, keep_newlines=False)}")


def _summary(plan) -> str:
    n_copy = len(plan.copies)
    n_skip = len(plan.items) - n_copy
    n_conf = len(plan.conflicts)
    return (f"summary: {n_copy} to copy, {n_skip} skipped, "
            f"{n_conf} conflict{'s' if n_conf != 1 else ''}")


@app.command("migrate-legacy", epilog="""\
\b
Examples:
  memctl migrate-legacy --dry-run        what would be copied, and why not the rest
  memctl migrate-legacy                  plan, ask, copy (on a terminal)
  memctl migrate-legacy --yes --json     in a script: copy, one JSON report
  memctl migrate-legacy --from ~/.config/lecode/memory/old-app-0123456789ab --dry-run

\b
Exit status: 0 every legacy Markdown file is in the project store (copied now
or before); 4 some is not (the destination has other content, or an earlier
legacy store provides that file with other content): see the plan; 1 you
declined at the prompt; 2 no --yes and stdin is not a terminal; 7 a write
failed (nothing partial is left: run again to finish).
""")
def migrate_legacy(
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", "-n", help="Only print the plan; change nothing.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Copy without asking (required when stdin is not a terminal).")] = False,
    from_: Annotated[Optional[List[Path]], typer.Option(
        "--from", metavar="DIR",
        help="Also migrate this legacy store directory (repeatable; after the discovered "
             "ones, in the order given).")] = None,
    max_dirs: Annotated[int, typer.Option(
        "--max-dirs", metavar="N",
        help="Walk at most N directories of the project and its worktrees.")] = 100_000,
    json_: JsonOpt = False,
    fmt: Annotated[Optional[str], typer.Option(
        "--format", "-f", metavar="FORMAT",
        help="text (default), json (the same as --json), or jsonl, csv, tsv: the plan's "
             "item rows.")] = None,
) -> None:
    """Copy memory that older lecode versions kept per working directory into
    the project's store.

    Older lecode versions kept a store per working directory
    (<config dir>/memory/<slug of that directory>/).  This finds the legacy
    stores of the current directory and its parents, of every directory in
    the project, and of each linked worktree, plus any given with --from;
    prints a plan; and, after you confirm, copies MEMORY.md, scratchpad.md,
    daily/YYYY-MM-DD.md and notes/<name>.md into the project store, each only
    if that destination is absent.  Existing destinations are never merged or
    overwritten; when two legacy stores provide the same file, the first in
    the order shown wins and the others are reported.  SQLite databases,
    .bak backups, session transcripts, temporary and unexpected files are
    never copied.  Legacy files are left untouched.  Each copy is an atomic
    write verified by sha256; running it again does nothing more.
    """
    import sys

    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.migrate import apply_migration, plan_migration

    from .output import check_format, echo, safe

    fmt_name = check_format(None if fmt == "text" else fmt, json_flag=json_)
    if fmt_name not in ("table", "json", "jsonl", "csv", "tsv"):
        raise UsageError(f"unknown format {fmt!r}; use text, json, jsonl, csv or tsv")
    json_ = fmt_name != "table"   # a machine format: no prompt, no text
    if STATE.store_option:
        raise UsageError("migrate-legacy works on a project (--project or the current "
                         "directory), not on --store")
    plan = plan_migration(STATE.config_dir().path, STATE.project_dir(),
                          extra=list(from_ or ()), max_dirs=max_dirs)
    for note in plan.discovery.notes:
        echo(f"memctl: note: {safe(note, keep_newlines=False)}", err=True)

    if dry_run or not plan.copies:
        if json_:
            _emit(plan, fmt_name, dry_run=dry_run)
        else:
            _print_plan(plan)
            echo(_summary(plan))
        raise typer.Exit(plan.exit_code)

    interactive = not json_ and sys.stdin is not None and sys.stdin.isatty()
    if not yes and not interactive:
        if not json_:
            _print_plan(plan)
            echo(_summary(plan))
        why = f"--format {fmt_name} is for scripts" if json_ else "stdin is not a terminal"
        raise UsageError(f"{why}: pass --yes to copy {len(plan.copies)} file"
                         f"{'s' if len(plan.copies) != 1 else ''}, or --dry-run to only plan")
    if not json_:
        _print_plan(plan)
        echo(_summary(plan))
    if not yes:
        n = len(plan.copies)
        if not typer.confirm(f"Copy {n} file{'s' if n != 1 else ''} into "
                             f"{plan.discovery.store.path}?", default=False, err=True):
            echo("nothing was copied", err=True)
            raise typer.Exit(1)

    done = apply_migration(plan)
    if json_:
        _emit(done, fmt_name, dry_run=False)
        raise typer.Exit(done.exit_code)
    for i in done.items:
        if i.result in ("conflict", "source_changed", "identical") and i.action == "copy":
            echo(f"  {i.result}  #{i.store:<3} {safe(i.name, keep_newlines=False)}  "
                 f"{safe(i.detail, keep_newlines=False)}")
    echo(f"copied {done.copied} of {len(done.copies)} file{'s' if len(done.copies) != 1 else ''}"
         f" into {safe(str(done.discovery.store.path))}, each verified by sha256")
    n_conf = len(done.conflicts)
    if n_conf:
        echo(f"{n_conf} conflict{'s' if n_conf != 1 else ''}: legacy content that is not in "
             "the project store; see the plan above")
    raise typer.Exit(done.exit_code)
