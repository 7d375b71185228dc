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
        _end_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    procs = dict(getattr(pool, "_processes", None) or {})
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs.values():
        with contextlib.suppress(Exception):     # (ended meanwhile, or never started)
            if proc.is_alive():
                proc.terminate()


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
