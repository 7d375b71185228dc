"""memctl's state directory (``core.seen``) never holds up or fails a
command: another process holding ``stores/.lock`` (shared by every store on
the machine) is waited for a bounded time, then the mark is not recorded,
with one note on stderr; a damaged, huge mark file is not read whole, but
taken for no mark (docs/FORMAT.md, "memctl's mark, outside the store")."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def stores_dir() -> Path:
    return Path(os.environ["HOME"]) / ".local" / "state" / "lecode-memctl" / "stores"


def mark_files() -> list[Path]:
    return sorted(stores_dir().glob("*.json"))


@contextmanager
def lock_held(release_after: float) -> Iterator[None]:
    """``stores/.lock`` held by another open file (as another process holds
    it), let go after ``release_after`` seconds at the latest: a recorder
    that waits for it unbounded is then seen to have waited."""
    stores_dir().mkdir(parents=True, exist_ok=True)
    fd = os.open(stores_dir() / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    timer = threading.Timer(release_after, fcntl.flock, (fd, fcntl.LOCK_UN))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        os.close(fd)


@pytest.mark.parametrize("command", ["forget", "validate", "redact"])
def test_a_held_state_lock_is_waited_for_a_bounded_time(demo, monkeypatch, command):
    from lecode_memctl.core import seen

    monkeypatch.setattr(seen, "LOCK_WAIT", 0.2)
    if command == "validate":
        args = ["validate"]
    elif command == "forget":
        args = ["forget", VERIFIED, "--yes"]
    else:
        # a fact whose text holds a value: redact forgets it, and records the mark
        r = run_cli("--no-state", "--store", str(demo), "correct", VERIFIED, "1",
                    "demo-alpha:1", "deploy key AKIAQWERTYUIOPASDFGH", "--yes")
        assert r.exit_code == 0, r.stderr
        args = ["redact", "--yes"]
    run_cli("--store", str(demo), "facts")      # (nothing recorded: a read)
    assert mark_files() == []
    with lock_held(release_after=1.5):
        start = time.monotonic()
        r = run_cli("--store", str(demo), *args)
        took = time.monotonic() - start
        assert mark_files() == []           # nothing recorded
    assert took < 1.4, (took, r.stderr)
    assert r.exit_code in (0, 1), r.stderr      # (validate: the demo's planted finding)
    notes = [line for line in r.stderr.splitlines() if ".lock" in line]
    assert len(notes) == 1, r.stderr
    assert notes[0].startswith("memctl: note: the state directory's lock ")
    assert "held by another process" in notes[0] and "is not recorded" in notes[0]
    if command == "forget":
        assert r.exit_code == 0 and "generation is now 2" in r.stdout   # the forget was done
    # once let go, the next command records the mark as before
    r = run_cli("--store", str(demo), "validate")
    assert ".lock" not in r.stderr
    assert len(mark_files()) == 1


def test_a_run_stops_waiting_after_one_wait_in_vain_and_the_next_run_waits_again(
        tmp_path, monkeypatch):
    """Within one run (``lock_wait_at_most``: a command, ``validate
    --all-projects`` marking each store) the stores after one that waited in
    vain are not waited for, and their notes say so; outside a run, and in
    the next one, each record waits again.  (Before, one wait in vain made
    every later record of the process skip the wait: the agent, a
    long-lived process importing the core, lost marks to a lock held a
    moment.)"""
    from lecode_memctl.core import seen

    monkeypatch.setattr(seen, "LOCK_WAIT", 0.3)
    told: list[str] = []
    monkeypatch.setattr(seen, "busy_note", told.append)
    state = Path(os.environ["HOME"]) / ".local" / "state" / "lecode-memctl"

    def timed(store: str) -> float:
        start = time.monotonic()
        assert seen.record(state, tmp_path / store, 1, 1) is None
        return time.monotonic() - start

    with lock_held(release_after=5.0):
        with seen.lock_wait_at_most(None):
            first, second = timed("a"), timed("b")
        alone = timed("c")
        with seen.lock_wait_at_most(None):
            again = timed("d")
    assert first >= 0.25 and second < 0.1 and alone >= 0.25 and again >= 0.25, \
        (first, second, alone, again)
    assert ["waited 0.3 s" in t for t in told] == [True, False, True, True], told
    assert "not waited for: held already for a store before it in this run" in told[1]
    with seen.lock_wait_at_most(None):       # let go: recorded
        assert seen.record(state, tmp_path / "a", 1, 1) is not None


def test_validate_quiet_writes_no_note(demo, monkeypatch):
    """``validate --quiet`` prints nothing on stderr but errors: the note of a
    busy state lock (cron mail, for a cron job that runs --quiet) is not
    written."""
    from lecode_memctl.core import seen

    monkeypatch.setattr(seen, "LOCK_WAIT", 0.1)
    with lock_held(release_after=3.0):
        quiet = run_cli("--store", str(demo), "validate", "--quiet")
        loud = run_cli("--store", str(demo), "validate")
    assert quiet.exit_code == loud.exit_code == 1       # (the demo's planted finding)
    assert quiet.stderr == "", quiet.stderr
    assert "memctl: note: the state directory's lock" in loud.stderr
    # main leaves nothing of the command behind in its process: a library
    # caller that ran it is not given memctl's notes, nor --quiet
    from lecode_memctl.cli.state import STATE

    run_cli("--store", str(demo), "validate", "--quiet")
    assert seen.busy_note is None and STATE.quiet is False


@pytest.mark.parametrize("command", ["forget", "redact"])
def test_the_state_lock_is_waited_for_no_longer_than_lock_wait(demo, command):
    """``--lock-wait 0``: the state lock is tried once (the bound of 2 s
    is the longest; the repro's ``forget --lock-wait 1`` hung for ever)."""
    args = (["forget", VERIFIED, "--yes"] if command == "forget"
            else ["redact", "--yes"])
    if command == "redact":
        r = run_cli("--no-state", "--store", str(demo), "correct", VERIFIED, "1",
                    "demo-alpha:1", "deploy key AKIAQWERTYUIOPASDFGH", "--yes")
        assert r.exit_code == 0, r.stderr
    with lock_held(release_after=1.5):
        start = time.monotonic()
        r = run_cli("--store", str(demo), *args, "--lock-wait", "0")
        took = time.monotonic() - start
        assert mark_files() == []
    assert took < 1.0, (took, r.stderr)
    assert r.exit_code == 0, r.stderr
    assert "(waited 0 s)" in r.stderr and "is not recorded" in r.stderr, r.stderr


def test_a_huge_mark_file_is_not_read_whole(demo, monkeypatch):
    """A mark file grown huge (damaged: ``truncate -s 3G``) is no mark, and
    not read whole first (exit 70 MemoryError under a memory limit, 6 GB
    of memory without, before)."""
    from lecode_memctl.core import seen

    r = run_cli("--store", str(demo), "validate")
    (mark,) = mark_files()
    os.truncate(mark, 3 << 30)          # sparse: no room taken
    read: list[int] = []
    real_read = os.read

    def counted(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(seen.os, "read", counted)
    assert seen.load(seen.state_dir(), demo) is None
    assert sum(read) <= seen._MAX_MARK + 1
    # the commands take it for no mark, and replace it
    r = run_cli("--store", str(demo), "forget", VERIFIED, "--yes")
    assert r.exit_code == 0, r.stderr
    assert sum(read) <= 2 * (seen._MAX_MARK + 1)
    doc = orjson.loads(mark.read_bytes())
    assert doc["generation"] == 2


def test_the_core_prints_nothing_and_the_cli_escapes_the_note(tmp_path, capsys):
    """The core is a library the agent imports (tests/test_core_imports.py):
    by itself ``core.seen`` writes nothing on its caller's stderr when the
    lock is busy (``record`` returns None); it tells ``seen.busy_note``,
    which memctl's command line sets, and the CLI writes the note, its
    names' terminal controls escaped."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from lecode_memctl.core import seen\n"
            "seen._busy_note(Path('/a/.lock'), '/store', 0.5)\n"
            "told = []; seen.busy_note = told.append\n"
            "seen._busy_note(Path('/a/.lock'), '/store', 0.5)\n"
            "print(told)\n"
            "print(sorted(m for m in sys.modules if m.startswith('lecode_memctl.cli')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    told, cli = proc.stdout.splitlines()
    assert "the state directory's lock /a/.lock is held by another process" in told
    assert cli == "[]"
    from lecode_memctl.cli.state import _busy_note

    _busy_note("the lock /a\x1bb/.lock of /st\u202eore\n")
    assert capsys.readouterr().err == "memctl: note: the lock /a\\x1bb/.lock of /st\\u202eore\\n\n"
