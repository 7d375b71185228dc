"""The default audit's in-memory fast path (``audit.transcripts._fast_spans``)
against its line loop, on transcripts where one record line sits out of
place (moved, or written twice) while the count of lines still matches the
last seq: the line loop then takes each span's one-reference read
(``sessions.SpanReads``), and so must the fast path (docs/FORMAT.md,
"Records whose seqs repeat or go back").

The transcripts are from a few hundred bytes (the search scans lines from
the start) to about 100 KB (it bisects first), so a misplaced record may or
may not be on the search's path."""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.audit import Audit, transcripts
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import iter_fact_rows
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .test_engine import build

FID = "0000000000000001"


def _fact_view(path: Path, fast: bool) -> tuple[list[tuple], dict]:
    """The default audit's fact findings and kept statuses, with the fast
    path allowed or not."""
    saved = transcripts.FAST_LIMIT
    transcripts.FAST_LIMIT = saved if fast else -1
    try:
        a = Audit(store_at(path), parallel=False, now=1.9e9)
        found = sorted((f.code, f.fact_id, f.reason) for f in a.run()
                       if f.code.startswith("fact."))
        return found, dict(a._statuses)
    finally:
        transcripts.FAST_LIMIT = saved


def _reorder(path: Path, order: list[int]) -> None:
    f = store_at(path).sessions_dir / "s0.jsonl"
    lines = f.read_bytes().split(b"\n")[:-1]
    f.write_bytes(b"".join(lines[i] + b"\n" for i in order))


def _records(n: int, pad: int, undo_at: int | None = None,
             target: tuple[int, int] | None = None) -> list[dict]:
    recs: list[dict] = [{"seq": s, "type": "message", "role": "user",
                         "content": f"m{s} " + "x" * pad} for s in range(1, n + 1)]
    if undo_at is not None and target is not None:
        recs[undo_at - 1] = {"seq": undo_at, "type": "event", "event": "undo",
                             "target": list(target)}
    return recs


@pytest.mark.parametrize("undo", [False, True])
def test_a_record_written_early_is_judged_as_the_one_reference_read_judges_it(
        tmp_path: Path, undo: bool) -> None:
    # lines 0, 1, 6, 2, 3, 4, 5, 7: as many lines as the last seq says, and
    # the span cited, 3, between regular neighbours
    recs = _records(7, 0, 6 if undo else None, (3, 3))
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(FID, [("s0", [3], "right")])], "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    _reorder(path, [0, 1, 6, 2, 3, 4, 5, 7])
    with FactStore.open_readonly(store_at(path).facts_db) as fs:
        ss = SessionStore(store_at(path), exclusions=fs)
        ref = fs.revisions(FID)[0].source
        assert ref is not None
        one = ss.validate_source(ref, "durable")
        rows = list(iter_fact_rows(fs, ss))
    assert (one.status, one.reason) == ("stale", "records_corrupt")
    assert rows[0]["status"] == "stale"
    fast, loop = _fact_view(path, True), _fact_view(path, False)
    assert fast == loop
    assert [(c, r) for c, _f, r in fast[0]] == [("fact.stale", "records_corrupt")]


# (strategies made once, those with bounds cached by their bounds:
# hypothesis builds a strategy object at each st.integers(...) call; the
# same strategies drawn in the same order, the same cases for a seed)
_PAD = st.sampled_from([0, 40, 200])


@functools.cache
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@st.composite
def _moved(draw: st.DrawFn) -> dict:
    n = draw(_ints(8, 400))
    pad = draw(_PAD)
    undo_at = draw(_ints(3, n))
    first = draw(_ints(1, undo_at - 1))
    recs = _records(n, pad, undo_at if draw(st.booleans()) else None,
                    (first, draw(_ints(first, undo_at - 1))))
    facts = []
    for i in range(draw(_ints(1, 8))):
        lo = draw(_ints(1, n))
        hi = draw(_ints(lo, min(n, lo + 2)))
        facts.append(("%016x" % (i + 1), [("s0", sorted({lo, hi}), "right")]))
    # one line moved from i to j, or one written again in place of another
    i = draw(_ints(1, n))
    j = draw(_ints(1, n))
    order = list(range(n + 1))
    if draw(st.booleans()):
        order.insert(j, order.pop(i))
    else:
        order[j] = i
    return {"spec": {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
                     "facts": facts, "excluded": {}, "generation": 0},
            "order": order}


