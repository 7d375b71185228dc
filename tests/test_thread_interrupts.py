"""A Ctrl-C anywhere in the store's lock code (FactStore's "Threads": the
re-entrant lock a writer's calls take) neither leaves the lock held nor
lets it go early.  CPython runs a signal handler, so raises the interrupt,
only where its eval loop checks for one: as a function is entered, after
a call of C code returns, at a backward jump.  The sweeps raise a
KeyboardInterrupt at each of those points in turn, in the functions that
take and let go the lock, and check after each that another thread can
take the store (a lock held by the interrupted thread made every call of
every other thread StoreBusy, and ``close()`` from another thread wait
forever) and that no transaction is left open.

Two windows were found: an interrupt landing as the function that lets the
lock go is entered (it ran none of its code: the lock stayed held), and
one landing as a nested call's acquire is entered (a read made inside a
write, the exclusions read by ``remember``'s validation): the nested
call's ``finally`` let go the *outer* call's hold, and the write rolled
back, its ``_Txn.__exit__`` included, with the store open to other
threads, whose transaction on the shared connection it could roll back."""

from __future__ import annotations

import shutil
import sys
import threading
from typing import Any

import pytest

from lecode_memctl.core import facts as facts_mod, open_project

# the wrappers of facts.py that take and let go a writer's lock (by the
# name of their code objects), the write's wrapper and the lazy reads' too
LOCK_CODE = {"_held", "_let_go", "call", "write", "rows", "_each_held", "_call",
             "_guarded", "_locked"}
CALLS = ("CALL", "CALL_FUNCTION_EX")
GENERATOR = 0x20 | 0x200        # CO_GENERATOR | CO_ASYNC_GENERATOR


def _free_for_another_thread(store: Any) -> bool:
    got: list[bool] = []

    def take() -> None:
        ok = store._lock.acquire(timeout=0)
        if ok:
            store._lock.release()
        got.append(ok)

    t = threading.Thread(target=take)
    t.start()
    t.join()
    return got[0]


def sweep(store: Any, op: Any) -> tuple[int, list[str]]:
    """``op()`` with a KeyboardInterrupt at its k-th interrupt point in
    :data:`LOCK_CODE`, k = 1, 2, ... until it runs to the end."""
    bad: list[str] = []
    k = 0
    while True:
        k += 1
        seen = 0
        where: list[tuple[str, int | None, str]] = []
        entered: set[int] = set()
        prev: dict[int, str] = {}

        def trace(frame: Any, event: str, arg: Any, k: int = k, where: list[Any] = where,
                  entered: set[int] = entered, prev: dict[int, str] = prev) -> Any:
            nonlocal seen
            code = frame.f_code
            if event == "call" and frame.f_back is not None and \
                    not code.co_flags & GENERATOR and prev.get(id(frame.f_back)) in CALLS:
                # a Python function called by the CALL just made: no check
                # for an interrupt when it returns (only as it is entered)
                prev[id(frame.f_back)] = "CALL (Python)"
            if code.co_name not in LOCK_CODE or "lecode_memctl" not in code.co_filename:
                return None
            frame.f_trace_opcodes = True
            if event == "opcode":
                key = id(frame)
                name = next(i.opname for i in _instructions(code) if i.offset == frame.f_lasti)
                point = key not in entered or prev.get(key) in CALLS
                entered.add(key)
                prev[key] = name
                if point:
                    seen += 1
                    if seen == k:
                        where.append((code.co_name, frame.f_lineno, name))
                        raise KeyboardInterrupt
            return trace

        sys.settrace(trace)
        try:
            op()
        except BaseException:  # noqa: BLE001, S110 - the interrupt, or what it caused
            pass
        finally:
            sys.settrace(None)
        owned = store._lock._is_owned()
        while store._lock._is_owned():      # (so that the next step starts clean)
            store._lock.release()
        free = _free_for_another_thread(store)
        txn = store._conn is not None and store._conn.in_transaction
        if owned or not free or txn:
            bad.append(f"{where}: held={owned} other-thread-blocked={not free} txn={txn}")
        if not where:
            return k, bad


_CODES: dict[Any, list[Any]] = {}


