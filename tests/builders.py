"""Builders shared by the test files: the stores, worlds and tables that several
files used to build each for itself.  Fixtures that hand these out are in
``conftest.py``; this module holds plain functions and constants, so a test
file (or a snippet run in a child process) can import them directly."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

SLUG = "proj-0123456789ab"   # the slug of the hand-built stores (<tmp>/memory/SLUG)

R = TypeVar("R")
C = TypeVar("C")


# ---------------------------------------------------------------- two speeds

def diagonal(rows: Sequence[R], cols: Sequence[C]) -> set[tuple[R, C]]:
    """The cells of a rows x cols matrix that the inner loop (``-m "not sweep and not heavy"``)
    keeps: cell i pairs ``rows[i % len(rows)]`` with ``cols[i % len(cols)]`` for
    i < max(len(rows), len(cols)), so every row and every column runs at least
    once.  The full command runs every cell."""
    n = max(len(rows), len(cols))
    return {(rows[i % len(rows)], cols[i % len(cols)]) for i in range(n)}


def sweep_unless(keep: bool) -> list[pytest.MarkDecorator]:
    """``marks=`` for a ``pytest.param``: the ``sweep`` marker unless ``keep``."""
    return [] if keep else [pytest.mark.sweep]


def sample_steps(total: int) -> list[int]:
    """The steps of an every-step sweep that the inner loop keeps: the first,
    the middle and the last of ``total``."""
    return sorted({1, (total + 1) // 2, total} - {0})


# every step (the full command) or a sample of them (the inner loop), for a
# sweep parametrized with @pytest.mark.parametrize("steps", STEPS)
STEPS = [pytest.param("every", marks=pytest.mark.sweep), "first-middle-last"]


# ---------------------------------------------------------------- the demo store

def copy_demo(demo, dst: Path) -> Path:
    """A private copy of a ``core.demo.build_demo`` tree (config dir and the
    project around it) at ``dst``; returns the copy's store directory (same slug:
    the slug is the template project's)."""
    shutil.copytree(demo.base, dst, symlinks=True)
    return dst / demo.store.path.relative_to(demo.base)



# ---------------------------------------------------------------- schema damage

def _rebuilt_without(table: str, keep: str) -> tuple[str, ...]:
    """SQL that rebuilds ``table`` with only the columns ``keep`` (a writer
    outside memctl that dropped a column: no constraint left either)."""
    return (f"CREATE TABLE x2 AS SELECT {keep} FROM {table}", f"DROP TABLE {table}",
            f"ALTER TABLE x2 RENAME TO {table}")


#: A facts database (schema version current) without one table or one column
#: memctl reads: name -> SQL run with foreign keys off (:func:`damage_schema`).
SCHEMA_DAMAGE: dict[str, tuple[str, ...]] = {
    "no_exclusions": ("DROP TABLE exclusions",),
    "no_provenance": ("DROP TABLE provenance",),
    "no_provenance_seq": _rebuilt_without("provenance", "fact_id, revision, session_id"),
    "no_source_refs_digest": _rebuilt_without("source_refs", "fact_id, revision, session_id, seqs"),
    "no_meta": ("DROP TABLE meta",),
    "no_forgotten": ("DROP TABLE forgotten",),
}


def store_sql(store: Path, *statements: str) -> None:
    """Run ``statements`` on the store's facts database, in one transaction
    (a test that damages rows the way a tool outside lecode would)."""
    import sqlite3

    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        with db:
            for sql in statements:
                db.execute(sql)
    finally:
        db.close()


def store_generation(store: Path, *, readonly: bool = True) -> int:
    """The store's exclusion generation as ``FactStore.generation`` reads
    it, through a read-only open or (``readonly=False``) a writer's."""
    from lecode_memctl.core.facts import FactStore

    fs = (FactStore.open_readonly if readonly else FactStore)(store / "facts.sqlite3")
    try:
        return fs.generation()
    finally:
        fs.close()


_EMPTY_DB: list[bytes] = []


def _made_by_factstore(facts_db: Path) -> None:
    """A facts database as FactStore makes it: lecode's schema, no fact."""
    from lecode_memctl.core.facts import FactStore

    with FactStore(facts_db) as fs:
        fs.add("schema bootstrap")
        db = fs._conn
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM revisions")
        db.execute("DELETE FROM facts")
        db.execute("COMMIT")


