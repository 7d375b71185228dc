"""SourceRef's fast checks (``stored_ref_ok``, ``checked_fast``, and
``from_json``, which uses them) decide exactly as the constructor does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.sourceref import MAX_SPAN, SourceRef, stored_ref_ok

_IDS = st.one_of(st.sampled_from(["s1", "a-b_c", "x" * 128, "x" * 129, "-a", "_a", "a.b", "a\n",
                                  "", "ü", "a b", "S0"]),
                 st.text(max_size=6), st.integers(), st.none(), st.lists(st.integers(), max_size=1))
_SEQ = st.one_of(st.integers(-2, 10), st.just(MAX_SPAN), st.just(MAX_SPAN + 1), st.booleans(),
                 st.floats(0, 3), st.text(max_size=1), st.none())
_SEQS = st.one_of(st.lists(_SEQ, max_size=5), st.lists(st.integers(0, 400), max_size=4),
                  st.integers(), st.none(), st.text(max_size=2))
_DIGESTS = st.one_of(st.just("a" * 64), st.just("A" * 64), st.just("a" * 63), st.just("g" * 64),
                     st.just("0123456789abcdef" * 4), st.just("a" * 64 + "\n"),
                     st.text(max_size=3), st.integers(), st.none())


def _constructor(sid, seqs, digest):
    try:
        return SourceRef(sid, tuple(seqs), digest)
    except (UsageError, TypeError) as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(sid=_IDS, seqs=_SEQS, digest=_DIGESTS, extra=st.booleans())
def test_from_json_and_checked_fast_decide_as_the_constructor(sid, seqs, digest, extra):
    doc = {"session_id": sid, "seqs": seqs, "digest": digest}
    if extra:
        doc["x"] = 1
    try:
        got = SourceRef.from_json(doc)
    except UsageError:
        got = UsageError
    if extra:
        assert got is UsageError
        return
    if not isinstance(seqs, list):
        assert got is UsageError
        return
    want = _constructor(sid, seqs, digest)
    assert got == want, (doc, got, want)
    if isinstance(got, SourceRef):
        assert hash(got) == hash(want) and repr(got) == repr(want)
        assert stored_ref_ok(sid, seqs, digest)
    if type(sid) is str and type(digest) is str:
        fast = SourceRef.checked_fast(sid, seqs, digest)
        assert fast == (want if isinstance(want, SourceRef) else None)


def test_a_malformed_chunk_still_says_what_is_wrong():
    with pytest.raises(UsageError, match="sorted and distinct"):
        SourceRef.from_json({"session_id": "s1", "seqs": [2, 1], "digest": "a" * 64})
