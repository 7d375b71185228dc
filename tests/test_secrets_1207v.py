"""``memctl secrets`` holds its findings encoded, past a bound in an unnamed
temporary file (core.held, as ``validate``), so that memory does not follow
their number: 100,000 findings of one key took 148 MiB (prometheus) to
230 MiB (jsonl) before 2026-12-07.

The outputs are those of findings held as objects (``FINDINGS_HELD_IN_MEMORY
= None``: every finding a ``Finding`` in a list, as before), byte for byte,
in every format; the temporary file is used past the bound; the scan's
duplicate check keeps the keys of one line at a time, not of every finding."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from .conftest import run_cli

SLUG = "proj-0123456789ab"
KEY = "AKIAIOSFODNN7EXAMPLQ"
OTHER = "AKIAJ7Q2XW5R3T9VB4NM"
FORMATS = ("table", "json", "jsonl", "csv", "tsv", "prometheus")


def _store(base: Path, n: int = 120) -> Path:
    """A transcript with the key once a record (and another in a tool call's
    key, and in the session id), a note named by a key, a MEMORY.md."""
    root = base / "memory" / SLUG
    (root / "sessions").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "MEMORY.md").write_text(f"# m\nkey {KEY} here\n")
    (root / "notes" / f"{OTHER}.md").write_text("nothing here\n")
    sid = f"s-{OTHER}"
    sep: dict = {"separators": (",", ":")}
    with open(root / "sessions" / f"{sid}.jsonl", "w") as f:
        f.write(json.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                            "project": SLUG, "created": "2026-12-01T09:00:00+00:00"}, **sep) + "\n")
        for i in range(1, n + 1):
            d: dict = {"seq": i, "type": "message", "role": "user" if i % 2 else "assistant",
                       "content": f"key {KEY} here, and {KEY} again"}
            if i % 2 == 0:
                d["epoch"] = 0
            if i % 10 == 0:
                d = {"seq": i, "type": "tool_call", "epoch": 0, "call_id": f"c{i}",
                     "tool": "bash", "arguments": {OTHER: f"x {KEY}"}}
            f.write(json.dumps(d, **sep) + "\n")
    return root


def _untimed(out: bytes) -> bytes:
    """(the run's time, in json and prometheus, aside)"""
    out = re.sub(rb'"generated":"[^"]*"', b"", out)
    return re.sub(rb"(memctl_secrets_last_run_timestamp_seconds) [0-9.]+", rb"\1", out)


def _run(root: Path, fmt: str, *extra: str):
    return run_cli("--no-state", "--store", str(root), "secrets", "--format", fmt, *extra)


@pytest.fixture
def writes(monkeypatch):
    """The bytes written to unnamed temporary files (core.held.Spill)."""
    from lecode_memctl.core import held

    written = []
    real = held.Spill.write

    def write(self, data):
        written.append(len(data))
        return real(self, data)

    monkeypatch.setattr(held.Spill, "write", write)
    return written


@pytest.mark.parametrize("piece", [None, 100])
@pytest.mark.parametrize("fmt", FORMATS)
def test_findings_past_the_bound_wait_in_a_temporary_file_with_the_same_output(
        tmp_path, monkeypatch, writes, fmt, piece):
    """(``piece``: the report written a few bytes at a time, not in 1 MiB
    pieces: a CSV's pieces written to the stdout it was made for)"""
    from lecode_memctl.cli import cmd_forensics
    from lecode_memctl.core import secrets

    if piece is not None:
        monkeypatch.setattr(cmd_forensics, "REPORT_PIECE", piece)
    root = _store(tmp_path)
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", None)
    before = _run(root, fmt)
    assert before.exit_code == 1, before.stderr
    assert not writes
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 256)
    after = _run(root, fmt)
    assert after.exit_code == 1, after.stderr
    assert writes, "no finding was held in a temporary file"
    assert _untimed(after.stdout_bytes) == _untimed(before.stdout_bytes)
    if fmt != "prometheus":
        assert KEY not in after.stdout and OTHER not in after.stdout


def test_held_findings_give_the_same_masked_places(tmp_path, monkeypatch, writes):
    from lecode_memctl.core import secrets

    root = _store(tmp_path, n=40)
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 64)
    out = _run(root, "jsonl")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert writes
    found = [r for r in rows if r["type"] == "secret"]
    # every record's key, the tool calls' key in the path, the session id
    # and the note's name masked; never the value
    assert len(found) == sum(1 for r in found if OTHER not in json.dumps(r))
    assert any(r["path"] and "[REDACTED:" in r["path"] for r in found)
    assert all("[REDACTED:" in r["session_id"] for r in found if r["session_id"])
    assert rows[-1]["findings"] == len(found)


def test_the_output_file_is_the_same(tmp_path, monkeypatch):
    from lecode_memctl.core import secrets

    root = _store(tmp_path, n=30)
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", None)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert _run(root, "jsonl", "--output", str(a)).exit_code == 1
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 64)
    assert _run(root, "jsonl", "--output", str(b)).exit_code == 1
    assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 0


