"""The names and dates of a store's Markdown files, checked by syntax only,
the listing of the ``*.md`` files of a directory of a store, and where a
file's bytes stop being UTF-8 (:func:`utf8_problem`).

Part of :mod:`lecode_memctl.core.markdown`, which re-exports every public
name here; a module of its own so that the audit (which checks the names of
the files in ``notes/``) and ``memctl notes`` do not import the reading and
writing code and its dataclasses.
"""

from __future__ import annotations

import codecs
import datetime as _dt
import os
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._lazy import lazy_compile
from .atomic import is_temp_name, lstat_dir
from .errors import StoreCorrupt, UsageError, raise_if_out_of_fds
from .layout import Store, regular_files

MD_SUFFIX = ".md"
BAK_SUFFIX = ".bak"
NOTE_NAME_MAX_CHARS = 100
FILE_NAME_MAX_BYTES = 255
#: The most bytes of UTF-8 a note name may have: ``<name>.md.bak``, the
#: backup every write after the first makes, must fit a file name (before
#: 2026-12-07 only ``<name>.md`` had to: a name of 249..252 bytes was
#: created, and every later write failed, "File name too long").
NOTE_NAME_MAX_BYTES = FILE_NAME_MAX_BYTES - len(MD_SUFFIX + BAK_SUFFIX)

# \Z, not $: "$" also matches before a trailing newline
_DATE_RE = lazy_compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


