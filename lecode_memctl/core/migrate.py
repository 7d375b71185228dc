"""Legacy (cwd-scoped) memory: find it, plan its migration, copy it safely.

Older lecode versions kept memory per working directory, in
``<config>/memory/<slug(realpath(cwd))>/``.  The reference design says: on
first use, legacy cwd-scoped Markdown is copied to the project store only if
that destination is absent; existing destinations are never merged; legacy
files are kept; SQLite databases and backups are not copied.

This module is what the agent calls on first use and what
``memctl migrate-legacy`` renders:

* :func:`discover_legacy_stores`: the legacy stores that belong to a project,
  in a documented deterministic order (``docs/FORMAT.md``, "Legacy migration");
* :func:`plan_migration`: one :class:`PlanItem` per legacy file (copy, or skip
  with a stable reason);
* :func:`apply_migration`: the copies, each an atomic write that never
  overwrites, verified by sha256;
* :func:`classify_stores`: every store under the config dir, labelled as a
  project store, a legacy store some known project claims, or unclaimed.

Legacy stores are only ever read: no write, no rename, no chmod, no utime.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import field, replace
from pathlib import Path

from ._lazy import lazy_compile
from ._record import record
from .atomic import atomic_write, is_temp_name, make_dirs, read_regular
from .errors import (
    EXIT_OK,
    Conflict,
    MemctlError,
    NotFound,
    StoreCorrupt,
    StoreWriteError,
    UsageError,
    raise_if_out_of_fds,
)
from .identity import (
    NOT_GIT,
    ProjectIdentity,
    read_commondir,
    read_gitdir_file,
    resolve_git_path,
    resolve_project,
    slug,
    slug_name,
)
from .inventory import store_entries
from .layout import (
    DAILY_DIR,
    FACTS_DB,
    MEMORY_FILE,
    NOTES_DIR,
    SCRATCHPAD_FILE,
    SESSIONS_DIR,
    Store,
    looks_like_slug,
    memory_names,
    memory_root,
)
from .mdnames import daily_name_problem, utf8_problem

DEFAULT_MAX_DIRS = 100_000
"""How many directories discovery walks at most (all trees together)."""

# Where a legacy store was found (LegacyStore.origin).
ORIGIN_CWD = "cwd"                # the working directory itself
ORIGIN_ANCESTOR = "ancestor"      # a parent of it, up to its checkout root
ORIGIN_TREE = "tree"              # another directory of the main checkout
ORIGIN_WORKTREE = "worktree"      # a directory of a linked worktree
ORIGIN_FROM = "from"              # named with --from

# Plan actions.
COPY = "copy"
SKIP = "skip"

# Skip reasons (stable, documented in docs/FORMAT.md).  The first three mean
# that legacy content is not in the project store: they make the exit status 4.
R_DESTINATION_EXISTS = "destination_exists"
R_DUPLICATE = "duplicate"
R_UNREADABLE = "unreadable"
R_IDENTICAL = "identical"
R_SQLITE = "sqlite"
R_BACKUP = "backup"
R_TEMP = "temp_file"
R_NOT_MARKDOWN = "not_markdown"
R_SYMLINK = "symlink"
R_UNEXPECTED = "unexpected"
CONFLICT_REASONS = frozenset({R_DESTINATION_EXISTS, R_DUPLICATE, R_UNREADABLE})
REASONS = (R_DESTINATION_EXISTS, R_DUPLICATE, R_UNREADABLE, R_IDENTICAL, R_SQLITE, R_BACKUP,
           R_TEMP, R_NOT_MARKDOWN, R_SYMLINK, R_UNEXPECTED)

# Apply results (PlanItem.result; None in a dry run).
RES_COPIED = "copied"
RES_SKIPPED = "skipped"
RES_CONFLICT = "conflict"      # the destination appeared between plan and apply
RES_IDENTICAL = "identical"    # ... with exactly the bytes we were about to copy
RES_SOURCE_CHANGED = "source_changed"  # the legacy file changed between plan and apply

EXIT_CONFLICT = Conflict.exit_code

SQLITE_HEADER = b"SQLite format 3\x00"
# \Z: "$" would accept a trailing newline
_SQLITE_NAME = lazy_compile(r"\.(sqlite3?|db)(-wal|-shm|-journal)?\Z")


# ---------------------------------------------------------------- discovery

@record(frozen=True)
class LegacyStore:
    """One legacy store, with its place in the migration order (1-based)."""

    index: int
    path: Path
    slug: str
    directory: Path | None   # the working directory it was kept for (None: --from)
    origin: str              # ORIGIN_*


@record(frozen=True)
class Discovery:
    """What :func:`discover_legacy_stores` found, and how far it looked."""

    project: ProjectIdentity
    store: Store                         # the project's store: the destination
    legacy: list[LegacyStore]
    worktrees: list[Path]                # linked worktrees of the project, sorted
    dirs_scanned: int                    # directories walked in the trees
    truncated: bool                      # the walk stopped at max_dirs
    notes: list[str] = field(default_factory=list)  # things a person should know


def _common_dir(checkout: str) -> str | None:
    """The common git dir of a checkout (its ``.git`` directory, or what a
    ``.git`` file points to, through ``commondir``), or None."""
    dotgit = os.path.join(checkout, ".git")
    try:
        st = os.lstat(dotgit)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return os.path.realpath(dotgit)
    gitdir = read_gitdir_file(dotgit)
    if gitdir is None:
        return None
    # without a commondir (a submodule), the git dir is its own common dir
    return read_commondir(gitdir) or gitdir


def linked_worktrees(project: ProjectIdentity) -> tuple[list[Path], list[str]]:
    """The linked worktrees of a project, sorted, from ``<common dir>/worktrees/*/gitdir``,
    and notes about entries that could not be used (stale or unreadable, or a
    worktree that resolves to another project: the store contract decides
    whose a directory is, and a worktree of a main checkout moved without
    ``git worktree repair``, or of one made with ``--separate-git-dir``, is
    not this project's; before 2026-12-07 its own live store was planned as
    a legacy store of this one)."""
    common = _common_dir(str(project.checkout)) or _common_dir(str(project.root))
    if common is None:
        return [], []
    found: set[str] = set()
    notes: list[str] = []
    wt_dir = os.path.join(common, "worktrees")
    try:
        with os.scandir(wt_dir) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return [], []
    for name in names:
        gitdir_file = os.path.join(wt_dir, name, "gitdir")
        try:
            # (a regular file, or a link to one: a FIFO there was waited on
            # for ever before 2026-12-07, a device read without end)
            target = read_regular(gitdir_file, 4096, follow=True).decode(
                "utf-8", "surrogateescape").strip()
        except OSError:
            notes.append(f"worktree entry {gitdir_file} is unreadable; skipped")
            continue
        if not target:
            continue
        if not os.path.isabs(target):
            target = os.path.join(wt_dir, name, target)
        resolved = resolve_git_path(os.path.dirname(target))
        if resolved is None:
            notes.append(f"worktree entry {gitdir_file} names no path (a NUL byte); skipped")
            continue
        path = resolved
        if not os.path.isdir(path):
            notes.append(f"linked worktree {path} (from {gitdir_file}) does not exist; skipped")
            continue
        if path == str(project.root):
            continue
        other = resolve_project(path)
        if other.slug != project.slug:
            notes.append(f"linked worktree {path} (from {gitdir_file}) belongs to another "
                         f"project ({other.root}); its stores are not this project's; skipped")
            continue
        found.add(path)
    return [Path(p) for p in sorted(found)], notes


class _Finder:
    """Matches directories against the names in ``<config>/memory/``."""

    def __init__(self, config_dir: Path, names: set[str], exclude: str, max_dirs: int) -> None:
        self.mem = memory_root(config_dir)
        self.candidates = {n for n in names if n != exclude and looks_like_slug(n)}
        # the "name" half of each candidate slug: most directories are rejected
        # on their name alone, without hashing their path
        self.prefixes = {n.rsplit("-", 1)[0] for n in self.candidates}
        self.seen: set[str] = set()
        self.found: list[tuple[str, str, str | None, str]] = []  # path, slug, dir, origin
        self.notes: list[str] = []
        self.max_dirs = max_dirs
        self.scanned = 0
        self.truncated = False

    def consider(self, directory: str, origin: str) -> None:
        base = os.path.basename(directory)
        if slug_name(base) not in self.prefixes:
            return
        s = slug(directory)
        if s not in self.candidates or s in self.seen:
            return
        self.seen.add(s)
        path = self.mem / s
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            self.notes.append(f"legacy store {path} of {directory} is a symbolic link; "
                              "not followed, not migrated")
            return
        if stat.S_ISDIR(st.st_mode):
            self.found.append((str(path), s, directory, origin))

    def walk(self, top: str, origin: str) -> None:
        """Pre-order walk of ``top``, children in sorted name order, skipping ``.git``,
        nested checkouts (a directory with a ``.git`` entry) and symbolic links."""
        if not self.candidates or self.truncated:
            return
        stack = [top]
        while stack:
            d = stack.pop()
            if self.scanned >= self.max_dirs:
                self.truncated = True
                self.notes.append(
                    f"stopped walking after {self.max_dirs} directories (--max-dirs); "
                    f"legacy stores of directories not reached (from {d} on) are not "
                    "listed: raise --max-dirs or name them with --from")
                return
            self.scanned += 1
            subdirs: list[str] = []
            nested = False
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if e.name == ".git":
                            nested = d != top
                            continue
                        try:
                            if e.is_dir(follow_symlinks=False):
                                subdirs.append(e.name)
                        except OSError:
                            continue
            except OSError as exc:
                self.notes.append(f"cannot list {d}: {exc.strerror}; its subdirectories "
                                  "were not searched")
                if d != top:
                    self.consider(d, origin)
                continue
            if nested:
                continue  # another checkout: a submodule, a nested repo or a worktree
            self.consider(d, origin)
            subdirs.sort(reverse=True)
            stack.extend(os.path.join(d, n) for n in subdirs)


def discover_legacy_stores(config_dir: Path, cwd: str | os.PathLike[str], *,
                           extra: Sequence[str | os.PathLike[str]] = (),
                           max_dirs: int = DEFAULT_MAX_DIRS,
                           include_cwd: bool = True, cwd_only: bool = False) -> Discovery:
    """The legacy stores that belong to the project of ``cwd``, in migration order.

    Order (the first store to provide a file wins): the working directory
    and its ancestors up to its checkout root, nearest first; then every
    other directory of the main checkout in sorted path order (pre-order,
    names sorted); then each linked worktree, sorted by path, in the same
    order; then ``extra`` (``--from``) in the order given.  A store is listed
    once, at its first position.  The project's own store never is.  With
    ``cwd_only`` (what the agent does on first use, as the reference design
    says) only the working directory's own legacy store, then ``extra``.
    Outside Git the project root is the working directory itself (every
    directory is its own project): nothing is walked, only ``extra`` applies.

    The trees are walked with ``os.scandir`` without following symbolic
    links, skipping ``.git`` and nested checkouts, at most ``max_dirs``
    directories in all; existence is checked against one listing of
    ``<config>/memory/``, so a large tree costs one ``scandir`` per directory
    and one sha256 per directory, no ``stat``.
    """
    if max_dirs < 0:
        raise UsageError(f"--max-dirs must be 0 or more, not {max_dirs}")
    config_dir = Path(config_dir)
    ident = resolve_project(cwd)
    store = Store(memory_root(config_dir) / ident.slug, ident.slug, ident)
    finder = _Finder(config_dir, set(memory_names(config_dir)), ident.slug, max_dirs)

    if include_cwd:
        d = str(ident.cwd)
        stop = str(ident.checkout)
        origin = ORIGIN_CWD
        while True:
            finder.consider(d, origin)
            origin = ORIGIN_ANCESTOR
            parent = os.path.dirname(d)
            if d == stop or parent == d or not (d.startswith(stop + os.sep) or stop == os.sep):
                break
            d = parent
            if cwd_only:
                break

    worktrees: list[Path] = []
    wt_notes: list[str] = []
    if not cwd_only and ident.kind != NOT_GIT:
        # Outside Git the project root is the working directory itself: every
        # directory is its own project, and the store of one under it is that
        # project's store, not a legacy one (before 2026-12-07 the walk copied
        # them all into this one).  Only --from applies there.
        root = str(ident.root)
        if os.path.lexists(os.path.join(root, ".git")):
            finder.walk(root, ORIGIN_TREE)
        worktrees, wt_notes = linked_worktrees(ident)
        for wt in worktrees:
            finder.walk(str(wt), ORIGIN_WORKTREE)

    legacy = [LegacyStore(i + 1, Path(p), s, Path(d) if d else None, o)
              for i, (p, s, d, o) in enumerate(finder.found)]
    known = {os.path.realpath(ls.path) for ls in legacy}
    for raw in extra:
        given = os.path.abspath(os.fspath(raw))
        try:
            st = os.lstat(given)
        except FileNotFoundError:
            raise NotFound(f"--from {given}: no such directory") from None
        except OSError as exc:
            raise UsageError(f"--from {given}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"--from {given}: is a symbolic link; name the directory itself")
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"--from {given}: not a directory")
        real = os.path.realpath(given)
        if real == os.path.realpath(store.path):
            raise UsageError(f"--from {given}: that is the project's own store, "
                             "the destination of the migration")
        if real in known:
            continue
        known.add(real)
        legacy.append(LegacyStore(len(legacy) + 1, Path(given), os.path.basename(given),
                                  None, ORIGIN_FROM))
    notes = wt_notes + finder.notes
    return Discovery(ident, store, legacy, worktrees, finder.scanned, finder.truncated, notes)


# ---------------------------------------------------------------- classification

PROJECT_STORE = "project"
LEGACY_STORE = "legacy"
UNCLAIMED = "unclaimed"
SYMLINK = "symlink"


@record(frozen=True)
class StoreClass:
    """One entry of ``<config>/memory/`` and what it is, as far as the known projects tell."""

    slug: str
    path: Path
    kind: str                 # PROJECT_STORE, LEGACY_STORE, UNCLAIMED or SYMLINK
    root: Path | None         # the known project root that owns or claims it
    directory: Path | None    # LEGACY_STORE: the working directory it was kept for


def classify_stores(config_dir: Path, known_roots: Iterable[str | os.PathLike[str]], *,
                    max_dirs: int = DEFAULT_MAX_DIRS) -> tuple[list[StoreClass], list[str]]:
    """Every directory under ``<config>/memory/`` whose name looks like a slug,
    classified against ``known_roots`` (project roots, e.g. those recorded in
    session headers, or directories inside projects: a linked worktree's
    checkout finds the project's worktrees also when its root is the git
    directory itself, ``--separate-git-dir``): the project store of a known root, a legacy store that
    a known project claims (a directory of its tree or of a linked worktree,
    found as :func:`discover_legacy_stores` finds them), a symbolic link, or
    unclaimed (a legacy store of a directory that no longer exists, of a
    project nobody named, or a project store whose project is unknown).
    Reads only; returns the list sorted by slug, and notes from the walks."""
    config_dir = Path(config_dir)
    entries = [e for e in store_entries(config_dir) if looks_like_slug(e.name)]
    owner: dict[str, tuple[str, Path, Path | None]] = {}
    notes: list[str] = []
    roots: list[str] = []
    idents: list[ProjectIdentity] = []
    seen: set[tuple[str, Path | None]] = set()
    for r in known_roots:
        real = os.path.realpath(os.fspath(r))
        if not os.path.isdir(real) or real in roots:
            continue
        ident = resolve_project(real)
        # one walk per project: a directory inside a known root, or a linked
        # worktree of a main checkout, adds nothing (the walk is the main
        # checkout's tree and every worktree of its common git dir, from
        # wherever it starts: a code review found a worktree's walk made
        # twice).  Only where the root is the git dir itself
        # (--separate-git-dir: no tree to walk) is each checkout a walk of
        # its own: its common git dir leads to the project's worktrees.
        tree = os.path.lexists(os.path.join(str(ident.root), ".git"))
        key = (ident.slug, None if tree else ident.checkout)
        if key in seen:
            continue
        seen.add(key)
        roots.append(real)
        idents.append(ident)
    # project-store claims first: a store that is a known project's own store
    # is that project's, whatever legacy claim another root makes (before
    # 2026-12-07 the first claim in sorted root order won)
    for ident in idents:
        owner.setdefault(ident.slug, (PROJECT_STORE, ident.root, None))
    for r, ident in zip(roots, idents, strict=True):
        found = discover_legacy_stores(config_dir, r, max_dirs=max_dirs, include_cwd=False)
        notes.extend(found.notes)
        for ls in found.legacy:
            owner.setdefault(ls.slug, (LEGACY_STORE, ident.root, ls.directory))
    out: list[StoreClass] = []
    for e in entries:
        if e.is_link:
            out.append(StoreClass(e.name, e.path, SYMLINK, None, None))
            continue
        kind, root, directory = owner.get(e.name, (UNCLAIMED, None, None))
        out.append(StoreClass(e.name, e.path, kind, root, directory))
    return out, notes


# ---------------------------------------------------------------- plan

@record(frozen=True)
class PlanItem:
    """One file (or unexpected directory) of a legacy store, and what happens to it."""

    store: int                   # LegacyStore.index
    name: str                    # path inside the legacy store, '/'-separated
    source: Path
    destination: Path | None     # where Markdown goes in the project store; None otherwise
    action: str                  # COPY or SKIP
    reason: str | None           # None for COPY, else one of REASONS
    detail: str                  # one line for people
    size: int | None = None
    sha256: str | None = None
    provided_by: Path | None = None   # R_DUPLICATE / R_IDENTICAL: the earlier source
    result: str | None = None         # after apply: RES_*; None in a dry run
    blocked: bool = False             # R_DESTINATION_EXISTS: not a regular file in the way
    # user Markdown (a *.md where the layout has Markdown) skipped because it
    # is a symbolic link, not a regular file, or has an invalid name: its
    # content is left behind
    left_behind: bool = False
    # Markdown whose bytes are not valid UTF-8: copied byte for byte all the
    # same, and then ``validate`` reports markdown.invalid_utf8 (the plan says so)
    not_utf8: bool = False

    @property
    def conflict(self) -> bool:
        """Whether skipping it loses content (docs/OUTPUT.md)."""
        return self.result in (RES_CONFLICT, RES_SOURCE_CHANGED) or (
            self.reason in CONFLICT_REASONS) or self.left_behind


@record(frozen=True)
class MigrationPlan:
    discovery: Discovery
    items: list[PlanItem]
    applied: bool = False
    fail_on_conflict: bool = False    # exit 4 for existing destinations and duplicates too

    @property
    def copies(self) -> list[PlanItem]:
        return [i for i in self.items if i.action == COPY]

    @property
    def conflicts(self) -> list[PlanItem]:
        return [i for i in self.items if i.conflict]

    @property
    def copied(self) -> int:
        return sum(1 for i in self.items if i.result == RES_COPIED)

    @property
    def unresolved(self) -> list[PlanItem]:
        """Legacy Markdown that could not be read, that changed between the
        plan and the copy, or whose destination is blocked by something that
        is not a regular file (a symbolic link, a directory) or cannot be
        read: not in the project store, and not by design."""
        return [i for i in self.items
                if i.reason == R_UNREADABLE or i.result == RES_SOURCE_CHANGED or i.blocked]

    @property
    def exit_code(self) -> int:
        """0 once everything that can be copied is copied: an existing
        destination, or an earlier store's other content, is the design's
        normal case (never merged, legacy files kept), reported, not a
        failure.  4 when some legacy Markdown could not be read or changed
        meanwhile, and, with ``fail_on_conflict``, for every conflict."""
        if self.unresolved or (self.fail_on_conflict and self.conflicts):
            return EXIT_CONFLICT
        return EXIT_OK


def _user_markdown(rel: str) -> bool:
    """Whether ``rel`` names Markdown where the store layout has Markdown:
    ``MEMORY.md``, ``scratchpad.md``, ``notes/*.md``, ``daily/*.md``."""
    parts = rel.split("/")
    if len(parts) == 1:
        return parts[0] in (MEMORY_FILE, SCRATCHPAD_FILE)
    return len(parts) == 2 and parts[0] in (DAILY_DIR, NOTES_DIR) and parts[1].endswith(".md")


def _classify_name(rel: str, parts: list[str]) -> tuple[str, str | None, str]:
    """(kind, reason, detail) for a regular file by its name: kind "markdown" or "skip"."""
    base = parts[-1]
    if is_temp_name(base):
        return "skip", R_TEMP, "temporary file of an interrupted write; never copied"
    if base.endswith(".bak"):
        return "skip", R_BACKUP, "backups are never copied"
    if base == FACTS_DB or _SQLITE_NAME.search(base):
        return "skip", R_SQLITE, "SQLite databases are never copied"
    if parts[0] == SESSIONS_DIR:
        return "skip", R_NOT_MARKDOWN, "session transcripts are not Markdown; only Markdown is migrated"
    if len(parts) == 1 and base in (MEMORY_FILE, SCRATCHPAD_FILE):
        return "markdown", None, ""
    if len(parts) == 2 and parts[0] == DAILY_DIR:
        problem = daily_name_problem(base)
        if problem is None:
            return "markdown", None, ""
        return "skip", R_UNEXPECTED, problem
    if len(parts) == 2 and parts[0] == NOTES_DIR:
        if base.endswith(".md"):
            from .markdown import check_note_name

            try:
                if check_note_name(base) + ".md" == base:
                    return "markdown", None, ""
            except UsageError as exc:
                return "skip", R_UNEXPECTED, f"not a valid note name ({exc.message})"
        return "skip", R_UNEXPECTED, "not a note (notes/<name>.md)"
    return "skip", R_UNEXPECTED, "not part of a memory store's layout"


def _scan_store(ls: LegacyStore) -> list[tuple[str, Path, os.stat_result | None, str]]:
    """Every entry of a legacy store as (relname, path, lstat, what) with what one of
    "file", "symlink", "dir" (an unexpected directory, not entered), "sessions"
    (the transcripts' directory, not entered), "other"."""
    out: list[tuple[str, Path, os.stat_result | None, str]] = []

    def scan(d: Path, prefix: str, depth: int) -> None:
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.append((prefix.rstrip("/") + "/" if prefix else "./", d, None,
                        f"unlistable:{exc.strerror}"))
            return
        for e in entries:
            rel = prefix + e.name
            p = d / e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                out.append((rel, p, None, "other"))
                continue
            if stat.S_ISLNK(st.st_mode):
                out.append((rel, p, st, "symlink"))
            elif stat.S_ISDIR(st.st_mode):
                if depth == 0 and e.name in (DAILY_DIR, NOTES_DIR):
                    scan(p, rel + "/", depth + 1)
                elif depth == 0 and e.name == SESSIONS_DIR:
                    # transcripts are never migrated: not entered, so that
                    # one that cannot be listed or read changes nothing
                    out.append((rel + "/", p, st, "sessions"))
                else:
                    out.append((rel + "/", p, st, "dir"))
            elif stat.S_ISREG(st.st_mode):
                out.append((rel, p, st, "file"))
            else:
                out.append((rel, p, st, "other"))

    scan(ls.path, "", 0)
    return out


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


# _dest_state's states
D_ABSENT = "absent"            # nothing there: the copy may create it
D_FILE = "file"                # a regular file, read
D_BLOCKED = "blocked"          # something that is not a regular file is in the way
D_UNREADABLE = "unreadable"    # a regular file that cannot be read


def _dest_state(dest: Path, store_dir: Path) -> tuple[str, bytes | None, str]:
    """(state, bytes of an existing regular file, what is in the way) with state
    one of D_ABSENT, D_FILE, D_BLOCKED, D_UNREADABLE.  The third says, for
    D_BLOCKED, which path is in the way and what it is (the project store
    itself when it is a symbolic link, a component that is not a directory,
    the destination that is not a regular file), and for D_UNREADABLE why
    the destination cannot be read; "" otherwise.  (Every error was
    "something that is not a regular file is in the way" at the destination
    before 2026-12-07, whatever was.)"""
    # Every directory between the store and the file must be a real directory
    # (or absent): a symlink or a file in the way blocks the copy.
    cur = store_dir
    for part in (None, *dest.relative_to(store_dir).parts[:-1]):
        if part is not None:
            cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return D_ABSENT, None, ""
        except OSError as exc:
            return D_BLOCKED, None, f"{cur} cannot be looked at ({exc.strerror})"
        if not stat.S_ISDIR(st.st_mode):
            return D_BLOCKED, None, f"{cur} is {_kind(st)}, not a directory"
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return D_ABSENT, None, ""
    except OSError as exc:
        return D_BLOCKED, None, f"{dest} cannot be looked at ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return D_BLOCKED, None, f"{dest} is {_kind(st)}"
    try:
        return D_FILE, read_regular(dest), ""
    except OSError as exc:
        return D_UNREADABLE, None, exc.strerror or str(exc)


def _first_provider(ls: LegacyStore, rel: str, path: Path, dest: Path, state: str,
                    existing_sha: str | None, size: int, digest: str, why: str) -> PlanItem:
    """The item of the first legacy file to provide ``dest``, against what is there."""
    if state == D_ABSENT:
        return PlanItem(ls.index, rel, path, dest, COPY, None, "copy to the project store",
                        size, digest)
    if existing_sha == digest:
        return PlanItem(ls.index, rel, path, dest, SKIP, R_IDENTICAL,
                        "the destination already has these exact bytes", size, digest)
    if state == D_BLOCKED:
        return PlanItem(ls.index, rel, path, dest, SKIP, R_DESTINATION_EXISTS,
                        f"something that is not a regular file is in the way: {why}",
                        size, digest, blocked=True)
    if state == D_UNREADABLE:
        return PlanItem(ls.index, rel, path, dest, SKIP, R_DESTINATION_EXISTS,
                        f"the destination exists but cannot be read ({why}): {dest}; "
                        "not compared, never overwritten", size, digest, blocked=True)
    return PlanItem(ls.index, rel, path, dest, SKIP, R_DESTINATION_EXISTS,
                    f"the destination exists with other content: {dest}", size, digest)


def plan_items(discovery: Discovery) -> list[PlanItem]:
    """The plan for a discovery: one item per legacy file, in store order then name order.

    The first store in migration order to provide a destination wins it,
    also when its file cannot be read (or its ``notes/``, ``daily/`` or the
    store itself cannot be listed): the later stores' files for it are then
    skipped, not copied, so that the first store's can be once it is
    readable (a later store's copy would keep it out for ever)."""
    dest_root = discovery.store.path
    items: list[PlanItem] = []
    # destination -> (index into items of the first provider, its sha256;
    # None: it could not be read)
    providers: dict[str, tuple[int, str | None]] = {}
    # "notes/", "daily/" or "" (the whole store) -> index into items of the
    # earliest store's entry that could not be listed
    unlisted: dict[str, int] = {}
    dest_cache: dict[str, tuple[str, bytes | None, str]] = {}
    # index into items -> (byte offset, line) of the first byte that is not
    # UTF-8 in the Markdown it plans (before 2026-12-07 a plain copy, unsaid)
    not_utf8: dict[int, tuple[int, int]] = {}
    for ls in discovery.legacy:
        for rel, path, st, what in _scan_store(ls):
            size = st.st_size if st is not None and what == "file" else None
            if what.startswith("unlistable:"):
                unlisted.setdefault("" if rel == "./" else rel, len(items))
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_UNREADABLE,
                                      f"cannot list: {what.split(':', 1)[1]}"))
                continue
            if what == "symlink":
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_SYMLINK,
                                      "symbolic link; never followed",
                                      left_behind=_user_markdown(rel)))
                continue
            if what == "sessions":
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_NOT_MARKDOWN,
                                      "session transcripts are not Markdown; only Markdown is "
                                      "migrated (the directory is not read)"))
                continue
            if what == "dir":
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_UNEXPECTED,
                                      "directory not part of a memory store's layout"))
                continue
            if what == "other":
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_UNEXPECTED,
                                      "not a regular file", left_behind=_user_markdown(rel)))
                continue
            parts = rel.split("/")
            kind, reason, detail = _classify_name(rel, parts)
            if kind == "skip":
                items.append(PlanItem(ls.index, rel, path, None, SKIP, reason, detail, size,
                                      left_behind=reason == R_UNEXPECTED and _user_markdown(rel)))
                continue
            key = rel
            if key not in providers:
                hidden = [j for p, j in unlisted.items() if rel.startswith(p)]
                if hidden:
                    # an earlier store's directory that could not be listed
                    # may hold it: that store comes first
                    providers[key] = (min(hidden), None)
            try:
                data = read_regular(path)
            except OSError as exc:
                if key not in providers:
                    providers[key] = (len(items), None)
                items.append(PlanItem(ls.index, rel, path, dest_root / rel, SKIP, R_UNREADABLE,
                                      f"cannot read: {exc.strerror}", size))
                continue
            if data.startswith(SQLITE_HEADER):
                items.append(PlanItem(ls.index, rel, path, None, SKIP, R_SQLITE,
                                      "starts with the SQLite header; never copied", len(data)))
                continue
            digest = hashlib.sha256(data).hexdigest()
            bad = utf8_problem((data,))
            if bad is not None:
                not_utf8[len(items)] = bad     # (the one item appended below)
            dest = dest_root.joinpath(*parts)
            if key not in dest_cache:
                dest_cache[key] = _dest_state(dest, dest_root)
            state, existing, why = dest_cache[key]
            existing_sha = hashlib.sha256(existing).hexdigest() if existing is not None else None
            first = providers.get(key)
            if first is None:
                providers[key] = (len(items), digest)
                items.append(_first_provider(ls, rel, path, dest, state, existing_sha,
                                             len(data), digest, why))
                continue
            winner = items[first[0]]
            if first[1] is None:
                # the first provider could not be read: it keeps the destination
                item = _first_provider(ls, rel, path, dest, state, existing_sha, len(data), digest,
                                       why)
                if item.action == COPY:
                    why = (f"may provide {rel}, but its {winner.name} could not be listed"
                           if winner.name.endswith("/")
                           else f"provides {rel}, but it could not be read")
                    item = PlanItem(ls.index, rel, path, dest, SKIP, R_DUPLICATE,
                                    f"#{winner.store} comes first and {why}; not copied, so "
                                    f"that #{winner.store}'s can be once it is readable",
                                    len(data), digest, winner.source)
                items.append(item)
                continue
            final_sha = (existing_sha if state == D_FILE
                         else first[1] if state == D_ABSENT else None)
            if digest == final_sha and digest != first[1]:
                # the destination's own bytes, not the earlier store's
                items.append(PlanItem(ls.index, rel, path, dest, SKIP, R_IDENTICAL,
                                      "the destination already has these exact bytes",
                                      len(data), digest))
            elif digest == final_sha:
                items.append(PlanItem(ls.index, rel, path, dest, SKIP, R_IDENTICAL,
                                      f"same bytes as #{winner.store} {winner.name}, "
                                      "which the destination has or receives",
                                      len(data), digest, winner.source))
            else:
                items.append(PlanItem(ls.index, rel, path, dest, SKIP, R_DUPLICATE,
                                      f"#{winner.store} comes first and provides {rel}; "
                                      "never merged", len(data), digest, winner.source))
    for n, (offset, line) in not_utf8.items():
        item = items[n]
        why = f"not valid UTF-8 (line {line}, byte {offset})"
        if item.action == COPY:
            why += ": copied byte for byte; validate will report markdown.invalid_utf8"
        items[n] = replace(item, not_utf8=True, detail=f"{item.detail}; {why}")
    return items


def plan_migration(config_dir: Path, cwd: str | os.PathLike[str], *,
                   extra: Sequence[str | os.PathLike[str]] = (),
                   max_dirs: int = DEFAULT_MAX_DIRS, cwd_only: bool = False,
                   fail_on_conflict: bool = False) -> MigrationPlan:
    """Discover the legacy stores of ``cwd``'s project and plan every file.  Reads only.
    A ``config_dir``, ``cwd`` or ``extra`` path that is not text or holds a
    NUL is a UsageError (``config.path_text``; before 2026-12-07 a raw
    ValueError, TypeError or UnicodeEncodeError for ``config_dir`` and
    ``extra``)."""
    from .config import path_text

    config_dir = Path(path_text(config_dir, "plan_migration: config_dir"))
    extra = [path_text(e, "plan_migration: extra") for e in extra]
    discovery = discover_legacy_stores(config_dir, cwd, extra=extra, max_dirs=max_dirs,
                                       cwd_only=cwd_only)
    return MigrationPlan(discovery, plan_items(discovery), fail_on_conflict=fail_on_conflict)


def conflict_diff(item: PlanItem, plan: MigrationPlan, *, context: int = 3) -> str | None:
    """A unified diff of the project's content against the legacy file's, for
    a conflicting item (``destination_exists``, ``duplicate``, or a
    destination that appeared during the copy), so that a person can merge by
    hand; None for any other item.  The project side is the destination as it
    is, or, when it does not exist yet, what the first store provides.  Bytes
    that are not UTF-8 are shown as U+FFFD.  Reads only, without following
    symbolic links."""
    import difflib

    if item.destination is None or not (
            item.reason in (R_DESTINATION_EXISTS, R_DUPLICATE) or item.result == RES_CONFLICT):
        return None
    state, project, why = _dest_state(item.destination, plan.discovery.store.path)
    project_label = f"project: {item.destination}"
    if state == D_BLOCKED:
        return f"(the project side, {item.destination}, is blocked: {why})\n"
    if state == D_UNREADABLE:
        return f"(cannot read the project side, {item.destination}: {why})\n"
    if project is None and item.provided_by is not None:
        try:
            project = read_regular(item.provided_by)
        except OSError as exc:
            return f"(cannot read {item.provided_by}: {exc.strerror})\n"
        project_label = f"project (as #{_store_of(plan, item.provided_by)} provides it): " \
                        f"{item.provided_by}"
    try:
        legacy = read_regular(item.source)
    except OSError as exc:
        return f"(cannot read {item.source}: {exc.strerror})\n"
    a = _lines((project or b"").decode("utf-8", "replace"))
    b = _lines(legacy.decode("utf-8", "replace"))
    lines = []
    for line in difflib.unified_diff(a, b, fromfile=project_label,
                                     tofile=f"legacy #{item.store}: {item.source}", n=context):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def _lines(text: str) -> list[str]:
    """``text``'s lines as diff(1) takes them, each with its newline (the
    last without one when the text does not end with one): split at
    ``\\n`` alone.  (str.splitlines broke a line at U+2028, U+0085, a form
    feed as well, and the diff then said "No newline at end of file" in the
    middle of a file, before 2026-12-07.)"""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _store_of(plan: MigrationPlan, source: Path) -> int | str:
    for i in plan.items:
        if i.source == source:
            return i.store
    return "?"


# ---------------------------------------------------------------- apply

def _make_dirs(path: Path) -> None:
    """Create every missing component of ``path`` with mode 0700 (``os.makedirs``
    would create the intermediate ones with the default mode), fsyncing each
    parent so that the new entry is durable (``atomic.make_dirs``).  What is
    there already must be a real directory, not a link to one."""
    def refuse_existing(level: Path, st: os.stat_result) -> str | None:
        if not stat.S_ISDIR(st.st_mode):
            return f"{level}: not a directory; cannot create {path}"
        return None

    def refuse_raced(level: Path) -> str | None:
        if not os.path.isdir(level) or os.path.islink(level):
            return f"{level}: appeared meanwhile and is not a directory"
        return None

    make_dirs(path, strict=True, suffix="; nothing more was copied", fsync=True,
              existing=refuse_existing, raced=refuse_raced)


def _nearest_existing(path: Path) -> Path:
    cur = path
    while not os.path.lexists(cur) and cur.parent != cur:
        cur = cur.parent
    return cur


def check_writable(plan: MigrationPlan) -> None:
    """Before any change: every directory a copy needs must be writable (or creatable
    in a writable parent).  ``StoreWriteError`` naming the first that is not."""
    checked: set[Path] = set()
    for item in plan.copies:
        assert item.destination is not None
        d = _nearest_existing(item.destination.parent)
        if d in checked:
            continue
        checked.add(d)
        if not os.access(d, os.W_OK | os.X_OK):
            why = "read-only file system" if _is_read_only_fs(d) else "permission denied"
            raise StoreWriteError(f"{d}: not writable ({why}); nothing was copied")


def _is_read_only_fs(d: Path) -> bool:
    try:
        return bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def apply_migration(plan: MigrationPlan) -> MigrationPlan:
    """Copy every planned file; returns the plan with each item's ``result``.

    Each copy: the legacy bytes are read again and must still match the
    planned sha256 (else ``source_changed``, not copied); the destination's
    missing directories are created 0700; the bytes are written with
    ``atomic_write(..., backup=False, overwrite=False)`` (temp file, fsync,
    hard link that fails if the destination appeared, directory fsync), so a
    destination created meanwhile is never clobbered (``conflict``); the
    destination is read back and its sha256 compared.  Legacy files are only
    read.  A write failure raises ``StoreWriteError`` (exit 7) saying how many
    files were copied before it; every destination is then either absent or
    complete, and a rerun finishes the job.  Any other error that stops it
    (``StoreCorrupt``: a legacy file gone) says the same, and so does an
    interrupt: the ``KeyboardInterrupt`` (a Ctrl-C, or a SIGTERM or SIGHUP
    that the CLI turns into one) is re-raised with that line as its args,
    counting the file being copied when it is whole at its destination
    (linked, before the directory ``fsync`` or the read-back were done:
    :func:`_copied_whole`).
    """
    from .markdown import writing

    check_writable(plan)
    total = len(plan.copies)
    done = 0
    out: list[PlanItem] = []
    # the item being copied, and len(out) when it began: until its result is
    # in ``out`` an interrupt looks at its destination (:func:`_copied_whole`)
    current: PlanItem | None = None
    current_at = 0
    try:
        for item in plan.items:
            if item.action != COPY:
                out.append(replace(item, result=RES_SKIPPED))
                continue
            assert item.destination is not None
            dest = item.destination
            try:
                data = read_regular(item.source)
            except OSError as exc:
                raise_if_out_of_fds(exc, item.source)
                raise StoreCorrupt(f"{item.source}: cannot read legacy file: {exc.strerror} "
                                   f"({_progress(done, total)})") from None
            if hashlib.sha256(data).hexdigest() != item.sha256:
                out.append(replace(item, result=RES_SOURCE_CHANGED,
                                   detail="the legacy file changed after planning; not copied"))
                continue
            current, current_at = item, len(out)
            # in the Markdown writers' turn (markdown.writing), as every
            # Markdown write: an agent's create-only write cannot slip in
            # between this copy's link and its read-back (before 2026-12-07
            # it could, and overwrote the copy just verified)
            with writing(plan.discovery.store):
                try:
                    _make_dirs(dest.parent)
                    atomic_write(dest, data, backup=False, overwrite=False)
                except FileExistsError:
                    current = None      # (not this copy's: never counted as copied)
                    _state, existing, _why = _dest_state(dest, plan.discovery.store.path)
                    if existing is not None and existing == data:
                        out.append(replace(item, result=RES_IDENTICAL,
                                           detail="the destination appeared meanwhile with these bytes"))
                    else:
                        out.append(replace(item, result=RES_CONFLICT,
                                           detail=f"the destination appeared after planning: {dest}; "
                                                  "not overwritten"))
                    continue
                except StoreWriteError as exc:
                    raise StoreWriteError(f"{exc.message} ({_progress(done, total)})") from None
                try:
                    check = read_regular(dest)
                except OSError as exc:
                    raise StoreWriteError(f"{dest}: cannot read back the copy: {exc.strerror} "
                                          f"({_progress(done, total)})") from None
                if hashlib.sha256(check).hexdigest() != item.sha256:
                    raise StoreWriteError(f"{dest}: the copy does not match {item.source} "
                                          f"(sha256 differs) ({_progress(done, total)})")
            out.append(replace(item, result=RES_COPIED))
            done += 1
    except KeyboardInterrupt as exc:
        # a Ctrl-C, or a SIGTERM or SIGHUP that the CLI turns into one: the
        # message says what was copied, as a failed write's does.  Counted
        # from the results (not ``done``, which the interrupt may have cut
        # off from them), and the file being copied counts once it is whole
        # at its destination: the interrupt mostly lands in the fsyncs after
        # the link, or in the read-back (before 2026-12-07 it was left out,
        # and the count one too low)
        copied = sum(1 for i in out if i.result == RES_COPIED)
        if current is not None and len(out) == current_at:
            try:
                copied += _copied_whole(current)
            except KeyboardInterrupt:
                pass    # (a second interrupt as it looks: the count as it stood)
        exc.args = (_progress(copied, total),)
        raise
    except MemctlError as exc:
        if _RERUN in exc.message:
            raise
        raise type(exc)(f"{exc.message} ({_progress(done, total)})", hint=exc.hint) from None
    return replace(plan, items=out, applied=True)


_RERUN = "run again to finish"


def _copied_whole(item: PlanItem) -> bool:
    """Whether ``item``'s destination is its whole copy: a regular file (no
    link followed) with the planned sha256.  The copy's last step is a hard
    link of a temporary file already written and ``fsync``ed in full
    (``atomic_write``), and the plan found the destination absent: a file
    there with these bytes is this copy, complete, whether or not the
    directory ``fsync`` and the read-back after the link were done.  Reads
    the destination again (an interrupt's count, once)."""
    if item.destination is None:
        return False
    try:
        data = read_regular(item.destination)
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == item.sha256


def _progress(done: int, total: int) -> str:
    return (f"{done} of {total} file{'s' if total != 1 else ''} copied before this; "
            f"every destination is complete or absent; {_RERUN}")


def migrate_legacy(config_dir: str | os.PathLike[str], cwd: str | os.PathLike[str], *,
                   extra: Sequence[str | os.PathLike[str]] = ()) -> MigrationPlan:
    """What the agent calls on first use: plan and apply in one go (no
    questions), for the working directory's own legacy store only, as the
    reference design says ("legacy cwd-scoped Markdown"); the walk of the
    project tree and its worktrees is ``memctl migrate-legacy``'s
    (:func:`plan_migration` without ``cwd_only``).  Public
    (``lecode_memctl.core.migrate_legacy``); ``migrate`` is its older name.
    A path that is not text or holds a NUL is a UsageError (``config.path_text``)."""
    from .config import path_text

    config_dir = path_text(config_dir, "migrate_legacy: config_dir")
    cwd = path_text(cwd, "migrate_legacy: cwd")
    extra = [path_text(e, "migrate_legacy: extra") for e in extra]
    return apply_migration(plan_migration(Path(config_dir), cwd, extra=extra, cwd_only=True))


migrate = migrate_legacy
