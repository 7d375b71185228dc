"""The typer command tree.  Each ``cmd_*`` module adds its commands to ``app``.

Keep the imports at the top of this module and of every ``cmd_*`` module cheap:
typer and the standard library only.  Commands import rich, tabulate, sqlite3
and the heavier core modules inside their bodies, so that ``--version`` and
every TAB of shell completion stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from lecode_memctl import __version__

from .options import ColorWhen
from .state import STATE

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
"""

EPILOG = """\
\b
Examples:
  memctl where                  which store this directory uses
  memctl --project ~/src/app show
  memctl --store /evidence/copy-of-store notes

Exit status: 0 ok, 1 validate found problems (or a prompt was declined),
2 usage, 3 not found, 4 conflict, 5 store unreadable, 6 store busy,
7 write failed, 70 internal error.  See 'man memctl' for the whole manual.
"""

app = typer.Typer(
    name="memctl",
    help=HELP,
    epilog=EPILOG,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 88},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    config_dir: Annotated[Optional[Path], typer.Option(
        "--config-dir", metavar="DIR",
        help="lecode's config directory (default: $LECODE_CONFIG_DIR, "
             "$XDG_CONFIG_HOME/lecode, ~/.config/lecode).")] = None,
    project: Annotated[Optional[Path], typer.Option(
        "--project", "-C", metavar="PATH",
        help="Work on the project that contains PATH (default: the current directory).")] = None,
    store: Annotated[Optional[Path], typer.Option(
        "--store", metavar="DIR",
        help="Work on a store directory directly (an evidence copy, say), skipping "
             "project identity.")] = None,
    no_color: Annotated[bool, typer.Option(
        "--no-color", help="No colour in output (also: the NO_COLOR environment variable).")] = False,
    color: Annotated[ColorWhen, typer.Option(
        "--color", metavar="WHEN",
        help="Colour: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), "
             "always or never.")] = ColorWhen.auto,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")] = False,
) -> None:
    STATE.config_dir_option = str(config_dir) if config_dir else None
    STATE.project = str(project) if project else None
    STATE.store_option = str(store) if store else None
    STATE.no_color = no_color
    STATE.color_mode = color.value


# Command modules register themselves on import, and --help lists the commands
# in that order: finding a store, Markdown, transcripts, facts, audit,
# migration, the demo.
from . import cmd_store  # noqa: E402,F401,I001
from . import cmd_markdown  # noqa: E402,F401
from . import cmd_sessions  # noqa: E402,F401
from . import cmd_facts  # noqa: E402,F401
from . import cmd_audit  # noqa: E402,F401
from . import cmd_migrate  # noqa: E402,F401
from . import cmd_demo  # noqa: E402,F401
