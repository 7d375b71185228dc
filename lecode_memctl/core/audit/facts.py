"""Database and fact checks: the facts database read-only (schema, integrity,
exclusions, generation) and every fact's evidence."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..atomic import open_nofollow
from ..errors import UsageError
from ..layout import FACTS_DB
from ..sourceref import SourceRef, StoredSource
from .codes import Finding

if TYPE_CHECKING:
    from ..facts import Part
    from .run import Audit


# ---------------------------------------------------------------------------
# Database, facts and lineage (need sqlite3 and the session store: imported here)

_SQLITE_MAGIC = b"SQLite format 3\x00"


def _header_user_version(path: Path) -> int | None:
    """``PRAGMA user_version`` read from the file header (offset 60), without
    SQLite: a signed 32-bit big-endian number, as SQLite reads it (-1, not
    4294967295)."""
    try:
        fd = open_nofollow(path)
    except OSError:
        return None
    try:
        head = os.pread(fd, 100, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(head) < 64 or not head.startswith(_SQLITE_MAGIC):
        return None
    return int.from_bytes(head[60:64], "big", signed=True)


def _open_facts(audit: Audit) -> Any:
    """The store's FactStore opened read-only, or None (no database, or a finding)."""
    from ..errors import MemctlError
    from ..facts import FactStore

    path = audit.store.facts_db
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        # a store directory that cannot be searched (EACCES): the database
        # cannot be opened, which is not "no database" (before 2026-12-07:
        # no facts, generation 0 known, and a db.rolled_back saying the
        # database was deleted)
        from ..errors import StoreCorrupt

        return StoreCorrupt(f"{path}: cannot be opened read-only: cannot look up: "
                            f"{exc.strerror or exc}")
    if stat.S_ISLNK(st.st_mode):
        return None  # a layout finding (layout.symlink)
    if not stat.S_ISREG(st.st_mode):
        # a directory or FIFO in its place: every other command exits 5 on it
        from ..atomic import file_kind
        from ..errors import StoreCorrupt

        return StoreCorrupt(f"{path}: is {file_kind(st.st_mode)}, not a regular file")
    try:
        if audit.lock_wait is not None:
            return FactStore.open_readonly(path, busy_timeout=audit.lock_wait)
        return FactStore.open_readonly(path)
    except MemctlError as exc:
        return exc


def current_generation(path: Path) -> int | None:
    """The facts database's exclusion generation as it is now (0 with no
    database or an empty file), read-only; None when it cannot be read."""
    from ..errors import MemctlError
    from ..facts import FactStore

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return 0   # a directory or FIFO: no database holds any exclusion (issue 16.2)
    if st.st_size == 0:
        return 0
    try:
        fs = FactStore.open_readonly(path)
    except MemctlError:
        return None
    try:
        return fs.generation()
    except Exception:  # noqa: BLE001 - a database that cannot say: no finding from it
        return None
    finally:
        fs.close()


class Pending:
    """What :func:`check_db_and_facts` yields once the facts are loaded and
    the database checks run in a thread: the audit may read the transcripts
    meanwhile and come back for the rest (``Audit.run``)."""


PENDING = Pending()


def check_db_and_facts(audit: Audit) -> Iterator[Finding | Pending | None]:
    """The database checks, then the store against memctl's mark (see ``core.seen``).
    The mark is read before the database: a forget that lands meanwhile, and
    records its higher generation, is then not mistaken for a roll-back.
    :data:`PENDING` among what it yields: the facts are loaded and the
    checks run in a thread; what follows waits for them.  Should they fail,
    ``audit._redo`` says that the transcripts must be read again without
    the facts, as the audit reads them when the checks fail first."""
    from .. import seen

    mark = seen.load(audit.state, audit.store.path) if audit.state is not None else None
    yield from _check_db(audit)
    if not audit._generation_known:
        return
    gen, excl = audit._generation, audit._exclusion_count
    # (a slug that cannot be known is none: compared with any mark, and the
    # mark keeps its own; the directory's name, a label, was recorded before
    # 2026-12-07, and the mark then no longer matched the store's own slug)
    whose = {"slug": audit.store.slug_if_known(), "database": audit._database_id}
    ids = audit._forgotten
    if mark is not None and audit.state is not None and seen.regression(
            mark, gen, excl, forgotten=ids, **whose):
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mark.updated))
        present = _present(audit.store.facts_db)
        now = (f"generation {gen} and {excl} exclusion(s)" if present
               else "no facts database (generation 0, no exclusions)")
        if not present:
            what = ("the database was deleted (or this is another copy of the store of "
                    f"{audit.store.slug} that never had one)")
        elif seen.other_database(mark, audit._database_id):
            what = ("this is another database than the one seen (created separately: the "
                    "database was deleted and made again, or this is another copy of the store "
                    f"of {audit.store.slug}, from another machine, put at this path)")
        else:
            what = "the database was replaced by an older copy or deleted"
        lost = seen.missing_forgotten(mark, ids)
        if gen < mark.generation or excl < mark.exclusions:
            said = (f"{now}, but memctl saw generation {mark.generation} and "
                    f"{mark.exclusions} exclusion(s) here (by {when})")
            if lost:
                said += f", and {_lost_ids(lost)}"
        else:
            said = (f"{now}, at or above what memctl saw here (by {when}: generation {mark.generation}, "
                    f"{mark.exclusions} exclusion(s)), but {_lost_ids(lost)} (a forget since "
                    "the roll-back raised the numbers again)")
        yield audit._f("db.rolled_back",
                       f"{said}: {what}, so "
                       "forgotten evidence may be visible again (if that was intended, remove "
                       f"{seen.mark_path(audit.state, audit.store.path)})",
                       file=FACTS_DB)
    if audit.record_state and audit.state is not None:
        seen.record(audit.state, audit.store.path, gen, excl, forgotten=ids, **whose)


def _present(path: Path) -> bool:
    """Whether ``path`` is there: False only for "no such entry" (one that
    cannot be looked up, EACCES, is there for all the audit knows:
    ``os.path.lexists`` says False for it)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def _is_odd_file(path: Path) -> bool:
    """Whether ``path`` is there as something else than a regular file (a
    directory, a FIFO); False when it cannot be looked up."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _lost_ids(lost: list[str]) -> str:
    """The ids a mark saw forgotten that the store no longer holds as
    forgotten, in the finding's words: how many, and the first three."""
    shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    return (f"{len(lost)} fact(s) it saw forgotten are not in the forgotten table "
            f"({shown})")


