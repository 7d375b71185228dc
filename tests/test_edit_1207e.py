"""``memctl edit`` (2026-12-07, a review of edit and Markdown writes): a
saved edit is exit 0 even when stderr is full; the kept copy's path is
shown escaped, as one token; an editor killed by a signal is said so; an
editor that cannot be run is exit 2, as the exit table says."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import REPO
from .test_markdown import editor_script, store_dir  # noqa: F401  (fixture)


def _edit(store: Path, env: dict[str, str], **kw) -> subprocess.CompletedProcess[bytes]:
    e = {k: v for k, v in os.environ.items() if k not in ("VISUAL", "EDITOR")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                           "--no-state", "edit"], env=e, stdin=subprocess.DEVNULL,
                          timeout=60, **kw)


def test_a_saved_edit_is_exit_0_when_stderr_is_full(store_dir, tmp_path):  # noqa: F811
    """The file was written, then the 'wrote' line failed on a full stderr:
    exit 7, which the exit table reads as nothing changed (a script that
    retries applied the edit twice).  Now the status the command had: 0."""
    ed = editor_script(tmp_path, "open(path, 'a').write('- one more\\n')\n")
    with open("/dev/full", "wb") as full:
        r = _edit(store_dir, {"EDITOR": ed}, stdout=subprocess.PIPE, stderr=full)
    assert r.returncode == 0
    assert (store_dir / "MEMORY.md").read_text().endswith("- one more\n")


def test_the_kept_copys_path_is_one_escaped_token(store_dir, tmp_path):  # noqa: F811
    """A $TMPDIR holding a newline: the message showed it as a space (the
    lines of a message are joined), naming a path that does not exist.  It
    is escaped now (``\\n``), as the interrupt's message escapes it."""
    tmpdir = tmp_path / "td\nFORGED: line"
    tmpdir.mkdir()
    ed = editor_script(tmp_path, "open(path, 'a').write('x\\n'); sys.exit(3)\n")
    r = _edit(store_dir, {"EDITOR": ed, "TMPDIR": str(tmpdir)}, capture_output=True)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and "td\\nFORGED: line" in err, err
    shown = err.split("kept at ", 1)[1].rstrip("\n")
    path = shown.replace("\\n", "\n")
    assert os.path.isfile(path), err
    os.unlink(path)


def test_an_editor_killed_by_a_signal_is_said_so(store_dir, tmp_path):  # noqa: F811
    ed = editor_script(tmp_path, "import signal\nopen(path, 'a').write('x\\n')\n"
                       "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = _edit(store_dir, {"EDITOR": ed}, capture_output=True)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "the editor was killed by SIGKILL" in err and "status -9" not in err, err
    kept = re.search(r"kept at (\S+)", err)
    assert kept is not None, err
    os.unlink(kept.group(1).rstrip(";"))


def test_an_editor_that_cannot_be_run_is_exit_2_as_documented(store_dir):  # noqa: F811
    for value in ("/nonexistent/editor", "'unterminated"):
        r = _edit(store_dir, {"EDITOR": value}, capture_output=True)
        assert r.returncode == 2, r.stderr
        assert r.stderr.decode().count("\n") == 1, r.stderr
    readme = (REPO / "README.md").read_text()
    row = next(ln for ln in readme.splitlines() if ln.startswith("| 2 |"))
    assert "an editor edit cannot run" in row
    help_ = subprocess.run([sys.executable, "-m", "lecode_memctl", "edit", "--help"],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert "editor that cannot be run" in " ".join(help_.stdout.split())


def test_an_unchanged_edit_is_exit_0_when_stderr_is_full(store_dir, tmp_path):  # noqa: F811
    """A code review: the 'no changes' line on a full stderr was still exit
    7 (the 'wrote' line's fix missed it); a closed stderr gives 0."""
    ed = editor_script(tmp_path, "pass\n")
    with open("/dev/full", "wb") as full:
        r = _edit(store_dir, {"EDITOR": ed}, stdout=subprocess.PIPE, stderr=full)
    assert r.returncode == 0
