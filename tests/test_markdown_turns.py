"""Markdown writers take turns (``markdown.writing``): a concurrency review.

Before 2026-12-07 ``write_if_unchanged`` hashed the file, then wrote a
temporary file, fsynced it, wrote the ``.bak`` and renamed, with no lock: a
write made by another writer in that window (the agent's, or a second
``memctl edit``) was overwritten, and both writers said they had written.
Two processes each appending 300 lines with compare-and-write kept 329 of
600; ``edit`` printed "wrote" for 27 edits of which 9 survived; ``redact``
once lost a line the agent wrote after its check.  Now the check and the
replace are one turn of an exclusive ``flock`` on the store directory,
which every Markdown write of the core takes, and readers never take.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lecode_memctl.core import markdown
from lecode_memctl.core.errors import Conflict, StoreBusy
from lecode_memctl.core.layout import store_at

from .conftest import run_cli, tree_hash


def _store(tmp_path: Path):
    st = store_at(tmp_path / "store")
    markdown.write(st, markdown.memory_target(), "- first\n")
    return st


def test_a_write_in_the_window_of_a_compare_and_write_waits_and_then_conflicts(tmp_path,
                                                                               monkeypatch):
    st = _store(tmp_path)
    target = markdown.memory_target()
    old = markdown.sha256(markdown.read_bytes(st, target))
    in_window, go_on = threading.Event(), threading.Event()
    real = markdown.atomic_write

    def slow_write(path, data, **kw):   # the first writer, between its check and its rename
        if data == b"- first\n- A\n":
            in_window.set()
            assert go_on.wait(10)
        real(path, data, **kw)

    monkeypatch.setattr(markdown, "atomic_write", slow_write)
    a = threading.Thread(target=markdown.write_if_unchanged,
                         args=(st, target, b"- first\n- A\n", old))
    a.start()
    assert in_window.wait(10)
    outcome: list[object] = []

    def second() -> None:
        try:
            markdown.write_if_unchanged(st, target, b"- first\n- B\n", old)
            outcome.append("wrote")
        except Conflict as exc:
            outcome.append(exc)

    b = threading.Thread(target=second)
    b.start()
    b.join(0.5)
    # the second writer waits for its turn: it has not written over the window
    assert b.is_alive() and not outcome
    go_on.set()
    a.join(10)
    b.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], Conflict), outcome
    assert (st.path / "MEMORY.md").read_bytes() == b"- first\n- A\n"


_APPENDER = r"""
import sys
from lecode_memctl.core import markdown
from lecode_memctl.core.errors import Conflict
from lecode_memctl.core.layout import store_at
st = store_at(sys.argv[1]); tag = sys.argv[2]; n = int(sys.argv[3])
t = markdown.memory_target()
done = 0
while done < n:
    before = markdown.read_bytes(st, t)
    try:
        markdown.write_if_unchanged(st, t, before + f"- {tag} {done}\n".encode(),
                                    markdown.sha256(before), backup=False)
    except Conflict:
        continue
    done += 1
"""


def test_two_processes_appending_with_compare_and_write_lose_nothing(tmp_path):
    st = _store(tmp_path)
    n = 200
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", _APPENDER, str(st.path), tag, str(n)],
                              env=env) for tag in ("A", "B")]
    for p in procs:
        assert p.wait(120) == 0
    lines = (st.path / "MEMORY.md").read_text().splitlines()
    for tag in ("A", "B"):
        assert [ln for ln in lines if ln.startswith(f"- {tag} ")] == \
            [f"- {tag} {i}" for i in range(n)]


@pytest.fixture
def held(tmp_path):
    """The store directory's lock, held by another open file (as another
    writer's would be); a short wait."""
    def hold(st):
        fd = os.open(st.path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    return hold


def test_a_writer_that_never_gets_its_turn_is_busy_and_writes_nothing(tmp_path, monkeypatch,
                                                                      held):
    st = _store(tmp_path)
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.2)
    fd = held(st)
    try:
        before = tree_hash(st.path)
        with pytest.raises(StoreBusy, match="another writer of the Markdown memory"):
            markdown.write(st, markdown.memory_target(), "- lost\n")
        with pytest.raises(StoreBusy):
            markdown.write_if_unchanged(st, markdown.note_target("n"), b"x\n", None)
        assert tree_hash(st.path) == before
        # readers never take it
        assert run_cli("--store", str(st.path), "show").exit_code == 0
    finally:
        os.close(fd)
    markdown.write(st, markdown.memory_target(), "- now\n")
    assert (st.path / "MEMORY.md").read_bytes() == b"- now\n"


