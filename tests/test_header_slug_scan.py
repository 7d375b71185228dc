"""The header scan a store given by path (``--store``) takes its slug from.

``SessionStore.header_projects`` read each transcript's first line through
the reader's full open (a lookup of ``sessions/``, path objects, a
buffered file, a ``_File``): 46 us a transcript, 0.9 s before every
command on a store of 20,000 sessions.  It now opens ``sessions/`` once
and each file below it, and reads the first line by ``pread``; these tests
hold it to the counts the reader's own ``header()`` gives."""

from __future__ import annotations

import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.errors import MemctlError
from lecode_memctl.core.layout import store_at, store_given
from lecode_memctl.core.sessions import SessionStore

from .builders import SLUG

OTHER = "other-0123456789ab"


def _reference(ss: SessionStore) -> dict[str, int]:
    """The counts as the full reader gives them (the code before the scan)."""
    counts: dict[str, int] = {}
    for sid in ss.session_ids(unlistable_ok=True):
        try:
            with ss._open(sid) as f:
                project = f.header().get("project")
        except (MemctlError, OSError):
            continue
        if isinstance(project, str):
            counts[project] = counts.get(project, 0) + 1
    return counts


def _header(sid: str, **over) -> bytes:
    rec = {"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
           "created": "2026-01-01T00:00:00Z", **over}
    return orjson.dumps(rec)


_FIRST_LINES = {
    "good": lambda sid: _header(sid) + b"\n",
    "other project": lambda sid: _header(sid, project=OTHER) + b"\n",
    "no project": lambda sid: orjson.dumps({"seq": 0, "type": "session", "format": 1,
                                            "session_id": sid}) + b"\n",
    "project not a string": lambda sid: _header(sid, project=7) + b"\n",
    "another session id": lambda sid: _header("2026-01-01-zzzz") + b"\n",
    "format 2": lambda sid: _header(sid, format=2) + b"\n",
    "format true": lambda sid: _header(sid, format=True) + b"\n",
    "seq 1": lambda sid: _header(sid, seq=1) + b"\n",
    "type message": lambda sid: _header(sid, type="message") + b"\n",
    "no newline": lambda sid: _header(sid),
    "empty": lambda sid: b"",
    "blank line first": lambda sid: b"\n" + _header(sid) + b"\n",
    "not json": lambda sid: b"{nope\n",
    "not utf-8": lambda sid: b'{"seq":0,"x":"\xff"}\n',
    "an array": lambda sid: b"[1]\n",
    "seq twice": lambda sid: b'{"seq":0,"seq":0,' + _header(sid)[1:] + b"\n",
    "long header": lambda sid: _header(sid, pad="x" * 200_000) + b"\n",
    "long line, no newline": lambda sid: _header(sid, pad="x" * 200_000),
    "crlf": lambda sid: _header(sid) + b"\r\n",
    "more records": lambda sid: _header(sid) + b"\n" + b'{"seq":1,"type":"message"}\n',
}


def _store(tmp_path, kinds: list[str]):
    store = store_at(tmp_path / "memory" / SLUG)
    d = store.path / "sessions"
    d.mkdir(parents=True)
    for i, kind in enumerate(kinds):
        sid = f"2026-01-01-{i:04d}"
        (d / f"{sid}.jsonl").write_bytes(_FIRST_LINES[kind](sid))
    return store


def test_every_kind_of_first_line_counts_as_the_reader_says(tmp_path):
    store = _store(tmp_path, sorted(_FIRST_LINES))
    ss = SessionStore(store)
    got = ss.header_projects()
    assert got == _reference(ss)
    assert got == {SLUG: 5, OTHER: 1}


def test_entries_that_are_not_regular_files_are_not_counted(tmp_path):
    store = _store(tmp_path, ["good", "good"])
    d = store.path / "sessions"
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(_header("2026-01-01-9000") + b"\n")
    os.symlink(target, d / "2026-01-01-9000.jsonl")
    os.mkfifo(d / "2026-01-01-9001.jsonl")
    (d / "2026-01-01-9002.jsonl").mkdir()
    (d / "2026-01-01-9003.jsonl").mkdir()
    (d / "2026-01-01-9003.jsonl" / "x").write_bytes(b"")
    (d / "not a session id.jsonl").write_bytes(_header("not a session id") + b"\n")
    ss = SessionStore(store)
    assert ss.header_projects() == _reference(ss) == {SLUG: 2}


def test_a_linked_or_missing_sessions_directory_counts_nothing(tmp_path):
    store = _store(tmp_path, ["good"])
    real = tmp_path / "real-sessions"
    os.rename(store.path / "sessions", real)
    os.symlink(real, store.path / "sessions")
    ss = SessionStore(store)
    assert ss.header_projects() == _reference(ss) == {}
    os.unlink(store.path / "sessions")
    assert ss.header_projects() == _reference(ss) == {}
    (store.path / "sessions").write_bytes(b"a file")
    assert ss.header_projects() == _reference(ss) == {}


def test_the_slug_of_a_store_given_by_path(tmp_path):
    store = _store(tmp_path, ["good", "good", "other project"])
    given_store = store_given(store.path)
    assert (given_store.slug, given_store.slug_source) == (SLUG, "directory")
    moved = tmp_path / "evidence-copy"
    os.rename(store.path, moved)
    given_store = store_given(moved)
    assert (given_store.slug, given_store.slug_source) == (SLUG, "headers")
    assert "the project 2 of 3 name" in given_store.slug_detail


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(sorted(_FIRST_LINES)), max_size=12),
       cut=st.integers(0, 300))
def test_any_mix_counts_as_the_reader_says(tmp_path_factory, kinds, cut):
    tmp = tmp_path_factory.mktemp("mix")
    store = _store(tmp, kinds)
    d = store.path / "sessions"
    for i, p in enumerate(sorted(d.iterdir())):
        if i % 3 == 1:      # a first line cut anywhere
            data = p.read_bytes()
            p.write_bytes(data[:cut])
    ss = SessionStore(store)
    assert ss.header_projects() == _reference(ss)


@pytest.mark.parametrize("n", [1, 2])
def test_no_descriptor_is_left_open(tmp_path, n):
    store = _store(tmp_path, ["good", "no newline", "not json"] * n)
    before = set(os.listdir("/proc/self/fd"))
    SessionStore(store).header_projects()
    assert set(os.listdir("/proc/self/fd")) == before
