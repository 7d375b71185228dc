"""memctl search reads each Markdown file in pieces: the same hits, line
numbers, skipped files and ``files_searched`` as reading each file whole and
splitting it at ``\\n``, in memory that follows a piece and the longest line,
not the file."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import markdown, markdown_search
from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.markdown_search import SearchResult, SkippedFile

from .builders import SLUG, traced_peak

_FILES = ("MEMORY.md", "scratchpad.md", "daily/2026-01-01.md", "notes/n.md")


def _store(tmp_path, contents: dict[str, bytes]):
    store = store_at(tmp_path / "memory" / SLUG)
    for sub in ("", "daily", "notes"):
        (store.path / sub).mkdir(parents=True, exist_ok=True)
    for rel in _FILES:
        p = store.path / rel
        if rel in contents:
            p.write_bytes(contents[rel])
        elif p.exists():
            p.unlink()
    return store


def _whole_file_search(store, pattern: str, *, limit: int, offset: int = 0) -> SearchResult:
    """The search as it was before it read in pieces: each file read whole,
    decoded, split at ``\\n`` (the reference)."""
    regex = re.compile(pattern)
    skipped: list[SkippedFile] = []
    scanned: list[str] = []

    def hits():
        for target in markdown.markdown_files(store):
            try:
                data = markdown.read_bytes(store, target)
                if data is None:
                    continue
                text = markdown.decode(data, target.relpath)
            except StoreCorrupt as exc:
                reason = exc.message
                for prefix in (f"{target.path(store)}: ", target.relpath + ": "):
                    if reason.startswith(prefix):
                        reason = reason[len(prefix):]
                        break
                skipped.append(SkippedFile(target.relpath, reason))
                continue
            scanned.append(target.relpath)
            for no, line in enumerate(text.split("\n"), 1):
                if regex.search(line):
                    yield markdown_search.SearchHit(target.relpath, no, line)

    out: list = []
    truncated = False
    for i, hit in enumerate(hits()):
        if i < offset:
            continue
        if len(out) == limit:
            truncated = True
            break
        out.append(hit)
    return SearchResult(pattern, limit, out, truncated, len(scanned), skipped)


_CASES = {
    "crlf": b"one hit\r\ntwo\r\nthree hit\r\n",
    "no final newline": b"first\nlast hit",
    "final newline": b"first hit\nlast\n",
    "empty lines": b"\n\nhit\n\n\n",
    "only newlines": b"\n" * 50,
    "empty file": b"",
    "non-ascii": "caf\u00e9 hit\n\u00e9t\u00e9\n\u65e5\u672c hit \U0001f600\n".encode(),
    "match on the last line": b"a\nb\nc hit",
    "a long line": b"x" * 5000 + b" hit\nshort hit\n",
    "bad byte after a hit": b"hit one\nhit two\n\xff\nhit three\n",
    "bad byte before a hit": b"\xc3\x28\nhit\n",
    "cut character at the end": b"hit\n\xe6\x97",
    "cut character before a newline": b"hit\n\xe6\x97\nhit\n",
}
_PATTERNS = ["hit", "^$", "^", r"hit$", r"\r$", "\u00e9", r"^\s*$", "t.*t"]


@pytest.mark.heavy
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_same_hits_as_reading_each_file_whole(tmp_path, monkeypatch, case, piece):
    """Each case alone in MEMORY.md, with a note after it, every pattern,
    read in pieces down to one byte: hits, line numbers, texts, skipped
    files with their reasons and ``files_searched`` are the whole-file
    search's (a file that is not UTF-8 is skipped whole, its hits before the
    bad byte too, as before)."""
    store = _store(tmp_path, {"MEMORY.md": _CASES[case], "notes/n.md": b"note hit\n\n"})
    monkeypatch.setattr(markdown_search, "_PIECE", piece)
    for pattern in _PATTERNS:
        for limit, offset in ((50, 0), (1, 0), (2, 1), (1, 2)):
            got = markdown_search.search(store, pattern, limit=limit, offset=offset)
            assert got == _whole_file_search(store, pattern, limit=limit, offset=offset), (
                pattern, limit, offset)


def test_a_file_that_is_not_utf8_is_reported_as_before(tmp_path):
    """The reason names the first bad byte's offset and line in the file,
    wherever the pieces cut it; the file's hits before it are not given."""
    data = b"hit\n" * 1000 + b"\xe6\x97\xa5 hit\n" + b"hit \xc3\x28\n" + b"hit\n"
    store = _store(tmp_path, {"MEMORY.md": data, "scratchpad.md": b"hit\n"})
    got = markdown_search.search(store, "hit", limit=3)
    assert got.skipped == [SkippedFile("MEMORY.md", "not valid UTF-8 (byte offset 4012, line 1002)")]
    assert [(h.file, h.line) for h in got.hits] == [("scratchpad.md", 1)]
    assert got.files_searched == 1 and got.truncated is False
    assert got == _whole_file_search(store, "hit", limit=3)


