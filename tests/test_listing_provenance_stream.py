"""The listing's legacy provenance (``FactStore.start_listing``): read as one
more cursor in the listing's order, each fact's rows taken as the revisions
reach them, not the whole table held in a dict before the listing starts
(a store of 100,000 legacy facts of 8 rows each held 112 MiB).

What each revision gets is what the dict gave it: every row whose
(fact id, revision) Python finds equal to the revision's, in the query's
order, to the first revision that asks (``dict.pop``), on damaged stores
too -- ids stored as BLOBs, numbers, NULL or text that is not UTF-8 (a
BLOB equals such a text in Python, while SQLite orders them apart), rows of
no fact or no revision, duplicate rows, odd types, a table that declares
another collation.  The reference below is the dict as it was read, given
to the same merges; the tests compare the groups of the sorted scans, of
their fallback (the sorts failed) and of the joined query, and the output
of ``facts --all --format jsonl`` and ``validate --json``."""

from __future__ import annotations

import re
import shutil
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.facts import FactStore

from .test_listing_merge import _failing_sorts, _outcome, empty_facts_db

NOW = "2026-01-01T00:00:00.000Z"


def reference_prov(db: sqlite3.Connection, where: str = "", args: tuple[Any, ...] = ()
                   ) -> dict[tuple[Any, Any], dict[Any, list[Any]]]:
    """The listing's provenance as it was read before it was streamed (the
    reference): every row in a dict by (fact id, revision), then
    {session id: [seq, ...]}."""
    prov: dict[tuple[Any, Any], dict[Any, list[Any]]] = {}
    for fid, rev, sid, seq in db.execute(
            "SELECT f.fact_id, f.revision, f.session_id, f.seq FROM provenance f " + where
            + "ORDER BY f.fact_id, f.revision, f.session_id, f.seq", args):
        prov.setdefault((fid, rev), {}).setdefault(sid, []).append(seq)
    return prov


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty facts database (copied for each store)."""
    path = tmp_path_factory.mktemp("tpl") / "facts.sqlite3"
    db = empty_facts_db(path)
    db.commit()
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    return path


# the provenance table as lecode made it, or as a damaged or crafted store has
# it: without its key (duplicates, NULLs) and without types (a real stays
# real), or with another collation declared
PROV_TABLES = {
    "schema": None,
    "no_key": "CREATE TABLE provenance (fact_id, revision, session_id, seq)",
    "nocase": ("CREATE TABLE provenance (fact_id TEXT COLLATE NOCASE, revision INTEGER, "
               "session_id TEXT COLLATE RTRIM, seq INTEGER)"),
}


def _value(v: Any) -> tuple[str, Any]:
    """The SQL and parameter of a stored value: ("bad", bytes) is TEXT whose
    bytes are not UTF-8."""
    if isinstance(v, tuple) and v[0] == "bad":
        return "CAST(? AS TEXT)", v[1]
    return "?", v


def _insert(db: sqlite3.Connection, table: str, row: tuple[Any, ...]) -> None:
    parts = [_value(v) for v in row]
    db.execute(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join(p[0] for p in parts)})",
               [p[1] for p in parts])


def build(template: Path, path: Path, facts: list, revisions: list, refs: list, prov: list,
          prov_table: str | None = None) -> None:
    shutil.copyfile(template, path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys = OFF")
    if prov_table is not None:
        db.execute("DROP TABLE provenance")
        db.execute(prov_table)
        db.execute("CREATE INDEX provenance_session ON provenance(session_id, seq)")
    for fid, rev in facts:
        _insert(db, "facts", (fid, rev, NOW, NOW))
    for fid, rev in revisions:
        _insert(db, "revisions", (fid, rev, f"text {fid!r} {rev!r}", NOW))
    for fid, rev in refs:
        _insert(db, "source_refs", (fid, rev, "s1", "[1]", "a" * 64))
    for row in prov:
        _insert(db, "provenance", row)
    db.commit()
    db.close()


BAD = ("bad", b"\xffbad")           # text that is not UTF-8 ...
IDS: list[Any] = ["0000000000000001", "0000000000000002", "00000000000000aa", "00000000000000AA",
                  "00000000000000aa ", b"\xffbad", BAD, b"\x00blob", "Z-not-hex"]
PROV_IDS: list[Any] = [*IDS, None, 7, 7.0, "7", "0000000000000009"]
REVS: list[Any] = [1, 2, 3, "two", b"\x01"]
PROV_REVS: list[Any] = [*REVS, 1.0, 9, None]
SIDS: list[Any] = ["s1", "S1", "s1 ", "s2", None, 5, b"s1", BAD]
SEQS: list[Any] = [0, 1, 2, 1.0, 1.5, -1, "x", None]


# (the strategies that do not depend on what was drawn, made once: the same
# draws as made anew in each example, without remaking them 100 times)
_IDS7 = st.lists(st.sampled_from(IDS), unique=True, max_size=7)
_FACT_REV = st.sampled_from([1, 2, "two"])
_IDS2 = st.lists(st.sampled_from(IDS), max_size=2)
_REVS3 = st.lists(st.sampled_from(REVS), unique=True, max_size=3)
_KINDS = st.sampled_from(sorted(PROV_TABLES))
_OTHER_KEYS = st.tuples(st.sampled_from(PROV_IDS), st.sampled_from(PROV_REVS))
_SIDS = {True: st.sampled_from([s for s in SIDS if s is not None]), False: st.sampled_from(SIDS)}
_SEQS = {True: st.sampled_from([q for q in SEQS if q is not None and q != -1]),
         False: st.sampled_from(SEQS)}


@st.composite
def stores(draw: st.DrawFn) -> tuple[list, list, list, list, str | None]:
    ids = draw(_IDS7)
    facts = [(i, draw(_FACT_REV)) for i in ids if draw(st.integers(0, 5))]
    revisions: list = []
    for i in ids + draw(_IDS2):    # some of no fact
        for n in draw(_REVS3):
            if (i, n) not in revisions:
                revisions.append((i, n))
    refs = [r for r in revisions if draw(st.integers(0, 3)) == 0]
    kind = draw(_KINDS)
    # rows of the listed revisions mostly, some of no fact or no revision
    keys = st.one_of(st.sampled_from(revisions or [("x", 1)]), _OTHER_KEYS)
    plain = kind == "schema"       # (the schema's NOT NULLs and CHECK)
    rows = draw(st.lists(st.tuples(keys, _SIDS[plain], _SEQS[plain]), max_size=14))
    prov = [(k[0], k[1], sid, seq) for k, sid, seq in rows
            if not plain or (k[0] is not None and k[1] is not None)]
    twice: bool = draw(st.booleans())
    if twice and not plain and prov:
        prov += prov[: draw(st.integers(1, len(prov)))]     # duplicate rows
    return facts, revisions, refs, prov, PROV_TABLES[kind]


def _paths(fs: FactStore, bare: bool) -> list[tuple[list, str | None]]:
    """The groups (and the error) of the sorted scans, their fallback, the
    joined query, and a writer's joined query."""
    out = []
    listing = fs.start_listing()
    assert listing.joined is None, "the whole store should take the sorted scans"
    out.append(_outcome(listing.groups(bare=bare)))
    with pytest.MonkeyPatch.context() as mp:
        _failing_sorts(mp)
        listing = fs.start_listing()
        assert listing.fallback is not None
        out.append(_outcome(listing.groups(bare=bare)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fs, "_sibling", lambda: None)       # the joined query itself
        listing = fs.start_listing()
        assert listing.joined is not None
        out.append(_outcome(listing.groups(bare=bare)))
    # a writer's listing on its own connection (each row read holding its lock)
    with FactStore(fs.path) as writer:
        out.append(_outcome(writer.start_listing().groups(bare=bare)))
    return out


@pytest.mark.heavy
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=stores())
def test_streamed_provenance_is_the_dict(template: Path, tmp_path_factory: pytest.TempPathFactory,
                                         s: tuple) -> None:
    """Each revision's provenance in the sorted scans, their fallback and
    the joined query (with and without bare facts) is the reference dict's."""
    facts, revisions, refs, prov, table = s
    path = tmp_path_factory.mktemp("s") / "facts.sqlite3"
    build(template, path, facts, revisions, refs, prov, table)
    with FactStore.open_readonly(path) as fs:
        for bare in (False, True):
            got = _paths(fs, bare)
            with pytest.MonkeyPatch.context() as mp:
                _reference_listing(mp)
                want = _paths(fs, bare)
            assert got == want


