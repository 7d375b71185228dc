"""The notes of a store (``memctl notes``).

Part of :mod:`lecode_memctl.core.markdown`, which still offers both names; a
module of its own so that the other commands do not load it at start-up,
nor ``memctl notes`` the reading code.
"""

from __future__ import annotations

from pathlib import Path

from ._record import record
from .layout import NOTES_DIR, Store
from .mdnames import _md_entries, listed_note_name
from .rowmodel import utc_time


@record(frozen=True)
class NoteInfo:
    name: str
    path: Path
    size: int
    modified: str | None    # RFC 3339 UTC with Z and milliseconds (rowmodel.utc_time)
    mtime_ns: int


def list_notes(store: Store) -> list[NoteInfo]:
    """Every regular ``notes/*.md`` file, sorted by name, each under its note
    name (:func:`listed_note_name`: ``a.md.md`` under its file name).  ``NotFound`` when
    the store does not exist; empty when it has no ``notes/`` directory."""
    store.require()
    return [NoteInfo(listed_note_name(name), store.notes_dir / name, st.st_size,
                     utc_time(st.st_mtime), st.st_mtime_ns)
            for name, st in _md_entries(store, NOTES_DIR)]
