""""Corrupt lines matter only where they sit" (docs/FORMAT.md, "Torn tail and
corruption"): the same reason for every span from every reader -- the
one-reference read, the engine (whole parse and sweep), ``records``/``read``,
the default audit (in memory and its line loop) and ``--deep`` -- where the
transcript holds lines whose first bytes say more than the line is: corrupt
lines beginning ``{"seq":N,``, lines over 1 MiB (judged by their first and
last bytes), and ``too_large`` records among corrupt lines."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.core.sessions import PositionMissing, SessionCorrupt, SessionStore
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import traced_peak
from .conftest import run_cli
from .test_sessions_corrupt import _every_reader, header, line, msg, write

BIG = 3 << 20     # past the 1 MiB the readers parse to place a line


def _huge(seq: int) -> bytes:
    return orjson.dumps(msg(seq, "z" * BIG))


def _too_deep(seq: int) -> bytes:
    return (b'{"seq":%d,"type":"message","role":"user","content":' % seq
            + b"[" * 2000 + b"]" * 2000 + b"}")


def _too_deep_half(seq: int) -> bytes:
    """Over 1 MiB, nested too deep to parse (too_large), no closing brace."""
    return (b'{"seq":%d,"type":"message","role":"user","content":' % seq
            + b"[" * 1100 + b'"' + b"x" * BIG)


def _too_deep_long_seq() -> bytes:
    return (b'{"seq":' + b"1" * 60 + b',"type":"message","role":"user","content":'
            + b"[" * 2000 + b"]" * 2000 + b"}")


_BAD_BYTE = _huge(6)[:1000] + b"\xff" + _huge(6)[1001:]
_RECS = {i: msg(i, f"m{i}") for i in range(1, 6)}
_PADDED = {i: msg(i, f"m{i} " + "x" * 3000) for i in range(1, 6)}   # (past the search's linear window)

# lines after records 1..5 (each pair: extra lines, expected reason per span)
CASES = {
    # 1. corrupt lines whose prefix names a seq: they are no records, the
    #    last record is 5 and they sit at 6
    "prefix_tail": ([b'{"seq":6,"x"', b'{"seq":8,"x"'],
                    {(5, 5): "valid", (5, 6): "records_corrupt", (6, 6): "records_corrupt",
                     (7, 7): "position_missing", (7, 8): "position_missing",
                     (8, 8): "position_missing"}),
    # ... nor is a seq repeated when one of them names a higher seq
    "prefix_mid": ([b'{"seq":9,"x"', orjson.dumps(msg(6, "m6")), orjson.dumps(msg(7, "m7"))],
                   {(5, 5): "valid", (5, 6): "records_corrupt", (6, 6): "valid",
                    (6, 7): "valid", (7, 7): "valid", (8, 8): "position_missing",
                    (9, 9): "position_missing"}),
    # ... nor one whose prefix repeats a seq or goes back, at the end or
    #    inside a span
    "prefix_repeats_last": ([b'{"seq":5,"x"'],
                            {(5, 5): "valid", (5, 6): "records_corrupt",
                             (6, 6): "records_corrupt", (6, 7): "records_corrupt",
                             (7, 7): "position_missing"}),
    "prefix_goes_back_last": ([b'{"seq":3,"x"', b'{"seq":4,"x"'],
                              {(5, 5): "valid", (5, 6): "records_corrupt",
                               (6, 6): "records_corrupt", (7, 7): "position_missing"}),
    "prefix_goes_back_mid": ([b'{"seq":3,"x"', orjson.dumps(msg(6, "m6")),
                              orjson.dumps(msg(7, "m7"))],
                             {(4, 5): "valid", (5, 5): "valid", (5, 6): "records_corrupt",
                              (6, 6): "valid", (6, 7): "valid", (8, 8): "position_missing"}),
    # 2. a line over 1 MiB that begins {"seq":6, and ends with } counts as
    #    record 6 for placing the lines after it, even when it is corrupt
    #    (an invalid byte inside, or two records joined); it is unusable
    "huge_bad_byte": ([_BAD_BYTE, b"{not json"],
                      {(5, 5): "valid", (5, 6): "records_corrupt", (6, 6): "records_corrupt",
                       (7, 7): "records_corrupt", (8, 8): "position_missing",
                       (8, 9): "position_missing"}),
    "huge_joined": ([_huge(6) + orjson.dumps(msg(7, "m7")), b"{not json"],
                    {(5, 5): "valid", (6, 6): "records_corrupt", (7, 7): "records_corrupt",
                     (8, 8): "position_missing"}),
    "huge_bad_byte_last": ([_BAD_BYTE],
                           {(5, 5): "valid", (6, 6): "records_corrupt",
                            (7, 7): "position_missing", (8, 8): "position_missing"}),
    # 3. a too_large record (nested too deep) counts as its seq among
    #    corrupt lines: the line after it sits at 7
    "too_large_in_run": ([b"{not json", _too_deep(6), b"{not json"],
                         {(5, 5): "valid", (5, 6): "records_corrupt",
                          (6, 6): "records_corrupt", (7, 7): "records_corrupt",
                          (7, 8): "records_corrupt", (8, 8): "position_missing"}),
    "too_large_after_gap": ([_too_deep(7), b"{not json"],
                            {(5, 5): "valid", (6, 6): "records_corrupt",
                             (7, 7): "records_corrupt", (8, 8): "records_corrupt",
                             (9, 9): "position_missing"}),
    # ... but not when it is over 1 MiB and does not end as an object
    #    does: the first half of a deeply nested record split in two is a
    #    corrupt line sitting at 6, as the 1 MiB rule says (review 3)
    "too_large_huge_half": ([_too_deep_half(6), b"{not json"],
                            {(5, 5): "valid", (5, 6): "records_corrupt",
                             (6, 6): "records_corrupt", (7, 7): "position_missing",
                             (7, 8): "position_missing"}),
    # ... nor when its {"seq":N, prefix does not fit in the 64 bytes every
    #    reader looks at (a seq of 60 digits)
    "too_large_long_prefix": ([_too_deep_long_seq(), b"{not json"],
                              {(5, 5): "valid", (5, 6): "records_corrupt",
                               (6, 6): "records_corrupt", (7, 7): "position_missing"}),
    # 4. a line over 1 MiB after a gap: the first half of a record split in
    #    two (no closing brace) is a corrupt line sitting at 6
    "huge_half_after_gap": ([_huge(7)[:BIG // 2], _huge(7)[BIG // 2:]],
                            {(5, 5): "valid", (6, 6): "records_corrupt",
                             (7, 7): "position_missing", (7, 8): "position_missing",
                             (8, 8): "position_missing"}),
    # ... and a whole one is a record, which a corrupt line after it follows
    "huge_record": ([_huge(6), b"{not json"],
                    {(5, 5): "valid", (6, 6): "valid", (6, 7): "records_corrupt",
                     (7, 7): "records_corrupt", (8, 8): "position_missing"}),
}


@pytest.fixture
def store(store):
    """conftest's store with its sessions/ directory."""
    os.makedirs(store.sessions_dir, mode=0o700)
    return store


