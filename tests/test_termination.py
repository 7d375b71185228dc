"""SIGTERM and SIGHUP (``timeout`` in a cron job, a stopped service, a
closed terminal) end a command as Ctrl-C does: the store is closed, its
private snapshot removed from $TMPDIR, a forked child ended, the rows made
written, one line on stderr; then memctl ends by the same signal.  Before,
the process ended where it stood: each SIGTERM left a copy of the facts
database in $TMPDIR (373 MB for a store of 1,000,000 facts) and, for a
split listing, a child running to the end of its half."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from lecode_memctl.core.facts import FactStore

from . import outkit
from .builders import copy_demo
from .conftest import run_cli
from .test_split_listing import _many

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="Linux: signals, /proc")

# memctl's own process (main() reads sys.argv), with the split forced and
# FUNC of MODULE held up: the parent writes MARK and waits, a child writes
# its pid to CHILD and waits
RUN = """\
import os, sys, time, importlib
import lecode_memctl.core.split as s
s.SPLIT_LEAST = 1
mod = importlib.import_module({module!r})
func = getattr(mod, {func!r})
parent = os.getpid()
def held(*a, **k):
    if os.getpid() == parent:
        open({mark!r}, "w").write("1")
    else:
        open({child!r}, "w").write(str(os.getpid()))
    time.sleep(60)
    return func(*a, **k)
setattr(mod, {func!r}, held)
{before}
from lecode_memctl.cli.main import main
sys.exit(main())
"""


@pytest.fixture
def store(demo_template, tmp_path) -> Path:
    s = copy_demo(demo_template, tmp_path / "demo")
    _many(s)
    return s


def _held(store: Path, tmp_path: Path, module: str, func: str, argv: list[str],
          before: str = "") -> tuple[subprocess.Popen[bytes], Path, Path]:
    """memctl ARGV started and held (see RUN) once its parent and child have
    both reached ``func``: (process, its $TMPDIR, the child's pid file)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    mark, child = tmp_path / "mark", tmp_path / "child"
    code = RUN.format(module=module, func=func, mark=str(mark), child=str(child), before=before)
    p = subprocess.Popen([sys.executable, "-c", code, "--store", str(store), "--no-state", *argv],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, TMPDIR=str(tmp)), cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (mark.exists() and child.exists() and child.read_text()):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"memctl never reached {func} in both processes: {err!r}")
        time.sleep(0.02)
    assert any(tmp.iterdir()), "no private snapshot to remove"
    return p, tmp, child


