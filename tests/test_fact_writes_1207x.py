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
