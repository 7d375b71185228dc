"""Encoded rows held until the end of a command, so that memory does not
follow their number: in memory up to a bound, then in one unnamed
temporary file (``tempfile.TemporaryFile``: gone with its descriptor,
however the process ends), read back a piece at a time.

One home for what two places did: the CLI's listings and reports
(``validate --json``, ``csv``, a plain table's cells, the report for
people; ``secrets``' findings, ``secrets.HeldFindings``), which keep their
rows in memory when no file can be had, and
``export``/``verify``'s fact rows (``bundle.HeldFactRows``), which fail
instead (``strict``): a bundle must not grow its process past the memory
it promises."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: What a holder writes at a time once it has written, and what a read
#: gives back at a time.
PIECE = 1 << 20


class ShortRead(OSError):
    """The temporary file gave back fewer bytes than were written to it."""


class Spill:
    """One unnamed temporary file that several :class:`HeldRows` keep their
    bytes in, one after the other.  One file, so that holders by the
    hundred hold one descriptor.  It is made on first use, in the
    directory ``where()`` names (None: there is none; the callers' rule,
    ``atomic.temp_parent``: never in a store).

    Where none can be had, or a write fails (a full or unwritable
    $TMPDIR): without ``strict``, every holder takes what the file holds
    back into memory and the file is closed (its space freed for what
    comes after: a store's snapshot copy, say); with it, the file is
    closed and ``strict(OSError)`` is raised, at that write and at every
    later one.  A read that fails raises OSError (:class:`ShortRead`: the
    file gave back less than was written).  Closed, the file's bytes are
    gone: a holder that had some there raises ShortRead when read."""

    def __init__(self, where: Callable[[], str | os.PathLike[str] | None], *,
                 strict: Callable[[OSError], BaseException] | None = None) -> None:
        self._where = where
        self._strict = strict
        self._file: Any = None
        self._end = 0
        self.failed = False
        self._errno = 0
        self._holders: list[HeldRows] = []

    def write(self, data: bytes) -> tuple[int, int] | None:
        """``data`` appended: its (offset, length); None when it could not
        be (every holder has taken its bytes back)."""
        if self.failed:
            if self._strict is not None:
                raise self._strict(OSError(self._errno, os.strerror(self._errno)))
            return None
        try:
            # (imported here: with no descriptor left, an import fails too)
            import errno
            import tempfile

            if self._file is None:
                parent = self._where()
                if parent is None:
                    raise OSError(errno.ENOENT, "no temporary directory outside the stores")
                self._file = tempfile.TemporaryFile(buffering=0, dir=parent)  # noqa: SIM115 - closed by close
            view = memoryview(data)
            done = 0
            while done < len(data):
                n = self._file.write(view[done:])
                if not n:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
        except OSError as exc:
            self.failed = True
            self._errno = exc.errno or 5
            if self._strict is not None:
                self.close()
                raise self._strict(exc) from None
            try:
                for h in self._holders:
                    h._take_back()
            finally:
                self.close()
            return None
        at = self._end
        self._end += len(data)
        return at, len(data)

    def read(self, at: int, size: int) -> Iterator[bytes]:
        """The ``size`` bytes written at ``at``, :data:`PIECE` at a time."""
        end = at + size
        while at < end:
            if self._file is None:
                raise ShortRead(5, "it was closed")
            piece = os.pread(self._file.fileno(), min(end - at, PIECE), at)
            if not piece:
                raise ShortRead(5, "it is shorter than written")
            at += len(piece)
            yield piece

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._end = 0
        for h in self._holders:
            if h._chunks:           # (their bytes went with the file)
                h._chunks, h._lost = [], True


class HeldRows:
    """Encoded rows, each after ``sep`` but the first (a comma between JSON
    rows): in memory up to ``limit`` bytes, then in ``spill``, written
    :data:`PIECE` at a time.  Where the spill fails (not ``strict``), they
    are held in memory, what the file took read back.  ``own``: the spill
    is this holder's alone, closed with it (``close``, or the end of a
    ``with``); a shared one is closed by whoever made it."""

    def __init__(self, limit: int, sep: bytes, spill: Spill, *, own: bool = False) -> None:
        self._limit = limit
        self._sep = sep
        self._mem: list[bytes] = []
        self._size = 0
        self._first = True
        self._own = own
        self._spill = spill
        spill._holders.append(self)
        self._chunks: list[tuple[int, int]] = []   # (offset, length) in the spill, in order
        self._lost = False      # the spill was closed with some of these rows in it

    @property
    def held(self) -> int:
        """Bytes held in memory."""
        return self._size

    def add(self, row: bytes) -> None:
        data = row if self._first else self._sep + row
        self._first = False
        self._mem.append(data)
        self._size += len(data)
        if self._size > (self._limit if not self._chunks else min(self._limit, PIECE)):
            self.flush()

    def flush(self) -> None:
        """What memory holds, into the spill (kept in memory when it fails)."""
        if not self._mem:
            return
        where = self._spill.write(b"".join(self._mem))
        if where is None:
            self._limit = sys.maxsize       # (no file to be had: memory, as before)
            return
        at, n = where
        if self._chunks and sum(self._chunks[-1]) == at:
            self._chunks[-1] = (self._chunks[-1][0], self._chunks[-1][1] + n)
        else:
            self._chunks.append(where)
        self._mem, self._size = [], 0

    def _take_back(self) -> None:
        """The spill failed: what it holds of these rows, back into memory."""
        back = b"".join(piece for at, n in self._chunks for piece in self._spill.read(at, n))
        self._chunks = []
        if back:
            self._mem.insert(0, back)
            self._size += len(back)
        self._limit = sys.maxsize

    def pieces(self) -> Iterator[bytes]:
        """The rows' bytes, in order, in pieces that may cut a row."""
        if self._lost:
            raise ShortRead(5, "it was closed")
        for at, n in self._chunks:
            yield from self._spill.read(at, n)
        yield from self._mem

    def close(self) -> None:
        """The rows let go (memory, and the spill when it is this holder's
        own); the holder may be used again, empty."""
        self._mem, self._size, self._chunks, self._first, self._lost = [], 0, [], True, False
        if self._own:
            self._spill.close()

    def __enter__(self) -> HeldRows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hold_bytes(value: Any) -> bytes:
    """``value`` (str, numbers, lists and tuples of them) as
    :func:`held_values` reads it back: ``marshal``'s bytes after their
    length (a lone surrogate kept)."""
    import marshal

    data = marshal.dumps(value)
    return len(data).to_bytes(4, "little") + data


def hold_value(held: HeldRows, value: Any) -> None:
    """``value`` into ``held`` (:func:`hold_bytes`)."""
    held.add(hold_bytes(value))


def held_values(pieces: Iterable[bytes]) -> Iterator[Any]:
    """The values :func:`hold_value` held, in order, from ``held.pieces()``.
    (A value longer than a piece is gathered in a ``bytearray``: joining the
    pieces again at each one was quadratic in its length.)"""
    import marshal

    buf = bytearray()
    for piece in pieces:
        buf += piece
        at, end = 0, len(buf)
        while end - at >= 4:
            size = int.from_bytes(buf[at:at + 4], "little")
            if end - at - 4 < size:
                break
            yield marshal.loads(bytes(buf[at + 4:at + 4 + size]))
            at += 4 + size
        del buf[:at]
    if buf:
        raise OSError(5, "the held rows end in the middle of a row")
