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


# ---------------------------------------------------------------- what FILE may be
# The report is a new file renamed over FILE.  A symbolic link given as FILE
# was replaced by a regular file (its target untouched: as root, --output
# /dev/stdout would have replaced the system's link); now it is refused,
# exit 2, with one line that says to give the file itself.  A missing
# directory is exit 7, never created (secrets made it, mode 0700, and exited
# 0; validate said exit 7); a name too long is exit 7 too (validate said 5,
# "store unreadable").


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_symbolic_link_as_output_is_refused(built, tmp_path, command, dangling):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "real.prom"
    if not dangling:
        target.write_text("the previous report\n")
    (out / "link.prom").symlink_to("real.prom")
    r = run_cli(command, "--store", str(built.path), "--format", "prometheus",
                "--output", str(out / "link.prom"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stderr.count("\n") == 1 and "symbolic link" in r.stderr, r.stderr
    assert "give the file itself" in r.stderr, r.stderr
    assert (out / "link.prom").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["link.prom"] + ([] if dangling else ["real.prom"]))
    if not dangling:
        assert target.read_text() == "the previous report\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_as_output_is_refused(built, tmp_path, command):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run_cli(command, "--store", str(built.path), "--output", str(fifo))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert "a FIFO" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert fifo.is_fifo()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("missing", ["NO/x.prom", "NO/SUCH/DIR/x.prom", "file/x.prom"])
def test_a_missing_directory_is_exit_7_and_never_created(built, tmp_path, command, missing):
    (tmp_path / "file").write_text("a file, not a directory\n")
    before = sorted(tmp_path.rglob("*"))
    r = run_cli(command, "--store", str(built.path), "--output", str(tmp_path / missing))
    assert r.exit_code == 7, (r.exit_code, r.stderr)
    assert r.stderr.count("\n") == 1 and "cannot write" in r.stderr, r.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert not (tmp_path / "NO").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_too_long_is_exit_7(built, tmp_path, command):
    r = run_cli(command, "--store", str(built.path), "--output", str(tmp_path / ("a" * 300)))
    assert r.exit_code == 7, (r.exit_code, r.stderr)
    assert r.stderr.count("\n") == 1 and "File name too long" in r.stderr, r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_as_output_is_a_usage_error(built, tmp_path, command):
    r = run_cli(command, "--store", str(built.path), "--output", str(tmp_path))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert "a directory" in r.stderr and r.stderr.count("\n") == 1, r.stderr
