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
worker waiting for work for ever, holding the caller's pipes)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


@contextlib.contextmanager
def process_pool(workers: int, ctx: Any) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes (``ctx``: a multiprocessing context)
    that waits for its tasks when the block ends normally, and, when an
    exception of any kind leaves it, cancels the tasks not started and
    terminates (SIGTERM) the workers still running before it is shut down."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=end_with_parent, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        manager = getattr(pool, "_executor_manager_thread", None)
        try:
            _end_workers(pool)
        finally:
            pool.shutdown(wait=True)
        _forget_wakeup(manager)
        raise
    else:
        pool.shutdown(wait=True)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    procs = dict(getattr(pool, "_processes", None) or {})
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs.values():
        with contextlib.suppress(Exception):     # (ended meanwhile, or never started)
            if proc.is_alive():
                proc.terminate()


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
