"""The generation row of ``meta`` as stored by a writer other than the core
(a review of 2026-12-05): with two ``generation`` rows (a table that lost
its primary key) the first row SQLite met decided visibility, so the same
logical content gave a fact ``valid`` in one copy and ``hidden (epoch)`` in
the other, and ``validate`` was silent; a ``meta`` whose key was declared
``COLLATE NOCASE`` took a ``'GENERATION'`` row for the generation.

Now one reader (``facts.meta_generation``) compares the key as bytes and
takes the highest of several rows (fail-closed: a higher generation hides
more generated messages, never fewer), and ``validate`` reports the
duplicate (``db.generation_mismatch``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from lecode_memctl.core.facts import FactStore

from .builders import store_generation, store_sql
from .conftest import generation_mismatch, run_cli, tree_hash

VERIFIED = "c283ab7d8ed884e4"    # demo 'verified' fact: evidence demo-alpha:2-4, epoch 1

REBUILD_AFTER = ("CREATE TABLE m2 (key TEXT, value INTEGER)", "INSERT INTO m2 SELECT * FROM meta",
                 "INSERT INTO m2 VALUES ('generation', 5)", "DROP TABLE meta",
                 "ALTER TABLE m2 RENAME TO meta")
REBUILD_BEFORE = ("CREATE TABLE m2 (key TEXT, value INTEGER)", "INSERT INTO m2 VALUES ('generation', 5)",
                  "INSERT INTO m2 SELECT * FROM meta", "DROP TABLE meta",
                  "ALTER TABLE m2 RENAME TO meta")
NOCASE = ("CREATE TABLE m2 (key TEXT COLLATE NOCASE, value INTEGER)",
          "INSERT INTO m2 VALUES ('GENERATION', 5)", "INSERT INTO m2 SELECT * FROM meta",
          "DROP TABLE meta", "ALTER TABLE m2 RENAME TO meta")


def _answers(store: Path) -> dict[str, object]:
    base = ("--store", str(store), "--no-state")
    listed = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert listed.exit_code == 0, listed.stderr
    rows = [orjson.loads(line) for line in listed.stdout.splitlines()]
    read = run_cli(*base, "read", "demo-alpha", "3", "3", "--json")
    return {"generation": store_generation(store),
            "verified": [(r["status"], r["reason"]) for r in rows if r["fact_id"] == VERIFIED],
            "read": (read.exit_code, read.stdout),
            "mismatch": generation_mismatch(store)}


def test_two_generation_rows_give_one_verdict_whatever_their_order(demo_pair):
    x, y = demo_pair
    store_sql(x, *REBUILD_AFTER)
    store_sql(y, *REBUILD_BEFORE)
    before = (tree_hash(x), tree_hash(y))
    ax, ay = _answers(x), _answers(y)
    assert ax == ay
    assert ax["generation"] == 5                       # the highest: hides more
    assert ax["verified"] == [("hidden", "epoch")]
    assert len(ax["mismatch"]) == 1 and "2 generation rows" in ax["mismatch"][0]
    assert (tree_hash(x), tree_hash(y)) == before


def test_a_forget_raises_the_highest_generation(demo_pair):
    x, _y = demo_pair
    store_sql(x, *REBUILD_AFTER)
    fs = FactStore(x / "facts.sqlite3")
    try:
        assert fs.forget(VERIFIED)
        assert fs.generation() == 6
    finally:
        fs.close()


def test_the_key_is_compared_as_bytes(demo_pair):
    x, _y = demo_pair
    gen = store_generation(x)
    store_sql(x, *NOCASE)
    assert store_generation(x) == gen
    got = _answers(x)
    assert got["verified"] == [("valid", None)]
    assert got["mismatch"] == []
    fs = FactStore(x / "facts.sqlite3")          # a forget moves the generation row only
    try:
        assert fs.forget(VERIFIED)
    finally:
        fs.close()
    db = sqlite3.connect(x / "facts.sqlite3")
    try:
        assert sorted(db.execute("SELECT key, value FROM meta")) == [("GENERATION", 5),
                                                                   ("generation", gen + 1)]
    finally:
        db.close()


def test_a_generation_at_its_largest_is_refused_alike_by_the_dry_run_and_the_forget(demo_pair):
    """The generation at 2^63-1: forget --dry-run planned 2^63 (exit 0) and
    the forget ended in an internal error (exit 70, SQLite cannot store
    2^63).  Both refuse now, exit 5, and nothing changes."""
    x, _y = demo_pair
    store_sql(x, "UPDATE meta SET value = 9223372036854775807 WHERE key = 'generation'")
    before = tree_hash(x)
    for extra in (("--dry-run",), ("--yes",)):
        r = run_cli("--store", str(x), "forget", VERIFIED, *extra, "--json")
        assert r.exit_code == 5, (extra, r.exit_code, r.stderr)
        assert "largest" in r.stderr and "internal error" not in r.stderr
    assert tree_hash(x) == before
