"""``validate`` on hostile stores (a review of 2026-12-07): a crafted
schema whose expressions integrity_check evaluates on every row, a store
directory that cannot be searched, and a dangling ``sessions`` symlink."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli
from .test_store_slug_unlistable import _DROP, require_dropped_caps

HUGE = "length(printf('%.*c', 900000000, 'x'))"


@pytest.fixture
def copy(demo_template, tmp_path) -> tuple[Path, str]:
    dst = tmp_path / "sx"
    shutil.copytree(demo_template.store.path, dst, symlinks=True)
    return dst, demo_template.store.slug


def _findings(store: Path, *extra: str) -> tuple[int, list[dict]]:
    r = run_cli("--no-state", "validate", "--store", str(store), "--format", "json", *extra)
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    return r.exit_code, orjson.loads(r.stdout)["findings"]


def _rewrite_table_sql(store: Path, table: str, more: str) -> None:
    """``more`` added at the end of ``table``'s definition, in the schema
    alone (writable_schema: nothing evaluated, no row rewritten)."""
    db = sqlite3.connect(store / "facts.sqlite3")
    (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    crafted = sql.rstrip()[:-1] + more + ")"
    (version,) = db.execute("PRAGMA schema_version").fetchone()
    db.execute("PRAGMA writable_schema = ON")
    db.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (crafted, table))
    db.execute(f"PRAGMA schema_version = {version + 1}")
    db.commit()
    db.close()


def test_a_generated_column_is_a_finding_and_is_not_evaluated_unbounded(copy):
    store, slug = copy
    # (written into the schema: ALTER TABLE ADD COLUMN evaluates it on each
    # row, seconds each; a virtual column has nothing in the rows)
    cols = "".join(f", g{i} INTEGER GENERATED ALWAYS AS ({HUGE}) VIRTUAL NOT NULL"
                   for i in range(3))
    _rewrite_table_sql(store, "facts", cols)
    start = time.monotonic()
    code, found = _findings(store, "--slug", slug)
    assert time.monotonic() - start < 10
    assert code == 1
    schema = [f for f in found if f["code"] == "db.schema_unknown"]
    assert len(schema) == 1 and "generated column(s) g0, g1, g2" in schema[0]["message"], found
    assert "table facts" in schema[0]["message"]
    # that table is not checked (said), and the facts were audited
    assert "integrity_check did not check that table" in schema[0]["message"]
    assert not any(f["code"] in ("db.unreadable", "db.integrity") for f in found), found
    assert any(f["code"] == "fact.stale" for f in found), found


def test_a_check_constraint_lecode_does_not_write_is_a_finding(copy):
    store, slug = copy
    _rewrite_table_sql(store, "revisions", f", CHECK ({HUGE} > 0)")
    start = time.monotonic()
    code, found = _findings(store, "--slug", slug)
    assert time.monotonic() - start < 10
    assert code == 1
    schema = [f for f in found if f["code"] == "db.schema_unknown"]
    assert len(schema) == 1 and "table revisions" in schema[0]["message"], found
    assert "CHECK constraint" in schema[0]["message"]


def test_lecode_own_schema_is_no_finding(copy):
    store, slug = copy
    code, found = _findings(store, "--slug", slug)
    assert not any(f["code"].startswith("db.") for f in found), found


def _tsv_rows(out: str) -> list[dict[str, str]]:
    lines = out.splitlines()
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"), strict=False)) for line in lines[1:]]


@pytest.mark.parametrize("target", ["/nonexistent-1207t", "dir"])
def test_a_sessions_symlink_is_refused_by_validate_as_by_the_readers(copy, tmp_path, target):
    store, slug = copy
    if target == "dir":
        target = str(tmp_path / "elsewhere")
        shutil.copytree(store / "sessions", target)
    shutil.rmtree(store / "sessions")
    os.symlink(target, store / "sessions")
    r = run_cli("--no-state", "facts", "--store", str(store), "--slug", slug, "--format", "tsv")
    assert r.exit_code == 0, r.stderr
    reasons = {row["reason"] for row in _tsv_rows(r.stdout) if row.get("reason")}
    assert reasons == {"refused_symlink"}, r.stdout
    r = run_cli("--no-state", "validate", "--store", str(store), "--slug", slug,
                "--format", "tsv")
    assert r.exit_code == 1, r.stderr
    rows = _tsv_rows(r.stdout)
    codes = {row["code"] for row in rows if row["type"] == "finding"}
    assert "fact.missing" not in codes, r.stdout
    assert "session.refused" in codes and "fact.hidden" in codes, r.stdout
    assert {row["reason"] for row in rows if row.get("code") == "fact.hidden"} \
        == {"refused_symlink"}, r.stdout


def test_a_store_directory_that_cannot_be_searched_is_no_deleted_database(copy, tmp_path):
    """A store directory of mode 000 read without the DAC capabilities: the
    database cannot be looked up, which is not "no database" (before
    2026-12-07: facts 0 and a db.rolled_back saying it was deleted)."""
    require_dropped_caps(tmp_path)
    store, slug = copy
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = dict(os.environ, XDG_STATE_HOME=str(state),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-m", "lecode_memctl", "validate", "--store", str(store),
                        "--slug", slug, "-q"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 1, r.stderr     # (the demo's planted stale fact)
    store.chmod(0)
    try:
        cmd = " ".join(["exec", sys.executable, "-m", "lecode_memctl", "validate", "--store",
                        str(store), "--slug", slug, "--format", "json"])
        r = subprocess.run(["capsh", _DROP, "--", "-c", cmd], capture_output=True, env=env,
                           timeout=60)
    finally:
        store.chmod(0o700)
    assert r.returncode == 1, r.stderr
    assert b"Traceback" not in r.stderr, r.stderr
    found = orjson.loads(r.stdout)["findings"]
    codes = {f["code"] for f in found}
    assert "db.rolled_back" not in codes, found
    assert "db.unreadable" in codes, found
    assert not any("no facts database" in f["message"] for f in found), found


def test_a_database_that_cannot_be_looked_up_is_unreadable(copy, monkeypatch):
    """The same, simulated (lstat of facts.sqlite3 refused): db.unreadable."""
    store, slug = copy
    real = os.lstat

    def lstat(path, *a, **kw):
        if os.fspath(path).endswith("facts.sqlite3"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(os, "lstat", lstat)
    code, found = _findings(store, "--slug", slug)
    assert code == 1
    unreadable = [f for f in found if f["code"] == "db.unreadable"]
    assert unreadable and "Permission denied" in unreadable[0]["message"], found
