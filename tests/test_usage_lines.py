"""memctl usage reads a transcript in pieces: a line without ``"event"`` is
never joined, whatever its length, and the figures are those of reading the
transcript line by line, wherever the pieces split it."""

from __future__ import annotations

import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import sessions, usage
from lecode_memctl.core.layout import store_at

from .builders import SLUG, traced_peak

_HEADER = {"seq": 0, "type": "session", "format": 1, "session_id": "s1", "project": SLUG,
           "created": "2026-12-01T09:00:00+00:00"}


def _rec(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _compact(seq: int, tokens: int) -> bytes:
    return _rec({"seq": seq, "type": "event", "event": "compact", "summary": "s", "lineage": [],
                 "prior": None, "model": "m",
                 "usage": {"input_tokens": tokens, "output_tokens": 1, "cost": 0.5}})


def _mem(seq: int, purpose: str, tokens: int) -> bytes:
    return _rec({"seq": seq, "type": "event", "event": "memory_usage", "purpose": purpose,
                 "model": "m", "usage": {"input_tokens": tokens, "output_tokens": 2,
                                         "cost": None}})


def _write(tmp_path, data: bytes):
    store = store_at(tmp_path / "memory" / SLUG)
    (store.path / "sessions").mkdir(parents=True, exist_ok=True)
    (store.path / "sessions" / "s1.jsonl").write_bytes(data)
    return store


def _line_by_line(store, data: bytes) -> dict:
    """The report of reading ``data`` whole, split into its complete lines
    (the reference: what usage counted before it read in pieces)."""
    rep = usage.UsageReport(store.slug, None, None)
    rep.sessions = 1
    complete = data[:data.rfind(b"\n") + 1]
    if complete:
        lines = complete[:-1].split(b"\n")
        counted, created = usage._header(rep, store, "s1", lines[0])
        if counted:
            last = 0
            for line in lines[1:]:
                if b'"event"' in line:
                    last = usage._count_line(rep, line, created, None, None, last)
    return rep.to_json()


def _huge_message(seq: int, mib: int) -> bytes:
    piece = b"abc def ghi " * 65536        # 768 KiB of prose, no "event" in it
    body = piece * (mib * 1024 * 1024 // len(piece))
    return (b'{"seq":%d,"type":"message","role":"tool","content":"' % seq + body
            + b'","tool_call_id":"c","epoch":1}\n')


@pytest.mark.heavy
def test_a_huge_line_without_event_is_never_joined(tmp_path):
    """A 96 MiB tool message cost 329 MB and 0.9 s, a 384 MiB one 1.21 GB
    and 12.6 s (MemoryError under a 1 GiB limit): each 8 MiB read was
    appended to the line so far and the whole split again.  Now the line is
    searched a block at a time and never held: the peak is the same for a
    36 MiB and a 108 MiB line (both past the size that two threads search:
    measured: 6.3 to 6.7 MB for both; the old reader took 109 and 336 MB)."""
    def run(mib: int):
        data = (_rec(_HEADER) + _compact(1, 10) + _huge_message(2, mib) + _mem(3, "learning", 7)
                + b'{"seq":4,"type":"event","event":"compact","usage"')    # a torn tail
        store = _write(tmp_path, data)
        rep, peak = traced_peak(lambda: usage.usage_report(store))
        return rep.to_json(), peak

    small, peak_small = run(36)
    big, peak_big = run(108)
    assert small == big
    assert big["total"]["calls"] == 2 and big["corrupt_lines"] == 0
    assert big["total"]["input_tokens"] == 17
    # (a line joined whole costs at least its own size: 72 MiB more here)
    assert peak_big - peak_small < 2 << 20, (peak_small, peak_big)
    assert peak_big < 12 << 20, peak_big


_LINES = [
    _compact(1, 3),
    _mem(1, "learning", 5),
    _mem(1, "answering", 11),
    # a message that mentions "event", valid: parsed, not counted
    _rec({"seq": 1, "type": "message", "role": "user", "content": 'the "event" field'}),
    # "event" on a line that is no record: corrupt
    b'{"seq":1,"type":"message","content":"\\"event\\"" broken\n',
    b'not json "event"\n',
    b'{"event":"compact","type":"event","usage":null}\n',        # no seq
    # a message prefix and a compact record: no reader's event
    b'{"seq":1,"type":"message","type":"event","event":"compact","usage":null}\n',
    b'{"seq":1,"type":"message","role":"tool","content":"' + b"x" * 300 + b'"}\n',
    b"\n",
    b'{"seq":1,"type":"event","event":"compact","usage":null}\r\n',
    _rec({"seq": 1, "type": "event", "event": "memory_usage", "purpose": "r\u00e9vision",
          "usage": {"input_tokens": 1, "output_tokens": 1, "cost": 2}}),
]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(range(len(_LINES))), max_size=12),
       st.sampled_from([b"", b'{"seq":9,"type":"event","event":"com', b'"event"']),
       st.sampled_from([1, 2, 5, 7, 16, 61, 200]))
def test_the_figures_are_those_of_reading_line_by_line(tmp_path, monkeypatch, picks, tail,
                                                       block):
    """Whatever the read pieces (down to one byte: every event line and every
    ``"event"`` split across two pieces, or more), the report is the one of
    the transcript's complete lines read whole, torn tail excluded."""
    data = _rec(_HEADER) + b"".join(_LINES[i] for i in picks) + tail
    store = _write(tmp_path, data)
    monkeypatch.setattr(sessions, "_SCAN_BLOCK", block)
    assert usage.usage_report(store).to_json() == _line_by_line(store, data)


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("block", [3, 7, 64, 333])
def test_an_event_line_split_across_read_pieces_is_counted(tmp_path, monkeypatch, ahead,
                                                           block):
    """Event lines that begin in one read piece and end in another (and a
    mark ``"event"`` cut in two) are counted once each, whether one thread
    reads the pieces or two read them ahead."""
    body = b"".join(_compact(i, i) if i % 2 else _mem(i, "learning", i) for i in range(1, 41))
    data = _rec(_HEADER) + body
    store = _write(tmp_path, data)
    if ahead:
        monkeypatch.setattr(os, "cpu_count", lambda: 4)
        monkeypatch.setattr(sessions, "_PARALLEL_SCAN", 1)
        monkeypatch.setattr(sessions, "_AHEAD_BLOCK", block)
    else:
        monkeypatch.setattr(sessions, "_SCAN_BLOCK", block)
    doc = usage.usage_report(store).to_json()
    assert doc == _line_by_line(store, data)
    assert doc["total"]["calls"] == 40 and doc["total"]["compact_events"] == 20
    assert doc["total"]["input_tokens"] == sum(range(1, 41))
    by = {p["purpose"]: p for p in doc["purposes"]}
    assert by["learning"]["input_tokens"] == sum(range(2, 41, 2))
