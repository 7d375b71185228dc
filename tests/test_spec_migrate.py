"""Issue 11, point 8: legacy migration ends.

An existing destination is the design's normal case (never merged, legacy
files kept): it is reported with a hint, and the run exits 0 once everything
that can be copied is copied; exit 4 is kept for ``--fail-on-conflict``.
``--diff`` shows each conflicting file's legacy content against the
project's.  The core function the agent calls on first use migrates the
working directory's legacy store only.  A legacy (version-0) facts database
that holds exclusions migrates with a generation of at least 1."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import migrate
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.identity import slug
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .conftest import make_repo, run_cli, tree_hash
from .test_facts import LEGACY_SQL


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)


@pytest.fixture
def proj(tmp_path, config_dir):
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "c").mkdir()
    store = config_dir / "memory" / slug(str(repo))
    put(store / "MEMORY.md", "# Project\n- use tabs\n- run make test\n")
    put(store / "notes" / "deploy checklist.md", "1. build\n")
    cwd_leg = legacy_path(config_dir, repo / "a" / "b")
    put(cwd_leg / "MEMORY.md", "# Project\n- use tabs\n- deploy on fridays\n")   # conflict
    put(cwd_leg / "scratchpad.md", "- [ ] item\n")                                  # copy
    put(cwd_leg / "notes" / "deploy checklist.md", "1. build\n2. ship\n")          # conflict
    put(cwd_leg / "daily" / "2024-03-01.md", "log\n")                               # copy
    parent_leg = legacy_path(config_dir, repo / "a")
    put(parent_leg / "notes" / "parent.md", "from the parent dir\n")
    tree_leg = legacy_path(config_dir, repo / "c")
    put(tree_leg / "notes" / "tree.md", "from elsewhere in the tree\n")
    return repo, store, cwd_leg


def test_existing_destinations_exit_0_with_a_hint(proj):
    repo, store, cwd_leg = proj
    cwd = repo / "a" / "b"
    legacy_before = tree_hash(cwd_leg)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "2 conflicts" in r.stdout
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "copied 4 of 4 files" in r.stdout
    out = " ".join(r.stdout.split())
    assert "never merged" in out and "--diff" in out
    assert "memctl edit memory" in out and "memctl edit note 'deploy checklist'" in out
    assert (store / "MEMORY.md").read_text() == "# Project\n- use tabs\n- run make test\n"
    assert (store / "scratchpad.md").read_text() == "- [ ] item\n"
    assert tree_hash(cwd_leg) == legacy_before
    # again: nothing to copy, the same report, still 0
    r = run_cli("--project", str(cwd), "migrate-legacy", "--json")
    assert r.exit_code == 0
    doc = orjson.loads(r.stdout_bytes)
    assert doc["exit_code"] == 0 and doc["summary"]["conflicts"] == 2
    assert doc["fail_on_conflict"] is False


def test_fail_on_conflict_keeps_exit_4(proj):
    repo, store, _ = proj
    cwd = repo / "a" / "b"
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--fail-on-conflict")
    assert r.exit_code == 4
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes", "--fail-on-conflict", "--json")
    assert r.exit_code == 4
    doc = orjson.loads(r.stdout_bytes)
    assert doc["exit_code"] == 4 and doc["summary"]["copied"] == 4
    r = run_cli("--project", str(cwd), "migrate-legacy", "--fail-on-conflict")
    assert r.exit_code == 4


def test_diff_shows_legacy_against_project(proj):
    repo, store, cwd_leg = proj
    cwd = repo / "a" / "b"
    before = tree_hash(repo.parent)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--diff")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert f"--- project: {store / 'MEMORY.md'}" in out
    assert f"+++ legacy #1: {cwd_leg / 'MEMORY.md'}" in out
    assert "-- run make test" in out and "+- deploy on fridays" in out
    assert " - use tabs" in out
    assert "+2. ship" in out
    assert tree_hash(repo.parent) == before
    doc = orjson.loads(run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--diff",
                               "--json").stdout_bytes)
    diffs = {i["name"]: i["diff"] for i in doc["items"] if i["diff"] is not None}
    assert set(diffs) == {"MEMORY.md", "notes/deploy checklist.md"}
    assert "+- deploy on fridays\n" in diffs["MEMORY.md"]
    # without --diff the field is null
    doc = orjson.loads(run_cli("--project", str(cwd), "migrate-legacy", "--dry-run",
                               "--json").stdout_bytes)
    assert all(i["diff"] is None for i in doc["items"])


def test_diff_escapes_control_characters(proj):
    repo, store, cwd_leg = proj
    put(cwd_leg / "MEMORY.md", "evil \x1b[2J \u202e\n")
    r = run_cli("--project", str(repo / "a" / "b"), "migrate-legacy", "--dry-run", "--diff")
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert "+evil \\x1b[2J \\u202e" in r.stdout


def test_the_public_first_use_migration_is_the_working_directory_s_alone(proj, config_dir):
    """``lecode_memctl.core.migrate_legacy`` is the public name of what the
    agent calls on first use (before 2026-12-07 only ``plan_migration`` was
    public, and it walks the whole checkout as the CLI does)."""
    import lecode_memctl.core as core

    repo, store, _ = proj
    planned = core.plan_migration(config_dir, repo / "a" / "b")
    assert [s.origin for s in planned.discovery.legacy] == ["cwd", "ancestor", "tree"]
    done = core.migrate_legacy(str(config_dir), repo / "a" / "b")
    assert isinstance(done, core.MigrationPlan)
    assert [s.origin for s in done.discovery.legacy] == ["cwd"]
    assert not (store / "notes" / "tree.md").exists()


def test_core_migrate_copies_only_the_working_directory_store(proj, config_dir):
    repo, store, _ = proj
    done = migrate.migrate(config_dir, repo / "a" / "b")
    assert [s.origin for s in done.discovery.legacy] == ["cwd"]
    assert sorted(i.name for i in done.items if i.result == "copied") == [
        "daily/2024-03-01.md", "scratchpad.md"]
    assert not (store / "notes" / "parent.md").exists()
    assert not (store / "notes" / "tree.md").exists()
    assert done.exit_code == 0
    # the CLI still finds the ancestors and the rest of the tree
    r = run_cli("--project", str(repo / "a" / "b"), "migrate-legacy", "--yes", "--json")
    doc = orjson.loads(r.stdout_bytes)
    assert [s["origin"] for s in doc["legacy_stores"]] == ["cwd", "ancestor", "tree"]
    assert (store / "notes" / "parent.md").exists() and (store / "notes" / "tree.md").exists()


def _epoch_less_transcript(store):
    ss = SessionStore(store)
    with ss.create("old-session") as w:
        w.append_message("user", "a question whose fact was forgotten")  # 1: excluded
        w.append_message("user", "question")                              # 2
        w.append_record({"type": "message", "role": "assistant",          # 3: generated,
                         "content": "an old answer with no epoch"})       # legacy (raw)


def test_legacy_facts_database_with_exclusions_migrates_to_generation_1(tmp_path):
    store = store_at(tmp_path / "memory" / "proj-0123456789ab")
    _epoch_less_transcript(store)
    db = sqlite3.connect(store.facts_db)
    db.executescript(LEGACY_SQL)   # holds an exclusion: a forget happened
    db.commit()
    db.close()
    ro = FactStore.open_readonly(store.facts_db)
    assert ro.generation() == 1     # the read-only view agrees with the migration
    ro.close()
    with FactStore(store.facts_db) as fs:
        assert fs.generation() == 1
        ss = SessionStore(store, exclusions=fs)
        snap = ss.source_snapshot("old-session", 1, 3)
        assert snap.ref.seqs == (2,) and snap.hidden == {1: "excluded", 3: "epoch"}
    r = run_cli("--store", str(store.path), "validate")
    assert "db.generation_mismatch" not in r.stdout


def test_legacy_facts_database_without_exclusions_stays_at_0(tmp_path):
    store = store_at(tmp_path / "memory" / "proj-0123456789ab")
    _epoch_less_transcript(store)
    db = sqlite3.connect(store.facts_db)
    db.executescript(LEGACY_SQL.replace("INSERT INTO exclusions VALUES ('old-session', 1);", ""))
    db.commit()
    db.close()
    with FactStore(store.facts_db) as fs:
        assert fs.generation() == 0
        ss = SessionStore(store, exclusions=fs)
        assert ss.source_snapshot("old-session", 1, 3).ref.seqs == (1, 2, 3)
