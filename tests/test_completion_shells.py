"""Shell completion driven through real shells (bash, zsh, fish) with the
shipped scripts, on values that need quoting: note names with spaces, quotes
and ``$``, finding codes with ``*``, and ``--opt=value`` words.

``memctl`` on PATH is a wrapper that runs ``python -m lecode_memctl`` of this
checkout.  Each test skips when its shell is missing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

NOTES = ("my note", "odd'quote$x", "a  b", "plain", 'dq"x')


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "memctl"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m lecode_memctl "$@"\n')
    wrapper.chmod(0o755)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("_MEMCTL", "_TYPER", "COMP_"))}
    e["PATH"] = str(bindir) + os.pathsep + e.get("PATH", "")
    e["PYTHONPATH"] = str(REPO)
    e["HOME"] = str(tmp_path / "home")
    e["LECODE_CONFIG_DIR"] = str(tmp_path / "config")
    (tmp_path / "home").mkdir(exist_ok=True)
    return e


@pytest.fixture
def store(tmp_path) -> str:
    s = tmp_path / "store"
    (s / "notes").mkdir(parents=True)
    (s / "daily").mkdir()
    for n in NOTES:
        (s / "notes" / f"{n}.md").write_text("x\n")
    (s / "daily" / "2026-01-02.md").write_text("x\n")
    return str(s)


# ---------------------------------------------------------------- bash

def bash_complete(env: dict[str, str], words: list[str], cwd: str | None = None) -> list[str]:
    """COMPREPLY of the shipped bash script for COMP_WORDS=WORDS (the last one
    under the cursor), split as bash splits (``=`` is a word of its own)."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    # the line as typed: a "=" word (bash's split at COMP_WORDBREAKS) glued
    # to its neighbours
    line = " ".join(words).replace(" = ", "=")
    if line.endswith(" ="):
        line = line[:-2] + "="
    script = (
        'source "$1"; shift\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))\n'
        f'COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}\n'
        # $2 is readline's word: empty right after a "=" (COMP_WORDS has "=")
        'w=${COMP_WORDS[COMP_CWORD]}; [[ $w == = ]] && w=\n'
        '_memctl_completion memctl "$w" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "<%s>\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash",
                           str(REPO / "completions" / "memctl.bash"), *words],
                          capture_output=True, text=True, env=env, timeout=20, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [ln[1:-1] for ln in proc.stdout.splitlines() if ln != "<>"]


def as_words(reply: list[str]) -> list[str]:
    """Each candidate as the shell reads it once inserted: exactly one word."""
    out = []
    for r in reply:
        words = shlex.split(r)
        assert len(words) == 1, f"{r!r} is inserted as {len(words)} shell words"
        out.append(words[0])
    return out


def test_bash_quotes_a_note_name_with_a_space(env, store):
    reply = bash_complete(env, ["memctl", "--store", store, "notes", "my"])
    assert as_words(reply) == ["my note"]


def test_bash_quotes_a_note_name_with_a_quote_and_a_dollar(env, store):
    reply = bash_complete(env, ["memctl", "--store", store, "notes", "odd"])
    assert as_words(reply) == ["odd'quote$x"]


def test_bash_keeps_repeated_spaces(env, store):
    reply = bash_complete(env, ["memctl", "--store", store, "notes", "a"])
    assert as_words(reply) == ["a  b"]


def test_bash_does_not_glob_candidates(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "layout.a").write_text("")
    (work / "layout.b").write_text("")
    reply = bash_complete(env, ["memctl", "validate", "--ignore", "layout."], cwd=str(work))
    got = as_words(reply)
    assert "layout.*" in got
    assert "layout.a" not in got and "layout.b" not in got


# ---------------------------------------------------------------- zsh

