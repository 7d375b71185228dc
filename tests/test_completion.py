"""Shell completion through the shipped scripts and typer's ``_MEMCTL_COMPLETE`` protocol.

The scripts in ``completions/`` call the real ``memctl`` (the one on PATH: this
virtual environment's console script) for every TAB.  The expected candidates
are computed from the command tree, so the tests follow new commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

BIN = os.path.dirname(sys.executable)
MEMCTL = os.path.join(BIN, "memctl")


def top_commands(prefix: str = "") -> list[str]:
    import typer
    from typer import _click

    from lecode_memctl.cli.app import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = _click.Context(group, info_name="memctl", **group.context_settings)
    names = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is not None and not getattr(cmd, "hidden", False) and name.startswith(prefix):
            names.append(name)
    return sorted(names)


def command_options(name: str, prefix: str) -> list[str]:
    import typer
    from typer import _click

    from lecode_memctl.cli.app import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    # (the context as memctl makes it, its settings included: a command
    # keeps the help option its first context gave it, and one made with
    # click's default --help alone drew the same tree's help narrower later)
    ctx = _click.Context(group, info_name="memctl", **group.context_settings)
    cmd = group.get_command(ctx, name)
    assert cmd is not None, name
    sub = _click.Context(cmd, info_name=name, parent=ctx)
    out: set[str] = set()
    for p in cmd.get_params(sub):
        if p.param_type_name == "option" and not getattr(p, "hidden", False):
            out.update(o for o in [*p.opts, *p.secondary_opts] if o.startswith(prefix))
    return sorted(out)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = BIN + os.pathsep + e.get("PATH", "")
    for k in list(e):
        if k.startswith(("_MEMCTL", "_TYPER", "COMP_")):
            del e[k]
    return e


@pytest.fixture(autouse=True)
def _memctl_on_path():
    if not os.access(MEMCTL, os.X_OK):
        pytest.skip(f"no memctl console script next to {sys.executable}")


def test_there_are_commands_starting_with_s():
    # The 's' tests below would pass vacuously otherwise.
    assert top_commands("s"), "no command starting with 's' in the tree"


# ---------------------------------------------------------------- bash

def bash_complete(*words: str) -> tuple[list[str], str]:
    """Source completions/memctl.bash in a real bash and complete WORDS (the last
    one is the word under the cursor)."""
    script = (
        'source "$1"; shift\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))\n'
        'complete -p memctl\n'
        '_memctl_completion memctl\n'
        'printf "<%s>\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash",
                           str(REPO / "completions" / "memctl.bash"), *words],
                          capture_output=True, text=True, env=env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    spec, *rest = proc.stdout.splitlines()
    got = [ln[1:-1] for ln in rest if ln != "<>"]
    return got, spec


def test_bash_completes_s_commands():
    got, spec = bash_complete("memctl", "s")
    assert spec == "complete -o default -F _memctl_completion memctl"
    assert sorted(got) == top_commands("s")


def test_bash_completes_every_command_on_empty_word():
    got, _ = bash_complete("memctl", "")
    assert sorted(got) == top_commands()


def test_bash_completes_options_of_a_command():
    got, _ = bash_complete("memctl", "where", "--j")
    assert sorted(got) == command_options("where", "--j") == ["--json"]


def test_bash_completes_global_options():
    got, _ = bash_complete("memctl", "--no")
    assert sorted(got) == ["--no-color", "--no-state"]


def test_bash_completion_runs_no_option_callback():
    """Completing after --version (an eager option with a callback) and after a
    global option with a value still completes the command, printing nothing else."""
    got, _ = bash_complete("memctl", "--version", "s")
    assert sorted(got) == top_commands("s")
    got, _ = bash_complete("memctl", "--project", "/nonexistent", "s")
    assert sorted(got) == top_commands("s")


def test_bash_nothing_for_unknown_prefix():
    got, _ = bash_complete("memctl", "zzz")
    assert got == []


# ---------------------------------------------------------------- the env protocol

def protocol(shell: str, line: str, **extra: str) -> subprocess.CompletedProcess:
    e = env()
    e["_MEMCTL_COMPLETE"] = f"complete_{shell}"
    e["_TYPER_COMPLETE_ARGS"] = line
    e.update(extra)
    return subprocess.run([MEMCTL], capture_output=True, text=True, env=e, timeout=60)


def parse_zsh(out: str) -> list[str]:
    """`_arguments '*: :(("show":"help" "search":"help"))'` -> ['show', 'search']."""
    out = out.strip()
    assert out.startswith("_arguments '*: :((") and out.endswith("))'"), out
    body = out[len("_arguments '*: :(("):-len("))'")]
    values = []
    for item in body.split("\n"):
        assert item.startswith('"'), item
        values.append(item[1:item.index('"', 1)])
    return values


def test_zsh_protocol_offers_s_commands_with_help():
    proc = protocol("zsh", "memctl s")
    assert proc.returncode == 0 and proc.stderr == ""
    assert sorted(parse_zsh(proc.stdout)) == top_commands("s")
    assert '":"' in proc.stdout  # each with its one-line help


def test_zsh_protocol_falls_back_to_files_when_nothing_matches():
    proc = protocol("zsh", "memctl zzz")
    assert proc.returncode == 0
    assert proc.stdout.strip() == "_files"


def test_fish_protocol_offers_s_commands_with_help():
    proc = protocol("fish", "memctl s", _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert sorted(ln.split("\t")[0] for ln in lines) == top_commands("s")
    assert all("\t" in ln for ln in lines)
    yes = protocol("fish", "memctl s", _TYPER_COMPLETE_FISH_ACTION="is-args")
    no = protocol("fish", "memctl zzz", _TYPER_COMPLETE_FISH_ACTION="is-args")
    assert (yes.returncode, no.returncode) == (0, 1)


# ---------------------------------------------------------------- real zsh and fish

@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_registers_and_drives_the_protocol(tmp_path):
    """compinit, source completions/_memctl, then run the completion function with
    _arguments replaced by a recorder."""
    script = (
        "autoload -Uz compinit && compinit -u -D\n"
        'source "$1"\n'
        "print -r -- \"comp=${_comps[memctl]}\"\n"
        "_arguments() { print -r -- \"args=$*\" }\n"
        "_files() { print -r -- files }\n"
        "words=(memctl s); CURRENT=2\n"
        "_memctl_completion\n"
    )
    proc = subprocess.run(["zsh", "-f", "-c", script, "zsh", str(REPO / "completions" / "_memctl")],
                          capture_output=True, text=True, env=env(), timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "comp=_memctl_completion" in lines
    args = [ln for ln in lines if ln.startswith("args=")]
    assert len(args) == 1, proc.stdout
    spec = args[0][len("args="):]
    assert spec.startswith("*: :((") and spec.endswith("))")
    # What _arguments received after zsh's eval: "value":"help" pairs.
    got = re.findall(r'"([^"]*)"(?::"[^"]*")?', spec[len("*: :(("):-2])
    assert sorted(got) == top_commands("s")


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_script_completes_s_commands(tmp_path):
    home = tmp_path / "fishhome"
    home.mkdir()
    e = env()
    e["HOME"] = str(home)
    e["XDG_CONFIG_HOME"] = str(home / ".config")
    e["XDG_DATA_HOME"] = str(home / ".local" / "share")
    proc = subprocess.run(["fish", "--no-config", "-c",
                           'source $argv[1]; complete -C"memctl s"',
                           str(REPO / "completions" / "memctl.fish")],
                          capture_output=True, text=True, env=e, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = sorted(ln.split("\t")[0] for ln in proc.stdout.splitlines() if ln)
    assert got == top_commands("s")


def test_usage_session_option_completes_session_ids(tmp_path):
    """Every option or argument that takes a session id completes the store's ids."""
    import os
    import subprocess
    import sys

    sessions = tmp_path / "store" / "sessions"
    sessions.mkdir(parents=True)
    for sid in ("alpha-1", "alpha-2", "beta"):
        (sessions / f"{sid}.jsonl").write_bytes(b"")
    env = dict(os.environ, _MEMCTL_COMPLETE="complete_bash",
               COMP_WORDS=f"memctl --store {tmp_path / 'store'} usage --session al", COMP_CWORD="5")
    out = subprocess.run([sys.executable, "-m", "lecode_memctl"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert sorted(out.stdout.split()) == ["alpha-1", "alpha-2"], (out.stdout, out.stderr)
