"""The core forks only with no other thread running (docs/API.md, "Forks"):
``validate_store(parallel=True)`` forked its pool of ``--deep`` (or of a
large store) in a process that ran a thread of its own (an agent's), which
the child then inherited with its locks held by nobody.  Each case runs in a
subprocess, which counts its forks (``os.register_at_fork``), once with a
thread of its own waiting and once alone: the same findings, no fork beside
the thread."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent("""
    import os, sys, threading
    from lecode_memctl.core import open_project, secrets, validate_store

    secrets.POOL_BYTES = 1000       # (a pool for these few kilobytes)

    root, what = sys.argv[1], sys.argv[2]
    p = open_project(root + "/proj", config_dir=root + "/cfg")
    for s in range(10):
        with p.sessions.create(f"s{s}") as w:
            w.append_message("user", "hello " * 40)
    p.remember("a fact", p.sessions.source_snapshot("s0", 1, 1).ref)
    forks = []
    os.register_at_fork(after_in_parent=lambda: forks.append(1))

    def run():
        if what == "validate":
            findings, summary = validate_store(p.store, deep=True, parallel=True)
            return sorted(f.code for f in findings), summary.facts_total
        report = secrets.scan_store(p.store, jobs=2)
        return len(report.findings), len(report.skipped)

    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    beside = run()
    stop.set()
    t.join()
    print(len(forks), beside == run(), len(forks) > 0)
""")


@pytest.mark.parametrize("what", ["validate", "secrets"])
def test_no_pool_is_forked_beside_another_thread(tmp_path, what):
    (tmp_path / "proj").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path), what],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # no fork while the thread ran; the same result; the second run, alone,
    # forked its pool (the case is one that takes a pool)
    beside_forks, same, forked_alone = r.stdout.split()
    assert beside_forks == "0"
    assert same == "True"
    assert forked_alone == "True"
