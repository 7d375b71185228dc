"""The Markdown side of a store: MEMORY.md, scratchpad.md, daily logs, named notes.

Reading, listing, regex search, and atomic writes with a ``.bak`` of the
previous content.  Names and dates given by a user are checked by syntax
before any filesystem call; files are opened without following symbolic
links (``O_NOFOLLOW``, directory by directory) and must be regular files.
Text is UTF-8; undecodable bytes are ``StoreCorrupt`` naming the file.

``docs/FORMAT.md`` ("Markdown") documents the rules in this module.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ._record import record
from .atomic import O_DIRECTORY, O_NONBLOCK, atomic_write, open_nofollow, read_all
from .errors import NotFound, StoreCorrupt, StoreWriteError, UsageError, raise_if_out_of_fds
from .hashing import sha256 as _sha256
from .layout import DAILY_DIR, MEMORY_FILE, NOTES_DIR, SCRATCHPAD_FILE, Store

# The names and dates (syntax only) live in mdnames, the search in
# markdown_search; this module offers all of their names.
from .mdnames import (
    FILE_NAME_MAX_BYTES as FILE_NAME_MAX_BYTES,
    MD_SUFFIX as MD_SUFFIX,
    NOTE_NAME_MAX_BYTES as NOTE_NAME_MAX_BYTES,
    NOTE_NAME_MAX_CHARS as NOTE_NAME_MAX_CHARS,
    _md_entries,
    _show,
    check_date as check_date,
    check_note_name as check_note_name,
    is_daily_file as is_daily_file,
    is_note_file as is_note_file,
    today as today,
    utf8_problem as utf8_problem,
)

if TYPE_CHECKING:
    from .markdown_notes import NoteInfo as NoteInfo, list_notes as list_notes
    from .markdown_search import (
        SearchHit as SearchHit,
        SearchResult as SearchResult,
        SearchRun as SearchRun,
        SkippedFile as SkippedFile,
        compile_pattern as compile_pattern,
        iter_search as iter_search,
        search as search,
        stream_search as stream_search,
    )
else:
    from ._lazy import lazy_getattr

    # Loaded on first use: only 'memctl search' searches, only 'memctl notes'
    # lists the notes (see core/_lazy.py).
    _MOVED = {name: ".markdown_search" for name in (
        "SearchHit", "SearchResult", "SearchRun", "SkippedFile", "compile_pattern", "iter_search",
        "search", "stream_search")}
    _MOVED.update(NoteInfo=".markdown_notes", list_notes=".markdown_notes")
    __getattr__ = lazy_getattr(__name__, _MOVED)

DEFAULT_SEARCH_LIMIT = 50

# What a user can name with `memctl edit WHAT`.
MEMORY = "memory"
SCRATCHPAD = "scratchpad"
LOG = "log"
NOTE = "note"
KINDS = (MEMORY, SCRATCHPAD, LOG, NOTE)

_READ_CHUNK = 1 << 20
# How far past its head a Markdown file whose head is blank is read on, looking
# for a byte that is not blank (read_head_blank); blank that far and going on,
# it is taken as going on (docs/FORMAT.md).
LOOK_ON_AT_MOST = 8 << 20


# ---------------------------------------------------------------- locations

@record(frozen=True)
class Target:
    """One Markdown file of a store, named by kind (and date or note name)."""

    kind: str           # MEMORY, SCRATCHPAD, LOG or NOTE
    rel: tuple[str, ...]  # path components below the store directory
    label: str          # for people: "MEMORY.md", "daily log 2026-03-01", "note 'todo'"

    def path(self, store: Store) -> Path:
        return store.path.joinpath(*self.rel)

    @property
    def relpath(self) -> str:
        return "/".join(self.rel)


def memory_target() -> Target:
    return Target(MEMORY, (MEMORY_FILE,), MEMORY_FILE)


def scratchpad_target() -> Target:
    return Target(SCRATCHPAD, (SCRATCHPAD_FILE,), SCRATCHPAD_FILE)


def log_target(date: str | None = None) -> Target:
    d = check_date(date) if date is not None else today()
    return Target(LOG, (DAILY_DIR, d + MD_SUFFIX), f"daily log {d}")


def note_target(name: str, *, reading: bool = False) -> Target:
    """The note ``name``; with ``reading`` by the reading rule (``<name>.md``
    at most 255 bytes), else by the writing rule (248 bytes: room for the
    ``.bak``; :func:`check_note_name`).  :func:`write` checks a note's name
    by the writing rule in any case."""
    n = check_note_name(name, writing=not reading)
    return Target(NOTE, (NOTES_DIR, n + MD_SUFFIX), f"note {n!r}")


def target_for(kind: str, arg: str | None = None) -> Target:
    """``memory``, ``scratchpad``, ``log [DATE]`` or ``note NAME`` as a :class:`Target`."""
    if kind in (MEMORY, SCRATCHPAD):
        if arg is not None:
            raise UsageError(f"'{kind}' takes no further argument (got {_show(arg)})")
        return memory_target() if kind == MEMORY else scratchpad_target()
    if kind == LOG:
        return log_target(arg)
    if kind == NOTE:
        if arg is None:
            raise UsageError("'note' needs a note name, e.g. 'note todo'")
        return note_target(arg)
    raise UsageError(f"unknown file kind {_show(kind)}: use one of {', '.join(KINDS)}")


# ---------------------------------------------------------------- safe opening

def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _open_below(base: Path, rel: tuple[str, ...], *, label: str) -> int | None:
    """Open ``base/rel...`` read-only without following a symbolic link at any
    component below ``base`` (nor ``base`` itself).  ``None`` when a component
    is missing.  Raises ``StoreCorrupt`` for a symlink or a non-regular file."""
    fds: list[int] = []
    shown = base
    try:
        try:
            fd = open_nofollow(base, os.O_RDONLY | O_DIRECTORY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(base):
                raise StoreCorrupt(f"{base}: store directory is a symbolic link; "
                                   "refusing to follow it") from None
            if exc.errno == errno.ENOTDIR:
                raise StoreCorrupt(f"{base}: store path is not a directory") from None
            raise_if_out_of_fds(exc, base)
            raise StoreCorrupt(f"{base}: cannot open: {exc.strerror}") from None
        fds.append(fd)
        for i, part in enumerate(rel):
            last = i == len(rel) - 1
            shown = shown / part
            flags = os.O_RDONLY | (O_NONBLOCK if last else O_DIRECTORY)
            try:
                fd = open_nofollow(part, flags, dir_fd=fds[-1])
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    try:
                        st = os.lstat(part, dir_fd=fds[-1])
                    except OSError:
                        st = None
                    if st is not None and stat.S_ISLNK(st.st_mode):
                        raise StoreCorrupt(f"{shown}: is a symbolic link; refusing to follow it "
                                           f"(reading {label})") from None
                    if st is not None and not last:
                        raise StoreCorrupt(f"{shown}: not a directory") from None
                raise_if_out_of_fds(exc, shown)
                raise StoreCorrupt(f"{shown}: cannot open: {exc.strerror}") from None
            fds.append(fd)
        st = os.fstat(fds[-1])
        if not stat.S_ISREG(st.st_mode):
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise StoreCorrupt(f"{shown}: is {what} (reading {label})")
        return fds.pop()
    finally:
        for fd in fds:
            os.close(fd)


def _read_fd(fd: int, path: Path) -> bytes:
    try:
        return read_all(fd, _READ_CHUNK)
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def open_file(store: Store, target: Target) -> int | None:
    """A descriptor open on the file for reading (the caller closes it), or
    ``None`` when it (or the store) does not exist; ``StoreCorrupt`` for a
    symbolic link, a file that is not regular or one that cannot be opened."""
    return _open_below(store.path, target.rel, label=target.label)


def read_bytes(store: Store, target: Target) -> bytes | None:
    """The file's bytes, or ``None`` when it (or the store) does not exist."""
    fd = open_file(store, target)
    if fd is None:
        return None
    return _read_fd(fd, target.path(store))