def test_a_blob_id_takes_the_rows_of_the_same_bytes_as_text(template: Path, tmp_path: Path) -> None:
    """A text id that is not UTF-8 equals the BLOB of its bytes in Python,
    while SQLite orders every text before every BLOB: the revision that asks
    first gets the rows of both (the text's first), wherever each comes in
    the order, and the other none."""
    path = tmp_path / "facts.sqlite3"
    x = b"\xffbad"
    # (a text id between them: adjacent, the two are one id stored twice)
    between = ("bad", b"\xffzz")
    ids = [BAD, between, x, "Z-not-hex"]
    build(template, path, [(i, 1) for i in ids], [(i, 1) for i in ids], [],
          [(x, 1, "s2", 4), (BAD, 1, "s1", 3), (x, 1, "s1", 5), ("Z-not-hex", 1, "s3", 1),
           (between, 1, "s4", 0)])
    with FactStore.open_readonly(path) as fs:
        got = list(fs.start_listing().groups())
    assert [(type(g[0]).__name__, g[4][0][-1]) for g in got] == [
        ("str", {"s3": [1]}),
        ("InvalidText", {"s1": [3, 5], "s2": [4]}),
        ("InvalidText", {"s4": [0]}),
        ("bytes", None)]
    # with no fact of the text, the BLOB's revision takes both
    path2 = tmp_path / "two.sqlite3"
    build(template, path2, [(x, 1)], [(x, 1)], [],
          [(x, 1, "s2", 4), (BAD, 1, "s1", 3), (BAD, 1, "s2", 2), ("Z-not-hex", 1, "s3", 1)])
    with FactStore.open_readonly(path2) as fs:
        assert [g[4][0][-1] for g in fs.start_listing().groups()] == [{"s1": [3], "s2": [2, 4]}]


