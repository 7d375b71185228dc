"""One store shared by the threads of an agent process (docs/API.md,
"Threads").  The FactStore writer shares one SQLite connection between
threads: a write of a second thread that began while the first was inside
its BEGIN IMMEDIATE .. COMMIT was refused as a "corrupt" database ("cannot
start a transaction within a transaction", StoreCorrupt), and a read of a
second thread ran inside the first's uncommitted transaction (a fact row
without its revisions: corruption again, to the readers).  Writes now wait
for each other, and reads for a write in progress, bounded by the store's
busy timeout (then StoreBusy, as for a lock another process holds).

The writes are paused mid-transaction by a hook (``_insert_revision``: the
fact row is in, its revision not yet), so that each test is deterministic."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lecode_memctl.core import facts as facts_mod, open_project
from lecode_memctl.core.errors import StoreBusy, UsageError

WAIT = 5.0      # the longest any event below is waited for (a hung test fails)
#: How long a thread that must wait (for another's write in progress) is
#: watched to be still waiting: a call that does not wait ends in about a
#: millisecond on these stores, and one that waits stays alive until the
#: write is let go (WAIT), whatever this is.
BLOCKED = 0.1


class Paused:
    """The next write of a thread named ``name`` pauses inside its
    transaction, just after the fact row was inserted (before its revision):
    ``paused`` is set there, and the write goes on once ``go`` is."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.paused = threading.Event()
        self.go = threading.Event()


@contextmanager
def paused_writes(monkeypatch: pytest.MonkeyPatch, name: str = "writer") -> Iterator[Paused]:
    p = Paused(name)
    real = facts_mod.FactStore._insert_revision

    def insert_revision(self: Any, *args: Any, **kwargs: Any) -> None:
        if threading.current_thread().name == p.name and not p.paused.is_set():
            p.paused.set()
            assert p.go.wait(WAIT)
        real(self, *args, **kwargs)

    monkeypatch.setattr(facts_mod.FactStore, "_insert_revision", insert_revision)
    try:
        yield p
    finally:
        p.go.set()


class Run(threading.Thread):
    """``fn()`` in a thread; ``result()`` its value or its error raised."""

    def __init__(self, fn: Any, name: str | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # noqa: BLE001 - raised by result()
            self.error = exc

    def result(self) -> Any:
        self.join(WAIT)
        assert not self.is_alive(), f"{self.name} did not end"
        if self.error is not None:
            raise self.error
        return self.value


def _facts_in(path: Any) -> list[tuple[str, int, int]]:
    """(fact_id, revision, number of revisions) of every fact, read with sqlite3."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT f.fact_id, f.revision, count(r.revision) FROM facts f "
                          "LEFT JOIN revisions r ON r.fact_id = f.fact_id "
                          "GROUP BY f.fact_id ORDER BY f.fact_id").fetchall()
    finally:
        db.close()


def _store_with(tmp_path: Any, n: int, **kw: Any) -> facts_mod.FactStore:
    store = facts_mod.FactStore(tmp_path / "facts.sqlite3", **kw)
    for i in range(n):
        store.add(f"fact {i}")
    return store


# --------------------------------------------------------------------------
# writes of several threads


def test_remember_correct_forget_from_several_threads_all_succeed(tmp_path):
    """The agent's verbs from 4 threads at once on one Project (the
    reproduction: 15 of 50 remember calls raised StoreCorrupt); each thread
    reads between its writes.  Every call succeeds and the facts are all
    there, each complete."""
    n_threads, per = 4, 6
    p = open_project(store=tmp_path / "store")
    with p.sessions.create("s1") as w:
        seqs = [w.append_message("user", f"fact number {i} is true")
                for i in range(n_threads * per * 2)]
    refs = [p.sessions.source_snapshot("s1", s, s).ref for s in seqs]
    start = threading.Barrier(n_threads, timeout=WAIT)
    errors: list[str] = []
    kept: list[str] = []

    def worker(k: int) -> None:
        start.wait()
        mine = [i for i in range(k, n_threads * per, n_threads)]
        try:
            ids = []
            for i in mine:
                ids.append(p.remember(f"fact number {i} is true", refs[i]).fact.fact_id)
                p.list_facts(limit=20)
                p.generation()
            for j, (i, fid) in enumerate(zip(mine, ids, strict=True)):
                if j % 2:
                    assert p.forget(fid) is True
                else:
                    fact = p.correct(fid, f"fact number {i} is still true", expected_revision=1,
                                     ref=refs[n_threads * per + i])
                    assert fact.revision == 2
                    assert p.recall(fid)["status"] == "valid"
                    kept.append(fid)
        except Exception as exc:  # noqa: BLE001 - every error is the finding
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [Run(lambda k=k: worker(k), name=f"agent-{k}") for k in range(n_threads)]
    for t in threads:
        t.result()
    assert errors == []
    assert p.list_facts(limit=20)["total"] == len(kept) == n_threads * per // 2
    assert _facts_in(p.store.facts_db) == sorted((fid, 2, 2) for fid in kept)
    p.close()


def test_a_second_threads_write_waits_for_the_first_to_commit(tmp_path, monkeypatch):
    store = _store_with(tmp_path, 1)
    with paused_writes(monkeypatch) as pause:
        first = Run(lambda: store.add("first"), name="writer")
        assert pause.paused.wait(WAIT)
        second = Run(lambda: store.add("second"), name="other")
        second.join(BLOCKED)
        assert second.is_alive()            # waiting for the first's transaction
        pause.go.set()
        assert first.result().created
        assert second.result().created
    assert [rev for _fid, rev, _n in _facts_in(tmp_path / "facts.sqlite3")] == [1, 1, 1]
    assert [n for _fid, _rev, n in _facts_in(tmp_path / "facts.sqlite3")] == [1, 1, 1]
    store.close()


@pytest.mark.heavy
@pytest.mark.parametrize("other", ["add", "forget"])
def test_a_write_held_past_the_busy_timeout_is_store_busy_not_corrupt(tmp_path, monkeypatch,
                                                                     other):
    """A transaction of another thread held longer than the busy timeout is
    reported as a lock held by another writer (StoreBusy, exit 6: try
    again), never as a corrupt database; the write was not made, nor the
    other's disturbed, and it goes through once the other committed."""
    store = _store_with(tmp_path, 1, busy_timeout=BLOCKED)
    fid = store.list_facts()[0].fact_id
    with paused_writes(monkeypatch) as pause:
        first = Run(lambda: store.add("first"), name="writer")
        assert pause.paused.wait(WAIT)
        with pytest.raises(StoreBusy):
            if other == "add":
                store.add("second")
            else:
                store.forget(fid)
        pause.go.set()
        assert first.result().created
    assert len(_facts_in(tmp_path / "facts.sqlite3")) == 2
    if other == "add":
        assert store.add("second").created
    else:
        assert store.forget(fid) is True
    assert len(_facts_in(tmp_path / "facts.sqlite3")) == (3 if other == "add" else 1)
    store.close()


