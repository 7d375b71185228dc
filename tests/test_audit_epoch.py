"""validate notices lost forget exclusions: transcripts whose generated messages carry an
exclusion epoch above the facts database's generation (facts.sqlite3 deleted, emptied or
replaced by an older copy)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.audit import validate_store

from .builders import copy_demo
from .conftest import run_cli, tree_hash


@pytest.fixture
def demo(demo_template, tmp_path):
    """A private copy of conftest's demo: its store directory."""
    return copy_demo(demo_template, tmp_path / "demo")


def codes(findings):
    return [(f.code, f.session_id) for f in findings if f.code == "session.epoch_ahead"]


def test_intact_demo_has_no_epoch_finding(demo):
    from lecode_memctl.core.layout import store_at

    findings, _ = validate_store(store_at(demo))
    assert codes(findings) == []


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
@pytest.mark.parametrize("deep", [False, True])
def test_lost_exclusions_are_an_error(demo, damage, deep):
    from lecode_memctl.core.layout import store_at

    db = demo / "facts.sqlite3"
    if damage == "deleted":
        db.unlink()
    else:
        db.write_bytes(b"")
    findings, summary = validate_store(store_at(demo), deep=deep)
    found = [f for f in findings if f.code == "session.epoch_ahead"]
    # demo-alpha and demo-beta hold messages generated after the forget (epoch 1)
    assert sorted(f.session_id for f in found) == ["demo-alpha", "demo-beta"]
    assert all(f.severity == "error" and f.seq is not None for f in found)
    assert "generation 0" in found[0].message


def test_epoch_finding_through_the_cli_changes_nothing(demo):
    (demo / "facts.sqlite3").unlink()
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "validate", "--format", "jsonl")
    assert r.exit_code == 1
    assert r.stdout.count('"code":"session.epoch_ahead"') == 2
    assert tree_hash(demo) == before


def test_a_forget_during_the_audit_is_not_a_false_alarm(demo, monkeypatch):
    """The database's generation is read before the transcripts: a forget that lands
    in between, followed by an agent message stamped with the new epoch, must not be
    reported (found by the mixed-load test).  Generations only rise, so the audit
    re-reads the generation before it reports a transcript as ahead."""
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(demo)
    audit = Audit(store, parallel=False)
    original = audit._check_sessions

    def forget_then_scan():
        fs = FactStore(store.facts_db)
        try:
            victim = next(f.fact_id for f in fs.list_facts() if fs.generation() >= 0)
            assert fs.forget(victim)
            epoch = fs.generation()
        finally:
            fs.close()
        with SessionStore(store).writer("demo-alpha") as w:
            w.append_message("assistant", "after the forget", epoch=epoch)
        yield from original()

    monkeypatch.setattr(audit, "_check_sessions", forget_then_scan)
    findings = list(audit.run())
    assert [f for f in findings if f and f.code == "session.epoch_ahead"] == []


def _tail_epoch_reference(data: bytes, tail: int):
    """What _tail_epoch answers, from every line: the newest epoch
    (the first line that carries it) among the generated messages of the
    complete lines that start in the last ``tail`` bytes; when they hold
    none, of those in the last 2 * ``tail``, 4 * ``tail``, ... bytes (then
    EPOCH_PIECE more at each step), up to the whole file (EPOCH_BACK is far
    off here); each line parsed whole, whatever its bytes spell (an escaped
    key too); a window whose generated messages carry no epoch
    ends the search too (None).  An epoch is a number, an integer or not
    (before 2026-12-07 integers only).  (Before 2026-12-07 the last complete line
    alone when none started in the last ``tail`` bytes, and nothing further
    back.)"""
    import orjson

    from lecode_memctl.core.audit import transcripts as T
    from lecode_memctl.core.sessions import epoch_number, is_generated

    starts, pos = [], 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            break
        starts.append((pos, end))
        pos = end + 1
    reach = min(len(data), tail)
    while True:
        lines = [(a, b) for a, b in starts if a >= len(data) - reach]
        best = None
        generated = False
        for a, b in lines:
            try:
                rec = orjson.loads(data[a:b])
            except orjson.JSONDecodeError:
                continue
            if not (isinstance(rec, dict) and rec.get("type") == "message" and is_generated(rec)):
                continue
            generated = True
            # (an epoch is a number, an integer or not, since 2026-12-07)
            epoch, seq = epoch_number(rec.get("epoch")), rec.get("seq")
            if epoch is not None and type(seq) is int and (best is None or epoch > best[0]):
                best = (epoch, seq)
        # (a generated message without an epoch stops the search too,
        # since 2026-12-07: a legacy transcript is not read back 16 MiB)
        if best is not None or generated or reach >= len(data):
            return best
        reach = min(len(data), reach + min(reach, T.EPOCH_PIECE))


