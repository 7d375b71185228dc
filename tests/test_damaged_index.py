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
