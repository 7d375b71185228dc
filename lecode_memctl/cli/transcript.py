"""``memctl read --text``: a session range as a person reads it.

Role-labelled messages in seq order, wrapped to the terminal width; tool
calls and tool results summarised; binary parts named with their media type
and size, never dumped; hidden positions marked with their reason.  Stored
text is untrusted: control characters are shown escaped (``safe``) and
nothing is interpreted as markup.  ``--json`` is the exact data.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .output import echo, safe

INDENT = "    "
TOOL_RESULT_LINES = 3      # lines of a tool result shown
CALL_ARGS_CHARS = 200      # characters of a tool call's arguments shown
MIN_WIDTH = 40


def width() -> int:
    """The terminal width ($COLUMNS, else the terminal, else 80), at least 40."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def _wrap(text: str, w: int, indent: str = INDENT) -> list[str]:
    """``text`` escaped, its own line breaks kept, each line wrapped to ``w``."""
    out: list[str] = []
    for line in safe(text).split("\n"):
        if not line.strip():
            out.append("")
            continue
        out.extend(textwrap.wrap(line, width=w, initial_indent=indent, subsequent_indent=indent,
                                 break_long_words=True, break_on_hyphens=False,
                                 drop_whitespace=True) or [indent])
    return out


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _binary_size(part: Mapping[str, Any]) -> int | None:
    from lecode_memctl.core.paging import binary_size

    if "omitted_bytes" in part:
        v = part["omitted_bytes"]
        return v if isinstance(v, int) else None
    return binary_size(part.get("data"))


def content_text(content: Any) -> str:
    """A message's content as text: strings as they are, text parts joined,
    binary and other parts named in brackets."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return orjson.dumps(content).decode("utf-8")
    pieces: list[str] = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif kind == "binary":
                size = _binary_size(part)
                pieces.append(f"[binary {part.get('media_type') or 'part'}, "
                              + (f"{size} bytes]" if size is not None else "size unknown]"))
            else:
                label = kind if isinstance(kind, str) else "unknown"
                text = part.get("text")
                pieces.append(f"[{label} part]" + (f" {text}" if isinstance(text, str) else ""))
        else:
            pieces.append(orjson.dumps(part).decode("utf-8"))
    return "\n".join(pieces)


def _label(seq: int, rec: Mapping[str, Any]) -> str:
    role = rec.get("role")
    label = f"[{seq}] {role if isinstance(role, str) else 'message'}"
    if role == "tool":
        name, call = rec.get("name"), rec.get("tool_call_id")
        if isinstance(name, str):
            label += f" {name}"
        if isinstance(call, str):
            label += f" (result of call {call})"
    if rec.get("synthetic") is True:
        label += " (synthetic)"
    return safe(label, keep_newlines=False)


def _tool_calls(rec: Mapping[str, Any], w: int) -> list[str]:
    calls = rec.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for c in calls:
        if not isinstance(c, Mapping):
            continue
        args = c.get("arguments")
        args_text = args if isinstance(args, str) else orjson.dumps(args).decode("utf-8")
        line = (f"-> call {c.get('name', '?')} (id {c.get('id', '?')}): "
                f"{_short(args_text, CALL_ARGS_CHARS)}")
        out.extend(_wrap(line.replace("\n", " "), w))
    return out


def message_lines(seq: int, rec: Mapping[str, Any], w: int) -> list[str]:
    """The lines of one visible message: its label, then its wrapped text."""
    lines = [_label(seq, rec)]
    text = content_text(rec.get("content"))
    if rec.get("role") == "tool":
        rows = text.split("\n")
        shown = "\n".join(rows[:TOOL_RESULT_LINES])
        lines += _wrap(shown, w)
        if len(rows) > TOOL_RESULT_LINES:
            lines.append(f"{INDENT}[... {len(rows) - TOOL_RESULT_LINES} more lines, "
                         f"{len(text)} characters in all; --json shows the whole result ...]")
    elif text:
        lines += _wrap(text, w)
    lines += _tool_calls(rec, w)
    return lines


def render(meta: Mapping[str, Any], records: Iterable[Mapping[str, Any]],
           visible: Sequence[int], hidden: Mapping[int, str]) -> None:
    """Print a range: a short header, then each message position in seq order
    (visible messages in full, hidden ones as one line with their reason)."""
    w = width()
    seen = set(visible)
    echo(f"session {safe(str(meta['session_id']), keep_newlines=False)}  range "
         f"{meta['start']}-{meta['end']} (transcript ends at {meta.get('last_seq')})")
    counts: dict[str, int] = {}
    for reason in hidden.values():
        counts[reason] = counts.get(reason, 0) + 1
    echo(f"visible: {len(seen)} message(s); hidden: "
         + (", ".join(f"{n} {r}" for r, n in sorted(counts.items())) if counts else "none"))
    src = meta.get("source")
    if src:
        echo(f"digest:  {src['digest']}")
    else:
        echo(f"status:  {meta.get('status')} ({meta.get('reason')})")
    by_seq = {r["seq"]: r for r in records if isinstance(r, Mapping)}
    for seq in sorted(seen | set(hidden)):
        echo("")
        if seq in hidden:
            echo(f"[{seq}] hidden ({hidden[seq]})")
            continue
        for line in message_lines(seq, by_seq[seq], w):
            echo(line)
