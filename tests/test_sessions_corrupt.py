"""Transcripts written by hand, byte by byte: torn tails, bad lines, seq gaps,
invalid UTF-8, a 10 MB line.  Every reader must either return exactly the
complete records or report the corruption with its line number."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.sessions import SessionCorrupt, SessionRefused, SessionStore
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG
from .conftest import run_cli, tree_hash

SID = "s1"


def header(sid=SID, project=SLUG):
    return {"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": project,
            "created": "2026-01-01T00:00:00Z"}


def msg(seq, text, role="user"):
    return {"seq": seq, "type": "message", "role": role, "content": text}


def line(rec) -> bytes:
    return orjson.dumps(rec) + b"\n"


@pytest.fixture
def store(store):
    """conftest's store with its sessions/ directory (ss: conftest's)."""
    os.makedirs(store.sessions_dir, mode=0o700)
    return store


def write(store, data: bytes, sid=SID):
    p = store.sessions_dir / f"{sid}.jsonl"
    p.write_bytes(data)
    return p


def body(n, extra=None):
    recs = [header()] + [msg(i, f"message {i}") for i in range(1, n + 1)]
    if extra:
        recs += extra
    return recs, b"".join(line(r) for r in recs)


def test_truncated_at_every_byte_of_the_last_two_records(store, ss):
    recs, _ = body(6)
    recs += [msg(7, "tail é😀 \"q\" \\ end"), msg(8, "last 🎉 ü", role="assistant")]
    data = b"".join(line(r) for r in recs)
    cut_from = len(b"".join(line(r) for r in recs[:-2]))
    early = SourceRef(SID, (2, 3), canonical_digest(recs[2:4]))
    assert "é".encode() in data[cut_from:]  # the cuts go through multi-byte characters
    for cut in range(cut_from, len(data) + 1):
        write(store, data[:cut])
        complete = data[:cut].count(b"\n")
        got = ss.records(SID, 0, 100)
        assert got == recs[:complete], cut
        assert ss.validate_source(early).status == "valid"
        info = ss.list_sessions()[0]
        assert info.records == complete
        torn = not data[:cut].endswith(b"\n")
        assert info.state == ("torn_tail" if torn else "ok"), cut
        items = list(ss.scan(SID))
        assert not any(i.corrupt for i in items)
        assert (items[-1].kind == "torn_tail") == torn
        if complete > 7:
            assert ss.source_snapshot(SID, 7, 8).ref.seqs[0] == 7


def test_bad_line_mid_file(store, ss, config_dir):
    recs, data = body(30)
    lines = data.split(b"\n")
    lines[10] = b'{"seq": 10, "type": "message", "role": "user", "content": "cut'  # line 11
    write(store, b"\n".join(lines))
    with pytest.raises(SessionCorrupt) as ei:
        ss.records(SID, 5, 15)
    assert (ei.value.kind, ei.value.line) == ("not_json", 11)
    assert "line 11" in str(ei.value)
    # Reads that do not span the bad line are unaffected.
    assert [r["seq"] for r in ss.records(SID, 11, 20)] == list(range(11, 21))
    assert [r["seq"] for r in ss.records(SID, 1, 9)] == list(range(1, 10))
    ref = SourceRef(SID, (9, 10, 11), "0" * 64)
    st = ss.validate_source(ref)
    assert (st.status, st.reason) == ("stale", "records_corrupt")
    bad = [i for i in ss.scan(SID) if i.corrupt]
    assert [(i.line, i.kind) for i in bad] == [(11, "not_json")]
    info = ss.list_sessions()[0]
    assert info.state == "corrupt"
    r = run_cli("--store", str(store.path), "read", SID, "5", "15")
    assert r.exit_code == 5 and "line 11" in r.stderr
    assert run_cli("--store", str(store.path), "read", SID, "12", "15").exit_code == 0


@pytest.mark.parametrize("mutate,kind,lineno", [
    (lambda ls: ls.pop(12), "seq_gap", 13),                                   # seq 12 missing
    (lambda ls: ls.insert(12, ls[11]), "seq_duplicate", 13),                  # seq 11 twice
    (lambda ls: ls.insert(12, ls[3]), "seq_regression", 13),                  # seq 3 again
    (lambda ls: ls.__setitem__(12, b"[12]"), "not_object", 13),
    (lambda ls: ls.__setitem__(12, b'{"type":"message"}'), "no_seq", 13),
    (lambda ls: ls.__setitem__(12, b'{"seq":12,"type":"message","role":"user","content":"\xff\xfe"}'),
     "invalid_utf8", 13),
    (lambda ls: ls.__setitem__(12, b""), "not_json", 13),
])
def test_line_corruption_kinds(store, ss, mutate, kind, lineno):
    _recs, data = body(30)
    lines = data.split(b"\n")[:-1]
    mutate(lines)
    write(store, b"\n".join(lines) + b"\n")
    with pytest.raises(SessionCorrupt) as ei:
        ss.records(SID, 8, 16)
    assert (ei.value.kind, ei.value.line) == (kind, lineno)
    bad = [i for i in ss.scan(SID) if i.corrupt]
    assert (bad[0].line, bad[0].kind) == (lineno, kind)
    st = ss.validate_source(SourceRef(SID, (10, 11, 12, 13), "0" * 64))
    assert (st.status, st.reason) == ("stale", "records_corrupt")
    assert ss.list_sessions()[0].state == "corrupt"


def test_gap_after_span_does_not_affect_it(store, ss):
    recs, data = body(20)
    lines = data.split(b"\n")[:-1]
    del lines[15]
    write(store, b"\n".join(lines) + b"\n")
    snap = ss.source_snapshot(SID, 3, 8)
    assert ss.validate_source(snap.ref).ok


def test_ten_megabyte_line(store, ss):
    big = "x" * (10 * 1024 * 1024)
    recs = [header()] + [msg(i, f"m{i}") for i in range(1, 40)] + [msg(40, big)] + \
        [msg(i, f"m{i}") for i in range(41, 80)]
    write(store, b"".join(line(r) for r in recs))
    assert [r["seq"] for r in ss.records(SID, 38, 42)] == [38, 39, 40, 41, 42]
    assert ss.records(SID, 60, 61) == recs[60:62]
    assert ss.records(SID, 40, 40)[0]["content"] == big
    snap = ss.source_snapshot(SID, 35, 45)
    assert ss.validate_source(snap.ref).ok
    r = run_cli("--store", str(store.path), "read", SID, "40", "40", "--offset", "5000000")
    assert r.exit_code == 0
    doc = orjson.loads(r.stdout_bytes)
    assert len(r.stdout_bytes) <= 16384
    assert doc["source_text"] == "x" * 4096
    assert ss.list_sessions()[0].records == 80


def test_header_problems(store, ss):
    write(store, b"")
    with pytest.raises(SessionRefused) as ei:
        ss.records(SID, 0, 1)
    assert ei.value.reason == "refused_header"
    write(store, line(header(sid="other")) + line(msg(1, "x")))
    with pytest.raises(SessionRefused):
        ss.records(SID, 0, 1)
    write(store, line(msg(0, "no header")))
    assert ss.list_sessions()[0].state == "refused"
    write(store, line(header())[:-5])   # a torn header: nothing persisted yet
    assert ss.list_sessions()[0].reason == "refused_header"
    r = run_cli("--store", str(store.path), "read", SID, "0", "1")
    assert r.exit_code == 4


def test_reads_never_modify_sessions_dir(store, ss):
    recs, data = body(10)
    write(store, data + b'{"seq":11,"ty')
    write(store, b"garbage\n", sid="bad")
    os.symlink(store.sessions_dir / "s1.jsonl", store.sessions_dir / "link.jsonl")
    before = tree_hash(store.path)
    ss.records(SID, 0, 10)
    ss.list_sessions()
    list(ss.scan(SID))
    ss.validate_many([SourceRef(SID, (1,), "0" * 64), SourceRef("link", (1,), "0" * 64)])
    for args in (["sessions"], ["sessions", "--json"], ["read", SID, "0", "10"],
                 ["read", SID, "0", "10", "--text"], ["read", "bad", "0", "1"],
                 ["read", "link", "0", "1"], ["read", "nope", "0", "1"]):
        run_cli("--store", str(store.path), *args)
    assert tree_hash(store.path) == before
    assert not os.path.exists(store.facts_db)


def test_store_corrupt_is_exit_5_not_traceback(store):
    write(store, line(header()) + b"\x00\x01\x02\n" + line(msg(2, "x")))
    r = run_cli("--store", str(store.path), "read", SID, "0", "2")
    assert r.exit_code == 5
    assert r.stderr.startswith("memctl: error:") and "Traceback" not in r.stderr
    assert isinstance(StoreCorrupt("x"), Exception)


def test_scan_yields_each_record_once(store, ss):
    _recs, data = body(12)
    lines = data.split(b"\n")[:-1]
    lines.insert(6, lines[5])             # a duplicate seq 5
    lines[9] = b"garbage"
    write(store, b"\n".join(lines) + b"\n")
    items = list(ss.scan(SID))
    with_records = [i for i in items if i.record is not None]
    assert all(i.kind == "record" for i in with_records)
    assert [i.seq for i in with_records] == [0, 1, 2, 3, 4, 5, 5, 6, 7, 9, 10, 11, 12]
    assert [(i.line, i.kind) for i in items if i.corrupt] == [(7, "seq_duplicate"), (10, "not_json")]


from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from lecode_memctl.core.errors import MemctlError  # noqa: E402

_line_st = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda i, t: line(msg(i, t))[:-1], st.integers(-2, 12), st.text(max_size=20)),
    st.sampled_from([b"", b"{}", b"[]", b'{"seq":true}', b'{"seq":3.0}', b"\xff",
                     b'{"seq":1,"type":"event","event":"undo","target":[0,99]}',
                     b'{"seq":2,"type":"event","event":"clear"}', b'"\\ud800"', b"1e999"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line_st, max_size=12), st.booleans(), st.integers(0, 12), st.integers(0, 12))
def test_arbitrary_lines_never_escape_as_tracebacks(store, lines, torn, a, b):
    ss = SessionStore(store)
    data = line(header()) + b"".join(x.replace(b"\n", b" ") + b"\n" for x in lines)
    if torn:
        data += b'{"seq":'
    write(store, data)
    lo, hi = min(a, b), max(a, b)
    for call in (lambda: ss.records(SID, lo, hi), lambda: ss.source_snapshot(SID, lo, hi),
                 lambda: ss.events(SID, lo), lambda: list(ss.scan(SID)), ss.list_sessions,
                 lambda: ss.validate_source(SourceRef(SID, (lo,), "0" * 64), "durable")):
        try:
            call()
        except MemctlError:
            pass


# -- a corrupt line matters only where it is: the same status from every reader

_TAILS = {
    # corrupt lines after record 6, the last one (they sit at position 7)
    "bad_line": lambda ls: ls + [b"{not json\n"],
    "two_bad_lines": lambda ls: ls + [b"{not json\n", b"[7]\n"],
    # record 6 split across two lines, the first beginning {"seq":6, (both sit at position 6)
    "split_last": lambda ls: ls[:-1] + [ls[-1].replace(b',"type"', b',\n"type"', 1)],
}
# span -> (status, reason) after each tail: records_corrupt where a corrupt line
# sits in the span or at its absent first position, position_missing past the end
_EXPECTED = {
    "bad_line": {(6, 6): "valid", (5, 6): "valid", (6, 7): "records_corrupt",
                 (7, 7): "records_corrupt", (7, 8): "records_corrupt",
                 (8, 8): "position_missing", (8, 9): "position_missing",
                 (9, 9): "position_missing"},
    "split_last": {(5, 5): "valid", (4, 5): "valid", (5, 6): "records_corrupt",
                   (6, 6): "records_corrupt", (6, 7): "records_corrupt",
                   (7, 7): "position_missing", (7, 8): "position_missing",
                   (8, 8): "position_missing"},
}
_EXPECTED["two_bad_lines"] = _EXPECTED["bad_line"]


def _every_reader(store, refs, monkeypatch) -> dict[str, dict]:
    """Each reference's reason (or "valid") from the one-reference read, the
    engine (whole parse, then the sweep) and both audits."""
    from lecode_memctl.core import sessions as sessions_mod
    from lecode_memctl.core.audit import Audit

    ss = SessionStore(store)
    out = {"one": {ref: ss.validate_source(ref, "durable").reason or "valid" for ref in refs}}
    for name, limit in (("whole", sessions_mod._WHOLE_LIMIT), ("sweep", 0)):
        monkeypatch.setattr(sessions_mod, "_WHOLE_LIMIT", limit)
        out[name] = {ref: st.reason or "valid"
                     for ref, st in ss.validate_many(list(refs), "durable").items()}
    monkeypatch.undo()
    for deep in (False, True):
        a = Audit(store, deep=deep, parallel=False, now=1.9e9)
        list(a.run())
        got = dict.fromkeys(refs, "valid")
        got.update({ref: st.reason for (ref, _p), st in a._statuses.items() if ref in got})
        out["deep" if deep else "default"] = got
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("pad", [0, 3000])      # 3000: past the binary search's linear window
@pytest.mark.parametrize("tail", sorted(_TAILS))
@pytest.mark.parametrize("torn", [False, True])
def test_corrupt_lines_at_the_end_matter_only_where_they_are(store, tail, pad, torn, monkeypatch):
    """Corrupt lines after the last record sit at the position after it: a
    span that starts there is corrupt, one that starts further on is past the
    end (position_missing) -- for the one-reference read, the engine (whole
    parse and sweep), ``records``/``read`` and both audits alike."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import PositionMissing

    recs = [msg(i, f"m{i} " + "x" * pad) for i in range(1, 7)]
    by_seq = {r["seq"]: r for r in recs}
    expected = _EXPECTED[tail]
    # one transcript per span (the default audit parses only the cited
    # spans' lines), and one citing every span
    groups = [(f"c{i}", [span]) for i, span in enumerate(expected)] + [("call", list(expected))]
    want = {}
    with FactStore(store.facts_db) as fs:
        for sid, spans in groups:
            lines = _TAILS[tail]([line(header(sid))] + [line(r) for r in recs])
            write(store, b"".join(lines) + (b'{"seq":99,"ty' if torn else b""), sid=sid)
            for lo, hi in spans:
                ref = SourceRef(sid, tuple(range(lo, hi + 1)),
                                canonical_digest([by_seq.get(q, {"seq": q}) for q in range(lo, hi + 1)]))
                fs.add(f"fact {sid} {lo} {hi}", ref=ref)
                want[ref] = expected[(lo, hi)]
    for reader, got in _every_reader(store, want, monkeypatch).items():
        assert got == want, reader
    # the range reads: corrupt (exit 5) or past the end (exit 3)
    ss = SessionStore(store)
    last = 6 if tail != "split_last" else 5
    for (lo, hi), reason in expected.items():
        if reason == "records_corrupt":
            with pytest.raises(SessionCorrupt):
                ss.records("call", lo, hi)
        elif reason == "position_missing":
            assert [r["seq"] for r in ss.records("call", lo, hi)] == list(range(lo, last + 1))
            if lo > last:
                with pytest.raises(PositionMissing):
                    ss.source_snapshot("call", lo, hi)
    assert run_cli("--store", str(store.path), "read", "call", str(last + 1), str(last + 1)).exit_code == 5
    assert run_cli("--store", str(store.path), "read", "call", str(last + 2), str(last + 3)).exit_code == 3


