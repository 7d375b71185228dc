"""Where a store is and what is in it (store contract, "Layout of a store")."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ._lazy import lazy_compile
from ._record import record
from .errors import NotFound, StoreCorrupt, UsageError, raise_if_out_of_fds

# (a name of this module: typing.get_type_hints(Store) resolves its fields)
from .identity import ProjectIdentity
from .sourceref import SESSION_SUFFIX as SESSION_SUFFIX, session_file_id

if TYPE_CHECKING:
    from .inventory import (
        LayoutItem as LayoutItem,
        StoreEntry as StoreEntry,
        inventory as inventory,
        store_dirs as store_dirs,
        store_entries as store_entries,
    )
else:
    from ._lazy import lazy_getattr

    # Listing the stores and a store's contents (where, projects, migrate)
    # lives in inventory, loaded on first use (see core/_lazy.py).
    _MOVED = {name: ".inventory" for name in (
        "LayoutItem", "StoreEntry", "inventory", "store_dirs", "store_entries")}
    __getattr__ = lazy_getattr(__name__, _MOVED)

MEMORY_FILE = "MEMORY.md"
SCRATCHPAD_FILE = "scratchpad.md"
DAILY_DIR = "daily"
NOTES_DIR = "notes"
# SESSION_SUFFIX (sessions/<id>.jsonl) is sourceref's, beside the session id rule
SESSIONS_DIR = "sessions"
FACTS_DB = "facts.sqlite3"
DIR_MODE = 0o700
FILE_MODE = 0o600

# \Z, not $: "$" would accept a trailing newline (before 2026-12-07 it did)
_SLUG_RE = lazy_compile(r"(?:[a-z0-9][a-z0-9-]{0,39}-[0-9a-f]{12}|root-[0-9a-f]{12})\Z")


MEMORY_DIR = "memory"          # <config dir>/memory/<slug>/: where the stores are


def memory_root(config_dir: str | os.PathLike[str]) -> Path:
    return Path(config_dir) / MEMORY_DIR


def memory_names(config_dir: Path) -> list[str]:
    """Every name in ``<config>/memory/``, sorted (one listing, nothing followed
    or opened); empty when the directory is missing (no store yet).  Any
    other listing failure is ``StoreCorrupt`` (exit 5), a ``memory`` that is
    not a directory included ("cannot list: Not a directory"): no store can
    be listed there, which is not "no stores" (before 2026-12-07 it was
    empty, and ``validate --all-projects`` exited 0)."""
    root = memory_root(config_dir)
    try:
        return sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise_if_out_of_fds(exc, root)
        raise StoreCorrupt(f"{root}: cannot list: {exc.strerror}") from None


def session_ids(sessions_dir: str | os.PathLike[str], *,
                unlistable_ok: bool = False) -> list[str]:
    """Ids of the ``<id>.jsonl`` names in a store's ``sessions/`` whose id has
    the valid syntax, sorted (names only: no file is opened or followed);
    empty when the directory does not exist.  A directory that exists but
    cannot be listed (no read permission, not a directory, an I/O error) is
    ``StoreCorrupt`` (exit 5), as for ``memctl sessions``: it is not an empty
    one.  ``unlistable_ok`` makes it empty instead, for a caller that reports
    the directory itself (``validate``'s ``layout.unreadable``) or only
    guesses from it (completion, a slug from the headers, suggestions)."""
    try:
        names = os.listdir(sessions_dir)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise_if_out_of_fds(exc, os.fspath(sessions_dir))
        if unlistable_ok:
            return []
        raise StoreCorrupt(f"{os.fspath(sessions_dir)}: cannot list: "
                           f"{exc.strerror or exc}") from None
    return sorted(sid for sid in map(session_file_id, names) if sid is not None)


def session_file_exists(sessions_dir: str | os.PathLike[str], session_id: str) -> bool:
    """Whether ``sessions/<id>.jsonl`` is there (any kind of entry, nothing
    followed; ``session_id`` already checked by syntax).  Only "no such
    entry" is False: an entry that cannot be looked up (a ``sessions/``
    without search permission) is ``StoreCorrupt``, not a missing session
    (``os.path.lexists`` says False for both)."""
    path = os.path.join(os.fspath(sessions_dir), session_id + SESSION_SUFFIX)
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot look up: {exc.strerror or exc}") from None
    return True


class UnknownSlug(str):
    """The ``slug`` of a store given by path whose ``sessions/`` cannot be
    listed (``slug_source`` ``"unreadable"``): the directory's name, for a
    label, that no header may be matched against.  ``why`` is the message
    (:func:`store_given`); :func:`~lecode_memctl.core.sessions.header_problem`
    and :meth:`Store.known_slug` raise ``StoreCorrupt`` with it."""

    why: str

    def __new__(cls, name: str, why: str) -> UnknownSlug:
        self = super().__new__(cls, name)
        self.why = why
        return self

    def __reduce__(self) -> tuple[type[UnknownSlug], tuple[str, str]]:
        return UnknownSlug, (str(self), self.why)


def looks_like_slug(name: str) -> bool:
    return bool(_SLUG_RE.match(name))


@record(frozen=True)
class Store:
    """A project's store directory.  Creating the object touches nothing on disk."""

    path: Path
    slug: str
    identity: ProjectIdentity | None = None  # None when opened with --store
    # Where the slug came from: "project" (the identity of a project root),
    # "directory" (the store directory's name), "option" (--slug), "headers"
    # (the transcript headers of a store given by path), "unreadable" (a
    # store given by path whose sessions/ cannot be listed: the slug is
    # unknown, ``slug`` is the directory's name as a label only, and
    # ``known_slug`` refuses it); see store_given.
    slug_source: str = "directory"
    slug_detail: str = ""

    def slug_if_known(self) -> str | None:
        """``slug``, or None when it cannot be known (``slug_source``
        ``"unreadable"``): what ``where`` shows and memctl's mark records."""
        return None if self.slug_source == "unreadable" else self.slug

    def known_slug(self) -> str:
        """The slug a transcript header must name.  ``StoreCorrupt`` (exit 5,
        ``slug_detail`` says why) when it cannot be known: a store given by
        path whose ``sessions/`` cannot be listed, so no header was read
        (``slug_source`` ``"unreadable"``)."""
        if self.slug_source == "unreadable":
            raise StoreCorrupt(self.slug_detail)
        return self.slug

    @property
    def memory_file(self) -> Path:
        return self.path / MEMORY_FILE

    @property
    def scratchpad_file(self) -> Path:
        return self.path / SCRATCHPAD_FILE

    @property
    def daily_dir(self) -> Path:
        return self.path / DAILY_DIR

    @property
    def notes_dir(self) -> Path:
        return self.path / NOTES_DIR

    @property
    def sessions_dir(self) -> Path:
        return self.path / SESSIONS_DIR

    @property
    def facts_db(self) -> Path:
        return self.path / FACTS_DB

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def session_ids(self, *, unlistable_ok: bool = False) -> list[str]:
        """The store's session ids (``session_ids`` on its ``sessions/``)."""
        return session_ids(self.sessions_dir, unlistable_ok=unlistable_ok)

    def require(self) -> Store:
        """The one check of a store directory before it is read: ``NotFound``
        (exit 3) when nothing is there; ``StoreCorrupt`` (exit 5) when it is a
        symbolic link (never followed), not a directory, or cannot be stat'ed:
        something is there but it is not a readable store (store contract:
        a symlink or a non-directory in a directory's place is refused as an
        unreadable store)."""
        from .atomic import lstat_dir  # atomic imports this module

        if lstat_dir(self.path, link_what="store directory is") is None:
            where = f" for {self.identity.root}" if self.identity else ""
            raise NotFound(f"no memory store{where} (expected at {self.path})")
        return self


