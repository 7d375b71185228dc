"""Work over every fact of a store made by two processes: the facts SQLite
orders first (``SPLIT_SHARE`` of them) by this process, the others by a
forked child, where the store holds at least ``SPLIT_LEAST`` facts and two
CPUs are free to run them.  ``memctl facts`` lists a whole store so
(``factview``), and ``validate`` checks its facts so (``audit.facts``).

The child writes what it makes to a file in the private directory of the
snapshot both read (``FactStore.fork``: the same state on both sides, no
SQLite connection across the fork), read back once this process's part is
done.  The child is only a help: when it fails in any way (an error in its
part, a full disk, a signal), its part is made here after this one, so an
error is raised as one process raises it, after the same items."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import UsageError

if TYPE_CHECKING:
    from .facts import FactStore

SPLIT_LEAST = 20_000
SPLIT_SHARE = 0.5
CHUNK = 1 << 20

T = TypeVar("T")


def split_bound(facts: FactStore) -> Any:
    """The first fact id of the child's part, or None: one process does it
    all (fewer than ``SPLIT_LEAST`` facts, one CPU for this process, no
    private snapshot, or no fork on this system)."""
    if not hasattr(os, "fork"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return None
    return facts.split_bound(SPLIT_SHARE, SPLIT_LEAST)


def split_items(facts: FactStore, bound: Any, part: Callable[[], Iterator[T]],
                written: Callable[[T], bytes], read: Callable[[int], Iterator[T]]
                ) -> Iterator[T]:
    """The items ``part()`` yields for the whole store, made by two
    processes: those of the facts before ``bound`` (``FactStore.only_ids``)
    here, the others by a forked child, which writes each as ``written``
    gives it; ``read`` gives them back from the file's descriptor once this
    process's items are out: the same items in the same order.  When no
    child can be forked now (another thread running, say), one process."""
    import signal

    out = _private_file(facts)
    if out is None:
        yield from part()
        return
    try:
        pid = facts.fork()
    except (OSError, UsageError):               # no fork now: one process
        os.close(out)
        yield from part()
        return
    except BaseException:
        os.close(out)
        raise
    if pid == 0:                                # the child: its part, into the file
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            facts.only_ids(bound, second=True)
            with open(out, "wb", buffering=CHUNK) as w:
                for item in part():
                    w.write(written(item))
            code = 0
        except BaseException:  # noqa: BLE001 - the parent makes the part itself
            pass
        finally:
            os._exit(code)
    done = False
    try:
        facts.only_ids(bound)
        yield from part()
        facts.only_ids(bound, second=True)
        _pid, status = os.waitpid(pid, 0)
        done = True
        yield from read(out) if status == 0 else part()
    finally:
        facts.only_ids()
        if not done:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        os.close(out)


def _private_file(facts: FactStore) -> int | None:
    """A new file (its descriptor, the name already removed) in the
    snapshot's private directory; None when it cannot be made."""
    where = facts.private_dir
    if where is None:
        return None
    path = os.path.join(where, "split-items")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.unlink(path)
    return fd


def pieces_written(fd: int) -> Iterator[bytes]:
    """What the child wrote to ``fd``, :data:`CHUNK` bytes at a time."""
    offset = 0
    while True:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return
        offset += len(chunk)
        yield chunk