def _until(p: subprocess.Popen[bytes], ready: Callable[[], bool], what: str,
           seconds: float = 60) -> None:
    """Until ``ready()``; fails should ``p`` end first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert p.poll() is None, f"memctl ended before {what}: {p.returncode}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


def _ended(p: subprocess.Popen[bytes], sig: int) -> tuple[bytes, bytes]:
    """What ``p`` wrote, once ``sig`` (none: 0) is sent and it has ended."""
    if sig:
        p.send_signal(sig)
    try:
        return p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_terminated_listing_cleans_up_and_ends_by_the_signal(store, tmp_path, sig):
    p, tmp, child = _held(store, tmp_path, "lecode_memctl.core.factview", "_listing_rows",
                          ["facts", "--all", "--format", "jsonl"])
    out, err = _ended(p, sig)
    name = signal.Signals(sig).name
    assert p.returncode == -sig, (p.returncode, err)
    assert err == f"memctl: error: terminated by {name}\n".encode(), err
    assert orjson.loads(out.splitlines()[-1]) == {
        "type": "error",
        "error": {"code": "terminated", "message": f"terminated by {name}", "exit_code": 128 + sig}}
    assert list(tmp.iterdir()) == [], "the private snapshot was left in $TMPDIR"
    assert not _alive(int(child.read_text())), "the child outlived the listing"


def test_a_terminated_json_document_ends_with_the_error(store, tmp_path):
    """``facts --json`` ends its document with the error, as after Ctrl-C."""
    p, tmp, _child = _held(store, tmp_path, "lecode_memctl.core.factview", "_listing_rows",
                           ["facts", "--all", "--json"])
    out, err = _ended(p, signal.SIGTERM)
    assert (p.returncode, err) == (-signal.SIGTERM, b"memctl: error: terminated by SIGTERM\n")
    assert orjson.loads(out)["error"] == {"code": "terminated", "message": "terminated by SIGTERM",
                                          "exit_code": 143}
    assert list(tmp.iterdir()) == []


def test_a_terminated_validate_cleans_up(store, tmp_path):
    """validate terminated while its child checks half of the facts and its
    database checks run on a thread."""
    p, tmp, child = _held(store, tmp_path, "lecode_memctl.core.audit.facts", "_fact_part",
                          ["validate", "-q"],
                          # (this small store's checks on their thread, as a larger one's)
                          before="from lecode_memctl.core.audit import facts as _af\n"
                                 "_af.AT_ONCE_BYTES = 0")
    out, err = _ended(p, signal.SIGTERM)
    assert (p.returncode, out, err) == (-signal.SIGTERM, b"",
                                        b"memctl: error: terminated by SIGTERM\n")
    assert list(tmp.iterdir()) == []
    assert not _alive(int(child.read_text()))


def test_a_hangup_ignored_from_the_start_stays_ignored(store, tmp_path):
    """``nohup memctl ...``: SIGHUP was ignored when memctl started, and is
    still; the SIGTERM after it ends the command."""
    p, tmp, _child = _held(store, tmp_path, "lecode_memctl.core.factview", "_listing_rows",
                           ["facts", "--all", "--format", "jsonl"],
                           before="import signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)")
    p.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert p.poll() is None, "an ignored SIGHUP ended memctl"
    out, err = _ended(p, signal.SIGTERM)
    assert (p.returncode, err) == (-signal.SIGTERM, b"memctl: error: terminated by SIGTERM\n")
    assert list(tmp.iterdir()) == []


def test_a_store_closed_meanwhile_stops_its_background_work(demo_template, tmp_path):
    """close() while work on a sibling connection is still running (the
    integrity check of a large store, left by an interrupt) stops it instead
    of waiting for its end: here a query of minutes (about 3 on this machine)."""
    s = copy_demo(demo_template, tmp_path / "demo")
    fs = FactStore.open_readonly(s / "facts.sqlite3")
    endless = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
               "WHERE i < 1000000000) SELECT count(*) FROM n")
    result = fs.in_background("endless", lambda conn: conn.execute(endless).fetchone())
    assert result is not None
    time.sleep(0.2)
    t = time.monotonic()
    fs.close()
    assert time.monotonic() - t < 20, "close() waited for the work to end"
    with pytest.raises(sqlite3.OperationalError, match="interrupt"):
        result()


def test_an_interrupt_while_waiting_stops_the_background_work(demo_template, tmp_path):
    """Ctrl-C while the caller waits for work on a sibling connection stops
    the work and is raised at once, not after the work's end."""
    s = copy_demo(demo_template, tmp_path / "demo")
    fs = FactStore.open_readonly(s / "facts.sqlite3")
    endless = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
               "WHERE i < 1000000000) SELECT count(*) FROM n")
    result = fs.in_background("endless", lambda conn: conn.execute(endless).fetchone())
    assert result is not None

    def interrupt(signum, frame):  # noqa: ANN001
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        t = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            result()
        assert time.monotonic() - t < 20, "the wait outlasted the interrupt"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        fs.close()


# -- pools, a second signal, the editor (found by a review)

POOLED = """\
import os, sys, time
import lecode_memctl.core.audit.run as r, lecode_memctl.core.audit.transcripts as t
r.worth_a_pool = lambda *a: True
job = t._session_job
parent = os.getpid()
def held(*a, **k):
    if os.getpid() != parent:
        open(os.path.join({marks!r}, str(os.getpid())), "w").close()
        time.sleep(60)
    return job(*a, **k)
t._session_job = held
from lecode_memctl.cli.main import main
sys.exit(main())
"""


