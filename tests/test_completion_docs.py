"""The help texts of ``memctl completion`` and the examples' layout: what a
user copies from them works as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import REPO


def help_text(*command: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_MEMCTL", "_TYPER", "COMP_"))}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "200"
    proc = subprocess.run([sys.executable, "-m", "lecode_memctl", *command, "--help"],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_completion_help_loads_compinit_before_sourcing_the_zsh_script():
    """Sourcing _memctl calls compdef, which only compinit defines."""
    man = (REPO / "man" / "memctl.1").read_text().replace("\\-", "-")
    for text in (help_text("completion"), man):
        source = text.index("source ~/.zsh/_memctl")
        line_start = text.rfind("\n", 0, source)
        assert re.search(r"autoload -Uz compinit\s*(;|&&)\s*compinit",
                         text[line_start:source]), text[line_start:source + 30]