def test_redact_rewrites_markdown_in_the_writers_turn(tmp_path, monkeypatch, held):
    st = _store(tmp_path)
    key = "AKIA" + "QWERTYUIOPASDFGH"
    markdown.write(st, markdown.note_target("keys"), f"aws {key}\n")
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.2)
    fd = held(st)
    try:
        before = tree_hash(st.path)
        r = run_cli("--store", str(st.path), "redact", "--yes", "--lock-wait", "0.2")
        assert r.exit_code == 6, (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and tree_hash(st.path) == before
    finally:
        os.close(fd)
    r = run_cli("--store", str(st.path), "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert key not in (st.path / "notes" / "keys.md").read_text()


def test_edit_that_loses_the_race_says_so(tmp_path, monkeypatch, held):
    st = _store(tmp_path)
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.2)
    editor = tmp_path / "ed.sh"
    editor.write_text('#!/bin/sh\nprintf -- "- edit\\n" >> "$1"\n')
    editor.chmod(0o755)
    fd = held(st)
    try:
        before = tree_hash(st.path)
        r = run_cli("--store", str(st.path), "edit", "memory", env={"EDITOR": str(editor),
                                                                    "VISUAL": str(editor)})
        assert r.exit_code == 6, (r.stdout, r.stderr)
        assert "wrote" not in r.stdout + r.stderr
        assert tree_hash(st.path) == before
    finally:
        os.close(fd)


def test_the_agent_writes_markdown_through_the_project_in_the_same_turns(tmp_path, monkeypatch,
                                                                         held):
    from lecode_memctl.core import open_project

    st = store_at(tmp_path / "store")
    with open_project(store=st.path) as project:
        assert project.read_markdown("memory") is None
        path = project.write_markdown("memory", "- one\n", expected_sha256=None)
        assert path == st.path / "MEMORY.md"
        got = project.read_markdown("memory")
        assert got is not None and got.text == "- one\n" and got.size == 6
        with pytest.raises(Conflict):
            project.write_markdown("memory", "- two\n", expected_sha256=None)
        project.write_markdown("memory", "- one\n- two\n", expected_sha256=got.sha256)
        with pytest.raises(Conflict):       # the bytes it read are gone
            project.write_markdown("memory", "- lost\n", expected_sha256=got.sha256)
        assert (st.path / "MEMORY.md.bak").read_bytes() == b"- one\n"
        project.write_markdown("note", "n\n", name="plan")
        project.write_markdown("log", "l\n", name="2026-12-07")
        assert project.read_markdown("note", "plan").text == "n\n"
        assert project.read_markdown("log", "2026-12-07").text == "l\n"
        assert project.read_markdown("note", "absent") is None
        monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.2)
        fd = held(st)
        try:
            with pytest.raises(StoreBusy):
                project.write_markdown("scratchpad", "- [ ] x\n")
        finally:
            os.close(fd)
        assert not (st.path / "scratchpad.md").exists()


# -- a code review of the turns (2026-12-07)

def test_a_writer_inside_a_turn_of_the_same_store_is_in_it_already(tmp_path, monkeypatch):
    from lecode_memctl.core import open_project

    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.5)
    st = _store(tmp_path)
    with open_project(store=st.path) as project, markdown.writing(st):
        # (before: waited on itself, then "another writer ... held its lock")
        project.write_markdown("scratchpad", "n\n")
        with markdown.writing(st):
            markdown.write(st, markdown.note_target("x"), "x\n")
    assert (st.path / "scratchpad.md").read_bytes() == b"n\n"
    markdown.write(st, markdown.memory_target(), "- after\n")   # let go


def test_a_child_forked_inside_a_turn_does_not_keep_it(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 1.0)
    st = _store(tmp_path)
    with markdown.writing(st):
        pid = os.fork()
        if pid == 0:        # the child outlives the parent's turn
            import time
            time.sleep(2)
            os._exit(0)
    try:
        # (before: the child's copy of the lock kept every writer out)
        markdown.write(st, markdown.memory_target(), "- parent\n")
    finally:
        os.waitpid(pid, 0)
    assert (st.path / "MEMORY.md").read_bytes() == b"- parent\n"


@pytest.mark.parametrize("digest", ["zz", "A" * 64, "0" * 63, 7])
def test_a_malformed_expected_digest_is_a_usage_error_not_a_conflict(tmp_path, digest):
    from lecode_memctl.core import UsageError, open_project

    st = _store(tmp_path)
    with open_project(store=st.path) as project, \
            pytest.raises(UsageError, match="64 lower-case hex"):
        project.write_markdown("memory", "- x\n", expected_sha256=digest)
    assert (st.path / "MEMORY.md").read_bytes() == b"- first\n"


def test_a_lone_surrogate_is_a_usage_error(tmp_path):
    from lecode_memctl.core import UsageError, open_project

    st = _store(tmp_path)
    with open_project(store=st.path) as project:
        for kw in ({}, {"expected_sha256": None}):
            with pytest.raises(UsageError, match="lone surrogate"):
                project.write_markdown("note", "x\ud800", name="n", **kw)
    assert not (st.path / "notes" / "n.md").exists()


def test_redact_lock_wait_bounds_the_wait_for_the_turn(tmp_path, monkeypatch, held):
    import time

    st = _store(tmp_path)
    markdown.write(st, markdown.note_target("keys"), "aws AKIAQWERTYUIOPASDFGH\n")
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 60.0)
    fd = held(st)
    try:
        t0 = time.monotonic()
        r = run_cli("--store", str(st.path), "redact", "--yes", "--lock-wait", "0")
        assert r.exit_code == 6, (r.stdout, r.stderr)
        assert time.monotonic() - t0 < 30      # not the 60 s default
    finally:
        os.close(fd)


def test_migrate_copies_in_the_writers_turn(tmp_path, monkeypatch, held):
    from lecode_memctl.core.layout import store_for_project

    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "MEMORY.md").write_text("- legacy\n")
    project, cfg = tmp_path / "proj", tmp_path / "cfg"
    project.mkdir()
    st = store_for_project(cfg, project)
    st.path.mkdir(parents=True)
    monkeypatch.setattr(markdown, "WRITE_LOCK_WAIT", 0.2)
    fd = held(st)
    try:
        r = run_cli("--config-dir", str(cfg), "-C", str(project), "migrate-legacy", "--from",
                    str(legacy), "--yes")
        assert r.exit_code == 6, (r.stdout, r.stderr)
        assert "0 of 1 file copied" in r.stderr and "run again to finish" in r.stderr, r.stderr
        assert not (st.path / "MEMORY.md").exists()
    finally:
        os.close(fd)
    r = run_cli("--config-dir", str(cfg), "-C", str(project), "migrate-legacy", "--from",
                str(legacy), "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert (st.path / "MEMORY.md").read_bytes() == b"- legacy\n"
