"""Global options are also accepted after the command name (issue 12.4):
``memctl forget ID --no-color`` used to be 'No such option'."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.cli.registry import COMMANDS

from .conftest import run_cli, run_proc


def where(*args: str) -> dict:
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout_bytes)


def test_store_after_the_command(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert where("where", "--json", "--store", str(a))["store"] == str(a)
    # given after the command name, it wins over the one given before it
    assert where("--store", str(a), "where", "--store", str(b), "--json")["store"] == str(b)


def test_project_and_config_dir_after_the_command(tmp_path):
    proj, cfg = tmp_path / "proj", tmp_path / "cfg"
    proj.mkdir()
    doc = where("where", "--json", "-C", str(proj), "--config-dir", str(cfg))
    assert doc["root"] == str(proj)
    assert doc["config_dir"] == str(cfg) and doc["store"].startswith(str(cfg / "memory"))
    doc = where("--project", str(tmp_path), "where", "--json", "--project", str(proj))
    assert doc["root"] == str(proj)


def test_no_color_after_the_command_is_accepted(tmp_path):
    r = run_cli("--store", str(tmp_path), "forget", "0123456789abcdef", "--no-color", "--dry-run")
    assert "No such option" not in r.stderr
    assert r.exit_code == 3 and "no fact 0123456789abcdef" in r.stderr


def test_no_color_after_the_command_reaches_the_state(tmp_path, monkeypatch):
    from lecode_memctl.cli import state

    assert run_cli("--store", str(tmp_path), "where").exit_code == 0
    assert state.STATE.no_color is False and state.STATE.color()
    assert run_cli("--store", str(tmp_path), "where", "--no-color").exit_code == 0
    assert state.STATE.no_color is True and not state.STATE.color()


@pytest.mark.parametrize("name", [n for n, _, _ in COMMANDS])
def test_every_command_accepts_them_and_does_not_list_them(name):
    r = run_cli(name, "--no-color", "--help")
    assert r.exit_code == 0, r.stderr
    # listed once, in memctl --help, not in every command's help
    assert "--no-color" not in r.stdout and "--config-dir" not in r.stdout
    assert "--no-color" in run_cli("--help").stdout


def test_a_command_option_of_the_same_name_stays_the_commands():
    """validate has its own --store (documented in its help): still there."""
    assert "Audit this store directory" in run_cli("validate", "--help").stdout


def test_version_is_not_a_command_option():
    r = run_cli("where", "--version")
    assert r.exit_code == 2 and "No such option" in r.stderr


def test_completion_uses_a_store_given_after_the_command(tmp_path):
    store = tmp_path / "st"
    (store / "sessions").mkdir(parents=True)
    for sid in ("alpha-1", "beta"):
        (store / "sessions" / f"{sid}.jsonl").write_bytes(b"")
    line = f"memctl read --store {store} al"
    r = run_proc(env={"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": line,
                      "COMP_CWORD": str(len(line.split()) - 1)}, cwd=os.fspath(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["alpha-1"]


@pytest.mark.parametrize("name", [n for n, _, _ in COMMANDS])
def test_every_long_global_flag_follows_every_command(name, tmp_path):
    """A command's own short flag (grep's -C, its context) does not take the
    global option's long flag with it: before 2026-12-07 'grep PATTERN
    --project DIR' was exit 2, "No such option: --project"."""
    values = {"--config-dir": str(tmp_path), "--project": str(tmp_path), "--store": str(tmp_path),
              "--slug": "demo-0123456789ab", "--color": "never"}
    own_help = run_cli(name, "--help").stdout
    for flag in ("--config-dir", "--project", "--store", "--slug", "--no-color", "--color",
                 "--no-state"):
        if f"{flag} " in own_help or f"{flag}," in own_help or own_help.rstrip().endswith(flag):
            continue  # the command's own option of that name (validate --store)
        args = [flag, values[flag]] if flag in values else [flag]
        r = run_cli(name, *args, "--help")
        assert r.exit_code == 0, (flag, r.stderr)


def test_project_after_grep_is_the_project_and_C_its_context(tmp_path):
    r = run_cli("grep", "anything", "--project", str(tmp_path), "--json")
    assert "No such option" not in r.stderr, r.stderr
    assert r.exit_code in (0, 1, 3), r.stderr
    r = run_cli("grep", "anything", "-C", "x")
    assert r.exit_code == 2 and "'--context' / '-C'" in r.stderr, r.stderr


def test_colour_given_after_the_command_wins_over_no_colour_before_it(tmp_path):
    """A fresh-eyes review: 'memctl --no-color facts --color always' printed
    no colour, though an option after the command wins over one before."""
    from lecode_memctl.cli import state

    assert run_cli("--store", str(tmp_path), "--no-color", "where", "--color", "always",
                   "--json").exit_code == 0
    assert state.STATE.color_mode == "always" and not state.STATE.no_color
    assert state.STATE.color()
    assert run_cli("--store", str(tmp_path), "--color", "always", "where", "--no-color",
                   "--json").exit_code == 0
    assert not state.STATE.color()
    assert run_cli("--store", str(tmp_path), "--no-color", "where", "--json").exit_code == 0
    assert not state.STATE.color()


@pytest.mark.parametrize(("argv", "where"), [(["--json", "facts"], "'memctl facts --json'"),
                                             (["--dry-run", "forget", "x"],
                                              "'memctl forget --dry-run'")])
def test_a_command_s_option_before_the_command_says_where_it_goes(argv, where):
    """A fresh-eyes review: 'memctl --json facts' answered "No such option:
    --json (Possible options: --store, --version)", as if it were a typo."""
    r = run_cli(*argv)
    assert r.exit_code == 2
    assert f"give it after its name, as in {where}" in r.stderr, r.stderr
    assert "Possible options" not in r.stderr
    r = run_cli("--bogus-option", "facts")
    assert r.exit_code == 2 and "give it after" not in r.stderr
    # the command typed, with the option's value; or that it does not take it
    r = run_cli("--limit", "5", "facts")
    assert "as in 'memctl facts --limit 5'" in r.stderr, r.stderr
    r = run_cli("-n", "facts")
    assert "facts takes no -n (" in r.stderr, r.stderr


def test_the_command_typed_is_found_past_a_global_option_s_value():
    """A code review: '--config-dir config --limit 5 facts' took the value
    'config' for the command ('config takes no --limit')."""
    r = run_cli("--config-dir", "config", "--limit", "5", "facts")
    assert "as in 'memctl facts --limit 5'" in r.stderr, r.stderr
    r = run_cli("--slug", "log", "-n", "3", "facts")
    assert "facts takes no -n" in r.stderr, r.stderr


def test_the_command_typed_after_a_double_dash_or_past_the_option_s_own_value():
    r = run_cli("--json", "--", "where")
    assert "as in 'memctl where --json'" in r.stderr, r.stderr
    r = run_cli("--session", "notes", "facts")
    assert "as in 'memctl facts --session notes'" in r.stderr, r.stderr
