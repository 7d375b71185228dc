"""File primitives (model: dulwich ``file.py``): opening without following
links, whole reads and writes, directory creation and ``fsync``, and atomic
file replacement with a ``.bak`` of the previous content.

Every module opens store files through :func:`open_nofollow` (one spelling
of the ``O_NOFOLLOW``/``O_CLOEXEC`` flags, which some platforms lack).

Atomic replacement: temp file created with ``O_EXCL`` in the same directory, written, ``fsync``ed;
the previous content copied to ``<file>.bak`` the same way; ``os.replace``;
``fsync`` of the directory.  On any error the temp files are removed and the
target is untouched.  Model: dulwich ``GitFile``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import shutil
import signal
import stat
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .errors import LocalResourceError, StoreCorrupt, StoreWriteError, UsageError
from .layout import DIR_MODE, FILE_MODE

TMP_PREFIX = "."
TMP_MARK = ".tmp-"

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class NotRegularFile(OSError):
    """What :func:`open_nofollow` raises for a FIFO, socket or device in a
    file's place (``errno.EINVAL``; ``strerror`` names the type)."""


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str:
    """"a FIFO", "a directory", ... for an ``st_mode`` (messages)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_nofollow(path: str | os.PathLike[str], flags: int = os.O_RDONLY,
                  mode: int = FILE_MODE, *, dir_fd: int | None = None,
                  follow: bool = False) -> int:
    """``os.open(path, flags)`` that never follows a symbolic link in the last
    component (``O_NOFOLLOW``: a link fails with ``errno.ELOOP``, see
    :func:`is_link_refusal`) and is not inherited by children (``O_CLOEXEC``).
    ``dir_fd``: ``path`` is relative to that open directory.  ``OSError``
    passes through: each caller maps it to its own error.

    Never blocks (issue 16.3): the open is non-blocking (a FIFO or a device
    in a file's place would otherwise wait forever for a writer), and unless
    ``flags`` has ``O_DIRECTORY`` the opened file must be a regular file or a
    directory (a directory fails where it is read, as before):
    anything else raises :class:`NotRegularFile`.  ``O_NONBLOCK`` is then
    cleared again unless the caller asked for it.  ``follow=True`` (files
    outside a store that may be links: ``config.toml``, a project's ``.git``)
    follows a symbolic link and keeps the other checks."""
    fl = flags | O_CLOEXEC | (0 if follow else O_NOFOLLOW)
    if flags & O_DIRECTORY:
        return os.open(path, fl, mode, dir_fd=dir_fd)
    # The descriptor is this frame's from the store of os.open's result to
    # the return, both inside the try: an interrupt anywhere between closes
    # it.  (One that lands as os.open returns, before its result is stored,
    # leaks it: a bare int has no owner.  :func:`open_owned` hands one over.)
    fd = -1
    try:
        fd = os.open(path, fl | O_NONBLOCK, mode, dir_fd=dir_fd)
        _check_opened(fd, flags)
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def _check_opened(fd: int, flags: int) -> None:
    """:func:`open_nofollow`'s checks of what it opened (``O_NONBLOCK``)."""
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise NotRegularFile(errno.EINVAL, f"is {file_kind(st.st_mode)}, not a regular file")
    if not flags & O_NONBLOCK and O_NONBLOCK:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~O_NONBLOCK)


# the mode of open_owned's file object, by access mode (only its reads and
# writes use it; the flags of the open are open_nofollow's)
_OWNED_MODE = {os.O_RDONLY: "rb", os.O_WRONLY: "wb", os.O_RDWR: "r+b"}


def open_owned(path: str | os.PathLike[str], flags: int = os.O_RDONLY,
               mode: int = FILE_MODE, *, dir_fd: int | None = None,
               follow: bool = False) -> io.FileIO:
    """:func:`open_nofollow` (same flags, errors and checks) as a file
    object that owns the descriptor from the moment its ``opener`` returns
    it (``FileIO`` keeps it at once, in C): a Ctrl-C at any point after
    that, the return included, cannot lose it, since a file object dropped
    unclosed closes it; and its ``close`` is one call, done or not, never
    half.  Between ``os.open``'s return and that (the opener, a Python
    function, returning) SIGINT, SIGTERM, SIGHUP and SIGALRM are held
    (:func:`hold_signals`): no handler of theirs runs there (in the calling
    thread: see :func:`open_in_dir` for a process with other threads); one
    that came meanwhile is raised once the file object has the descriptor,
    and closes it.  (Before 2026-12-07 one landing as ``os.open`` returned left
    a raw descriptor no object owned: a session's lock, open, unlocked.)
    What a caller keeps a descriptor of for longer than one function
    should hold, or that passes through several, is opened here.  A
    directory raises ``IsADirectoryError`` (``FileIO`` refuses one); the
    caller reads and writes through ``fileno()``."""
    fl = flags | O_CLOEXEC | O_NONBLOCK | (0 if follow else O_NOFOLLOW)
    before = _NOT_HELD
    f = None
    try:
        before = mask_now()             # (taken inside the try, as open_in_dir's)
        block(_OPEN_HELD, before)
        f = io.FileIO(os.fspath(path), _OWNED_MODE[flags & os.O_ACCMODE],
                      opener=lambda _path, _flags: os.open(path, fl, mode, dir_fd=dir_fd))
        release_signals(before)         # (a signal held meanwhile is raised here)
        before = _NOT_HELD
        _check_opened(f.fileno(), flags)
        return f
    except BaseException:
        if f is not None:
            f.close()
        raise
    finally:
        # (no call on the way out of a success: a handler may run as any
        # call starts, and one raised here would leave past the except
        # that closes the descriptor -- a code review of 2026-12-07)
        if before is not _NOT_HELD:
            release_signals(before)


_DIR_OPEN = getattr(os, "O_PATH", os.O_RDONLY)


def open_in_dir(path: str | os.PathLike[str], flags: int = os.O_RDONLY) -> int:
    """:func:`open_nofollow` of ``path`` whose directory is not followed either
    (issue 16.2: a store's ``sessions/`` replaced by a link to elsewhere): the
    directory is opened with ``O_NOFOLLOW | O_DIRECTORY`` and the file relative
    to it, so a linked directory fails with ``ELOOP`` like a linked file
    (:func:`is_link_refusal`).  Same errors and checks as ``open_nofollow``.

    Leaks no descriptor when interrupted: SIGINT, SIGTERM, SIGHUP and
    SIGALRM are held (:func:`hold_signals`) from before the directory's open until the
    file's descriptor is stored here, where an interrupt closes it; one that
    came meanwhile is raised as they are let go, inside the ``try`` that
    closes it.  (Before 2026-12-07 one landing as the directory's
    ``os.open`` returned, or in its ``close``, left a descriptor open for
    the life of the process.)  The caller stores the int it returns at
    once: no signal handler runs between a return and that store.

    The hold is the calling thread's (``pthread_sigmask``): in a process
    with other threads, a signal sent to the process may be taken by
    another thread, and Python then runs its handler in the main thread
    at once, inside the window; only a single-threaded caller (memctl's
    own process) is covered whole."""
    parent, name = os.path.split(os.fspath(path))
    fd = -1
    before = _NOT_HELD
    try:
        # (the mask taken inside the try: whatever is raised from here on,
        # the finally restores it)
        before = mask_now()
        block(_OPEN_HELD, before)
        try:
            # (O_PATH where there is one: a directory that may be searched but
            # not listed, mode 100, still opens its files by name, as a plain
            # open of the path does; O_RDONLY needs the read permission)
            dfd = os.open(parent or ".", _DIR_OPEN | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        except NotADirectoryError:
            # Linux says ENOTDIR, not ELOOP, for a link opened with O_DIRECTORY | O_NOFOLLOW
            if os.path.islink(parent or "."):
                raise OSError(errno.ELOOP, "the directory is a symbolic link", parent) from None
            raise
        try:
            fd = open_nofollow(name, flags, dir_fd=dfd)
        finally:
            os.close(dfd)
        release_signals(before)     # (a signal held meanwhile is raised here)
        before = _NOT_HELD
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    finally:
        # (no call on the way out of a success: see open_owned)
        if before is not _NOT_HELD:
            release_signals(before)


def open_regular(path: str | os.PathLike[str], *, follow: bool = False) -> int:
    """A read descriptor of the file ``path``, opened as :func:`read_regular`
    opens it (never blocks; a link refused unless ``follow``; a directory
    raises ``IsADirectoryError``), for a caller that reads it in pieces."""
    fd = -1
    try:
        fd = open_nofollow(path, follow=follow)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int | None = None, *,
                 follow: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``), opened with
    :func:`open_nofollow` (never blocks; a link is refused unless ``follow``).
    A directory raises ``IsADirectoryError``; ``OSError`` passes through."""
    # (a file object: closed when an interrupt drops it, whatever it cut short)
    with open_owned(path, follow=follow) as f:
        return read_all(f.fileno()) if limit is None else read_at_most(f, limit)


def read_file_or_pipe(path: str | os.PathLike[str], most: int) -> bytes:
    """The bytes of ``path``, a regular file (or a link to one) or a pipe
    read to its end (a command's ``<(...)``: process substitution), at most
    ``most + 1`` of them: more than ``most`` is the caller's to refuse.
    Opened without blocking: a FIFO no process writes is read as empty at
    once, never waited on; a device, a socket: :class:`NotRegularFile`,
    never read without end.  A directory: ``IsADirectoryError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", buffering=0) as f:      # (closed whatever happens)
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if stat.S_ISFIFO(mode):
            os.set_blocking(fd, True)           # (what its writer writes is waited for)
        elif not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"is {file_kind(mode)}, not a regular file "
                                 "or a pipe")
        return read_at_most(f, most + 1)


def read_at_most(stream: typing.BinaryIO | io.RawIOBase | int, limit: int) -> bytes:
    """``stream`` (a binary file object, or an open descriptor) to its end or
    to ``limit`` bytes, whichever comes first, 1 MiB at a time (a pipe from
    ``/dev/zero`` is never read without end).  The one bounded read:
    :func:`read_regular`'s, :func:`read_file_or_pipe`'s, ``correct
    --text-file -``'s, a mark's (``seen.load``)."""
    read = stream.read if not isinstance(stream, int) else lambda n: os.read(stream, n)
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def is_link_refusal(exc: OSError) -> bool:
    """Whether an :func:`open_nofollow` failure means "the path is a symbolic link"."""
    return exc.errno == errno.ELOOP


def _lstat_expect(path: str | os.PathLike[str], is_kind: Callable[[int], bool], not_kind: str,
                  link_what: str) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise StoreCorrupt(f"{path}: {link_what} a symbolic link; refusing to follow it")
    if not is_kind(st.st_mode):
        raise StoreCorrupt(f"{path}: {not_kind}")
    return st


def lstat_regular(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The ``lstat`` of a store file that must be a regular file: None when it
    is absent; ``StoreCorrupt`` (exit 5) for a symbolic link (never followed),
    another file type, or a failing ``lstat``."""
    return _lstat_expect(path, stat.S_ISREG, "not a regular file", "is")


def lstat_dir(path: str | os.PathLike[str], *, link_what: str = "is") -> os.stat_result | None:
    """The ``lstat`` of a store directory: None when it is absent;
    ``StoreCorrupt`` (exit 5) for a symbolic link (never followed, the message
    says "<path>: <link_what> a symbolic link"), a non-directory, or a
    failing ``lstat``."""
    return _lstat_expect(path, stat.S_ISDIR, "not a directory", link_what)


NAME_MAX = 255  # bytes in one file name (Linux, macOS, the BSDs)


def temp_name(target: Path) -> Path:
    """``.<name>.tmp-<random>`` beside the target (documented in docs/FORMAT.md).
    A name too long for that to fit ``NAME_MAX`` bytes is cut (at a character
    boundary) inside the temporary name only: a note name may use all 255
    bytes of ``<name>.md`` (issue 16.8)."""
    # os.urandom(6).hex() is what secrets.token_hex(6) returns; the secrets
    # module would import hmac and hashlib, so OpenSSL (~2 ms of a start-up)
    suffix = f"{TMP_MARK}{os.urandom(6).hex()}"
    name = target.name
    room = NAME_MAX - len(os.fsencode(TMP_PREFIX + suffix))
    raw = os.fsencode(name)
    if len(raw) > room:
        name = raw[:room].decode("utf-8", "ignore") or "x"
    return target.with_name(f"{TMP_PREFIX}{name}{suffix}")


def resolves_inside(path: str | os.PathLike[str], fence: str | os.PathLike[str]) -> bool:
    """Whether ``path``, resolved as the kernel would follow it (symbolic
    links and ``..``; a part that does not exist yet taken as written), is
    ``fence`` or lies under it, also resolved: the one test of "inside the
    store" for what memctl writes outside it (its temporary copies, its
    marks, a bundle)."""
    real = os.path.realpath(path)
    top = os.path.realpath(fence)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def refuse_inside(target: str | os.PathLike[str],
                  fences: Iterable[tuple[str | os.PathLike[str], str]], *,
                  command: str) -> None:
    """``UsageError`` (exit 2) when the file ``target`` a read command is to
    write (export's bundle, the --output of validate and secrets) lies in
    one of ``fences``, each ``(directory, what it is)``: the file or its
    directory resolves inside it (:func:`resolves_inside`).  A read command
    creates and changes nothing in a store.  The one check of the three."""
    path = os.path.abspath(os.fspath(target))
    for fence, what in fences:
        if resolves_inside(os.path.dirname(path), fence) or resolves_inside(path, fence):
            raise UsageError(f"{os.fspath(target)}: inside {what}; {command} is a read "
                             "command and writes nothing there")


# Stores a temporary file or directory of this process must also stay out
# of, while :func:`fenced` is in force: export and verify read a copy of a
# store, and what the copy's reads make (a snapshot of its database) was
# fenced out of the copy only, not out of the store it was made from.
# Kept as their resolved paths (:func:`os.path.realpath`, when fenced), each
# with how many fences in force resolve to it: a candidate is inside one of them
# when it or one of its ancestors, resolved, is among them (a look-up per
# ancestor, not a ``realpath`` per fence: ``validate --all-projects`` fences
# every store and snapshots each, and before 2026-12-07 made N x (N+1)
# ``realpath`` calls, 1,001,000 for 1,000 stores, 16 s)
_FENCE_TOPS: dict[str, int] = {}


@contextlib.contextmanager
def fenced(*paths: str | os.PathLike[str]) -> Iterator[None]:
    """While in force, :func:`private_tempdir` and :func:`temp_parent` pass
    over any candidate inside ``paths`` too (the stores a copy was made of),
    each resolved once, here, as :func:`resolves_inside` resolves a fence."""
    tops = [os.path.realpath(p) for p in paths]
    for t in tops:
        _FENCE_TOPS[t] = _FENCE_TOPS.get(t, 0) + 1
    try:
        yield
    finally:
        for t in tops:
            left = _FENCE_TOPS[t] - 1
            if left:
                _FENCE_TOPS[t] = left
            else:
                del _FENCE_TOPS[t]


def inside_fences(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, resolved (:func:`resolves_inside`), is one of the
    fences in force (:func:`fenced`) or lies under one: the same answer as
    :func:`resolves_inside` of each fence, with one ``realpath`` whatever
    their number."""
    if not _FENCE_TOPS:
        return False
    real = os.path.realpath(path)
    while True:
        if real in _FENCE_TOPS:
            return True
        parent = os.path.dirname(real)
        if parent == real:
            return False
        real = parent


def private_tempdir(prefix: str, outside: str | os.PathLike[str],
                    made: Callable[[str], None] | None = None) -> str:
    """A fresh private directory (mode 0700, a random name as ``mkdtemp``
    makes it) for memctl's own copies, never inside ``outside`` (a store: a
    read must not create a byte there).  The candidates, in order:
    ``$TMPDIR`` (and ``TEMP``, ``TMP``), ``/tmp``, ``/var/tmp``,
    ``/usr/tmp`` and last ``tempfile.gettempdir()`` (imported only then:
    every read-only open of the database comes here).  A candidate that
    resolves (symbolic links and ``..`` followed, as the kernel follows
    them) into ``outside`` is passed over, and the directory is made under
    the resolved path that was checked; one where it cannot be made (read
    only, no permission) is passed over too.  ``StoreWriteError`` when no
    candidate is left.  ``made``: told each path just before it is made
    (:func:`_mkdtemp`), so that an interrupt on the way back leaves no
    directory its caller does not know of."""
    inside: list[str] = []
    failed: list[str] = []
    for c in _temp_candidates():
        if not c or not os.path.isdir(c):
            continue
        if resolves_inside(c, outside) or inside_fences(c):
            inside.append(c)
            continue
        real = os.path.realpath(c)
        try:
            return _mkdtemp(real, prefix, made)
        except OSError as exc:
            failed.append(f"{c}: {exc.strerror or exc}")
    why = []
    if inside:
        why.append(f"{', '.join(inside)} lies inside it")
    if failed:
        why.append("; ".join(failed))
    raise LocalResourceError(f"no temporary directory outside {outside} "
                          f"({'; '.join(why) or 'none found'}); set TMPDIR")


_HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                      if hasattr(signal, name))
# what an open that hands over a descriptor holds: those, and SIGALRM (the
# other signal whose handler commonly raises: a timeout by ``alarm()`` in
# the process that imports the library)
_OPEN_HELD = _HELD_SIGNALS + tuple(getattr(signal, name) for name in ("SIGALRM",)
                                   if hasattr(signal, name))


_NOT_HELD: typing.Any = None       # (hold_signals' answer where nothing was held)


def hold_signals(signals: tuple[int, ...] = _HELD_SIGNALS) -> typing.Any:
    """Block ``signals`` (SIGINT, SIGTERM and SIGHUP) with ``pthread_sigmask``; the mask
    before, for :func:`release_signals` (``None`` where they cannot be
    blocked).  A handler that runs as the block is made (a signal that came
    just before it) raises with them let go again, never left blocked.
    The query, block and release cost about 4 microseconds in all (2026-12-07,
    CPython 3.11: ``pthread_sigmask`` builds a set of the mask before).
    (A caller that must let them go whatever is raised anywhere in its own
    frame takes :func:`mask_now` inside its ``try``, then :func:`block`.)"""
    before = mask_now()
    block(signals, before)
    return before


def mask_now() -> typing.Any:
    """The signal mask as it is (a query: nothing changed), or ``None``
    where there is none to change."""
    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, ())
    except (AttributeError, OSError, ValueError):
        return _NOT_HELD


