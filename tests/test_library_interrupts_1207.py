"""The core library as the lecode agent imports it, after the review of
2026-12-07 (rv75): an interrupt leaks no descriptor from the opens that
hand one over, and bad arguments of documented calls raise typed errors
(docs/API.md), never a raw ValueError, TypeError or UnicodeEncodeError."""

from __future__ import annotations

import os
import signal

import pytest

from lecode_memctl.core import atomic

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="counts descriptors in /proc")


def _fds() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(f"{fd} {os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            pass
    return out


@pytest.fixture
def alarm_interrupts():
    """SIGALRM's handler raises KeyboardInterrupt (a timeout's or a Ctrl-C's
    like) while the test runs."""
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGALRM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, before)


def _signal_after(monkeypatch, name, when):
    """``os.NAME`` that raises SIGALRM right after the real call returned
    (the handler runs as ``raise_signal`` returns: in CPython's window
    between a C call's return and the store of its result) for the calls
    ``when(args)`` picks, once."""
    real = getattr(os, name)
    fired = []

    def wrapper(*args, **kw):
        out = real(*args, **kw)
        if not fired and when(args, kw):
            fired.append(args)
            signal.raise_signal(signal.SIGALRM)
        return out
    monkeypatch.setattr(os, name, wrapper)
    return fired


def test_an_interrupt_as_open_in_dirs_directory_open_returns_leaks_nothing(
        tmp_path, monkeypatch, alarm_interrupts):
    """rv75 item 1: the directory's descriptor was opened before the try that
    closes it: an interrupt as ``os.open`` returned left it open for good."""
    (tmp_path / "sessions").mkdir()
    f = tmp_path / "sessions" / "s1.jsonl"
    f.write_bytes(b"{}\n")
    before = _fds()
    fired = _signal_after(monkeypatch, "open",
                          lambda a, kw: bool(a[1] & os.O_DIRECTORY) and str(a[0]).endswith("sessions"))
    with pytest.raises(KeyboardInterrupt):
        atomic.open_in_dir(f)
    monkeypatch.undo()
    assert fired
    assert _fds() == before
    os.close(atomic.open_in_dir(f))     # (and nothing is left held)
    assert signal.SIGALRM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_an_interrupt_in_open_in_dirs_close_of_the_directory_leaks_nothing(
        tmp_path, monkeypatch, alarm_interrupts):
    """rv75 item 1: ``return open_nofollow(...)`` went through ``finally:
    os.close(dfd)``; an interrupt there dropped the file's descriptor."""
    (tmp_path / "sessions").mkdir()
    f = tmp_path / "sessions" / "s1.jsonl"
    f.write_bytes(b"{}\n")
    before = _fds()
    fired = _signal_after(monkeypatch, "close", lambda a, kw: True)
    with pytest.raises(KeyboardInterrupt):
        atomic.open_in_dir(f)
    monkeypatch.undo()
    assert fired
    assert _fds() == before


def test_a_handler_raising_as_the_hold_is_made_leaves_nothing_blocked(monkeypatch):
    """``pthread_sigmask`` runs a pending signal's handler as it returns, the
    block made: a KeyboardInterrupt there lost the mask before and left the
    signals blocked for the life of the process."""
    real = signal.pthread_sigmask

    def block_then_raise(how, mask):
        out = real(how, mask)
        if how == signal.SIG_BLOCK and mask:
            monkeypatch.setattr(signal, "pthread_sigmask", real)
            raise KeyboardInterrupt
        return out
    monkeypatch.setattr(signal, "pthread_sigmask", block_then_raise)
    with pytest.raises(KeyboardInterrupt):
        atomic.hold_signals(atomic._OPEN_HELD)
    monkeypatch.undo()
    assert not set(atomic._OPEN_HELD) & real(signal.SIG_BLOCK, [])


def test_an_interrupt_as_open_owneds_os_open_returns_leaks_nothing(
        tmp_path, monkeypatch, alarm_interrupts):
    """rv75 item 2: the opener is a Python function: an interrupt as its
    ``os.open`` returned never handed the descriptor to FileIO (a session's
    lock left open, unlocked, owned by nothing)."""
    lock = tmp_path / "k1.lock"
    before = _fds()
    fired = _signal_after(monkeypatch, "open", lambda a, kw: str(a[0]).endswith(".lock"))
    with pytest.raises(KeyboardInterrupt):
        atomic.open_owned(lock, os.O_RDWR | os.O_CREAT)
    monkeypatch.undo()
    assert fired
    assert _fds() == before
    with atomic.open_owned(lock, os.O_RDWR) as f:
        assert f.fileno() >= 0
    assert not set(atomic._OPEN_HELD) & signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.mark.parametrize("bad", ["a\x00", None, b"/x", "\ud800"],
                         ids=["nul", "none", "bytes", "surrogate"])