def _show(value: str, limit: int = 60) -> str:
    # (a byte of a file name that is not UTF-8, which os.listdir gives as a
    # lone surrogate, is shown as memctl shows it elsewhere: \xNN, not \udcNN)
    from .rowmodel import quoted

    shown = quoted(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def check_note_name(name: object, *, writing: bool = False) -> str:
    """The canonical note name, or ``UsageError``.  Syntax only, no filesystem call.

    A trailing ``.md`` is accepted and stripped once (``todo.md`` names the
    note ``todo``, file ``notes/todo.md``).  The name is 1..100 characters,
    has no ``/`` or ``\\``, no ``..``, no leading ``.``, no leading or
    trailing whitespace, no control or format characters (C0, DEL, C1, bidi
    controls, zero-width characters), does not itself end in ``.md``, and
    ``<name>.md`` fits 255 bytes of UTF-8 (the name at most 252 bytes): the
    reading rule, for a note read, listed, audited, exported or migrated
    (migration copies without a ``.bak`` and never overwrites).  With
    ``writing`` (``edit note``, :func:`markdown.write` of a note) its backup
    ``<name>.md.bak`` must fit too: the name is at most
    :data:`NOTE_NAME_MAX_BYTES` (248) bytes.  (For a while on 2026-12-07
    the 248-byte rule applied to reading as well: a note of 249..252 bytes
    dropped out of validate's layout, export and migrate-legacy, and 'notes
    NAME' refused it.)  Letters of any script, digits, spaces and
    punctuation are allowed.
    """
    if not isinstance(name, str):
        raise UsageError(f"invalid note name {_show(str(name))}: not a string")
    raw = name
    if name.endswith(MD_SUFFIX):
        name = name[:-len(MD_SUFFIX)]

    def bad(why: str) -> UsageError:
        return UsageError(f"invalid note name {_show(raw)}: {why}",
                          hint="note names are 1-100 characters without '/', '\\', '..', "
                               "a leading dot or control characters")

    if not name:
        raise bad("empty")
    if len(name) > NOTE_NAME_MAX_CHARS:
        raise bad(f"longer than {NOTE_NAME_MAX_CHARS} characters")
    if "/" in name or "\\" in name:
        raise bad("contains a path separator")
    if ".." in name:
        raise bad("contains '..'")
    if name.startswith("."):
        raise bad("starts with a dot")
    if name != name.strip():
        raise bad("starts or ends with whitespace")
    for ch in name:
        cat = unicodedata.category(ch)
        # Cc: C0, DEL, C1 (NUL included); Cf: bidi controls, zero-width, BOM;
        # Cs: lone surrogates (undecodable bytes on the command line);
        # Zl/Zp: line and paragraph separators.
        if cat == "Cs":
            raise bad("contains bytes that are not valid UTF-8")
        if cat in ("Cc", "Cf", "Zl", "Zp"):
            raise bad(f"contains the control or format character U+{ord(ch):04X}")
    if name.endswith(MD_SUFFIX):
        raise bad("ends in '.md' even after removing one '.md' suffix")
    if len((name + MD_SUFFIX).encode("utf-8")) > FILE_NAME_MAX_BYTES:
        raise bad(f"'<name>.md' would be longer than {FILE_NAME_MAX_BYTES} bytes")
    if writing and len(name.encode("utf-8")) > NOTE_NAME_MAX_BYTES:
        raise bad(f"longer than {NOTE_NAME_MAX_BYTES} bytes of UTF-8 (its backup "
                  f"'<name>.md.bak' must fit {FILE_NAME_MAX_BYTES} bytes)")
    return name


def listed_note_name(file_name: str) -> str:
    """The name ``memctl notes`` lists the ``notes/`` file ``file_name``
    (``*.md``) under: without its ``.md``, unless that leaves a name that
    ends in ``.md`` -- ``a.md.md`` (made by another tool) would be listed as
    ``a.md``, which names ``notes/a.md`` (:func:`check_note_name` strips one
    ``.md``): such a file is listed under its whole file name, which every
    command refuses, so that no listed name maps to another file."""
    name = file_name[:-len(MD_SUFFIX)]
    return file_name if name.endswith(MD_SUFFIX) else name


def is_note_file(name: str) -> bool:
    """Whether a ``notes/`` entry is ``<note name>.md`` with a name ``memctl
    note`` would read (the audit's layout check, the bundle's export: the
    reading rule, ``<name>.md`` at most 255 bytes)."""
    if not name.endswith(".md"):
        return False
    try:
        check_note_name(name)
    except UsageError:
        return False
    return True


def check_date(date: object) -> str:
    """A real calendar date ``YYYY-MM-DD`` unchanged, or ``UsageError``."""
    if not isinstance(date, str) or not _DATE_RE.match(date):
        raise UsageError(f"invalid date {_show(str(date))}: use YYYY-MM-DD, e.g. 2026-02-28")
    try:
        _dt.date.fromisoformat(date)
    except ValueError:
        raise UsageError(f"invalid date {_show(date)}: no such calendar day") from None
    return date


def daily_name_problem(name: str) -> str | None:
    """None when a ``daily/`` entry is ``YYYY-MM-DD.md`` naming a real
    calendar day in ASCII digits (the dates ``check_date`` accepts), else
    why not: the one rule ``log``, the audit's layout check, the bundle's
    export and ``migrate-legacy`` share."""
    stem = name[:-len(MD_SUFFIX)] if name.endswith(MD_SUFFIX) else None
    if stem is None or not _DATE_RE.match(stem):
        return "not a daily log name (daily/YYYY-MM-DD.md)"
    try:
        check_date(stem)
    except UsageError:
        return "not a daily log name: no such calendar day"
    return None


def is_daily_file(name: str) -> bool:
    """Whether a ``daily/`` entry is a daily log (``daily_name_problem``)."""
    return daily_name_problem(name) is None


def today() -> str:
    """Today's local date as ``YYYY-MM-DD`` (the daily log lecode writes to)."""
    return _dt.date.today().isoformat()


# ---------------------------------------------------------------- listing

def _md_entries(store: Store, sub: str, *,
                every: bool = False) -> list[tuple[str, os.stat_result]]:
    """Regular ``*.md`` files directly in ``store/sub`` (no symlinks, no temp
    files, no ``.bak``), sorted by name, with their ``lstat``.  With
    ``every``, also the ``*.md`` entries that are not regular files (symbolic
    links, FIFOs, directories, ...): search reports those as skipped rather
    than leave them out unsaid.  Empty when the directory is missing;
    ``StoreCorrupt`` when it is a symlink."""
    d = store.path / sub
    if lstat_dir(d) is None:
        return []
    out = []
    try:
        for name, est in (_md_any(d) if every else regular_files(d, MD_SUFFIX)):
            if not is_temp_name(name) and name != MD_SUFFIX:
                out.append((name, est))
    except OSError as exc:
        raise_if_out_of_fds(exc, d)
        raise StoreCorrupt(f"{d}: cannot list: {exc.strerror}") from None
    out.sort(key=lambda e: e[0])
    return out


def _md_any(d: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of every ``*.md`` entry directly in ``d``, whatever its
    type (an entry that vanishes meanwhile is left out, as ``regular_files``
    does)."""
    with os.scandir(d) as it:
        for entry in it:
            if entry.name.endswith(MD_SUFFIX):
                try:
                    yield entry.name, entry.stat(follow_symlinks=False)
                except OSError:
                    continue


def utf8_problem(pieces: Iterable[bytes]) -> tuple[int, int] | None:
    """(byte offset, line) of the first byte that is not UTF-8 in a file
    given as ``pieces`` (its bytes in order, cut anywhere), or None when it
    is all UTF-8: checked piece by piece, so memory follows a piece, not the
    file (``validate`` reads a note so).  The byte is the one decoding the
    whole file names; the line counts its newlines before it, from 1."""
    offset, line, pending = 0, 1, b""
    for piece in pieces:
        buf = pending + piece if pending else piece
        try:
            # (final=False: a character cut at the piece's end waits for the next)
            used = codecs.utf_8_decode(buf, "strict", False)[1]
        except UnicodeDecodeError as exc:
            return offset + exc.start, line + buf.count(b"\n", 0, exc.start)
        line += buf.count(b"\n", 0, used)
        offset += used
        pending = buf[used:]
    try:
        codecs.utf_8_decode(pending, "strict", True)
    except UnicodeDecodeError as exc:     # a character cut by the end of the file
        return offset + exc.start, line + pending.count(b"\n", 0, exc.start)
    return None
