"""Paging of source text under a byte cap (reference design, "Output").

The whole printed object is at most 16,384 UTF-8 bytes including its JSON
metadata.  ``source_text`` is a character page of the JSON array
``[[seq, message], ...]`` of the visible messages, holding the original
message records; binary attachment payloads are replaced by omission
markers.  Pages are ``limit`` characters (default 4096, clamped to 8192),
fewer when JSON escaping of the page would exceed the byte budget.  The
size is that of the document as ``render`` gives it (default: pretty JSON
with its final newline, which compact JSON never exceeds); memctl's
printer passes its own, with a terminal's escapes.  Pass
``next_offset`` back as ``offset``; ``None`` means finished.  Concatenate
the pages' ``source_text`` before parsing the array.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .errors import UsageError

if TYPE_CHECKING:
    from .pagedata import Page as Page
else:
    from ._lazy import lazy_getattr

    # Loaded on first use (see core/_lazy.py): the facts listing only needs
    # the constants below.
    _MOVED = {"Page": ".pagedata"}
    __getattr__ = lazy_getattr(__name__, _MOVED)

MAX_OUTPUT_BYTES = 16384
DEFAULT_LIMIT = 4096
MAX_LIMIT = 8192
MIN_BUDGET = 16   # bytes: room for at least one escaped character


def binary_size(data: Any) -> int | None:
    """Decoded size of a base64 payload, or None when it is not valid base64 text."""
    if not isinstance(data, str):
        return None
    import base64  # only for a binary part
    import binascii

    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def omit_binary(obj: Any) -> Any:
    """A copy of ``obj`` with every ``{"type": "binary", "data": ...}`` part's
    ``data`` replaced by ``"omitted_bytes": N`` (the decoded size, or null)."""
    if isinstance(obj, Mapping):
        if obj.get("type") == "binary" and "data" in obj:
            out = {k: omit_binary(v) for k, v in obj.items() if k != "data"}
            out["omitted_bytes"] = binary_size(obj["data"])
            return out
        return {k: omit_binary(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [omit_binary(v) for v in obj]
    return obj


def source_array(items: Sequence[tuple[int, Mapping[str, Any]]]) -> list[list[Any]]:
    """``[[seq, message], ...]`` with binary payloads omitted."""
    return [[seq, omit_binary(msg)] for seq, msg in items]


def source_array_text(items: Sequence[tuple[int, Mapping[str, Any]]]) -> str:
    return orjson.dumps(source_array(items)).decode("utf-8")


def escaped_size(text: str) -> int:
    """UTF-8 bytes of ``text`` as a JSON string value, without the quotes."""
    return len(orjson.dumps(text)) - 2


def clamp_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"limit must be a positive integer (at most {MAX_LIMIT}), not {limit!r}")
    return min(limit, MAX_LIMIT)


def page_text(text: str, *, offset: int = 0, limit: int = DEFAULT_LIMIT, budget: int,
              size: Callable[[str], int] = escaped_size) -> Page:
    """One character page of ``text`` whose JSON-escaped size (``size``) is
    at most ``budget`` bytes."""
    from .pagedata import Page

    lim = clamp_limit(limit)
    total = len(text)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError(f"offset must be a non-negative integer, not {offset!r}")
    if offset > total:
        raise UsageError(f"offset {offset} is past the end ({total} characters)")
    if budget < MIN_BUDGET:
        raise UsageError("output budget too small for a page")
    n = min(lim, total - offset)
    if size(text[offset:offset + n]) > budget:
        lo, hi = 0, n   # the largest n' in [lo, hi] that fits; lo always fits
        while lo < hi:
            m = (lo + hi + 1) // 2
            if size(text[offset:offset + m]) <= budget:
                lo = m
            else:
                hi = m - 1
        n = lo
    end = offset + n
    return Page(text[offset:end], offset, end if end < total else None, lim, total)


def page_source(items: Sequence[tuple[int, Mapping[str, Any]]], *, offset: int = 0,
                limit: int = DEFAULT_LIMIT, budget: int) -> Page:
    """A page of the ``[[seq, message], ...]`` array text of ``items``.

    ``budget``: the most UTF-8 bytes the page may take as a JSON string value
    (escaped, without quotes); see :func:`page_document` to derive it from
    the 16,384-byte cap on the whole printed object.
    """
    return page_text(source_array_text(items), offset=offset, limit=limit, budget=budget)


Render = Callable[[Any], bytes]


def pretty_json(obj: Any) -> bytes:
    """The default ``render``: ``obj`` as indented JSON with a final newline.
    Pretty output is never smaller than compact output, so a document that
    fits pretty fits both ways."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"


