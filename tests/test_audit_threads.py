"""The audit's background work on the facts database (``integrity_check``
in a thread, on a second connection to the private snapshot) never has its
connection closed under it: an interrupt or an error in the main thread
while SQLite works in the thread closes the store only once the thread is
done (it was a segmentation fault: exit 139)."""

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
    from lecode_memctl.core.audit import Audit, facts as af, run as ar
    from lecode_memctl.core.facts import Background, FactStore
    from lecode_memctl.core.layout import store_at

    af.AT_ONCE_BYTES = 0     # (this small store's checks in their thread)
    path = build_clean(Path({tmp!r}) / "config")
    started, closing = threading.Event(), threading.Event()
    real_bg = FactStore.in_background
    real_close, real_wait = FactStore._close_now, Background.wait
    called, order = [], []

    def slow_bg(self, name, work):
        # the thread's SQLite work made long: short counting queries on the
        # second connection, from before the store's close (or a wait for
        # the thread) begins to well after it (or until the close interrupts
        # one), then a pause of its own before it ends, then the real work
        called.append(name)

        def slow(conn):
            started.set()
            try:
                after = 0
                while after < 40:
                    conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                                 "FROM c WHERE x < 20000) SELECT count(*) FROM c").fetchone()
                    after += closing.is_set()
            finally:
                time.sleep(0.2)
                order.append("thread ended")
            return work(conn)
        got = real_bg(self, name, slow)
        assert got is not None, "no second reader"
        return got

    def close_now(self):
        watched = bool(self._threads)
        if watched:
            closing.set()
        real_close(self)
        if watched:
            order.append("store closed")

    def wait(self):
        closing.set()
        real_wait(self)

    def failing(*a, **k):
        started.wait(5)
        raise {exc}

    FactStore.in_background = slow_bg
    FactStore._close_now = close_now
    Background.wait = wait
    if {deferred}:
        # the checks in their thread, the main thread loading the facts
        af._load_facts = failing
    else:
        # integrity_check in its thread, the main thread in the other checks
        af._db_checks_rest = lambda fs, db, **kw: failing()
        Audit.may_fork = lambda self: True
    try:
        list(Audit(store_at(path), parallel=False).run())
    except {exc}:
        print("raised")
    print("threads", sorted(t.name for t in threading.enumerate() if t.name.startswith("memctl")))
    print("background", called)
    print("order", order)
""")


@pytest.mark.heavy
@pytest.mark.parametrize("deferred", [True, False])
@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "RuntimeError"])
def test_the_store_closes_after_its_background_check(tmp_path, exc, deferred):
    """An exception in the main thread while the thread is in SQLite: the
    store's close waits for the thread's end, every time (the thread goes
    on querying after the close has begun, and pauses 0.2 s before it
    ends: a close that does not wait for it returns first, or the process
    dies of SIGSEGV).  It counted to 3,000,000 in one query, about 3 s a
    case, and a close that did not wait was caught in some runs only; now
    in every run, in three cases of four (with RuntimeError and the
    integrity check alone in the thread, the audit waits for the thread
    before the store closes: the fourth case checks that order)."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(
        root=str(ROOT), tmp=str(tmp_path), exc=exc, deferred=deferred)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    thread = "memctl-db-checks" if deferred else "memctl-integrity"
    assert proc.stdout.split("\n")[:4] == [
        "raised", "threads []", f"background ['{thread}']",
        "order ['thread ended', 'store closed']"], proc.stdout


SIGINT_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from tests.test_audit import build_clean
    from lecode_memctl.core.audit import facts as audit_facts
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.cli.main import main

    audit_facts.AT_ONCE_BYTES = 0     # (this small store's checks in their thread)
    path = build_clean(Path({tmp!r}) / "config")
    real = FactStore.in_background

    def slow(conn):   # the thread 2 s inside SQLite, in short steps
        t = time.time()
        while time.time() - t < 2:
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                         "WHERE x < 20000) SELECT count(*) FROM c").fetchone()

    FactStore.in_background = lambda self, name, work: real(
        self, name, lambda conn: (slow(conn), work(conn))[1])
    sent = []

    def alarm(*a):   # {times} Ctrl-C, 0.5 s apart
        sent.append(1)
        if len(sent) < {times}:
            signal.setitimer(signal.ITIMER_REAL, 0.5)
        os.kill(os.getpid(), signal.SIGINT)

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, {at})
    sys.exit(main(["--store", str(path), "--no-state", "validate", "--format", "jsonl"]))
""")


@pytest.mark.heavy
@pytest.mark.parametrize("at, times", [(0.5, 1), (1.2, 1), (0.3, 2)])
def test_ctrl_c_while_the_checks_run_waits_for_them(tmp_path, at, times):
    """Ctrl-C (once, or twice) while the database checks run in their
    thread: memctl waits for SQLite to leave the connection, then says it
    was interrupted (exit 130).  It was a segmentation fault (exit 139): in
    CPython 3.11 an interrupted Thread.join can leave the thread taken for
    finished, and the store closed the connection under it; a second
    Ctrl-C during the store's own wait did the same."""
    proc = subprocess.run([sys.executable, "-c", SIGINT_SCRIPT.format(
        root=str(ROOT), tmp=str(tmp_path), at=at, times=times)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert "interrupted" in proc.stderr
    assert not list(Path(tmp_path).glob("config/memory/*/facts.sqlite3-*"))
