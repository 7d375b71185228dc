"""core.held: rows held in memory, then in one unnamed temporary file that
several holders share; kept in memory when the file fails, or failing
with the caller's error (``strict``: export's and verify's fact rows)."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import held
from lecode_memctl.core.held import HeldRows, Spill


class _Failed(Exception):
    pass


def _full_after(monkeypatch, room: int) -> list[object]:
    """Every temporary file made takes ``room`` bytes, then no more (ENOSPC)."""
    import tempfile

    made: list[object] = []
    real = tempfile.TemporaryFile

    class Full:
        def __init__(self, *a, **kw):  # noqa: ANN002, ANN003
            self._f = real(*a, **kw)
            self.left = room
            self.closed = False
            made.append(self)

        def write(self, data):  # noqa: ANN001, ANN202
            if not self.left:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = self._f.write(bytes(data[:self.left]))
            self.left -= n
            return n

        def fileno(self):  # noqa: ANN202
            return self._f.fileno()

        def close(self):  # noqa: ANN202
            self.closed = True
            self._f.close()

    monkeypatch.setattr(tempfile, "TemporaryFile", Full)
    return made


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=50)), max_size=60),
       limit=st.sampled_from([0, 7, 100, 1 << 20]), piece=st.sampled_from([1, 5, 64, 1 << 20]))
def test_holders_sharing_a_file_each_give_their_rows_back(tmp_path, rows, limit, piece):
    """Three holders, rows added to each in any order, one file: each holder
    gives its own rows back, in order, joined by its separator, read back
    in pieces of any size, flushed or not."""
    old = held.PIECE
    held.PIECE = piece
    try:
        spill = Spill(lambda: tmp_path)
        holders = [HeldRows(limit, sep, spill) for sep in (b"", b",", b"\n--\n")]
        for i, data in rows:
            holders[i].add(data)
        holders[1].flush()
        for h, sep in zip(holders, (b"", b",", b"\n--\n"), strict=True):
            mine = [data for i, data in rows if holders[i] is h]
            assert b"".join(h.pieces()) == sep.join(mine)
        spill.close()
    finally:
        held.PIECE = old


def test_a_file_that_fails_gives_every_holder_its_rows_back_in_memory(tmp_path, monkeypatch):
    made = _full_after(monkeypatch, 10)
    spill = Spill(lambda: tmp_path)
    a, b = HeldRows(4, b",", spill), HeldRows(4, b";", spill)
    for i in range(20):
        (a if i % 2 else b).add(b"row%d" % i)
    assert spill.failed and made and made[0].closed      # type: ignore[attr-defined]
    assert b"".join(a.pieces()) == b",".join(b"row%d" % i for i in range(1, 20, 2))
    assert b"".join(b.pieces()) == b";".join(b"row%d" % i for i in range(0, 20, 2))


def test_a_strict_spill_fails_with_the_callers_error_and_closes_its_file(tmp_path, monkeypatch):
    made = _full_after(monkeypatch, 10)
    spill = Spill(lambda: tmp_path, strict=lambda exc: _Failed(f"no room: {exc.strerror}"))
    h = HeldRows(4, b",", spill, own=True)
    with pytest.raises(_Failed, match="no room: No space left on device"):
        for i in range(20):
            h.add(b"row%d" % i)
    assert spill.failed and made[0].closed                # type: ignore[attr-defined]


@pytest.mark.parametrize("strict", [False, True])
def test_no_directory_to_be_had(strict):
    spill = Spill(lambda: None, strict=(lambda exc: _Failed(str(exc))) if strict else None)
    h = HeldRows(0, b",", spill, own=True)
    if strict:
        with pytest.raises(_Failed, match="no temporary directory"):
            h.add(b"a")
        return
    for row in (b"a", b"b", b"c"):
        h.add(row)
    assert b"".join(h.pieces()) == b"a,b,c"


def test_own_spill_closed_with_its_holder(tmp_path):
    spill = Spill(lambda: tmp_path)
    with HeldRows(0, b",", spill, own=True) as h:
        h.add(b"x" * 10)
        fd = spill._file.fileno()
        os.fstat(fd)
    assert spill._file is None
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_strict_spill_fails_again_at_every_later_write(tmp_path, monkeypatch):
    """After its first failure a strict spill does not go on in memory: each
    later write fails the same way, and reading back is an OSError, not an
    attribute of a closed file."""
    _full_after(monkeypatch, 10)
    spill = Spill(lambda: tmp_path, strict=lambda exc: _Failed(exc.strerror))
    h = HeldRows(4, b",", spill, own=True)
    h.add(b"row0")
    h.flush()                       # (4 bytes of the 10 there is room for)
    for i in range(1, 4):
        with pytest.raises(_Failed, match="No space left on device"):
            h.add(b"row%d" % i * 3)
            h.flush()
    assert spill.failed
    with pytest.raises(held.ShortRead, match="it was closed"):
        b"".join(h.pieces())


@pytest.mark.parametrize("limit", [0, 1 << 20])
def test_a_holder_closed_may_be_used_again(tmp_path, limit):
    spill = Spill(lambda: tmp_path)
    h = HeldRows(limit, b",", spill, own=True)
    for round_ in range(3):
        for i in range(4):
            h.add(b"%d-%d" % (round_, i))
        assert b"".join(h.pieces()) == b",".join(b"%d-%d" % (round_, i) for i in range(4))
        h.close()
        assert b"".join(h.pieces()) == b""