def _group_left(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` still there (not zombies)."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            left.append(int(entry))
    return left


@contextlib.contextmanager
def _own_group(argv: list[str], tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` run as the leader of a process group of its own ($TMPDIR:
    ``tmp``, run in its parent); the group killed at the end, whatever is
    left of it."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, TMPDIR=str(tmp)), cwd=tmp.parent,
                         start_new_session=True)
    try:
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _group_ends(pgid: int) -> None:
    """Until nothing of process group ``pgid`` runs (10 s at most)."""
    deadline = time.monotonic() + 10
    while _group_left(pgid):
        assert time.monotonic() < deadline, f"left running: {_group_left(pgid)}"
        time.sleep(0.05)


@pytest.mark.parametrize("group", [True, False], ids=["timeout", "pid-only"])
def test_a_terminated_pool_leaves_no_process(store, tmp_path, group):
    """validate reading transcripts in a pool of workers: ``timeout`` (SIGTERM
    to memctl, then to its process group) left the workers waiting for more
    work for ever (they took the signal as an interrupt of their task) and
    could hang its caller; SIGTERM to memctl alone waited for every batch
    queued.  Now the workers end, and memctl after them."""
    tmp, marks = tmp_path / "tmpdir", tmp_path / "marks"
    tmp.mkdir()
    marks.mkdir()
    with _own_group([sys.executable, "-c", POOLED.format(marks=str(marks)), "--store",
                     str(store), "--no-state", "validate", "-q"], tmp) as p:
        _until(p, lambda: any(marks.iterdir()), "a worker at work")
        p.send_signal(signal.SIGTERM)
        if group:
            os.killpg(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        assert (p.returncode, err) == (-signal.SIGTERM, b"memctl: error: terminated by SIGTERM\n")
        assert list(tmp.iterdir()) == []
        _group_ends(p.pid)


# the store's close() held 0.5 s (after writing MARK) in the parent
SLOW_CLOSE = """\
import lecode_memctl.core.facts as F
close = F.FactStore.close
def slow_close(self):
    if os.getpid() == parent and not self._closed:
        open({mark!r}, "w").close()
        time.sleep(0.5)
    return close(self)
F.FactStore.close = slow_close
"""


@pytest.mark.heavy
@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGHUP),
                                           (signal.SIGTERM, signal.SIGTERM),
                                           (signal.SIGINT, signal.SIGTERM)],
                         ids=["TERM+HUP", "TERM+TERM", "INT+TERM"])
@pytest.mark.parametrize("when", ["at-once", "in-clean-up"])
def test_a_second_signal_does_not_break_the_clean_up(store, tmp_path, first, second, when):
    """A second signal right after the first (``timeout`` sends SIGTERM
    twice, a service manager SIGHUP with it), or while the store is being
    closed, raised a second interrupt in the clean-up: a traceback,
    'internal error: RuntimeError', a snapshot left in $TMPDIR.  Now it is
    ignored, and memctl ends by the termination signal it took first (of
    two pending at once, Python takes the lower number first: SIGHUP
    before SIGTERM)."""
    closing = tmp_path / "closing"
    p, tmp, child = _held(store, tmp_path, "lecode_memctl.core.factview", "_listing_rows",
                          ["facts", "--all", "--format", "jsonl"],
                          before=SLOW_CLOSE.format(mark=str(closing)))
    p.send_signal(first)
    if when == "in-clean-up":
        _until(p, closing.exists, "closing the store")
    out, err = _ended(p, second)
    assert err.count(b"\n") == 1 and err.startswith(b"memctl: error: "), err
    if first == signal.SIGINT:
        assert p.returncode == -signal.SIGTERM, (p.returncode, err)
    else:
        took = signal.Signals(-p.returncode)
        assert took in (first, second), (p.returncode, err)
        assert err == f"memctl: error: terminated by {took.name}\n".encode()
    assert list(tmp.iterdir()) == []
    assert not _alive(int(child.read_text()))


