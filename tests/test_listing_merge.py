"""The whole-store listing reads each table sorted (``FactStore.start_listing``:
three sorted scans merged in Python) and must give exactly what the joined
query in id order gives, on damaged tables too: a fact without revisions
(fails where the order reaches it), a revision of no fact (dropped), a
source row of no revision, a fact id stored as a BLOB or a number, a
revision number stored as text.  Both paths run on the same private
snapshot; the test compares every group yielded and the error raised."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.facts import FactStore, _joined_groups

IDS = [f"{i:016x}" for i in (1, 2, 3, 5, 8, 13, 21)]
ODD_IDS: list[object] = [b"\x00blob", 7, "Z-not-hex", "0000000000000004"]


def empty_facts_db(db_path: Path) -> sqlite3.Connection:
    """A facts database at ``db_path`` with memctl's schema and no row, and
    a connection to it with foreign keys off (for rows a test writes)."""
    with FactStore(db_path) as fs:
        fs.add("bootstrap so the schema exists")
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA foreign_keys = OFF")
    for t in ("source_refs", "provenance", "revisions", "facts"):
        db.execute(f"DELETE FROM {t}")
    return db


def _build(db_path: Path, facts: list, revisions: list, refs: list) -> None:
    db = empty_facts_db(db_path)
    db.executemany("INSERT INTO facts VALUES (?, ?, '2026-01-01T00:00:00.000Z', "
                   "'2026-01-02T00:00:00.000Z')", facts)
    db.executemany("INSERT INTO revisions VALUES (?, ?, ?, '2026-01-01T00:00:00.000Z')", revisions)
    db.executemany("INSERT INTO source_refs VALUES (?, ?, 's1', '[1]', ?)", refs)
    db.commit()
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()


def _failing_sorts(monkeypatch) -> None:  # noqa: ANN001
    """The listing's sorted scans fail as in a full temporary directory (the
    listing then reads the joined query: ``FactListing.fallback``)."""
    from lecode_memctl.core import facts as facts_mod

    real = facts_mod.FactListing.start

    def failing(self, db, queries, args=()):   # noqa: ANN001
        real(self, db, [q.replace("FROM facts", "FROM no_such_table") for q in queries], args)

    monkeypatch.setattr(facts_mod.FactListing, "start", failing)


def _outcome(gen) -> tuple[list, str | None]:
    got = []
    try:
        for g in gen:
            got.append(g)
    except StoreCorrupt as exc:
        return got, exc.message
    return got, None


@st.composite
def tables(draw: st.DrawFn) -> tuple[list, list, list]:
    ids = draw(st.lists(st.sampled_from(IDS + ODD_IDS), unique=True, max_size=8))
    facts = [(i, draw(st.sampled_from([1, 2, "two"]))) for i in ids if draw(st.integers(0, 5))]
    revs: list = []
    for i in ids + draw(st.lists(st.sampled_from(IDS), max_size=2)):   # some of no fact
        for n in draw(st.lists(st.sampled_from([1, 2, 3, "three"]), unique=True, max_size=3)):
            if (i, n) not in {(r[0], r[1]) for r in revs}:
                revs.append((i, n, f"text {i!r} {n}"))
    refs = [(r[0], r[1], "a" * 64) for r in revs if draw(st.booleans())]
    refs += [(i, 9, "b" * 64) for i in draw(st.lists(st.sampled_from(IDS), max_size=2, unique=True))]
    return facts, revs, refs


@pytest.mark.heavy
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=tables())
def test_merged_listing_is_the_joined_query(tmp_path_factory: pytest.TempPathFactory, t) -> None:
    facts, revisions, refs = t
    path = tmp_path_factory.mktemp("merge") / "facts.sqlite3"
    _build(path, facts, revisions, refs)
    with FactStore.open_readonly(path) as fs:
        listing = fs.start_listing()
        assert listing.joined is None, "the whole store should take the sorted scans"
        merged = _outcome(listing.groups())
        db = fs.read_connection()
        assert db is not None
        joined = _outcome(_joined_groups(fs._joined_rows(db, "", ()), {}))
        # the audit's reading: a fact without revisions is a group of none
        merged_bare = _outcome(fs.start_listing().groups(bare=True))
        joined_bare = _outcome(_joined_groups(fs._joined_rows(db, "", ()), {}, True))
    assert merged == joined
    assert merged_bare == joined_bare
    assert merged_bare[1] is None
    assert len(merged_bare[0]) == len(facts)   # every fact once, with or without revisions


def test_sorted_scans_need_a_tempdir_outside_the_store(tmp_path: Path, monkeypatch) -> None:
    """Where SQLite's temporary directory is the store, the listing takes the
    indexed query (its sorter would create a file there, even if unlinked)."""
    store = tmp_path / "store"
    store.mkdir()
    path = store / "facts.sqlite3"
    _build(path, [(IDS[0], 1)], [(IDS[0], 1, "x")], [])
    monkeypatch.setenv("SQLITE_TMPDIR", str(store))
    with FactStore.open_readonly(path) as fs:
        listing = fs.start_listing()
        assert listing.joined is not None
        assert [g[0] for g in listing.groups()] == [IDS[0]]


def test_validate_and_listing_on_blob_ids_and_text_revisions(config_dir: Path) -> None:
    """A fact id stored as a BLOB and a revision number stored as text (hostile
    rows) are findings and a clear exit 5, never an internal error (exit 70):
    the audit used to sort a BLOB among text ids, fact_status to negate a
    text revision, and the finding's fact id was not JSON."""
    import orjson

    from tests.conftest import run_cli

    store = config_dir / "hostile"
    (store / "sessions").mkdir(parents=True)
    _build(store / "facts.sqlite3", [(b"\x00blob", 1), (IDS[0], 2), (IDS[1], "two")],
           [(b"\x00blob", 1, "blob"), (IDS[0], 1, "a"), (IDS[0], "three", "b"),
            (IDS[1], 1, "c")], [])
    r = run_cli("--no-state", "--store", str(store), "validate", "--json")
    assert r.exit_code == 1, r.stderr
    doc = orjson.loads(r.stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert {"fact.hidden", "db.dangling_ref"} <= codes
    r = run_cli("--no-state", "--store", str(store), "facts", "--all", "--format", "jsonl")
    assert r.exit_code in (0, 5), r.stderr
    assert "internal error" not in r.stderr


def test_a_failed_sort_falls_back_to_the_indexed_query(tmp_path: Path, monkeypatch) -> None:
    """Should the sorted scans fail (a full temporary directory, say), the
    listing reads the same groups through the indexes instead of failing."""

    path = tmp_path / "facts.sqlite3"
    _build(path, [(i, 1) for i in IDS], [(i, 1, f"t {i}") for i in IDS],
           [(i, 1, "a" * 64) for i in IDS[:3]])
    with FactStore.open_readonly(path) as fs:
        want = list(fs.start_listing().groups())
    _failing_sorts(monkeypatch)
    with FactStore.open_readonly(path) as fs:
        listing = fs.start_listing()
        assert listing.joined is None and listing.fallback is not None
        assert list(listing.groups()) == want
    assert len(want) == len(IDS)
