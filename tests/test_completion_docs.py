"""The help texts of ``memctl completion`` and the examples' layout: what a
user copies from them works as written."""

from __future__ import annotations

import os
import re
import shlex
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


def example_lines(text: str) -> list[str]:
    block = text.split("Examples:", 1)[1]
    lines = []
    for ln in block.splitlines()[1:]:
        if not ln.strip():
            break
        lines.append(ln.strip())
    return lines


def test_migrate_legacy_examples_are_commands_then_comments():
    """Each example is the command, two spaces or more, then its comment:
    pasted, the command part alone runs (no comment words as arguments, no
    quote left open by a comment's apostrophe)."""
    lines = [ln for ln in example_lines(help_text("migrate-legacy")) if ln.startswith("memctl")]
    assert lines
    commands = [re.split(r"\s{2,}", ln, maxsplit=1)[0] for ln in lines]
    for c in commands:
        words = shlex.split(c)
        assert all(w.startswith(("-", "~", "/")) or w in ("memctl", "migrate-legacy")
                   for w in words), c
    assert "memctl migrate-legacy --dry-run --diff" in commands