def zsh_complete(env: dict[str, str], words: list[str]) -> list[tuple[str, str]]:
    """(value, help) pairs the shipped zsh script hands to _arguments for
    words=WORDS (the last one under the cursor), read the way _arguments reads
    a ``((value\\:help ...))`` action: the inside is eval'ed as an array."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    script = (
        "autoload -Uz compinit && compinit -u -D\n"
        'source "$1"; shift\n'
        "_arguments() {\n"
        "  local spec=$1 inner; local -a ws\n"
        "  inner=${spec#'*: :(('}; inner=${inner%'))'}\n"
        '  eval "ws=( $inner )"\n'
        '  print -rl -- "${ws[@]/#/<}"\n'
        "}\n"
        "_files() { print -r -- files }\n"
        'words=("$@"); CURRENT=$#\n'
        "_memctl_completion\n"
    )
    proc = subprocess.run(["zsh", "-f", "-c", script, "zsh", str(REPO / "completions" / "_memctl"),
                           *words], capture_output=True, text=True, env=env, timeout=20)
    assert proc.returncode == 0, proc.stderr
    out = []
    for item in proc.stdout.split("\n<")[0:]:
        item = item.removeprefix("<").rstrip("\n")
        if not item or item == "files":
            continue
        # _arguments reads \\X as X (\\: is a colon that does not end the value)
        parts = [re.sub(r"\\(.)", r"\1", p) for p in _split_unescaped_colon(item)]
        out.append((parts[0], parts[1] if len(parts) > 1 else ""))
    return out


def _split_unescaped_colon(item: str) -> list[str]:
    return re.split(r"(?<!\\):", item, maxsplit=1)


def test_zsh_completes_a_note_name_with_a_quote_and_a_dollar(env, store):
    got = zsh_complete(env, ["memctl", "--store", store, "notes", "odd"])
    assert [v for v, _h in got] == ["odd'quote$x"]


def test_zsh_keeps_a_double_quote(env, store):
    """typer doubles a ``"``, which the double-quoted word _arguments evals
    reads as nothing: ``dq"x`` was offered as ``dqx`` (no such note)."""
    got = zsh_complete(env, ["memctl", "--store", store, "notes", "dq"])
    assert [v for v, _h in got] == ['dq"x']


def test_zsh_escape_survives_zshs_own_reading():
    """Each escaped text, put where typer's script puts it and read by zsh as
    _arguments reads it, is the text again (a backslash at the end included,
    which ate the closing quote)."""
    import subprocess

    from lecode_memctl.cli.completion import zsh_escape

    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    texts = ['a"b', "end\\", "back\\slash", "it's", "$HOME", "`x`", "a:b", 'mix"\\\'$:`']
    inner = " ".join(f'"{zsh_escape(t)}"' for t in texts)
    script = f"spec='*: :(({inner}))'\n" + (
        "inner=${spec#'*: :(('}; inner=${inner%'))'}\n"
        'eval "ws=( $inner )"\nprint -rl -- "${ws[@]}"\n')
    proc = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    # then _arguments removes one more level of backslashes (\\: is a colon)
    got = [re.sub(r"\\(.)", r"\1", w) for w in proc.stdout.split("\n")[:len(texts)]]
    assert got == texts


def test_zsh_keeps_repeated_spaces(env, store):
    got = zsh_complete(env, ["memctl", "--store", store, "notes", "a"])
    assert [v for v, _h in got] == ["a  b"]


@pytest.mark.parametrize("words", [["memctl", "--config-d"], ["memctl", "--help", "--config-d"]],
                         ids=["fast", "typer"])
def test_zsh_help_texts_keep_their_apostrophes(env, words):
    helps = [h for _v, h in zsh_complete(env, words)]
    assert any("'" in h for h in helps), helps


# ---------------------------------------------------------------- edit's words

@pytest.mark.parametrize(("typed", "expected"), [
    ([""], ["memory", "scratchpad", "log", "note"]),
    (["note", ""], sorted(NOTES)),
    (["note", "pl"], ["plain"]),
    (["log", ""], ["2026-01-02"]),
    (["memory", ""], []),
    (["note", "plain", ""], []),
], ids=["kind", "note", "note-prefix", "log", "memory", "after-name"])
def test_bash_edit_completes_the_word_after_its_kind(env, store, typed, expected):
    reply = bash_complete(env, ["memctl", "--store", store, "edit", *typed])
    assert as_words(reply) == expected


# ---------------------------------------------------------------- --opt=value in bash

@pytest.mark.parametrize(("words", "expected"), [
    (["--color", "=", "al"], ["always"]),
    (["--color", "="], ["auto", "always", "never"]),
    (["facts", "--format", "=", "js"], ["json", "jsonl"]),
    (["--color", "=", "never", "facts", "--format", "=", "js"], ["json", "jsonl"]),
], ids=["root", "right-after-equals", "command", "after-another"])
def test_bash_completes_the_value_after_an_equals_sign(env, tmp_path, words, expected):
    """bash splits ``--color=al`` at ``=`` (COMP_WORDBREAKS): COMP_WORDS is
    ``--color``, ``=``, ``al``; the candidate replaces ``al`` only."""
    reply = bash_complete(env, ["memctl", *words])
    assert as_words(reply) == expected


