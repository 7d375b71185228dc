"""Streamed listings write in chunks, not a system call per row.

Under ``PYTHONUNBUFFERED=1`` (or ``python -u``; many container images set
it) stdout's byte layer is the raw file itself, so a ``write`` per row was a
``write(2)`` per row: 100,000 of them for ``facts --all`` of 100,000 facts.
``--format json`` of ``facts`` flushed per row even without it.  Now
``setup_streams`` gives such a stdout a 64 KiB buffer, and ``output.Stream``
writes a listing's rows into stdout's buffer (at once on a terminal),
without flushing per row.
"""

from __future__ import annotations

import io
import sys

import orjson
import pytest

from lecode_memctl.cli import output

from . import outkit
from .conftest import isolate


class CountingRaw(io.RawIOBase):
    """A raw stdout that records each write; ``most`` caps what one write takes
    (a short write, as a raw file may do)."""

    def __init__(self, most: int | None = None, broken_after: int | None = None) -> None:
        self.data = bytearray()
        self.calls = 0
        self.most = most
        self.broken_after = broken_after

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        self.calls += 1
        if self.broken_after is not None and self.calls > self.broken_after:
            raise BrokenPipeError(32, "Broken pipe")
        b = bytes(b)
        if self.most is not None:
            b = b[: self.most]
        self.data += b
        return len(b)


def _unbuffered(raw: io.RawIOBase) -> io.TextIOWrapper:
    """stdout as ``python -u`` makes it: a text layer straight over the raw file."""
    return io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # type: ignore[arg-type]


def _buffered(raw: io.RawIOBase) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")  # type: ignore[arg-type]


ROWS = [{"type": "x", "n": i, "text": f"row {i} " + "y" * 300} for i in range(3000)]
EXPECTED = b"".join(orjson.dumps(r) + b"\n" for r in ROWS)


@pytest.fixture
def piped(monkeypatch):
    monkeypatch.setattr(output, "stdout_is_tty", lambda: False)

    def use(stream):
        monkeypatch.setattr(sys, "stdout", stream)
        return stream

    return use


@pytest.fixture(scope="module")
def built_stores(tmp_path_factory):
    """``outkit.build`` of a project with N facts, made once per module for
    each N asked (a fact added, and synced, at a time: most of a second for
    600): (its config dir, its project), never changed."""
    made: dict[int, tuple] = {}

    def get(facts: int) -> tuple:
        if facts not in made:
            top = tmp_path_factory.mktemp(f"outkit{facts}")
            with pytest.MonkeyPatch.context() as mp:
                cfg = isolate(mp, top)
                outkit.build(cfg, top / "proj", facts=facts)
            made[facts] = (cfg, top / "proj")
        return made[facts]

    return get


@pytest.fixture
def built_project(config_dir, built_stores):
    """``built_project(N)``: the project of a store of N facts, the store
    copied into this test's config dir (modes and times kept); memctl -C
    PROJECT writes nothing in the project directory itself."""
    import shutil

    def copy(facts: int):
        cfg, project = built_stores(facts)
        shutil.copytree(cfg, config_dir, symlinks=True, dirs_exist_ok=True)
        return project

    return copy


@pytest.mark.parametrize("layer", [_unbuffered, _buffered], ids=["unbuffered", "buffered"])
def test_jsonl_is_written_in_chunks(piped, layer):
    raw = CountingRaw()
    piped(layer(raw))
    output.setup_streams()
    output.emit_jsonl(iter(ROWS))
    assert bytes(raw.data) == EXPECTED
    # ~1 MB in 64 KiB chunks under -u (17 writes), in 8 KiB chunks otherwise
    # (130): not 3,000
    chunk = output.STREAM_CHUNK if layer is _unbuffered else io.DEFAULT_BUFFER_SIZE
    assert raw.calls <= len(EXPECTED) // chunk + 2, raw.calls


