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


@pytest.mark.parametrize("blank", [b"\n", b" \t\r\n"])
def test_a_file_whose_first_mib_is_blank_is_not_dropped(tmp_path, blank):
    """The first MiB read was blank, and the part was left out, silently:
    the line after it was never seen, and nothing said so."""
    from lecode_memctl.core.context import MEMORY_HEADING

    data = blank * (1_100_000 // len(blank)) + b"IMPORTANT: never push to main\n"
    sec = _section(tmp_path, data, b"- [ ] task\n")
    (part,) = [p for p in sec.parts if p.name == "MEMORY.md"]
    assert part.truncated and part.source_bytes == len(data)
    assert MEMORY_HEADING in sec.text
    body = sec.text.split(MEMORY_HEADING, 1)[1].split("\n[... truncated:")[0]
    assert part.omitted_bytes == len(data) - len(body.encode()) == _marker_n(sec.text)
    assert sec.text.endswith("- [ ] task\n") and sec.bytes <= sec.max_bytes


def test_a_scratchpad_whose_first_mib_is_blank_is_not_dropped(tmp_path):
    data = b"\n" * 1_100_000 + b"- [ ] ship\n"
    sec = _section(tmp_path, b"memory\n", data)
    (part,) = [p for p in sec.parts if p.name == "scratchpad.md"]
    assert part.truncated and part.source_bytes == len(data)
    assert part.omitted_bytes == _marker_n(sec.text)


def test_a_file_blank_to_its_end_is_still_no_part(tmp_path):
    sec = _section(tmp_path, b"\n" * 1_100_000 + b"   \n", b"- [ ] task\n")
    assert [p.name for p in sec.parts] == ["scratchpad.md"]
    assert "truncated" not in sec.text


def test_invalid_utf8_is_counted_in_file_bytes(tmp_path):
    """b'\\xff' * 100 + b'\\n' (101 bytes), max_bytes 60: the marker said 301
    more bytes and source_bytes was 301, the bytes of the U+FFFD shown."""
    data = b"\xff" * 100 + b"\n"
    sec = _section(tmp_path, data, max_bytes=60)
    (part,) = sec.parts
    assert part.source_bytes == 101 and part.omitted_bytes == 101 == _marker_n(sec.text)
    sec = _section(tmp_path, data, max_bytes=80)
    (part,) = sec.parts
    assert part.source_bytes == 101 and part.truncated
    shown = sec.text.split("\n", 1)[1].split("\n[... truncated:")[0]
    assert set(shown) == {"\ufffd"}
    # each U+FFFD shown counts as the one byte of the file it stands for
    assert part.omitted_bytes == 101 - len(shown) == _marker_n(sec.text)
    assert sec.bytes <= 80


def test_invalid_utf8_whole_part_counts_file_bytes(tmp_path):
    data = b"ok \xff\xfe\xe2\x82 end\n"
    sec = _section(tmp_path, data)
    (part,) = sec.parts
    assert part.source_bytes == len(data) and not part.truncated and part.omitted_bytes == 0
    assert sec.text.endswith("ok \ufffd\ufffd\ufffd\ufffd end\n")   # one U+FFFD per bad byte


def test_invalid_utf8_cut_mixed(tmp_path):
    data = ("é" * 20).encode() + b"\xff" * 20 + ("日" * 20).encode() + b"\n"
    for max_bytes in range(40, 160):
        sec = _section(tmp_path, data, max_bytes=max_bytes)
        if not sec.parts:
            continue
        (part,) = sec.parts
        assert sec.bytes <= max_bytes and part.source_bytes == len(data)
        if part.truncated and part.bytes:
            shown = sec.text.split("\n", 1)[1].split("\n[... truncated:")[0]
            from_file = len(shown.encode()) - 2 * shown.count("\ufffd")
            assert part.omitted_bytes == len(data) - from_file == _marker_n(sec.text)


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
