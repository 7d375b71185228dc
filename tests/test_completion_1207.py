"""Completion defects found in real shells on 2026-12-07, each driven through
the shell that showed it.

bash runs interactively on a pseudo-terminal: the test types a line and TAB
(readline computes COMP_WORDS, COMP_LINE, COMP_POINT and the word it
replaces itself), then a key bound with ``bind -x`` writes the line as it is
after the TAB, and a wrapper around the shipped ``_memctl_completion``
writes what it answered (COMPREPLY).  zsh and fish as in
tests/test_completion_shells.py.
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from . import test_completion_shells
from .conftest import REPO
from .test_completion_shells import fish_complete, zsh_complete

pty = pytest.importorskip("pty")

#: memctl on PATH runs this checkout: tests/test_completion_shells.py's fixture
env = test_completion_shells.env


def _spawn(argv: list[str], environ: dict[str, str], cwd: str | None) -> tuple[int, int]:
    """An interactive shell on a pseudo-terminal: (its pid, the terminal)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            if cwd:
                os.chdir(cwd)
            os.execvpe(argv[0], argv, environ)
        finally:
            os._exit(127)
    return pid, fd


def _answer(fd: int, out: str, shell: str) -> str:
    """What the shell's key binding wrote to ``out`` (the line after the
    TAB), its terminal drained meanwhile; at most 30 s."""
    deadline = time.monotonic() + 30
    while not os.path.exists(out) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                break
    assert os.path.exists(out), f"{shell} did not answer"
    with open(out, "rb") as fh:
        return fh.read().decode("utf-8", "surrogateescape")


def bash_tab(environ: dict[str, str], line: str, keys: str = "\t", cwd: str | None = None,
             setup: str = "") -> tuple[str, list[str]]:
    """(the line after typing LINE then KEYS in an interactive bash with the
    shipped script, every COMPREPLY entry the script answered)."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    import tempfile

    d = tempfile.mkdtemp(prefix="bash-tab-")
    out, rep, rc = (os.path.join(d, n) for n in ("line", "reply", "rc"))
    script = REPO / "completions" / "memctl.bash"
    with open(rc, "w") as f:
        f.write(f"""PS1='$ '; set -o histexpand; bind 'set bell-style none'
source {shlex.quote(str(script))}
eval "$(declare -f _memctl_completion | sed '1s/_memctl_completion/_memctl_orig/')"
_memctl_completion() {{ _memctl_orig "$@"; local s=$?
  printf '<%s>\\n' "${{COMPREPLY[@]}}" >> {rep}; return $s; }}
bind -x '"\\C-xp": printf "%s" "$READLINE_LINE" > {out}.tmp; mv {out}.tmp {out}'
{setup}
""")
    pid, fd = _spawn(["bash", "--noprofile", "--rcfile", rc, "-i"],
                     dict(environ, TERM="dumb", INPUTRC="/dev/null"), cwd)
    try:
        os.write(fd, (line + keys).encode("utf-8", "surrogateescape") + b"\x18p")
        got = _answer(fd, out, "bash")
        reply: list[str] = []
        if os.path.exists(rep):
            with open(rep, encoding="utf-8", errors="surrogateescape") as fh:
                reply = [ln[1:-1] for ln in fh.read().splitlines() if ln != "<>"]
        return got, reply
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
        shutil.rmtree(d, ignore_errors=True)


def zsh_tab(environ: dict[str, str], line: str, keys: str = "\t", cwd: str | None = None,
            fpath: bool = False) -> str:
    """The line after typing LINE then KEYS in an interactive zsh with
    compinit and the shipped script (sourced, or with FPATH autoloaded
    through fpath), read by a widget bound to C-x p."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    import tempfile

    d = tempfile.mkdtemp(prefix="zsh-tab-")
    out = os.path.join(d, "line")
    script = REPO / "completions" / "_memctl"
    load = (f"fpath=({shlex.quote(str(script.parent))} $fpath); autoload -Uz compinit; "
            "compinit -u -d " + shlex.quote(os.path.join(d, "zcompdump")) if fpath else
            "autoload -Uz compinit; compinit -u -D; source " + shlex.quote(str(script)))
    with open(os.path.join(d, ".zshrc"), "w") as f:
        f.write(f"""PS1='$ '; unsetopt beep
{load}
_dump() {{ print -rn -- "$BUFFER" > {out}.tmp; mv {out}.tmp {out} }}
zle -N _dump; bindkey '^Xp' _dump
""")
    pid, fd = _spawn(["zsh", "-i"], dict(environ, TERM="dumb", ZDOTDIR=d), cwd)
    try:
        time.sleep(0.3)
        os.write(fd, (line + keys).encode("utf-8", "surrogateescape"))
        time.sleep(0.5)
        os.write(fd, b"\x18p")
        return _answer(fd, out, "zsh")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
        shutil.rmtree(d, ignore_errors=True)


