"""A bounded page of ``memctl facts`` in a machine format (``--limit``, with
or without ``--offset``, no filter but ``--session``) evaluates the sources
of the facts in the page only, and prints what the whole listing's slice
prints.

Before: the page validated every source of the store and then sliced the
listing (on 82,509 facts ``facts --format jsonl --limit 5`` cost as much as
``facts --all``); a page of ``--session`` did so until 2026-12-06 for every
fact with evidence in the session."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import facts as facts_mod, sessions as sessions_mod

from .conftest import run_cli
from .test_engine import build, stores


def _facts(store: Path, *args: str) -> bytes:
    res = run_cli("--store", str(store), "--no-state", "facts", *args)
    assert res.exit_code == 0, res.stderr
    return res.stdout_bytes


def _old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page made as before: the whole listing, sliced."""
    monkeypatch.setattr(facts_mod.FactStore, "page_window",
                        lambda self, start, stop, session_id=None: None)


def _csv_rows(data: bytes, delim: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline=""), delimiter=delim))


@pytest.mark.heavy
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=stores(), pages=st.lists(st.tuples(st.integers(0, 14), st.integers(1, 14)),
                                     min_size=1, max_size=2))
def test_a_bounded_page_is_the_slice_of_the_whole_listing(spec: dict, pages: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp), spec)
        whole = _facts(store, "--format", "jsonl").splitlines(keepends=True)
        whole_doc = orjson.loads(_facts(store, "--json"))
        whole_csv = _csv_rows(_facts(store, "--format", "csv"), ",")
        whole_tsv = _csv_rows(_facts(store, "--format", "tsv"), "\t")
        for offset, limit in pages:
            opts = ("--limit", str(limit)) + (("--offset", str(offset)) if offset else ())
            assert _facts(store, "--format", "jsonl", *opts) == b"".join(
                whole[offset:offset + limit])
            got = _csv_rows(_facts(store, "--format", "csv", *opts), ",")
            page = whole_csv[1:][offset:offset + limit]
            assert got == ([whole_csv[0]] + page if page else got[:1] + page)
            got = _csv_rows(_facts(store, "--format", "tsv", *opts), "\t")
            page = whole_tsv[1:][offset:offset + limit]
            assert got == ([whole_tsv[0]] + page if page else got[:1] + page)
            doc = orjson.loads(_facts(store, "--json", *opts))
            more = offset + limit < len(whole_doc["facts"])
            assert doc == {**whole_doc, "offset": offset, "limit": limit,
                           "facts": whole_doc["facts"][offset:offset + limit],
                           "next_offset": offset + limit if more else None}


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=stores(), offset=st.integers(0, 14), limit=st.integers(1, 14),
       fmt=st.sampled_from(["json", "jsonl", "csv", "tsv"]))
def test_a_bounded_page_prints_the_bytes_the_sliced_listing_printed(
        spec: dict, offset: int, limit: int, fmt: str) -> None:
    opts = ("--format", fmt, "--limit", str(limit)) + (("--offset", str(offset)) if offset else ())
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp), spec)
        new = _facts(store, *opts)
        with pytest.MonkeyPatch.context() as mp:
            _old_path(mp)
            old = _facts(store, *opts)
    assert new == old


@pytest.mark.heavy
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=stores(), pages=st.lists(st.tuples(st.integers(0, 14), st.integers(1, 14)),
                                     min_size=1, max_size=2),
       fmt=st.sampled_from(["json", "jsonl", "csv", "tsv"]))
def test_a_bounded_page_of_a_session_is_the_slice_of_its_listing(spec: dict, pages: list,
                                                                 fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp), spec)
        for sid in sorted(spec["sessions"]) + ["gone"]:
            res = run_cli("--store", str(store), "--no-state", "facts", "--session", sid,
                          "--format", "jsonl")
            if res.exit_code != 0:      # (a session refused: the page is refused alike)
                for _offset, limit in pages:
                    again = run_cli("--store", str(store), "--no-state", "facts", "--session",
                                    sid, "--format", fmt, "--limit", str(limit))
                    assert (again.exit_code, again.stdout_bytes) == (
                        res.exit_code, res.stdout_bytes if fmt == "jsonl" else again.stdout_bytes)
                continue
            whole = res.stdout_bytes.splitlines(keepends=True)
            for offset, limit in pages:
                opts = ("--session", sid, "--limit", str(limit)) + (
                    ("--offset", str(offset)) if offset else ())
                assert _facts(store, "--format", "jsonl", *opts) == b"".join(
                    whole[offset:offset + limit]), (sid, opts)
                new = _facts(store, "--format", fmt, *opts)
                with pytest.MonkeyPatch.context() as mp:
                    _old_path(mp)
                    assert _facts(store, "--format", fmt, *opts) == new, (sid, opts)


