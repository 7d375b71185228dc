"""A rollback-journal writer killed mid-transaction, or still running (issue 16.1).

A facts database in rollback-journal mode (an older lecode's) whose writer
died mid-transaction leaves a hot ``-journal``, and pages of the uncommitted
transaction in the main file (SQLite spills them once its cache is full).
The immutable read (``immutable=1``) ignored the journal: ``facts`` listed
the uncommitted revision text as valid, ``read`` showed a forgotten message
again (the transaction had deleted the exclusions), and ``validate``
reported the half-written pages as ``db.integrity`` errors.  Every read must
see what SQLite sees after recovery, without writing to the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli, tree_hash

MARK = "UNCOMMITTED"

WRITER = textwrap.dedent("""
    import os, sqlite3, sys
    db, mode = sys.argv[1], sys.argv[2]
    c = sqlite3.connect(db, isolation_level=None)
    if mode == "prepare":                      # an older lecode's database: rollback mode
        c.execute("PRAGMA journal_mode = DELETE")
        c.execute("BEGIN IMMEDIATE")            # committed: a table of 300 rows
        c.execute("CREATE TABLE pad (id INTEGER PRIMARY KEY, x BLOB)")
        for i in range(300):
            c.execute("INSERT INTO pad (x) VALUES (randomblob(3000))")
        c.execute("COMMIT")
        sys.exit(0)
    c.execute("PRAGMA cache_size = 1")
    c.execute("BEGIN IMMEDIATE")
    c.execute("UPDATE revisions SET text = 'UNCOMMITTED ' || text")
    c.execute("DELETE FROM exclusions")
    c.execute("DELETE FROM pad WHERE id % 2 = 0")  # past the cache: pages spill into the file
    if mode == "crash":
        os._exit(9)                            # killed mid-transaction: a hot journal
    print("spilled", flush=True)
    if sys.stdin.readline().strip() == "commit":
        c.execute("COMMIT")
    print("done", flush=True)
""")


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _prepare(db: Path) -> None:
    prep = _writer(db, "prepare")
    prep.communicate(timeout=60)
    assert prep.returncode == 0


def _writer(db: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(db), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _spilled(demo: Path) -> None:
    journal = demo / "facts.sqlite3-journal"
    assert journal.stat().st_size > 0
    with open(demo / "facts.sqlite3", "rb") as fh:
        assert MARK.encode() in fh.read()      # the main file holds the uncommitted text


def _reads_see_the_committed_state(demo: Path) -> None:
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "facts", "--json")
    assert r.exit_code == 0, r.stderr
    assert MARK not in r.stdout and "c283ab7d8ed884e4" in r.stdout
    # demo-gamma:1 was forgotten: the exclusion still holds
    r = run_cli("--store", str(demo), "read", "demo-gamma", "0", "3", "--json")
    assert "Never push directly" not in r.stdout
    r = run_cli("--store", str(demo), "recall", "c283ab7d8ed884e4", "--json")
    assert r.exit_code == 0 and MARK not in r.stdout, r.stderr
    r = run_cli("--store", str(demo), "context")
    assert r.exit_code == 0 and MARK not in r.stdout, r.stderr
    r = run_cli("--store", str(demo), "validate", "--json", "--no-state")
    findings = orjson.loads(r.stdout)["findings"]
    assert not [f for f in findings if f["code"].startswith("db.")], findings
    assert tree_hash(demo) == before           # nothing written: no rollback in the store


@pytest.mark.heavy
def test_a_crashed_rollback_writer_is_rolled_back_privately(demo):
    _prepare(demo / "facts.sqlite3")
    p = _writer(demo / "facts.sqlite3", "crash")
    p.communicate(timeout=60)
    assert p.returncode == 9
    _spilled(demo)
    _reads_see_the_committed_state(demo)
    assert (demo / "facts.sqlite3-journal").exists()   # still there for lecode's own recovery


@pytest.mark.heavy
def test_a_live_rollback_writer_is_read_as_committed(demo):
    _prepare(demo / "facts.sqlite3")
    p = _writer(demo / "facts.sqlite3", "live")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "spilled"
        _spilled(demo)
        _reads_see_the_committed_state(demo)
        p.stdin.write("commit\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
    finally:
        p.communicate(timeout=60)
    r = run_cli("--store", str(demo), "facts", "--json")
    assert MARK in r.stdout                    # committed now: visible


def test_a_writer_starting_under_an_immutable_audit_is_no_integrity_finding(demo, monkeypatch):
    """The audit opens the database immutable (no journal yet); a rollback-mode
    writer then starts and spills pages into the file under it.  What the audit
    reports comes from a state no writer moved under: no db.integrity."""
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    _prepare(demo / "facts.sqlite3")
    real = FactStore.open_readonly
    procs: list[subprocess.Popen] = []

    def open_then_write(path):
        fs = real(path)
        if not procs:
            p = _writer(demo / "facts.sqlite3", "live")
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "spilled"
        return fs

    monkeypatch.setattr(FactStore, "open_readonly", staticmethod(open_then_write))
    try:
        findings = [f for f in Audit(store_at(demo), parallel=False).run() if f is not None]
    finally:
        for p in procs:
            p.communicate("rollback\n", timeout=60)
    assert procs
    assert not [f for f in findings if f.code.startswith("db.")], findings
    assert not os.path.exists(demo / "facts.sqlite3-journal")