def test_quiet_prints_nothing_and_says_so_by_its_status(tmp_path, monkeypatch):
    from lecode_memctl.core import secrets

    root = _store(tmp_path, n=20)
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 64)
    r = run_cli("--no-state", "--store", str(root), "secrets", "-q")
    assert r.exit_code == 1 and r.stdout_bytes == b""


def test_the_duplicate_check_keeps_one_line_of_keys_not_every_finding(tmp_path):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import Detector, Scanner

    root = _store(tmp_path, n=200)
    scanner = Scanner(store_at(root), Detector())
    report = scanner.run()
    assert len(report.findings) > 200
    assert len(scanner._seen) <= 4


def test_a_key_found_twice_on_one_line_is_one_finding(tmp_path):
    """(what the duplicate check is for: the same value at the same place --
    a record's two mentions of one key in one field -- is reported once)"""
    root = _store(tmp_path, n=3)
    r = _run(root, "jsonl")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    places = [(x["seq"], x["path"], x["line"], x["hash"]) for x in rows if x["type"] == "secret"
              and x["kind"] == "transcript"]
    assert len(places) == len(set(places))


def test_a_core_scan_keeps_findings_as_objects(tmp_path):
    """(redact's: scan_store without a spill gives a list of Finding objects,
    each with its value)"""
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import scan_store

    report = scan_store(store_at(_store(tmp_path, n=5)))
    assert isinstance(report.findings, list)
    assert {f.secret_value() for f in report.findings} >= {KEY, OTHER}


def test_the_temporary_file_is_closed_once_the_report_is_written(tmp_path, monkeypatch):
    """The findings' temporary file is used past the bound and closed when
    the command ends (it has no name: what would be left is its open
    descriptor, and the space it holds in $TMPDIR)."""
    import tempfile

    from lecode_memctl.core import secrets

    root = _store(tmp_path, n=50)
    tmp = tmp_path / "t"
    tmp.mkdir()
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 64)
    made: list = []
    real = tempfile.TemporaryFile

    def temporary_file(*a, **k):
        f = real(*a, **k)
        made.append(f)
        return f

    monkeypatch.setattr(tempfile, "TemporaryFile", temporary_file)
    r = run_cli("--no-state", "--store", str(root), "secrets", "--format", "csv",
                env={"TMPDIR": str(tmp)})
    assert r.exit_code == 1
    assert made, "the findings never reached the temporary file"
    assert all(f.closed for f in made)
    assert os.listdir(tmp) == []


def test_a_store_name_holding_a_value_is_masked_in_held_findings(tmp_path, monkeypatch):
    """--all-projects with a store whose directory is named by a key, its
    findings held in the temporary file: each finding's project is the
    masked name, never the key (the mask is set on the held findings as
    they are read back)."""
    from lecode_memctl.core import secrets

    config = tmp_path / "cfg"
    root = _store(tmp_path / "x", n=30)
    (config / "memory").mkdir(parents=True)
    named = config / "memory" / f"proj-{OTHER}"
    root.rename(named)
    monkeypatch.setattr(secrets, "FINDINGS_HELD_IN_MEMORY", 64)
    for fmt in ("jsonl", "json", "csv", "table"):
        r = run_cli("--no-state", "--config-dir", str(config), "secrets", "--all-projects",
                    "--format", fmt)
        assert r.exit_code == 1, (fmt, r.stdout, r.stderr)
        assert OTHER not in r.stdout and OTHER not in r.stderr, (fmt, r.stdout[:2000])
        assert "[REDACTED:" in r.stdout, fmt


def test_a_files_hits_are_held_encoded_each_text_once(tmp_path):
    """A worker's scan of one file (what it sends back, and what the
    process that merges it holds) keeps each text -- the value, the
    detector, the session id, the path -- once, and some 30 bytes a hit:
    before 2026-12-07 a list of tuples and dicts, the value a new string in
    each (some 400 bytes a hit in memory)."""
    import pickle
    import tracemalloc

    from lecode_memctl.core.secrets import Detector, _transcript_hits, scan_file

    root = _store(tmp_path, n=2000)
    rel = f"sessions/s-{OTHER}.jsonl"
    detector = Detector()
    # (warmed up: the detectors' caches made before the scan is traced)
    scan_file(detector, str(_store(tmp_path / "small", n=20)), rel)
    tracemalloc.start()
    try:
        scan = scan_file(detector, str(root), rel)
        held = tracemalloc.get_traced_memory()[0]
        sent = pickle.loads(pickle.dumps(scan))
        taken = tracemalloc.get_traced_memory()[0] - held
    finally:
        tracemalloc.stop()
    hits = list(scan.hits)
    listed: list = []
    with open(root / rel, "rb") as f:
        _transcript_hits(detector, rel, f, listed)
    assert hits == listed and len(hits) > 4000
    assert (KEY, "aws-access-key", "transcript",
            {"session_id": f"s-{OTHER}", "seq": 1, "path": "$.content", "line": 2}) in hits
    assert list(sent.hits) == hits
    assert held < 40 * len(hits) and taken < 40 * len(hits), (held, taken, len(hits))
    # (an unreadable file: none of its hits)
    scan.hits.clear()
    assert list(scan.hits) == []