def _one_session_store(root: Path, n: int) -> Path:
    """``n`` facts, each citing its own message of one transcript."""
    recs = [{"seq": i, "type": "message", "role": "user", "content": f"m{i}"}
            for i in range(1, n + 1)]
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [(f"{i:016x}", [("s0", [i], "right")]) for i in range(1, n + 1)],
            "excluded": {"s0": set()}, "generation": 0}
    return build(root, spec)


@pytest.mark.parametrize("opts", [("--format", "jsonl", "--limit", "5"),
                                  ("--json", "--limit", "5"),
                                  ("--session", "s0", "--format", "jsonl", "--limit", "5"),
                                  ("--session", "s0", "--json", "--limit", "4", "--offset", "20"),
                                  ("--format", "csv", "--limit", "5", "--offset", "30"),
                                  ("--format", "tsv", "--limit", "3", "--offset", "7")])
def test_a_bounded_page_validates_its_own_sources_only(tmp_path: Path, monkeypatch,
                                                       opts: tuple) -> None:
    validated: list[int] = []
    real = sessions_mod.SessionStore._validate_session

    def counting(self, sid, refs, purpose, once=None):  # type: ignore[no-untyped-def]
        validated.append(len(refs))
        return real(self, sid, refs, purpose, once)

    monkeypatch.setattr(sessions_mod.SessionStore, "_validate_session", counting)
    counts = []
    for n in (60, 240):
        store = _one_session_store(tmp_path / str(n), n)
        validated.clear()
        _facts(store, *opts)
        counts.append(sum(validated))
    # the page's facts (and the one past it that says whether there is more)
    assert counts[0] == counts[1] <= 6, counts


ODD_IDS = (
    # the facts table without its key, declaring NOCASE: an id stored twice,
    # ids that differ in case only, an integer id, a NULL id, a fact without
    # revisions
    "PRAGMA foreign_keys = OFF",
    "CREATE TABLE x2 (fact_id COLLATE NOCASE, revision, created, updated)",
    "INSERT INTO x2 SELECT * FROM facts", "DROP TABLE facts", "ALTER TABLE x2 RENAME TO facts",
    "INSERT INTO facts SELECT fact_id, revision, created, updated FROM facts "
    "WHERE fact_id = '0000000000000003'",
    "INSERT INTO facts VALUES ('000000000000000A', 1, '2026-01-01T00:00:00.000Z', "
    "'2026-01-01T00:00:00.000Z')",
    "INSERT INTO facts VALUES (7, 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
    "INSERT INTO facts VALUES (NULL, 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
    "INSERT INTO revisions VALUES ('000000000000000A', 1, 'upper', '2026-01-01T00:00:00.000Z')",
    "INSERT INTO revisions VALUES (7, 1, 'seven', '2026-01-01T00:00:00.000Z')",
)


@pytest.mark.heavy
@pytest.mark.parametrize("joined", [False, True])
def test_a_page_of_odd_fact_ids_is_the_slice_of_the_listing(tmp_path: Path, monkeypatch,
                                                            joined: bool) -> None:
    import sqlite3

    store = _one_session_store(tmp_path, 12)
    db = sqlite3.connect(store / "facts.sqlite3")
    for q in ODD_IDS:
        db.execute(q)
    db.commit()
    db.close()
    if joined:      # the listing read by one joined query, not the sorted scans
        monkeypatch.setenv("SQLITE_TMPDIR", str(store))
    for session, n in (((), 15), (("--session", "s0"), 12)):
        whole = _facts(store, "--format", "jsonl", *session).splitlines(keepends=True)
        assert len(whole) == n
        for offset in (0, 1, 2, 3, 4, 12, 14, 15, 20):
            for limit in (1, 2, 5, 14):
                opts = (*session, "--limit", str(limit), "--offset", str(offset))
                assert _facts(store, "--format", "jsonl", *opts) == b"".join(
                    whole[offset:offset + limit]), opts
                new = _facts(store, "--json", *opts)
                with pytest.MonkeyPatch.context() as mp:
                    _old_path(mp)
                    assert _facts(store, "--json", *opts) == new, opts
