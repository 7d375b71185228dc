"""``validate``'s foreign-key check walks lecode's three references (revisions
to facts, provenance and source_refs to revisions) in key order instead of
running ``PRAGMA foreign_key_check`` (audit.facts._orphans_in_key_order): on
any rows, of any stored type, it finds what the pragma finds, and any other
shape of table is left to the pragma."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.audit.facts import _db_checks_rest, _orphans_in_key_order
from lecode_memctl.core.facts import MIGRATIONS

CHILDREN = ("revisions", "provenance", "source_refs")


def _lecode_schema() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    for _name, migrate in MIGRATIONS:
        migrate(db)
    return db


def _loose_schema() -> sqlite3.Connection:
    """The same references without NOT NULL or CHECK, and the facts' key
    compared without case: a key may be NULL (the pragma skips that row),
    and the parent's collation decides what matches."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE facts (fact_id TEXT COLLATE NOCASE PRIMARY KEY, revision INTEGER, "
               "created TEXT, updated TEXT)")
    db.execute("CREATE TABLE revisions (fact_id TEXT REFERENCES facts(fact_id), "
               "revision INTEGER, text TEXT, created TEXT, PRIMARY KEY (fact_id, revision))")
    for table in ("provenance", "source_refs"):
        extra = "seq INTEGER" if table == "provenance" else "seqs TEXT, digest TEXT"
        db.execute(f"CREATE TABLE {table} (fact_id TEXT, revision INTEGER, session_id TEXT, "
                   f"{extra}, FOREIGN KEY (fact_id, revision) "
                   "REFERENCES revisions(fact_id, revision))")
    return db


def _pragma(db: sqlite3.Connection, table: str) -> list[tuple]:
    return [tuple(r) for r in db.execute(f'PRAGMA foreign_key_check("{table}")')]


# ids and revision numbers as a damaged or hand-edited store may hold them:
# text that looks like a number, integers where text belongs, reals, BLOBs
_IDS = st.sampled_from(["00000000000000a1", "00000000000000a2", "00000000000000A1", "1", "2",
                        1, 2, 1.0, 2.5, b"00000000000000a1", b"\x00", "", " 1"])
_REVS = st.sampled_from([1, 2, 3, "1", "2", "x", 1.0, 2.5, b"\x01", "2.0", 10**12])


_NULLABLE_IDS = st.one_of(_IDS, st.none())
_NULLABLE_REVS = st.one_of(_REVS, st.none())


@pytest.mark.parametrize("schema", [_lecode_schema, _loose_schema])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=st.lists(_NULLABLE_IDS, max_size=6),
       revisions=st.lists(st.tuples(_NULLABLE_IDS, _NULLABLE_REVS), max_size=8),
       refs=st.lists(st.tuples(_NULLABLE_IDS, _NULLABLE_REVS,
                               st.sampled_from(["provenance", "source_refs"])), max_size=8))
def test_the_key_order_walk_finds_what_the_pragma_finds(schema, facts, revisions, refs):
    db = schema()
    for fid in facts:
        db.execute("INSERT OR IGNORE INTO facts VALUES (?, 1, 'c', 'u')", (fid,))
    for fid, rev in revisions:
        db.execute("INSERT OR IGNORE INTO revisions VALUES (?, ?, 't', 'c')", (fid, rev))
    for i, (fid, rev, table) in enumerate(refs):
        if table == "provenance":
            db.execute("INSERT OR IGNORE INTO provenance VALUES (?, ?, 's', ?)", (fid, rev, i))
        else:
            db.execute("INSERT OR IGNORE INTO source_refs VALUES (?, ?, 's', '[1]', 'd')",
                       (fid, rev))
    for table in CHILDREN:
        assert _orphans_in_key_order(db, table) == _pragma(db, table), table


def test_a_finding_names_the_child_row_and_its_parent():
    db = _lecode_schema()
    db.execute("INSERT INTO facts VALUES ('00000000000000a1', 1, 'c', 'u')")
    db.execute("INSERT INTO revisions VALUES ('00000000000000a1', 1, 't', 'c')")
    db.execute("INSERT INTO revisions VALUES ('00000000000000ff', 1, 't', 'c')")
    db.execute("INSERT INTO source_refs VALUES ('00000000000000a1', 2, 's', '[1]', 'd')")
    db.execute("INSERT INTO source_refs VALUES ('00000000000000a1', 1, 's', '[1]', 'd')")
    rowid = db.execute("SELECT rowid FROM revisions WHERE fact_id = '00000000000000ff'"
                       ).fetchone()[0]
    assert _orphans_in_key_order(db, "revisions") == [("revisions", rowid, "facts", 0)]
    assert _orphans_in_key_order(db, "source_refs") == [("source_refs", 1, "revisions", 0)]

    class _Facts:
        tables = {"facts", "revisions", "source_refs"}

    found = [(c, loc.get("table")) for c, _m, loc in _db_checks_rest(_Facts(), db)
             if c == "db.foreign_key"]
    assert found == [("db.foreign_key", "revisions"), ("db.foreign_key", "source_refs")]


@pytest.mark.parametrize("ddl", [
    # a table without a foreign key, or with two
    "CREATE TABLE c (fact_id TEXT)",
    "CREATE TABLE c (fact_id TEXT REFERENCES p(fact_id), other TEXT REFERENCES p(fact_id))",
    # a reference to the parent's primary key by omission
    "CREATE TABLE c (fact_id TEXT REFERENCES p)",
    # the child's column of another type (another affinity than the parent's)
    "CREATE TABLE c (fact_id INTEGER REFERENCES p(fact_id))",
    "CREATE TABLE c (fact_id REFERENCES p(fact_id))",
    # no rowid to name, or a column that takes its name
    "CREATE TABLE c (fact_id TEXT PRIMARY KEY REFERENCES p(fact_id)) WITHOUT ROWID",
    "CREATE TABLE c (fact_id TEXT REFERENCES p(fact_id), rowid INTEGER)",
    # a reference to a column that is not the parent's key
    "CREATE TABLE c (x TEXT REFERENCES p(label))",
    # a missing parent
    "CREATE TABLE c (fact_id TEXT REFERENCES nowhere(fact_id))",
])
def test_any_other_shape_is_left_to_the_pragma(ddl):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE p (fact_id TEXT PRIMARY KEY, label TEXT)")
    db.execute(ddl)
    assert _orphans_in_key_order(db, "c") is None


def test_a_parent_that_lost_its_key_is_still_the_pragmas_mismatch():
    """A parent rebuilt without its primary key: the pragma's "foreign key
    mismatch", reported as before (db.foreign_key naming the table)."""
    db = _lecode_schema()
    db.execute("DROP TABLE facts")
    db.execute("CREATE TABLE facts (fact_id TEXT, revision INTEGER, created TEXT, updated TEXT)")
    assert _orphans_in_key_order(db, "revisions") is None

    class _Facts:
        tables = {"facts", "revisions"}

    found = [m for c, m, _loc in _db_checks_rest(_Facts(), db) if c == "db.foreign_key"]
    assert found and "cannot be checked" in found[0] and "mismatch" in found[0]
