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


def resolve_git_path(path: str) -> str | None:
    """``os.path.realpath`` of a path read from a git file; None for one with
    a NUL byte, which names no file (realpath raises ValueError on it: an
    internal error, exit 70, before 2026-12-07)."""
    if "\0" in path:
        return None
    return os.path.realpath(path)


GITFILE_PREFIX = "gitdir: "


def read_git_file(path: str) -> str | None:
    """The text of one of git's one-line files (a ``.git`` file, a linked
    worktree's ``commondir``) as git reads it: only the trailing ``\\n``
    and ``\\r`` are dropped (``read_gitfile_gently``, and
    ``get_common_dir_noenv`` for ``commondir``), blanks are kept, part of
    the path; then the text is read as a C string, up to its first NUL,
    as git uses it (``../..\\0junk\\n`` is ``../..``; ``../..\\n\\0junk``,
    whose ``\\n`` is not trailing, is ``../..\\n``: git 2.39 does both).
    Before 2026-12-07 a NUL was kept, and such a path named no file: a
    linked worktree git takes was a submodule with a store of its own.
    None when it cannot be read."""
    from .atomic import read_regular  # atomic imports layout, which imports this module

    try:
        data = read_regular(path, 4096, follow=True)
    except OSError:
        return None
    return data.decode("utf-8", "surrogateescape").rstrip("\r\n").split("\0", 1)[0]


def read_gitdir_file(dotgit: str) -> str | None:
    """The target of a ``.git`` file (``gitdir: X``), made absolute; None if
    unreadable or not one git reads.  Read as git reads it (``setup.c``,
    ``read_gitfile_gently``; :func:`read_git_file`): the file starts with
    exactly ``gitdir: `` (one space), only trailing ``\\n`` and ``\\r`` are
    dropped, and the rest, blanks included, is the path, which must not be
    empty.  (Before 2026-12-07 ``gitdir:X`` and ``gitdir:   X   `` were
    taken, blanks stripped, for a linked worktree that git refuses:
    "invalid gitfile format".)"""
    text = read_git_file(dotgit)
    if text is None or not text.startswith(GITFILE_PREFIX):
        return None
    target = text[len(GITFILE_PREFIX):]
    if not target:
        return None
    if not os.path.isabs(target):
        target = os.path.join(os.path.dirname(dotgit), target)
    return resolve_git_path(target)


def read_commondir(gitdir: str) -> str | None:
    """The common git dir that ``<gitdir>/commondir`` names (a linked
    worktree's), made absolute and resolved; None when there is no such
    regular file, it is unreadable or empty.  Read as a ``.git`` file is
    (:func:`read_git_file`): blanks are part of the path.  (Before
    2026-12-07 they were stripped, so that a ``commondir`` of ``../..  ``,
    which git refuses, "not a git repository", named the main checkout's
    common dir and gave the worktree its store.)"""
    path = os.path.join(gitdir, "commondir")
    if not os.path.isfile(path):
        return None
    common = read_git_file(path)
    if not common:
        return None
    if not os.path.isabs(common):
        common = os.path.join(gitdir, common)
    return resolve_git_path(common)


def _core_worktree(common_dir: str) -> str | None:
    """``core.worktree`` from ``<common dir>/config``, absolute, or None."""
    from .atomic import read_regular

    try:
        data = read_regular(os.path.join(common_dir, "config"), 1 << 20, follow=True)
    except OSError:
        return None
    value = git_config_value(data.decode("utf-8", "surrogateescape"), "core", "worktree")
    if not value:
        return None
    if not os.path.isabs(value):
        value = os.path.join(common_dir, value)
    return resolve_git_path(value)


def git_config_value(text: str, section: str, key: str) -> str | None:
    """The value ``git config --get <section>.<key>`` prints for a config
    file's ``text`` (a section with no subsection; the last value given
    wins; "" for a key with no value, ``key`` alone, as git prints it), or
    None when the key is not set or the file is one git refuses to read.  Read as git's own
    parser reads it (``config.c``): section and key names in any case, a
    section header ``[core "x"]`` or ``[core.x]`` being a subsection and
    so another section, a comment from ``#`` or ``;`` anywhere outside
    double quotes, double quotes removed, the escapes ``\\`` ``\"`` ``\n``
    ``\t`` ``\b``, a backslash before the end of a line joining the next,
    leading and trailing blanks dropped, and each blank between words kept
    as one space.  No ``include``: a file of git's own writing has none."""
    text = text.replace("\r\n", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    n = len(text)
    i = 0
    here = False             # in [section], with no subsection
    found: str | None = None
    want_section, want_key = section.lower(), key.lower()
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if c in "#;":                       # a comment line
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "[":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "-."):
                j += 1
            name = text[i + 1:j]
            if not name:
                return None                 # "[]", "[ core ]": headers git refuses
            if j < n and text[j] == "]":
                here = name.lower() == want_section
                i = j + 1
                continue
            if j < n and text[j] in " \t\r":
                # [section "subsection"]: another section, whatever its name
                while j < n and text[j] in " \t\r":
                    j += 1
                if j >= n or text[j] != '"':
                    return None
                j += 1
                while j < n and text[j] != '"':
                    if text[j] == "\n" or text[j] == "\\" and text[j + 1:j + 2] in ("\n", ""):
                        return None
                    j += 2 if text[j] == "\\" else 1
                if j + 1 >= n or text[j + 1] != "]":
                    return None
                here = False
                i = j + 2
                continue
            return None                     # a header git refuses
        if not c.isalpha():
            return None
        j = i
        while j < n and (text[j].isalnum() or text[j] == "-"):
            j += 1
        name = text[i:j]
        while j < n and text[j] in " \t\r":
            j += 1
        if j >= n or text[j] == "\n":      # "key" alone: a boolean, no value
            if here and name.lower() == want_key:
                found = ""                  # (what git prints for it)
            i = j + 1
            continue
        if text[j] != "=":
            return None
        value, i = _git_value(text, j + 1)
        if value is None:
            return None
        if here and name.lower() == want_key:
            found = value
    return found


def _git_value(text: str, i: int) -> tuple[str | None, int]:
    """The value starting at ``text[i]`` (after its ``=``) as git reads it,
    and where the next line starts; None for one git refuses (an unknown
    escape, a quote left open at the end of the line)."""
    n = len(text)
    out: list[str] = []
    quote = comment = False
    space = 0
    while i < n:
        c = text[i]
        i += 1
        if c == "\n":
            return (None, i) if quote else ("".join(out), i)
        if comment:
            continue
        if c in " \t\r" and not quote:
            if out:
                space += 1
            continue
        if not quote and c in "#;":
            comment = True
            continue
        out.append(" " * space)
        space = 0
        if c == "\\":
            if i >= n:
                # a backslash that ends the file joins nothing, as one before
                # a newline (git 2.39: "a\\" at the end is "a"; found by the
                # differential test, 2026-12-07)
                return (None, i) if quote else ("".join(out), i)
            c = text[i]
            i += 1
            if c == "\n":
                continue
            esc = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}.get(c)
            if esc is None:
                return None, i
            out.append(esc)
            continue
        if c == '"':
            quote = not quote
            continue
        out.append(c)
    return (None, i) if quote else ("".join(out), i)


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
    """The project a working directory belongs to (store contract, "Project root").
    A path that is not text or holds a NUL is a UsageError (``config.path_text``)."""
    from .config import path_text

    d = os.path.realpath(path_text(cwd, "resolve_project: cwd"))
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
