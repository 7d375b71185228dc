"""``memctl migrate-legacy``: copy cwd-scoped memory into the project store, losing nothing."""


from pathlib import Path
from typing import Annotated, NoReturn

import typer

from .completion import complete_migrate_format
from .options import JsonOpt
from .registry import command
from .state import STATE, path_option, stdin_is_tty

_ORIGIN_LABEL = {"cwd": "cwd", "ancestor": "ancestor", "tree": "tree",
                 "worktree": "worktree", "from": "--from"}


def _item_rows(plan, diffs: dict | None = None) -> list[dict]:
    from lecode_memctl.core.rowmodel import PLAN_ITEM

    diffs = diffs or {}
    return [PLAN_ITEM.row(source=str(i.source),
                          destination=str(i.destination) if i.destination else None,
                          action=i.action, reason=i.reason, conflict=i.conflict,
                          blocked=i.blocked, not_utf8=i.not_utf8, result=i.result,
                          store=i.store, name=i.name, size=i.size, sha256=i.sha256,
                          provided_by=str(i.provided_by) if i.provided_by else None,
                          detail=i.detail, diff=diffs.get(n)) for n, i in enumerate(plan.items)]


def _emit(plan, fmt: str, *, dry_run: bool, diffs: dict | None = None,
          would_fail: str | None = None) -> None:
    from lecode_memctl.core.rowmodel import PLAN_ITEM

    from .output import emit_json, render_records

    if fmt == "json":
        emit_json(_doc(plan, dry_run=dry_run, diffs=diffs, would_fail=would_fail))
    else:
        render_records(PLAN_ITEM, _item_rows(plan, diffs), fmt)


def _doc(plan, *, dry_run: bool, diffs: dict | None = None,
         would_fail: str | None = None) -> dict:
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION

    d = plan.discovery
    diffs = diffs or {}
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
        "items": _item_rows(plan, diffs),
        "summary": {"copy": len(plan.copies),
                    "skip": sum(1 for i in plan.items if i.action != "copy"),
                    "conflicts": len(plan.conflicts), "copied": plan.copied},
        "fail_on_conflict": plan.fail_on_conflict,
        "would_fail": would_fail,
        "exit_code": _write_fails() if would_fail else plan.exit_code,
    }


def _diffs(plan) -> dict:
    """{item index: unified diff} of every conflicting item."""
    from lecode_memctl.core.migrate import conflict_diff

    out = {}
    for n, item in enumerate(plan.items):
        d = conflict_diff(item, plan)
        if d is not None:
            out[n] = d
    return out


def _edit_command(name: str) -> str | None:
    """The 'memctl edit' command that opens the project's copy of a store file."""
    from .state import shell_word

    if name == "MEMORY.md":
        return "memctl edit memory"
    if name == "scratchpad.md":
        return "memctl edit scratchpad"
    if name.startswith("daily/") and name.endswith(".md"):
        return f"memctl edit log {shell_word(name[6:-3])}"
    if name.startswith("notes/") and name.endswith(".md"):
        return f"memctl edit note {shell_word(name[6:-3])}"
    return None


def _print_diffs(plan, diffs: dict) -> None:
    from .output import echo, safe

    for n, text in diffs.items():
        item = plan.items[n]
        echo("")
        echo(f"diff for {safe(item.name)} (#{item.store}, "
             f"{item.reason or item.result}):")
        # its lines at its newlines alone, a CRLF's CR dropped as before
        # (str.splitlines broke a line at U+2028 too, before 2026-12-07)
        for line in text.removesuffix("\n").split("\n") if text else ():
            echo(safe(line.removesuffix("\r")))


