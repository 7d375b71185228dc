"""A table memctl reads that is a view (or a virtual table) in the facts database.

The schema check read each table's columns with ``PRAGMA table_info``, which
answers for a view as for a table: ``CREATE VIEW facts AS WITH RECURSIVE ...``
of the right columns passed it, and then facts/context ran out of memory
(exit 70), recall/history/validate never ended, and an ``exclusions`` view
hung read and grep.  A table memctl reads must be a table of the database
(its own b-tree): anything else is refused when the store opens, as a missing
table is ("table facts is a view; not a lecode facts database", exit 5), and
validate reports it (db.unreadable).

The views here are either unbounded (the reviewer's recursive view) where
only the open is asked for -- the refusal comes before any row is read, and
on the code before the fix the open succeeded, read nothing, and the test
failed without hanging -- or bounded (the real table's rows) where commands
run, so that on the code before the fix they ended, with exit 0.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.facts import READ_SCHEMA, FactStore

from .builders import copy_demo
from .conftest import run_cli

TABLES = sorted({table for _since, table, _cols in READ_SCHEMA})
PREF = "80fa60fdfe856452"      # the demo's 'preference' fact


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _as_view(path: Path, table: str, *, unbounded: bool) -> None:
    """``table`` renamed away and a view of its columns put in its place: one
    that never ends (a recursive CTE), or one of the table's own rows."""
    db = sqlite3.connect(path)
    try:
        cols = _columns(db, table)
        db.execute(f"ALTER TABLE {table} RENAME TO {table}_real")
        if unbounded:
            picked = ", ".join(f"printf('%016x', x) AS {c}" for c in cols)
            db.execute(f"CREATE VIEW {table} AS WITH RECURSIVE c(x) AS "
                       f"(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT {picked} FROM c")
        else:
            db.execute(f"CREATE VIEW {table} AS SELECT * FROM {table}_real")
        db.commit()
    finally:
        db.close()


@pytest.fixture
def facts_db(tmp_path) -> Path:
    path = tmp_path / "facts.sqlite3"
    with FactStore(path) as fs:
        fs.add("a fact")
    return path


@pytest.mark.parametrize("table", TABLES)
def test_an_unbounded_view_is_refused_when_the_store_opens(facts_db, table):
    _as_view(facts_db, table, unbounded=True)
    with pytest.raises(StoreCorrupt) as got:
        FactStore.open_readonly(facts_db).close()
    assert got.value.exit_code == 5
    assert f"table {table} is a view; not a lecode facts database" in str(got.value)
    with pytest.raises(StoreCorrupt) as got:
        FactStore(facts_db).close()     # a writer's open too
    assert f"table {table} is a view; not a lecode facts database" in str(got.value)


def test_a_database_of_views_only_is_not_an_empty_one(tmp_path):
    """No table at all, only views: not the empty file (read as no database)."""
    path = tmp_path / "facts.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE VIEW facts AS SELECT 'x' AS fact_id, 1 AS revision, "
               "'' AS created, '' AS updated")
    db.commit()
    db.close()
    for opener in (FactStore.open_readonly, FactStore):
        with pytest.raises(StoreCorrupt) as got:
            opener(path).close()
        assert "table facts is a view; not a lecode facts database" in str(got.value)
    db = sqlite3.connect(path)
    try:        # the writer's refusal came before anything was changed
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["facts"]
    finally:
        db.close()


def test_a_virtual_table_is_refused(facts_db):
    db = sqlite3.connect(facts_db)
    try:
        db.execute("ALTER TABLE forgotten RENAME TO forgotten_real")
        try:
            db.execute("CREATE VIRTUAL TABLE forgotten USING fts5(fact_id, generation)")
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no fts5")
        db.commit()
    finally:
        db.close()
    with pytest.raises(StoreCorrupt) as got:
        FactStore.open_readonly(facts_db).close()
    assert "table forgotten is a virtual table; not a lecode facts database" in str(got.value)


def test_a_view_of_another_case_is_refused(facts_db):
    """SQL finds ``FACTS`` for ``facts``: so does the check."""
    db = sqlite3.connect(facts_db)
    db.execute("ALTER TABLE exclusions RENAME TO excl_real")
    db.execute("CREATE VIEW EXCLUSIONS AS SELECT * FROM excl_real")
    db.commit()
    db.close()
    with pytest.raises(StoreCorrupt) as got:
        FactStore.open_readonly(facts_db).close()
    assert "table exclusions is a view" in str(got.value)


def test_a_view_where_a_migration_would_make_a_table(facts_db):
    """A version-2 database (no ``meta`` yet) with a view named ``meta``: the
    migration would keep the view (CREATE TABLE IF NOT EXISTS), so the
    database is one no migration knows, refused from the open on."""
    db = sqlite3.connect(facts_db)
    db.execute("DROP TABLE meta")
    db.execute("CREATE VIEW meta AS SELECT 'generation' AS key, 0 AS value")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    with pytest.raises(StoreCorrupt) as got:
        FactStore.open_readonly(facts_db).close()
    assert got.value.exit_code == 5
    assert "cannot be migrated to 3: table meta is a view" in str(got.value)


READERS = {
    "facts": ("facts",),
    "facts --json": ("facts", "--json"),
    "recall": ("recall", PREF),
    "history": ("history", PREF),
    "context": ("context",),
    "read": ("read", "demo-alpha", "0", "8"),
    "grep": ("grep", "tabs"),
}


@pytest.mark.parametrize("table", ["facts", "exclusions", "revisions", "meta"])
def test_every_reader_refuses_and_validate_reports(demo_template, tmp_path, table):
    store = copy_demo(demo_template, tmp_path / "x")
    _as_view(store / "facts.sqlite3", table, unbounded=False)
    for name, argv in READERS.items():
        r = run_cli("--store", str(store), "--no-state", *argv)
        assert r.exit_code == 5, (table, name, r.exit_code, r.stderr)
        assert f"table {table} is a view; not a lecode facts database" in r.stderr, (name, r.stderr)
    r = run_cli("--store", str(store), "--no-state", "validate", "--json")
    assert r.exit_code == 1, r.stderr
    found = [f for f in orjson.loads(r.stdout_bytes)["findings"] if f["code"] == "db.unreadable"]
    assert len(found) == 1 and f"table {table} is a view" in found[0]["message"], found
