"""Project identity: which project root a working directory belongs to, and its slug.

Pure Python, no ``git`` process.  Implements the store contract's "Where a
project's store is" exactly; ``docs/FORMAT.md`` restates it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._lazy import lazy_compile
from ._record import record

MAIN_CHECKOUT = "main checkout"
LINKED_WORKTREE = "linked worktree"
SUBMODULE = "submodule"
NOT_GIT = "not a git checkout"

_NON_ALNUM = lazy_compile(r"[^a-z0-9]+")


def slug_name(base: str) -> str:
    """The name half of a slug for a directory's base name: lower-cased, runs of
    anything but ``[a-z0-9]`` made one ``-``, trimmed, at most 40 characters,
    ``root`` when nothing is left (store contract, "Slug")."""
    return _NON_ALNUM.sub("-", base.lower()).strip("-")[:40] or "root"


def slug(path: str | os.PathLike[str]) -> str:
    """``name-hash`` for an absolute, resolved root path (store contract, "Slug")."""
    p = os.fspath(path)
    name = slug_name(os.path.basename(p.rstrip(os.sep) or p) if p != os.sep else "")
    from .hashing import sha256

    digest = sha256(os.fsencode(p)).hexdigest()[:12]
    return f"{name}-{digest}"


@record(frozen=True)
class ProjectIdentity:
    cwd: Path          # the resolved working directory asked about
    root: Path         # the project root
    kind: str          # MAIN_CHECKOUT, LINKED_WORKTREE, SUBMODULE or NOT_GIT
    checkout: Path     # the checkout that holds cwd (== root except for worktrees)
    detail: str        # e.g. "worktree of /src/app", for people

    @property
    def slug(self) -> str:
        return slug(self.root)

    @property
    def legacy_slug(self) -> str:
        return slug(self.cwd)


def read_gitdir_file(dotgit: str) -> str | None:
    """The target of a ``.git`` file (``gitdir: X``), made absolute; None if unreadable."""
    from .atomic import read_regular  # atomic imports layout, which imports this module

    try:
        data = read_regular(dotgit, 4096, follow=True)
    except OSError:
        return None
    text = data.decode("utf-8", "surrogateescape").strip()
    if not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:"):].strip()
    if not target:
        return None
    if not os.path.isabs(target):
        target = os.path.join(os.path.dirname(dotgit), target)
    return os.path.realpath(target)


def read_commondir(gitdir: str) -> str | None:
    """The common git dir that ``<gitdir>/commondir`` names (a linked
    worktree's), made absolute and resolved; None when there is no such
    regular file, it is unreadable or empty."""
    path = os.path.join(gitdir, "commondir")
    if not os.path.isfile(path):
        return None
    from .atomic import read_regular

    try:
        common = read_regular(path, 4096, follow=True).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None
    if not common:
        return None
    if not os.path.isabs(common):
        common = os.path.join(gitdir, common)
    return os.path.realpath(common)


def _core_worktree(common_dir: str) -> str | None:
    """``core.worktree`` from ``<common dir>/config``, absolute, or None."""
    from .atomic import read_regular

    try:
        text = read_regular(os.path.join(common_dir, "config"), 1 << 20,
                            follow=True).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    section = ""
    value: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            end = line.find("]")
            header = line[1:end if end > 0 else None].strip()
            section = header.split()[0].lower() if header else ""
            # "[core] worktree = x" on one line is legal git syntax
            line = line[end + 1:].strip() if end > 0 else ""
            if not line:
                continue
        if section != "core" or "=" not in line:
            continue
        key, _, val = line.partition("=")
        if key.strip().lower() != "worktree":
            continue
        val = val.strip()
        for sep in (" #", " ;", "\t#", "\t;"):
            if not val.startswith('"') and sep in val:
                val = val.split(sep, 1)[0].rstrip()
        if len(val) >= 2 and val[0] == '"' and val[-1] == '"':
            val = val[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        value = val
    if not value:
        return None
    if not os.path.isabs(value):
        value = os.path.join(common_dir, value)
    return os.path.realpath(value)


def working_directory() -> str:
    """The working directory; NotFound (exit 3) with a plain message when it
    was deleted meanwhile (``os.getcwd`` raises FileNotFoundError)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        from .errors import NotFound

        raise NotFound("the current directory no longer exists (deleted?); cd to the "
                       "project, or give -C PATH or --store DIR") from None


def resolve_project(cwd: str | os.PathLike[str]) -> ProjectIdentity:
    """The project a working directory belongs to (store contract, "Project root")."""
    d = os.path.realpath(os.fspath(cwd))
    probe = d
    while True:
        dotgit = os.path.join(probe, ".git")
        if os.path.lexists(dotgit):
            break
        parent = os.path.dirname(probe)
        if parent == probe:
            return ProjectIdentity(Path(d), Path(d), NOT_GIT, Path(d), NOT_GIT)
        probe = parent

    if os.path.isdir(dotgit):
        return ProjectIdentity(Path(d), Path(probe), MAIN_CHECKOUT, Path(probe), MAIN_CHECKOUT)

    gitdir = read_gitdir_file(dotgit)
    if gitdir is None:
        # A .git entry that is neither a directory nor a readable gitdir file:
        # the nearest .git still marks the checkout root.
        return ProjectIdentity(Path(d), Path(probe), MAIN_CHECKOUT, Path(probe),
                               f"{MAIN_CHECKOUT} (unreadable .git file)")
    common = read_commondir(gitdir)
    if common is not None:
        if os.path.basename(common) == ".git":
            root = os.path.dirname(common)
        else:
            root = _core_worktree(common) or common
        return ProjectIdentity(Path(d), Path(root), LINKED_WORKTREE, Path(probe),
                               f"worktree of {root}")
    return ProjectIdentity(Path(d), Path(probe), SUBMODULE, Path(probe), SUBMODULE)
