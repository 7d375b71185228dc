"""The end of a streamed JSON document is written whole, whatever signal
comes meanwhile.  A review found that ``search --json``, blocked on a pipe
while writing its members after the hits (``skipped`` may be larger than
a pipe holds), ended on a Ctrl-C with the document cut after the last hit:
no ``]``, no end, invalid JSON.  A Ctrl-C or a termination signal during
that write now stops the command once it is done (``output.uncut``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from .conftest import REPO


def _wait_until_blocked_on_the_pipe(p: subprocess.Popen) -> None:
    """Until memctl sleeps in a write to the full pipe (its ``wchan``,
    ``pipe_write`` or ``anon_pipe_write``): past the hits (far less than a
    pipe holds), it is writing the end.  Where the kernel does not say, after
    5 s (more than the second this waited before)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{p.pid}/wchan") as fh:
                if fh.read().endswith("pipe_write"):
                    return
        except OSError:
            pass
        assert p.poll() is None, "memctl ended before its end was written"
        time.sleep(0.01)


@pytest.mark.heavy
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_signal_while_the_end_is_written_leaves_the_document_whole(tmp_path, sig, status):
    store = tmp_path / "store"
    (store / "notes").mkdir(parents=True)
    (store / "MEMORY.md").write_text("".join(f"foo {i}\n" for i in range(100)))
    bad = 2500                          # 'skipped' alone is far more than a pipe holds
    for i in range(bad):
        (store / "notes" / f"bad{i:05d}.md").write_bytes(b"\xff\n")
    r, w = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                          "--no-state", "search", "foo", "--json"],
                         stdout=w, stderr=subprocess.PIPE, env=env, cwd=str(tmp_path))
    os.close(w)
    try:
        seen = 0
        assert p.stderr is not None
        while seen < bad:               # every file searched: the end is being written
            line = p.stderr.readline()
            assert line, "memctl ended early"
            seen += b"; skipped" in line
        _wait_until_blocked_on_the_pipe(p)
        p.send_signal(sig)
        time.sleep(0.3)
        out = b""
        while chunk := os.read(r, 1 << 20):
            out += chunk
        err = p.stderr.read()
        assert p.wait(timeout=60) == status, err
    finally:
        os.close(r)
        if p.poll() is None:
            p.kill()
    doc = orjson.loads(out)
    assert len(doc["hits"]) == 100 and len(doc["skipped"]) == bad
    assert err.strip().splitlines()[-1] in (b"memctl: error: interrupted",
                                            b"memctl: error: terminated by SIGTERM"), err
