"""A store opened for writing is listed from one snapshot.

The whole-store evaluation validates the sources first and lists the facts
after; only the sources it found not valid are kept, and any other source
is listed valid.  Read in two transactions, a fact another process commits
in between was listed ``valid`` without its source ever being validated.
A program that imports the core with a writer's FactStore (the agent
itself) lists its store so; these tests commit such a fact, with a stale
source, at that very moment."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import GeneratorType
from typing import Any

import orjson
import pytest

from lecode_memctl.core import factview
from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import evaluate_facts, iter_fact_lines, iter_fact_records, iter_fact_rows
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import canonical_digest

from .builders import empty_facts_db

SLUG = "writer-snap-0123456789ab"
NOW = "2026-01-01T00:00:00.000Z"
STALE = "aaaaaaaaaaaaaaaa"


def _store(tmp_path: Path, more: int = 0) -> Path:
    store = store_at(tmp_path / SLUG)
    store.sessions_dir.mkdir(parents=True)
    recs = [{"seq": 0, "type": "session", "format": 1, "session_id": "s1", "project": SLUG,
             "created": "2026-01-01T00:00:00Z"}]
    recs += [{"seq": i, "type": "message", "role": "user", "content": f"m{i}"} for i in (1, 2)]
    (store.sessions_dir / "s1.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    with empty_facts_db(store.facts_db) as db:
        _insert(db, "0123456789abcdef", canonical_digest(recs[1:2]))
        for i in range(more):   # (more rows than a fetch takes: a read left open)
            _insert(db, f"{i:016x}", canonical_digest(recs[1:2]))
    return store.path


def _insert(db: sqlite3.Connection, fid: str, digest: str) -> None:
    db.execute("INSERT INTO facts VALUES (?, 1, ?, ?)", (fid, NOW, NOW))
    db.execute("INSERT INTO revisions VALUES (?, 1, ?, ?)", (fid, f"text of {fid}", NOW))
    db.execute("INSERT INTO source_refs VALUES (?, 1, 's1', '[1]', ?)", (fid, digest))


def _commit_stale_fact(path: Path) -> None:
    """Another process commits a fact whose digest does not match its span."""
    other = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        other.execute("BEGIN IMMEDIATE")
        _insert(other, STALE, "0" * 64)
        other.execute("COMMIT")
    finally:
        other.close()


def _commit_after_the_evaluation(monkeypatch, path: Path) -> list[bool]:
    """Another process commits the stale fact right after each evaluation
    of the sources (the list says how many times it did)."""
    evaluate = factview._evaluate_sources
    committed: list[bool] = []

    def evaluate_then_commit(*args, **kwargs):
        got = evaluate(*args, **kwargs)
        _commit_stale_fact(path)
        committed.append(True)
        return got

    monkeypatch.setattr(factview, "_evaluate_sources", evaluate_then_commit)
    return committed


LISTINGS = {
    "rows": lambda fs, ss: [r["fact_id"] + ":" + r["status"] for r in iter_fact_rows(fs, ss)],
    "records": lambda fs, ss: [r["fact_id"] + ":" + r["status"]
                               for r in iter_fact_records(fs, ss)],
    "session": lambda fs, ss: [r["fact_id"] + ":" + r["status"]
                               for r in iter_fact_rows(fs, ss, session_id="s1")],
    "filtered": lambda fs, ss: [r["fact_id"] + ":" + r["status"]
                                for r in iter_fact_rows(fs, ss, where=lambda f: True)],
    "lines": lambda fs, ss: [f"{r['fact_id']}:{r['status']}" for piece in iter_fact_lines(
        fs, ss, lambda r: orjson.dumps(r) + b"\n") for r in map(orjson.loads, piece.splitlines())],
    "evaluate": lambda fs, ss: [f.fact_id + ":" + factview.fact_row(f, revs, st)["status"]
                                for f, revs, st in evaluate_facts(fs, ss)],
}


@pytest.mark.parametrize("how", sorted(LISTINGS))
def test_a_fact_committed_after_the_evaluation_is_never_listed_valid(tmp_path: Path, monkeypatch,
                                                                     how: str) -> None:
    path = _store(tmp_path)
    store = store_at(path)
    evaluate = factview._evaluate_sources
    committed = _commit_after_the_evaluation(monkeypatch, store.facts_db)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        listed = LISTINGS[how](fs, ss)
        assert committed
        assert "0123456789abcdef:valid" in listed
        # the listing's snapshot is the evaluation's: the fact committed in
        # between is not in it (were it listed, it would have to be stale)
        assert f"{STALE}:valid" not in listed
        assert listed == ["0123456789abcdef:valid"]
        # and the next listing sees it, stale
        monkeypatch.setattr(factview, "_evaluate_sources", evaluate)
        again = LISTINGS[how](fs, ss)
        assert again == ["0123456789abcdef:valid", f"{STALE}:stale"]


def test_a_listing_left_early_leaves_the_connection_writable(tmp_path: Path) -> None:
    """A listing abandoned after one row holds no transaction: the writer
    goes on writing (and a second listing starts) as before."""
    path = _store(tmp_path)
    store = store_at(path)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        rows = iter_fact_rows(fs, ss)
        assert next(rows)["status"] == "valid"
        assert isinstance(rows, GeneratorType)
        rows.close()
        assert fs._conn is not None and not fs._conn.in_transaction
        fs.add("a fact written after the listing")
        assert len(list(iter_fact_rows(fs, ss))) == 2


def test_a_text_that_is_not_utf8_does_not_end_the_state(tmp_path: Path, monkeypatch) -> None:
    """The first TEXT value that is not UTF-8 makes a read take its rows
    again (core.facts._Cursor): in a transaction of its own, that read saw
    the fact committed after the evaluation, and listed it valid."""
    path = _store(tmp_path)
    store = store_at(path)
    db = sqlite3.connect(store.facts_db, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO facts VALUES ('0123456789abcde0', 1, ?, ?)", (NOW, NOW))
    db.execute("INSERT INTO revisions VALUES ('0123456789abcde0', 1, CAST(X'62616420ff' AS TEXT), ?)",
               (NOW,))
    db.execute("COMMIT")
    db.close()
    _commit_after_the_evaluation(monkeypatch, store.facts_db)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        listed = LISTINGS["rows"](fs, ss)
        assert f"{STALE}:valid" not in listed
        assert [x.split(":")[0] for x in listed] == ["0123456789abcde0", "0123456789abcdef"]


def test_the_writer_writes_while_a_listing_is_read(tmp_path: Path, monkeypatch) -> None:
    """The listing's state is held by a connection of its own: the writer's
    connection holds no transaction, so it writes, with another process's
    commit made meanwhile, and the listing goes on in the state it began."""
    path = _store(tmp_path, more=2500)
    store = store_at(path)
    _commit_after_the_evaluation(monkeypatch, store.facts_db)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        rows = iter_fact_rows(fs, ss)
        first = next(rows)
        fs.add("written while the listing is read")
        listed = [first] + list(rows)
        assert len(listed) == 2501
        assert all(r["status"] == "valid" for r in listed)
        assert STALE not in {r["fact_id"] for r in listed}
        assert len(fs.fact_ids(limit=5000)) == 2503


def test_an_evaluation_that_fails_leaves_no_state_held(tmp_path: Path) -> None:
    """An error inside the evaluation closes the listing's connection at
    once, even while the error (and its traceback) is kept."""
    path = _store(tmp_path)
    store = store_at(path)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        try:
            list(evaluate_facts(fs, ss, purpose="bogus"))
        except Exception as exc:  # noqa: BLE001 - kept, with its traceback
            kept = exc
        else:
            raise AssertionError("an unknown purpose was taken")
        _commit_stale_fact(store.facts_db)
        fs.add("written after the failed evaluation")
        assert kept is not None
        assert len(fs.fact_ids()) == 3


def test_a_listing_started_but_not_read_holds_nothing(tmp_path: Path) -> None:
    """iter_fact_groups reads nothing until it is iterated: the writer
    writes after another process's commit as before."""
    path = _store(tmp_path)
    store = store_at(path)
    with FactStore(store.facts_db) as fs:
        groups = fs.iter_fact_groups()
        _commit_stale_fact(store.facts_db)
        fs.add("written before the listing is read")
        assert [g[0] for g in groups][:2] == ["0123456789abcdef", STALE]