_EPOCH_LINES = [
    b'{"seq":%d,"type":"message","role":"assistant","content":"a","epoch":%d}',
    b'{"seq":%d,"type":"message","role":"tool","epoch" : %d,"content":"b"}',
    b'{"seq":%d,"type":"message","role":"user","epoch":%d}',           # not generated
    b'{"seq":%d,"type":"message","role":"user","synthetic":true,"epoch":%d}',
    b'{"seq":%d,"type":"event","event":"undo","epoch":%d}',            # not a message
    b'{"seq":%d,"type":"message","role":"assistant","epoch":1,"epoch":%d}',   # duplicate key
    b'{"seq":%d,"type":"message","role":"assistant","\\u0065poch":%d}',      # escaped key
    b'{"seq":%d,"type":"message","role":"assistant","\\u0065poch":%d,"x":{"epoch":-9}}',
    b'{"seq":%d,"type":"message","role":"assistant","x":{"epoch":%d}}',      # nested
    b'{"seq":%d,"type":"message","role":"assistant","epoch":"%d"}',          # a string
    b'{"seq":%d,"type":"message","role":"assistant","epoch":%d.5}',          # a float
    b'{"seq":%d,"type":"message","role":"assistant","epoch":%d',             # corrupt
    b'{"seq":%d,"type":"message","role":"assistant","epoch":1%d000000000000000000000}',
]


@pytest.mark.heavy
def test_the_epoch_scan_stops_early_with_the_same_answer(tmp_path):
    """_tail_epoch stops at the first line whose epoch reaches the bound read
    from the window's bytes: whatever the lines (epochs up, down, negative,
    escaped or nested keys, duplicates, strings, floats, corrupt lines, long
    lines, a window that starts mid-line, at a line start, or inside the
    last complete line), its answer is the full parse's of the lines that
    start in the window (of the last complete line when none does)."""
    import os

    from hypothesis import given, settings, strategies as st

    from lecode_memctl.core.audit import transcripts as T

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, len(_EPOCH_LINES) - 1), st.integers(-3, 5),
                              st.sampled_from([0, 0, 0, 150])),
                    max_size=12),
           st.integers(0, 300), st.booleans(), st.booleans())
    def check(picks, cut, torn, in_memory):
        # (a long line: padding in a string member before the epoch)
        lines = [(_EPOCH_LINES[k] % (i + 1, e)).replace(b'"role"', b'"pad":"%s","role"' % (b"p" * pad), 1)
                 for i, (k, e, pad) in enumerate(picks)]
        data = b"\n".join(lines) + (b"\n" if lines else b"") + (b'{"seq":99,"epoch":9' if torn else b"")
        for n in {len(data), max(0, len(data) - cut), cut % 97 + 1}:   # (small: a window in a line)
            p = tmp_path / "t.jsonl"
            p.write_bytes(data)
            fd = os.open(p, os.O_RDONLY)
            try:
                old = T.EPOCH_TAIL
                T.EPOCH_TAIL = n if n else 1
                try:
                    got = T._tail_epoch(fd, len(data), T._Scan(), data if in_memory else None)
                finally:
                    T.EPOCH_TAIL = old
            finally:
                os.close(fd)
            want = _tail_epoch_reference(data, n if n else 1)
            assert got == want, (data, n)

    check()
