"""Option types shared by every command, so that each spells them the same way."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document: the stable, documented contract for scripts.")]

def complete_format(incomplete: str) -> list[str]:
    """--format values: the listing formats, then the tabulate names."""
    names = ["table", "json", "jsonl", "csv", "tsv", "plain", "simple", "github", "grid",
             "pipe", "rst", "html", "latex", "mediawiki", "orgtbl", "psql"]
    return [n for n in names if n.startswith(incomplete)]


FormatOpt = Annotated[Optional[str], typer.Option(
    "--format", "-f", metavar="FORMAT", autocompletion=complete_format,
    help="Listing format: table (default), json, jsonl, csv, tsv, or a tabulate "
         "format name such as plain, github or grid.")]


class ColorWhen(str, Enum):
    """--color WHEN."""

    auto = "auto"
    always = "always"
    never = "never"


OffsetOpt = Annotated[Optional[int], typer.Option(
    "--offset", min=0, metavar="N", help="Skip the first N rows (in every format).")]

LimitOpt = Annotated[Optional[int], typer.Option(
    "--limit", min=1, metavar="N", help="At most N rows (in every format).")]

SinceOpt = Annotated[Optional[str], typer.Option(
    "--since", metavar="WHEN",
    help="Only rows at or after WHEN: a date (2026-05-01, UTC), an RFC 3339 time or an age "
         "such as 30m, 12h, 7d or 2w.")]

UntilOpt = Annotated[Optional[str], typer.Option(
    "--until", metavar="WHEN",
    help="Only rows at or before WHEN (a date means the end of that day, UTC).")]


def sort_option(choices: tuple[str, ...], default: str):  # noqa: ANN201
    """--sort KEY with completion of its choices."""
    return typer.Option(
        "--sort", metavar="KEY", autocompletion=lambda incomplete: [c for c in choices
                                                                   if c.startswith(incomplete)],
        help=f"Order by {', '.join(choices)} (default {default}); "
             "prefix '-' for descending, e.g. --sort=-" + choices[-1] + ".")


LockWaitOpt = Annotated[float, typer.Option(
    "--lock-wait", min=0, metavar="SECONDS",
    help="Wait at most SECONDS for the facts database's lock (or a stable snapshot of it) "
         "before giving up with exit status 6, store busy.")]
