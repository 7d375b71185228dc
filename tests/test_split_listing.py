"""A whole-store listing made by two processes (``core.split.SPLIT_LEAST``):
``memctl facts`` forks a child that makes the rows of the second half of
the fact ids while this process makes the first; the output is the one
process's, byte for byte, in every format, on damaged stores too (ids that
are NULL, numbers, BLOBs, not UTF-8, stored twice).  The child is only a
help: when it fails, its part is made by the parent; when the listing is
left early, the child is killed and reaped; with another thread running
(a program that imports the core), nothing is forked."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import factview, split as split_mod
from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import iter_fact_lines, iter_fact_records
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import copy_demo
from .conftest import run_cli, tree_hash

PREF = "80fa60fdfe856452"      # demo 'preference' fact: revision 2 (corrected)
NOW = "2026-12-05T01:26:22.090Z"


@pytest.fixture
def forks(monkeypatch) -> list[int]:
    """Split every listing (SPLIT_LEAST 1); the pids of the children forked."""
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    pids: list[int] = []
    fork = FactStore.fork

    def counted(self: FactStore) -> int:
        pid = fork(self)
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(FactStore, "fork", counted)
    return pids


def _sql(store: Path, *statements: str) -> None:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        with db:
            for s in statements:
                db.execute(s)
    finally:
        db.close()


def _many(store: Path, n: int = 30) -> None:
    """``n`` more facts: copies of the demo's, under new ids on both sides
    of the demo's own (sources and all)."""
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        cols = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
                for t in ("facts", "revisions", "source_refs", "provenance")}
    finally:
        db.close()
    stmts = ["PRAGMA foreign_keys = OFF"]
    for i in range(n):
        new = f"{(i * 0x0842108421084210) & 0xFFFFFFFFFFFFFFFF:016x}"
        for table, names in cols.items():
            rest = ", ".join(c for c in names if c != "fact_id")
            stmts.append(f"INSERT OR IGNORE INTO {table} (fact_id, {rest}) "
                         f"SELECT '{new}', {rest} FROM {table} WHERE fact_id = '{PREF}'")
    _sql(store, *stmts)


DAMAGE = (
    "PRAGMA foreign_keys = OFF",
    # facts without its key: an id stored twice, NULL, a number, BLOBs, not UTF-8
    "CREATE TABLE x2 (fact_id, revision, created, updated)",
    "INSERT INTO x2 SELECT * FROM facts", "DROP TABLE facts", "ALTER TABLE x2 RENAME TO facts",
    f"INSERT INTO facts VALUES ('{PREF}', 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (NULL, 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (5, 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (CAST(x'3061ff' AS TEXT), 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (CAST('0b' AS BLOB), 1, '{NOW}', '{NOW}')",
    f"INSERT INTO revisions VALUES (CAST('0b' AS BLOB), 1, 'a blob id', '{NOW}')",
    # a stale source, and a source with no fact
    "UPDATE source_refs SET digest = '" + "a" * 64 + "' WHERE rowid = (SELECT max(rowid) "
    "FROM source_refs)",
    f"INSERT INTO source_refs VALUES ('ffffffffffffffff', 1, 'demo-alpha', '[3]', '{'b' * 64}')",
)


@pytest.fixture
def store(demo_template, tmp_path) -> Path:
    s = copy_demo(demo_template, tmp_path / "demo")
    _many(s)
    return s


def _outputs(store: Path, *argv: str) -> list[tuple[int, str]]:
    out = []
    for fmt in ("jsonl", "json", "csv", "tsv", "table"):
        extra = () if fmt == "table" else ("--format", fmt)
        r = run_cli("--store", str(store), "--no-state", "facts", "--all", *extra, *argv)
        out.append((r.exit_code, r.stdout + r.stderr))
    return out


