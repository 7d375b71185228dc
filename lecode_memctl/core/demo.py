"""A realistic demo store, built only through the core's own writers.

``build_demo(base)`` lays out, under ``base``:

- ``config/``: a lecode config dir with the project's store and one legacy
  cwd-scoped store;
- ``work/demo-app``: a git project (real ``git`` when installed, else the
  same files written by hand) with a linked worktree ``work/demo-app-feature``.

The store holds three sessions (user, assistant and tool messages, a binary
attachment, an undo/redo, a clear, two compactions with lineage, learning
and memory_usage events), facts from an explicit preference and from a
verified file read, one correction, one forget, and exactly one planted
problem: a transcript edited after a fact cited it.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from dataclasses import field
from pathlib import Path
from typing import Any

from ._record import record
from .atomic import atomic_write, ensure_dir
from .facts import FactStore
from .layout import Store, legacy_store, store_for_project
from .markdown import log_target, memory_target, note_target, scratchpad_target, write
from .sessions import SessionStore
from .sourceref import SourceRef, canonical_digest

CREATED = "2026-12-01T09:00:00+00:00"
PNG_1X1 = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da6364f8cf500f0003860181d8b3e7f20000000049454e44ae426082")).decode()


@record
class Demo:
    base: Path
    config_dir: Path
    project: Path
    worktree: Path
    legacy_cwd: Path
    store: Store
    facts: dict[str, str] = field(default_factory=dict)   # role -> fact id
    planted: str = ""                                      # the fact whose evidence was edited
    used_git: bool = False
    git_problem: str = "git not found"   # why not, when used_git is False


class _GitFailed(Exception):
    """A git command of the demo's that did not succeed (its message says how)."""


def _git(args: list[str], cwd: Path) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="demo", GIT_AUTHOR_EMAIL="demo@example.invalid",
               GIT_COMMITTER_NAME="demo", GIT_COMMITTER_EMAIL="demo@example.invalid",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    r = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, check=False)
    if r.returncode:
        said = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitFailed(f"'git {args[0]}' exited {r.returncode}"
                         + (f": {said[-1][:200]}" if said else ""))


def _make_project(work: Path) -> tuple[Path, Path, str | None]:
    """The demo project and its linked worktree, made by git when it works;
    the third item is None then, else why the layout was written by hand."""
    project = work / "demo-app"
    worktree = work / "demo-app-feature"
    (project / "src" / "demo_app").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo-app"\nrequires-python = ">=3.11"\n', encoding="utf-8")
    (project / "src" / "demo_app" / "__init__.py").write_text("VERSION = '1.0'\n", encoding="utf-8")
    if shutil.which("git"):
        try:
            _git(["init", "-q"], project)
            _git(["add", "."], project)
            _git(["commit", "-q", "-m", "demo: initial"], project)
            _git(["worktree", "add", "-q", "-b", "feature", str(worktree)], project)
            return project, worktree, None
        except (OSError, _GitFailed) as exc:
            problem = (f"git failed: {exc}" if isinstance(exc, _GitFailed)
                       else f"git failed: {exc.strerror or exc}")
            shutil.rmtree(project / ".git", ignore_errors=True)
            shutil.rmtree(worktree, ignore_errors=True)
    else:
        problem = "git not found"
    # No git: the same on-disk shape, written by hand (identity reads only these files).
    gitdir = project / ".git"
    (gitdir / "worktrees" / "feature").mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    (gitdir / "config").write_text("[core]\n\tbare = false\n")
    wt_git = gitdir / "worktrees" / "feature"
    worktree.mkdir(parents=True)
    (wt_git / "commondir").write_text("../..\n")
    (wt_git / "gitdir").write_text(str(worktree / ".git") + "\n")
    (wt_git / "HEAD").write_text("ref: refs/heads/feature\n")
    (worktree / ".git").write_text(f"gitdir: {wt_git}\n")
    return project, worktree, problem


