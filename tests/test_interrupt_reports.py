"""An interrupt (Ctrl-C, or SIGTERM as memctl takes it: a KeyboardInterrupt
from its handlers) that stops a write command once it has changed the store
says what was written, with the interrupt's own exit status; and one that
Python could only print ("Exception ignored in" a weakref callback) does
not let the command end 0.  Each interrupt is raised from a monkeypatched
step, in this process (no signal timing)."""

from __future__ import annotations

import gc
import os
import signal
import sys
import weakref
from typing import Any

import orjson
import pytest

from lecode_memctl.cli import output

from . import secretstore
from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def planted(tmp_path) -> secretstore.Planted:
    return secretstore.build(tmp_path, seed=11)


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


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


@pytest.mark.parametrize("json_", [False, True])
def test_an_interrupt_after_the_forget_says_it_was_written(demo, monkeypatch, json_):
    from lecode_memctl.cli.state import State

    monkeypatch.setattr(State, "record_mark", lambda *a, **k: _stop(monkeypatch, "INT"))
    extra = ("--json",) if json_ else ()
    r = run_cli("--store", str(demo), "forget", VERIFIED, "--yes", *extra)
    assert r.exit_code == 130, r.stderr
    message = (orjson.loads(r.stdout)["error"]["message"] if json_
               else r.stderr.strip().removeprefix("memctl: error: "))
    assert message == f"interrupted; the forget of {VERIFIED} was written", (r.stdout, r.stderr)


def test_an_interrupt_after_the_correction_says_it_was_written(demo, monkeypatch):
    real = output.echo

    def echo(text: str = "", *, err: bool = False) -> None:
        if text.startswith("corrected fact"):
            _stop(monkeypatch, "INT")
        real(text, err=err)

    monkeypatch.setattr(output, "echo", echo)
    r = run_cli("--store", str(demo), "correct", VERIFIED, "1", "demo-alpha:1",
                "a corrected text", "--yes")
    assert r.exit_code == 130, r.stderr
    assert r.stderr.strip() == (f"memctl: error: interrupted; the correction of {VERIFIED} "
                                "was written (revision 2)"), r.stderr
    r = run_cli("--no-state", "--store", str(demo), "history", VERIFIED, "--json")
    assert orjson.loads(r.stdout)["revision"] == 2


def test_a_ctrl_c_python_could_only_print_still_ends_the_command(demo, monkeypatch):
    """SIGINT landing in a weakref callback: memctl's handler raises
    KeyboardInterrupt there, Python prints "Exception ignored in ..." and
    the command ran on to exit 0; the Ctrl-C was lost.  Its flag is kept:
    the command now ends as interrupted (130)."""
    import lecode_memctl.cli.cmd_facts as cmd_facts

    monkeypatch.setattr(output._SIG, "owner", os.getpid())    # memctl's own process
    monkeypatch.setattr(output._SIG, "interrupted", False)
    ignored: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ignored.append(u.exc_value))
    real = cmd_facts._open_read

    class Thing:
        pass

    def open_read(*args: Any, **kwargs: Any) -> Any:
        thing = Thing()
        # the handler, as Python runs it when the signal lands in a callback
        ref = weakref.ref(thing, lambda _r: output._interrupted(signal.SIGINT, None))
        del thing
        gc.collect()
        assert ref() is None
        return real(*args, **kwargs)

    monkeypatch.setattr(cmd_facts, "_open_read", open_read)
    r = run_cli("--no-state", "--store", str(demo), "history", VERIFIED)
    assert len(ignored) == 1 and isinstance(ignored[0], KeyboardInterrupt)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert r.stderr.strip() == "memctl: error: interrupted"