@pytest.mark.heavy
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_moved())
def test_fast_path_and_line_loop_alike_with_a_record_out_of_place(case: dict) -> None:
    root = Path(tempfile.mkdtemp(prefix="audit-fast-"))
    try:
        path = build(root, case["spec"])
        _reorder(path, case["order"])
        assert _fact_view(path, True) == _fact_view(path, False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# (as for _moved: strategies made once, the same cases for a seed)
_BYTES_PAD = st.sampled_from([0, 30, 300])
_AHEAD = st.sampled_from([0, 0, 1, 5])


@functools.cache
def _bad_line(s: int) -> st.SearchStrategy[bytes]:
    return st.sampled_from([b'{"type":"message","seq":%d}' % s, b"{not json",
                            b'{"seq":%d,"type' % s])


@st.composite
def _transcript_bytes(draw: st.DrawFn) -> bytes:
    """A transcript's bytes: records 0..n with a few out of place, now and
    then a line that does not begin {"seq":N, (another member first, not
    JSON), padding that makes the search bisect, and a torn tail."""
    n = draw(_ints(1, 300))
    pad = draw(_BYTES_PAD)
    seqs = list(range(n + 1))
    for _ in range(draw(_ints(0, 3))):
        i, j = draw(_ints(0, n)), draw(_ints(0, n))
        if draw(st.booleans()):
            seqs.insert(j, seqs.pop(i))
        else:
            seqs[j] = seqs[i]
    lines = [b'{"seq":%d,"type":"message","content":"%s"}' % (s, b"x" * pad) for s in seqs]
    for _ in range(draw(_ints(0, 4))):
        at = draw(_ints(0, len(lines) - 1))
        s = seqs[at] + draw(_AHEAD)
        lines[at] = draw(_bad_line(s))
    data = b"".join(ln + b"\n" for ln in lines)
    return data + (b'{"seq":%d,"ty' % (n + 1) if draw(st.booleans()) else b"")


def _line_starts(data: bytes) -> list[int]:
    out: list[int] = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return out
        out.append(pos)
        pos = nl + 1


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=_transcript_bytes(), picks=st.lists(st.integers(0, 400), min_size=1, max_size=8))
def test_search_lands_where_the_one_reference_search_lands(data: bytes, picks: list[int]) -> None:
    """Where ``search_lands`` finds a line that is the record it searched
    for, the file's own search lands there."""
    import os

    from lecode_memctl.core.sessions import _File, load_record, search_lands

    starts = _line_starts(data)
    fd, name = tempfile.mkstemp(prefix="lands-")
    try:
        os.write(fd, data)
        probes: dict = {}
        with _File(fd, "s0", name) as f:
            for pick in picks:
                at = starts[pick % len(starts)]
                try:
                    rec = load_record(data[at:data.find(b"\n", at)])
                except Exception:  # noqa: BLE001 - not a record: no claim
                    continue
                if type(rec) is not dict or type(rec.get("seq")) is not int or rec["seq"] < 0:
                    continue
                t = rec["seq"]
                got = search_lands(data, t, probes)
                if got is None:
                    continue
                try:
                    there = load_record(data[got:data.find(b"\n", got)])
                except Exception:  # noqa: BLE001 - not a record: no claim
                    continue
                if type(there) is dict and type(there.get("seq")) is int and there["seq"] == t:
                    assert f.seek_span(t)[0] == got, (t, got)
    finally:
        os.unlink(name)


def test_search_lands_in_a_regular_transcript() -> None:
    from lecode_memctl.core.sessions import search_lands

    lines = [b'{"seq":%d,"type":"message","content":"%s"}\n' % (s, b"y" * (s % 97)) for s in range(3000)]
    data = b"".join(lines)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    probes: dict = {}
    for t in (0, 1, 2, 1500, 2998, 2999):
        assert search_lands(data, t, probes) == offsets[t]
    assert search_lands(data, 3000) is None     # past the end: the search reads on
    # a line the first probe meets that does not begin {"seq":N, (its
    # members in another order, its seq out of place): the search parses
    # it, so no answer here
    mid = len(data) // 2
    k = next(i for i, off in enumerate(offsets) if off >= mid)
    head = b'{"type":"message","seq":99999,"p":"'
    lines[k] = head + b"z" * (len(lines[k]) - len(head) - 3) + b'"}\n'   # (the same length)
    data = b"".join(lines)
    for t in (1, 1500, 2998):
        assert search_lands(data, t) is None


