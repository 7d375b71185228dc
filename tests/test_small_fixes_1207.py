"""Small fixes of 2026-12-07, one section per finding: a negative
``user_version``; ``where --store`` with transcripts it cannot read; ..."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.facts import MIGRATIONS, SCHEMA_VERSION

from .conftest import run_cli, tree_hash


def _db(path: Path, migrations: int, user_version: int) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    for _name, fn in MIGRATIONS[:migrations]:
        fn(db)
    db.execute(f"PRAGMA user_version = {user_version}")
    db.commit()
    db.close()
    os.chmod(path, 0o600)


# ------------------------------------------------- a negative user_version

NEGATIVE = f"schema version -1 cannot be migrated to {SCHEMA_VERSION}: no lecode schema version is negative"


@pytest.mark.parametrize("migrations", [0, 2])
def test_a_negative_user_version_is_refused_alike(tmp_path, migrations):
    """SQLite's user_version is signed: validate reads -1 (not 4294967295),
    and readers, writers and validate refuse it with the same words (no
    MIGRATIONS[-1:], the last migration alone)."""
    store = tmp_path / "s"
    _db(store / "facts.sqlite3", migrations, -1)
    before = tree_hash(store)
    r = run_cli("--store", str(store), "--no-state", "validate", "--json")
    doc = orjson.loads(r.stdout)
    found = [(f["code"], f["message"]) for f in doc["findings"]]
    assert found == [("db.schema_unknown", NEGATIVE)], found
    assert r.exit_code == 1
    for args in (("facts",), ("recall", "0123456789abcdef"), ("forget", "--yes", "0123456789abcdef"),
                 ("correct", "--yes", "0123456789abcdef", "1", "s:1-1", "text")):
        r = run_cli("--store", str(store), "--no-state", *args)
        assert r.exit_code == 5, (args, r.exit_code, r.stderr)
        assert r.stderr.count("\n") == 1 and NEGATIVE in r.stderr, (args, r.stderr)
    assert tree_hash(store) == before


# ------------------------------------------------- where --store: unreadable headers

def test_where_says_a_transcript_header_could_not_be_read(demo_template, tmp_path):
    """Every transcript there but unreadable: the slug is the directory's
    name, and where says why -- not that no header names a project."""
    from .test_store_slug_unlistable import memctl_without_dac, require_dropped_caps

    require_dropped_caps(tmp_path)
    store = tmp_path / "sx"
    import shutil

    shutil.copytree(demo_template.store.path, store, symlinks=True)
    names = sorted(p.name for p in (store / "sessions").glob("*.jsonl"))
    for name in names:
        (store / "sessions" / name).chmod(0)
    r = memctl_without_dac(store, "where", "--json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert (doc["slug"], doc["slug_source"]) == ("sx", "directory")
    n = len(names)
    assert doc["slug_detail"] == (f"the directory name (no readable transcript header names a "
                                  f"project; {n} of {n} transcripts could not be read)"), doc
    r = memctl_without_dac(store, "where")
    assert "no readable transcript header names a project" in r.stdout.decode(), r.stdout
    # one readable again: it names the project, and counts
    (store / "sessions" / names[0]).chmod(0o600)
    doc = orjson.loads(memctl_without_dac(store, "where", "--json").stdout)
    assert doc["slug_source"] == "headers", doc


# ------------------------------------------------- validate --all-projects: a linked entry

def test_a_linked_entry_of_memory_does_not_stop_the_marks(world, tmp_path, monkeypatch):
    """A symbolic link in <config>/memory/ (layout.symlink, never followed)
    that resolves above the state directory: the stores audited still get
    their marks; only a store audited counts for "the state directory lies
    inside the store"."""
    cfg = world.fresh(tmp_path / "cfg")
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    state = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    marks = state / "lecode-memctl" / "stores"

    def marks_made() -> int:
        return len(list(marks.glob("*.json"))) if marks.is_dir() else 0

    r = run_cli("validate", "--all-projects", "--json")
    assert r.exit_code == 1, r.stderr       # the demo's planted problem
    without_link = marks_made()
    assert without_link >= 1
    import shutil

    shutil.rmtree(state)
    (cfg / "memory" / "zz-link").symlink_to(tmp_path)
    r = run_cli("validate", "--all-projects", "--json")
    assert r.exit_code == 1, r.stderr
    assert "lies inside the store" not in r.stderr, r.stderr
    codes = {(f["code"], f["project"]) for f in orjson.loads(r.stdout)["findings"]}
    assert ("layout.symlink", "zz-link") in codes, codes
    assert marks_made() == without_link


# ------------------------------------------------- notes: a.md.md

