"""The listing's shortcuts give the general path's values: ``utc_time`` of a
canonical RFC 3339 text (returned as it is, once it is a real time) against
the parse-and-format path, and ``RowModel.record`` against ``RowModel.row``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core import rowmodel
from lecode_memctl.core.rowmodel import FACT, utc_time


def _formatted(value: str) -> str | None:
    """utc_time's general path: parse, convert to UTC, format."""
    text = value.strip()
    try:
        dt = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    # (isoformat writes the year with its four digits, as RFC 3339 wants)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.heavy
@settings(max_examples=500)
@given(st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\Z"))
def test_canonical_looking_times(value: str) -> None:
    assert utc_time(value) == _formatted(value)


def test_canonical_looking_times_at_every_field_edge() -> None:
    """Every combination of each field's edges (the values either side of
    its range, leap days, the years datetime can and cannot hold): the
    cases a random draw of digits reaches rarely."""
    import itertools

    years = ["0000", "0001", "1900", "1970", "2000", "2023", "2024", "2100", "9999"]
    months = ["00", "01", "02", "04", "12", "13", "99"]
    days = ["00", "01", "28", "29", "30", "31", "32", "99"]
    hours = ["00", "23", "24", "99"]
    minutes = ["00", "59", "60"]
    seconds = ["00", "59", "60", "61"]
    millis = ["000", "999"]
    for y, mo, d, h, mi, s, ms in itertools.product(years, months, days, hours, minutes,
                                                    seconds, millis):
        value = f"{y}-{mo}-{d}T{h}:{mi}:{s}.{ms}Z"
        assert utc_time(value) == _formatted(value), value


@settings(max_examples=1000)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_real_times(d: datetime) -> None:
    value = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:" \
            f"{d.second:02d}.{d.microsecond // 1000:03d}Z"
    assert utc_time(value) == _formatted(value)


def test_the_shortcut_is_taken() -> None:
    assert rowmodel._CANONICAL_TIME.match("2026-03-01T09:00:00.000Z")
    assert utc_time("2026-02-30T09:00:00.000Z") is None


def test_numbers_beyond_a_time_are_none() -> None:
    """Epoch seconds past what datetime or time_t holds are not a time (None),
    never an OverflowError, OSError or ValueError (found by test_record_is_row)."""
    for value in (10**20, -10**20, 2**63, -62135596801, float("inf"), float("nan")):
        assert utc_time(value) is None
    assert utc_time(0) == "1970-01-01T00:00:00.000Z"


values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans())


@given(st.fixed_dictionaries({n: values for n in FACT.names[1:]}),
       st.sampled_from([None, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000Z", 0, "x"]))
def test_record_is_row(row: dict, when: object) -> None:
    row["created"] = when
    assert FACT.record(row) == FACT.row(**row)
    assert list(FACT.record(row)) == list(FACT.row(**row))
    reordered = dict(reversed(list(row.items())))
    assert list(FACT.record(reordered)) == FACT.names


@pytest.mark.parametrize(("value", "want"), [
    ("0999-06-01T00:00:00.000Z", "0999-06-01T00:00:00.000Z"),
    ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
    ("0050-03-04T05:06:07.891+00:00", "0050-03-04T05:06:07.891Z"),
])
def test_a_year_below_1000_keeps_its_zeros(value, want):
    """strftime's %Y wrote 0999 as 999, which is no RFC 3339 time: a row
    dated so made --since/--until fail (exit 70) and the first moment of the
    calendar printed as 1-01-01T..."""
    from lecode_memctl.core.rowmodel import parse_when, utc_time

    assert utc_time(value) == want
    assert utc_time(parse_when(want)) == want
