"""One page of source text: what :func:`~lecode_memctl.core.paging.page_text` returns.

Part of :mod:`lecode_memctl.core.paging`, which still offers ``Page``; a
module of its own so that the commands that import paging only for its
constants (the facts listing) do not load it at start-up.
"""

from __future__ import annotations

from ._record import record


@record(frozen=True)
class Page:
    source_text: str
    offset: int
    next_offset: int | None
    limit: int            # the effective limit (after clamping)
    total_chars: int      # characters in the whole array text

    @property
    def chars(self) -> int:
        return len(self.source_text)
