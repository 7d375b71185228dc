"""Process pools that end with their work.

``concurrent.futures.ProcessPoolExecutor`` waits, when its ``with`` block is
left, for every task submitted to it.  Left by an interrupt, a SIGTERM, an
error or a reader that stops early (``memctl validate | head``), that is
work nobody reads any more -- every batch still queued, seconds at a large
store -- and a worker that a signal did not reach kept the command waiting
for it.  :func:`process_pool` cancels what is queued and ends the workers
instead."""

from __future__ import annotations

import contextlib
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

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
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
