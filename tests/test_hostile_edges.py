"""Smaller edges of hostile and damaged stores (issue 16.8).

Each case failed on the code before its fix: a note name that passes the
syntax check but whose temporary file name is over 255 bytes; a symbolic link
as ``-shm`` or ``-journal`` (reported as a write failure, with a 0-byte
``-wal`` left behind); ``TMPDIR`` inside the store (the private snapshot must
never be made there); ``--config-dir ""`` and an empty ``LECODE_CONFIG_DIR``
meaning different things; a deleted working directory or a missing ``-C`` path
without a clear message; a CRLF transcript counted as 0 messages; valid JSON
that memctl cannot represent reported as ``not_json``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import make_repo, run_cli, run_proc, tree_hash

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memctl: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- long note names

def test_temp_name_fits_the_file_name_limit():
    from lecode_memctl.core.atomic import is_temp_name, temp_name

    for name in ("中" * 85 + ".md", "a" * 255, "x.md", "é" * 127):
        t = temp_name(Path("/s/notes") / name)
        assert len(os.fsencode(t.name)) <= 255, name
        assert is_temp_name(t.name) and t.parent == Path("/s/notes")
    assert temp_name(Path("/s/x.md")).name.startswith(".x.md.tmp-")


@pytest.mark.parametrize("chars", [80, 82])
def test_a_long_note_name_can_be_written(tmp_path, monkeypatch, chars):
    """'中' * 80: <name>.md is 243 bytes (accepted); its temporary file
    .<name>.md.tmp-<12 hex> was 261 bytes: exit 7, File name too long.
    ('中' * 82 is the longest such name since 2026-12-07: its .md.bak is
    255 bytes; tests/test_markdown_1207.py writes it twice.)"""
    from lecode_memctl.core.markdown import check_note_name

    name = "中" * chars
    assert check_note_name(name) == name
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    script = tmp_path / "ed.py"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write('hello\\n')\n")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    r = run_cli("--store", str(store), "edit", "note", name)
    assert r.exit_code == 0, r.stderr
    assert (store / "notes" / f"{name}.md").read_text() == "hello\n"
    assert [p.name for p in (store / "notes").iterdir()] == [f"{name}.md"]


# ---------------------------------------------------------------- symlinked sidecars

@pytest.mark.parametrize("sidecar", ["-shm", "-journal"])
def test_a_symlinked_sidecar_is_refused_before_anything_is_written(demo, tmp_path, sidecar):
    db = demo / "facts.sqlite3"
    outside = tmp_path / "outside"
    (demo / f"facts.sqlite3{sidecar}").symlink_to(outside)
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "forget", VERIFIED, "--yes")
    assert r.exit_code == 5, (r.exit_code, r.stderr)
    line = one_error_line(r.stderr)
    assert f"facts.sqlite3{sidecar}" in line and "symbolic link" in line
    assert tree_hash(demo) == before            # no 0-byte -wal left behind
    assert not os.path.lexists(outside)
    assert not os.path.lexists(db.with_name("facts.sqlite3-wal"))


# ---------------------------------------------------------------- TMPDIR inside the store

def _live_writer(db: Path) -> sqlite3.Connection:
    """A connection that committed a change still only in the -wal (so that a
    read takes a private snapshot) and stays open."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE revisions SET text = text || ' (wal)' WHERE fact_id = ?", (VERIFIED,))
    assert os.path.getsize(db.with_name("facts.sqlite3-wal")) > 0
    return conn


@pytest.mark.parametrize("where", [".", "sessions"])
def test_tmpdir_inside_the_store_is_never_used(demo, monkeypatch, where):
    conn = _live_writer(demo / "facts.sqlite3")
    try:
        from lecode_memctl.core import atomic

        made: list[str] = []
        real = atomic._mkdtemp

        def mkdtemp(*a, **kw):
            path = real(*a, **kw)
            made.append(os.path.realpath(path))
            return path

        monkeypatch.setattr(atomic, "_mkdtemp", mkdtemp)
        monkeypatch.setattr(tempfile, "tempdir", None)   # read TMPDIR again
        tmpdir = demo / where
        before = tree_hash(demo)
        r = run_cli("--store", str(demo), "facts", "--json", env={"TMPDIR": str(tmpdir)})
        assert r.exit_code == 0, r.stderr
        assert "(wal)" in r.stdout                   # the snapshot was read
        assert made and not [p for p in made if p.startswith(os.path.realpath(demo))], made
        assert tree_hash(demo) == before
        # a real process too (its own tempfile state)
        p = run_proc("--store", str(demo), "recall", VERIFIED, "--json", env={"TMPDIR": str(tmpdir)})
        assert p.returncode == 0, p.stderr
        assert tree_hash(demo) == before
    finally:
        conn.close()


# ---------------------------------------------------------------- --config-dir "" and the cwd

def _where(*args: str, env: dict | None = None) -> dict:
    r = run_cli(*args, "where", "--json", env=env)
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout)


