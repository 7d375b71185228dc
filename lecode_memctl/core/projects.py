"""``projects``: every store under ``<config>/memory/``, read-only.

The project root of a store is not stored by the pinned contract: session
headers carry only the slug, which ends in a hash of the root path, so a
root can be *verified* but not recovered.  A root is therefore reported only
when a candidate path hashes to the store's slug.  Candidates, in order:
optional ``project_root``/``root``/``cwd`` keys of session headers (written
by some lecode versions; never trusted without the hash check), the current
project, and roots the user names (``--root``).  Otherwise the root is
``null`` ("unknown"), never guessed from the slug's name part.

Whether a store looks like a legacy cwd-scoped store of another project
comes from :func:`lecode_memctl.core.migrate.classify_stores` run against the
known projects: the verified roots, the current project and each ``--root``,
whether or not their own store exists (a store whose slug is the slug of a directory inside one of
those projects: its row's root is null, the directory its legacy_directory,
and the project's row takes the root that legacy_of names); a store nobody
claims that holds Markdown but no sessions and no facts database is flagged
``possibly_legacy``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from ._record import record
from .atomic import open_in_dir
from .errors import StoreCorrupt
from .identity import resolve_project, slug
from .inventory import store_entries
from .layout import FACTS_DB, SESSIONS_DIR, session_ids

_ROOT_KEYS = ("project_root", "root", "cwd")
_HEAD_BYTES = 65536


@record(frozen=True)
class ProjectInfo:
    slug: str
    path: str
    kind: str                   # project, legacy, unclaimed, symlink (migrate.classify_stores),
                                # not_a_directory (a file, a FIFO, ... in the store's place),
                                # unreadable (an entry that cannot be looked up)
    root: str | None            # verified root, or None (unknown)
    root_source: str | None     # "session header", "current project", "--root"
    root_exists: bool | None    # None when the root is unknown
    legacy_of: str | None       # kind legacy: the project root that claims it
    legacy_directory: str | None
    possibly_legacy: bool       # unclaimed, Markdown only (no sessions, no facts database)
    sessions: int | None        # None when sessions/ cannot be listed (not known)
    facts: int | None           # 0 without a database; None when the database is unreadable
    facts_error: str | None
    size: int | None            # bytes of regular files in the store; None (not known)
    files: int | None           # when a directory of it cannot be listed, or a file stat'ed
    last_activity: str | None   # newest mtime of any file, RFC 3339 UTC (rowmodel.utc_time)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _iso(ts: float | None) -> str | None:
    """A file time as every listing prints one (``rowmodel.utc_time``); None
    for none, or for one past what a time can be (year 1 to 9999: a file
    touched to year 3,000,000 on tmpfs ended ``projects`` in an internal
    error, exit 70, before 2026-12-07)."""
    from .rowmodel import utc_time

    return utc_time(ts)


def _walk(path: Path) -> tuple[int, int, float | None, bool, bool]:
    """(bytes, files, newest mtime, has Markdown, complete) without following
    symlinks; ``complete`` is False when a directory could not be listed or
    an entry looked up (the counts are then too low: before 2026-12-07 they
    were reported so, as if whole)."""
    size = files = 0
    newest: float | None = None
    markdown = False
    complete = True
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except FileNotFoundError:
            if d != path:       # (removed meanwhile: nothing there to count)
                continue
            complete = False
            continue
        except OSError:
            complete = False
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError:
                complete = False
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(e.path))
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
                files += 1
                newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
                if e.name.endswith(".md"):
                    markdown = True
    return size, files, newest, markdown, complete


def _header_roots(store: Path, ids: list[str], limit: int = 50) -> list[str]:
    """Candidate root paths from the newest ``limit`` session headers' optional keys."""
    out: list[str] = []
    for sid in ids[-limit:]:
        try:
            fd = open_in_dir(store / SESSIONS_DIR / f"{sid}.jsonl")
        except OSError:
            continue
        try:
            head = os.read(fd, _HEAD_BYTES)
        except OSError:
            continue
        finally:
            os.close(fd)
        nl = head.find(b"\n")
        if nl < 0:
            continue
        try:
            hdr = orjson.loads(head[:nl])
        except orjson.JSONDecodeError:
            continue
        if not isinstance(hdr, dict):
            continue
        for k in _ROOT_KEYS:
            v = hdr.get(k)
            # (a path with a NUL names no directory: os.path.realpath refused
            # it, an internal error, exit 70, before 2026-12-07)
            if isinstance(v, str) and os.path.isabs(v) and "\0" not in v and v not in out:
                out.append(v)
    return out


def _verify_root(candidate: str, store_slug: str) -> str | None:
    """The root when ``candidate`` (a root, or a directory inside one) hashes to the slug."""
    if slug(candidate) == store_slug:
        return candidate
    real = os.path.realpath(candidate)
    if slug(real) == store_slug:
        return real
    if os.path.isdir(real):
        try:
            ident = resolve_project(real)
        except Exception:  # noqa: BLE001 - an unreadable candidate is just not a match
            return None
        if ident.slug == store_slug:
            return str(ident.root)
    return None


def _count_facts(path: Path) -> tuple[int | None, str | None]:
    from .errors import MemctlError
    from .facts import FactStore

    try:
        st = os.lstat(path / FACTS_DB)
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        return None, exc.strerror
    if not stat.S_ISREG(st.st_mode):
        return None, "facts.sqlite3 is not a regular file"
    try:
        fs = FactStore.open_readonly(path / FACTS_DB)
    except MemctlError as exc:
        return None, exc.message
    try:
        return fs.count(), None
    except Exception as exc:  # noqa: BLE001 - sqlite errors on a damaged db
        return None, str(exc)
    finally:
        fs.close()


