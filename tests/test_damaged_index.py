"""An index that disagrees with its table changes no status.

SQLite reads an index as it finds it: an index that lost entries (a
damaged page, a tool that wrote the table past it) or that is another
index's b-tree under its name gives rows that the table does not.  The
whole-store evaluation read the references to validate through the
sessions' index, and the listing read them from the table: a reference the
index did not give was never validated, and the listing called its fact
valid (the demo's stale fact, which ``recall`` calls stale).  The
evaluation now reads the table, as the listing does.  ``validate`` reports
the damage itself (``db.integrity``); every status stays the one the
intact store has."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli, tree_hash

STALE = "0fae3f4a2974d11f"     # the demo's planted problem: stale, digest_mismatch


def _missing_entries(db_path: Path) -> None:
    """The sessions' index without the entries of session demo-beta: built
    as a partial index, then declared a whole one."""
    db = sqlite3.connect(db_path)
    try:
        db.execute("DROP INDEX source_refs_session")
        db.execute("CREATE INDEX source_refs_session ON source_refs(session_id) "
                   "WHERE session_id <> 'demo-beta'")
        db.commit()
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_schema SET sql = 'CREATE INDEX source_refs_session "
                   "ON source_refs(session_id)' WHERE name = 'source_refs_session'")
        db.commit()
    finally:
        db.close()


def _other_tree(db_path: Path) -> None:
    """The sessions' index reading the b-tree of the provenance table's
    index (the demo has no provenance: an empty index)."""
    db = sqlite3.connect(db_path)
    try:
        (root,) = db.execute("SELECT rootpage FROM sqlite_schema "
                             "WHERE name = 'provenance_session'").fetchone()
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_schema SET rootpage = ? WHERE name = 'source_refs_session'",
                   (root,))
        db.commit()
    finally:
        db.close()


DAMAGE = {"missing_entries": _missing_entries, "other_tree": _other_tree}


def _outputs(store: Path) -> dict[str, object]:
    """What the whole-store readers say of every fact."""
    base = ("--store", str(store), "--no-state")
    out: dict[str, object] = {}
    r = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    out["facts jsonl"] = [orjson.loads(line) for line in r.stdout.splitlines()]
    for fmt in ("json", "tsv"):
        r = run_cli(*base, "facts", "--all", "--format", fmt)
        assert r.exit_code == 0, r.stderr
        out[f"facts {fmt}"] = r.stdout
    r = run_cli(*base, "validate", "--json")
    doc = orjson.loads(r.stdout)
    out["validate findings"] = sorted(
        (f["code"], f["message"]) for f in doc["findings"] if f["code"] != "db.integrity")
    out["validate facts"] = [p["facts"] for p in doc["projects"]]
    r = run_cli(*base, "context", "--json")
    assert r.exit_code == 0, r.stderr
    out["context"] = orjson.loads(r.stdout)["text"]
    return out


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_sessions_index_changes_no_status(demo_template, tmp_path, damage):
    intact = copy_demo(demo_template, tmp_path / "intact")
    damaged = copy_demo(demo_template, tmp_path / "damaged")
    DAMAGE[damage](damaged / "facts.sqlite3")
    before = tree_hash(damaged)
    want, got = _outputs(intact), _outputs(damaged)
    for key in want:
        assert got[key] == want[key], key
    stale = [x for x in got["facts jsonl"] if x["fact_id"] == STALE]   # type: ignore[union-attr]
    assert [(x["status"], x["reason"]) for x in stale] == [("stale", "digest_mismatch")]
    r = run_cli("--store", str(damaged), "--no-state", "validate", "--json")
    assert r.exit_code == 1
    assert "db.integrity" in {f["code"] for f in orjson.loads(r.stdout)["findings"]}
    assert tree_hash(damaged) == before


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_sessions_index_that_leaves_rows_out_stops_the_reads_of_that_session(
        demo_template, tmp_path, damage):
    """The reads of one session's facts (``facts --session``, the facts a
    forget would touch) find them through the index: one that gives fewer
    rows than the table is an error (exit 5), never a shorter listing."""
    damaged = copy_demo(demo_template, tmp_path / "damaged")
    DAMAGE[damage](damaged / "facts.sqlite3")
    before = tree_hash(damaged)
    base = ("--store", str(damaged), "--no-state")
    for argv in (("facts", "--session", "demo-beta", "--all", "--format", "jsonl"),
                 ("facts", "--session", "demo-beta", "--json"),
                 ("forget", "--dry-run", STALE)):
        r = run_cli(*base, *argv)
        assert r.exit_code == 5, (argv, r.exit_code, r.stdout, r.stderr)
        if "--json" in argv or "jsonl" in argv:    # the error as a record
            error = orjson.loads(r.stdout)["error"]
            assert error["code"] == "store_corrupt"
            lines = [error["message"]]
        else:
            assert r.stdout == ""
            lines = r.stderr.splitlines()
        assert len(lines) == 1 and "the index of source_refs by session gives 0 row(s) of " \
            "session 'demo-beta', the table 1 (memctl validate reports it)" in lines[0], lines
    assert tree_hash(damaged) == before


def test_a_session_the_index_gives_whole_is_listed(demo_template, tmp_path):
    intact = copy_demo(demo_template, tmp_path / "intact")
    damaged = copy_demo(demo_template, tmp_path / "damaged")
    _missing_entries(damaged / "facts.sqlite3")
    argv = ("--no-state", "facts", "--session", "demo-alpha", "--all", "--format", "jsonl")
    want = run_cli("--store", str(intact), *argv)
    got = run_cli("--store", str(damaged), *argv)
    assert (got.exit_code, got.stdout) == (0, want.stdout) and want.stdout.count("\n") == 2


VALID = "c283ab7d8ed884e4"      # a valid demo fact (demo-alpha:2-4)
FAKE = "0" * 64


def _covering(db_path: Path, *, keyless: bool) -> None:
    """An index holding every column of source_refs whose entry for the
    valid fact holds another digest (built on an expression, then declared
    on the column); with ``keyless``, the table has lost its primary key."""
    db = sqlite3.connect(db_path)
    try:
        if keyless:
            db.execute("PRAGMA foreign_keys = OFF")
            db.execute("CREATE TABLE x2 (fact_id, revision, session_id, seqs, digest)")
            db.execute("INSERT INTO x2 SELECT * FROM source_refs")
            db.execute("DROP TABLE source_refs")
            db.execute("ALTER TABLE x2 RENAME TO source_refs")
            db.execute("CREATE INDEX source_refs_session ON source_refs(session_id)")
        db.execute("CREATE INDEX source_refs_cov ON source_refs(fact_id, revision, session_id, "
                   f"seqs, CASE WHEN fact_id = '{VALID}' THEN '{FAKE}' ELSE digest END)")
        db.execute(f"CREATE INDEX source_refs_cov2 ON source_refs(fact_id, session_id, seqs, "
                   f"CASE WHEN fact_id = '{STALE}' THEN '{FAKE}' ELSE digest END)")
        db.commit()
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_schema SET sql = 'CREATE INDEX source_refs_cov ON "
                   "source_refs(fact_id, revision, session_id, seqs, digest)' "
                   "WHERE name = 'source_refs_cov'")
        db.execute("UPDATE sqlite_schema SET sql = 'CREATE INDEX source_refs_cov2 ON "
                   "source_refs(fact_id, session_id, seqs, digest)' "
                   "WHERE name = 'source_refs_cov2'")
        db.commit()
    finally:
        db.close()


def _statuses(store: Path, *argv: str, env: dict[str, str] | None = None) -> list[tuple]:
    r = run_cli("--store", str(store), "--no-state", "facts", *argv, "--all",
                "--format", "jsonl", env=env)
    assert r.exit_code == 0, r.stderr
    return [(x["fact_id"], x["status"], x["reason"], x["source_ref"])
            for x in map(orjson.loads, r.stdout.splitlines())]


@pytest.mark.parametrize("keyless", [False, True], ids=["with_key", "keyless"])
def test_an_index_holding_other_values_gives_no_listing_a_value_unvalidated(
        demo_template, tmp_path, keyless):
    """Where the listing looks a revision's source up by key (one session's
    facts; the whole store read through the indexes, when SQLite's temporary
    directory is in the store), it reads the table's values, as the
    evaluation does: an index that holds every column, with another digest,
    gave a listing a digest never validated, called valid (recall: stale)."""
    intact = copy_demo(demo_template, tmp_path / "intact")
    damaged = copy_demo(demo_template, tmp_path / "damaged")
    _covering(damaged / "facts.sqlite3", keyless=keyless)
    before = tree_hash(damaged)
    for argv in ((), ("--session", "demo-beta"), ("--session", "demo-alpha")):
        want = _statuses(intact, *argv)
        assert want and all(x[3]["digest"] != FAKE for x in want)
        for env in (None, {"SQLITE_TMPDIR": str(damaged)}):
            assert _statuses(damaged, *argv, env=env) == want, (argv, env)
    assert tree_hash(damaged) == before


def test_a_failed_sort_of_the_references_sorts_them_in_memory(demo_template, tmp_path,
                                                              monkeypatch):
    """The evaluation sorts the references on a second connection whose
    sorter may spill to SQLite's temporary directory: when that sort fails
    (a full directory), they are sorted on the first, not lost or refused."""
    from lecode_memctl.core import facts as facts_mod

    store = copy_demo(demo_template, tmp_path / "demo")
    want = _statuses(store)
    real = facts_mod.FactStore._sibling
    failed: list[str] = []

    class Full:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if "FROM source_refs f NOT INDEXED" in sql:
                failed.append(sql)
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.db, name)

    def sibling(self):  # noqa: ANN001, ANN202
        db = real(self)
        return None if db is None else Full(db)

    monkeypatch.setattr(facts_mod.FactStore, "_sibling", sibling)
    assert _statuses(store) == want
    assert failed



# ---------------------------------------------------------------- declared otherwise

def _declare(db_path: Path, table: str, column_sql: str, declared: str,
             *statements: str) -> None:
    """Table ``table`` declared with ``declared`` for ``column_sql`` (its
    indexes rebuilt for it), then ``statements`` run."""
    db = sqlite3.connect(db_path)
    try:
        (sql,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).fetchone()
        assert column_sql in sql
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?",
                   (sql.replace(column_sql, declared), table))
        db.commit()
        db.execute("PRAGMA writable_schema = OFF")
        db.close()
        db = sqlite3.connect(db_path)
        db.execute("REINDEX")
        db.execute("PRAGMA foreign_keys = OFF")
        for s in statements:
            db.execute(s)
        db.commit()
    finally:
        db.close()


def _recalled(store: Path, fact_id: str) -> tuple[str, str | None]:
    r = run_cli("--store", str(store), "--no-state", "recall", fact_id, "--json")
    doc = orjson.loads(r.stdout)
    return doc["status"], doc["reason"]


RENAMED = "bfae3f4a2974d11f"   # the stale fact, under an id after an upper-case one


def _rename_stale() -> tuple[str, ...]:
    return tuple(f"UPDATE {t} SET fact_id = '{RENAMED}' WHERE fact_id = '{STALE}'"
                 for t in ("facts", "revisions", "source_refs"))


def test_ids_compared_as_a_declared_collation_list_nothing_unvalidated(demo_template,
                                                                      tmp_path):
    """facts.fact_id declared COLLATE NOCASE, and a provenance row citing
    session demo-gamma under the stale fact's id in capitals: the session
    listing matched the fact case-insensitively, the evaluation did not,
    and the stale fact was listed valid.  Ids are compared as Python
    compares them by every reader."""
    store = copy_demo(demo_template, tmp_path / "demo")
    _declare(store / "facts.sqlite3", "facts", "fact_id  TEXT PRIMARY KEY",
             "fact_id  TEXT PRIMARY KEY COLLATE NOCASE",
             f"INSERT INTO provenance VALUES ('{STALE.upper()}', 1, 'demo-gamma', 0)")
    for argv in ((), ("--session", "demo-gamma"), ("--session", "demo-beta")):
        for fid, status, reason, _ref in _statuses(store, *argv):
            assert (status, reason) == _recalled(store, fid), (argv, fid)
    assert [x[:3] for x in _statuses(store, "--session", "demo-beta")] == [
        (STALE, "stale", "digest_mismatch")]


@pytest.mark.parametrize("sibling", [True, False], ids=["sorted", "joined"])
def test_parts_cut_every_table_alike_whatever_its_collation(demo_template, tmp_path,
                                                            monkeypatch, sibling):
    """source_refs.fact_id declared COLLATE NOCASE and an upper-case id
    among the facts: the part filter cut source_refs elsewhere than facts,
    so a split listing lost a source (unverified) or, reading sources by
    key, listed one its part never validated (valid; recall: stale).  Both
    parts around every bound make the one-part listing."""
    from lecode_memctl.core import facts as facts_mod
    from lecode_memctl.core.factview import _listing_rows
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = copy_demo(demo_template, tmp_path / "demo")
    upper = "C000000000000000"
    _declare(store / "facts.sqlite3", "source_refs", "fact_id    TEXT NOT NULL",
             "fact_id    TEXT NOT NULL COLLATE NOCASE", *_rename_stale(),
             f"INSERT INTO facts SELECT '{upper}', revision, created, updated FROM facts "
             f"WHERE fact_id = '{VALID}'",
             f"INSERT INTO revisions SELECT '{upper}', revision, text, created FROM revisions "
             f"WHERE fact_id = '{VALID}'",
             f"INSERT INTO source_refs SELECT '{upper}', revision, session_id, seqs, digest "
             f"FROM source_refs WHERE fact_id = '{VALID}'")
    if not sibling:
        monkeypatch.setattr(facts_mod, "_sqlite_tempdir_outside", lambda _dir: False)
    st = store_at(store)
    with facts_mod.FactStore.open_readonly(st.facts_db) as fs:
        sessions = SessionStore(st, exclusions=fs)
        whole = list(_listing_rows(fs, sessions, None, False))
        ids = sorted(r["fact_id"] for r in whole)
        assert [r["status"] for r in whole if r["fact_id"] == RENAMED] == ["stale"]
        for bound in ids:
            parts = [r for second in (False, True)
                     for r in _listing_rows(fs, sessions, None, False, (bound, second))]
            assert parts == whole, bound


def _keyless_store(path: Path, n: int) -> Path:
    """A facts database of ``n`` facts whose source_refs lost its primary key."""
    from lecode_memctl.core.facts import FactStore

    db_path = path / "facts.sqlite3"
    path.mkdir(parents=True)
    with FactStore(db_path) as fs:
        fs.add("bootstrap so the schema exists")
    db = sqlite3.connect(db_path)
    try:
        db.execute("PRAGMA foreign_keys = OFF")
        for t in ("source_refs", "provenance", "revisions", "facts"):
            db.execute(f"DELETE FROM {t}")
        ids = [f"{i * 7919:016x}" for i in range(n)]
        db.executemany("INSERT INTO facts VALUES (?, 1, '2026-01-01T00:00:00.000Z', "
                       "'2026-01-01T00:00:00.000Z')", [(i,) for i in ids])
        db.executemany("INSERT INTO revisions VALUES (?, 1, 'text', "
                       "'2026-01-01T00:00:00.000Z')", [(i,) for i in ids])
        db.execute("CREATE TABLE x2 (fact_id, revision, session_id, seqs, digest)")
        db.executemany(f"INSERT INTO x2 VALUES (?, 1, 's1', '[1]', '{'a' * 64}')",
                       [(i,) for i in ids])
        db.execute("DROP TABLE source_refs")
        db.execute("ALTER TABLE x2 RENAME TO source_refs")
        db.execute("CREATE INDEX source_refs_session ON source_refs(session_id)")
        db.commit()
    finally:
        db.close()
    return db_path


@pytest.mark.parametrize("session", [None, "s1"], ids=["whole", "session"])
def test_sources_without_their_key_are_read_in_steps_linear_in_the_facts(tmp_path, monkeypatch,
                                                                        session):
    """A listing that looks sources up by key, on a source_refs that lost
    its primary key, reads them through an index SQLite builds from the
    table, not a scan of the table per revision (``NOT INDEXED`` in the
    join): SQLite's steps (its progress handler, not a clock) grow with
    the facts, not with their square."""
    from lecode_memctl.core import facts as facts_mod

    monkeypatch.setattr(facts_mod, "_sqlite_tempdir_outside", lambda _dir: False)
    steps = []
    for n in (500, 2000):
        with facts_mod.FactStore.open_readonly(_keyless_store(tmp_path / str(n), n)) as fs:
            db = fs.read_connection()
            assert db is not None
            ticks: list[int] = []
            db.set_progress_handler(lambda t=ticks: t.append(1) or 0, 100)
            assert len(list(fs.start_listing(session).groups())) == n
            steps.append(len(ticks))
    assert steps[1] < 6 * steps[0], steps


REVISED = "80fa60fdfe856452"    # the demo's fact at revision 2 (revision 1's text superseded)


def _facts_reads_the_revisions_tree(db_path: Path) -> None:
    """The facts table reading the revisions table's b-tree under its name
    (its unique index on fact_id intact): the table then holds the revised
    fact's id twice, which the index does not say."""
    db = sqlite3.connect(db_path)
    try:
        (root,) = db.execute("SELECT rootpage FROM sqlite_schema "
                             "WHERE name = 'revisions'").fetchone()
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_schema SET rootpage = ? WHERE name = 'facts'", (root,))
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("argv", [(), ("--session", "demo-alpha")], ids=["all", "session"])
def test_an_id_twice_in_facts_that_its_unique_index_does_not_hold_is_one_hidden_fact(
        demo_template, tmp_path, argv):
    """A facts table whose rows hold an id twice while its unique index on
    fact_id holds it once (the table reading another b-tree): the readers
    took the index's word that no id is stored twice, and the listing gave
    the id twice, once valid with revision 1's superseded text, which
    ``context`` injected.  Such an id is one fact to every reader of the
    whole store and of its pages, hidden (FORMAT.md: a fact id with two rows
    in facts), and nothing of it is injected; the store is not changed.
    (``recall``, a bounded read by key, finds the one row the index gives:
    FORMAT.md says so.)"""
    store = copy_demo(demo_template, tmp_path / "demo")
    _facts_reads_the_revisions_tree(store / "facts.sqlite3")
    before = tree_hash(store)
    rows = _statuses(store, *argv)
    ids = [r[0] for r in rows]
    assert ids.count(REVISED) == 1, rows
    listed = {fid: (status, reason) for fid, status, reason, _ref in rows}
    assert listed[REVISED] == ("hidden", "invalid_ref")
    r = run_cli("--store", str(store), "--no-state", "facts", *argv, "--json")
    assert r.exit_code == 0, r.stderr
    page = {f["fact_id"]: (f["status"], f["reason"]) for f in orjson.loads(r.stdout)["facts"]}
    assert page == listed
    r = run_cli("--store", str(store), "--no-state", "context", "--json")
    assert r.exit_code == 0, r.stderr
    assert REVISED not in orjson.loads(r.stdout)["text"]
    assert tree_hash(store) == before