def read_head(store: Store, target: Target, limit: int) -> tuple[bytes, int] | None:
    """At most ``limit`` bytes from the start of the file and its size, or
    ``None`` when it (or the store) does not exist: bounded work for a bounded
    output (``context`` shows at most ``max_bytes`` of a 300 MB MEMORY.md)."""
    got = read_head_blank(store, target, limit, look_on=False)
    return None if got is None else got[:2]


def read_head_blank(store: Store, target: Target, limit: int, *, look_on: bool = True
                    ) -> tuple[bytes, int, bool] | None:
    """:func:`read_head`'s (head, size), and whether the file is blank (no
    byte but ASCII whitespace, as ``bytes.strip`` takes it).  A blank head of
    a file that goes on is not enough to say so: with ``look_on`` the rest
    is read, :data:`_READ_CHUNK` bytes at a time and none kept, to its first
    byte that is not blank (``context`` left out a MEMORY.md whose first MiB
    was blank lines, silently, before 2026-12-07), but no further than
    :data:`LOOK_ON_AT_MOST` bytes past the head: a file blank that far that
    has a byte more counts as not blank (as going on).  Without ``look_on``
    such a file counts as not blank."""
    fd = _open_below(store.path, target.rel, label=target.label)
    if fd is None:
        return None
    path = target.path(store)
    try:
        size = os.fstat(fd).st_size
        chunks, left = [], max(0, limit)
        while left > 0:
            data = os.read(fd, min(left, _READ_CHUNK))
            if not data:
                break
            chunks.append(data)
            left -= len(data)
        head = b"".join(chunks)
        blank = not head.strip()
        if blank and left <= 0 and look_on:
            # at most LOOK_ON_AT_MOST bytes on (before 2026-12-07 to the end,
            # on every build: 0.55 s for 500 MB of newlines); blank that far,
            # a file with a byte more is taken as going on (its part cut)
            ahead = LOOK_ON_AT_MOST
            while ahead > 0 and (data := os.read(fd, min(ahead, _READ_CHUNK))):
                ahead -= len(data)
                if data.strip():
                    blank = False
                    break
            else:
                if ahead <= 0 and os.read(fd, 1):
                    blank = False
        elif blank and left <= 0:
            blank = False
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return head, max(size, len(head)), blank