def _source_of(root: Path, found: dict[str, tuple[str, str]]) -> str | None:
    """How the path that led ``classify_stores`` to the project ``root`` was
    found: the source of the first verified path whose project it is."""
    for cand, source in found.values():
        try:
            if resolve_project(os.path.realpath(cand)).root == root:
                return source
        except Exception:  # noqa: BLE001 - a vanished candidate is just not it
            continue
    return None


def list_projects(config_dir: Path, *, current: str | os.PathLike[str] | None = None,
                  roots: Iterable[str | os.PathLike[str]] = ()) -> list[ProjectInfo]:
    """Every store directory under ``<config>/memory/``, sorted by slug.  Reads only."""
    from .migrate import LEGACY_STORE, PROJECT_STORE, SYMLINK, classify_stores

    entries = store_entries(config_dir, every=True)
    candidates: list[tuple[str, str]] = []
    if current is not None:
        try:
            candidates.append((str(resolve_project(current).root), "current project"))
        except Exception:  # noqa: BLE001 - a vanished cwd is not fatal here
            pass
    for r in roots:
        candidates.append((os.path.abspath(os.fspath(r)), "--root"))
    # First pass: verified roots per store (header candidates first).
    found: dict[str, tuple[str, str]] = {}
    ids_by: dict[str, list[str] | None] = {}
    source: str | None                    # how a store's root was found; None: not found
    for e in entries:
        if e.is_link or e.other is not None:
            continue
        n, p = e.name, e.path
        try:
            ids: list[str] | None = session_ids(p / SESSIONS_DIR)
        except StoreCorrupt:    # (sessions/ cannot be listed: the count is not known)
            ids = None
        ids_by[n] = ids
        for cand in _header_roots(p, ids or []):
            root = _verify_root(cand, n)
            if root:
                found[n] = (root, "session header")
                break
        if n not in found:
            for cand, source in candidates:
                root = _verify_root(cand, n)
                if root:
                    found[n] = (root, source)
                    break
    # the projects known: the roots verified for some store, and the current
    # project and each --root whether or not their own store exists (before
    # 2026-12-07 only the former: a legacy store of a directory inside a
    # --root was "unclaimed" until that project's store was made).  The path
    # as given, not only its root: a worktree's checkout leads to its
    # project's other worktrees where the root may not (--separate-git-dir)
    given = ([os.fspath(current)] if current is not None else []) + [
        c for c, src in candidates if src == "--root"]
    known = sorted({r for r, _s in found.values() if os.path.isdir(r)}
                   | {os.path.realpath(g) for g in given if os.path.isdir(g)})
    classes, _notes = classify_stores(config_dir, known)
    cls_by = {c.slug: c for c in classes}
    out: list[ProjectInfo] = []
    for e in entries:
        n, p = e.name, e.path
        c = cls_by.get(n)
        if e.is_link:
            # (not followed: its sessions, size and files are not known --
            # null, never 0, which sorted it as the smallest)
            out.append(ProjectInfo(n, str(p), "symlink", None, None, None, None, None, False,
                                   None, None, "the store is a symbolic link; not followed",
                                   None, None, None))
            continue
        if e.other is not None:
            # (before 2026-12-07 left out; validate --all-projects reports it)
            # (one that cannot be looked up, in a memory/ that cannot be
            # searched, is of a kind not known: unreadable)
            lost = e.lost
            why = e.why_not_store()
            # (its sessions, size and files are not known: null, never a
            # count too low that sorts it as the smallest)
            out.append(ProjectInfo(n, str(p), "unreadable" if lost else "not_a_directory",
                                   None, None, None, None, None, False, None, None, why, None,
                                   None, None))
            continue
        size_: int | None
        files_: int | None
        size_, files_, newest, markdown, complete = _walk(p)
        if not complete:
            size_ = files_ = None
        ids = ids_by.get(n)
        facts, ferr = _count_facts(p)
        root, source = found.get(n, (None, None))
        kind = "unclaimed"
        legacy_of = legacy_dir = None
        if c is not None:
            kind = {LEGACY_STORE: "legacy", SYMLINK: "symlink"}.get(c.kind, c.kind)
            if c.kind == LEGACY_STORE:
                legacy_of = str(c.root) if c.root else None
                legacy_dir = str(c.directory) if c.directory else None
                # the directory that verified its slug is no project root:
                # it is legacy_directory alone (before 2026-12-07 also the
                # row's root, while its project's row had none)
                root = source = None
            elif c.kind == PROJECT_STORE and root is None and c.root is not None:
                # the project of a directory another store's header named
                # (a legacy store's): the root classify_stores verified
                root, source = str(c.root), _source_of(c.root, found)
        if root and kind == "unclaimed":
            kind = "project"
        if kind not in ("project", "legacy", "unclaimed", "symlink"):
            kind = "project" if root else "unclaimed"
        has_db = os.path.lexists(p / FACTS_DB)
        possibly_legacy = (kind == "unclaimed" and markdown and ids is not None and not ids
                           and not has_db)
        out.append(ProjectInfo(
            n, str(p), kind, root, source,
            None if root is None else os.path.isdir(root),
            legacy_of, legacy_dir, possibly_legacy, None if ids is None else len(ids), facts,
            ferr, size_, files_, _iso(newest)))
    return out


__all__ = ["ProjectInfo", "list_projects"]
