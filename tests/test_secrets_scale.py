"""``memctl secrets`` does not go quadratic in the number of hits in one text.

* Overlaps: a candidate was checked against every hit already taken, and
  each hit's line number counted the newlines from the start of its text
  (hits x text): a MEMORY.md or one tool message with 20,000 keys took 10 s.

The results are the old code's, kept here as the reference: the same hits, in
the same order, with the same line numbers."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core import secrets
from lecode_memctl.core.secrets import Detector, Hit, _non_overlapping, _text_hits

from .builders import Counted

# -- the old code, the reference ------------------------------------------------

def _ref_non_overlapping(cands: list[tuple[int, int, int, str]]) -> list[Hit]:
    taken: list[Hit] = []
    for _prio, s, e, slug in cands:
        if e <= s or any(s < h.end and h.start < e for h in taken):
            continue
        taken.append(Hit(s, e, slug))
    taken.sort(key=lambda h: h.start)
    return taken


def _ref_text_hits(detector, text: str, filename: str) -> list[tuple[str, str, int]]:
    return [(text[h.start:h.end], h.detector, text.count("\n", 0, h.start) + 1)
            for h in detector.scan(text, filename)]


# -- overlaps --------------------------------------------------------------------

def _cands(n: int) -> list[tuple[int, int, int, str]]:
    """n keys found by a specific detector, each also seen, overlapping, by a
    generic one, plus a generic hit between each two keys."""
    out: list[tuple[int, int, int, str]] = []
    for i in range(n):
        b = 10 * i
        out.append((0, Counted(b), Counted(b + 5), "aws-access-key"))
        out.append((1, Counted(b + 3), Counted(b + 8), "high-entropy"))
        out.append((1, Counted(b + 6), Counted(b + 9), "high-entropy"))
    out.sort()
    return out


def _overlap_comparisons(n: int) -> int:
    cands = _cands(n)
    Counted.calls = 0
    got = _non_overlapping(cands)
    calls = Counted.calls
    assert len(got) == 2 * n
    return calls


def test_overlaps_are_not_checked_against_every_hit() -> None:
    # (measured: 3,743 and 14,993 comparisons; the old check against every
    # hit, 189,248 and 3,006,998; at 1,000 and 4,000 keys, 4x and 16x as
    # many both ways, and 0.4 s where 0.07 s tells them apart as well)
    small, large = _overlap_comparisons(250), _overlap_comparisons(1_000)
    # a check against every hit taken is quadratic (16x for 4x); a cursor is linear
    assert large < 5 * small, (small, large)
    assert large < 60 * 1_000, large


_cand = st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(-3, 20),
                  st.sampled_from(["a", "b", "c"])).map(lambda t: (t[0], t[1], t[1] + t[2], t[3]))


@pytest.mark.heavy
@settings(max_examples=500, deadline=None)
@given(st.lists(_cand, max_size=40))
def test_overlaps_are_the_old_definition(cands: list[tuple[int, int, int, str]]) -> None:
    cands.sort()
    assert _non_overlapping(cands) == _ref_non_overlapping(cands)


# -- line numbers ----------------------------------------------------------------

class _CountingText(str):
    """A text that counts the characters its ``count`` calls look at."""
    looked = 0

    def count(self, sub, start=None, end=None):  # type: ignore[override]
        s = 0 if start is None else start
        e = len(self) if end is None else end
        _CountingText.looked += max(0, e - s)
        return str.count(self, sub, start, end)


class _FakeDetector:
    """A hit on every line (the detector's own cost is not what is measured)."""

    def scan(self, text: str, filename: str = "memory.txt") -> list[Hit]:
        hits, pos = [], 0
        for line in str(text).split("\n"):
            hits.append(Hit(pos + 4, pos + len(line), "aws-access-key"))
            pos += len(line) + 1
        return hits


def _looked(n: int) -> int:
    text = _CountingText("\n".join(f"key AKIA{i:016d}" for i in range(n)))
    _CountingText.looked = 0
    got = list(_text_hits(_FakeDetector(), text, "MEMORY.md"))  # type: ignore[arg-type]
    assert [ln for _v, _d, ln in got] == list(range(1, n + 1))
    return _CountingText.looked


def test_line_numbers_do_not_recount_the_text() -> None:
    small, large = _looked(1_000), _looked(4_000)
    assert large < 5 * small, (small, large)
    assert large <= len("key AKIA0000000000000000\n") * 4_000, large


def _corpus(seed: int) -> str:
    """Text with keys of several detectors, some next to each other, some
    overlapping the generic detectors' hits, on lines of their own or not."""
    rng = random.Random(seed)
    up = string.ascii_uppercase + "234567"
    aln = string.ascii_letters + string.digits
    parts = []
    for _ in range(rng.randint(0, 30)):
        k = rng.randrange(8)
        if k == 0:
            parts.append("AKIA" + "".join(rng.choice(up) for _ in range(16)))
        elif k == 1:
            parts.append("ghp_" + "".join(rng.choice(aln) for _ in range(36)))
        elif k == 2:
            parts.append('password = "' + "".join(rng.choice(aln) for _ in range(14)) + '"')
        elif k == 3:
            parts.append('"' + "".join(rng.choice(aln + "+/") for _ in range(40)) + '"')
        elif k == 4:
            parts.append("postgres://u:" + "".join(rng.choice(aln) for _ in range(12)) + "@h/db")
        elif k == 5:
            parts.append("\n" * rng.randint(1, 3))
        elif k == 6:
            parts.append(rng.choice(["", " ", "key: ", "é ", "\udcff"]))
        else:
            parts.append("".join(rng.choice(aln + " ") for _ in range(rng.randint(0, 30))))
        parts.append(rng.choice(["", " ", "\n", ","]))
    return "".join(parts)


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


def test_text_hits_are_the_old_ones(detector: Detector) -> None:
    found = 0
    for seed in range(60):
        text = _corpus(seed)
        want = _ref_text_hits(detector, text, "MEMORY.md")
        assert list(_text_hits(detector, text, "MEMORY.md")) == want, seed
        found += len(want)
    assert found > 100, found       # (the corpus does hold secrets)


def test_scan_is_the_old_scan(detector: Detector, monkeypatch) -> None:
    """Detector.scan with the old overlap loop gives the same hits."""
    for seed in range(60, 90):
        text = _corpus(seed)
        new = detector.scan(text, "MEMORY.md")
        with monkeypatch.context() as m:
            m.setattr(secrets, "_non_overlapping", _ref_non_overlapping)
            old = detector.scan(text, "MEMORY.md")
        assert new == old, seed
