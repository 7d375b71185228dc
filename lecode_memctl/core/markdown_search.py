"""Regex search over a store's Markdown files (``memctl search``).

Part of :mod:`lecode_memctl.core.markdown`, which still offers every name
here (``markdown.search``, ``markdown.SearchResult``, ...); a module of its
own so that the commands that do not search do not load it at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import field
from itertools import compress

from ._record import record
from .atomic import read_pieces
from .errors import StoreCorrupt, UsageError
from .layout import Store
from .markdown import DEFAULT_SEARCH_LIMIT, Target, markdown_files, not_utf8, open_file
from .mdnames import _show, utf8_problem


@record(frozen=True)
class SearchHit:
    file: str   # relative to the store, e.g. "notes/todo.md"
    line: int   # 1-based; lines are split at "\n" only
    text: str   # the whole line, without its "\n"


@record(frozen=True)
class SkippedFile:
    file: str
    reason: str


@record(frozen=True)
class SearchResult:
    pattern: str
    limit: int
    hits: list[SearchHit]
    truncated: bool                 # more hits exist beyond ``limit``
    files_searched: int             # files read (up to the point the limit stopped the search)
    skipped: list[SkippedFile] = field(default_factory=list)


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"invalid regular expression {_show(pattern)}: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise UsageError(f"invalid regular expression {_show(pattern)}: {exc}") from None


# Bytes read at a time: search holds a piece, its lines and the line it
# ends in the middle of, not the file.
_PIECE = 1 << 18


def iter_search(store: Store, regex: re.Pattern[str],
                skipped: list[SkippedFile] | None = None,
                scanned: list[str] | None = None, *, offset: int = 0,
                want: int | None = None) -> Iterator[SearchHit]:
    """Every line of the store's Markdown files that ``regex`` matches, in file
    order, but the first ``offset`` of them, and at most ``want``.  Lines are
    split at ``\\n`` only (a file ending in one has an empty last line, an
    empty file one empty line).

    Each file is read in pieces of :data:`_PIECE` bytes and searched a
    piece's lines at a time (memory follows a piece and the longest line,
    not the file), and is given only once it was read to its end: its hits
    are yielded, and it is appended to ``scanned``, when it is all UTF-8.
    An unreadable or undecodable file is appended to ``skipped`` (when given)
    instead, none of its hits given or counted in ``offset``, as when a file
    was read and decoded whole before its lines were searched.  So after
    the ``want``-th hit the rest of its file is still read, to check that it
    is UTF-8, but not searched, and no later file is read."""
    left = want
    for target in markdown_files(store):
        if left is not None and left <= 0:
            return
        try:
            fd = open_file(store, target)
            if fd is None:
                continue
            try:
                found, passed = _search_file(store, target, fd, regex, offset, left)
            finally:
                os.close(fd)
        except StoreCorrupt as exc:
            if skipped is not None:
                reason = exc.message
                prefix = f"{target.path(store)}: "
                if reason.startswith(prefix):
                    reason = reason[len(prefix):]
                elif reason.startswith(target.relpath + ": "):
                    reason = reason[len(target.relpath) + 2:]
                skipped.append(SkippedFile(target.relpath, reason))
            continue
        if scanned is not None:
            scanned.append(target.relpath)
        offset -= passed
        if left is not None:
            left -= len(found)
        yield from found


def _search_lines(regex: re.Pattern[str], lines: list[str], first: int) -> Iterator[int]:
    """The numbers of the ``lines`` that ``regex`` matches, the first
    numbered ``first``.  The loops over the lines run in C (``map``,
    ``list.count``, ``compress``): no Python step per line, and none at all
    in a piece without a hit."""
    found = list(map(regex.search, lines))
    if found.count(None) == len(found):
        return iter(())
    return compress(range(first, first + len(lines)), found)


def _search_file(store: Store, target: Target, fd: int, regex: re.Pattern[str], skip: int,
                 room: int | None) -> tuple[list[SearchHit], int]:
    """Search one open file in pieces: (its hits after the first ``skip``,
    at most ``room`` of them; how many of the first ``skip`` it holds).
    ``StoreCorrupt`` when it cannot be read to its end or is not UTF-8
    (:func:`utf8_problem` over the same pieces names the first bad byte)."""
    rel = target.relpath
    hits: list[SearchHit] = []
    passed = 0
    no = 1                      # the number of the next line to search
    carry: list[bytes] = []     # the start of the line the last piece ended in
    searching = room is None or room > 0
    bad = False

    def search(block: bytes) -> None:
        """Search the whole lines ``block`` holds (no final newline)."""
        nonlocal no, passed, searching, bad
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:    # (the file is skipped: utf8_problem says where)
            searching, bad = False, True
            return
        lines = text.split("\n")
        for n in _search_lines(regex, lines, no):
            if passed < skip:
                passed += 1
                continue
            hits.append(SearchHit(rel, n, lines[n - no]))
            if room is not None and len(hits) >= room:
                searching = False
                return
        no += len(lines)

    def pieces() -> Iterator[bytes]:
        nonlocal carry
        for piece in read_pieces(fd, _PIECE):
            if searching:
                last = piece.rfind(b"\n")
                if last < 0:
                    carry.append(piece)     # (joined once, when its line ends)
                else:
                    carry.append(piece[:last])
                    block = b"".join(carry)
                    carry = [piece[last + 1:]]
                    search(block)
            yield piece
        if searching:
            search(b"".join(carry))     # the last line (empty after a final newline)
        carry = []

    try:
        where = utf8_problem(pieces())
    except OSError as exc:
        raise StoreCorrupt(f"{target.path(store)}: cannot read: {exc.strerror}") from None
    if where is not None:
        raise not_utf8(rel, where)
    assert not bad, rel
    return hits, passed


def search(store: Store, pattern: str, *, limit: int = DEFAULT_SEARCH_LIMIT,
           ignore_case: bool = False, offset: int = 0) -> SearchResult:
    """Python-regex search over the Markdown files only: at most ``limit``
    hits, after skipping the first ``offset``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"--limit must be a positive integer, not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError(f"--offset must be a non-negative integer, not {offset!r}")
    regex = compile_pattern(pattern, ignore_case=ignore_case)
    store.require()
    skipped: list[SkippedFile] = []
    hits: list[SearchHit] = []
    truncated = False
    scanned: list[str] = []
    # (one hit past the limit says whether more exist)
    for hit in iter_search(store, regex, skipped, scanned, offset=offset, want=limit + 1):
        if len(hits) == limit:
            truncated = True
            break
        hits.append(hit)
    return SearchResult(pattern, limit, hits, truncated, len(scanned), skipped)