def _store(path, sessions=("demo-alpha", "demo-beta"), notes=()):  # noqa: ANN001,ANN202
    os.makedirs(os.path.join(path, "sessions"))
    os.makedirs(os.path.join(path, "notes"))
    for sid in sessions:
        with open(os.path.join(path, "sessions", sid + ".jsonl"), "w"):
            pass
    for n in notes:
        with open(os.path.join(os.fsencode(path), b"notes", os.fsencode(n) + b".md"), "w") as f:
            f.write("x\n")
    return str(path)


# ------------------------------------------------- 1. = and : in earlier words (bash)

@pytest.mark.parametrize("name", ["e=q", "c:l"])
@pytest.mark.parametrize("form", ["--store ", "--store="])
def test_bash_reads_a_store_path_with_equals_or_colon(env, tmp_path, name, form):
    """bash splits COMP_WORDS at = and : (COMP_WORDBREAKS): a store at
    .../e=q or .../c:l broke the words after it (the command names were
    offered instead of the session ids)."""
    store = _store(tmp_path / name)
    line, reply = bash_tab(env, f"memctl {form}{store} read ", "\t\t")
    assert sorted(set(reply)) == ["demo-alpha", "demo-beta"]
    line, _reply = bash_tab(env, f"memctl {form}{store} read demo-a")
    assert line == f"memctl {form}{store} read demo-alpha "


# ------------------------------------------------- 2. note names every command refuses

BAD_NOTES = ("new\nline", "bad\udcff", "esc\x1b[31mred", "back\\slash", "tab\tx")


@pytest.fixture
def bad_store(tmp_path) -> str:
    return _store(tmp_path / "w", notes=(*BAD_NOTES, "good one"))


def test_completion_offers_only_note_names_the_commands_accept(env, bad_store):
    """A notes/ file whose name no command accepts (a newline, a byte that
    is not UTF-8, an escape sequence, a backslash, a tab) was offered, some
    mangled (``new`` and ``line`` as two candidates, ``escred``)."""
    _line, reply = bash_tab(env, f"memctl --store {bad_store} notes ", "\t\t")
    assert sorted(set(reply)) == ["good\\ one"]
    assert fish_complete(env, f"memctl --store {bad_store} notes ") == ["good one"]
    assert [v for v, _h in zsh_complete(env, ["memctl", "--store", bad_store, "notes", ""])] \
        == ["good one"]
    assert [v for v, _h in zsh_complete(env, ["memctl", "--store", bad_store, "edit", "note",
                                              ""])] == ["good one"]


# ------------------------------------------------- 3. --sort=-KEY

DESC = ["-id", "-created", "-last_time", "-size"]


def test_sort_completes_descending_keys_after_equals(env, tmp_path):
    """``--sort=-<TAB>`` offered the option names glued to the value
    (``--sort=--json``): click takes a value starting with ``-`` for an
    option name; the help says ``prefix '-' for descending``."""
    assert [v for v, _h in zsh_complete(env, ["memctl", "sessions", "--sort=-"])] \
        == ["--sort=" + k for k in DESC]
    assert sorted(fish_complete(env, "memctl sessions --sort=-")) == sorted(
        "--sort=" + k for k in DESC)
    assert fish_complete(env, "memctl sessions --sort=-s") == ["--sort=-size"]
    _line, reply = bash_tab(env, "memctl sessions --sort=-", "\t\t", cwd=str(tmp_path))
    assert sorted(set(reply)) == sorted(DESC)
    line, _reply = bash_tab(env, "memctl sessions --sort=-la", cwd=str(tmp_path))
    assert line == "memctl sessions --sort=-last_time "


