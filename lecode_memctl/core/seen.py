"""What memctl has seen of each store, kept outside the store: the highest
exclusion generation and exclusion count, and the ids of the forgotten facts
(its "mark").

A forget only ever raises both numbers and adds an id to the store's
``forgotten`` table.  A facts database put back from an older copy, or
deleted, lowers them, and forgotten evidence becomes valid again; when no
generated message was written since the forget, nothing inside the store can
tell.  The mark can: ``memctl validate`` reports a store below its mark as
``db.rolled_back``.  The numbers alone do not hold it: a later forget on the
rolled-back database raises them again (before 2026-12-07 one such forget hid
the roll-back for good, the fact forgotten before it valid again), so the mark
also keeps the forgotten ids it has seen (a union that only grows, the latest
:data:`MAX_FORGOTTEN` by generation), and an id it saw forgotten that the
store's ``forgotten`` table no longer holds is a roll-back too.

The marks live in the user's XDG state directory, ``$XDG_STATE_HOME/lecode-memctl``
(or ``~/.local/state/lecode-memctl``), one file per store:
``stores/<first 32 hex digits of sha256(realpath of the store)>.json`` holding
``{"store", "slug", "database", "generation", "exclusions", "forgotten",
"updated"}`` (``forgotten``: ``{fact id: generation}``; absent in a mark
written before 2026-12-07, which is read as one that saw no id),
written atomically (``atomic.atomic_write``).  Recording is best effort: a
state directory that cannot be used never fails a command (the mark is then
not kept).

A path is not a store: another store may be unpacked where one was (an
evidence copy).  The mark therefore says whose it is, the store's slug, and
is compared only with a store of that slug (:func:`same_store`); a mark of
another one is replaced when marks are recorded and never reported.  It also
keeps its database's identity (``facts.database_id``: the time its first
migration was applied, which a copy or an older backup keeps and a database
created separately does not share), which the finding names when it differs
(:func:`other_database`: the database deleted and created again, or another
machine's copy of the same project's store mounted at the same path).  A
mark without them (written before they were kept) is compared with whatever
store is at its path, as it was then.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Container, Iterator, Mapping
from pathlib import Path

import orjson

from ._record import record as _record
from .atomic import atomic_write, open_nofollow, read_at_most, resolves_inside
from .errors import MemctlError
from .hashing import sha256

STATE_NAME = "lecode-memctl"
MARKS_DIR = "stores"
# The forgotten ids a mark keeps at most: the latest by generation (an id is
# 16 hex digits; each takes about 30 bytes of the file)
MAX_FORGOTTEN = 4096
# a fact id longer than this (not one lecode writes) is not kept in a mark
_MAX_ID = 128
# a mark file is a few hundred bytes plus its forgotten ids (at most
# MAX_FORGOTTEN of at most _MAX_ID characters); anything larger is not ours
_MAX_MARK = 1 << 20
# How long :func:`record` waits for ``stores/.lock`` (shared by every store on
# the machine) before it gives up and records nothing: a process holding it
# (stopped, hung) must not hold up a forget already committed.
LOCK_WAIT = 2.0
_LOCK_POLL = 0.05


class _Run:
    """One command's records (:func:`lock_wait_at_most`): how long each may
    wait for the lock, and whether one of them already waited in vain."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.gave_up = False


# the runs open (innermost last); none: each record waits LOCK_WAIT alone
_RUNS: list[_Run] = []


@_record(frozen=True)
class Mark:
    store: str
    generation: int
    exclusions: int
    updated: float
    # whose mark it is (None: unknown -- a mark written before they were kept,
    # a store with no database, a database that cannot say; see same_store)
    slug: str | None = None
    database: str | None = None
    # the ids of the forgotten facts seen, each with its forget's generation
    # (the latest MAX_FORGOTTEN by generation); () in a mark written before
    # 2026-12-07
    forgotten: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"store": self.store, "slug": self.slug, "database": self.database,
                "generation": self.generation, "exclusions": self.exclusions,
                "forgotten": dict(self.forgotten), "updated": self.updated}


