"""Fixes of 2026-12-07 (reviews rv62 and rv66): an interrupt of ``memctl
edit`` after its editor returned, store names in text reports."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lecode_memctl.core import atomic, markdown

from .conftest import run_cli

# ---------------------------------------------------------------- 1. edit: an interrupt after the editor

APPEND = '#!/bin/sh\nprintf "my precious edit\\n" >> "$1"\n: > {mark}\n'


def _editor(tmp_path: Path, mark: Path) -> Path:
    ed = tmp_path / "ed.sh"
    ed.write_text(APPEND.format(mark=mark))
    ed.chmod(0o755)
    return ed


def _copies(tmp: Path) -> list[Path]:
    return [f for f in tmp.iterdir() if f.name.startswith("memctl-edit-")]


@pytest.mark.heavy
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_an_interrupt_while_edit_waits_for_the_lock_keeps_the_copy(tmp_path, sig):
    """Ctrl-C (or SIGTERM) while ``edit`` waited for the Markdown writers'
    turn: 'interrupted', MEMORY.md unchanged, and the edited copy deleted --
    the edit lost.  Now the copy is kept and its path said."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "MEMORY.md").write_bytes(b"# memory\n")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    mark = tmp_path / "edited"
    ed = _editor(tmp_path, mark)
    fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        p = subprocess.Popen([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                              "--no-state", "edit", "memory"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, TMPDIR=str(tmp), EDITOR=str(ed),
                                      VISUAL=str(ed)))
        try:
            deadline = time.monotonic() + 60
            while not mark.exists():
                assert p.poll() is None, p.communicate()
                assert time.monotonic() < deadline, "the editor never ran"
                time.sleep(0.02)
            time.sleep(0.5)     # (memctl waits for the lock now: 10 s at most)
            p.send_signal(sig)
            _out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    finally:
        os.close(fd)
    assert p.returncode in ((130, -signal.SIGINT) if sig == signal.SIGINT
                            else (143, -signal.SIGTERM)), (p.returncode, err)
    assert b"Traceback" not in err
    assert (store / "MEMORY.md").read_bytes() == b"# memory\n"
    kept = _copies(tmp)
    assert len(kept) == 1, err
    assert kept[0].read_bytes() == b"# memory\nmy precious edit\n"
    lines = err.decode().splitlines()
    assert lines[0] == (f"memctl: {store / 'MEMORY.md'} was not changed; "
                        f"your edited copy is kept at {kept[0]}")
    assert lines[-1].startswith("memctl: error: ") and len(lines) == 2, lines