def test_search_lands_probes_where_the_file_search_probes(monkeypatch) -> None:
    """The binary search in memory probes the offsets the file's own search
    probes, in the same order (so that a misplaced line misleads both
    alike)."""
    import os

    from lecode_memctl.core import sessions

    lines = [b'{"seq":%d,"type":"message","content":"%s"}\n' % (s, b"q" * (s * 7 % 131))
             for s in range(2500)]
    data = b"".join(lines)
    fd, name = tempfile.mkstemp(prefix="probes-")
    try:
        os.write(fd, data)
        seen: list[int] = []
        real = sessions._File.probe_seq

        def probe_seq(self, pos):
            seen.append(pos)
            return real(self, pos)

        monkeypatch.setattr(sessions._File, "probe_seq", probe_seq)
        with sessions._File(fd, "s0", name) as f:
            for t in (1, 700, 1234, 2499):
                seen.clear()
                probes: dict = {}
                got = sessions.search_lands(data, t, probes)
                assert got == f.seek_span(t)[0]
                assert list(probes) == seen[:len(probes)] and len(probes) >= 5, (t, probes, seen)
    finally:
        os.unlink(name)


@pytest.mark.parametrize("content", [b"", b'{"seq":0,"type":"session","format":1'],
                         ids=["empty", "torn header"])
@pytest.mark.parametrize("deep", [False, True])
def test_a_transcript_without_a_complete_first_line_is_refused_as_the_readers_refuse_it(
        tmp_path: Path, content: bytes, deep: bool) -> None:
    """An empty transcript, or one whose header is still being written: the
    readers refuse it (refused_header), so its facts are hidden; validate
    called them missing (position_missing) and gave no header finding."""
    import os

    recs = _records(5, 0)
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(FID, [("s0", [2, 3], "right")])], "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    f = store_at(path).sessions_dir / "s0.jsonl"
    f.write_bytes(content)
    for when, severity in ((1.9e9 - 10, "warning"), (1.9e9 - 3600, "error")):
        os.utime(f, (when, when))
        with FactStore.open_readonly(store_at(path).facts_db) as fs:
            rows = list(iter_fact_rows(fs, SessionStore(store_at(path), exclusions=fs)))
        assert [(r["status"], r["reason"]) for r in rows] == [("hidden", "refused_header")]
        a = Audit(store_at(path), deep=deep, parallel=False, now=1.9e9)
        found = list(a.run())
        facts = [(x.code, x.reason) for x in found if x.code.startswith("fact.")]
        assert facts == [("fact.hidden", "refused_header")], found
        header = [x for x in found if x.code == "session.missing_header"]
        assert len(header) == 1 and header[0].severity == severity, found


@pytest.mark.parametrize("seq", [b"0.0", b"false", b"-0.0", b"0e0"])
@pytest.mark.parametrize("deep", [False, True])
def test_a_header_whose_seq_is_no_integer_is_refused_by_the_audit_too(
        tmp_path: Path, seq: bytes, deep: bool) -> None:
    """A header whose seq is 0.0 or false: every reader refuses it (no
    non-negative integer seq), and so hides the facts; the audit took it
    for a header (0.0 == False == 0 in Python) and counted them valid."""
    recs = _records(5, 0)
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(FID, [("s0", [2], "right")])], "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    f = store_at(path).sessions_dir / "s0.jsonl"
    f.write_bytes(f.read_bytes().replace(b'{"seq":0,', b'{"seq":%s,' % seq, 1))
    with FactStore.open_readonly(store_at(path).facts_db) as fs:
        ss = SessionStore(store_at(path), exclusions=fs)
        rows = list(iter_fact_rows(fs, ss))
        ref = fs.revisions(FID)[0].source
        assert ref is not None
        one = ss.validate_source(ref, "durable")
    assert (one.status, one.reason) == ("hidden", "refused_header")
    assert [(r["status"], r["reason"]) for r in rows] == [("hidden", "refused_header")]
    found = list(Audit(store_at(path), deep=deep, parallel=False, now=1.9e9).run())
    assert [(x.code, x.reason) for x in found if x.code.startswith("fact.")] == [
        ("fact.hidden", "refused_header")], found
    assert [x.line for x in found if x.code == "session.missing_header"] == [1], found