def test_an_empty_config_dir_option_means_what_an_empty_variable_means(tmp_path, monkeypatch):
    proj = make_repo(tmp_path / "app")
    monkeypatch.chdir(proj)
    default = _where()
    assert default["config_dir_source"] == "LECODE_CONFIG_DIR"
    for args in (("--config-dir", ""), ("--config-dir=",)):
        doc = _where(*args)
        assert (doc["config_dir"], doc["config_dir_source"]) == (default["config_dir"],
                                                                  "LECODE_CONFIG_DIR")
    # after the command name too
    r = run_cli("where", "--json", "--config-dir", "")
    assert orjson.loads(r.stdout)["config_dir_source"] == "LECODE_CONFIG_DIR"
    # with the variable empty as well: both fall through to the same default
    a = _where(env={"LECODE_CONFIG_DIR": ""})
    b = _where("--config-dir", "", env={"LECODE_CONFIG_DIR": ""})
    assert a["config_dir_source"] == b["config_dir_source"] == "HOME"
    assert a["config_dir"] == b["config_dir"] != str(proj)


def test_a_deleted_working_directory_is_said(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    for args in (("where",), ("show",), ("facts",), ("validate",)):
        r = run_cli(*args)
        assert r.exit_code == 3, (args, r.exit_code, r.stderr)
        line = one_error_line(r.stderr)
        assert "current directory" in line and "no longer exists" in line, line
    r = run_cli("projects")       # the current project only marks a row
    assert r.exit_code == 0, r.stderr


def test_a_missing_project_path_is_said(tmp_path):
    missing = tmp_path / "no" / "such"
    for args in (("-C", str(missing), "where"), ("--project", str(missing), "show"),
                 ("facts", "-C", str(missing))):
        r = run_cli(*args)
        assert r.exit_code == 3, (args, r.exit_code, r.stdout, r.stderr)
        line = one_error_line(r.stderr)
        assert str(missing) in line and "no such directory" in line, line


# ---------------------------------------------------------------- transcripts

def _sessions(demo: Path) -> dict[str, dict]:
    r = run_cli("--store", str(demo), "sessions", "--json")
    assert r.exit_code == 0, r.stderr
    return {d["id"]: d for d in orjson.loads(r.stdout)}


def test_a_crlf_transcript_counts_its_messages(demo):
    lf = _sessions(demo)
    p = demo / "sessions" / "demo-gamma.jsonl"
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    crlf = _sessions(demo)
    assert lf["demo-gamma"]["messages"] > 0
    for k in ("messages", "records", "state"):
        assert crlf["demo-gamma"][k] == lf["demo-gamma"][k], k


@pytest.mark.parametrize("value, reason", [
    (b"1e400", None), (b"-" + b"9" * 400, None), (b"9" * 5000, None),
    (b"123456789012345678901234567890", None),
    (b"[" * 1100 + b"]" * 1100, "too_large"),
])
def test_valid_json_is_a_record_or_too_large_never_not_json(demo, value, reason):
    """A number beyond a double is a record (the standard library's parser
    reads what orjson refuses); nesting deeper than memctl parses is
    too_large, said to be that; a line that is really not JSON keeps
    not_json, and NaN (which the standard library accepts) is not JSON."""
    p = demo / "sessions" / "demo-gamma.jsonl"
    data = p.read_bytes()
    last = orjson.loads(data.splitlines()[-1])["seq"]
    p.write_bytes(data + b'{"seq":%d,"type":"message","role":"user","content":"x","n":%s}\n'
                  % (last + 1, value))
    info = _sessions(demo)["demo-gamma"]
    r = run_cli("--store", str(demo), "validate", "--deep", "--json")
    found = [f for f in orjson.loads(r.stdout)["findings"] if f["code"] == "session.corrupt_line"]
    if reason is None:
        assert (info["state"], info["records"]) == ("ok", last + 2), info
        assert found == [], found
        # a record, but with no digest (orjson cannot parse it, so the
        # contract's digest cannot be computed): read of it exits 5 (2026-12-07)
        r = run_cli("--store", str(demo), "read", "demo-gamma", str(last + 1), str(last + 1), "--json")
        if float(value) not in (float("inf"), float("-inf")):   # within a double: orjson parses it
            assert r.exit_code == 0, r.stderr
        else:
            assert r.exit_code == 5, r.stderr
            assert "cannot be digested" in r.stderr and r.stderr.count("\n") == 1
    else:
        assert (info["state"], info["reason"]) == ("corrupt", reason), info
        assert [f["reason"] for f in found] == [reason], found
        assert "nested" in found[0]["message"] and "not corrupt" in found[0]["message"]
    # a lone surrogate is not JSON to orjson; behind a number beyond a double
    # it must not reach the output through the standard library's parser
    for bad in (b"oops", b"NaN", b"Infinity", b'1e400,"s":"\\ud800"'):
        p.write_bytes(data + b'{"seq":%d,"type":"message","n":%s}\n' % (last + 1, bad))
        assert _sessions(demo)["demo-gamma"]["reason"] == "not_json", bad
        r = run_cli("--store", str(demo), "read", "demo-gamma", str(last + 1), str(last + 1), "--json")
        assert r.exit_code == 5, (bad, r.exit_code, r.stderr)
