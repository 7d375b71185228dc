"""Work over every fact of a store made by two processes: the facts SQLite
orders first (``SPLIT_SHARE`` of them) by this process, the others by a
forked child, where the store holds at least ``SPLIT_LEAST`` facts and two
CPUs are free to run them.  ``memctl facts`` lists a whole store so
(``factview``), and ``validate`` checks its facts so (``audit.facts``).

Each side reads its part of the ids (``facts.Part``, passed to the reads
that take one: never a state of the store, which other reads share).  The
child writes what it makes to a file in the private directory of the
snapshot both read (``FactStore.fork``: the same state on both sides, no
SQLite connection across the fork), read back once this process's part is
done.  The child is only a help: when it fails in any way (an error in its
part, a full disk, a signal), its part is made here after this one, so an
error is raised as one process raises it, after the same items."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import UsageError

if TYPE_CHECKING:
    from .facts import FactStore, Part

SPLIT_LEAST = 20_000
SPLIT_SHARE = 0.5
CHUNK = 1 << 20

T = TypeVar("T")

# the write ends of the pipes of the EarlyChild objects waiting for their
# work: a child forked meanwhile closes its copies, or another's child
# waiting for the end of its pipe would wait for this one too
_WRITE_ENDS: set[int] = set()


def _close_inherited() -> None:
    """In a child: close its copies of the other children's write ends."""
    for fd in list(_WRITE_ENDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WRITE_ENDS.clear()


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


#: What the child of :func:`split_items` tells this process once its items
#: are made (``Tail[0]()``, called there), and what takes it here
#: (``Tail[1]``): the state its part left in objects of the caller, which
#: the fork copied (a plain table's column widths, say).
Tail = tuple[Callable[[], bytes], Callable[[bytes], None]]


def in_two(facts: FactStore, part: Callable[[Part | None], Iterator[T]],
           written: Callable[[T], bytes], read: Callable[[int], Iterator[T]],
           tail: Tail | None = None) -> Iterator[T]:
    """``part(None)``'s items for the whole store, made by two processes
    (:func:`split_items`) where :func:`split_bound` finds a bound, else here."""
    bound = split_bound(facts)
    if bound is None:
        return part(None)
    return split_items(facts, bound, part, written, read, tail)


def split_items(facts: FactStore, bound: Any, part: Callable[[Part], Iterator[T]],
                written: Callable[[T], bytes], read: Callable[[int], Iterator[T]],
                tail: Tail | None = None) -> Iterator[T]:
    """The items ``part(p)`` yields for the two parts ``p`` of the fact ids
    around ``bound``, in order: the first made here, the second by a forked
    child, which writes each as ``written`` gives it; ``read`` gives them
    back from the file's descriptor once this process's items are out.
    When no child can be forked now (another thread running, say), or it
    fails, this process makes both.  ``tail``: the child's word once its
    items are made, taken here (:data:`Tail`) before its items are given;
    where this process makes the second part itself, there is none (the
    objects the part changes are this process's own)."""
    first: Part = (bound, False)
    second: Part = (bound, True)
    out = _private_file(facts)
    said = _private_file(facts, "split-tail") if out is not None and tail is not None else None
    if out is None or (tail is not None and said is None):
        if out is not None:
            os.close(out)
        yield from part(first)
        yield from part(second)
        return

    def child() -> int:
        _close_inherited()
        with open(out, "wb", buffering=CHUNK) as w:
            for item in part(second):
                w.write(written(item))
        if tail is not None and said is not None:
            with open(said, "wb", closefd=False) as t:
                t.write(tail[0]())
        return 0

    facts.hold_file(out)                        # (closed with the store, a listing still read)
    if said is not None:
        facts.hold_file(said)
    try:
        pid = facts.fork(child)
    except (OSError, UsageError):
        pid = None                              # no fork now: one process
    except BaseException:
        facts.close_file(out)
        if said is not None:
            facts.close_file(said)
        raise
    try:
        yield from part(first)
        if pid is not None and facts.reap(pid) and _told(said, tail):
            for item in read(out):
                yield item
                facts.check_open()              # (closed meanwhile: no row read ahead)
        else:
            yield from part(second)
    finally:
        if pid is not None:
            facts.end_child(pid)
        facts.close_file(out)
        if said is not None:
            facts.close_file(said)


def _told(said: int | None, tail: Tail | None) -> bool:
    """The child's tail (the file ``said``) given to ``tail[1]``; false when
    it cannot be read, or ``tail[1]`` refuses it (ValueError: it changes
    nothing then), and the child's part is made here."""
    if said is None or tail is None:
        return True
    try:
        tail[1](b"".join(bytes_written(said)))
    except (OSError, ValueError):
        return False
    return True


class EarlyChild(Generic[T]):
    """A child forked now, before the caller starts any thread, that makes
    the second part of some work (the facts from ``bound`` on) once it is
    given what it needs: ``work(payload, part)`` gives its items, which it
    writes (``written``) to a private file.  ``validate`` forks it before
    its database checks start in a thread, and hands it the statuses of
    the references once its transcripts are read (``audit.facts``).
    ``pid`` is None when no child could be forked: the caller does it all
    itself."""

    def __init__(self, facts: FactStore, bound: Any, work: Callable[[Any, Part], Iterator[T]],
                 written: Callable[[T], bytes]) -> None:
        self.facts, self.work = facts, work
        self.first: Part = (bound, False)
        self.second: Part = (bound, True)
        self.pid: int | None = None
        self._w: int | None = None
        self._out: int | None = None
        self._given: int | None = None
        out = _private_file(facts)
        given = _private_file(facts, "split-payload")
        if out is None or given is None:
            for fd in (out, given):
                if fd is not None:
                    os.close(fd)
            return
        r, w = os.pipe()

        def child() -> int:
            os.close(w)
            _close_inherited()
            if os.read(r, 1) != b"1":           # nothing (the write end closed): cancelled
                return 1
            import pickle

            with open(given, "rb", closefd=False) as f:
                f.seek(0)
                payload = pickle.load(f)
            with open(out, "wb", buffering=CHUNK) as o:
                for item in work(payload, self.second):
                    o.write(written(item))
            return 0

        try:
            self.pid = facts.fork(child)
        except BaseException as exc:
            for fd in (out, given, w):
                os.close(fd)
            if not isinstance(exc, (OSError, UsageError)):
                raise
            return                              # no fork now: the caller does it all
        finally:
            os.close(r)
        self._w, self._out, self._given = w, out, given
        _WRITE_ENDS.add(w)

    def items(self, part: Callable[[Part], Iterator[T]], payload: Any,
              read: Callable[[int], Iterator[T]]) -> Iterator[T]:
        """``part(first)``'s items (made here), then the child's, given
        ``payload``: what ``part(first)`` then ``work(payload, second)``
        give in one process.  When the child fails, its part is made here."""
        pid, out, given = self.pid, self._out, self._given
        assert pid is not None and out is not None and given is not None
        try:
            # the payload goes to a file (this process does not wait while
            # the child reads it), then the word to go down the pipe
            w, self._w = self._w, None
            assert w is not None
            _WRITE_ENDS.discard(w)
            try:
                import pickle

                with open(given, "wb", closefd=False) as f:
                    pickle.dump(payload, f)
                os.write(w, b"1")
            except OSError:
                pass                            # (a full disk, the child gone): no work for it
            finally:
                os.close(w)                     # (a child still waiting ends: its part is made here)
            yield from part(self.first)
            if self.facts.reap(pid):
                yield from read(out)
            else:
                yield from self.work(payload, self.second)
        finally:
            self._end()

    def cancel(self) -> None:
        """No work for the child after all: it ends, and is reaped."""
        self._end()

    def _end(self) -> None:
        if self._w is not None:
            _WRITE_ENDS.discard(self._w)
            os.close(self._w)                   # (a child waiting for work ends)
            self._w = None
        if self.pid is not None:
            self.facts.end_child(self.pid)
            self.pid = None
        for fd in (self._out, self._given):
            if fd is not None:
                os.close(fd)
        self._out = self._given = None


def _private_file(facts: FactStore, name: str = "split-items") -> int | None:
    """A new file (its descriptor, the name already removed) in the
    snapshot's private directory; None when it cannot be made."""
    where = facts.private_dir
    if where is None:
        return None
    path = os.path.join(where, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.unlink(path)
    return fd


def lines_written(fd: int) -> Iterator[bytes]:
    """What the child wrote to ``fd`` (lines, each ending with a newline),
    in pieces of whole lines of about :data:`CHUNK` bytes (a piece is
    decoded whole on a terminal: never a character cut in two)."""
    offset = 0
    held: list[bytes] = []                      # the start of a line longer than a piece
    while True:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            break
        offset += len(chunk)
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            held.append(chunk)
            continue
        yield b"".join([*held, chunk[:cut]])
        held = [chunk[cut:]] if cut < len(chunk) else []
    if held:
        yield b"".join(held)


def bytes_written(fd: int) -> Iterator[bytes]:
    """What the child wrote to ``fd``, in pieces of :data:`CHUNK` bytes cut
    anywhere (records that say their own length: a plain table's cells)."""
    offset = 0
    while chunk := os.pread(fd, CHUNK, offset):
        offset += len(chunk)
        yield chunk


def pickles_written(fd: int) -> Iterator[Any]:
    """The objects the child wrote to ``fd``, each ``pickle.dumps``'d."""
    import pickle

    with open(fd, "rb", closefd=False) as f:
        f.seek(0)
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return
