"""Process pools that end with their work, and children that end with
their parent.

``concurrent.futures.ProcessPoolExecutor`` waits, when its ``with`` block is
left, for every task submitted to it.  Left by an interrupt, a SIGTERM, an
error or a reader that stops early (``memctl validate | head``), that is
work nobody reads any more -- every batch still queued, seconds at a large
store -- and a worker that a signal did not reach kept the command waiting
for it.  :func:`process_pool` cancels what is queued and ends the workers
instead, and its workers are killed when this process ends (an interrupt
landing between a worker's fork and the pool's record of it left that
worker waiting for work for ever, holding the caller's pipes).

:func:`in_order` gives the results of a pool's tasks in order, and runs
again the tasks of a pool that breaks (a worker killed: the out-of-memory
killer, a signal sent to it alone) in a new one."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


T = TypeVar("T")
R = TypeVar("R")


def alone() -> bool:
    """Whether this process runs no thread but this one: the condition of
    every fork of the core, a pool's or a split listing's (docs/API.md,
    "Forks").  A process forked beside another thread inherits that
    thread's locks as they were (the allocator's, SQLite's, a logging
    handler's), held by nobody.  Threads of the core's own that are done
    are joined first by their owners.

    :mod:`threading` counts only the threads it started; one started with
    ``_thread.start_new_thread``, or by a C library, it does not see (before
    2026-12-07 the core forked beside them).  Where the kernel says how many
    threads the process has (Linux: ``Threads:`` of ``/proc/self/status``,
    one read of a small file), that count must be 1 too; elsewhere
    threading's alone decides.  A thread joined a moment ago may still be
    ending in the kernel: the count is read again for a few milliseconds
    before it says no (:func:`_threads_settled`)."""
    import threading

    if threading.active_count() != 1:
        return False
    return _threads_settled()


_STATUS = "/proc/self/status"
_SETTLE_SECONDS = 0.05      # how long a thread joined just now may take to leave the count


def kernel_threads() -> int | None:
    """The number of threads of this process as the kernel counts them
    (``Threads:`` of ``/proc/self/status``), or None where it cannot say
    (no ``/proc``: macOS, the BSDs; a line that is not there)."""
    try:
        with open(_STATUS, "rb") as f:
            data = f.read()
    except OSError:
        return None
    at = data.find(b"\nThreads:")
    if at < 0:
        return None
    end = data.find(b"\n", at + 1)
    try:
        return int(data[at + 9:end if end >= 0 else len(data)])
    except ValueError:
        return None


def _threads_settled() -> bool:
    """Whether the kernel counts one thread (or cannot count): read again,
    a little longer each time, for at most :data:`_SETTLE_SECONDS`, while it
    counts more (a thread whose ``join`` returned is still ending: its
    count drops in microseconds, or a few milliseconds on a loaded machine)."""
    import time

    n = kernel_threads()
    if n is None or n <= 1:
        return True
    deadline = time.monotonic() + _SETTLE_SECONDS
    pause = 0.0002
    while time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
        n = kernel_threads()
        if n is None or n <= 1:
            return True
    return False

# how long a wait for a result goes before it looks whether a worker died
# (a worker killed while it wrote a result leaves the pool's reader thread
# waiting for the rest of it: the pool never says it is broken)
POLL_SECONDS = 0.2


class _PoolLost(Exception):
    """A worker of the pool died: the pool is broken, or will never say so."""


def in_order(fn: Callable[[T], R], items: Iterable[T], workers: int, ctx: Any, *,
             ahead: int) -> Iterator[R]:
    """``fn(item)`` of each item, in order, computed by a pool of ``workers``
    processes (:func:`process_pool`; ``ctx``: a multiprocessing context),
    each given as soon as it and those before it are done.  Items are taken
    from ``items`` as they are needed: at most ``ahead`` besides the one
    awaited are submitted and not yet given.  An error ``fn`` raises is raised here, in its place.

    A worker that dies (killed by the out-of-memory killer, or by a signal
    sent to it alone) breaks the pool: the workers left are ended, and the
    items whose results were not given yet (those the pool had made are
    kept) run again in a new pool, then another takes the items after
    them: the same results, only later.  Which of the items a dead worker
    was running is not known: those lost a second time that the pool may
    have given a worker run again one at a time, each alone in a worker
    (the others go back to a pool), and one whose worker dies twice so,
    alone, is the cause (a crash in C code, more memory than the machine
    has): BrokenProcessPool, never this process's own death running it.
    (A task lost with the others' workers twice and killed once from
    outside when alone is run alone once more.)  A worker
    killed while it wrote a result leaves CPython's pool waiting for the
    rest of it for ever, never broken: a wait for a result looks every
    :data:`POLL_SECONDS` whether a worker has ended, and takes that as the
    same break."""
    import itertools
    from concurrent.futures.process import BrokenProcessPool

    source = _Items(items)
    it: Iterator[Any] = source
    while True:
        lost = yield from _pooled(fn, it, workers, ctx, ahead)
        if lost is None:
            if source.error is not None:
                raise source.error      # (after the results of the items before it)
            return
        rest = iter(lost)
        again = yield from _pooled(fn, rest, workers, ctx, len(lost))
        if again is None:
            continue
        given = len(again)
        again.extend(rest)      # (those it was not yet given when it broke)
        # Lost twice: only the first tasks not made may have reached a worker
        # (CPython hands them out in order: one per worker running, and at
        # most workers + EXTRA_QUEUED_CALLS waiting in the call queue); each
        # of those runs alone, the others go back to a pool with the rest,
        # as do those the second pool was never given (lost once only).
        reached = 2 * workers + _extra_queued()
        for k, entry in enumerate(again):
            if entry.got is None:
                if reached <= 0 or k >= given > 0:
                    it = itertools.chain(again[k:], it)
                    break
                reached -= 1
                alone = yield from _pooled(fn, iter((entry,)), 1, ctx, 1)
                if alone is not None and alone[0].got is None:
                    # lost alone once (a kill from outside, as it was lost
                    # with others' workers twice): alone again
                    alone = yield from _pooled(fn, iter(alone), 1, ctx, 1)
                if alone is not None and alone[0].got is None:
                    # (the pool's own error, as the cause: with MEMCTL_DEBUG=1 the
                    # traceback shows it, and what broke the pool where it says)
                    raise BrokenProcessPool(
                        "a worker process ended abruptly each time it ran the same task, "
                        "twice alone (killed by a signal: the out-of-memory killer, say)"
                    ) from alone[0].why
                if alone is None:
                    continue
                entry = alone[0]
            yield entry.given()


def _extra_queued() -> int:
    """The tasks CPython's pool queues for its workers beyond one each."""
    from concurrent.futures import process

    extra = getattr(process, "EXTRA_QUEUED_CALLS", 1)
    return extra if type(extra) is int and extra >= 0 else 1


