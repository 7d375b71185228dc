"""memctl usage: known subtotals per purpose, unknown usage never shown as zero."""

from __future__ import annotations

import os

import orjson

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import SLUG
from .conftest import run_cli, tree_hash


def _store(config_dir):
    path = config_dir / "memory" / SLUG
    ss = SessionStore(store_at(path))
    w = ss.create("a", created="2026-01-01T10:00:00Z")
    w.append_message("user", "hi")
    w.append_event("compact", summary="s", lineage=[], prior=None, model="m",
                   usage={"input_tokens": 100, "output_tokens": 20, "cost": 0.5})
    w.append_event("compact", summary="s", lineage=[], prior=None, model="m", usage=None)
    w.append_event("memory_usage", purpose="learning", model="m",
                   usage={"input_tokens": 7, "output_tokens": 3, "cost": None})
    w.append_event("memory_usage", purpose="summarization", model="m",
                   usage={"input_tokens": 1, "output_tokens": 1, "cost": 0.25})
    w.append_event("memory_usage", purpose="answering", model="m",
                   usage={"input_tokens": 5, "output_tokens": 5, "cost": 1})
    w.append_event("learning", status="learned", reason_counts={}, facts=[], proposals=[])
    w.close()
    w = ss.create("b", created="2026-03-01T10:00:00Z")
    w.append_event("memory_usage", purpose="learning", model="m", usage=None)
    w.append_event("memory_usage", purpose="review", model="m", usage="garbage")
    w.close()
    return path


def _by(doc):
    return {p["purpose"]: p for p in doc["purposes"]}


def test_usage_accounting(config_dir):
    path = _store(config_dir)
    before = tree_hash(path)
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--json").stdout)
    p = _by(doc)
    assert [x["purpose"] for x in doc["purposes"]] == ["answering", "summarization", "learning", "review"]
    s = p["summarization"]
    assert s["calls"] == 3 and s["compact_events"] == 2 and s["memory_usage_events"] == 1
    assert (s["input_tokens"], s["output_tokens"], s["cost"]) == (101, 21, 0.75)
    assert s["unknown_usage_calls"] == 1 and s["complete"] is False
    learn = p["learning"]
    assert learn["calls"] == 2 and learn["unknown_usage_calls"] == 1
    assert learn["unknown_cost_calls"] == 1 and learn["cost"] is None       # never 0 when unknown
    assert (learn["input_tokens"], learn["output_tokens"]) == (7, 3)
    assert p["answering"]["complete"] is True and p["answering"]["cost"] == 1.0
    assert p["review"]["unknown_usage_calls"] == 1 and p["review"]["input_tokens"] == 0
    t = doc["total"]
    assert t["calls"] == 7 and t["unknown_usage_calls"] == 3 and t["unknown_cost_calls"] == 1
    assert doc["sessions_counted"] == 2
    assert tree_hash(path) == before


def test_usage_session_and_since(config_dir):
    path = _store(config_dir)
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--session", "b", "--json").stdout)
    assert doc["total"]["calls"] == 2
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--since", "2026-02-01", "--json").stdout)
    assert doc["total"]["calls"] == 2 and set(_by(doc)) == {"learning", "review"}
    assert run_cli("--store", str(path), "usage", "--since", "yesterday").exit_code == 2
    assert run_cli("--store", str(path), "usage", "--session", "../x").exit_code == 2
    assert run_cli("--store", str(path), "usage", "--session", "nope").exit_code == 3


def test_usage_human_marks_unknown(config_dir):
    path = _store(config_dir)
    r = run_cli("--store", str(path), "usage")
    assert r.exit_code == 0
    line = next(x for x in r.stdout.splitlines() if x.startswith("learning"))
    assert "+?" in line and "?" in line
    assert "not zero" in r.stdout


def test_usage_skips_refused_and_torn(config_dir):
    path = _store(config_dir)
    sd = path / "sessions"
    (sd / "c.jsonl").write_bytes(
        orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "c",
                      "project": "other-000000000000", "created": "2026-01-01T00:00:00Z"}) + b"\n"
        + b'{"seq":1,"type":"event","event":"compact",'
          b'"usage":{"input_tokens":9,"output_tokens":9,"cost":9}}\n')
    os.symlink(sd / "a.jsonl", sd / "d.jsonl")
    with open(sd / "b.jsonl", "ab") as fh:
        fh.write(b'{"seq":3,"type":"event","event":"memory_usage","purpose":"learning","usage":{"inp')
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--json").stdout)
    assert sorted(doc["refused_sessions"]) == ["c", "d"]
    assert doc["total"]["calls"] == 7


def test_usage_no_store(config_dir):
    r = run_cli("--store", str(config_dir / "memory" / "none-000000000000"), "usage")
    assert r.exit_code == 3


