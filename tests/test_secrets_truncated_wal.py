"""``secrets`` reads the facts database and its ``-wal`` with ``pread``, a
piece at a time, never through a mapping: a ``-wal`` cut short under a
mapping (``PRAGMA wal_checkpoint(TRUNCATE)``, the agent's or ``memctl
redact``'s) killed the process with SIGBUS, no output and no message (a
review saw it in 16 of 62 runs beside such a writer, 2026-12-07)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import textwrap

import pytest

from lecode_memctl.core import secrets
from lecode_memctl.core.secrets import MIN_RAW_STRING, WINDOW_OVERLAP, raw_strings

from .conftest import REPO

_RUN = re.compile(rb"[\t\n\r\x20-\x7e\x80-\xff]{%d,}" % MIN_RAW_STRING)


def _pieces(tmp_path, data: bytes, piece: int) -> list[tuple[int, bytes]]:
    path = tmp_path / "db"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(raw_strings(fd, piece))
    finally:
        os.close(fd)


@pytest.mark.parametrize("seed", range(6))
def test_the_runs_read_in_pieces_are_those_of_the_whole_file(tmp_path, seed):
    """Runs shorter than a piece: exactly what one search of the whole file
    finds, offsets included, whatever the piece size (a run across a
    piece's end, a short run that grows long in the next piece)."""
    rnd = random.Random(seed)
    parts = []
    for _ in range(400):
        if rnd.random() < 0.5:
            parts.append(bytes(rnd.choice(b"\x00\x01\x02\x1f") for _ in range(rnd.randint(1, 5))))
        else:
            parts.append(bytes(rnd.choice(b"abcXYZ09 \t\xc3\xa9") for _ in range(rnd.randint(1, 30))))
    data = b"".join(parts)
    want = [(m.start(), m.group(0)) for m in _RUN.finditer(data)]
    longest = max(len(r) for _s, r in want)
    for piece in (longest + 1, longest + 7, longest * 3, len(data) + 1):
        assert _pieces(tmp_path, data, piece) == want, piece


def test_a_run_longer_than_a_piece_comes_in_overlapping_parts(tmp_path):
    run = bytes(random.Random(1).choice(b"abcdefgh") for _ in range(10 * WINDOW_OVERLAP))
    data = b"\x00" * 10 + run + b"\x00"
    got = _pieces(tmp_path, data, 2 * WINDOW_OVERLAP)
    assert len(got) > 1
    for start, part in got:
        assert data[start:start + len(part)] == part
    assert got[0][0] == 10 and got[-1][0] + len(got[-1][1]) == 10 + len(run)
    # every stretch of WINDOW_OVERLAP bytes of the run is whole in some part
    for at in range(10, 10 + len(run) - WINDOW_OVERLAP, 97):
        assert any(s <= at and at + WINDOW_OVERLAP <= s + len(p) for s, p in got), at


def test_a_wal_cut_short_while_it_is_read_is_no_sigbus(tmp_path):
    """The ``-wal`` emptied right after its size is taken (as a TRUNCATE
    checkpoint does): the scan goes on, exit 0 or 1 with its report, and
    the database is read again (what the ``-wal`` held is in it now).
    Before 2026-12-07: exit 70 "mmap length is greater than file size" when
    cut before the mapping (this test), SIGBUS when cut after it."""
    from .secretstore import build

    planted = build(tmp_path / "p")
    store = planted.store
    wal = store / "facts.sqlite3-wal"
    db = store / "facts.sqlite3"
    wal.write_bytes((b"\x00" * 64 + b"printable text of a page " * 40) * 400)   # 400 KB
    child = textwrap.dedent(f"""
        import os, sys
        from lecode_memctl.core import secrets
        real = os.fstat
        def fstat(fd):
            st = real(fd)
            if os.readlink(f"/proc/self/fd/{{fd}}").endswith("-wal") and st.st_size:
                os.truncate({str(wal)!r}, 0)     # checkpointed with TRUNCATE: what
                with open({str(db)!r}, "ab") as f:   # it held is in the database now
                    f.write(b"\\x00 deploy key AKIAQWERTYUIOPASDFGH \\x00")
            return st
        secrets.os = type(sys)("os_shim")
        secrets.os.__dict__.update(os.__dict__)
        secrets.os.fstat = fstat
        sys.argv = ["memctl", "--store", {str(store)!r}, "--no-state", "secrets", "--json",
                    "--jobs", "1"]
        from lecode_memctl.cli.main import main
        sys.exit(main())
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=120, env=env)
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-2000:])
    assert b'"type":"secrets"' in r.stdout.replace(b" ", b"")
    assert wal.stat().st_size == 0
    # the database, read before the -wal, was read again after it was cut
    import orjson

    found = orjson.loads(r.stdout)["findings"]
    assert any(f["kind"] == "database" and f["file"] == "facts.sqlite3"
               and f["preview"].startswith("AKIA") for f in found), found


def test_secrets_maps_no_file():
    assert not hasattr(secrets, "mmap")
