"""``facts.plain_source``: the stored values of a source that make a
SourceRef without a word to say, decided as the constructor decides them,
whether the text of positions was decoded before in this process (its
cache) or not."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core import facts
from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.facts import plain_source
from lecode_memctl.core.sourceref import MAX_SPAN, SourceRef

DIGEST = "0123456789abcdef" * 4

_IDS = st.one_of(st.sampled_from(["s1", "a-b_c", "x" * 129, "-a", "a\n", "", "ü"]),
                 st.integers(), st.none())
_SEQ = st.one_of(st.integers(-2, 10), st.just(MAX_SPAN), st.just(MAX_SPAN + 1),
                 st.booleans(), st.floats(0, 3), st.none())
_TEXTS = st.one_of(
    st.lists(_SEQ, max_size=4).map(lambda v: orjson.dumps(v).decode()),
    st.lists(st.integers(0, 400), min_size=1, max_size=3).map(
        lambda v: orjson.dumps(sorted(set(v))).decode()),
    st.sampled_from(["[1]", "[ 1 ]", "[1,]", "[01]", "1", "", "[1.0]", "[true]", "[1,1]",
                     "[2,1]", "[-1]", "[1]x", "[" + ",".join(map(str, range(40))) + "]"]),
    st.binary(max_size=4), st.integers(), st.none())
_DIGESTS = st.one_of(st.just(DIGEST), st.just("A" * 64), st.just("a" * 63), st.just("g" * 64),
                     st.none(), st.binary(max_size=2))


def _constructor(sid, text, digest):
    """The positions SourceRef's constructor takes from the stored values, or None."""
    if type(text) is not str:
        return None
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if type(raw) is not list:
        return None
    try:
        return SourceRef(sid, tuple(raw), digest).seqs
    except (UsageError, TypeError):
        return None


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch):
    monkeypatch.setattr(facts, "_POSITIONS", {})


@settings(max_examples=400, deadline=None)
@given(sid=_IDS, text=_TEXTS, digest=_DIGESTS, other_sid=_IDS, other_digest=_DIGESTS)
def test_decided_as_the_constructor_decides_whether_remembered_or_not(
        sid, text, digest, other_sid, other_digest):
    facts._POSITIONS.clear()
    # the first call decodes the text; the second (another id and digest, the
    # same text) and the third (the first values again) take it remembered
    for s, d in ((sid, digest), (other_sid, other_digest), (sid, digest)):
        got = plain_source(s, text, d)
        want = _constructor(s, text, d)
        assert got == want, (s, text, d, got, want)
        if got is not None:
            assert type(got) is tuple and all(type(p) is int for p in got)
            # (exactly as a SourceRef of the same values holds them)
            assert SourceRef.of_checked(s, got, d) == SourceRef(s, got, d)


def test_a_bad_id_or_digest_is_refused_even_for_a_text_remembered():
    assert plain_source("s1", "[3]", DIGEST) == (3,)
    assert "[3]" in facts._POSITIONS
    assert plain_source("-bad", "[3]", DIGEST) is None
    assert plain_source("s1", "[3]", "A" * 64) is None
    assert plain_source("s1", "[3]", DIGEST) == (3,)


def test_a_text_that_is_not_plain_is_remembered_as_not_plain():
    assert plain_source("s1", "[2,1]", DIGEST) is None
    assert facts._POSITIONS == {"[2,1]": None}
    assert plain_source("s1", "[2,1]", DIGEST) is None


def test_what_is_remembered_is_bounded(monkeypatch):
    monkeypatch.setattr(facts, "_POSITIONS_HELD", 5)
    for i in range(20):
        assert plain_source("s1", f"[{i}]", DIGEST) == (i,)
    assert len(facts._POSITIONS) == 5
    # (a text past the bound is still decided, each time)
    assert plain_source("s1", "[19]", DIGEST) == (19,)
    long = "[" + ",".join(map(str, range(facts._POSITIONS_TEXT))) + "]"
    assert len(long) > facts._POSITIONS_TEXT
    facts._POSITIONS.clear()
    assert plain_source("s1", long, DIGEST) == tuple(range(facts._POSITIONS_TEXT))
    assert long not in facts._POSITIONS
