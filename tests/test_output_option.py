"""The --output FILE of validate and secrets: one rule for both, checked
before any work (cli.state.output_file).  A read command writes nothing in a
store: a FILE inside the store audited (with --all-projects, inside
<config>/memory/) is refused with exit 2, as export's -o is; both commands
replaced or created store files (MEMORY.md without a .bak)."""

from __future__ import annotations

import pytest

from . import outkit
from .conftest import run_cli, tree_hash

COMMANDS = ["validate", "secrets"]


@pytest.fixture
def built(config_dir, tmp_path):
    store, _ids = outkit.build(config_dir, tmp_path / "proj", facts=2)
    return store


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("inside", ["MEMORY.md", "notes/x.md", "new.prom", "sessions",
                                    "no-such-dir/x"])
def test_output_inside_the_store_is_refused(built, config_dir, command, inside):
    before = tree_hash(config_dir)
    for scope in (["--store", str(built.path)], ["--all-projects"]):
        r = run_cli(command, *scope, "--output", str(built.path / inside))
        assert r.exit_code == 2, (scope, r.exit_code, r.stderr)
        assert r.stderr.count("\n") == 1 and "writes nothing there" in r.stderr, r.stderr
        assert r.stdout == ""
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("command", COMMANDS)
def test_output_inside_the_stores_directory_is_refused_with_all_projects(built, config_dir,
                                                                          command):
    before = tree_hash(config_dir)
    r = run_cli(command, "--all-projects", "--output", str(config_dir / "memory" / "x.prom"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stderr.count("\n") == 1 and "writes nothing there" in r.stderr, r.stderr
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("command", COMMANDS)
def test_output_through_a_link_into_the_store_is_refused(built, config_dir, tmp_path, command):
    """A directory outside that is a link to the store is inside it."""
    (tmp_path / "via").symlink_to(built.path)
    before = tree_hash(config_dir)
    r = run_cli(command, "--store", str(built.path), "--output", str(tmp_path / "via" / "r.txt"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("command", COMMANDS)
def test_output_beside_the_store_is_written(built, config_dir, tmp_path, command):
    target = tmp_path / "report.txt"
    r = run_cli(command, "--store", str(built.path), "--output", str(target))
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    assert target.read_text() and r.stdout == ""
