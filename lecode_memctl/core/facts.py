"""Source-linked facts: the ``facts.sqlite3`` database of a project's store.

:class:`FactStore` is the reference design's internal API (``remember``,
``correct``, ``forget``, ``generation``, ``add``, ``get``, ``revise``,
``provenance``, bounded ``list_facts``, literal ``search``, ``attach_source``,
``source``, ``is_excluded``, ``excluded_seqs``, ``close``).  It is also the
project's :class:`~lecode_memctl.core.sourceref.ExclusionReader`.

Two ways to open a database:

* ``FactStore(path)`` -- the writer.  Nothing is created until the first
  write; an existing database is migrated to the current schema on open.
  Every write is one ``BEGIN IMMEDIATE`` transaction with a busy timeout
  (a lock not obtained in time is :class:`StoreBusy`).
* ``FactStore.open_readonly(path)`` -- what memctl's read commands use.  It
  never creates, modifies or migrates anything in the store, not even a
  ``-wal``/``-shm`` file or a read mark, and still sees rows a live writer
  committed that are only in the ``-wal`` (it reads a private snapshot
  then, see :mod:`~lecode_memctl.core.snapshot`).  ``docs/FORMAT.md``
  ("Facts database") documents both.

What the commands report from the facts (rows, pages, recall, history) is
in :mod:`~lecode_memctl.core.factview`.
"""

from __future__ import annotations

import _thread
import collections
import contextlib
import functools
import itertools
import operator
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar

import orjson

from ._lazy import lazy_compile
from ._record import record
from .atomic import is_link_refusal, lstat_regular, open_nofollow, remove_private
from .errors import (
    Conflict,
    MemctlError,
    NotFound,
    StoreBusy,
    StoreCorrupt,
    StoreWriteError,
    UsageError,
    fds_exhausted,
    out_of_fds,
    raise_if_out_of_fds,
    sqlite_error,
)
from .hashing import sha256
from .sessions import ClosesOnExit, is_generated
from .snapshot import copy_write_error, private_journal_snapshot, private_snapshot
from .sourceref import (
    HIDDEN,
    MAX_POSITION,
    UNVERIFIED,
    VALID,
    SessionReader,
    SourceRef,
    SourceStatus,
    StoredSource,
    check_session_id,
    id_and_digest_ok,
    positions_ok,
    status_for,
)

if TYPE_CHECKING:
    from .factresults import ForgetPlan as ForgetPlan, RememberResult as RememberResult
else:
    from ._lazy import lazy_getattr

    # What the writes return, loaded on first use (see core/_lazy.py).
    _MOVED = {"ForgetPlan": ".factresults", "RememberResult": ".factresults"}
    __getattr__ = lazy_getattr(__name__, _MOVED)

BUSY_TIMEOUT = 5.0          # seconds a writer waits for the database lock
LIST_MAX = 1000             # the most rows one list()/search() call returns
SEARCH_DEFAULT = 50
GROUP_REFS = 2048   # references per group of source_refs_by_session
_SHARED_FROM = 8    # stored_sources_by_session: a span longer than this shares its ints
FACT_ID_RE = lazy_compile(r"^[0-9a-f]{16}\Z")  # \Z: "$" would accept a trailing newline


# --------------------------------------------------------------------------
# Data


@record(frozen=True)
class Provenance:
    """A legacy provenance row: positions of a session, no digest.  Reported
    ``unverified``; never trusted or backfilled into a SourceRef.  (Created
    with the module, though only old databases hold such rows: Fact and
    Revision name it, and ``typing.get_type_hints`` resolves their fields
    in this module.)"""

    session_id: str
    seqs: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "seqs": list(self.seqs)}


@record(frozen=True)
class Revision:
    fact_id: str
    revision: int
    text: str
    created: str
    source: SourceRef | None = None
    provenance: tuple[Provenance, ...] = ()
    source_error: str | None = None   # a stored source ref that does not parse (source is None)

    def evidence_positions(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        if self.source is not None:
            out.setdefault(self.source.session_id, set()).update(self.source.seqs)
        for p in self.provenance:
            out.setdefault(p.session_id, set()).update(p.seqs)
        return out


@record(frozen=True)
class Fact:
    """One fact at its current revision (administrative, unverified read)."""

    fact_id: str
    revision: int
    text: str
    created: str
    updated: str
    source: SourceRef | None = None          # the current revision's SourceRef
    provenance: tuple[Provenance, ...] = ()  # the current revision's legacy rows


# --------------------------------------------------------------------------
# Schema and migrations

Migration = Callable[[sqlite3.Connection], None]


def m001_initial(db: sqlite3.Connection) -> None:
    """The legacy schema: facts, revisions, legacy provenance, exclusions.

    ``IF NOT EXISTS``: a legacy database (lecode before schema versioning,
    ``user_version`` 0) already has these tables; the migration keeps them
    and their rows as they are."""
    db.execute("""CREATE TABLE IF NOT EXISTS facts (
        fact_id  TEXT PRIMARY KEY,
        revision INTEGER NOT NULL CHECK (revision >= 1),
        created  TEXT NOT NULL,
        updated  TEXT NOT NULL)""")
    db.execute("""CREATE TABLE IF NOT EXISTS revisions (
        fact_id  TEXT NOT NULL REFERENCES facts(fact_id) ON DELETE CASCADE,
        revision INTEGER NOT NULL CHECK (revision >= 1),
        text     TEXT NOT NULL,
        created  TEXT NOT NULL,
        PRIMARY KEY (fact_id, revision))""")
    db.execute("""CREATE TABLE IF NOT EXISTS provenance (
        fact_id    TEXT NOT NULL,
        revision   INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL CHECK (seq >= 0),
        PRIMARY KEY (fact_id, revision, session_id, seq),
        FOREIGN KEY (fact_id, revision) REFERENCES revisions(fact_id, revision)
            ON DELETE CASCADE)""")
    db.execute("""CREATE TABLE IF NOT EXISTS exclusions (
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL CHECK (seq >= 0),
        PRIMARY KEY (session_id, seq)) WITHOUT ROWID""")
    _require_columns(db, "facts", {"fact_id", "revision", "created", "updated"})
    _require_columns(db, "revisions", {"fact_id", "revision", "text", "created"})
    _require_columns(db, "provenance", {"fact_id", "revision", "session_id", "seq"})
    _require_columns(db, "exclusions", {"session_id", "seq"})


def m002_source_refs(db: sqlite3.Connection) -> None:
    """One SourceRef per revision, keyed by (fact_id, revision).

    Each step applies to what is there (as each of :data:`MIGRATIONS`): a
    version-3 database rebuilt by ``sqlite3 .dump`` or ``iterdump()``, which
    do not keep ``user_version``, already has the table and its indexes; the
    migration keeps them and their rows."""
    db.execute("""CREATE TABLE IF NOT EXISTS source_refs (
        fact_id    TEXT NOT NULL,
        revision   INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        seqs       TEXT NOT NULL,
        digest     TEXT NOT NULL,
        PRIMARY KEY (fact_id, revision),
        FOREIGN KEY (fact_id, revision) REFERENCES revisions(fact_id, revision)
            ON DELETE CASCADE)""")
    _require_shape(db, "source_refs")
    db.execute("CREATE INDEX IF NOT EXISTS source_refs_session ON source_refs(session_id)")
    db.execute("CREATE INDEX IF NOT EXISTS provenance_session ON provenance(session_id, seq)")


def m003_generation(db: sqlite3.Connection) -> None:
    """The exclusion generation, forget retry markers, and when each exclusion
    was installed (the generation its forget produced; 0 for legacy rows).

    A database that already holds exclusions had a forget: it starts at
    generation 1, so that generated messages written before (without an
    epoch) stay hidden, as the store contract's rule 4 requires (the rule
    is :func:`implied_generation`'s, which every reader applies to a
    database without a generation row).  A database that has these already
    (a version-3 database whose ``user_version`` was lost) keeps them: its
    generation row as stored, which is the generation the readers gave
    (:func:`meta_generation`); without one, the row written is the implied
    generation the readers gave, computed before anything here changes."""
    start = implied_generation(db)
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    _require_shape(db, "meta")
    if not db.execute(f"SELECT 1 FROM meta WHERE {GENERATION_WHERE}").fetchone():
        db.execute("INSERT INTO meta (key, value) VALUES ('generation', ?)", (start,))
    db.execute("""CREATE TABLE IF NOT EXISTS forgotten (
        fact_id    TEXT PRIMARY KEY,
        generation INTEGER NOT NULL)""")
    _require_shape(db, "forgotten")
    if "generation" not in _columns(db, "exclusions"):
        db.execute("ALTER TABLE exclusions ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")


MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial", m001_initial),
    ("m002_source_refs", m002_source_refs),
    ("m003_generation", m003_generation),
]
SCHEMA_VERSION = len(MIGRATIONS)


#: Every table and column memctl reads, each with the schema version from
#: which it is there (the migration above that makes it): the one place that
#: says what a database of a given version must hold (:func:`read_schema`).
#: Checked when a store is opened (:func:`_check_schema`), so that a database
#: without one of them is StoreCorrupt there -- exit 5, a validate finding, an
#: export's ``facts.error`` -- not SQLite's "no such table" halfway through
#: a listing.  (A table or column added by a migration goes here with it.)
READ_SCHEMA: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "facts", ("fact_id", "revision", "created", "updated")),
    (0, "revisions", ("fact_id", "revision", "text", "created")),
    (0, "provenance", ("fact_id", "revision", "session_id", "seq")),
    (0, "exclusions", ("session_id", "seq")),
    (2, "source_refs", ("fact_id", "revision", "session_id", "seqs", "digest")),
    (3, "meta", ("key", "value")),
    (3, "forgotten", ("fact_id", "generation")),
    (3, "exclusions", ("generation",)),
)


def read_schema(version: int) -> dict[str, set[str]]:
    """The tables memctl reads in a database of schema ``version``, each with
    the columns it reads (:data:`READ_SCHEMA`)."""
    need: dict[str, set[str]] = {}
    for since, table, columns in READ_SCHEMA:
        if version >= since:
            need.setdefault(table, set()).update(columns)
    return need


def _object_kind(db: sqlite3.Connection, name: str) -> str | None:
    """What the schema holds under ``name`` as SQL finds it (ASCII case
    ignored): "table" (a table with its own b-tree), "a view", "a virtual
    table" (a view, or a virtual table's module, is code that a read runs:
    a recursive view never ends), or None when there is nothing of that name.
    Read from ``sqlite_master`` alone: nothing of the object is run (a virtual
    table whose module is not loaded is named too, not "no such module")."""
    kinds = {kind for (kind,) in db.execute(
        "SELECT CASE WHEN type = 'view' THEN 'a view' "
        "WHEN rootpage > 0 THEN 'table' ELSE 'a virtual table' END "
        "FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE",
        (name,))}
    if not kinds:
        return None
    # (several: a crafted schema; any that is not a table is refused)
    return min(kinds - {"table"}, default="table")


def _shape_problem(db: sqlite3.Connection, table: str, needed: set[str]) -> str | None:
    """What ``table`` lacks of the columns ``needed`` ("table meta lacks
    column(s) value", "table meta is missing"), or what it is instead of
    a table ("table facts is a view": :func:`_object_kind`), or None."""
    kind = _object_kind(db, table)
    if kind is None:
        return f"table {table} is missing"
    if kind != "table":
        return f"table {table} is {kind}"
    cols = {row[1] for row in db.execute(f"PRAGMA table_info({sql_name(table)})")}
    if not cols:
        return f"table {table} is missing"
    missing = needed - cols
    if missing:
        return f"table {table} lacks column(s) {', '.join(sorted(missing))}"
    return None


#: The CHECK constraints lecode's own tables declare (:func:`m001_initial`),
#: each as :func:`_checks_of` reads it (lower case, blanks and comments removed)
LECODE_CHECKS = frozenset({"revision>=1", "seq>=0"})


