"""A Ctrl-C anywhere in opening, reading or closing a store leaks no file
descriptor, lock or SQLite connection: the agent imports the core library
in a process that lives for days, and each interrupted read left a
descriptor (the facts database's copy, a transcript, a session's lock)
that nothing would ever close, or a connection only a full collection
would close (a connection is in a reference cycle of its own).

Each sweep raises KeyboardInterrupt at every bytecode, in turn, of the
functions that open, hand over and close these (where a signal handler
may run), then counts the descriptors open (``/proc/self/fd``, after a
collection) and the SQLite connections still open (before one).  The one
window CPython leaves is allowed: an interrupt right after ``os.open`` or
``sqlite3.connect`` returned, before its result is stored anywhere (the
descriptor is a bare int on the stack then), and its like for a
connection: one that lands as ``_Connection.__init__`` returns the
connection just made, through ``sqlite3.connect`` (C), to its caller.
And one that lands as ``ClosesOnExit.__del__`` is entered, before its
first statement: nothing of it can run before that."""

from __future__ import annotations

import dis
import gc
import linecache
import os
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from types import CodeType

import pytest

from lecode_memctl.core.facts import FactStore, _Connection
from lecode_memctl.core.sessions import ClosesOnExit, SessionStore

from .builders import copy_demo

pytestmark = [
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc"),
    # (a file or store an interrupt dropped closes when collected, and says so)
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

# the calls whose result is a bare descriptor (or a connection) until stored
UNOWNED = ("os.open(", "sqlite3.connect(")

_OPNAMES: dict[CodeType, dict[int, str]] = {}

# (the return of _Connection.__init__, after SQLite's open: line and code)
_MADE = (next(line for _s, _e, line in _Connection.__init__.__code__.co_lines()
              if line is not None and "super().__init__(" in linecache.getline(
                  _Connection.__init__.__code__.co_filename, line)),
         _Connection.__init__.__code__)


def _opname(code: CodeType, offset: int) -> str:
    names = _OPNAMES.get(code)
    if names is None:
        names = _OPNAMES[code] = {i.offset: i.opname for i in dis.get_instructions(code)}
    return names.get(offset, "?")


def _open_connections() -> list[sqlite3.Connection]:
    found = []
    for obj in gc.get_objects():        # (only what the sweep made: the rest is frozen)
        if isinstance(obj, sqlite3.Connection):
            try:
                _ = obj.total_changes
            except sqlite3.ProgrammingError:
                continue                # closed
            found.append(obj)
    return found


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1]
    except OSError:
        return "?"


def _fds(besides: frozenset[str] = frozenset()) -> set[str]:
    """The descriptors open, but for ``besides`` (not looked at: a sweep's
    own, open before it)."""
    # (less the listing's own descriptor, closed by now)
    return {fd for fd in os.listdir("/proc/self/fd") if fd not in besides and _target(fd) != "?"}


