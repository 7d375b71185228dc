"""Where UTF-8 bytes cut short end their last whole character: the one rule
of a read that stops inside a file (``context``'s head of a long Markdown
file) and of a stream written in pieces (``cli.output``'s CSV pieces read
back from a spill file)."""

from __future__ import annotations


def whole_end(data: bytes) -> int:
    """Where the last whole character of ``data`` ends: ``len(data)`` unless
    the data ends inside one (its last lead byte followed by fewer bytes
    than the character it starts needs; a byte 0xF8..0xFF, no lead of
    UTF-8, is taken to start one of 4)."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if (b & 0xC0) == 0x80:
            continue
        need = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        return len(data) - back if need > back else len(data)
    return len(data)
