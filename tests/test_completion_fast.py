"""``completion.fast_complete`` answers a TAB on a command name or an option
name exactly as typer's completion classes do, without importing typer
(issue 13: a TAB costs no more than ``import typer``).

Every answer it gives is compared with typer's (``main()`` with the fast path
off) for bash, zsh and fish over generated command lines; when it declines,
typer answers, so only the answers it gives need to agree."""

from __future__ import annotations

import os
import subprocess
import sys
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.cli import completion, completion_table
from lecode_memctl.cli.main import main

KEYS = ("_MEMCTL_COMPLETE", "COMP_WORDS", "COMP_CWORD", "_TYPER_COMPLETE_ARGS",
        "_TYPER_COMPLETE_FISH_ACTION", "COMP_LINE", "_MEMCTL_BASH_HEAD")


_TREE: dict[str, object] = {}


def private_tree() -> object:
    """typer's click tree of the whole app, built once for this module and
    seen by no other test: the suite shares one built tree between tests
    (conftest), and click caches a command's help option on the command from
    the first context it is asked with, which a test may build by hand."""
    if "tree" not in _TREE:
        import typer.main

        from lecode_memctl.cli.app import build_app

        _TREE["tree"] = typer.main.get_group(build_app())
    return _TREE["tree"]


def by_typer(environ: dict[str, str]) -> tuple[str, int]:
    """What the console script prints (and its status) with the fast path off."""
    import typer.main
    from typer import _click, _completion_classes, core as typer_core
    from typer.testing import CliRunner

    runner = CliRunner()
    env = {k: environ.get(k) for k in KEYS}
    # main() patches typer for completion (cli/typer_patches.py) in this
    # process; put every patched attribute back (test_typer_patches checks them)
    patched = [(c, "process_value") for c in (_click.core.Parameter,
                                              getattr(typer_core, "_TyperParameter", None))
               if c is not None and "process_value" in c.__dict__]
    saved = [(obj, name, obj.__dict__[name]) for obj, name in patched]
    saved.append((_completion_classes, "_sanitize_help_text",
                  _completion_classes._sanitize_help_text))
    try:
        tree = private_tree()
        with mock.patch.object(completion, "fast_complete", lambda _env: None), \
                mock.patch.object(typer.main, "get_command", lambda _app: tree), \
                runner.isolation(env=env) as (out, _err, _mixed):
            try:
                code = main([])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0
            sys.stdout.flush()
            text = out.getvalue().decode("utf-8")
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
    return text, code


def by_fast_path(environ: dict[str, str]) -> tuple[str, int] | None:
    done = completion.fast_complete(environ)
    if done is None:
        return None
    text, code = done
    return ("" if text is None else text + "\n"), code


commands = [name for name, _help in completion_table.COMMANDS]
options = sorted({name for name, *_rest in completion_table.ROOT_OPTIONS}
                 | {name for entry in completion_table.COMMAND_OPTIONS.values()
                    for name in entry[3]})
words = st.one_of(
    st.sampled_from(options),
    st.sampled_from(options).map(lambda o: o[: max(1, len(o) - 2)]),
    st.sampled_from(commands + ["--", "-", "--=", "=", "--store=/x", "--color=al",
                                          "-Cdir", "auto", "/tmp/s", "x y", "s", "se", "--co",
                                          "-", "'", '"', "\\", "_x", ".", "1", "--no", ""]),
    st.sampled_from(commands).map(lambda c: c[: max(1, len(c) // 2)]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=6),
)


@st.composite
def requests(draw):
    shell = draw(st.sampled_from(["bash", "zsh", "fish"]))
    ws = draw(st.lists(words, max_size=5))
    line = " ".join(["memctl", *ws]) + draw(st.sampled_from(["", " "]))
    env = {"_MEMCTL_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env["COMP_WORDS"] = line
        env["COMP_CWORD"] = str(draw(st.integers(min_value=-1, max_value=len(ws) + 1)))
        if draw(st.booleans()):
            # the shipped script's request: the line up to the cursor, and
            # that line without readline's word (after the last blank, = or :)
            env["COMP_LINE"] = line
            cut = max(line.rfind(c) for c in " =:") + 1
            env["_MEMCTL_BASH_HEAD"] = line[:cut]
    else:
        env["_TYPER_COMPLETE_ARGS"] = line
        if shell == "fish":
            env["_TYPER_COMPLETE_FISH_ACTION"] = draw(st.sampled_from(["get-args", "is-args", ""]))
    return env


@pytest.mark.heavy
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_fast_path_answers_as_typer(env):
    fast = by_fast_path(env)
    if fast is not None:
        assert fast == by_typer(env), env


def test_fast_path_takes_the_common_requests():
    """The requests it exists for are answered by it (not left to typer)."""
    cases = [
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl s", "COMP_CWORD": "1"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl ", "COMP_CWORD": "1"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl --store /s f",
         "COMP_CWORD": "3"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl --no-color --", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl s"},
        {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl -C /p "},
        {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl s",
         "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
        {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl s",
         "_TYPER_COMPLETE_FISH_ACTION": "is-args"},
        {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl zz",
         "_TYPER_COMPLETE_FISH_ACTION": "is-args"},
        # a command's options, the global options after its name hidden
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl facts --", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl --store /s facts --json --f",
         "COMP_CWORD": "5"},
        {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl validate -q --"},
        {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl recall abc --",
         "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl sessions x", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl where -h", "COMP_CWORD": "2"},
    ]
    for env in cases:
        fast = by_fast_path(env)
        assert fast is not None, env
        assert fast == by_typer(env), env
    assert by_fast_path(cases[0])[0] == "show\nsearch\nsessions\nsecrets\nschema\n"


def test_fast_path_leaves_the_rest_to_typer():
    for env in (
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl facts --status ",
         "COMP_CWORD": "3"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl recall ab", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl facts -- -", "COMP_CWORD": "3"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl --store ", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl --help s", "COMP_CWORD": "2"},
        {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl --color=al"},
        {"_MEMCTL_COMPLETE": "source_bash"},
        {"_MEMCTL_COMPLETE": "complete_powershell", "_TYPER_COMPLETE_ARGS": "memctl s"},
        {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl s", "COMP_CWORD": "x"},
    ):
        assert completion.fast_complete(env) is None, env


def test_table_is_the_command_tree():
    """completion_table.py is what gen_docs.py generates now (gen_docs --check
    checks the file too; this names the stale part).  In a fresh interpreter,
    as gen_docs runs: click caches a command's help option on the command,
    built from the first context it is asked with."""
    scripts = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts")
    code = ("import sys\n"
            f"sys.path.insert(0, {scripts!r})\n"
            "import gen_docs\n"
            "sys.stdout.write(gen_docs.render_completion_table())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path = os.path.join(os.path.dirname(completion.__file__), "completion_table.py")
    with open(path, encoding="utf-8") as f:
        assert f.read() == r.stdout


def test_a_tab_on_a_command_name_imports_no_typer():
    env = dict(os.environ, _MEMCTL_COMPLETE="complete_bash", COMP_WORDS="memctl s",
               COMP_CWORD="1")
    code = ("import sys\nfrom lecode_memctl.cli.main import main\nrc = main([])\n"
            "sys.stderr.write(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('typer', 'click', 'rich', 'tabulate', 'sqlite3'))))\nsys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "show\nsearch\nsessions\nsecrets\nschema\n"
    assert r.stderr == ""