def test_a_huge_line_before_corrupt_lines_at_the_end(store, monkeypatch):
    """The same rule where the line before the corrupt ones is longer than
    the readers parse to place them: a record (taken at its word by its
    first bytes), or the first half of one split in two, which is not."""
    from lecode_memctl.core.facts import FactStore

    big = msg(6, "z" * (3 << 20))
    whole = orjson.dumps(big)
    tails = {   # -> the record before the corrupt lines
        "record": ([whole, b"{not json"], 6),
        "split_at_start": (whole.replace(b',"type"', b',\n"type"', 1).split(b"\n"), 5),
        "split_in_content": ([whole[:len(whole) // 2], whole[len(whole) // 2:-30], whole[-30:]], 5),
    }
    want = {}
    with FactStore(store.facts_db) as fs:
        for name, (tail, c) in tails.items():
            sid = name.replace("_", "-")
            recs = [msg(i, f"m{i}") for i in range(1, 6)] + [big]
            write(store, b"".join([line(header(sid))] + [line(r) for r in recs[:5]]
                                  + [t + b"\n" for t in tail]), sid=sid)
            for q in (c, c + 1, c + 2):
                ref = SourceRef(sid, (q,), canonical_digest([recs[q - 1]] if q <= 6 else [{"seq": q}]))
                fs.add(f"fact {sid} {q}", ref=ref)
                want[ref] = {c: "valid", c + 1: "records_corrupt", c + 2: "position_missing"}[q]
    for reader, got in _every_reader(store, want, monkeypatch).items():
        assert got == want, reader


def test_the_default_audit_places_a_run_of_corrupt_lines_once(tmp_path, monkeypatch):
    """A run of corrupt lines before a cited span sits after one record: the
    default audit looks back for it once, not once per line (it was
    quadratic: 58 s for 4,000 such lines of 60 bytes)."""
    import orjson as _orjson

    from lecode_memctl.core.audit import Audit, transcripts as tr
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(tmp_path / "runs-0123456789ab")
    st.sessions_dir.mkdir(parents=True)
    hdr = {"seq": 0, "type": "session", "format": 1, "session_id": "s1",
           "project": "runs-0123456789ab", "created": "2026-01-01T00:00:00Z"}
    msgs = [{"seq": i, "type": "message", "role": "user", "content": f"m{i}"} for i in range(1, 8)]
    lines = [_orjson.dumps(r) for r in [hdr, *msgs[:5]]] + [b"{not json yyy}"] * 500 \
        + [_orjson.dumps(r) for r in msgs[5:]]
    (st.sessions_dir / "s1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with FactStore(st.facts_db) as fs:
        fs.add("six", ref=SourceRef("s1", (6,), canonical_digest([msgs[5]])))
    calls = []
    real = tr.record_before
    monkeypatch.setattr(tr, "record_before", lambda fd, off: calls.append(off) or real(fd, off))
    a = Audit(st, parallel=False, now=1.9e9)
    list(a.run())
    assert len(calls) == 1


@pytest.mark.parametrize("digits", [60, 5000])
def test_a_seq_of_thousands_of_digits_is_a_corrupt_line_to_every_reader(store, monkeypatch,
                                                                        digits):
    """A line that begins {"seq": and 5,000 digits: the first-bytes read of
    a seq (fast_seq) handed them to int(), which refuses more than 4,300
    digits, and facts, validate and context failed with an internal error.
    It is a corrupt line to every reader, and the spans around it read as
    any corrupt line leaves them."""
    from lecode_memctl.core.facts import FactStore

    recs = [msg(1, "one"), msg(2, "two"), msg(3, "three")]
    huge = b'{"seq":' + b"1" * digits + b',"type":"message","role":"user","content":"x"}\n'
    write(store, line(header()) + line(recs[0]) + line(recs[1]) + huge + line(recs[2]))
    refs = [SourceRef(SID, (r["seq"],), canonical_digest([r])) for r in recs]
    refs.append(SourceRef(SID, (2, 3), canonical_digest(recs[1:])))
    with FactStore(store.facts_db) as fs:      # (the audits judge the facts' references)
        for i, ref in enumerate(refs):
            fs.add(f"fact {i}", ref=ref)
    got = _every_reader(store, refs, monkeypatch)
    want = {refs[0]: "valid", refs[1]: "valid", refs[2]: "valid", refs[3]: "records_corrupt"}
    assert got == {k: want for k in got}, got
    before = tree_hash(store.path)
    for argv in (("facts", "--all", "--format", "jsonl"), ("validate", "--json"),
                 ("validate", "--deep", "--json"), ("context", "--json"), ("read", SID, "3", "3")):
        r = run_cli("--store", str(store.path), "--no-state", *argv)
        assert "internal error" not in r.stderr + r.stdout, (argv, r.stderr)
        assert r.exit_code in (0, 1), (argv, r.exit_code, r.stderr)
    assert tree_hash(store.path) == before