def _lines(sid: str, extra: list[bytes], first: dict[int, dict]) -> bytes:
    return b"".join([line(header(sid))] + [line(first[i]) for i in range(1, 6)]
                    + [x + b"\n" for x in extra])


@pytest.mark.heavy
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_reader_places_lines_by_the_same_rule(store, case, pad, monkeypatch):
    from lecode_memctl.core.audit import Audit, transcripts
    from lecode_memctl.core.facts import FactStore

    extra, expected = CASES[case]
    recs = dict(_PADDED if pad else _RECS)     # (the digests: of the records there are)
    first = dict(recs)
    for x in extra:
        try:
            r = orjson.loads(x)
        except orjson.JSONDecodeError:
            continue
        if isinstance(r, dict) and isinstance(r.get("seq"), int):
            recs[r["seq"]] = r
    # one transcript per span (the default audit parses only the cited
    # spans' lines, and places corrupt lines near them), one citing all
    groups = [(f"c{i}", [span]) for i, span in enumerate(expected)] + [("call", list(expected))]
    want = {}
    with FactStore(store.facts_db) as fs:
        for sid, spans in groups:
            write(store, _lines(sid, extra, first), sid=sid)
            for lo, hi in spans:
                ref = SourceRef(sid, tuple(range(lo, hi + 1)),
                                canonical_digest([recs.get(q, {"seq": q}) for q in range(lo, hi + 1)]))
                fs.add(f"fact {sid} {lo} {hi}", ref=ref)
                want[ref] = expected[(lo, hi)]
    got = _every_reader(store, want, monkeypatch)
    # the default audit's line loop too (a transcript held in memory is
    # read by it only when it is irregular)
    monkeypatch.setattr(transcripts, "FAST_LIMIT", -1)
    a = Audit(store, deep=False, parallel=False, now=1.9e9)
    list(a.run())
    loop = dict.fromkeys(want, "valid")
    loop.update({ref: st.reason for (ref, _p), st in a._statuses.items() if ref in loop})
    got["default-loop"] = loop
    monkeypatch.undo()
    wrong = {reader: {(r.session_id, r.seqs[0], r.seqs[-1]): (v, want[r])
                      for r, v in g.items() if v != want[r]}
             for reader, g in got.items()}
    assert not any(wrong.values()), str({k: v for k, v in wrong.items() if v})
    # the range reads: corrupt (exit 5), short (the records there are) or past the end (exit 3)
    ss = SessionStore(store)
    for (lo, hi), reason in expected.items():
        if reason == "records_corrupt":
            with pytest.raises(SessionCorrupt):
                ss.records("call", lo, hi)
        elif reason == "position_missing":
            seqs = [r["seq"] for r in ss.records("call", lo, hi)]
            assert seqs == list(range(lo, lo + len(seqs))) and len(seqs) <= hi - lo, (lo, hi)
            if not seqs:
                with pytest.raises(PositionMissing):
                    ss.source_snapshot("call", lo, hi)
        else:
            assert [r["seq"] for r in ss.records("call", lo, hi)] == list(range(lo, hi + 1))
    ss.close()
    lo, hi = max(expected)
    r = run_cli("--store", str(store.path), "read", "call", str(lo), str(hi))
    assert r.exit_code == {"records_corrupt": 5, "position_missing": 3}[expected[(lo, hi)]], r.stderr


