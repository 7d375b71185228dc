"""A damaged page of the facts database gets the same answer from every
read, whatever the process did before.

SQLite takes a page in lazily: without ``cell_size_check`` a read of a
damaged page followed the page's cell offsets past its cells, and a page it
could not take in stayed in the connection's cache half set up.  What the
next statement read then depended on memory the process had used before:
the same damaged store gave ``integrity_check``'s findings in one audit and
"database disk image is malformed" alone in the next (about one in three),
and a listing an error in one run and rows in the next.  Every connection
of the store now checks each page as it reads it, and empties its cache
after such an error (``core.facts._forget_pages``)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from lecode_memctl.core.audit import run as audit_run, validate_store
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at

from .builders import copy_demo

RUNS = 6


def _damage(db_path: Path, name: str, offset: int, count: int) -> int:
    """``count`` bytes 0xff at ``offset`` in the root page of table or index
    ``name``; returns that page's number."""
    db = sqlite3.connect(db_path)
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                         (name,)).fetchone()
    (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    with open(db_path, "r+b") as f:
        f.seek((root - 1) * size + offset)
        f.write(b"\xff" * count)
    return int(root)


def _stir(rng: random.Random) -> None:
    """Memory used and given back, as the process's other work would."""
    held = [rng.randbytes(rng.randint(100, 6000)) for _ in range(40)]
    del held


# (table or index, offset in its root page, bytes): the cell pointers of an
# index and of tables, a page's type, its first free block
DAMAGE = [
    ("sqlite_autoindex_source_refs_1", 8, 200),
    ("sqlite_autoindex_facts_1", 8, 200),
    ("meta", 8, 200),
    ("facts", 8, 200),
    ("exclusions", 0, 1),
    ("revisions", 8, 200),
    ("source_refs", 3, 2),
]


@pytest.mark.heavy
@pytest.mark.parametrize("name, offset, count", DAMAGE)
@pytest.mark.parametrize("defer", [True, False])
def test_every_audit_of_a_damaged_store_says_the_same(demo_template, tmp_path, monkeypatch,
                                                      name, offset, count, defer):
    store = copy_demo(demo_template, tmp_path / "demo")
    _damage(store / "facts.sqlite3", name, offset, count)
    if not defer:   # (integrity_check on its thread, the rest on this one)
        monkeypatch.setattr(audit_run.Audit, "may_fork", lambda self: True)
    rng = random.Random(f"{name}{offset}{defer}")
    outcomes = set()
    for _ in range(RUNS):
        _stir(rng)
        try:
            findings = validate_store(store_at(store))[0]
        except sqlite3.DatabaseError as exc:   # (were one to escape the audit)
            outcomes.add(("stopped", str(exc)))
        else:
            outcomes.add(tuple((f.code, f.message) for f in findings))
    assert len(outcomes) == 1, outcomes


def test_a_damaged_index_is_reported_with_its_page(demo_template, tmp_path):
    """integrity_check stops at the damaged index; quick_check, which does
    not look rows up in their indexes, still names the page."""
    store = copy_demo(demo_template, tmp_path / "demo")
    page = _damage(store / "facts.sqlite3", "sqlite_autoindex_source_refs_1", 8, 200)
    messages = [f.message for f in validate_store(store_at(store))[0]
                if f.code == "db.integrity"]
    assert messages[0].startswith("integrity_check: stopped: database disk image is "
                                  "malformed; quick_check"), messages
    assert messages[1:] and all(m.startswith("quick_check: ") for m in messages[1:]), messages
    assert any(f"On tree page {page} " in m for m in messages[1:]), messages


def test_a_read_after_a_damaged_page_gets_the_same_answer(demo_template, tmp_path):
    """The connection that met the damaged page reads it again as SQLite
    first did (without emptying its cache, quick_check after a failed
    integrity_check on one connection failed in some runs and reported
    the damage in others)."""
    store = copy_demo(demo_template, tmp_path / "demo")
    _damage(store / "facts.sqlite3", "meta", 8, 200)
    rng = random.Random(1)
    outcomes = set()
    for _ in range(24):
        _stir(rng)
        fs = FactStore.open_readonly(store / "facts.sqlite3")
        try:
            db = fs.read_connection()
            assert db is not None
            with pytest.raises(sqlite3.DatabaseError):
                db.execute("PRAGMA integrity_check").fetchall()
            try:
                outcomes.add(tuple(r[0] for r in db.execute("PRAGMA quick_check")))
            except sqlite3.DatabaseError as exc:
                outcomes.add(("stopped", str(exc)))
        finally:
            fs.close()
    assert len(outcomes) == 1, outcomes


def test_every_connection_checks_its_pages(demo_template, tmp_path):
    """The writer's connection, the reader's, and the reader's others."""
    store = copy_demo(demo_template, tmp_path / "demo")
    opened: list[sqlite3.Connection] = []
    reader = FactStore(store / "facts.sqlite3", on_connect=opened.append, _readonly=True)
    try:
        assert reader.in_background("test", lambda db: None) is not None
        assert len(opened) == 2
        assert [db.execute("PRAGMA cell_size_check").fetchone()[0] for db in opened] == [1, 1]
    finally:
        reader.close()
    with FactStore(store / "facts.sqlite3", on_connect=opened.append) as writer:
        assert len(opened) == 3
        assert writer._ensure_writer().execute("PRAGMA cell_size_check").fetchone()[0] == 1


@pytest.mark.parametrize("damage", [None, ("meta", 8, 200)])
def test_without_a_second_connection_the_facts_are_still_read_with_checks(
        demo_template, tmp_path, monkeypatch, damage):
    """With no second connection (``in_background`` None: no snapshot, or
    SQLite's temporary directory may be in the store) integrity_check runs
    on the connection the facts are then read from: the check of a sound
    database without cell_size_check must not leave it off there."""
    from lecode_memctl.core.audit import facts as audit_facts

    store = copy_demo(demo_template, tmp_path / "demo")
    if damage:
        _damage(store / "facts.sqlite3", *damage)
    monkeypatch.setattr(FactStore, "in_background", lambda self, name, work: None)
    seen = []
    real = audit_facts._load_facts

    def load(audit, fs, db):
        seen.append(db.execute("PRAGMA cell_size_check").fetchone()[0])
        return real(audit, fs, db)

    monkeypatch.setattr(audit_facts, "_load_facts", load)
    outcomes = {tuple((f.code, f.message) for f in validate_store(store_at(store))[0])
                for _ in range(3)}
    assert len(outcomes) == 1
    assert 0 not in seen, seen
    assert seen or damage, "the facts of a sound store were read"


def test_an_interrupted_check_is_not_taken_for_damage(demo_template, tmp_path, monkeypatch):
    """integrity_check stopped by an interrupt (the store closing under it,
    Ctrl-C) or an I/O error is not run again as a damaged page would be
    (seconds at 1,000,000 facts): the error is the audit's, as before."""
    store = copy_demo(demo_template, tmp_path / "demo")
    asked: list[str] = []

    class Interrupted:
        def __init__(self, conn):
            self.conn = conn

        def __getattr__(self, name):        # (setlimit, ...: the connection's own)
            return getattr(self.conn, name)

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA integrity_check") or sql.startswith("PRAGMA quick_check"):
                asked.append(sql)
                raise sqlite3.OperationalError("interrupted")
            return self.conn.execute(sql, *args)

    real = FactStore.in_background
    monkeypatch.setattr(FactStore, "in_background",
                        lambda self, name, work: real(self, name, lambda c: work(Interrupted(c))))
    findings = validate_store(store_at(store))[0]
    assert asked == ["PRAGMA integrity_check"]
    assert [(f.code, f.message) for f in findings if f.code.startswith("db.")] == [
        ("db.unreadable", "database error while auditing: interrupted")]


def test_a_read_again_that_meets_the_damage_empties_the_cache_too(demo_template, tmp_path,
                                                                   monkeypatch):
    """A fetch that fails is taken again row by row to give the rows before
    the damaged one (``_Cursor._rows_before``); that read meets the damaged
    page again, and the cache is emptied after it as after the first."""
    from lecode_memctl.core import facts as core_facts

    from .test_split_validate import _many, _overflow_any

    store = copy_demo(demo_template, tmp_path / "demo")
    _many(store)
    _overflow_any(store, "revisions", "text", -1)
    emptied: list[str] = []
    real = core_facts._forget_pages
    monkeypatch.setattr(core_facts, "_forget_pages",
                        lambda conn, exc: (emptied.append(str(exc)), real(conn, exc)))
    with FactStore.open_readonly(store / "facts.sqlite3") as fs:
        db = fs.read_connection()
        assert db is not None
        cur = db.execute("SELECT rowid, text FROM revisions")
        with pytest.raises(sqlite3.DatabaseError):
            while cur.fetchmany(100):
                pass
    # the batch's failure, then the read again's
    assert len(emptied) == 2, emptied