def _print_hint(plan) -> None:
    """Existing destinations are the design's normal case: say what they mean
    and how to merge by hand; a duplicate held back for an earlier store
    that could not be read is no conflict of content: say to make that
    store readable."""
    from .output import echo, safe

    # Markdown that is not UTF-8, copied byte for byte (or to be): say what
    # follows (before 2026-12-07 nothing did, and show then exited 5)
    bad = [i for i in plan.items if i.not_utf8 and i.action == "copy"
           and i.result in (None, "copied")]
    if bad:
        n = len(bad)
        echo(f"{n} legacy Markdown file{'s' if n != 1 else ''} not valid UTF-8, "
             f"{'copied' if plan.applied else 'to be copied'} byte for byte: memctl validate "
             f"reports markdown.invalid_utf8 for {'them' if n != 1 else 'it'} until "
             f"{'they are' if n != 1 else 'it is'} re-encoded as UTF-8 in the project store.")
    unresolved = {id(i) for i in plan.unresolved}
    kept = [i for i in plan.conflicts if id(i) not in unresolved and not i.left_behind]
    left = [i for i in plan.conflicts if id(i) not in unresolved and i.left_behind]
    if left:
        n = len(left)
        echo(f"{n} legacy Markdown file{'s' if n != 1 else ''} skipped (a symbolic link, not "
             "a regular file, or a name the store does not accept): not migrated; copy "
             f"{'their' if n != 1 else 'its'} content by hand if it matters.")
    # a duplicate held back for an earlier store whose file (or directory)
    # could not be read was compared with nothing: its provider is that
    # store's unreadable item (before 2026-12-07 it was counted as "other
    # content" and the hint offered to merge it)
    unread = {i.source for i in plan.items if i.reason == "unreadable"}
    held = [i for i in kept if i.reason == "duplicate" and i.provided_by in unread]
    kept = [i for i in kept if not (i.reason == "duplicate" and i.provided_by in unread)]
    dups = [i for i in kept if i.reason == "duplicate"]
    existing = [i for i in kept if i.reason != "duplicate"]
    if held:
        n = len(held)
        echo(f"{n} file{'s' if n != 1 else ''} held back for an earlier legacy store whose "
             f"file{'s' if n != 1 else ''} could not be read (or its directory listed): nothing "
             "was compared; make that store's files readable and run again.")
    if existing:
        n = len(existing)
        echo(f"{n} file{'s' if n != 1 else ''} already in the project store with other "
             "content: never merged or overwritten; the legacy files are kept.")
    if dups:
        # (the project store may not even exist: an earlier legacy store
        # provides the file; "already in the project store" said otherwise)
        n = len(dups)
        echo(f"{n} file{'s' if n != 1 else ''} provided by an earlier legacy store with other "
             "content: the first store's wins, never merged; the legacy files are kept.")
    if kept:
        echo("To merge by hand, 'memctl migrate-legacy --dry-run --diff' shows each legacy "
             "file against the project's; then, in the project:")
        seen = set()
        for i in kept:
            cmd = _edit_command(i.name)
            if cmd and cmd not in seen:
                seen.add(cmd)
                echo(f"  {safe(cmd)}")
    for i in plan.unresolved:
        echo(f"not copied: #{i.store} {safe(i.name)}: "
             f"{safe(i.detail)}")


def _write_fails() -> int:
    """The exit status of a copy that cannot write (7)."""
    from lecode_memctl.core.errors import StoreWriteError

    return StoreWriteError.exit_code


def _exit(plan, would_fail: str | None = None) -> NoReturn:
    """End with the plan's exit status; a non-zero one (4) also says why in
    one line on stderr, as every error does (the report on stdout is as
    before): it was there only, stderr empty.  A dry run whose copy would
    fail to write (``would_fail``) ends as that copy would: exit 7, its
    message marked as the copy's."""
    from .output import echo, safe

    if would_fail is not None:
        echo(f"memctl: error: the copy would fail: {safe(would_fail)}",
             err=True)
        raise typer.Exit(_write_fails())
    code = plan.exit_code
    if code != 0:
        echo(f"memctl: error: {safe(_why_not(plan))}", err=True)
    raise typer.Exit(code)


def _why_not(plan) -> str:
    """What a plan of exit status 4 did not copy and why, the first item named."""
    items = plan.unresolved
    if items:
        first = items[0]
        why = f"#{first.store} {first.name}: {first.detail}"
    else:   # (--fail-on-conflict)
        items = plan.conflicts
        them = "them" if len(items) != 1 else "it"
        if items[0].left_behind:
            why = f"#{items[0].store} {items[0].name}: {items[0].detail} (--fail-on-conflict)"
        else:
            why = (f"the project store has other content for {them} (--fail-on-conflict): "
                   f"#{items[0].store} {items[0].name}")
    n = len(items)
    more = f" (and {n - 1} more: see the report)" if n > 1 else ""
    return f"{n} legacy file{'s' if n != 1 else ''} not copied: {why}{more}"


_NOT_UTF8 = "(not UTF-8: validate will report markdown.invalid_utf8)"


