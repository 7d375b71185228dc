"""The row model of every memctl listing: one list of fields per record type.

A command builds its rows once, as plain dicts whose keys are exactly the
fields of its :class:`RowModel` (``type`` first); every output format renders
those rows: JSON field names = JSONL keys = CSV/TSV headers.  The models are
also the source of docs/OUTPUT.md (the field tables) and of the JSON Schema
that ``memctl schema`` prints, so the three cannot drift apart.

Flat encoding (CSV/TSV cells): null is an empty cell, booleans are ``true`` /
``false``, a list of scalars is its items joined by ``;`` and any other list
or object is compact JSON.  Every timestamp is RFC 3339 in UTC with ``Z``
(:func:`utc_time`).

Change :data:`SCHEMA_VERSION` whenever a field is renamed, removed or changes
meaning, and say so in docs/OUTPUT.md, "Changes".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import orjson

from ._lazy import lazy_compile

SCHEMA_VERSION = 3


def stored_int(value: Any) -> int | None:
    """A stored number as a row gives it where the schema says integer or
    null: the integer, or null for anything else (a real, a text, a BLOB,
    +Inf, a bool: a damaged database's or a hand-edited file's)."""
    return value if type(value) is int else None

if TYPE_CHECKING:
    from .rowtables import (
        CODE as CODE,
        FACT as FACT,
        FACT_CHECK as FACT_CHECK,
        FINDING as FINDING,
        HIT as HIT,
        MATCH as MATCH,
        MATCH_COUNT as MATCH_COUNT,
        MODELS as MODELS,
        NOTE as NOTE,
        PLAN_ITEM as PLAN_ITEM,
        PROBLEM as PROBLEM,
        PROJECT as PROJECT,
        REVISION as REVISION,
        REWRITE as REWRITE,
        SECRET as SECRET,
        SECRETS_SCAN as SECRETS_SCAN,
        SESSION as SESSION,
        SETTING as SETTING,
        SUMMARY as SUMMARY,
        USAGE as USAGE,
        Field as Field,
        RowModel as RowModel,
        check_rows as check_rows,
        schema_document as schema_document,
    )
else:
    from ._lazy import lazy_getattr

    # Loaded on first use (see core/_lazy.py): building the models costs a
    # few hundred Field records at every start-up, and a command needs them
    # only for --json, CSV or a table.
    _MOVED = dict.fromkeys((
        "Field", "RowModel", "FACT", "SESSION", "NOTE", "HIT", "REVISION", "USAGE",
        "PROJECT", "FINDING", "SUMMARY", "CODE", "PLAN_ITEM", "SETTING", "MATCH",
        "MATCH_COUNT", "SECRET", "SECRETS_SCAN", "REWRITE", "FACT_CHECK", "PROBLEM",
        "MODELS", "schema_document", "check_rows"), ".rowtables")
    __getattr__ = lazy_getattr(__name__, _MOVED)


def doc_head(doc_type: str) -> dict[str, Any]:
    """The first two members of every --json document: its type and the schema version."""
    return {"type": doc_type, "schema_version": SCHEMA_VERSION}


TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"
# lecode's own times: each field's range in the pattern (a year from 1000, as
# the four digits show it), so that only a day from 29 on needs the calendar
_CANONICAL_TIME = lazy_compile(r"[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
                               r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z\Z")


def utc_time(value: Any) -> str | None:
    """RFC 3339 UTC with ``Z`` and milliseconds (``2026-03-01T09:00:00.000Z``)
    from epoch seconds, a datetime, a date, or an ISO 8601 string (a time
    without an offset is taken as UTC).  None for None or text that is not a
    time."""
    if value is None:
        return None
    if type(value) is str and len(value) == 24 and _CANONICAL_TIME.match(value):
        # already RFC 3339 UTC with milliseconds (as lecode writes its times):
        # the same text, once it is a real time (a day up to 28 is in every
        # month; the pattern holds the other fields to their ranges)
        if value[8] == "3" or value[8:10] == "29":
            try:
                datetime.fromisoformat(value[:23])
            except ValueError:
                return None
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            dt = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None     # beyond what a time can be here (year 1..9999, time_t)
    elif isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text
                                        else text)
        except ValueError:
            return None
    else:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        dt = dt.astimezone(UTC)
    except OverflowError:
        return None     # (0001-01-01T00:00:00+14:00: before the year 1 in UTC)
    # (not strftime: its %Y gives a year below 1000 without its zeros here)
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
            f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z")


def flat(value: Any) -> str:
    """One CSV/TSV cell (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            return ";".join(str(v) for v in value)
        return orjson.dumps(list(value), option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    if isinstance(value, Mapping):
        return orjson.dumps(dict(value), option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    return str(value)


_RELATIVE = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


#: A relative age of --since/--until: N followed by s, m, h, d or w.
_AGE = re.compile(r"([0-9]+)([smhdw])")


def is_age(text: str | None) -> bool:
    """Whether a --since/--until value is a relative age (``7d``), which
    :func:`parse_when` reads against now: what a command printed for later
    must give as the time it meant."""
    return text is not None and _AGE.fullmatch(text.strip()) is not None


def micro_time(when: datetime) -> str:
    """RFC 3339 UTC to the microsecond (``2026-03-01T09:00:00.123456Z``):
    the exact moment, where :func:`utc_time` rounds to milliseconds."""
    when = when.astimezone(UTC) if when.tzinfo is not None else when
    return (f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when.hour:02d}:"
            f"{when.minute:02d}:{when.second:02d}.{when.microsecond:06d}Z")


def parse_when(text: str, *, option: str = "--since", until: bool = False,
               now: datetime | None = None) -> datetime:
    """A --since/--until value: a date (YYYY-MM-DD, UTC; for --until the end
    of that day), an RFC 3339 time (UTC unless it has an offset; ``t``/``z``
    in either case, or a space for ``T``; the seconds may be left out),
    or a relative age: N followed by s, m, h, d or w (7d: seven days ago)."""
    from datetime import timedelta

    from .errors import UsageError

    value = (text or "").strip()
    m = _AGE.fullmatch(value)
    if m:
        base = now or datetime.now(UTC)
        digits = m.group(1).lstrip("0") or "0"
        try:
            # (more than 12 digits of seconds, weeks even, is past the
            # calendar: no conversion of a number of thousands of digits)
            if len(digits) > 12:
                raise OverflowError
            return base - timedelta(seconds=int(digits) * _RELATIVE[m.group(2)])
        except OverflowError:   # an age older than the calendar: its first moment
            return datetime.min.replace(tzinfo=UTC)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            d = date.fromisoformat(value)
        except ValueError:
            raise UsageError(f"{option} {text!r}: not a real date") from None
        dt = datetime(d.year, d.month, d.day, tzinfo=UTC)
        # (for --until, the day's last microsecond: 9999-12-31 has no next day)
        return dt.replace(hour=23, minute=59, second=59, microsecond=999999) if until else dt
    # RFC 3339's form (5.6: "T" and "Z" in either case; a space for "T" as
    # its note allows; the seconds may be left out, and the offset, for
    # UTC): ISO 8601's basic forms (T1200Z, +0100, an hour alone) are
    # refused, as is a comma for the fraction (before 2026-12-07 fromisoformat
    # took them, and refused a lower-case t)
    timelike = re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
                            r"(?:[Zz]|[+-]\d{2}:\d{2})?", value, re.ASCII)
    iso = utc_time(value) if timelike else None
    if iso is None:
        if timelike and _parses(value):
            raise UsageError(f"{option} {text!r}: outside the years 1 to 9999 in UTC")
        raise UsageError(f"{option} {text!r}: use a date (2026-05-01), an RFC 3339 time "
                         "(2026-05-01T12:00:00Z) or an age (30m, 12h, 7d, 2w)")
    return _aware(value)


def _parses(value: str) -> bool:
    try:
        _aware(value)
    except ValueError:
        return False
    return True


def _aware(value: str) -> datetime:
    dt = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1:] in "zZ" else value)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def record_time(rec: Mapping[str, Any], fallback: datetime | None) -> datetime | None:
    """The time ``--since``/``--until`` compare for a transcript record
    (``grep``, ``usage``): its own ``ts``, ``time`` or ``created``, the first
    that is text :func:`utc_time` reads as a time, as it prints it (UTC,
    milliseconds); else ``fallback`` (the session header's, read so).
    (Before 2026-12-07 grep and usage read only an upper-case ``Z``, with no
    space around the time: a header ``sessions`` showed gave its records no
    time, outside every window.)"""
    for k in ("ts", "time", "created"):
        v = rec.get(k)
        if isinstance(v, str):
            iso = utc_time(v)
            if iso is not None:
                return _aware(iso)
    return fallback


