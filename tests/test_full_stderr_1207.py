"""A full stderr does not change a command's status (2026-12-07, review).

A hint or warning line that could not be written on a full stderr
(``2>/dev/full``) made the command exit 7 ("write failed"): `facts`'s
next-page hint, a pattern warning of `grep` (whose real status, 1, says
"no match") or `search`, `export -o -`'s summary after a complete bundle.
A closed stderr (``2>&-``) kept the status; the README's exit table gives
7 for stdout alone.  Now a full stderr is as a closed one: what cannot be
written there is dropped, and the status is the command's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .builders import copy_demo

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


def _run(store: Path, *args: str, stdout=subprocess.DEVNULL) -> int:  # noqa: ANN001
    with open("/dev/full", "wb") as full:
        return subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                               "--no-state", *args], stdout=stdout, stderr=full,
                              stdin=subprocess.DEVNULL, timeout=60).returncode


def _closed(store: Path, *args: str) -> int:
    return subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                           "--no-state", *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                          timeout=60).returncode


@pytest.mark.parametrize("args", [("facts", "--limit", "1"), ("grep", "[[]x"),
                                  ("search", "[[]x")])
def test_a_line_on_a_full_stderr_keeps_the_status(demo_template, tmp_path, args):
    store = copy_demo(demo_template, tmp_path / "d")
    assert _run(store, *args) == _closed(store, *args) != 7


def test_export_to_stdout_with_a_full_stderr_is_exit_0(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    out = tmp_path / "b.tar"
    with open(out, "wb") as fh:
        assert _run(store, "export", "-o", "-", stdout=fh) == 0
    r = subprocess.run([sys.executable, "-m", "lecode_memctl", "verify", str(out)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout


def test_an_error_with_a_full_stderr_keeps_its_status(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    assert _run(store, "recall", "ffffffffffffffff") == 3


def test_a_question_nobody_can_see_is_declined(demo_template, tmp_path, monkeypatch):
    """A code review: with stderr full, forget's plan and question were lost
    and a 'y' forgot the fact.  A confirmation with a closed or lost
    stderr is declined."""
    import lecode_memctl.cli.output as output
    from lecode_memctl.cli.main import _ClosedStderr

    monkeypatch.setattr(sys, "stderr", _ClosedStderr())
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("y\n"))
    assert output.confirm("Forget it?") is False