def decode(data: bytes, path: Path | str) -> str:
    """UTF-8 text, or ``StoreCorrupt`` naming the file and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        where = utf8_problem((data,))
        assert where is not None
        raise not_utf8(path, where) from None


def not_utf8(path: Path | str, where: tuple[int, int]) -> StoreCorrupt:
    """The error of a file that is not UTF-8, its first bad byte at
    ``where`` (byte offset, line: :func:`utf8_problem`)."""
    return StoreCorrupt(f"{path}: not valid UTF-8 (byte offset {where[0]}, line {where[1]})")


def sha256(data: bytes | None) -> str | None:
    return None if data is None else _sha256(data).hexdigest()


# ---------------------------------------------------------------- reading

@record(frozen=True)
class MarkdownFile:
    path: Path
    text: str
    size: int
    sha256: str


def _missing(store: Store, target: Target) -> NotFound:
    path = target.path(store)
    if not os.path.lexists(store.path):
        if store.identity is None:
            return NotFound(f"no {target.label}: the store directory {store.path} does not exist")
        return NotFound(f"no {target.label}: the project {store.identity.root} has no memory "
                        f"store yet (looked for {path})", hint="'memctl where' explains the lookup")
    hint = None
    if target.kind == MEMORY:
        hint = "create it with 'memctl edit'"
    elif target.kind == LOG:
        hint = f"daily logs are files YYYY-MM-DD.md in {store.daily_dir}"
    elif target.kind == NOTE:
        hint = "'memctl notes' lists the notes"
    return NotFound(f"no {target.label} (looked for {path})", hint=hint)


def read(store: Store, target: Target) -> MarkdownFile:
    """Read one Markdown file: ``NotFound`` if missing, ``StoreCorrupt`` if a
    symlink, not a regular file, or not UTF-8."""
    got = read_if_there(store, target)
    if got is None:
        raise _missing(store, target)
    return got


def read_if_there(store: Store, target: Target) -> MarkdownFile | None:
    """:func:`read`, or None when the file (or the store) does not exist."""
    data = read_bytes(store, target)
    if data is None:
        return None
    path = target.path(store)
    return MarkdownFile(path, decode(data, path), len(data), _sha256(data).hexdigest())


#: Bytes of a Markdown file :func:`read_pieces` gives as one text, read once;
#: a larger file is checked in a first pass and given in a second.
WHOLE_UPTO = 1 << 22
#: Bytes read at a time by :func:`read_pieces`.
PIECE_BYTES = 1 << 20


def read_pieces(store: Store, target: Target) -> tuple[Path, Iterator[str]]:
    """:func:`read`'s text, for a command that prints it: (the file's path,
    its text in pieces, each cut between two characters), so that memory
    follows a piece, not the file (``show``, ``log`` and ``notes NAME`` of
    a 32 MB file peaked at 74 MiB).

    The same errors as :func:`read`, raised here, before any piece is
    given: ``NotFound``, ``StoreCorrupt`` for a link, a file that is not
    regular, cannot be read or is not UTF-8 (naming the same byte).  A file
    of at most :data:`WHOLE_UPTO` bytes is read once and given as one
    piece.  A larger one is checked by :func:`check_read` and read again
    by :func:`read_again`.  Should the second read find other bytes than
    the first (a CRC-32 of each compared; fewer bytes; bytes that no longer
    decode) -- the file rewritten in place meanwhile -- the iteration raises
    ``StoreCorrupt`` after the pieces already given: they are then not one
    version of the file, and the caller's output says so by its error.  An
    append, or a touch, changes none of the bytes given: no error.  lecode
    and ``memctl edit`` replace a file (a rename), which the open
    descriptor never sees."""
    fd = open_file(store, target)
    if fd is None:
        raise _missing(store, target)
    try:
        checked = check_read(store, target, fd, keep=WHOLE_UPTO, piece=PIECE_BYTES, crc=True)
    except BaseException:
        os.close(fd)
        raise
    path = target.path(store)
    if checked.kept is not None:
        os.close(fd)
        return path, iter((b"".join(checked.kept).decode("utf-8"),))
    try:
        # (a file object owns it from here: pieces dropped unread, whose
        # generator never ran, close it all the same)
        owner = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return path, _second_read(owner, path, checked)


def _second_read(owner: io.FileIO, path: Path, checked: Checked) -> Iterator[str]:
    """The pieces of :func:`read_pieces`'s second read (of the file that
    ``owner`` holds open, closed when they end)."""
    import codecs
    import zlib

    changed = StoreCorrupt(f"{path}: changed while it was printed (written in place); "
                           "the text given is not one version of the file")
    fd = owner.fileno()
    try:
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        pos = crc = 0
        try:
            for data in read_again(fd, checked.size, PIECE_BYTES):
                pos += len(data)
                crc = zlib.crc32(data, crc)
                try:
                    text = decoder.decode(data, final=pos >= checked.size)
                except UnicodeDecodeError:
                    raise changed from None
                if text:
                    yield text
        except Reread:
            raise changed from None
        if crc != checked.crc:
            raise changed
    finally:
        owner.close()


# ---------------------------------------------------------------- reading twice

@record(frozen=True)
class Checked:
    """An open Markdown file read once to its end and found UTF-8
    (:func:`check_read`)."""
    kept: list[bytes] | None        # its bytes in pieces, when at most the bound kept
    size: int                       # the bytes read
    crc: int | None                 # their CRC-32 (zlib.crc32), when asked: a second read compares it


def check_read(store: Store, target: Target, fd: int, *, keep: int, piece: int,
               crc: bool = False) -> Checked:
    """The first read of the open file ``fd`` from its position to its end,
    ``piece`` bytes at a time: its pieces kept when it is at most ``keep``
    bytes (the caller needs no second read), else only its size.
    ``StoreCorrupt`` when it cannot be read to its end or is not UTF-8
    (:func:`utf8_problem` names the first bad byte, as :func:`decode`).
    The read commands that must not hold a large file (``show``, ``search``)
    check it so and then read it again (:func:`read_again`): nothing is
    given from a file that is not UTF-8, and memory follows a piece.
    ``crc``: the bytes' CRC-32 too, for a second read to compare (``show``;
    ``search`` judges a second read by its bytes alone)."""
    import zlib  # (only a command that reads a file twice needs it)

    kept: list[bytes] | None = []
    size = crc_sum = 0

    def pieces() -> Iterator[bytes]:
        nonlocal kept, size, crc_sum
        for data in _pieces(fd, piece):
            size += len(data)
            if crc:
                crc_sum = zlib.crc32(data, crc_sum)
            if kept is not None:
                if size <= keep:
                    kept.append(data)
                else:
                    kept = None
            yield data

    path = target.path(store)
    try:
        where = utf8_problem(pieces())
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    if where is not None:
        raise not_utf8(path, where)
    return Checked(kept, size, crc_sum if crc else None)


def _pieces(fd: int, piece: int) -> Iterator[bytes]:
    while True:
        data = os.read(fd, piece)
        if not data:
            return
        yield data


class Reread(Exception):
    """The second read of a file (:func:`read_again`) failed: why."""


def read_again(fd: int, size: int, piece: int) -> Iterator[bytes]:
    """The first ``size`` bytes of the open file ``fd`` (as :func:`check_read`
    found them), read again from its start by ``pread``, ``piece`` bytes at
    a time: an append since the check is not read.  :class:`Reread` when it
    cannot be read or is shorter now."""
    at = 0
    while at < size:
        try:
            data = os.pread(fd, min(piece, size - at), at)
        except OSError as exc:
            raise Reread(f"cannot read it again: {exc.strerror}") from None
        if not data:
            raise Reread("shorter than when it was checked")
        at += len(data)
        yield data


def read_memory(store: Store) -> MarkdownFile:
    return read(store, memory_target())


def read_scratchpad(store: Store) -> MarkdownFile:
    return read(store, scratchpad_target())


def read_log(store: Store, date: str | None = None) -> MarkdownFile:
    return read(store, log_target(date))


def read_note(store: Store, name: str) -> MarkdownFile:
    return read(store, note_target(name, reading=True))


# ---------------------------------------------------------------- listing

def markdown_files(store: Store) -> list[Target]:
    """The files search covers, in search order: MEMORY.md, scratchpad.md,
    daily/*.md, notes/*.md (never ``.bak``, temp files or sessions).  A
    ``*.md`` entry of daily/ or notes/ that is a symbolic link or not a
    regular file is in the list, as MEMORY.md always is: reading it refuses
    it (``StoreCorrupt``), and search reports it as skipped."""
    store.require()
    out = [memory_target(), scratchpad_target()]
    for sub, kind in ((DAILY_DIR, LOG), (NOTES_DIR, NOTE)):
        for name, _st in _md_entries(store, sub, every=True):
            stem = name[:-len(MD_SUFFIX)]
            label = f"daily log {stem}" if kind == LOG else f"note {stem!r}"
            out.append(Target(kind, (sub, name), label))
    return out


# ---------------------------------------------------------------- writing

def _check_write_dirs(store: Store, target: Target) -> None:
    """Refuse to write through a symlinked store directory or subdirectory,
    and a note whose name leaves no room for its ``.bak`` (a target made by
    the reading rule: :func:`note_target`), exit 2."""
    if target.kind == NOTE:
        stem = target.rel[-1][:-len(MD_SUFFIX)]
        if len(stem.encode("utf-8", "surrogateescape")) > NOTE_NAME_MAX_BYTES:
            raise UsageError(f"invalid note name {_show(stem)}: longer than "
                             f"{NOTE_NAME_MAX_BYTES} bytes of UTF-8 (its backup '<name>.md.bak' "
                             f"must fit {FILE_NAME_MAX_BYTES} bytes); it can be read, not "
                             "written: rename it to a shorter name to write it")
    p = store.path
    for part in (None, *target.rel[:-1]):
        if part is not None:
            p = p / part
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreWriteError(f"{p}: cannot stat: {exc.strerror}; nothing was changed") from None
        if stat.S_ISLNK(st.st_mode):
            raise StoreCorrupt(f"{p}: is a symbolic link; refusing to write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise StoreCorrupt(f"{p}: not a directory")
    final = target.path(store)
    if _is_link(final):
        raise StoreCorrupt(f"{final}: is a symbolic link; refusing to replace it")


#: How long a Markdown write waits for another writer's turn (:func:`writing`).
WRITE_LOCK_WAIT = 10.0


class _Turn:
    """A turn held by this process: its locked descriptor (-1 once a forked
    child let go of its copy)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd


# The turns this process holds, and this thread's, by store directory: a
# writer inside a turn (``with writing(store): project.write_markdown(...)``)
# is already in it (the lock is not taken twice, which would wait on
# itself); a forked child never keeps the parent's turn.
_HELD: set[_Turn] = set()
_MINE = _thread._local()


def _let_go_in_child() -> None:
    for turn in list(_HELD):
        if turn.fd >= 0:
            try:
                os.close(turn.fd)   # the child's copy; the parent keeps the lock
            except OSError:
                pass
            turn.fd = -1
    _HELD.clear()
    _MINE.__dict__.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_in_child)


@contextlib.contextmanager
def writing(store: Store, *, wait: float | None = None) -> Iterator[None]:
    """The Markdown writers' turn: an exclusive ``flock`` on the store
    directory, held from a writer's check of the file to its replace (its
    ``.bak`` included), so that a compare-and-write cannot lose a write made
    between its check and its rename.  Every Markdown write of the core takes
    it (:func:`write`, :func:`write_if_unchanged`, ``redact``'s rewrites,
    ``migrate-legacy``'s copies), the agent's through this library too;
    readers never do.  Waits at most ``wait`` seconds (default
    :data:`WRITE_LOCK_WAIT`), then ``StoreBusy`` (exit 6).  Creates the
    store directory (mode 0700) when missing, as the write would.

    Re-entrant within a thread (a writer called inside a turn of the same
    store is in it already); another thread of the process waits its turn
    as another process does.  A child forked inside a turn lets go of its
    copy of the lock at once, so it never holds the parent's turn.  (Before
    2026-12-07 there was no turn: two writers each checking the same bytes
    both wrote, and the first one's write was lost without a word.)"""
    from .atomic import O_CLOEXEC, O_NOFOLLOW, ensure_dir, lock_within
    from .errors import StoreBusy

    key = os.path.abspath(store.path)
    depth: dict[str, int] = _MINE.__dict__.setdefault("depth", {})
    if depth.get(key):
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    bound = WRITE_LOCK_WAIT if wait is None else max(float(wait), 0.0)
    ensure_dir(store.path)
    try:
        fd = os.open(store.path, os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    except OSError as exc:
        raise StoreWriteError(f"{store.path}: cannot open to lock for writing: {exc.strerror}; "
                              "nothing was changed") from None
    turn = _Turn(fd)
    try:
        try:
            taken = lock_within(fd, bound)
        except OSError as exc:
            raise StoreWriteError(f"{store.path}: cannot lock for writing: {exc.strerror}; "
                                  "nothing was changed") from None
        if not taken:
            raise StoreBusy(f"{store.path}: another writer of the Markdown memory held its lock "
                            f"for {bound:g} s; nothing was changed")
        _HELD.add(turn)
        depth[key] = 1
        try:
            yield
        finally:
            depth.pop(key, None)
            _HELD.discard(turn)
    finally:
        if turn.fd >= 0:
            os.close(turn.fd)


def encode_text(target: Target, text: str) -> bytes:
    """``text`` as the UTF-8 bytes written for ``target``; a lone surrogate
    (from JSON's ``"\ud800"``, say) is ``UsageError``, as a fact's text is,
    not a raw ``UnicodeEncodeError``; text that is not a ``str`` (bytes,
    None) is ``UsageError`` too (before 2026-12-07 a raw ``AttributeError``)."""
    if not isinstance(text, str):
        raise UsageError(f"the text for {target.label} must be a str, not {type(text).__name__} "
                         "(bytes.decode makes text of bytes); nothing was written")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"the text for {target.label} is not valid Unicode (a lone surrogate "
                         f"at character {exc.start}); nothing was written") from None


def write(store: Store, target: Target, text: str, *, backup: bool = True) -> Path:
    """Replace the file with ``text`` (UTF-8) atomically; the previous content,
    if any, goes to ``<file>.bak`` first.  Creates the store and its
    subdirectory (mode 0700) when missing.  Takes the writers' turn
    (:func:`writing`)."""
    _check_write_dirs(store, target)
    path = target.path(store)
    data = encode_text(target, text)
    with writing(store):
        atomic_write(path, data, backup=backup)
    return path


def write_if_unchanged(store: Store, target: Target, data: bytes, expected_sha256: str | None,
                       *, backup: bool = True) -> Path:
    """Write ``data`` unless the file on disk no longer has ``expected_sha256``
    (``None``: the file must still be missing); ``Conflict`` otherwise.  The
    check and the write are one turn of the writers (:func:`writing`), so a
    write that another writer made meanwhile is never overwritten."""
    from .errors import Conflict

    decode(data, "the new content")
    _check_write_dirs(store, target)
    path = target.path(store)
    with writing(store):
        now = sha256(read_bytes(store, target))
        if now != expected_sha256:
            raise Conflict(f"{path} changed on disk since it was read; not overwritten")
        atomic_write(path, data, backup=backup)
    return path
