"""Fixes of 2026-12-07 found by a code review of the day's validate fixes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    return copy_demo(demo_template, tmp_path / "demo")


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
