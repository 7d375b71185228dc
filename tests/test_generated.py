"""The shipped man page, completion scripts and README tables match the command tree.

``scripts/gen_docs.py`` regenerates them into a temporary directory and every
byte must equal the committed file: after changing a command, rerun
``python scripts/gen_docs.py`` and commit the result.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

GEN = REPO / "scripts" / "gen_docs.py"
GENERATED = ["man/memctl.1", "completions/memctl.bash", "completions/_memctl",
             "completions/memctl.fish", "README.md"]


def _gen_module():
    if "gen_docs" in sys.modules:
        return sys.modules["gen_docs"]
    spec = importlib.util.spec_from_file_location("gen_docs", GEN)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["gen_docs"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    shutil.copy(REPO / "README.md", out / "README.md")
    proc = subprocess.run([sys.executable, str(GEN), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("rel", GENERATED)
def test_committed_file_matches_regenerated(regenerated, rel):
    fresh = (regenerated / rel).read_bytes()
    committed = (REPO / rel).read_bytes()
    assert committed == fresh, (
        f"{rel} is out of date with the command tree: run 'python scripts/gen_docs.py' "
        f"and commit the result")


def test_generation_is_reproducible(regenerated, tmp_path):
    """Two runs give the same bytes (no date, stable order)."""
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    subprocess.run([sys.executable, str(GEN), "--out", str(tmp_path)], check=True,
                   capture_output=True, timeout=120)
    for rel in GENERATED:
        assert (tmp_path / rel).read_bytes() == (regenerated / rel).read_bytes(), rel


def test_check_names_the_files_that_differ(regenerated, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(regenerated, out)
    ok = subprocess.run([sys.executable, str(GEN), "--check", "--out", str(out)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == ""
    with open(out / "completions" / "memctl.fish", "a") as f:
        f.write("# local edit\n")
    (out / "man" / "memctl.1").unlink()
    bad = subprocess.run([sys.executable, str(GEN), "--check", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "completions/memctl.fish" in bad.stderr
    assert "man/memctl.1" in bad.stderr
    assert "README.md" not in bad.stderr
    assert "_memctl " not in bad.stderr and "memctl.bash" not in bad.stderr
    # --check wrote nothing
    assert not (out / "man" / "memctl.1").exists()


def test_groff_finds_nothing():
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (.ci/run installs it)")
    proc = subprocess.run(["groff", "-man", "-ww", "-z", str(REPO / "man" / "memctl.1")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == "" and proc.stderr == ""


def test_mandoc_lint_finds_nothing_but_the_missing_date():
    if shutil.which("mandoc") is None:
        pytest.skip("mandoc is not installed")
    proc = subprocess.run(["mandoc", "-Tlint", str(REPO / "man" / "memctl.1")],
                          capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    # The date is left empty on purpose: the page must be reproducible.
    assert [ln for ln in lines if "missing date" not in ln] == []


def test_man_page_documents_every_command_and_option():
    gen = _gen_module()
    tree = gen.command_tree()
    man = (REPO / "man" / "memctl.1").read_text()
    readme = (REPO / "README.md").read_text()
    sections = re.findall(r"^\.SH (.+)$", man, re.M)
    assert sections == ["NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS",
                        "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]
    assert re.match(r'\.TH MEMCTL 1 "" ', man), "no build date in the man page"
    commands = gen.leaves(tree)
    assert commands, "the command tree is empty"
    for c in commands:
        assert f"\n.SS {gen.esc(c.name)}\n" in man, c.name
        assert f"| `{c.name}` |" in readme, c.name
        for p in c.params:
            assert gen.roff_term(p.term) in man, (c.name, p.term)
    for p in tree.params:
        assert gen.roff_term(p.term) in man, p.term
    for code, _meaning in gen.exit_codes():
        assert f"\n\\fB{code}\\fR\n" in man
        assert f"\n| {code} |" in readme
    for var in ("LECODE_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME", "VISUAL", "EDITOR",
                "NO_COLOR", "MEMCTL_DEBUG", "_MEMCTL_COMPLETE"):
        assert f"\\fB{gen.esc(var)}\\fR" in man, var


def test_each_commands_example_in_the_man_page_runs_memctl():
    """The EXAMPLES section's "one example of each command" took each
    command's first example line: completion's was a mkdir."""
    man = (REPO / "man" / "memctl.1").read_text()
    block = man.split("One example of each command (more under COMMANDS):\n.PP\n.nf\n")[1]
    lines = block.split("\n.fi\n")[0].splitlines()
    assert len(lines) >= 20, lines
    assert all(ln.startswith("memctl ") for ln in lines), lines
    assert any(ln.startswith("memctl completion ") for ln in lines)


def test_the_man_pages_slug_rule_is_the_contracts():
    """FILES says how a slug is made; it left out the hyphens stripped at
    both ends (a root named 'Weird Name__X!!' gives weird-name-x-...)."""
    from lecode_memctl.core.identity import slug

    man = " ".join((REPO / "man" / "memctl.1").read_text().split())
    assert "leading and trailing hyphens stripped" in man
    assert slug("/tmp/Weird Name__X!!").startswith("weird-name-x-")


def test_exit_table_lists_core_codes_and_main_codes():
    from lecode_memctl.core.errors import ERROR_CLASSES, EXIT_CODES

    gen = _gen_module()
    codes = [c for c, _ in gen.exit_codes()]
    assert codes == sorted({c.exit_code for c in ERROR_CLASSES} | {0, 1, 70, 129, 130, 141, 143})
    assert gen.exit_codes() == EXIT_CODES


def test_roff_escaping_survives_hostile_help_text(tmp_path):
    """Lines starting with '.' or "'", backslashes, hyphens and non-ASCII text
    come out as text, never as roff requests."""
    gen = _gen_module()
    hostile = ("First line.\n\n.TH EVIL 1\n'br quote\nback\\slash \\fB not bold --opt "
               "caf\u00e9 \u202e\n\n\b\n.SH NOT A SECTION\n  'indented -x\n")
    body = "\n".join(gen.roff_text(hostile))
    doc = '.TH T 1 "" "t" "t"\n.SH NAME\nt \\- t\n.SH DESCRIPTION\n' + body + "\n"
    for ln in body.splitlines():
        if ln.startswith((".", "'")):
            assert ln.split()[0] in (".PP", ".nf", ".fi"), ln
    assert "\\-\\-opt" in body and "back\\eslash" in body and "\\[u00E9]" in body
    page = tmp_path / "t.1"
    page.write_text(doc)
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    lint = subprocess.run(["groff", "-man", "-ww", "-z", str(page)], capture_output=True,
                          text=True, timeout=60)
    assert lint.stdout == "" and lint.stderr == ""
    txt = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", str(page)], capture_output=True,
                         text=True, timeout=60).stdout
    flat = " ".join(txt.split())
    assert ".TH EVIL 1" in flat and "'br quote" in flat and ".SH NOT A SECTION" in flat
    assert "back\\slash \\fB not bold" in flat


def test_completion_scripts_are_typers_templates_with_memctls_changes():
    """The shipped scripts are typer's templates for prog 'memctl' with the
    changes gen_docs.SCRIPT_CHANGES documents (each old text found once in
    typer's template, replaced by the new), plus a header."""
    from typer._completion_shared import get_completion_script

    gen_docs = _gen_module()

    for shell, rel in (("bash", "completions/memctl.bash"), ("zsh", "completions/_memctl"),
                       ("fish", "completions/memctl.fish")):
        text = (REPO / rel).read_text()
        script = get_completion_script(prog_name="memctl", complete_var="_MEMCTL_COMPLETE",
                                       shell=shell)
        for old, new in gen_docs.SCRIPT_CHANGES[shell]:
            assert script.count(old) == 1, (shell, old)
            assert old not in text and new in text, (shell, new)
            script = script.replace(old, new)
        body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("# "))
        assert script.replace("#compdef memctl\n", "").strip("\n") in body, rel
    assert (REPO / "completions/_memctl").read_text().startswith("#compdef memctl\n")


def test_readme_starts_with_the_two_setup_commands():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    commands = [[ln for ln in b.splitlines() if ln and not ln.startswith("#")] for b in blocks[:2]]
    assert re.fullmatch(r"python3 -m venv \.venv && \.venv/bin/pip install -e \. && "
                        r"\.venv/bin/memctl [a-z][a-z -]*", commands[0][0]), commands[0]
    assert commands[1] == ["python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                           ".venv/bin/python -m pytest -q -n auto --dist loadfile"]
    assert text.index(blocks[1]) < text.index("<!-- commands:begin -->")


def test_ci_script_is_executable_bash():
    ci = REPO / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    text = ci.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert "gen_docs.py --check" in text
    assert subprocess.run(["bash", "-n", str(ci)], capture_output=True).returncode == 0
