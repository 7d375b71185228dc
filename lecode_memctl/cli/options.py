"""Option types shared by every command, so that each spells them the same way,
and the command class that accepts the global options after a command's name."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Any

import typer
import typer.core
from typer._click import types as typer_types

from .completion import complete_format

JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document: the stable, documented contract for scripts.")]

FormatOpt = Annotated[str | None, typer.Option(
    "--format", "-f", metavar="FORMAT", autocompletion=complete_format,
    help="Listing format: table (default), json, jsonl, csv, tsv, or a tabulate "
         "format name such as plain, github or grid.")]


# ------------------------------------------------------------------ global options

#: The root options that are also accepted after the command name
#: (``memctl forget ID --no-color``); --version is not: it ends memctl at once.
GLOBAL_OPTION_NAMES: tuple[str, ...] = ("config_dir", "project", "store", "slug", "no_color",
                                          "color", "no_state")


class CommandWithGlobalOptions(typer.core.TyperCommand):
    """A command that also parses the global options given after its name.

    The options are the root's own parameter objects, copied and hidden (so
    they are defined once, in the app callback, and --help and the man page
    list them once, as global options); a TAB after the command's name
    offers them all the same (:meth:`shell_complete`).  A flag the
    command defines itself (``validate --store``, ``grep -C``) stays the
    command's; the option's other flags (``grep --project``) still work.
    Values given after the command name win over values given before it;
    they reach :data:`state.STATE` before the command runs."""

    _global_params: list[Any] | None = None

    def _globals(self, ctx: Any) -> list[Any]:
        if self._global_params is None:
            root = ctx.find_root()
            own = {o for p in self.params for o in (*p.opts, *p.secondary_opts)}
            copies = []
            if root is not ctx:
                for p in root.command.params:
                    if p.name not in GLOBAL_OPTION_NAMES:
                        continue
                    # only the flags the command leaves free: grep's own -C is
                    # its context, and --project still follows grep (before
                    # 2026-12-07 one clashing flag dropped the whole option)
                    opts = [o for o in p.opts if o not in own]
                    if not opts:
                        continue
                    q = copy.copy(p)
                    q.opts = opts
                    q.secondary_opts = [o for o in p.secondary_opts if o not in own]
                    q.hidden = True
                    copies.append(q)
            self._global_params = copies
        return self._global_params

    def get_params(self, ctx: Any) -> list[Any]:
        return [*super().get_params(ctx), *self._globals(ctx)]

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """The names of the command's options, then of the global options
        it takes after its name (hidden only from --help and the man page;
        before 2026-12-07 a TAB never offered them there): click's own
        rule, a hidden option left out, applied to the command's options,
        and the copies added after them (in ``get_params`` order, as
        ``completion_table`` lists them for the fast path)."""
        results = super().shell_complete(ctx, incomplete)
        if incomplete and not incomplete[0].isalnum():
            from typer._click.core import ParameterSource
            from typer._click.shell_completion import CompletionItem

            for p in self._globals(ctx):
                if not p.multiple and \
                        ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE:
                    continue
                results.extend(CompletionItem(name, help=p.help)
                               for name in [*p.opts, *p.secondary_opts]
                               if name.startswith(incomplete))
        return results

    def invoke(self, ctx: Any) -> Any:
        from .state import STATE, path_option

        given = {p.name: ctx.params.pop(p.name, None) for p in self._globals(ctx)}
        if given.get("color") is not None and not given.get("no_color"):
            # --color after the command wins over a --no-color before it, as
            # every option given there does (before 2026-12-07 --no-color
            # held wherever it was); --no-color after it wins over a --color
            # before it (below)
            STATE.no_color = False
        for p in self._globals(ctx):
            value = given.get(p.name)
            if p.name == "no_color":
                if value:
                    STATE.no_color = True
                    STATE.color_mode = "never"
            elif p.name == "no_state":  # a flag: given anywhere, it holds
                STATE.no_state = STATE.no_state or bool(value)
            elif p.name == "color":
                if value is not None and not given.get("no_color"):
                    STATE.color_mode = getattr(value, "value", value)
            elif p.name == "config_dir" and value == "":
                STATE.config_dir_option = None  # empty: the default, as before the command
            elif p.name in ("project", "store"):
                value = path_option("--" + p.name, value)
                if value is not None:
                    setattr(STATE, _STATE_FIELD[p.name], value)
            elif value is not None:
                setattr(STATE, _STATE_FIELD[p.name], str(value))
        return super().invoke(ctx)


_STATE_FIELD = {"config_dir": "config_dir_option", "project": "project", "store": "store_option",
                "slug": "slug_option"}


class ColorWhen(str, Enum):  # noqa: UP042 - the (str, Enum) form typer documents for choices
    """--color WHEN."""

    auto = "auto"
    always = "always"
    never = "never"


#: The largest --offset or --limit: a larger count is a usage error (exit 2), not a
#: crash in itertools.islice (which takes at most sys.maxsize).
MAX_COUNT = (1 << 63) - 1



def shown_number(digits: str) -> str:
    """A number as an error repeats it: at most 20 of its digits."""
    return digits if len(digits) <= 20 else f"{digits[:20]}...({len(digits)} digits)"


def parse_count(text: str, low: int, high: int) -> tuple[int | None, str]:
    """A count or position written in ASCII digits (leading zeros allowed),
    from ``low`` to ``high``: (the value, "") or (None, why not).  The one
    rule of every count option (:func:`count_type`) and of a range's
    positions (``correct``'s and ``read``'s START, END, SESSION:RANGE).
    ``int()`` reads other scripts' digits (٥, ５), ``_``, a sign, spaces,
    and refuses more than 4,300 digits (a ValueError: exit 70, before
    2026-12-07, for a position of 5,000 leading zeros); a number is
    compared by its length first and never repeated whole."""
    if text[:1] == "-" and text[1:].isascii() and text[1:].isdigit():
        if not text[1:].strip("0"):     # (-0: no number is negative zero here)
            return None, f"{text!r} is not a whole number in ASCII digits (0-9)"
        return None, f"{shown_number(text)} is not in the range {low}<=x<={high}"
    if not (text.isascii() and text.isdigit()):
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        return None, f"{shown!r} is not a whole number in ASCII digits (0-9)"
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(high)) or not low <= int(digits) <= high:
        return None, f"{shown_number(digits)} is not in the range {low}<=x<={high}"
    return int(digits), ""


class _Count(typer_types.IntRange):
    """click's int range read by :func:`parse_count` (its own bounds)."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__(low, high)
        self.low, self.high = low, high

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, int):
            return super().convert(value, param, ctx)
        got, why = parse_count(str(value), self.low, self.high)
        if got is None:
            self.fail(why + ".", param, ctx)
        return got