def block(signals: tuple[int, ...], before: typing.Any) -> None:
    """Block ``signals`` where ``before`` (:func:`mask_now`) says there is a
    mask; an exception as it is made (a pending signal's handler, run as
    ``pthread_sigmask`` returns) restores ``before`` and is raised."""
    if before is _NOT_HELD:
        return
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    except BaseException:
        release_signals(before)
        raise


def release_signals(before: typing.Any) -> None:
    """Restore the mask :func:`hold_signals` answered: a signal that came
    meanwhile is then delivered, its handler run (memctl's raises the
    KeyboardInterrupt that stops the command) as this returns."""
    if before is not _NOT_HELD:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP blocked (``pthread_sigmask``) while in
    force: one that comes meanwhile stays pending, and is delivered (its
    handler run: memctl's raises the KeyboardInterrupt that stops the
    command) once the block is left.  Where they cannot be blocked (no such
    call, not the main thread) nothing is held."""
    before = hold_signals()
    try:
        yield
    finally:
        release_signals(before)


def remove_private(path: str | os.PathLike[str]) -> None:
    """Remove memctl's private directory ``path`` (a copy of a store or of
    its facts: every fact's text), whole, errors ignored, even when an
    interrupt comes meanwhile: the signals are held back while it runs
    (:func:`signals_held`) and taken once it is done, and a
    KeyboardInterrupt raised inside it all the same (a signal a thread
    that does not block them took) makes it go on to the end, then is
    raised.  Before 2026-12-07 a Ctrl-C or SIGTERM landing in the removal
    stopped it and left the copy for good."""
    interrupted: BaseException | None = None
    with signals_held():
        while True:
            try:
                shutil.rmtree(path, ignore_errors=True)
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
    if interrupted is not None:
        raise interrupted


def _temp_candidates() -> Iterator[str]:
    """Where memctl makes a temporary file or directory, in order:
    ``$TMPDIR`` (and ``TEMP``, ``TMP``), ``/tmp``, ``/var/tmp``,
    ``/usr/tmp``, and last ``tempfile.gettempdir()`` (imported only then)."""
    for v in ("TMPDIR", "TEMP", "TMP"):
        yield os.environ.get(v, "")
    yield from ("/tmp", "/var/tmp", "/usr/tmp")
    import tempfile

    yield tempfile.gettempdir()


def temp_parent(outside: Iterable[str | os.PathLike[str]]) -> str | None:
    """The resolved path of the first candidate of :func:`private_tempdir`
    that is a directory memctl may write in and does not resolve inside any
    of ``outside`` (stores: a read must not create a byte there, not even
    a file unlinked at once); None when there is none.  For an unnamed
    temporary file (``tempfile.TemporaryFile(dir=...)``)."""
    fences = list(outside)
    for c in _temp_candidates():
        if not c or not os.path.isdir(c) or not os.access(c, os.W_OK | os.X_OK):
            continue
        if any(resolves_inside(c, f) for f in fences) or inside_fences(c):
            continue
        return os.path.realpath(c)
    return None


def _mkdtemp(parent: str, prefix: str, made: Callable[[str], None] | None = None) -> str:
    """``tempfile.mkdtemp(prefix=prefix, dir=parent)``: a new directory of
    mode 0700 under a random name in ``parent`` (an absolute, resolved
    path; a name taken is tried again).  ``made(path)`` is called before
    the directory is made (a random name, taken by nobody else)."""
    for _ in range(100):
        path = os.path.join(parent, prefix + os.urandom(6).hex())
        if made is not None:
            made(path)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        os.chmod(path, DIR_MODE)
        return path
    raise FileExistsError(errno.EEXIST, "no unused temporary directory name", parent)


def is_temp_name(name: str) -> bool:
    return name.startswith(TMP_PREFIX) and TMP_MARK in name


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``, looping over short writes; a
    write that makes no progress raises ``OSError(EIO, "short write")``."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def read_pieces(fd: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes from ``fd``'s position to end of file, in reads of at most
    ``chunk`` bytes.  ``OSError`` passes through; the caller closes ``fd``."""
    while True:
        data = os.read(fd, chunk)
        if not data:
            return
        yield data


