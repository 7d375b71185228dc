"""A ``meta`` without its ``generation`` row (a review of 2026-12-05): the
readers took the missing row for generation 0, so the generated messages a
forget had hidden (epoch below the generation) became visible, valid
evidence again, although ``exclusions.generation`` and ``forgotten`` still
said 1; ``forget --dry-run`` planned ``0 -> 1`` while ``forget --yes``
refused the same store (exit 5).

Now a missing row reads as the lowest generation the store's own rows imply
(``facts.implied_generation``: the highest integer generation in
``exclusions`` and ``forgotten``, the number of retry markers, and 1 when
``exclusions`` holds a row -- the rule ``m003_generation`` and the
read-only open of an older schema already used), so nothing hidden becomes
visible, and a forget proceeds from it and writes the row back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.errors import Conflict
from lecode_memctl.core.facts import FactStore

from .builders import store_generation, store_sql
from .conftest import generation_mismatch, run_cli, tree_hash

DENIED = "80fa60fdfe856452"    # demo fact cited by nothing the forget would break
NO_ROW = ("DELETE FROM meta",)


def _answers(store: Path) -> dict[str, object]:
    """What the commands that apply visibility show of the store."""
    base = ("--store", str(store), "--no-state")
    listed = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert listed.exit_code == 0, listed.stderr
    grep = run_cli(*base, "grep", "-i", "pull requests only")
    read = run_cli(*base, "read", "demo-gamma", "0", "3", "--json")
    return {"generation": store_generation(store),
            "facts": sorted((r["fact_id"], r["status"], r["reason"])
                            for r in map(orjson.loads, listed.stdout.splitlines())),
            "grep": (grep.exit_code, grep.stdout),
            "read": (read.exit_code, read.stdout)}


def test_a_missing_generation_row_hides_what_the_row_hid(demo_pair):
    intact, damaged = demo_pair
    store_sql(damaged, *NO_ROW)
    before = tree_hash(damaged)
    want, got = _answers(intact), _answers(damaged)
    assert want["generation"] == 1
    assert want["grep"][0] == 1                         # the epoch-0 reply is hidden
    assert got == want
    assert store_generation(damaged, readonly=False) == 1   # the writers' read, too
    assert generation_mismatch(damaged) == ["meta has no generation row"]
    assert tree_hash(damaged) == before


def test_the_highest_generation_the_rows_imply(demo_pair):
    _intact, damaged = demo_pair
    store_sql(damaged, *NO_ROW, "UPDATE forgotten SET generation = 4")
    assert store_generation(damaged) == 4
    store_sql(damaged, "UPDATE forgotten SET generation = 0", "UPDATE exclusions SET generation = 3")
    assert store_generation(damaged) == 3
    # a generation that is not an integer implies nothing (validate reports it)
    store_sql(damaged, "UPDATE exclusions SET generation = 'nine'", "UPDATE forgotten SET generation = 2.5")
    assert store_generation(damaged) == 1                    # still: exclusions hold a row
    # one generation per first forget: three retry markers, generation >= 3
    store_sql(damaged, "UPDATE forgotten SET generation = 0",
              "INSERT INTO forgotten VALUES ('0123456789abcdef', 0), ('fedcba9876543210', 0)")
    assert store_generation(damaged) == 3


def test_exclusions_alone_imply_generation_one(demo_pair):
    _intact, damaged = demo_pair
    store_sql(damaged, *NO_ROW, "DELETE FROM forgotten", "UPDATE exclusions SET generation = 0")
    assert store_generation(damaged) == 1


def test_no_row_and_nothing_forgotten_is_generation_zero(tmp_path):
    fs = FactStore(tmp_path / "facts.sqlite3")      # creates the database, generation 0
    try:
        fs.add("a fact")
    finally:
        fs.close()
    db = sqlite3.connect(tmp_path / "facts.sqlite3")
    with db:
        db.execute("DELETE FROM meta")
    db.close()
    assert store_generation(tmp_path) == 0
    assert store_generation(tmp_path, readonly=False) == 0


def test_the_writers_check_the_implied_generation(demo_pair):
    _intact, damaged = demo_pair
    store_sql(damaged, *NO_ROW)
    fs = FactStore(damaged / "facts.sqlite3")
    try:
        with pytest.raises(Conflict, match="stale exclusion generation"):
            fs.add("a new fact", expected_generation=0)
        fs.add("a new fact", expected_generation=1)
    finally:
        fs.close()


def test_forget_dry_run_and_yes_agree(demo_pair):
    _intact, damaged = demo_pair
    store_sql(damaged, *NO_ROW)
    base = ("--store", str(damaged), "--no-state", "forget", DENIED)
    plan = run_cli(*base, "--dry-run")
    assert plan.exit_code == 0, plan.stderr
    assert "generation: 1 -> 2" in plan.stdout
    done = run_cli(*base, "--yes")
    assert done.exit_code == 0, done.stderr
    db = sqlite3.connect(damaged / "facts.sqlite3")
    try:
        assert db.execute("SELECT key, value FROM meta").fetchall() == [("generation", 2)]
        assert db.execute("SELECT generation FROM forgotten WHERE fact_id = ?",
                          (DENIED,)).fetchone() == (2,)
    finally:
        db.close()
    assert store_generation(damaged) == 2
    assert generation_mismatch(damaged) == []


def test_a_key_only_a_declared_collation_takes_for_the_row_refuses_both_alike(demo_pair):
    """meta declared ``key TEXT COLLATE NOCASE`` holding only 'GENERATION':
    no generation row to the readers (the key is compared as bytes), and no
    room to write one back (the declared collation takes the new row for the
    old one).  ``forget --dry-run`` planned 1 -> 2, then ``forget --yes``
    failed with "UNIQUE constraint failed" called an unreadable database.
    Both refuse alike now, naming the key, and nothing is changed."""
    _intact, damaged = demo_pair
    db = sqlite3.connect(damaged / "facts.sqlite3")
    try:
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE meta (key TEXT PRIMARY KEY "
                   "COLLATE NOCASE, value INTEGER NOT NULL)' WHERE name = 'meta'")
        db.commit()
    finally:
        db.close()
    store_sql(damaged, "REINDEX", "UPDATE meta SET key = 'GENERATION'")
    before = tree_hash(damaged)
    base = ("--store", str(damaged), "--no-state", "forget", DENIED)
    for how in ("--dry-run", "--yes"):
        r = run_cli(*base, how)
        assert r.exit_code == 5, (how, r.stdout, r.stderr)
        assert "'GENERATION'" in r.stderr and "generation row" in r.stderr, r.stderr
        assert "UNIQUE constraint" not in r.stderr
    assert tree_hash(damaged) == before
