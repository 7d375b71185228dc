"""One line of a transcript as :meth:`SessionStore.scan` reports it
(:class:`ScanItem`), apart from :mod:`.sessions` so that the commands that
never scan a transcript line by line do not create the class (see
core/_lazy.py); ``sessions`` offers the name."""

from __future__ import annotations

from typing import Any

from ._record import record
from .sessions import CORRUPTION_KINDS


@record(frozen=True)
class ScanItem:
    """One line of a transcript: a record, a corruption, or the torn tail."""

    line: int                      # 1-based line number
    offset: int                    # byte offset of the line start
    kind: str                      # "record" or a corruption kind or "torn_tail"
    seq: int | None = None
    record: dict[str, Any] | None = None     # set only when kind == "record"
    detail: str | None = None
    # an event record the readers apply: its line is an event line (event_line)
    event: bool = False

    @property
    def corrupt(self) -> bool:
        return self.kind in CORRUPTION_KINDS
