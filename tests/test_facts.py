"""FactStore: schema, migrations, lazy creation, writes, exclusions, forget."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from lecode_memctl.core.errors import Conflict, NotFound, StoreCorrupt, UsageError
from lecode_memctl.core.facts import (
    MIGRATIONS,
    SCHEMA_VERSION,
    FactStore,
    Provenance,
    fact_id_for,
    normalize_text,
)
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import SourceRef

from .conftest import tree_hash

D1 = "1" * 64
D2 = "2" * 64

# The legacy schema (lecode before schema versioning): user_version 0, no
# schema_migrations, no source_refs, no generation/retry markers.
LEGACY_SQL = """
CREATE TABLE facts (fact_id TEXT PRIMARY KEY, revision INTEGER NOT NULL CHECK (revision >= 1),
                    created TEXT NOT NULL, updated TEXT NOT NULL);
CREATE TABLE revisions (fact_id TEXT NOT NULL REFERENCES facts(fact_id) ON DELETE CASCADE,
                        revision INTEGER NOT NULL CHECK (revision >= 1), text TEXT NOT NULL,
                        created TEXT NOT NULL, PRIMARY KEY (fact_id, revision));
CREATE TABLE provenance (fact_id TEXT NOT NULL, revision INTEGER NOT NULL,
                         session_id TEXT NOT NULL, seq INTEGER NOT NULL CHECK (seq >= 0),
                         PRIMARY KEY (fact_id, revision, session_id, seq),
                         FOREIGN KEY (fact_id, revision) REFERENCES revisions(fact_id, revision)
                         ON DELETE CASCADE);