def _reference_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``start_listing`` with its provenance the reference dict."""
    real = FactStore.start_listing

    def start(self: FactStore, session_id: str | None = None, *, part: Any = None) -> Any:
        listing = real(self, session_id, part=part)
        db = self._reader()
        if db is not None:
            listing.prov = reference_prov(db, *self._session_filter(session_id, part))
        return listing

    monkeypatch.setattr(FactStore, "start_listing", start)


def _cli(store: Path) -> list[tuple[int, str, str]]:
    from tests.conftest import run_cli

    out = []
    for args in (("facts", "--all", "--format", "jsonl"), ("validate", "--json")):
        r = run_cli("--no-state", "--store", str(store), *args)
        text = r.stdout
        if args[0] == "validate" and text:      # (its times are the run's)
            text = re.sub(r'"(generated|started|finished|duration_seconds)":[^,}]*', "", text)
        out.append((r.exit_code, text, r.stderr))
    return out


@pytest.mark.heavy
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=stores())
def test_the_commands_print_what_the_dict_gave(template: Path, config_dir: Path,
                                               tmp_path_factory: pytest.TempPathFactory,
                                               s: tuple) -> None:
    """``facts --all --format jsonl`` and ``validate --json`` print the same
    bytes and exit the same as with the reference dict, through the sorted
    scans and through their fallback."""
    facts, revisions, refs, prov, table = s
    store = tmp_path_factory.mktemp("cli", numbered=True) / "store"
    (store / "sessions").mkdir(parents=True)
    build(template, store / "facts.sqlite3", facts, revisions, refs, prov, table)
    for fallback in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            if fallback:
                _failing_sorts(mp)
            got = _cli(store)
            _reference_listing(mp)
            want = _cli(store)
        assert got == want


def _legacy_store(template: Path, path: Path, n: int, rows: int) -> None:
    """``n`` facts of one revision, each with ``rows`` legacy provenance rows
    and no source (as ``/tmp/scale2/shape_prov.py`` makes them)."""
    shutil.copyfile(template, path)
    db = sqlite3.connect(path)
    ids = [f"{i:016x}" for i in range(n)]
    db.executemany("INSERT INTO facts VALUES (?, 1, ?, ?)", ((i, NOW, NOW) for i in ids))
    db.executemany("INSERT INTO revisions VALUES (?, 1, ?, ?)",
                   ((i, f"legacy fact {i}", NOW) for i in ids))
    db.executemany("INSERT INTO provenance VALUES (?, 1, ?, ?)",
                   ((i, f"p{k % 20:03d}", k * rows + j) for k, i in enumerate(ids)
                    for j in range(rows)))
    db.commit()
    db.close()


def _listing_peak(path: Path, *, joined: bool) -> int:
    """The peak of Python's allocations while the whole listing is read."""
    with FactStore.open_readonly(path) as fs:
        if joined:
            fs._sibling = lambda: None     # type: ignore[method-assign]
        tracemalloc.start()
        try:
            n = sum(1 for _ in fs.start_listing().groups())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert n > 0
    return peak


