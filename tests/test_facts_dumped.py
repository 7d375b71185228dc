"""A version-3 facts database rebuilt by ``.dump`` / ``iterdump()`` (which do
not keep ``PRAGMA user_version``): every table is there, ``user_version`` is
0 (or whatever a hand set it to).  Its next write migrates it to version 3
keeping every row and the generation the readers showed; a migration that
cannot apply leaves the file as it was, byte for byte, and says why (exit 5)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import facts as facts_mod
from lecode_memctl.core.errors import Conflict, StoreCorrupt
from lecode_memctl.core.facts import SCHEMA_VERSION, FactStore
from lecode_memctl.core.layout import store_for_project

from .test_facts import dump
from .test_facts_cli import FIXED, cli, read_json, remember, write_session


def files(path: Path) -> dict[str, str]:
    """Every file beside the database, with its sha256 (no -wal or -journal left)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.iterdir()) if p.name.startswith(path.name)}


def pragma(path: Path, name: str) -> object:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        db.close()


def rebuild(path: Path, version: int) -> None:
    """``path`` rebuilt by ``iterdump()`` into a new file (user_version 0,
    rollback-journal mode), then ``user_version`` set by hand to ``version``."""
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    script = "\n".join(src.iterdump())
    src.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(script)
    if version:
        db.execute(f"PRAGMA user_version = {version}")
    db.close()
    os.chmod(path, 0o600)
    assert pragma(path, "user_version") == version
    assert pragma(path, "journal_mode") == "delete"


@pytest.fixture
def dumped(config_dir, project, request):
    """Four facts of two sessions, one of them forgotten (generation 1), the
    database rebuilt: (store, ids of the three left, the forgotten id)."""
    store = store_for_project(config_dir, project)
    write_session(store, "s1")
    write_session(store, "s2")
    a = remember(store, 1).fact_id
    b = remember(store, 3, FIXED).fact_id
    c = remember(store, 1, sid="s2").fact_id
    d = remember(store, 3, FIXED, sid="s2").fact_id
    assert cli(project, "forget", d, "--yes").exit_code == 0
    rebuild(store.facts_db, request.param)
    return store, (a, b, c), d


def statuses(project) -> dict[str, tuple[str, str | None, int]]:
    doc = read_json(project, "facts")
    return {f["fact_id"]: (f["status"], f["reason"], f["revision"]) for f in doc["facts"]}


def check_migrated(path: Path, before: dict[str, list]) -> dict[str, list]:
    assert pragma(path, "user_version") == SCHEMA_VERSION
    assert pragma(path, "journal_mode") == "wal"
    after = dump(path)
    assert set(after) == set(before)
    return after


@pytest.mark.parametrize("dumped", [0, 1, 2], indirect=True)
def test_forget_migrates_a_dumped_database(project, dumped):
    store, (a, b, c), d = dumped
    before = dump(store.facts_db)
    shown = statuses(project)
    assert set(shown) == {a, b, c} and {s for s, _, _ in shown.values()} == {"valid"}
    r = cli(project, "forget", c, "--yes")
    assert r.exit_code == 0, r.stderr
    after = check_migrated(store.facts_db, before)
    assert after["meta"] == [("generation", 2)]
    assert [row[0] for row in after["forgotten"]] == sorted([c, d])
    assert set(before["exclusions"]) < set(after["exclusions"])
    for table in ("schema_migrations",):
        assert after[table] == before[table]     # the records the dump kept
    assert statuses(project) == {k: v for k, v in shown.items() if k != c}
    # the next write goes as any other
    assert cli(project, "forget", b, "--yes").exit_code == 0
    assert statuses(project) == {a: shown[a]}


@pytest.mark.parametrize("dumped", [0, 2], indirect=True)
def test_correct_migrates_a_dumped_database(project, dumped):
    store, (a, b, c), d = dumped
    before = dump(store.facts_db)
    shown = statuses(project)
    r = cli(project, "correct", a, "1", "s1", "3", "3", FIXED, "--yes")
    assert r.exit_code == 0, r.stderr
    after = check_migrated(store.facts_db, before)
    assert after["meta"] == before["meta"] == [("generation", 1)]
    assert after["exclusions"] == before["exclusions"]
    now = statuses(project)
    assert now[a] == ("valid", None, 2)
    assert {k: v for k, v in now.items() if k != a} == {k: v for k, v in shown.items() if k != a}