def sweep(op: Callable[[], object], traced: set[str]) -> tuple[int, list[str]]:
    """Run ``op`` with a KeyboardInterrupt at its k-th bytecode in the
    functions named ``traced`` (of lecode_memctl), for k = 1, 2, ... until
    it runs to the end: (steps, leaks), each leak described by where the
    interrupt landed.  A leak in the window of :data:`UNOWNED` is not one."""
    op()
    gc.collect()
    # (the objects made so far out of the collector's sight: each
    # gc.collect() and gc.get_objects() below walks what one run made)
    gc.freeze()
    try:
        fds, conns = frozenset(_fds()), len(_open_connections())
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        leaks: list[str] = []
        k = 0
        while True:
            k += 1
            seen = 0
            where: list[tuple[str, int | None, str, bool]] = []
            # (each frame's last opcode: its line and offset; named when needed)
            last: dict[int, tuple[int | None, int]] = {}

            def step(frame, event, arg, k=k, where=where, last=last):
                nonlocal seen
                if seen >= k:       # (the interrupt is raised: nothing more to count)
                    return None
                if event == "opcode":
                    seen += 1
                    if seen == k:
                        code = frame.f_code
                        name = _opname(code, frame.f_lasti)
                        line, prev_at = last.get(id(frame), (None, -1))
                        prev = _opname(code, prev_at) if prev_at >= 0 else ""
                        text = linecache.getline(code.co_filename, line or 0)
                        window = (prev == "CALL" and any(u in text for u in UNOWNED)
                                  or (code is _MADE[1] and frame.f_lineno == _MADE[0]
                                      and name in ("LOAD_CONST", "RETURN_VALUE"))
                                  or (code is ClosesOnExit.__del__.__code__ and not prev))
                        where.append((code.co_name, frame.f_lineno, name, window))
                        raise KeyboardInterrupt
                    last[id(frame)] = (frame.f_lineno, frame.f_lasti)
                return step

            def trace(frame, event, arg, step=step):
                # a call: whether to trace the frame, checked once for it
                code = frame.f_code
                if code.co_name not in traced or "lecode_memctl" not in code.co_filename:
                    return None
                frame.f_trace_opcodes = True
                return step

            sys.settrace(trace)
            try:
                op()
            except BaseException:  # noqa: BLE001, S110 - (raised by the trace inside an
                pass                # except clause, Python 3.11 may give the handled error)
            finally:
                sys.settrace(None)
                # (the opens hold SIGINT and the like while they hand a
                # descriptor over, atomic.open_owned: no signal handler can
                # raise there, but the trace can, in the finally that lets
                # them go, and left them blocked for the rest of the run:
                # every memctl a later test started inherited the mask)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            left = _open_connections()      # left to the collector: open until it runs
            gc.collect()
            extra = _fds(fds)
            if (extra or len(left) > conns) and not (where and where[0][3]):
                leaks.append(f"{where[0][:3] if where else 'after the end'}: "
                             f"{len(extra)} descriptors, {len(left) - conns} connections "
                             f"{[_target(fd) for fd in extra]}")
            for c in left:
                sqlite3.Connection.close(c)     # (not _Connection's: it may be half made)
            for fd in extra:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
            if not where:               # (ran to the end: no k-th bytecode)
                return k, leaks
    finally:
        gc.unfreeze()


@pytest.fixture
def demo_store(demo_template, tmp_path, monkeypatch):
    store = copy_demo(demo_template, tmp_path / "demo")
    tmp = tmp_path / "TMPDIR"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return store


SNAPSHOT = {"__init__", "open_readonly", "_open_readonly", "_closed_on_failure", "_made_tmpdir",
            "_open_snapshot", "_snapshot_connection", "_connect", "close", "__del__",
            "private_snapshot", "record", "_copy_nofollow", "_copy_database", "_open_regular",
            "_open_nofollow", "_wal_valid_length", "open_nofollow", "open_owned", "<lambda>",
            "_writing_copy"}


@pytest.mark.heavy
@pytest.mark.parametrize("wal", [False, True])
def test_an_interrupt_anywhere_in_a_readonly_open_leaks_nothing(demo_store, wal):
    """The database (and its -wal: a writer's, still open) copied into the
    private snapshot, the copy connected to, then closed."""
    db = demo_store / "facts.sqlite3"
    writer = None
    if wal:
        writer = sqlite3.connect(db, isolation_level=None)
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        # (a change SQLite writes: a value set to itself may write no page)
        writer.execute("UPDATE facts SET updated = updated || 'x'")
        writer.execute("UPDATE facts SET updated = substr(updated, 1, length(updated) - 1)")
        assert os.path.getsize(str(db) + "-wal") > 0
    try:
        steps, leaks = sweep(lambda: FactStore.open_readonly(db).close(), SNAPSHOT)
    finally:
        if writer is not None:
            writer.close()
    assert leaks == []
    assert steps > 500