def _edit_env(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    store = tmp_path / "store"
    store.mkdir()
    (store / "MEMORY.md").write_bytes(b"# memory\n")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    ed = _editor(tmp_path, tmp_path / "edited")
    return store, tmp, {"EDITOR": str(ed), "VISUAL": str(ed), "TMPDIR": str(tmp)}


def test_an_interrupt_after_the_backup_before_the_rename_keeps_the_copy(tmp_path, monkeypatch):
    """An interrupt inside the write, after MEMORY.md.bak was replaced but
    before MEMORY.md: the copy was deleted and MEMORY.md not written."""
    store, tmp, env = _edit_env(tmp_path)
    real_replace = os.replace

    def replace(src, dst, *a, **k):
        real_replace(src, dst, *a, **k)
        if str(dst).endswith(".bak"):
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", replace)
    r = run_cli("--store", str(store), "edit", env=env)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert (store / "MEMORY.md").read_bytes() == b"# memory\n"
    kept = _copies(tmp)
    assert len(kept) == 1 and kept[0].read_bytes() == b"# memory\nmy precious edit\n"
    assert (f"memctl: {store / 'MEMORY.md'} was not changed; "
            f"your edited copy is kept at {kept[0]}") in r.stderr
    assert "Traceback" not in r.stderr


def test_an_interrupt_after_the_rename_says_the_file_was_written(tmp_path, monkeypatch):
    """An interrupt inside the write just after MEMORY.md's rename: the file
    was written, yet the only word was 'interrupted'."""
    store, tmp, env = _edit_env(tmp_path)
    real_write = markdown.atomic_write

    def write(*a, **k):
        real_write(*a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(markdown, "atomic_write", write)
    r = run_cli("--store", str(store), "edit", env=env)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert (store / "MEMORY.md").read_bytes() == b"# memory\nmy precious edit\n"
    assert _copies(tmp) == []
    assert r.stderr.splitlines()[-1] == (f"memctl: error: interrupted; {store / 'MEMORY.md'} "
                                         "was written"), r.stderr
    assert "Traceback" not in r.stderr


def test_an_interrupt_reading_the_copy_back_keeps_it(tmp_path, monkeypatch):
    """An interrupt after the editor returned, before the write began (the
    copy read back, its text checked): the copy was deleted."""
    store, tmp, env = _edit_env(tmp_path)
    real_decode = markdown.decode
    calls: list[object] = []

    def decode(data, where):
        calls.append(where)
        if where == "the edited text":
            raise KeyboardInterrupt
        return real_decode(data, where)

    monkeypatch.setattr(markdown, "decode", decode)
    r = run_cli("--store", str(store), "edit", env=env)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert "the edited text" in calls
    kept = _copies(tmp)
    assert len(kept) == 1 and kept[0].read_bytes() == b"# memory\nmy precious edit\n"
    assert f"your edited copy is kept at {kept[0]}" in r.stderr


# ---------------------------------------------------------------- 2. a store's name is one token in a report

FAKE = "proj-00daf2d9e712: OK  0 errors, 0 warnings, 0 info"
NAME = "x: PROBLEMS  0 errors\n" + FAKE
KEY = "AKIA" + "QWERTYUIOPASDFGH"


def _newline_store(config_dir: Path) -> Path:
    """A store under the config dir whose directory name holds a newline
    and a line that reads as validate's for another store."""
    s = config_dir / "memory" / NAME
    s.mkdir(parents=True)
    (s / "MEMORY.md").write_text(f"aws {KEY}\n")
    return s


def _no_forged_line(r) -> None:
    text = r.stdout + r.stderr
    assert "Traceback" not in text
    lines = text.splitlines()
    assert not any(line.startswith("proj-00daf2d9e712") for line in lines), text
    assert "PROBLEMS  0 errors\\nproj-00daf2d9e712" in text, text


def test_validate_all_projects_prints_a_store_name_on_its_line(config_dir):
    _newline_store(config_dir)
    r = run_cli("validate", "--all-projects")
    assert r.exit_code in (0, 1), (r.stdout, r.stderr)
    _no_forged_line(r)


@pytest.mark.parametrize("args", [
    ["validate"], ["usage"], ["secrets"], ["where"], ["redact", "--dry-run"],
    ["export", "-o", "BUNDLE"], ["notes"], ["edit"], ["edit", "note", "n"],
], ids=lambda a: "-".join(a))
def test_a_store_name_with_a_newline_is_one_escaped_token(config_dir, tmp_path, args):
    """Text reports printed a store name's (or path's) newline raw: one
    directory name could add a line that belongs to no store ('proj-...:
    OK  0 errors').  Now it is escaped (\\n), as in the findings and the
    projects table."""
    s = _newline_store(config_dir)
    ed = tmp_path / "ed.sh"
    ed.write_text('#!/bin/sh\necho "an edit" >> "$1"\n')
    ed.chmod(0o755)
    args = [str(tmp_path / "b.tgz") if a == "BUNDLE" else a for a in args]
    r = run_cli("--store", str(s), *args, env={"EDITOR": str(ed), "VISUAL": str(ed)})
    assert r.exit_code in (0, 1), (r.stdout, r.stderr)
    _no_forged_line(r)


def test_edit_unchanged_says_the_path_on_one_line(config_dir):
    s = _newline_store(config_dir)
    r = run_cli("--store", str(s), "edit", env={"EDITOR": "true", "VISUAL": "true"})
    assert r.exit_code == 0, (r.stdout, r.stderr)
    _no_forged_line(r)


# ---------------------------------------------------------------- 3. the tabulate formats that draw text

def test_the_plain_tabulate_formats_output_md_names_draw_text(store):
    """OUTPUT.md listed ``tsv`` among the tabulate formats that "draw plain
    text", but ``--format tsv`` is always memctl's machine TSV."""
    import re

    from .conftest import REPO

    doc = (REPO / "docs" / "OUTPUT.md").read_text()
    para = re.search(r"A tabulate format either draws plain text for reading, and writes the "
                     r"text\s+as it is \((.*?);", doc, re.S)
    assert para, "the paragraph on tabulate's formats moved"
    names = re.findall(r"`([a-z_]+)`", para.group(1))
    assert "plain" in names and "simple" in names
    markdown.write(store, markdown.note_target("n"), "- x\n")
    machine = run_cli("--store", str(store.path), "--no-state", "notes", "--format", "tsv")
    assert machine.exit_code == 0, machine.stderr
    assert machine.stdout.startswith("type\t"), machine.stdout
    for name in names:
        r = run_cli("--store", str(store.path), "--no-state", "notes", "--format", name)
        assert r.exit_code == 0, (name, r.stderr)
        assert "n" in r.stdout and not r.stdout.startswith("type\t"), \
            f"{name} gives memctl's TSV, not drawn text"


# ---------------------------------------------------------------- 3. found by the code review of 1 and 2

def _interrupted_after_the_backup(monkeypatch) -> None:
    real_replace = os.replace

    def replace(src, dst, *a, **k):
        real_replace(src, dst, *a, **k)
        if str(dst).endswith(".bak"):
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace)


def test_the_kept_copy_s_path_is_one_escaped_token(tmp_path, monkeypatch):
    """The line saying where the edited copy is kept printed its path (in
    $TMPDIR) raw: a newline in it began a line of its own."""
    store, tmp, env = _edit_env(tmp_path)
    odd = tmp_path / ("t\n" + FAKE)
    odd.mkdir()
    env["TMPDIR"] = str(odd)
    _interrupted_after_the_backup(monkeypatch)
    r = run_cli("--store", str(store), "edit", env=env)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert len(_copies(odd)) == 1
    assert not any(line.startswith("proj-00daf2d9e712") for line in r.stderr.splitlines()), \
        r.stderr
    assert "your edited copy is kept at " in r.stderr and "t\\nproj-00daf2d9e712" in r.stderr


def test_a_copy_is_kept_when_its_line_cannot_be_written(tmp_path, monkeypatch):
    """Ctrl-C once the editor returned, stderr unwritable (a full disk):
    the line saying the copy was kept raised, the copy was deleted and the
    exit status was 7, not the interrupt's 130."""
    from lecode_memctl.cli import output

    store, tmp, env = _edit_env(tmp_path)
    _interrupted_after_the_backup(monkeypatch)
    real_echo = output.echo

    def echo(text="", *, err=False):
        if "kept at" in text:
            raise OSError(28, "No space left on device")
        real_echo(text, err=err)

    monkeypatch.setattr(output, "echo", echo)
    r = run_cli("--store", str(store), "edit", env=env)
    assert r.exit_code == 130, (r.stdout, r.stderr)
    kept = _copies(tmp)
    assert len(kept) == 1 and kept[0].read_bytes() == b"# memory\nmy precious edit\n"


def test_the_migration_note_prints_the_path_as_one_token(config_dir):
    """``facts`` (and ``history``, ``recall``, ``context``) on a database
    that needs migration printed its path raw in the note."""
    from .test_facts import make_legacy

    s = config_dir / "memory" / ("x\n" + FAKE + "\x1b[31m")
    s.mkdir(parents=True)
    (s / "MEMORY.md").write_text("hi\n")
    make_legacy(s / "facts.sqlite3")
    for args in (["facts"], ["history", "00000000000000aa"], ["context"]):
        r = run_cli("--store", str(s), "--no-state", *args)
        text = r.stdout + r.stderr
        assert "needs migration" in r.stderr, (args, r.stdout, r.stderr)
        assert "\x1b" not in text, (args, text)
        assert not any(line.startswith("proj-00daf2d9e712") for line in text.splitlines()), \
            (args, text)