def _end_editor(mark: Path) -> None:
    """The test's editor (its pid in ``mark``) ended, should memctl have
    left it running."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(mark.read_text()), signal.SIGKILL)


def _editing(demo_template: Any, tmp_path: Path, script: str, tmp: Path
             ) -> tuple[Path, bytes, subprocess.Popen[bytes]]:
    """``memctl edit`` of the demo store's MEMORY.md started with ``script``
    as its editor and ``tmp`` as TMPDIR: the file, its bytes before, and
    the process."""
    s = copy_demo(demo_template, tmp_path / "demo")
    memory = s / "MEMORY.md"
    before = memory.read_bytes()
    editor = tmp_path / "editor.sh"
    editor.write_text(script)
    editor.chmod(0o755)
    p = subprocess.Popen([sys.executable, "-m", "lecode_memctl", "--store", str(s), "--no-state",
                          "edit"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, TMPDIR=str(tmp), VISUAL=str(editor)), cwd=tmp_path)
    return memory, before, p


EDITOR = """\
#!/bin/sh
trap 'echo TERM >> {log}; echo "an edit" >> "$1"; exit 0' TERM
echo $$ > {mark}
while :; do sleep 0.05; done
"""


def test_a_terminated_edit_lets_the_editor_end_and_keeps_its_copy(demo_template, tmp_path):
    """SIGTERM to ``memctl edit`` while the editor runs: the editor was
    killed (SIGKILL: a terminal left in raw mode) and the edited copy
    removed.  Now the editor gets the signal and ends as it chooses; memctl
    writes nothing, keeps the edited copy and says where, then ends by the
    signal."""
    log, mark = tmp_path / "editor.log", tmp_path / "editor.started"
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    memory, before, p = _editing(demo_template, tmp_path, EDITOR.format(log=log, mark=mark), tmp)
    try:
        _until(p, mark.exists, "starting the editor")
        out, err = _ended(p, signal.SIGTERM)
    finally:
        _end_editor(mark)
    assert log.read_text() == "TERM\n"
    assert p.returncode == -signal.SIGTERM, (p.returncode, err)
    kept = [f for f in tmp.iterdir() if f.name.startswith("memctl-edit-")]
    assert len(kept) == 1 and kept[0].read_bytes() == before + b"an edit\n"
    assert err.splitlines() == [
        f"memctl: nothing was written; your edited copy is kept at {kept[0]}".encode(),
        b"memctl: error: terminated by SIGTERM"]
    assert memory.read_bytes() == before


@pytest.mark.heavy
def test_sigint_ignored_from_the_start_stays_ignored(store, tmp_path):
    """SIGINT ignored when memctl started (a background job of a script):
    the clean-up after a SIGTERM set it to its default action, and a SIGINT
    then ended memctl before the snapshot was removed."""
    closing = tmp_path / "closing"
    p, tmp, _child = _held(store, tmp_path, "lecode_memctl.core.factview", "_listing_rows",
                           ["facts", "--all", "--format", "jsonl"],
                           before="import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                           + SLOW_CLOSE.format(mark=str(closing)))
    p.send_signal(signal.SIGTERM)
    _until(p, closing.exists, "closing the store")
    out, err = _ended(p, signal.SIGINT)
    assert (p.returncode, err) == (-signal.SIGTERM, b"memctl: error: terminated by SIGTERM\n")
    assert list(tmp.iterdir()) == []


@pytest.mark.heavy
def test_a_later_sigterm_ends_a_clean_up_stalled_on_a_pipe(store, tmp_path):
    """After a SIGTERM, memctl writes the rows it made; nobody reads the pipe,
    so that write waits.  A SIGTERM soon after the first is the same request
    (timeout sends two) and is ignored; one later ends memctl at once, as a
    second Ctrl-C does (all were ignored: only SIGKILL ended it)."""
    import fcntl

    from lecode_memctl.cli import output

    r, w = os.pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    p = subprocess.Popen([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                          "--no-state", "facts", "--all", "--format", "jsonl"],
                         stdout=w, stderr=subprocess.PIPE, env=dict(os.environ, TMPDIR=str(tmp_path)))
    os.close(w)
    try:
        _until(p, lambda: outkit.blocked_writing_stdout(p.pid), "blocked writing stdout")
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGTERM)       # (as timeout does: ignored)
        time.sleep(0.3)
        assert p.poll() is None, "the second SIGTERM of one request ended memctl"
        time.sleep(output.REPEAT_ENDS_AFTER)
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == -signal.SIGTERM
    finally:
        os.close(r)
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stderr.close()


SIGINT_EDITOR = """\
#!/bin/sh
echo $$ > {mark}
while [ ! -e {go} ]; do sleep 0.05; done
echo "an edit" >> "$1"
"""


@pytest.mark.heavy
def test_a_ctrl_c_to_memctl_alone_under_edit_is_ignored(demo_template, tmp_path):
    """SIGINT to memctl alone while the editor runs: memctl exited (130) and
    left the editor running on the terminal, its edits lost.  Now it is
    ignored, as git does (the editor on the terminal takes its own Ctrl-C),
    and the edit is written when the editor ends."""
    mark, go = tmp_path / "editor.started", tmp_path / "go"
    memory, before, p = _editing(demo_template, tmp_path, SIGINT_EDITOR.format(mark=mark, go=go),
                                 tmp_path)
    try:
        _until(p, mark.exists, "starting the editor")
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert p.poll() is None, "memctl left its editor"
        go.touch()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        _end_editor(mark)
    assert p.returncode == 0, err
    assert memory.read_bytes() == before + b"an edit\n"


# memctl's pool: SIGTERM to memctl itself right after its first worker is
# forked, before the pool has recorded it
ORPHAN = """\
import os, signal, sys
import multiprocessing.process as mp
import lecode_memctl.core.audit.run as r
r.worth_a_pool = lambda *a: True
parent = os.getpid()
start = mp.BaseProcess.start
def started(self):
    start(self)
    if os.getpid() == parent and not getattr(mp, "_sent", False):
        mp._sent = True
        os.kill(parent, signal.SIGTERM)