class _Items:
    """An iterator of ``items`` that stops at an error of theirs (an
    Exception), kept in ``error``: :func:`in_order` raises it once the
    results of the items before it are given, as a loop over them would."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._it = iter(items)
        self._ended = False     # (an iterator that gives items again after its end: not read)
        self.error: Exception | None = None

    def __iter__(self) -> _Items:
        return self

    def __next__(self) -> Any:
        if self._ended:
            raise StopIteration
        try:
            return next(self._it)
        except StopIteration:
            self._ended = True
            raise
        except Exception as exc:   # noqa: BLE001 - raised by in_order, in its place
            self._ended, self.error = True, exc
            raise StopIteration from None


# a result of the pool: (True, value) or (False, the error fn raised); None
# for an item whose result is lost with its worker
_Got = tuple[bool, Any] | None


class _Lost:
    """An item of a broken pool whose result was not given: its result
    when the pool had made it (``got``), else None, and then the pool's
    error (``why``) if its future has one."""

    __slots__ = ("item", "got", "why")

    def __init__(self, item: Any, got: _Got, why: BaseException | None = None) -> None:
        self.item, self.got, self.why = item, got, why

    def given(self) -> Any:
        """The result made (``got`` is not None): its value, or its error raised."""
        assert self.got is not None
        if self.got[0]:
            return self.got[1]
        raise self.got[1]


def _pooled(fn: Callable[[T], R], it: Iterator[Any], workers: int, ctx: Any, ahead: int
            ) -> Generator[R, None, list[_Lost] | None]:
    """:func:`in_order`'s work in one pool: the results given, then None
    when ``it`` is done, or, when a worker of the pool died, each item
    taken and not given yet (:class:`_Lost`).  An item of ``it`` that is a
    :class:`_Lost` runs again unless its result was made (then given as
    it was)."""
    import itertools
    from collections import deque
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    # the items submitted and not given yet, in order (None: not submitted)
    pending: deque[tuple[Any, Future[R] | None]] = deque()
    done: list[R] = []      # a result taken from the pool, not given yet
    try:
        with process_pool(workers, ctx) as pool:

            def submit(x: Any) -> Future[R] | None:
                if type(x) is _Lost:
                    return None if x.got is not None else pool.submit(fn, x.item)
                return pool.submit(fn, x)

            try:
                # (each item taken is in pending before it is submitted: a
                # submit that finds the pool broken leaves it recorded, and
                # those not taken are still the caller's, in ``it``)
                for x in itertools.islice(it, max(1, ahead)):
                    pending.append((x, None))
                    pending[-1] = (x, submit(x))
                while pending:
                    x, fut = pending[0]
                    # (the next item submitted before the wait: the workers
                    # keep ``ahead`` tasks besides the one waited for)
                    for y in itertools.islice(it, 1):
                        pending.append((y, None))
                        pending[-1] = (y, submit(y))
                    done.append(x.given() if fut is None else _result(pool, fut))
                    pending.popleft()
                    yield done.pop()
            except BrokenProcessPool:
                raise _PoolLost from None
            return None
    except _PoolLost:
        pass
    # (the pool is shut down, its workers ended)
    return [*(_Lost(None, (True, r)) for r in done), *(_lost(x, f) for x, f in pending)]


def _lost(x: Any, fut: Any) -> _Lost:
    """What a broken pool made of the item ``x`` (a :class:`_Lost` already
    made is kept): its value, the error its task raised, or nothing (not
    made, or lost with its worker: then the pool's own error, if any)."""
    if type(x) is _Lost:
        if x.got is not None:
            return x
        x = x.item
    if fut is None or not fut.done() or fut.cancelled():
        return _Lost(x, None)
    error = fut.exception()
    if error is None:
        return _Lost(x, (True, fut.result()))
    from concurrent.futures.process import BrokenProcessPool

    return _Lost(x, None, error) if isinstance(error, BrokenProcessPool) else _Lost(x, (False, error))


def _result(pool: ProcessPoolExecutor, fut: Any) -> Any:
    """``fut.result()``; :class:`_PoolLost` when a worker of ``pool`` has
    ended while it waited (no worker of a pool in use ends on its own).
    (Waited for by ``wait``, not ``result(timeout=...)``: a TimeoutError
    that the task raised is its error, not the wait's end.)"""
    from concurrent.futures import wait

    while not wait((fut,), timeout=POLL_SECONDS).done:
        procs = getattr(pool, "_processes", None) or {}
        if not all(map(_alive, list(procs.values()))):
            raise _PoolLost
    return fut.result()


@contextlib.contextmanager
def process_pool(workers: int, ctx: Any) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes (``ctx``: a multiprocessing context)
    that waits for its tasks when the block ends normally, and, when an
    exception of any kind leaves it, cancels the tasks not started and
    terminates (SIGTERM) the workers still running before it is shut down."""
    from concurrent.futures import ProcessPoolExecutor

    started: list[Any] = []     # every worker started, as soon as it is (_HeldStart)
    # (fork's workers only: a spawned worker's Process is
    # pickled, which a class made inside _HeldStart is not -- a code
    # review of 2026-12-07; those start no copy of this process anyway)
    mp = _HeldStart(ctx, started) if ctx.get_start_method() == "fork" else ctx
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=cast(Any, mp),
                               initializer=_worker_start, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        manager = getattr(pool, "_executor_manager_thread", None)
        try:
            _end_workers(pool, started)
        finally:
            pool.shutdown(wait=True)
        _forget_wakeup(manager)
        raise
    else:
        pool.shutdown(wait=True)


class _HeldStart:
    """A multiprocessing context (``ctx``'s, every other name passed on)
    whose processes start with SIGINT, SIGTERM, SIGHUP and SIGALRM held
    (:func:`.atomic.hold_signals`) and are put in ``started`` before they
    are let go.  CPython's pool records a worker (``_processes``) only
    after its ``start`` returned: an interrupt in between (a signal whose
    handler raises, landing as ``fork`` returned, say) left a worker no
    one knew of, which :func:`_end_workers` never ended: it waited for
    work for the life of the process, holding copies of the pool's pipes
    and of whatever the parent had open (a private snapshot's deleted
    files).  One that comes meanwhile is raised once the worker is in
    ``started``, and ends it.  (The worker inherits the mask:
    :func:`_worker_start` lets them go again.)"""

    def __init__(self, ctx: Any, started: list[Any]) -> None:
        self._ctx = ctx
        base = ctx.Process

        class Process(base):  # type: ignore[misc, valid-type]
            def start(self) -> None:
                from .atomic import _NOT_HELD, _OPEN_HELD, block, mask_now, release_signals

                before = _NOT_HELD
                try:
                    before = mask_now()
                    block(_OPEN_HELD, before)
                    super().start()
                    started.append(self)
                finally:
                    release_signals(before)     # (one held meanwhile is raised here)

        self.Process = Process

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _worker_start(parent: int) -> None:
    """A worker's start: :func:`end_with_parent`, and a Ctrl-C ignored.  A
    Ctrl-C on the terminal reaches the whole process group; the command
    takes it and ends its workers (:func:`_end_workers`).  A worker that
    took it itself printed its KeyboardInterrupt's traceback, and died
    wherever it was, a result half written among them.  The signals its
    start held (:class:`_HeldStart`) are let go: one pending then (a
    SIGTERM to the process group) is taken now."""
    import signal

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .atomic import _OPEN_HELD

    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _OPEN_HELD)
    end_with_parent(parent)


def _end_workers(pool: ProcessPoolExecutor, started: Iterable[Any] = ()) -> None:
    """Cancel what is queued and end the workers (SIGTERM, then SIGKILL
    for one still there after a second).  The pool's manager thread then
    sees them gone and closes the pool's pipes itself (its own copy of the
    call queue's reader among them: a feeder thread blocked writing work
    that nobody will read gets a broken pipe).  One waiting for the rest of
    a result that a worker died while writing never would: this process
    holds a copy of the result pipe's write end, so the read never ends
    (the command waited for ever, as the shutdown joins that thread).  That
    copy, which nothing here writes to and no other thread closes, is
    closed once the workers are gone: the read gets the end of the file.
    Nothing else is closed here: the manager thread closes the call queue's
    reader as it ends, and two threads closing one pipe close a descriptor
    twice (the second time, whatever file has its number by then).
    ``started``: the workers started (:class:`_HeldStart`), those the pool
    did not record yet (an interrupt just after one started) among them."""
    procs = {id(p): p for p in (getattr(pool, "_processes", None) or {}).values()}
    procs.update((id(p), p) for p in started)
    # (taken now: the shutdown lets go of it)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs.values():
        with contextlib.suppress(Exception):     # (ended meanwhile, or never started)
            if proc.is_alive():
                proc.terminate()
    for proc in procs.values():
        with contextlib.suppress(Exception):
            proc.join(1)
            if proc.is_alive():
                proc.kill()
                proc.join(1)
    if any(_alive(proc) for proc in procs.values()):
        return      # (a worker that outlived SIGKILL may still read or write)
    if writer is not None:
        with contextlib.suppress(Exception):
            writer.close()


def _alive(proc: Any) -> bool:
    try:
        return bool(proc.is_alive())
    except Exception:  # noqa: BLE001 - (a process object that cannot say: taken as alive)
        return True


def _forget_wakeup(manager: Any) -> None:
    """After its workers were terminated: wait (5 s at most) for the pool's
    manager thread to end, then drop the pipe CPython's exit handler would
    wake it by.  That handler (``concurrent.futures.process._python_exit``)
    writes to the pipe of every pool seen; in a pool whose workers were
    terminated the descriptor could be closed under it (a race in the
    broken pool's clean-up), and the exit then printed "Exception ignored
    ... Bad file descriptor" after memctl's one error line (seen once in
    about 20 runs of tests/test_deep_memory.py's pool case).  An ended
    thread has nothing to be woken for."""
    if manager is None:
        return
    with contextlib.suppress(Exception):
        manager.join(5)
        if not manager.is_alive():
            from concurrent.futures import process

            process._threads_wakeups.pop(manager, None)


def end_with_parent(parent: int) -> None:
    """In a child of ``parent``: be killed when it ends (Linux's
    ``PR_SET_PDEATHSIG``; elsewhere a child left by a killed parent finishes
    its work and exits), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        import signal

        with contextlib.suppress(ImportError, OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