def _keepable_id(fid: object) -> bool:
    """Whether a forgotten fact id is kept in a mark: printable ASCII (what
    lecode writes: 16 hex digits) of at most :data:`_MAX_ID` characters; any
    other (a hand-made row) is not, and so never compared."""
    return isinstance(fid, str) and 0 < len(fid) <= _MAX_ID and fid.isascii() \
        and fid.isprintable()


def _kept_ids(ids: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The forgotten ids a mark keeps: at most :data:`MAX_FORGOTTEN`, the
    latest by generation (ties by id), in that order."""
    ordered = sorted(((k, v) for k, v in ids.items() if _keepable_id(k) and _valid_count(v)),
                     key=lambda kv: (-kv[1], kv[0]))
    return tuple(ordered[:MAX_FORGOTTEN])


def _path_text(store_path: str | os.PathLike[str]) -> str:
    """The store's real path as JSON text: bytes that are not UTF-8 (a name
    holding 0x9b) are written as \\xNN, so the mark can be stored at all."""
    return _text(os.path.realpath(store_path))


def _text(value: str) -> str:
    """A name as JSON text, as :func:`_path_text` writes a path: a slug that is
    a directory name not in UTF-8 (surrogate escapes) as \\xNN."""
    return os.fsencode(value).decode("utf-8", "backslashreplace")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/lecode-memctl``, else ``$HOME/.local/state/lecode-memctl``.
    An empty or relative ``XDG_STATE_HOME`` is ignored (the XDG base directory spec)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / STATE_NAME
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".local" / "state" / STATE_NAME


def mark_path(state: Path, store_path: str | os.PathLike[str]) -> Path:
    key = sha256(os.fsencode(os.path.realpath(store_path))).hexdigest()[:32]
    return state / MARKS_DIR / f"{key}.json"


def _valid_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def load(state: Path, store_path: str | os.PathLike[str]) -> Mark | None:
    """The store's mark, or None: no mark yet, or a file that is not one (a
    symlink, not a regular file, not our JSON, another store's path)."""
    path = mark_path(state, store_path)
    try:
        fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_MARK:
            return None     # (a damaged, huge file is not read: not ours)
        # at most one byte more than a mark may hold (a file grown meanwhile)
        raw = read_at_most(fd, _MAX_MARK + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > _MAX_MARK:
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    gen, excl, store, updated = (doc.get("generation"), doc.get("exclusions"), doc.get("store"),
                                 doc.get("updated"))
    slug, database = doc.get("slug"), doc.get("database")
    if not (_valid_count(gen) and _valid_count(excl) and isinstance(store, str)):
        return None
    if store != _path_text(store_path):
        return None
    # absent or null: unknown (a mark written before they were kept)
    if not (slug is None or isinstance(slug, str)) or not (database is None
                                                         or isinstance(database, str)):
        return None
    # absent or null: none seen (a mark written before they were kept)
    ids = doc.get("forgotten")
    if ids is None:
        ids = {}
    # (more ids than this memctl keeps, or an entry it cannot keep, from a
    # later one or a hand edit: _kept_ids keeps the others, the mark read;
    # refusing it lost the numbers too at the next record)
    if not isinstance(ids, dict):
        return None
    assert isinstance(gen, int) and isinstance(excl, int)
    return Mark(store, gen, excl, float(updated) if isinstance(updated, int | float) else 0.0,
                slug or None, database or None, _kept_ids(ids))


@contextlib.contextmanager
def lock_wait_at_most(seconds: float | None) -> Iterator[None]:
    """One run of records (a command's: ``validate --all-projects``
    records a mark per store): within it, :func:`record` waits for
    ``stores/.lock`` at most ``seconds`` (a command's ``--lock-wait``; None:
    no bound of its own), never more than :data:`LOCK_WAIT`, and once a
    record of the run has waited in vain, the later ones try the lock once,
    without waiting.  Outside any run, each record waits its own bound: a
    long-lived process (the agent) is not marked by one slow moment."""
    bound = LOCK_WAIT if seconds is None else min(LOCK_WAIT, max(float(seconds), 0.0))
    _RUNS.append(_Run(bound))
    try:
        yield
    finally:
        _RUNS.pop()


#: Who is told when ``stores/.lock`` was held too long and a mark was
#: therefore not recorded: None (the default: a library writes nothing on
#: its caller's stderr, and :func:`record` returns None) or a callable given
#: the message.  memctl's command line sets one (``cli.state``), which prints
#: it as a ``memctl: note:`` line.
busy_note: Callable[[str], None] | None = None


def _busy_note(lock: Path, store_path: str | os.PathLike[str], wait: float | None) -> None:
    """Tell :data:`busy_note`, if anyone listens, that the lock could not be
    taken: the mark is not recorded (the command itself is not failed by it).
    ``wait``: the seconds waited, or None when not waited (the run's lock was
    found held before)."""
    if busy_note is not None:
        waited = (f"waited {wait:g} s" if wait is not None
                  else "not waited for: held already for a store before it in this run")
        busy_note(f"the state directory's lock {_text(os.fspath(lock))} is held by another "
                  f"process ({waited}): the exclusion generation seen of the store "
                  f"{_text(os.fspath(store_path))} is not recorded")


def same_store(mark: Mark, slug: str | None, database: str | None = None) -> bool:
    """Whether ``mark`` is of the store now at its path, whose slug is
    ``slug`` and whose database's identity is ``database``
    (``facts.database_id``; None: no database, or one that cannot say).  The
    database the mark saw (both identities known and equal: the same
    database, or a copy or an older backup of it) is the same store whatever
    slug it is read under (a mistyped ``--slug`` must not make its mark
    another store's, to be replaced by rolled-back values).  Otherwise the
    slugs decide, an unknown one (a mark without a slug, a store whose slug
    cannot be told) matching any.  Another database of the same slug is the
    same store: one deleted and created again (``facts.sqlite3`` removed to
    start afresh, the agent making a new one at its next write) has lost its
    forgets as surely as an older copy put back; the finding names it
    (:func:`other_database`).  A store of this slug with no database is the
    same store with its database deleted, as memctl cannot tell it from
    another copy of the store that never had one."""
    if mark.database is not None and database is not None and mark.database == _text(database):
        return True
    return mark.slug is None or slug is None or mark.slug == _text(slug)


def other_database(mark: Mark, database: str | None) -> bool:
    """Whether the database now at the store is known to be another one than
    the mark saw: both identities known (``facts.database_id``) and
    different -- created separately, not a copy or an older backup of it."""
    return mark.database is not None and database is not None and mark.database != _text(database)


def inside_store(state: Path, store_path: str | os.PathLike[str]) -> bool:
    """Whether the state directory resolves inside the store (``XDG_STATE_HOME``
    or ``HOME`` pointing into it): no mark is written there -- the store
    must not change, and a mark kept in the store rolls back with it."""
    return resolves_inside(state, store_path)


def record(state: Path, store_path: str | os.PathLike[str], generation: int,
           exclusions: int, *, slug: str | None = None,
           database: str | None = None,
           forgotten: Mapping[str, int] | None = None) -> Mark | None:
    """Raise the store's mark to at least (generation, exclusions), each kept at
    its maximum, and add ``forgotten`` (the store's forgotten fact ids, each
    with its generation: :func:`facts.forgotten_ids`) to the ids it keeps
    (the union, the latest :data:`MAX_FORGOTTEN` by generation); returns
    the mark now kept, or None when the state directory
    cannot be used, or lies inside the store (:func:`inside_store`: nothing is
    written).  ``slug`` and ``database`` say whose store it is
    (:func:`same_store`): a mark of another store is replaced, not raised; a
    mark of the same store takes the identity given (an unknown one keeps the
    mark's).  Concurrent recorders are serialised by ``flock`` on
    ``stores/.lock``, so no higher value is ever overwritten by a lower one.
    The lock is waited for at most :data:`LOCK_WAIT` seconds (less within
    :func:`lock_wait_at_most`: a command's ``--lock-wait``): held longer
    by another process (one stopped or hung while holding it), nothing is
    recorded, :data:`busy_note` is told, and None is returned; after that,
    the later records of the same run try the lock once, without
    waiting."""
    if inside_store(state, store_path):
        return None
    path = mark_path(state, store_path)
    try:
        from .atomic import ensure_dir, lock_within

        ensure_dir(path.parent)
        lock = open_nofollow(path.parent / ".lock", os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o600)
    except (OSError, MemctlError, ValueError):
        return None
    try:
        run = _RUNS[-1] if _RUNS else None
        wait = None if run is not None and run.gave_up else (run.wait if run else LOCK_WAIT)
        if not lock_within(lock, wait or 0.0, _LOCK_POLL):
            if run is not None:
                run.gave_up = True
            _busy_note(path.parent / ".lock", store_path, wait)
            return None
        old = load(state, store_path)
        if old is not None and not same_store(old, slug, database):
            old = None          # another store's: replaced
        gen = max(generation, old.generation if old else 0)
        excl = max(exclusions, old.exclusions if old else 0)
        slug = _text(slug) if slug else (old.slug if old else None)
        # (the identity of the database last seen: another one of the same
        # store keeps the mark's values, which only rise; one below the mark
        # keeps the mark's identity too, so that the finding goes on saying
        # it is another database, not an older copy of this one)
        below = old is not None and database is not None and regression(
            old, generation, exclusions, slug=slug, database=database, forgotten=forgotten)
        database = (old.database if below and old is not None and old.database
                    else _text(database) if database else (old.database if old else None))
        ids = dict(old.forgotten) if old else {}
        for fid, fgen in (forgotten or {}).items():
            if _keepable_id(fid) and _valid_count(fgen):
                ids[fid] = max(fgen, ids.get(fid, 0))
        kept_ids = _kept_ids(ids)
        if old is not None and (old.generation, old.exclusions, old.slug, old.database,
                                old.forgotten) == (gen, excl, slug, database, kept_ids):
            return old
        # "updated": when these values were first seen (a mark that only
        # learns whose it is keeps its time)
        kept = old is not None and (old.generation, old.exclusions) == (gen, excl)
        mark = Mark(_path_text(store_path), gen, excl,
                    old.updated if kept and old is not None else time.time(), slug, database,
                    kept_ids)
        atomic_write(path, orjson.dumps(mark.to_json()) + b"\n", backup=False)
        return mark
    except (OSError, MemctlError):
        return None
    finally:
        os.close(lock)


def missing_forgotten(mark: Mark | None, forgotten: Container[str] | None) -> list[str]:
    """The ids ``mark`` saw forgotten that ``forgotten`` (the store's
    ``forgotten`` table's ids) does not hold, the latest first; none when
    ``forgotten`` is None (not known)."""
    if mark is None or forgotten is None:
        return []
    return [fid for fid, _gen in mark.forgotten if fid not in forgotten]


def regression(mark: Mark | None, generation: int, exclusions: int, *,
               slug: str | None = None, database: str | None = None,
               forgotten: Container[str] | None = None) -> bool:
    """True when the store is below what was seen of it: a mark of the same
    store (:func:`same_store`) with a higher generation, or more exclusions
    (forgets only ever add them), or an id it saw forgotten that the store's
    ``forgotten`` ids (None: not known, not compared) no longer hold (a
    forget since the roll-back raises the numbers again, never that).  A
    mark of another store is no roll-back."""
    return (mark is not None and same_store(mark, slug, database)
            and (generation < mark.generation or exclusions < mark.exclusions
                 or bool(missing_forgotten(mark, forgotten))))