def test_json_array_and_csv_are_written_in_chunks(piped):
    raw = CountingRaw()
    piped(_unbuffered(raw))
    output.setup_streams()
    output.emit_json_array(iter(ROWS))
    assert orjson.loads(bytes(raw.data)) == ROWS
    assert raw.calls <= len(raw.data) // output.STREAM_CHUNK + 2, raw.calls
    raw2 = CountingRaw()
    piped(_unbuffered(raw2))
    output.setup_streams()
    output.emit_csv(iter(ROWS), ["type", "n", "text"], "csv")
    lines = bytes(raw2.data).decode().splitlines()
    assert lines[0] == "type,n,text" and len(lines) == len(ROWS) + 1
    assert lines[5] == "x,4,row 4 " + "y" * 300
    assert sys.stdout.line_buffering     # -u's line flushing is back after the listing
    assert raw2.calls <= len(raw2.data) // output.STREAM_CHUNK + 2, raw2.calls


def test_a_short_write_loses_nothing(piped):
    raw = CountingRaw(most=1000)
    piped(_unbuffered(raw))
    output.emit_jsonl(iter(ROWS))
    assert bytes(raw.data) == EXPECTED


def test_what_text_came_before_is_written_first(piped):
    raw = CountingRaw()
    out = piped(_buffered(raw))
    out.write("header line\n")      # still in the text layer
    output.emit_jsonl(iter(ROWS[:3]))
    assert bytes(raw.data) == b"header line\n" + b"".join(orjson.dumps(r) + b"\n" for r in ROWS[:3])


def test_rows_before_an_error_are_written(piped):
    raw = CountingRaw()
    piped(_unbuffered(raw))

    def rows():
        yield from ROWS[:10]
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        output.emit_jsonl(rows())
    assert bytes(raw.data) == b"".join(orjson.dumps(r) + b"\n" for r in ROWS[:10])


def test_a_broken_pipe_is_not_written_again(piped):
    raw = CountingRaw(broken_after=1)
    piped(_unbuffered(raw))
    with pytest.raises(BrokenPipeError):
        output.emit_jsonl(iter(ROWS))
    assert raw.calls == 2     # the chunk that failed is not retried at the end


def test_a_terminal_sees_each_row_at_once_escaped(monkeypatch):
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    raw = CountingRaw()
    monkeypatch.setattr(sys, "stdout", _unbuffered(raw))
    rows = [{"text": "a\u009b31m\u202eb"}, {"text": "plain"}]
    output.emit_jsonl(iter(rows))
    assert raw.calls == 2
    assert b"\\u009b" in raw.data and "\u202e".encode() not in raw.data
    assert [orjson.loads(line) for line in raw.data.splitlines()] == rows


@pytest.mark.heavy
@pytest.mark.parametrize("argv", [["facts", "--all", "--format", "jsonl"],
                                  ["facts", "--all", "--json"],
                                  ["facts", "--all", "--format", "csv"],
                                  ["grep", "e", "--format", "jsonl"]],
                         ids=["jsonl", "json", "csv", "grep-jsonl"])
def test_a_whole_listing_is_a_few_writes_under_pythonunbuffered(built_project, piped, argv):
    """The command line as ``PYTHONUNBUFFERED=1`` runs it: a write per chunk."""
    from lecode_memctl.cli.main import main

    project = built_project(300)
    raw = CountingRaw()
    piped(_unbuffered(raw))
    code = main(["-C", str(project), *argv])
    sys.stdout.flush()
    assert code in (0, 1), code
    size = len(raw.data)
    if argv[0] == "facts":
        assert raw.data.count(b"legacy fact number") == 298
    else:
        assert raw.data.count(b"\n") >= 3
    assert raw.calls <= size // output.STREAM_CHUNK + 1, (raw.calls, size)


# ----------------------------------------------------- short writes (review of 498e2ba)

def test_after_setup_streams_a_short_raw_write_loses_nothing(piped):
    """Under -u the text layer sits on the raw file and drops what a short
    write did not take; setup_streams puts stdout over a buffered layer,
    which writes the rest: every CSV line, every JSON line, every echo."""
    for fmt in ("csv", "jsonl", "echo"):
        raw = CountingRaw(most=1000)
        piped(_unbuffered(raw))
        output.setup_streams()
        if fmt == "csv":
            output.emit_csv(iter(ROWS), ["type", "n", "text"], "csv")
        elif fmt == "jsonl":
            output.emit_jsonl(iter(ROWS))
        else:
            for r in ROWS:
                output.echo(r["text"])
        sys.stdout.flush()
        lines = bytes(raw.data).decode().splitlines()
        assert len(lines) == len(ROWS) + (fmt == "csv"), (fmt, len(lines))
        assert "y" * 300 in lines[-1], fmt