def _instructions(code: Any) -> list[Any]:
    import dis

    if code not in _CODES:
        _CODES[code] = list(dis.get_instructions(code))
    return _CODES[code]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The store of 300 messages and one fact, and the messages' refs, built
    once (0.2 to 0.4 s a build); each test gets a copy of the store."""
    path = tmp_path_factory.mktemp("interrupts") / "store"
    p = open_project(store=path)
    with p.sessions.create("s1") as w:
        seqs = [w.append_message("user", f"fact number {i}") for i in range(300)]
    refs = [p.sessions.source_snapshot("s1", s, s).ref for s in seqs]
    p.remember("fact number 0", refs[0])
    p.close()
    return path, refs


@pytest.fixture
def project(template, tmp_path):
    path, refs = template
    shutil.copytree(path, tmp_path / "store", symlinks=True)
    p = open_project(store=tmp_path / "store")
    p.refs = list(refs)     # (SourceRefs are values: the copy's messages are the same)
    yield p
    p.close()


@pytest.mark.heavy
@pytest.mark.parametrize("op", ["get", "require", "remember", "forget", "iter_fact_revisions",
                                "iter_facts"])
def test_an_interrupt_anywhere_in_the_lock_code_leaves_the_store_to_the_other_threads(
        project, op):
    fs = project.facts
    fid = fs.list_facts()[0].fact_id
    n = iter(range(1, 300))
    ops = {
        "get": lambda: fs.get(fid),
        "require": lambda: fs.require(fid),             # a read inside a read
        "remember": lambda: project.remember(f"fact number {(i := next(n))}",
                                             project.refs[i]),   # reads inside a write
        "forget": lambda: fs.forget(fs.add(f"to forget {next(n)}").fact.fact_id),
        "iter_fact_revisions": lambda: list(fs.iter_fact_revisions()),
        "iter_facts": lambda: list(fs.iter_facts(batch=1)),
    }
    steps, bad = sweep(fs, ops[op])
    assert steps > 3
    assert bad == []


def test_an_interrupted_nested_read_does_not_let_the_outer_write_s_lock_go(project,
                                                                           monkeypatch):
    """A Ctrl-C as a read made inside a write (a public read of the store
    from the write's transaction: as the exclusions read by remember's
    validation, through the project's sessions) enters the lock code: the
    write is rolled back while it still holds the store (another thread
    waiting to write cannot begin its transaction on the shared connection
    in between, to have it rolled back by this one's ``_Txn.__exit__``),
    and the store is free once the write has ended.  The interrupt lands as
    each function of the lock code is entered, in turn."""
    fs = project.facts
    real_rollback = facts_mod.FactStore._Txn._rolled_back
    real_insert = facts_mod.FactStore._insert_revision
    k = 0
    rolled_back_holding: list[bool] = []
    entered: list[str] = []

    def rolled_back(self: Any, db: Any) -> None:
        rolled_back_holding.append(fs._lock._is_owned())
        real_rollback(self, db)

    def trace(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and "lecode_memctl" in code.co_filename and code.co_name in LOCK_CODE:
            entered.append(code.co_name)
            if len(entered) == k:
                sys.settrace(None)
                raise KeyboardInterrupt     # as a Ctrl-C as it is entered
        return None

    def insert_revision(self: Any, *args: Any, **kwargs: Any) -> None:
        sys.settrace(trace)
        try:
            self.exclusion_count()          # a nested public read, in the transaction
        finally:
            sys.settrace(None)
        real_insert(self, *args, **kwargs)

    monkeypatch.setattr(facts_mod.FactStore._Txn, "_rolled_back", rolled_back)
    monkeypatch.setattr(facts_mod.FactStore, "_insert_revision", insert_revision)
    problems = []
    for k in range(1, 10):
        entered.clear()
        rolled_back_holding.clear()
        try:
            project.remember(f"fact number {k}", project.refs[k])
        except KeyboardInterrupt:
            pass
        if len(entered) < k:
            break                           # (no k-th entry: it ran to the end)
        owned = fs._lock._is_owned()
        while fs._lock._is_owned():
            fs._lock.release()
        if not all(rolled_back_holding) or owned or not _free_for_another_thread(fs) \
                or fs._conn.in_transaction:
            problems.append(f"at the entry of {entered[k - 1]}: rolled back holding the "
                            f"lock {rolled_back_holding}, left held {owned}")
    assert k > 1
    assert problems == []