def test_plan_migration_refuses_a_bad_config_dir_or_extra_as_usage(tmp_path, bad):
    """rv75 item 3: a bad ``config_dir`` (or ``extra`` path) raised a raw
    ValueError, TypeError or UnicodeEncodeError, where ``migrate_legacy``'s
    and ``plan_migration``'s ``cwd`` were a UsageError (docs/API.md)."""
    from lecode_memctl.core import UsageError, plan_migration

    with pytest.raises(UsageError, match="plan_migration: config_dir"):
        plan_migration(bad, tmp_path)
    with pytest.raises(UsageError, match="plan_migration: extra"):
        plan_migration(tmp_path, tmp_path, extra=[bad])


@pytest.mark.parametrize("readonly", [True, False], ids=["open_readonly", "writer"])
def test_a_factstore_of_an_empty_path_is_a_usage_error(readonly):
    """rv75 item 4: ``FactStore.open_readonly("")`` raised ``ValueError:
    PosixPath('.') has an empty name`` (and "/" too); ``FactStore("")`` said
    StoreCorrupt.  Empty: UsageError, as ``open_project(store="")``; no name:
    a directory, StoreCorrupt, from both."""
    from lecode_memctl.core import FactStore, StoreCorrupt, UsageError

    make = FactStore.open_readonly if readonly else FactStore
    with pytest.raises(UsageError, match="empty path"):
        make("")
    for nameless in ("/", "."):
        with pytest.raises(StoreCorrupt, match="not a regular file"):
            make(nameless)


@pytest.fixture
def project_with_a_fact(tmp_path):
    from lecode_memctl.core import open_project

    p = open_project(store=tmp_path / "proj-0123456789ab")
    with p.sessions.create("s1") as w:
        s = w.append_message("user", "we use tabs")
    ref = p.sessions.source_snapshot("s1", s, s).ref
    fid = p.remember("we use tabs", ref).fact.fact_id
    try:
        yield p, fid
    finally:
        p.close()


@pytest.mark.parametrize("bad", ["\ud800", 2**70, object(), b"s1", 5],
                         ids=["surrogate", "int_beyond_64_bits", "object", "bytes", "int"])
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "open_readonly"])
def test_iter_fact_revisions_and_groups_refuse_a_bad_session_id_as_usage(
        project_with_a_fact, bad, readonly):
    """rv75 item 5: ``iter_fact_revisions('\\ud800')`` raised a raw
    UnicodeEncodeError, ``2**70`` an OverflowError (at the first row), where
    ``list_facts(session_id=...)`` says "invalid session id"; now at the
    call, from both."""
    from lecode_memctl.core import FactStore, UsageError

    p, _fid = project_with_a_fact
    fs = FactStore.open_readonly(p.store.facts_db) if readonly else p.facts
    try:
        for call in (fs.iter_fact_revisions, fs.iter_fact_groups):
            with pytest.raises(UsageError, match="invalid session id"):
                call(bad)
        assert [f.fact_id for f, _revs in fs.iter_fact_revisions("s1")] == [_fid]
        assert len(list(fs.iter_fact_groups("s1"))) == 1
    finally:
        if readonly:
            fs.close()


@pytest.mark.parametrize("bad", ["\ud800", 2**70, -(2**70), object(), [1]],
                         ids=["surrogate", "int_beyond_64_bits", "negative_beyond", "object", "list"])
def test_factstore_get_refuses_an_id_it_cannot_look_up_as_usage(project_with_a_fact, bad):
    """rv75 item 5: ``FactStore.get`` raised a raw UnicodeEncodeError or
    OverflowError (StoreCorrupt for a type SQLite refuses); an id it can
    look up, malformed or not (one read from a damaged store), still
    answers."""
    from lecode_memctl.core import UsageError

    p, fid = project_with_a_fact
    with pytest.raises(UsageError, match="invalid fact id"):
        p.facts.get(bad)
    assert p.facts.get(fid) is not None
    assert p.facts.get("ZZ") is None and p.facts.get(5) is None and p.facts.get(b"x") is None