def _usage(inp: int, out: int, cost: float | None) -> dict[str, Any]:
    return {"input_tokens": inp, "output_tokens": out, "cost": cost}


def _ref(sessions: SessionStore, sid: str, start: int, end: int) -> SourceRef:
    return SourceRef(sid, tuple(range(start, end + 1)),
                     canonical_digest(sessions.records(sid, start, end)))


def build_demo(base: Path) -> Demo:
    """Build the demo under ``base`` (which must be empty or absent)."""
    base = Path(os.path.abspath(base))
    base.mkdir(parents=True, exist_ok=True)
    config_dir = base / "config"
    project, worktree, git_problem = _make_project(base / "work")
    store = store_for_project(config_dir, project)
    legacy_cwd = project / "src"

    # --- Markdown memory
    write(store, memory_target(),
          "# demo-app memory\n\n- The CLI entry point is `demo_app.cli:main`.\n"
          "- Run the tests with `pytest -q`.\n")
    write(store, scratchpad_target(), "- [x] reproduce the failing test\n- [ ] release 1.1\n")
    write(store, log_target("2026-12-01"), "Investigated the flaky test; see session alpha.\n")
    write(store, note_target("release"), "Release steps: bump VERSION, update CHANGES.md, tag.\n")

    facts = FactStore(store.facts_db)
    sessions = SessionStore(store, exclusions=facts)
    demo = Demo(base, config_dir, project, worktree, legacy_cwd, store, used_git=git_problem is None,
                git_problem=git_problem or "")

    # --- Session gamma (in the linked worktree): a fact that is then forgotten.
    with sessions.create("demo-gamma", created=CREATED) as w:
        w.append_message("user", "Never push directly to the main branch; open a pull request.")
        w.append_message("assistant", "Understood: pull requests only.", epoch=0)
        w.append_event("memory_usage", purpose="learning", model="demo-model", usage=None)
    gamma = facts.remember("Never push directly to the main branch; open a pull request.",
                           _ref(sessions, "demo-gamma", 1, 1), sessions=sessions)
    demo.facts["forgotten"] = gamma.fact.fact_id
    facts.forget(gamma.fact.fact_id)
    epoch = facts.generation()  # 1: messages generated from now on carry it

    # --- Session alpha: preference, verified read, attachment, undo/redo, two compactions.
    w = sessions.create("demo-alpha", created=CREATED)
    with w:
        w.append_message("user", "We use tabs for indentation in this repo. "
                                 "Also, please find out which Python we require.")
        w.append_message("assistant", "", epoch=epoch, tool_calls=[
            {"id": "call-1", "name": "read_file", "arguments": {"path": "pyproject.toml"}}])
        w.append_message("tool", "1\t[project]\n2\tname = \"demo-app\"\n"
                                 "3\trequires-python = \">=3.11\"\n",
                         tool_call_id="call-1", name="read_file", epoch=epoch)
        w.append_message("assistant", 'pyproject.toml contains "requires-python = \\">=3.11\\""',
                         epoch=epoch)
        w.append_message("user", [
            {"type": "text", "text": "Here is a screenshot of the failing test."},
            {"type": "binary", "media_type": "image/png", "data": PNG_1X1}])
        w.append_message("assistant", "The assertion compares tabs with spaces; fixed.",
                         epoch=epoch)
        # The design's rule of a cutoff: at least four recent messages stay
        # raw after it (validate --deep: compact.few_raw; before 2026-12-07
        # both summaries covered every message before them)
        raw1 = w.append_message("user", "Run the test suite again, please.")
        w.append_message("assistant", "All tests pass now.", epoch=epoch)
        w.append_message("user", "Good. The helper's name is next.")
        w.append_message("assistant", "Ready when you are.", epoch=epoch)
        first_span = _ref(sessions, "demo-alpha", 1, 6)
        w.append_event("compact", summary="User prefers tabs; Python >=3.11; test fixed.",
                       lineage=[first_span.to_json()], prior=None, model="demo-model",
                       usage=_usage(1200, 80, 0.0021))
        w.append_event("memory_usage", purpose="learning", model="demo-model",
                       usage=_usage(900, 60, 0.0015))
    pref = facts.remember("We use tabs for indentation in this repo.",
                          _ref(sessions, "demo-alpha", 1, 1), sessions=sessions)
    verified = facts.remember('pyproject.toml contains "requires-python = \\">=3.11\\""',
                              _ref(sessions, "demo-alpha", 2, 4), sessions=sessions)
    demo.facts["preference"] = pref.fact.fact_id
    demo.facts["verified"] = verified.fact.fact_id
    with sessions.writer("demo-alpha") as w:
        w.append_event("learning", status="learned", reason_counts={},
                       facts=[pref.fact.fact_id, verified.fact.fact_id], proposals=[])
        a = w.append_message("user", "Try renaming the helper to fmt_indent.")
        b = w.append_message("assistant", "Renamed the helper to fmt_indent.", epoch=epoch)
        w.append_event("undo", target=[a, b])
        w.append_event("redo", target=[a, b])
        corr = w.append_message("user", "Correction: we switched to 4 spaces for indentation "
                                        "in this repo.")
        w.append_message("assistant", "Noted: 4 spaces.", epoch=epoch)
    compact1 = sessions.events("demo-alpha", 0, {"compact"})[0]
    # Lineage positions are visible messages only: the undo/redo events between
    # them are covered by the digest (every record of the span), not named.
    # The chunk covers every newly visible message after the first chunk, the
    # redone user message included (before 2026-12-07 it started at the reply,
    # leaving its user message out: no complete exchange).
    with sessions.writer("demo-alpha") as w:
        w.append_message("user", "Reformat src/ to the new indentation.")
        w.append_message("assistant", "Done: src/ uses 4 spaces.", epoch=epoch)
        w.append_message("user", "Thanks.")
        w.append_message("assistant", "You're welcome.", epoch=epoch)
    second_span = SourceRef("demo-alpha", (*range(raw1, raw1 + 4), a, b, corr, corr + 1),
                            canonical_digest(sessions.records("demo-alpha", raw1, corr + 1)))
    with sessions.writer("demo-alpha") as w:
        w.append_event("compact", summary="Indentation is now 4 spaces.",
                       lineage=[first_span.to_json(), second_span.to_json()],
                       prior={"seq": compact1["seq"], "digest": canonical_digest([compact1])},
                       model="demo-model", usage=_usage(1500, 90, 0.0026))
    facts.correct(pref.fact.fact_id, "We use 4 spaces for indentation in this repo.",
                  expected_revision=1, ref=_ref(sessions, "demo-alpha", corr, corr),
                  sessions=sessions)

    # --- Session beta: a preference, a clear, and then the planted edit.
    with sessions.create("demo-beta", created=CREATED) as w:
        w.append_message("user", "Release notes go in CHANGES.md, newest entry first.")
        w.append_message("assistant", "Will do.", epoch=epoch)
        notes = facts.remember("Release notes go in CHANGES.md, newest entry first.",
                               _ref(sessions, "demo-beta", 1, 1), sessions=sessions)
        w.append_event("clear")
        w.append_message("user", "Now let's look at the CI configuration.")
    demo.facts["planted"] = notes.fact.fact_id
    demo.planted = notes.fact.fact_id
    facts.close()
    path = Path(sessions.path("demo-beta"))
    data = path.read_bytes()
    atomic_write(path, data.replace(b"newest entry first", b"oldest entry first", 1), backup=False)

    # --- A legacy cwd-scoped store (older lecode kept memory per directory).
    legacy = legacy_store(config_dir, legacy_cwd)
    ensure_dir(legacy.path)
    write(legacy, memory_target(), "# memory kept while working in src/\n")
    write(legacy, note_target("build"), "Build with `python -m build`.\n")
    write(legacy, log_target("2026-11-30"), "Started the demo-app project.\n")
    return demo