def _sql_tokens(sql: str) -> Iterator[tuple[str, bool]]:
    """The tokens of ``sql`` as SQLite reads them, each with whether it is a
    bare word (a keyword or unquoted name): comments (``--`` to the end of
    the line, ``/* */``, one left open running to the end) and blanks
    dropped, a string literal ('..', '' within it) or quoted name ("..",
    [..], `..`) one token, never a bare word.  Only as far as telling a
    CHECK keyword from the same letters in a comment, a string or a name."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "'\"`":
            j = i + 1
            while True:
                j = sql.find(ch, j)
                if j < 0:
                    j = n
                    break
                if sql.startswith(ch * 2, j):
                    j += 2
                    continue
                j += 1
                break
            yield sql[i:j], False
            i = j
        elif ch == "[":
            end = sql.find("]", i + 1)
            j = n if end < 0 else end + 1
            yield sql[i:j], False
            i = j
        elif ch.isalnum() or ch in "_$" or ord(ch) > 127:
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] in "_$" or ord(sql[j]) > 127):
                j += 1
            yield sql[i:j], True
            i = j
        else:
            yield ch, False
            i += 1


def _checks_of(sql: str) -> list[str]:
    """The expressions of the CHECK constraints in a table's SQL, each lower
    case without blanks or comments (:func:`_sql_tokens`: a CHECK keyword
    hidden behind a comment, or right after a string, is found; the word in
    a string or quoted name is none).  A CHECK keyword not followed by
    ``(``, or whose parentheses do not close: all that follows it."""
    out: list[str] = []
    tokens = list(_sql_tokens(sql))
    at = 0
    while at < len(tokens):
        text, word = tokens[at]
        at += 1
        if not (word and text.lower() == "check"):
            continue
        depth, parts = 0, []
        while at < len(tokens):
            tok, bare = tokens[at]
            at += 1
            parts.append(tok.lower() if bare or tok[:1] not in "'\"`[" else tok)
            depth += (tok == "(") - (tok == ")")
            if depth <= 0:
                break
        if parts[:1] == ["("] and parts[-1:] == [")"] and depth == 0:
            parts = parts[1:-1]
        out.append("".join(parts) if parts else "(nothing)")
    return out


def _index_expressions(db: sqlite3.Connection, table: str) -> list[str]:
    """The indexes of ``table`` that SQLite evaluates an expression of on
    every row it checks or writes, each as "expression index NAME" or
    "partial index NAME": from ``PRAGMA index_list`` (partial) and
    ``PRAGMA index_xinfo`` (a column -2, an expression), nothing evaluated.
    Lecode's own indexes (its keys', source_refs_session,
    provenance_session) have neither; every index is judged, whoever made it."""
    out: list[str] = []
    for row in db.execute(f"PRAGMA index_list({sql_name(table)})"):
        name = row_text(row[1])
        if row[4]:
            out.append(f"partial index {name}")
        elif any(col[1] == -2 for col in db.execute(f"PRAGMA index_xinfo({sql_name(name)})")):
            out.append(f"expression index {name}")
    return out


def foreign_expressions(db: sqlite3.Connection) -> dict[str, str]:
    """What lecode's tables hold that lecode never writes and that SQLite
    evaluates on every row it checks (``integrity_check``) or writes: a
    generated column (``PRAGMA table_xinfo``), a CHECK constraint other than
    lecode's own (:data:`LECODE_CHECKS`, read by :func:`_checks_of`), an
    index on an expression or a partial one (:func:`_index_expressions`).
    Each such table with a text saying what ("table facts has generated
    column(s) g0, g1"), read from the schema alone (nothing of it is
    evaluated).  The same judgement as :func:`_object_kind`'s (a view is
    code that a read runs): these are code that a check or a write runs."""
    out: dict[str, str] = {}
    for table in sorted({t for _since, t, _cols in READ_SCHEMA}):
        if _object_kind(db, table) != "table":
            continue
        parts: list[str] = []
        generated = [row_text(r[1]) for r in db.execute(
            f"PRAGMA table_xinfo({sql_name(table)})") if r[6] in (2, 3)]
        if generated:
            parts.append(f"generated column(s) {', '.join(generated)}")
        sqls = [row_text(r[0]) for r in db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
            (table,)) if r[0] is not None]
        checks = [c for sql in sqls for c in _checks_of(sql) if c not in LECODE_CHECKS]
        if checks:
            parts.append(f"{len(checks)} CHECK constraint(s) lecode does not write "
                         f"({checks[0][:60]}{'...' if len(checks[0]) > 60 else ''})")
        parts.extend(_index_expressions(db, table))
        if parts:
            out[table] = f"table {table} has {' and '.join(parts)}"
    return out


def _require_columns(db: sqlite3.Connection, table: str, needed: set[str],
                     path: Path | None = None) -> None:
    where = f"{path}: " if path is not None else "facts database: "
    problem = _shape_problem(db, table, needed)
    if problem is not None:
        raise StoreCorrupt(f"{where}{problem}; not a lecode facts database")


class UnmigratableSchema(StoreCorrupt):
    """An older schema version whose migrations cannot apply: a table a
    pending migration keeps (it is there already: a database whose
    ``user_version`` was lost) in a shape no migration knows.  Exit 5, as
    any database memctl cannot use; ``validate`` reports ``db.schema_unknown``
    with :attr:`detail` (what cannot be migrated, without the path)."""

    def __init__(self, path: Path, version: int, step: str, problem: str) -> None:
        named = f" ({step})" if step else ""
        self.detail = (f"schema version {version} cannot be migrated to "
                       f"{SCHEMA_VERSION}{named}: {problem}")
        super().__init__(f"{path}: facts database {self.detail}; nothing was changed "
                         "(memctl validate reports it)")


class _Unmigratable(Exception):
    """A table a migration keeps (it was there) in a shape no migration knows."""


def _require_shape(db: sqlite3.Connection, table: str) -> None:
    """Inside a migration: ``table`` (created, or found there) has every
    column memctl reads in it (:data:`READ_SCHEMA`), else ``_Unmigratable``."""
    problem = _shape_problem(db, table, read_schema(SCHEMA_VERSION)[table])
    if problem is not None:
        raise _Unmigratable(problem)


def migration_problem(db: sqlite3.Connection, version: int) -> str | None:
    """Why the migrations from schema ``version`` cannot apply to the
    database as it is, or None: a table a pending migration would create is
    there already (a database whose ``user_version`` was lost) without a
    column memctl reads in it.  What the migrations' own checks find
    (:func:`_require_shape`), read without writing: ``validate`` says the
    schema is unknown then, never that lecode migrates it."""
    if version >= SCHEMA_VERSION:
        return None
    have = read_schema(version)
    for table, needed in read_schema(SCHEMA_VERSION).items():
        # (a view or virtual table of that name too: the migration would keep it)
        if table not in have and _object_kind(db, table) is not None:
            problem = _shape_problem(db, table, needed)
            if problem is not None:
                return problem
    if _object_kind(db, "schema_migrations") is not None:
        return _shape_problem(db, "schema_migrations", {"name", "applied"})
    return None


def _check_schema(db: sqlite3.Connection, version: int, path: Path) -> None:
    """StoreCorrupt unless the database holds every table and column memctl
    reads at schema ``version`` (:func:`read_schema`)."""
    for table, columns in read_schema(version).items():
        _require_columns(db, table, columns, path)


def _tables(db: sqlite3.Connection) -> set[str]:
    """The names of the tables (a name that is not UTF-8, InvalidText, decoded
    with replacement: still a table, never one of lecode's)."""
    return {row_text(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _has_schema(db: sqlite3.Connection) -> bool:
    """Whether the schema holds anything at all (a view without a table too)."""
    return bool(db.execute("SELECT EXISTS (SELECT 1 FROM sqlite_master)").fetchone()[0])


def _migrate(db: sqlite3.Connection, path: Path) -> list[str]:
    """Apply every pending migration, their records and the new
    ``user_version`` inside the caller's open transaction -- the write's
    (``FactStore._Txn``): they commit with the write's own changes, or not
    at all.  A table in a shape no migration knows is ``StoreCorrupt``
    naming it (exit 5); the caller rolls back, and the file is unchanged."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreCorrupt(_future_message(path, version))
    _refuse_negative(path, version)     # (MIGRATIONS[version:] would count from the end)
    applied: list[str] = []
    if version == SCHEMA_VERSION:
        return applied
    name = "schema_migrations"
    try:
        db.execute("""CREATE TABLE IF NOT EXISTS schema_migrations (
            name    TEXT PRIMARY KEY,
            applied TEXT NOT NULL)""")
        problem = _shape_problem(db, name, {"name", "applied"})
        if problem is not None:
            raise _Unmigratable(problem)
        for name, fn in MIGRATIONS[version:]:
            fn(db)
            # (a record the database holds already -- kept by a dump that
            # lost user_version -- is kept as it is: when it was applied)
            db.execute("INSERT OR IGNORE INTO schema_migrations (name, applied) VALUES (?, ?)",
                       (name, _now()))
            applied.append(name)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except _Unmigratable as exc:
        raise UnmigratableSchema(path, version, name, str(exc)) from None
    except sqlite3.Error as exc:
        err = _db_error(path, exc)
        if type(err) is StoreCorrupt and err.message == f"{path}: facts database unreadable: {exc}":
            # a statement of the migration the database refused ("UNIQUE
            # constraint failed: meta.key"): readable, but not migratable
            raise UnmigratableSchema(path, version, name, str(exc)) from exc
        raise err from exc
    return applied


def _refuse_negative(path: Path, version: int) -> None:
    """UnmigratableSchema for a negative ``user_version`` (a signed 32-bit
    number in SQLite): no lecode schema has one, and no migration applies
    from it -- read, written or audited alike (``validate``: db.schema_unknown)."""
    if version < 0:
        raise UnmigratableSchema(path, version, "", "no lecode schema version is negative")


def _future_message(path: Path, version: int) -> str:
    return (f"{path}: schema version {version} is newer than this memctl understands "
            f"({SCHEMA_VERSION}); upgrade memctl")


# --------------------------------------------------------------------------
# Helpers


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fact_id_for(text: str, ref: SourceRef | None) -> str:
    """The canonical id of a fact: the first 16 hex digits of the SHA-256 of the
    sorted-key JSON ``{"source": REF or null, "text": TEXT, "v": 1}``."""
    doc = {"v": 1, "text": text, "source": ref.to_json() if ref is not None else None}
    return sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def check_fact_id(fact_id: object) -> str:
    if not isinstance(fact_id, str) or not FACT_ID_RE.match(fact_id):
        shown = repr(fact_id)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise UsageError(f"invalid fact id {shown}: a fact id is 16 lower-case hex digits")
    return fact_id


def _lookup_id(fact_id: object) -> object:
    """``fact_id`` as :meth:`FactStore.get` looks it up: any text (an id
    read from the store may be malformed: redact's), the bytes of one (a
    BLOB, :class:`InvalidText`), or another value SQLite binds (a number
    or None a damaged store holds: none found); what it cannot bind (a lone
    surrogate, an int beyond 64 bits, another type) is a UsageError, "invalid
    fact id" (before 2026-12-07 a raw UnicodeEncodeError or OverflowError,
    or StoreCorrupt for a type SQLite refuses)."""
    if isinstance(fact_id, str):
        try:
            fact_id.encode("utf-8")
            return fact_id
        except UnicodeEncodeError:
            pass
    elif isinstance(fact_id, (bytes, float)) or fact_id is None or (
            isinstance(fact_id, int) and -(1 << 63) <= fact_id < 1 << 63):
        return fact_id
    elif isinstance(fact_id, (bytearray, memoryview)):
        return bytes(fact_id)       # (a BLOB too: SQLite binds any byte buffer)
    shown = repr(fact_id)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    raise UsageError(f"invalid fact id {shown}: a fact id is 16 lower-case hex digits")


def _check_forget_id(fact_id: object, stored: bool) -> None:
    """A forget's id: one a user gives is checked (:func:`check_fact_id`,
    UsageError); one read from the store (``stored``: ``redact``'s, from a
    finding) is the value as stored (:func:`id_match`), whatever it spells."""
    if not stored:
        check_fact_id(fact_id)
    elif not isinstance(fact_id, (str, bytes, int, float)) or isinstance(fact_id, bool):
        raise UsageError(f"invalid stored fact id {fact_id!r}")


def stored_id_key(fact_id: object) -> tuple[str, object]:
    """A fact id as stored, told apart by its storage class as SQLite tells
    it: the text 'ZZ' and the BLOB b'ZZ' are two facts (Python finds them
    unequal too), and so are a TEXT whose bytes are not UTF-8
    (:class:`InvalidText`) and the BLOB of the same bytes (which Python
    finds equal)."""
    if isinstance(fact_id, InvalidText):
        return ("text", bytes(fact_id))
    if isinstance(fact_id, bytes):
        return ("blob", bytes(fact_id))
    return (type(fact_id).__name__, fact_id)


def id_match(fact_id: object) -> tuple[str, object]:
    """The SQL expression and parameter that a ``fact_id`` column equals
    for exactly the value ``fact_id`` as stored (as a reader got it: a
    ``str`` is a TEXT, a ``bytes`` a BLOB, an :class:`InvalidText` a TEXT
    whose bytes are not UTF-8, bound as its bytes cast to TEXT): never
    another row whose value decodes to the same text (``redact``'s
    forgets, since 2026-12-07)."""
    if isinstance(fact_id, InvalidText):
        return "CAST(? AS TEXT)", bytes(fact_id)
    return "?", fact_id


def _blob_marker_text(db: sqlite3.Connection, fact_id: object) -> str | None:
    """The text a forget writes as the retry marker of the BLOB id
    ``fact_id`` (its bytes decoded), or None when the marker is the BLOB
    itself: bytes not UTF-8, or a live fact has that text as its id (the
    text 'ZZ' beside the BLOB b'ZZ', which a text marker would retire).
    Typed lookups (``forget ID``, ``history ID``) and memctl's mark read a
    text marker (a code review of 2026-12-07)."""
    text = _blob_text(fact_id)
    if text is None or db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (text,)).fetchone():
        return None
    return text


def _blob_text(fact_id: object) -> str | None:
    """The text of a BLOB id's bytes (``bytes`` exactly: an
    :class:`InvalidText` is a TEXT), or None: no BLOB, or bytes not UTF-8."""
    if type(fact_id) is not bytes:
        return None
    try:
        return fact_id.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _has_marker(db: sqlite3.Connection, fact_id: object) -> bool:
    """Whether ``forgotten`` holds the retry marker of the stored id
    ``fact_id`` (:func:`id_match`), or, for a BLOB id, the text of its bytes
    a forget writes for it (:func:`_blob_marker_text`): a retry of its
    forget is one (before a code review of 2026-12-07 it raised NotFound)."""
    if "forgotten" not in _tables(db):
        return False
    ph, arg = id_match(fact_id)
    if db.execute(f"SELECT 1 FROM forgotten WHERE fact_id = {ph}", (arg,)).fetchone():
        return True
    text = _blob_text(fact_id)
    return text is not None and db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?",
                                           (text,)).fetchone() is not None


def stored_rows(db: sqlite3.Connection, fact_id: object, *, one: bool = True) -> int:
    """The rows of ``facts`` under exactly the stored id ``fact_id``
    (:func:`id_match`).  With ``one`` (a forget by a stored id: redact's
    plan, its forgets), more than one -- a table that lost its primary key
    -- is StoreCorrupt: which row holds what is not known, so none is
    forgotten."""
    ph, arg = id_match(fact_id)
    rows = int(db.execute(f"SELECT count(*) FROM facts WHERE fact_id = {ph}",
                          (arg,)).fetchone()[0])
    if one and rows > 1:
        raise StoreCorrupt(f"facts database: the id of fact {row_text(fact_id)} (as stored) "
                           f"is in {rows} rows of facts (the table lost its primary key): which "
                           "row is the fact is not known, so it cannot be forgotten by that id")
    return rows


def normalize_text(text: str) -> str:
    """Case-folded, whitespace-collapsed text (what ``deduplicate=True`` compares)."""
    return " ".join(text.casefold().split())


def _check_expected(name: str, value: Any, *, optional: bool) -> None:
    """A caller's ``expected_revision`` or ``expected_generation``: an int
    (not a bool), or None where it may be left out; anything else is
    ``UsageError`` before anything is read or written.  ("2" on a fact at
    revision 2 was a Conflict, "expected 2, current is 2", and 2.0 was
    taken as 2.)"""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise UsageError(f"{name} must be an integer, not {type(value).__name__} {shown}")
    if value < 0:
        # (a generation and a revision are never negative: -1 was a Conflict,
        # "a forget happened meanwhile")
        raise UsageError(f"{name} must not be negative, not {value}")


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise UsageError("fact text must be a string")
    if not text.strip():
        raise UsageError("fact text is empty")
    if "\x00" in text:
        raise UsageError("fact text contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("fact text is not valid Unicode (lone surrogate)") from None
    return text


BEGIN_STEP = 0.05     # seconds: the longest SQLite waits for the write lock at one try (_begin)


def _begin(db: sqlite3.Connection, path: Path, wait: float) -> None:
    """``BEGIN IMMEDIATE``, waiting at most ``wait`` seconds (the store's
    busy timeout) for another writer's lock, then :class:`StoreBusy`.

    The wait is tried again and again in steps of :data:`BEGIN_STEP` (the
    connection's busy timeout that long for each try, then its own again):
    SQLite's busy handler waits in C code, where Python's signal handlers
    do not run, and a Ctrl-C or SIGTERM while ``memctl forget --lock-wait
    15`` waited for a busy database took effect only once the 15 s were
    over, a second Ctrl-C too.  Between two tries an interrupt is raised
    at once."""
    deadline = time.monotonic() + max(wait, 0.0)
    try:
        while True:
            left = deadline - time.monotonic()
            db.execute(f"PRAGMA busy_timeout = {int(max(min(left, BEGIN_STEP), 0.0) * 1000)}")
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise _write_error(path, exc) from exc
                if time.monotonic() >= deadline:
                    raise StoreBusy(f"{path}: facts database is locked by another writer "
                                    f"({exc})") from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            # (the rest of the transaction, its COMMIT, waits as long as before)
            db.execute(f"PRAGMA busy_timeout = {int(max(wait, 0.0) * 1000)}")


def _rollback(db: sqlite3.Connection) -> None:
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _write_error(path: Path, exc: BaseException) -> Exception:
    """:func:`_db_error` of a write transaction of the store's database: one
    that failed for room ("disk is full", "disk I/O error") says what SQLite
    may leave beside the database.  Its close cannot checkpoint, so it keeps
    the ``-wal`` (empty, or frames of no committed change) and a ``-shm``
    it could not size; memctl does not
    remove them, as it cannot tell that no other process (or connection of
    this one) is opening them, and the next write that commits removes them
    (docs/RELIABILITY.md, "I/O faults")."""
    err = _db_error(path, exc)
    if isinstance(err, StoreWriteError) and any(w in str(exc) for w in ("disk is full",
                                                                       "disk I/O")):
        # (before "; nothing was changed", which stays the message's end:
        # redact cuts it off when it did change something)
        done = "; nothing was changed"
        return StoreWriteError(f"{err.message.removesuffix(done)} (a {path.name}-wal and a "
                               f"{path.name}-shm SQLite made may stay beside it: they hold no "
                               f"change, and the next write removes them){done}")
    return err


def _db_error(path: Path, exc: BaseException) -> Exception:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreBusy(f"{path}: facts database busy: {text}")
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in text and fds_exhausted():
        return out_of_fds(f"{path}: {text}")
    if isinstance(exc, sqlite3.OperationalError) and any(
            w in text for w in ("disk is full", "disk I/O", "readonly database", "unable to open")):
        return StoreWriteError(f"{path}: {text}; nothing was changed")
    if isinstance(exc, sqlite3.OperationalError) and text.startswith("foreign key mismatch"):
        # a parent table rebuilt without its primary key: SQLite refuses
        # every write that its foreign keys would check (the reads go on)
        return StoreCorrupt(f"{path}: facts database damaged: {text} (the parent table lost its "
                            "primary key; memctl validate reports it); nothing was changed")
    return StoreCorrupt(f"{path}: facts database unreadable: {text}")


class InvalidText(bytes):
    """A TEXT value whose bytes are not UTF-8 (SQLite stores what a writer
    outside its text API gives it, unchecked): read as its bytes, as a BLOB
    is, so that the row it is in says what is wrong -- a malformed row --
    where the query would fail for the whole store."""

    __slots__ = ()


def _tolerant_text(raw: bytes) -> str | bytes:
    """The connection's ``text_factory`` once a TEXT value was not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return InvalidText(raw)


def _not_utf8(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(
        "Could not decode to UTF-8")


def _undecoded_error(exc: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """SQLite's error whose message Python's sqlite3 could not decode: the
    message quotes bytes of the database that are not UTF-8 ("malformed
    database schema (<a name that is not UTF-8>) - orphan index"), and
    sqlite3 raised ``UnicodeDecodeError`` in place of its own error, which
    no handler of SQLite's errors took (exit 70).  Its class is lost with
    it: the bytes are the database's, so it is ``DatabaseError`` (damage),
    its message decoded with replacement."""
    raw = exc.object
    text = bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) \
        else str(exc)
    return sqlite3.DatabaseError(text)


@contextlib.contextmanager
def _sqlite_errors() -> Iterator[None]:
    """A call into sqlite3 whose error message is not UTF-8 raises
    :func:`_undecoded_error` (``sqlite3.DatabaseError``), as SQLite's others."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise _undecoded_error(exc) from None


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error is a damaged database (``DatabaseError``
    itself: "database disk image is malformed", "file is not a database"),
    not an interrupt, an I/O error or a bad statement (its subclasses)."""
    return type(exc) is sqlite3.DatabaseError


def defined_elsewhere(exc: BaseException) -> bool:
    """Whether a SQLite error names a collation, function or virtual-table
    module that only the application that made the database defines (an
    extra table or index of another tool's, say): not damage, and nothing
    lecode's own reads need; a statement that walks such an index or column
    (``count(*)`` through the smallest index, ``integrity_check``) fails."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc)
    return text.startswith(("no such collation sequence:", "no such function:",
                            "unknown function:", "no such module:"))


def _forget_pages(conn: sqlite3.Connection, exc: BaseException) -> None:
    """After a damaged page stopped a read (``DatabaseError`` itself, not an
    interrupt or an I/O error), the connection's page cache is emptied:
    SQLite kept the page it could not take in, half set up, and what the
    next statement read through it depended on memory the process had used
    before (the same damaged store gave an error in one run and rows in
    the next).  Read again, the page fails the same way every time."""
    if is_damage(exc):
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA shrink_memory")


class _Cursor(sqlite3.Cursor):
    """A cursor whose reads go on past a TEXT value that is not UTF-8.  The
    default conversion is C's and fails the read; at the first such value
    the connection's ``text_factory`` becomes :func:`_tolerant_text` (a
    Python call per text value from then on, on such a database only) and
    the read is taken again: ``fetchone`` and iteration get the same row
    (SQLite's statement still holds it); ``fetchmany`` and ``fetchall``,
    which drop the rows they had converted, run the statement again and
    pass over the rows already returned (a read connection sees one
    snapshot, a writer its own transaction: the same rows in the same
    order)."""

    _replay: tuple[str, Any] | None = None
    _given = 0
    _pending: sqlite3.Error | None = None     # raised by the next fetch (see _rows_before)

    def execute(self, sql: str, parameters: Any = (), /) -> _Cursor:
        self._replay, self._given, self._pending = (sql, parameters), 0, None
        try:
            with _sqlite_errors():
                super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            _forget_pages(self.connection, exc)
            raise
        return self

    def _raise_pending(self) -> None:
        if self._pending is not None:
            exc, self._pending = self._pending, None
            raise exc

    def _tolerate(self, exc: sqlite3.OperationalError) -> bool:
        conn = self.connection
        if not _not_utf8(exc) or conn.text_factory is _tolerant_text:
            return False
        conn.text_factory = _tolerant_text
        return True

    def _read(self, fetch: Callable[[], Any], again: bool) -> Any:
        """``fetch()``, taken again after the first value that is not UTF-8
        (``again``: the statement run again first, for a fetch that drops
        the rows it had converted).  A read of a cursor its store closed (a
        listing still read when :meth:`FactStore.close` ran) is
        ``UsageError``, as every other use of a closed store."""
        try:
            with _sqlite_errors():
                return fetch()
        except sqlite3.ProgrammingError:
            if getattr(self.connection, "closed_here", False):
                raise UsageError("the fact store is closed") from None
            raise
        except sqlite3.OperationalError as exc:
            if (again and self._replay is None) or not self._tolerate(exc):
                raise
            if again:
                self._again()
            with _sqlite_errors():
                return fetch()
        except sqlite3.DatabaseError as exc:
            _forget_pages(self.connection, exc)
            raise

    def __next__(self) -> Any:
        self._raise_pending()
        row = self._read(super().__next__, False)
        self._given += 1
        return row

    def fetchone(self) -> Any:
        self._raise_pending()
        row = self._read(super().fetchone, False)
        if row is not None:
            self._given += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[Any]:
        n = self.arraysize if size is None else size
        rows: list[Any] = self._lossless(lambda: super(_Cursor, self).fetchmany(n), n)
        self._given += len(rows)
        return rows

    def fetchall(self) -> list[Any]:
        # (never some of the rows: a caller reads them once, and would take
        # them for all of them; an error is raised as SQLite's)
        self._raise_pending()
        rows: list[Any] = self._read(super().fetchall, True)
        self._given += len(rows)
        return rows

    def _lossless(self, fetch: Callable[[], Any], size: int) -> Any:
        """``fetch()`` of ``size`` rows (``_read``), whose error (a damaged
        page) drops the rows it had read before the one that failed: those
        rows are read again one at a time (:meth:`_rows_before`) and
        returned, the error raised by the next fetch (a ``fetchmany`` loop
        fetches until it gets no row).  So a read stops at the row that
        fails whatever the size of the fetches before it."""
        self._raise_pending()
        try:
            return self._read(fetch, True)
        except sqlite3.Error as exc:
            rows, failed = self._rows_before(exc, size)
            if not rows:
                raise
            self._pending = failed
            return rows

    def _rows_before(self, exc: sqlite3.Error, size: int
                     ) -> tuple[list[Any], sqlite3.Error | None]:
        """The rows a failed fetch had read before its error, and the error
        that stopped them (None: none did): for a damaged file
        (``DatabaseError`` itself, not an interrupt or an I/O error) read
        through a private snapshot (``replayable``: no writer moves it), the
        SELECT run again past the rows already returned, then read row by
        row (at most ``size`` rows).  (Python's sqlite3 reads a row ahead:
        the row just before the damaged one fails with it.)"""
        sql = self._replay[0] if self._replay is not None else ""
        if (not is_damage(exc)    # a damaged file, not an interrupt or I/O
                or not getattr(self.connection, "replayable", False)
                or not sql.lstrip()[:6].upper().startswith("SELECT")):
            return [], exc
        rows: list[Any] = []
        try:
            self._again()
            while len(rows) < size:
                with _sqlite_errors():
                    row = super().fetchone()
                if row is None:
                    break
                rows.append(row)
        except sqlite3.Error as again:
            _forget_pages(self.connection, again)
            return rows, again
        except StopIteration:       # (fewer rows than before: not the same read)
            return [], exc
        return rows, None

    def _again(self) -> None:
        assert self._replay is not None
        given = self._given
        with _sqlite_errors():
            super().execute(*self._replay)
            for _ in range(given):
                super().__next__()


class _Connection(sqlite3.Connection):
    """A connection whose cursors are :class:`_Cursor` (``execute`` included:
    SQLite's own would run the statement without the cursor's ``execute``).
    ``replayable``: it reads a private snapshot, which no writer changes (a
    statement run again reads the same rows).

    :meth:`close` closes its cursors first.  sqlite3's own ``close`` leaves
    the statement of a cursor still open (a listing's, suspended in a
    generator) unfinalized, and SQLite then keeps the connection as a
    zombie: its files open, its read transaction held, and the cursor
    still reading rows, until the cursor is collected."""

    replayable = False
    closed_here = False     # closed by :meth:`close` (a read of its cursors: UsageError)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # (before the connection is made: close() needs it)
        self._cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()
        try:
            super().__init__(*args, **kwargs)
        except BaseException:
            # an interrupt as SQLite's open returned: nobody has the
            # connection yet, and it is in a reference cycle of its own
            # (only a full collection would have closed it)
            with contextlib.suppress(sqlite3.Error):
                sqlite3.Connection.close(self)
            raise

    def cursor(self, factory: Any = _Cursor) -> Any:
        if self.closed_here:    # (sqlite3's own: ProgrammingError, no memctl error)
            raise UsageError("the fact store is closed")
        cur = super().cursor(factory)
        self._cursors.add(cur)
        return cur

    def close(self) -> None:
        self.closed_here = True
        for cur in list(self._cursors):
            with contextlib.suppress(sqlite3.Error):
                cur.close()
        super().close()

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)


def seqs_parsed(raw: object) -> tuple[int, ...] | str:
    """The positions a stored ``seqs`` value holds, or why it holds none
    (``seqs is not JSON``...: the words of :func:`_seqs_from_json`)."""
    try:
        seqs = orjson.loads(raw)  # type: ignore[arg-type]
    except orjson.JSONDecodeError:
        return "seqs is not JSON"
    if not isinstance(seqs, list) or not all(isinstance(s, int) and not isinstance(s, bool)
                                             for s in seqs):
        return "seqs is not a list of integers"
    for s in seqs:
        if not 0 <= s <= MAX_POSITION:   # (SQLite stores no larger integer: an exclusion of it)
            return f"seqs holds {s}, which is no position (0 to {MAX_POSITION})"
    return tuple(seqs)


def _readable_session_id(sid: object) -> str | None:
    """The session a stored session id names, read fail-closed (a forget
    excludes what can be read; the exclusions reader hides what it names):
    a text; a BLOB that is UTF-8 (a writer that bound it as bytes), its
    text, as :func:`row_text` shows it; an integer (a table that lost its
    TEXT affinity), its digits.  None for anything else: bytes that are not
    UTF-8, NULL, a real.  Before 2026-12-07 a forget read an integer as no
    session (``unexcluded``) while the exclusions reader read its digits."""
    if type(sid) is str:
        return sid
    if isinstance(sid, bytes):
        try:
            return sid.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if type(sid) is int:
        return str(sid)
    return None


# (a code review, 2026-12-07: a column of INTEGER affinity turns the text
# '007' into 7, so the digits excluded may not be the session the row
# named: excluded, and said, not taken for the whole of its evidence)
_INTEGER_SESSION = ("session id is stored as an integer: its digits, {!r}, excluded; the text it "
                    "was stored from may have named another session (with leading zeros)")


def _readable_positions(raw: object) -> tuple[tuple[int, ...], str | None]:
    """The positions a stored ``seqs`` value holds, for a forget
    (fail-closed): those of a list that holds some positions and some
    other values too, with why the rest are none (the words of
    :func:`seqs_parsed`), or ``((), why)`` when it holds no list."""
    got = seqs_parsed(raw)
    if not isinstance(got, str):
        return got, None
    try:
        seqs = orjson.loads(raw)  # type: ignore[arg-type]
    except (orjson.JSONDecodeError, TypeError):
        return (), got
    if not isinstance(seqs, list):
        return (), got
    held = tuple(s for s in seqs if type(s) is int and 0 <= s <= MAX_POSITION)
    if held:
        got += f" (the {len(held)} position{'s' if len(held) != 1 else ''} among them excluded)"
    return held, got


def _seqs_from_json(raw: str, where: str) -> tuple[int, ...]:
    seqs = seqs_parsed(raw)
    if isinstance(seqs, str):
        raise StoreCorrupt(f"facts database: {where}: {seqs}")
    return seqs


_POSITION_DIGITS = lazy_compile(r"\A[0-9]{1,19}\Z")


def exclusion_position(session_id: object, seq: object) -> tuple[str, int] | None:
    """The transcript position an ``exclusions`` row names, read fail-closed
    (a forensic tool must not let damage un-forget evidence: hide more,
    never less), or None when the row names none.

    A session id stored as a BLOB (a writer that bound it as bytes) or as an
    integer (a table that lost its TEXT affinity) reads as its bytes decoded,
    its digits, as a BLOB fact id is read; a position stored as ASCII decimal
    digits (text or BLOB) or as an integral real reads as that number.  Bytes
    that are not UTF-8, NULL, a negative or fractional position, or other
    text name nothing.  :func:`exclusion_problem` says which rows are not of
    the documented types (``validate``: ``db.malformed_exclusion``)."""
    sid = _readable_session_id(session_id)
    if sid is None:
        return None
    if type(seq) is int:
        n = seq
    elif isinstance(seq, (str, bytes)):
        text = bytes(seq).decode("ascii", "replace") if isinstance(seq, bytes) else seq
        if not _POSITION_DIGITS.match(text):
            return None
        n = int(text)
    elif type(seq) is float and seq.is_integer():
        n = int(seq)
    else:
        return None
    if not 0 <= n <= MAX_POSITION:
        return None
    return sid, n


#: The ``exclusions`` rows that are not (TEXT session id, non-negative
#: INTEGER position), as SQL (``validate`` counts them).
MALFORMED_EXCLUSION_SQL = ("typeof(session_id) != 'text' OR typeof(seq) != 'integer' "
                           "OR seq < 0")


def session_exclusions(db: sqlite3.Connection, session_id: str) -> frozenset[int]:
    """The positions of ``session_id`` that the ``exclusions`` table names,
    each row read by :func:`exclusion_position`.  The one reader of a
    session's exclusions (``excluded_seqs``, ``is_excluded`` and the
    writers' refusal of excluded evidence); the primary key's index finds
    the id stored as text, as a BLOB or, when it is all digits, as an
    integer."""
    keys: list[object] = [session_id, session_id.encode("utf-8", "surrogateescape")]
    if session_id.isascii() and session_id.isdigit() and str(int(session_id)) == session_id:
        keys.append(int(session_id))
    marks = ", ".join("?" * len(keys))
    out = set()
    for sid, seq in db.execute(f"SELECT session_id, seq FROM exclusions WHERE session_id IN ({marks})",
                               keys):
        pos = exclusion_position(sid, seq)
        if pos is not None and pos[0] == session_id:
            out.add(pos[1])
    return frozenset(out)


def all_exclusions(db: sqlite3.Connection) -> dict[str, frozenset[int]]:
    """Every position the ``exclusions`` table names, by session (each row
    read by :func:`exclusion_position`): the listing's and the audit's read."""
    out: dict[str, set[int]] = {}
    for sid, seq in db.execute("SELECT session_id, seq FROM exclusions"):
        pos = exclusion_position(sid, seq)
        if pos is not None:
            out.setdefault(pos[0], set()).add(pos[1])
    return {k: frozenset(v) for k, v in out.items()}


#: The ``meta`` rows that hold the generation: the key compared as bytes
#: (a ``key TEXT COLLATE NOCASE`` must not take ``'GENERATION'``), text or
#: a BLOB (read as its bytes, as BLOB ids are).
GENERATION_WHERE = "key = 'generation' COLLATE BINARY OR key = CAST('generation' AS BLOB)"


def meta_generation(db: sqlite3.Connection) -> int:
    """The exclusion generation: the one reader (``FactStore.generation``,
    the writers' generation check and ``forget``).  Several ``meta`` rows (a
    table that lost its primary key) read as the highest, whatever their
    physical order: fail-closed, since a higher generation hides more
    generated messages, never fewer; ``validate`` reports them
    (``db.generation_mismatch``).  A value that is not a non-negative
    integer, in any row, is ``StoreCorrupt``.  No row (or no ``meta``: an
    older schema, read as ``m003_generation`` will migrate it) reads as
    :func:`implied_generation`, fail-closed too: a missing row must not
    un-hide what a forget hid."""
    if "meta" not in _tables(db):
        return implied_generation(db)
    values = [generation_value(v) for (v,) in
              db.execute(f"SELECT value FROM meta WHERE {GENERATION_WHERE}")]
    return max(values) if values else implied_generation(db)


FIRST_MIGRATION = "m001_initial"


def database_id(db: sqlite3.Connection) -> str | None:
    """What tells this database from one created separately: the time its first
    migration (``m001_initial``) was applied, as ``schema_migrations`` holds it
    (milliseconds, UTC).  A copy, or an older backup of the same database, has
    the same; a database lecode created (or first versioned) at another moment
    has another.  None when the database cannot say: no ``schema_migrations``
    (the legacy schema), no such row, a value that is not text, or a read that
    fails.  Used only for memctl's mark (``core.seen``)."""
    if "schema_migrations" not in _tables(db):
        return None
    try:
        row = db.execute("SELECT applied FROM schema_migrations WHERE name = ?",
                         (FIRST_MIGRATION,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    if row is None or not isinstance(row[0], str) or not row[0]:
        return None
    return str(row[0])


def forgotten_ids(db: sqlite3.Connection) -> dict[str, int] | None:
    """The ids of the ``forgotten`` table (its retry markers), each with its
    generation (0 when not stored as a non-negative integer), in one query;
    ids not stored as text are left out.  Empty without the table; None when
    the read fails (not known).  Used for memctl's mark (``core.seen``)."""
    if "forgotten" not in _tables(db):
        return {}
    try:
        rows = db.execute("SELECT fact_id, generation FROM forgotten").fetchall()
    except sqlite3.DatabaseError:
        return None
    return {fid: (gen if type(gen) is int and gen >= 0 else 0)
            for fid, gen in rows if isinstance(fid, str)}


FORGOTTEN_PRESENT = ("malformed row: the fact was forgotten (its id is in forgotten) but its rows "
                     "are stored again; 'memctl forget' of it deletes them")


def forgotten_present(db: sqlite3.Connection) -> frozenset[str]:
    """The ids of the live facts whose id is in ``forgotten`` (rows put back
    after their forget: validate's db.forgotten_fact_present), in one query
    over the markers, each looked up in the facts' index; empty without the
    table, or when it cannot be read (validate reports that)."""
    if "forgotten" not in _tables(db):
        return frozenset()
    try:
        rows = db.execute("SELECT DISTINCT g.fact_id FROM forgotten g JOIN facts f "
                          "ON f.fact_id = g.fact_id").fetchall()
    except sqlite3.DatabaseError:
        return frozenset()
    return frozenset(row_text(fid) for (fid,) in rows)


def generation_row_blocked(db: sqlite3.Connection) -> None:
    """``StoreCorrupt`` when ``meta`` has no generation row (its key compared
    as bytes) but holds a key its declared collation takes for one
    ('GENERATION' under ``COLLATE NOCASE``): a forget could not write the
    row back.  ``plan_forget`` and ``forget`` both ask, so that the dry run
    and the forget refuse alike."""
    if "meta" not in _tables(db):
        return
    if db.execute(f"SELECT 1 FROM meta WHERE {GENERATION_WHERE}").fetchone():
        return
    row = db.execute("SELECT key FROM meta WHERE key = 'generation'").fetchone()
    if row is not None:
        raise StoreCorrupt(f"facts database damaged: meta has no generation row, and its "
                           f"declared collation takes the key {row_text(row[0])!r} for one, so "
                           "a forget cannot write the generation row back (memctl validate "
                           "reports it)")


def implied_generation(db: sqlite3.Connection) -> int:
    """The lowest generation the store's own rows imply, the generation of a
    database without a generation row: the highest integer generation in
    ``exclusions`` and ``forgotten`` (a value of another type implies
    nothing; ``validate`` reports it), the number of retry markers (one
    forget, one marker, one generation), and 1 when ``exclusions`` holds any
    row (a forget happened: generated messages without an epoch stay
    hidden).  0 for a database that forgot nothing."""
    tables = _tables(db)
    gen = 0
    if "exclusions" in tables:
        if db.execute("SELECT EXISTS (SELECT 1 FROM exclusions)").fetchone()[0]:
            gen = 1
        if "generation" in _columns(db, "exclusions"):
            gen = max(gen, _top_generation(db, "exclusions"))
    if "forgotten" in tables:
        gen = max(gen, int(db.execute("SELECT count(*) FROM forgotten").fetchone()[0]))
        if "generation" in _columns(db, "forgotten"):
            gen = max(gen, _top_generation(db, "forgotten"))
    return gen


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _top_generation(db: sqlite3.Connection, table: str) -> int:
    (top,) = db.execute(f"SELECT max(generation) FROM {table} "
                        "WHERE typeof(generation) = 'integer'").fetchone()
    return max(int(top), 0) if top is not None else 0


def generation_value(raw: object) -> int:
    """The ``meta`` generation as stored: a non-negative integer, else
    ``StoreCorrupt`` (exit 5; issue 16.4: 'abc' there was a crash, exit 70)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    shown = raw[:40] if isinstance(raw, (str, bytes)) else raw
    raise StoreCorrupt(f"facts database: the exclusion generation in meta is not a "
                       f"non-negative integer ({type(raw).__name__} {shown!r})")


def next_generation(gen: int) -> int:
    """The generation a forget sets: ``gen + 1``; ``StoreCorrupt`` (exit 5)
    when ``gen`` is already the largest integer SQLite stores (2^63-1), as
    for any other generation the database cannot use: ``plan_forget`` and
    ``forget`` both ask, so that the dry run and the forget refuse alike (the
    forget ended in an internal error, exit 70, after a dry run of exit 0)."""
    if gen >= (1 << 63) - 1:
        raise StoreCorrupt(f"facts database: the exclusion generation is {gen}, the largest "
                           "SQLite can store; no forget can raise it")
    return gen + 1


def row_problem(fact_id: object, text: object) -> str | None:
    """Why a revision row cannot be trusted as stored (a fact id that is not
    16 hex digits, a text that is not TEXT), or None.  Such a row is data
    with a per-row status (hidden, invalid_ref), never a crash and never
    printed as markup (issue 16.4)."""
    if not isinstance(fact_id, str) or not FACT_ID_RE.match(fact_id):
        return f"malformed row: the fact id {fact_id!r} is not 16 lower-case hex digits"
    if not isinstance(text, str):
        kind = "a BLOB" if isinstance(text, bytes) else f"{type(text).__name__}, not text"
        if isinstance(text, InvalidText):
            kind = "text that is not UTF-8"
        return f"malformed row: the revision text is stored as {kind}"
    return None


def row_text(value: object) -> str:
    """A stored text or id as a ``str`` (a BLOB decoded, invalid bytes replaced)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def plain_source(session_id: Any, seqs: Any, digest: Any) -> tuple[int, ...] | None:
    """The positions of a stored source (its columns as SQLite gives them)
    whose values are plainly well formed -- the positions a JSON text,
    decoded, that :func:`~lecode_memctl.core.sourceref.stored_ref_ok` takes
    with the session id and digest -- as a tuple; None for any other
    (:func:`_ref_from_row` says why, or makes it the checked way).  The one
    rule of the reads that make no object of a source: the evaluation's
    (``stored_sources_by_session``) and the listing's (:func:`plain_seqs`).

    A short text of positions is decoded and checked once per process
    (:data:`_POSITIONS`): a store's references cite the same few thousand
    positions, each as the same text, in every session, and the two reads
    above take every reference of a listing (0.3 us of 0.75 us a reference
    here).  The id and the digest are checked each time.  (A test that
    changes the rule, ``MAX_SPAN`` say, empties :data:`_POSITIONS`.)"""
    if type(seqs) is not str:
        return None
    positions = _POSITIONS.get(seqs, _UNREAD)
    if positions is _UNREAD:
        positions = _positions_of(seqs)
        if len(seqs) <= _POSITIONS_TEXT and len(_POSITIONS) < _POSITIONS_HELD:
            _POSITIONS[seqs] = positions
    if positions is None or not id_and_digest_ok(session_id, digest):
        return None
    return positions  # type: ignore[return-value]


def _positions_of(seqs: str) -> tuple[int, ...] | None:
    """The positions the text ``seqs`` holds, as :func:`plain_source` takes them."""
    try:
        raw = orjson.loads(seqs)
    except orjson.JSONDecodeError:
        return None
    return tuple(raw) if positions_ok(raw) else None


# :func:`plain_source`'s texts of positions decoded (None: not plain), each at
# most _POSITIONS_TEXT characters, at most _POSITIONS_HELD of them (under 2 MB;
# once full, a text not held is decoded each time)
_POSITIONS: dict[str, tuple[int, ...] | None] = {}
_POSITIONS_TEXT = 48
_POSITIONS_HELD = 4096
_UNREAD = object()


def _ref_from_row(fact_id: Any, revision: Any, session_id: str, seqs: str,
                  digest: str) -> SourceRef:
    raw = plain_source(session_id, seqs, digest)
    if raw is not None:
        return SourceRef.of_checked(session_id, raw, digest)
    where = f"source of {fact_id} revision {revision}"
    try:
        return SourceRef(session_id, _seqs_from_json(seqs, where), digest)
    except UsageError as exc:
        raise StoreCorrupt(f"facts database: {where} is malformed: {exc}") from None


def _fetched(cur: sqlite3.Cursor, size: int = 2000) -> Iterator[tuple[Any, ...]]:
    """A cursor's rows, fetched ``size`` at a time."""
    while True:
        rows = cur.fetchmany(size)
        if not rows:
            return
        yield from rows


TEXT_BATCH_BYTES = 4 << 20    # about what one fetch of revisions holds of their texts
_TEXT_FIRST = 64              # the rows of the first fetch, before their size is known


def _text_batches(cur: sqlite3.Cursor, column: int, most: int = 2000) -> Iterator[list[Any]]:
    """A cursor's rows in lists, each fetch sized so that the texts of
    ``column`` it holds come to about :data:`TEXT_BATCH_BYTES`, from the
    size of the texts of the fetch before (at most ``most`` rows, the
    first :data:`_TEXT_FIRST`): a fixed count of rows held 2,000 texts
    whatever their size (200 KiB texts: 400 MB in one fetch)."""
    size = min(_TEXT_FIRST, most)
    pick = operator.itemgetter(column)
    while True:
        rows = cur.fetchmany(size)
        if not rows:
            return
        yield rows
        try:
            held = sum(map(len, map(pick, rows)))
        except TypeError:           # (a damaged row: a number or NULL for its text)
            held = sum(len(t) for t in map(pick, rows) if isinstance(t, (str, bytes)))
        size = max(1, min(most, TEXT_BATCH_BYTES * len(rows) // held)) if held else most


T = TypeVar("T")

FactGroup = tuple[Any, Any, Any, Any, list[tuple[Any, ...]]]
"""One fact as stored: ``(fact_id, revision, created, updated, revisions)``,
each revision ``(revision, text, created, session_id, seqs, digest,
provenance)`` oldest first: the source columns None without a source row,
provenance None or ``{session_id: [seq, ...]}``; values as SQLite gives them
(a damaged row may hold any type; a TEXT value that is not UTF-8 is an
:class:`InvalidText`, a ``bytes``)."""


def revision_from_stored(fact_id: Any, rev: tuple[Any, ...]) -> Revision:
    """The Revision of one stored revision of a :data:`FactGroup` (a malformed
    row keeps its data, with ``source_error`` saying why: issue 16.4)."""
    revision, text, created, sid, seqs, digest, prov = rev
    ref: SourceRef | None = None
    error: str | None = None
    if has_source(sid, seqs, digest):
        try:
            ref = _ref_from_row(fact_id, revision, sid, seqs, digest)
        except StoreCorrupt as exc:
            error = exc.message
    problem = row_problem(fact_id, text) or provenance_problem(prov)
    if problem is not None:     # as revisions() reads it
        ref, error, prov = None, problem, None
    return Revision(fact_id, revision, row_text(text), row_text(created), ref,
                    provenance_rows(prov), error)


def _once_per_id(rows: list[Any]) -> list[list[Any]]:
    """The rows (in id order) grouped by fact id: the join with the
    revisions gives one per row of the current revision, several where the
    table lost its primary key (that revision is then judged hidden:
    :func:`flag_stored_twice`), or where the id has several rows in facts
    (:data:`STORED_TWICE`)."""
    out: list[list[Any]] = []
    for r in rows:
        # (one id: equal and of one storage class; 1 == 1.0 and a text that
        # is not UTF-8 equals the BLOB of its bytes in Python)
        if out and out[-1][0][0] == r[0] and type(out[-1][0][0]) is type(r[0]):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _id_page(db: sqlite3.Connection, where: str, limit: str, args: tuple[Any, ...]
             ) -> list[list[Any]]:
    """The rows of :attr:`FactStore._FACT_SELECT` of a page of distinct fact
    ids (``where`` and ``limit``: its clauses, ``args`` their values), in id
    order, grouped by id (:func:`_once_per_id`).  A NULL id is one id too
    (joined with ``IS``)."""
    return _once_per_id(db.execute(
        "SELECT f.fact_id, f.revision, f.created, f.updated, r.text FROM (SELECT DISTINCT "
        f"fact_id FROM facts {where} ORDER BY fact_id {limit}) p JOIN facts f "
        "ON f.fact_id IS p.fact_id LEFT JOIN revisions r ON r.fact_id = f.fact_id "
        "AND r.revision = f.revision ORDER BY f.fact_id", args).fetchall())


def _after(last: Any) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its value) of the fact ids after ``last`` as
    SQLite orders them: after NULL, every id that is not NULL; after a text
    that is not UTF-8 (bound, it would be a BLOB), that text again."""
    if last is None:
        return "WHERE fact_id IS NOT NULL", ()
    if isinstance(last, InvalidText):
        return "WHERE fact_id > CAST(? AS TEXT)", (bytes(last),)
    return "WHERE fact_id > ?", (last,)


def _twice_times(rows: Iterable[Sequence[Any]]) -> tuple[Any, Any]:
    """(created, updated) of a fact id with several rows in facts, the same
    in every reader whatever order its rows come in: the earliest created,
    the latest updated (as SQLite orders them)."""
    rows = list(rows)
    return (min((r[2] for r in rows), key=_sql_key), max((r[3] for r in rows), key=_sql_key))


def has_source(session_id: Any, seqs: Any, digest: Any) -> bool:
    """Whether a revision's stored source columns are a source row: any of
    them not NULL (a joined read gives NULL for all three where there is no
    row; a row with a NULL in a table that lost its NOT NULLs is a malformed
    source, invalid_ref, as the one-fact read finds it)."""
    return session_id is not None or seqs is not None or digest is not None


def provenance_rows(prov: dict[str, list[int]] | None) -> tuple[Provenance, ...]:
    """The :class:`Provenance` rows of a revision from {session id: positions}."""
    if not prov:
        return ()
    return tuple(Provenance(s, tuple(q)) for s, q in prov.items())


def _stored_kind(value: object) -> str:
    """What SQLite holds, in words: a BLOB, NULL, text, a real number..."""
    if value is None:
        return "NULL"
    return {bytes: "a BLOB", str: "text", float: "a real number", int: "an integer",
            InvalidText: "text that is not UTF-8"}.get(type(value), type(value).__name__)


def provenance_problem(prov: Mapping[Any, list[Any]] | None) -> str | None:
    """Why a revision's legacy provenance rows ({session id: positions}, as
    stored) cannot be read -- a session id that is not text, a position that
    is not a non-negative integer -- or None.  Such a row hides its
    revision (invalid_ref), as a malformed source reference does: it is
    never sorted, printed or excluded as if it named a transcript position."""
    if not prov:
        return None
    for sid, seqs in prov.items():
        if type(sid) is not str:
            return (f"malformed row: a legacy provenance row's session id is stored as "
                    f"{_stored_kind(sid)}")
        for q in seqs:
            if type(q) is not int or q < 0:
                shown = f" {q}" if type(q) is int else ""
                return (f"malformed row: a legacy provenance position in session {sid!r} is "
                        f"{_stored_kind(q)}{shown}, not a non-negative integer")
    return None


def plain_seqs(rev: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The positions of a stored revision of a :data:`FactGroup` that
    :func:`revision_from_stored` makes into a Revision with a source and
    nothing else to say -- an integer revision, a text, a source whose
    values are well formed (``stored_ref_ok``), no legacy provenance -- as
    a tuple (:func:`plain_source`); None for any other revision.  (The fact id is the
    caller's to check, once per fact.)"""
    rnum, text, _created, sid, seqs_text, digest, prov = rev
    if prov or sid is None or type(text) is not str or type(rnum) is not int:
        return None
    return plain_source(sid, seqs_text, digest)


def stored_twice(revision: Any) -> str:
    """Why a revision with several rows (revisions or source_refs that lost
    their primary keys) is hidden: which row is the revision is not known."""
    return f"malformed row: revision {revision!r} is stored more than once (revisions or source_refs)"


def flag_stored_twice(revs: list[Revision]) -> list[Revision]:
    """``revs`` with each revision whose number more than one of them has
    made a malformed row (no source, ``source_error`` :func:`stored_twice`):
    the one rule of every reader, so that none picks one of the rows."""
    if len(revs) < 2:
        return revs
    seen: dict[Any, int] = {}
    for r in revs:
        seen[r.revision] = seen.get(r.revision, 0) + 1
    if len(seen) == len(revs):
        return revs
    return [r if seen[r.revision] == 1 else Revision(
        r.fact_id, r.revision, r.text, r.created, None, (), stored_twice(r.revision))
        for r in revs]


def fact_from_group(group: FactGroup) -> tuple[Fact, list[Revision]]:
    """The Fact and its Revisions (oldest first) of a :data:`FactGroup`."""
    fid, revision, created, updated, stored = group
    revs = flag_stored_twice([revision_from_stored(fid, r) for r in stored])
    # (a current revision that is no integer names no row: 2.0 == 2 in Python)
    cur_rev = None if type(revision) is not int else revs[-1] if (
        revs and revs[-1].revision == revision) else next(
        (r for r in revs if r.revision == revision), None)
    if cur_rev is None:
        return missing_fact(fid, revision, created, updated), revs
    # a malformed row keeps its data; its status comes from the revision (hidden)
    return (Fact(row_text(fid), revision, cur_rev.text, row_text(created), row_text(updated),
                 cur_rev.source, cur_rev.provenance), revs)


def missing_fact(fact_id: Any, revision: Any, created: Any, updated: Any) -> Fact:
    """The Fact of a fact whose current revision has no row (a damaged
    database): no text and no source, its revision shown only when it is
    an integer (a stored BLOB, real or text is no revision number); given
    that revision, :func:`fact_status` makes it hidden."""
    return Fact(row_text(fact_id), revision if type(revision) is int else None,  # type: ignore[arg-type]
                "", row_text(created), row_text(updated), None, ())


class StoredTwice:
    """The current revision of a fact id with several rows in ``facts`` (a
    table that lost its primary key): which row is the fact is not known,
    so it has no current revision -- a fact listed once, hidden, in every
    reader (see :meth:`FactStore.start_listing`, :meth:`FactStore.get`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<stored more than once>"


STORED_TWICE = StoredTwice()


def missing_current(revision: Any) -> str:
    """Why a fact whose current revision has no row is hidden."""
    if isinstance(revision, StoredTwice):
        return "malformed row: the fact id is stored more than once in facts"
    shown = "" if revision is None else f" {revision!r}"
    return f"malformed row: the fact's current revision{shown} has no row"


def revision_gap(revisions: Sequence[Revision], current: int) -> tuple[int, str] | None:
    """(the revision it is about, why the fact is hidden) when the integer
    revisions of ``revisions`` are not exactly ``1..current`` (a damaged
    database: a row deleted, or rows beyond the current revision); None
    when they are.  About the highest missing revision, else the highest
    row beyond the current one.  (A revision stored as no integer is the
    other checks' to judge; the current one has a row.)"""
    nums = {r.revision for r in revisions if type(r.revision) is int}
    if len(nums) == current and min(nums, default=1) == 1 and max(nums, default=0) == current:
        return None
    missing = next((n for n in range(current, 0, -1) if n not in nums), None)
    if missing is not None:
        return missing, (f"malformed row: revision {missing} of the fact has no row (its "
                         f"revisions are not exactly 1..{current})")
    about = max(n for n in nums if not 1 <= n <= current)
    if about > current:
        return about, (f"malformed row: revision {about} is stored beyond the fact's current "
                       f"revision {current}")
    return about, f"malformed row: revision {about} is no revision number (they start at 1)"


# the two parts of the fact ids around a bound (a Part: (bound, second)), of
# a column: every value is in one of them (the comparison with NULL is NULL,
# which IS NOT 1), compared as ORDER BY orders them in every table (the
# unary + takes the column's affinity away: a TEXT column would compare a
# numeric bound as text, a column without a type as a number; COLLATE
# BINARY its collation: a table that declared another cut its rows
# elsewhere than the others, and than Python orders them)
_PART_SQL = {False: "(+{} >= ? COLLATE BINARY) IS NOT 1",
             True: "(+{} >= ? COLLATE BINARY) IS 1"}

Part = tuple[Any, bool]
"""One of two parts of a store's fact ids: ``(bound, False)``, those SQLite
orders before ``bound`` (a NULL id too); ``(bound, True)``, the others.
The reads that take a Part take a tuple of Parts too (:data:`Window`):
the ids in every one of them."""

Window = tuple[Part, ...]
"""The fact ids in each of its Parts: ``((lo, True), (hi, False))``, the ids
from ``lo`` up to (not including) ``hi`` (:meth:`FactStore.page_window`)."""


def part_sql(part: Part | Window, column: str) -> tuple[list[str], tuple[Any, ...]]:
    """The conditions (and their values) of the ids of ``part`` (a Part or a
    Window) in ``column``."""
    one = len(part) == 2 and isinstance(part[1], bool)
    parts: Window = (part,) if one else part  # type: ignore[assignment]
    return ([_PART_SQL[p[1]].format(column) for p in parts], tuple(p[0] for p in parts))


def sql_name(name: str) -> str:
    """``name`` as an SQL identifier (a table or index name in a pragma or a
    query), double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def ids_stored_twice(db: sqlite3.Connection) -> frozenset[Any]:
    """The fact ids with more than one row in facts: none where a unique
    index on fact_id holds as many entries as the table holds rows (two
    counts of their b-trees: 4 ms at 100,000 facts); else one sorted scan of
    the table itself.  The index alone is not taken at its word: a table
    that reads another b-tree under its name (a damaged schema) held an id
    twice that its intact index held once, and every reader then gave that
    id twice, once valid, and ``context`` injected a superseded text.  An
    index whose pages are damaged is not counted on either (the listing
    never reads it): the table is asked."""
    for _seq, name, unique, _origin, partial in db.execute('PRAGMA index_list("facts")'):
        # (an index whose name is not UTF-8, InvalidText, cannot be named: not counted on)
        if unique and not partial and isinstance(name, str) and [r[2] for r in db.execute(
                f"PRAGMA index_info({sql_name(name)})")] == ["fact_id"]:
            (rows,) = db.execute("SELECT count(*) FROM facts NOT INDEXED").fetchone()
            try:
                (entries,) = db.execute(
                    f"SELECT count(*) FROM facts INDEXED BY {sql_name(name)}").fetchone()
            except sqlite3.DatabaseError as exc:
                if not (is_damage(exc) or defined_elsewhere(exc)):
                    raise
                # a damaged index (validate reports it), or one SQLite cannot
                # use here (another application's collation on the table): the
                # table is asked
                break
            if rows == entries:
                return frozenset()
            break
    return frozenset(r[0] for r in db.execute(
        "SELECT fact_id FROM facts NOT INDEXED GROUP BY fact_id COLLATE BINARY "
        "HAVING count(*) > 1"))


def sources_by_key(db: sqlite3.Connection, alias: str) -> str:
    """The FROM item (``source_refs`` as ``alias``) of a read that looks a
    revision's source up by key: through the table's primary-key index on
    (fact_id, revision) with the default (binary) collation, which holds no
    other column, so that the session, positions and digest are the table's
    values, never those of an index that holds them too and disagrees with
    the table (a damaged or crafted one: they gave values no evaluation
    read).  Where the table has no such index (it lost its key, or declared
    another collation), its rows as a subquery SQLite indexes for the read
    (``LIMIT -1`` keeps it from merging the subquery into a join, where
    ``NOT INDEXED`` would scan the table once per revision)."""
    for _seq, name, _unique, origin, partial in db.execute('PRAGMA index_list("source_refs")'):
        if origin != "pk" or partial or not isinstance(name, str):   # (InvalidText: unnamed)
            continue
        cols = [(r[2], str(r[4]).upper()) for r in db.execute(
            f"PRAGMA index_xinfo({sql_name(name)})") if r[5]]
        if cols == [("fact_id", "BINARY"), ("revision", "BINARY")]:
            return f"source_refs {alias} INDEXED BY {sql_name(name)}"
    return ("(SELECT fact_id, revision, session_id, seqs, digest FROM source_refs "
            f"NOT INDEXED LIMIT -1) {alias}")


def _collapse_runs(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The facts rows, sorted by id, with each run of rows of one id made
    one, whose revision is :data:`STORED_TWICE` (the times
    :func:`_twice_times`): the rows themselves say which ids the table
    holds twice, whatever its unique index says (one that holds the
    duplicate too has as many entries as the table rows)."""
    held: list[tuple[Any, ...]] = []
    for row in rows:
        if held and row[0] != held[0][0]:
            yield held[0] if len(held) == 1 else (held[0][0], STORED_TWICE, *_twice_times(held))
            held = []
        held.append(row)
    if held:
        yield held[0] if len(held) == 1 else (held[0][0], STORED_TWICE, *_twice_times(held))


def _twice_runs(rows: Iterable[tuple[Any, ...]], twice: frozenset[Any],
                once: Callable[[list[tuple[Any, ...]]], Iterator[tuple[Any, ...]]]
                ) -> Iterator[tuple[Any, ...]]:
    """``rows`` (in fact id order) as they are, but the run of rows of each
    id of ``twice`` given as ``once(run)`` gives it."""
    held: list[tuple[Any, ...]] = []
    for row in rows:
        if held and row[0] != held[0][0]:
            yield from once(held)
            held = []
        if row[0] in twice:
            held.append(row)
        else:
            yield row
    if held:
        yield from once(held)


# SQLite's order of storage classes: NULL, numbers, text, BLOB
_SQL_RANK = {type(None): 0, bool: 1, int: 1, float: 1, str: 2, InvalidText: 2, bytes: 3}


def _text_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)


def _sql_key(value: Any) -> tuple[int, Any]:
    """A sort key that orders values as SQLite does (storage class first;
    text by its bytes, where one is not UTF-8)."""
    rank = _SQL_RANK.get(type(value), 4)
    if rank == 2:
        return rank, _text_bytes(value)
    return rank, value


def _sql_lt(a: Any, b: Any) -> bool:
    """``a < b`` as SQLite orders values (BINARY collation: text by its UTF-8
    bytes, which is code point order, as Python compares ``str``)."""
    ta, tb = _SQL_RANK.get(type(a), 4), _SQL_RANK.get(type(b), 4)
    if ta != tb:
        return ta < tb
    if ta == 2 and type(a) is not type(b):   # text, one not UTF-8: by the bytes
        return _text_bytes(a) < _text_bytes(b)
    return a < b  # type: ignore[no-any-return]


def _sqlite_tempdir_outside(store_dir: Path) -> bool:
    """Whether the directory SQLite makes its temporary files in (the first
    usable of $SQLITE_TMPDIR, $TMPDIR, /var/tmp, /usr/tmp, /tmp and ".", as
    its Unix layer picks it) is outside ``store_dir``: a read never creates
    a file there, even one unlinked at once (issue 16.8)."""
    try:
        store = os.path.realpath(store_dir)
    except OSError:
        return False
    for cand in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"),
                 "/var/tmp", "/usr/tmp", "/tmp", "."):
        if not cand or not os.path.isdir(cand) or not os.access(cand, os.W_OK | os.X_OK):
            continue
        real = os.path.realpath(cand)
        return real != store and not real.startswith(store.rstrip("/") + "/")
    return False


def _signals_to_the_main_thread() -> None:
    """In a thread of this module's: SIGINT, SIGTERM and SIGHUP blocked, so
    that the system delivers them to the main thread.  Python runs their
    handlers there, but one delivered to this thread left the main thread
    asleep in its wait (for this thread's SQLite work, say) until that
    wait ended on its own."""
    import signal

    wanted = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
              if hasattr(signal, name)}
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, wanted)


class Background:
    """Work done by a daemon thread on a connection of its own (a listing's
    sorts, ``FactStore.in_background``), and its end, which :meth:`wait`
    waits for even through Ctrl-C: the connection must not be closed while
    SQLite is inside it (that is a segmentation fault).  Not ``Thread.join``
    alone: in CPython 3.11 a join interrupted by Ctrl-C can leave the
    thread taken for finished (bpo-45274), and the next join returns at
    once.  ``stop``: what ends the work early (``Connection.interrupt``),
    called at the first Ctrl-C the wait meets: the work's value will not be
    read, and the integrity check of a large store held an interrupted
    ``validate`` for seconds."""

    def __init__(self, name: str, work: Callable[[], Any],
                 stop: Callable[[], Any] | None = None) -> None:
        """The work is not started yet: record this object where the store's
        :meth:`FactStore.close` finds it, then :meth:`start` it."""
        import threading

        self._stop = stop
        self.value: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        # "new" until the thread begins the work ("running"), or "cancelled"
        # by end() first: then the thread, should it run at all, does nothing
        self._state = "new"
        self._lock = threading.Lock()
        self._launched = False      # start() returned: the thread runs the work

        def run() -> None:
            with self._lock:
                if self._state == "cancelled":
                    return
                self._state = "running"
            try:
                _signals_to_the_main_thread()
                self.value = work()
            except BaseException as exc:  # noqa: BLE001 - the caller's to raise
                self.error = exc
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread.  (``Thread.start`` waits for the new thread to
        run: a Ctrl-C there leaves it running, or never started, and the
        caller without the work's result; :meth:`wait` and :meth:`end` tell
        which.)"""
        self._thread.start()
        self._launched = True

    def _cancel(self) -> bool:
        """Cancel the work unless the thread has begun it: whether it had not."""
        with self._lock:
            if self._state == "new":
                self._state = "cancelled"
                self._done.set()
                return True
        return False

    def end(self) -> None:
        """For a store that closes: the work will not be read.  Not begun
        yet: cancelled, it never will be; begun: waited for, as :meth:`wait`."""
        self._cancel()
        self.join()     # (the work done: the thread ends at once; a closed store leaves none)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def join(self) -> None:
        """Until the thread itself has ended (after :meth:`wait`: at once)."""
        self.wait()
        if self._thread.ident is not None:     # (a start interrupted may have made none)
            self._thread.join()

    def wait(self) -> None:
        """Until the work is done; a Ctrl-C meanwhile stops it (``stop``) and
        is raised once it is done.  Work whose start was interrupted (no
        caller has its result) is cancelled unless its thread began it."""
        if not self._launched:
            self._cancel()
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.wait()
                break
            except KeyboardInterrupt as exc:
                if interrupted is None and self._stop is not None:
                    with contextlib.suppress(Exception):
                        self._stop()
                interrupted = exc
        if interrupted is not None:
            raise interrupted

    def result(self) -> Any:
        """The work's value, once done; its error raised."""
        self.wait()
        if self.error is not None:
            raise self.error
        return self.value


ProvRows = dict[tuple[Any, Any], dict[Any, list[Any]]]
"""Legacy provenance rows by (fact id, revision), then ``{session id: [seq,
...]}`` in the order the rows were read (what a revision of a
:data:`FactGroup` holds); values as SQLite gives them."""


def _add_row(held: ProvRows, row: tuple[Any, ...]) -> None:
    fid, rev, sid, seq = row
    held.setdefault((fid, rev), {}).setdefault(sid, []).append(seq)


def _rows_after(first: ProvRows, then: ProvRows) -> ProvRows:
    """``first`` with the rows of ``then`` after its own, key by key: the
    dict one read of the rows of ``first`` then those of ``then`` gives."""
    for key, sessions in then.items():
        into = first.setdefault(key, {})
        for sid, seqs in sessions.items():
            into.setdefault(sid, []).extend(seqs)
    return first


_NO_ID = object()


class LegacyProvenance:
    """A listing's legacy provenance rows, read as the listing reaches them:
    :meth:`pop` gives what ``dict.pop`` gave of the dict (:data:`ProvRows`)
    that held every row before the listing started (112 MiB at 100,000
    facts of 8 rows), holding the rows of one fact id at a time.

    ``rows``: the rows ``(fact_id, revision, session_id, seq)`` of the query
    that filled that dict, in its order, whose fact ids are ordered as the
    listing orders its own (SQLite's BINARY collation: the table declares no
    other, :meth:`FactStore._legacy_provenance`); ``again``: that query run
    again.  The listing asks for the revisions in fact id order, so the
    rows of an id before the one asked for are never asked for again -- but
    those of a text that is not UTF-8 (:class:`InvalidText`), which Python
    finds equal to the BLOB of its bytes, ordered after every text: those
    not taken are kept for that BLOB's revisions; and the first such text
    asked for has the BLOB ids' rows read first (``again``), as the dict
    held them after the text's own (damaged stores only)."""

    def __init__(self, rows: Iterator[tuple[Any, ...]],
                 again: Callable[[], Iterator[tuple[Any, ...]]]) -> None:
        self._rows = rows
        self._again = again
        self._ahead = next(rows, None)
        self._fid: Any = _NO_ID             # the id whose rows are held
        self._held: ProvRows = {}
        self._kept: dict[bytes, ProvRows] = {}          # texts not UTF-8: rows not taken
        self._blobs: dict[bytes, ProvRows] | None = None   # the BLOB ids' rows, once read

    def pop(self, key: tuple[Any, Any], default: None = None) -> dict[Any, list[Any]] | None:
        """The rows of ``key`` (a revision the listing reached), taken: a
        revision of an equal key asked for later has none."""
        if key[0] != self._fid:
            self._reach(key[0])
        return self._held.pop(key, default)

    def _reach(self, fid: Any) -> None:
        """Hold the rows of ``fid`` (and of the ids Python finds equal to it)."""
        last = self._fid
        if isinstance(last, InvalidText) and self._held:
            _rows_after(self._kept.setdefault(last, {}), self._held)
        self._fid = fid
        blobs_read = self._blobs is not None
        here: ProvRows = {}
        row, rows, lt = self._ahead, self._rows, _sql_lt
        while row is not None:
            a = row[0]
            if type(a) is str and type(fid) is str:
                if a > fid:
                    break
                if a == fid:
                    _add_row(here, row)
            elif lt(fid, a):
                break
            elif blobs_read and type(a) is bytes:
                pass                            # (held in _blobs)
            elif not lt(a, fid):                # the same id
                _add_row(here, row)
            elif isinstance(a, InvalidText):
                _add_row(self._kept.setdefault(a, {}), row)
            row = next(rows, None)
        self._ahead = row
        if not isinstance(fid, bytes):
            self._held = here
            return
        if isinstance(fid, InvalidText) and self._blobs is None:
            blobs: dict[bytes, ProvRows] = {}
            for r in self._again():
                if type(r[0]) is bytes:
                    _add_row(blobs.setdefault(r[0], {}), r)
            self._blobs = blobs
        # a BLOB: the rows of its bytes as text (not UTF-8) first, as the dict had them
        held = _rows_after(self._kept.pop(fid, {}), here)
        if self._blobs is not None:
            held = _rows_after(held, self._blobs.pop(fid, {}))
        self._held = held


class FactListing:
    """The rows of a listing being read (:meth:`FactStore.start_listing`):
    ``groups()`` yields each fact's stored values (:data:`FactGroup`) in id
    order, once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # the legacy provenance rows, taken by each revision as the groups reach it
        self.prov: ProvRows | LegacyProvenance = {}
        self.joined: Iterator[tuple[Any, ...]] | None = None
        # the indexed query, should the sorted scans fail (a full or
        # unwritable temporary directory): same rows, no temporary file
        self.fallback: Callable[[], Iterator[tuple[Any, ...]]] | None = None
        self._thread: Background | None = None   # the sorts; its value: their cursors
        # the fact ids with several rows in facts (a table without its key),
        # for the joined reads (the sorted ones see the rows themselves)
        self.twice_of: Callable[[], frozenset[Any]] = frozenset
        # what lets go of the sorts' connection once the groups are read (or
        # left): a store read many times keeps no connection per listing
        self.release: Callable[[], None] | None = None

    def start(self, db: sqlite3.Connection, queries: list[str], args: tuple[Any, ...] = ()) -> None:
        self._thread = Background("memctl-listing",
                                  lambda: [db.execute(q, args) for q in queries],  # the sorts run here
                                  db.interrupt)
        self._thread.start()

    def wait(self) -> None:
        """Until the sorts started by :meth:`start` are done."""
        if self._thread is not None:
            self._thread.wait()

    def end(self) -> None:
        """For a store that closes: until the sorts are done, or cancelled
        if their thread has not begun them (:meth:`Background.end`)."""
        if self._thread is not None:
            self._thread.end()

    def groups(self, *, bare: bool = False) -> Iterator[FactGroup]:
        """The groups; a fact without revisions raises StoreCorrupt, or with
        ``bare`` is a group whose revisions are empty."""
        try:
            yield from self._groups(bare)
        finally:
            release, self.release = self.release, None
            if release is not None:
                release()

    def _groups(self, bare: bool) -> Iterator[FactGroup]:
        if self._thread is not None:
            self._thread.wait()
            error = self._thread.error
            if error is not None:
                if isinstance(error, sqlite3.Error) and self.fallback is not None:
                    yield from _joined_groups(self.fallback(), self.prov, bare, self.twice_of())
                    return
                if isinstance(error, sqlite3.Error):
                    raise _db_error(self.path, error) from error
                raise error
            yield from _merged_groups(self._thread.value, self.prov, bare)
        elif self.joined is not None:
            yield from _joined_groups(self.joined, self.prov, bare, self.twice_of())


def _bare(fact_id: Any, revision: Any) -> StoreCorrupt:
    return StoreCorrupt(f"facts database: fact {row_text(fact_id)!r} has no revision {revision}")


def _joined_groups(rows: Iterable[tuple[Any, ...]], prov: ProvRows | LegacyProvenance,
                   bare: bool = False, twice: frozenset[Any] = frozenset()) -> Iterator[FactGroup]:
    """The groups of the joined query's rows (a 4-tuple: a fact without
    revisions).  A fact id of ``twice`` is one group whose revision is
    :data:`STORED_TWICE`, each of its revisions once (the join repeats them
    for each of its rows in facts), as :func:`_merged_groups` gives it."""
    if twice:
        rows = _joined_once(rows, twice)
    head: tuple[Any, ...] | None = None
    revs: list[tuple[Any, ...]] = []
    for row in rows:
        if len(row) == 4:
            if head is not None:
                yield (*head, revs)
                head = None
            if not bare:
                raise _bare(*row[:2])
            yield (*row, [])
            continue
        fid = row[0]
        if head is None or head[0] != fid:
            if head is not None:
                yield (*head, revs)
            head = row[:4]
            revs = []
        revs.append((*row[4:], prov.pop((fid, row[4]), None) if prov else None))
    if head is not None:
        yield (*head, revs)


def _joined_once(rows: Iterable[tuple[Any, ...]], twice: frozenset[Any]
                 ) -> Iterator[tuple[Any, ...]]:
    """The joined rows with those of each fact id of ``twice`` given once
    each (revision :data:`STORED_TWICE`, the times :func:`_twice_times`)."""
    def once(held: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        head = (held[0][0], STORED_TWICE, *_twice_times(held))
        seen: set[tuple[Any, ...]] = set()
        for r in held:
            rest = tuple(r[4:])
            if rest not in seen:
                seen.add(rest)
                yield head + rest

    return _twice_runs(rows, twice, once)


def _merged_groups(cursors: list[sqlite3.Cursor], prov: ProvRows | LegacyProvenance,
                   bare: bool = False) -> Iterator[FactGroup]:
    """The groups of the facts, revisions (and source_refs) each sorted by
    (fact id, revision), merged as the joined query joins them: a revision
    of no fact is dropped, a fact without revisions fails where reached; the
    rows in facts of one id, one fact (:func:`_collapse_runs`)."""
    lt = _sql_lt
    facts = _collapse_runs(_fetched(cursors[0]))
    refs = _fetched(cursors[2]) if len(cursors) > 2 else iter(())
    f = next(facts, None)
    f_used = False
    s = next(refs, None)
    group: FactGroup | None = None
    for batch in _text_batches(cursors[1], 2):
        for fid, rev, text, rcreated in batch:
            if group is None or fid != group[0]:
                if group is not None:
                    yield group
                    group = None
                while f is not None and (f[0] < fid if type(f[0]) is str and type(fid) is str
                                         else lt(f[0], fid)):
                    if not f_used:
                        if not bare:
                            raise _bare(f[0], f[1])
                        yield (*f, [])
                    f, f_used = next(facts, None), False
                if f is None or f[0] != fid:
                    continue                    # a revision of no fact: the join drops it
                f_used = True
                group = (fid, f[1], f[2], f[3], [])
            while s is not None and (s[0] != fid and lt(s[0], fid)
                                     or s[0] == fid and s[1] != rev and lt(s[1], rev)):
                s = next(refs, None)
            p = prov.pop((fid, rev), None) if prov else None
            if s is not None and s[0] == fid and s[1] == rev:
                group[4].append((rev, text, rcreated, s[2], s[3], s[4], p))
                # a second source row of the revision (source_refs without its
                # primary key): one more stored revision, as the join gives it
                s = next(refs, None)
                while s is not None and s[0] == fid and s[1] == rev:
                    group[4].append((rev, text, rcreated, s[2], s[3], s[4], p))
                    s = next(refs, None)
            else:
                group[4].append((rev, text, rcreated, None, None, None, p))
    if group is not None:
        yield group
    while f is not None:
        if not f_used:
            if not bare:
                raise _bare(f[0], f[1])
            yield (*f, [])
        f, f_used = next(facts, None), False


# --------------------------------------------------------------------------
# The store


_R = TypeVar("_R")
_P = ParamSpec("_P")


def _busy(store: FactStore) -> StoreBusy:
    """The error of a wait for another thread's call longer than the store's
    busy timeout: StoreBusy, as for SQLite's lock held by another process."""
    return StoreBusy(f"{store.path}: facts database is locked by another writer "
                     "(a call of another thread of this process, for more than "
                     f"{store.busy_timeout:g} s)")