@pytest.mark.parametrize("last", ["huge", "padded"])
def test_a_read_past_the_end_reads_only_the_last_line(store, last, monkeypatch):
    """A range read past the end checks that the last line it stepped over
    by its first bytes is a record (a corrupt one there would sit in its
    way): that line alone, and a huge one judged by its first and last bytes
    -- never read whole (issue 16.5).  (``records``: a snapshot's
    PositionMissing names the last seq, read by ``_last_seq`` from the tail.)"""
    from lecode_memctl.core import sessions as sessions_mod

    recs = [msg(i, f"m{i} " + "x" * 3000) for i in range(1, 60)]
    tail = _huge(60) if last == "huge" else orjson.dumps(msg(60, "y" * 3000))
    write(store, b"".join([line(header())] + [line(r) for r in recs]) + tail + b"\n")
    ss = SessionStore(store)
    read: list[int] = []
    parsed: list[int] = []
    real_pread, real_classify = os.pread, sessions_mod._classify
    monkeypatch.setattr(os, "pread", lambda fd, n, off: read.append(n) or real_pread(fd, n, off))
    monkeypatch.setattr(sessions_mod, "_classify",
                        lambda ln: parsed.append(len(ln)) or real_classify(ln))
    assert ss.records("s1", 61, 62) == []
    assert ss.records("s1", 70, 70) == []
    monkeypatch.undo()
    ss.close()
    assert sum(read) < 64 << 10, sum(read)
    assert max(parsed, default=0) < 4000, parsed


def test_a_prefix_that_goes_back_does_not_mislead_the_search(store, monkeypatch):
    """A corrupt line ``{"seq":3,"x"`` after record k: the binary search,
    landing on it, takes every line before it for a seq below 3 and skips
    records it wants.  Every span gets the reason --deep gives it wherever
    the line is (records 1..12 of 3 KB: the search probes)."""
    from lecode_memctl.core.facts import FactStore

    recs = {i: msg(i, f"m{i} " + "x" * 3000) for i in range(1, 13)}
    want = {}
    with FactStore(store.facts_db) as fs:
        for k in range(3, 13):
            sid = f"k{k}"
            lines = [line(header(sid))] + [line(recs[i]) for i in range(1, k + 1)] \
                + [b'{"seq":3,"x"\n'] + [line(recs[i]) for i in range(k + 1, 13)]
            write(store, b"".join(lines), sid=sid)
            for lo, hi in [(s, s) for s in range(1, 15)] + [(k, k + 1)]:
                ref = SourceRef(sid, tuple(range(lo, hi + 1)),
                                canonical_digest([recs.get(q, {"seq": q}) for q in range(lo, hi + 1)]))
                fs.add(f"fact {sid} {lo} {hi}", ref=ref)
                want[ref] = ("records_corrupt" if (lo, hi) == (k, k + 1) or lo == k + 1 == 13
                             else "position_missing" if lo > 12 else "valid")
    got = _every_reader(store, want, monkeypatch)
    wrong = {reader: {(r.session_id, r.seqs[0], r.seqs[-1]): (v, want[r])
                      for r, v in g.items() if v != want[r]}
             for reader, g in got.items()}
    assert not any(wrong.values()), str({k: v for k, v in wrong.items() if v})
    ss = SessionStore(store)
    for k in range(3, 13):
        for s in range(1, 13):
            assert [r["seq"] for r in ss.records(f"k{k}", s, s)] == [s], (k, s)
    ss.close()


