"""``memctl demo``: build a realistic store and walk through every capability."""


from pathlib import Path
from typing import Annotated

import typer

from .registry import command


@command(epilog="""\
\b
Examples:
  memctl demo                       build, tour, then remove the demo
  memctl demo --keep                keep it and print how to explore it
  memctl demo --into /tmp/memdemo   build into a directory of your choice (kept)
""")
def demo(
    into: Annotated[str | None, typer.Option(  # str: "" is refused, not "." (Path(""))
        "--into", metavar="DIR",
        help="Build the demo in DIR (must be absent or empty); implies --keep.")] = None,
    keep: Annotated[bool, typer.Option(
        "--keep", help="Keep the demo directory afterwards (default: remove a temporary one).")] = False,
) -> None:
    """Build a demo store and run the main commands on it, as you would type them.

    The demo is a git project with a linked worktree, and a lecode config dir
    of its own (your real ~/.config/lecode is never touched) holding three
    sessions (user, assistant and tool messages, a binary attachment, an
    undo/redo, a clear, two compactions, learning and usage events), facts
    from an explicit preference and from a verified file read, one
    correction, one forget, a legacy cwd-scoped store, and one planted
    problem: a transcript edited after a fact cited it.

    It then runs where, facts, recall, validate (which must find exactly the
    planted problem), migrate-legacy --dry-run and context --explain.  Exit
    status 0 when every step behaved as described, 1 otherwise.
    """
    import os
    import shutil
    import sys
    import tempfile

    from lecode_memctl.core.demo import build_demo
    from lecode_memctl.core.errors import EXIT_PROBLEMS, Conflict, StoreWriteError

    from .main import main as run
    from .output import echo, safe
    from .state import path_option, shell_word

    into = path_option("--into", into)
    if into is not None:
        base = Path(os.path.abspath(into))
        # lexists: a link to nowhere exists too (mkdir would say "File exists")
        if os.path.lexists(base) and (not base.is_dir() or any(base.iterdir())):
            raise Conflict(f"{base}: exists and is not an empty directory; choose another --into")
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # under a file, a name too long, read-only: not a store's fault
            raise StoreWriteError(f"--into {base}: cannot create: {exc.strerror}") from None
        keep = True
    else:
        base = Path(tempfile.mkdtemp(prefix="memctl-demo-"))
    q = shell_word
    old_cwd = os.getcwd()
    old_env = os.environ.get("LECODE_CONFIG_DIR")
    # memctl's own state (the marks validate records) goes in the demo too:
    # the user's real ~/.local/state is left alone, as the real config is
    # (before 2026-12-07 a removed demo left its marks there)
    old_state = os.environ.get("XDG_STATE_HOME")
    ok = True
    try:
        d = build_demo(base)
        how = ("real git" if d.used_git
               else "git layout written by hand: " + safe(d.git_problem))
        echo(f"Built a demo store under {safe(str(base))} ({how}).")
        echo("Every command below is what you would type; its output follows.\n")
        os.environ["LECODE_CONFIG_DIR"] = str(d.config_dir)
        os.environ["XDG_STATE_HOME"] = str(base / "state")
        steps: list[tuple[Path | None, list[str], int]] = [
            (d.project, ["where"], 0),
            (None, ["facts"], 0),
            (None, ["recall", d.facts["preference"]], 0),
            (None, ["validate"], 1),
            (d.worktree / "src", ["migrate-legacy", "--dry-run"], 0),
            (d.project, ["context", "--explain"], 0),
        ]
        echo(f"$ export LECODE_CONFIG_DIR={q(str(d.config_dir))}")
        for cwd, argv, expected in steps:
            if cwd is not None:
                cwd.mkdir(parents=True, exist_ok=True)
                os.chdir(cwd)
                echo(f"$ cd {q(str(cwd))}")
            echo("$ memctl " + " ".join(q(a) for a in argv))
            sys.stdout.flush()
            code = run(argv)
            sys.stdout.flush()
            note = ""
            if argv[0] == "validate":
                note = " (the planted problem, as expected)" if code == 1 else " (UNEXPECTED)"
            elif argv[0] == "migrate-legacy":
                note = (" (a legacy MEMORY.md conflicts with the project's: reported, never "
                        "merged)" if code == 0 else " (UNEXPECTED)")
            if code != 0 or note:
                echo(f"[exit status {code}{note}]")
            echo()
            ok = ok and code == expected
        ok = ok and _only_planted(d)
        if keep:
            echo("The demo is kept.  To explore it:")
            echo(f"  export LECODE_CONFIG_DIR={q(str(d.config_dir))}; cd {q(str(d.project))}")
            echo("  memctl --help")
        else:
            echo("The demo directory was removed; run 'memctl demo --keep' to explore it.")
    finally:
        os.chdir(old_cwd)
        for name, old in (("LECODE_CONFIG_DIR", old_env), ("XDG_STATE_HOME", old_state)):
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    if not ok:
        echo("memctl: error: the demo did not behave as described (see above)", err=True)
        raise typer.Exit(EXIT_PROBLEMS)


def _only_planted(d) -> bool:  # type: ignore[no-untyped-def]
    """validate's findings at error or warning severity are exactly the planted one."""
    from lecode_memctl.core.audit import validate_store

    findings, _summary = validate_store(d.store)
    serious = [f for f in findings if f.severity in ("error", "warning")]
    return len(serious) == 1 and serious[0].code == "fact.stale" and serious[0].fact_id == d.planted