def test_validate_output_is_buffered(tmp_path):
    """validate --output writes through a buffered layer for the same reason."""
    with output.atomic_output(str(tmp_path / "out.txt")) as sink:
        assert isinstance(sink.stream.buffer, io.BufferedWriter)
        sys.stdout.write("x\n")
    assert (tmp_path / "out.txt").read_text() == "x\n"


@pytest.fixture(scope="module")
def grep_template(tmp_path_factory):
    """A project and a config dir whose store for it holds a transcript of
    3,000 messages, built once for the module (``grep_project`` copies the
    config dir; the project directory itself is only named, never written)."""
    from lecode_memctl.core.layout import store_for_project
    from lecode_memctl.core.sessions import SessionStore

    top = tmp_path_factory.mktemp("grep")
    project = top / "proj"
    project.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        cfg = isolate(mp, top)
        with SessionStore(store_for_project(cfg, project)).create("2026-03-05-big") as w:
            for i in range(3000):
                w.append_message("user", f"needle {i} " + "z" * 200)
    return cfg, project


@pytest.fixture
def grep_project(config_dir, grep_template):
    """The template's project, its store copied into this test's config dir."""
    import shutil

    cfg, project = grep_template
    shutil.copytree(cfg, config_dir, symlinks=True, dirs_exist_ok=True)
    return project


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "human"])
def test_a_file_size_limit_at_the_last_write_is_an_error_not_a_short_output(grep_project,
                                                                             tmp_path, fmt):
    """A real process under PYTHONUNBUFFERED=1 whose stdout is a file that can
    take all but its last 100 bytes: either the whole output or an error
    exit, never a truncated output and exit 0 (csv and the human lines were)."""
    import os
    import resource
    import subprocess

    argv = [sys.executable, "-m", "lecode_memctl", "-C", str(grep_project), "grep", "needle"]
    if fmt != "human":
        argv += ["--format", fmt]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    full = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    assert full.returncode == 0 and len(full.stdout) > 200_000, full.stderr
    limit = len(full.stdout) - 100

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / f"out.{fmt}"
    with open(out, "wb") as f:
        p = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, env=env, preexec_fn=cap,
                           timeout=120)
    written = out.read_bytes()
    assert p.returncode == 7, (fmt, p.returncode, len(written), len(full.stdout))  # write failed
    assert b"Traceback" not in p.stderr and p.stderr.count(b"\n") == 1, p.stderr
    assert full.stdout.startswith(written)


# ------------------------------------------------ a second review (of 09007ac)

def _env(unbuffered: str, **extra: str) -> dict[str, str]:
    import os

    env = dict(os.environ, **extra)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    return env


def _interrupted_run(built_project, tmp_path, unbuffered: str, args: list[str],
                     signals: int = 1, sig: int | None = None) -> tuple[int, bytes, bytes]:
    """memctl ARGS writing to a slow pipe, interrupted (``sig``, SIGINT by
    default) once it is blocked writing stdout, ``signals`` times 0.3 s
    apart (those after its end not sent, nor waited for) before the pipe
    is read: (exit status, stdout, stderr)."""
    import contextlib
    import fcntl
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path

    if not Path("/proc/self/syscall").exists():
        pytest.skip("needs /proc/PID/syscall")
    project = built_project(600)
    r, w = os.pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 16384)   # fills part way into a chunk
    err = open(tmp_path / "stderr", "w+b")  # noqa: SIM115 - closed below
    p = subprocess.Popen(outkit.memctl_argv("-C", str(project), *args),
                         stdout=w, stderr=err, env=_env(unbuffered))
    os.close(w)

    try:
        deadline = time.monotonic() + 60
        while not outkit.blocked_writing_stdout(p.pid):
            assert time.monotonic() < deadline, "memctl never blocked writing stdout"
            time.sleep(0.01)
        time.sleep(0.1)
        for k in range(signals):
            if k:
                # 0.3 s between two signals; none left to wait for once it has ended
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(0.3)
            if p.poll() is None:
                p.send_signal(signal.SIGINT if sig is None else sig)
        with os.fdopen(r, "rb") as f:
            out = f.read()
    finally:
        p.wait(60)
    err.seek(0)
    said = err.read()
    err.close()
    return p.returncode, out, said