def _check_db(audit: Audit) -> Iterator[Finding | Pending | None]:
    import sqlite3

    from ..errors import LocalResourceError, MemctlError, StoreBusy
    from ..facts import SCHEMA_VERSION, UnmigratableSchema, foreign_expressions

    fs = _open_facts(audit)
    rel = FACTS_DB
    if fs is None:
        # No database at all: generation 0, nothing excluded.  (A symlink or odd
        # file type is a layout finding, and then the generation is unknown.)
        audit._generation_known = not _present(audit.store.facts_db)
        if audit._generation_known:
            audit.summary.facts_total = 0
        return
    if isinstance(fs, MemctlError):
        if isinstance(fs, StoreBusy | LocalResourceError):
            if not audit.listed:
                raise fs        # (exit 6 or 7: this store alone was asked for)
            # --all-projects: one busy store does not stop the others' audit
            # (nor the report a cron job publishes); its facts are not audited.
            # A full $TMPDIR is this machine's, not the store's (before
            # 2026-12-07 it was the store's db.unreadable, exit 1, alone too)
            why = ("it was busy past --lock-wait" if isinstance(fs, StoreBusy)
                   else "this machine's temporary space failed, not the store")
            yield audit._f("db.unreadable", f"{fs}: not audited ({why}; run validate again)",
                           file=rel)
            return
        if _is_odd_file(audit.store.facts_db):
            # a directory or FIFO in its place: no exclusion can be read from it,
            # so a transcript stamped with a forget's epoch is ahead (epoch check)
            audit._generation_known = True
        v = _header_user_version(audit.store.facts_db)
        if v is not None and v > SCHEMA_VERSION:
            yield audit._f("db.schema_unknown", f"schema version {v} is newer than this memctl "
                           f"knows ({SCHEMA_VERSION}); upgrade memctl", file=rel)
        elif isinstance(fs, UnmigratableSchema):
            # an older version lecode cannot migrate: never db.needs_migration
            # ("lecode migrates it on its next write" would not hold)
            yield audit._f("db.schema_unknown", fs.detail, file=rel)
        else:
            yield audit._f("db.unreadable", str(fs), file=rel)
        return
    try:
        db = fs.read_connection()  # a private snapshot
        if db is None or not fs.tables:
            if audit.store.facts_db.stat().st_size > 0:
                yield audit._f("db.schema_unknown", "no lecode tables in the database", file=rel)
            else:
                # an empty file: generation 0, no fact
                audit._generation_known = True
                audit.summary.facts_total = 0
            return
        # the read-only open is a private copy no writer can move under
        if audit._child is None:
            # (forked before any thread starts; the connection is opened again)
            audit._child = fact_helper(audit, fs)
            db = fs.read_connection()
        foreign = foreign_expressions(db)
        integrity, rest, in_thread = _start_checks(fs, db, defer=not audit.may_fork(),
                                                   skip=frozenset(foreign))
        checks = _db_checks(audit, fs, SCHEMA_VERSION, integrity, rest, foreign)
        if in_thread:
            # The facts loaded first, the transcripts read while SQLite checks
            # (Audit.run), the checks' findings afterwards; the audit's state
            # as without the thread should the load or the checks fail.
            before = _loaded(audit)
            try:
                _load_facts(audit, fs, db)
            except sqlite3.DatabaseError:
                _reload(audit, before)   # the checks first, then the load, below
            else:
                audit._fs, fs = fs, None
                yield PENDING
                try:
                    yield from checks
                except sqlite3.DatabaseError as exc:
                    _reload(audit, before)
                    audit._redo = True
                    yield audit._f("db.unreadable", f"database error while auditing: {exc}",
                                   file=rel)
                return
        try:
            yield from checks
            _load_facts(audit, fs, db)
            audit._fs, fs = fs, None   # read again for the references and the facts
        except sqlite3.DatabaseError as exc:
            yield audit._f("db.unreadable", f"database error while auditing: {exc}", file=rel)
    finally:
        if fs is not None:
            fs.close()


Later = tuple[str, str, dict[str, Any]]
Rest = tuple[list[Later], Exception | None]
# integrity_check's messages, each with its check's name ("integrity_check: ok"
# alone: no damage), and the error that stopped it at a damaged page
Checked = tuple[list[str], Exception | None]


def _db_checks(audit: Audit, fs: Any, schema_version: int, integrity: Callable[[], Checked],
               rest: Callable[[], Rest], foreign: dict[str, str] | None = None
               ) -> Iterator[Finding | None]:
    """The database checks in their order: the schema, ``integrity``'s
    messages, then the rest (:func:`_db_checks_rest`), both started before
    (:func:`_start_checks`).  A database error stops them where it did; an
    integrity_check stopped at a damaged page, after the rest's findings
    (the database is then unreadable to the audit, as to the rest).
    ``foreign``: what lecode's tables hold that lecode never writes
    (``facts.foreign_expressions``), each a ``db.schema_unknown``."""
    rel = FACTS_DB
    later, error = rest()
    messages, stopped = integrity()
    for what in (foreign or {}).values():
        yield audit._f("db.schema_unknown", f"{what}: not lecode's schema (SQLite evaluates "
                       "them on every row it checks or writes, without bound: integrity_check "
                       "did not check that table)", file=rel)
    if fs.needs_migration:
        yield audit._f("db.needs_migration", f"schema version {fs.schema_version}, current is "
                       f"{schema_version}; lecode migrates it on its next write", file=rel)
    for msg in messages:
        if msg.startswith(UNCHECKED):
            yield audit._f("db.unchecked", f"integrity_check cannot run: {msg[len(UNCHECKED):]} "
                           "(a collation or function only the application that added those "
                           "tables, or an index or column of them, defines); every other table "
                           "was checked, and the facts were audited", file=rel)
        elif msg != "integrity_check: ok":
            yield audit._f("db.integrity", msg, file=rel)
    for code, message, loc in later:
        yield audit._f(code, message, **loc)
    if error is not None:
        raise error
    if stopped is not None:
        raise stopped


#: integrity's message for a check that could not run (:func:`_start_checks`)
UNCHECKED = "\0unchecked: "


def _later(code: str, message: str, **loc: Any) -> tuple[str, str, dict[str, Any]]:
    return code, message, loc


# The page cache of the connection that runs the database checks on a
# thread (its others keep 1 MiB: FactStore._sibling).  integrity_check looks
# up each row's entry in every index of its table: once those indexes fit in
# the cache, each page is read once.  At 100,000 facts (2.7 MiB an index)
# 1 MiB made integrity_check 0.69 s, 0.33 s of it reading pages again, and
# foreign_key_check 0.16 s; 4 MiB makes them 0.23 s and 0.10 s.  At
# 1,000,000 facts no cache that keeps memory flat holds them (27 MiB an
# index): the same 5 s and 2.7 s with 1, 2, 4 or 8 MiB.
CHECK_CACHE_KIB = 4096
# ... and the cache of the checks after it, on that connection
REST_CACHE_KIB = 1024


# A database smaller than this is checked on the audit's own connection, as
# it is reached: a second connection and a thread cost more than they save
# (the demo store's 72 KiB: validate -q 80.5 ms against 82.9 ms, median of
# 25; 808 KiB, 2,000 facts: 135.4 and 135.0 ms)
AT_ONCE_BYTES = 256 << 10


