"""Pipes, terminals and locales (issue 12, point 4).

- A reader that goes away is exit 141 for every command (a real pipe).
- Any locale works: what the output encoding cannot carry is escaped.
- Tables never cut or wrap an id column (fact ids, session ids, source refs,
  slugs, paths/roots, note names), at 40, 60 or 200 columns (a real pty).
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys

import orjson
import pytest

from . import outkit
from .conftest import isolate
from .outkit import DATE, WIDE


@pytest.fixture
def built(config_dir, tmp_path):
    project = tmp_path / "proj"
    store, ids = outkit.build(config_dir, project, facts=30)
    return project, store, ids


def _commands(project, ids):
    fid = ids[0]
    return [
        ["where"], ["config"], ["config", "--format", "csv"], ["show"], ["log", DATE],
        ["notes"], ["notes", "wide"], ["search", "."], ["sessions"],
        ["sessions", "--format", "tsv"], ["read", "2026-03-01-alpha", "1", "3"],
        ["facts"], ["facts", "--format", "jsonl"], ["facts", "--json"], ["recall", fid],
        ["history", fid], ["forget", fid, "--dry-run"], ["context"], ["validate"],
        ["validate", "--format", "jsonl"], ["validate", "--format", "prometheus"],
        ["usage"], ["projects"], ["migrate-legacy", "--dry-run"], ["--help"], ["facts", "--help"],
    ]


@pytest.mark.heavy
def test_every_command_exits_141_when_the_reader_is_gone(built):
    """stdout is a pipe whose read end is already closed: the first write fails."""
    project, _store, ids = built
    for argv in _commands(project, ids):
        r, w = os.pipe()
        os.close(r)
        try:
            p = subprocess.run(outkit.memctl_argv("-C", str(project), *argv), stdout=w,
                               stderr=subprocess.PIPE, timeout=120)
        finally:
            os.close(w)
        assert p.returncode == 141, (argv, p.returncode, p.stderr)
        assert b"Traceback" not in p.stderr and b"Exception ignored" not in p.stderr, argv


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A config dir whose store (of the project ``big``) holds 1500 facts, far
    more than a pipe buffer holds: built once, each case reads a copy."""
    base = tmp_path_factory.mktemp("big")
    with pytest.MonkeyPatch.context() as mp:
        outkit.build(isolate(mp, base), base / "big", facts=1500)
    return base


@pytest.mark.heavy
@pytest.mark.parametrize("argv", [["facts", "--all", "--format", "jsonl"],
                                  ["facts", "--format", "csv"], ["facts", "--all"],
                                  ["validate", "--format", "jsonl"]])
def test_head_1_under_pipefail_is_141(config_dir, big, argv):
    # (the store is found from the project's path: the same project, the
    # copied config dir as this case's LECODE_CONFIG_DIR)
    shutil.copytree(big / "config", config_dir, symlinks=True)
    project = big / "big"
    cmd = " ".join(outkit.memctl_argv("-C", str(project), *argv))
    p = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} | head -1 >/dev/null; "
                                      "echo \"${PIPESTATUS[0]}\""],
                       capture_output=True, timeout=300, env=dict(os.environ))
    assert p.stdout.decode().strip() == "141", p.stderr


