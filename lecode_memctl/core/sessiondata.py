"""What :meth:`SessionStore.source_snapshot` and the session listing return.

Part of :mod:`lecode_memctl.core.sessions`, which still offers both names; a
module of its own so that the commands that neither capture evidence nor
list sessions do not load it at start-up.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ._record import record
from .sourceref import SourceRef


@record(frozen=True)
class Snapshot:
    """A validated capture: the ref, every complete record of the (clamped)
    requested span in seq order, and the visible message positions."""

    ref: SourceRef
    records: list[dict[str, Any]]
    visible: list[int]
    start: int
    end: int                     # the requested end clamped to the last complete record
    last_seq: int                # the last complete record of the session
    hidden: dict[int, str] = field(default_factory=dict)   # message seq -> reason

    def messages(self) -> list[tuple[int, dict[str, Any]]]:
        """The visible messages as ``(seq, record)`` pairs, in seq order."""
        keep = set(self.visible)
        return [(r["seq"], r) for r in self.records if r["seq"] in keep]


@record(frozen=True)
class SessionInfo:
    """One session's row of ``memctl sessions`` (``SessionStore.info``,
    ``list_sessions``, ``iter_sessions``): its header's creation time, its last append,
    its counts, and its ``state`` (ok, torn_tail, corrupt, refused,
    unreadable) with why."""

    id: str
    created: str | None
    last_time: str | None          # mtime of the file (the last append), ISO 8601 UTC
    records: int | None            # complete records (last seq + 1)
    messages: int | None
    compactions: int | None
    size: int
    state: str                     # ok, torn_tail, corrupt, refused, unreadable
    reason: str | None = None      # a REASONS key, a corruption kind or torn_tail (None: ok)
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, "last_time": self.last_time,
                "records": self.records, "messages": self.messages,
                "compactions": self.compactions, "size": self.size, "state": self.state,
                "reason": self.reason, "detail": self.detail}
