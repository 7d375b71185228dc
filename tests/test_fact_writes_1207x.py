"""A write to a facts database the system will not let memctl write
(``chattr +i``, a read-only file) leaves no new file in the store (a
review of 2026-12-07: ``forget`` and ``correct`` said 'nothing was
changed' and left an empty ``-wal`` and a 32 KiB ``-shm`` beside it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    return copy_demo(demo_template, tmp_path / "demo")


@pytest.fixture
def immutable_db(demo):
    db = demo / "facts.sqlite3"
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("chattr +i needs root and chattr")
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        yield demo
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=False)


@pytest.mark.parametrize("args", [
    ["forget", VERIFIED, "--yes"],
    ["correct", VERIFIED, "2", "demo-alpha:2-4", "a corrected text"],
], ids=["forget", "correct"])
def test_a_write_to_an_unwritable_database_creates_nothing(immutable_db, args):
    store = immutable_db
    for side in ("-wal", "-shm", "-journal"):
        (store / ("facts.sqlite3" + side)).unlink(missing_ok=True)
    before = sorted(p.name for p in store.iterdir())
    r = run_cli("--store", str(store), "--no-state", *args)
    assert r.exit_code == 7, (r.stdout, r.stderr)
    assert "nothing was changed" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(p.name for p in store.iterdir()) == before


def test_validate_opens_no_file_named_by_an_invalid_cited_session_id(demo, tmp_path):
    """A ``source_refs`` row citing ``../outside/x`` in a store whose
    ``sessions/`` is a symbolic link: validate (which checks every cited
    session behind such a link, to refuse it as the readers do) opened
    ``sessions/../outside/x.jsonl`` through the link and reported its first
    line.  A cited id that is no valid session id names no file."""
    import sqlite3

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_text('{"not": "a header", "planted": "OUTSIDE-1207x"}\n')
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(demo / "sessions"), elsewhere)
    os.symlink(elsewhere, demo / "sessions")
    db = sqlite3.connect(demo / "facts.sqlite3")
    with db:
        db.execute("UPDATE source_refs SET session_id = '../outside/x' WHERE fact_id = ?",
                   (VERIFIED,))
    db.close()
    r = run_cli("--store", str(demo), "--no-state", "validate", "--format", "tsv")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert "outside" not in r.stdout.replace("'../outside/x'", "").replace(
        "../outside/x", ""), r.stdout
    assert "missing_header" not in r.stdout, r.stdout