LOCALES = [
    {"PYTHONIOENCODING": "latin-1"},
    {"PYTHONIOENCODING": "ascii"},
    {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
    {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
]


@pytest.mark.heavy
@pytest.mark.parametrize("env", LOCALES, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()))
def test_any_locale_escapes_instead_of_crashing(built, env):
    project, _store, ids = built
    env = {**env, "PYTHONIOENCODING": env.get("PYTHONIOENCODING", "")}
    if not env["PYTHONIOENCODING"]:
        del env["PYTHONIOENCODING"]
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL", "LANG")}
    for argv in (["notes", "wide"], ["facts"], ["facts", "--all"], ["show"], ["log", DATE],
                 ["search", "memory"], ["history", ids[0]]):
        p = subprocess.run(outkit.memctl_argv("-C", str(project), *argv), capture_output=True,
                           env={**base, **env}, timeout=120)
        assert p.returncode == 0, (argv, env, p.stderr)
        out = p.stdout.decode("utf-8", "replace")
        if env.get("PYTHONIOENCODING") in ("latin-1", "ascii") or env.get("LC_ALL") == "C":
            assert "\\u2192" in out, (argv, out)      # escaped, not lost
        else:
            assert "\u2192" in out, (argv, out)
    # JSON is UTF-8 whatever the locale (RFC 8259), and CSV too (docs/OUTPUT.md,
    # "Encoding"; before 2026-12-07 CSV followed the locale, escaped)
    p = subprocess.run(outkit.memctl_argv("-C", str(project), "notes", "wide", "--json"),
                       capture_output=True, env={**base, **env}, timeout=120)
    assert p.returncode == 0 and WIDE in orjson.loads(p.stdout)["text"]
    p = subprocess.run(outkit.memctl_argv("-C", str(project), "facts", "--format", "csv"),
                       capture_output=True, env={**base, **env}, timeout=120)
    assert p.returncode == 0 and "\u2192" in p.stdout.decode("utf-8"), p.stdout


def _pty_run(argv: list[str], columns: int, *, raw: bool = False, env: dict | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env = dict(base, COLUMNS=str(columns), LINES="50", TERM="xterm", **(env or {}))
    pid, fd = pty.fork()
    if pid == 0:  # child
        try:
            os.execve(sys.executable, [sys.executable, "-m", "lecode_memctl", *argv], env)
        finally:
            os._exit(127)
    chunks = []
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 60)
            if not ready:
                break
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    os.close(fd)
    import re

    text = b"".join(chunks).decode("utf-8", "replace")
    if raw:
        return text
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.heavy
@pytest.mark.parametrize("columns", [40, 60, 200])
def test_tables_never_cut_or_wrap_ids_on_a_terminal(built, columns):
    project, _store, ids = built
    out = _pty_run(["--color", "never", "-C", str(project), "facts"], columns)
    lines = out.splitlines()
    for fid in ids[:20]:
        assert any(fid in line for line in lines), (fid, out)
    # the source column holds the value `read` needs next: whole on one line
    for ref in ("2026-03-01-alpha:1", "2026-03-01-alpha:3"):
        assert any(ref in line for line in lines), (ref, out)
    out = _pty_run(["-C", str(project), "projects"], columns)
    assert any(str(project) in line for line in out.splitlines()), out
    assert "\u2026" not in out
    out = _pty_run(["-C", str(project), "sessions"], columns)
    for sid in ("2026-03-01-alpha", "2026-03-02-beta"):
        assert any(sid in line for line in out.splitlines()), (sid, out)
    out = _pty_run(["-C", str(project), "notes"], columns)
    assert any("wide" in line for line in out.splitlines())


@pytest.mark.heavy
def test_color_auto_always_never(built):
    project, _store, _ids = built
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    esc = "\x1b["
    assert esc in _pty_run(["-C", str(project), "facts"], 200, raw=True)
    assert esc not in _pty_run(["--color", "never", "-C", str(project), "facts"], 200, raw=True)
    p = subprocess.run(outkit.memctl_argv("--color", "always", "-C", str(project), "facts"),
                       capture_output=True, env=base, timeout=120)
    assert p.returncode == 0 and esc.encode() in p.stdout          # forced, even in a pipe
    p = subprocess.run(outkit.memctl_argv("-C", str(project), "facts"), capture_output=True,
                       env={**base, "FORCE_COLOR": "1"}, timeout=120)
    assert p.returncode == 0 and esc.encode() in p.stdout
    p = subprocess.run(outkit.memctl_argv("-C", str(project), "facts"), capture_output=True,
                       env=base, timeout=120)
    assert p.returncode == 0 and esc.encode() not in p.stdout      # auto: a pipe is plain
    assert esc not in _pty_run(["-C", str(project), "facts"], 200, raw=True, env={"NO_COLOR": "1"})


def test_a_jsonl_error_line_has_a_type_too(tmp_path):
    from .conftest import run_cli

    r = run_cli("--store", str(tmp_path / "nowhere"), "sessions", "--format", "jsonl")
    assert r.exit_code == 3
    (line,) = r.stdout_bytes.splitlines()
    doc = orjson.loads(line)
    assert doc["type"] == "error" and doc["error"]["exit_code"] == 3