def test_a_note_file_named_twice_md_is_not_listed_under_another_files_name(store):
    """notes/a.md.md was listed as "a.md", the name of notes/a.md; it is
    listed under its whole file name, which every command refuses (exit 2),
    so no listed name maps to another file."""
    notes = store.path / "notes"
    notes.mkdir(parents=True, mode=0o700)
    (notes / "a.md").write_text("plain a\n")
    (notes / "a.md.md").write_text("double a\n")
    (notes / "b.md.md.md").write_text("triple b\n")
    r = run_cli("--store", str(store.path), "--no-state", "notes", "--json")
    assert r.exit_code == 0, r.stderr
    listed = {row["name"]: Path(row["path"]).name for row in orjson.loads(r.stdout)}
    assert listed == {"a": "a.md", "a.md.md": "a.md.md", "b.md.md.md": "b.md.md.md"}, listed
    for name, file in listed.items():
        r = run_cli("--store", str(store.path), "--no-state", "notes", name)
        if name == "a":
            assert r.exit_code == 0 and r.stdout == "plain a\n", (r.exit_code, r.stdout)
        else:   # refused: never another file's text
            assert r.exit_code == 2, (name, file, r.exit_code, r.stdout)
            assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr


# ------------------------------------------------- <config>/memory not a directory

@pytest.mark.parametrize("args", [
    ("validate", "--all-projects"),
    ("validate", "--all-projects", "--format", "prometheus"),
    ("secrets", "--all-projects"),
    ("projects",),
    ("projects", "--json"),
])
def test_a_memory_that_is_a_file_is_an_unreadable_store(config_dir, args):
    """<config>/memory a regular file: no store can be listed, which is not
    "no stores" (exit 0 and memctl_validate_stores 0 hid it from the cron
    alert): exit 5, one line naming it; stdout empty."""
    config_dir.mkdir()
    (config_dir / "memory").write_bytes(b"not a directory\n")
    r = run_cli(*args)
    assert r.exit_code == 5, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: {config_dir / 'memory'}: cannot list: Not a directory\n"
    if "--json" not in args:
        assert r.stdout == "", r.stdout


@pytest.mark.parametrize("args", [
    ("validate", "--all-projects"),
    ("secrets", "--all-projects"),
    ("projects",),
])
def test_a_missing_memory_is_no_store_yet(config_dir, args):
    """No <config>/memory at all (a machine where lecode never ran): nothing
    to list, exit 0, as before."""
    r = run_cli(*args)
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)


def test_prometheus_without_stores_says_so(config_dir):
    """No store: the run's samples still carry memctl_validate_stores 0,
    the series an alert on a run that audited nothing reads."""
    from .promparse import parse_exposition

    r = run_cli("validate", "--all-projects", "--format", "prometheus")
    assert r.exit_code == 0, r.stderr
    fams = parse_exposition(r.stdout)
    assert [s.value for s in fams["memctl_validate_stores"].samples] == [0]
    assert [s.value for s in fams["memctl_validate_exit_status"].samples] == [0]
    assert fams["memctl_validate_ok"].samples == []     # (no store: no sample)


# ------------------------------------------------- a zero-length facts.sqlite3

def test_a_zero_length_database_is_no_database_yet(store):
    """An empty facts.sqlite3 (a writer that crashed between creating the
    file and its schema) is read as no database (docs/FORMAT.md), as
    validate reads it: no "needs migration" note before recall's error
    (stderr one line), no note on facts; validate has no
    db.needs_migration; a writer's first write still makes the schema."""
    from lecode_memctl.core.facts import FactStore

    store.path.mkdir(parents=True, mode=0o700)
    store.facts_db.write_bytes(b"")
    store.facts_db.chmod(0o600)
    base = ("--store", str(store.path), "--no-state")
    r = run_cli(*base, "recall", "0123456789abcdef")
    assert r.exit_code == 3 and r.stderr == "memctl: error: no fact 0123456789abcdef\n", r.stderr
    r = run_cli(*base, "facts")
    assert r.exit_code == 0 and "needs migration" not in r.stderr, r.stderr
    r = run_cli(*base, "validate", "--json")
    codes = [f["code"] for f in orjson.loads(r.stdout)["findings"]]
    assert "db.needs_migration" not in codes and r.exit_code == 0, (codes, r.stderr)
    with FactStore.open_readonly(store.facts_db) as fs:
        assert not fs.needs_migration and fs.schema_version == 0
    with FactStore(store.facts_db) as fs:
        fid = fs.add("a fact").fact.fact_id
    with FactStore.open_readonly(store.facts_db) as fs:
        assert fs.schema_version == SCHEMA_VERSION and not fs.needs_migration
        assert fs.get(fid) is not None