def store_for_project(config_dir: str | os.PathLike[str], project: str | os.PathLike[str]) -> Store:
    """The store of the project that contains the path ``project``: under
    ``<config_dir>/memory/``, named by the project's slug (store contract,
    "Where a project's store is").  Creating it touches nothing on disk."""
    from .config import path_text
    from .identity import resolve_project  # not imported by commands given --store

    config_dir = path_text(config_dir, "store_for_project: config_dir")
    ident = resolve_project(path_text(project, "store_for_project: project"))
    return Store(memory_root(config_dir) / ident.slug, ident.slug, ident, "project",
                 "the project root")


def check_store_arg(store: object, what: str) -> None:
    """UsageError for a ``store`` argument of the public API that is not a
    :class:`Store` (a path given as text, say: before 2026-12-07 a raw
    AttributeError at its first use)."""
    if not isinstance(store, Store):
        raise UsageError(f"{what} takes a Store (store_at(path), or open_project(...).store), "
                         f"not {type(store).__name__}")


def store_at(path: str | os.PathLike[str]) -> Store:
    """The store directory ``path`` whose name is its slug: a directory under
    ``<config>/memory/``.  A store given by the user (``--store``) goes through
    :func:`store_given` instead, which can take the slug from its transcripts."""
    from .config import path_text

    p = Path(os.path.abspath(path_text(path, "store_at: path")))
    return Store(p, p.name, None)


