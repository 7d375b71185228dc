"""A file's modification time is printed with its milliseconds, as OUTPUT.md
promises for every timestamp: ``sessions`` (``last_time``), ``notes``
(``modified``) and ``projects`` (``last_activity``) give the same value for
the same mtime, and ``sessions --since/--until`` select by the value printed.
(Before 2026-12-07 sessions and notes cut the mtime to the second: always
``.000Z``, and ``--since`` left out a session appended later in the same
second.)"""

from __future__ import annotations

import csv
import io
import os
from datetime import UTC, datetime

import orjson
import pytest

from .conftest import run_cli

# store, ss: conftest (an empty store at <tmp>/memory/SLUG and its SessionStore)

SECOND = int(datetime(2026, 12, 7, 5, 0, 0, tzinfo=UTC).timestamp())
PRINTED = "2026-12-07T05:00:00.900Z"
# 05:00:00.900123456: more than milliseconds on disk, the milliseconds printed
MTIME_NS = SECOND * 10**9 + 900_123_456


def _touch_all(path, ns: int) -> None:
    """Every regular file under ``path`` modified at ``ns`` (so that the
    store's newest file, projects' last_activity, is each of them)."""
    for top, _dirs, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(top, name), ns=(ns, ns))


@pytest.fixture
def built(ss, store):
    with ss.create("s1", created="2026-12-01T09:00:00.000Z") as w:
        w.append_message("user", "question")
        w.append_message("assistant", "answer", epoch=0)
    store.notes_dir.mkdir(mode=0o700)
    (store.notes_dir / "release.md").write_text("ship it\n")
    _touch_all(store.path, MTIME_NS)
    return store


def _cli(store, *args):
    r = run_cli("--store", str(store.path), *args)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def _jsonl(text: str) -> list[dict]:
    return [orjson.loads(line) for line in text.splitlines()]


def _rows(out: str, fmt: str, header: list[str], fields: tuple[str, str], *,
          whole_header: bool = False) -> list[dict]:
    """The listing ``out`` in ``fmt`` as rows; the table's (``header`` its
    first words, or all of them) as its one row's first and third column,
    named ``fields``."""
    if fmt == "json":
        return orjson.loads(out)
    if fmt == "jsonl":
        return _jsonl(out)
    if fmt in ("csv", "tsv"):
        return list(csv.DictReader(io.StringIO(out), delimiter="," if fmt == "csv" else "\t"))
    head, line = out.splitlines()
    assert (head.split() if whole_header else head.split()[:len(header)]) == header
    return [dict(zip(fields, line.split()[0:3:2], strict=True))]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "tsv", "table"])
def test_sessions_last_time_has_milliseconds(built, fmt):
    rows = _rows(_cli(built, "sessions", "--format", fmt), fmt, ["id", "created", "last"],
                 ("id", "last_time"))
    assert [(r["id"], r["last_time"]) for r in rows] == [("s1", PRINTED)]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "tsv", "table"])
def test_notes_modified_has_milliseconds(built, fmt):
    rows = _rows(_cli(built, "notes", "--format", fmt), fmt, ["name", "size", "modified"],
                 ("name", "modified"), whole_header=True)
    assert [(r["name"], r["modified"]) for r in rows] == [("release", PRINTED)]


def test_the_same_mtime_is_the_same_value_in_every_listing(built, tmp_path):
    # (the store is <tmp>/memory/SLUG: <tmp> is a config dir for projects)
    r = run_cli("--config-dir", str(tmp_path), "projects", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    [project] = _jsonl(r.stdout)
    session = _jsonl(_cli(built, "sessions", "--format", "jsonl"))[0]
    note = _jsonl(_cli(built, "notes", "--format", "jsonl"))[0]
    assert project["last_activity"] == session["last_time"] == note["modified"] == PRINTED


def _selected(store, *window: str) -> bool:
    ids = [r["id"] for r in _jsonl(_cli(store, "sessions", *window, "--format", "jsonl"))]
    assert ids in ([], ["s1"])
    return ids == ["s1"]


@pytest.mark.parametrize(("option", "when", "selected"), [
    ("--since", "2026-12-07T05:00:00Z", True),
    ("--since", "2026-12-07T05:00:00.500Z", True),     # (was left out: .000 < .500)
    ("--since", "2026-12-07T05:00:00.899Z", True),
    ("--since", PRINTED, True),                        # what it printed: at the bound
    ("--since", "2026-12-07T05:00:00.901Z", False),
    ("--since", "2026-12-07T05:00:01Z", False),
    ("--since", "2026-12-07T06:00:00.900+01:00", True),  # the same instant with an offset
    ("--until", "2026-12-07T05:00:00.500Z", False),    # (was selected: .000 <= .500)
    ("--until", "2026-12-07T05:00:00.899Z", False),
    ("--until", PRINTED, True),
    ("--until", "2026-12-07T05:00:00.901Z", True),
    ("--until", "2026-12-07", True),
])
def test_sessions_since_until_at_milliseconds(built, option, when, selected):
    assert _selected(built, option, when) is selected


def test_the_window_compares_the_value_printed(built):
    """``--since`` of a row's own printed time selects it, ``--until`` of
    it too; a bound past it by less than a millisecond (what the file holds
    beyond the printed value) does not: what is printed is what is
    compared."""
    printed = _jsonl(_cli(built, "sessions", "--format", "jsonl"))[0]["last_time"]
    assert printed == PRINTED
    assert _selected(built, "--since", printed, "--until", printed)
    assert not _selected(built, "--since", "2026-12-07T05:00:00.9001Z")
    assert not _selected(built, "--until", "2026-12-07T05:00:00.8999Z")


def test_a_file_time_past_year_9999_is_null_not_an_internal_error(built, tmp_path):
    """tmpfs keeps an mtime that no datetime holds (``touch -d
    @99999999999999``: year 3,170,843): ``projects`` ended in an internal
    error (exit 70, "year 3170843 is out of range"); every listing now says
    null, which the three fields' schemas allow."""
    far = 99_999_999_999_999
    try:
        _touch_all(built.path, far * 10**9)
    except OSError as exc:
        pytest.skip(f"this file system keeps no such time: {exc}")
    if os.stat(built.notes_dir / "release.md").st_mtime != far:
        pytest.skip("this file system clamps the time")
    r = run_cli("--config-dir", str(tmp_path), "projects", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert _jsonl(r.stdout)[0]["last_activity"] is None
    assert _jsonl(_cli(built, "sessions", "--format", "jsonl"))[0]["last_time"] is None
    assert _jsonl(_cli(built, "notes", "--format", "jsonl"))[0]["modified"] is None
    from lecode_memctl.core.rowtables import NOTE, PROJECT, SESSION

    for model, name in ((PROJECT, "last_activity"), (SESSION, "last_time"), (NOTE, "modified")):
        assert next(f for f in model.fields if f.name == name).nullable, name