def _checked_at_once(db: Any) -> bool:
    """Whether ``db``'s database (its pages, those of its -wal included) is
    smaller than :data:`AT_ONCE_BYTES`; False when SQLite cannot say."""
    size = _database_bytes(db)
    return size is not None and size < AT_ONCE_BYTES


# integrity_check's bound on the length of a value it computes
# (SQLITE_LIMIT_LENGTH): the database's own size, no stored value being
# longer, and never less than this
MIN_LENGTH_BOUND = 1 << 20
# integrity_check's line where a function raised at that bound ("string or
# blob too big": zeroblob, replace, ||; printf returns NULL instead, no line)
TOO_LONG = ("stopped: a value it computed is longer than the database itself ({bound} bytes; "
            "{exc}): an expression lecode's schema does not have (db.schema_unknown)")


def _database_bytes(db: Any) -> int | None:
    """The size of ``db``'s database in bytes (its pages, those of its -wal
    included); None when SQLite cannot say."""
    import sqlite3

    try:
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    except sqlite3.DatabaseError:
        return None
    return pages * size if type(pages) is int and type(size) is int else None


def _start_checks(fs: Any, db: Any, *, defer: bool, skip: frozenset[str] = frozenset()
                  ) -> tuple[Callable[[], Checked], Callable[[], Rest], bool]:
    """``PRAGMA integrity_check``'s messages with the error that stopped it
    (None), and :func:`_db_checks_rest`'s findings with the error that
    stopped them (None), each from a callable, and whether they are still
    being computed when this returns.

    With a second connection to the snapshot (``FactStore.in_background``:
    SQLite checks without Python's lock, and the store waits for it before
    it closes):

    - ``defer``: one thread runs both, and the audit goes on meanwhile (it
      reads the transcripts: ``Audit.run``).  One thread, not two, so the
      checks take one core of two and the transcripts the other.
    - otherwise (a pool of forked processes may read the transcripts, and a
      fork waits for every thread: ``Audit.may_fork``), integrity_check
      runs in a thread while the rest is computed now, on ``db``.

    Without one, or for a small database (:func:`_checked_at_once`), the
    rest is computed now on ``db``, integrity_check when asked for.

    ``skip``: lecode's tables that hold what lecode never writes, an
    expression SQLite would evaluate on each of their rows
    (``facts.foreign_expressions``): integrity_check then checks every
    other table alone, and those not at all (printf('%.*c', 900000000, 'x')
    in a generated column took seconds a row, whatever the bound on a
    value's length)."""
    import sqlite3

    from ..facts import defined_elsewhere, is_damage, row_text, sql_name

    later: list[Later] = []

    def integrity(conn: Any) -> Checked:
        # Every connection of the store checks each page as it reads it
        # (cell_size_check) and empties its cache after a damaged page
        # stopped a read (core.facts._forget_pages): without them
        # integrity_check read past a damaged page's cells into whatever
        # memory the process had used, and reported the damage in one run
        # and stopped ("database disk image is malformed") in the next.
        # Those checks made the check of a sound database of 1,000,000 facts
        # 15% slower (they are its own checks, made again), so it runs first
        # without them, turned back on before anything else reads through
        # the connection (the facts are read from it when there is no second
        # one); only an answer other than "ok" is taken again with them,
        # from an empty cache.  Where it stops at a damaged page, quick_check,
        # which does not look rows up in their indexes, reports what it
        # finds, and the first message says the full check stopped.  An
        # interrupt or an I/O error is no damage: raised as it is.
        def check(pragma: str) -> list[str] | sqlite3.DatabaseError:
            # its lines, or the damage that stopped it; a value longer than
            # the database (the bound below) is its own line: the check
            # stopped there, no damage, and the facts are still audited
            try:
                # (a message quoting a name that is not UTF-8: InvalidText)
                return [row_text(msg) for (msg,) in conn.execute(f"PRAGMA {pragma}")]
            except sqlite3.DataError as exc:
                return [TOO_LONG.format(exc=exc, bound=bound)]
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                return exc

        def table_by_table(exc: sqlite3.OperationalError | None) -> list[str]:
            # integrity_check(T) of each table (it and its indexes) where the
            # whole check cannot run: the lines of those it checks, and the
            # names of those it cannot in one UNCHECKED message (before, the
            # first review of this found a damaged index of source_refs
            # reported OK beside another application's table)
            names = [row_text(n) for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                if row_text(n).lower() not in skip]
            lines: list[str] = []
            unchecked: list[str] = []
            for name in names:
                try:
                    got = check(f"integrity_check({sql_name(name)})")
                except sqlite3.OperationalError as inner:
                    if not defined_elsewhere(inner):
                        raise
                    unchecked.append(name)
                    continue
                if isinstance(got, sqlite3.DatabaseError):
                    lines.append(f"integrity_check({name}): stopped: {got}")
                else:
                    lines.extend(f"integrity_check: {msg}" for msg in got if msg != "ok")
            if exc is None and not unchecked:
                return lines or ["integrity_check: ok"]
            why = row_text(str(exc)) if exc is not None else "a collation or function"
            return [UNCHECKED + f"{why}; not checked: "
                    f"{', '.join(unchecked) or 'none'}", *lines]

        def checked() -> Checked:
            if skip:
                return table_by_table(None), None
            conn.execute("PRAGMA cell_size_check = OFF")
            try:
                first = check("integrity_check")
            except sqlite3.OperationalError as exc:
                # an index or column of another application's collation or
                # function: integrity_check cannot walk it; no damage, and the
                # facts are audited (before 2026-12-07: db.unreadable, no fact
                # audited, while every reader listed them)
                if not defined_elsewhere(exc):
                    raise
                return table_by_table(exc), None
            finally:
                conn.execute("PRAGMA cell_size_check = ON")
            if first == ["ok"]:
                return list(SOUND[0]), None     # (a list of its own: SOUND is compared with)
            conn.execute("PRAGMA shrink_memory")
            full = check("integrity_check")
            if not isinstance(full, sqlite3.DatabaseError):
                return [f"integrity_check: {msg}" for msg in full], None
            quick = check("quick_check")
            if isinstance(quick, sqlite3.DatabaseError):
                return [f"integrity_check: stopped: {full}; quick_check stopped too: {quick}"], full
            return [f"integrity_check: stopped: {full}; quick_check, which does not compare "
                    f"the indexes with their tables, found:",
                    *(f"quick_check: {msg}" for msg in quick)], full

        # No value the checks compute is longer than the database holds
        # (lecode's schema makes none): a generated column or CHECK of a
        # crafted schema (printf('%.*c', 900000000, 'x')) made validate run
        # for minutes and take GBs before 2026-12-07.  The bound keeps
        # memory, not time: past it most functions (zeroblob, replace, ||)
        # raise "string or blob too big", the TOO_LONG line (check()), but
        # printf does all its work and returns NULL (900000000: 11 s, 32 MB
        # against 918 MB).  Time is kept by skip (facts.foreign_expressions):
        # this catches only what that judge would miss
        bound = max(_database_bytes(conn) or 0, MIN_LENGTH_BOUND)
        limit = conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, bound)
        try:
            return checked()
        finally:
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)

    def cached(conn: Any) -> Any:
        conn.execute(f"PRAGMA cache_size = -{CHECK_CACHE_KIB}")
        return conn

    def rest(conn: Any, sound: bool = False, *, smaller: bool = False) -> Rest:
        try:
            if smaller:
                # after integrity_check on this connection: the rest walks the
                # tables in key order and sorts (_db_checks_rest), as fast with
                # a 1 MiB cache as with 4 MiB (1.20 s and 1.12 s at 1,000,000
                # facts), and each sort keeps what the cache holds before it
                # spills; integrity_check's pages are let go (the cache made
                # smaller still held them: validate at 1,000,000 facts peaked
                # 6 MB higher once the rest sorted)
                conn.execute(f"PRAGMA cache_size = -{REST_CACHE_KIB}")
                conn.execute("PRAGMA shrink_memory")
            later.extend(_db_checks_rest(fs, conn, sound=sound))
        except Exception as exc:   # noqa: BLE001 - raised by _db_checks, after what came before it
            return later, exc
        return later, None

    def beside(conn: Any) -> Checked | sqlite3.DatabaseError:
        try:
            return integrity(cached(conn))
        except sqlite3.DatabaseError as exc:
            return exc

    def alone(found: Checked | sqlite3.DatabaseError) -> Checked:
        if isinstance(found, sqlite3.DatabaseError):
            raise found
        return found

    def checked_then_rest(conn: Any) -> tuple[Checked | sqlite3.DatabaseError, Rest]:
        found = beside(conn)
        return found, rest(conn, sound=found == SOUND, smaller=True)

    if _checked_at_once(db):
        done = rest(db)
        return (lambda: integrity(db)), (lambda: done), False
    if defer:
        both = fs.in_background("memctl-db-checks", checked_then_rest)
        if both is not None:
            return (lambda: alone(both()[0])), (lambda: both()[1]), True
    started = fs.in_background("memctl-integrity", beside)
    done = rest(db)
    return ((lambda: alone(started())) if started is not None else (lambda: integrity(db))), \
        (lambda: done), False


