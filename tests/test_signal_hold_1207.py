"""A code review of the signal holds around opens (2026-12-07).

``open_in_dir`` and ``open_owned`` called ``release_signals`` in their
``finally`` on the way out of a success too: a call, where a signal
handler may run, and what it raised left past the ``except`` that closes
the descriptor (123 descriptors leaked in 9,000 interrupts of a review).
The ``finally`` now makes no call on a success.
"""

from __future__ import annotations

import os

from lecode_memctl.core import atomic


def _raising_on_the_way_out(monkeypatch) -> None:  # noqa: ANN001
    real = atomic.release_signals

    def release(before):  # noqa: ANN001, ANN202
        if before is atomic._NOT_HELD:
            raise RuntimeError("a handler ran as the call started")  # (as an interrupt would)
        return real(before)

    monkeypatch.setattr(atomic, "release_signals", release)


def test_open_in_dir_makes_no_call_on_the_way_out(tmp_path, monkeypatch):
    f = tmp_path / "s1.jsonl"
    f.write_bytes(b"x\n")
    _raising_on_the_way_out(monkeypatch)
    fd = atomic.open_in_dir(f)
    try:
        assert os.read(fd, 2) == b"x\n"
    finally:
        os.close(fd)


def test_open_owned_makes_no_call_on_the_way_out(tmp_path, monkeypatch):
    f = tmp_path / "k1.lock"
    f.write_bytes(b"")
    _raising_on_the_way_out(monkeypatch)
    with atomic.open_owned(f, os.O_RDWR) as fh:
        assert fh.fileno() >= 0


def test_a_spawn_pool_still_starts():
    """A code review: the held start's Process class, made inside a
    function, cannot be pickled for the spawn start method (secrets' pool
    where there is no fork)."""
    import multiprocessing

    from lecode_memctl.core.pools import process_pool

    with process_pool(1, multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(abs, -3).result(timeout=60) == 3

