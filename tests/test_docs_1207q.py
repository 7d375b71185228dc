"""What the docs say, kept true (a review of docs/ against behaviour,
2026-12-07): a SIGTERM or SIGHUP while memctl is still starting, the
errors docs/API.md names importable from ``lecode_memctl.core``, the colour
variables, a torn session's ``reason``, a relative ``$XDG_CONFIG_HOME``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo

REPO = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- 1. a signal while starting

# memctl as `python -m lecode_memctl` runs it, held while it imports MODULE
# (its start-up: the command tree): it writes MARK, then waits there for the
# test's signal, a real one from outside as `timeout` sends (memctl keeps a
# signal that comes during its start-up until the start-up is done: the
# wait ends once it has been kept)
SLOW_START = """\
import importlib.abc, os, runpy, sys, time
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            signals = sys.modules.get("lecode_memctl.cli.signals")
            holding = signals is not None and signals._SIG.holding
            with open({mark!r} + ".tmp", "w") as f:  # (closed here: a signal
                f.write("held" if holding else "unheld")  # in __del__ is lost)
            os.replace({mark!r} + ".tmp", {mark!r})       # (whole when seen)
            for _ in range(1200):
                time.sleep(0.05)
                signals = sys.modules.get("lecode_memctl.cli.signals")
                if signals is not None and signals._SIG.held:
                    break
        return None