@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("argv", [(), ("--status", "valid"), ("--status", "hidden")])
def test_the_split_listing_prints_what_one_process_prints(store, monkeypatch, damaged, argv):
    if damaged:
        _sql(store, *DAMAGE)
    before = tree_hash(store)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _outputs(store, *argv)
    assert all(code == 0 for code, _ in one), one
    pids: list[int] = []
    fork = FactStore.fork

    def counted(self: FactStore) -> int:
        pid = fork(self)
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(FactStore, "fork", counted)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    assert _outputs(store, *argv) == one
    # every format that lists the whole store was made in two processes
    assert len(pids) == 5, pids
    assert tree_hash(store) == before


def _open(store: Path) -> tuple[FactStore, SessionStore]:
    fs = FactStore.open_readonly(store / "facts.sqlite3")
    return fs, SessionStore(store_at(store), exclusions=fs)


def _records(store: Path, parallel: bool) -> list[dict]:
    fs, sessions = _open(store)
    with fs:
        return list(iter_fact_records(fs, sessions, parallel=parallel))


def test_the_lines_are_the_records_encoded(store, forks):
    _sql(store, *DAMAGE)
    want = _records(store, parallel=False)
    assert not forks
    fs, sessions = _open(store)
    with fs:
        pieces = list(iter_fact_lines(fs, sessions, lambda r: orjson.dumps(r) + b"\n",
                                      keep=lambda r: r["status"] != "valid", parallel=True))
    assert len(forks) == 1
    assert b"".join(pieces) == b"".join(orjson.dumps(r) + b"\n" for r in want
                                        if r["status"] != "valid")
    assert _records(store, parallel=True) == want
    assert len(forks) == 2


def test_a_child_that_fails_leaves_its_part_to_the_parent(store, forks, monkeypatch):
    want = _records(store, parallel=False)
    parent = os.getpid()
    rows = factview._listing_rows

    def failing(*args, **kwargs):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return rows(*args, **kwargs)

    monkeypatch.setattr(factview, "_listing_rows", failing)
    assert _records(store, parallel=True) == want
    assert len(forks) == 1


def test_an_error_in_the_second_part_comes_after_the_same_rows(store, forks, monkeypatch):
    """A store error in the child's part: the parent makes that part itself
    and raises it where one process raises it, after the same rows."""
    fs, sessions = _open(store)
    with fs:
        ids = sorted(r["fact_id"] for r in iter_fact_records(fs, sessions))
    bad = ids[len(ids) * 3 // 4]
    rows = factview._listing_rows

    def failing(*args, **kwargs):
        for r in rows(*args, **kwargs):
            if r["fact_id"] == bad:
                raise StoreCorrupt(f"facts database: fact {bad} is damaged")
            yield r

    monkeypatch.setattr(factview, "_listing_rows", failing)

    def until_error(parallel: bool) -> tuple[list[str], str]:
        got: list[str] = []
        fs, sessions = _open(store)
        with fs, pytest.raises(StoreCorrupt) as exc:
            for r in iter_fact_records(fs, sessions, parallel=parallel):
                got.append(r["fact_id"])
        return got, str(exc.value)

    one = until_error(False)
    assert not forks
    assert until_error(True) == one
    assert len(forks) == 1
    assert one[0] == ids[:ids.index(bad)]


def test_a_listing_left_early_kills_and_reaps_its_child(store, forks):
    fs, sessions = _open(store)
    with fs:
        it = iter_fact_records(fs, sessions, parallel=True)
        first = next(it)
        it.close()
        assert first["fact_id"]
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)


def test_nothing_is_forked_beside_another_thread(store, forks):
    want = _records(store, parallel=False)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert _records(store, parallel=True) == want
    finally:
        stop.set()
        t.join()
    assert not forks


def test_a_command_line_listing_leaves_no_child(store, forks):
    r = run_cli("--store", str(store), "--no-state", "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)


def test_the_help_names_the_size_that_is_split():
    r = run_cli("facts", "--help")
    assert r.exit_code == 0
    assert f"{split_mod.SPLIT_LEAST:,} or more" in " ".join(r.stdout.split())
