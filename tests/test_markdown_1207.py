"""Markdown, context and edit fixes of 2026-12-07 (review rv7)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lecode_memctl.core import markdown
from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.layout import store_at

from .conftest import run_cli, tree_hash


def editor_env(tmp_path: Path, monkeypatch, body: str) -> None:
    script = tmp_path / f"ed_{abs(hash(body))}.py"
    script.write_text("import os, sys\npath = sys.argv[1]\n" + body)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")


# ---------------------------------------------------------------- 1. a note name leaves room for its .bak

@pytest.mark.parametrize("name", ["日" * 83, "日" * 84, "😀" * 63, "日" * 82 + "abc"])
def test_a_name_whose_backup_would_not_fit_is_refused(name):
    """'日' * 84: notes/<name>.md is 255 bytes, accepted and created, but
    the next write's <name>.md.bak is 259: "File name too long", exit 7,
    forever.  (The writing rule; reading keeps '<name>.md' <= 255 bytes.)"""
    with pytest.raises(UsageError) as exc:
        markdown.check_note_name(name, writing=True)
    assert ".md.bak" in str(exc.value)
    with pytest.raises(UsageError) as exc:
        markdown.note_target(name)
    assert ".md.bak" in str(exc.value)


@pytest.mark.parametrize("name", ["日" * 82, "日" * 82 + "ab", "😀" * 62, "é" * 100])
def test_the_longest_names_can_be_written_twice(tmp_path, name):
    assert len((markdown.check_note_name(name) + ".md.bak").encode()) <= 255
    store = store_at(tmp_path / "s")
    t = markdown.note_target(name)
    markdown.write(store, t, "one\n")
    markdown.write(store, t, "two\n")
    assert (tmp_path / "s" / "notes" / f"{name}.md").read_text() == "two\n"
    assert (tmp_path / "s" / "notes" / f"{name}.md.bak").read_text() == "one\n"


def test_edit_the_longest_note_twice(tmp_path, monkeypatch):
    editor_env(tmp_path, monkeypatch, "open(path, 'a').write('line\\n')\n")
    store = tmp_path / "s"
    name = "日" * 82
    for _ in range(2):
        r = run_cli("--store", str(store), "edit", "note", name)
        assert r.exit_code == 0, r.stderr
    assert (store / "notes" / f"{name}.md").read_text() == "line\nline\n"


def test_an_existing_file_with_a_longer_name_is_listed(tmp_path):
    """A file made before (or by another tool) whose name the writing rule
    refuses (252 bytes) is listed and read ('notes NAME': reading makes no
    .bak), but not written: 'edit note NAME' is exit 2."""
    store = tmp_path / "s"
    (store / "notes").mkdir(parents=True)
    name = "日" * 84
    (store / "notes" / f"{name}.md").write_text("kept\n")
    r = run_cli("--store", str(store), "notes", "--json")
    assert r.exit_code == 0, r.stderr
    assert name in r.stdout
    before = tree_hash(store)
    r = run_cli("--store", str(store), "notes", name)
    assert r.exit_code == 0 and r.stdout == "kept\n", r.stderr
    r = run_cli("--store", str(store), "edit", "note", name, env={"EDITOR": "true"})
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert tree_hash(store) == before


# ---------------------------------------------------------------- edit: what the editor leaves

def _kept(stderr: str) -> Path:
    return Path(stderr.split(" kept at ")[1].split(" ")[0].rstrip(";\n"))


def test_an_editor_that_saves_then_fails_keeps_the_copy(tmp_path, monkeypatch):
    """The editor saved, then exited 1: 'nothing was written', exit 1, and
    the edited copy was deleted, the edits lost."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "MEMORY.md").write_text("orig\n")
    editor_env(tmp_path, monkeypatch, "open(path, 'a').write('careful edits\\n'); sys.exit(1)\n")
    before = tree_hash(store)
    r = run_cli("--store", str(store), "edit")
    assert r.exit_code == 1, r.stderr
    assert r.stderr.count("\n") == 1
    assert "exited with status 1" in r.stderr and "nothing was written" in r.stderr
    kept = _kept(r.stderr)
    try:
        assert kept.read_text() == "orig\ncareful edits\n"
    finally:
        kept.unlink()
    assert tree_hash(store) == before


def test_an_editor_that_fails_without_a_change_leaves_no_copy(tmp_path, monkeypatch):
    store = tmp_path / "s"
    store.mkdir()
    (store / "MEMORY.md").write_text("orig\n")
    record = tmp_path / "name"
    editor_env(tmp_path, monkeypatch, f"open({str(record)!r}, 'w').write(path); sys.exit(2)\n")
    r = run_cli("--store", str(store), "edit")
    assert r.exit_code == 1 and "kept" not in r.stderr, r.stderr
    assert not os.path.exists(record.read_text())


@pytest.mark.parametrize("what,make", [
    ("a directory", "os.unlink(path); os.mkdir(path)\n"),
    ("a symbolic link", "os.unlink(path); os.symlink(TARGET, path)\n"),
    ("a FIFO", "os.unlink(path); os.mkfifo(path)\n"),
])
def test_an_editor_that_replaces_its_file_writes_nothing(tmp_path, monkeypatch, what, make):
    """A directory: 'Is a directory', exit 5 (the store's code; the path is
    not in it), the directory left unsaid.  A symbolic link: memctl wrote
    the link target's content into MEMORY.md.  A FIFO: memctl hung."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "MEMORY.md").write_text("orig\n")
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not for the store\n")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    editor_env(tmp_path, monkeypatch, make.replace("TARGET", repr(str(secret))))
    before = tree_hash(store)
    from .conftest import run_proc

    r = run_proc("--store", str(store), "edit", env={"TMPDIR": str(tmpdir)}, timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"replaced the file it was given with {what}" in err and "nothing was written" in err
    assert tree_hash(store) == before
    (left,) = tmpdir.iterdir()
    assert str(left) in err          # what is left, named where it is
    assert secret.read_text() == "not for the store\n"