# How the wrappers below take and let go a writer's lock, so that a Ctrl-C
# (raised by CPython only as a Python function is entered, after a call of C
# code returns, or at a backward jump) neither leaves it held nor lets it go
# early:
#   held = lock._is_owned()     # before the try: an interrupt takes nothing
#   try:
#       if not held and not lock.acquire(timeout=...): raise _busy(store)
#       ...
#   finally:
#       if not held:
#           try: lock.release()     # the C call itself, no function entered
#           except RuntimeError: pass   # (not taken: timed out, interrupted)
# A call made inside another of the same thread (a read in a write's
# validation) takes and lets go nothing: its finally never lets go the
# outer call's hold (an interrupt as it began let the write roll back with
# the store open to the other threads), and a thread's own release is never
# in a function of its own (an interrupt as it was entered left it held).


def _serialized(method: Callable[Concatenate[FactStore, _P], _R]
                ) -> Callable[Concatenate[FactStore, _P], _R]:
    """A public call of a writer's store, made holding the store's lock:
    never inside another thread's write transaction, nor beside another
    thread's statement on the shared connection; a view of a writer's
    (:meth:`FactStore.one_state`) takes a lock of its own, so that the
    writer's close, which closes the view, waits for its call in progress.
    A store opened read-only takes no lock (its connection reads an
    immutable private copy: the CLI's hot paths pay nothing); a call made inside another of the same
    thread (a read in a write's validation) holds it already (a
    re-entrant lock)."""

    @functools.wraps(method)
    def call(self: FactStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._lock_free:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise _typed(exc) from exc
        lock: Any = self._lock     # (_is_owned: not in typeshed)
        held = lock._is_owned()
        try:
            if not held and not lock.acquire(timeout=min(max(self.busy_timeout, 0.0), _WAIT_MAX)):
                raise _busy(self)
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _typed(exc) from exc
        finally:
            if not held:
                try:
                    lock.release()
                except RuntimeError:
                    pass

    return call


def _serial_rows(method: Callable[Concatenate[FactStore, _P], Iterator[T]]
                 ) -> Callable[Concatenate[FactStore, _P], Iterator[T]]:
    """A writer's method that reads lazily (a generator): its rows read
    holding the store's lock a row at a time (:meth:`FactStore._each_held`),
    never while the consumer has one (it may write, or call anything, from
    this thread or another, between two rows).  A read-only open's rows as
    they are: no lock, nothing added per row."""

    @functools.wraps(method)
    def rows(self: FactStore, /, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[T]:
        it = method(self, *args, **kwargs)
        # (a writer's rows are read by _call, which types them)
        return _typed_rows(it) if self._lock_free else self._each_held(it)

    return rows


def _typed(exc: sqlite3.Error) -> MemctlError:
    """The memctl error of an error of SQLite's that a public method of
    :class:`FactStore` did not classify where it arose (``errors.sqlite_error``:
    StoreBusy or StoreCorrupt, the message memctl prints for it): the
    store's callers (the agent's writer, ``project.facts``, a read-only
    open) never meet a raw ``sqlite3`` error (docs/API.md, "Errors")."""
    typed = sqlite_error(exc)
    return typed if typed is not None else StoreCorrupt(f"database error: {exc}")


def _typed_rows(rows: Iterator[T]) -> Iterator[T]:
    """``rows`` with an error of SQLite's met while they are read raised as
    its memctl error (:func:`_typed`): one ``try`` around the whole
    iteration (free in CPython 3.11 until it raises), nothing per row."""
    try:
        yield from rows
    except sqlite3.Error as exc:
        raise _typed(exc) from exc


def _ends_its_transaction(method: Callable[Concatenate[FactStore, _P], _R]
                          ) -> Callable[Concatenate[FactStore, _P], _R]:
    """A FactStore write method, made holding the store's lock (as
    :func:`_serialized`: another thread's write waits for this one to end,
    its COMMIT or ROLLBACK included), that leaves no transaction open,
    whatever ends it: a Ctrl-C landing as ``_Txn.__exit__`` is entered (a
    signal handler runs at a call's start) runs none of its code, and the
    writer held SQLite's write lock until its next write.  Rolled back
    here, in the method's own caller frame (one interrupt cannot land
    twice), before the lock is let go."""

    @functools.wraps(method)
    def write(self: FactStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        lock: Any = self._lock     # (_is_owned: not in typeshed)
        held = lock._is_owned()
        try:
            if not held and not lock.acquire(timeout=min(max(self.busy_timeout, 0.0), _WAIT_MAX)):
                raise _busy(self)
            try:
                return method(self, *args, **kwargs)
            except BaseException as exc:
                db = self._conn
                # (this thread's transaction only, as the lock makes it)
                if db is not None and db.in_transaction and \
                        self._txn_thread in (None, _thread.get_ident()):
                    FactStore._Txn(self)._rolled_back(db)
                if isinstance(exc, sqlite3.Error):
                    # (a read of the write outside its transaction; the
                    # transaction's own errors are classified by _Txn)
                    raise _typed(exc) from exc
                raise
        finally:
            if not held:
                try:
                    lock.release()
                except RuntimeError:
                    pass

    return write


def _too_large(what: str) -> str:
    return (f"{what} is at most {MAX_POSITION} (2^63-1, the largest integer SQLite stores): "
            "a larger one names no position of a transcript, and a fact citing it could "
            "never be forgotten")


def _check_ref(ref: object, call: str, *, optional: bool = False) -> None:
    """A write's SourceRef (None where ``optional``), refused with UsageError
    before anything is written when it is no SourceRef or names a position
    above :data:`MAX_POSITION`: SQLite stores no larger integer, so no
    exclusion could hold it, and ``forget`` refuses such a stored source
    (docs/FORMAT.md) -- the fact could never be forgotten.  (The
    constructor accepts it, and the readers read a stored one as FORMAT.md
    says: only the writes refuse it.)"""
    if ref is None and optional:
        return
    if not isinstance(ref, SourceRef):
        raise UsageError(f"{call} needs a SourceRef{' or None' if optional else ''}, "
                         f"not {type(ref).__name__}")
    if ref.seqs[-1] > MAX_POSITION:     # (ascending: the last is the largest)
        raise UsageError(_too_large("a source position"))


_END: Any = object()
_WAIT_MAX = 86400.0 * 365     # (a lock's wait: at most threading.TIMEOUT_MAX)
# The longest busy timeout SQLite takes (milliseconds in a 32-bit int): a
# longer one (inf) is this one
BUSY_TIMEOUT_MAX = (2**31 - 1) // 1000


def _checked_wait(seconds: object) -> float:
    """A store's ``busy_timeout`` as given: a number of seconds, negative
    taken as 0 and more than :data:`BUSY_TIMEOUT_MAX` (``math.inf``) as
    that.  Anything else, NaN included, is a UsageError (before 2026-12-07
    NaN was a raw ValueError at the first read, and inf an OverflowError at
    the first write)."""
    import math

    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or math.isnan(seconds):
        raise UsageError(f"busy_timeout must be a number of seconds, not {seconds!r}")
    return float(min(max(seconds, 0.0), BUSY_TIMEOUT_MAX))


class FactStore(ClosesOnExit):
    """The project's facts database.  See the module docstring.

    Threads (``docs/API.md``, "Threads"): a writer may be shared.  Its calls
    take turns on its one connection under the store's re-entrant lock: a
    write holds it from its start to its COMMIT or ROLLBACK, a read for its
    statements, a lazy read (:meth:`iter_facts`, a listing's rows) for each
    row it reads, never while the consumer has the row.  A call waits at
    most ``busy_timeout`` for another thread's, then StoreBusy (as for
    SQLite's lock held by another process); :meth:`close` waits without a
    bound.  A view of :meth:`one_state` takes a lock of its own the same
    way (the writer's close closes it, from any thread).  A read-only open
    takes no lock: one thread at a time.  :meth:`fork` is a read-only
    open's, with no other thread running (:meth:`may_fork`).

    ``before_commit``, when given, is called by every write of the writer
    just before its ``COMMIT`` (in the writing thread, the transaction
    complete): memctl's ``correct`` and ``forget`` hold off a Ctrl-C or a
    termination signal from there (``cli.output.uncut_from``), so that one
    landing as the COMMIT returns still finds the change reported as
    written.  An exception it raises rolls the write back."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT,
                 on_connect: Callable[[sqlite3.Connection], None] | None = None,
                 before_commit: Callable[[], object] | None = None,
                 _readonly: bool = False) -> None:
        from .config import path_text

        text = path_text(path, "FactStore: path")
        if not text:
            # (Path("") is the current directory: before 2026-12-07 a
            # read-only open raised a raw ValueError, a writer StoreCorrupt)
            raise UsageError("FactStore: path is an empty path")
        self.path = Path(text)
        self.busy_timeout = _checked_wait(busy_timeout)
        self._before_commit = before_commit
        self.readonly = _readonly
        # whether the calls run without the store's lock: a read-only open's
        # (one thread at a time); a writer's, and a view of a writer's
        # (one_state: another thread may close the writer, and the view with
        # it), take it
        self._lock_free = _readonly
        self.needs_migration = False
        self.schema_version = 0
        self._pending_migration = False   # a writer's: the first write migrates (_Txn)
        self._migrated = False            # the open write transaction migrated
        self._wal_pending = False         # WAL mode still due after a migration (_wal_switch)
        # the thread that began the write transaction last (_Txn): one left
        # open is rolled back by that thread only, never another thread's
        # still running on the same connection
        self._txn_thread: int | None = None
        # a writer's calls, one thread at a time (_serialized; "Threads" in
        # the class docstring); a re-entrant lock: a read made inside a
        # write of the same thread (its validation) holds it already
        self._lock = _thread.RLock()
        self._before_migration: tuple[int, set[str], bool] = (0, set(), False)
        self.snapshot = False         # read-only: True when reading a private copy
        self._on_connect = on_connect
        self._conn: sqlite3.Connection | None = None
        self._tmpdir: str | None = None
        self._siblings: list[sqlite3.Connection] = []   # start_listing's, in_background's
        self._threads: list[Background] = []              # in_background's
        self._listings: list[FactListing] = []
        self._sessions_checked: set[str] = set()   # (_check_session_indexes)
        self._tables: set[str] = set()
        self._closed = False
        self._children: list[int] = []    # fork's, killed and reaped by close
        self._files: list[int] = []       # a listing's private files (hold_file), closed by close
        # a writer's: the file it opened (absolute path, device and inode) and
        # the views of one_state still open, closed by close
        self._opened: tuple[str, int, int] | None = None
        self._views: weakref.WeakSet[FactStore] = weakref.WeakSet()
        # a Project's writer: raises (UsageError) when the project's memory
        # is disabled, before a write that would add a fact, a revision or
        # a source (``Project.facts`` sets it; forget is never refused)
        self.write_guard: Callable[[], None] | None = None
        if _readonly:
            self._open_readonly()
        elif lstat_regular(self.path) is not None:
            self._open_writer(create=False)

    # ---- opening ---------------------------------------------------------

    @classmethod
    def open_readonly(cls, path: str | os.PathLike[str], *,
                      busy_timeout: float = BUSY_TIMEOUT) -> FactStore:
        """Open for reading without creating or changing any file in the store."""
        return cls(path, busy_timeout=busy_timeout, _readonly=True)

    def _connect(self, target: str, *, uri: bool,
                 keep: Callable[[sqlite3.Connection], object]) -> sqlite3.Connection:
        """A connection to ``target``, handed to ``keep`` (its owner's
        ``list.append``, or ``functools.partial(setattr, owner, name)``: C
        calls, no frame an interrupt could land in) as soon as SQLite made
        it, before anything else: the owner's close closes it whatever an
        interrupt cuts short from there on, the return included (a
        connection is in a reference cycle: dropped, it stayed open, its
        files too, until a full collection).  Closed here when setting it
        up fails or is interrupted."""
        db: sqlite3.Connection | None = None
        try:
            try:
                db = sqlite3.connect(target, uri=uri, timeout=self.busy_timeout,
                                     isolation_level=None, check_same_thread=False,
                                     factory=_Connection)
                keep(db)
                # Each page's cells are checked as the page is read: without it a
                # damaged page was read past its cells, into whatever memory the
                # process had used before, and the same damaged store got different
                # answers from one run to the next (an error, a row more or less, a
                # finding more or less).  The checks cost no time measured at the
                # command (docs/performance-history.md, fifteenth pass); integrity_check,
                # which they made 15% slower, runs without them first (audit.facts).
                db.execute("PRAGMA cell_size_check = ON")
            except sqlite3.Error as exc:
                raise _db_error(self.path, exc) from exc
            if self._on_connect is not None:
                self._on_connect(db)
            return db
        except BaseException:
            if db is not None:
                db.close()
            raise

    @contextlib.contextmanager
    def _closed_on_failure(self, close: Callable[[], None] | None = None,
                           writer: bool = False) -> Iterator[None]:
        """Opening: on any failure close what is open (the store, and remove a
        private snapshot; or ``close``, a connection being set up); a SQLite
        error becomes its memctl error (``_db_error``; a ``writer``'s open of
        the store's database, ``_write_error``)."""
        try:
            yield
        except sqlite3.Error as exc:
            (close or self.close)()
            raise (_write_error if writer else _db_error)(self.path, exc) from exc
        except BaseException:
            (close or self.close)()
            raise

    def _made_tmpdir(self, path: str) -> None:
        """The private directory, recorded before it is made: a close after
        an interrupt anywhere in the snapshot removes it (its copy of the
        facts was left in $TMPDIR when the interrupt came before the
        snapshot returned)."""
        self._tmpdir = path

    def _open_readonly(self) -> None:
        st = lstat_regular(self.path)
        if st is None:
            return  # no database: empty results, nothing created
        # (after the check: a path with no name, "/" or ".", is a directory,
        # StoreCorrupt, where with_name raised a raw ValueError)
        wal = self.path.with_name(self.path.name + "-wal")
        wal_st = lstat_regular(wal)
        journal = self.path.with_name(self.path.name + "-journal")
        journal_st = lstat_regular(journal)
        with self._closed_on_failure():
            try:
                if (wal_st is None or wal_st.st_size == 0) and journal_st is not None \
                        and journal_st.st_size > 0:
                    # Rollback-journal mode with a journal: a writer killed mid-
                    # transaction (a hot journal) or still running.  Read a private
                    # copy that SQLite rolls back, never the main file as it is
                    # (immutable=1 would show the uncommitted pages).
                    self._tmpdir = private_journal_snapshot(self.path, journal, self.busy_timeout,
                                                        self._made_tmpdir)
                    self.snapshot = True
                else:
                    # A private copy even with no -wal: read in place (immutable=1),
                    # the main file could change under a long read when a writer
                    # starts and checkpoints into it on close ('database disk image
                    # is malformed' under the 30-second load, in a facts listing).
                    self._tmpdir = private_snapshot(self.path, wal, self.busy_timeout,
                                                self._made_tmpdir)
                    self.snapshot = True
                self._open_snapshot()
            except OSError as exc:
                self.close()
                if is_link_refusal(exc):
                    raise StoreCorrupt(f"{self.path}: is a symbolic link; "
                                       "refusing to follow it") from None
                raise_if_out_of_fds(exc, self.path)
                raise StoreCorrupt(f"{self.path}: cannot open: {exc.strerror}") from None

    def _open_writer(self, *, create: bool, keep_open: bool = False) -> None:
        """Connect for writing (``create``: making the file first).  On a
        failure the store is closed, or with ``keep_open`` (a read's open,
        :meth:`_created_since`) only the connection: the next read or
        write tries again."""
        if create:
            from .atomic import ensure_dir

            ensure_dir(self.path.parent)
            try:
                fd = open_nofollow(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                os.close(fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise StoreWriteError(f"{self.path}: cannot create: {exc.strerror}") from None
        if lstat_regular(self.path) is None:
            raise NotFound(f"{self.path}: facts database disappeared")
        for sidecar in ("-wal", "-shm", "-journal"):
            # SQLite opens (and creates) these following symbolic links: refuse a
            # link or an odd file type here, before it has created anything (issue 16.8).
            lstat_regular(self.path.with_name(self.path.name + sidecar))
        self._check_unopened_wal()
        where = os.path.abspath(self.path)
        try:
            db = self._connect(os.fspath(self.path), uri=False,
                               keep=functools.partial(setattr, self, "_conn"))
        except BaseException:
            self._conn = None       # (closed by _connect: the next write opens again)
            raise
        opened = lstat_regular(where)
        if opened is not None:
            self._opened = (where, opened.st_dev, opened.st_ino)
        with self._closed_on_failure(self._unconnect if keep_open else None, writer=True):
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            tables = _tables(db)
            if (tables or _has_schema(db)) and "facts" not in tables:
                # Another application's database: never migrate lecode's tables into it.
                problem = _shape_problem(db, "facts", set()) or "table facts is missing"
                raise StoreCorrupt(f"{self.path}: {problem}; not a lecode facts database")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreCorrupt(_future_message(self.path, version))
            if version == SCHEMA_VERSION:
                # A database to migrate stays in its journal mode until its
                # migration committed (_Txn): a migration that fails leaves
                # the file as it was, its journal mode too.  A new, empty
                # one too (a 0-byte file: switching it here wrote its
                # header, with no schema): its schema is the first write's
                # migration, and WAL mode follows that commit, so a writer
                # closed without a write, or whose first write is refused,
                # leaves the file byte for byte as it was.
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreBusy(f"{self.path}: could not switch to WAL mode (another "
                                    "connection holds the database)")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = FULL")
            self._load_schema(migrate=True)

    def _open_snapshot(self) -> None:
        """Connect to the private snapshot and read its schema.  What SQLite
        could not write there (the copy's ``-shm`` or ``-wal`` in a full
        $TMPDIR: "disk I/O error", "database or disk is full") is exit 7
        naming the temporary copy, not the store: nothing of the store was
        written, and the store is fine."""
        assert self._tmpdir is not None
        try:
            try:
                self._snapshot_connection()
                self._load_schema(migrate=False)
            except sqlite3.Error as exc:
                raise _db_error(self.path, exc) from exc
        except StoreWriteError as exc:
            reason = exc.message.removeprefix(f"{self.path}: ").removesuffix(
                "; nothing was changed")
            raise copy_write_error(self.path, self._tmpdir, reason,
                                   full="full" in reason) from None

    def _snapshot_connection(self) -> sqlite3.Connection:
        """The read connection to the private snapshot (``query_only``),
        made this store's ``_conn``."""
        assert self._tmpdir is not None
        try:
            db = self._connect(os.path.join(self._tmpdir, "facts.sqlite3"), uri=False,
                               keep=functools.partial(setattr, self, "_conn"))
            if isinstance(db, _Connection):
                db.replayable = True
            db.execute("PRAGMA query_only = 1")
            db.execute("PRAGMA temp_store = MEMORY")  # no SQLite temp file in $TMPDIR either
        except BaseException:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            raise
        return db

    def _check_unopened_wal(self) -> None:
        """A non-empty ``-wal`` with no ``-shm`` beside it belongs to no open
        connection: a crashed writer's, or one copied from another database.
        Connecting would apply it and closing would checkpoint it into the
        main file, so read it first through a private snapshot (nothing in the
        store touched): if the result is not a lecode facts database, refuse."""
        wal = lstat_regular(self.path.with_name(self.path.name + "-wal"))
        if wal is None or wal.st_size == 0 or os.path.lexists(
                self.path.with_name(self.path.name + "-shm")):
            return
        FactStore.open_readonly(self.path).close()

    def _load_schema(self, *, migrate: bool) -> None:
        """Read the schema version and the tables.  ``migrate`` (a writer): an
        older version is migrated by the first write, in its transaction
        (:meth:`_migrate_in`); until then the writer reads it as it is, as a
        read-only open does."""
        db = self._conn
        assert db is not None
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreCorrupt(_future_message(self.path, version))
        _refuse_negative(self.path, version)
        self.schema_version = version
        self._tables = _tables(db)
        # An empty database (a zero-length file: a writer that crashed between
        # creating the file and its schema) is no database yet, as validate
        # reads it: nothing for a reader to call "needs migration"; a
        # writer's first write still makes the schema (every migration).
        self.needs_migration = version < SCHEMA_VERSION and bool(self._tables or _has_schema(db))
        self._pending_migration = migrate and version < SCHEMA_VERSION
        if self._tables or _has_schema(db):
            # (nothing at all: an empty file, read as no database; views
            # alone are not lecode's, as another application's tables are not)
            _check_schema(db, version, self.path)
            # a table of a later version already there (user_version lost)
            # is read as it is, by readers and writers: in a shape no
            # migration knows, the database is refused here, as one lacking
            # a column of its own version is
            problem = migration_problem(db, version)
            if problem is not None:
                raise UnmigratableSchema(self.path, version, "", problem)

    def _migrate_in(self, db: sqlite3.Connection) -> None:
        """Inside the write transaction just begun: apply the pending
        migrations (:func:`_migrate`), so that the write sees schema version
        3; :meth:`_schema_rolled_back` undoes what this records should the
        transaction roll back."""
        if _migrate(db, self.path):     # (none when another writer migrated first)
            _check_schema(db, SCHEMA_VERSION, self.path)
        self._before_migration = (self.schema_version, set(self._tables), self.needs_migration)
        self._pending_migration = False
        self._migrated = True
        self.schema_version = SCHEMA_VERSION
        self._tables = _tables(db)
        self.needs_migration = False

    def _schema_rolled_back(self) -> None:
        """The write transaction that migrated rolled back: the database is at
        its old version again, read as before (the next write migrates)."""
        self._migrated = False
        self._pending_migration = True
        self.schema_version, self._tables, self.needs_migration = self._before_migration

    def _migration_committed(self) -> None:
        """The write transaction that migrated committed: switch the database
        to WAL mode now (a writer of a current schema does when it opens).
        The write is in; should another connection hold the database (a
        reader in a transaction), the switch is tried again before each of
        this writer's next writes (:meth:`_wal_switch`), and by the next
        writer's open, which waits or refuses."""
        self._migrated = False
        self._wal_pending = True
        self._wal_switch()

    def _wal_switch(self) -> None:
        """One try, without waiting, at the WAL mode a new or migrated
        database is due (:meth:`_migration_committed`): a busy database is
        tried again at this writer's next write, never waited for here
        (before 2026-12-07 one try waited the whole busy timeout inside
        SQLite, 5 s a Ctrl-C could not cut short, then left the database in
        its rollback journal mode for the writer's whole life)."""
        db = self._conn
        if db is None or db.in_transaction:
            return
        try:
            db.execute("PRAGMA busy_timeout = 0")
            try:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            finally:
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        except sqlite3.Error:
            return
        if str(mode).lower() == "wal":
            self._wal_pending = False

    def _require_database(self, fact_id: str) -> None:
        """A write about an existing fact, with no database yet: there is no such
        fact, and nothing is created (the database appears with the first fact)."""
        if self._conn is None and not self.readonly and lstat_regular(self.path) is None:
            raise NotFound(f"no fact {fact_id} (no facts database)")

    def _ensure_writer(self) -> sqlite3.Connection:
        if self._closed:
            raise UsageError("the fact store is closed")
        if self.readonly:
            raise UsageError("the fact store was opened read-only")
        if self._conn is None:
            self._open_writer(create=True)
        assert self._conn is not None
        return self._conn

    def check_open(self) -> None:
        """``UsageError`` once the store is closed (a listing of it checks
        after each row it gave: rows read ahead are not given after close)."""
        if self._closed:
            raise UsageError("the fact store is closed")

    def _unconnect(self) -> None:
        """Close the writer's connection only, read as none yet (a read's
        open that failed: :meth:`_created_since`)."""
        db, self._conn = self._conn, None
        self._opened = None
        self._tables = set()
        self._pending_migration = False
        self.schema_version = 0
        self.needs_migration = False
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _created_since(self) -> None:
        """A writer with no connection yet (made before the database existed,
        as ``project.facts`` kept by a caller, or ``FactStore(path)``): when
        the file exists now (another process created it; one ``lstat`` per
        read until then), connect to it as the writer does, so that a read
        never gives less than the file holds.  Before 2026-12-07 it never
        looked again: generation 0, no exclusions and no facts until its own
        first write, and a SessionStore given it as its exclusions read
        forgotten evidence back as valid."""
        if (self._conn is None and not self.readonly and not self._closed
                and lstat_regular(self.path) is not None):
            try:
                self._open_writer(create=False, keep_open=True)
            except NotFound:
                pass    # (gone again between the two looks: still no database)

    def _reader(self) -> sqlite3.Connection | None:
        self.check_open()
        self._created_since()
        if self._pending_migration:
            self._migrated_elsewhere()
        return self._conn if self._tables else None

    def _migrated_elsewhere(self) -> None:
        """A writer on an older database (its first write migrates it) whose
        file another connection has migrated meanwhile: read it as it now
        is -- its version, tables and ``needs_migration`` -- not as it was
        at open (a fact recorded with its source by another process was read
        without it: unverified).  One ``PRAGMA user_version`` per read, and
        only while a migration is pending."""
        db = self._conn
        if db is None:
            return
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error:
            return      # (the read itself reports it)
        if version == self.schema_version:
            return
        self._load_schema(migrate=True)

    def read_connection(self) -> sqlite3.Connection | None:
        """The connection of a store opened with :meth:`open_readonly` (an
        immutable open or a private snapshot, ``query_only``), for read-only
        SQL the store has no method for (the audit's checks); None when there
        is no database.  A writer's connection is never handed out."""
        if not self.readonly:
            raise UsageError("read_connection is for a store opened read-only")
        if self._closed:
            raise UsageError("the fact store is closed")
        return self._conn

    @property
    def tables(self) -> frozenset[str]:
        """The names of the lecode tables the database holds (empty: none)."""
        return frozenset(self._tables)

    def close(self) -> None:
        """Close the connection (and remove a private snapshot).  Idempotent.
        A writer's waits for a call in progress on another thread to end (a
        write commits or rolls back first), with no bound: a listing holds
        nothing between its rows, and ends at close (its next row raises
        UsageError)."""
        if self._lock_free:
            self._close_now()
            return
        with self._lock:
            self._close_now()

    def _close_now(self) -> None:
        """:meth:`close`, the lock held (a writer's)."""
        self._closed = True
        self._end_children()
        for fd in list(self._files):
            self.close_file(fd)
        for view in list(self._views):      # (a listing still read: it ends here)
            view.close()
        # a sort, or in_background's work, still running on a sibling
        # connection is stopped (nobody reads it any more: the integrity
        # check of a large store left by an interrupt took seconds) and
        # waited for; a Ctrl-C meanwhile is raised once the store is closed
        # (its snapshot removed)
        for db in self._siblings:
            with contextlib.suppress(sqlite3.Error):
                db.interrupt()
        interrupted: BaseException | None = None
        for wait in [*(listing.end for listing in self._listings),
                     *(job.end for job in self._threads)]:
            try:
                wait()
            except KeyboardInterrupt as exc:
                interrupted = exc
        self._listings = []
        self._threads = []
        for db in self._siblings:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        self._siblings = []
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        if self._tmpdir is not None:
            # (whole even when an interrupt comes meanwhile: remove_private;
            # recorded until it is gone, for a close called again)
            remove_private(self._tmpdir)
            self._tmpdir = None
        if interrupted is not None:
            raise interrupted


    @property
    @_serialized
    def exists(self) -> bool:
        return self._conn is not None

    # ---- the write transaction ------------------------------------------

    class _Txn:
        def __init__(self, store: FactStore) -> None:
            self.store = store

        def __enter__(self) -> sqlite3.Connection:
            store = self.store
            db = store._ensure_writer()
            me = _thread.get_ident()
            # (entered by a write method, holding the store's lock
            # (_ends_its_transaction): no other thread is between its BEGIN
            # and COMMIT on this connection, they wait for the lock.  The
            # writer's connection holds no transaction between writes: one
            # still open is a write whose rollback an interrupt cut short;
            # its lock is let go and its changes dropped, a migration in it
            # too: the store is read as unmigrated again)
            if db.in_transaction:
                self._rolled_back(db)
            if store._wal_pending:
                store._wal_switch()
            store._txn_thread = me
            try:
                _begin(db, store.path, store.busy_timeout)
                if store._pending_migration:
                    # the pending migrations, in this transaction: they commit
                    # with the write, or not at all
                    store._migrate_in(db)
            except BaseException as exc:
                # (a Ctrl-C just after BEGIN, too: __exit__ is not called
                # when __enter__ raises, and the lock was held for good)
                self._rolled_back(db)
                if isinstance(exc, sqlite3.Error):
                    raise _write_error(store.path, exc) from exc
                raise
            return db

        def _rolled_back(self, db: sqlite3.Connection) -> None:
            _rollback(db)
            if self.store._migrated:
                self.store._schema_rolled_back()

        def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                     tb: TracebackType | None) -> Literal[False]:
            db = self.store._conn
            assert db is not None
            if exc_type is None:
                try:
                    if self.store._before_commit is not None:
                        self.store._before_commit()
                    db.execute("COMMIT")
                except BaseException as e:
                    if isinstance(e, sqlite3.Error):
                        self._rolled_back(db)
                        raise _write_error(self.store.path, e) from e
                    # an interrupt around COMMIT: a transaction still open is
                    # rolled back; one that committed stays committed
                    if db.in_transaction:
                        self._rolled_back(db)
                    elif self.store._migrated:
                        self.store._migration_committed()
                    raise
                if self.store._migrated:
                    self.store._migration_committed()
                return False
            self._rolled_back(db)
            if isinstance(exc, sqlite3.Error):
                raise _write_error(self.store.path, exc) from exc
            return False

    def _txn(self) -> FactStore._Txn:
        return FactStore._Txn(self)

    # ---- exclusions and generation (ExclusionReader) ---------------------

    @_serialized
    def generation(self) -> int:
        """The project's exclusion generation: 0, plus one per first forget."""
        db = self._reader()
        if db is None:
            return 0
        return meta_generation(db)

    @_serialized
    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        db = self._reader()
        if db is None:
            return frozenset()
        return session_exclusions(db, session_id)

    @_serialized
    def exclusions_by_session(self) -> dict[str, frozenset[int]]:
        """Every exclusion, grouped by session (one query)."""
        db = self._reader()
        if db is None or "exclusions" not in self._tables:
            return {}
        return all_exclusions(db)

    @_serialized
    def is_excluded(self, session_id: str, seq: int) -> bool:
        db = self._reader()
        if db is None:
            return False
        return seq in session_exclusions(db, session_id)

    @_serialized
    def exclusion_count(self) -> int:
        db = self._reader()
        if db is None:
            return 0
        return int(db.execute("SELECT count(*) FROM exclusions").fetchone()[0])

    @_serialized
    def database_id(self) -> str | None:
        """:func:`database_id` of this database (None with no database)."""
        db = self._reader()
        return None if db is None else database_id(db)

    @_serialized
    def forgotten_ids(self) -> dict[str, int] | None:
        """:func:`forgotten_ids` of this database (empty with no database)."""
        db = self._reader()
        return {} if db is None else forgotten_ids(db)

    @_serialized
    def forgotten_present(self) -> frozenset[str]:
        """:func:`forgotten_present` of this database (empty with no database)."""
        db = self._reader()
        return frozenset() if db is None else forgotten_present(db)

    @_serialized
    def was_forgotten(self, fact_id: str) -> bool:
        """True when a forget retry marker exists for the id."""
        db = self._reader()
        if db is None or "forgotten" not in self._tables:
            return False
        return db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?",
                          (fact_id,)).fetchone() is not None

    @staticmethod
    def _check_not_excluded(db: sqlite3.Connection, positions: Mapping[str, Iterable[int]]) -> None:
        for session_id, seqs in positions.items():
            excluded = session_exclusions(db, session_id)
            for seq in sorted(set(seqs)):
                if seq in excluded:
                    raise Conflict(f"evidence {session_id}:{seq} is excluded (a forget removed "
                                   "it); it cannot be added, revised or attached again")

    @staticmethod
    def _generation_in(db: sqlite3.Connection) -> int:
        """The generation as the (write) transaction on ``db`` sees it."""
        return meta_generation(db)

    @staticmethod
    def _check_generation(db: sqlite3.Connection, expected: int | None) -> None:
        if expected is None:
            return
        current = FactStore._generation_in(db)
        if current != expected:
            # (a generation only grows: one the store has not reached means
            # the store went back, restored from an older copy, say; before
            # 2026-12-07 that too said "a forget happened meanwhile")
            why = ("a forget happened meanwhile" if current > expected else
                   "the store's generation went back: restored from an older copy?")
            raise Conflict(f"stale exclusion generation: expected {expected}, the store is at "
                           f"{current} ({why})")

    # ---- reads -----------------------------------------------------------

    def _revision_sources(self, db: sqlite3.Connection, fact_id: str | bytes, revision: int
                          ) -> tuple[SourceRef | None, tuple[Provenance, ...], str | None]:
        """(source ref, legacy provenance, why the stored ref is malformed or None).
        A malformed stored ref is that revision's problem (hidden / invalid_ref),
        not a reason to refuse the whole store."""
        ref = None
        error = None
        if "source_refs" in self._tables:
            rows = db.execute("SELECT session_id, seqs, digest FROM source_refs "
                              "WHERE fact_id = ? AND revision = ?", (fact_id, revision)).fetchall()
            if len(rows) > 1:
                return None, (), stored_twice(revision)
            row = rows[0] if rows else None
            if row and has_source(*row):
                try:
                    ref = _ref_from_row(row_text(fact_id), revision, *row)
                except StoreCorrupt as exc:
                    error = exc.message
        prov: dict[str, list[int]] = {}
        for sid, seq in db.execute("SELECT session_id, seq FROM provenance WHERE fact_id = ? "
                                   "AND revision = ? ORDER BY session_id, seq",
                                   (fact_id, revision)):
            prov.setdefault(sid, []).append(seq)
        problem = provenance_problem(prov)
        if problem is not None:
            return None, (), problem
        return ref, provenance_rows(prov), error

    def _fact_from_row(self, db: sqlite3.Connection, row: Sequence[Any],
                       rows: Sequence[Sequence[Any]] = (),
                       twice_ids: frozenset[Any] | None = None) -> Fact:
        """The Fact of a row of :attr:`_FACT_SELECT`; ``rows``: every row the
        join gave its id (more than one: its current revision stored twice,
        so no source, as the listing shows it, and :meth:`revisions` hides
        it; or the id stored twice in facts, ``twice_ids``)."""
        fact_id, revision, created, updated, text = row
        if twice_ids and fact_id in twice_ids:
            # (one row here where the page was read through a unique index
            # that holds the id once while the table holds it twice)
            return missing_fact(fact_id, STORED_TWICE, *_twice_times(rows or (row,)))
        if len(rows) > 1:
            if twice_ids is None:
                twice_ids = ids_stored_twice(db)
            if fact_id in twice_ids:
                return missing_fact(fact_id, STORED_TWICE, *_twice_times(rows))
            return Fact(row_text(fact_id), revision, row_text(text), row_text(created),
                        row_text(updated), None, ())
        if text is None or type(revision) is not int:
            # no row for the current revision (or a NULL text, which
            # revisions() reports; or a revision that is no integer, which
            # SQLite's join may still match to one: 2.0 = 2): fact_status
            # makes it hidden
            return missing_fact(fact_id, revision, created, updated)
        ref: SourceRef | None = None
        prov: tuple[Provenance, ...] = ()
        if row_problem(fact_id, text) is None:
            # (a row revisions() reads as malformed has no source there,
            # revision_from_stored: none here either, as every listing shows it)
            ref, prov, _error = self._revision_sources(db, fact_id, revision)
        # a malformed row keeps its data; its status comes from revisions() (hidden)
        return Fact(row_text(fact_id), revision, row_text(text), row_text(created),
                    row_text(updated), ref, prov)

    _FACT_SELECT = ("SELECT f.fact_id, f.revision, f.created, f.updated, r.text FROM facts f "
                    "LEFT JOIN revisions r ON r.fact_id = f.fact_id AND r.revision = f.revision ")

    @_serialized
    def get(self, fact_id: str) -> Fact | None:
        """A fact at its current revision, or None.  Administrative and
        unverified: model-facing consumers use source-validated recall.
        An id SQLite cannot look up (not text, bytes or a number; a lone
        surrogate; an int beyond 64 bits) is a UsageError."""
        _lookup_id(fact_id)
        db = self._reader()
        if db is None:
            return None
        rows = db.execute(self._FACT_SELECT + "WHERE f.fact_id = ?", (fact_id,)).fetchall()
        if not rows and isinstance(fact_id, str):
            # a writer that bound the id as bytes stored a BLOB: the listing
            # shows it under this id (hidden), so it is found by it
            rows = db.execute(self._FACT_SELECT + "WHERE f.fact_id = ?",
                              (fact_id.encode(),)).fetchall()
        return self._fact_from_row(db, rows[0], rows) if rows else None

    def _stored_id(self, db: sqlite3.Connection, fact_id: str) -> str | bytes:
        """``fact_id`` as the facts table holds it: the text, or the BLOB of
        its bytes where only that is stored (see :meth:`get`)."""
        if isinstance(fact_id, str) and db.execute(
                "SELECT 1 FROM facts WHERE fact_id = ?", (fact_id,)).fetchone() is None:
            blob = fact_id.encode()
            if db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (blob,)).fetchone():
                return blob
        return fact_id

    def _missing(self, db: sqlite3.Connection, fact_id: str) -> NotFound | StoreCorrupt:
        """The error of a writer given an id the facts table does not hold as
        text: StoreCorrupt when it holds the id as a BLOB (listed and
        recalled under the id, hidden, but not to be changed as stored),
        else NotFound."""
        if db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (fact_id.encode(),)).fetchone():
            return StoreCorrupt(f"facts database: the id of fact {fact_id} is stored as a BLOB, "
                                "not text (its writer bound bytes): it is listed hidden and "
                                "cannot be changed or forgotten as stored")
        return NotFound(f"no fact {fact_id}")

    @_serialized
    def require(self, fact_id: str) -> Fact:
        fact = self.get(check_fact_id(fact_id))
        if fact is None:
            if self.was_forgotten(fact_id):
                raise NotFound(f"fact {fact_id} was forgotten")
            raise NotFound(f"no fact {fact_id}")
        return fact

    @_serialized
    def revisions(self, fact_id: str) -> list[Revision]:
        """Every revision of a fact, oldest first, each with its evidence."""
        db = self._reader()
        if db is None:
            return []
        out = []
        key = self._stored_id(db, fact_id)
        for rev, text, created in db.execute(
                "SELECT revision, text, created FROM revisions WHERE fact_id = ? "
                "ORDER BY revision", (key,)).fetchall():
            ref, prov, error = self._revision_sources(db, key, rev)
            problem = row_problem(key, text)
            if problem is not None:
                ref, error = None, problem
            out.append(Revision(fact_id, rev, row_text(text), row_text(created), ref, prov, error))
        return flag_stored_twice(out)

    @_serialized
    def provenance(self, fact_id: str, revision: int | None = None) -> list[Provenance]:
        """Legacy provenance rows of a revision (default: the current one)."""
        db = self._reader()
        if db is None:
            return []
        if revision is None:
            row = db.execute("SELECT revision FROM facts WHERE fact_id = ?", (fact_id,)).fetchone()
            if row is None:
                return []
            revision = row[0]
        return list(self._revision_sources(db, fact_id, revision)[1])

    @_serialized
    def source(self, fact_id: str, revision: int | None = None) -> SourceRef | None:
        """The SourceRef attached to a revision (default: the current one)."""
        db = self._reader()
        if db is None:
            return None
        if revision is None:
            row = db.execute("SELECT revision FROM facts WHERE fact_id = ?", (fact_id,)).fetchone()
            if row is None:
                return None
            revision = row[0]
        return self._revision_sources(db, fact_id, revision)[0]

    @_serialized
    def count(self) -> int:
        db = self._reader()
        if db is None:
            return 0
        # (fact ids: a table that lost its key may hold one twice)
        # (NULL, which a key on fact_id allows, is one fact id as DISTINCT
        # and the pages count it; count(DISTINCT) would leave it out)
        twice = bool(ids_stored_twice(db))

        def counted(table: str) -> int:
            what = f"(SELECT DISTINCT fact_id FROM {table})" if twice else table
            return int(db.execute(f"SELECT count(*) FROM {what}").fetchone()[0])

        try:
            return counted("facts")
        except sqlite3.OperationalError as exc:
            if not defined_elsewhere(exc):
                raise
        # SQLite counts through the smallest index, which another application's
        # collation may order (an index of its own): the table itself, as the
        # listing reads it (before 2026-12-07 the table and --json were exit 5
        # where jsonl listed every fact)
        return counted("facts NOT INDEXED")

    @_serialized
    def list_facts(self, offset: int = 0, limit: int = 20) -> list[Fact]:
        """At most ``limit`` (clamped to 1..LIST_MAX) facts in id order from ``offset``."""
        if offset < 0:
            raise UsageError("offset must be 0 or more")
        limit = max(1, min(int(limit), LIST_MAX))
        db = self._reader()
        if db is None:
            return []
        # paged over the facts (a revision stored twice would repeat a fact
        # in a page of the joined rows and push another out of it)
        groups = _id_page(db, "", "LIMIT ? OFFSET ?", (limit, offset))
        # (asked of the table even where every id gave one row: a unique
        # index may hold once an id that the table holds twice)
        twice = ids_stored_twice(db) if groups else frozenset()
        return [self._fact_from_row(db, g[0], g, twice) for g in groups]

    @_serial_rows
    def iter_facts(self, *, batch: int = 500) -> Iterator[Fact]:
        """Every fact in id order, fetched ``batch`` at a time (constant memory)."""
        db = self._reader()
        if db is None:
            return
        after: tuple[str, tuple[Any, ...]] = ("", ())   # from the first id (NULL, numbers first)
        twice: frozenset[Any] | None = None
        while True:
            # a batch of fact ids (a batch of joined rows could end between
            # two rows of one id), after the last one as SQLite orders them
            groups = _id_page(db, after[0], "LIMIT ?", (*after[1], batch))
            if not groups:
                return
            if twice is None:
                twice = ids_stored_twice(db)     # (as list_facts asks it)
            for g in groups:
                self.check_open()       # (a batch read before close gives no row after it)
                yield self._fact_from_row(db, g[0], g, twice)
            after = _after(groups[-1][0][0])

    # ---- set-based reads (the evaluation engine, factview.evaluate_facts)

    def _session_filter(self, session_id: str | None, part: Part | Window | None = None
                        ) -> tuple[str, tuple[Any, ...]]:
        """The WHERE clause (and its arguments) of the whole-store reads over a
        table aliased ``f``: the facts with evidence in ``session_id`` when
        given, of ``part`` of the ids when given."""
        conds: list[str] = []
        args: tuple[Any, ...] = ()
        if session_id is not None:
            self._check_session_indexes(session_id)
            sub = "SELECT fact_id FROM provenance WHERE session_id = ?"
            args = (session_id,)
            if "source_refs" in self._tables:
                sub += " UNION SELECT fact_id FROM source_refs WHERE session_id = ?"
                args += (session_id,)
            # (the ids compared as Python compares them, whatever collation
            # the table declares: every reader's facts are the same ones)
            conds.append(f"f.fact_id COLLATE BINARY IN ({sub})")
        if part is not None:
            more, values = part_sql(part, "f.fact_id")
            conds += more
            args += values
        return ("WHERE " + " AND ".join(conds) + " ") if conds else "", args

    def _check_session_indexes(self, session_id: str) -> None:
        """StoreCorrupt unless the indexes by session of ``provenance`` and
        ``source_refs`` give as many rows of ``session_id`` as their tables
        (once per session id): the reads of one session's facts find them
        through those indexes, and an index that lost entries (or reads
        another index's b-tree) would leave facts out of them without a
        word.  One scan of each table."""
        if session_id in self._sessions_checked:
            return
        db = self._reader()
        if db is None:
            return
        for table in ("provenance", "source_refs"):
            if table not in self._tables:
                continue
            # (counted as the reads ask for the ids: through the index they use)
            (indexed,) = db.execute(f"SELECT count(fact_id) FROM {table} WHERE session_id = ?",
                                    (session_id,)).fetchone()
            (stored,) = db.execute(f"SELECT count(fact_id) FROM {table} NOT INDEXED "
                                   "WHERE session_id = ?", (session_id,)).fetchone()
            if indexed != stored:
                raise StoreCorrupt(
                    f"{self.path}: facts database damaged: the index of {table} by session "
                    f"gives {indexed} row(s) of session {session_id!r}, the table {stored} "
                    "(memctl validate reports it)")
        self._sessions_checked.add(session_id)

    # ---- one listing in two processes (factview's split listing)

    def split_bound(self, share: float, least: int) -> Any:
        """The fact id ``share`` of the way through the store's facts in
        SQLite's order (the first id of the second part), for work in two
        processes (:meth:`fork`): None unless this is a private snapshot
        (both processes read the same state) with ``least`` facts or more."""
        db = self._reader()
        if db is None or not self.snapshot or self._tmpdir is None or not hasattr(os, "fork"):
            return None
        try:
            n = db.execute("SELECT count(*) FROM facts").fetchone()[0]
            if n < least:
                return None
            row = db.execute("SELECT fact_id FROM facts ORDER BY fact_id COLLATE BINARY "
                             "LIMIT 1 OFFSET ?",
                             (int(n * share),)).fetchone()
        except sqlite3.Error:
            return None     # (a damaged index, say: one process, which reports it its way)
        return None if row is None or row[0] is None else row[0]

    @_serialized
    def page_window(self, start: int, stop: int, session_id: str | None = None
                    ) -> Window | None:
        """The facts ``start`` to ``stop`` (not included) of the listing (of
        the facts with evidence in ``session_id`` when given), in its order
        (the ids as SQLite orders them, ``COLLATE BINARY``, an id stored
        twice once), as a :data:`Window` for the reads that take a Part: a
        bounded page evaluates the sources of its own facts only
        (``factview.iter_fact_page``).  Its bounds are read from the table
        (``NOT INDEXED``, as the listing reads it: an index that disagrees
        with the table does not move the page).  None where a bound is not
        a text id (the caller then slices the whole listing, as before);
        a Window that holds no id when there is no fact at ``start``."""
        if not 0 <= start < stop:
            raise UsageError("a page is start < stop")
        db = self._reader()
        if db is None:
            return None

        def at(n: int, part: Part | None = None) -> tuple[Any] | None:
            # (the n-th id of ``part`` of the ids: the second bound is
            # counted from the first, which its part begins with, so the
            # sort is of the ids from there on, not of every id again)
            where, args = self._session_filter(session_id, part)
            row: tuple[Any] | None = db.execute(
                "SELECT f.fact_id FROM facts AS f NOT INDEXED " + where
                + "GROUP BY f.fact_id COLLATE BINARY "
                "ORDER BY f.fact_id COLLATE BINARY LIMIT 1 OFFSET ?", (*args, n)).fetchone()
            return row

        window: list[Part] = []
        if start:
            lo = at(start)
            if lo is None:
                return ((None, True),)      # (compared with NULL: no id)
            if type(lo[0]) is not str:
                return None
            window.append((lo[0], True))
        hi = at(stop - start, window[0]) if window else at(stop)
        if hi is not None:
            if type(hi[0]) is not str:
                return None
            window.append((hi[0], False))
        return tuple(window) if window else None

    def fork(self, child: Callable[[], int]) -> int:
        """Run ``child()`` in a forked process, whose exit status is its value
        (1 when it raises, or when anything before it fails); its pid here,
        recorded until :meth:`reap` (:meth:`close` kills and reaps a child
        still recorded).  This store's connections are closed before the
        fork and its read connection opened again on each side (SQLite's
        connections must not cross a fork); the child's standard streams
        are /dev/null, and the signals the caller handles in Python (an
        interrupt, say) have their default action there.  Only for a private
        snapshot with nothing running beside it (:meth:`may_fork`):
        UsageError otherwise; OSError when the system cannot fork."""
        import signal

        from .pools import end_with_parent

        if not self.may_fork():
            raise UsageError("fork: the fact store is not a private snapshot read alone")
        assert self._conn is not None
        self._threads = []                  # (ended: may_fork joined them)
        for db in [*self._siblings, self._conn]:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        self._siblings = []
        self._conn = None
        # no signal handled between the fork and the pid recorded (nor in
        # the child before its handlers are the default ones)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    end_with_parent(parent)
                    # the default action for the signals the caller's Python
                    # handles (its handlers are not the child's to run), an
                    # interrupt included unless the caller ignores it
                    for sig in signal.valid_signals():
                        with contextlib.suppress(OSError, ValueError, TypeError):
                            if callable(signal.getsignal(sig)):
                                signal.signal(sig, signal.SIG_DFL)
                    null = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                    self._children = []
                    self._snapshot_connection()
                    code = child()
                except BaseException:  # noqa: BLE001 - the parent does the work itself
                    pass
                finally:
                    os._exit(code)
            self._children.append(pid)
        finally:
            try:
                if self._conn is None:
                    self._snapshot_connection()
            except sqlite3.Error as exc:
                raise _db_error(self.path, exc) from exc
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return pid

    def reap(self, pid: int) -> bool:
        """Wait for the child :meth:`fork` started: whether it exited with
        status 0 (False when that cannot be known: SIGCHLD ignored)."""
        try:
            _pid, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = -1
        self._children.remove(pid)
        return status == 0

    def end_child(self, pid: int) -> None:
        """Kill and reap a child of :meth:`fork` not reaped yet (none: nothing).
        Killed only while it is still this process's child to wait for: a
        pid already reaped (an interrupt just after :meth:`reap`'s wait, a
        SIGCHLD handler that waits for any child) may be another process's."""
        import signal

        if pid not in self._children:
            return
        try:
            if os.waitpid(pid, os.WNOHANG) == (0, 0):   # still running
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.waitpid(pid, 0)
        except ChildProcessError:
            pass                                # reaped already: not ours to kill
        self._children.remove(pid)

    def _end_children(self) -> None:
        for pid in list(self._children):
            self.end_child(pid)

    def hold_file(self, fd: int) -> None:
        """Close ``fd`` (a listing's file in the private directory: a split
        listing's child's rows) with this store, unless :meth:`close_file`
        closed it first: a listing still read when the store closes ends
        then, its files too."""
        self._files.append(fd)

    def close_file(self, fd: int) -> None:
        """Close ``fd`` of :meth:`hold_file`, unless the store closed it already."""
        if fd in self._files:
            self._files.remove(fd)
            os.close(fd)

    def may_fork(self) -> bool:
        """Whether :meth:`fork` may fork now: a private snapshot, no listing
        started, no other thread (the work of :meth:`in_background` done),
        and SIGCHLD not ignored (the child could not be waited for)."""
        import signal

        if not (hasattr(os, "fork") and self._conn is not None and self.snapshot
                and self._tmpdir is not None and not self._closed and not self._listings
                and all(job.done for job in self._threads)
                and signal.getsignal(signal.SIGCHLD) != signal.SIG_IGN):
            return False
        for job in self._threads:   # (ended, not only done: no thread left)
            job.join()
        # (threads started outside ``threading``, by ``_thread`` or C code,
        # count too where the kernel says how many there are: pools.alone,
        # which lets a thread joined a moment ago leave the count first)
        from .pools import alone

        return alone()

    @property
    def private_dir(self) -> str | None:
        """The private directory of the snapshot read (removed by
        :meth:`close`); None when there is none."""
        return self._tmpdir

    def source_refs_by_session(self, session_id: str | None = None, *, part: Part | Window | None = None
                               ) -> Iterator[tuple[str, list[SourceRef]]]:
        """:meth:`stored_sources_by_session`'s references as SourceRefs."""
        for sid, group in self.stored_sources_by_session(session_id, part=part):
            yield sid, [SourceRef.of_checked(sid, seqs, digest) for seqs, digest in group]

    @_serial_rows
    def stored_sources_by_session(self, session_id: str | None = None, *, part: Part | Window | None = None
                                  ) -> Iterator[tuple[str, list[StoredSource]]]:
        """Every distinct well-formed SourceRef of every revision (of the facts
        with evidence in ``session_id`` when given), grouped by the session it
        cites, as its stored values (:data:`~lecode_memctl.core.sourceref.StoredSource`,
        checked as a SourceRef checks them: a malformed one is the revision's
        own problem, left out): one query, streamed in session order, one group at a time, a
        group at most ``GROUP_REFS`` references (a session cited more often
        comes in several consecutive groups, so memory does not follow the
        number of references into one session).  ``part``: only those of
        the facts of that part of the ids (:data:`Part`).

        Without ``session_id`` the rows are the table's, sorted by SQLite's
        sorter (``NOT INDEXED``), never read through the sessions' index:
        the listing reads the table, and an index that disagrees with it
        (one that lost entries, another index's b-tree under its name) left
        references unvalidated that the listing then called valid.  The
        sort runs on a second connection to the private snapshot, whose
        sorter spills to SQLite's temporary directory (:meth:`start_listing`),
        where there is one; otherwise on this connection (in memory for a
        read-only open; there too when the sort fails, a full temporary
        directory, say).  With ``session_id``, the facts of that session are
        found as the listing finds them (:meth:`_session_filter`), their
        references looked up by fact id as the listing looks them up
        (:func:`sources_by_key`: the table's values)."""
        db = self._reader()
        if db is None or "source_refs" not in self._tables:
            return
        where, args = self._session_filter(session_id, part)
        sibling = None
        try:
            if session_id is None:
                query = ("SELECT f.session_id, f.seqs, f.digest FROM source_refs f NOT INDEXED "
                         + where + "ORDER BY f.session_id")
                sibling = self._sibling()
                try:
                    cur = (sibling or db).execute(query, args)
                except sqlite3.Error:
                    if sibling is None:
                        raise
                    # the sort failed (a full temporary directory): sorted here,
                    # in memory, as the rows must still be the table's
                    cur = db.execute(query, args)
            else:
                cur = db.execute(f"SELECT f.session_id, f.seqs, f.digest FROM "
                                 f"{sources_by_key(db, 'f')} " + where + "ORDER BY f.session_id",
                                 args)
            yield from self._sources_grouped(cur)
        finally:
            if sibling is not None:
                self._let_go(sibling)

    @staticmethod
    def _sources_grouped(cur: sqlite3.Cursor) -> Iterator[tuple[str, list[StoredSource]]]:
        """:meth:`stored_sources_by_session`'s groups of the rows of ``cur``."""
        sid: str | None = None
        seen: set[tuple[str, str]] = set()
        group: list[StoredSource] = []
        # One int object per position of a session, shared by every long span
        # that cites it: a caller that holds all of a session's groups (the
        # audit's job) holds 8 bytes per position of such a span, not 36
        # (20,000 spans of 200 positions: 33 MB, not 123 MB).  A short span
        # keeps its own: sharing costs about 0.08 us a position (0.27 us against
        # 0.03 us for a span of 3), which a listing of short spans would pay.
        ints: dict[int, int] = {}
        for rsid, seqs, digest in _fetched(cur):
            if rsid != sid or len(group) >= GROUP_REFS:
                if group:
                    yield sid, group  # type: ignore[misc]
                if rsid != sid:
                    ints = {}
                sid, seen, group = rsid, set(), []
            key = (seqs, digest)
            if key in seen:
                continue
            seen.add(key)
            raw = plain_source(rsid, seqs, digest)     # (no object where the values are plain)
            if raw is not None:
                group.append((tuple(map(ints.setdefault, raw, raw)) if len(raw) > _SHARED_FROM
                              else raw, digest))
                continue
            try:
                ref = _ref_from_row(None, None, rsid, seqs, digest)
            except StoreCorrupt:
                continue      # the revision's own problem (Revision.source_error)
            group.append((ref.seqs, ref.digest))
        if group:
            yield sid, group  # type: ignore[misc]

    def iter_fact_revisions(self, session_id: str | None = None
                            ) -> Iterator[tuple[Fact, list[Revision]]]:
        """Every fact (of those with evidence in ``session_id`` when given) in
        id order with all its revisions, oldest first: the same values as
        :meth:`get` and :meth:`revisions`, read in a few queries instead of
        several per fact (:meth:`iter_fact_groups`).  A ``session_id`` that
        is no session id is a UsageError at the call, as
        :meth:`iter_fact_groups`'s."""
        # (a generator all the same: closing it lets the listing go)
        return (fact_from_group(group) for group in self.iter_fact_groups(session_id, bare=True))

    def iter_fact_groups(self, session_id: str | None = None, *,
                         bare: bool = False) -> Iterator[FactGroup]:
        """Every fact (of those with evidence in ``session_id`` when given) in
        id order as its stored values (:data:`FactGroup`): what
        :meth:`iter_fact_revisions` makes its objects of, for a caller that
        reads many facts and needs few objects (the listing).  A fact without
        any revision (a damaged database) raises StoreCorrupt where the order
        reaches it, as :meth:`get` does; with ``bare``, it is a group with no
        revisions (the audit reports it).  (:meth:`start_listing` starts the
        same reads early, to overlap other work.)

        A writer's groups are read through :meth:`one_state`'s view: one
        state of the database, which writes made meanwhile (this thread's,
        another's, another process's) do not change.  Read on the writer's
        own connection, a listing half read kept SQLite's read snapshot
        open there, and once another process had committed, every write of
        the store was StoreBusy at once until the listing ended.

        A ``session_id`` that is no session id (``check_session_id``: not
        text, a lone surrogate, a path) is a UsageError at the call, as
        ``list_facts(session_id=...)``'s (before 2026-12-07 a raw
        UnicodeEncodeError or OverflowError at the first row)."""
        self.check_open()
        if session_id is not None:
            check_session_id(session_id)
        if self.readonly:
            return self._groups_read_only(session_id, bare)
        return self._groups_of_one_state(session_id, bare)

    def _groups_read_only(self, session_id: str | None, bare: bool) -> Iterator[FactGroup]:
        # (the listing starts at the first row asked for: an iterator made and
        # left unread holds no connection, thread or listing; one left half
        # read lets them go when it is closed or collected, FactListing.groups)
        # (each row given while the store is open: no lock here, _lock_free;
        # an error of SQLite's met on the way typed once, nothing per row)
        try:
            yield from self._each_held(self.start_listing(session_id).groups(bare=bare))
        except sqlite3.Error as exc:
            raise _typed(exc) from exc

    def _groups_of_one_state(self, session_id: str | None, bare: bool) -> Iterator[FactGroup]:
        try:
            with self.one_state() as state:
                yield from state.start_listing(session_id).groups(bare=bare)
        except sqlite3.Error as exc:
            raise _typed(exc) from exc

    @contextlib.contextmanager
    def one_state(self) -> Iterator[FactStore]:
        """This store as one state of its database, for reads that must agree
        with each other (a whole-store evaluation, then the listing of what
        it evaluated: ``factview``).  A store opened read-only is one state
        already (a private snapshot, or an immutable open): itself.  A
        writer's connection reads each statement in a transaction of its
        own, and a fact another process committed between the evaluation and
        the listing was listed valid, its source never validated; for a
        writer this is a view of the store through a second connection, read
        only, in one read transaction from its first read until the view is
        left (closed then: a view left by an error, too).  The writer's own
        connection holds no transaction meanwhile: it writes as before, and
        the view does not see what it writes."""
        view = self._state_view()
        if view is None:
            yield self
            return
        try:
            yield view
        finally:
            view.close()

    @_serialized
    def _state_view(self) -> FactStore | None:
        """:meth:`one_state`'s view of a writer's store, or None: read itself."""
        if not self._closed:
            self._created_since()
        if self._pending_migration and not self._closed:
            self._migrated_elsewhere()
        if self.readonly or self._closed or self._conn is None or not self._tables:
            return None
        return self._view()

    @_serialized
    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` holding the store's lock (a writer's)."""
        return fn(*args)

    def _each_held(self, rows: Iterator[T]) -> Iterator[T]:
        """``rows``, each read (the reads on the writer's connection before
        it) holding the store's lock, which is let go before it is given (a
        read-only open's: no lock, :func:`_serialized`); once the store is
        closed, the next raises UsageError (:meth:`_next_open`)."""
        try:
            while True:
                row = self._call(self._next_open, rows)
                if row is _END:
                    return
                yield row
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()

    def _next_open(self, rows: Iterator[T]) -> T:
        """``next(rows, _END)``, or UsageError once the store is closed (the
        lock held: a row read ahead is not given after close)."""
        self.check_open()
        return next(rows, _END)

    def _view(self) -> FactStore:
        """:meth:`one_state`'s view of a writer's store."""
        # the file the writer opened, where it opened it (its path taken
        # absolute then: not another one after a chdir, a move or a removal)
        where, dev, ino = self._opened or (os.path.abspath(self.path), -1, -1)
        st = lstat_regular(where)
        if st is None or (st.st_dev, st.st_ino) != (dev, ino):
            raise NotFound(f"{self.path}: facts database disappeared (removed, moved or "
                           "replaced since it was opened)")
        for sidecar in ("-wal", "-shm"):
            # (SQLite follows symbolic links: none here, as when the writer opened)
            lstat_regular(where + sidecar)
        # (a store of this one's class, read-only: no write goes through it;
        # the sessions whose indexes were checked are this store's).  Made
        # first, so that the connection is the view's as it is made: a view
        # an interrupt drops closes it (ClosesOnExit)
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.__dict__.update(_conn=None, _siblings=[], _threads=[], _listings=[], _children=[], _files=[],
                             _pending_migration=False, _tmpdir=None, snapshot=False,
                             _closed=False, readonly=True, _opened=None,
                             _views=weakref.WeakSet(),
                             # its own lock: the writer's close closes it
                             # (_close_now) once its call in progress is over
                             _lock_free=False, _lock=_thread.RLock())
        # mode=ro: the view never creates a database
        db = self._connect(Path(where).as_uri() + "?mode=ro", uri=True,
                           keep=functools.partial(setattr, view, "_conn"))
        with self._closed_on_failure(db.close):
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            db.execute("PRAGMA query_only = 1")
            db.execute("BEGIN")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()   # the state, from here
            # (its schema as this state has it: another process may have
            # migrated the file since the writer read its own)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = _tables(db)
        view.__dict__.update(_tables=tables, schema_version=version,
                             needs_migration=version < SCHEMA_VERSION and bool(tables))
        self._views.add(view)
        return view

    @_serialized
    def start_listing(self, session_id: str | None = None, *, part: Part | Window | None = None
                      ) -> FactListing:
        """Start reading :meth:`iter_fact_groups`' rows now; ``.groups()`` of
        the result yields them.  For the whole store of a private snapshot,
        the tables are read in one sequential scan each, sorted by SQLite's
        sorter (``NOT INDEXED``), on a second connection to the snapshot, by
        a thread: SQLite sorts without Python's lock while the caller goes on
        (the listing validates the sources meanwhile).  The query in id
        order through the indexes reads one random page at a time: about 3x
        the time at 100,000 facts, 4x more per fact at 1,000,000.  The sorter
        spills to temporary files past its cache: this happens only where
        SQLite's temporary directory is outside the store (otherwise the
        indexed query, whose memory does not grow either).  ``part``: the
        facts of that part of the ids only (:data:`Part`)."""
        db = self._reader()
        listing = FactListing(self.path)
        if db is None:
            return listing
        listing.twice_of = ((lambda: ids_stored_twice(db)) if self._lock_free
                            else (lambda: self._call(ids_stored_twice, db)))
        where, args = self._session_filter(session_id, part)
        listing.prov = self._legacy_provenance(db, where, args)
        sibling = self._sibling() if session_id is None else None
        if sibling is None:
            joined = self._joined_rows(db, where, args)
            listing.joined = joined if self._lock_free else self._each_held(joined)
            return listing
        only = ("WHERE " + " AND ".join(part_sql(part, "fact_id")[0]) + " "
                if part is not None else "")
        # (ordered as Python's merge compares the ids, whatever collation a
        # table declares: _merged_groups)
        queries = ["SELECT fact_id, revision, created, updated FROM facts NOT INDEXED "
                   + only + "ORDER BY fact_id COLLATE BINARY",
                   "SELECT fact_id, revision, text, created FROM revisions NOT INDEXED "
                   + only + "ORDER BY fact_id COLLATE BINARY, revision"]
        if "source_refs" in self._tables:
            queries.append("SELECT fact_id, revision, session_id, seqs, digest FROM source_refs "
                           "NOT INDEXED " + only + "ORDER BY fact_id COLLATE BINARY, revision")
        listing.fallback = lambda: self._joined_rows(db, where, args)
        # recorded before its thread starts: close() must find (and wait for)
        # a thread whose start a Ctrl-C interrupted
        self._listings.append(listing)
        listing.release = lambda: self._let_go(sibling, listing)
        listing.start(sibling, queries, args if part is not None else ())
        return listing

    def _let_go(self, db: sqlite3.Connection, listing: FactListing | None = None) -> None:
        """A sibling connection (:meth:`_sibling`) whose reads are over, and
        the listing whose sorts it ran, let go now, not kept until
        :meth:`close` (which closes what is still held).  The listing's
        thread is over (its groups waited for it)."""
        if listing is not None:
            listing.end()
            if listing in self._listings:
                self._listings.remove(listing)
        if any(d is db for d in self._siblings):
            self._siblings[:] = [d for d in self._siblings if d is not db]
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _legacy_provenance(self, db: sqlite3.Connection, where: str, args: tuple[Any, ...]
                           ) -> ProvRows | LegacyProvenance:
        """The legacy provenance rows of the listing's facts (``where``), for
        its revisions to take (:data:`ProvRows`): none (an empty dict, as
        nearly every store has), or the query's rows read as the listing
        reaches them (:class:`LegacyProvenance`), so that memory follows one
        fact's rows, not the table's.  The rows are the query's that filled
        the dict, in its order (by the columns' own collations, as before:
        the rows of one key in the same order); where the table declares a
        collation (none but a crafted or damaged one does), its ids may not
        come in the listing's order, and the rows are all read into the
        dict now, as they were; so they are on a writer's own connection,
        and on a view of one (read outside the view's lock, as the listing
        reaches them, a row could be fetched while another thread closes
        the writer and the view with it)."""
        query = ("SELECT f.fact_id, f.revision, f.session_id, f.seq FROM provenance f " + where
                 + "ORDER BY f.fact_id, f.revision, f.session_id, f.seq")
        cur = db.execute(query, args)
        first = cur.fetchone()
        if first is None:
            return {}
        table = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' "
                           "AND name = 'provenance'").fetchone()
        # (a writer's own connection: a statement left active there would
        # hold its read snapshot while the listing is not read to its end,
        # and its writes would then be StoreBusy once another process
        # commits -- its listings go through one_state's view, read only)
        if (not self._lock_free or table is None or type(table[0]) is not str
                or "COLLATE" in table[0].upper()):
            prov: ProvRows = {}
            _add_row(prov, first)
            for row in cur:
                _add_row(prov, row)
            return prov
        # every row read once now, as the dict read them, none held: a damaged
        # page of the table (or of the index the query reads) fails the
        # listing before it starts, as it did, not halfway through its output
        # (0.4 s at 800,000 rows, read in fetches; the dict took 1.7 s)
        while cur.fetchmany(2000):
            pass
        return LegacyProvenance(_fetched(db.execute(query, args)),
                                lambda: _fetched(db.execute(query, args)))

    def in_background(self, name: str, work: Callable[[sqlite3.Connection], T]
                      ) -> Callable[[], T] | None:
        """``work`` started now, in a thread named ``name``, on another read
        connection to the private snapshot of a store opened with
        :meth:`open_readonly` (SQLite works without Python's lock while the
        caller goes on: the audit's ``integrity_check``); the callable
        returned waits for it and returns its value or raises its error.
        None when there is no snapshot or SQLite's temporary directory may be
        in the store (see :meth:`start_listing`).  :meth:`close` waits for
        the thread before it closes the connection: an interrupt or an error
        in the caller meanwhile does not close it under SQLite."""
        if not self.readonly:
            raise UsageError("in_background is for a store opened read-only")
        conn = self._sibling()
        if conn is None:
            return None
        job = Background(name, lambda: work(conn), conn.interrupt)
        self._threads.append(job)       # (before it starts: see start_listing)
        job.start()
        return job.result

    def wait_background(self) -> None:
        """Until the work :meth:`in_background` started is done (before a
        fork: no child inherits a thread inside SQLite), through Ctrl-C
        (:meth:`Background.wait`)."""
        for job in self._threads:
            job.join()          # (ended, not only done: a fork may follow)
        self._threads = []

    def _sibling(self) -> sqlite3.Connection | None:
        """A second read connection to this store's private snapshot, whose
        sorter may spill to SQLite's temporary directory: None when there is
        no snapshot, or that directory is (or may be) inside the store."""
        if not self.snapshot or self._tmpdir is None or not _sqlite_tempdir_outside(self.path.parent):
            return None
        # (recorded as it is made: close() closes it, even when an interrupt
        # lands before this returns)
        db = self._connect(os.path.join(self._tmpdir, "facts.sqlite3"), uri=False,
                           keep=self._siblings.append)
        db.execute("PRAGMA query_only = 1")
        # each of the three sorts keeps this much in memory before it spills
        # (SQLite's sorter follows the page cache's size; 2 MiB by default)
        db.execute("PRAGMA cache_size = -1024")
        return db

    def _joined_rows(self, db: sqlite3.Connection, where: str, args: tuple[Any, ...]
                     ) -> Iterator[tuple[Any, ...]]:
        """The listing's rows of the facts ``where`` selects, in (fact id,
        revision) order: one joined query driven by the revisions' index, each
        fact's row and source looked up by key; ``(fact_id, revision, created,
        updated)`` for a fact without any revision, where the order reaches it."""
        refs = ("s.session_id, s.seqs, s.digest" if "source_refs" in self._tables
                else "NULL, NULL, NULL")
        join = ""
        if "source_refs" in self._tables:
            join = (f"LEFT JOIN {sources_by_key(db, 's')} "
                    "ON s.fact_id = r.fact_id COLLATE BINARY AND s.revision = r.revision ")
        # the main query is driven by the revisions, which do not see a fact
        # without any: those are read first (ids compared, and ordered, as
        # Python compares them, whatever collation a table declares)
        bare = collections.deque(db.execute(
            "SELECT f.fact_id, f.revision, f.created, f.updated FROM facts f "
            + (where + "AND " if where else "WHERE ")
            + "NOT EXISTS (SELECT 1 FROM revisions r WHERE r.fact_id = f.fact_id COLLATE BINARY) "
            "ORDER BY f.fact_id COLLATE BINARY", args))
        cur = db.execute(
            "SELECT r.fact_id, f.revision, f.created, f.updated, r.revision, r.text, r.created, "
            f"{refs} FROM revisions r JOIN facts f ON f.fact_id = r.fact_id COLLATE BINARY "
            f"{join}" + where + "ORDER BY r.fact_id COLLATE BINARY, r.revision", args)
        last = None
        for row in itertools.chain.from_iterable(_text_batches(cur, 5)):
            if bare and row[0] != last:
                while bare and _sql_lt(bare[0][0], row[0]):
                    yield bare.popleft()
            last = row[0]
            yield row
        yield from bare

    @_serialized
    def fact_ids(self, prefix: str = "", limit: int = 200) -> list[str]:
        db = self._reader()
        if db is None:
            return []
        return [r[0] for r in db.execute(
            "SELECT fact_id FROM facts WHERE fact_id >= ? AND fact_id < ? ORDER BY fact_id LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit))]

    @_serialized
    def ids_with_evidence_in(self, session_id: str) -> list[str]:
        """Ids (sorted) of facts any of whose revisions' evidence is in the session."""
        db = self._reader()
        if db is None:
            return []
        self._check_session_indexes(session_id)
        ids = {r[0] for r in db.execute("SELECT DISTINCT fact_id FROM provenance "
                                        "WHERE session_id = ?", (session_id,))}
        if "source_refs" in self._tables:
            ids.update(r[0] for r in db.execute("SELECT DISTINCT fact_id FROM source_refs "
                                                "WHERE session_id = ?", (session_id,)))
        return sorted(ids, key=_sql_key)     # (a damaged id may be a BLOB, a number or NULL)

    @_serialized
    def search(self, text: str, limit: int = SEARCH_DEFAULT) -> list[Fact]:
        """Facts whose current text contains ``text`` literally (case-insensitive
        for ASCII; no wildcards, no regex).  Administrative, unverified."""
        if not isinstance(text, str) or not text:
            raise UsageError("search text is empty")
        limit = max(1, min(int(limit), LIST_MAX))
        db = self._reader()
        if db is None:
            return []
        rows = db.execute(self._FACT_SELECT + "WHERE instr(lower(r.text), lower(?)) > 0 "
                          "ORDER BY f.fact_id LIMIT ?", (text, limit)).fetchall()
        return [self._fact_from_row(db, r) for r in rows]

    @_serialized
    def facts_using(self, positions: Mapping[str, Iterable[int]],
                    exclude_fact: str | None = None) -> list[str]:
        """Ids of facts any of whose revisions' evidence touches one of the positions."""
        db = self._reader()
        if db is None:
            return []
        return self._facts_using(db, positions, exclude_fact)

    def _facts_using(self, db: sqlite3.Connection, positions: Mapping[str, Iterable[int]],
                     exclude_fact: str | None = None,
                     sources: dict[str, dict[int, set[Any]]] | None = None,
                     exclude_stored: Any = None,
                     exclude_keys: frozenset[Any] | None = None) -> list[str]:
        """:meth:`facts_using` on ``db``.  ``sources``: session id -> seq ->
        the facts whose ``source_refs`` rows cite it, filled as read: each
        session's rows read once however many calls share it
        (:meth:`plan_forgets`), and each call looks up its own positions.

        A row whose seqs do not parse (a table that lost its NOT NULLs:
        NULL; not JSON; not a list of positions) names no position, so it
        shares none: its fact is ``hidden`` (``invalid_ref``) before and
        after the forget, which leaves the row as it is.  Before 2026-12-07
        such a row of ANY fact citing the session made the forget's plan
        (``forget --dry-run``, the interactive ``forget``'s preview,
        ``redact``'s plan) exit 5, while the forget itself went through.

        Each id is given as the listing gives it (:func:`row_text`: a
        damaged row's BLOB id decoded; before 2026-12-07 a BLOB among the
        texts made the sort a TypeError, exit 70), the ids sorted.
        ``exclude_stored``: the forgotten fact's id as stored (a forget by
        it, ``redact``'s): only that value is left out, and another fact
        whose id decodes to the same text is named."""
        hit: set[Any] = set()
        for session_id, seqs in positions.items():
            wanted = set(seqs)
            if not wanted:
                continue
            self._check_session_indexes(session_id)
            if "source_refs" in self._tables:
                by_seq = None if sources is None else sources.get(session_id)
                if by_seq is None:
                    by_seq = {}
                    for fid, raw in db.execute("SELECT fact_id, seqs FROM source_refs "
                                               "WHERE session_id = ?", (session_id,)):
                        try:
                            cited = _seqs_from_json(raw, f"source of {fid}")
                        except StoreCorrupt:
                            continue    # (no position: see above)
                        for seq in cited:
                            by_seq.setdefault(seq, set()).add(fid)
                    if sources is not None:
                        sources[session_id] = by_seq
                for seq in wanted:
                    hit.update(by_seq.get(seq, ()))
            for seq in wanted:
                for (fid,) in db.execute("SELECT DISTINCT fact_id FROM provenance "
                                         "WHERE session_id = ? AND seq = ?", (session_id, seq)):
                    hit.add(fid)
        # (the forgotten fact left out once the ids are text: a BLOB copy of
        # its own id is itself, not another fact)
        if exclude_stored is not None:
            skip = {stored_id_key(exclude_stored)} | (exclude_keys or frozenset())
            return sorted({row_text(fid) for fid in hit if stored_id_key(fid) not in skip})
        return sorted({row_text(fid) for fid in hit} - {exclude_fact or ""})

    # ---- low-level writes (unverified storage; exclusions still enforced) --

    def _insert_revision(self, db: sqlite3.Connection, fact_id: str, revision: int, text: str,
                         now: str, ref: SourceRef | None,
                         provenance: Sequence[Provenance]) -> None:
        db.execute("INSERT INTO revisions (fact_id, revision, text, created) VALUES (?, ?, ?, ?)",
                   (fact_id, revision, text, now))
        for p in provenance:
            for seq in sorted(set(p.seqs)):
                db.execute("INSERT OR IGNORE INTO provenance (fact_id, revision, session_id, seq) "
                           "VALUES (?, ?, ?, ?)", (fact_id, revision, p.session_id, seq))
        if ref is not None:
            db.execute("INSERT INTO source_refs (fact_id, revision, session_id, seqs, digest) "
                       "VALUES (?, ?, ?, ?, ?)",
                       (fact_id, revision, ref.session_id, orjson.dumps(list(ref.seqs)).decode(),
                        ref.digest))

    @staticmethod
    def _positions(ref: SourceRef | None, provenance: Sequence[Provenance]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        if ref is not None:
            out.setdefault(ref.session_id, set()).update(ref.seqs)
        for p in provenance:
            out.setdefault(p.session_id, set()).update(p.seqs)
        return out

    @staticmethod
    def _check_provenance(provenance: Iterable[Provenance]) -> list[Provenance]:
        out = []
        for p in provenance:
            if not isinstance(p, Provenance):
                raise UsageError(f"provenance is a list of Provenance, not of {type(p).__name__}")
            check_session_id(p.session_id)
            if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in p.seqs):
                raise UsageError("provenance positions must be non-negative integers")
            if any(s > MAX_POSITION for s in p.seqs):
                raise UsageError(_too_large("a provenance position"))
            out.append(p)
        return out

    @_ends_its_transaction
    def add(self, text: str, *, provenance: Iterable[Provenance] = (),
            ref: SourceRef | None = None, expected_generation: int | None = None) -> RememberResult:
        """Store a fact without validating its evidence (unverified storage).

        The id is derived from the text and ``ref``; adding the same fact again
        returns it unchanged.  Excluded evidence is refused (Conflict), as is
        the id of a forgotten fact."""
        self._guard_write()
        from .factresults import RememberResult

        _check_expected("expected_generation", expected_generation, optional=True)
        text = _check_text(text)
        _check_ref(ref, "add", optional=True)
        prov = self._check_provenance(provenance)
        fact_id = fact_id_for(text, ref)
        with self._txn() as db:
            self._check_generation(db, expected_generation)
            self._check_not_excluded(db, self._positions(ref, prov))
            existing = db.execute(self._FACT_SELECT + "WHERE f.fact_id = ?", (fact_id,)).fetchone()
            if existing:
                return RememberResult(self._fact_from_row(db, existing), created=False)
            if db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?", (fact_id,)).fetchone():
                raise Conflict(f"fact {fact_id} was forgotten; its id is retired")
            now = _now()
            db.execute("INSERT INTO facts (fact_id, revision, created, updated) VALUES (?, 1, ?, ?)",
                       (fact_id, now, now))
            self._insert_revision(db, fact_id, 1, text, now, ref, prov)
            fact = Fact(fact_id, 1, text, now, now, ref, tuple(prov))
        return RememberResult(fact, created=True)

    def revise(self, fact_id: str, text: str, *, expected_revision: int,
               provenance: Iterable[Provenance] = (), ref: SourceRef | None = None,
               expected_generation: int | None = None) -> Fact:
        """Append a revision without validating its evidence (unverified storage).
        ``expected_revision`` and ``expected_generation`` are checked inside the
        transaction (Conflict when stale); excluded evidence is refused."""
        return self._revise(fact_id, text, expected_revision=expected_revision,
                            provenance=provenance, ref=ref,
                            expected_generation=expected_generation)

    @_ends_its_transaction
    def _revise(self, fact_id: str, text: str, *, expected_revision: int,
                provenance: Iterable[Provenance] = (), ref: SourceRef | None = None,
                expected_generation: int | None = None,
                in_txn: Callable[[sqlite3.Connection], None] | None = None) -> Fact:
        """:meth:`revise`; ``in_txn`` runs inside the transaction, after the
        revision and generation checks and before anything is written."""
        self._guard_write()
        _check_expected("expected_revision", expected_revision, optional=False)
        _check_expected("expected_generation", expected_generation, optional=True)
        check_fact_id(fact_id)
        text = _check_text(text)
        _check_ref(ref, "revise", optional=True)
        prov = self._check_provenance(provenance)
        self._require_database(fact_id)
        with self._txn() as db:
            rows = db.execute("SELECT revision, created FROM facts WHERE fact_id = ?",
                              (fact_id,)).fetchall()
            if not rows:
                if db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?", (fact_id,)).fetchone():
                    raise NotFound(f"fact {fact_id} was forgotten")
                raise self._missing(db, fact_id)
            if len(rows) > 1:
                raise StoreCorrupt(f"facts database: fact {fact_id} has {len(rows)} rows in facts "
                                   "(the table lost its primary key): which is the fact is not "
                                   "known, and nothing is revised")
            current, created = rows[0]
            if db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?", (fact_id,)).fetchone():
                # (its rows stored again after its forget: db.forgotten_fact_present)
                raise Conflict(f"fact {fact_id} was forgotten; its id is retired (its rows were "
                               f"stored again after the forget: 'memctl forget {fact_id}' "
                               "deletes them), and nothing is revised")
            if type(current) is not int:
                # no revision number (a real or text where the column lost its
                # affinity): the readers say it names no row; nothing to revise
                raise StoreCorrupt(f"facts database: the current revision of fact {fact_id} is "
                                   f"stored as {_stored_kind(current)} ({current!r}), not an "
                                   "integer: it names no revision")
            if current != expected_revision:
                raise Conflict(f"stale revision for fact {fact_id}: expected {expected_revision}, "
                               f"current is {current}")
            self._check_generation(db, expected_generation)
            if in_txn is not None:
                in_txn(db)
            self._check_not_excluded(db, self._positions(ref, prov))
            now = _now()
            new = current + 1
            if db.execute("SELECT 1 FROM revisions WHERE fact_id = ? AND revision = ?",
                          (fact_id, new)).fetchone():
                raise revision_taken(fact_id, current)
            self._insert_revision(db, fact_id, new, text, now, ref, prov)
            db.execute("UPDATE facts SET revision = ?, updated = ? WHERE fact_id = ?",
                       (new, now, fact_id))
        return Fact(fact_id, new, text, created, now, ref, tuple(prov))

    @_ends_its_transaction
    def attach_source(self, fact_id: str, revision: int, ref: SourceRef, *,
                      sessions: SessionReader | None = None, project_root: Any = None,
                      purpose: str = "working") -> bool:
        """Attach ``ref`` once to its revision.  With ``sessions`` the reference
        is validated first (it must be ``valid``).  Excluded evidence, a
        different ref already attached, or an unknown revision is refused.
        Returns True when attached, False when that exact ref was already there."""
        self._guard_write()
        check_fact_id(fact_id)
        _check_ref(ref, "attach_source")
        self._require_database(fact_id)
        seen = None
        if sessions is not None:
            seen = self._validate(ref, sessions, project_root, purpose)
        with self._txn() as db:
            if not db.execute("SELECT 1 FROM revisions WHERE fact_id = ? AND revision = ?",
                              (fact_id, revision)).fetchone():
                raise NotFound(f"fact {fact_id} has no revision {revision}")
            if sessions is not None and seen is not None:
                self._revalidate(db, seen, ref, sessions, project_root, purpose)
            self._check_not_excluded(db, {ref.session_id: ref.seqs})
            row = db.execute("SELECT session_id, seqs, digest FROM source_refs "
                             "WHERE fact_id = ? AND revision = ?", (fact_id, revision)).fetchone()
            if row is not None:
                if _ref_from_row(fact_id, revision, *row) == ref:
                    return False
                raise Conflict(f"fact {fact_id} revision {revision} already has a different "
                               "source; a source is attached once")
            db.execute("INSERT INTO source_refs (fact_id, revision, session_id, seqs, digest) "
                       "VALUES (?, ?, ?, ?, ?)",
                       (fact_id, revision, ref.session_id, orjson.dumps(list(ref.seqs)).decode(),
                        ref.digest))
        return True

    def _guard_write(self) -> None:
        """:attr:`write_guard`, when there is one (a disabled project's
        memory: UsageError, nothing written)."""
        if self.write_guard is not None:
            self.write_guard()

    # ---- verified writes -------------------------------------------------

    def _validate(self, ref: SourceRef, sessions: SessionReader, project_root: Any,
                  purpose: str) -> int:
        """Validate ``ref`` through ``sessions`` (Conflict unless valid) and
        return the generation read just before: the validation saw it or a
        later one.  The write transaction passes it to :meth:`_revalidate`."""
        if project_root is not None and hasattr(sessions, "bind_facts"):
            sessions.bind_facts(project_root, self)
        seen = self.generation()
        self._check_valid(ref, sessions, purpose)
        return seen

    @staticmethod
    def _check_valid(ref: SourceRef, sessions: SessionReader, purpose: str) -> None:
        st = sessions.validate_source(ref, purpose=purpose)
        if not st.ok:
            raise Conflict(f"evidence {ref.label()} is not valid: {st.status} ({st.reason})")

    def _revalidate(self, db: sqlite3.Connection, seen: int, ref: SourceRef,
                    sessions: SessionReader, project_root: Any, purpose: str) -> None:
        """Inside the write transaction: validate ``ref`` again, always
        (Conflict unless valid, as the first validation refuses it).  The
        transaction holds the write lock, so no forget can commit before
        this one does; an undo, redo or clear (a JSONL append, outside any
        SQLite transaction), a source edit or deletion, or a forget that
        committed since the first validation (``seen``: the generation it
        read) is seen here.  Before 2026-12-07 the ref was validated again
        only when the generation had moved, so an undo landing between the
        two was stored as a fact, created and already hidden (the reference
        design: "generation and source version are checked again inside
        the FactStore.remember transaction")."""
        del seen, db        # (the generation is read again by the validation itself)
        self._check_valid(ref, sessions, purpose)

    @_ends_its_transaction
    def remember(self, text: str, ref: SourceRef, *, sessions: SessionReader, project_root: Any = None,
                 deduplicate: bool = False,
                 expected_generation: int | None = None) -> RememberResult:
        """Create a fact with a validated SourceRef, atomically.

        The ref is validated (purpose ``working``) through ``sessions``;
        inside the transaction that inserts the fact, its first revision and
        its source together, ``expected_generation`` (when given) is checked,
        the ref is validated again (a forget, undo, clear or edit of the
        transcript meanwhile: Conflict if that hid or changed the evidence),
        and exclusions are checked.  The id derives from text + ref, so a retry returns
        the same fact.  ``deduplicate=True`` returns an existing fact whose any
        revision's case-folded, whitespace-collapsed text equals this one,
        without attaching the new source or reverting it."""
        self._guard_write()
        from .factresults import RememberResult

        _check_expected("expected_generation", expected_generation, optional=True)
        text = _check_text(text)
        _check_ref(ref, "remember")
        seen = self._validate(ref, sessions, project_root, "working")
        fact_id = fact_id_for(text, ref)
        with self._txn() as db:
            self._check_generation(db, expected_generation)
            self._revalidate(db, seen, ref, sessions, project_root, "working")
            self._check_not_excluded(db, {ref.session_id: ref.seqs})
            existing = db.execute(self._FACT_SELECT + "WHERE f.fact_id = ?", (fact_id,)).fetchone()
            if existing:
                return RememberResult(self._fact_from_row(db, existing), created=False)
            if db.execute("SELECT 1 FROM forgotten WHERE fact_id = ?", (fact_id,)).fetchone():
                raise Conflict(f"fact {fact_id} was forgotten; its id is retired")
            if deduplicate:
                key = normalize_text(text)
                for fid, rtext in db.execute("SELECT fact_id, text FROM revisions "
                                             "ORDER BY fact_id, revision"):
                    if normalize_text(rtext) == key:
                        row = db.execute(self._FACT_SELECT + "WHERE f.fact_id = ?",
                                         (fid,)).fetchone()
                        return RememberResult(self._fact_from_row(db, row), created=False,
                                              deduplicated=True)
            now = _now()
            db.execute("INSERT INTO facts (fact_id, revision, created, updated) VALUES (?, 1, ?, ?)",
                       (fact_id, now, now))
            self._insert_revision(db, fact_id, 1, text, now, ref, ())
            fact = Fact(fact_id, 1, text, now, now, ref, ())
        return RememberResult(fact, created=True)

    def correct(self, fact_id: str, text: str, *, expected_revision: int, ref: SourceRef,
                sessions: SessionReader, project_root: Any = None,
                expected_generation: int | None = None) -> Fact:
        """Append a revision justified by new, validated evidence.

        The evidence must hold persisted user or assistant text (tool output
        alone is refused).  Revision and generation are checked inside the
        transaction: stale -> Conflict (exit 4), nothing changed.  As in
        :meth:`remember`, the ref is validated again inside the transaction
        (Conflict, nothing changed, when it no longer validates).  A
        revision or generation that is not an int is UsageError (exit 2)."""
        self._guard_write()
        _check_expected("expected_revision", expected_revision, optional=False)
        _check_expected("expected_generation", expected_generation, optional=True)
        check_fact_id(fact_id)
        text = _check_text(text)
        _check_ref(ref, "correct")
        seen = self._validate(ref, sessions, project_root, "working")
        # (the digest pins the records: valid again means the same records,
        # so the authored-text check below still holds then)
        require_authored_text(sessions.records(ref.session_id, ref.start, ref.end), ref)
        return self._revise(fact_id, text, expected_revision=expected_revision, ref=ref,
                            expected_generation=expected_generation,
                            in_txn=lambda db: self._revalidate(db, seen, ref, sessions,
                                                               project_root, "working"))

    # ---- forget ----------------------------------------------------------

    def _evidence_positions(self, db: sqlite3.Connection, fact_id: Any,
                            unexcluded: list[tuple[int | None, str]] | None = None
                            ) -> dict[str, set[int]]:
        """The positions of every revision's evidence of ``fact_id``, read
        fail-closed (a forget only protects: every position that can be
        read is excluded).  A session id stored as a BLOB that is UTF-8
        names the session its text names (as the listing shows it); of
        seqs that hold some positions and some other values, the positions
        are taken.  What names no position -- a session id that is no
        text, seqs NULL in a table that lost its NOT NULLs, not JSON, not a
        list, a member that is no position -- is appended to
        ``unexcluded`` as (revision, reason) (in the order of the
        revisions), and the forget goes on without it; so are a legacy
        provenance row's.  Before 2026-12-07 such a row of the fact itself
        made its plan and its forget exit 5: the fact, a credential in its
        text say, could not be forgotten or redacted."""
        out: dict[str, set[int]] = {}
        bad: set[tuple[int | None, str]] = set()
        ph, arg = id_match(fact_id)     # (the id as stored: see forget's ``stored``)
        if "source_refs" in self._tables:
            for rev, sid, raw, digest in db.execute(
                    "SELECT revision, session_id, seqs, digest FROM source_refs "
                    f"WHERE fact_id = {ph}", (arg,)):
                if not has_source(sid, raw, digest):
                    continue    # (all NULL: no source row to the readers either)
                where = rev if type(rev) is int else None
                session = _readable_session_id(sid)
                if session is None:
                    bad.add((where, f"the session id is stored as {_stored_kind(sid)}"))
                    continue
                if type(sid) is int:
                    bad.add((where, "the " + _INTEGER_SESSION.format(session)))
                if raw is None:
                    bad.add((where, "seqs is NULL"))
                    continue
                positions, why = _readable_positions(raw)
                if why is not None:
                    bad.add((where, why))
                if positions:
                    out.setdefault(session, set()).update(positions)
        for rev, sid, seq in db.execute(
                f"SELECT revision, session_id, seq FROM provenance WHERE fact_id = {ph}",
                (arg,)):
            where = rev if type(rev) is int else None
            session = _readable_session_id(sid)
            if session is None:
                bad.add((where, "a legacy provenance row's session id is stored as "
                                f"{_stored_kind(sid)}"))
            elif type(seq) is not int or not 0 <= seq <= MAX_POSITION:
                shown = f" {seq}" if type(seq) is int else ""
                bad.add((where, f"a legacy provenance position in session {session!r} is "
                                f"{_stored_kind(seq)}{shown}, not a position"))
            else:
                out.setdefault(session, set()).add(seq)
                if type(sid) is int:
                    bad.add((where, "a legacy provenance row's "
                                    + _INTEGER_SESSION.format(session)))
        if unexcluded is not None:
            unexcluded.extend(sorted(bad, key=lambda b: (b[0] is None, b[0] or 0, b[1])))
        return out

    @_serialized
    def plan_forget(self, fact_id: str) -> ForgetPlan:
        """What forget would do, computed without writing."""
        return self._plan_forget(fact_id, None, None)

    @_serialized
    def plan_forgets(self, fact_ids: Iterable[Any], *, stored: bool = False,
                     together: bool = False) -> list[ForgetPlan]:
        """:meth:`plan_forget` of each of ``fact_ids``, in their order (the
        same plans; the error the first that has one raises), computed
        together: the ``source_refs`` rows and the exclusions of each session
        the facts cite read once (each ``plan_forget`` reads every source row
        of each session its fact cites: N forgets of facts citing one session
        read its rows N times, the square of N).  Each plan is of the store
        as it is, not after the others' forgets (as ``plan_forget``'s).

        ``stored``: each id is the value as stored (``redact``'s, carried
        from a finding), not typed: see :meth:`forget`; a plan names its
        fact as the listing shows it.  ``together`` (with ``stored``): the
        forgets are one run (``redact``'s): no plan names another fact of
        the run among its ``suppressed_facts``, told apart by its stored id
        (the text 'ZZ' and the BLOB b'ZZ' are two facts, both shown 'ZZ')."""
        sources: dict[str, dict[int, set[Any]]] = {}
        excluded: dict[str, frozenset[int]] = {}
        ids = list(fact_ids)
        run = frozenset(stored_id_key(f) for f in ids) if stored and together else None
        return [self._plan_forget(fid, sources, excluded, stored, run) for fid in ids]

    def _plan_forget(self, fact_id: Any,
                     sources: dict[str, dict[int, set[Any]]] | None,
                     excluded: dict[str, frozenset[int]] | None,
                     stored: bool = False,
                     run: frozenset[Any] | None = None) -> ForgetPlan:
        from .factresults import ForgetPlan

        _check_forget_id(fact_id, stored)
        key: Any = fact_id
        shown = row_text(key) if stored else str(fact_id)
        db = self._reader()
        rows = 0 if db is None else stored_rows(db, key, one=stored)
        gen = self.generation()
        if not rows:
            if self._marker_of(key) if stored else self.was_forgotten(fact_id):
                return ForgetPlan(shown, False, (), (), gen, gen, ())
            if db is not None and not stored:
                raise self._missing(db, fact_id)
            raise NotFound(f"no fact {shown}")
        assert db is not None
        generation_row_blocked(db)      # (as forget finds it)
        unexcluded: list[tuple[int | None, str]] = []
        positions = self._evidence_positions(db, key, unexcluded)
        new: list[tuple[str, int]] = []
        old: list[tuple[str, int]] = []
        for sid in sorted(positions):
            excl = None if excluded is None else excluded.get(sid)
            if excl is None:
                excl = session_exclusions(db, sid)
                if excluded is not None:
                    excluded[sid] = excl
            for seq in sorted(positions[sid]):
                (old if seq in excl else new).append((sid, seq))
        others = self._facts_using(db, positions, shown, sources,
                                   exclude_stored=key if stored else None, exclude_keys=run)
        return ForgetPlan(shown, True, tuple(new), tuple(old), gen, next_generation(gen),
                          tuple(others), tuple(unexcluded))

    def _marker_of(self, fact_id: object) -> bool:
        """:func:`_has_marker` of the stored id ``fact_id`` on the reader."""
        db = self._reader()
        return db is not None and _has_marker(db, fact_id)

    @_ends_its_transaction
    def forget(self, fact_id: Any, *,
               unexcluded: list[tuple[int | None, str]] | None = None,
               expected: ForgetPlan | None = None, stored: bool = False) -> bool:
        """Forget one fact in one ``BEGIN IMMEDIATE`` transaction: exclusions for
        every position of every revision's provenance and source refs, a
        content-free retry marker, generation + 1, and the fact, revisions,
        provenance and refs deleted.  True the first time, False on a retry;
        NotFound for an id never seen.

        A revision whose source row does not parse names no position: its
        evidence cannot be excluded, and the fact's rows are deleted all the
        same; ``unexcluded``, when given, gets each such (revision, reason),
        as :meth:`plan_forget` names them (``ForgetPlan.unexcluded``).

        ``expected``: the plan shown before (``memctl forget``'s preview on a
        terminal); inside the transaction, a forget whose evidence
        positions, unexcluded revisions or generation differ from it (a
        correction or another forget committed since) is a Conflict and
        writes nothing: what was confirmed is what is done.

        ``stored``: ``fact_id`` is the id exactly as the store holds it
        (``redact``'s forgets, carried from the scan's finding: a ``str``
        for a TEXT, ``bytes`` for a BLOB, :class:`InvalidText` for a TEXT
        not UTF-8), not typed: it is not checked as an id a user gives (16
        lower-case hex digits, else UsageError); the rows deleted are those
        under exactly that value (:func:`id_match`: never a row whose id
        decodes to the same text, the text 'ZZ' beside the BLOB b'ZZ'), and
        the retry marker is that value (a BLOB's: :func:`_blob_marker_text`).
        An id in more than one row of
        ``facts`` (a table without its primary key) is StoreCorrupt,
        nothing written.  Before 2026-12-07 a credential in such a fact (an
        id stored as ``0123456789ABCDEF``, ``ZZ`` or a BLOB) made
        ``redact`` exit 2, "invalid fact id", and nothing could erase it;
        then for a while the id went as the text the listing shows, and a
        BLOB's forget deleted the text id of the same bytes instead, or
        (bytes not UTF-8) found no fact, exit 3."""
        _check_forget_id(fact_id, stored)
        key: Any = fact_id
        shown = row_text(key) if stored else str(fact_id)
        self._require_database(shown)
        ph, arg = id_match(key)
        with self._txn() as db:
            rows = stored_rows(db, key, one=stored)
            if not rows:
                if _has_marker(db, key):
                    return False
                if stored:
                    raise NotFound(f"no fact {shown}")
                raise self._missing(db, fact_id)
            found: list[tuple[int | None, str]] = []
            positions = self._evidence_positions(db, key, found)
            # no generation row: the generation the rows imply, as every
            # reader (and forget --dry-run) has it; the row is written back
            generation_row_blocked(db)
            gen = meta_generation(db)
            if expected is not None:
                _check_plan(expected, positions, found, gen)
            if unexcluded is not None:
                unexcluded.extend(found)
            new_gen = next_generation(gen)
            for sid in sorted(positions):
                for seq in sorted(positions[sid]):
                    db.execute("INSERT OR IGNORE INTO exclusions (session_id, seq, generation) "
                               "VALUES (?, ?, ?)", (sid, seq, new_gen))
            mph, marg = ph, arg
            text = _blob_marker_text(db, key)     # (None for a typed id: a str)
            if text is not None:
                mph, marg = "?", text
            db.execute("INSERT OR REPLACE INTO forgotten (fact_id, generation) "
                       f"VALUES ({mph}, ?)", (marg, new_gen))
            if not db.execute(f"UPDATE meta SET value = ? WHERE {GENERATION_WHERE}",
                              (new_gen,)).rowcount:
                db.execute("INSERT INTO meta (key, value) VALUES ('generation', ?)", (new_gen,))
            for table in ("source_refs", "provenance", "revisions", "facts"):
                db.execute(f"DELETE FROM {table} WHERE fact_id = {ph}", (arg,))
        return True

    # ---- consistent copy -------------------------------------------------

    def backup_to(self, dest: str | os.PathLike[str]) -> bool:
        """Copy the database as this read-only open sees it (its private
        snapshot) into the new file ``dest`` (mode
        0600, created with O_EXCL) through SQLite's backup API, all pages in
        one step inside one read transaction: a consistent copy, and nothing
        in the store is opened for writing.  False when there is no database."""
        if not self.readonly:
            raise UsageError("backup_to needs a read-only open")
        if self._closed:
            raise UsageError("the fact store is closed")
        src = self._conn
        if src is None:
            return False
        try:
            fd = open_nofollow(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except OSError as exc:
            raise StoreWriteError(f"{dest}: cannot create: {exc.strerror}") from None
        os.close(fd)
        dst = None
        try:
            dst = sqlite3.connect(os.fspath(dest), isolation_level=None)
            src.execute("BEGIN")
            try:
                src.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the read snapshot
                src.backup(dst, pages=-1)
            finally:
                src.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _db_error(self.path, exc) from exc
        finally:
            if dst is not None:
                dst.close()
        return True

    # ---- integrity -------------------------------------------------------

    @_serialized
    def integrity(self) -> list[str]:
        """Problems found by ``integrity_check``/``foreign_key_check`` and the
        fact invariants (contiguous revisions, current revision present)."""
        db = self._reader()
        if db is None:
            return []
        out = [row_text(r[0]) for r in db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        out += [f"foreign key: {tuple(r)}" for r in db.execute("PRAGMA foreign_key_check")]
        for fid, rev, n, lo, hi in db.execute(
                "SELECT f.fact_id, f.revision, count(r.revision), min(r.revision), "
                "max(r.revision) FROM facts f LEFT JOIN revisions r ON r.fact_id = f.fact_id "
                "GROUP BY f.fact_id"):
            if not (n == rev and lo == 1 and hi == rev):
                out.append(f"fact {fid}: revisions not contiguous 1..{rev}")
        for (fid,) in db.execute("SELECT DISTINCT fact_id FROM revisions WHERE fact_id NOT IN "
                                 "(SELECT fact_id FROM facts)"):
            out.append(f"revision of missing fact {fid}")
        return out


# --------------------------------------------------------------------------
# Evidence helpers shared with the CLI and context


def message_text(content: Any) -> str:
    """The text of a message's content (a string, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(
                    part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def require_authored_text(records: Iterable[Mapping[str, Any]], ref: SourceRef) -> None:
    """Conflict unless a referenced position is a user or assistant message with
    text, not a synthetic notification (tool output and notifications alone
    cannot justify a correction)."""
    wanted = set(ref.seqs)
    for rec in records:
        if not isinstance(rec, Mapping) or rec.get("seq") not in wanted:
            continue
        # (a synthetic notification as the contract marks it: is_generated's
        # user message with "synthetic": true; before 2026-12-07 any truthy
        # "synthetic" of either role was refused)
        role = rec.get("role")
        if rec.get("type") == "message" and (role == "assistant" or role == "user"
                                             and not is_generated(rec)) \
                and message_text(rec.get("content")).strip():
            return
    raise Conflict(f"evidence {ref.label()} holds no user or assistant text; "
                   "tool output alone cannot justify a correction, nor a synthetic "
                   "notification")


_NOT_GIVEN: Any = object()


def fact_status(revisions: Sequence[Revision], statuses: Mapping[SourceRef, SourceStatus],
                current: Any = _NOT_GIVEN,
                excluded: Callable[[str], Collection[int]] | None = None,
                forgotten: bool = False) -> tuple[SourceStatus, int | None]:
    """A fact is valid only when every revision has a SourceRef that validates.
    Otherwise the status of the first failing revision, current first; returns
    (status, the revision it is about).  ``current``: the fact's current
    revision as its Fact shows it (:func:`fact_from_group`); one that no row
    of ``revisions`` has (a damaged database: no such row, or a stored value
    that is no integer, None included) makes the fact hidden,
    ``invalid_ref``, about it (None unless an integer); so do revisions
    that are not exactly ``1..current`` (:func:`revision_gap`: a row
    missing, or one beyond the current revision), about that revision.

    ``excluded``: a session's excluded positions (those the evaluation read,
    :func:`provenance_exclusions`).  A revision whose SourceRef validates but
    whose legacy provenance overlaps an exclusion is hidden, ``excluded``,
    as when its SourceRef does: forget excludes both, and a fact sharing
    either with a forgotten one is suppressed from recall (the reference
    design).  (A revision with legacy provenance alone is ``unverified``
    either way.)

    ``forgotten``: the fact's id is in ``forgotten`` (:func:`forgotten_present`:
    its rows stored again after its forget): hidden, ``invalid_ref``, about
    no one revision, before anything else."""
    if forgotten:
        return status_for("invalid_ref", FORGOTTEN_PRESENT), None
    if current is not _NOT_GIVEN and not any(
            r.revision == current and type(r.revision) is type(current) for r in revisions):
        return (status_for("invalid_ref", missing_current(current)),
                current if type(current) is int else None)
    if type(current) is int:
        gap = revision_gap(revisions, current)
        if gap is not None:
            return status_for("invalid_ref", gap[1]), gap[0]
    # current (highest) first; a damaged row's revision that is not an integer
    # sorts as SQLite sorts it (after the numbers), never a TypeError, and is
    # about no revision number (None, as a listing gives its fact's)
    for rev in sorted(revisions, key=lambda r: _sql_key(r.revision), reverse=True):
        about = rev.revision if type(rev.revision) is int else None
        if rev.source is None and rev.source_error is not None:
            return status_for("invalid_ref", rev.source_error), about
        if rev.source is None:
            return status_for("legacy_provenance"), about
        st = statuses.get(rev.source)
        if st is None:
            return SourceStatus(HIDDEN, "invalid_ref", "not validated"), about
        if not st.ok:
            return st, about
        if excluded is not None and rev.provenance:
            hit = excluded_provenance(rev.provenance, excluded)
            if hit is not None:
                return status_for("excluded", f"legacy provenance {hit[0]}:{hit[1]}",
                                  hit[1]), about
    if not revisions:
        return SourceStatus(UNVERIFIED, "legacy_provenance", "no revisions"), None
    return SourceStatus(VALID), None


def revision_taken(fact_id: str, current: int) -> Conflict:
    """The conflict of a correction whose revision, ``current + 1``, has a
    row already: a damaged database (a row beyond the current revision,
    ``validate``'s ``db.revision_gap``).  Before 2026-12-07 its insert met
    the table's key, and ``correct --yes`` exited 5, "facts database
    unreadable: UNIQUE constraint failed"."""
    return Conflict(f"fact {fact_id} already has a row for revision {current + 1}, beyond its "
                    f"current revision {current} (a damaged database: validate says "
                    "db.revision_gap): no revision can be appended, and nothing is revised; to "
                    f"replace the fact, forget it (memctl forget {fact_id})")


def _check_plan(plan: ForgetPlan, positions: Mapping[str, Collection[int]],
                unexcluded: Sequence[tuple[int | None, str]], generation: int) -> None:
    """Conflict unless a forget's evidence ``positions``, ``unexcluded``
    revisions and ``generation``, read inside its transaction, are those of
    ``plan`` (:meth:`FactStore.forget`'s ``expected``)."""
    now = {(sid, seq) for sid, seqs in positions.items() for seq in seqs}
    planned = set(plan.exclusions) | set(plan.already_excluded)
    what = []
    if now != planned:
        what.append(f"{len(now - planned)} position(s) of its evidence not in the plan, "
                    f"{len(planned - now)} in the plan no longer")
    if list(unexcluded) != list(plan.unexcluded):
        what.append("its unexcluded revisions differ")
    if generation != plan.generation:
        what.append(f"the generation is {generation}, not {plan.generation}")
    if what:
        raise Conflict(f"fact {plan.fact_id} or the exclusions changed since the plan shown "
                       f"(a correction or a forget committed meanwhile: {'; '.join(what)}); "
                       "nothing was forgotten: run the forget again to see the new plan")


def excluded_provenance(provenance: Iterable[Provenance],
                        excluded: Callable[[str], Collection[int]]) -> tuple[str, int] | None:
    """The first (session id, position) of ``provenance``, in session id
    order, that ``excluded`` gives for its session; None when none is."""
    by_session: dict[str, set[int]] = {}
    for p in provenance:
        by_session.setdefault(p.session_id, set()).update(p.seqs)
    for sid in sorted(by_session):
        common = by_session[sid].intersection(excluded(sid))
        if common:
            return sid, min(common)
    return None


__all__ = [
    "FactStore", "Fact", "Revision", "Provenance", "RememberResult", "ForgetPlan",
    "MIGRATIONS", "SCHEMA_VERSION", "fact_id_for", "check_fact_id", "normalize_text",
    "message_text", "require_authored_text", "fact_status", "excluded_provenance",
    "missing_current", "revision_gap", "forgotten_present", "FORGOTTEN_PRESENT",
    "m001_initial",
    "m002_source_refs", "m003_generation",
]
