"""The time ``--since``/``--until`` compare for a transcript record, in
``grep`` and ``usage``: its own ``ts``/``time``/``created``, else its
session header's ``created``, read as every other time is read
(``rowmodel.utc_time``, which ``sessions`` and ``facts`` print with).

Before 2026-12-07 both parsed it with ``fromisoformat`` after replacing an
upper-case ``Z`` only: a header created ``2026-12-01T09:00:00z`` (RFC 3339
allows the lower case) or with spaces around it, which ``sessions`` shows
as ``2026-12-01T09:00:00.000Z``, gave its records no time, so they fell
outside every window: ``usage --since`` counted 1 call of 2, ``grep
--since`` found one session of two."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from lecode_memctl.core.rowmodel import record_time

from .conftest import run_cli

SLUG = "p-1"


def _store(tmp_path, created: dict[str, str], event_ts: str | None = None):
    store = tmp_path / "memory" / SLUG
    (store / "sessions").mkdir(parents=True)
    for sid, when in created.items():
        event = {"seq": 2, "type": "event", "event": "memory_usage", "purpose": "learning",
                 "usage": {"input_tokens": 10, "output_tokens": 5, "cost": 0.5}}
        message = {"seq": 1, "type": "message", "role": "user", "content": "hello deploy"}
        if event_ts is not None:
            event["ts"] = message["ts"] = event_ts
        lines = [{"seq": 0, "type": "session", "format": 1, "session_id": sid,
                  "project": SLUG, "created": when}, message, event]
        (store / "sessions" / f"{sid}.jsonl").write_bytes(
            b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return store


ODD = {"upper": "2026-12-01T09:00:00Z", "lower": "2026-12-01T09:00:00z",
       "spaced": " 2026-12-01T09:00:00Z ", "offset": "2026-12-01T10:00:00+01:00"}


@pytest.mark.parametrize("since, until, expected", [
    ("2026-11-01", None, 4), ("2026-12-02", None, 0),
    (None, "2026-12-01T09:00:00Z", 4), (None, "2026-12-01T08:59:59Z", 0),
])
def test_usage_takes_every_header_time_sessions_shows(tmp_path, since, until, expected):
    store = _store(tmp_path, ODD)
    args = ["--store", str(store), "--no-state", "usage", "--format", "jsonl"]
    args += ["--since", since] if since else []
    args += ["--until", until] if until else []
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert sum(row["calls"] for row in rows if row["purpose"] != "total") == expected, rows


@pytest.mark.parametrize("since, expected", [("2026-11-01", 4), ("2026-12-02", 0)])
def test_grep_takes_every_header_time_sessions_shows(tmp_path, since, expected):
    store = _store(tmp_path, ODD)
    r = run_cli("--store", str(store), "--no-state", "grep", "deploy", "--since", since,
                "--format", "jsonl")
    assert r.exit_code == (0 if expected else 1), r.stderr
    assert len(r.stdout.splitlines()) == expected, r.stdout


def test_a_records_own_time_in_lower_case_is_its_time(tmp_path):
    # the header says December; each record says November, with a lower-case z
    store = _store(tmp_path, {"s": "2026-12-01T09:00:00Z"}, event_ts="2026-11-05T09:00:00z")
    r = run_cli("--store", str(store), "--no-state", "grep", "deploy", "--until", "2026-11-30",
                "--format", "jsonl")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 1, (r.stdout, r.stderr)
    r = run_cli("--store", str(store), "--no-state", "usage", "--until", "2026-11-30",
                "--format", "jsonl")
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert sum(row["calls"] for row in rows if row["purpose"] != "total") == 1, rows


def test_record_time_is_the_time_utc_time_prints():
    fallback = datetime(2020, 1, 1, tzinfo=UTC)
    assert record_time({"ts": "2026-12-01T09:00:00.123456z"}, fallback) == \
        datetime(2026, 12, 1, 9, 0, 0, 123000, tzinfo=UTC)
    assert record_time({"ts": "not a time", "created": "2026-12-01"}, None) == \
        datetime(2026, 12, 1, tzinfo=UTC)
    assert record_time({"ts": 5, "time": None}, fallback) == fallback   # (text only)
    assert record_time({}, None) is None