def test_usage_totals_past_2_63_count_as_unknown(config_dir):
    """2,100 calls of 2^53-1 tokens each sum past 2^63-1 (usage --json gave 70,
    'Integer exceeds 64-bit range'): a call that would carry a subtotal past
    2^63-1 is counted as unknown usage, so every total stays an exact known
    subtotal and the purpose (and the total over purposes) is not complete."""
    big = (1 << 53) - 1
    path = config_dir / "memory" / SLUG
    ss = SessionStore(store_at(path))
    w = ss.create("a", created="2026-01-01T10:00:00Z")
    for _ in range(1050):
        w.append_event("memory_usage", purpose="learning", model="m",
                       usage={"input_tokens": big, "output_tokens": 1, "cost": 1})
        w.append_event("memory_usage", purpose="answering", model="m",
                       usage={"input_tokens": 1, "output_tokens": big, "cost": 1})
    w.close()
    r = run_cli("--store", str(path), "usage", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    fits = ((1 << 63) - 1) // big              # the calls whose tokens fit: 1024
    for name, field in (("learning", "input_tokens"), ("answering", "output_tokens")):
        p = _by(doc)[name]
        assert p["calls"] == 1050 and p["known_usage_calls"] == fits
        assert p["unknown_usage_calls"] == 1050 - fits and p["complete"] is False
        assert p[field] == fits * big and p["cost"] == fits
    t = doc["total"]
    assert t["calls"] == 2100 and t["complete"] is False
    assert t["input_tokens"] <= (1 << 63) - 1 and t["output_tokens"] <= (1 << 63) - 1
    assert t["known_usage_calls"] + t["unknown_usage_calls"] == 2100
    for fmt in ("jsonl", "csv", "table"):
        r = run_cli("--store", str(path), "usage", "--format", fmt)
        assert r.exit_code == 0, (fmt, r.stderr)


def test_usage_refuses_the_headers_every_reader_refuses(config_dir):
    """A header naming another session id, of another format, with a seq other
    than 0, or with its seq given twice: every reader (and validate's
    session.missing_header) refuses such a transcript; usage counted its
    events (the header rule now has one home, sessions.header_problem)."""
    path = _store(config_dir)
    sd = path / "sessions"
    event = (b'{"seq":1,"type":"event","event":"compact",'
             b'"usage":{"input_tokens":9,"output_tokens":9,"cost":9}}\n')
    head = {"seq": 0, "type": "session", "format": 1, "project": SLUG,
            "created": "2026-01-01T00:00:00Z"}
    for sid, header in [("e", orjson.dumps({**head, "session_id": "someone-else"})),
                        ("f", orjson.dumps({**head, "session_id": "f", "format": 2})),
                        ("g", orjson.dumps({**head, "session_id": "g", "seq": 1})),
                        ("h", b'{"seq":0,' + orjson.dumps({**head, "session_id": "h"})[1:]
                         .replace(b'"seq":0,', b'"seq":1,', 1))]:
        (sd / f"{sid}.jsonl").write_bytes(header + b"\n" + event)
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--json").stdout)
    assert sorted(doc["refused_sessions"]) == ["e", "f", "g", "h"]
    assert doc["total"]["calls"] == 7
    for sid in "efgh":
        r = run_cli("--store", str(path), "read", sid, "1", "1")
        assert r.exit_code == 4, (sid, r.exit_code, r.stderr)


def test_usage_counts_a_session_whose_header_holds_a_number_beyond_a_double(config_dir):
    """A header holding 1e400 (valid JSON orjson alone refuses) is a header to
    every reader and to validate (the readers' loader, load_record); usage
    parsed it with orjson alone and listed the session as refused."""
    path = _store(config_dir)
    f = path / "sessions" / "b.jsonl"
    f.write_bytes(f.read_bytes().replace(b'"created":"2026-03-01T10:00:00Z"', b'"created":1e400', 1))
    assert b"1e400" in f.read_bytes()
    read = orjson.loads(run_cli("--store", str(path), "read", "b", "1", "2").stdout)
    assert read["reason"] != "refused_header", read       # (events only: not_message)
    doc = orjson.loads(run_cli("--store", str(path), "usage", "--json").stdout)
    assert doc["refused_sessions"] == []
    assert doc["sessions_counted"] == 2


def test_usage_refuses_a_directory_or_fifo_named_like_a_transcript(config_dir):
    """A directory ``sessions/x.jsonl`` was opened, then handed to a file
    object that refused it with an OSError naming the descriptor: exit 5,
    ``4: Is a directory``.  It is refused and listed, as a FIFO is, and as
    ``sessions`` lists both (unreadable)."""
    path = _store(config_dir)
    sd = path / "sessions"
    (sd / "x.jsonl").mkdir()
    os.mkfifo(sd / "y.jsonl")
    r = run_cli("--store", str(path), "usage", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert sorted(doc["refused_sessions"]) == ["x", "y"]
    assert doc["sessions"] == 4 and doc["sessions_counted"] == 2
    assert doc["total"]["calls"] == 7
    r = run_cli("--store", str(path), "usage")
    assert r.exit_code == 0 and "refused: x, y" in r.stdout, (r.stdout, r.stderr)
    for sid in ("x", "y"):
        r = run_cli("--store", str(path), "usage", "--session", sid, "--json")
        assert r.exit_code == 0, r.stderr
        assert orjson.loads(r.stdout)["refused_sessions"] == [sid]
    rows = orjson.loads(run_cli("--store", str(path), "sessions", "--json").stdout)
    rows = rows["sessions"] if isinstance(rows, dict) else rows
    states = {row["id"]: row["state"] for row in rows}
    assert states["x"] == states["y"] == "unreadable"


def test_an_os_error_is_reported_with_its_file_never_a_descriptor_number(tmp_path):
    """The shared root cause: main's message for an OSError named
    ``exc.filename`` whatever it was, and Python's ``open(fd)`` names the
    descriptor (``4: Is a directory``); a transcript reader handed a
    directory's descriptor now names the file."""
    import errno

    import pytest

    from lecode_memctl.cli.main import error_report
    from lecode_memctl.core.sessions import _File

    code, message, status = error_report(IsADirectoryError(errno.EISDIR, "Is a directory", 4))
    assert (code, message, status) == ("store_corrupt", "Is a directory", 5)
    named = error_report(IsADirectoryError(errno.EISDIR, "Is a directory", "/s/x.jsonl"))
    assert named is not None and named[1] == "/s/x.jsonl: Is a directory"
    d = tmp_path / "x.jsonl"
    d.mkdir()
    fd = os.open(d, os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError) as info:
            _File(fd, "x", str(d))
        assert info.value.filename == str(d)
    finally:
        os.close(fd)
