"""An interrupt (Ctrl-C, or SIGTERM as memctl takes it: a KeyboardInterrupt
from its handlers) that stops a write command once it has changed the store
says what was written, with the interrupt's own exit status.  Each
interrupt is raised from a monkeypatched step, in this process (no signal
timing)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from lecode_memctl.cli import output

from . import secretstore
from .conftest import run_cli


@pytest.fixture
def planted(tmp_path) -> secretstore.Planted:
    return secretstore.build(tmp_path, seed=11)


def _stop(monkeypatch: pytest.MonkeyPatch, sig: str) -> None:
    """The interrupt, as memctl's handler raises it for ``sig`` (SIGTERM:
    the signal kept for the message and exit status, then KeyboardInterrupt)."""
    if sig == "TERM":
        monkeypatch.setattr(output._SIG, "terminated", signal.SIGTERM)
    raise KeyboardInterrupt


def _status(sig: str) -> tuple[int, str]:
    return (143, "terminated by SIGTERM") if sig == "TERM" else (130, "interrupted")


@pytest.mark.parametrize("sig", ["INT", "TERM"])
def test_an_interrupted_redact_says_what_was_already_redacted(planted, monkeypatch, sig):
    """redact --help: "An error after a change names what was already
    redacted and what was not; running redact again finishes the job."  An
    interrupt after the transcripts were rewritten said only "interrupted"."""
    from lecode_memctl.core import atomic

    real = atomic.atomic_write
    writes: list[Any] = []

    def write_then_stop(path: Any, *args: Any, **kwargs: Any) -> Any:
        if len(writes) == 2:        # the two transcripts are written; not the notes
            _stop(monkeypatch, sig)
        writes.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(atomic, "atomic_write", write_then_stop)
    r = run_cli("--store", str(planted.store), "redact", "--yes", "--jobs", "1")
    status, said = _status(sig)
    assert r.exit_code == status, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"memctl: error: {said}; "), line
    assert "already redacted: sessions/s-forgot.jsonl, sessions/s-main.jsonl" in line, line
    assert "not done: notes/keys.md" in line and "run redact again to finish" in line, line
    monkeypatch.setattr(atomic, "atomic_write", real)
    monkeypatch.setattr(output._SIG, "terminated", None)
    r = run_cli("--store", str(planted.store), "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert run_cli("--store", str(planted.store), "secrets", "--jobs", "1").exit_code == 0


def test_an_interrupt_before_any_change_is_only_interrupted(planted, monkeypatch):
    from lecode_memctl.core import atomic

    monkeypatch.setattr(atomic, "atomic_write", lambda *a, **k: _stop(monkeypatch, "INT"))
    r = run_cli("--store", str(planted.store), "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 130
    assert r.stderr.splitlines() == ["memctl: error: interrupted"], r.stderr