@pytest.mark.parametrize("dumped", [0], indirect=True)
def test_remember_migrates_a_dumped_database(project, dumped):
    store, (a, b, c), d = dumped
    before = dump(store.facts_db)
    shown = statuses(project)
    fact = remember(store, 1, "We use tabs (again).", sid="s1")
    after = check_migrated(store.facts_db, before)
    assert after["meta"] == [("generation", 1)]
    for table in ("exclusions", "forgotten", "schema_migrations"):
        assert after[table] == before[table]
    assert statuses(project) == {**shown, fact.fact_id: ("valid", None, 1)}


@pytest.mark.parametrize("dumped", [0], indirect=True)
def test_meta_without_a_generation_row_keeps_the_implied_generation(project, dumped):
    """A dumped database whose generation row is gone reads as the generation
    its rows imply (1: it holds exclusions and a retry marker); the migration
    writes that value, never 0, so the forgotten fact's evidence stays hidden."""
    store, (a, b, c), d = dumped
    db = sqlite3.connect(store.facts_db)
    db.execute("DELETE FROM meta")
    db.commit()
    db.close()
    with FactStore.open_readonly(store.facts_db) as ro:
        assert ro.generation() == 1 and ro.needs_migration
    shown = statuses(project)
    assert cli(project, "correct", a, "1", "s1", "3", "3", FIXED, "--yes").exit_code == 0
    assert dump(store.facts_db)["meta"] == [("generation", 1)]
    assert {k: v for k, v in statuses(project).items() if k != a} == {
        k: v for k, v in shown.items() if k != a}


def _meta_of_another_shape(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("DROP TABLE meta")
    db.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER)")
    db.commit()
    db.close()


@pytest.mark.parametrize("dumped", [0], indirect=True)
def test_a_migration_that_cannot_apply_changes_nothing(project, dumped):
    store, (a, b, c), d = dumped
    _meta_of_another_shape(store.facts_db)
    before = files(store.facts_db)
    assert list(before) == ["facts.sqlite3"]
    for args in (("forget", c, "--yes"), ("correct", a, "1", "s1", "3", "3", FIXED, "--yes")):
        r = cli(project, *args)
        assert r.exit_code == 5, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "cannot be migrated" in lines[0] and "table meta lacks column" in lines[0]
        assert "unreadable" not in lines[0]
        assert files(store.facts_db) == before
    # validate does not promise a migration that cannot succeed
    r = cli(project, "validate", "--json")
    assert r.exit_code == 1, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    codes = {(f["code"], f.get("file")) for f in doc["findings"]}
    assert ("db.needs_migration", "facts.sqlite3") not in codes
    found = [f for f in doc["findings"] if f["code"] == "db.schema_unknown"]
    assert found and "table meta lacks column" in found[0]["message"], doc["findings"]
    assert files(store.facts_db) == before


@pytest.mark.parametrize("dumped", [0], indirect=True)
def test_a_failing_migration_step_changes_nothing(dumped, monkeypatch):
    store, (a, b, c), d = dumped
    before = files(store.facts_db)

    def broken(db):
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        db.execute("CREATE TABLE scratch (x)")
        raise RuntimeError("boom")

    monkeypatch.setattr(facts_mod, "MIGRATIONS", [*facts_mod.MIGRATIONS[:2],
                                                  ("m003_generation", broken)])
    fs = FactStore(store.facts_db)
    try:
        with pytest.raises(RuntimeError):
            fs.forget(c)
        assert fs.needs_migration and fs.schema_version == 0
        with pytest.raises(RuntimeError):
            fs.forget(c)
    finally:
        fs.close()
    assert files(store.facts_db) == before


@pytest.mark.parametrize("dumped", [0], indirect=True)
def test_a_refused_write_does_not_migrate(dumped):
    store, (a, b, c), d = dumped
    before = files(store.facts_db)
    with FactStore(store.facts_db) as fs, pytest.raises(Conflict):
        fs.revise(a, "x", expected_revision=7)
    assert files(store.facts_db) == before


