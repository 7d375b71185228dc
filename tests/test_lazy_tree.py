"""A command run builds only its own command: main() imports the module of
the invoked command alone, and what it prints is what the whole tree prints."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lecode_memctl.cli.registry import COMMANDS, invoked_command

from .conftest import run_cli


@pytest.mark.parametrize(("args", "expected"), [
    (["where"], "where"),
    (["--store", "x", "facts", "--all"], "facts"),
    (["-C", "p", "--no-color", "validate", "-q"], "validate"),
    (["--config-dir=d", "show"], "show"),
    (["--", "notes"], "notes"),
    (["facts", "--help"], "facts"),
    (["--help", "facts"], None),      # the root's help lists every command
    (["-h"], None),
    ([], None),
    (["wher"], None),                 # unknown: click names the close ones
    (["--store", "where"], None),     # 'where' is --store's value here
])
def test_invoked_command(args, expected):
    assert invoked_command(args) == expected


def test_a_command_run_imports_only_its_module(tmp_path):
    probe = ("import sys\n"
             "from lecode_memctl.cli.main import main\n"
             f"main(['--store', {str(tmp_path)!r}, 'where'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('lecode_memctl.cli.cmd_')))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "['lecode_memctl.cli.cmd_store']"


@pytest.mark.parametrize("name", [n for n, _m, _f in COMMANDS])
def test_each_command_help_is_the_whole_trees(name):
    from typer.testing import CliRunner

    from lecode_memctl.cli.app import build_app

    whole = CliRunner().invoke(build_app(), [name, "--help"], prog_name="memctl")
    assert whole.exit_code == 0
    got = run_cli(name, "--help")
    assert got.exit_code == 0
    assert got.stdout == whole.stdout