INTERRUPTED = {"code": "interrupted", "message": "interrupted", "exit_code": 130}


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/syscall, F_SETPIPE_SZ")
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
def test_an_interrupt_during_a_blocked_write_leaves_whole_rows(built_project, tmp_path, unbuffered):
    """SIGINT while the listing is blocked writing to a slow pipe: the output
    ends at the end of a row (a 64 KiB chunk written past the buffer, cut
    by the signal part way, lost its rest: the output ended mid-row), then
    the JSONL error line; stderr says it was interrupted, exit 130."""
    rc, out, said = _interrupted_run(built_project, tmp_path, unbuffered,
                                     ["facts", "--all", "--format", "jsonl"])
    assert rc == 130
    assert said == b"memctl: error: interrupted\n", said    # (typer's exit 130 said nothing)
    assert out.endswith(b"\n"), f"the output ends mid-row: ...{out[-80:]!r}"
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert rows[-1] == {"type": "error", "error": INTERRUPTED}
    assert all(r["type"] == "fact" for r in rows[:-1])


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/syscall, F_SETPIPE_SZ")
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
def test_an_interrupted_json_document_ends_as_one_document(built_project, tmp_path, unbuffered):
    """facts --json interrupted mid-stream ends its document with the error, as
    for any error after it started: one valid JSON document (the JSONL error
    line was glued onto the unfinished document: '...}{"type":"error"...')."""
    rc, out, said = _interrupted_run(built_project, tmp_path, unbuffered, ["facts", "--all", "--json"])
    assert rc == 130
    assert said == b"memctl: error: interrupted\n", said
    doc = orjson.loads(out)
    assert doc["type"] == "facts" and doc["error"] == INTERRUPTED and doc["next_offset"] is None
    assert doc["facts"] and all(r["type"] == "fact" for r in doc["facts"])


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/syscall, F_SETPIPE_SZ")
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
def test_ctrl_c_again_on_a_stalled_pipe_ends_the_process_quietly(built_project, tmp_path, unbuffered):
    """memctl ... | less, Ctrl-C pressed several times while nobody reads: the
    second ends the process at once (the flushes after the first block), with
    no traceback (each further KeyboardInterrupt escaped a flush before)."""
    rc, out, said = _interrupted_run(built_project, tmp_path, unbuffered,
                                     ["facts", "--all", "--format", "jsonl"], signals=6)
    assert rc in (130, -2), rc      # 130 if it was done before the second
    assert b"Traceback" not in said and b"Exception" not in said, said


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/syscall, F_SETPIPE_SZ")
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
def test_a_sigterm_during_a_blocked_write_leaves_whole_rows(built_project, tmp_path, unbuffered):
    """SIGTERM (timeout, a stopped service) as SIGINT above: whole rows, the
    JSONL error line, one line on stderr; then memctl ends by the signal."""
    import signal

    rc, out, said = _interrupted_run(built_project, tmp_path, unbuffered,
                                     ["facts", "--all", "--format", "jsonl"], sig=signal.SIGTERM)
    assert rc == -signal.SIGTERM, (rc, said)
    assert said == b"memctl: error: terminated by SIGTERM\n", said
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert rows[-1] == {"type": "error", "error": {"code": "terminated",
                                                   "message": "terminated by SIGTERM",
                                                   "exit_code": 143}}
    assert all(r["type"] == "fact" for r in rows[:-1])


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/syscall, F_SETPIPE_SZ")
def test_sigterm_again_on_a_stalled_pipe_ends_the_process(built_project, tmp_path):
    """The second SIGTERM ends memctl at once, as the second Ctrl-C does."""
    import signal

    rc, out, said = _interrupted_run(built_project, tmp_path, "",
                                     ["facts", "--all", "--format", "jsonl"], signals=6,
                                     sig=signal.SIGTERM)
    assert rc == -signal.SIGTERM, rc
    assert b"Traceback" not in said and b"Exception" not in said, said


@pytest.mark.heavy
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
@pytest.mark.parametrize("args", [["facts"], ["facts", "--all", "--format", "jsonl"], ["where"],
                                  ["--version"]])