def _print_plan(plan) -> None:
    from .output import echo, safe

    d = plan.discovery
    # (keep_newlines=False everywhere: a newline in a directory's name
    # printed raw could fake plan lines)
    echo(f"project:  {safe(str(d.project.root))}")
    echo(f"from:     {safe(str(d.project.cwd))} "
         f"({safe(d.project.detail)})")
    echo(f"store:    {safe(str(d.store.path))}"
         + ("" if d.store.exists() else "  (does not exist yet)"))
    if not d.legacy:
        echo("legacy stores: none found")
    else:
        echo("legacy stores, in migration order (for each file the first store wins):")
        for s in d.legacy:
            label = _ORIGIN_LABEL.get(s.origin, s.origin)
            where = (f"  (of {safe(str(s.directory))})"
                     if s.directory else "")
            echo(f"  #{s.index:<3} {label:<8} {safe(str(s.path))}{where}")
    if not plan.items:
        echo("plan: nothing to migrate")
        return
    echo("plan:")
    width = min(40, max(len(safe(i.name)) for i in plan.items))
    for i in plan.items:
        name = safe(i.name)
        if i.action == "copy":
            echo(f"  copy  #{i.store:<3} {name}"
                 + (f"  {_NOT_UTF8}" if i.not_utf8 else ""))
        else:
            echo(f"  skip  #{i.store:<3} {name:<{width}}  {i.reason}"
                 f"{' (blocked)' if i.blocked else ''}: {safe(i.detail)}")


def _summary(plan) -> str:
    n_copy = len(plan.copies)
    n_skip = len(plan.items) - n_copy
    n_conf = len(plan.conflicts)
    return (f"summary: {n_copy} to copy, {n_skip} skipped, "
            f"{n_conf} conflict{'s' if n_conf != 1 else ''}")


