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
                               initializer=_worker_start, initargs=(os.getpid(),))
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


def _worker_start(parent: int) -> None:
    """A worker's start: :func:`end_with_parent`, and a Ctrl-C ignored.  A
    Ctrl-C on the terminal reaches the whole process group; the command
    takes it and ends its workers (:func:`_end_workers`).  A worker that
    took it itself printed its KeyboardInterrupt's traceback, and died
    wherever it was, a result half written among them."""
    import signal

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_parent(parent)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers (SIGTERM, then SIGKILL
    for one still there after a second).  Then close this process's own
    copies of the pipes' other ends, which the workers had: the pool's
    reader thread waiting for the rest of a result a worker died while
    writing gets the end of the file (this process held the write end
    open: it waited for ever, and the command with it, as the shutdown
    joins that thread), and its feeder thread blocked writing work that
    nobody will read gets a broken pipe."""
    procs = dict(getattr(pool, "_processes", None) or {})
    # (taken now: the shutdown lets go of them)
    ends = [getattr(getattr(pool, queue, None), end, None)
            for queue, end in (("_call_queue", "_reader"), ("_result_queue", "_writer"))]
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
    for conn in ends:
        with contextlib.suppress(Exception):
            if conn is not None:
                conn.close()


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
