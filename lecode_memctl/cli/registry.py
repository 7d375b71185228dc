"""Which commands memctl has, in which module, and how a module declares one.

A ``cmd_*`` module marks each command function with :func:`command` (the
keyword arguments of ``typer.Typer.command``, such as ``epilog``) and imports
nothing of the app; ``cli/app.py`` walks :data:`COMMANDS` and registers each
function.  So no command module imports the app back, and a later change can
import only the module of the command being run: the table names it without
importing it.

Keep this module cheap to import: the standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute :func:`command` sets on a command function.
SETTINGS_ATTR = "__memctl_command__"

#: (command name, module in lecode_memctl.cli, function) in the order
#: ``memctl --help`` lists them -- the workflow order: finding a store,
#: Markdown, transcripts, facts, audit, migration, the demo.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("where", "cmd_store", "where"),
    ("config", "cmd_store", "config"),
    ("show", "cmd_markdown", "show"),
    ("log", "cmd_markdown", "log"),
    ("notes", "cmd_markdown", "notes"),
    ("search", "cmd_markdown", "search"),
    ("edit", "cmd_markdown", "edit"),
    ("sessions", "cmd_sessions", "sessions"),
    ("read", "cmd_sessions", "read"),
    ("facts", "cmd_facts", "facts"),
    ("recall", "cmd_facts", "recall"),
    ("history", "cmd_facts", "history"),
    ("correct", "cmd_facts", "correct"),
    ("forget", "cmd_facts", "forget"),
    ("context", "cmd_facts", "context"),
    ("validate", "cmd_audit", "validate"),
    ("usage", "cmd_audit", "usage"),
    ("projects", "cmd_audit", "projects"),
    ("grep", "cmd_forensics", "grep"),
    ("secrets", "cmd_forensics", "secrets"),
    ("redact", "cmd_forensics", "redact"),
    ("export", "cmd_bundle", "export"),
    ("verify", "cmd_bundle", "verify"),
    ("migrate-legacy", "cmd_migrate", "migrate_legacy"),
    ("demo", "cmd_demo", "demo"),
    ("schema", "cmd_store", "schema"),
    ("completion", "cmd_store", "completion"),
    ("man", "cmd_store", "man_page"),
)


def command(**settings: Any) -> Callable[[F], F]:
    """Mark a function as a memctl command; ``settings`` go to ``Typer.command``.

    The function is returned unchanged: it is registered by the app, under the
    name :data:`COMMANDS` gives it."""

    def mark(fn: F) -> F:
        setattr(fn, SETTINGS_ATTR, dict(settings))
        return fn

    return mark


def command_settings(fn: Callable[..., Any]) -> dict[str, Any]:
    """The settings :func:`command` recorded on ``fn``; TypeError if it has none."""
    settings = getattr(fn, SETTINGS_ATTR, None)
    if settings is None:
        raise TypeError(f"{fn.__module__}.{fn.__qualname__} is in COMMANDS but not "
                        "marked with @command")
    return dict(settings)


#: Root options that take a value (the next word, unless given as --opt=value).
_VALUE_OPTIONS = frozenset({"--config-dir", "--project", "-C", "--store", "--slug"})


def invoked_command(args: Sequence[str]) -> str | None:
    """The command a command line runs, when the whole tree is not needed to
    run it: the first word after the root options, if it names a command and
    no --help/-h (the root's help lists every command) comes before it.
    None otherwise: no command, an unknown one (click's message names the
    close ones), or the root's help."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            return None
        if a in _VALUE_OPTIONS:
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        break
    if i >= len(args):
        return None
    name = args[i]
    return name if any(name == n for n, _m, _f in COMMANDS) else None