def test_unknown_shape_message_names_the_table(tmp_path):
    path = tmp_path / "facts.sqlite3"
    with FactStore(path) as fs:
        fs.add("x")
    rebuild(path, 0)
    _meta_of_another_shape(path)
    before = files(path)
    with pytest.raises(StoreCorrupt) as got, FactStore(path) as fs:   # refused at the open
        fs.add("y")
    assert files(path) == before
    assert "cannot be migrated" in str(got.value) and "meta" in str(got.value)
    assert orjson.dumps(str(got.value)).count(b"\\n") == 0


def test_a_statement_the_migration_cannot_run_changes_nothing(tmp_path):
    """A ``meta`` of the right columns whose key collates NOCASE and holds
    'GENERATION' only: the shape passes, the generation row cannot be
    inserted -- refused inside the write's transaction, named, exit 5, and
    the file (rollback-journal mode) is as it was."""
    path = tmp_path / "facts.sqlite3"
    with FactStore(path) as fs:
        fs.add("x")
    rebuild(path, 0)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE meta")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY COLLATE NOCASE, value INTEGER NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('GENERATION', 0)")
    db.commit()
    db.close()
    before = files(path)
    with pytest.raises(StoreCorrupt) as got, FactStore(path) as fs:
        fs.add("y")
    assert got.value.exit_code == 5
    assert "cannot be migrated to 3 (m003_generation): UNIQUE constraint failed: meta.key" in str(
        got.value)
    assert files(path) == before
    assert pragma(path, "journal_mode") == "delete"


def test_a_writer_reads_what_another_process_migrated(tmp_path):
    """An agent's project open on an older database (its writer migrates at
    its first write, not at open) while another process migrates it and
    records a fact: the agent reads the database as it now is.  It read the
    tables it had loaded at open: the new fact without its source
    (unverified, legacy_provenance), recall without a source, and
    needs_migration still true (a review of b85132a)."""
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.project import open_project
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(tmp_path / "memory" / "proj")
    with SessionStore(store).create("s1") as w:
        w.append_message("user", "We use tabs for indentation.")
    db = sqlite3.connect(store.facts_db)      # schema version 0, as test_facts builds it
    db.executescript("""
    CREATE TABLE facts (fact_id TEXT PRIMARY KEY, revision INTEGER NOT NULL, created TEXT NOT NULL,
      updated TEXT NOT NULL);
    CREATE TABLE revisions (fact_id TEXT NOT NULL REFERENCES facts(fact_id) ON DELETE CASCADE,
      revision INTEGER NOT NULL, text TEXT NOT NULL, created TEXT NOT NULL,
      PRIMARY KEY (fact_id, revision));
    CREATE TABLE provenance (fact_id TEXT NOT NULL, revision INTEGER NOT NULL,
      session_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (fact_id, revision, session_id, seq));
    CREATE TABLE exclusions (session_id TEXT NOT NULL, seq INTEGER NOT NULL,
      PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
    INSERT INTO facts VALUES ('00000000000000aa', 1, '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z');
    INSERT INTO revisions VALUES ('00000000000000aa', 1, 'old fact', '2025-01-01T00:00:00Z');
    INSERT INTO provenance VALUES ('00000000000000aa', 1, 's1', 1);""")
    db.commit()
    db.close()
    with open_project(store=store.path) as agent:
        fs = agent.facts
        assert (fs.schema_version, fs.needs_migration) == (0, True)
        with open_project(store=store.path) as other:
            new = other.remember("We use tabs for indentation.",
                                 other.sessions.source_snapshot("s1", 1, 1).ref).fact
        rows = {f["fact_id"]: (f["status"], f["reason"]) for f in agent.list_facts()["facts"]}
        assert rows[new.fact_id] == ("valid", None), rows
        assert "source" in agent.recall(new.fact_id)
        assert (fs.schema_version, fs.needs_migration) == (3, False)
        agent.remember("Tabs, width 4.", agent.sessions.source_snapshot("s1", 1, 1).ref)
    with open_project(store=store.path) as fresh:
        assert {f["status"] for f in fresh.list_facts()["facts"]} == {"valid", "unverified"}