@pytest.fixture(scope="module")
def legacy_stores(template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The facts databases of 4,000 and 8,000 legacy facts of 8 rows each,
    built once for the tests of the peaks below: never changed (the listing
    opens them read only; ``validate`` gets a copy)."""
    d = tmp_path_factory.mktemp("legacy")
    out = {}
    for n in (4000, 8000):
        out[n] = d / f"{n}.sqlite3"
        _legacy_store(template, out[n], n, 8)
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("joined", [False, True], ids=["sorted", "joined"])
def test_the_listing_holds_one_facts_provenance(legacy_stores: dict[int, Path], joined: bool) -> None:
    """Twice the legacy facts, about the same peak: the listing holds the
    rows of the fact it reaches, not the table's (the dict held 128,000 rows
    at 16,000 facts: a peak of 4.4 MB at 4,000 facts, 15.5 MB at 16,000;
    with the dict back, 4.0 and 6.8 MB at 4,000 and 8,000, failing the
    bound, as it did at 16,000).  (From 4,000 facts on, the listing's own
    fetches are full: its peak without provenance is flat, 1.6 MB; the
    streamed listing peaks at 2.1 MB at 4,000 and 8,000 alike.)"""
    a = _listing_peak(legacy_stores[4000], joined=joined)
    b = _listing_peak(legacy_stores[8000], joined=joined)
    assert b < 1.25 * a, (a, b)


def _validate_peak(legacy_stores: dict[int, Path], store: Path, n: int) -> int:
    """The peak of Python's allocations of ``validate -q`` on ``n`` legacy
    facts, run once untraced first: what the first run in a process imports
    is not counted in one store's peak and not the other's (run alone, the
    4,000 facts' peak was 3.49 MB with the imports counted and 2.77 MB
    without, against 2.84 MB for 8,000 facts: the bound, 1.25 times the
    smaller peak, was 26% looser when this test ran first)."""
    from tests.conftest import run_cli

    (store / "sessions").mkdir(parents=True)
    shutil.copyfile(legacy_stores[n], store / "facts.sqlite3")
    assert run_cli("--no-state", "--store", str(store), "validate", "-q").exit_code == 0
    tracemalloc.start()
    try:
        r = run_cli("--no-state", "--store", str(store), "validate", "-q")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.stderr     # (unverified facts are warnings)
    return peak


@pytest.mark.heavy
def test_quiet_validate_holds_neither_the_rows_nor_the_findings(legacy_stores: dict[int, Path],
                                                               config_dir: Path) -> None:
    """``validate -q`` prints nothing: twice the legacy facts, about the
    same peak.  It held every row of the table (the listing's dict) and
    every finding (one per unverified fact: 42 MiB at 100,000 facts); with
    either held again the larger peaks 1.4 to 1.7 times the smaller."""
    a = _validate_peak(legacy_stores, config_dir / "small", 4000)
    b = _validate_peak(legacy_stores, config_dir / "large", 8000)
    assert b < 1.25 * a, (a, b)


def test_a_damaged_page_fails_the_listing_before_it_starts(template: Path, tmp_path: Path) -> None:
    """A damaged page of the provenance rows the listing reads (here a leaf
    of the table's key, which the query reads) fails the listing before its
    first fact, as the dict's read did: not after printing a part of it."""
    path = tmp_path / "facts.sqlite3"
    _legacy_store(template, path, 3000, 8)
    db = sqlite3.connect(path)
    pages = [p for (p,) in db.execute(
        "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_provenance_1' "
        "AND pagetype = 'leaf' ORDER BY pageno")]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    assert len(pages) > 10
    with open(path, "r+b") as f:
        f.seek((pages[len(pages) // 2] - 1) * size)
        f.write(b"\x0d\xff\xff\xff" * 64)
    for joined in (False, True):
        got = []
        with FactStore.open_readonly(path) as fs:
            if joined:
                fs._sibling = lambda: None     # type: ignore[method-assign]
            # (typed since 2026-12-07, as every public method of FactStore's:
            # StoreCorrupt, the sqlite3 error its cause)
            with pytest.raises((sqlite3.DatabaseError, StoreCorrupt), match="malformed"):
                for group in fs.start_listing().groups():
                    got.append(group)
        assert got == []


# A review found that a writer's start_listing (not read, or read in part)
# left the provenance query active on the writer's own connection, so that
# its next write was StoreBusy once another connection had committed.  A
# writer reads them into the dict, as before (its listings go through
# one_state's view, read only, which streams them).
def test_writer_can_write_after_start_listing_with_many_provenance_rows(tmp_path: Path) -> None:
    path = tmp_path / "facts.sqlite3"
    with FactStore(path) as fs:
        fid = fs.add("a legacy fact").fact.fact_id
    db = sqlite3.connect(path)
    db.executemany("INSERT INTO provenance VALUES (?, 1, 's1', ?)",
                   [(fid, q) for q in range(2500)])
    db.commit()
    db.close()

    with FactStore(path) as writer:
        listing = writer.start_listing()       # started, not read yet
        other = sqlite3.connect(path, timeout=1)
        other.execute("INSERT INTO provenance VALUES (?, 1, 's2', 1)", (fid,))
        other.commit()
        other.close()
        writer.add("a second fact")            # new code: StoreBusy (database is locked)
        del listing
