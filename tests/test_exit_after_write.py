"""A write command whose change is committed but whose report cannot be
written (stdout on a full disk, stdout closed) says what it wrote in its
one error line, as an interrupt there does: exit 7 alone reads "nothing
was changed", and running the command again then fails (a stale revision,
a bundle that already exists).  A reader that went away (a broken pipe,
141) stays silent: the change is kept, as the exit-status table says.
Each runs in a real process, stdout as the shell would leave it.

Also what the exit-status table and the lines of other exits say: the
commands that exit 1 (edit, demo), migrate-legacy's exit 4."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"
KEY = "AKIAZ3FJ7QK2M4XW9PLB"
FULL = "No space left on device"

HAS_DEV_FULL = os.path.exists("/dev/full")


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    return copy_demo(demo_template, tmp_path / "demo")


def _run(args: list[str], stdout: str) -> subprocess.CompletedProcess:
    """memctl ARGS with stdout ``full`` (/dev/full), ``closed`` (>&-) or
    ``gone`` (a pipe whose reader has left)."""
    argv = [sys.executable, "-m", "lecode_memctl", *args]
    if stdout == "full":
        with open("/dev/full", "wb") as full:
            return subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, timeout=120)
    if stdout == "closed":
        return subprocess.run(argv, stderr=subprocess.PIPE, timeout=120,
                              preexec_fn=lambda: os.close(1))
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)


def _reason(stdout: str) -> str:
    return FULL if stdout == "full" else "closed"


STDOUTS = [pytest.param("full", marks=pytest.mark.skipif(not HAS_DEV_FULL, reason="no /dev/full")),
           "closed"]


def _cases(demo: Path, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """command -> (its arguments, what the line says was written)."""
    bundle = tmp_path / "b.tar"
    return {
        "correct": (["correct", VERIFIED, "1", "demo-alpha:1", "a corrected text", "--yes"],
                    f"the correction of {VERIFIED} was written (revision 2)"),
        "forget": (["forget", VERIFIED, "--yes"], f"the forget of {VERIFIED} was written"),
        "redact": (["redact", "--yes"], "the redaction was written (1 file(s) rewritten)"),
        "export": (["export", "-o", str(bundle)], f"the bundle was written to {bundle}"),
    }


def _done(command: str, demo: Path, tmp_path: Path) -> None:
    """The change was made (and is kept)."""
    if command == "correct":
        r = run_cli("--no-state", "--store", str(demo), "history", VERIFIED, "--json")
        assert orjson.loads(r.stdout)["revision"] == 2, r.stdout
    elif command == "forget":
        r = run_cli("--no-state", "--store", str(demo), "recall", VERIFIED)
        assert r.exit_code == 3 and "forgotten" in r.stderr, r.stderr
    elif command == "redact":
        assert KEY not in (demo / "notes" / "release.md").read_text()
    else:
        assert (tmp_path / "b.tar").stat().st_size > 0


@pytest.mark.parametrize("stdout", STDOUTS)
@pytest.mark.parametrize("command", ["correct", "forget", "redact", "export"])
def test_a_lost_report_after_a_change_names_the_change(demo, tmp_path, command, stdout):
    """Before: `memctl: error: standard output: No space left on device`,
    exit 7, and nothing said of the correction, forget, redaction or bundle
    that was already written."""
    with open(demo / "notes" / "release.md", "a") as f:
        f.write(f"key {KEY}\n")
    args, written = _cases(demo, tmp_path)[command]
    p = _run(["--store", str(demo), *args], stdout)
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr.decode() == (f"memctl: error: standard output: {_reason(stdout)}; "
                                 f"{written}\n")
    _done(command, demo, tmp_path)


@pytest.mark.parametrize("stdout", STDOUTS)
def test_a_lost_report_of_a_json_document_names_the_change_too(demo, tmp_path, stdout):
    p = _run(["--store", str(demo), "forget", VERIFIED, "--yes", "--json"], stdout)
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr.decode() == (f"memctl: error: standard output: {_reason(stdout)}; "
                                 f"the forget of {VERIFIED} was written\n")


@pytest.mark.parametrize("stdout", STDOUTS)
def test_a_failed_write_before_any_change_names_none(demo, tmp_path, stdout):
    """A dry run writes nothing: its line says nothing was."""
    p = _run(["--store", str(demo), "forget", VERIFIED, "--dry-run"], stdout)
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert p.stderr.decode() == f"memctl: error: standard output: {_reason(stdout)}\n"


@pytest.mark.parametrize("command", ["correct", "forget", "export"])
def test_a_reader_gone_after_a_change_is_a_quiet_141_and_the_change_is_kept(demo, tmp_path,
                                                                            command):
    """Decided, not changed: a reader that left (``| head``) left on purpose;
    141 with nothing on stderr, and the change stays made (the exit-status
    table says so)."""
    args, _written = _cases(demo, tmp_path)[command]
    p = _run(["--store", str(demo), *args], "gone")
    assert (p.returncode, p.stderr) == (141, b"")
    _done(command, demo, tmp_path)


# ---------------------------------------------------------------- the exit-status table

def test_the_status_1_row_names_every_command_that_exits_1(demo, monkeypatch):
    """edit (its editor exits non-zero: nothing written) and demo (a step
    that did not behave as described) exit 1; the table of the README, the
    man page and 'memctl --help' did not say so."""
    from lecode_memctl.core.errors import EXIT_CODES, exit_summary

    monkeypatch.setenv("EDITOR", "false")
    monkeypatch.setenv("VISUAL", "false")
    r = run_cli("--store", str(demo), "edit")
    assert r.exit_code == 1, r.stderr
    meaning = dict(EXIT_CODES)[1]
    assert "edit's editor exited non-zero" in meaning and "demo" in meaning, meaning
    summary = exit_summary()
    assert "a failed editor (edit) or demo step" in summary, summary
    assert "a failed editor (edit) or demo step" in " ".join(run_cli("--help").stdout.split())


# ---------------------------------------------------------------- migrate-legacy's exit 4

@pytest.fixture
def legacy(world, tmp_path) -> tuple[Path, Path]:
    """(a fresh copy of the demo's config dir, the demo's project): its
    legacy store holds MEMORY.md (other content than the project's),
    daily/ (the same bytes) and notes/build.md (to copy)."""
    return world.fresh(tmp_path / "cfg"), world.project


def _migrate(legacy: tuple[Path, Path], *args: str) -> Any:
    cfg, project = legacy
    return run_cli("--config-dir", str(cfg), "-C", str(project), "migrate-legacy", *args)


@pytest.mark.parametrize("args", [["--yes"], ["--dry-run"], ["--yes", "--json"]])
def test_migrate_legacy_unreadable_file_is_exit_4_with_its_line(legacy, monkeypatch, args):
    """A legacy file that cannot be read when planned: exit 4, and the
    reason was only on stdout (`not copied: #1 notes/build.md: cannot read:
    Permission denied`), stderr empty.  Now also one stderr line."""
    import errno

    from lecode_memctl.core import migrate

    real = migrate.read_regular

    def read_regular(path: Any, *a: Any, **k: Any) -> Any:
        if Path(path).name == "build.md":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(migrate, "read_regular", read_regular)
    r = _migrate(legacy, *args)
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    assert r.stderr == ("memctl: error: 1 legacy file not copied: #1 notes/build.md: cannot "
                        "read: Permission denied\n"), r.stderr
    if "--json" not in args:
        assert "not copied: #1 notes/build.md: cannot read: Permission denied" in r.stdout


def test_migrate_legacy_fail_on_conflict_is_exit_4_with_its_line(legacy):
    r = _migrate(legacy, "--dry-run", "--fail-on-conflict")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    assert r.stderr == ("memctl: error: 1 legacy file not copied: the project store has other "
                        "content for it (--fail-on-conflict): #1 MEMORY.md\n"), r.stderr


def test_migrate_legacy_exit_0_writes_nothing_on_stderr(legacy):
    r = _migrate(legacy, "--yes")
    assert (r.exit_code, r.stderr) == (0, "")
