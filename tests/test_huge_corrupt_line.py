"""A huge corrupt line that does not begin ``{"seq":N,``, next to a range
or inside it: judged by its first bytes and read a piece at a time, never
held whole (issue 16.5's rule for a huge record, extended).

``read gb 1 1`` before a 300 MiB line of ``x`` took 947 MB, ``read gb 2 2``
after it the same, ``read gb 1 2`` across it 1.2 GB; the statuses, kinds,
lines and messages are what parsing the line whole says."""

from __future__ import annotations

import os
import random
import sys

import orjson
import pytest

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import HUGE_LINE, _classify, classify_huge

from .conftest import REPO, run_cli
from .test_bad_input import _peak_child_rss

SLUG = "proj-0123456789ab"
HEAD = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "gb",
                     "project": SLUG, "created": "2026-12-01T09:00:00+00:00"})
REC1 = b'{"seq":1,"type":"message","role":"user","content":"hi"}'
REC2 = b'{"seq":2,"type":"message","role":"user","content":"bye"}'


@pytest.fixture
def store(tmp_path):
    return store_at(tmp_path / "memory" / SLUG)


def write(store, bad: bytes) -> None:
    d = store.path / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    (d / "gb.jsonl").write_bytes(b"\n".join([HEAD, REC1, bad, REC2]) + b"\n")


def _judge(tmp_path, line: bytes):
    p = tmp_path / "line"
    p.write_bytes(line + b"\n")
    fd = os.open(p, os.O_RDONLY)
    try:
        return classify_huge(fd, 0, len(line))
    finally:
        os.close(fd)


BIG = 200 << 10       # past the 64 KiB classify_huge parses


@pytest.mark.parametrize("line", [
    b"x" * BIG, b"\0" * BIG, b"[1,2,x" + b"y" * BIG, b'{"a":tru' + b"e" * BIG,
    b'{"a":1} trailing' + b" " * BIG, b"\xef\xbb\xbf{}" + b" " * BIG,
    b'{"seq":01,' + b"x" * BIG, b'{"seq":-1,' + b"x" * BIG, b'{"seq":"1",' + b"x" * BIG,
    b"x" * BIG + b"\xff", b"x" * BIG + b"\xc3", b"x" * BIG + b"\xed\xa0\x80",
    b"x" * BIG + b"\xc0\x80", b"x" * BIG + b"\xf4\x90\x80\x80", b"x" * (1 << 16) + b"\xe2\x82\xac",
    b"x" * ((1 << 16) - 1) + b"\xe2\x82\xac" + b"x" * BIG, b"\xff" + b"x" * BIG,
])
def test_the_first_bytes_decide_as_the_whole_line_does(tmp_path, line):
    verdict = _judge(tmp_path, line)
    assert verdict is not None, line[:20]
    assert verdict == _classify(line)


@pytest.mark.parametrize("line", [
    b" " * BIG + b"x", b'"' + b"a" * BIG + b'"', b'{"type":"message","seq":2,"c":"' + b"a" * BIG + b'"}',
    b"[1e400," + b"1," * BIG + b"1]", b"[" * 2000 + b"]" * 2000 + b" " * BIG,
    b'{"seq":2,"c":"' + b"a" * BIG, b"[" + b" " * BIG + b"x",
])
def test_what_the_first_bytes_do_not_decide_is_parsed_whole(tmp_path, line):
    assert _judge(tmp_path, line) is None


def test_random_lines_judged_are_judged_as_parsed(tmp_path):
    rng = random.Random(5)
    pieces = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"1", b"-", b".", b"e", b"true", b"nul",
              b" ", b"\\", b"\\u12", b"x", b"\xc3\xa9", b"\xff", b"\xe2\x82", b"\0", b'"seq"']
    judged = 0
    for i in range(400):
        line = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        line += rng.choice([b"a", b" ", b"1", b"]"]) * (70000 + i)
        verdict = _judge(tmp_path, line)
        if verdict is not None:
            judged += 1
            assert verdict == _classify(line), line[:40]
    assert judged > 100


def cli(store, *args):
    return run_cli("--store", str(store.path), *args)


@pytest.mark.parametrize("bad", [
    b"x" * (HUGE_LINE + 10), b"\0" * (HUGE_LINE + 10), b"x" * (HUGE_LINE + 10) + b"\xff",
    b'{"role":"user",' + b"x" * (HUGE_LINE + 10),
])
def test_reads_next_to_and_across_a_huge_corrupt_line(store, bad):
    """Statuses and messages as parsing the line whole gives them."""
    write(store, bad)
    kind, detail = _classify(bad)
    r = cli(store, "read", "gb", "1", "1")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["source"]["seqs"] == [1]
    r = cli(store, "read", "gb", "2", "2")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["source"]["seqs"] == [2]
    for span in (("1", "2"), ("0", "3")):
        r = cli(store, "read", "gb", *span)
        assert r.exit_code == 5, r.stderr
        assert r.stderr.strip() == f"memctl: error: session gb: line 3: {kind}: {detail}"


@pytest.mark.heavy
def test_a_huge_corrupt_line_next_to_a_read_is_never_held(store):
    """8 vs 64 MiB of ``x``: the peak of a read before it, after it and
    across it does not grow (it grew by 3 to 4 times the line)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MEMCTL_DEBUG", None)
    base = [sys.executable, "-m", "lecode_memctl", "--store", str(store.path), "read", "gb"]
    peaks = {}
    for mib in (8, 64):
        write(store, b"x" * (mib << 20))
        for span, rc in ((("1", "1"), 0), (("2", "2"), 0), (("1", "2"), 5)):
            p, peaks[mib, span] = _peak_child_rss(base + list(span), env=env)
            assert p.returncode == rc, p.stderr[-500:]
    print("[huge corrupt line] read 1 1 / 2 2 / 1 2 next to 8 and 64 MiB: peak RSS "
          + ", ".join(f"{k[0]} MiB {'-'.join(k[1])}: {v // 1024} MiB" for k, v in peaks.items()))
    for span in (("1", "1"), ("2", "2"), ("1", "2")):
        assert peaks[64, span] - peaks[8, span] < 16 * 1024, peaks