def read_all(fd: int, chunk: int = 1 << 20) -> bytes:
    """Every byte from ``fd``'s position to end of file (:func:`read_pieces`)."""
    return b"".join(read_pieces(fd, chunk))


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_new_temp(tmp: str | os.PathLike[str], mode: int = FILE_MODE) -> int:
    """A new temporary file ``tmp`` (:func:`temp_name`), opened to write:
    ``open_nofollow(tmp, O_WRONLY | O_CREAT | O_EXCL, mode)``.  One made by
    this open and then stopped before it returned (an interrupt, a SIGTERM
    landing in the check of what it opened, a failed check) is removed: an
    empty ``.NAME.tmp-HEX`` stayed, before 2026-12-07, beside a store's
    file or an export.  An entry already there, or a link, is never ours
    and never removed."""
    try:
        return open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except BaseException as exc:
        if not isinstance(exc, FileExistsError) and not (
                isinstance(exc, OSError) and is_link_refusal(exc)):
            _unlink_quietly(Path(tmp))
        raise


def _write_temp(target: Path, data: bytes, mode: int) -> Path:
    tmp = temp_name(target)
    fd = open_new_temp(tmp, mode)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def lock_within(fd: int, wait: float, poll: float = 0.05) -> bool:
    """``flock(fd, LOCK_EX)``, tried every ``poll`` seconds for at most
    ``wait`` seconds; whether it was taken."""
    import time

    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(poll, left))


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def make_dirs(path: Path, *, strict: bool = False, suffix: str = "",
              existing: Callable[[Path, os.stat_result], str | None] | None = None,
              raced: Callable[[Path], str | None] | None = None,
              fsync: bool = False) -> None:
    """Create ``path`` and every missing parent, top-down, each with mode 0700.

    ``os.makedirs`` would give the intermediate levels the default mode
    (0755 under the usual umask), so each missing level is made here.  The
    levels are found by walking up with ``lstat`` to the first one there.

    What the callers differ in:

    ``strict``: an ``lstat`` error other than "missing" raises
    ``StoreWriteError("<level>: <reason><suffix>")``; otherwise such a level
    counts as missing, as ``os.path.lexists`` has it.
    ``existing(level, lstat_result)``: for the first level that is there; a
    message refuses it (``StoreWriteError``), ``None`` accepts it.
    ``raced(level)``: for a level that ``mkdir`` found already there
    (created meanwhile); a message refuses it, ``None`` accepts it.
    ``fsync``: ``fsync`` each new level's parent, so that the entry is durable.

    A failing ``mkdir`` raises ``StoreWriteError("<level>: cannot create
    directory: <reason>")``."""
    missing: list[Path] = []
    level = path
    while True:
        try:
            st = os.lstat(level)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if strict:
                raise StoreWriteError(f"{level}: {exc.strerror}{suffix}") from None
        except ValueError:
            if strict:
                raise
        else:
            if existing is not None:
                message = existing(level, st)
                if message is not None:
                    raise StoreWriteError(message)
            break
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, DIR_MODE)
        except FileExistsError:
            message = raced(level) if raced is not None else None
            if message is not None:
                raise StoreWriteError(message) from None
            continue
        except OSError as exc:
            raise StoreWriteError(f"{level}: cannot create directory: {exc.strerror}") from None
        if fsync:
            try:
                fsync_dir(level.parent)
            except OSError as exc:
                raise StoreWriteError(f"{level.parent}: fsync failed: {exc.strerror}") from None


