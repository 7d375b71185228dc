"""A pool worker that dies while it writes a result (a Ctrl-C to the
process group, the SIGTERM memctl sends its workers when the command is
interrupted, the OOM killer) leaves the pool's reader thread waiting for
the rest of that message for ever: memctl kept a copy of the pipe's write
end, so the read never ends.  Found by a review on 2026-12-06 (``memctl
verify``, SIGINT to its process group: hung after "memctl: error:
interrupted").  The interrupted pool now ends its workers, then closes its
own copies of the pipes' other ends, and the command ends; and a worker
takes no Ctrl-C of its own (no traceback of it on stderr: memctl ends the
workers)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# In a worker of a pool: the start of a result message (a header for 1
# MiB, ten bytes of it) on the pool's result pipe, then death.  (Also
# tests/test_pool_worker_killed.py's.)
TORN = textwrap.dedent("""
    def torn():
        import os, struct, sys
        frame = sys._getframe(1)
        while frame is not None and "result_queue" not in frame.f_locals:
            frame = frame.f_back
        q = frame.f_locals["result_queue"]
        os.write(q._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 10)
        os._exit(1)
""")

CHILD = TORN + textwrap.dedent("""
    import multiprocessing, os, signal, struct, sys, time
    from lecode_memctl.core.pools import process_pool

    def slow():
        time.sleep(60)

    def sigint_ignored():
        return signal.getsignal(signal.SIGINT) == signal.SIG_IGN

    ctx = multiprocessing.get_context("fork")
    mode = sys.argv[1]
    if mode == "ignored":
        with process_pool(1, ctx) as pool:
            print(pool.submit(sigint_ignored).result(), flush=True)
        sys.exit(0)
    try:
        with process_pool(2, ctx) as pool:
            pool.submit(torn)
            pool.submit(slow)
            time.sleep(1.0)             # (the first worker is dead by now)
            raise KeyboardInterrupt     # as a Ctrl-C would, in the command
    except KeyboardInterrupt:
        print("interrupted", flush=True)
""")


@pytest.mark.heavy
def test_an_interrupted_pool_with_a_torn_result_ends():
    r = subprocess.run([sys.executable, "-c", CHILD, "torn"], capture_output=True, text=True,
                       timeout=30)
    assert r.stdout == "interrupted\n", (r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr


def test_a_worker_ignores_ctrl_c():
    r = subprocess.run([sys.executable, "-c", CHILD, "ignored"], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout) == (0, "True\n"), r.stderr
