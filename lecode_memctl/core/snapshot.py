"""The private snapshot of a facts database that a live writer may be
changing: the database and the current generation of its ``-wal`` copied
into a fresh private directory (never the ``-shm``), checked unchanged while
copying, so that :meth:`FactStore.open_readonly` reads a consistent state
without creating or touching anything in the store."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .atomic import (
    is_link_refusal,
    lstat_regular,
    open_owned,
    private_tempdir,
    remove_private,
    write_all,
)
from .errors import LocalResourceError, NotFound, StoreBusy, StoreCorrupt, raise_if_out_of_fds
from .hashing import sha256
from .layout import FILE_MODE

SNAPSHOT_CHUNK = 1 << 20
SNAPSHOT_WAL_IN_MEMORY = 8 << 20


def copy_write_error(src: Path, tmpdir: str, reason: str, *, full: bool) -> LocalResourceError:
    """A write of the private copy of ``src`` in ``tmpdir`` (the snapshot's
    directory) that failed: a full or over-quota $TMPDIR (``full``), a
    file-size limit, an I/O error, no permission.  Exit 7, naming the
    temporary copy and where it was made, never "store unreadable" (exit 5):
    the store itself was only read."""
    where = os.path.dirname(os.path.normpath(tmpdir))   # $TMPDIR (the private dir's parent)
    hint = "free space there or set TMPDIR" if full else "set TMPDIR"
    return LocalResourceError(f"{src}: cannot write its temporary copy in {where}: {reason}; "
                           f"{hint} to another directory (the store was not changed)")


def _copy_write_error(src: Path, dst: str, exc: OSError) -> LocalResourceError:
    """:func:`copy_write_error` of an ``OSError`` writing the copy ``dst``."""
    return copy_write_error(src, os.path.dirname(dst), exc.strerror or str(exc),
                            full=exc.errno in (errno.ENOSPC, errno.EDQUOT))


@contextlib.contextmanager
def _writing_copy(src: Path, dst: str) -> Iterator[None]:
    """Writing the private copy ``dst`` of ``src``: an ``OSError`` is
    :func:`_copy_write_error` (exit 7)."""
    try:
        yield
    except OSError as exc:
        raise _copy_write_error(src, dst, exc) from None


def _remove_leftovers(src: Path, *copies: str) -> None:
    """Remove an earlier attempt's copies (of ``src``) before the next."""
    for leftover in copies:
        with _writing_copy(src, leftover):
            if os.path.lexists(leftover):
                os.unlink(leftover)


# Every descriptor here is a file object's (open_owned) from the moment it
# is opened: an interrupt anywhere (between two functions, or in a finally
# that closes it) drops the object, which closes it.  The descriptors were
# bare ints passed from function to function, and a Ctrl-C on the way
# leaked one per interrupted read-only open now and then.

def _open_nofollow(path: Path) -> io.FileIO | None:
    """``path`` opened read-only, never through a symlink; None when it does
    not exist; StoreCorrupt for a symlink or any other failure."""
    try:
        return open_owned(path)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StoreCorrupt(f"{path}: not a regular file") from None
    except OSError as exc:
        if is_link_refusal(exc):
            raise StoreCorrupt(f"{path}: is a symbolic link; refusing to follow it") from None
        raise_if_out_of_fds(exc, path)
        raise StoreCorrupt(f"{path}: cannot open: {exc.strerror}") from None


def _open_regular(src: Path) -> tuple[io.FileIO, os.stat_result] | None:
    """``src`` opened read-only, never through a symlink, and its fstat;
    None when it does not exist; StoreCorrupt when it is not a regular file.
    The caller closes the descriptor."""
    f = _open_nofollow(src)
    if f is None:
        return None
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise StoreCorrupt(f"{src}: not a regular file")
    return f, st


