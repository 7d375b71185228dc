"""``memctl secrets`` on the database's raw pages: a hit already reported in a
live fact text is skipped when it is a prefix of one of those values.  Each hit
was tested against every value (hits x facts): 16,000 facts each holding a
key took 25 s.  A sorted list answers with a binary search; the answers are
the old test's, kept here as the reference."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core.secrets import _Prefixes


def _ref_starts_any(live: set[str], value: str) -> bool:
    return any(v.startswith(value) for v in live)


class _CountingStr(str):
    calls = 0

    def __lt__(self, other):  # type: ignore[override]
        _CountingStr.calls += 1
        return str.__lt__(self, other)

    def __gt__(self, other):  # type: ignore[override]
        _CountingStr.calls += 1
        return str.__gt__(self, other)

    def startswith(self, *a):  # type: ignore[override]
        _CountingStr.calls += 1
        return str.startswith(self, *a)


def _prefix_steps(n: int) -> int:
    rng = random.Random(n)
    live = {_CountingStr("AKIA" + "".join(rng.choice("ABCDEFGH") for _ in range(16)))
            for _ in range(n)}
    pre = _Prefixes(live)             # (the one-off sort is not the query)
    queries = [_CountingStr(v[:rng.randint(4, 20)]) for v in list(live)[:50]]
    queries += [_CountingStr("AKIAZZ" + str(i)) for i in range(50)]
    _CountingStr.calls = 0
    for q in queries:
        assert pre.any_starts_with(q) == (not q.startswith("AKIAZZ"))
    return _CountingStr.calls


def test_prefix_test_does_not_walk_every_value() -> None:
    small, large = _prefix_steps(1_000), _prefix_steps(4_000)
    assert large < 2 * small, (small, large)
    assert large < 100 * 20, large


@pytest.mark.heavy
@settings(max_examples=500, deadline=None)
@given(st.sets(st.text("ab\udcffé", max_size=5)), st.lists(st.text("ab\udcffé", min_size=1, max_size=5),
                                                          max_size=10))
def test_prefix_test_is_the_old_one(live: set[str], queries: list[str]) -> None:
    pre = _Prefixes(live)
    for q in queries + sorted(live):
        if q:
            assert pre.any_starts_with(q) == _ref_starts_any(live, q), (live, q)


def test_raw_offsets_are_the_values_bytes(tmp_path) -> None:
    """Offsets counted on from hit to hit are the old ones (the bytes of the
    value start there), with multi-byte and undecodable bytes between keys
    of one printable run, and values of live facts skipped (also as prefixes)."""
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import Detector, Scanner

    rng = random.Random(3)
    up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    keys = ["AKIA" + "".join(rng.choice(up) for _ in range(16)) for _ in range(40)]
    fillers = [" ", " é ", "\xff".encode("latin-1").decode("latin-1"), " ☃ ", "\n"]
    parts: list[bytes] = []
    for i, k in enumerate(keys):
        f = fillers[i % len(fillers)]
        parts.append(f.encode("latin-1") if f == "\xff" else f.encode())
        parts.append(k.encode())
        if i % 7 == 0:
            parts.append(b"\x00\x01")           # a new printable run
    data = b"".join(parts)
    path = tmp_path / "raw.db"
    path.write_bytes(data)
    sc = Scanner(store_at(tmp_path / "s"), Detector())
    live = {keys[3], keys[5] + "XYZ"}
    sc._database("raw.db", str(path), live)
    got = {f.secret_value(): f.offset for f in sc.report.findings}
    want = {k: data.index(k.encode()) for k in keys if k not in (keys[3], keys[5])}
    assert got == want
