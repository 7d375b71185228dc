"""validate's default pass decides each cited span's own corruption by a
binary search over the transcript's corrupt lines, not a walk over all of
them: once per span, the walk made a transcript with a corrupt line after
every other record and a fact citing each record quadratic (40,000 records:
12 s against 0.95 s at 10,000)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.audit.transcripts import _span_status
from lecode_memctl.core.sessions import UndoState

from .builders import Counted


def _comparisons(k: int) -> int:
    # corrupt lines after every even seq up to 2k; the span 2k+1..2k+1 touches none
    corrupt: list[int] = [Counted(2 * i) for i in range(k)]
    rec = {"seq": 2 * k + 1, "type": "message", "role": "user", "content": "x"}
    Counted.calls = 0
    st = _span_status((2 * k + 1,), "0" * 64, "durable", {2 * k + 1: rec}, corrupt, 2 * k + 1,
                      frozenset(), 0, UndoState())
    assert st.reason != "records_corrupt"
    return Counted.calls


def test_span_does_not_walk_every_corrupt_line() -> None:
    small, large = _comparisons(1_000), _comparisons(4_000)
    assert large < 2 * small, (small, large)
    assert large < 100, large


@pytest.mark.parametrize(("corrupt", "span", "present", "expected"), [
    ([4], (5, 9), True, False),       # after lo-1, the first record present
    ([4], (5, 9), False, True),       # after lo-1, the first record missing
    ([5], (5, 9), True, True),        # inside
    ([8], (5, 9), True, True),        # after hi-1: between hi-1 and hi
    ([9], (5, 9), True, False),       # after hi
    ([3, 9], (5, 9), True, False),
    ([1, 2, 4, 4, 7, 12], (5, 6), True, False),
    ([1, 2, 4, 4, 7, 12], (5, 6), False, True),
    ([1, 2, 4, 4, 7, 12], (6, 8), True, True),
    ([-1, -1, 0], (0, 0), False, True),
    ([], (5, 9), False, False),
])
def test_corrupt_line_placement(corrupt: list[int], span: tuple[int, int], present: bool,
                                expected: bool) -> None:
    lo, hi = span
    records = {s: {"seq": s, "type": "message", "role": "user", "content": "x"}
               for s in range(lo, hi + 1) if present or s != lo}
    st = _span_status((lo, hi), "0" * 64, "durable", records, sorted(corrupt), hi,
                      frozenset(), 0, UndoState())
    assert (st.reason == "records_corrupt" and "corrupt line" in (st.detail or "")) == expected, st
