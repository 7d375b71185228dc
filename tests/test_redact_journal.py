"""``memctl redact`` beside a hot rollback journal: the journal is the
database's, never byte-rewritten as a file; SQLite recovers it, and the
clean erases the value (a review found the journal edited as text, its
playback stopped at the damaged page, the uncommitted rows kept, exit 0)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson

from .conftest import run_cli

TOKEN = "ghp_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4"

# A writer killed mid-transaction (os._exit) after SQLite spilled its
# uncommitted pages to the database file: a hot journal, rollback mode.
_KILLED_WRITER = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size=1")
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE revisions SET text = 'zzzz ' || text")
db.execute("UPDATE facts SET updated = 'x'")
db.execute("CREATE TABLE big(x)")
db.execute("INSERT INTO big SELECT zeroblob(4000) FROM revisions")
os._exit(0)
"""


def _build(base: Path) -> tuple[Path, str]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T09:00:00Z") as w:
        w.append_message("user", "hi")
        w.append_message("user", f"the token is {TOKEN}")
    ref = SourceRef("s1", (1,), canonical_digest(sessions.records("s1", 1, 1)))
    for i in range(30):
        facts.add(f"fact number {i} " + "padding " * 40, ref=ref)
    ref2 = SourceRef("s1", (2,), canonical_digest(sessions.records("s1", 2, 2)))
    fid = facts.add(f"the token is {TOKEN}", ref=ref2).fact.fact_id
    facts.close()
    db = sqlite3.connect(st.facts_db)
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, os.fspath(st.facts_db)], check=True)
    return Path(st.path), fid


def _rows(db_path: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(db_path)
    try:
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall())
                for t in ("facts", "revisions")}
    finally:
        db.close()


def test_hot_journal_is_recovered_by_sqlite_not_rewritten(tmp_path):
    store, fid = _build(tmp_path / "a")
    journal = store / "facts.sqlite3-journal"
    assert journal.stat().st_size > 0
    raw = (store / "facts.sqlite3").read_bytes()
    assert b"zzzz " in raw          # the uncommitted pages are in the file
    # the reference: plain sqlite3 rolls the untouched journal back
    ref = tmp_path / "ref"
    shutil.copytree(store, ref)
    expected = _rows(ref / "facts.sqlite3")
    assert not any(r[1].startswith("zzzz") for r in expected["revisions"] if isinstance(r[1], str))

    plan = run_cli("--store", str(store), "redact", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.stderr
    doc = orjson.loads(plan.stdout_bytes)["plan"]
    # the journal is no file to rewrite: a finding there is the database's
    assert all(not f["file"].startswith("facts.sqlite3") for f in doc["files"]), doc["files"]
    assert doc["clean_database"] is True
    assert journal.stat().st_size > 0 and (store / "facts.sqlite3").read_bytes() == raw

    r = run_cli("--store", str(store), "redact", "--yes")
    assert r.exit_code == 0, r.stderr
    assert TOKEN not in r.stdout + r.stderr
    # the database is what SQLite's own rollback gives, less the forgotten fact
    got = _rows(store / "facts.sqlite3")
    want = {"facts": [row for row in expected["facts"] if row[0] != fid],
            "revisions": [row for row in expected["revisions"] if row[0] != fid]}
    assert got == want
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'big'").fetchone()[0] == 0
    finally:
        db.close()
    # the value is gone from every file of the store
    for path in store.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert run_cli("--store", str(store), "secrets").exit_code == 0
