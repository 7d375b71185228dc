"""Two rules of text, each with one home: where UTF-8 bytes cut short end
their last whole character (a read that stops inside a file: ``context``'s
head of a long Markdown file; a stream written in pieces: ``cli.output``'s
CSV pieces read back from a spill file), and the case folding that makes a
lower-cased search find what ``re.IGNORECASE`` finds (``grep -i``'s
pre-check, the secrets scan's keyword gate)."""

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


#: Every character (to U+10FFFF) that ``re.IGNORECASE`` matches to an ASCII
#: letter other than by its own lower case, as that letter ('ſ' is an 's',
#: 'ı' and 'İ' an 'i'; the Kelvin sign lowers to 'k' itself);
#: tests/test_secrets_gate.py checks the table against ``re``.
CASE_FOLD = {0x17F: "s", 0x131: "i", 0x130: "i"}


def caseless(text: str) -> str:
    """``text`` lower-cased so that a search for an ASCII word written in
    lower case finds what ``re.IGNORECASE`` finds (:data:`CASE_FOLD`, then
    ``lower()``)."""
    return (text if text.isascii() else text.translate(CASE_FOLD)).lower()
