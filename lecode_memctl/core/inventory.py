"""The stores under ``<config>/memory/`` and what a store holds: the listings
of ``memctl where``, ``projects``, ``migrate`` and the forensic commands.

Part of :mod:`lecode_memctl.core.layout`, which still offers every name here;
a module of its own so that the commands that read one store do not load it
at start-up.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ._record import record
from .layout import (
    DAILY_DIR,
    FACTS_DB,
    MEMORY_FILE,
    NOTES_DIR,
    SCRATCHPAD_FILE,
    SESSIONS_DIR,
    Store,
    memory_names,
    memory_root,
    regular_files,
    store_at,
)


@record(frozen=True)
class StoreEntry:
    """One store under ``<config>/memory/``: a real directory, or a symbolic
    link in a store's place (never followed); with ``store_entries(every=True)``
    also anything else there, ``other`` saying what (``"a regular file"``,
    ``"a FIFO"``, ..., or ``"cannot stat: ..."``)."""

    name: str
    path: Path
    is_link: bool
    other: str | None = None    # not a directory nor a link: what it is instead

    @property
    def lost(self) -> bool:
        """An entry that cannot be looked up (``lstat`` failed: a memory/ that
        cannot be searched), of a kind not known."""
        return self.other is not None and self.other.startswith("cannot stat: ")

    def why_not_store(self) -> str | None:
        """Why an entry that is neither a directory nor a link is no store,
        as ``projects`` and ``secrets --all-projects`` say it; None for a
        directory or a link."""
        if self.other is None:
            return None
        if self.lost:
            return f"the store cannot be looked up ({self.other})"
        return f"the store is {self.other}, not a directory"


def store_entries(config_dir: Path, *, every: bool = False) -> list[StoreEntry]:
    """The directories and symbolic links in ``<config>/memory/``, sorted by
    name (``lstat`` only; an entry that vanished is left out, and anything
    else too unless ``every``: ``projects`` lists each entry, a file or FIFO
    in a store's place with what it is, as ``validate --all-projects``
    reports it).  Every listing of stores starts here."""
    from .atomic import file_kind

    root = memory_root(config_dir)
    out = []
    for name in memory_names(config_dir):
        try:
            mode = os.lstat(root / name).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            if every:
                out.append(StoreEntry(name, root / name, False,
                                      f"cannot stat: {exc.strerror or exc}"))
            continue
        if stat.S_ISLNK(mode) or stat.S_ISDIR(mode):
            out.append(StoreEntry(name, root / name, stat.S_ISLNK(mode)))
        elif every:
            out.append(StoreEntry(name, root / name, False, file_kind(mode)))
    return out


def store_dirs(config_dir: Path) -> list[Store]:
    """The store directories under ``<config>/memory/`` (real directories: a
    symbolic link is left out), sorted by name."""
    return [store_at(e.path) for e in store_entries(config_dir) if not e.is_link]


@record(frozen=True)
class LayoutItem:
    name: str        # relative path, e.g. "MEMORY.md" or "daily/"
    kind: str        # "file" or "dir"
    exists: bool     # False only when there is nothing of that name (ENOENT)
    size: int | None   # bytes (a directory: total of the regular files directly in it)
    count: int | None  # a directory: number of entries; a file: 1 if exists
    # why an item that is there cannot be read as what it should be: a
    # directory that cannot be listed, a file that is a directory, a FIFO or
    # a symbolic link, a name that cannot be looked up ("cannot stat: ...");
    # size and count are then None (not known); None when all is well
    error: str | None = None


def _absent(exc: OSError) -> bool:
    """Whether ``lstat``'s error says there is nothing there (no such entry,
    or a parent that is not a directory), not that it could not be looked up."""
    return exc.errno in (errno.ENOENT, errno.ENOTDIR)


def _odd(name: str, kind: str, why: str) -> LayoutItem:
    return LayoutItem(name, kind, True, None, None, why)


def _not_what(mode: int, kind: str) -> str | None:
    """Why an entry of ``mode`` is not the ``kind`` ("file": a regular file,
    "dir": a directory) the layout has there, or None."""
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if kind == "dir":
        return None if stat.S_ISDIR(mode) else "not a directory"
    if stat.S_ISREG(mode):
        return None
    return "is a directory" if stat.S_ISDIR(mode) else "not a regular file"


def _dir_summary(path: Path, suffix: str = "") -> LayoutItem:
    name = path.name + "/"
    try:
        st = os.lstat(path)
    except OSError as exc:
        if _absent(exc):
            return LayoutItem(name, "dir", False, 0, 0)
        return _odd(name, "dir", f"cannot stat: {exc.strerror or exc}")
    why = _not_what(st.st_mode, "dir")
    if why is not None:
        # (before 2026-12-07 shown as absent, "-")
        return _odd(name, "dir", why)
    size = count = 0
    try:
        for _name, est in regular_files(path, suffix):
            size += est.st_size
            count += 1
    except OSError as exc:
        # (it exists, but what it holds is not known: never "0 files"; before
        # 2026-12-07 an unlistable sessions/ was shown so)
        return LayoutItem(name, "dir", True, None, None,
                          f"cannot list: {exc.strerror or exc}")
    return LayoutItem(name, "dir", True, size, count)


def store_state(store: Store) -> tuple[bool, str | None]:
    """(whether something is at the store's path, why it cannot be read as
    the store directory or None), from its ``lstat`` alone: a symbolic link
    (never followed: every command refuses it), a file in the directory's
    place, or a path that cannot be looked up.  (Before 2026-12-07 ``where``
    read a link's target as the store, and called a file in its place
    "does not exist yet".)"""
    try:
        st = os.lstat(store.path)
    except OSError as exc:
        if _absent(exc):
            return False, None
        return True, f"cannot stat: {exc.strerror or exc}"
    why = _not_what(st.st_mode, "dir")
    if why == "symbolic link":
        why = "symbolic link: never followed, every command refuses it"
    return True, why


def inventory(store: Store) -> list[LayoutItem]:
    """Which layout items exist, with sizes.  Reads metadata only.  An item
    that is there but not what it should be (a directory or FIFO for a file,
    a symbolic link), or that cannot be looked up, exists, with the reason
    in its ``error``: ``where`` is the diagnostic command, and before
    2026-12-07 it showed such items as absent."""
    items: list[LayoutItem] = []
    for name in (MEMORY_FILE, SCRATCHPAD_FILE, FACTS_DB):
        try:
            st = os.lstat(store.path / name)
        except OSError as exc:
            if _absent(exc):
                items.append(LayoutItem(name, "file", False, 0, 0))
            else:
                items.append(_odd(name, "file", f"cannot stat: {exc.strerror or exc}"))
            continue
        why = _not_what(st.st_mode, "file")
        items.append(LayoutItem(name, "file", True, st.st_size, 1) if why is None
                     else _odd(name, "file", why))
    for name, suffix in ((DAILY_DIR, ".md"), (NOTES_DIR, ".md"), (SESSIONS_DIR, ".jsonl")):
        items.append(_dir_summary(store.path / name, suffix))
    return items