def test_a_session_reader_of_its_own_validates_the_listing(tmp_path: Path) -> None:
    """A SessionStore subclass with a validate_sessions of its own is the
    one the listing asks (the stored-values path is SessionStore's own)."""
    from lecode_memctl.core.sourceref import status_for

    class Strict(SessionStore):
        def validate_sessions(self, groups, purpose="durable"):
            for _sid, group in groups:
                yield {r: status_for("excluded", "strict reader") for r in group}

    path = _store(tmp_path)
    store = store_at(path)
    with FactStore(store.facts_db) as fs:
        assert [r["status"] for r in iter_fact_rows(fs, SessionStore(store, exclusions=fs))] \
            == ["valid"]
        assert [r["status"] for r in iter_fact_rows(fs, Strict(store, exclusions=fs))] \
            == ["hidden"]


def test_a_database_removed_under_the_writer_is_not_made_again(tmp_path: Path) -> None:
    """The listing's connection opens the database read-only: one removed
    while the writer holds it is an error, never a new empty file."""
    from lecode_memctl.core.errors import MemctlError

    path = _store(tmp_path)
    store = store_at(path)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        for name in ("facts.sqlite3", "facts.sqlite3-wal", "facts.sqlite3-shm"):
            (store.path / name).unlink(missing_ok=True)
        with pytest.raises(MemctlError, match="disappeared"):
            list(iter_fact_rows(fs, ss))
        assert not store.facts_db.exists()