@contextlib.contextmanager
def empty_facts_db(facts_db: Path) -> Iterator[sqlite3.Connection]:
    """A facts database made by FactStore (lecode's schema, no fact, WAL
    mode), its connection in one write transaction for the test's rows,
    committed when the block ends.  FactStore makes it once per process; each
    call writes a copy of its bytes and opens it on a plain connection
    (foreign keys on, as FactStore has them; no fsync: a scratch store).
    Made anew through FactStore at each call, it took some 40 ms, a fifth of
    some of test_engine.py's examples."""
    import os
    import tempfile

    from lecode_memctl.core.layout import FILE_MODE

    if not _EMPTY_DB:
        scratch = Path(tempfile.mkdtemp(prefix="empty-facts-db-"))
        try:
            _made_by_factstore(scratch / "facts.sqlite3")
            assert os.listdir(scratch) == ["facts.sqlite3"]     # (no -wal left)
            _EMPTY_DB.append((scratch / "facts.sqlite3").read_bytes())
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    facts_db.parent.mkdir(parents=True, exist_ok=True)      # (as FactStore makes it)
    fd = os.open(facts_db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(_EMPTY_DB[0])
    db = sqlite3.connect(facts_db, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("BEGIN IMMEDIATE")
        yield db
        db.execute("COMMIT")
    finally:
        db.close()


def damage_schema(db_path: Path, name: str) -> None:
    """Apply ``SCHEMA_DAMAGE[name]`` to the facts database at ``db_path``."""
    import sqlite3

    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys = OFF")
        for sql in SCHEMA_DAMAGE[name]:
            db.execute(sql)
    finally:
        db.close()


@dataclass
class DemoWorld:
    """The demo's config dir as a template, for tests that run commands against
    fresh copies of it with ``LECODE_CONFIG_DIR=COPY`` from the template project."""

    template: Path             # pristine config dir (never touched by a test)
    project: Path              # cwd for every command
    slug: str
    facts: dict[str, str]
    planted: str
    legacy_slug: str

    def store(self, cfg: Path) -> Path:
        return cfg / "memory" / self.slug

    def legacy(self, cfg: Path) -> Path:
        return cfg / "memory" / self.legacy_slug

    def fresh(self, cfg: Path) -> Path:
        shutil.rmtree(cfg, ignore_errors=True)
        shutil.copytree(self.template, cfg, symlinks=True)
        return cfg


def world_of(demo) -> DemoWorld:
    """The ``DemoWorld`` of a built demo (the demo itself stays untouched)."""
    legacy = [p.name for p in (demo.config_dir / "memory").iterdir() if p.name != demo.store.slug]
    assert len(legacy) == 1
    return DemoWorld(demo.config_dir, demo.project, demo.store.slug, dict(demo.facts),
                     demo.planted, legacy[0])


def build_world(base: Path) -> DemoWorld:
    """Build a demo under ``base`` and return its ``DemoWorld``."""
    from lecode_memctl.core.demo import build_demo

    return world_of(build_demo(base))


def traced_peak(fn):  # noqa: ANN001, ANN201
    """``(fn(), the peak of Python's allocations while it ran, in bytes)``
    (tracemalloc: what the interpreter allocates, not SQLite's own memory)."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class Counted(int):
    """An integer that counts the comparisons made with it (``Counted.calls``,
    reset by the caller): a test of how many steps a search takes, at two
    sizes, where a timing would be noise."""
    calls = 0

    def _count(self, other: object, op: str) -> bool:
        Counted.calls += 1
        return getattr(int(self), op)(other)

    def __lt__(self, other: object) -> bool: return self._count(other, "__lt__")  # noqa: E704
    def __le__(self, other: object) -> bool: return self._count(other, "__le__")  # noqa: E704
    def __gt__(self, other: object) -> bool: return self._count(other, "__gt__")  # noqa: E704
    def __ge__(self, other: object) -> bool: return self._count(other, "__ge__")  # noqa: E704
    def __eq__(self, other: object) -> bool: return self._count(other, "__eq__")  # noqa: E704
    __hash__ = int.__hash__