def in_window(value: Any, since: datetime | None, until: datetime | None) -> bool:
    """Whether a row's time (any form :func:`utc_time` takes) is within
    [since, until]; a row without a time is outside any window."""
    if since is None and until is None:
        return True
    iso = utc_time(value)
    if iso is None:
        return False
    t = _aware(iso)
    return (since is None or t >= since) and (until is None or t <= until)


# Compiled at first use (re's cache): only an object orjson refused needs it.
_SURROGATE = "[\ud800-\udfff]"


def quoted(value: str) -> str:
    """``repr(value)`` with each byte of a file name that is not UTF-8 (a
    lone surrogate, from ``os.listdir``) spelt ``\\xNN``, as
    :func:`no_surrogates` spells it in a row's fields, not ``\\udcNN``: a
    store or note name quoted in a message reads as the row's
    ``project`` reads."""
    return re.sub(r"(?<!\\)((?:\\\\)*)\\udc([89a-f][0-9a-f])", r"\1\\x\2", repr(value))


def no_surrogates(obj: Any) -> Any:
    """``obj`` with every str's lone surrogates (a file name's non-UTF-8 bytes)
    written as ``\\xNN``, the way human output shows them: JSON is UTF-8 and
    cannot carry them (issue 16.5: a note named with a 0x9b byte was exit 70).
    The one rule of the CLI's JSON (``cli.output.dumps``) and of a bundle's
    manifest (``bundle.canonical``)."""
    if isinstance(obj, str):
        return re.sub(_SURROGATE, lambda m: f"\\x{ord(m.group(0)) - 0xDC00:02x}"
                      if 0xDC80 <= ord(m.group(0)) <= 0xDCFF
                      else f"\\u{ord(m.group(0)):04x}", obj)
    if isinstance(obj, dict):
        return {no_surrogates(k): no_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [no_surrogates(v) for v in obj]
    from pathlib import PurePath

    if isinstance(obj, PurePath):
        return no_surrogates(str(obj))
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return no_surrogates(dataclasses.asdict(obj))
    return obj
