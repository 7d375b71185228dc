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
    import sys, threading
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from tests.test_audit import build_clean
    from lecode_memctl.core.audit import Audit, facts as af, run as ar
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    af.AT_ONCE_BYTES = 0     # (this small store's checks in their thread)
    path = build_clean(Path({tmp!r}) / "config")
    started = threading.Event()
    real_bg = FactStore.in_background
    called = []

    def slow_bg(self, name, work):
        # the thread's SQLite work made long: a recursive query that counts
        # to {count} on the second connection, then the real work
        called.append(name)

        def slow(conn):
            started.set()
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                         "FROM c WHERE x < {count}) SELECT count(*) FROM c").fetchone()
            return work(conn)
        got = real_bg(self, name, slow)
        assert got is not None, "no second reader"
        return got

    def failing(*a, **k):
        started.wait(5)
        raise {exc}

    FactStore.in_background = slow_bg
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
""")


# the thread's recursive count: about 1 s inside SQLite (3,000,000 took 3 s a
# case); the main thread raises and reaches FactStore.close 0.1 ms after the
# thread starts it, so the store meets the thread well inside SQLite all the same
COUNT = 1_000_000


@pytest.mark.heavy
@pytest.mark.parametrize("deferred", [True, False])
@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "RuntimeError"])
def test_the_store_closes_after_its_background_check(tmp_path, exc, deferred):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(
        root=str(ROOT), tmp=str(tmp_path), count=COUNT, exc=exc, deferred=deferred)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    thread = "memctl-db-checks" if deferred else "memctl-integrity"
    assert proc.stdout.split("\n")[:3] == ["raised", "threads []", f"background ['{thread}']"]


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
