"""An id, a pattern or a date that no store can make right is refused by
its syntax before the store is looked for (exit 2, docs/RELIABILITY.md:
"Ids that no store can hold are refused by syntax before any file
access"): with no store there, or a facts database that is not one, the
answer is the usage error, not 3 (no store) or 5 (unreadable).  Before,
``recall`` and ``history`` opened the store first (3, 5); ``grep`` and
``search`` looked for it before compiling the pattern (3), ``grep`` before
checking its --session ids (3, 5) and --since/--until times (3); ``usage``
before checking its --session id (3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .builders import copy_demo
from .conftest import run_cli

#: the command line -> the start of what its error line says
BAD = {
    "recall zz": "invalid fact id 'zz'",
    "history zz": "invalid fact id 'zz'",
    "history zz --json": "invalid fact id 'zz'",
    "grep (": "invalid regular expression '('",
    "search (": "invalid regular expression '('",
    "grep x --session ../a": "invalid session id '../a'",
    "grep x --since zz": "--since 'zz'",
    "grep x --until zz": "--until 'zz'",
    "usage --session ../a": "invalid session id '../a'",
    # (already in this order: kept so)
    "forget zz --dry-run": "invalid fact id 'zz'",
    "forget zz --yes": "invalid fact id 'zz'",
    "correct zz 1 s:1 text --yes": "invalid fact id 'zz'",
    "read ../a 1 2": "invalid session id '../a'",
    "facts --session ../a": "invalid session id '../a'",
    "notes ../a": "invalid note name '../a'",
    "edit note ../a": "invalid note name '../a'",
    "redact --pattern ( --dry-run": "invalid regular expression (at position ",
    "redact --session ../a --dry-run": "invalid session id '../a'",
}


@pytest.fixture
def garbage(demo_template, tmp_path) -> Path:
    """A store whose facts.sqlite3 is no database (exit 5 where it is opened)."""
    store = copy_demo(demo_template, tmp_path / "demo")
    (store / "facts.sqlite3").write_bytes(b"not a database")
    for side in ("facts.sqlite3-wal", "facts.sqlite3-shm"):
        (store / side).unlink(missing_ok=True)
    return store


@pytest.mark.parametrize("where", ["no store", "not a database"])
@pytest.mark.parametrize("line", list(BAD))
def test_bad_syntax_is_exit_2_before_the_store_is_opened(line, where, garbage, tmp_path,
                                                         monkeypatch):
    monkeypatch.setenv("EDITOR", "true")
    monkeypatch.setenv("VISUAL", "true")
    store = tmp_path / "nonexistent" if where == "no store" else garbage
    r = run_cli("--store", str(store), *line.split(" "))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    (said,) = r.stderr.splitlines()
    assert said.startswith(f"memctl: error: {BAD[line]}"), said
    assert not (tmp_path / "nonexistent").exists()