def check_slug(value: str) -> str:
    """``--slug``: a store slug as the contract shapes it (``name-<12 hex>``)."""
    if not looks_like_slug(value):
        raise UsageError(f"--slug {value!r} is not a store slug (NAME-HASH: lower-case letters, "
                         "digits and '-', then '-' and 12 hex digits; 'memctl where' prints one)")
    return value


def store_given(path: str | os.PathLike[str], slug: str | None = None) -> Store:
    """A store named by path (``--store``, an evidence copy under any name), and
    the slug its transcripts are checked against (issue 11):

    1. ``slug`` (``--slug``) when given;
    2. else the directory's name when it is slug-shaped and its parent is
       named ``memory``: ``<config dir>/memory/<slug>/``, the place the store
       contract gives a store, whose name is its slug (so ``--store`` on a
       store where lecode keeps it refuses what ``--project`` refuses: a
       transcript whose header names another project, however many agree;
       before 2026-12-07 headers that all named another project were taken);
    3. else the ``project`` the transcript headers name, when they agree;
    4. headers that disagree: the directory's name when it is one of them (the
       store where lecode keeps it), else the slug most headers name (a copy
       under another name); the transcripts naming another project are then
       refused, and ``validate`` reports each one (``session.refused``);
    5. else (no header, or a tie) the directory's name.

    Only slug-shaped ``project`` values count.  Reads the first line of each
    transcript; writes nothing.

    A ``sessions/`` directory that exists but cannot be listed leaves the
    slug unknown: its transcripts may still be opened by name, and the
    directory's name would refuse them as another project's (before
    2026-12-07 it was taken).  The Store's ``slug_source`` is then
    ``"unreadable"``, its ``slug`` the directory's name as a label only, and
    every check of a transcript's header against it is ``StoreCorrupt``
    (exit 5, "cannot list", naming ``--slug``: :meth:`Store.known_slug`);
    what needs no slug (the Markdown files, ``where``) still works.
    """
    p = Path(os.path.abspath(os.fspath(path)))
    if slug is not None:
        return Store(p, check_slug(slug), None, "option", "--slug")
    if p.parent.name == MEMORY_DIR and looks_like_slug(p.name):
        return Store(p, p.name, None, "directory",
                     f"the directory name (a store in a config directory's {MEMORY_DIR}/, "
                     "where a store's name is its slug)")
    from .sessions import SessionStore

    try:
        found = SessionStore(Store(p, p.name)).header_projects(strict=True)
    except StoreCorrupt as exc:
        why = (f"{exc.message}; the slug its transcripts must name comes from their "
               "headers, so it is unknown (--slug SLUG names it without reading them)")
        return Store(p, UnknownSlug(p.name, why), None, "unreadable", why)
    counts = {k: n for k, n in found.items() if looks_like_slug(k)}
    total = sum(counts.values())
    if len(counts) == 1:
        (only, n), = counts.items()
        return Store(p, only, None, "headers",
                     f"the transcript headers ({'all ' if n > 1 else ''}{n} agree)")
    if not counts:
        unread, listed = _unreadable_transcripts(p / SESSIONS_DIR)
        if unread:
            # (a header there that no one could read: not "no header names one")
            return Store(p, p.name, None, "directory",
                         f"the directory name (no readable transcript header names a project; "
                         f"{unread} of {listed} transcript{'s' if listed != 1 else ''} could "
                         "not be read)")
        return Store(p, p.name, None, "directory",
                     "the directory name (no transcript header names a project)")
    others = ", ".join(f"{k} ({n})" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    if p.name in counts:
        return Store(p, p.name, None, "directory",
                     f"the directory name (one of the projects the transcript headers "
                     f"name: {others})")
    best = max(counts.values())
    top = [k for k, n in counts.items() if n == best]
    if len(top) == 1:
        return Store(p, top[0], None, "headers",
                     f"the transcript headers (the project {best} of {total} name; they "
                     f"disagree: {others})")
    return Store(p, p.name, None, "directory",
                 f"the directory name (the transcript headers disagree with no majority: {others})")


def _unreadable_transcripts(sessions_dir: Path) -> tuple[int, int]:
    """How many of the transcripts listed in ``sessions_dir`` are regular
    files that cannot be opened for reading (mode 000, say), and how many are
    listed: their headers may name a project, but no one can say which.  (A
    symbolic link or a file that is not regular is refused, not unread.)
    Only asked when no header named a project."""
    ids = session_ids(sessions_dir, unlistable_ok=True)
    unread = 0
    for sid in ids:
        path = sessions_dir / (sid + SESSION_SUFFIX)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            continue        # (gone meanwhile)
        except OSError:
            unread += 1
            continue
        os.close(fd)
    return unread, len(ids)


def legacy_store(config_dir: Path, cwd: str | os.PathLike[str]) -> Store:
    """The cwd-scoped store older lecode versions used for working directory ``cwd``."""
    from .identity import slug

    d = os.path.realpath(os.fspath(cwd))
    s = slug(d)
    return Store(memory_root(config_dir) / s, s, None)


def existing_legacy_store(config_dir: Path, cwd: str | os.PathLike[str],
                          project_store: str | os.PathLike[str] | None) -> Store | None:
    """:func:`legacy_store` of ``cwd`` when there is one: a directory (not a
    symbolic link, never followed: the migration passes one over) that is not
    ``project_store``, the project's own store (``cwd`` its root); else
    None.  One ``lstat`` (``where``, ``context``'s first-use note)."""
    legacy = legacy_store(config_dir, cwd)
    if project_store is not None and os.fspath(legacy.path) == os.fspath(project_store):
        return None
    try:
        return legacy if stat.S_ISDIR(os.lstat(legacy.path).st_mode) else None
    except OSError:
        return None


def regular_files(path: str | os.PathLike[str],
                  suffix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of each regular file directly in ``path`` whose name ends
    with ``suffix``, in directory order (a symbolic link is not one; an entry
    that vanishes meanwhile is skipped).  A listing failure raises ``OSError``
    where it happens, after the entries already yielded."""
    with os.scandir(path) as it:
        for entry in it:
            if not entry.name.endswith(suffix):
                continue
            try:
                est = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(est.st_mode):
                yield entry.name, est