def count_type(low: int, high: int | None = None) -> Any:
    """The type of every count and position option (--offset, --limit, -m,
    -C, --jobs, --seq, correct's REVISION): :func:`parse_count` from
    ``low`` to ``high`` (default :data:`MAX_COUNT`), exit 2 otherwise
    (before 2026-12-07 click's int range read what int() reads)."""
    return _Count(low, MAX_COUNT if high is None else high)


OffsetOpt = Annotated[int | None, typer.Option(
    "--offset", click_type=count_type(0), metavar="N",
    help="Skip the first N rows (in every format).")]

LimitOpt = Annotated[int | None, typer.Option(
    "--limit", click_type=count_type(1), metavar="N",
    help="At most N rows (in every format).")]

SinceOpt = Annotated[str | None, typer.Option(
    "--since", metavar="WHEN",
    help="Only rows at or after WHEN: a date (2026-05-01, UTC), an RFC 3339 time or an age "
         "such as 30m, 12h, 7d or 2w.")]

UntilOpt = Annotated[str | None, typer.Option(
    "--until", metavar="WHEN",
    help="Only rows at or before WHEN (a date means the end of that day, UTC).")]


def sort_option(choices: tuple[str, ...], default: str):  # noqa: ANN201
    """--sort KEY with completion of its choices, each also as ``-KEY`` (descending)."""
    keys = (*choices, *("-" + c for c in choices))
    return typer.Option(
        "--sort", metavar="KEY", autocompletion=lambda incomplete: [k for k in keys
                                                                   if k.startswith(incomplete)],
        help=f"Order by {', '.join(choices)} (default {default}); "
             "prefix '-' for descending, e.g. --sort=-" + choices[-1] + ".")


