"""A store opened for writing is listed from one snapshot.

The whole-store evaluation validates the sources first and lists the facts
after; only the sources it found not valid are kept, and any other source
is listed valid.  Read in two transactions, a fact another process commits
in between was listed ``valid`` without its source ever being validated.
A program that imports the core with a writer's FactStore (the agent
itself) lists its store so; these tests commit such a fact, with a stale
source, at that very moment."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import GeneratorType

import orjson
import pytest

from lecode_memctl.core import factview
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import evaluate_facts, iter_fact_lines, iter_fact_records, iter_fact_rows
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import canonical_digest

SLUG = "writer-snap-0123456789ab"
NOW = "2026-01-01T00:00:00.000Z"
STALE = "aaaaaaaaaaaaaaaa"


def _store(tmp_path: Path) -> Path:
    store = store_at(tmp_path / SLUG)
    store.sessions_dir.mkdir(parents=True)
    recs = [{"seq": 0, "type": "session", "format": 1, "session_id": "s1", "project": SLUG,
             "created": "2026-01-01T00:00:00Z"}]
    recs += [{"seq": i, "type": "message", "role": "user", "content": f"m{i}"} for i in (1, 2)]
    (store.sessions_dir / "s1.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    with FactStore(store.facts_db) as fs:
        fs.add("schema bootstrap")
        db = fs._conn
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM revisions")
        db.execute("DELETE FROM facts")
        _insert(db, "0123456789abcdef", canonical_digest(recs[1:2]))
        db.execute("COMMIT")
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
    committed = []

    def evaluate_then_commit(*args, **kwargs):
        got = evaluate(*args, **kwargs)
        _commit_stale_fact(store.facts_db)
        committed.append(True)
        return got

    monkeypatch.setattr(factview, "_evaluate_sources", evaluate_then_commit)
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