def _copy_nofollow(src: Path, dst: str | None, keep: list[bytes] | None = None,
                   limit: int | None = None) -> tuple[str, os.stat_result, int] | None:
    """Stream ``src`` (never through a symlink) into a new private file ``dst``
    (or nowhere), 1 MiB at a time: (sha256 of the bytes read, fstat of src,
    number of bytes read), or None when ``src`` does not exist.  Memory stays
    flat whatever the size, unless ``keep`` is given: the chunks are then
    appended to it instead of being written (for a file written later).
    ``limit``: read (and hash) only the first ``limit`` bytes."""
    opened = _open_regular(src)
    if opened is None:
        return None
    f, st = opened
    fd = f.fileno()
    copy: io.FileIO | None = None
    try:
        if dst is not None:
            with _writing_copy(src, dst):
                copy = open_owned(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        digest = sha256(size=st.st_size if limit is None else min(st.st_size, limit))
        done = 0
        while limit is None or done < limit:
            want = SNAPSHOT_CHUNK if limit is None else min(SNAPSHOT_CHUNK, limit - done)
            try:
                chunk = os.read(fd, want)
            except OSError as exc:
                raise StoreCorrupt(f"{src}: cannot read: {exc.strerror}") from None
            if not chunk:
                break
            digest.update(chunk)
            done += len(chunk)
            if keep is not None:
                keep.append(chunk)
            elif copy is not None and dst is not None:
                with _writing_copy(src, dst):
                    write_all(copy.fileno(), chunk)
        if copy is not None and dst is not None:
            with _writing_copy(src, dst):
                copy.close()   # (where a write error may show only now: NFS, quotas)
        return digest.hexdigest(), st, done
    finally:
        f.close()
        if copy is not None:
            copy.close()


# errors of copy_file_range that can only be the copy's (the store is only
# read): a write failure at once.  Any other leaves the rest of the copy to
# Python, as _copy_nofollow copies: those that say "not here" (EXDEV, ENOSYS,
# EINVAL, EOPNOTSUPP, EPERM, EBADF), and those that may be either file's
# (EIO), which Python's separate read and write tell apart.
_COPY_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _copy_database(src: Path, dst: str) -> tuple[str | None, os.stat_result, int] | None:
    """:func:`_copy_nofollow` of the database itself, whose bytes no check
    compares (the snapshot compares its ``fstat`` before and after): copied
    by the kernel (``os.copy_file_range``: no pass through Python's memory,
    no digest, and a reflink where the file system has them), then, from
    where the kernel stopped, through Python to the end of the file, as
    :func:`_copy_nofollow` reads it.  The kernel's part is all of it where it
    can; nothing where it says it cannot or has no such call.  A 0 from the
    kernel is not taken as the end of the file: kernels 5.3-5.18 return 0 at
    once, or part way, on file systems whose files report a wrong size
    (procfs, sysfs, some FUSE and network file systems), where a copy that
    stopped there was empty or short, with no error.  (None, fstat of src,
    bytes copied), or None when ``src`` does not exist."""
    kernel = getattr(os, "copy_file_range", None)
    if kernel is None:
        return _copy_nofollow(src, dst)
    opened = _open_regular(src)
    if opened is None:
        return None
    f, st = opened
    fd = f.fileno()
    copy: io.FileIO | None = None
    try:
        with _writing_copy(src, dst):
            copy = open_owned(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        out = copy.fileno()
        done = 0
        while True:
            try:
                n = kernel(fd, out, 64 << 20)
            except OSError as exc:
                if exc.errno in _COPY_FULL:
                    raise _copy_write_error(src, dst, exc) from None
                # "not here", or either file's error: the rest through Python,
                # from where the kernel stopped
                os.lseek(fd, done, os.SEEK_SET)
                os.lseek(out, done, os.SEEK_SET)
                break
            if n == 0:
                break
            done += n
        # the rest, from both files' offsets, which the kernel moved by what it copied
        while True:
            try:
                chunk = os.read(fd, SNAPSHOT_CHUNK)
            except OSError as exc:
                raise StoreCorrupt(f"{src}: cannot read: {exc.strerror}") from None
            if not chunk:
                with _writing_copy(src, dst):
                    copy.close()
                return None, st, done
            with _writing_copy(src, dst):
                write_all(out, chunk)
            done += len(chunk)
    finally:
        f.close()
        if copy is not None:
            copy.close()


_WAL_MAGIC = (0x377F0682, 0x377F0683)


def _wal_valid_length(path: Path) -> int | None:
    """How many leading bytes of the -wal belong to its current generation:
    the 32-byte header and the frames after it whose salts match the header's.
    The file is reused after a checkpoint, so frames past those are left over
    from an earlier generation and a writer may overwrite them at any time;
    SQLite's recovery ignores them.  None when there is no -wal; 0 when it has
    no valid header (SQLite then ignores it whole)."""
    f = _open_nofollow(path)
    if f is None:
        return None
    try:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        head = os.pread(fd, 32, 0)
        if len(head) < 32 or int.from_bytes(head[0:4], "big") not in _WAL_MAGIC:
            return 0
        page = int.from_bytes(head[8:12], "big")
        page = 65536 if page == 1 else page
        if page < 512 or page > 65536 or page & (page - 1):
            return 0
        salts = head[16:24]
        frame = 24 + page
        end = 32
        while end + frame <= size:
            fh = os.pread(fd, 24, end)
            if len(fh) < 24 or fh[8:16] != salts:
                break
            end += frame
        return end
    finally:
        f.close()


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size,
                                                              b.st_mtime_ns)


def _pause_before_retry(path: Path, attempt: int, waited: float, timeout: float) -> float:
    """The pause before a snapshot's next attempt (10 ms, 20 ms, ... capped at
    50 ms); the time waited so far.  StoreBusy (exit 6) once a writer would
    have given up waiting for its lock (``timeout``, the busy timeout)."""
    if waited >= timeout:
        raise StoreBusy(f"{path}: the facts database kept changing while taking a "
                        "snapshot; try again")
    delay = min(0.01 * attempt, 0.05)
    time.sleep(delay)
    return waited + delay


# ---- the private directory, named by its process, and the sweep of those
# a killed process left
#
# A reader killed with SIGKILL (or a power cut) cannot remove its private
# copy: the facts' text stayed in $TMPDIR, credentials included, and nothing
# removed or reported it (before 2026-12-07).  The directory's name now says
# which process made it: memctl-facts-<ns>.<pid>.<start>-<random>, <ns> the
# first 8 hex digits of the SHA-256 of the boot id and the pid namespace,
# <start> the process's start time (clock ticks after boot, /proc/<pid>/stat)
# so that a reused pid is told from it.  The first snapshot a process makes
# in a directory removes there each such directory of the current user
# whose process is gone (no such pid, a pid of another start time, a zombie)
# and only those: one whose process is alive, one of another boot, host or
# pid namespace (a $TMPDIR shared with a container or over NFS), one named
# otherwise (an older memctl's), another user's, or anything but a
# directory (a symbolic link is never followed) is left as it is.  A process
# whose /proc is not of its own pid namespace (/proc/self is not os.getpid())
# names its directory without an owner and sweeps nothing: /proc/<pid> there
# is another process.  Export's copy of a store (memctl-export-...) and
# verify's (memctl-verify-...: an archive unpacked, or a directory bundle's
# rows) are named and swept the same way (owned_tempdir), and each sweep
# takes all three kinds: they hold the same text (before 2026-12-07 theirs
# had a random name only, and one an interrupt or a kill left stayed).

_KINDS = ("facts", "export", "verify")
_OWNED = re.compile(r"memctl-(?:facts|export|verify)-([0-9a-f]{8})\.([0-9]+)\.([0-9]+)"
                    r"-[0-9a-f]+\Z")
_owners: dict[int, str | None] = {}
_swept: set[tuple[int, str]] = set()


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of process ``pid`` (/proc/<pid>/stat: fields 3
    and 22); None when there is no such process.  OSError when it cannot be
    told (no /proc, no permission)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = data[data.rindex(b")") + 2:].split()
    return rest[0].decode("ascii", "replace"), int(rest[19])


def _proc_is_ours(pid: int) -> bool:
    """Whether /proc is of this process's pid namespace: /proc/self links to
    ``pid`` (``os.getpid()``) and its stat's pid field is ``pid``.  OSError
    when it cannot be told."""
    if os.readlink("/proc/self") != str(pid):
        return False
    with open("/proc/self/stat", "rb") as f:
        data = f.read()
    return data.split(b" ", 1)[0] == str(pid).encode()


def _owner() -> str | None:
    """This process as its private directories' names say it:
    ``<ns>.<pid>.<start>``; None where /proc cannot tell, or does not
    describe this process (a pid namespace seeing another's /proc: the
    directory is then named without it, and never swept)."""
    pid = os.getpid()           # (a forked child is its own owner)
    if pid not in _owners:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as f:
                boot = f.read().strip()
            ns = os.readlink("/proc/self/ns/pid").encode()
            # only a /proc that describes this process: in a pid namespace
            # whose /proc is another's (unshare -p without --mount-proc)
            # /proc/<getpid()> is an unrelated process, whose exit made a
            # live reader's copy look gone (swept) before 2026-12-07
            found = _proc_stat(pid) if _proc_is_ours(pid) else None
        except (OSError, ValueError, IndexError):
            found = None
        _owners[pid] = None if found is None else \
            f"{sha256(boot + b'/' + ns).hexdigest()[:8]}.{pid}.{found[1]}"
    return _owners[pid]


def _gone(pid: int, start: int) -> bool:
    """Whether the process that named a directory with ``pid`` and
    ``start`` is gone for sure (never when it cannot be told)."""
    try:
        found = _proc_stat(pid)
    except (OSError, ValueError, IndexError):
        return False
    return found is None or found[1] != start or found[0] in ("Z", "X")


def _sweep(parent: str) -> None:
    """Remove the private directories in ``parent`` that a process of this
    boot and pid namespace, now gone, left (the header above); each once per
    process and directory.  Never an error: a directory that cannot be
    listed or removed is left."""
    owner = _owner()
    if owner is None or (os.getpid(), parent) in _swept:
        return
    _swept.add((os.getpid(), parent))
    ns = owner.split(".", 1)[0]
    uid = os.geteuid()
    try:
        with os.scandir(parent) as entries:
            names = [e.name for e in entries if e.name.startswith("memctl-")]
    except OSError:
        return
    for name in names:
        m = _OWNED.match(name)
        if m is None or m.group(1) != ns or not _gone(int(m.group(2)), int(m.group(3))):
            continue
        where = os.path.join(parent, name)
        try:
            st = os.lstat(where)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            continue
        # (rmtree refuses a symbolic link put in its place meanwhile, and
        # follows none inside)
        remove_private(where)


def owned_tempdir(kind: str, outside: str | os.PathLike[str],
                  made: Callable[[str], None] | None = None) -> str:
    """A fresh private directory (:func:`~.atomic.private_tempdir`, never
    inside ``outside``) named ``memctl-<kind>-<owner>-<random>`` by this
    process (``kind`` one of facts, export, verify), and the sweep of those
    killed processes left beside it (the header above).  Removed by its
    caller with :func:`~.atomic.remove_private`."""
    assert kind in _KINDS, kind
    prefix = f"memctl-{kind}-"
    owner = _owner()
    tmp = private_tempdir(prefix if owner is None else f"{prefix}{owner}-", outside, made)
    try:
        _sweep(os.path.dirname(tmp))
    except BaseException:
        # (an interrupt held back while a killed process's copy was removed
        # lands here, before the caller knows of ``tmp``: removed now, or
        # left until a later run's sweep; a ``made`` caller removes it too)
        remove_private(tmp)
        raise
    return tmp


def _private_dir(path: Path, made: Callable[[str], None]) -> str:
    """The snapshot's fresh private directory (named by this process), and
    the sweep of those killed processes left beside it."""
    return owned_tempdir("facts", path.parent, made)     # never inside the store


def private_snapshot(path: Path, wal: Path, timeout: float,
                     made: Callable[[str], None] | None = None) -> str:
    """Copy the database and its -wal (never the -shm) into a fresh private
    directory, checking that neither changed while copying.  Returns the dir.
    The database streams into the copy in 1 MiB chunks, so memory does not
    grow with it.  A -wal of up to SNAPSHOT_WAL_IN_MEMORY (the usual case:
    SQLite checkpoints it at about 4 MB) is held in memory and written after
    the check, so that the window between its two reads, compared by digest,
    is no longer than reading the database; a larger one streams too.

    Only the -wal's current generation is copied: its header and the frames
    whose salts match it (``_wal_valid_length``); the rest is left over from
    before a checkpoint and may be overwritten at any time.  A writer only
    appends frames to that prefix, and the prefix with the unchanged database
    file is a consistent (older) state, a torn last frame being ignored by
    SQLite's recovery.  So the second read compares the digest of the prefix
    that was copied; a checkpoint (the database file changes) or a restarted
    -wal (its header changes) makes the attempt retry.  While a
    writer keeps committing, retries with a growing pause for as long as a
    writer waits for its lock (``timeout``, the busy timeout).  ``made``:
    told the directory before it is made (:func:`~.atomic.private_tempdir`):
    the caller removes it even when an interrupt lands on the way back."""
    waited = 0.0
    attempt = 0
    mine: list[str] = []
    try:
        tmp = _private_dir(path, _recorder(mine, made))
        db_copy = os.path.join(tmp, "facts.sqlite3")
        wal_copy = os.path.join(tmp, "facts.sqlite3-wal")
        with _writing_copy(path, db_copy):
            os.chmod(tmp, 0o700)
        while True:
            _remove_leftovers(path, db_copy, wal_copy)
            db_before = lstat_regular(path)
            wal_chunks: list[bytes] = []
            valid = _wal_valid_length(wal)
            if valid is None:
                wal_first = None
            elif valid <= SNAPSHOT_WAL_IN_MEMORY:
                wal_first = _copy_nofollow(wal, None, wal_chunks, limit=valid)
            else:
                wal_first = _copy_nofollow(wal, wal_copy, limit=valid)
            db = _copy_database(path, db_copy)
            wal_again = (_copy_nofollow(wal, None, limit=wal_first[2])
                         if wal_first is not None else _copy_nofollow(wal, None, limit=0))
            db_after = lstat_regular(path)
            if db is None or db_before is None or db_after is None:
                raise NotFound(f"{path}: facts database disappeared while reading it")
            stable = (wal_again is not None and wal_first is not None
                      and wal_first[0] == wal_again[0]
                      and _same_file(db_before, db[1]) and _same_file(db[1], db_after))
            if wal_first is None and wal_again is None and _same_file(db_before, db_after):
                stable = True  # the writer checkpointed and closed meanwhile: db alone is whole
            if stable:
                if wal_chunks:
                    with _writing_copy(wal, wal_copy), \
                            open_owned(wal_copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                       FILE_MODE) as copy:
                        for chunk in wal_chunks:
                            write_all(copy.fileno(), chunk)
                return tmp
            attempt += 1
            waited = _pause_before_retry(path, attempt, waited, timeout)
    except BaseException:
        for tmp in mine:
            remove_private(tmp)
        raise


def _recorder(mine: list[str], made: Callable[[str], None] | None) -> Callable[[str], None]:
    """``private_tempdir``'s ``made``: the path kept in ``mine`` (the only
    one: a name taken is replaced by the next) and told to ``made``."""
    def record(path: str) -> None:
        mine[:] = [path]
        if made is not None:
            made(path)
    return record


def private_journal_snapshot(path: Path, journal: Path, timeout: float,
                             made: Callable[[str], None] | None = None) -> str:
    """Copy a rollback-journal mode database and its ``-journal`` into a fresh
    private directory, checking that neither changed while copying; returns
    the directory.  Opening the copy, SQLite rolls a hot journal back there
    (a writer killed mid-transaction, or one still running): the copy then
    holds what SQLite itself would show after recovery, and the store is not
    touched (issue 16.1).  The journal is copied first: a writer saves a
    page's original there before it changes the page in the database, so an
    unchanged journal and an unchanged database make a consistent pair.  A
    journal that vanished meanwhile (the transaction ended) leaves the
    database alone, whole, when it did not change either; else retries, as
    :func:`private_snapshot` does, then exit 6.  ``made``: as there."""
    waited = 0.0
    attempt = 0
    mine: list[str] = []
    try:
        tmp = _private_dir(path, _recorder(mine, made))
        db_copy = os.path.join(tmp, "facts.sqlite3")
        journal_copy = os.path.join(tmp, "facts.sqlite3-journal")
        while True:
            _remove_leftovers(path, db_copy, journal_copy)
            db_before = lstat_regular(path)
            j_first = _copy_nofollow(journal, journal_copy)
            db = _copy_database(path, db_copy)
            j_again = _copy_nofollow(journal, None)
            db_after = lstat_regular(path)
            if db is None or db_before is None or db_after is None:
                raise NotFound(f"{path}: facts database disappeared while reading it")
            db_stable = _same_file(db_before, db[1]) and _same_file(db[1], db_after)
            if db_stable and j_first is not None and j_again is not None \
                    and j_first[0] == j_again[0]:
                return tmp
            if db_stable and j_first is None and j_again is None:
                return tmp  # no journal after all: the database alone is whole
            attempt += 1
            waited = _pause_before_retry(path, attempt, waited, timeout)
    except BaseException:
        for tmp in mine:
            remove_private(tmp)
        raise