def _exists_not_dir(level: Path) -> str | None:
    return None if os.path.isdir(level) else f"{level}: exists and is not a directory"


def ensure_dir(path: Path) -> None:
    """Create ``path`` and every missing parent with mode 0700 (``make_dirs``);
    whatever is there already must be a directory or a link to one."""
    path = Path(os.path.abspath(path))
    make_dirs(path, raced=_exists_not_dir)
    if not os.path.isdir(path):
        raise StoreWriteError(f"{path}: exists and is not a directory")


def _read_previous(target: Path) -> bytes | None:
    """The target's current bytes (never following a symlink), or None if absent."""
    try:
        fd = open_nofollow(target, os.O_RDONLY | O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def atomic_write(target: Path, data: bytes, *, backup: bool = True,
                 overwrite: bool = True, make_parent: bool = True) -> None:
    """Replace ``target`` with ``data`` atomically.

    ``backup``: copy the previous content (if any) to ``<target>.bak`` first.
    ``overwrite=False``: never replace an existing target (the final step
    is a hard link, which fails when the destination appeared meanwhile);
    raises ``FileExistsError`` then.
    ``make_parent=False``: a missing directory is a failure (``StoreWriteError``),
    never created (a report's --output, outside any store).

    Failures raise ``StoreWriteError`` (exit 7).  Before the final replace the
    target keeps its old bytes (the message says so); a failure after it (the
    directory ``fsync``, removing the temporary name) says that the new
    content is in place but may not be durable.  No temporary file is left.
    """
    target = Path(target)
    if make_parent:
        ensure_dir(target.parent)
    tmp: Path | None = None
    bak_tmp: Path | None = None
    replaced = False
    try:
        tmp = _write_temp(target, data, FILE_MODE)
        if backup and overwrite:
            previous = _read_previous(target)
            if previous is not None:
                bak = target.with_name(target.name + ".bak")
                bak_tmp = _write_temp(bak, previous, FILE_MODE)
                try:
                    os.replace(bak_tmp, bak)
                except IsADirectoryError:
                    # (the store's layout, as validate says: layout.unexpected_file;
                    # before 2026-12-07 "write failed", exit 7)
                    raise StoreCorrupt(f"{bak}: a directory is in the place of the backup of "
                                       f"{target.name}; the file was not changed (move the "
                                       "directory away)") from None
                bak_tmp = None
        if overwrite:
            os.replace(tmp, target)
            tmp = None
            replaced = True
        else:
            os.link(tmp, target)  # fails with EEXIST instead of clobbering
            replaced = True
            os.unlink(tmp)
            tmp = None
        fsync_dir(target.parent)
    except FileExistsError:
        if replaced:
            raise StoreWriteError(
                f"{target}: written, but cleaning up the temporary file failed; "
                "the new content is in place") from None
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if replaced:
            raise StoreWriteError(
                f"{target}: the new content is in place, but the final step failed "
                f"({reason}); it may not survive a crash") from None
        raise StoreWriteError(
            f"{target}: write failed: {reason}; the file was not changed") from None
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)
        if bak_tmp is not None:
            _unlink_quietly(bak_tmp)
