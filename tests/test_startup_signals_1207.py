"""A SIGTERM in main's collector set-up (2026-12-07, review rv76).

main() set the collector's threshold (``import gc``, ``gc.set_threshold``)
before it installed its signal handlers: a SIGTERM there ended memctl
with no line (1 in 60 random SIGTERMs of a review).  The handlers are now
main's first step: one line, and the process ends by the signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from .builders import copy_demo

SIGTERM_IN_GC_SETUP = """\
import gc, os, signal, sys
real = gc.set_threshold
def spy(*a):
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*a)
gc.set_threshold = spy
from lecode_memctl.cli.main import main
sys.exit(main())
"""


def test_a_sigterm_in_the_collector_set_up_is_one_line(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    r = subprocess.run([sys.executable, "-c", SIGTERM_IN_GC_SETUP, "--store", str(store),
                        "--no-state", "facts"], capture_output=True, timeout=60)
    assert r.stderr == b"memctl: error: terminated by SIGTERM\n", r.stderr
    assert r.returncode == -signal.SIGTERM and r.stdout == b""
