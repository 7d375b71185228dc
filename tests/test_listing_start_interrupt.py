"""A Ctrl-C that lands while a listing's thread is being started
(``Thread.start`` waits for the new thread to run: an interrupt there
leaves the thread running, but the listing was not recorded yet) must not
let :meth:`FactStore.close` close the connections under that thread: it
was a segmentation fault (exit 139) when the thread was inside SQLite as
the store closed.  The same for :meth:`FactStore.in_background`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import sys, threading, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from tests.test_audit import build_clean
    from lecode_memctl.core import facts as F
    from lecode_memctl.core.facts import FactStore

    path = build_clean(Path({tmp!r}) / "config")
    real_start = threading.Thread.start
    in_sqlite = threading.Event()
    closed_under = []
    raised = []

    def start(self):
        real_start(self)
        if self.name.startswith("memctl"):
            in_sqlite.wait(5)
            raised.append(time.monotonic())
            raise KeyboardInterrupt   # as a Ctrl-C in Thread.start's own wait

    def slow(conn):
        # short statements in the thread (an interrupt stops one of them,
        # not the work) until 0.2 s after the interrupt was raised (the
        # store closes meanwhile, however the threads are scheduled; 5 s at
        # most), then the real work
        in_sqlite.set()
        t = time.monotonic()
        while (not raised or time.monotonic() < raised[0] + 0.2) and time.monotonic() - t < 5:
            try:
                conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                             "FROM c WHERE x < 20000) SELECT count(*) FROM c").fetchone()
            except F.sqlite3.OperationalError:
                pass
            except Exception as exc:      # the connection closed under the work
                closed_under.append(type(exc).__name__)
                return

    real_bg = F.Background.__init__

    def bg_init(self, name, work, stop=None):
        conn = stop.__self__
        real_bg(self, name, lambda: (slow(conn), work())[1], stop)

    F.Background.__init__ = bg_init
    threading.Thread.start = start
    fs = FactStore.open_readonly(path / "facts.sqlite3")
    assert fs.private_dir is not None
    try:
        if {what!r} == "listing":
            fs.start_listing()
        else:
            fs.in_background("memctl-check", lambda conn: None)
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        fs.close()
    alive = sorted(t.name for t in threading.enumerate() if t.name.startswith("memctl"))
    for t in threading.enumerate():
        if t.name.startswith("memctl"):
            t.join()
    print("alive after close", alive)
    print("closed under the work", closed_under)
""")


@pytest.mark.heavy
@pytest.mark.parametrize("what", ["listing", "background"])
def test_close_waits_for_a_thread_whose_start_was_interrupted(tmp_path, what):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(
        root=str(ROOT), tmp=str(tmp_path), what=what)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split("\n")[:3] == [
        "interrupted", "alive after close []", "closed under the work []"]