def test_an_empty_transcript_no_fact_cites_has_a_header_finding(tmp_path: Path) -> None:
    """The audit of a transcript that no fact cites reads its header and tail
    only: there too, no complete first line is a finding."""
    spec = {"sessions": {"s0": _records(3, 0), "s1": _records(3, 0)}, "damage": {"s0": None, "s1": None},
            "damage_at": {"s0": 1, "s1": 1}, "facts": [(FID, [("s0", [2], "right")])],
            "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    (store_at(path).sessions_dir / "s1.jsonl").write_bytes(b"")
    found = list(Audit(store_at(path), parallel=False, now=1.9e9).run())
    assert [(x.code, x.session_id) for x in found if x.code.startswith("session.")] == [
        ("session.missing_header", "s1")], found


@pytest.mark.parametrize("deep", [False, True])
def test_a_header_holding_a_number_beyond_a_double_is_a_header(tmp_path: Path, deep: bool) -> None:
    """The audit of a transcript no fact cites parsed its header with
    orjson alone, which refuses 1e400 (the readers' loader reads it):
    session.missing_header where every reader accepts the header."""
    spec = {"sessions": {"s0": _records(3, 0), "s1": _records(3, 0)}, "damage": {"s0": None, "s1": None},
            "damage_at": {"s0": 1, "s1": 1}, "facts": [(FID, [("s0", [2], "right")])],
            "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    f = store_at(path).sessions_dir / "s1.jsonl"
    f.write_bytes(f.read_bytes().replace(b'"created":"2026-01-01T00:00:00Z"', b'"created":1e400', 1))
    found = list(Audit(store_at(path), deep=deep, parallel=False, now=1.9e9).run())
    assert not [x for x in found if x.code.startswith("session.")], found


@pytest.mark.parametrize("deep", [False, True])
def test_validate_checks_every_reference_of_a_session_cited_in_several_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deep: bool) -> None:
    """The references into one session come in groups of at most GROUP_REFS
    (2,048); the audit's job for the session kept only the last group, so
    validate never checked the others: on a store with more references into
    one transcript, a stale fact in an earlier group was counted valid."""
    from lecode_memctl.core import facts as facts_mod

    recs = _records(10, 0)
    spec = {"sessions": {"s0": recs, "s1": _records(3, 0)}, "damage": {"s0": None, "s1": None},
            "damage_at": {"s0": 1, "s1": 1},
            "facts": [(f"{i:016x}", [("s0", [i], "wrong" if i in (1, 7) else "right")])
                      for i in range(1, 9)] + [(f"{9:016x}", [("s1", [2], "wrong")])],
            "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    want = [("fact.stale", f"{i:016x}") for i in (1, 7, 9)]
    for size in (2048, 3, 1):
        monkeypatch.setattr(facts_mod, "GROUP_REFS", size)
        a = Audit(store_at(path), deep=deep, parallel=False, now=1.9e9)
        found = sorted((f.code, f.fact_id) for f in a.run() if f.code.startswith("fact."))
        assert found == want, (size, found)
        assert a.summary.facts["stale"] == 3 and a.summary.facts["valid"] == 6, size


def test_learning_status_finds_an_event_whose_name_is_escaped(tmp_path: Path) -> None:
    """The byte test that rules a session out before its events are parsed
    (the bytes "learning") missed a learning event written with a JSON
    escape ("\\u006cearning"), which the parse reads as one."""
    from lecode_memctl.core.factview import learning_status

    recs = [{"seq": 1, "type": "message", "role": "user", "content": "m1"},
            {"seq": 2, "type": "event", "event": "learning", "status": "no_candidates",
             "reason_counts": {}, "facts": [], "proposals": []}]
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(FID, [("s0", [1], "right")])], "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    f = store_at(path).sessions_dir / "s0.jsonl"
    f.write_bytes(f.read_bytes().replace(b'"event":"learning"', b'"event":"\\u006cearning"'))
    with FactStore.open_readonly(store_at(path).facts_db) as fs:
        ss = SessionStore(store_at(path), exclusions=fs)
        named = learning_status(ss, fs, "s0")
        assert named is not None and named["status"] == "no_candidates"
        assert learning_status(ss, fs, None) == named


@pytest.mark.parametrize("memmem", [True, False])
@pytest.mark.parametrize("spelt", [b'"learning"', b'"\\u006cearning"', b'"lea\\u0072ning"', None])
@pytest.mark.parametrize("at", [0, (1 << 20) - 5, (1 << 20) + 3])
def test_the_byte_test_of_a_learning_event_finds_it_anywhere(tmp_path: Path, monkeypatch,
                                                             memmem, spelt, at) -> None:
    """The byte test that rules a session out before its events are parsed
    (factview._mentions, 1 MiB at a time, by memmem where there is one)
    finds the name however it is spelt, at the start of the file, across
    the end of the first MiB and after it; and nothing in a file that
    only has other escapes (\\u001b)."""
    from lecode_memctl.core.factview import _LEARNING_BYTES, _mentions

    from .conftest import memmem_or_not

    memmem_or_not(monkeypatch, memmem)
    filler = b'{"seq":1,"content":"\\u001b[0m x"}\n' * ((3 << 20) // 34)
    data = filler[:at] + (spelt or b"") + filler[at:]
    (tmp_path / "s.jsonl").write_bytes(data)

    class _Sessions:
        @staticmethod
        def path(sid: str) -> Path:
            return tmp_path / f"{sid}.jsonl"

    assert _mentions(_Sessions(), "s", _LEARNING_BYTES) is (spelt is not None)  # type: ignore[arg-type]


@pytest.mark.parametrize("cited", [True, False])
def test_an_event_whose_name_is_no_string_is_no_crash(tmp_path: Path, cited: bool) -> None:
    """An event record whose "event" is a list: the event scans' set of
    kinds could not hold it (TypeError: unhashable, exit 70 from facts,
    recall and read, where validate said OK).  It is no event of any kind
    asked for."""
    from .conftest import run_cli

    recs = _records(4, 0)
    recs[2] = {"seq": 3, "type": "event", "event": ["x"], "note": "\x1b[0m"}
    spec = {"sessions": {"s0": recs, "s1": _records(2, 0)}, "damage": {"s0": None, "s1": None},
            "damage_at": {"s0": 1, "s1": 1},
            "facts": [(FID, [("s0" if cited else "s1", [2], "right")])], "excluded": {},
            "generation": 0}
    path = build(tmp_path, spec)
    for argv in (["facts"], ["facts", "--json"], ["recall", FID, "--json"],
                 ["read", "s0", "1", "4"], ["validate", "-q"]):
        r = run_cli("--store", str(path), *argv)
        assert r.exit_code == 0, (argv, r.exit_code, r.stderr)


def _dangling_store(tmp_path: Path) -> Path:
    """Facts 1..4: 2 points at revision 3 where only 1 and 2 have rows, 3
    has no revision row at all; 1 and 4 are sound."""
    recs = _records(6, 0)
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(f"{i:016x}", [("s0", [i], "right")] * (2 if i == 2 else 1))
                      for i in (1, 2, 3, 4)],
            "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    with FactStore(store_at(path).facts_db) as fs:
        assert fs._conn is not None
        fs._conn.execute("UPDATE facts SET revision = 3 WHERE fact_id = ?", (f"{2:016x}",))
        fs._conn.execute("DELETE FROM source_refs WHERE fact_id = ?", (f"{3:016x}",))
        fs._conn.execute("DELETE FROM revisions WHERE fact_id = ?", (f"{3:016x}",))
    return path


def test_a_fact_whose_current_revision_has_no_row_is_listed_hidden(tmp_path: Path) -> None:
    """A fact whose current revision has no row (or no revision at all) made
    the whole listing fail where it reached it (exit 5), and context with
    it, while validate counted it valid.  It is a malformed row: listed,
    recalled and counted hidden (invalid_ref), the other facts as usual."""
    import orjson

    from .conftest import run_cli

    path = _dangling_store(tmp_path)
    want = {f"{1:016x}": ("valid", None), f"{2:016x}": ("hidden", "invalid_ref"),
            f"{3:016x}": ("hidden", "invalid_ref"), f"{4:016x}": ("valid", None)}
    for argv in (["facts", "--format", "jsonl"], ["facts", "--format", "jsonl", "--since", "1d"],
                 ["facts", "--format", "jsonl", "--status", "hidden"]):
        r = run_cli("--store", str(path), *argv)
        assert r.exit_code == 0, (argv, r.stderr)
        rows = [orjson.loads(x) for x in r.stdout.splitlines()]
        got = {x["fact_id"]: (x["status"], x["reason"]) for x in rows}
        if "--since" in argv:
            continue      # (the build's times are in 2026-01-01: none is in the window)
        assert got == {k: v for k, v in want.items() if "hidden" not in argv or v[0] == "hidden"}
        dangling = next((x for x in rows if x["fact_id"] == f"{2:016x}"), None)
        assert dangling is not None and dangling["revision"] == 3 and dangling["about_revision"] == 3
        assert dangling["text"] == "" and dangling["source_ref"] is None
    for fid, (status, reason) in want.items():
        r = run_cli("--store", str(path), "recall", fid, "--json")
        doc = orjson.loads(r.stdout)
        assert (doc["status"], doc["reason"]) == (status, reason), (fid, r.stderr)
    r = run_cli("--store", str(path), "context", "--json")
    assert r.exit_code == 0, r.stderr
    r = run_cli("--store", str(path), "validate", "--format", "jsonl")
    lines = [orjson.loads(x) for x in r.stdout.splitlines()]
    summary = next(x for x in lines if x["type"] == "summary")
    assert summary["facts"]["valid"] == 2 and summary["facts"]["hidden"] == 2, summary
    # the database checks name the damage, once (no second finding per fact)
    codes = sorted((x["code"], x.get("fact_id")) for x in lines if x["type"] == "finding")
    assert ("db.dangling_ref", f"{2:016x}") in codes and ("db.dangling_ref", f"{3:016x}") in codes
    assert not [c for c in codes if c[0].startswith("fact.")], codes


@contextlib.contextmanager
def _facts_revision_untyped(path: Path) -> Iterator[sqlite3.Connection]:
    """The store's database, its facts table rebuilt with a revision column
    of no type (no affinity turns 2.0 or '2' into 2), for the caller's
    damage."""
    with FactStore(store_at(path).facts_db) as fs:
        db = fs._conn
        assert db is not None
        db.execute("PRAGMA foreign_keys=0")
        db.execute("CREATE TABLE f2 (fact_id TEXT PRIMARY KEY, revision, "
                   "created TEXT NOT NULL, updated TEXT NOT NULL)")
        db.execute("INSERT INTO f2 SELECT * FROM facts")
        db.execute("DROP TABLE facts")
        db.execute("ALTER TABLE f2 RENAME TO facts")
        yield db


@pytest.mark.heavy
@pytest.mark.parametrize("stored", ["x'01'", "NULL", "9e999", "'1x'", "1.5", "2.0", "'2'"],
                         ids=["blob", "null", "inf", "text", "real", "real_of_a_row", "text_of_a_row"])
def test_a_current_revision_of_another_type_is_a_hidden_row(tmp_path: Path, stored: str) -> None:
    """facts.revision holding no integer (a BLOB, NULL where the table lost
    its NOT NULL, +Inf, text, a real; 2.0 and '2' equal to the number of a
    row, where the column lost its INTEGER affinity): the fact
    is hidden (invalid_ref) in every command, its revision and the one its
    status is about shown as null, never the stored bytes (exit 70) or a
    NULL taken for 'not known' (valid); export then verify agree."""
    import orjson

    from .conftest import run_cli

    path = _dangling_store(tmp_path)
    fid = f"{2:016x}"
    with _facts_revision_untyped(path) as db:
        db.execute(f"UPDATE facts SET revision = {stored} WHERE fact_id = ?", (fid,))
    for argv in (["facts", "--format", "jsonl"], ["facts", "--json"], ["facts"],
                 ["facts", "--status", "hidden", "--json"], ["recall", fid, "--json"],
                 ["recall", fid], ["history", fid, "--json"], ["context", "--json"],
                 ["context", "--explain"], ["facts", "--all", "--format", "csv"]):
        r = run_cli("--store", str(path), *argv)
        assert r.exit_code == 0, (argv, r.exit_code, r.stderr)
        assert "b'" not in r.stdout, (argv, r.stdout)
    rows = [orjson.loads(x) for x in run_cli("--store", str(path), "facts", "--format",
                                              "jsonl").stdout.splitlines()]
    row = next(x for x in rows if x["fact_id"] == fid)
    assert (row["status"], row["reason"], row["revision"], row["about_revision"]) == (
        "hidden", "invalid_ref", None, None)
    doc = orjson.loads(run_cli("--store", str(path), "recall", fid, "--json").stdout)
    assert (doc["status"], doc["reason"], doc["revision"]) == ("hidden", "invalid_ref", None)
    r = run_cli("--store", str(path), "validate", "--format", "jsonl")
    out = list(map(orjson.loads, r.stdout.splitlines()))
    summary = next(x for x in out if x["type"] == "summary")
    assert summary["facts"]["hidden"] == 2 and summary["facts"]["valid"] == 2, summary
    # (2.0 and '2' equal revision 2 to SQLite's comparison: no finding said why)
    assert [x["code"] for x in out if x.get("fact_id") == fid and x["code"].startswith("db.")] == [
        "db.dangling_ref"], out
    r = run_cli("--store", str(path), "export", "--output", str(tmp_path / "b.tar"))
    assert r.exit_code == 0, r.stderr
    r = run_cli("verify", str(tmp_path / "b.tar"))
    assert r.exit_code == 0, (r.stdout, r.stderr)



@pytest.mark.parametrize("stored", ["x'01'", "NULL", "9e999"], ids=["blob", "null", "inf"])
def test_rows_with_a_revision_of_no_integer_match_the_schema(tmp_path: Path, stored: str) -> None:
    """A revision stored as no integer is shown as null (FORMAT.md): in a
    fact row's revision (facts.revision) and in a history row's revision (a
    BLOB or +Inf in revisions.revision; NULL is refused there).  Every such
    row is what 'memctl schema' declares: the schema said integer only."""
    import orjson

    from .conftest import run_cli
    from .test_output_contract import _check_against_schema

    path = _dangling_store(tmp_path)
    with _facts_revision_untyped(path) as db:
        db.execute(f"UPDATE facts SET revision = {stored} WHERE fact_id = ?", (f"{2:016x}",))
        if stored != "NULL":
            db.execute(f"UPDATE revisions SET revision = {stored} WHERE fact_id = ?", (f"{4:016x}",))
    fact_schema = orjson.loads(run_cli("schema", "fact").stdout_bytes)
    doc = orjson.loads(run_cli("--store", str(path), "facts", "--json").stdout_bytes)
    assert next(x for x in doc["facts"] if x["fact_id"] == f"{2:016x}")["revision"] is None
    for row in doc["facts"]:
        _check_against_schema(row, fact_schema)
    revision_schema = orjson.loads(run_cli("schema", "revision").stdout_bytes)
    seen = []
    for fid in (f"{i:016x}" for i in (1, 2, 4)):
        r = run_cli("--store", str(path), "history", fid, "--json")
        assert r.exit_code == 0, (fid, r.stderr)
        for row in orjson.loads(r.stdout_bytes)["revisions"]:
            _check_against_schema(row, revision_schema)
            seen.append(row["revision"])
    assert (None in seen) == (stored != "NULL"), seen

def test_the_pool_is_not_worth_its_wait_on_a_large_database(tmp_path: Path) -> None:
    """A fork waits for the audit's integrity_check of the database; on a
    store of many facts over few transcripts that wait cost more than the
    pool saved (1,000,000 facts, 98 MB of transcripts, a 390 MB database:
    1.2x slower).  The default mode forks only for transcripts of at least
    POOL_DB_RATIO times the database's bytes (sparse files: sizes only)."""
    import os

    paths = []
    for i in range(8):
        p = tmp_path / f"s{i}.jsonl"
        with open(p, "wb") as fh:
            fh.truncate(9 << 20)
        paths.append(os.fspath(p))
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: never a pool")
    assert transcripts.worth_a_pool(8, False, paths)             # 72 MiB >= 64 MiB
    assert transcripts.worth_a_pool(8, False, paths, 4 << 20)     # >= 16 x 4 MiB
    assert not transcripts.worth_a_pool(8, False, paths, 5 << 20)  # < 16 x 5 MiB
    assert transcripts.worth_a_pool(8, True, paths, 1 << 30)      # --deep: always


def test_a_span_overlapping_the_one_read_before_is_read_where_its_search_lands(
        tmp_path: Path) -> None:
    """Two spans, [10, 11] and [11], the second starting inside the lines read
    for the first; record 10 written again over the line the search's first
    probe meets (the middle of the file, which the search bisects).  The
    search for 10 goes left of it and lands on record 10; the one for 11 goes
    right of it and lands past the copy, where the one-reference read finds
    no record 11 (stale).  The fast path must not take record 11 from the
    lines it read for [10, 11]: it leaves the transcript to the line loop."""
    n, pad = 100, 200
    spec = {"sessions": {"s0": _records(n, pad)}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(f"{1:016x}", [("s0", [10, 11], "right")]),
                      (f"{2:016x}", [("s0", [11], "right")])],
            "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    data = (store_at(path).sessions_dir / "s0.jsonl").read_bytes()
    assert len(data) > 2 * 8192        # (the search bisects: sessions._LINEAR_BELOW)
    mid = len(data) // 2
    k = data.count(b"\n", 0, data.find(b"\n", mid - 1) + 1)   # the line probed first
    assert 20 < k < n - 9              # (seqs of two digits: the copy is as long)
    order = list(range(n + 1))
    order[k] = 10
    _reorder(path, order)
    fast, loop = _fact_view(path, True), _fact_view(path, False)
    assert fast == loop
    assert fast[0] == [("fact.stale", f"{2:016x}", "records_corrupt")]


@pytest.mark.parametrize("other", [3, 5, 6, 9])
def test_a_line_of_another_seq_that_does_not_begin_with_it_stops_the_fast_read(
        tmp_path: Path, other: int) -> None:
    """The line after record 3 is a record whose members are in another order
    ({"type":...,"seq":N}, N not 4: its first bytes name no seq, so only its
    parse tells), with as many lines as the last seq says.  The span [3, 4]
    has no record 4: the line loop says records_corrupt; the fast path must
    not take that line for record 4 (a digest_mismatch)."""
    spec = {"sessions": {"s0": _records(7, 0)}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(FID, [("s0", [3, 4], "right")])], "excluded": {}, "generation": 0}
    path = build(tmp_path, spec)
    f = store_at(path).sessions_dir / "s0.jsonl"
    lines = f.read_bytes().split(b"\n")[:-1]
    lines[4] = b'{"type":"message","role":"user","content":"m%d ","seq":%d}' % (other, other)
    f.write_bytes(b"".join(ln + b"\n" for ln in lines))
    fast, loop = _fact_view(path, True), _fact_view(path, False)
    assert fast == loop
    assert fast[0] == [("fact.stale", FID, "records_corrupt")]