mp.BaseProcess.start = started
from lecode_memctl.cli.main import main
sys.exit(main())
"""


def test_no_pool_worker_outlives_memctl(store, tmp_path):
    """A SIGTERM to memctl alone between a worker's fork and the pool's
    record of it: the worker, unknown to the pool, waited for work for ever,
    holding memctl's stdout (``out=$(memctl ...)`` never returned)."""
    with _own_group([sys.executable, "-c", ORPHAN, "--store", str(store), "--no-state",
                     "validate", "-q"], tmp_path) as p:
        out, err = p.communicate(timeout=30)    # (stdout open in a worker: no end)
        assert (p.returncode, err) == (-signal.SIGTERM, b"memctl: error: terminated by SIGTERM\n")
        _group_ends(p.pid)


# a real SIGINT while the command tree is being built (the registry asked
# which command runs): memctl's own process, main() reading sys.argv
EARLY_SIGINT = """\
import os, signal, sys
import lecode_memctl.cli.registry as registry
asked = registry.invoked_command
def interrupted(args):
    os.kill(os.getpid(), signal.SIGINT)
    return asked(args)
registry.invoked_command = interrupted
from lecode_memctl.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("fmt", ["table", "jsonl", "json"])
def test_ctrl_c_while_the_command_tree_is_built_is_one_line(store, fmt):
    """Ctrl-C in the first tenth of a second (the imports, the command tree)
    ends memctl as during the command: one line, exit 130 (a JSONL stream
    ends with the error record; under --json, where no document has begun,
    the error is the document), not a KeyboardInterrupt traceback."""
    r = subprocess.run([sys.executable, "-c", EARLY_SIGINT, "--store", str(store), "facts",
                        "--format", fmt], capture_output=True, timeout=60)
    assert r.returncode == 130, r.stderr
    assert r.stderr == b"memctl: error: interrupted\n"
    if fmt == "table":
        assert r.stdout == b""
    else:
        assert orjson.loads(r.stdout) == {"type": "error", "error": {
            "code": "interrupted", "message": "interrupted", "exit_code": 130}}


# validate --json held in its fact checks (before any output), then SIGTERM
HELD_VALIDATE = """\
import os, sys, time
import lecode_memctl.core.audit.run as r
checks = r.check_db_and_facts
def held(*a, **k):
    open({mark!r}, "w").write("1")
    time.sleep(60)
    return checks(*a, **k)