#: SQLite keeps its busy timeout in an int of milliseconds and takes a larger one
#: as 0 (no wait at all): a longer --lock-wait is refused.
MAX_LOCK_WAIT = ((1 << 31) - 1) // 1000


def _finite_lock_wait(value: float | None) -> float | None:
    """--lock-wait inf / nan are usage errors (exit 2), not an OverflowError."""
    if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_LOCK_WAIT):
        raise typer.BadParameter(f"{value!r} is not a number of seconds from 0 to "
                                 f"{MAX_LOCK_WAIT} (about 24 days).")
    return value


LockWaitOpt = Annotated[float, typer.Option(
    "--lock-wait", min=0, max=MAX_LOCK_WAIT, metavar="SECONDS", callback=_finite_lock_wait,
    help="Wait at most SECONDS for the facts database's lock (or a stable snapshot of it) "
         "before giving up with exit status 6, store busy.")]


def close_guesses_only(exc: Exception) -> None:
    """Keep of click's "Possible options" for an unknown option only the
    names close to it once their leading dashes are set aside: click's
    guess (``difflib.get_close_matches``, cutoff 0.6) compares the whole
    names, whose shared ``--`` alone lifts ``--json`` and ``--store`` over
    the cutoff (``memctl schema --json`` said "Possible options: --store"
    before 2026-12-07).  ``--jsno`` still suggests ``--json``."""
    from typer import _click

    if not isinstance(exc, _click.exceptions.NoSuchOption) or not exc.possibilities:
        return
    import difflib

    typed = exc.option_name.lstrip("-").lower()
    exc.possibilities = [
        p for p in exc.possibilities
        if difflib.SequenceMatcher(None, typed, p.lstrip("-").lower()).ratio() >= 0.6]


def belongs_after(exc: Exception, args: Sequence[str] = ()) -> str:
    """For an option given before the command that only commands take
    (``memctl --json facts``): where it goes instead (click's own message
    names the root's options, as if it were a typo).  ``args``: the command
    line, to give the example with the command typed (and the option's
    value), or to say that command does not take it."""
    from typer import _click

    if not isinstance(exc, _click.exceptions.NoSuchOption) or exc.ctx is None \
            or exc.ctx.parent is not None:
        return ""
    from . import completion_table as table

    name = exc.option_name
    # (each command's entry: ..., its listed options (name, help, param,
    # ...), then every option it parses -> (param, whether it takes a
    # value); the global options are parsed but not listed)
    takers = {c: entry[3][name][1] for c, entry in table.COMMAND_OPTIONS.items()
              if any(o[0] == name for o in entry[2])}
    if not takers:
        return ""
    exc.possibilities = []      # (click's "Possible options" of the root: not it)
    # (the word after the misplaced option is its value, unless no command
    # follows it: 'memctl -n facts' gave no value, 'memctl -n 3 facts' one)
    typed = (_command_typed(args, table, name, any(takers.values()))
             or _command_typed(args, table))
    if typed is not None and typed not in takers:
        names = list(takers)
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        return f"; {typed} takes no {name} ({shown} {'do' if len(names) > 1 else 'does'})"
    command = typed or ("facts" if "facts" in takers else next(iter(takers)))
    written = name
    for i, a in enumerate(args):
        if a == name or a.startswith(name + "="):
            written = a
            if a == name and takers[command] and i + 1 < len(args):
                written = f"{a} {args[i + 1]}"
            break
    return f"; {name} is an option of the command: give it after its name, as in 'memctl " \
           f"{command} {written}'"


def _command_typed(args: Sequence[str], table: Any, misplaced: str = "",
                   misplaced_takes: bool = False) -> str | None:
    """The command name on a command line: the first word that is not a root
    option or its value, nor the misplaced option's value (``--config-dir
    config facts``, ``--session notes facts``: facts); after ``--``, the
    next word."""
    it = iter(args)
    for a in it:
        if a == "--":
            nxt = next(it, None)
            return nxt if nxt in table.COMMAND_OPTIONS else None
        if a.startswith("-"):
            name = a.split("=", 1)[0]
            takes = (misplaced_takes if name == misplaced
                     else table.ROOT_PARAMS.get(name, (None, False))[1])
            if takes and "=" not in a:
                next(it, None)          # its value
            continue
        if a in table.COMMAND_OPTIONS:
            return a            # (a word that is not: the misplaced option's value)
    return None