def test_sort_completes_keys_and_descending_keys(env):
    assert sorted(fish_complete(env, "memctl sessions --sort=")) == sorted(
        "--sort=" + k for k in ("id", "created", "last_time", "size", *DESC))


def test_sort_completes_descending_keys_in_the_next_word(env, tmp_path):
    """``--sort -size`` runs (click takes the next word as the value)."""
    assert [v for v, _h in zsh_complete(env, ["memctl", "sessions", "--sort", "-"])] == DESC
    assert fish_complete(env, "memctl sessions --sort -si") == ["-size"]
    line, _reply = bash_tab(env, "memctl sessions --sort -la", cwd=str(tmp_path))
    assert line == "memctl sessions --sort -last_time "


# ------------------------------------------------- 4. $VAR in the store options

def _where_store(env: dict[str, str], *root_options: str) -> str:
    import json

    proc = subprocess.run([sys.executable, "-m", "lecode_memctl", *root_options, "where", "--json"],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["store"])


@pytest.mark.parametrize("option", ["--store", "--config-dir", "-C"])
@pytest.mark.parametrize("var", ["$HOME", "${HOME}"])
def test_completion_expands_variables_in_the_store_options(env, option, var):
    """``memctl --store $HOME/st read <TAB>`` listed files: the words were
    used as typed (only a leading ~ was expanded)."""
    home = env["HOME"]
    target = {"--store": "st", "--config-dir": "cfg"}.get(option, "proj")
    os.makedirs(os.path.join(home, target), exist_ok=True)
    store = (os.path.join(home, "st") if option == "--store"
             else _where_store(env, option, os.path.join(home, target)))
    _store(store, sessions=("var-sess",))
    typed = f"{var}/{target}"
    _line, reply = bash_tab(env, f"memctl {option} {typed} read ", "\t\t")
    assert sorted(set(reply)) == ["var-sess"]
    assert [v for v, _h in zsh_complete(env, ["memctl", option, typed, "read", ""])] == ["var-sess"]
    if var == "$HOME":
        assert fish_complete(env, f"memctl {option} {typed} read ") == ["var-sess"]


# ------------------------------------------------- 5. SESSION:RANGE and colons

@pytest.fixture
def colon_store(tmp_path) -> str:
    return _store(tmp_path / "cs", sessions=("demo-alpha",), notes=("a:b", "x=y z"))


