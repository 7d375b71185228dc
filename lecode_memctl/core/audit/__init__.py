"""``validate``: a read-only forensic audit of a store (model: ``git fsck``).

Each problem is a :class:`Finding` with a stable code (``CODES`` lists every
one, with its severity and the location fields it fills), a location and a
one-line message.  Nothing here writes to the store: files are opened
read-only without following symlinks, and the facts database only through
its read-only open.

Cost. Each transcript is read once, in one sequential pass
(``transcripts.session_job``; part of it again only where its cited records
outgrow a budget, or for ``deep``'s lineage chunks of a large one: below).
Without ``deep``, a transcript no fact references is read only at its header
line and its last bytes (torn tail, and back to its last generated message,
16 MiB at most, for the newest epoch); one that facts reference is read once
from the start, and only the lines of the referenced spans and the event lines
(undo/redo/clear after a span decide its visibility) are parsed: the others
have their seq read from the bytes. The parsed records the spans cite are kept
up to ``transcripts.WHOLE_BYTES`` of their lines; past that, the spans left
are decided from records read again (from the transcript in memory, or from
the file from a checkpoint), in one forward pass that keeps a record only
while a span holding it is open, so memory follows the spans' overlap, not the
transcript's size. The references are decided exactly as
``SessionStore.validate_many`` decides them (same visibility predicate, same
reasons; a test compares the two). ``deep`` parses every line (large reads,
bytes-level line splitting, ``orjson.loads``), keeps the records of that one
transcript in memory to check compaction lineage without rereading, and runs
the whole-transcript checks: corrupt lines, seq gaps, undo/redo targets,
compaction chains and learning events. With ``parallel`` (memctl validate; not
:func:`validate_store` by default), the jobs run in parallel worker processes
with ``deep`` and several transcripts, and without it when eight or more
referenced transcripts hold 64 MiB or more together
(``transcripts.run_jobs``).

The package, by layer: ``codes`` (the finding codes, findings, summaries),
``run`` (:class:`Audit`: the order of the checks; config, layout and
Markdown checks), ``transcripts`` (the transcript jobs), ``facts`` (the
database and fact checks).  Rendering (tables, Prometheus text) is the CLI's.
"""

from __future__ import annotations

from typing import Any

from ..layout import Store
from .codes import (
    CHECK_ORDER,
    CODES,
    ERROR,
    INFO,
    SEVERITIES,
    SEVERITY_RANK,
    WARNING,
    CodeInfo,
    Finding,
    Summary,
    check_ignore_codes,
    codes_table,
    finding_rank,
    sort_findings,
)
from .run import Audit


def validate_store(store: Store, *, parallel: bool = False,
                   **kwargs: Any) -> tuple[list[Finding], Summary]:
    """Run the whole audit of one store and return its findings and summary
    (the keyword arguments are :class:`Audit`'s).  ``parallel``: the
    transcripts of a deep audit, and half the facts of a large store, may
    be read by forked processes, as ``memctl validate`` reads them.  Off by
    default: a program that imports this may not want to be forked (a
    process with threads is not safe to fork).  A ``store`` that is not a
    :class:`~lecode_memctl.core.layout.Store` is a UsageError."""
    from ..layout import check_store_arg

    check_store_arg(store, "validate_store")
    a = Audit(store, parallel=parallel, **kwargs)
    findings = list(a.run())
    return findings, a.summary


__all__ = ["Audit", "CHECK_ORDER", "CODES", "CodeInfo", "ERROR", "Finding", "INFO",
           "SEVERITIES", "SEVERITY_RANK", "Summary", "WARNING", "check_ignore_codes",
           "codes_table", "finding_rank", "sort_findings", "validate_store"]
