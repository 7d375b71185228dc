"""Small fixes of 2026-12-07, one test (or a few) per finding: a negative
``user_version``, ..."""

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
