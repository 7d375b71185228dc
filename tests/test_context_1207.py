"""context: the Markdown parts of the memory section, fixes of 2026-12-07 (review rv7)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.layout import store_at

# ---------------------------------------------------------------- context: the Markdown parts

def _section(tmp_path, memory: bytes | None, scratch: bytes | None = None, max_bytes: int = 32768):
    from lecode_memctl.core.config import MemoryConfig
    from lecode_memctl.core.context import build_memory_section
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(tmp_path / "store")
    store.path.mkdir(exist_ok=True)
    if memory is not None:
        store.memory_file.write_bytes(memory)
    if scratch is not None:
        (store.path / "scratchpad.md").write_bytes(scratch)
    return build_memory_section(store, MemoryConfig(max_bytes=max_bytes), None, SessionStore(store))


def _marker_n(text: str) -> int:
    import re

    (n,) = re.findall(r"\[\.\.\. truncated: (\d+) more bytes not shown \.\.\.\]", text)
    return int(n)


@pytest.mark.parametrize("ch", ["é", "日", "😀"])
def test_utf8_prefix_is_the_longest_that_fits(ch):
    from lecode_memctl.core.context import _utf8_prefix

    data = ("a" + ch * 5 + "b" + ch).encode()
    for n in range(0, len(data) + 2):
        got = _utf8_prefix(data, n)
        best = max(k for k in range(0, min(n, len(data)) + 1)
                   if _decodes(data[:k]))
        assert got == data[:best], (ch, n)


def _decodes(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("ch", ["é", "日", "😀"])
def test_the_context_cut_keeps_every_character_that_fits(tmp_path, ch):
    """'é' * 100 with max_bytes 62: the cut dropped a complete character
    that fitted (1 to 3 bytes short of the budget)."""
    from lecode_memctl.core.context import MEMORY_HEADING, truncation_marker

    data = (ch * 100 + "\n").encode()
    width = len(ch.encode())
    for max_bytes in range(60, 100):
        sec = _section(tmp_path, data, max_bytes=max_bytes)
        (part,) = sec.parts
        room = max_bytes - len(MEMORY_HEADING) - len(truncation_marker(len(data)))
        shown = sec.text[len(MEMORY_HEADING):].split("\n[... truncated:")[0]
        assert set(shown) <= {ch}
        assert room - width < len(shown.encode()) <= room, (ch, max_bytes)
        assert part.omitted_bytes == len(data) - len(shown.encode())
