"""Regex search over a store's Markdown files (``memctl search``).

Part of :mod:`lecode_memctl.core.markdown`, which still offers every name
here (``markdown.search``, ``markdown.SearchResult``, ...); a module of its
own so that the commands that do not search do not load it at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import field

from ._record import record
from .errors import StoreCorrupt, UsageError
from .layout import Store
from .markdown import DEFAULT_SEARCH_LIMIT, decode, markdown_files, read_bytes
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


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"invalid regular expression {_show(pattern)}: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise UsageError(f"invalid regular expression {_show(pattern)}: {exc}") from None


def iter_search(store: Store, regex: re.Pattern[str],
                skipped: list[SkippedFile] | None = None,
                scanned: list[str] | None = None) -> Iterator[SearchHit]:
    """Every line of the store's Markdown files that ``regex`` matches, in file
    order.  An unreadable or undecodable file is appended to ``skipped`` (when
    given) and skipped; each file actually read is appended to ``scanned``."""
    for target in markdown_files(store):
        try:
            data = read_bytes(store, target)
            if data is None:
                continue
            text = decode(data, target.relpath)
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
        for no, line in enumerate(text.split("\n"), 1):
            if regex.search(line):
                yield SearchHit(target.relpath, no, line)


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
    for i, hit in enumerate(iter_search(store, regex, skipped, scanned)):
        if i < offset:
            continue
        if len(hits) == limit:
            truncated = True
            break
        hits.append(hit)
    return SearchResult(pattern, limit, hits, truncated, len(scanned), skipped)
