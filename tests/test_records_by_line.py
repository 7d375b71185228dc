"""``sessions.records_by_line`` (the audit's parse of a whole transcript)
parses each line as ``orjson.loads`` of that line alone, whether it takes
one parse of the lines wrapped as one-item lists (``_lines_as_lists``) or
one call per line: the same records or None, on regular transcripts and on
lines that would join or split differently in one parse."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import sessions


def _one_by_one(data: bytes, end: int) -> list | None:
    """The rule: every complete line parsed alone, each a record whose seq is
    its line number."""
    if end <= 0:
        return None
    try:
        recs = [orjson.loads(x) for x in data[:end - 1].split(b"\n")]
    except orjson.JSONDecodeError:
        return None
    for i, r in enumerate(recs):
        if type(r) is not dict or type(r.get("seq")) is not int or r["seq"] != i:
            return None
    return recs


def _rec(seq: int, extra: object = "x") -> bytes:
    return orjson.dumps({"seq": seq, "type": "message", "role": "user", "content": extra})


def _check(data: bytes) -> list | None:
    end = data.rfind(b"\n") + 1
    got = sessions.records_by_line(data, end)
    assert got == _one_by_one(data, end)
    fast = sessions._lines_as_lists(data, end) if end else None
    if fast is not None:   # when it answers, it is each line's own value
        assert fast == [orjson.loads(x) for x in data[:end - 1].split(b"\n")]
    return got


def test_a_regular_transcript_takes_the_one_parse():
    data = b"".join(_rec(i, [[i, "a]"], {"k": "]"}] if i % 25 == 3 else "t") + b"\n"
                    for i in range(50))
    assert sessions._lines_as_lists(data, len(data)) is not None
    assert _check(data) is not None
    assert _check(data + b'{"seq":50,"ty') is not None       # a torn tail is not a line


def test_a_split_record_and_two_records_on_a_line_are_not_taken_for_lines():
    """A record split inside nested arrays (``[[1`` / ``2]]``) would join into
    one item of the wrapped parse; a later line closing one item and opening
    another (``],[`` outside any string, with or without whitespace) would
    make up the count.  Line by line both are corrupt: None."""
    head = [_rec(0), b'{"seq":1,"type":"message","content":[[1', b'2]]}']
    for glue in (b"],[", b"] , [", b"]\t,\r[", b"],\t["):
        lines = [*head, b'{"seq":2}' + glue + b'{"seq":3}', _rec(4)]
        data = b"\n".join(lines) + b"\n"
        assert _check(data) is None
    # the same bytes inside a string are no separator: still the line's own
    lines = [_rec(0), _rec(1, "x],[y"), _rec(2, "] , ["), _rec(3)]
    assert _check(b"\n".join(lines) + b"\n") is not None


def test_whitespace_around_lines_and_empty_lines():
    lines = [_rec(0), b"  " + _rec(1) + b"\t", b"\r" + _rec(2) + b"\r", _rec(3)]
    assert _check(b"\n".join(lines) + b"\n") is not None
    assert _check(b"\n".join([_rec(0), b"", _rec(1)]) + b"\n") is None
    assert _check(b"\n") is None
    assert _check(b"") is None


_PIECES = [b"[", b"]", b",", b"{", b"}", b" ", b"\t", b"\r", b"\n", b"1", b'"s"', b"],[",
           b"},{", b'{"seq":', b"null", b":"]


@pytest.mark.heavy
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 12), edits=st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.sampled_from(_PIECES)), max_size=6),
    nested=st.booleans(), parse_piece=st.sampled_from([1, 40, 100, 256 << 10]))
def test_damaged_transcripts_parse_as_line_by_line(n, edits, nested, parse_piece):
    """Random damage (bytes inserted, deleted or replaced, lines joined or
    split, anywhere) to regular transcripts whose records hold nested lists
    and objects: records_by_line answers what the line-by-line rule does,
    whatever the pieces its lines are parsed in (``PARSE_PIECE``: one line
    each, a few, all)."""
    content: object = [[1, 2], [3, [4]], {"a": [5]}] if nested else "t"
    data = bytearray(b"".join(_rec(i, content) + b"\n" for i in range(n)))
    for at, kind, piece in edits:
        at %= len(data) + 1
        if kind == 0:
            data[at:at] = piece
        elif kind == 1:
            del data[at:at + len(piece)]
        else:
            data[at:at + len(piece)] = piece
    saved = sessions.PARSE_PIECE
    sessions.PARSE_PIECE = parse_piece
    try:
        _check(bytes(data))
    finally:
        sessions.PARSE_PIECE = saved


@pytest.mark.heavy
def test_a_transcript_parsed_in_pieces_holds_one_piece_besides_its_records():
    """The lines are parsed about ``PARSE_PIECE`` bytes at a time: a 3.5 MB
    transcript of short records (the audit and the engine parse at most
    4 MiB whole) costs, besides its bytes and its records, about one piece,
    not a copy of the whole and a list per line (the engine's peak over
    1,000,000 facts went from 52 to 62 MiB with one parse of everything)."""
    import tracemalloc

    data = b"".join(_rec(i) + b"\n" for i in range(60_000))
    end = len(data)
    want = _one_by_one(data, end)
    tracemalloc.start()     # (from a cold start: its peak is the same as after a first parse)
    try:
        records = sessions.records_by_line(data, end)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert records == want
    # (a few copies of one piece and its item lists, and three pointer lists
    # of the lines' length: about 3 MB here; a copy of the whole, its item
    # lists and orjson's buffers took 51 MB, and bytes.split's lines 6 MB)
    assert peak - _cur < 5 << 20, (peak, _cur, len(data))


def test_the_deep_audit_finds_event_lines_by_their_records_seq():
    """``--deep`` over a whole parse finds the lines of its event records by
    their mark and their record's seq: by the ``{"seq":N,`` prefix when the
    key is written once and without escapes, or when the line is
    ``orjson.dumps`` of record N; else by parsing the line (a repeated key,
    here with the same value).  A line whose repeated key gives another
    seq than its prefix is no record (sessions.seq_given_twice): no whole
    parse then (2026-12-05: before, the parsed seq was taken)."""
    from lecode_memctl.core.audit.transcripts import _event_lines

    lines = [_rec(0), _rec(1),
             b'{"seq":2,"type":"event","event":"clear","seq":2}',
             b'{"seq":3,"type":"event","event":"clear"}',
             b'{"seq":4,"type":"message","role":"user","content":"\\"event\\""}',
             b'{"s\\u0065q":5,"type":"event","event":"clear"}',
             b'{"seq":6,"type":"event","event":"clear","x":{"seq":1}}',
             b'{"seq":7,"type":"event","event":"clear","s\\u0065q":7}',
             b'{"seq":8,"type":"event","event":"compact","prior":{"seq":3}}',
             b'{"seq":9, "type":"event","event":"compact","prior":{"seq":3}}']
    data = b"\n".join(lines) + b"\n"
    recs = sessions.records_by_line(data, len(data))
    assert recs is not None and [r["seq"] for r in recs] == list(range(10))
    assert orjson.dumps(recs[8]) == lines[8] and orjson.dumps(recs[9]) != lines[9]
    assert _event_lines(data, len(data), recs) == {2, 3, 5, 6, 7, 8, 9}
    for i, twice in ((2, b'{"seq":9,"type":"event","event":"clear","seq":2}'),
                     (7, b'{"seq":1,"type":"event","event":"clear","s\\u0065q":7}')):
        other = b"\n".join(lines[:i] + [twice] + lines[i + 1:]) + b"\n"
        assert sessions.records_by_line(other, len(other)) is None, i
