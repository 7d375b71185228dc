"""SessionStore core: writer, range reads, snapshots, validation, visibility."""

from __future__ import annotations

import os
import sys

import orjson
import pytest

from lecode_memctl.core.errors import (
    Conflict,
    NotFound,
    StoreBusy,
    StoreCorrupt,
    UsageError,
)
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import (
    SessionCorrupt,
    SessionRefused,
    SessionStore,
    SpanHidden,
    UndoState,
    visible,
)
from lecode_memctl.core.sourceref import MemoryExclusions, SourceRef, canonical_digest

from .builders import SLUG

# store, ss: conftest (an empty store at <tmp>/memory/SLUG and its SessionStore)


def fill(ss, sid="s1", n=10):
    with ss.create(sid, created="2026-01-01T00:00:00Z") as w:
        for i in range(1, n + 1):
            if i % 2:
                w.append_message("user", f"question {i}")
            else:
                w.append_message("assistant", [{"type": "text", "text": f"answer {i}"}], epoch=0)
    return sid


def test_create_writes_header_and_modes(ss, store):
    with ss.create("abc", created="2026-01-01T00:00:00Z") as w:
        assert w.append_message("user", "hi") == 1
        assert w.append_event("clear") == 2
    path = store.sessions_dir / "abc.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert orjson.loads(lines[0]) == {"seq": 0, "type": "session", "format": 1, "session_id": "abc",
                                      "project": SLUG, "created": "2026-01-01T00:00:00Z"}
    assert orjson.loads(lines[1]) == {"seq": 1, "type": "message", "role": "user", "content": "hi"}
    assert orjson.loads(lines[2]) == {"seq": 2, "type": "event", "event": "clear"}
    assert (os.stat(path).st_mode & 0o777) == 0o600
    assert (os.stat(store.sessions_dir).st_mode & 0o777) == 0o700
    assert (os.stat(store.sessions_dir / "abc.lock").st_mode & 0o777) == 0o600


def test_create_existing_is_conflict(ss):
    fill(ss, n=1)
    with pytest.raises(Conflict):
        ss.create("s1")


def test_second_writer_is_busy_and_reopen_continues(ss):
    w = ss.create("s1")
    with pytest.raises(StoreBusy) as got:
        ss.writer("s1")
    # (the writer holding it is this process's: the lock is per open file,
    # so the message does not say "another process")
    assert "written by another process" not in str(got.value), got.value
    assert "another writer" in str(got.value), got.value
    w.close()
    with ss.writer("s1") as w2:
        assert w2.append_message("user", "x") == 1


def test_records_by_range(ss):
    fill(ss, n=50)
    recs = ss.records("s1", 10, 20)
    assert [r["seq"] for r in recs] == list(range(10, 21))
    assert [r["seq"] for r in ss.records("s1", 45, 100)] == list(range(45, 51))
    assert ss.records("s1", 60, 70) == []


def test_snapshot_and_validate(ss):
    fill(ss, n=10)
    snap = ss.source_snapshot("s1", 1, 4)
    assert snap.ref.seqs == (1, 2, 3, 4)
    assert snap.ref.digest == canonical_digest(ss.records("s1", 1, 4))
    assert ss.validate_source(snap.ref).status == "valid"


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "-x", "x" * 129, "a b"])
def test_bad_id_is_usage_error(ss, bad):
    with pytest.raises(UsageError):
        ss.records(bad, 0, 1)


def test_unknown_session_offers_close_match(ss):
    fill(ss, "session-one", n=1)
    with pytest.raises(NotFound) as ei:
        ss.source_snapshot("session-on", 0, 1)
    assert "session-one" in (ei.value.hint or "")


def test_bad_ranges(ss):
    fill(ss, n=5)
    for a, b in ((3, 2), (-1, 2), (0, 200)):
        with pytest.raises(UsageError):
            ss.source_snapshot("s1", a, b)


def test_symlink_refused(ss, store):
    fill(ss, n=2)
    os.symlink(store.sessions_dir / "s1.jsonl", store.sessions_dir / "s2.jsonl")
    with pytest.raises(SessionRefused) as ei:
        ss.records("s2", 0, 1)
    assert ei.value.reason == "refused_symlink"
    ref = SourceRef("s2", (1,), "0" * 64)
    st = ss.validate_source(ref)
    assert (st.status, st.reason) == ("hidden", "refused_symlink")


