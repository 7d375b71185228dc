"""Regex search over a store's Markdown files (``memctl search``).

Part of :mod:`lecode_memctl.core.markdown`, which still offers every name
here (``markdown.search``, ``markdown.SearchResult``, ...); a module of its
own so that the commands that do not search do not load it at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import field
from itertools import compress

from ._record import record
from .errors import StoreCorrupt, UsageError
from .layout import Store
from .markdown import (
    DEFAULT_SEARCH_LIMIT,
    Reread,
    Target,
    check_read,
    markdown_files,
    open_file,
    read_again,
)
from .mdnames import _show


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


def compile_pattern(pattern: str, *, ignore_case: bool = False,
                    warn: Callable[[str], None] | None = None) -> re.Pattern[str]:
    """The search pattern (:func:`userregex.compile_user_regex`, as ``grep``
    compiles its own): a bad one is a UsageError, what ``re`` warns of
    (``[[:alpha:]]``) is told to ``warn``, never printed by Python."""
    from .userregex import compile_user_regex

    return compile_user_regex(pattern, re.IGNORECASE if ignore_case else 0,
                              shown=_show(pattern), warn=warn)


# Bytes read at a time: search holds a piece, its lines and the line it
# ends in the middle of, not the file.
_PIECE = 1 << 18

# A file of at most this many bytes is kept in memory from its UTF-8 check
# to its search (read once); a larger one is checked by a first read and
# searched by a second read of the same descriptor, so that memory follows
# a piece, not the file, and yet no hit of a file that is not UTF-8 is given.
_KEEP = 1 << 20


class _Changed(Exception):
    """The second read of a file found it no longer as its first read did
    (changed in place meanwhile): ``what`` it found, at which ``line``, and
    ``given_before``, the first line none of whose hits were given (those
    before it were, and cannot be taken back).  An append is not a change:
    the second read stops at the size the first one read."""

    def __init__(self, what: str, line: int, given_before: int) -> None:
        super().__init__(what)
        self.what, self.line, self.given_before = what, line, given_before

    def reason(self) -> str:
        return (f"changed in place while it was searched ({self.what}, at line {self.line}); "
                f"only its hits before line {self.given_before} were given")


class SearchRun:
    """A search as it runs, for output that streams (``memctl search``):
    :meth:`hits` gives at most ``limit`` hits as they are found, then looks
    for one more, which says ``truncated``.  Once the hits are done,
    ``truncated``, ``files_searched`` and ``skipped`` say what only the end
    of the search knows; ``on_skip`` hears of each skipped file when it is
    found (a warning can be printed then, among the hits).  One run, one
    call of :meth:`hits`."""

    __slots__ = ("_store", "_targets", "_regex", "_on_skip", "_scanned",
                 "pattern", "limit", "offset", "given", "truncated", "skipped")

    def __init__(self, store: Store, targets: list[Target], regex: re.Pattern[str],
                 pattern: str, limit: int, offset: int,
                 on_skip: Callable[[SkippedFile], None] | None) -> None:
        self._store, self._targets, self._regex = store, targets, regex
        self._on_skip = on_skip
        self._scanned: list[str] = []
        self.pattern, self.limit, self.offset = pattern, limit, offset
        self.given = 0                  # hits given so far
        self.truncated = False          # more hits exist beyond ``limit``
        self.skipped: list[SkippedFile] = []

    @property
    def files_searched(self) -> int:
        """Files read and found UTF-8 (up to the point the limit stopped the search)."""
        return len(self._scanned)

    def _skip(self, s: SkippedFile) -> None:
        self.skipped.append(s)
        if self._on_skip is not None:
            self._on_skip(s)

    def hits(self) -> Iterator[SearchHit]:
        # (one hit past the limit says whether more exist)
        found = _iter_files(self._store, self._targets, self._regex, self._skip, self._scanned,
                            offset=self.offset, want=self.limit + 1)
        try:
            for hit in found:
                if self.given == self.limit:
                    self.truncated = True
                    return
                self.given += 1
                yield hit
        finally:
            found.close()


def _check_window(limit: int, offset: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"--limit must be a positive integer, not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError(f"--offset must be a non-negative integer, not {offset!r}")


def stream_search(store: Store, pattern: str, *, limit: int = DEFAULT_SEARCH_LIMIT,
                  ignore_case: bool = False, offset: int = 0,
                  on_skip: Callable[[SkippedFile], None] | None = None) -> SearchRun:
    """:func:`search` as it runs: the hits as they are found, in memory that
    follows a piece and the longest line, whatever their number.  What can
    be refused at once (the limit, the offset, the pattern, a missing store,
    a daily/ or notes/ that cannot be listed) is, before any hit."""
    _check_window(limit, offset)
    regex = compile_pattern(pattern, ignore_case=ignore_case)
    store.require()
    return SearchRun(store, markdown_files(store), regex, pattern, limit, offset, on_skip)


def search(store: Store, pattern: str, *, limit: int = DEFAULT_SEARCH_LIMIT,
           ignore_case: bool = False, offset: int = 0) -> SearchResult:
    """Python-regex search over the Markdown files only: at most ``limit``
    hits, after skipping the first ``offset`` (:func:`stream_search`,
    collected)."""
    run = stream_search(store, pattern, limit=limit, ignore_case=ignore_case, offset=offset)
    hits = list(run.hits())
    return SearchResult(pattern, limit, hits, run.truncated, run.files_searched, run.skipped)


def iter_search(store: Store, regex: re.Pattern[str],
                skipped: list[SkippedFile] | None = None,
                scanned: list[str] | None = None, *, offset: int = 0,
                want: int | None = None) -> Iterator[SearchHit]:
    """Every line of the store's Markdown files that ``regex`` matches, in file
    order, but the first ``offset`` of them, and at most ``want``.  Lines are
    split at ``\\n`` only (a file ending in one has an empty last line, an
    empty file one empty line).

    A file is checked to be UTF-8 to its end before its first hit is given
    (:func:`~lecode_memctl.core.markdown.check_read`), then searched a piece's lines at a time, its hits
    given as they are found; it is appended to ``scanned`` once checked.
    An unreadable or undecodable file is appended to ``skipped`` (when
    given) instead, none of its hits given or counted in ``offset``, as when
    a file was read and decoded whole before its lines were searched.  After
    the ``want``-th hit no more of its file is searched and no later file
    is read.  A file found changed in place between its check and its search
    (:class:`_Changed`) is taken out of ``scanned`` and appended to
    ``skipped``: the hits it gave before the change stay given."""
    return _iter_files(store, None, regex, None if skipped is None else skipped.append,
                       scanned, offset=offset, want=want)


def _skipped(store: Store, target: Target, exc: StoreCorrupt) -> SkippedFile:
    """The file and the reason of ``exc`` without the file's name before it."""
    reason = exc.message
    prefix = f"{target.path(store)}: "
    if reason.startswith(prefix):
        reason = reason[len(prefix):]
    elif reason.startswith(target.relpath + ": "):
        reason = reason[len(target.relpath) + 2:]
    return SkippedFile(target.relpath, reason)


