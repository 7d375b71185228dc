"""``memctl read --text``: a session range as a person reads it.

Role-labelled messages in seq order, wrapped to the terminal width; tool
calls and tool results summarised; binary parts named with their media type
and size, never dumped; hidden positions marked with their reason.  Stored
text is untrusted: control characters are shown escaped (``safe``) and
nothing is interpreted as markup.  ``--json`` is the exact data.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .output import echo, safe

INDENT = "    "
TOOL_RESULT_LINES = 3      # lines of a tool result shown
TOOL_RESULT_CHARS = 1000   # ... and at most this many of its characters
CALL_ARGS_CHARS = 200      # characters of a tool call's arguments shown
MIN_WIDTH = 40


def width() -> int:
    """The terminal width ($COLUMNS, else the terminal, else 80), at least 40."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


# a line longer than this is wrapped by _wrap_long, not textwrap.wrap
LONG_LINE = 1 << 14


def _wrap(text: str, w: int, indent: str = INDENT) -> list[str]:
    """``text`` escaped, its own line breaks kept, each line wrapped to ``w``."""
    out: list[str] = []
    for line in safe(text, keep_newlines=True).split("\n"):
        if not line.strip():
            out.append("")
            continue
        if len(line) > LONG_LINE:
            out.extend(_wrap_long(line, w, indent) or [indent])
            continue
        out.extend(textwrap.wrap(line, width=w, initial_indent=indent, subsequent_indent=indent,
                                 break_long_words=True, break_on_hyphens=False,
                                 drop_whitespace=True) or [indent])
    return out


# textwrap's whitespace (the characters it splits words at and makes spaces)
_TW_SPACES = str.maketrans(dict.fromkeys("\t\n\x0b\x0c\r", " "))
_TW_CHUNK = re.compile(" +|[^ ]+")


def _wrap_long(line: str, w: int, indent: str) -> list[str]:
    """``textwrap.wrap(line, width=w, initial_indent=indent,
    subsequent_indent=indent, break_long_words=True, break_on_hyphens=False,
    drop_whitespace=True)``, line for line, in time and memory linear in the
    line's length: its words are taken one at a time from a scan of the
    line (textwrap makes a list of them all: 250 MB for an 8 MiB message),
    and a word longer than a line is cut by an offset into it (textwrap
    copies the rest of the word at each cut: quadratic in its length, 45 s
    for a word of 8 MiB)."""
    chunks = map(re.Match.group, _TW_CHUNK.finditer(line.expandtabs().translate(_TW_SPACES)))
    width = w - len(indent)
    lines: list[str] = []
    # the chunk at the top of textwrap's stack: what is left of ``word``
    # from ``off``; ``blank_from``: where the blank end of a word that was
    # cut begins (-1: not yet known)
    word = next(chunks, None)
    off = 0
    blank_from = -1
    while word is not None:
        cur: list[str] = []
        cur_len = 0
        if lines:
            # a blank chunk (as str.strip() sees it) that would begin a line is dropped
            if off:
                if blank_from < 0:
                    blank_from = len(word.rstrip())
                blank = off >= blank_from
            else:
                blank = word.isspace()
            if blank:
                word, off, blank_from = next(chunks, None), 0, -1
                if word is None:
                    break
        while cur_len + len(word) - off <= width:
            piece = word[off:] if off else word
            cur.append(piece)
            cur_len += len(piece)
            word, off, blank_from = next(chunks, None), 0, -1
            if word is None:
                break
        if word is not None and len(word) - off > width:
            # a word longer than any line: as much of it as fits
            cur.append(word[off:off + width - cur_len])
            off += width - cur_len
        if cur and not cur[-1].strip():
            del cur[-1]
        if cur:
            lines.append(indent + "".join(cur))
    return lines


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
                # (the media type and a part's type are the transcript's
                # strings, on the bracketed line: escaped whole, a newline
                # written \n, so that they cannot forge lines of the view;
                # before 2026-12-07 they were printed raw)
                size = _binary_size(part)
                media = part.get("media_type") or "part"
                pieces.append(f"[binary {safe(str(media))}, "
                              + (f"{size} bytes]" if size is not None else "size unknown]"))
            else:
                label = safe(kind) if isinstance(kind, str) else "unknown"
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
    return safe(label)


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
        name, cid = (safe(str(c.get(k, "?"))) for k in ("name", "id"))
        line = f"-> call {name} (id {cid}): {_short(args_text, CALL_ARGS_CHARS)}"
        out.extend(_wrap(line.replace("\n", " "), w))
    return out


def _tool_result(text: str, w: int) -> list[str]:
    """A tool result's summary: its first :data:`TOOL_RESULT_LINES` lines,
    at most :data:`TOOL_RESULT_CHARS` characters of them, wrapped, then what
    is not shown.  Only what is shown is escaped and wrapped: a one-line
    result of 40 MiB is not (it was: 1.1 GB, and MemoryError under 1 GiB)."""
    end = -1
    for _ in range(TOOL_RESULT_LINES):
        end = text.find("\n", end + 1, TOOL_RESULT_CHARS + 1)
        if end < 0:
            break
    shown = text[:end] if end >= 0 else text[:TOOL_RESULT_CHARS + 1]
    cut = len(shown) > TOOL_RESULT_CHARS
    if cut:
        shown = shown[:TOOL_RESULT_CHARS]
    out = _wrap(shown + ("\u2026" if cut else ""), w)
    # The lines not shown at all: every line of the result (a last newline
    # ends the last line: no empty line after it to count) but those begun
    # in what is shown, which holds fewer than TOOL_RESULT_LINES when it
    # was cut at TOOL_RESULT_CHARS (before 2026-12-07 three were taken as
    # shown whatever the cut: a cut in the 2nd of 4 lines said "1 more"; a
    # cut just after a newline begins no line: it counted one, and said one
    # line too few).
    total = text.count("\n") + (bool(text) and not text.endswith("\n"))
    begun = TOOL_RESULT_LINES if end >= 0 else \
        shown.count("\n") + (not shown.endswith("\n")) if cut else total
    more = total - min(begun, total)
    lines = f"{more} more line{'s' if more > 1 else ''}"
    if cut or more > 0:
        out.append(f"{INDENT}[... the first {TOOL_RESULT_CHARS} of {len(text)} characters shown"
                   + (f", {lines}" if more > 0 else "")
                   + "; --json shows the whole result ...]" if cut else
                   f"{INDENT}[... {lines}, {len(text)} characters in all; "
                   "--json shows the whole result ...]")
    return out


def message_lines(seq: int, rec: Mapping[str, Any], w: int) -> list[str]:
    """The lines of one visible message: its label, then its wrapped text."""
    lines = [_label(seq, rec)]
    text = content_text(rec.get("content"))
    if rec.get("role") == "tool":
        lines += _tool_result(text, w)
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
    echo(f"session {safe(str(meta['session_id']))}  range "
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
