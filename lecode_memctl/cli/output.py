"""Rendering shared by every command: JSON, listings, safe text.

Stored text is untrusted: it is never interpreted as rich markup, and
control characters are escaped in human output.  ``--json`` round-trips the
exact text.  rich and tabulate are imported only when a table is rendered.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .state import STATE

LISTING_FORMATS = ("table", "json", "jsonl", "csv", "tsv")

# C0 except tab and newline, DEL, C1, and the bidi controls (embeddings,
# overrides, isolates, marks) that can reorder what a terminal shows.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]")


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    o = ord(c)
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def safe(text: str, *, keep_newlines: bool = True) -> str:
    """Escape every control character a terminal could act on."""
    out = _UNSAFE.sub(_escape_char, text)
    if not keep_newlines:
        out = out.replace("\n", "\\n").replace("\t", "\\t")
    return out


def _default(obj: Any) -> Any:
    import dataclasses
    from pathlib import PurePath

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


def dumps(obj: Any, *, pretty: bool = False) -> bytes:
    opt = orjson.OPT_NON_STR_KEYS
    if pretty:
        opt |= orjson.OPT_INDENT_2
    return orjson.dumps(obj, default=_default, option=opt)


def stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def write_bytes(data: bytes) -> None:
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    out.flush()
    if buf is not None:
        buf.write(data)
        buf.flush()
    else:
        out.write(data.decode("utf-8"))


def emit_json(obj: Any, *, pretty: bool | None = None) -> None:
    """One JSON document on stdout (pretty on a terminal, compact in a pipe)."""
    if pretty is None:
        pretty = stdout_is_tty()
    write_bytes(dumps(obj, pretty=pretty) + b"\n")


def emit_jsonl(rows: Iterable[Any]) -> None:
    """JSON Lines, streamed row by row."""
    for row in rows:
        write_bytes(dumps(row) + b"\n")


def echo(text: str = "", *, err: bool = False) -> None:
    """Print already-safe text (callers escape stored text with :func:`safe`)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


def echo_untrusted(text: str, *, err: bool = False) -> None:
    echo(safe(text), err=err)


def console(stderr: bool = False):  # -> rich.console.Console
    from rich.console import Console

    return Console(stderr=stderr, markup=False, highlight=False, emoji=False,
                   no_color=not STATE.color(), soft_wrap=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, dict)):
        return dumps(value).decode("utf-8")
    return str(value)


def check_format(fmt: str | None, *, json_flag: bool = False,
                 extra: Sequence[str] = ()) -> str:
    """Normalise ``--format``/``--json`` into one name; bad names are usage errors."""
    from lecode_memctl.core.errors import UsageError

    if json_flag:
        if fmt and fmt != "json":
            raise UsageError(f"--json conflicts with --format {fmt}")
        return "json"
    if not fmt:
        return "table"
    if fmt in LISTING_FORMATS or fmt in extra:
        return fmt
    import tabulate

    if fmt in tabulate.tabulate_formats:
        return fmt
    raise UsageError(
        f"unknown format {fmt!r}; use one of {', '.join(LISTING_FORMATS + tuple(extra))} "
        "or a tabulate format name (plain, github, grid, ...)")


def render_rows(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], fmt: str, *,
                headers: Mapping[str, str] | None = None,
                title: str | None = None) -> None:
    """Render a listing.  ``json`` is one array, ``jsonl`` streams, ``csv``/``tsv``
    are RFC 4180 with a header row, ``table`` is rich on a terminal and plain
    aligned text in a pipe, any other name is a tabulate format."""
    if fmt == "json":
        emit_json(list(rows))
        return
    if fmt == "jsonl":
        emit_jsonl(rows)
        return
    heads = [(headers or {}).get(c, c) for c in columns]
    if fmt in ("csv", "tsv"):
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(heads)
        sys.stdout.write(buf.getvalue())
        for row in rows:
            buf.seek(0)
            buf.truncate()
            writer.writerow([safe(_cell(row.get(c)), keep_newlines=False) for c in columns])
            sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        return
    table_rows = [[safe(_cell(row.get(c)), keep_newlines=False) for c in columns] for row in rows]
    if fmt == "table" and stdout_is_tty():
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(box=box.SIMPLE_HEAD, title=title, show_edge=False)
        for h in heads:
            table.add_column(h)
        for r in table_rows:
            table.add_row(*(Text(c) for c in r))
        console().print(table)
        return
    import tabulate

    tabulate.PRESERVE_WHITESPACE = False
    text = tabulate.tabulate(table_rows, headers=heads,
                             tablefmt="plain" if fmt == "table" else fmt,
                             disable_numparse=True)
    if title and fmt == "table":
        echo(safe(title))
    echo(text)