def test_a_closed_stdout_is_one_line_and_exit_7(config_dir, tmp_path, unbuffered, args):
    """memctl ... >&- : Python leaves sys.stdout None; a command that writes to
    it fails with one line (a traceback, or 'internal error' exit 70, before)."""
    import os
    import subprocess

    project = tmp_path / "proj"
    outkit.build(config_dir, project, facts=5)
    p = subprocess.run(outkit.memctl_argv("-C", str(project), *args) if args != ["--version"]
                       else outkit.memctl_argv("--version"),
                       stderr=subprocess.PIPE, env=_env(unbuffered), timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr == b"memctl: error: standard output: closed\n", p.stderr


@pytest.mark.parametrize("args", [["export"], ["export", "-o", "-"]], ids=["default", "dash"])
def test_export_to_a_closed_stdout_is_one_line_and_exit_7(config_dir, tmp_path, args):
    """memctl export >&- : the tar archive goes to stdout's binary layer,
    which a closed stdout does not have: one line and exit 7, as every other
    command (an internal error, AttributeError, exit 70, before)."""
    import os
    import subprocess

    project = tmp_path / "proj"
    outkit.build(config_dir, project, facts=2)
    p = subprocess.run(outkit.memctl_argv("-C", str(project), *args),
                       stderr=subprocess.PIPE, env=_env(""), timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr == b"memctl: error: standard output: closed\n", p.stderr


@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
def test_version_to_a_full_disk_or_a_gone_reader(unbuffered):
    """--version answers before the command tree, with the same handling of
    stdout as every command: a full disk is one line and exit 7 (a traceback
    or 'Exception ignored', exit 120, before), a reader gone a quiet 141."""
    import os
    import subprocess

    with open("/dev/full", "wb") as full:
        p = subprocess.run(outkit.memctl_argv("--version"), stdout=full,
                           stderr=subprocess.PIPE, env=_env(unbuffered), timeout=120)
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr == b"memctl: error: standard output: No space left on device\n", p.stderr
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(outkit.memctl_argv("--version"), stdout=w, stderr=subprocess.PIPE,
                           env=_env(unbuffered), timeout=120)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (141, b"")


@pytest.mark.heavy
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["-u", "buffered"])
@pytest.mark.parametrize("args", [["facts", "--all", "--format", "jsonl"], ["facts", "--json"],
                                  ["facts", "--all", "--format", "csv"], ["facts"], ["where"],
                                  ["facts", "--help"], ["where", "--help"],
                                  # (a help over 4 KiB: its failed flush leaves stdout's
                                  # buffer empty, so stdout then flushes fine)
                                  ["validate", "--help"]])
def test_a_full_stdout_is_named_in_its_one_line(built_project, unbuffered, args):
    """A write to stdout that fails says it was stdout's, not a bare 'No space
    left on device' that reads as the store's disk; exit 7."""
    import subprocess

    project = built_project(300)
    with open("/dev/full", "wb") as full:
        p = subprocess.run(outkit.memctl_argv("-C", str(project), *args), stdout=full,
                           stderr=subprocess.PIPE, env=_env(unbuffered), timeout=120)
    assert p.returncode == 7, (p.returncode, p.stderr)
    # (the facts table's page hint may come first, on stderr)
    lines = p.stderr.decode().splitlines()
    assert lines[-1] == "memctl: error: standard output: No space left on device", p.stderr
    assert all(line.startswith("memctl: ") for line in lines), p.stderr


@pytest.mark.parametrize("fmt", [["--json"], ["--format", "jsonl"], []], ids=["json", "jsonl", "human"])
def test_a_failed_write_to_validate_output_names_the_file_not_stdout(config_dir, tmp_path, fmt):
    """validate --output FILE under a file size limit: the error names the
    output file; stdout, untouched, is not named (it was, for the JSON formats)."""
    import resource
    import signal
    import subprocess

    project = tmp_path / "proj"
    store, _ids = outkit.build(config_dir, project, facts=30)
    # no database: its private copy would meet the limit first, which is
    # this machine's failure, exit 7 naming $TMPDIR (since 2026-12-07), and
    # the report would never be written
    for suffix in ("", "-wal", "-shm"):
        (store.path / f"facts.sqlite3{suffix}").unlink(missing_ok=True)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10, resource.RLIM_INFINITY))

    target = tmp_path / "report.out"
    p = subprocess.run(outkit.memctl_argv("-C", str(project), "validate", "--output", str(target),
                                          *fmt),
                       capture_output=True, env=_env(""), preexec_fn=limit, timeout=120)
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr == f"memctl: error: --output {target}: File too large\n".encode(), p.stderr
    assert not target.exists()