sys.meta_path.insert(0, Slow())
sys.argv[0] = "memctl"
runpy.run_module("lecode_memctl", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux: signals")
@pytest.mark.parametrize("module", ["lecode_memctl.cli.state", "typer"])
@pytest.mark.parametrize("fmt", ["table", "json"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["TERM", "HUP", "INT"])
def test_a_termination_signal_while_memctl_starts_is_one_line_and_the_signal(
        demo_template, tmp_path, module, fmt, sig):
    """SIGTERM or SIGHUP while memctl imports and builds its command tree
    (its first 100 ms or so; more under load) stops it as during the
    command: one line, the error document under --json, then the signal
    itself.  Before, the process ended silently (nothing on stdout or
    stderr): docs/OUTPUT.md promised the line and the document.  (A Ctrl-C
    there was right, and still is: 130 and ``interrupted``.)"""
    store = copy_demo(demo_template, tmp_path / "demo")
    mark = tmp_path / "mark"
    code = SLOW_START.format(module=module, mark=str(mark))
    p = subprocess.Popen([sys.executable, "-c", code, "--store", str(store), "--no-state",
                          "facts", *(["--json"] if fmt == "json" else [])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "memctl never reached the import"
            time.sleep(0.01)
        # (written once its start-up keeps signals: not raised inside an
        # import's callback)
        assert mark.read_text() == "held"
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if sig == signal.SIGINT:
        code, message, status = "interrupted", "interrupted", 130
    else:
        code, message = "terminated", f"terminated by {signal.Signals(sig).name}"
        status = -sig       # (ended by the signal itself)
    assert p.returncode == status, (p.returncode, err)
    assert err == f"memctl: error: {message}\n".encode()
    if fmt == "table":
        assert out == b""
    else:
        assert orjson.loads(out) == {"type": "error", "error": {
            "code": code, "message": message, "exit_code": 128 + sig}}


def test_a_signal_during_the_start_up_is_kept_until_it_is_done():
    """A code review: raised at once, the start-up's KeyboardInterrupt could
    land in the import system's callback (``_get_module_lock``), where
    Python prints "Exception ignored in ..." and a traceback, and the
    command ran on.  During the start-up the handlers keep the signal;
    ``start_up_done`` raises it in main's own frame."""
    from lecode_memctl.cli import signals

    saved = (signals._SIG.owner, signals._SIG.running, signals._SIG.terminated,
             signals._SIG.interrupted, signals._SIG.holding, signals._SIG.held)
    try:
        signals._SIG.owner, signals._SIG.running = os.getpid(), True
        for handler, sig in ((signals._terminated, signal.SIGTERM),
                             (signals._interrupted, signal.SIGINT)):
            signals._SIG.terminated, signals._SIG.interrupted = None, False
            signals.start_up_held()
            handler(sig, None)                  # (would raise, unkept)
            with pytest.raises(KeyboardInterrupt):
                signals.start_up_done()
            assert not signals._SIG.holding and not signals._SIG.held
        signals.start_up_held()
        signals.start_up_done()                 # (nothing kept: nothing raised)
    finally:
        (signals._SIG.owner, signals._SIG.running, signals._SIG.terminated,
         signals._SIG.interrupted, signals._SIG.holding, signals._SIG.held) = saved


# ---------------------------------------------------------------- 2. the errors API.md names

def test_every_error_api_md_names_is_importable_from_the_core():
    """docs/API.md: errors are typed, "each also from lecode_memctl.core";
    it names ``LocalResourceError`` (a ``StoreWriteError``: a process out of
    file descriptors), which ``from lecode_memctl.core import
    LocalResourceError`` refused (ImportError): neither ``__all__`` nor the
    lazy-name map had it.  (test_session_1207b.py checks the other way:
    every name of ``__all__`` is in API.md.)"""
    import inspect
    import re

    import lecode_memctl.core as core
    from lecode_memctl.core import errors

    api = (REPO / "docs" / "API.md").read_text(encoding="utf-8")
    named = {n for n in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", api)
             if inspect.isclass(getattr(errors, n, None))
             and issubclass(getattr(errors, n), errors.MemctlError)}
    assert {"MemctlError", "StoreWriteError", "LocalResourceError"} <= named
    assert sorted(named - set(core.__all__)) == []
    for name in sorted(named):
        assert getattr(core, name) is getattr(errors, name), name
    r = subprocess.run([sys.executable, "-c",
                        "from lecode_memctl.core import LocalResourceError, StoreWriteError; "
                        "assert issubclass(LocalResourceError, StoreWriteError); "
                        "print(LocalResourceError.exit_code)"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "7\n", "")


# ---------------------------------------------------------------- 3. NO_COLOR, FORCE_COLOR

def _colours(store: Path, **env: str) -> bool:
    """Whether ``memctl facts`` in a pipe colours its table under ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    r = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                        "--no-state", "facts"], capture_output=True, timeout=120,
                       env={**base, **env})
    assert r.returncode == 0, r.stderr
    return b"\x1b[" in r.stdout


def test_an_empty_no_color_or_force_color_is_unset_as_the_man_page_says(demo_template,
                                                                          tmp_path):
    """NO_COLOR and FORCE_COLOR count when set and not empty (no-color.org):
    the man page said "When set (to anything)", which an empty value is
    not taken for."""
    store = copy_demo(demo_template, tmp_path / "demo")
    assert _colours(store, FORCE_COLOR="1")
    assert not _colours(store, FORCE_COLOR="")                  # empty: not forced
    assert not _colours(store, FORCE_COLOR="1", NO_COLOR="1")
    assert _colours(store, FORCE_COLOR="1", NO_COLOR="")        # empty: no veto
    man = (REPO / "man" / "memctl.1").read_text(encoding="utf-8")
    env = man[man.index(".SH ENVIRONMENT"):]
    for name in ("NO_COLOR", "FORCE_COLOR"):
        entry = env[env.index(f"\\fB{name}\\fR"):]
        entry = " ".join(entry[:entry.index(".TP")].split())
        assert "set and not empty" in entry, entry
        assert "(to anything)" not in entry, entry


# ---------------------------------------------------------------- 4. a torn session's reason

def test_a_torn_sessions_reason_is_torn_tail_as_the_docs_say(demo_template, tmp_path):
    """``sessions`` gives a torn transcript ``state`` and ``reason``
    ``torn_tail`` (the core's SessionInfo as well: test_corrupt_rule.py);
    OUTPUT.md's ``session`` table and ``memctl schema session`` said
    ``reason`` was "the kind of corrupt/refused/unreadable state", as if it
    were null then.  The rule the docs now give: null exactly when the
    state is ok, else the kind of that state, torn_tail for a torn tail."""
    from .conftest import run_cli

    store = copy_demo(demo_template, tmp_path / "demo")
    sessions = sorted((store / "sessions").glob("*.jsonl"))
    torn = sessions[0]
    with open(torn, "ab") as f:
        f.write(b'{"seq":99,"type":"mess')
    r = run_cli("--store", str(store), "--no-state", "sessions", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    rows = {row["id"]: row for row in map(orjson.loads, r.stdout_bytes.splitlines())}
    assert (rows[torn.stem]["state"], rows[torn.stem]["reason"]) == ("torn_tail", "torn_tail")
    assert all((row["reason"] is None) == (row["state"] == "ok") for row in rows.values())
    schema = run_cli("schema", "session")
    assert schema.exit_code == 0, schema.stderr
    said = orjson.loads(schema.stdout_bytes)["properties"]["reason"]["description"]
    assert "torn_tail" in said and "null when state is ok" in said, said
    output_md = (REPO / "docs" / "OUTPUT.md").read_text(encoding="utf-8")
    table = output_md[output_md.index("### `session` (sessions)"):]
    row = next(line for line in table.splitlines() if line.startswith("| `reason` |"))
    assert "torn_tail" in row and "null when state is ok" in row, row


# ---------------------------------------------------------------- 5. a relative XDG_CONFIG_HOME

def test_a_relative_xdg_config_home_is_taken_from_the_current_directory(tmp_path,
                                                                          monkeypatch):
    """The store contract says ``$XDG_CONFIG_HOME/lecode`` (no word on a
    relative value), and the agent and memctl share this code: a relative
    ``$XDG_CONFIG_HOME`` (or ``$LECODE_CONFIG_DIR``) is taken relative to the
    current directory, unlike the XDG spec's advice, while memctl's own
    ``$XDG_STATE_HOME`` follows the spec (a relative one is ignored).  The
    behaviour is pinned here; FORMAT.md, the man page and ``--config-dir``'s
    help now say it."""
    from lecode_memctl.core.config import resolve_config_dir
    from lecode_memctl.core.seen import state_dir

    from .conftest import run_cli

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": "rel/xdg"}
    got = resolve_config_dir(environ=env)
    assert (got.path, got.source) == (work / "rel" / "xdg" / "lecode", "XDG_CONFIG_HOME")
    got = resolve_config_dir(environ={**env, "LECODE_CONFIG_DIR": "rel/lecode"})
    assert (got.path, got.source) == (work / "rel" / "lecode", "LECODE_CONFIG_DIR")
    assert state_dir({"HOME": str(home), "XDG_STATE_HOME": "rel/state"}) == \
        home / ".local" / "state" / "lecode-memctl"
    assert state_dir({"HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "st")}) == \
        tmp_path / "st" / "lecode-memctl"
    # memctl itself, as a user sees it
    monkeypatch.delenv("LECODE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", "rel/xdg")
    r = run_cli("--no-state", "where", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert (doc["config_dir"], doc["config_dir_source"]) == (
        str(work / "rel" / "xdg" / "lecode"), "XDG_CONFIG_HOME")

    def said(text: str) -> str:
        return " ".join(text.split())

    fmt = said((REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8"))
    bullet = fmt[fmt.index("**Config dir**"):fmt.index("**Project root**")]
    assert "relative to the current directory" in bullet, bullet
    assert "XDG_STATE_HOME" in bullet, bullet
    man = (REPO / "man" / "memctl.1").read_text(encoding="utf-8")
    env_section = man[man.index(".SH ENVIRONMENT"):man.index(".SH FILES")]
    entry = env_section[env_section.index("\\fBXDG_CONFIG_HOME\\fR"):]
    entry = said(entry[:entry.index(".TP")])
    assert "relative" in entry and "current directory" in entry, entry
    help_text = said(run_cli("--help").stdout)
    assert "relative one from the current directory" in help_text, help_text