CREATE TABLE exclusions (session_id TEXT NOT NULL, seq INTEGER NOT NULL CHECK (seq >= 0),
                         PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
INSERT INTO facts VALUES ('00000000000000aa', 2, '2025-01-01T00:00:00Z', '2025-01-02T00:00:00Z');
INSERT INTO revisions VALUES ('00000000000000aa', 1, 'tabs for indentation', '2025-01-01T00:00:00Z');
INSERT INTO revisions VALUES ('00000000000000aa', 2, 'tabs, width 4', '2025-01-02T00:00:00Z');
INSERT INTO provenance VALUES ('00000000000000aa', 1, 'old-session', 3);
INSERT INTO provenance VALUES ('00000000000000aa', 2, 'old-session', 7);
INSERT INTO exclusions VALUES ('old-session', 1);
"""


def make_legacy(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(LEGACY_SQL)
    db.commit()
    db.close()


def dump(path: Path) -> dict[str, list]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            out[t] = sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
        return out
    finally:
        db.close()


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "store" / "facts.sqlite3"


def test_nothing_created_until_first_write(db_path):
    fs = FactStore(db_path)
    assert fs.list_facts() == [] and fs.generation() == 0 and fs.excluded_seqs("s") == frozenset()
    assert fs.get("0" * 16) is None and fs.search("x") == [] and fs.count() == 0
    with pytest.raises(NotFound):
        fs.forget("0" * 16)
    assert not db_path.parent.exists()
    fs.add("first")
    assert db_path.exists()
    assert (db_path.stat().st_mode & 0o777) == 0o600
    assert (db_path.parent.stat().st_mode & 0o777) == 0o700
    db = sqlite3.connect(db_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    names = [r[0] for r in db.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == [n for n, _ in MIGRATIONS]
    db.close()
    fs.close()


def test_fact_ids_are_canonical_and_retries_idempotent(db_path):
    ref = SourceRef("s1", (1, 2), D1)
    assert fact_id_for("a", ref) == fact_id_for("a", SourceRef("s1", (1, 2), D1))
    assert fact_id_for("a", ref) != fact_id_for("a", None) != fact_id_for("b", None)
    assert fact_id_for("a", ref) != fact_id_for("a", SourceRef("s1", (1, 2), D2))
    with FactStore(db_path) as fs:
        first = fs.add("a", ref=ref)
        again = fs.add("a", ref=ref)
        assert first.created and not again.created
        assert first.fact.fact_id == again.fact.fact_id == fact_id_for("a", ref)
        assert fs.count() == 1


def test_revise_checks_expected_revision_and_keeps_history(db_path):
    with FactStore(db_path) as fs:
        fid = fs.add("v1", provenance=[Provenance("s1", (1,))]).fact.fact_id
        fs.revise(fid, "v2", expected_revision=1, ref=SourceRef("s1", (4,), D1))
        with pytest.raises(Conflict, match="stale revision"):
            fs.revise(fid, "v3", expected_revision=1)
        revs = fs.revisions(fid)
        assert [(r.revision, r.text) for r in revs] == [(1, "v1"), (2, "v2")]
        assert revs[0].source is None and revs[0].provenance == (Provenance("s1", (1,)),)
        assert fs.source(fid) == SourceRef("s1", (4,), D1)
        assert fs.source(fid, 1) is None
        assert fs.provenance(fid, 1) == [Provenance("s1", (1,))]
        with pytest.raises(NotFound):
            fs.revise("f" * 16, "x", expected_revision=1)
        with pytest.raises(UsageError):
            fs.revise("not-an-id", "x", expected_revision=1)
        with pytest.raises(Conflict, match="generation"):
            fs.revise(fid, "v3", expected_revision=2, expected_generation=5)
        assert fs.integrity() == []


def test_list_is_bounded_and_search_is_literal(db_path):
    with FactStore(db_path) as fs:
        for i in range(30):
            fs.add(f"fact number {i} uses 100% of_the [a-z]* budget")
        fs.add("Plain Text")
        page = fs.list_facts(0, 20)
        assert len(page) == 20
        assert [f.fact_id for f in page] == sorted(f.fact_id for f in page)
        assert len(fs.list_facts(20, 20)) == 11
        assert len(fs.list_facts(0, 10**9)) == 31  # clamped, not unbounded
        assert [f.fact_id for f in fs.iter_facts(batch=7)] == sorted(
            f.fact_id for f in fs.list_facts(0, 100))
        assert len(fs.search("100%")) == 30
        assert fs.search("[a-z]*")  # no regex, no LIKE wildcards
        assert fs.search("100_") == []
        assert [f.text for f in fs.search("plain text")] == ["Plain Text"]
        assert len(fs.search("fact", limit=5)) == 5
        with pytest.raises(UsageError):
            fs.search("")


def test_exclusions_are_authoritative(db_path):
    with FactStore(db_path) as fs:
        a = fs.add("a", ref=SourceRef("s1", (2, 3), D1)).fact
        b = fs.add("b", provenance=[Provenance("s1", (3, 9))]).fact
        plan = fs.plan_forget(a.fact_id)
        assert plan.exclusions == (("s1", 2), ("s1", 3)) and plan.suppressed_facts == (b.fact_id,)
        assert plan.new_generation == 1
        assert fs.forget(a.fact_id) is True
        assert fs.is_excluded("s1", 3) and not fs.is_excluded("s1", 9)
        for call in (
            lambda: fs.add("c", ref=SourceRef("s1", (3,), D1)),
            lambda: fs.add("c", provenance=[Provenance("s1", (2,))]),
            lambda: fs.revise(b.fact_id, "b2", expected_revision=1, ref=SourceRef("s1", (1, 2), D1)),
            lambda: fs.attach_source(b.fact_id, 1, SourceRef("s1", (3,), D2)),
            lambda: fs.add("a", ref=SourceRef("s1", (2, 3), D1)),
        ):
            with pytest.raises(Conflict):
                call()
        # the overlapping fact is retained administratively
        assert fs.get(b.fact_id) is not None
        assert fs.attach_source(b.fact_id, 1, SourceRef("s1", (9,), D2)) is True
        assert fs.attach_source(b.fact_id, 1, SourceRef("s1", (9,), D2)) is False
        with pytest.raises(Conflict, match="attached once"):
            fs.attach_source(b.fact_id, 1, SourceRef("s1", (8,), D2))
        with pytest.raises(NotFound):
            fs.attach_source(b.fact_id, 2, SourceRef("s1", (8,), D2))


def test_forget_all_revisions_marker_and_generation(db_path):
    with FactStore(db_path) as fs:
        fid = fs.add("v1", ref=SourceRef("s1", (1,), D1),
                     provenance=[Provenance("s0", (5,))]).fact.fact_id
        fs.revise(fid, "v2", expected_revision=1, ref=SourceRef("s2", (4, 6), D2))
        assert fs.forget(fid) is True
        assert fs.generation() == 1
        assert fs.excluded_seqs("s1") == {1} and fs.excluded_seqs("s2") == {4, 6}
        assert fs.excluded_seqs("s0") == {5}
        assert fs.get(fid) is None and fs.revisions(fid) == []
        assert fs.forget(fid) is False
        assert fs.generation() == 1
        with pytest.raises(NotFound):
            fs.forget("e" * 16)
        with pytest.raises(UsageError):
            fs.forget("../etc")
        with pytest.raises(Conflict, match="excluded"):
            fs.add("v1", ref=SourceRef("s1", (1,), D1))
        plain = fs.add("no evidence").fact.fact_id
        assert fs.forget(plain) is True and fs.generation() == 2
        with pytest.raises(Conflict, match="retired"):
            fs.add("no evidence")  # a retried add never resurrects a forgotten fact
        plan = fs.plan_forget(fid)
        assert not plan.exists and plan.new_generation == plan.generation == 2
        tables = dump(db_path)
        assert tables["facts"] == [] and tables["revisions"] == [] and tables["source_refs"] == []
        assert tables["provenance"] == []
        # content-free: the id and the generation
        assert sorted(tables["forgotten"]) == sorted([(fid, 1), (plain, 2)])


def test_dedup_against_every_revision(db_path):
    """remember(deduplicate=True) returns the existing fact when any of its
    revisions -- not only the current one -- has the same case-folded,
    whitespace-collapsed text, and then writes nothing: no new fact, no new
    source, no revert to the old text."""
    assert normalize_text("  We use\tTABS\n here ") == normalize_text("we use tabs here")
    assert normalize_text("Straße") == normalize_text("STRASSE")
    store = store_at(db_path.parent)
    with SessionStore(store).create("s1") as w:
        for i in range(1, 7):
            w.append_message("user", f"message {i}")
    with FactStore(db_path) as fs:
        ss = SessionStore(store, exclusions=fs)

        def ref(seq: int) -> SourceRef:
            return ss.source_snapshot("s1", seq, seq).ref

        first = fs.remember("We use tabs here", ref(1), sessions=ss).fact
        fid = first.fact_id
        fs.correct(fid, "We use tabs, width 4", expected_revision=1, ref=ref(2), sessions=ss)
        before = dump(db_path)

        # the superseded revision 1 matches: the incumbent at its current revision
        old = fs.remember("  we USE\tTABS  here ", ref(3), sessions=ss, deduplicate=True)
        assert old.deduplicated and not old.created
        assert (old.fact.fact_id, old.fact.revision, old.fact.text) == (fid, 2, "We use tabs, width 4")
        assert old.fact.source == ref(2)          # the new source is not attached
        # the current revision matches too
        cur = fs.remember("WE USE TABS,  width 4", ref(4), sessions=ss, deduplicate=True)
        assert cur.deduplicated and cur.fact.fact_id == fid and cur.fact.revision == 2
        assert dump(db_path) == before            # neither wrote anything

        # a text that no revision has is a new fact, deduplicate or not
        new = fs.remember("We use tabs, width 8", ref(5), sessions=ss, deduplicate=True)
        assert new.created and not new.deduplicated and new.fact.fact_id != fid
        # without deduplicate, the old text is a new fact of its own
        plain = fs.remember("we use tabs here", ref(6), sessions=ss)
        assert plain.created and not plain.deduplicated
        assert plain.fact.fact_id not in (fid, new.fact.fact_id)
        assert fs.count() == 3
        assert [r.text for r in fs.revisions(fid)] == ["We use tabs here", "We use tabs, width 4"]


def test_legacy_database_migrates_keeping_every_row(db_path):
    make_legacy(db_path)
    before = dump(db_path)
    # read-only: never migrates, reports it, still reads
    ro = FactStore.open_readonly(db_path)
    assert ro.needs_migration and ro.schema_version == 0
    fact = ro.get("00000000000000aa")
    assert fact.text == "tabs, width 4" and fact.source is None
    assert fact.provenance == (Provenance("old-session", (7,)),)
    # it holds an exclusion: generation 1, as m003 migrates it (issue 11, point 8)
    assert ro.excluded_seqs("old-session") == {1} and ro.generation() == 1
    ro.close()
    assert dump(db_path) == before
    # a writer's open changes nothing either: its first write migrates,
    # in the write's transaction
    fs = FactStore(db_path)
    assert fs.needs_migration and fs.schema_version == 0
    assert dump(db_path) == before
    new = fs.add("a new fact").fact.fact_id
    assert not fs.needs_migration and fs.schema_version == SCHEMA_VERSION
    after = dump(db_path)
    assert [r for r in after["facts"] if r[0] != new] == before["facts"]
    assert [r for r in after["revisions"] if r[0] != new] == before["revisions"]
    assert after["provenance"] == before["provenance"]
    assert after["exclusions"] == [("old-session", 1, 0)]
    assert after["source_refs"] == [] and after["meta"] == [("generation", 1)]
    assert [r.text for r in fs.revisions("00000000000000aa")] == ["tabs for indentation",
                                                                  "tabs, width 4"]
    assert fs.source("00000000000000aa") is None  # legacy provenance is never backfilled
    assert fs.forget("00000000000000aa") is True
    assert fs.excluded_seqs("old-session") == {1, 3, 7}
    fs.close()


def test_the_migrations_are_atomic_with_the_write(db_path, monkeypatch):
    from lecode_memctl.core import facts as facts_mod

    make_legacy(db_path)

    def broken(db):
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        raise RuntimeError("boom")

    monkeypatch.setattr(facts_mod, "MIGRATIONS",
                        [MIGRATIONS[0], MIGRATIONS[1], ("m003_generation", broken)])
    before = tree_hash(db_path.parent)
    # every pending migration commits with the write that applies them, or
    # none does: the file is as it was (its journal mode too)
    with FactStore(db_path) as fs, pytest.raises(RuntimeError):
        fs.add("x")
    assert tree_hash(db_path.parent) == before
    db = sqlite3.connect(db_path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name IN "
                      "('meta', 'schema_migrations', 'source_refs')").fetchone()[0] == 0
    db.close()


def test_a_refused_write_does_not_migrate(db_path):
    """A write refused inside its transaction (a stale revision) rolls the
    pending migrations back with it: the legacy file is as it was."""
    from lecode_memctl.core.errors import Conflict

    make_legacy(db_path)
    before = tree_hash(db_path.parent)
    with FactStore(db_path) as fs:
        with pytest.raises(Conflict):
            fs.revise("00000000000000aa", "x", expected_revision=7)
        assert fs.needs_migration and fs.schema_version == 0
        assert fs.get("00000000000000aa").text == "tabs, width 4"   # read as it is
    assert tree_hash(db_path.parent) == before


def test_future_schema_version_is_refused(db_path):
    with FactStore(db_path) as fs:
        fs.add("x")
    db = sqlite3.connect(db_path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = tree_hash(db_path.parent)
    with pytest.raises(StoreCorrupt, match="newer"):
        FactStore.open_readonly(db_path)
    with pytest.raises(StoreCorrupt, match="newer"):
        FactStore(db_path)
    assert tree_hash(db_path.parent) == before


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100,
                                     b"SQLite format 3\x00" + b"\xff" * 200])
def test_corrupt_database_is_store_corrupt(db_path, content):
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    with pytest.raises(StoreCorrupt):
        FactStore.open_readonly(db_path).list_facts()
    with pytest.raises(StoreCorrupt):
        FactStore(db_path)


def test_foreign_tables_are_store_corrupt(db_path):
    db_path.parent.mkdir(parents=True)
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE facts (id INTEGER)")
    db.close()
    with pytest.raises(StoreCorrupt):
        FactStore.open_readonly(db_path)
    with pytest.raises(StoreCorrupt):
        FactStore(db_path)


def test_symlinked_database_is_refused(tmp_path, db_path):
    real = tmp_path / "elsewhere.sqlite3"
    with FactStore(real) as fs:
        fs.add("x")
    db_path.parent.mkdir(parents=True)
    os.symlink(real, db_path)
    with pytest.raises(StoreCorrupt, match="symbolic link"):
        FactStore.open_readonly(db_path)
    with pytest.raises(StoreCorrupt, match="symbolic link"):
        FactStore(db_path)


def test_busy_writer_is_store_busy(db_path):
    from lecode_memctl.core.errors import StoreBusy

    with FactStore(db_path) as fs:
        fid = fs.add("x").fact.fact_id
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        fs = FactStore(db_path, busy_timeout=0.05)
        with pytest.raises(StoreBusy):
            fs.forget(fid)
        fs.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with FactStore(db_path) as fs:
        assert fs.get(fid) is not None


def test_bad_text_is_usage_error(db_path):
    with FactStore(db_path) as fs:
        for bad in ("", "   ", "a\x00b", "\ud800", 5):
            with pytest.raises(UsageError):
                fs.add(bad)  # type: ignore[arg-type]
    assert not db_path.exists()


def test_private_snapshot_is_private_and_removed(db_path):
    writer = FactStore(db_path, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    fid = writer.add("only in the wal").fact.fact_id
    try:
        before = tree_hash(db_path.parent)
        ro = FactStore.open_readonly(db_path)
        assert ro.snapshot and ro.get(fid).text == "only in the wal"
        tmp = Path(ro._tmpdir)
        assert (tmp.stat().st_mode & 0o777) == 0o700
        assert sorted(os.listdir(tmp))[0] == "facts.sqlite3"
        with pytest.raises(UsageError):
            ro.add("x")
        ro.close()
        assert not tmp.exists()
        assert tree_hash(db_path.parent) == before
    finally:
        writer.close()


def _kernel_copying(limit: int, then: int | None):
    """copy_file_range as a kernel that copies ``limit`` bytes, then returns
    0 (``then`` None: as kernels 5.3-5.18 do for procfs, sysfs and some FUSE
    or network file systems, at once or part way) or fails with ``then``."""
    state = {"done": 0, "calls": 0}

    def fake(src, dst, count, *a):
        state["calls"] += 1
        left = limit - state["done"]
        if left <= 0:
            if then is None:
                return 0
            raise OSError(then, os.strerror(then))
        data = os.read(src, min(count, left, 4096))
        os.write(dst, data)
        state["done"] += len(data)
        return len(data)
    return fake


@pytest.mark.heavy
@pytest.mark.parametrize("kernel", ["copy_file_range", "EXDEV", "absent", "zero-first",
                                    "zero-after-64k", "EINVAL-after-64k"])
def test_the_snapshot_copies_the_database_byte_for_byte_however_it_copies(db_path, monkeypatch,
                                                                         kernel):
    """The snapshot's copy of the database: by the kernel (copy_file_range),
    or through Python where the kernel says it cannot (EXDEV: another file
    system on an older kernel) or has no such call; the same bytes, mode
    0600, and the store untouched.  A 0 from the kernel before the end (some
    file systems on kernels 5.3-5.18), at once or part way, or a "cannot"
    part way, leaves the rest to Python: never a short copy.  An error after
    bytes were copied (a full disk) is not mistaken for "cannot": it is
    raised, as a failed write of the copy (exit 7)."""
    import errno as errno_mod

    from lecode_memctl.core import snapshot as snap

    with FactStore(db_path) as fs:
        for i in range(300):
            fs.add(f"fact {i} " + "y" * 3000)
    before = tree_hash(db_path.parent)
    real = getattr(os, "copy_file_range", None)
    calls = []
    if kernel == "EXDEV":
        def refuse(*a):
            calls.append(a)
            raise OSError(errno_mod.EXDEV, "Invalid cross-device link")
        monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    elif kernel == "absent":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    elif kernel != "copy_file_range":
        limit = 0 if kernel == "zero-first" else 65536
        then = errno_mod.EINVAL if kernel.startswith("EINVAL") else None
        monkeypatch.setattr(os, "copy_file_range", _kernel_copying(limit, then), raising=False)
    elif real is None:
        pytest.skip("no os.copy_file_range here")
    dst = str(db_path.parent.parent / f"copy-{kernel}")
    got = snap._copy_database(db_path, dst)
    assert got is not None and got[2] == db_path.stat().st_size > 900_000
    assert Path(dst).read_bytes() == db_path.read_bytes()
    assert (os.stat(dst).st_mode & 0o777) == 0o600
    assert tree_hash(db_path.parent) == before
    assert (len(calls) == 1) == (kernel == "EXDEV")
    if real is not None and kernel == "copy_file_range":
        n = [0]

        def full_after_one(*a):
            n[0] += 1
            if n[0] > 1:
                raise OSError(errno_mod.ENOSPC, "No space left on device")
            return real(a[0], a[1], 4096)
        monkeypatch.setattr(os, "copy_file_range", full_after_one)
        from lecode_memctl.core.errors import StoreWriteError
        with pytest.raises(StoreWriteError, match="temporary copy .*No space left"):
            snap._copy_database(db_path, dst + "-2")


@pytest.mark.parametrize("err", ["ENOSPC", "EDQUOT", "EFBIG", "EIO", "EACCES"])
@pytest.mark.parametrize("where", ["create", "write", "kernel"])
def test_a_failing_write_of_the_private_copy_is_a_write_failure(db_path, monkeypatch, tmp_path,
                                                                err, where):
    """The private snapshot is written under $TMPDIR: a write failing there
    (a full or over-quota $TMPDIR, a file-size limit, an I/O error, no
    permission) is a write failure (exit 7) that names the temporary copy
    and where it was, never "store unreadable" (exit 5: it was, and the
    store is fine).  An error the kernel's copy gives that may be either
    side's (EIO, EACCES) is left to the plain copy, which tells a read of the
    store from a write of the copy: here the read is fine, so the store opens.
    The private directory is removed, the store untouched."""
    import errno as errno_mod

    from lecode_memctl.core import snapshot as snap
    from lecode_memctl.core.errors import StoreWriteError

    code = getattr(errno_mod, err)
    writer = FactStore(db_path, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    writer.add("only in the wal")            # a -wal: its copy is written too
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))

    def fail(*a, **k):
        raise OSError(code, os.strerror(code))
    if where == "create":
        real_open = snap.open_owned

        def open_(path, flags=os.O_RDONLY, *a):
            if flags & os.O_CREAT:
                fail()
            return real_open(path, flags, *a)
        monkeypatch.setattr(snap, "open_owned", open_)
    elif where == "write":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
        monkeypatch.setattr(snap, "write_all", fail)
    else:
        monkeypatch.setattr(os, "copy_file_range", fail, raising=False)
    before = tree_hash(db_path.parent)
    try:
        if where == "kernel" and err in ("EIO", "EACCES"):
            with FactStore.open_readonly(db_path) as ro:
                assert ro.count() == 1
        else:
            with pytest.raises(StoreWriteError) as got:
                FactStore.open_readonly(db_path)
            message = str(got.value)
            assert "\n" not in message
            assert "temporary copy" in message and str(tmp) in message, message
            assert os.strerror(code) in message and "TMPDIR" in message, message
        assert os.listdir(tmp) == []
        assert tree_hash(db_path.parent) == before
    finally:
        writer.close()



@pytest.mark.parametrize("sqlite_says", ["disk I/O error", "database or disk is full"])
def test_sqlite_failing_to_write_beside_the_copy_names_the_copy(db_path, monkeypatch, tmp_path,
                                                                sqlite_says):
    """Opening the copy, SQLite writes beside it in $TMPDIR (its -shm, a
    recovered -wal): with no room there (a tmpfs with room for the copy but
    not the -shm) it says "disk I/O error".  That is exit 7 naming the
    temporary copy and $TMPDIR, not the store, whose own -shm nobody wrote."""
    import sqlite3 as sqlite3_mod

    from lecode_memctl.core.errors import StoreWriteError

    with FactStore(db_path) as fs:
        fs.add("x")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    real = FactStore._load_schema

    def load(self, *, migrate):
        if self.snapshot:
            raise sqlite3_mod.OperationalError(sqlite_says)
        return real(self, migrate=migrate)
    monkeypatch.setattr(FactStore, "_load_schema", load)
    with pytest.raises(StoreWriteError) as got:
        FactStore.open_readonly(db_path)
    message = str(got.value)
    assert message.startswith(f"{db_path}: cannot write its temporary copy in {tmp}: "
                              f"{sqlite_says}; "), message
    assert "TMPDIR" in message
    assert os.listdir(tmp) == []


def test_a_store_that_cannot_be_read_is_still_store_corrupt(db_path, monkeypatch):
    """The other side of the copy: an I/O error reading the store itself is
    still exit 5, whether the kernel or Python copies."""
    import errno as errno_mod

    from lecode_memctl.core import snapshot as snap

    with FactStore(db_path) as fs:
        fs.add("x")
    real_read = os.read

    def read(fd, n):
        if os.path.samefile(f"/proc/self/fd/{fd}", db_path):
            raise OSError(errno_mod.EIO, os.strerror(errno_mod.EIO))
        return real_read(fd, n)

    def kernel_eio(*a):
        raise OSError(errno_mod.EIO, os.strerror(errno_mod.EIO))
    monkeypatch.setattr(snap.os, "read", read)
    monkeypatch.setattr(os, "copy_file_range", kernel_eio, raising=False)
    with pytest.raises(StoreCorrupt, match="cannot read: Input/output error"):
        FactStore.open_readonly(db_path)


def test_a_kernel_that_copies_nothing_still_gives_every_fact(db_path, monkeypatch):
    """End to end: a read-only open where copy_file_range returns 0 at once
    (procfs-like file systems on kernels 5.3-5.18) lists every fact, not an
    empty store."""
    with FactStore(db_path) as fs:
        for i in range(200):
            fs.add(f"fact {i} " + "y" * 2000)
    monkeypatch.setattr(os, "copy_file_range", _kernel_copying(0, None), raising=False)
    with FactStore.open_readonly(db_path) as ro:
        assert ro.count() == 200


def test_snapshot_gives_up_when_the_wal_keeps_changing(db_path, monkeypatch):
    from lecode_memctl.core import snapshot as facts_mod
    from lecode_memctl.core.errors import StoreBusy

    writer = FactStore(db_path, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    writer.add("x")
    # (the first write makes the schema in the journal mode the file has, and
    # switches to WAL after it: the second write is the one in the -wal)
    writer.add("y")
    real = facts_mod._copy_nofollow
    counter = iter(range(10**6))

    def changing(path, dst, keep=None, limit=None):
        got = real(path, dst, keep, limit)
        if got is not None and str(path).endswith("-wal"):
            return (got[0] + str(next(counter)), *got[1:])   # each read sees other bytes
        return got

    monkeypatch.setattr(facts_mod, "_copy_nofollow", changing)
    monkeypatch.setattr(facts_mod.time, "sleep", lambda s: None)
    try:
        with pytest.raises(StoreBusy, match="kept changing"):
            FactStore.open_readonly(db_path)
    finally:
        writer.close()


def test_symlinked_wal_is_refused(tmp_path, db_path):
    with FactStore(db_path) as fs:
        fs.add("x")
    (tmp_path / "other").write_bytes(b"x" * 100)
    os.symlink(tmp_path / "other", str(db_path) + "-wal")
    with pytest.raises(StoreCorrupt, match="symbolic link"):
        FactStore.open_readonly(db_path)


def test_private_snapshot_memory_does_not_grow_with_the_database(db_path):
    """A read while a writer holds the -wal copies the database into a private
    directory in chunks: peak Python memory stays far below the database size
    (it held the whole database twice, ~100 MiB for a 39 MB store)."""
    import tracemalloc

    writer = FactStore(db_path, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    try:
        for i in range(200):
            writer.add(f"fact {i} " + "x" * 40_000)
        size = db_path.stat().st_size + Path(str(db_path) + "-wal").stat().st_size
        assert size > 8_000_000
        tracemalloc.start()
        try:
            ro = FactStore.open_readonly(db_path)
            _cur, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        try:
            assert ro.snapshot and ro.count() == 200
        finally:
            ro.close()
        assert peak < 4 * 1024 * 1024, (peak, size)
    finally:
        writer.close()


@pytest.mark.parametrize("call", ["revise", "attach_source", "forget"])
def test_write_to_an_unknown_fact_creates_no_database(db_path, call):
    """With no facts.sqlite3 there is no fact: revise / attach_source / forget of any id
    say so without creating the database (regression: revise and attach_source made one)."""
    from lecode_memctl.core.errors import NotFound
    from lecode_memctl.core.sourceref import SourceRef

    fs = FactStore(db_path)
    ref = SourceRef("s1", (1,), "0" * 64)
    with pytest.raises(NotFound, match="no fact"):
        if call == "revise":
            fs.revise("0123456789abcdef", "t", expected_revision=1)
        elif call == "attach_source":
            fs.attach_source("0123456789abcdef", 1, ref)
        else:
            fs.forget("0123456789abcdef")
    fs.close()
    assert not db_path.exists()
    assert not list(db_path.parent.glob("facts.sqlite3*"))


def test_snapshot_copies_only_the_wal_generation_in_use(db_path):
    """After a checkpoint SQLite reuses the -wal from its start: frames past the new
    generation are leftovers a writer overwrites at any time, so the snapshot copies and
    compares only the header and the frames whose salts match it (comparing the whole
    file starved reads under a busy writer: the mixed load's exit 6)."""
    from lecode_memctl.core import snapshot as facts_mod

    writer = FactStore(db_path, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    try:
        for i in range(60):
            writer.add(f"old {i} " + "x" * 3000)
        writer._conn.execute("PRAGMA wal_checkpoint(RESTART)")
        fid = writer.add("written after the restart").fact.fact_id
        wal = Path(str(db_path) + "-wal")
        valid = facts_mod._wal_valid_length(wal)
        assert 32 < valid < wal.stat().st_size          # leftovers past the generation
        with FactStore.open_readonly(db_path) as ro:
            assert ro.snapshot and ro.count() == 61
            assert ro.get(fid).text == "written after the restart"
            assert (Path(ro._tmpdir) / "facts.sqlite3-wal").stat().st_size == valid
    finally:
        writer.close()


def test_wal_valid_length_edge_cases(tmp_path):
    from lecode_memctl.core import snapshot as facts_mod

    wal = tmp_path / "x-wal"
    assert facts_mod._wal_valid_length(wal) is None
    wal.write_bytes(b"")
    assert facts_mod._wal_valid_length(wal) == 0
    wal.write_bytes(b"not a wal header at all, really not")
    assert facts_mod._wal_valid_length(wal) == 0
