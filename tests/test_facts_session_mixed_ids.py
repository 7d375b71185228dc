"""``facts --session S`` where the provenance of S names a fact id stored
as a BLOB (or a number) beside text ids: ``ids_with_evidence_in``
sorted them as Python compares them, and the command ended in an internal
error (exit 70, TypeError).  They are sorted as SQLite orders them (a
review found it; it predates the streamed provenance)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.facts import FactStore

from .conftest import run_cli


@pytest.mark.parametrize("odd", [b"\x00blob", 7, 2.5])
def test_a_session_whose_provenance_names_an_odd_id(tmp_path: Path, odd) -> None:
    store = tmp_path / "store"
    (store / "sessions").mkdir(parents=True)
    path = store / "facts.sqlite3"
    with FactStore(path) as fs:
        fid = fs.add("a legacy fact").fact.fact_id
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("INSERT INTO provenance VALUES (?, 1, 's1', 1)", (fid,))
    db.execute("INSERT INTO provenance VALUES (?, 1, 's1', 2)", (odd,))
    db.commit()
    db.close()
    with FactStore.open_readonly(path) as fs:
        ids = fs.ids_with_evidence_in("s1")
    assert fid in ids and len(ids) == 2
    r = run_cli("--store", str(store), "--no-state", "facts", "--session", "s1", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["total"] == 2 and fid in [f["fact_id"] for f in doc["facts"]]