def _iter_files(store: Store, targets: list[Target] | None, regex: re.Pattern[str],
                skip: Callable[[SkippedFile], None] | None, scanned: list[str] | None, *,
                offset: int, want: int | None) -> Generator[SearchHit, None, None]:
    """:func:`iter_search` over ``targets`` (default: :func:`markdown_files`,
    listed when the first hit is asked for), each skipped file told to
    ``skip``.  The descriptor of the file being searched stays open while
    its hits are given, and is closed when the generator is closed."""
    left = want
    for target in markdown_files(store) if targets is None else targets:
        if left is not None and left <= 0:
            return
        rel = target.relpath
        try:
            fd = open_file(store, target)
        except StoreCorrupt as exc:
            if skip is not None:
                skip(_skipped(store, target, exc))
            continue
        if fd is None:
            continue
        try:
            try:
                checked = check_read(store, target, fd, keep=_KEEP, piece=_PIECE)
            except StoreCorrupt as exc:
                if skip is not None:
                    skip(_skipped(store, target, exc))
                continue
            if scanned is not None:
                scanned.append(rel)
            pieces = (checked.kept if checked.kept is not None
                      else read_again(fd, checked.size, _PIECE))
            try:
                for n, text in _found_lines(pieces, regex):
                    if offset:
                        offset -= 1
                        continue
                    yield SearchHit(rel, n, text)
                    if left is not None:
                        left -= 1
                        if left <= 0:
                            return
            except _Changed as exc:
                if scanned is not None:
                    scanned.pop()
                if skip is not None:
                    skip(SkippedFile(rel, exc.reason()))
        finally:
            os.close(fd)


def _search_lines(regex: re.Pattern[str], lines: list[str], first: int) -> Iterator[int]:
    """The numbers of the ``lines`` that ``regex`` matches, the first
    numbered ``first``.  The loops over the lines run in C (``map``,
    ``list.count``, ``compress``): no Python step per line, and none at all
    in a piece without a hit."""
    found = list(map(regex.search, lines))
    if found.count(None) == len(found):
        return iter(())
    return compress(range(first, first + len(lines)), found)


def _found_lines(pieces: Iterable[bytes], regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    """(number, text) of each line that ``regex`` matches in a file checked
    UTF-8 and given as ``pieces`` (its bytes in order, cut anywhere): the
    whole lines each piece ends are searched at once, the line it ends in
    the middle of waits for the next.  A block that no longer decodes, or a
    second read that fails, raises :class:`_Changed`."""
    no = 1                      # the number of the next line to search
    carry: list[bytes] = []     # the start of the line the last piece ended in
    it = iter(pieces)
    while True:
        try:
            piece = next(it, None)
        except Reread as exc:
            raise _Changed(str(exc), no, no) from None
        if piece is None:
            block = b"".join(carry)     # the last line (empty after a final newline)
        else:
            last = piece.rfind(b"\n")
            if last < 0:
                carry.append(piece)     # (joined once, when its line ends)
                continue
            carry.append(piece[:last])
            block = b"".join(carry)
            carry = [piece[last + 1:]]
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Changed("no longer valid UTF-8", no + block.count(b"\n", 0, exc.start),
                           no) from None
        lines = text.split("\n")
        for n in _search_lines(regex, lines, no):
            yield n, lines[n - no]
        if piece is None:
            return
        no += len(lines)
