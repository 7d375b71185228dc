"""`correct` and `forget` (a review of 2026-12-07, second pass):

- a Ctrl-C or SIGTERM while they wait for a busy facts database stops them
  at once (SQLite's busy wait, C code, held off Python's signal handlers
  for the whole --lock-wait, a second Ctrl-C too);
- a signal that lands just after the COMMIT still says the change was
  written (and forget still records its mark);
- EOF (Ctrl-D) at their confirmation prompt is a declined prompt (exit 1,
  nothing changed), not an interrupt (130)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .builders import copy_demo
from .conftest import tree_hash

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="Linux: signals, /proc")

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    return copy_demo(demo_template, tmp_path / "demo")


def _memctl(*args: str, **kw) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "lecode_memctl", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _unchanged(store: Path) -> dict[str, str]:
    """The store's files as 'nothing was changed' compares them (the
    shared-memory index of the WAL, which a reader writes, left out)."""
    return {k: v for k, v in tree_hash(store).items() if not k.endswith("-shm")}


# ---------------------------------------------------------------- 1. a signal while waiting

HOLD = """\
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(60)
"""


WAITING = {
    "forget": ["forget", VERIFIED, "--yes"],
    "correct": ["correct", VERIFIED, "1", "demo-alpha:1", "a corrected text", "--yes"],
}


@pytest.mark.parametrize("command", sorted(WAITING))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_write_waiting_for_a_busy_database_at_once(demo, command, sig):
    """Another process holds the write lock; memctl waits for it (--lock-wait
    15).  A Ctrl-C or SIGTERM after a second stops it within a second or
    two, nothing written.  Before, SQLite's busy wait (C code) held the
    signal until the 15 s were over."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(demo / "facts.sqlite3")],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        before = _unchanged(demo)
        p = _memctl("--store", str(demo), *WAITING[command], "--lock-wait", "15")
        time.sleep(1.0)
        assert p.poll() is None, p.communicate()
        sent = time.monotonic()
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        holder.kill()
        holder.wait()
    assert took < 3, (took, err)
    if sig == signal.SIGINT:
        assert p.returncode == 130, err
        assert err == b"memctl: error: interrupted\n"
    else:
        assert p.returncode == -signal.SIGTERM, err
        assert err == b"memctl: error: terminated by SIGTERM\n"
    assert out == b""
    assert _unchanged(demo) == before