def test_an_interrupt_anywhere_in_a_listing_leaks_no_connection(demo_store):
    """The listing's second connection (``_sibling``), recorded as it is made."""
    fs = FactStore.open_readonly(demo_store / "facts.sqlite3")
    try:
        def listing() -> None:
            try:
                list(fs.stored_sources_by_session())
            finally:
                for db in fs._siblings:
                    db.close()
                fs._siblings = []

        steps, leaks = sweep(listing, {"_sibling", "_connect", "stored_sources_by_session"})
    finally:
        fs.close()
    assert leaks == []
    assert steps > 50


def _session(ss: SessionStore) -> None:
    with ss.create("s1", created="2026-01-01T00:00:00Z") as w:
        for i in range(3):
            w.append_message("user", f"message {i}")


SESSION_OPEN = {"_open", "_open_checked", "open_nofollow", "open_owned", "<lambda>", "__init__",
                "close", "__exit__", "records", "header"}


def test_an_interrupt_anywhere_in_a_transcript_read_leaks_nothing(ss):
    _session(ss)
    steps, leaks = sweep(lambda: (ss.records("s1", 0, 1), ss.header("s1")), SESSION_OPEN)
    assert leaks == []
    assert steps > 100


def test_an_interrupt_anywhere_in_a_writer_open_or_close_leaks_no_lock(ss):
    """``SessionStore.writer`` (the lock, the transcript opened to append)
    and ``SessionWriter.close``: it cleared its attributes before closing
    them, and an interrupt between the two left the lock held for good."""
    _session(ss)
    steps, leaks = sweep(lambda: ss.writer("s1").close(),
                         SESSION_OPEN | {"writer", "lock_session", "last_lines", "_lstat_dir"})
    assert leaks == []
    assert steps > 100
    ss.writer("s1").close()         # (the lock is free)


@pytest.mark.heavy
def test_an_interrupt_in_a_collected_store_s_close_leaks_nothing(demo_store):
    """``ClosesOnExit.__del__``: an interrupt that lands in the ``close``
    it runs (a store dropped without being closed) ends it no more: the
    close goes on, and the connection and the private copy go with it."""
    db = demo_store / "facts.sqlite3"

    def dropped() -> None:
        fs = FactStore.open_readonly(db)
        real(tracer[0])
        del fs                          # (no cycle: __del__ runs here)

    tracer: list[Callable[..., object] | None] = [None]
    real = sys.settrace

    def settrace(fn):                   # the sweep's tracer, set only around the del
        tracer[0] = fn
        if fn is None:
            real(None)

    sys.settrace = settrace
    try:
        steps, leaks = sweep(dropped, {"__del__", "close", "_close_now"})
    finally:
        sys.settrace = real
    assert leaks == []
    assert steps > 50
    # (the private copy of the one interrupt as __del__ was entered: none else)
    assert len(os.listdir(os.environ["TMPDIR"])) <= 1


@pytest.mark.parametrize("where", ["_open_snapshot", "_snapshot_connection"])
def test_an_interrupt_in_an_open_closes_at_once_while_its_traceback_is_kept(
        demo_store, monkeypatch, where):
    """The open closes what it opened as the interrupt passes, not when the
    half-made store is collected: a caller that keeps the exception (a
    report, a log, ``sys.last_value`` at an interactive prompt) keeps its
    traceback, whose frames hold the store, and with it the snapshot's
    directory and its connection, open until then.  (The sweep above cannot
    tell: the exception it catches is dropped, and the store with it, before
    it looks.)"""
    db = demo_store / "facts.sqlite3"
    tmp = Path(os.environ["TMPDIR"])
    fds = _fds()
    conns = len(_open_connections())

    def interrupted(self, *args, **kwargs):
        if where == "_snapshot_connection":
            real(self, *args, **kwargs)        # (the snapshot's connection made)
        raise KeyboardInterrupt

    real = getattr(FactStore, where)
    monkeypatch.setattr(FactStore, where, interrupted)
    with pytest.raises(KeyboardInterrupt) as kept:
        FactStore.open_readonly(db)
    assert kept.value.__traceback__ is not None       # (held here, frames and all)
    assert list(tmp.iterdir()) == []
    assert _fds(frozenset(fds)) == set()
    assert len(_open_connections()) == conns
