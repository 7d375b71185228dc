"""Fleet commands (review rv6, 2026-12-07): secrets --all-projects gives
every entry of memory/ a row; validate --all-projects' fence checks grow
with the store count, not its square; one unreadable facts database is one
unreadable file; an unlistable sessions/ is a count not known; a store
name's non-UTF-8 bytes spelt \\xNN in a finding's message."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli
from .promparse import parse_exposition


def _clean_store(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "MEMORY.md").write_text("# nothing here\n")


# -- 1. secrets --all-projects: every entry of memory/ a row


def _rows(fmt: str) -> tuple[int, dict[str, dict], str]:
    """secrets --all-projects in ``fmt``: (exit, the scan rows by project, stdout)."""
    args = {"text": [], "json": ["--json"], "jsonl": ["--format", "jsonl"],
            "prometheus": ["--format", "prometheus"]}[fmt]
    r = run_cli("secrets", "--all-projects", *args)
    assert "Traceback" not in r.stderr
    rows: dict[str, dict] = {}
    if fmt == "json":
        rows = {s["project"]: s for s in orjson.loads(r.stdout_bytes)["projects"]}
    elif fmt == "jsonl":
        for line in r.stdout.splitlines():
            row = orjson.loads(line)
            if row["type"] == "scan":
                rows[row["project"]] = row
    return r.exit_code, rows, r.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "prometheus"])
def test_secrets_all_projects_reports_a_file_in_a_stores_place(config_dir, fmt):
    """A regular file in a store's place (holding a credential here) is not
    read: a row saying so, counted unreadable, exit 1, in every format.
    It was left out of every format, exit 0."""
    mem = config_dir / "memory"
    _clean_store(mem / "good-aaaaaaaaaaaa")
    (mem / "proj-bbbbbbbbbbbb").write_text("AKIAIOSFODNN7EXAMPLQ\n")
    code, rows, out = _rows(fmt)
    assert code == 1, out
    assert "AKIAIOSFODNN7EXAMPLQ" not in out
    if fmt in ("json", "jsonl"):
        assert sorted(rows) == ["good-aaaaaaaaaaaa", "proj-bbbbbbbbbbbb"]
        assert rows["good-aaaaaaaaaaaa"]["ok"] is True
        bad = rows["proj-bbbbbbbbbbbb"]
        assert bad["ok"] is False and bad["unreadable"] == 1
        assert [(s["file"], s["unreadable"]) for s in bad["skipped"]] == [(".", True)]
        assert "a regular file, not a directory" in bad["skipped"][0]["reason"]
    elif fmt == "text":
        assert "good-aaaaaaaaaaaa: OK" in out
        assert "proj-bbbbbbbbbbbb" in out and "a regular file, not a directory" in out
    else:
        fams = parse_exposition(out)
        ok = {s.labels["project"]: s.value for s in fams["memctl_secrets_ok"].samples}
        assert ok == {"good-aaaaaaaaaaaa": 1, "proj-bbbbbbbbbbbb": 0}
        unread = {s.labels["project"]: s.value
                  for s in fams["memctl_secrets_unreadable_files"].samples}
        assert unread["proj-bbbbbbbbbbbb"] == 1
        assert fams["memctl_secrets_stores"].samples[0].value == 1


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "prometheus"])
def test_secrets_all_projects_reports_entries_that_cannot_be_looked_up(
        config_dir, monkeypatch, fmt):
    """memory/ listable but not searchable (a non-root user, mode 0444;
    simulated: the tests run as root): each entry a row saying it cannot be
    looked up, exit 1.  It was "no stores", exit 0."""
    mem = config_dir / "memory"
    _clean_store(mem / "proj-cccccccccccc")
    real = os.lstat

    def lstat(path, *a, **k):
        if Path(os.fspath(path)).parent == mem:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "lstat", lstat)
    code, rows, out = _rows(fmt)
    assert code == 1, out
    if fmt in ("json", "jsonl"):
        row = rows["proj-cccccccccccc"]
        assert row["ok"] is False and row["unreadable"] == 1
        assert "cannot be looked up" in row["skipped"][0]["reason"]
    elif fmt == "text":
        assert "proj-cccccccccccc" in out and "cannot be looked up" in out
    else:
        fams = parse_exposition(out)
        assert [(s.labels["project"], s.value) for s in fams["memctl_secrets_ok"].samples] == [
            ("proj-cccccccccccc", 0)]
        assert fams["memctl_secrets_stores"].samples[0].value == 0