@pytest.mark.parametrize("shape", ["regular", "gaps", "repeats", "swaps"])
def test_search_lands_where_the_file_search_lands_for_every_target(shape: str) -> None:
    """Every target, present or not (a gap skips it, a seq written twice, two
    records swapped), large enough that the search bisects: ``search_lands``
    lands on the first line whose seq is at or past the target, as the
    file's own search does -- where a probe meets the target's own line too
    (a search that stepped over that line lands one record late)."""
    import os

    from lecode_memctl.core.sessions import _File, search_lands

    seqs: list[int] = []
    s = 0
    for i in range(400):
        seqs.append(s)
        if shape == "gaps":
            s += 1 + i % 3
        elif shape == "repeats":
            s += i % 2
        else:
            s += 1
    if shape == "swaps":
        for i in range(5, 395, 37):
            seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
    lines = [b'{"seq":%d,"type":"message","content":"%s"}\n' % (q, b"w" * (i * 13 % 89))
             for i, q in enumerate(seqs)]
    data = b"".join(lines)
    assert len(data) > 2 * 8192
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    fd, name = tempfile.mkstemp(prefix="lands-")
    try:
        os.write(fd, data)
        probes: dict = {}
        landed = 0
        with _File(fd, "s0", name) as f:
            for t in range(1, seqs[-1] + 1):
                got = search_lands(data, t, probes)
                assert got is not None, t
                assert got == f.seek_span(t)[0], (t, got)
                if shape != "swaps":    # (in order: the first line at or past t)
                    assert got == offsets[next(i for i, q in enumerate(seqs) if q >= t)], (t, got)
                landed += data.startswith(b'{"seq":%d,' % t, got)
        if shape != "swaps":            # (a probe that meets a swapped pair misleads both)
            assert landed == len(set(seqs) - {0})   # each present seq, on its (first) line
    finally:
        os.unlink(name)
