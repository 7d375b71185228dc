"""What the writes of :class:`~lecode_memctl.core.facts.FactStore` return.

Part of :mod:`lecode_memctl.core.facts`, which still offers both names; a
module of its own so that the commands that only read facts do not load it
at start-up.
"""

from __future__ import annotations

from ._record import record
from .facts import Fact


@record(frozen=True)
class RememberResult:
    """What ``remember`` returns: the fact, and whether this call created it
    (``created`` False: an idempotent retry of the same remember, or, with
    ``deduplicate``, an equal fact already there, ``deduplicated``)."""

    fact: Fact
    created: bool          # False: an idempotent retry or a deduplicated incumbent
    deduplicated: bool = False


@record(frozen=True)
class ForgetPlan:
    """What ``forget(fact_id)`` would do (``memctl forget --dry-run``)."""

    fact_id: str
    exists: bool                                  # False: already forgotten (marker present)
    exclusions: tuple[tuple[str, int], ...]       # (session id, seq) to install, new ones only
    already_excluded: tuple[tuple[str, int], ...]
    generation: int                               # the current generation
    new_generation: int
    suppressed_facts: tuple[str, ...]             # other facts whose evidence the exclusions hit
    # (revision, reason) of each revision whose source row does not parse: it
    # names no position, so its evidence is not excluded (the fact is still
    # forgotten); revision None when the row's revision is no integer
    unexcluded: tuple[tuple[int | None, str], ...] = ()