@pytest.mark.parametrize("bare", [False, True], ids=["with_revisions", "without_revisions"])
def test_an_id_twice_in_facts_and_in_its_unique_index_is_one_hidden_fact(demo_template,
                                                                        tmp_path, bare):
    """A facts table rebuilt without its key, holding the revised fact's id
    twice, with a unique index on fact_id declared over it (built as a plain
    one: it holds the duplicate, and as many entries as the table has
    rows).  ids_stored_twice takes such an index at its word, and the
    listing gave the id twice, once valid.  The listing's merge, which reads
    the table's rows in id order, makes them one fact, hidden; ``context``
    injects neither text; the store is not changed."""
    store = copy_demo(demo_template, tmp_path / "demo")
    db = sqlite3.connect(store / "facts.sqlite3", isolation_level=None)
    try:
        for sql in ("PRAGMA foreign_keys = OFF",
                    "CREATE TABLE f2 (fact_id TEXT, revision INTEGER NOT NULL, "
                    "created TEXT NOT NULL, updated TEXT NOT NULL)",
                    "INSERT INTO f2 SELECT * FROM facts",
                    f"INSERT INTO f2 SELECT fact_id, 1, created, updated FROM facts "
                    f"WHERE fact_id = '{REVISED}'",
                    "DROP TABLE facts", "ALTER TABLE f2 RENAME TO facts",
                    "CREATE INDEX ux ON facts(fact_id)", "PRAGMA writable_schema = ON",
                    "UPDATE sqlite_schema SET sql = 'CREATE UNIQUE INDEX ux ON facts(fact_id)' "
                    "WHERE name = 'ux'"):
            db.execute(sql)
        if bare:    # (no revision: each row was listed as a fact of its own)
            for table in ("source_refs", "revisions"):
                db.execute(f"DELETE FROM {table} WHERE fact_id = '{REVISED}'")
    finally:
        db.close()
    before = tree_hash(store)
    for argv in ((), ("--session", "demo-alpha")) if not bare else ((),):
        rows = _statuses(store, *argv)
        assert [r[0] for r in rows].count(REVISED) == 1, (argv, rows)
        listed = {fid: (status, reason) for fid, status, reason, _ref in rows}
        assert listed[REVISED] == ("hidden", "invalid_ref"), argv
    r = run_cli("--store", str(store), "--no-state", "context", "--json")
    assert r.exit_code == 0, r.stderr
    assert REVISED not in orjson.loads(r.stdout)["text"]
    assert tree_hash(store) == before