@pytest.fixture
def files_here(tmp_path) -> str:
    """A working directory with files that a fallback to file names shows."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "bc.sh").write_text("")
    return str(work)


@pytest.mark.parametrize("words", ["read demo-alpha:b", "read demo-alpha:", "correct abc 1 demo-alpha:b"])
def test_bash_offers_no_files_after_session_colon(env, colon_store, files_here, words):
    """After SESSION: bash fell back to the file names of the working
    directory (demo-alpha:bc.sh)."""
    typed = f"memctl --store {colon_store} {words}"
    line, reply = bash_tab(env, typed, "\t\t", cwd=files_here)
    assert line == typed
    assert reply == []


def test_fish_offers_no_files_after_session_colon(env, colon_store, files_here):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    got = subprocess.run(
        ["fish", "--no-config", "-c", "source $argv[1]; cd $argv[3]; complete -C$argv[2]",
         str(REPO / "completions" / "memctl.fish"), f"memctl --store {colon_store} read demo-alpha:",
         files_here], capture_output=True, text=True, env=env, timeout=20)
    assert got.returncode == 0, got.stderr
    assert got.stdout == ""


def test_zsh_offers_no_files_after_session_colon(env, colon_store):
    assert zsh_complete(env, ["memctl", "--store", colon_store, "read", "demo-alpha:"]) == []


def test_zsh_answers_no_files_after_session_colon(env, colon_store):
    """zsh_complete drops _files (no candidate): check the answer itself."""
    proc = subprocess.run([sys.executable, "-m", "lecode_memctl"], capture_output=True, text=True,
                          env=dict(env, _MEMCTL_COMPLETE="complete_zsh",
                                   _TYPER_COMPLETE_ARGS=f"memctl --store {colon_store} read demo-alpha:"),
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "_files" not in proc.stdout


@pytest.mark.parametrize(("typed", "after"), [("a:", "a:b "), ("x=", "x=y\\ z ")])
def test_bash_completes_a_note_name_after_a_colon_or_equals(env, colon_store, typed, after):
    """bash replaces only the text after the last : or = (COMP_WORDBREAKS):
    the candidate must be what follows it (a:<TAB> completed nothing)."""
    line, _reply = bash_tab(env, f"memctl --store {colon_store} notes {typed}")
    assert line == f"memctl --store {colon_store} notes {after}"


@pytest.mark.parametrize(("typed", "after"), [
    ("memctl --color=al", "memctl --color=always "),
    ("memctl --color ne", "memctl --color never "),
    ("memctl facts --format=jsonl", "memctl facts --format=jsonl "),
])
def test_bash_completes_option_values_after_equals(env, tmp_path, typed, after):
    line, _reply = bash_tab(env, typed, cwd=str(tmp_path))
    assert line == after


# ------------------------------------------------- 6. a backslash in a zsh candidate

@pytest.mark.parametrize("value", ["back\\slash", "end\\", "a:b\\c", "it's\\$HOME", 'dq"\\x'])
def test_zsh_keeps_a_backslash_in_a_candidate(env, tmp_path, value):
    """zsh_escape doubled a backslash, which the eval of the ``((...))``
    action undoes, but _arguments removes one level more (as for a colon):
    ``back\\slash`` was inserted as ``backslash``.  The spec goes through the
    real _arguments: ``memctl`` on PATH prints it for VALUE, with help."""
    from lecode_memctl.cli.completion import zsh_escape

    spec = f"_arguments '*: :((\"{zsh_escape(value)}\":\"{zsh_escape('help ' + value)}\"))'"
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "memctl").write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(spec)}\n")
    (fake / "memctl").chmod(0o755)
    e = dict(env, PATH=str(fake) + os.pathsep + env["PATH"])
    line = zsh_tab(e, "memctl " + value[:2])
    assert shlex.split(line)[-1] == value


# ------------------------------------------------- 7. zsh: _memctl autoloaded through fpath

@pytest.mark.parametrize("fpath", [True, False], ids=["fpath", "sourced"])
def test_zsh_completes_on_the_first_tab(env, fpath):
    """Loaded through fpath (compinit autoloads _memctl), the first TAB ran
    the file's body only: it defined the function and ran compdef, and
    completed nothing."""
    assert zsh_tab(env, "memctl sea", fpath=fpath) == "memctl search "


# ------------------------------------------------- 8. _MEMCTL_COMPLETE=source_SHELL

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_source_instruction_prints_memctls_own_script(env, shell):
    """``_MEMCTL_COMPLETE=source_bash memctl`` printed typer's original
    script, not memctl's (sourcing it broke on note names with spaces)."""
    ours = subprocess.run([sys.executable, "-m", "lecode_memctl", "completion", shell],
                          capture_output=True, env=env, timeout=30)
    assert ours.returncode == 0, ours.stderr
    got = subprocess.run([sys.executable, "-m", "lecode_memctl"], capture_output=True,
                         env=dict(env, _MEMCTL_COMPLETE=f"source_{shell}"), timeout=30)
    assert got.returncode == 0, got.stderr
    assert got.stderr == b""
    assert got.stdout == ours.stdout
    shipped = {"bash": "memctl.bash", "zsh": "_memctl", "fish": "memctl.fish"}[shell]
    assert got.stdout == (REPO / "completions" / shipped).read_bytes()


