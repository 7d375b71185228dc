"""Legacy provenance rows (:class:`Provenance`), apart from :mod:`.facts`:
only databases written before source references hold them, so the read
commands create the class only when a fact has one (see core/_lazy.py);
``facts`` offers the name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Provenance:
    """A legacy provenance row: positions of a session, no digest.  Reported
    ``unverified``; never trusted or backfilled into a SourceRef."""

    session_id: str
    seqs: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "seqs": list(self.seqs)}