def test_other_project_refused(ss):
    with ss.create("s1", project="other-000000000000") as w:
        w.append_message("user", "x")
    with pytest.raises(SessionRefused) as ei:
        ss.records("s1", 0, 1)
    assert ei.value.reason == "refused_project"


def test_visibility_predicate_order():
    us = UndoState([{"seq": 9, "type": "event", "event": "undo", "target": [1, 2]}])
    rec = {"seq": 1, "type": "message", "role": "assistant", "content": "x", "epoch": 0}
    assert visible(rec, purpose="working", excluded=frozenset({1}), generation=1,
                   undo_state=us, clear_seq=5) == (False, "excluded")
    assert visible(rec, purpose="working", excluded=frozenset(), generation=1,
                   undo_state=us, clear_seq=5) == (False, "undone")
    us2 = UndoState()
    assert visible(rec, purpose="working", excluded=frozenset(), generation=1,
                   undo_state=us2, clear_seq=5) == (False, "cleared")
    assert visible(rec, purpose="durable", excluded=frozenset(), generation=1,
                   undo_state=us2, clear_seq=5) == (False, "epoch")
    assert visible(rec, purpose="durable", excluded=frozenset(), generation=0,
                   undo_state=us2, clear_seq=5) == (True, None)


def test_snapshot_all_hidden_is_conflict(ss, store):
    fill(ss, n=4)
    with ss.writer("s1") as w:
        w.append_event("undo", target=[1, 4])
    with pytest.raises(SpanHidden) as ei:
        ss.source_snapshot("s1", 1, 4)
    assert ei.value.reason == "undone"
    assert isinstance(ei.value, Conflict)


def test_exclusions_reader(store):
    ex = MemoryExclusions()
    ss = SessionStore(store, ex)
    fill(ss, n=4)
    ref = ss.source_snapshot("s1", 1, 1).ref
    ex.exclude("s1", [1])
    st = ss.validate_source(ref)
    assert (st.status, st.reason, st.seq) == ("hidden", "excluded", 1)


def test_corrupt_line_in_span(ss, store):
    fill(ss, n=6)
    path = store.sessions_dir / "s1.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[3] = b"not json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorrupt) as ei:
        ss.records("s1", 1, 5)
    assert ei.value.line == 4 and ei.value.kind == "not_json"
    assert isinstance(ei.value, StoreCorrupt)
    assert [r["seq"] for r in ss.records("s1", 4, 6)] == [4, 5, 6]


def test_symlinked_sessions_dir_refused(tmp_path):
    real = store_at(tmp_path / "elsewhere" / SLUG)
    fill(SessionStore(real), n=2)
    store = store_at(tmp_path / "memory" / SLUG)
    os.makedirs(store.path)
    os.symlink(real.sessions_dir, store.sessions_dir)
    ss = SessionStore(store)
    with pytest.raises(SessionRefused) as ei:
        ss.records("s1", 0, 1)
    assert ei.value.reason == "refused_symlink"
    ref = SessionStore(real).source_snapshot("s1", 1, 1).ref
    assert ss.validate_source(ref).reason == "refused_symlink"


def test_create_makes_missing_parents_0700(tmp_path):
    store = store_at(tmp_path / "cfg" / "memory" / SLUG)
    fill(SessionStore(store), n=1)
    for d in (tmp_path / "cfg", tmp_path / "cfg" / "memory", store.path, store.sessions_dir):
        assert (os.stat(d).st_mode & 0o777) == 0o700, d