def test_the_writer_api_still_waits_its_busy_timeout_then_store_busy(demo):
    """The agent's writer (FactStore) waits its busy_timeout for another
    writer's lock, then raises StoreBusy (the SQLite error its cause), as
    docs/API.md says."""
    from lecode_memctl.core.errors import StoreBusy
    from lecode_memctl.core.facts import FactStore

    holder = sqlite3.connect(demo / "facts.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with FactStore(demo / "facts.sqlite3", busy_timeout=0.6) as fs:
            began = time.monotonic()
            with pytest.raises(StoreBusy, match="locked by another writer") as got:
                fs.forget(VERIFIED)
            took = time.monotonic() - began
            assert isinstance(got.value.__cause__, sqlite3.OperationalError)
            assert 0.55 <= took < 3, took
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # a lock let go within the wait: the write is made then
    holder = sqlite3.connect(demo / "facts.sqlite3", isolation_level=None,
                             check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.4, lambda: holder.execute("ROLLBACK"))
    timer.start()
    try:
        with FactStore(demo / "facts.sqlite3", busy_timeout=5) as fs:
            began = time.monotonic()
            assert fs.forget(VERIFIED)
            assert 0.3 <= time.monotonic() - began < 3
    finally:
        timer.join()
        holder.close()


# ---------------------------------------------------------------- 2. a signal just after the COMMIT

# memctl's own process (main() reads sys.argv, its signal handlers
# installed), with SIG sent to itself as soon as a write transaction has
# committed (_Txn.__exit__ returned without an error)
AFTER_COMMIT = """\
import os, signal, sys, time
from lecode_memctl.core.facts import FactStore
real = FactStore._Txn.__exit__
def exit_then_signal(self, exc_type, exc, tb):
    out = real(self, exc_type, exc, tb)
    if exc_type is None:
        os.kill(os.getpid(), signal.{sig})
        time.sleep(0.05)
    return out
FactStore._Txn.__exit__ = exit_then_signal
from lecode_memctl.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("command", sorted(WAITING))
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_just_after_the_commit_says_the_change_was_written(demo, command, sig):
    """A Ctrl-C or SIGTERM that lands as the write's COMMIT returns: the
    line says what was written, as OUTPUT.md documents, and forget records
    the store's new generation outside the store (its mark).  Before, the
    interrupt left fs.forget() / fs.correct() before the command named
    what it had written: `interrupted` alone, and no mark."""
    from lecode_memctl.core import seen
    from lecode_memctl.core.facts import FactStore

    p = subprocess.run([sys.executable, "-c", AFTER_COMMIT.format(sig=sig), "--store", str(demo),
                        *WAITING[command]], capture_output=True, timeout=60)
    with FactStore.open_readonly(demo / "facts.sqlite3") as fs:
        fact = fs.get(VERIFIED)
        generation = fs.generation()
    if command == "forget":
        assert fact is None
        written = f"the forget of {VERIFIED} was written"
        mark = seen.load(seen.state_dir(), demo)
        assert mark is not None and mark.generation == generation == 2, mark
    else:
        assert fact is not None and fact.revision == 2 and fact.text == "a corrected text"
        written = f"the correction of {VERIFIED} was written (revision 2)"
    said = "interrupted" if sig == "SIGINT" else "terminated by SIGTERM"
    assert p.stderr.decode() == f"memctl: error: {said}; {written}\n"
    assert p.returncode == (130 if sig == "SIGINT" else -signal.SIGTERM)
    assert p.stdout == b""


# ---------------------------------------------------------------- 3. EOF at the prompt

STALE = "0fae3f4a2974d11f"     # the demo's stale fact: correcting it asks first

PROMPTED = {
    "forget": (["forget", VERIFIED], "Forget fact", "nothing forgotten"),
    "correct": (["correct", STALE, "1", "demo-alpha:1", "a corrected text"],
                f"Correct fact {STALE} anyway?", "nothing corrected"),
}


def _on_a_terminal(args: list[str], typed: bytes) -> subprocess.CompletedProcess[bytes]:
    """memctl ARGS with stdin a terminal on which ``typed`` was typed."""
    import pty

    master, slave = pty.openpty()
    try:
        os.write(master, typed)
        return subprocess.run([sys.executable, "-m", "lecode_memctl", *args], stdin=slave,
                              capture_output=True, timeout=60)
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.parametrize("command", sorted(PROMPTED))
@pytest.mark.parametrize("typed", [b"\x04", b"n\n"], ids=["ctrl-d", "n"])
def test_eof_at_the_prompt_is_a_declined_prompt(demo, command, typed):
    """Ctrl-D at forget's or correct's question is the question declined:
    exit 1, nothing changed, the line an 'n' gives (README's exit table).
    Before, click's Abort for the EOF was taken for a Ctrl-C: `memctl:
    error: interrupted`, 130."""
    args, question, declined = PROMPTED[command]
    before = _unchanged(demo)
    p = _on_a_terminal(["--store", str(demo), *args], typed)
    assert p.returncode == 1, p.stderr
    err = p.stderr.decode()
    assert question in err
    # (a terminal echoes the 'n' and its newline, not a Ctrl-D: memctl ends
    # the question's line itself then)
    ended = "\n" if typed == b"\x04" else ""
    assert err.endswith(f"[y/N]:{ended}{declined}\n"), err
    assert "interrupted" not in err
    assert _unchanged(demo) == before


@pytest.mark.parametrize("typed", [b"\x04", b"n\n"], ids=["ctrl-d", "n"])
def test_eof_at_redacts_prompt_is_declined_too(tmp_path, typed):
    """The same prompt helper asks redact's question."""
    from . import secretstore

    store = secretstore.build(tmp_path, seed=11).store
    before = _unchanged(store)
    p = _on_a_terminal(["--store", str(store), "redact", "--jobs", "1"], typed)
    assert p.returncode == 1, p.stderr
    ended = "\n" if typed == b"\x04" else ""
    assert p.stderr.decode().endswith(f"[y/N]:{ended}nothing redacted\n"), p.stderr
    assert _unchanged(store) == before


def test_eof_at_migrate_legacys_prompt_is_declined_too(tmp_path, config_dir):
    """... and migrate-legacy's."""
    from lecode_memctl.core.identity import slug

    from .conftest import make_repo

    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    legacy = config_dir / "memory" / slug(os.path.realpath(repo / "a"))
    legacy.mkdir(parents=True)
    (legacy / "MEMORY.md").write_text("m\n")
    store = config_dir / "memory" / slug(str(os.path.realpath(repo)))
    p = _on_a_terminal(["-C", str(repo / "a"), "migrate-legacy"], b"\x04")
    assert p.returncode == 1, p.stderr
    assert p.stderr.endswith(b"[y/N]:\nnothing was copied\n"), p.stderr
    assert not store.exists()


@pytest.mark.parametrize("command", sorted(PROMPTED))
def test_ctrl_c_at_the_prompt_is_still_an_interrupt(demo, command):
    """A Ctrl-C at the question stays an interrupt (130), nothing changed."""
    import pty

    args, _question, _declined = PROMPTED[command]
    before = _unchanged(demo)
    master, slave = pty.openpty()
    try:
        p = _memctl("--store", str(demo), *args, stdin=slave)
        assert p.stderr is not None
        seen = b""
        deadline = time.monotonic() + 30
        while b"[y/N]:" not in seen and time.monotonic() < deadline:
            piece = os.read(p.stderr.fileno(), 65536)
            if not piece:
                break
            seen += piece
        assert b"[y/N]:" in seen, seen
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 130, seen + err
    assert (seen + err).decode().endswith("[y/N]:memctl: error: interrupted\n"), seen + err
    assert _unchanged(demo) == before