def page_document(meta: Mapping[str, Any], items: Sequence[tuple[int, Mapping[str, Any]]], *,
                  offset: int = 0, limit: int = DEFAULT_LIMIT,
                  max_bytes: int = MAX_OUTPUT_BYTES,
                  render: Render = pretty_json) -> tuple[dict[str, Any], Page]:
    """``meta`` plus ``source_text``, ``offset``, ``next_offset``, ``limit`` and
    ``total_chars``, the whole document at most ``max_bytes`` as ``render``
    gives it: by default pretty JSON with its final newline, which compact
    JSON never exceeds.  A printer passes its own bytes (memctl's
    ``cli.output.page_bytes``, a terminal's escapes included); a string
    must take the same bytes rendered alone as inside the document, as in
    JSON (the page's share is measured alone)."""
    return _page_of_text(meta, source_array_text(items), offset=offset, limit=limit,
                         max_bytes=max_bytes, render=render)


def iter_pages(meta: Mapping[str, Any], items: Sequence[tuple[int, Mapping[str, Any]]], *,
               offset: int = 0, limit: int = DEFAULT_LIMIT,
               max_bytes: int = MAX_OUTPUT_BYTES,
               render: Render = pretty_json) -> Iterator[dict[str, Any]]:
    """Every page from ``offset`` to the end, each as :func:`page_document`
    builds it, of one capture: the array text is built once and every page
    has the same metadata (so the same ``source.digest``)."""
    text = source_array_text(items)
    while True:
        doc, page = _page_of_text(meta, text, offset=offset, limit=limit, max_bytes=max_bytes,
                                  render=render)
        yield doc
        if page.next_offset is None:
            return
        offset = page.next_offset


def _page_of_text(meta: Mapping[str, Any], text: str, *, offset: int, limit: int,
                  max_bytes: int, render: Render) -> tuple[dict[str, Any], Page]:
    total = len(text)
    # ``source_text``'s share of the rendered document: its string value
    # rendered alone, less an empty string's (the quotes, a newline)
    empty = len(render(""))

    def text_size(s: str) -> int:
        return len(render(s)) - empty

    def build(page_text_: str, off: int, nxt: int | None, lim: int) -> dict[str, Any]:
        doc = dict(meta)
        doc.update({"source_text": page_text_, "offset": off, "next_offset": nxt,
                    "limit": lim, "total_chars": total})
        return doc

    if isinstance(offset, int) and not isinstance(offset, bool) and offset > total:
        # before the frame is sized: an offset beyond 64 bits cannot even be encoded
        raise UsageError(f"offset {offset} is past the end ({total} characters)")
    lim = clamp_limit(limit)
    # Worst-case metadata: next_offset as wide as total_chars.
    frame = len(render(build("", offset if isinstance(offset, int) else 0, total, lim)))
    budget = max_bytes - frame
    if budget < MIN_BUDGET:
        raise UsageError("the metadata alone exceeds the output cap")
    page = page_text(text, offset=offset, limit=lim, budget=budget, size=text_size)
    doc = build(page.source_text, page.offset, page.next_offset, page.limit)
    assert len(render(doc)) <= max_bytes, "page exceeds the output cap"
    return doc, page
