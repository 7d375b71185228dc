"""``where`` on items that are there but not what they should be, and on a
store directory that cannot be searched; ``grep`` on such a store.

``where`` is the diagnostic command, and before 2026-12-07 it showed a
``MEMORY.md`` that is a directory, a ``facts.sqlite3`` that is a FIFO or a
symbolic link, and every item of a store directory of mode 000, as absent
(``-``; ``"exists": false, "error": null``).  Each is now ``exists`` with
the reason in ``error`` (size and count null: not known), as a directory
that cannot be listed was already ("cannot list: ...").

``grep`` on a store directory it cannot enter exited 1 (every session
"not searched", which a script reads as "no match"), taking the facts
database it could not look up for an absent one; every other reader
exits 5, and so does grep now.

The real thing (mode 000, a process without the capabilities that bypass
it) runs under ``capsh`` and is skipped where they cannot be dropped; the
same is also checked in this process with ``lstat`` failing as it would.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli
from .test_store_slug_unlistable import memctl_without_dac, require_dropped_caps

NAMES = ["MEMORY.md", "scratchpad.md", "facts.sqlite3", "daily/", "notes/", "sessions/"]


def _where(store: Path) -> tuple[list[str], dict[str, dict]]:
    r = run_cli("--store", str(store), "--no-state", "where")
    j = run_cli("--store", str(store), "--no-state", "where", "--json")
    assert r.exit_code == 0 and j.exit_code == 0, (r.stderr, j.stderr)
    items = {i["name"]: i for i in orjson.loads(j.stdout_bytes)["items"]}
    assert list(items) == NAMES
    return r.stdout.splitlines(), items


def _line(lines: list[str], name: str) -> str:
    return next(ln for ln in lines if ln.split()[:1] == [name]).split(None, 1)[1]


def test_items_of_another_kind_exist_with_the_reason(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "x")
    (store / "MEMORY.md").unlink()
    (store / "MEMORY.md").mkdir()
    (store / "facts.sqlite3").unlink()
    os.mkfifo(store / "facts.sqlite3")
    (store / "scratchpad.md").unlink()
    (store / "scratchpad.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("x\n")
    (store / "daily").rename(tmp_path / "daily-real")
    (store / "daily").symlink_to(tmp_path / "daily-real")
    (store / "notes").rename(tmp_path / "notes-real")
    (store / "notes").write_bytes(b"a file\n")
    lines, items = _where(store)
    why = {"MEMORY.md": "is a directory", "facts.sqlite3": "not a regular file",
           "scratchpad.md": "symbolic link", "daily/": "symbolic link",
           "notes/": "not a directory"}
    for name, reason in why.items():
        kind = "dir" if name.endswith("/") else "file"
        assert items[name] == {"name": name, "kind": kind, "exists": True, "size": None,
                               "count": None, "error": reason}, items[name]
        assert _line(lines, name) == reason, lines
    assert items["sessions/"]["error"] is None and items["sessions/"]["count"] == 3
    # (a missing item is still absent)
    (store / "MEMORY.md").rmdir()
    lines, items = _where(store)
    assert items["MEMORY.md"] == {"name": "MEMORY.md", "kind": "file", "exists": False,
                                  "size": 0, "count": 0, "error": None}
    assert _line(lines, "MEMORY.md") == "-"


def _unsearchable(mp: pytest.MonkeyPatch, store: Path) -> None:
    """``lstat`` of anything inside ``store`` fails as in a directory of mode
    000 read without the capabilities that bypass it (the suite may run as
    root)."""
    real = os.lstat
    inside = str(store) + os.sep

    def lstat(path, *args, **kwargs):
        if os.fspath(path).startswith(inside):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real(path, *args, **kwargs)

    mp.setattr(os, "lstat", lstat)


def test_a_store_that_cannot_be_searched_in_this_process(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "x")
    with pytest.MonkeyPatch.context() as mp:
        _unsearchable(mp, store)
        lines, items = _where(store)
        g = run_cli("--store", str(store), "--no-state", "grep", "tabs")
    for name in NAMES:
        assert items[name]["exists"] is True, items[name]
        assert items[name]["error"] == "cannot stat: Permission denied", items[name]
        assert (items[name]["size"], items[name]["count"]) == (None, None)
        assert _line(lines, name) == "cannot stat: Permission denied"
    assert g.exit_code == 5, (g.exit_code, g.stdout, g.stderr)
    assert g.stderr.strip() == (f"memctl: error: {store / 'facts.sqlite3'}: cannot stat: "
                                "Permission denied"), g.stderr


def test_a_store_directory_of_mode_000(demo_template, tmp_path):
    require_dropped_caps(tmp_path)
    store = copy_demo(demo_template, tmp_path / "x")

    def memctl(*args: str) -> subprocess.CompletedProcess:
        return memctl_without_dac(store, *args)

    store.chmod(0o000)
    try:
        w = memctl("where", "--json")
        g = memctl("grep", "tabs")
        s = memctl("sessions")
    finally:
        store.chmod(0o700)
    assert w.returncode == 0, w.stderr
    doc = orjson.loads(w.stdout)
    assert doc["store_exists"] is True
    for item in doc["items"]:
        assert (item["exists"], item["error"]) == (True, "cannot stat: Permission denied"), item
    assert g.returncode == 5 == s.returncode, (g.returncode, g.stderr, s.returncode)
    assert b"cannot stat: Permission denied" in g.stderr and g.stdout == b"", g.stderr