def _loaded(audit: Audit) -> tuple[Any, ...]:
    """What :func:`_load_facts` sets, as it is."""
    return (audit._generation, audit._generation_known, audit._cited, audit._exclusion_count,
            audit._excluded, audit._database_id, audit._forgotten)


def _reload(audit: Audit, values: tuple[Any, ...]) -> None:
    """Put back what :func:`_loaded` read (the facts not loaded after all)."""
    (audit._generation, audit._generation_known, audit._cited, audit._exclusion_count,
     audit._excluded, audit._database_id, audit._forgotten) = values


# what integrity_check said of a sound database (its one line, no error)
SOUND: Checked = (["integrity_check: ok"], None)


def _db_checks_rest(fs: Any, db: Any, *, sound: bool = False
                    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Foreign keys, the generation, revisions and dangling references, as
    (code, message, location) for :func:`_db_checks` to report in order.
    ``sound``: integrity_check found this snapshot sound (every index holds
    its table's rows), so whether any fact's revisions fail the test is
    asked first (:func:`_any_gap`), and they are grouped by fact only where
    a fact fails it."""
    import sqlite3

    from ..facts import _sql_key, ids_stored_twice, row_text, sql_name

    rel = FACTS_DB
    tables = fs.tables
    fk_rows: set[tuple[str, int | None]] = set()
    for name in sorted(tables):
        try:
            found = _orphans_in_key_order(db, name)
            if found is None:
                found = db.execute(f"PRAGMA foreign_key_check({sql_name(name)})").fetchall()
        except sqlite3.OperationalError as exc:
            if "\ufffd" in name and str(exc).startswith("no such table"):
                # a name that is not UTF-8 (fs.tables: decoded with replacement),
                # which no SQL text can name: that table alone is not checked
                yield _later("db.foreign_key", f"the foreign keys of {name} cannot be "
                               "checked: its name is not UTF-8", file=rel, table=name)
                continue
            if "foreign key mismatch" not in str(exc):
                raise
            # the parent's key is no longer unique (a table rebuilt without its
            # primary key): that table's references cannot be checked, the
            # others' can, and the audit goes on
            yield _later("db.foreign_key", f"the foreign keys of {name} cannot be checked: "
                           f"{exc} (the parent table lost its primary key)", file=rel,
                           table=name)
            continue
        for table, rowid, parent, _fkid in found:
            table, parent = row_text(table), row_text(parent)   # (a name not UTF-8: bytes)
            fk_rows.add((table, rowid))
            yield _later("db.foreign_key", f"row {rowid} of {table} references a missing row "
                           f"of {parent}", file=rel, table=table)
    # exclusions rows of other types than documented: read fail-closed
    # (facts.exclusion_position), reported here
    if "exclusions" in tables:
        from ..facts import MALFORMED_EXCLUSION_SQL

        (odd,) = db.execute("SELECT count(*) FROM exclusions WHERE "
                            + MALFORMED_EXCLUSION_SQL).fetchone()
        if odd:
            yield _later("db.malformed_exclusion", f"{odd} row(s) of exclusions hold a session id "
                         "that is not text or a position that is not a non-negative integer "
                         "(each still hides the position it spells)", file=rel)
    # generation against exclusions and retry markers
    if "meta" in tables:
        from ..facts import GENERATION_WHERE

        rows = db.execute(f"SELECT key, value FROM meta WHERE {GENERATION_WHERE}").fetchall()
        # in value order, not the rows' physical order
        values = sorted((v for _k, v in rows),
                        key=lambda v: (type(v) is not int, v if type(v) is int else 0, str(v)))
        bad = [v for v in values if type(v) is not int or v < 0]
        bad_gen = bool(bad)
        gen = None if bad or not values else max(values)
        if bad_gen:
            yield _later("db.generation_mismatch", "the generation in meta is not a "
                           f"non-negative integer: {str(bad[0])[:40]!r}", file=rel)
        if len(rows) > 1:
            shown = ", ".join(str(v)[:40] for v in values[:10])
            yield _later("db.generation_mismatch", f"meta holds {len(rows)} generation rows "
                         f"({shown}): every command reads the highest", file=rel)
        elif rows and type(rows[0][0]) is not str:
            yield _later("db.generation_mismatch", "the generation row's key in meta is stored "
                         "as a BLOB (read as its bytes)", file=rel)
        # a generation stored as anything but a non-negative integer is
        # damage, and the maxima are of those that are integers
        for table in ("forgotten", "exclusions"):
            if table not in tables:
                continue
            (odd,) = db.execute(f"SELECT count(*) FROM {table} WHERE typeof(generation) != "
                                "'integer' OR generation < 0").fetchone()
            if odd:
                yield _later("db.generation_mismatch", f"{odd} row(s) of {table} hold a generation "
                             "that is not a non-negative integer", file=rel)
        top = "coalesce(max(CASE WHEN typeof(generation) = 'integer' THEN generation END), 0)"
        markers = db.execute(f"SELECT count(*), {top} FROM forgotten").fetchone() \
            if "forgotten" in tables else (0, 0)
        ex_max = db.execute(f"SELECT {top} FROM exclusions").fetchone()[0]
        if gen is None:
            if not bad_gen:
                yield _later("db.generation_mismatch", "meta has no generation row", file=rel)
        elif gen < markers[1] or gen < ex_max or gen < markers[0]:
            yield _later("db.generation_mismatch",
                           f"generation {gen}, but {markers[0]} forget retry marker(s) (newest at "
                           f"generation {markers[1]}) and exclusions installed up to generation "
                           f"{ex_max}", file=rel)
    # a live fact whose id is forgotten (its rows put back by hand, or from a
    # copy, after the forget): one query over the markers, each looked up in
    # the facts' index
    if "forgotten" in tables:
        for (fid,) in db.execute("SELECT DISTINCT g.fact_id FROM forgotten g JOIN facts f "
                                 "ON f.fact_id = g.fact_id ORDER BY g.fact_id COLLATE BINARY"):
            yield _later("db.forgotten_fact_present", "the fact was forgotten (its id is in "
                         "forgotten) but its rows are stored again (put back by hand or from a "
                         "copy after the forget): its evidence is excluded, so its "
                         "fact.suppressed warnings are of its own forget; 'memctl forget' "
                         "of it deletes them again", fact_id=row_text(fid))

    # facts this loop would pass: integers 1..n, the current one among them)
    twice = ids_stored_twice(db)
    for fid in sorted(twice, key=_sql_key):
        # (the table's rows: its unique index, where it has one, holds the id once)
        n = db.execute("SELECT count(*) FROM facts NOT INDEXED WHERE fact_id = ?",
                       (fid,)).fetchone()[0]
        yield _later("db.revision_gap", f"the fact id has {n} rows in facts (the table lost its "
                       "primary key, or its unique index does not hold every row): which is the "
                       "fact, and its current revision, is not known",
                       fact_id=row_text(fid), revision=None)
    if sound and not _any_gap(db):
        gaps: Any = ()
    else:
        gaps = db.execute(_GAPS)
    for fid, cur, n, lo, hi, odd, has_cur in gaps:
        if fid in twice:
            continue            # (said above)
        if not has_cur:
            yield _later("db.dangling_ref", f"the fact's current revision {_said(cur)} has no "
                           "revision row", fact_id=row_text(fid), revision=_num(cur), table="facts")
        elif n != hi or lo != 1 or hi != cur or odd:
            yield _later("db.revision_gap",
                           f"{n} revision(s) numbered {_said(lo)}..{_said(hi)}"
                           + (f", {int(odd)} of them stored as no integer" if odd else "")
                           + f"; expected 1..{_said(cur)} without gaps", fact_id=row_text(fid),
                           revision=_num(cur))
    # refs to missing facts/revisions that foreign_key_check did not already report
    checks = [("revisions", "SELECT rowid, fact_id, revision FROM revisions WHERE fact_id NOT IN "
               "(SELECT fact_id FROM facts)")]
    for t in ("provenance", "source_refs"):
        if t in tables:
            checks.append((t, f"SELECT x.rowid, x.fact_id, x.revision FROM {t} x LEFT JOIN revisions r "
                              "ON r.fact_id = x.fact_id AND r.revision = x.revision "
                              "WHERE r.fact_id IS NULL"))
    for table, sql in checks:
        seen: set[tuple[str, int]] = set()
        for rowid, fid, rev in db.execute(sql):
            if (table, rowid) in fk_rows or (fid, rev) in seen:
                continue
            seen.add((fid, rev))
            yield _later("db.dangling_ref", f"{table} row names fact {row_text(fid)} revision "
                           f"{_said(rev)}, which does not exist", fact_id=row_text(fid),
                           revision=_num(rev), table=table)


# A fact's revisions are 1..its current revision (over the rows of its
# revisions, r, with its row of facts, f)
# (every revision an integer: rows 1, 2.5 and 3 have count 3 = max 3, and
# before 2026-12-07 passed, while every reader hid the fact)
_RUN = ("typeof(f.revision) = 'integer' AND typeof(min(r.revision)) = 'integer' "
        "AND typeof(max(r.revision)) = 'integer' AND min(r.revision) = 1 "
        "AND count(r.revision) = max(r.revision) AND max(r.revision) = f.revision "
        "AND count(r.revision) = total(typeof(r.revision) = 'integer')")
# Every fact of which _RUN does not hold, with the numbers _db_checks_rest
# reports: one b-tree search of the revisions per fact, in the order of the
# facts' index, each fact's row looked up in the table, and grouped.  The
# ids are grouped and ordered as every reader compares them (BINARY),
# whatever collation the table declares: two ids one spelt 'a', the other
# 'A', in a column declared NOCASE, are two facts, each with its own
# revisions, as the listing shows them (they were one group, and a false
# "2 revision(s) numbered 1..1"; and _ANY_GAP, testing each row, did not
# see that group: a review of 8d2cafd).
_GAPS = ("SELECT f.fact_id, f.revision, count(r.revision), min(r.revision), max(r.revision), "
         "count(r.revision) - total(typeof(r.revision) = 'integer'), "
         "sum(r.revision = f.revision AND typeof(r.revision) = typeof(f.revision) "
         "AND typeof(f.revision) = 'integer') FROM facts f LEFT JOIN revisions r "
         "ON r.fact_id = f.fact_id GROUP BY f.fact_id COLLATE BINARY "
         "HAVING NOT (" + _RUN + ") ORDER BY f.fact_id COLLATE BINARY")
# Whether _GAPS has a row to give, from the same test of each row of facts
# over its revisions, the table read in its own order (no lookup of each
# fact's row, no grouping): 0.13 s against 0.21 s at 100,000 facts.  It
# sees what _GAPS sees only where every index holds its table's rows (a
# fact an index alone holds is read by _GAPS): taken on a sound database.
# An id stored twice is tested row by row, which _GAPS groups; such an id
# is not reported there either (ids_stored_twice).
_ANY_GAP = ("SELECT 1 FROM facts f NOT INDEXED WHERE NOT coalesce((SELECT " + _RUN
            + " FROM revisions r WHERE r.fact_id = f.fact_id), 0) LIMIT 1")
# The same question asked of two sorted streams, merged (SQLite's merge of a
# compound SELECT with an ORDER BY): every row of facts, (id, current
# revision when an integer), EXCEPT each group of revisions (by id, NULL ids
# left out, as the join leaves them out) whose revisions pass the test, as
# (id, highest revision).  Any row left is a fact _ANY_GAP finds.  _ANY_GAP
# looks each fact's revisions up in their index in the table's order, which
# follows no id order: at 1,000,000 facts that is one index page read again
# per fact, 3.2 s (1.5 s of it in the kernel), against 1.2 s sorted and
# merged (validate -q 12.4 s against 11.6 s); at 100,000 facts both take
# 0.1 s.  Taken by _any_gap only where its comparisons are the join's
# (_merged_gap_fits).
_MERGED_GAP = ("SELECT fact_id COLLATE BINARY, CASE WHEN typeof(revision) = 'integer' "
               "THEN revision END FROM main.facts NOT INDEXED EXCEPT "
               "SELECT fact_id COLLATE BINARY, max(revision) FROM main.revisions "
               "WHERE fact_id IS NOT NULL GROUP BY fact_id COLLATE BINARY "
               "HAVING typeof(min(revision)) = 'integer' AND typeof(max(revision)) = 'integer' "
               "AND min(revision) = 1 AND count(revision) = max(revision) "
               "AND count(revision) = total(typeof(revision) = 'integer') "
               "ORDER BY 1, 2 LIMIT 1")


def _merged_gap_fits(db: Any) -> bool:
    """Whether :data:`_MERGED_GAP` answers what :data:`_ANY_GAP` answers on
    ``db``: both tables are the main schema's, neither definition names a
    collation (every comparison is BINARY, the join's as the merge's), and
    both id columns are declared TEXT (the join compares two TEXT columns
    without converting either, so a value equals only a value of its own
    storage class, numbers aside, as the merge compares them; NULL, which
    the merge takes as equal to NULL and the join as equal to nothing, is
    left out of the revisions)."""
    for table in ("facts", "revisions"):
        if _binary_definition(db, table) is None:
            return False
        types = [(r[2] or "").upper() for r in db.execute(f"PRAGMA main.table_info({table})")
                 if isinstance(r[1], str) and r[1].lower() == "fact_id"]
        if types != ["TEXT"]:
            return False
    return True


def _any_gap(db: Any) -> bool:
    """Whether :data:`_GAPS` may have a row to give, on a database
    integrity_check found sound (the revisions' index holds the table's
    rows): :data:`_MERGED_GAP` where it answers the same
    (:func:`_merged_gap_fits`), else :data:`_ANY_GAP`.  The merge's sorts
    keep what ``db``'s cache holds (:data:`REST_CACHE_KIB` on the checks'
    connection) and spill the rest to SQLite's temporary directory (that
    connection's sorter may: ``FactStore.in_background``); where they fail
    (a full directory), the scan without a sort answers.  An interrupt is
    raised as it is."""
    import sqlite3

    if _merged_gap_fits(db):
        try:
            return db.execute(_MERGED_GAP).fetchone() is not None
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT":
                raise
    return db.execute(_ANY_GAP).fetchone() is not None


def _binary_definition(db: Any, table: str) -> str | None:
    """The definition of the main schema's table ``table``, upper-cased,
    where it has exactly one and it names no collation (every comparison
    of its columns is BINARY); None for any other.  (Each name as SQLite
    finds a table: its case folded for ASCII only, so not Python's
    lower(); "ä" and "Ä" are two tables.  A definition that is not UTF-8
    reads as bytes, InvalidText: not read, None.)"""
    sqls = [sql for (sql,) in db.execute(
        "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
        (table,))]
    if len(sqls) != 1 or not isinstance(sqls[0], str) or not sqls[0]:
        return None
    text = sqls[0].upper()
    return None if "COLLATE" in text else text


# the declared types of a key the walk takes (lecode's): a column's affinity
# is its type's in a STRICT table as in any other
_KEY_TYPES = frozenset({"TEXT", "INTEGER"})


def _orphans_in_key_order(db: Any, child: str) -> list[tuple[str, int, str, int]] | None:
    """What ``PRAGMA foreign_key_check(child)`` returns, (child, rowid,
    parent, 0) in rowid order, for a table whose one foreign key is the
    shape of lecode's schema (revisions to facts, provenance and
    source_refs to revisions): None for any other, which the pragma checks.

    The pragma walks the child in rowid order and looks each key up in the
    parent's index; rowids are in no key order, so on a large store that
    is one random lookup a row (at 1,000,000 facts, 4.2 s for revisions and
    source_refs, mostly reading evicted pages again).  Walked in key order
    the lookups go through the parent's index once, in order (0.8 s).

    The same rows, because the walk is taken only where the pragma's
    lookup is the query's:

    - the parent's primary key is a unique index of exactly the referenced
      columns, in order (the index the pragma uses; SQLite refuses one that
      repeats a column, or whose collation is not the column's: "foreign
      key mismatch", left to the pragma);
    - neither table's definition names a collation: every comparison, the
      index's and the walk's order, is BINARY (the walk's order never needs
      a collation this connection may not have);
    - each key column is TEXT or INTEGER, as the parent's; the child's value
      is compared as ``+c.col`` (an expression without affinity), so the
      parent column's affinity is applied to it before the comparison, as
      the pragma applies it before its lookup (even to a value stored
      against its own column's affinity, in a damaged store);
    - a child row with a NULL in its key is skipped, as the pragma skips it;
    - the child's rowid is its rowid: a table without one, or with a column
      (generated ones included) that takes one of its names, or whose
      definition says ROWID at all, is left to the pragma;
    - both tables are the main schema's (a TEMP table of the parent's name
      does not stand in for it)."""
    from ..facts import sql_name as q

    keys = db.execute(f"PRAGMA main.foreign_key_list({q(child)})").fetchall()
    if not keys or len({k[0] for k in keys}) != 1:
        return None
    keys.sort(key=lambda k: k[1])
    parent = keys[0][2]
    pairs = [(k[3], k[4]) for k in keys]
    if not all(isinstance(v, str) for v in (parent, *(v for pair in pairs for v in pair))):
        return None     # (no key column named, or a name that is not UTF-8: bytes)
    defined = [_binary_definition(db, name) for name in (child, parent)]
    if defined[0] is None or defined[1] is None or "ROWID" in defined[0]:
        return None     # (ROWID: WITHOUT ROWID, a column of the name)
    cols = {r[1].lower(): (r[2] or "").upper()
            for r in db.execute(f"PRAGMA main.table_xinfo({q(child)})")}
    ptypes = {r[1].lower(): (r[2] or "").upper()
              for r in db.execute(f"PRAGMA main.table_info({q(parent)})")}
    pk = [r[1] for r in db.execute(f"PRAGMA main.index_list({q(parent)})")
          if r[3] == "pk" and r[2] and not r[4]]
    indexed = ([r[2] for r in db.execute(f"PRAGMA main.index_info({q(pk[0])})")]
               if len(pk) == 1 else None)
    if (indexed is None or not {"rowid", "_rowid_", "oid"}.isdisjoint(cols)
            or [(c or "").lower() for c in indexed] != [to.lower() for _fr, to in pairs]
            or any(cols.get(fr.lower()) not in _KEY_TYPES
                   or cols[fr.lower()] != ptypes.get(to.lower()) for fr, to in pairs)):
        return None
    sql = (f"SELECT c.rowid FROM main.{q(child)} c WHERE "
           + " AND ".join(f"c.{q(fr)} IS NOT NULL" for fr, _to in pairs)
           + f" AND NOT EXISTS (SELECT 1 FROM main.{q(parent)} p WHERE "
           + " AND ".join(f"p.{q(to)} = +c.{q(fr)}" for fr, to in pairs)
           + ") ORDER BY " + ", ".join(f"c.{q(fr)}" for fr, _to in pairs))
    return [(child, r, parent, 0) for r in sorted(r for (r,) in db.execute(sql))]


def _num(value: Any) -> int | None:
    """A stored revision for a finding's integer field: None when it is no
    integer (a BLOB, a real, a text: the message says what it is)."""
    return value if type(value) is int else None


def _odd_revision(value: Any) -> str:
    """What a finding's message adds for a stored revision that is no
    integer (its field is then null): ``" (revision stored as b'\\x02')"``."""
    return "" if type(value) is int else f" (revision stored as {_said(value)})"


def _said(value: Any) -> str:
    """A stored revision in a finding's message: an integer as it is, any
    other value as Python writes it (``'1x'``, ``b'\\x01'``, ``None``)."""
    return str(value) if type(value) is int else repr(value)


def _load_facts(audit: Audit, fs: Any, db: Any) -> None:
    """The generation and the exclusions.  The facts and their references are
    not held: the references are read one session at a time as the
    transcripts are audited (:func:`source_groups`), the facts streamed
    afterwards (:func:`fact_findings`), so memory does not grow with them."""
    from ..errors import StoreCorrupt
    from ..facts import all_exclusions, database_id, forgotten_ids

    try:
        audit._generation = fs.generation()
        audit._generation_known = True
    except StoreCorrupt:
        audit._generation = 0   # reported by _db_checks; the epoch check cannot run
        audit._generation_known = False
    if "source_refs" in fs.tables:
        # (only a valid session id names a transcript: another, '../x' say,
        # is the reference's invalid_ref, never a file to open -- before
        # 2026-12-07 one was opened through a symbolic link's sessions/)
        from ..sourceref import SESSION_ID_RE

        audit._cited = frozenset(sid for (sid,) in db.execute(
            "SELECT DISTINCT session_id FROM source_refs")
            if isinstance(sid, str) and SESSION_ID_RE.match(sid))
    audit._exclusion_count = int(db.execute("SELECT count(*) FROM exclusions").fetchone()[0])
    audit._database_id = database_id(db)
    audit._forgotten = forgotten_ids(db)     # (one query: for memctl's mark)
    audit._excluded = all_exclusions(db)


def source_groups(audit: Audit) -> Iterator[tuple[str, list[StoredSource]]]:
    """Every well-formed reference of every revision, one session's at a
    time, in session id order, as its stored values
    (``FactStore.stored_sources_by_session``); none without a readable
    database."""
    if audit._fs is None:
        return
    try:
        yield from audit._fs.stored_sources_by_session()
    except Exception as exc:    # noqa: BLE001 - with --all-projects, the facts' finding
        why = _unread_why(audit, exc)
        if why is None:
            raise
        audit._facts_failed = why   # (fact_findings reports it; no fact is judged)


def _revision(fid: Any, stored: tuple[Any, ...]) -> Any:
    """A stored revision as the audit reads it: a reference that does not
    parse, or a row that cannot be trusted (``row_problem``), has no source
    and says why in ``source_error`` (reported as ``fact.hidden``)."""
    from ..facts import Revision, has_source, provenance_problem, provenance_rows, row_problem, row_text

    rev, text, created, sid, seqs, digest, prov = stored
    ref: SourceRef | None = None
    error: str | None = None
    if has_source(sid, seqs, digest):
        try:
            raw = orjson.loads(seqs)
            ref = SourceRef(sid, tuple(raw) if isinstance(raw, list) else (), digest)
        except (orjson.JSONDecodeError, UsageError, TypeError) as exc:
            error = f"the stored source reference is malformed: {exc}"
    problem = row_problem(fid, text) or provenance_problem(prov)
    if problem is not None:   # data with a status, never trusted (issue 16.4)
        ref, error, prov = None, problem, None
    return Revision(fid, rev, row_text(text), row_text(created), ref, provenance_rows(prov), error)


# what _fact_part gives: a finding (code, message, location), or at the end
# of a part made by the child, its counts (None, facts, {status: facts})
FactItem = tuple[Any, Any, dict[str, Any]]


def _item(code: str, message: str, **loc: Any) -> FactItem:
    return code, message, loc


def fact_findings(audit: Audit) -> Iterator[Finding | None]:
    """Every fact's status and findings, the facts streamed in id order (a
    fact whose current revision has no row, or that has no revision at all,
    is hidden as the listing shows it), against the statuses the transcript
    jobs gave the references (only the ones not valid are kept).  With
    ``audit._child`` (:func:`fact_helper`), the facts of the second half of
    the ids are checked by that forked child: the same findings, in the
    same order, and the same counts."""
    from ..split import pickles_written

    fs = audit._fs
    if fs is None:
        return
    summary = audit.summary
    total = 0   # (the summary's once all are counted: until then not known)

    def count(status: str) -> None:
        nonlocal total
        total += 1
        summary.facts[status] += 1

    def findings(items: Iterator[FactItem]) -> Iterator[Finding | None]:
        nonlocal total
        for code, message, loc in items:
            if code is None:        # the child's counts
                total += message
                for status, n in loc.items():
                    summary.facts[status] += n
                continue
            yield audit._f(code, message, **loc)

    listing, audit._listing = audit._listing, None
    child, audit._child = audit._child, None
    if audit._facts_failed is not None:
        # (the references could not all be read: no fact is judged without
        # the statuses of its references)
        if child is not None:
            child.cancel()
        yield _unread_facts(audit, audit._facts_failed)
        return
    try:
        if child is None:
            yield from findings(_fact_part(audit, fs, listing or fs.start_listing(), count))
        else:
            # (a child that fails leaves its part to this process, which then
            # meets the same error: split.EarlyChild.items)
            yield from findings(child.items(
                lambda part: _fact_part(audit, fs, fs.start_listing(part=part), count),
                (audit._statuses, audit._excluded), pickles_written))
        summary.facts_total = total
    except Exception as exc:    # noqa: BLE001 - a database error is the finding, with --all-projects
        why = _unread_why(audit, exc)
        if why is None:
            raise
        summary.facts.clear()   # (not all counted: not known)
        yield _unread_facts(audit, why)


def _unread_why(audit: Audit, exc: Exception) -> str | None:
    """What a database error met while the facts or their references were
    read says, when it is ``audit``'s finding: with ``--all-projects``
    (``audit.listed``) only, where one store's damage must not stop the
    report of the others.  None: the error is raised (``validate`` of one
    store exits 5 there, docs/FORMAT.md)."""
    from ..errors import StoreCorrupt
    from ..facts import is_damage

    if not audit.listed:
        return None
    if isinstance(exc, StoreCorrupt):
        return exc.message
    if is_damage(exc):      # (not an interrupt, an I/O error: raised)
        return f"database error: {exc}"
    return None


def _unread_facts(audit: Audit, why: str) -> Finding | None:
    return audit._f("db.unreadable", f"the facts could not all be read ({why}): those from "
                    "there on were not audited", file=FACTS_DB)


def fact_helper(audit: Audit, fs: Any) -> Any:
    """The child that checks the second half of the fact ids
    (:func:`fact_findings`), forked now (``split.EarlyChild``: before the
    database checks start their thread), or None: one process (a store of
    fewer than ``split.SPLIT_LEAST`` facts, one CPU, or no fork now)."""
    from ..split import EarlyChild, split_bound

    bound = split_bound(fs) if audit.parallel else None
    if bound is None:
        return None
    import pickle

    def work(payload: Any, part: Part) -> Iterator[FactItem]:
        # the child's part, with the statuses and exclusions the parent read;
        # the facts it counted go before each finding, and last (the parent
        # adds them to its summary where one process counts them: a reader
        # that stops after a finding sees the facts up to its own counted)
        audit._statuses, audit._excluded = payload
        counts: dict[str, int] = {}

        def tally(status: str) -> None:
            counts[status] = counts.get(status, 0) + 1

        for item in _fact_part(audit, fs, fs.start_listing(part=part), tally):
            if counts:
                yield None, sum(counts.values()), counts
                counts = {}
            yield item
        if counts:
            yield None, sum(counts.values()), counts

    child = EarlyChild(fs, bound, work, pickle.dumps)
    return child if child.pid is not None else None


def _fact_part(audit: Audit, fs: Any, listing: Any, count: Callable[[str], None]
               ) -> Iterator[FactItem]:
    """:func:`fact_findings` of the facts of ``listing`` (a part of them when
    split), each finding as (code, message, location), each fact counted by
    ``count`` with its status."""
    from ..facts import FACT_ID_RE, StoredTwice, fact_status, flag_stored_twice, plain_seqs, row_text
    from ..sourceref import VALID, EvaluatedStatuses

    statuses = EvaluatedStatuses({ref: st for (ref, purpose), st in audit._statuses.items()
                                  if purpose == "durable"})
    bad = statuses.by_values

    def plainly_valid(current: Any, stored: list[tuple[Any, ...]]) -> bool:
        """Every revision plain (``facts.plain_seqs``: a well-formed reference,
        no legacy provenance), its reference validated, and the current one
        the last of exactly 1..current: such a fact is valid and has no finding (an excluded
        position makes its reference not valid), so it is counted without
        making its objects."""
        prev = None
        for rev in stored:
            seqs = plain_seqs(rev)
            if seqs is None or rev[0] == prev or bad and (rev[3], seqs, rev[5]) in bad:
                return False     # (a number stored twice: flag_stored_twice below)
            prev = rev[0]
        # (and the revisions exactly 1..current: fact_status's revision_gap)
        return (bool(stored) and type(current) is int and stored[-1][0] == current
                and len(stored) == current and stored[0][0] == 1)

    def excluded(sid: str) -> frozenset[int]:
        return audit._excluded.get(sid, frozenset())

    gone = fs.forgotten_present()   # (db.forgotten_fact_present: hidden, as every reader says)
    for group in listing.groups(bare=True):
        fid, stored = group[0], group[4]
        forgotten = bool(gone) and row_text(fid) in gone
        if type(fid) is str and FACT_ID_RE.match(fid) and not forgotten \
                and plainly_valid(group[1], stored):
            count(VALID)
            continue
        rl = flag_stored_twice([_revision(fid, r) for r in stored])
        shown = row_text(fid)   # a BLOB id is reported as text, as the listing shows it
        # (the current revision as the listing's Fact shows it)
        cur = group[1]
        st, _rev = fact_status(rl, statuses, cur if isinstance(cur, StoredTwice) else _num(cur),
                               excluded, forgotten)
        count(st.status)   # (a missing current revision: db.dangling_ref)
        said: set[tuple[Any, str]] = set()
        for r in rl:
            # (a revision stored as no integer: null in the finding, the
            # message says what is stored)
            rev, odd = _num(r.revision), _odd_revision(r.revision)
            if r.source is None and r.source_error is not None:
                if (r.revision, r.source_error) not in said:   # (a revision stored twice: once)
                    said.add((r.revision, r.source_error))
                    yield _item("fact.hidden", r.source_error + odd, fact_id=shown,
                                revision=rev, reason="invalid_ref")
                continue
            hit: tuple[str, int] | None = None
            for sid, seqs in sorted(r.evidence_positions().items()):
                common = excluded(sid).intersection(seqs)
                if common:
                    hit = (sid, min(common))
                    break
            s = statuses.get(r.source) if r.source is not None else None
            # one finding per revision, the status `facts` lists for it: an
            # exclusion that overlaps its evidence makes it fact.suppressed
            # when that is the status's reason (or it has no SourceRef);
            # another reason the evidence reads first (missing, stale, an
            # epoch, an undo) is that finding, saying the exclusion too
            # (the audit and the engine agree on every source's reason:
            # tests/test_engine.py)
            if hit and (s is None or s.ok or s.reason == "excluded"):
                yield _item("fact.suppressed",
                            f"evidence {hit[0]}:{hit[1]} is excluded by a forget; the fact is "
                            "kept but suppressed from recall" + odd, fact_id=shown, revision=rev,
                            session_id=hit[0], seq=hit[1])
                continue
            if r.source is None:
                what = "legacy provenance" if r.provenance else "no evidence at all"
                yield _item("fact.unverified", f"{what}, no SourceRef{odd}",
                            fact_id=shown, revision=rev, reason="legacy_provenance")
                continue
            if s is None or s.ok:
                continue
            code = {"missing": "fact.missing", "stale": "fact.stale"}.get(s.status, "fact.hidden")
            if s.reason == "excluded":
                code = "fact.suppressed"
            detail = f": {s.detail}" if s.detail else ""
            also = (f"; evidence {hit[0]}:{hit[1]} is excluded by a forget too" if hit
                    and code != "fact.suppressed" else "")
            yield _item(code, f"evidence {r.source.label()} is {s.status} ({s.reason}){detail}"
                        + also + odd, fact_id=shown, revision=rev,
                        session_id=r.source.session_id, seq=s.seq, reason=s.reason)