def test_binary_search_against_a_plain_slice(ss, store):
    """Lines of very different lengths (a few beyond the 64 KiB linear window)
    so that the byte-offset binary search lands mid-line, on short and long
    lines; every range must equal the plain slice."""
    import random

    rnd = random.Random(7)
    with ss.create("s1") as w:
        for i in range(1, 400):
            n = rnd.choice([0, 5, 50, 500, 5000, 20000, 70000 if i % 97 == 0 else 300])
            if i % 13 == 0:
                w.append_event("memory_usage", purpose="learning", model="m", usage=None)
            else:
                w.append_message("user", "é" * n + f" {i}")
    with open(store.sessions_dir / "s1.jsonl", "ab") as f:
        f.write(b'{"seq":400,"type":"message","role":"user","content":"torn')
    lines = (store.sessions_dir / "s1.jsonl").read_bytes().split(b"\n")[:-1]
    everything = [orjson.loads(x) for x in lines]
    assert len(everything) == 400
    for _ in range(120):
        a = rnd.randrange(0, 420)
        b = a + rnd.randrange(0, 60)
        assert ss.records("s1", a, b) == everything[a:b + 1], (a, b)
    assert ss.events("s1", 300) == [r for r in everything[300:] if r["type"] == "event"]
    assert ss.events("s1", 0, {"clear"}) == []


def test_writer_after_a_record_larger_than_the_tail_window(config_dir, tmp_path):
    """Regression: the writer found the last seq in the last 64 KiB only; a last record
    longer than that made it restart at seq 1, and with a torn tail after it, cut the
    whole transcript to zero bytes."""
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(tmp_path / "store")
    ss = SessionStore(store)
    with ss.create("big") as w:
        for i in range(50):
            w.append_message("user", f"m{i}")
        big = w.append_message("tool", "x" * 100_000, tool_call_id="c", name="read_file", epoch=0)
    path = store.sessions_dir / "big.jsonl"
    with ss.writer("big") as w:
        assert w.next_seq == big + 1
        w.append_message("user", "after")
    assert [r["seq"] for r in ss.records("big", big, big + 1)] == [big, big + 1]
    assert ss.info("big").records == big + 2

    # the same with a torn tail after the big record: only the torn tail is cut
    with open(path, "ab") as fh:
        fh.write(b'{"seq":' + str(big + 2).encode() + b',"ty')
    size_before = path.stat().st_size
    with ss.writer("big") as w:
        assert w.next_seq == big + 2
    assert path.stat().st_size == size_before - len(b'{"seq":' + str(big + 2).encode() + b',"ty')
    assert ss.records("big", 0, 0)[0]["type"] == "session"


def test_fast_seq_reads_only_json_valid_seq_prefixes():
    """One fast seq reader serves the session search and the audit scan.  The
    audit's old copy read ``{"seq":007,`` as 7 (not JSON: the line is corrupt)
    and missed ``{"seq":7}``; the kept rule is the JSON one."""
    from lecode_memctl.core.sessions import fast_seq

    assert fast_seq(b'{"seq":7,"type":"message"}') == 7
    assert fast_seq(b'{"seq":0,"type":"message"}') == 0
    assert fast_seq(b'{"seq":7}') == 7
    assert fast_seq(b'{"seq":007,"type":"message"}') is None
    assert fast_seq(b'{"seq":-1,"type":"message"}') is None
    assert fast_seq(b'{"type":"message","seq":7}') is None
    assert fast_seq(b'{"seq":"7","type":"message"}') is None


def test_listing_and_info_after_close_are_usage_errors(ss):
    """A closed SessionStore lists nothing: list_sessions, info,
    session_ids and header_projects raise UsageError as every other use
    does, never an "unreadable" entry per transcript or an empty count."""
    ss.create("s1").close()
    ss.close()
    for use in (ss.list_sessions, lambda: ss.info("s1"), ss.session_ids, ss.header_projects):
        with pytest.raises(UsageError, match="closed"):
            use()


@pytest.mark.parametrize("what, error, writing", [("sessions", NotFound, NotFound),
                                                  ("store", StoreCorrupt, StoreCorrupt)])
def test_info_and_writer_where_sessions_is_no_directory(tmp_path, what, error, writing):
    """sessions/ a regular file (no session in it: the writer says so, as
    the reads do, before it would make a lock there), or the store itself
    (sessions/ unreadable): info and writer raise memctl errors, as the
    other reads do, never a raw NotADirectoryError."""
    path = tmp_path / "memory" / SLUG
    if what == "sessions":
        path.mkdir(parents=True)
        (path / "sessions").write_text("x")
    else:
        path.parent.mkdir(parents=True)
        path.write_text("x")
    ss = SessionStore(store_at(path))
    with pytest.raises(error):
        ss.records("s1", 0, 1)
    with pytest.raises(error):
        ss.info("s1")
    with pytest.raises(writing):
        ss.writer("s1")


