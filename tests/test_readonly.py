"""The read-only promise: reading commands create and change nothing.

The whole config dir is hashed (paths, types, modes, mtimes, contents) before
and after each command, for a project with no store at all and for a
populated store, in-process and once through a real subprocess.
"""

from __future__ import annotations

import datetime

import pytest

from lecode_memctl.core.identity import resolve_project

from .conftest import make_repo, run_cli, run_proc, tree_hash

TODAY = datetime.date.today().isoformat()

READ_COMMANDS = [
    ("where",),
    ("where", "--json"),
    ("show",),
    ("show", "--json"),
    ("log",),
    ("log", "2026-03-01"),
    ("log", "2026-03-01", "--json"),
    ("notes",),
    ("notes", "--json"),
    ("notes", "--format", "csv"),
    ("notes", "todo"),
    ("notes", "todo", "--json"),
    ("notes", "missing"),
    ("search", "deploy"),
    ("search", "deploy", "--json"),
    ("search", "("),
    ("config",),
    ("config", "--json"),
]


def _populate(store) -> None:
    (store / "daily").mkdir(parents=True)
    (store / "notes").mkdir()
    (store / "sessions").mkdir()
    (store / "MEMORY.md").write_text("# Memory\ndeploy with make\n")
    (store / "MEMORY.md.bak").write_text("# Memory\n")
    (store / "scratchpad.md").write_text("- [ ] deploy\n")
    (store / "daily" / "2026-03-01.md").write_text("deploy failed\n")
    (store / "daily" / f"{TODAY}.md").write_text("today\n")
    (store / "notes" / "todo.md").write_text("- deploy\n")
    (store / "sessions" / "s1.jsonl").write_text('{"seq":0,"type":"session"}\n')


@pytest.fixture
def project(tmp_path):
    return make_repo(tmp_path / "app")


def test_no_store_nothing_created(project, config_dir):
    (config_dir / "memory").mkdir(parents=True)
    (config_dir / "config.toml").write_text("[memory]\nmax_bytes = 1000\n")
    store = config_dir / "memory" / resolve_project(project).slug
    before = tree_hash(config_dir)
    for args in READ_COMMANDS:
        r = run_cli("--project", str(project), *args)
        assert "Traceback" not in r.stderr, args
        assert r.exit_code in (0, 2, 3), (args, r.exit_code, r.stderr)
        assert not store.exists(), args
        assert tree_hash(config_dir) == before, args


def test_no_config_dir_at_all_nothing_created(project, config_dir):
    assert not config_dir.exists()
    for args in READ_COMMANDS:
        r = run_cli("--project", str(project), *args)
        assert r.exit_code in (0, 2, 3), (args, r.exit_code, r.stderr)
        assert not config_dir.exists(), args


def test_populated_store_unchanged(project, config_dir):
    store = config_dir / "memory" / resolve_project(project).slug
    _populate(store)
    (config_dir / "config.toml").write_text("[memory]\nauto_learn = true\n")
    before = tree_hash(config_dir)
    for args in READ_COMMANDS:
        r = run_cli("--project", str(project), *args)
        assert "Traceback" not in r.stderr, args
        expected = 3 if "missing" in args else 2 if "(" in args else 0
        assert r.exit_code == expected, (args, r.exit_code, r.stderr)
        assert tree_hash(config_dir) == before, args


def test_store_option_unchanged(tmp_path):
    store = tmp_path / "evidence" / "app-0123456789ab"
    _populate(store)
    before = tree_hash(tmp_path / "evidence")
    for args in READ_COMMANDS:
        r = run_cli("--store", str(store), *args)
        assert "Traceback" not in r.stderr, args
        assert tree_hash(tmp_path / "evidence") == before, args


def test_subprocess_reads_change_nothing(project, config_dir):
    store = config_dir / "memory" / resolve_project(project).slug
    _populate(store)
    before = tree_hash(config_dir)
    for args in (("show",), ("notes",), ("search", "deploy")):
        p = run_proc("--project", str(project), *args)
        assert p.returncode == 0, p.stderr
    p = run_proc("--project", str(project.parent / "elsewhere"), "show")
    assert p.returncode != 0
    assert tree_hash(config_dir) == before