def test_bash_completes_a_session_after_an_equals_sign(env, tmp_path):
    store = tmp_path / "sstore"
    (store / "sessions").mkdir(parents=True)
    for sid in ("demo-a", "demo-b1", "demo-b2"):
        (store / "sessions" / f"{sid}.jsonl").write_text("")
    reply = bash_complete(env, ["memctl", "--store", "=", str(store), "facts", "--session", "=",
                                "demo-b"])
    assert as_words(reply) == ["demo-b1", "demo-b2"]


# ---------------------------------------------------------------- ~ in the store options

def _where_store(env: dict[str, str], *root_options: str) -> str:
    import json

    proc = subprocess.run([sys.executable, "-m", "lecode_memctl", *root_options, "where", "--json"],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["store"]


@pytest.mark.parametrize("option", ["--store", "--config-dir", "-C", "--project"])
def test_bash_expands_a_leading_tilde_in_the_store_options(env, option):
    home = env["HOME"]
    target = {"--store": "store", "--config-dir": "cfg"}.get(option, "proj")
    os.makedirs(os.path.join(home, target), exist_ok=True)
    if option == "--store":
        store = os.path.join(home, "store")
    else:
        store = _where_store(env, option, os.path.join(home, target))
    os.makedirs(os.path.join(store, "notes"), exist_ok=True)
    with open(os.path.join(store, "notes", "tilde note.md"), "w") as f:
        f.write("x\n")
    reply = bash_complete(env, ["memctl", option, f"~/{target}", "notes", "til"])
    assert as_words(reply) == ["tilde note"]


# ---------------------------------------------------------------- option values

@pytest.mark.parametrize(("words", "expected"), [
    (["search", "--format", "js"], ["json", "jsonl"]),
    (["search", "--format", "te"], ["text"]),
    (["migrate-legacy", "--format", "t"], ["text", "table", "tsv"]),
    (["grep", "--purpose", ""], ["working", "durable"]),
    (["redact", "--detector", "aws"], ["aws-access-key"]),
], ids=["search-format", "search-text", "migrate-format", "grep-purpose", "redact-detector"])
def test_bash_completes_option_values(env, tmp_path, words, expected):
    work = tmp_path / "empty"
    work.mkdir()
    (work / "json-file").write_text("")   # what a fallback to file names would show
    reply = bash_complete(env, ["memctl", *words], cwd=str(work))
    assert as_words(reply) == expected


# ---------------------------------------------------------------- fish

def fish_complete(env: dict[str, str], line: str) -> list[str]:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    e = dict(env)
    e["XDG_CONFIG_HOME"] = os.path.join(env["HOME"], ".config")
    e["XDG_DATA_HOME"] = os.path.join(env["HOME"], ".local", "share")
    proc = subprocess.run(["fish", "--no-config", "-c", "source $argv[1]; complete -C$argv[2]",
                           str(REPO / "completions" / "memctl.fish"), line],
                          capture_output=True, text=True, env=e, timeout=20)
    assert proc.returncode == 0, proc.stderr
    return [ln.split("\t")[0] for ln in proc.stdout.splitlines() if ln]


def test_fish_completes_note_names_that_need_quoting(env, store):
    for typed, name in (("my", "my note"), ("odd", "odd'quote$x"), ("a", "a  b")):
        assert fish_complete(env, f"memctl --store {store} notes {typed}") == [name]


# ---------------------------------------------------------------- --opt=value in zsh and fish

def test_zsh_completes_the_value_after_an_equals_sign(env):
    """zsh matches candidates against the whole word: --color=al."""
    got = zsh_complete(env, ["memctl", "--color=al"])
    assert [v for v, _h in got] == ["--color=always"]


def test_fish_completes_the_value_after_an_equals_sign(env):
    assert fish_complete(env, "memctl --color=al") == ["--color=always"]
    assert fish_complete(env, "memctl facts --format=js") == ["--format=json", "--format=jsonl"]


@pytest.mark.parametrize("quote", ["'", '"'])
@pytest.mark.parametrize("name", ["odd'quote$x", "my note"])
def test_bash_escapes_a_candidate_inside_an_open_quote(env, store, quote, name):
    """After an opening quote readline inserts the candidate inside it and
    closes the quote: each candidate is escaped for that quote."""
    reply = bash_complete(env, ["memctl", "--store", store, "notes", quote + name[:3]])
    assert len(reply) == 1
    # what bash reads of the line once the candidate is in (x unset)
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                           'unset x; eval "set -- $1" || exit 3; printf "%s\\n" "$#" "$1"', "bash",
                           quote + reply[0] + quote], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"1\n{name}\n"
