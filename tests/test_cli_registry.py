"""The CLI's structure: command modules do not import the app (the app
registers the table of registry.COMMANDS), one completion module finds the
store one way, and the exit-status table comes from the error classes."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys

import pytest

import lecode_memctl.cli as cli_pkg
from lecode_memctl.cli.registry import COMMANDS, SETTINGS_ATTR

from .conftest import REPO, run_cli

CLI_DIR = REPO / "lecode_memctl" / "cli"
CMD_MODULES = sorted(m.name for m in pkgutil.iter_modules(cli_pkg.__path__)
                     if m.name.startswith("cmd_"))


def _imports(path) -> set[str]:  # noqa: ANN001
    """Every module a file imports, relative ones as '.name'."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out.add(base)
            if node.module is None:
                out.update("." * node.level + a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("module", CMD_MODULES)
def test_command_modules_do_not_import_the_app(module):
    imports = _imports(CLI_DIR / f"{module}.py")
    assert not imports & {".app", "lecode_memctl.cli.app"}, imports
    probe = (f"import sys; import lecode_memctl.cli.{module}; "
             "print('lecode_memctl.cli.app' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_every_marked_command_is_in_the_table_and_back():
    marked = set()
    for module in CMD_MODULES:
        mod = importlib.import_module(f"lecode_memctl.cli.{module}")
        for name, fn in vars(mod).items():
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ \
                    and hasattr(fn, SETTINGS_ATTR):
                marked.add((module, name))
    table = {(module, function) for _, module, function in COMMANDS}
    assert marked == table
    names = [name for name, _, _ in COMMANDS]
    assert len(names) == len(set(names))


def test_help_lists_the_commands_in_table_order():
    import typer
    from typer import _click

    from lecode_memctl.cli.app import app

    group = typer.main.get_command(app)
    ctx = _click.Context(group, info_name="memctl")
    assert list(group.list_commands(ctx)) == [name for name, _, _ in COMMANDS]
    out = "\n" + run_cli("--help").stdout.split("\nCommands:\n", 1)[1]
    positions = [out.index(f"\n  {name} ") for name, _, _ in COMMANDS]
    assert positions == sorted(positions)


def test_command_settings_reach_typer():
    """The epilog given to @command is the one --help prints."""
    from lecode_memctl.cli.cmd_store import where

    epilog = getattr(where, SETTINGS_ATTR)["epilog"]
    first_example = next(line for line in epilog.splitlines() if "memctl where" in line)
    assert first_example.strip() in run_cli("where", "--help").stdout


def test_unmarked_function_in_the_table_is_a_clear_error():
    from lecode_memctl.cli.registry import command, command_settings

    def plain() -> None: ...

    with pytest.raises(TypeError, match="not marked with @command"):
        command_settings(plain)
    assert command_settings(command(epilog="x")(plain)) == {"epilog": "x"}


# ------------------------------------------------------------------ completion

def test_completers_live_in_one_module():
    """No command module defines a completer; all come from cli/completion.py."""
    import lecode_memctl.cli.completion as completion

    used = set()
    for module in CMD_MODULES:
        src = (CLI_DIR / f"{module}.py").read_text()
        defined = [n.name for n in ast.walk(ast.parse(src))
                   if isinstance(n, ast.FunctionDef) and "complete" in n.name]
        assert defined == [], (module, defined)
        used.update(re.findall(r"autocompletion=(\w+)", src))
    assert used and all(hasattr(completion, name) for name in used), used


class _Ctx:
    def __init__(self, params, parent=None):  # noqa: ANN001
        self.params = params
        self.parent = parent


def test_store_from_context_reads_root_and_command_options(tmp_path, config_dir):
    from lecode_memctl.cli.completion import store_from_context

    a, b = tmp_path / "a", tmp_path / "b"
    root = _Ctx({"store": str(a), "config_dir": None, "project": None})
    assert store_from_context(_Ctx({}, root)).path == a
    # a value given after the command name wins over one given before it
    assert store_from_context(_Ctx({"store": str(b)}, root)).path == b
    # without --store: the project's store under the config dir
    proj = tmp_path / "proj"
    proj.mkdir()
    cfg = tmp_path / "cfg"
    st = store_from_context(_Ctx({}, _Ctx({"config_dir": str(cfg), "project": str(proj)})))
    assert st.path.parent == cfg / "memory"
    # the environment's config dir when none is given
    st = store_from_context(_Ctx({"project": str(proj)}))
    assert st.path.parent == config_dir / "memory"


# ------------------------------------------------------------------ exit table

def test_exit_table_is_generated_from_the_error_classes():
    from lecode_memctl.core import errors

    table = dict(errors.EXIT_CODES)
    assert [c for c, _ in errors.EXIT_CODES] == sorted(table)
    for cls in errors.ERROR_CLASSES:
        assert table[cls.exit_code] == f"{cls.label}: {cls.meaning}"
    assert {0, 1, 70, 129, 130, 141, 143} <= set(table)
    assert set(table) == {c.exit_code for c in errors.ERROR_CLASSES} | {0, 1, 70, 129, 130, 141, 143}


def _all_subclasses(cls):  # noqa: ANN001, ANN202
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def test_every_error_class_has_a_documented_exit_status():
    from lecode_memctl.core import errors

    for name in ("audit", "facts", "markdown", "migrate", "sessions", "usage", "layout"):
        importlib.import_module(f"lecode_memctl.core.{name}")
    documented = {c for c, _ in errors.EXIT_CODES}
    for sub in _all_subclasses(errors.MemctlError):
        assert sub.exit_code in documented, sub


def test_help_epilog_shows_the_generated_summary():
    from lecode_memctl.core.errors import exit_summary

    out = " ".join(run_cli("--help").stdout.split())
    assert exit_summary() in out


def test_the_summary_of_status_1_names_every_command_that_gives_it():
    """The short label of exit 1 in ``memctl --help`` named validate,
    secrets, verify and grep, not redact, whose help, the README and the
    man page give 1 for a value it left."""
    from lecode_memctl.core.errors import EXIT_PROBLEMS, EXIT_STATUSES

    (one,) = [s for s in EXIT_STATUSES if s.code == EXIT_PROBLEMS]
    for command in ("validate", "secrets", "verify", "grep", "redact"):
        assert command in one.label and command in one.meaning, command


def test_main_has_no_exit_status_literals():
    """main.py reports every error with a status from core/errors.py (its one
    other number, the collector's threshold, is a named constant)."""
    tree = ast.parse((CLI_DIR / "main.py").read_text())
    named = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and [getattr(t, "id", None) for t in n.targets] == ["GC_THRESHOLD"]]
    assert len(named) == 1
    skip = {id(n) for n in ast.walk(named[0])}
    literals = [n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1
                and id(n) not in skip]
    assert literals == []


def test_gen_docs_uses_the_table():
    text = (REPO / "scripts" / "gen_docs.py").read_text()
    assert "130" not in text and "141" not in text