_CHUNKS = st.sampled_from([b"hit", b"h", b"it", b"\n", b"\r\n", b"\r", b"x", b" ",
                           "\u00e9".encode(), "\u65e5".encode(), b"\xe6", b"\x97", b"\xff"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_CHUNKS, max_size=25).map(b"".join), min_size=1, max_size=4),
       st.sampled_from([1, 2, 5, 11, 1 << 20]),
       st.sampled_from(["hit", "^$", r"^h", r"\r$", "it$", "\u00e9|\u65e5"]),
       st.integers(1, 4), st.integers(0, 3))
def test_the_same_search_for_any_bytes(tmp_path, monkeypatch, contents, piece, pattern,
                                       limit, offset):
    store = _store(tmp_path, dict(zip(_FILES, contents, strict=False)))
    monkeypatch.setattr(markdown_search, "_PIECE", piece)
    assert markdown_search.search(store, pattern, limit=limit, offset=offset) \
        == _whole_file_search(store, pattern, limit=limit, offset=offset)


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["newlines", "lines"])
def test_memory_follows_a_piece_not_the_file(tmp_path, monkeypatch, kind):
    """100 MiB of newlines in MEMORY.md cost 1.05 GB and 8.3 s (MemoryError
    under a 1 GiB limit), a 210 MiB MEMORY.md of short lines 842 MB even
    with ``--limit 1``: the file was read whole and split into a list of
    lines.  Now the peak is the same for a file three times as large
    (measured: 5.7 MB traced for 2 or 6 MiB of newlines, 1.7 MB for the
    lines; the old search took 21 and 68 MB, 9 and 27 MB).

    The test runs at a quarter of the search's own scale (its time went to
    the millions of empty lines): ``_PIECE`` and ``_KEEP`` divided by 4
    (64 KiB, 256 KiB) and files of 128 and 384 KiB, two and six pieces, the
    smaller one kept from its check to its search, the larger one read
    again, as 0.5 and 1.5 MiB are at full scale; the bounds are divided by
    4 too.  Measured: 1.33 and 1.27 MiB of newlines, 0.54 and 0.47 MiB of
    lines; each file read as one piece, 2.6 and 7.4 MiB, 0.7 and 2.1 MiB
    (at full scale 10.5 and 30.3, 2.7 and 8.2)."""
    scale = 4
    monkeypatch.setattr(markdown_search, "_PIECE", markdown_search._PIECE // scale)
    monkeypatch.setattr(markdown_search, "_KEEP", markdown_search._KEEP // scale)
    # (the smaller file kept whole from its check, the larger one read again)
    assert (512 << 10) // scale <= markdown_search._KEEP < (1536 << 10) // scale

    def run(kib: int):
        size = (kib << 10) // scale
        if kind == "newlines":
            data = b"\n" * size
        else:
            line = b"- a note about tabs and spaces, nothing else\n"
            data = line * (size // len(line)) + b"last hit\n"
        store = _store(tmp_path, {"MEMORY.md": data})
        got, peak = traced_peak(lambda: markdown_search.search(store, "hit", limit=5))
        return got, peak

    small, peak_small = run(512)
    big, peak_big = run(1536)
    assert small.files_searched == big.files_searched == 1
    assert len(big.hits) == (0 if kind == "newlines" else 1)
    assert peak_big - peak_small < (1 << 20) // scale, (peak_small, peak_big)
    assert peak_big < (8 << 20) // scale, peak_big


def test_a_limit_reached_stops_the_search_of_the_file(tmp_path, monkeypatch):
    """After the hits the limit needs (and one more, for ``truncated``), the
    rest of the file is only checked for UTF-8 (a bad byte there still skips
    the file) and the files after it are not read."""
    searched: list[int] = []
    real = markdown_search._search_lines

    def spy(regex, lines, first):
        searched.append(len(lines))
        return real(regex, lines, first)

    monkeypatch.setattr(markdown_search, "_search_lines", spy)
    monkeypatch.setattr(markdown_search, "_PIECE", 4096)
    data = b"tabs\n" * 100_000
    store = _store(tmp_path, {"MEMORY.md": data, "notes/n.md": b"tabs\n"})
    got = markdown_search.search(store, "tabs", limit=1)
    assert [h.line for h in got.hits] == [1] and got.truncated and got.files_searched == 1
    assert sum(searched) < 1000, sum(searched)
    store = _store(tmp_path, {"MEMORY.md": data + b"\xff\n", "notes/n.md": b"tabs\n"})
    got = markdown_search.search(store, "tabs", limit=1)
    assert [(h.file, h.line) for h in got.hits] == [("notes/n.md", 1)]
    assert not got.truncated and got.files_searched == 1
    assert got.skipped == [SkippedFile("MEMORY.md", "not valid UTF-8 (byte offset 500000, "
                                                    "line 100001)")]