def test_an_interrupt_as_a_transcript_opens_closes_its_descriptor_once(ss, monkeypatch):
    """A Ctrl-C landing as the opened transcript is handed over (in _File,
    or just after it) closes the descriptor once: it was closed twice, by
    the error path and by the file object the interrupt dropped, and the
    second close hit whatever the process had opened meanwhile under the
    same number (another thread's file, SQLite's database), or replaced the
    KeyboardInterrupt with a raw OSError (EBADF)."""
    import gc

    from lecode_memctl.core import sessions as sessions_mod

    fill(ss)
    real = sessions_mod._File

    class Interrupted(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            raise KeyboardInterrupt

    monkeypatch.setattr(sessions_mod, "_File", Interrupted)
    caught = None
    try:
        ss.records("s1", 0, 1)
    except KeyboardInterrupt as exc:
        caught = exc
    assert caught is not None
    # a file opened now takes the lowest free number: the transcript's if it was closed
    other = os.open(os.devnull, os.O_RDONLY)
    try:
        del caught
        gc.collect()                    # (the dropped file object, if still open, closes now)
        os.fstat(other)                 # EBADF: closed behind its owner's back
    finally:
        os.close(other)


def test_an_interrupt_anywhere_in_open_never_closes_a_descriptor_twice(ss):
    """A KeyboardInterrupt raised at each bytecode of SessionStore._open and
    _File.__init__ in turn (where a signal handler may run): the call
    raises KeyboardInterrupt (never an OSError in its place), and no
    descriptor is closed twice, which would close whatever the process had
    opened meanwhile under the same number."""
    import gc

    from lecode_memctl.core import sessions as sessions_mod

    fill(ss)
    codes = {sessions_mod.SessionStore._open.__code__, sessions_mod._File.__init__.__code__}
    gc.collect()
    # (the objects made so far out of the collector's sight: each
    # gc.collect() below walks what one call made, not the whole session's)
    gc.freeze()
    try:
        _interrupt_each_step(ss, codes)
    finally:
        gc.unfreeze()


def _interrupt_each_step(ss, codes) -> None:
    import gc

    k = 0
    while True:
        seen = 0

        def trace(frame, event, arg, k=k):
            nonlocal seen
            if frame.f_code not in codes:
                return None
            frame.f_trace_opcodes = True
            if event == "opcode":
                seen += 1
                if seen == k:
                    raise KeyboardInterrupt
            return trace

        sys.settrace(trace)
        try:
            ss.records("s1", 0, 1)
            done = True
        except KeyboardInterrupt:
            done = False
        finally:
            sys.settrace(None)
        other = os.open(os.devnull, os.O_RDONLY)
        try:
            gc.collect()                # (a dropped file object closes its descriptor now)
            os.fstat(other)             # EBADF: closed behind its owner's back
        finally:
            os.close(other)
        if done and k > 0:
            break
        k += 1
    assert k > 20


@pytest.mark.parametrize("where", ["after_write", "mid_write"])
def test_an_interrupted_append_leaves_the_transcript_whole(ss, monkeypatch, where):
    """A Ctrl-C during an append (after its line was written, before the
    writer counted it; or between two pieces of the line) takes the line
    back: the next append neither gives its seq a second time nor runs
    its line into a torn one."""
    from lecode_memctl.core import sessions as sessions_mod

    w = ss.create("s1")
    w.append_message("user", "one")
    if where == "after_write":
        def fsync(fd):
            raise KeyboardInterrupt
        monkeypatch.setattr(sessions_mod.os, "fsync", fsync)
    else:
        real = sessions_mod.write_all

        def write_all(fd, data):
            real(fd, data[: len(data) // 2])
            raise KeyboardInterrupt
        monkeypatch.setattr(sessions_mod, "write_all", write_all)
    with pytest.raises(KeyboardInterrupt):
        w.append_message("user", "two")
    monkeypatch.undo()
    assert w.append_message("user", "three") == 2
    w.close()
    info = ss.info("s1")
    assert (info.state, info.records) == ("ok", 3)
    assert [r["content"] for r in ss.records("s1", 1, 2)] == ["one", "three"]