def test_the_whole_parse_gives_way_to_the_line_loop_when_memory_runs_out(monkeypatch):
    """records_by_line (the deep audit's parse of a whole transcript in one
    call) answers None when the parser runs out of memory, so that the line
    by line read decides (too_large), rather than letting MemoryError out."""
    from types import SimpleNamespace

    from lecode_memctl.core import sessions

    data = b"".join(line(r) for r in (header("s"), msg(1, "a"), msg(2, "BOOM"), msg(3, "c")))

    def loads(b):
        if b"BOOM" in b:
            raise MemoryError
        return orjson.loads(b)

    assert sessions.records_by_line(data, len(data)) is not None
    monkeypatch.setattr(sessions, "orjson",
                        SimpleNamespace(loads=loads, JSONDecodeError=orjson.JSONDecodeError))
    assert sessions.records_by_line(data, len(data)) is None



_TAILS = {
    # what follows records 1..5: the seq a read names as the last, and the bytes
    "huge_record": (6, lambda: line(msg(6, "z" * (8 << 20)))),
    "huge_record_then_torn": (6, lambda: line(msg(6, "z" * (8 << 20))) + b'{"seq":7,"ty'),
    "huge_torn_tail": (5, lambda: orjson.dumps(msg(6, "z" * (8 << 20)))),
    "huge_half_then_bad": (5, lambda: orjson.dumps(msg(6, "z" * (8 << 20)))[:4 << 20]
                           + b"\n{not json\n"),
}


@pytest.mark.parametrize("tail", sorted(_TAILS))
def test_a_huge_last_line_is_never_held_to_name_the_last_seq(store, tail):
    """A snapshot names the transcript's last seq (``last_seq``, and the
    message of PositionMissing), and a reference past the end says where the
    transcript ends: found by the corrupt-line rule's look back from the end
    (a torn tail is no record; a line over 1 MiB is judged by its first and
    last bytes), never by holding the last line whole.  A snapshot of 1..2
    in a transcript ending in an 8 MiB tool output took 8 MiB and more
    (_last_seq read the last line whole), and a read past the end read a
    huge torn tail or a huge bad line whole (16-57 MiB); each stays within
    4 MiB now."""
    last, make = _TAILS[tail]
    recs = [msg(i, f"m{i}") for i in range(1, 6)]
    write(store, b"".join([line(header())] + [line(r) for r in recs]) + make())
    ss = SessionStore(store)
    past = SourceRef("s1", (9,), canonical_digest([{"seq": 9}]))
    try:
        snap, peak_in = traced_peak(lambda: ss.source_snapshot("s1", 1, 2))
        with pytest.raises(PositionMissing, match=rf"records 0\.\.{last};"):
            ss.source_snapshot("s1", 9, 9)
        st, peak_past = traced_peak(lambda: ss.validate_source(past, "durable"))
    finally:
        ss.close()
    assert snap.ref.seqs == (1, 2)
    assert (st.status, st.reason) == ("missing", "position_missing")
    assert f"ends at seq {last}" in st.detail
    assert peak_in < 4 << 20, peak_in
    assert peak_past < 4 << 20, peak_past


_Z = "z" * (8 << 20)
_SMALL_BAD: bytes = (orjson.dumps(msg(6, "z" * (3 << 19)))[:1000] + b"\xff"
                     + orjson.dumps(msg(6, "z" * (3 << 19)))[1001:] + b"\n")