# --------------------------------------------------------------------------
# reads while another thread writes


READS = {
    "get": lambda s, fid: s.get(fid),
    "require": lambda s, fid: s.require(fid),
    "revisions": lambda s, fid: s.revisions(fid),
    "count": lambda s, fid: s.count(),
    "list_facts": lambda s, fid: s.list_facts(limit=100),
    "iter_facts": lambda s, fid: list(s.iter_facts(batch=1)),
    "iter_fact_revisions": lambda s, fid: list(s.iter_fact_revisions()),
    "search": lambda s, fid: s.search("fact"),
    "integrity": lambda s, fid: s.integrity(),
    "plan_forget": lambda s, fid: s.plan_forget(fid),
}


@pytest.mark.heavy
@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_during_another_threads_write_sees_committed_state(tmp_path, monkeypatch, read):
    """A read through the writer's connection while another thread is inside
    its write transaction (the fact row in, its revision not yet) waits for
    it and reads what it committed: never a fact without revisions
    (StoreCorrupt, or a fact listed hidden)."""
    store = _store_with(tmp_path, 2)
    new_id = facts_mod.fact_id_for("the new fact", None)
    with paused_writes(monkeypatch) as pause:
        writer = Run(lambda: store.add("the new fact"), name="writer")
        assert pause.paused.wait(WAIT)
        reader = Run(lambda: READS[read](store, new_id), name="reader")
        reader.join(BLOCKED)
        assert reader.is_alive()            # waits for the write in progress
        pause.go.set()
        writer.result()
        got = reader.result()
    # what the read gave is the committed state: the new fact, complete
    if read in ("get", "require"):
        assert got.text == "the new fact" and got.revision == 1
    elif read == "revisions":
        assert [r.text for r in got] == ["the new fact"]
    elif read == "count":
        assert got == 3
    elif read in ("list_facts", "iter_facts", "search"):
        assert sorted(f.text for f in got) == ["fact 0", "fact 1", "the new fact"]
    elif read == "iter_fact_revisions":
        assert sorted(f.text for f, _revs in got) == ["fact 0", "fact 1", "the new fact"]
        assert all(len(revs) == 1 for _f, revs in got)
    elif read == "integrity":
        assert got == []
    else:
        assert got.exists
    store.close()


