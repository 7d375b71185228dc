"""Option types shared by every command, so that each spells them the same way."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document: the stable, documented contract for scripts.")]

FormatOpt = Annotated[Optional[str], typer.Option(
    "--format", "-f", metavar="FORMAT",
    help="Listing format: table (default), json, jsonl, csv, tsv, or a tabulate "
         "format name such as plain, github or grid.")]