r.check_db_and_facts = held
from lecode_memctl.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_json_document_not_begun_is_the_error(store, tmp_path, sig):
    """A command that prints its --json document at its end (validate, grep,
    secrets), stopped before it: stdout is the error document the README
    promises under --json, not empty (a script parsing it got nothing)."""
    mark = tmp_path / "mark"
    p = subprocess.Popen([sys.executable, "-c", HELD_VALIDATE.format(mark=str(mark)), "--store",
                          str(store), "--no-state", "validate", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    _until(p, mark.exists, "held in the fact checks")
    out, err = _ended(p, sig)
    if sig == signal.SIGINT:
        expected = {"code": "interrupted", "message": "interrupted", "exit_code": 130}
        assert (p.returncode, err) == (130, b"memctl: error: interrupted\n")
    else:
        expected = {"code": "terminated", "message": "terminated by SIGTERM", "exit_code": 143}
        assert (p.returncode, err) == (-sig, b"memctl: error: terminated by SIGTERM\n")
    assert orjson.loads(out) == {"type": "error", "error": expected}


def test_ctrl_c_while_the_command_tree_is_built_in_process(monkeypatch, capsys):
    """main(ARGS) in another program (the tests): the same answer, and that
    program's Ctrl-C handler is as it was afterwards."""
    import lecode_memctl.cli.registry as registry
    from lecode_memctl.cli.main import main

    def interrupted(args):  # noqa: ANN001,ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "invoked_command", interrupted)
    before = signal.getsignal(signal.SIGINT)
    assert main(["facts"]) == 130
    assert capsys.readouterr().err == "memctl: error: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before


def test_what_a_run_wrote_is_not_said_by_the_next_runs_interrupt(demo_template, tmp_path,
                                                                  monkeypatch, capsys):
    """main(ARGS) twice in one program: a forget committed by the first run
    is not named by the second run's interrupt ("interrupted; the forget of
    X was written"): the suite met it when a redact ran before this file's
    test in the same worker."""
    import lecode_memctl.cli.registry as registry
    from lecode_memctl.cli.main import main

    s = copy_demo(demo_template, tmp_path / "demo")
    fid = orjson.loads(run_cli("--store", str(s), "--no-state", "facts", "--format",
                               "jsonl").stdout.splitlines()[0])["fact_id"]
    assert main(["--store", str(s), "--no-state", "forget", fid, "--yes"]) == 0
    capsys.readouterr()

    def interrupted(args):  # noqa: ANN001,ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "invoked_command", interrupted)
    assert main(["facts"]) == 130
    assert capsys.readouterr().err == "memctl: error: interrupted\n"


# a real SIGINT while catch_termination installs its handlers (right after
# SIGHUP's): then a SIGTERM once main() has returned
SIGINT_AMID_HANDLERS = """\
import os, signal, sys
real = signal.signal
def spy(sig, handler):
    before = real(sig, handler)
    if sig == signal.SIGHUP and handler not in (signal.SIG_DFL, signal.SIG_IGN):
        os.kill(os.getpid(), signal.SIGINT)
    return before
signal.signal = spy
from lecode_memctl.cli.main import main
rc = main()
signal.signal = real
print(rc, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
      signal.getsignal(signal.SIGHUP) is signal.SIG_DFL, file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
sys.exit(rc)
"""


def test_ctrl_c_while_the_signal_handlers_are_installed_leaves_none_behind(store):
    """The handlers installed before a Ctrl-C that comes while memctl
    installs them are put back: a SIGTERM after main() ends the process as
    with no handler (it was recorded and ignored, and the exit was 130)."""
    r = subprocess.run([sys.executable, "-c", SIGINT_AMID_HANDLERS, "--store", str(store),
                        "facts"], capture_output=True, timeout=60)
    assert r.stderr == b"memctl: error: interrupted\n130 True True\n"
    assert r.returncode == -signal.SIGTERM