def _children() -> set[int]:
    out: set[int] = set()
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/children") as fh:
                out.update(int(pid) for pid in fh.read().split())
        except OSError:
            pass
    return out


def _square(x: int) -> int:
    return x * x


def _blocked(_x: int) -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


@pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{os.getpid()}/children"),
                    reason="lists children in /proc")
def test_an_interrupt_as_a_pool_worker_is_forked_leaves_no_worker(monkeypatch, alarm_interrupts):
    """rv75 item 6: CPython's pool records a worker only after its start
    returned; an interrupt landing as ``fork`` returned (in the parent)
    left a worker nobody ended, waiting for work for the life of the
    process (``validate_store(parallel=True)`` interrupted by an agent's
    handler).  Now held until the worker is recorded, then raised: the
    worker is ended."""
    import multiprocessing
    import time

    from lecode_memctl.core import pools

    ctx = multiprocessing.get_context("fork")
    before = _children()
    real_fork = os.fork
    fired = []

    def fork_then_signal():
        pid = real_fork()
        if pid and not fired:
            fired.append(pid)
            signal.raise_signal(signal.SIGALRM)
        return pid
    monkeypatch.setattr(os, "fork", fork_then_signal)
    with pytest.raises(KeyboardInterrupt), pools.process_pool(2, ctx) as pool:
        pool.submit(_square, 3).result()
    monkeypatch.undo()
    assert fired
    deadline = time.monotonic() + 10
    while (_children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _children() - before
    for pid in left:        # (what the test left, ended)
        os.kill(pid, signal.SIGKILL)
    assert not left
    # a pool works as before, its workers' signals not held
    with pools.process_pool(2, ctx) as pool:
        assert pool.submit(_square, 4).result() == 16
        assert not set(atomic._OPEN_HELD) & pool.submit(_blocked, 0).result()


@pytest.mark.parametrize("opener", ["open_owned", "open_in_dir"])
def test_an_exception_right_after_the_hold_is_made_leaves_nothing_blocked(tmp_path, opener):
    """The hold's mask was stored after it was made (``before =
    hold_signals(...)``, before the ``try``): an exception at that store
    (tests/test_interrupt_leaks.py's sweep raises one at every opcode) left
    SIGINT and the like blocked for the rest of the process, and every
    memctl a later test started inherited them (Ctrl-C tests failed).  Now
    the mask is taken inside the ``try`` whose ``finally`` restores it."""
    import sys

    f = tmp_path / "s1.jsonl"
    f.write_bytes(b"{}\n")
    code = getattr(atomic, opener).__code__
    raised = []

    def step(frame, event, arg):
        if event == "opcode" and not raised and signal.SIGALRM in signal.pthread_sigmask(
                signal.SIG_BLOCK, ()):
            raised.append(frame.f_lineno)
            raise KeyboardInterrupt
        return step

    def trace(frame, event, arg):
        if frame.f_code is code:
            frame.f_trace_opcodes = True
            return step
        return None
    sys.settrace(trace)
    try:
        with pytest.raises(KeyboardInterrupt):
            out = getattr(atomic, opener)(f)
            (out.close() if hasattr(out, "close") else os.close(out))
    finally:
        sys.settrace(None)
    assert raised
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, atomic._OPEN_HELD)    # (whatever happened)
    assert not set(atomic._OPEN_HELD) & blocked


def test_factstore_get_looks_a_byte_buffer_up_as_a_blob(demo_template, tmp_path):
    """A code review: bytearray and memoryview ids (a BLOB SQLite binds)
    were refused as invalid by the typed-id check of FactStore.get."""
    import sqlite3

    from lecode_memctl.core.facts import FactStore

    from .builders import copy_demo

    store = copy_demo(demo_template, tmp_path / "d")
    db = sqlite3.connect(store / "facts.sqlite3")
    with db:
        db.execute("INSERT INTO facts VALUES (X'5A5A', 1, '2026-12-01T00:00:00Z', "
                   "'2026-12-01T00:00:00Z')")
        db.execute("INSERT INTO revisions VALUES (X'5A5A', 1, 't', '2026-12-01T00:00:00Z')")
    db.close()
    with FactStore.open_readonly(store / "facts.sqlite3") as fs:
        want = fs.get(b"ZZ")
        assert want is not None
        assert fs.get(bytearray(b"ZZ")) == want and fs.get(memoryview(b"ZZ")) == want