def test_the_view_reads_the_file_the_writer_opened(tmp_path: Path, monkeypatch) -> None:
    """A writer opened by a relative path lists its own database after a
    chdir (and creates none where it is now); one moved away is an error."""
    from lecode_memctl.core.errors import MemctlError

    path = _store(tmp_path)
    store = store_at(path)
    monkeypatch.chdir(store.path)
    with FactStore("facts.sqlite3") as fs:
        ss = SessionStore(store, exclusions=fs)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        assert [r["fact_id"] for r in iter_fact_rows(fs, ss)] == ["0123456789abcdef"]
        assert list(elsewhere.iterdir()) == []
        (store.path / "facts.sqlite3").rename(store.path / "moved.sqlite3")
        with pytest.raises(MemctlError, match="disappeared"):
            list(iter_fact_rows(fs, ss))
        assert not (store.path / "facts.sqlite3").exists()


def test_a_views_class_and_checks_are_the_writers(tmp_path: Path, monkeypatch) -> None:
    """The view is of the writer's class (its overrides are asked), and the
    sessions whose indexes were checked stay checked across listings."""
    from lecode_memctl.core import facts as facts_mod

    calls: list[str] = []

    class Counting(FactStore):
        def stored_sources_by_session(self, *args, **kwargs):
            calls.append("sources")
            return super().stored_sources_by_session(*args, **kwargs)

    checks: list[str] = []
    check = facts_mod.FactStore._check_session_indexes

    def counted(self, session_id):
        if session_id not in self._sessions_checked:   # (a check made, not one known)
            checks.append(session_id)
        return check(self, session_id)

    monkeypatch.setattr(facts_mod.FactStore, "_check_session_indexes", counted)
    path = _store(tmp_path)
    store = store_at(path)
    with Counting(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        for _ in range(3):
            assert [r["status"] for r in iter_fact_rows(fs, ss, session_id="s1")] == ["valid"]
        assert calls == ["sources"] * 3
        assert checks == ["s1"]


def open_fds(under: str | Path) -> list[str]:
    """The descriptors of this process open on a file under ``under``."""
    prefix = str(under).rstrip("/") + "/"
    out = []
    for n in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{n}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target[len(prefix):])
    return sorted(out)


def closing_ends_the_listing(rows: Iterator[Any], close: Callable[[], None],
                             where: str | Path) -> None:
    """A listing read one row in holds descriptors under ``where``; after
    ``close()`` none is left, nor any thread, and its next row is the
    documented UsageError."""
    next(rows)
    assert open_fds(where)
    close()
    assert open_fds(where) == []
    assert threading.enumerate() == [threading.main_thread()]
    with pytest.raises(UsageError, match="closed"):
        next(rows)


GENERATORS = {
    "rows": lambda fs, ss: iter_fact_rows(fs, ss),
    "records": lambda fs, ss: iter_fact_records(fs, ss),
    "session": lambda fs, ss: iter_fact_rows(fs, ss, session_id="s1"),
    "filtered": lambda fs, ss: iter_fact_rows(fs, ss, where=lambda f: True),
    "lines": lambda fs, ss: iter_fact_lines(fs, ss, lambda r: orjson.dumps(r) + b"\n"),
    "evaluate": lambda fs, ss: evaluate_facts(fs, ss),
    "iter_facts": lambda fs, ss: fs.iter_facts(batch=100),
}


@pytest.mark.heavy
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "readonly"])
@pytest.mark.parametrize("listing", list(GENERATORS))
def test_closing_the_store_ends_a_listing_still_read(tmp_path: Path, listing: str,
                                                      readonly: bool) -> None:
    """close() ends a listing in progress at once: every descriptor on the
    database (its -wal and -shm; a read-only open's private copy) is
    closed and its read transaction ended then, not when the generator is
    collected, no thread is left, and the listing's next row is the
    documented UsageError, never a row of a closed store.  (SQLite's close
    of a connection whose cursor is still open left it a zombie, every file
    open, until the cursor went.)"""
    path = _store(tmp_path, more=2500)
    store = store_at(path)
    fs = FactStore.open_readonly(store.facts_db) if readonly else FactStore(store.facts_db)
    where = fs.private_dir if readonly else path
    assert where is not None
    rows = GENERATORS[listing](fs, SessionStore(store, exclusions=fs))
    closing_ends_the_listing(rows, fs.close, where)
    with pytest.raises(StopIteration):
        next(rows)
    if not readonly:    # the read transaction is gone: a checkpoint may truncate the whole -wal
        db = sqlite3.connect(store.facts_db, isolation_level=None)
        try:
            assert db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        finally:
            db.close()