def test_a_listing_read_by_another_thread_reads_its_next_rows_after_a_write(tmp_path,
                                                                            monkeypatch):
    """A listing of the writer read lazily by one thread holds nothing
    between the rows it gives: a write of another thread goes through
    meanwhile, and the listing's next rows, read while that write is in its
    transaction, wait for its commit (never its fact row without revisions)."""
    store = _store_with(tmp_path, 3)
    first_id = min(f.fact_id for f in store.list_facts())
    # a fact whose id the listing reaches after the first fact it gives
    text = next(t for t in (f"late fact {i}" for i in range(1000))
                if facts_mod.fact_id_for(t, None) > first_id)
    rows = store.iter_facts(batch=1)
    assert next(rows).fact_id == first_id
    with paused_writes(monkeypatch) as pause:
        writer = Run(lambda: store.add(text), name="writer")
        assert pause.paused.wait(WAIT)
        reader = Run(lambda: list(rows), name="reader")
        reader.join(BLOCKED)
        assert reader.is_alive()
        pause.go.set()
        writer.result()
        rest = reader.result()
    assert all(f.text is not None and f.revision == 1 for f in rest)
    assert text in [f.text for f in rest]
    store.close()


def test_a_listing_being_read_does_not_keep_writes_waiting(tmp_path):
    """Between two rows of a listing of the writer, the consumer (or another
    thread) may write: the listing holds the store only while it reads."""
    store = _store_with(tmp_path, 4)
    seen = []
    for i, (fact, _revs) in enumerate(store.iter_fact_revisions()):
        seen.append(fact.fact_id)
        if i == 0:
            assert store.add("from the consumer").created
            assert Run(lambda: store.add("from another thread"), name="other").result().created
        if i == 1:
            Run(lambda: store.list_facts(), name="other reader").result()
    assert len(seen) >= 4
    rows = store.stored_sources_by_session()
    assert list(rows) == []
    assert store.count() == 6
    store.close()


# --------------------------------------------------------------------------
# Project and close


@pytest.mark.heavy
def test_project_facts_is_one_writer_for_every_thread(tmp_path, monkeypatch):
    """``project.facts`` touched by two threads at once opens one writer: a
    second one was left unclosed by ``project.close()``."""
    p = open_project(store=tmp_path / "store")
    both = threading.Barrier(2)
    asking = threading.Event()       # the second thread is asking for p.facts
    real = facts_mod.FactStore

    class Slow(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # once the second thread asks too (however late it started), two
            # constructions at once meet here; one alone goes on after 0.3 s
            assert asking.wait(WAIT)
            try:
                both.wait(0.3)
            except threading.BrokenBarrierError:
                pass
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(facts_mod, "FactStore", Slow)
    got = [Run(lambda: p.facts, name="t0"),
           Run(lambda: (asking.set(), p.facts)[1], name="t1")]
    a, b = (t.result() for t in got)
    assert a is b
    p.close()


def test_close_waits_for_a_write_in_progress_in_another_thread(tmp_path, monkeypatch):
    """``close()`` from one thread while another is inside its write
    transaction waits for it to end (the write commits: it is not cut off
    by a connection closed under it) and then closes; later calls raise
    UsageError."""
    store = _store_with(tmp_path, 1)
    with paused_writes(monkeypatch) as pause:
        writer = Run(lambda: store.add("written while closing"), name="writer")
        assert pause.paused.wait(WAIT)
        closer = Run(store.close, name="closer")
        closer.join(BLOCKED)
        assert closer.is_alive()
        pause.go.set()
        assert writer.result().created
        closer.result()
    assert len(_facts_in(tmp_path / "facts.sqlite3")) == 2
    with pytest.raises(UsageError):
        store.add("after close")
    with pytest.raises(UsageError):
        store.list_facts()


@pytest.mark.heavy
def test_a_listing_half_read_by_one_thread_lets_another_write_after_another_process(tmp_path):
    """docs/API.md, "Threads": between two rows of a listing of the writer,
    another thread may write, also once another process (memctl forget,
    another agent) committed since the listing began: the listing's cursor
    kept SQLite's read snapshot open on the writer's connection, and every
    write was StoreBusy at once until the listing ended.  The listing reads
    one state, through a connection of its own."""
    store = _store_with(tmp_path, 3000)
    rows = store.iter_fact_revisions()
    next(rows)                                  # one thread reads a row, and holds the rest
    other = facts_mod.FactStore(tmp_path / "facts.sqlite3")   # as another process
    other.add("from another process")
    other.close()
    assert Run(lambda: store.add("from another thread"), name="other").result().created
    rows.close()
    store.close()