@command(epilog="""\
\b
Examples:
  memctl migrate-legacy --dry-run         what would be copied, and why not the rest
  memctl migrate-legacy --dry-run --diff  each conflicting legacy file against the project's
  memctl migrate-legacy                   plan, ask, copy (on a terminal)
  memctl migrate-legacy --yes --json      in a script: copy, one JSON report
  memctl migrate-legacy --from ~/.config/lecode/memory/old-app-0123456789ab --dry-run

\b
Exit status: 0 everything that can be copied is in the project store (copied
now or before; existing destinations are reported, never merged); 4 a legacy
file could not be read when planned (it is skipped, the others are copied)
or changed before its copy, a destination is blocked by something that is
not a regular file or cannot be read, or, with --fail-on-conflict, some file was not copied
because the project has other content for it, or some Markdown was skipped
as a symbolic link, not a regular file or for its name: the report lists each, and
one line on stderr names the first; 1 you declined at the prompt; 2 no
--yes and stdin is not a terminal (or with --json), --store given, or a
--from that is a symbolic link, not a directory or the project's own store,
or a config directory named on the command line that is not a directory; 3
a --from directory, or a config directory named on the command line, does
not exist; 5 a legacy file read when planned
could not be read when copied (the copy stops there; the message says what
was copied: run again to finish); 6 another writer of the Markdown
memory (the agent, say) held the writers' turn for 10 s (the message says
what was copied: run again to finish); 7 a write failed (nothing partial is
left: run again to finish), or, with --dry-run, the copy would find a
directory it needs not writable.
""")
def migrate_legacy(
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", "-n", help="Only print the plan; change nothing.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Copy without asking (required when stdin is not a terminal).")] = False,
    from_: Annotated[list[str] | None, typer.Option(  # str: "" is refused, not "."
        "--from", metavar="DIR",
        help="Also migrate this legacy store directory (repeatable; after the discovered "
             "ones, in the order given).")] = None,
    max_dirs: Annotated[int, typer.Option(
        "--max-dirs", metavar="N",
        help="Walk at most N directories of the project and its worktrees.")] = 100_000,
    diff: Annotated[bool, typer.Option(
        "--diff", help="Show each conflicting legacy file against the project's (a unified "
                       "diff), to merge by hand with 'memctl edit'.")] = False,
    fail_on_conflict: Annotated[bool, typer.Option(
        "--fail-on-conflict", help="Exit 4 when some legacy file is not copied because the "
                                   "project store has other content for it, or some Markdown "
                                   "is skipped as a symbolic link, not a regular file or for "
                                   "its name.")] = False,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_migrate_format,
        help="text or table (default: the plan as text), json (the same as --json), or "
             "jsonl, csv, tsv: the plan's item rows.")] = None,
) -> None:
    """Copy memory that older lecode versions kept per working directory into
    the project's store.

    Older lecode versions kept a store per working directory
    (<config dir>/memory/<slug of that directory>/).  This finds the legacy
    stores of the current directory and its parents, of every directory in
    the project, and of each linked worktree (outside Git every directory
    is its own project: none of those), plus any given with --from;
    prints a plan; and, after you confirm, copies MEMORY.md, scratchpad.md,
    daily/YYYY-MM-DD.md and notes/<name>.md into the project store, each only
    if that destination is absent.  Existing destinations are never merged or
    overwritten; when two legacy stores provide the same file, the first in
    the order shown wins and the others are reported.  That is the normal
    case, not a failure (exit 0; --fail-on-conflict makes it 4): --diff
    shows each such legacy file against the project's, to merge by hand
    with 'memctl edit'.  SQLite databases,
    .bak backups, session transcripts, temporary and unexpected files are
    never copied.  Legacy files are left untouched.  Each copy is an atomic
    write verified by sha256; running it again does nothing more.
    """
    from lecode_memctl.core.errors import EXIT_PROBLEMS, StoreWriteError, UsageError
    from lecode_memctl.core.migrate import apply_migration, check_writable, plan_migration

    from .output import check_format, confirm, echo, safe

    # (its own names, checked first: check_format would offer tabulate names)
    if fmt is not None and fmt not in ("text", "table", "json", "jsonl", "csv", "tsv"):
        raise UsageError(f"unknown format {fmt!r}; use text, table, json, jsonl, csv or tsv")
    fmt_name = check_format(None if fmt == "text" else fmt, json_flag=json_)
    json_ = fmt_name != "table"   # a machine format: no prompt, no text
    if STATE.store_option:
        raise UsageError("migrate-legacy works on a project (--project or the current "
                         "directory), not on --store")
    extra = [Path(str(path_option("--from", v))) for v in from_ or ()]
    # (the config directory whose memory/ is searched for legacy stores: a
    # --config-dir given that does not exist is a typo, exit 3, and a file
    # is exit 2, as for 'projects'; before 2026-12-07 "legacy stores: none
    # found", exit 0, and exit 5)
    plan = plan_migration(STATE.listed_config_dir().path, STATE.project_dir(),
                          extra=extra, max_dirs=max_dirs, fail_on_conflict=fail_on_conflict)
    for note in plan.discovery.notes:
        echo(f"memctl: note: {safe(note)}", err=True)

    if dry_run or not plan.copies:
        would_fail = None
        if plan.copies:
            # the dry run exits as the copy would: check_writable is the
            # copy's first step, before anything is written
            try:
                check_writable(plan)
            except StoreWriteError as exc:
                would_fail = exc.message
        diffs = _diffs(plan) if diff else {}
        if json_:
            _emit(plan, fmt_name, dry_run=dry_run, diffs=diffs, would_fail=would_fail)
        else:
            _print_plan(plan)
            echo(_summary(plan))
            _print_hint(plan)
            _print_diffs(plan, diffs)
        _exit(plan, would_fail)

    interactive = not json_ and stdin_is_tty()
    if not yes and not interactive:
        if not json_:
            _print_plan(plan)
            echo(_summary(plan))
        why = ((f"--format {fmt_name}" if fmt_name != "json" else "--json") + " is for scripts"
               if json_ else "stdin is not a terminal")
        raise UsageError(f"{why}: pass --yes to copy {len(plan.copies)} file"
                         f"{'s' if len(plan.copies) != 1 else ''}, or --dry-run to only plan")
    if not json_:
        _print_plan(plan)
        echo(_summary(plan))
    if not yes:
        n = len(plan.copies)
        if not confirm(f"Copy {n} file{'s' if n != 1 else ''} into "
                       f"{safe(str(plan.discovery.store.path))}?"):
            echo("nothing was copied", err=True)
            raise typer.Exit(EXIT_PROBLEMS)

    try:
        done = apply_migration(plan)
    except KeyboardInterrupt as exc:
        # "terminated by SIGTERM; N of M files copied before this; ...": an
        # interrupt once the store has changed says what was written
        if exc.args:
            from .output import interrupted_after

            interrupted_after(str(exc.args[0]))
        raise
    diffs = _diffs(done) if diff else {}
    if json_:
        _emit(done, fmt_name, dry_run=False, diffs=diffs)
        _exit(done)
    for i in done.items:
        if i.result in ("conflict", "source_changed", "identical") and i.action == "copy":
            echo(f"  {i.result}  #{i.store:<3} {safe(i.name)}  "
                 f"{safe(i.detail)}")
    echo(f"copied {done.copied} of {len(done.copies)} file{'s' if len(done.copies) != 1 else ''}"
         f" into {safe(str(done.discovery.store.path))}, "
         "each verified by sha256")
    _print_hint(done)
    _print_diffs(done, diffs)
    _exit(done)