# ------------------------------------------------- 9. bash: ! inside an open double quote

def _history_expanded(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "--norc", "--noprofile", "-c",
                           'set -o history -H; history -p -- "$1"', "bash", line],
                          capture_output=True, text=True, timeout=20)


@pytest.mark.parametrize("name", ["!b", "a!b!", "x!", "!"])
def test_bash_escapes_an_exclamation_mark_inside_double_quotes(env, tmp_path, name):
    """Completing ``"!<TAB>`` inserted a bare ``!`` inside the double quote:
    Enter gave ``bash: !b: event not found`` (history expansion is on in an
    interactive bash)."""
    store = _store(tmp_path / "x", notes=(name,))
    line, _reply = bash_tab(env, f'memctl --store {store} notes "{name[0]}')
    assert line != f'memctl --store {store} notes "{name[0]}', "nothing was completed"
    proc = _history_expanded(line)
    assert proc.returncode == 0 and proc.stdout == line + "\n", (line, proc.stderr)
    assert shlex.split(line)[-1] == name


@pytest.mark.parametrize("quote", ["'", '"'])
@pytest.mark.parametrize("name", ["'lead", "trail'", 'dq"', '"dq', "plain"])
def test_bash_closes_the_quote_around_a_quote_at_either_end(env, tmp_path, quote, name):
    """readline drops the opening quote when the candidate starts with it and
    adds no closing quote when the candidate ends with it."""
    store = _store(tmp_path / "q", notes=(name,))
    line, _reply = bash_tab(env, f"memctl --store {store} notes {quote}")
    assert shlex.split(line)[-1] == name, line


# ------------------------------------------------- 10. a note name starting with -

def test_a_note_name_starting_with_a_dash_needs_a_double_dash(env, tmp_path):
    """``notes -dash`` is 'No such option': the name was offered where the
    inserted command fails; after ``--`` it is what the command takes."""
    store = _store(tmp_path / "d", notes=("-dash", "plain"))
    _line, reply = bash_tab(env, f"memctl --store {store} notes ", "\t\t")
    assert sorted(set(reply)) == ["plain"]
    assert fish_complete(env, f"memctl --store {store} notes ") == ["plain"]
    assert [v for v, _h in zsh_complete(env, ["memctl", "--store", store, "notes", ""])] == ["plain"]
    assert [v for v, _h in zsh_complete(env, ["memctl", "--store", store, "edit", "note", ""])] \
        == ["plain"]
    line, _reply = bash_tab(env, f"memctl --store {store} notes -- -d")
    assert line == f"memctl --store {store} notes -- -dash "
    proc = subprocess.run([sys.executable, "-m", "lecode_memctl", *shlex.split(line)[1:]],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert sorted(fish_complete(env, f"memctl --store {store} notes -- ")) == ["-dash", "plain"]


# ------------------------------------------------- the bash script under set -u

@pytest.mark.parametrize("typed", ["memctl sea", "memctl zzz"])
def test_bash_script_works_under_nounset(env, tmp_path, typed):
    """An interactive shell with ``set -u``: no 'unbound variable' (an
    empty answer, memctl missing)."""
    line, _reply = bash_tab(env, typed, cwd=str(tmp_path), setup="set -u")
    assert line == ("memctl search " if typed == "memctl sea" else typed)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "memctl").write_text("#!/bin/sh\nexit 1\n")
    (broken / "memctl").chmod(0o755)
    e = dict(env, PATH=str(broken) + os.pathsep + env["PATH"])
    line, _reply = bash_tab(e, "memctl sea", cwd=str(tmp_path), setup="set -u")
    assert line == "memctl sea"


# ------------------------------------------------- the patches, applied again in one process

NEST_CHECK = """
import sys
from typer import _completion_classes
from lecode_memctl.cli.typer_patches import patch_for_completion
for _ in range(3):
    patch_for_completion()
for cls in (_completion_classes.ZshComplete, _completion_classes.FishComplete):
    original = getattr(cls.complete, "typer_original", None)
    assert original is not None and not hasattr(original, "typer_original"), cls
"""