_LISTED = {
    # lines after records 1..5: (records, messages, state, reason, detail)
    "last": ([lambda: line(msg(6, _Z))], (7, 6, "ok", None, None)),
    "middle": ([lambda: line(msg(6, _Z)), lambda: line(msg(7, "a"))], (8, 7, "ok", None, None)),
    "event-word": ([lambda: line(msg(6, _Z + ' "event" ')), lambda: line(msg(7, "a"))],
                   (8, 7, "ok", None, None)),
    "torn": ([lambda: orjson.dumps(msg(6, _Z))],
             (6, 5, "torn_tail", "torn_tail", "the last line is an append in flight")),
    # (the first bad line, 7, the first half of a record: line 8 until
    # 2026-12-07, when the listing reported the last problem of the tail)
    "half-bad": ([lambda: orjson.dumps(msg(6, _Z))[:4 << 20] + b"\n", lambda: b"{not json\n"],
                 (None, 5, "corrupt", "not_json", "line 7: not_json")),
    "not-object": ([lambda: b"x" * (3 << 20) + b"\n", lambda: line(msg(6, "a"))],
                   (7, 6, "corrupt", "not_json", "line 7: not_json")),
    # a file under 2 MiB is judged by the same rule: a last line of 1.5 MiB
    # with an invalid byte inside counts as record 6, as it does for the
    # count of lines, the range reads and the audits (it is not parsed)
    "small-file": ([lambda: _SMALL_BAD], (7, 6, "ok", None, None)),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", sorted(_LISTED))
def test_the_sessions_listing_never_holds_a_huge_line(store, case):
    """``memctl sessions`` (``SessionStore.info``) judges a line over 1 MiB by
    its first and last bytes, as every reader places it, and reads it a block
    at a time: the same row as when it read each line whole (these values
    are what it gave then), within 6 MiB.  A session ending in a 150 MiB
    tool output took 636 MiB and 2.3 s to list."""
    extra, want = _LISTED[case]
    sid = f"l-{case}"
    write(store, b"".join([line(header(sid))] + [line(msg(i, f"m{i}")) for i in range(1, 6)]
                          + [make() for make in extra]), sid=sid)
    ss = SessionStore(store)
    try:
        info, peak = traced_peak(lambda: ss.info(sid))
    finally:
        ss.close()
    assert (info.records, info.messages, info.state, info.reason, info.detail) == want
    assert peak < 6 << 20, peak


@pytest.mark.parametrize("at", [-3, 0, 3, (1 << 20) - 3])
def test_a_huge_line_read_in_blocks_still_finds_event_across_a_block_edge(store, at):
    """capped_lines reads a huge line a block at a time (the first block
    HUGE_LINE + 1 bytes, then _CHUNK each): the bytes "event" are found
    wherever they sit, across the edge of two blocks too."""
    from lecode_memctl.core import sessions as S

    edge = S.HUGE_LINE + 1 + at          # where "event" begins in the line
    text = b"{" + b"x" * (edge - 1) + b'"event"' + b"y" * (3 << 20) + b"}"
    plain = b"{" + b"x" * (4 << 20) + b"}"
    p = write(store, text + b"\n" + plain + b"\n", sid="edge")
    fd = os.open(p, os.O_RDONLY)
    f = S._File(fd, "edge", str(p))
    try:
        items = list(f.capped_lines(0))
    finally:
        f.close()
    assert [type(i).__name__ for _o, i in items] == ["HugeLine", "HugeLine"]
    (o1, a), (o2, b) = items
    assert (o1, a.length, a.has_event, a.is_object()) == (0, len(text), True, True)
    assert (o2, b.length, b.has_event) == (len(text) + 1, len(plain), False)
    assert a.head == text[:64] and a.tail == text[-64:] and b.tail == plain[-64:]


_PRIOR = b'{"seq":%d,"type":"event","event":"compact","summary":"s","prior":{"seq":1,"digest":"d"}}\n'


@pytest.mark.parametrize("escape", [False, True], ids=["plain", "escaped"])
@pytest.mark.parametrize("compactions", [0, 1, 3])
def test_the_whole_parse_finds_a_seq_given_twice_among_nested_seqs(compactions, escape):
    """A line whose first bytes say seq 9 and whose parse keeps its line
    number: records_by_line gives way to the line loop (a corrupt line),
    whether other lines hold "seq" more than once (a compaction's prior),
    or an escape spells a letter of it; the same lines without it parse."""
    from lecode_memctl.core import sessions

    head = [line(header("s")), line(msg(1, "a"))]
    head += [_PRIOR % (2 + i) for i in range(compactions)]
    n = len(head)
    text = "caf\\u0065" if escape else "cafe"
    tail = [line(msg(n + 1, "b")), b'{"seq":%d,"type":"message","role":"user","content":"%s"}\n'
            % (n + 2, text.encode())]
    clean = b"".join([*head, b'{"seq":%d,"type":"message","role":"user","content":"x"}\n' % n,
                      *tail])
    assert sessions.records_by_line(clean, len(clean)) is not None
    twice = b"".join([*head, b'{"seq":9,"type":"message","role":"user","content":"x","seq":%d}\n'
                      % n, *tail])
    assert sessions.records_by_line(twice, len(twice)) is None
