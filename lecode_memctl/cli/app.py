"""The typer command tree: the global options, and every command of
:data:`registry.COMMANDS` registered in its order.  Command modules do not
import this module; they mark their functions with ``registry.command``.

Keep the imports at the top of this module and of every ``cmd_*`` module cheap:
typer and the standard library only.  Commands import rich, tabulate, sqlite3
and the heavier core modules inside their bodies, so that ``--version`` and
every TAB of shell completion stay fast.
"""


from typing import Annotated

import typer

from lecode_memctl import __version__
from lecode_memctl.core.errors import exit_summary

from .options import ColorWhen, CommandWithGlobalOptions
from .registry import COMMANDS, command_settings
from .state import STATE, path_option

HELP = """\
Inspect, audit and repair lecode's persistent memory from a shell.

lecode keeps, per project, Markdown notes, JSONL session transcripts and a
SQLite database of facts, each fact revision linked to the exact transcript
messages that justify it.  memctl works on that store directly, without the
agent running: read commands never change a byte of it.

The store of a project lives in <config dir>/memory/<slug>/, where the config
dir is --config-dir, $LECODE_CONFIG_DIR, $XDG_CONFIG_HOME/lecode or
~/.config/lecode, and the slug is derived from the project's main checkout
root.  Run 'memctl where' to see it.

The options below, except --version, may also follow the command name (memctl
forget ID --no-color); there they win over the same option given before it.
"""

EPILOG = f"""\
\b
Examples:
  memctl where                  which store this directory uses
  memctl --project ~/src/app show
  memctl --store /evidence/copy-of-store notes

{exit_summary()}  See 'man memctl' for the whole manual.
"""

def _version(value: bool) -> None:
    if value:
        typer.echo(f"memctl {__version__}")
        raise typer.Exit(0)


def root(
    config_dir: Annotated[str | None, typer.Option(  # str: "" must stay "" (Path("") is ".")
        "--config-dir", metavar="DIR",
        help="lecode's config directory (default: $LECODE_CONFIG_DIR, "
             "$XDG_CONFIG_HOME/lecode, ~/.config/lecode, a relative one from the current "
             "directory; empty: the default, as an empty $LECODE_CONFIG_DIR).")] = None,
    project: Annotated[str | None, typer.Option(  # str: "" is refused, not "." (Path(""))
        "--project", "-C", metavar="PATH",
        help="Work on the project that contains PATH (default: the current directory).")] = None,
    store: Annotated[str | None, typer.Option(  # str: "" is refused, not "."
        "--store", metavar="DIR",
        help="Work on a store directory directly (an evidence copy, say), skipping "
             "project identity.")] = None,
    slug: Annotated[str | None, typer.Option(
        "--slug", metavar="SLUG",
        help="With --store: the project slug its transcripts must name (default: the one "
             "their headers agree on, else the directory name; 'memctl where' says which).")] = None,
    no_color: Annotated[bool, typer.Option(
        "--no-color", help="No colour in output (also: the NO_COLOR environment variable, "
                           "when set and not empty).")] = False,
    color: Annotated[ColorWhen | None, typer.Option(
        "--color", metavar="WHEN",
        help="Colour: auto (on a terminal, unless NO_COLOR is set and not empty; a "
             "FORCE_COLOR set and not empty forces it), "
             "always or never (default: auto).")] = None,
    no_state: Annotated[bool, typer.Option(
        "--no-state", help="Write nothing outside the store either: do not record the "
                           "exclusion generation seen (kept in $XDG_STATE_HOME/lecode-memctl, "
                           "or ~/.local/state/lecode-memctl, to detect a rolled-back forget).")] = False,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")] = False,
) -> None:
    STATE.config_dir_option = config_dir or None
    STATE.project = path_option("--project", project)
    STATE.store_option = path_option("--store", store)
    STATE.slug_option = slug
    STATE.no_color = no_color
    STATE.color_mode = color.value if color is not None else "auto"
    STATE.no_state = no_state


def build_app(only: str | None = None) -> typer.Typer:
    """The command tree: the global options, and every command of the table
    in its order (the order --help lists them in); with ``only``, that one
    command alone (``main()`` runs a command this way: only its module is
    imported and only its click command is built)."""
    from importlib import import_module

    tree = typer.Typer(
        name="memctl",
        help=HELP,
        epilog=EPILOG,
        add_completion=False,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 88},
    )
    tree.callback()(root)
    for name, module, function in COMMANDS:
        if only is not None and name != only:
            continue
        fn = getattr(import_module(f"{__package__}.{module}"), function)
        tree.command(name, cls=CommandWithGlobalOptions, **command_settings(fn))(fn)
    return tree


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole tree, built on first use (the man page, completion
    and the tests use it; a command run builds only its own, see main)."""
    if name == "app":
        tree = build_app()
        globals()["app"] = tree
        return tree
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