ONE_REQUEST_CHECK = """
import sys
import typer.main
from typer import _completion_classes
from lecode_memctl.cli import completion
from lecode_memctl.cli.app import app
from lecode_memctl.cli.typer_patches import patch_for_completion
patch_for_completion()
store = sys.argv[1]
comp = _completion_classes.ZshComplete(typer.main.get_command(app), {}, "memctl", "_MEMCTL_COMPLETE")
assert comp.get_completions(["--store", store, "read"], "demo-alpha:") == []
assert completion.NO_FILES[0]
comp.get_completions(["--store", store, "notes"], "zzz")
assert not completion.NO_FILES[0]
"""


def test_patches_applied_twice_do_not_nest(env):
    """main() called again in one process (tests do) patches typer again: a
    wrapper around the previous wrapper grew the stack on every call until
    a RecursionError (an internal error, exit 70)."""
    proc = subprocess.run([sys.executable, "-c", NEST_CHECK], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_no_file_fallback_holds_for_one_request_only(env, tmp_path):
    """In one process, a request after SESSION: must not leave the next
    request without its fallback to files."""
    store = _store(tmp_path / "s")
    proc = subprocess.run([sys.executable, "-c", ONE_REQUEST_CHECK, store], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------- a code review of the fixes above

def test_the_bash_script_reads_an_older_memctl_s_answer_whole(env, tmp_path):
    """The shipped script with a memctl older than it (a pip install beside a
    clone's script): its answer has no head line, and the script dropped its
    first candidate (``memctl sea<TAB>`` completed nothing)."""
    old = tmp_path / "old"
    old.mkdir()
    (old / "memctl").write_text("#!/bin/sh\nprintf 'search\\n'\n")
    (old / "memctl").chmod(0o755)
    e = dict(env, PATH=str(old) + os.pathsep + env["PATH"])
    line, _reply = bash_tab(e, "memctl sea", cwd=str(tmp_path))
    assert line == "memctl search "


def test_zsh_sourced_by_its_bare_name_completes_nothing_on_load(env, tmp_path):
    """``cd completions; source _memctl``: funcstack held the bare name
    _memctl, which the fpath test took for autoloading, and a completion
    ran while the file was sourced ('bad math expression')."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    marker = tmp_path / "ran"
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "memctl").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    (spy / "memctl").chmod(0o755)
    e = dict(env, PATH=str(spy) + os.pathsep + env["PATH"])
    proc = subprocess.run(["zsh", "-f", "-c", "autoload -Uz compinit; compinit -u -D; "
                           "source _memctl"], cwd=str(REPO / "completions"), env=e,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert not marker.exists()


def test_an_unset_variable_is_nothing_as_the_shell_has_it(monkeypatch):
    from lecode_memctl.cli.completion import _expand_vars

    monkeypatch.setenv("MEMCTL_T_SET", "/a b")
    monkeypatch.delenv("MEMCTL_T_UNSET", raising=False)
    assert _expand_vars("$MEMCTL_T_SET/x") == "/a b/x"
    assert _expand_vars("${MEMCTL_T_SET}x") == "/a bx"
    assert _expand_vars("$MEMCTL_T_UNSET/x") == "/x"
    assert _expand_vars("$(touch /tmp/no)`id`") == "$(touch /tmp/no)`id`"


FAST_CHECK = """
import os, sys
from lecode_memctl.cli import completion
store = sys.argv[1]
completion.NO_FILES[0] = True          # as a request after SESSION: leaves it
env = {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl sea", "COMP_CWORD": "1",
       "COMP_LINE": "memctl sea", "_MEMCTL_BASH_HEAD": "memctl "}
text, code = completion.fast_complete(env)
assert text.splitlines()[0] == "default", text
"""


def test_the_fast_path_answers_each_request_with_its_own_fallback(env):
    proc = subprocess.run([sys.executable, "-c", FAST_CHECK, "x"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
