"""``is_digest``: 64 lower-case hex digits, as ``[0-9a-f]{64}`` says it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core.sourceref import SourceRef, is_digest, stored_ref_ok

HEX64 = re.compile(r"[0-9a-f]{64}\Z")
HEX = "0123456789abcdef"
# what may stand in a digest's place: upper case, whitespace bytes.fromhex
# skips, separators int() takes, non-ASCII digits, NUL
ODD = HEX + "ABCDEFgxz \t\n\r\x0b\x0c_+-\u0660\u00e9\x00\u2028"


@st.composite
def near_digests(draw: st.DrawFn) -> str:
    # (one string drawn, then made a list: the same lists of 62-66 hex
    # digits as st.lists(st.sampled_from(HEX)), for a fifth of the time)
    chars = list(draw(st.text(alphabet=HEX, min_size=62, max_size=66)))
    for _ in range(draw(st.integers(0, 3))):
        if chars:
            chars[draw(st.integers(0, len(chars) - 1))] = draw(st.sampled_from(ODD))
    return "".join(chars)


@pytest.mark.heavy
@settings(max_examples=400, deadline=None)
@given(value=st.one_of(near_digests(), st.text(max_size=70)))
def test_is_digest_is_the_regular_expression(value: str) -> None:
    assert is_digest(value) == (HEX64.match(value) is not None)
    assert stored_ref_ok("s1", [1], value) == (HEX64.match(value) is not None)


def test_what_is_no_digest() -> None:
    for value in ("0" * 63, "0" * 65, "A" * 64, " " + "0" * 63, "00 " + "0" * 61,
                  "0" * 63 + "\n", "0x" + "0" * 62, b"0" * 64, None, 64):
        assert not is_digest(value)
        try:
            SourceRef("s1", (1,), value)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - UsageError, the constructor's
            assert "64 lower-case hex digits" in str(exc)
        else:
            raise AssertionError(f"SourceRef took the digest {value!r}")
    assert is_digest("0123456789abcdef" * 4)


def test_a_str_subclass_is_judged_by_its_characters() -> None:
    class Long(str):
        def __len__(self) -> int:
            return 64

    class Equal(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    assert not is_digest(Long("00"))
    assert not is_digest(Equal("AB" * 32))
    assert is_digest(Equal("ab" * 32))
