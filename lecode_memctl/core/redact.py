"""``memctl redact``: erase the values ``memctl secrets`` found.

The findings pick values; each picked value is erased wherever it is, a
detector fired there or not: the plan searches every file the scan reads
and every fact revision's text for it (:func:`plan_redaction`): a copy
counts only at word boundaries, and a value shorter than
:data:`~lecode_memctl.core.secrets.MIN_COPY_LENGTH` characters is erased
only on the lines a detector found it on (review rv7, 2026-12-07).  Every
file is rewritten whole and atomically (temporary file beside it,
``fsync``, ``os.replace``, directory ``fsync``: :func:`atomic.atomic_write`
without a ``.bak``, since the previous content is what must go):

* a transcript under its session lock (``sessions/<id>.lock``, the lock the
  session writer holds; exit 6 while the agent has it), every record and seq
  kept: a record holding a value is parsed, the value replaced in each of its
  strings and keys by ``[REDACTED:<detector>:<sha256 prefix>]`` and the
  record written back as compact JSON with its keys in the same order, the
  structure the store contract defines untouched (:data:`STRUCTURE`): its
  identifying fields (seq, type; the header's session_id, project, format; a
  message's role, an event's name, a part's type; a compaction lineage's
  session_id) and the keys the contract names; a line that parses as
  JSON but is no object (a string, an array) has the value replaced in
  each of its strings, decoded; a line that does not parse (or a torn
  tail) has the value's bytes replaced, its escapes not decoded;
* every other file (Markdown, ``.bak``, leftovers): the value's bytes replaced;
* a fact whose text (any revision) holds a value is forgotten (``FactStore.forget``:
  content-free exclusions, generation + 1), then the database is cleaned so
  that no byte of the text remains: ``secure_delete``, ``VACUUM``, and the
  ``-wal`` checkpointed and truncated.

A value that is (in) a session id cannot be erased (the file's name, its
header, the facts' evidence and the exclusions: live rows of the
database), nor one in a file's name (no file is renamed): every other copy
is, and the plan lists it in ``kept`` with its reasons; outputs show such
a session id or file name with the marker in its place.  So is a value
the structure keeps (a role ``user``, a key ``content``).  After the clean
the database's files are read for every value: one still there is added to
the result's ``kept``, never reported as redacted.

Order: all session locks are taken first (any busy: nothing changed), then
transcripts, other files, forgets, the database clean.  A kill leaves every
file whole-before or whole-after; running redact again finishes the job.  An
error midway keeps what was done and its message says what that was
(:func:`_unfinished`); so does an interrupt (:class:`RedactInterrupted`).

:func:`plan_redaction` computes, without writing, what changes file by
file and the impact on facts: each fact whose evidence digest a rewritten
record changes (it becomes stale), each compaction whose lineage covers a
rewritten record or whose ``prior`` record is rewritten, and what the
forgets do to the generation.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

import orjson

from ._record import record
from .atomic import read_regular
from .errors import Conflict, MemctlError, StoreBusy, StoreCorrupt, StoreWriteError
from .layout import FACTS_DB, Store
from .secrets import (
    DATABASE_FILES,
    KIND_DATABASE,
    KIND_FACT,
    KIND_FILE,
    KIND_TRANSCRIPT,
    MIN_COPY_LENGTH,
    Finding,
    hide_in_location,
    hide_values,
    other_json_strings,
    parsed_record,
    replace_values,
    session_id_values,
)
from .sessions import SessionStore, event_line
from .sourceref import SESSION_ID_RE, accepted, held_bytes

BUSY_TIMEOUT = 5.0


@record
class FileChange:
    file: str
    kind: str                               # transcript or file
    replacements: int
    records: list[int] = field(default_factory=list)     # seqs of rewritten records
    lines: int = 0                                       # raw lines changed (corrupt/torn/file)
    sha256: str = ""                                     # the file's content when planned
    found: int = 0          # of the replacements, those where a detector found the value

    def to_json(self) -> dict[str, Any]:
        from .rowmodel import REWRITE

        return REWRITE.row(file=self.file, kind=self.kind, replacements=self.replacements,
                           found=self.found, copies=self.replacements - self.found,
                           records=self.records, lines=self.lines, sha256=self.sha256 or None)


@record
class RedactPlan:
    project: str
    store: str
    findings: int
    files: list[FileChange] = field(default_factory=list)
    forget_facts: list[str] = field(default_factory=list)
    clean_database: bool = False
    stale_facts: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    generation: int = 0
    new_generation: int = 0
    generated_messages_invalidated: int = 0
    # what the forgets do to other facts and summaries, as forget --dry-run
    # says it of each (factview.forget_impact): facts whose evidence the new
    # exclusions overlap, compaction summaries they (or the new generation)
    # make inert
    suppressed_facts: list[str] = field(default_factory=list)
    summaries_inert: list[dict[str, Any]] = field(default_factory=list)
    # [{fact_id, revision, reason}]: each revision of a fact to forget whose
    # source row does not parse: its evidence cannot be excluded (the fact
    # is forgotten all the same), as forget --dry-run's ``unexcluded``
    unexcluded: list[dict[str, Any]] = field(default_factory=list)
    # values redact cannot erase (:func:`kept_row`; see KEPT_HINT)
    kept: list[dict[str, Any]] = field(default_factory=list)
    # of forget_facts, those forgotten only because their text holds a copy
    # of a value found elsewhere (no finding in the fact itself)
    forget_copies: list[str] = field(default_factory=list)
    # the values shorter than MIN_COPY_LENGTH: erased only where a detector
    # found them, never searched for elsewhere (each {detector, hash,
    # preview, length})
    found_only: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # value -> marker; not a dataclass field, so that repr and asdict never
        # show a value
        self._values: dict[str, str] = {}
        # value -> the finding that named it first (its detector, hash, preview)
        self._first: dict[str, Finding] = {}
        # value -> marker of the values that are (in) a session id: shown
        # masked wherever the plan names a session or its file
        self._masks: dict[str, str] = {}
        # the (fact id, revision) of every revision the plan read holding a
        # value: a value only a revision written since holds is changed meanwhile
        # (:class:`WrittenSinceThePlan`), never "cannot erase"
        self._revisions: frozenset[tuple[str, int]] = frozenset()
        # those the scan read (None: not known): one the plan read but the
        # scan did not was written while the scan ran
        self._scanned: frozenset[tuple[str, int]] | None = None
        # store-relative file -> line -> the values a detector found there
        # (the places always erased; a short value's only ones)
        self._found: dict[str, dict[int, set[str]]] = {}
        # the short values found in the database's bytes (looked for after the clean)
        self._short_in_database: set[str] = set()
        # each fact of forget_facts (in its order) by its id exactly as
        # stored -- a str for a TEXT, bytes for a BLOB, facts.InvalidText for
        # a TEXT not UTF-8 -- carried from the scan's finding (or the
        # revision read): what the forget deletes; forget_facts shows it as
        # the listing does.  (Before 2026-12-07 the shown text was forgotten:
        # the BLOB b'ZZ' holding a credential made redact forget the text
        # id 'ZZ' beside it, and a BLOB not UTF-8 was "no fact", exit 3.)
        self._forget_ids: list[Any] = []
        self._forget_keys: set[tuple[str, object]] = set()   # (facts.stored_id_key)

    @property
    def empty(self) -> bool:
        """Nothing to change (a value in :attr:`kept` is not a change)."""
        return not (self.files or self.forget_facts or self.clean_database)

    def shown(self, text: str) -> str:
        """A session id or message as outputs show it."""
        return hide_values(text, self._masks)

    def shown_file(self, path: str) -> str:
        """A store-relative file name as outputs show it (the layout's own
        names as they are: :func:`~lecode_memctl.core.secrets.hide_in_location`)."""
        return hide_in_location(path, self._masks)

    def to_json(self) -> dict[str, Any]:
        files = []
        for f in self.files:
            row = f.to_json()
            row["file"] = self.shown_file(row["file"])
            files.append(row)
        return {"project": self.shown(self.project), "store": self.shown(self.store),
                "findings": self.findings,
                "values": len(self._values),
                "files": files,
                "forget_facts": self.forget_facts, "forget_copies": self.forget_copies,
                "found_only": self.found_only,
                "clean_database": self.clean_database,
                "stale_facts": [{**s, "session_id": self.shown(s["session_id"])}
                                for s in self.stale_facts],
                "summaries": [{**s, "session_id": self.shown(s["session_id"])}
                              for s in self.summaries],
                "generation": self.generation, "new_generation": self.new_generation,
                "generated_messages_invalidated": self.generated_messages_invalidated,
                "suppressed_facts": self.suppressed_facts,
                "summaries_inert": [{**s, "session_id": self.shown(s["session_id"])}
                                    for s in self.summaries_inert],
                "unexcluded": self.unexcluded,
                "kept": self.kept}


#: What a user can do about a value redact cannot erase (the CLI's warning).
#: (Until 2026-12-07 it advised forgetting the facts citing the session and
#: deleting its file by hand: the forget's exclusions name the session, as
#: they must, so the value stayed in the database.)
KEPT_HINT = ("rotate the credential (it was exposed), then put its hash in the allowlist; "
             "a file that is no transcript can be renamed by hand, but a session id stays: "
             "the facts database names the session in the evidence of the facts citing it "
             "and in the exclusions a forget writes, which must keep naming it")

#: Why a value is kept (a ``kept`` row's ``reasons``, in this order).
KEPT_SESSION_ID = "session_id"          # (in) a transcript's session id: its name, its header
KEPT_IDENTIFYING = "identifying_field"  # another identifying field, a role or a key the
#                                         contract names, of a transcript's record (STRUCTURE)
KEPT_FILE_NAME = "file_name"            # (in) the name of a file or directory of the store
KEPT_DATABASE = "database"              # in live rows of facts.sqlite3 (a clean keeps them)
KEPT_REASONS = (KEPT_SESSION_ID, KEPT_IDENTIFYING, KEPT_FILE_NAME, KEPT_DATABASE)

#: Why a compaction summary is listed in the plan's ``summaries`` (a row's
#: ``reasons``, in this order): a lineage chunk's span holds a rewritten
#: record (its lineage digest changes), or its ``prior`` record is rewritten
#: (its prior digest changes).
SUMMARY_LINEAGE = "lineage"
SUMMARY_PRIOR = "prior"


def kept_row(f: Finding, reasons: Iterable[str], session_ids: Iterable[str] = (),
             files: Iterable[str] = ()) -> dict[str, Any]:
    """A ``kept`` row of the value ``f`` found: ``session_ids`` and ``files``
    as outputs show them (masked), ``reasons`` in :data:`KEPT_REASONS`' order."""
    why = set(reasons)
    return {"detector": f.detector, "hash": f.hash, "preview": f.preview,
            "length": f.length, "session_ids": list(dict.fromkeys(session_ids)),
            "files": list(dict.fromkeys(files)),
            "reasons": [r for r in KEPT_REASONS if r in why]}


# --------------------------------------------------------------------------
# Rewriting bytes (pure functions)


def _forms(value: str) -> list[bytes]:
    raw = value.encode("utf-8", "surrogateescape")
    out = [raw]
    try:
        esc = orjson.dumps(value)[1:-1]
        if esc != raw:
            out.append(esc)
    except TypeError:
        pass
    return out


# A record's identifying fields, which redact never rewrites (their keys
# neither): a transcript whose header no longer names its file, or a record
# whose seq or type changed, is no transcript any more, and every fact citing
# it would stop validating.  A value in one of them is "kept" (the plan says so).
HEADER_FIELDS = frozenset({"seq", "type", "format", "session_id", "project"})
RECORD_FIELDS = frozenset({"seq", "type"})
# ... and what says what a message or an event is: its role (ROLE one of
# user, assistant, tool, system), its event's name (an undo whose name is a
# marker undoes nothing).  Before 2026-12-07 a found value that is a common
# word ("user", the password of https://deploy:user@host) was replaced in
# every role of the file.
MESSAGE_FIELDS = RECORD_FIELDS | {"role"}
EVENT_FIELDS = RECORD_FIELDS | {"event"}

# The keys the store contract names, by record kind and by the place of the
# object that holds them (() the record; ("content", None) an element of its
# content list, a part; ("prior",) the object of its prior member): never
# rewritten, whatever their value (their values are, but for the fields
# above).  Before 2026-12-07 a found value "content" renamed the content key
# of every message.  A key the contract does not name (in a tool call's
# arguments, say) is replaced as any string is.
_HEADER_KEYS = HEADER_FIELDS | {"created"}
_MESSAGE_KEYS = MESSAGE_FIELDS | {"content", "tool_calls", "tool_call_id", "name", "epoch",
                                  "synthetic"}
_EVENT_KEYS = EVENT_FIELDS | {"target", "summary", "lineage", "prior", "model", "usage",
                              "purpose", "status", "reason_counts", "facts", "proposals"}
_Place = tuple[str | None, ...]
#: (record kind, place) -> (keys never rewritten, members kept whole)
STRUCTURE: dict[tuple[str, _Place], tuple[frozenset[str], frozenset[str]]] = {
    ("session", ()): (_HEADER_KEYS, HEADER_FIELDS),
    ("message", ()): (_MESSAGE_KEYS, MESSAGE_FIELDS),
    # a part: a binary attachment's keys, and a text part's as lecode's
    # readers read it ({"type": "text", "text": ...}); its type says which
    ("message", ("content", None)): (frozenset({"type", "text", "media_type", "data"}),
                                     frozenset({"type"})),
    ("message", ("tool_calls", None)): (frozenset({"id", "name", "arguments"}), frozenset()),
    ("event", ()): (_EVENT_KEYS, EVENT_FIELDS),
    ("event", ("prior",)): (frozenset({"seq", "digest"}), frozenset()),
    ("event", ("usage",)): (frozenset({"input_tokens", "output_tokens", "cost"}), frozenset()),
    ("event", ("lineage", None)): (frozenset({"session_id", "seqs", "digest"}), frozenset()),
    # a compaction's lineage refs: their session_id names a transcript
    ("compact", ("lineage", None)): (frozenset({"session_id", "seqs", "digest"}),
                                     frozenset({"session_id"})),
    ("", ()): (RECORD_FIELDS, RECORD_FIELDS),
}
_NOTHING: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())


def _kind(rec: Mapping[str, Any]) -> str:
    """The record's kind as :data:`STRUCTURE` names it (its type as a parse
    keeps it; a compact event is an event whose lineage refs are kept)."""
    t = rec.get("type")
    if t == "event" and rec.get("event") == "compact":
        return "compact"
    return t if t in ("session", "message", "event") else ""


def _structure(kind: str, place: _Place | None) -> tuple[frozenset[str], frozenset[str]]:
    """(keys never rewritten, members kept whole) of an object at ``place``
    (None: deeper than any place the contract names) of a record of ``kind``."""
    if place is None:
        return _NOTHING
    found = STRUCTURE.get((kind, place))
    if found is None and kind == "compact":
        found = STRUCTURE.get(("event", place))
    return found or _NOTHING


def _child(place: _Place | None, step: str | None) -> _Place | None:
    # (no place the contract names is deeper than two steps: a record nested
    # 1,000 deep costs no tuple of 1,000)
    return place + (step,) if place is not None and len(place) < 2 else None


class _Unit(dict[str, str]):
    """The values (value -> marker) to erase in one unit (a line of a
    file or a transcript), and how: occurrences at word boundaries only
    (:func:`~lecode_memctl.core.secrets.at_boundaries`), but those of a
    value in ``loose`` (one a detector found in this unit where no
    occurrence stands at a boundary: the finding is the value);
    ``tally``: marker -> occurrences replaced.  Review rv7, 2026-12-07."""

    def __init__(self, values: Mapping[str, str], loose: Iterable[str] = (),
                 tally: dict[str, int] | None = None) -> None:
        super().__init__(values)
        self.loose = frozenset(loose)
        self.tally = tally


def _replace(text: str, values: Mapping[str, str]) -> tuple[str, int]:
    """:func:`~lecode_memctl.core.secrets.replace_values`, by the rules of
    ``values`` when it is a :class:`_Unit` (every occurrence otherwise)."""
    if isinstance(values, _Unit):
        return replace_values(text, values, bounded=True, loose=values.loose,
                              tally=values.tally)
    return replace_values(text, values)


def _bounded_in(data: Any, needle: Any) -> bool:
    """Whether ``data`` (str or bytes) holds ``needle`` at word boundaries."""
    from .secrets import _occurrences

    return needle in data and next(_occurrences(data, needle, True), None) is not None


def is_short(value: str) -> bool:
    """A value erased only where a detector found it (shorter than
    :data:`~lecode_memctl.core.secrets.MIN_COPY_LENGTH` characters)."""
    return len(value) < MIN_COPY_LENGTH


def _unit(values: Mapping[str, str], found_here: Iterable[str], data: bytes,
          tally: dict[str, int] | None = None) -> _Unit:
    """The :class:`_Unit` of a line ``data``: every value of ``values``
    at least :data:`MIN_COPY_LENGTH` long, and those ``found_here``; a
    found one none of whose forms stands at word boundaries there loose."""
    here = set(found_here)
    loose = [v for v in here if v in values
             and not any(_bounded_in(data, f) for f in _forms(v))]
    return _Unit({v: m for v, m in values.items() if v in here or not is_short(v)},
                 loose, tally)


def _replace_dict(obj: dict[str, Any], values: Mapping[str, str],
                  kind: str = "", place: _Place | None = None) -> tuple[dict[str, Any], int]:
    """Keys and values replaced, in their order; as they are: the keys the
    contract names at ``place`` of a record of ``kind`` (:data:`STRUCTURE`),
    the members it keeps whole (key and value), and a binary part's ``data``."""
    total = 0
    binary = obj.get("type") == "binary"
    keys, whole = _structure(kind, place)
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in whole or (binary and k == "data"):
            out[k] = v
            continue
        k2, n1 = (k, 0) if k in keys else _replace(k, values)
        if k2 in out:
            # a marker that is already a key of the object (or a key equal
            # to a marker written before it): a dict would keep one member
            raise _KeyCollision(k2)
        out[k2], n2 = _replace_leaves(v, values, kind, _child(place, k))
        total += n1 + n2
    return out, total


class _KeyCollision(Exception):
    """A key replaced by its marker meets a key the object already has: the
    record's line is rewritten byte for byte instead (every member kept;
    before 2026-12-07 one of the two was dropped)."""


def _protected(rec: dict[str, Any]) -> tuple[frozenset[str], list[dict[str, Any]]]:
    """The record's identifying top-level fields (kept whole), and the
    lineage refs of a compaction (whose session_id names a transcript)."""
    kind = _kind(rec)
    keep = _structure(kind, ())[1]
    lineage = rec.get("lineage")
    refs = [r for r in lineage if isinstance(r, dict)] \
        if kind == "compact" and isinstance(lineage, list) else []
    return keep, refs


def _redact_record(rec: dict[str, Any], values: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """``rec`` with the values replaced everywhere but in the structure the
    contract defines (:data:`STRUCTURE`): its identifying fields, kept whole
    (:data:`HEADER_FIELDS`, :data:`MESSAGE_FIELDS`, :data:`EVENT_FIELDS`, a
    part's ``type``, a compaction's lineage refs' ``session_id``), and the
    keys the contract names."""
    return _replace_dict(rec, values, _kind(rec), ())


def _replace_leaves(obj: Any, values: Mapping[str, str], kind: str = "",
                    place: _Place | None = None) -> tuple[Any, int]:
    if isinstance(obj, str):
        return _replace(obj, values)
    if isinstance(obj, dict):
        return _replace_dict(obj, values, kind, place)
    if isinstance(obj, list):
        total = 0
        inner = _child(place, None)
        for i, v in enumerate(obj):
            obj[i], n = _replace_leaves(v, values, kind, inner)
            total += n
        return obj, total
    return obj, 0


def _replace_bytes(line: bytes, values: Mapping[str, str]) -> tuple[bytes, int]:
    """``line`` with each occurrence of a value of ``values``, in either form
    :func:`_forms` writes, replaced by its marker, and how many were: as
    :func:`~lecode_memctl.core.secrets.replace_values` (every form's
    occurrences found in the line as it is, overlapping ones one span of
    their markers: no value partly left, no marker written searched again;
    before 2026-12-07 a value inside another's marker was replaced in it,
    then the leftmost of two overlapping values left the rest of the
    other in plain text)."""
    new, n, _lines = _replace_counted(line, values)
    return new, n


def _replace_counted(data: bytes, values: Mapping[str, str]) -> tuple[bytes, int, int]:
    """:func:`_replace_bytes` of ``data``, and how many of its lines held
    (part of) a value replaced: a file's ``lines`` in the plan (before
    2026-12-07 the replacements were given there)."""
    from .secrets import replaced_spans

    markers: dict[bytes, bytes] = {}
    loose: set[bytes] = set()
    for v, mark in values.items():
        for form in _forms(v):
            if form and form in data:
                markers.setdefault(form, mark.encode("utf-8"))
                if isinstance(values, _Unit) and v in values.loose:
                    loose.add(form)
    if not markers:
        return data, 0, 0
    spans = replaced_spans(data, markers.items(), bounded=isinstance(values, _Unit),
                           loose=loose)
    if isinstance(values, _Unit) and values.tally is not None:
        for _s, _e, marks in spans:
            for mark in marks:
                key = mark.decode("utf-8")
                values.tally[key] = values.tally.get(key, 0) + 1
    return _spliced(data, spans)


def _line_starts(data: bytes, wanted: Iterable[int]) -> dict[int, tuple[int, int]]:
    """1-based line -> (start, end) in ``data`` (its newline excluded), of
    the ``wanted`` lines ``data`` has."""
    want = sorted(set(wanted))
    out: dict[int, tuple[int, int]] = {}
    if not want:
        return out
    line, at = 1, 0
    for w in want:
        while line < w:
            nl = data.find(b"\n", at)
            if nl < 0:
                return out
            at, line = nl + 1, line + 1
        end = data.find(b"\n", at)
        out[w] = (at, len(data) if end < 0 else end)
    return out


def replace_in_file(data: bytes, values: Mapping[str, str],
                    found: Mapping[int, set[str]] | None) -> tuple[bytes, int, int, int]:
    """A file's bytes (no transcript) with the values replaced, as redact
    writes it: (new bytes, replacements, lines changed, replacements where
    a detector found the value).  ``found``: line -> the values a detector
    found there; None: every occurrence of every value (as before
    2026-12-07's review rv7).  Otherwise a value of at least
    :data:`MIN_COPY_LENGTH` characters is erased wherever it stands at word
    boundaries, and on the lines it was found, where no occurrence there
    stands so, every occurrence of the line; a shorter one only on the
    lines it was found."""
    from .secrets import _occurrences, merged_spans

    if found is None:
        new, n, lines = _replace_counted(data, values)
        return new, n, lines, 0
    spots = _line_starts(data, found)
    # (start, -end, (marker, found there)): every copy of a long value at
    # word boundaries, then what a finding's line holds
    occ: list[tuple[int, int, Any]] = []
    for v, mark in values.items():
        if is_short(v):
            continue
        for form in _forms(v):
            if form and form in data:
                size = len(form)
                for i in _occurrences(data, form, True):
                    occ.append((i, -i - size, (mark.encode("utf-8"), False)))
    for line, (a, b) in spots.items():
        piece = data[a:b]
        for v in found[line]:
            if v not in values:
                continue
            mark_b = values[v].encode("utf-8")
            forms = [f for f in _forms(v) if f and f in piece]
            loose = not any(_bounded_in(piece, f) for f in forms)
            for form in forms:
                size = len(form)
                for i in _occurrences(piece, form, not loose):
                    at = a + i
                    occ.append((at, -at - size, (mark_b, True)))
    # (one occurrence given twice, as a copy and as found: found)
    best: dict[tuple[int, int], Any] = {}
    for start, neg_end, mark in occ:
        key = (start, neg_end)
        if key not in best or (mark[1] and not best[key][1]):
            best[key] = mark
    spans = merged_spans(data, [(s_, e_, m_) for (s_, e_), m_ in best.items()])
    new, n, lines = _spliced(data, spans)
    return new, n, lines, sum(1 for _s, _e, marks in spans for m in marks if m[1])


def _spliced(data: bytes, spans: Iterable[tuple[int, int, list[Any]]]
             ) -> tuple[bytes, int, int]:
    """``data`` with each span replaced by its markers (bytes, or
    ``(marker, found)`` pairs), how many markers were written, and how
    many lines held (part of) a span."""
    out = bytearray()
    at = n = lines = 0
    line = counted = 0          # the line of ``counted``, a start met
    covered = -1                # the last line counted
    for start, end, marks in spans:
        line += data.count(b"\n", counted, start)
        counted = start
        last = line + data.count(b"\n", start, end - 1)     # (a value's own newline ends its line)
        if last > covered:
            lines += last - max(line, covered + 1) + 1
            covered = last
        out += data[at:start]
        for mark in marks:
            out += mark if isinstance(mark, bytes) else mark[0]
        at = end
        n += len(marks)
    out += data[at:]
    return bytes(out), n, lines


def _string_places(line: bytes, kind: str) -> Iterator[tuple[bool, bool]]:
    """Of each string of the JSON text ``line`` (which a parse took, so well
    formed; a record of ``kind``), in the order of the line, as
    :func:`secrets.json_strings` gives them: (whether it is a key
    the contract names where it is, whether it lies in a member kept whole),
    by :data:`STRUCTURE` as :func:`_replace_dict` reads it.  A stack, no
    recursion."""
    from .secrets import _JSON_TOKEN, _decoded

    # a frame per open container: [is an object, its current key, its place
    # (an object's own; a list's, whose elements are one step further), the
    # current member kept whole, inside a member kept whole]
    stack: list[list[Any]] = []
    want_key = False
    for m in _JSON_TOKEN.finditer(line):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            top = stack[-1]
            if want_key:
                keys, whole = _structure(kind, top[2])
                text = _decoded(tok)
                top[1], top[3] = text, top[4] or text in whole
                yield text in keys, top[3]
                want_key = False
            else:
                yield False, top[3] if top[0] else top[4]
        elif c in b"{[":
            if not stack:
                place: _Place | None = ()
                inside = False
            else:
                parent = stack[-1]
                if parent[0]:
                    place, inside = _child(parent[2], parent[1]), parent[3]
                else:
                    place, inside = _child(parent[2], None), parent[4]
            # (a list's place is its member's: its elements' is one step on)
            stack.append([c == b"{", None, place, inside, inside])
            want_key = c == b"{"
        elif c == b",":
            want_key = bool(stack) and stack[-1][0]
        else:                                   # } or ]
            stack.pop()
            want_key = False


def _rewrite_strings(line: bytes, rec: dict[str, Any],
                     values: Mapping[str, str]) -> tuple[bytes, int]:
    """``line`` (a record as read, ``rec``) with the values replaced in
    each of its strings, keys included, every other byte as it was: for a
    record that cannot be written back whole (nested past what orjson
    writes, a marker meeting a key, a key given twice).  Each string is
    decoded, so a value spelled with JSON escapes is found as the scan
    found it, and written again as JSON.  What :func:`_redact_record`
    keeps is kept (:func:`_string_places`): the keys the contract names,
    the identifying fields kept whole (a compaction's lineage refs'
    ``session_id`` too), and a binary part's ``data`` (the part's ``type``
    as the record is parsed)."""
    from .secrets import json_strings

    places = _string_places(line, _kind(rec))
    # kept as the whole rewrite keeps them: a key the contract names (even
    # in a member a parse drops: renamed, the parse would see it); an
    # identifying member, key and value; a binary part's data.  What else a
    # parse drops (a key given twice) is kept nowhere.
    return _rewrite_json_strings(line, (
        (start, end, text)
        for (start, end, text, is_key, _top, _lineage, binary_data, dropped), (named, whole)
        in zip(json_strings(line), places, strict=True)
        if not ((is_key and named) or (not dropped and (whole or binary_data)))), values)


def _rewrite_json_strings(line: bytes, strings: Iterable[tuple[int, int, str]],
                          values: Mapping[str, str]) -> tuple[bytes, int]:
    """``line`` with the values replaced in each of ``strings`` (a JSON
    string's span in ``line`` and its decoded text), each string that holds
    one written again as JSON, every other byte as it was; and how many
    were replaced."""
    out = bytearray()       # (not orjson's bytes, each held with 4 KiB of buffer)
    at = n = 0
    for start, end, text in strings:
        new, c = _replace(text, values)
        if c:
            out += line[at:start]
            out += orjson.dumps(new)
            at = end
            n += c
    if not n:
        return line, 0
    out += line[at:]
    return bytes(out), n


def _values_left(data: bytes, values: Mapping[str, str],
                 found: Mapping[int, set[str]] | None = None) -> list[str]:
    """The ``values`` (value -> marker) a rewritten transcript's bytes still
    hold, in either form :func:`_forms` writes, or decoded in a string of a
    line with a JSON escape: what the structure keeps (a role ``user``, a
    key ``content``; a record's ``type``, a header's ``format``, given
    twice or holding a container, say).  A value only inside a marker
    (``token`` in ``[REDACTED:github-token:...]``) is not left: the
    markers are taken out first.  ``found`` (line -> the values a detector
    found there): as :func:`rewrite_transcript` reads it, a value left only
    at word boundaries, a short one only on its lines."""
    data = _without_markers(data)
    if found is not None:
        return _values_left_bounded(data, values, found)
    left = [v for v in values if any(form in data for form in _forms(v))]
    rest = [v for v in values if v not in left]
    if rest and b"\\" in data:
        from .secrets import json_strings

        for line in data.split(b"\n"):
            if not rest or b"\\" not in line:
                continue
            if parsed_record(line)[0] is not None:
                texts = [item[2] for item in json_strings(line)]
            else:
                # (a line that is JSON but no object: its strings, decoded)
                texts = [t for _a, _b, t in other_json_strings(line) or ()]
            for text in texts:
                held = [v for v in rest if v in text]
                left += held
                rest = [v for v in rest if v not in held]
    return left


def _values_left_bounded(data: bytes, values: Mapping[str, str],
                         found: Mapping[int, set[str]]) -> list[str]:
    """:func:`_values_left` by the rules of review rv7 (its markers taken out)."""
    from .secrets import json_strings

    long = [v for v in values if not is_short(v)]
    long_forms = [f for v in long for f in _forms(v)]
    left: set[str] = set()
    for lineno, line in enumerate(data.split(b"\n"), 1):
        cands = [v for v in (*long, *(v for v in found.get(lineno, ()) if is_short(v)))
                 if v in values and v not in left]
        if not cands:
            continue
        if lineno not in found and b"\\" not in line and \
                not any(f in line for f in long_forms):
            continue
        for v in cands:
            if any(_bounded_in(line, f) for f in _forms(v)):
                left.add(v)
        rest = [v for v in cands if v not in left]
        if rest and b"\\" in line:
            if parsed_record(line)[0] is not None:
                texts = [item[2] for item in json_strings(line)]
            else:
                texts = [t for _a, _b, t in other_json_strings(line) or ()]
            for text in texts:
                left.update(v for v in rest if _bounded_in(text, v))
    return [v for v in values if v in left]


def _without_markers(data: bytes) -> bytes:
    """``data`` with every marker it holds, this run's or an
    earlier run's (any text of a marker's form, ``[REDACTED:<detector>:<6
    hex>]``), made a NUL byte (no value's text runs on across one): a value
    inside a marker is never replaced, so never left (before 2026-12-07
    only this run's markers were taken out)."""
    from .secrets import MARKER_BYTES

    if b"[REDACTED:" not in data:
        return data
    return MARKER_BYTES.sub(b"\0", data)


def _lineage_session_ids(data: bytes) -> list[str]:
    """The session ids the compaction lineages of a transcript's bytes name:
    those :func:`_protected` keeps from being rewritten."""
    out: list[str] = []
    for line in data.split(b"\n"):
        # (a key spelled with an escape, "l\\u0069neage", is parsed too)
        rec = parsed_record(line)[0] if b"lineage" in line or b"\\u" in line else None
        if rec is not None:
            _keep, refs = _protected(rec)
            out += [r["session_id"] for r in refs if isinstance(r.get("session_id"), str)]
    return out


def _numbers_kept(rec: Any) -> bool:
    """Whether every number of a parsed record is written back by orjson as
    the same number: False when one is a float that is not finite (``1e400``,
    read as infinity, which orjson writes ``null``) or of magnitude 2^53 or
    more (an integer beyond 64 bits, which orjson reads as a float and would
    write ``1.8446744073709552e+19``; a float that large may have been
    written with digits a double does not keep), or a float equal to zero
    (``1e-400`` underflows to ``0.0``, ``-1e-400`` to ``-0.0``: a zero
    written ``0.0`` sent the byte-for-byte way loses nothing, that way keeps
    every other byte).  Such a record keeps its bytes but for the strings
    that held a value (:func:`_rewrite_strings`)."""
    todo = [rec]
    while todo:
        obj = todo.pop()
        for v in obj.values() if isinstance(obj, dict) else obj:
            if type(v) is float:
                if not -_EXACT < v < _EXACT or v == 0.0:    # (NaN is no JSON: never read)
                    return False
            elif isinstance(v, (dict, list)):
                todo.append(v)
    return True


_EXACT = float(2 ** 53)


def rewrite_transcript(data: bytes, values: Mapping[str, str],
                       found: Mapping[int, set[str]] | None = None,
                       found_count: list[int] | None = None
                       ) -> tuple[bytes, list[int], int, int]:
    """(new bytes, seqs of rewritten records, replacements, raw lines changed).
    Lines are kept one for one; a record's identifying fields (its seq and
    type; the header's session_id, project and format; a message's role, an
    event's name, a part's type; a compaction lineage's session_id) are
    never rewritten, nor the keys the contract names (:data:`STRUCTURE`).
    ``found``: line -> the values a detector found there (as
    :func:`replace_in_file` reads it: a value of at least
    :data:`MIN_COPY_LENGTH` characters erased at word boundaries anywhere,
    every occurrence on a line where it was found and stands at none; a
    shorter one only on its lines); None: every occurrence of every value.
    ``found_count``: its first item added the replacements made where a
    detector found the value."""
    picked = values
    everywhere: Mapping[str, str] = values if found is None else \
        _Unit({v: m for v, m in values.items() if not is_short(v)})
    forms = [f for v in everywhere for f in _forms(v)]
    out = []
    seqs: list[int] = []
    total = 0
    raw_lines = 0
    for lineno, piece in enumerate(data.split(b"\n"), 1):
        here = found.get(lineno) if found is not None else None
        unit: Mapping[str, str] = everywhere
        tally: dict[str, int] | None = None
        if here:
            tally = {}
            unit = _unit(picked, here, piece, tally)
        # (a line that spells a character of a value with a JSON escape, as
        # json.dumps's ensure_ascii writes any but ASCII, holds the value in
        # neither form: every line with a \u escape is parsed, its strings
        # searched as the scan searched them; and a \/, as json.dumps never
        # writes but a writer may: https:\/\/hooks.slack.com...)
        if not here and b"\\u" not in piece and b"\\/" not in piece and \
                not any(f in piece for f in forms):
            out.append(piece)
            continue
        values = unit
        rec, twice = parsed_record(piece)
        if rec is not None:
            seq = rec.get("seq")
            written: bytes | None = None
            if not twice and _numbers_kept(rec):
                try:
                    rec2, n = _redact_record(rec, values)
                    written = held_bytes(orjson.dumps(rec2))   # (held with every line to the join)
                except (RecursionError, orjson.JSONEncodeError, _KeyCollision):
                    pass
            if written is not None:
                new = written
            else:
                # nested deeper than orjson writes (255 levels; its parser
                # takes 1024), a marker that would meet a key the object has
                # (_KeyCollision), a key given twice (a value the parse
                # dropped is on the line too), or a number orjson would not
                # write back as it is written (_numbers_kept): the record's line is rewritten
                # byte for byte, but for a value in an identifying field (it
                # stays in the line), and its seq is the record's, as read
                if tally is not None:
                    tally.clear()
                new, n = _rewrite_strings(piece, rec, values)
            if n:
                total += n
                if type(seq) is int:   # (true is no seq: the schema's integer)
                    seqs.append(seq)
                if tally and found_count is not None:
                    found_count[0] += _found_in_tally(tally, unit, here)
            out.append(new if n else piece)     # (nothing replaced: the line as it was)
            continue
        # (a line that is JSON but no object, a string or an array: its
        # strings decoded, the values replaced, each written again as JSON,
        # every other byte kept; then, as in a line that does not parse,
        # the value's bytes)
        strings = other_json_strings(piece) if b"\\" in piece else None
        new, n = _rewrite_json_strings(piece, strings, values) if strings else (piece, 0)
        new, n2 = _replace_bytes(new, values)
        n += n2
        total += n
        raw_lines += 1 if n else 0
        if n and tally and found_count is not None:
            found_count[0] += _found_in_tally(tally, unit, here)
        out.append(new)
    return b"\n".join(out), sorted(set(seqs)), total, raw_lines


def _found_in_tally(tally: Mapping[str, int], unit: Mapping[str, str],
                    here: Iterable[str] | None) -> int:
    """Of a line's replacements (``tally``: marker -> count), those of the
    values a detector found on it."""
    marks = {unit[v] for v in here or () if v in unit}
    return sum(c for m, c in tally.items() if m in marks)


# --------------------------------------------------------------------------
# Planning


def plan_redaction(store: Store, findings: Iterable[Finding], *,
                   lock_wait: float = BUSY_TIMEOUT,
                   masks: Mapping[str, str] | None = None,
                   scanned: Iterable[tuple[str, int]] | None = None) -> RedactPlan:
    """What redact would do for these findings (reads only).  ``lock_wait``:
    seconds to wait for a stable snapshot of the facts database.  ``masks``
    (value -> marker; default: those of ``findings``): the values found in
    session ids (:func:`secrets.session_id_values` of the whole scan, picked
    or not), shown masked wherever the plan names a session.
    ``scanned``: the (fact id, revision) of every revision the scan that
    made ``findings`` read (:attr:`secrets.SecretsReport.fact_revisions`):
    a revision holding a value that neither the scan nor the plan read was
    written since, one the plan did not show (:class:`WrittenSinceThePlan`);
    told by which rows were read, never by a clock (a revision's
    ``created`` is the writer's).  None: only the plan's reading counts.

    A picked value that is (in) a transcript's session id cannot be erased:
    it is the file's name, its header names it and the facts citing the
    session store it.  Redact erases every other copy and lists the value in
    :attr:`RedactPlan.kept`."""
    findings = list(findings)
    plan = RedactPlan(store.slug, os.fspath(store.path), len(findings))
    plan._scanned = None if scanned is None else frozenset(scanned)
    first = plan._first
    for f in findings:
        plan._values.setdefault(f.secret_value(), f.marker)
        first.setdefault(f.secret_value(), f)
    # longest first: a value inside another is replaced after it
    plan._values = dict(sorted(plan._values.items(), key=lambda kv: -len(kv[0])))
    plan._masks = dict(masks) if masks is not None else session_id_values(
        findings, names=(plan.project, plan.store))
    # where a detector found each value (always erased there); a value
    # shorter than MIN_COPY_LENGTH is erased there only, never searched for
    # elsewhere (review rv7, 2026-12-07: "test" was erased in "pytest")
    for f in findings:
        if f.kind in (KIND_TRANSCRIPT, KIND_FILE) and f.line is not None \
                and f.file not in DATABASE_FILES:
            plan._found.setdefault(f.file, {}).setdefault(f.line, set()).add(f.secret_value())
        elif f.kind == KIND_DATABASE and is_short(f.secret_value()):
            plan._short_in_database.add(f.secret_value())
    plan.found_only = [{"detector": first[v].detector, "hash": first[v].hash,
                        "preview": first[v].preview, "length": first[v].length}
                       for v in plan._values if is_short(v)]
    long_values = {v: m for v, m in plan._values.items() if not is_short(v)}
    found_in = {v: {rel for rel, lines in plan._found.items()
                    if any(v in vs for vs in lines.values())}
                for v in plan._values if is_short(v)}

    def holds(v: str, name: str, rel: str | None = None) -> bool:
        # a name (a session id, a note's) holding a copy of ``v``: at word
        # boundaries; a short value only in a file where it was found
        if is_short(v) and (rel is None or rel not in found_in.get(v, ())):
            return False
        return _bounded_in(name, v)

    by_file: dict[str, str] = {}
    named: dict[str, list[str]] = {}
    in_database: set[str] = set()   # values found in the raw database (decided below)
    for f in findings:
        if f.kind in (KIND_TRANSCRIPT, KIND_FILE) and f.file in DATABASE_FILES:
            # the database's own files (its -journal, -wal, -shm) are SQLite's:
            # never rewritten as files (a hot journal so edited was played back
            # up to the changed page only, the rest of an interrupted
            # transaction kept); the value is erased by the clean, which
            # opens the database for writing and so lets SQLite recover a
            # hot journal first
            plan.clean_database = True
        elif f.in_name:
            # a value in a file's name: never renamed (kept); the file's
            # content is rewritten when a finding there says so
            named.setdefault(f.secret_value(), []).append(f.file)
        elif f.kind in (KIND_TRANSCRIPT, KIND_FILE):
            # (every file the scan reads is searched below, this one too;
            # kept for a file listed by the scan and gone from a new listing)
            by_file[f.file] = f.kind
        elif f.kind == KIND_FACT and f.fact_id is not None:
            _plan_forget_of(plan, f.stored_fact_id())
        elif f.kind == KIND_DATABASE:
            in_database.add(f.secret_value())
    root = os.fspath(store.path)
    changed: dict[str, set[int]] = {}
    compacts: list[tuple[str, dict[str, Any]]] = []
    sessions_dir = os.path.join(root, "sessions")
    transcripts = sorted(n for n in _listdir(sessions_dir) if n.endswith(".jsonl"))
    readers = SessionStore(store)   # what this store's readers accept (sourceref.accepted)
    kept: dict[str, list[str]] = {}
    why: dict[str, set[str]] = {}
    for name in transcripts:
        sid = name[:-len(".jsonl")]
        for v in plan._values:
            if holds(v, sid, "sessions/" + name):
                kept.setdefault(v, []).append(sid)
                why.setdefault(v, set()).add(KEPT_SESSION_ID)
                plan._masks.setdefault(v, plan._values[v])
    all_forms = [f for v in long_values for f in _forms(v)]
    for name in transcripts:
        rel = "sessions/" + name
        try:
            data = read_regular(os.path.join(sessions_dir, name))
        except OSError:
            continue
        sid = name[:-len(".jsonl")]
        # every transcript is searched for every picked value, a finding
        # there or not: a copy no detector fires on (a password repeated
        # without the URL it was found in) is erased as the others are
        # (before 2026-12-07 only the files holding a finding were
        # rewritten, the rest left without a word, exit 0).  One whose
        # bytes hold no form of a value, nor a \u or \/ escape that could
        # spell one (what rewrite_transcript's test of a line looks at),
        # holds none: one search of the whole file per form, never the
        # line-by-line rewrite (for a while on 2026-12-07 every transcript
        # went through it, twice as slow a plan)
        # (a value shorter than MIN_COPY_LENGTH only where it was found:
        # a transcript with no finding is searched for the longer ones)
        found_here = plan._found.get(rel, {})
        may_hold = bool(found_here) or b"\\u" in data or b"\\/" in data or \
            any(f in data for f in all_forms)
        seqs: list[int] = []
        new, n, raw = data, 0, 0
        count = [0]
        if may_hold:
            new, seqs, n, raw = rewrite_transcript(data, plan._values, found_here, count)
        after: bytes | None = None      # what the rewrite leaves
        if n:
            plan.files.append(FileChange(rel, KIND_TRANSCRIPT, n, seqs, raw, found=count[0]))
            changed[sid] = set(seqs)
            after = new
        elif may_hold and _values_left(data, plan._values, found_here):
            # (nothing to rewrite: a value it holds is in its structure, a
            # role "user")
            after = data
        if after is not None:
            lineage_sids = _lineage_session_ids(data)
            # a value in a compaction lineage's session_id (an identifying
            # field, never rewritten) stays too: kept, as in a file's name
            for ref_sid in lineage_sids:
                for v in plan._values:
                    if holds(v, ref_sid, rel) and ref_sid not in kept.get(v, []):
                        kept.setdefault(v, []).append(ref_sid)
                        why.setdefault(v, set()).add(KEPT_SESSION_ID)
                        plan._masks.setdefault(v, plan._values[v])
            # any other value the rewrite leaves (a role, an identifying
            # field of a malformed record: a type or format given twice, a
            # header field holding a container): kept, named by every
            # transcript that holds it, never left without a word (exit 0
            # before 2026-12-07); the session ids already said are taken
            # out first (a value in one is kept for it; one also in a role
            # is kept for both; before, only the first transcript was named
            # and a value kept for a session id never had this reason)
            for said in sorted({sid, *lineage_sids}, key=len, reverse=True):
                if any(v in said for v in plan._values):
                    after = after.replace(said.encode("utf-8", "surrogateescape"), b"")
            for v in _values_left(after, plan._values, found_here):
                if sid not in kept.get(v, []):
                    kept.setdefault(v, []).append(sid)
                why.setdefault(v, set()).add(KEPT_IDENTIFYING)
        # compactions: the summaries a rewrite touches, only in the sessions
        # this store's readers accept (a refused one is rewritten all the
        # same, but nothing in it is this store's to invalidate); the
        # generated messages the forgets invalidate are counted by
        # forget --dry-run's own scan (_forget_impacts)
        if accepted(readers, sid):
            for line in data.split(b"\n"):
                if b'"compact"' in line or b"\\u" in line:
                    rec = parsed_record(line)[0]    # (a key given twice: as read)
                    if rec is not None and rec.get("type") == "event" \
                            and rec.get("event") == "compact" and event_line(line):
                        compacts.append((sid, rec))
    # every other file the scan reads (Markdown, .bak, leftovers), a finding
    # there or not, read once and searched for every picked value
    others = set(_plain_files(store)) | {rel for rel, kind in by_file.items()
                                         if kind == KIND_FILE}
    for rel in sorted(others):
        try:
            data = read_regular(os.path.join(root, rel))
        except OSError:
            continue
        _new, n, lines, at_finding = replace_in_file(data, plan._values,
                                                     plan._found.get(rel, {}))
        if n:
            plan.files.append(FileChange(rel, KIND_FILE, n, [], lines,
                                         hashlib.sha256(data).hexdigest(), found=at_finding))
    # compaction summaries whose lineage span holds a rewritten record, or
    # whose prior record (the compaction before it, in its own transcript)
    # is rewritten: its prior digest no longer holds (compact.prior_mismatch;
    # before 2026-12-07 a value in a summary broke the next one unsaid)
    for sid, rec in compacts:
        listed_for: list[str] = []
        lineage = rec.get("lineage")
        for ref in lineage if isinstance(lineage, list) else []:
            if not isinstance(ref, Mapping) or not isinstance(ref.get("session_id"), str):
                continue
            hit = changed.get(ref["session_id"])
            seqs = [s for s in ref.get("seqs") or [] if isinstance(s, int)] \
                if isinstance(ref.get("seqs"), list) else []
            if hit and seqs and any(min(seqs) <= s <= max(seqs) for s in hit):
                listed_for.append(SUMMARY_LINEAGE)
                break
        prior = rec.get("prior")
        prior_seq = prior.get("seq") if isinstance(prior, Mapping) else None
        if isinstance(prior_seq, int) and not isinstance(prior_seq, bool) \
                and prior_seq in changed.get(sid, ()):
            listed_for.append(SUMMARY_PRIOR)
        if listed_for:
            plan.summaries.append({"session_id": sid, "seq": rec.get("seq"),
                                   "reasons": listed_for})
    # facts: stale evidence, generation; the session ids live rows name
    live_sids: list[str] = []
    if os.path.lexists(store.facts_db):
        from .facts import FactStore, row_text, stored_id_key

        fs = FactStore.open_readonly(store.facts_db, busy_timeout=lock_wait)
        try:
            plan.generation = fs.generation()
            # (each finding's fact by its id as stored: one in more than one
            # row of facts is refused here, before anything is changed)
            found_facts = [(k, _rows_of(fs, k)) for k in plan._forget_ids]
            live_sids = _live_session_ids(fs)
            # (a copy: a value of MIN_COPY_LENGTH characters or more, at
            # word boundaries; a fact a detector found a short value in is
            # forgotten for its finding)
            holding = _revisions_read(fs, long_values)
            plan._revisions = frozenset(holding)
            # every fact a revision of which holds a picked value, found by
            # a detector or not (before 2026-12-07 only the facts with a
            # finding: a fact quoting the bare password was left, and the
            # check after the clean said "cannot erase", exit 1)
            # (each by its id as stored, the revision row's: a BLOB b'ZZ' is
            # not the text 'ZZ' beside it, and is forgotten as itself)
            copies = {stored_id_key(fid): fid for fid, _rev in holding}
            for key in sorted(set(copies) - plan._forget_keys,
                              key=lambda k: (row_text(copies[k]), k)):
                if _rows_of(fs, copies[key]):
                    _plan_forget_of(plan, copies[key])
                    plan.forget_copies.append(row_text(copies[key]))
            todo = [k for k, rows in found_facts if rows] + \
                [k for k in plan._forget_ids[len(found_facts):]]
            plan.new_generation = plan.generation + len(todo)
            _forget_impacts(plan, store, fs, todo)
            if changed:
                for fact in fs.iter_facts():
                    if fact.fact_id in plan.forget_facts:
                        continue
                    for rev in fs.revisions(fact.fact_id):
                        ref = rev.source
                        if ref is None or ref.session_id not in changed:
                            continue
                        lo, hi = min(ref.seqs), max(ref.seqs)
                        if any(lo <= s <= hi for s in changed[ref.session_id]):
                            plan.stale_facts.append({
                                "fact_id": fact.fact_id, "revision": rev.revision,
                                "session_id": ref.session_id, "seqs": list(ref.seqs)})
        finally:
            fs.close()
    else:
        plan.new_generation = plan.generation
    if plan.forget_facts:
        plan.clean_database = True
    # a value in a session id the database's live rows name (the evidence of
    # the facts citing it, the exclusions of a forget, legacy provenance):
    # no clean removes a live row, the transcript gone or not (before
    # 2026-12-07 such a run said "redacted", exit 0, the value still there)
    for live in live_sids:
        for v in plan._values:
            if holds(v, live):
                if live not in kept.get(v, []):
                    kept.setdefault(v, []).append(live)
                why.setdefault(v, set()).add(KEPT_DATABASE)
                plan._masks.setdefault(v, plan._values[v])
    # a value found elsewhere that a name of the store also holds (a note
    # named after it): never renamed, kept, as one found in the name itself
    # (before 2026-12-07 only a finding in the name said so: the plan kept
    # nothing, redact said done, exit 0, and the name still held it)
    for rel, chosen in _store_names(root):
        for v in plan._values:
            if holds(v, chosen) and rel not in named.get(v, []):
                named.setdefault(v, []).append(rel)
    for v in named:
        why.setdefault(v, set()).add(KEPT_FILE_NAME)
        plan._masks.setdefault(v, plan._values[v])
    # a value found in the database's bytes calls for the clean, but one a
    # live row keeps (kept for "database"): no clean erases it, and before
    # 2026-12-07 every rerun VACUUMed and rewrote facts.sqlite3 for it
    if any(KEPT_DATABASE not in why.get(v, ()) for v in in_database):
        plan.clean_database = True
    plan._masks = dict(sorted(plan._masks.items(), key=lambda kv: -len(kv[0])))
    for v, reasons in why.items():
        plan.kept.append(kept_row(first[v], reasons, (plan.shown(s) for s in kept.get(v, [])),
                                  (plan.shown_file(n) for n in sorted(named.get(v, [])))))
    plan.kept.sort(key=lambda k: (k["detector"], k["hash"]))
    # FORMAT.md's order: every transcript first, then the other files
    plan.files.sort(key=lambda c: (c.kind != KIND_TRANSCRIPT, c.file))
    return plan


def _forget_impacts(plan: RedactPlan, store: Store, fs: Any, todo: list[Any]) -> None:
    """The plan's ``suppressed_facts``, ``summaries_inert`` and
    ``generated_messages_invalidated``: the union of
    what ``forget --dry-run`` says each forget of ``todo`` does (before
    2026-12-07 the plan said none of it, and a forget's exclusions
    suppressed another fact citing the same message, or made a summary
    inert, unsaid), computed for all the forgets together
    (:func:`~lecode_memctl.core.factview.forgets_impact`: the union of
    their exclusions is the union of what each overlaps, and any raise of
    the generation hides the same epochs).  Before 2026-12-07 each forget
    was previewed alone, every fact listed twice for each: a plan with 400
    forgets took 52 s."""
    if not todo:
        return
    from .factview import forgets_impact
    from .sessions import SessionStore

    sessions = SessionStore(store, exclusions=fs)
    # (ids as stored, not typed: one that is not 16 lower-case hex digits,
    # or a BLOB, is planned by its stored value; before 2026-12-07 it made
    # the plan exit 2, "invalid fact id", and its credential stayed)
    impact = forgets_impact(fs, sessions, todo, stored=True)
    plan.suppressed_facts = sorted(set(impact["suppressed_facts"]))
    plan.summaries_inert = impact["summaries_inert"]
    plan.generated_messages_invalidated = impact["generated_messages_invalidated"]
    plan.unexcluded = impact["unexcluded"]


def _store_names(root: str) -> Iterator[tuple[str, str]]:
    """(store-relative path, the name chosen) of the files and directories
    under ``notes/`` and ``daily/``: the part a person or the agent chose,
    below the layout's directory and without a ``.md`` (``notes/``, a
    date's digits, ``.md`` and the layout's own names, ``facts.sqlite3``,
    are no copy of a value: a password "notes" or "md" was kept for every
    note; a transcript's and its lock's name is its session id, kept as
    such), not following links, sorted."""
    out: list[tuple[str, str]] = []
    for top in ("notes", "daily"):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            below = os.path.relpath(dirpath, base)
            for name in (*dirnames, *filenames):
                chosen = (name[:-7] if name.endswith(".md.bak")
                          else name[:-3] if name.endswith(".md") else name)
                if top == "daily" and below == "." and _a_date(chosen):
                    continue        # (a date: the layout's, no value's)
                out.append((f"{rel_dir}/{name}",
                            chosen if below == "." else f"{below}/{chosen}"))
    return iter(sorted(out))


def _a_date(name: str) -> bool:
    """Whether ``name`` is a daily log's ``YYYY-MM-DD`` (ASCII digits)."""
    digits = name[:4] + name[5:7] + name[8:]
    return (len(name) == 10 and name[4] == "-" and name[7] == "-"
            and digits.isascii() and digits.isdigit())


def _text_forms(value: str) -> list[str]:
    """The forms of ``value`` :func:`_forms` gives, as text: what the check
    after a run looks for in a column (:func:`_in_live_rows`)."""
    return [f.decode("utf-8", "surrogateescape") for f in _forms(value)]


def _revisions_holding(db: sqlite3.Connection, values: Iterable[str]
                       ) -> dict[tuple[str, int], list[str]]:
    """(fact id, revision) -> the ``values`` its text holds (in either form
    :func:`_forms` gives), of every revision row of the facts database
    ``db`` whose text holds one (one read of the table, one search of each
    text).  SQLite's errors are the caller's."""
    import re

    wanted = sorted(set(values), key=len, reverse=True)
    out: dict[tuple[str, int], list[str]] = {}
    if not wanted:
        return out
    forms = {v: _text_forms(v) for v in wanted}
    rx = re.compile("|".join(re.escape(f) for v in wanted for f in forms[v]))
    for fid, rev, text in db.execute("SELECT fact_id, revision, text FROM revisions"):
        if isinstance(text, str) and rx.search(text):
            held = [v for v in wanted if _holds(text, forms[v])]
            if held:
                out[(fid, rev)] = held
    return out


def _holds(text: Any, forms: Iterable[Any], bounded: bool = True) -> bool:
    """Whether ``text`` (a str or bytes) holds one of ``forms`` outside
    every marker it holds: an occurrence inside one (``token`` in an
    earlier run's ``[REDACTED:github-token:abc123]``) is no occurrence, by
    the rule the rewrite follows (:func:`secrets.replaced_spans`; before
    2026-12-07 a fact holding the value only in a marker was forgotten).
    ``bounded``: only an occurrence at word boundaries counts (since review
    rv7, 2026-12-07: a fact saying ``pytest`` held the password ``test``)."""
    from .secrets import replaced_spans

    present = [f for f in forms if f in text]
    if not present:
        return False
    # (a copy stands at word boundaries: review rv7, 2026-12-07)
    return bool(replaced_spans(text, [(f, None) for f in present], bounded=bounded))


def _revisions_read(fs: Any, values: Iterable[str]) -> dict[tuple[str, int], list[str]]:
    """(fact id, revision) -> the values its text holds, of the revisions
    of the facts database ``fs`` (a FactStore open for reading) whose text
    holds one of ``values``, as the plan reads them (revisions are never
    rewritten: a text that holds a value later is a revision written
    since)."""
    db = fs._reader()
    if db is None or "revisions" not in fs.tables:
        return {}
    try:
        return _revisions_holding(db, values)
    except sqlite3.Error:
        return {}      # (a damaged table: the plan's own errors say so)


def _plan_forget_of(plan: RedactPlan, stored: Any) -> None:
    """The fact whose id is ``stored`` (exactly as stored) in the plan's
    forgets, once (told apart by :func:`facts.stored_id_key`), shown as the
    listing shows it."""
    from .facts import row_text, stored_id_key

    key = stored_id_key(stored)
    if key not in plan._forget_keys:
        plan._forget_keys.add(key)
        plan._forget_ids.append(stored)
        plan.forget_facts.append(row_text(stored))


def _rows_of(fs: Any, stored: Any) -> int:
    """The rows of ``facts`` under exactly the stored id ``stored``
    (:func:`facts.id_match`): 0 (a revision row whose fact is gone, or a fact
    gone since the scan), 1; more (a table that lost its primary key) is
    StoreCorrupt: which row holds the value is not known, and redact
    refuses before it changes anything (exit 5, the dry run too)."""
    from .facts import stored_rows

    db = fs._reader()
    if db is None:
        return 0
    try:
        return stored_rows(db, stored)
    except sqlite3.Error:
        return 0


def _plain_files(store: Store) -> list[str]:
    """The store-relative paths of the files the secrets scan reads as text
    (:func:`secrets.store_files`, but the transcripts, read from
    ``sessions/`` by the plan, and the database's own files)."""
    from .secrets import SecretsReport, is_transcript, raw_scanned, store_files

    listing = SecretsReport(store.slug, os.fspath(store.path))
    return [rel for rel in store_files(store, listing)
            if not is_transcript(rel) and not raw_scanned(rel) and rel not in DATABASE_FILES]


def _live_session_ids(fs: Any) -> list[str]:
    """The session ids the live rows of the facts database ``fs`` (a
    FactStore open for reading) name: the evidence of its facts
    (``source_refs``, legacy ``provenance``) and the exclusions."""
    db = fs._reader()
    if db is None:
        return []
    out: set[str] = set()
    try:
        for table in ("source_refs", "provenance", "exclusions"):
            if table in fs.tables:
                out.update(r[0] for r in db.execute(f"SELECT DISTINCT session_id FROM {table}")
                           if isinstance(r[0], str))
    except sqlite3.Error:
        pass    # (a damaged table: the check after the clean still reads the bytes)
    return sorted(out)


def _left_in_database(store: Store, values: Iterable[str],
                      skip: frozenset[tuple[str, int]] | None = None) -> list[str]:
    """The ``values`` the clean left in the database: whose bytes (in either
    form :func:`_forms` writes) the database's files still hold and that
    SQLite reads there (:func:`_in_live_rows`): after the clean (VACUUM, the
    ``-wal`` truncated) the files hold the live rows and the schema, and a
    value only the schema memctl writes holds (the password ``facts``, a
    table's name; before 2026-12-07 it was "cannot erase", exit 1) is the
    database's structure, no copy of the credential."""
    left = _in_files(store, list(values))
    return _in_live_rows(store, left, skip) if left else left


@contextlib.contextmanager
def _read_only(store: Store) -> Iterator[sqlite3.Connection]:
    """A read connection to the store's facts database that neither writes
    nor creates any file in the store: what the checks after a run read.
    It is the connection of :meth:`FactStore.open_readonly
    <lecode_memctl.core.facts.FactStore.open_readonly>`, as memctl's every
    read opens the database: a private snapshot (the database and its
    ``-wal`` copied into a private directory of ``$TMPDIR``, never the
    ``-shm``), removed when the block ends.  Before 2026-12-07 it was a
    ``mode=ro`` connection to the store's own file, which made a
    ``facts.sqlite3-wal`` and ``-shm`` beside a WAL database that had none
    and could not remove them on close: a redact of transcripts only left
    both in the store.  MemctlError when the database cannot be read so
    (:class:`~lecode_memctl.core.errors.NotFound` when it is gone)."""
    from .errors import NotFound
    from .facts import FactStore

    fs = FactStore.open_readonly(store.facts_db, busy_timeout=BUSY_TIMEOUT)
    try:
        db = fs.read_connection()
        if db is None:
            raise NotFound(f"{store.facts_db}: no facts database")
        yield db
    finally:
        fs.close()


def _in_new_revisions(store: Store, values: Iterable[str],
                      read: frozenset[tuple[str, int]],
                      scanned: frozenset[tuple[str, int]] | None = None
                      ) -> tuple[list[str], frozenset[tuple[str, int]]]:
    """The ``values`` the text of a revision written since the plan holds,
    and those revisions (fact id, revision): one the plan did not read (not
    in ``read``), or, when ``scanned`` is given, one the scan did not read
    (a fact remembered while the scan ran, which the plan read but the scan
    did not).  Which rows were read, never a clock: a revision's
    ``created`` is the writer's clock, behind or ahead of this one.  None
    when the database cannot be read so (every value left is then kept, as
    before)."""
    wanted = list(values)
    if not wanted or not os.path.lexists(store.facts_db):
        return [], frozenset()
    try:
        with _read_only(store) as db:
            held = {k: vs for k, vs in _revisions_holding(db, wanted).items()
                    if k not in read or (scanned is not None and k not in scanned)}
    except (sqlite3.Error, MemctlError, OSError):
        return [], frozenset()
    found = {v for vs in held.values() for v in vs}
    return [v for v in wanted if v in found], frozenset(held)


def _schema_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    kind, name, table, sql = row
    return kind, name, table, None if sql is None else " ".join(sql.split())


def _own_schema() -> set[tuple[Any, ...]]:
    """The rows of ``sqlite_master`` (type, name, table, SQL with its white
    space made single spaces) of a database memctl creates."""
    from .facts import _migrate

    db = sqlite3.connect(":memory:")
    try:
        _migrate(db, Path(":memory:"))
        return {_schema_row(r) for r in
                db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}
    finally:
        db.close()


def _own_cells() -> dict[str, frozenset[bytes]]:
    from .facts import MIGRATIONS

    return {"meta": frozenset({b"generation"}),
            "schema_migrations": frozenset(name.encode() for name, _fn in MIGRATIONS)}


def _in_live_rows(store: Store, values: list[str],
                  skip: frozenset[tuple[str, int]] | None = None) -> list[str]:
    """The ``values`` (either form) SQLite reads in the database: in a column
    of a row of any table (but the fixed words memctl writes in its own
    bookkeeping: meta's key ``generation``, the migrations' names), or in a
    row of ``sqlite_master`` (type, name, table, SQL) that is not one
    memctl's own schema has.  A database SQLite
    cannot read so, or one of whose files is no regular file: every one of
    ``values`` (what its bytes hold stands).  ``skip``: the (fact id,
    revision) of rows of ``revisions`` not looked at."""
    for name in DATABASE_FILES:
        # (never a FIFO waited on, never a link followed: SQLite would open
        # either beside the database)
        try:
            if not stat.S_ISREG(os.lstat(os.path.join(os.fspath(store.path), name)).st_mode):
                return values
        except FileNotFoundError:
            if name == FACTS_DB:
                return values
        except OSError:
            return values
    try:
        own = _own_schema()
        with _read_only(store) as db:
            return _found_in_rows(db, values, own, skip)
    except (sqlite3.Error, MemctlError, OSError):
        return values


def _found_in_rows(db: sqlite3.Connection, values: list[str], own: set[tuple[Any, ...]],
                   skip: frozenset[tuple[str, int]] | None) -> list[str]:
    """:func:`_in_live_rows` read on ``db`` (``own``: :func:`_own_schema`).
    SQLite's errors are the caller's."""
    forms = [(v, _forms(v)) for v in values]
    found: list[str] = []
    own_words = _own_cells()

    def look(cell: Any, bounded: bool = True) -> None:
        if isinstance(cell, bytes):
            for v, fs in forms:
                if v not in found and _holds(cell, fs, bounded):
                    found.append(v)

    db.text_factory = bytes
    tables = []
    for row in db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"):
        text = tuple(c.decode("utf-8", "surrogateescape") if isinstance(c, bytes) else c
                     for c in row)
        if _schema_row(text) not in own:
            # (a name in a schema memctl did not write: no clean erases
            # it, and the scan's detectors read it in the file's bytes,
            # glued to a word or not: ``t_AKIA...``)
            for c in row:
                look(c, False)
        if row[0] == b"table":
            tables.append(text[1])
    for name in tables:
        quoted = '"' + name.replace('"', '""') + '"'
        # (the cells memctl itself writes in its bookkeeping, each a
        # fixed word: meta's key 'generation', the migrations' names)
        own_cells = own_words.get(name, frozenset())
        # every column a row stores, never a VIRTUAL generated one (hidden
        # 2): SELECT * evaluated it on every row, code of a crafted schema
        # (printf('%.*c', 900000000, 'x'): seconds a row), and its value is
        # in no row.  (A name that is not UTF-8 among them: "no such column",
        # every value taken as left, as for any table SQLite cannot read.)
        xinfo = list(db.execute(f"PRAGMA table_xinfo({quoted})"))
        if any(r[6] == 2 for r in xinfo):
            listed = ", ".join(
                '"' + (c.decode("utf-8", "replace") if isinstance(c, bytes) else str(c))
                .replace('"', '""') + '"' for c in (r[1] for r in xinfo if r[6] in (0, 3)))
        else:
            listed = "*"
        if not listed:
            continue
        cur = db.execute(f"SELECT {listed} FROM {quoted}")    # noqa: S608 - names quoted
        cols = [d[0] for d in cur.description or ()]
        key = (cols.index("fact_id"), cols.index("revision")) \
            if skip and name == "revisions" and {"fact_id", "revision"} <= set(cols) else None
        for r in cur:
            if key is not None and skip and isinstance(r[key[0]], bytes) and \
                    (r[key[0]].decode("utf-8", "surrogateescape"), r[key[1]]) in skip:
                continue
            for c in r:
                if c not in own_cells:
                    look(c)
            if len(found) == len(forms):
                break
    return [v for v in values if v in found]


def _in_files(store: Store, values: list[str]) -> list[str]:
    """The ``values`` whose bytes (in either form :func:`_forms` writes) the
    database's files hold."""
    if not values:
        return []
    forms = [(v, _forms(v)) for v in values]
    overlap = max(len(f) for _v, fs in forms for f in fs)
    left: list[str] = []
    for name in sorted(DATABASE_FILES):
        path = os.path.join(os.fspath(store.path), name)
        try:
            # (never a link followed, never a FIFO waited on: SQLite refuses
            # both beside the database, so no value of its is there)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            at, tail = 0, b""
            while len(left) < len(forms):
                piece = os.pread(fd, 1 << 22, at)
                if not piece:
                    break
                at += len(piece)
                buf = tail + piece
                for v, fs in forms:
                    if v not in left and any(f in buf for f in fs):
                        left.append(v)
                tail = buf[-overlap:]
        except OSError:
            pass
        finally:
            os.close(fd)
    return left


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


# --------------------------------------------------------------------------
# Applying


@record
class RedactResult:
    files: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    database_cleaned: bool = False
    kept: list[dict[str, Any]] = field(default_factory=list)   # the plan's: not erased
    # [{fact_id, revision, reason}] of the forgets: evidence not excluded
    unexcluded: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._masks: dict[str, str] = {}

    def to_json(self) -> dict[str, Any]:
        return {"files": [hide_in_location(f, self._masks) for f in self.files],
                "forgotten": self.forgotten, "database_cleaned": self.database_cleaned,
                "unexcluded": self.unexcluded, "kept": self.kept}


def _check_database(store: Store, lock_wait: float = BUSY_TIMEOUT) -> None:
    """Before any change: the database must be lecode's (another application's is
    refused, exit 5) and readable."""
    if not os.path.lexists(store.facts_db):
        return
    from .facts import FactStore

    fs = FactStore.open_readonly(store.facts_db, busy_timeout=lock_wait)
    try:
        if fs.exists and not fs.tables:   # an empty file: nothing to clean
            return
        if fs.exists and "facts" not in fs.tables:
            raise StoreCorrupt(f"{store.facts_db}: table facts is missing; not a lecode facts "
                               "database; refusing to change it")
    finally:
        fs.close()


def apply_redaction(store: Store, plan: RedactPlan, *, lock_wait: float = BUSY_TIMEOUT) -> RedactResult:
    """Carry out ``plan``.  ``lock_wait``: seconds to wait for the facts
    database's lock (and for a stable snapshot of it) before StoreBusy; the
    session locks are never waited for (exit 6 while lecode holds one).

    An error after a change says what was already done and what was not
    (:func:`_unfinished`): the store is left consistent, and running redact
    again finishes the job."""
    result = RedactResult(kept=list(plan.kept))
    result._masks = plan._masks
    if plan.empty:
        return result
    pending = _Pending(list(plan.files), list(plan.forget_facts), plan.clean_database)
    root = os.fspath(store.path)
    try:
        _apply(store, plan, result, pending, lock_wait)
    except MemctlError as exc:
        _settle(root, result, pending)
        raise _unfinished(exc, result, pending, plan) from None
    except KeyboardInterrupt:
        # (a Ctrl-C or a termination signal, raised by memctl's handlers)
        _settle(root, result, pending)
        if _changed(result, pending):
            raise RedactInterrupted(
                _progress("", result, pending, plan).removeprefix("; ")) from None
        raise
    return result


def _changed(result: RedactResult, pending: _Pending) -> bool:
    """Whether the run may have changed the store: a file rewritten, a fact
    forgotten, the database cleaned, or a file whose rename may have
    happened (:attr:`_Pending.writing`)."""
    return bool(result.files or result.forgotten or result.database_cleaned
                or pending.writing is not None)


def _settle(root: str, result: RedactResult, pending: _Pending) -> None:
    """After an error or an interrupt: what became of the file being written
    when it came (:attr:`_Pending.writing`), told by its bytes now: its new
    ones, it is redacted (the rename happened: in ``result.files``, no
    longer pending); its old ones, it was not changed; anything else (it
    cannot be read, or was written again since), it stays "possibly
    redacted".  Before 2026-12-07 an interrupt right after the first
    rename said only "terminated by SIGTERM", and an error after it kept
    "nothing was changed", though the file was rewritten."""
    writing = pending.writing
    if writing is None:
        return
    change, old, new = writing
    if change.file in result.files:
        # (counted, and the interrupt came before it was taken off the
        # files to do: done, never named as not done too)
        if change in pending.files:
            pending.files.remove(change)
        pending.writing = None
        return
    try:
        now = read_regular(os.path.join(root, change.file))
    except OSError:
        return
    if now == new:
        result.files.append(change.file)
        if change in pending.files:
            pending.files.remove(change)
        pending.writing = None
    elif now == old:
        pending.writing = None


class RedactInterrupted(KeyboardInterrupt):
    """An interrupt after a change: ``progress`` says what was already
    redacted, what was not, and that a rerun finishes the job, as the
    message of an error midway does (:func:`_unfinished`)."""

    def __init__(self, progress: str) -> None:
        super().__init__(progress)
        self.progress = progress


class _Pending:
    """What of a plan is not done yet (for the message of an error midway)."""

    def __init__(self, files: list[FileChange], forgets: list[str], clean: bool) -> None:
        self.files = files
        self.forgets = forgets
        self.clean = clean
        # the file being written (its change, old bytes, new bytes), from
        # just before its atomic write until it is counted: its rename may
        # have happened (:func:`_settle`)
        self.writing: tuple[FileChange, bytes, bytes] | None = None


def _apply_file(root: str, change: FileChange, plan: RedactPlan, result: RedactResult,
                pending: _Pending) -> None:
    """Rewrite one file of the plan (its transcript's lock, or the Markdown
    writers' turn, already held by the caller)."""
    from .atomic import atomic_write

    path = os.path.join(root, change.file)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        pending.files.remove(change)
        return
    except OSError as exc:
        raise StoreWriteError(f"{change.file}: cannot read: {exc.strerror}") from None
    found = plan._found.get(change.file, {})
    if change.kind == KIND_TRANSCRIPT:
        new, _seqs, n, _raw = rewrite_transcript(data, plan._values, found)
    else:
        new, n, _lines, _at = replace_in_file(data, plan._values, found)
        # a write since the plan (shown at the prompt) is not overwritten
        if change.sha256 and hashlib.sha256(data).hexdigest() != change.sha256:
            raise Conflict(f"{change.file} changed since the plan and was not "
                           "overwritten; run redact again")
    if n and new != data:
        # (from here until it is counted, the rename may have happened: an
        # error or an interrupt names the file, :func:`_settle`)
        pending.writing = (change, data, new)
        atomic_write(Path(path), new, backup=False)
        result.files.append(change.file)
        pending.writing = None
    pending.files.remove(change)


def _apply(store: Store, plan: RedactPlan, result: RedactResult, pending: _Pending,
           lock_wait: float) -> None:
    from . import markdown
    from .sessions import lock_session

    root = os.fspath(store.path)
    if plan.clean_database:
        _check_database(store, lock_wait)
    sessions_dir = os.path.join(root, "sessions")
    locks: list[io.FileIO] = []
    try:
        for change in plan.files:
            if change.kind == KIND_TRANSCRIPT:
                sid = change.file.split("/", 1)[1][:-len(".jsonl")]
                # (a file whose name is no session id is no session lecode
                # writes, and has no lock: none is made next to it, which
                # validate would then report as an unexpected file)
                if SESSION_ID_RE.match(sid):
                    locks.append(lock_session(sessions_dir, sid))
        # the plan's order: transcripts, then the other files
        for change in plan.files:
            # a file other than a transcript is checked and rewritten in one
            # turn of the Markdown writers (markdown.writing): a write the agent
            # made after the check is never overwritten (before 2026-12-07 one
            # made between the check and the rename was lost)
            turn = (contextlib.nullcontext() if change.kind == KIND_TRANSCRIPT
                    else markdown.writing(store, wait=lock_wait))
            with turn:
                _apply_file(root, change, plan, result, pending)
    finally:
        for lock in locks:
            try:
                lock.close()
            except OSError:
                pass
    if plan.forget_facts:
        from .facts import FactStore

        fs = FactStore(store.facts_db, busy_timeout=lock_wait)
        try:
            # (each by its id as stored, carried from the plan)
            for key, fid in zip(plan._forget_ids, plan.forget_facts, strict=True):
                unexcluded: list[tuple[int | None, str]] = []
                if fs.forget(key, unexcluded=unexcluded, stored=True):
                    result.forgotten.append(fid)
                    result.unexcluded += [{"fact_id": fid, "revision": rev, "reason": why}
                                          for rev, why in unexcluded]
                pending.forgets.remove(fid)
        finally:
            fs.close()
    rows = {k["hash"]: i for i, k in enumerate(result.kept)}
    # (a value a live row the plan read keeps: kept already, not looked for)
    # (a short value: only where it was found; in the database, the bytes)
    wanted = [v for v in plan._values
              if (not is_short(v) or v in plan._short_in_database)
              and KEPT_DATABASE not in _reasons(result.kept, rows, plan._first[v])]
    if plan.clean_database and os.path.lexists(store.facts_db):
        clean_database(store, lock_wait)
        result.database_cleaned = True
        # what the clean left: only a live row holds it now (the plan's
        # reading of the live session ids may miss one: a column that is no
        # session id): kept, said, exit 1 -- never "redacted" (before
        # 2026-12-07, exit 0); but a value only a fact written since the
        # plan holds (the agent remembered it while redact ran) is changed
        # meanwhile, below
        left = _left_in_database(store, wanted)
        fresh, new_rows = _in_new_revisions(store, left, plan._revisions, plan._scanned)
        only_new = set(fresh) - set(_left_in_database(store, fresh, new_rows)) if fresh else set()
        for v in left:
            if v in only_new:
                continue
            i = rows.get(plan._first[v].hash)
            if i is None:
                result.kept.append(kept_row(plan._first[v], (KEPT_DATABASE,)))
            else:       # (a new row: the plan's rows are the plan's output too)
                k = result.kept[i]
                result.kept[i] = {**k, "reasons": [r for r in KEPT_REASONS
                                                   if r in k["reasons"] or r == KEPT_DATABASE]}
        result.kept.sort(key=lambda k: (k["detector"], k["hash"]))
    else:
        # (no clean: a value a fact written since the plan holds is as much
        # changed meanwhile)
        only_new = set(_in_new_revisions(store, wanted, plan._revisions, plan._scanned)[0])
    pending.clean = False
    if only_new:
        firsts = [plan._first[v] for v in plan._values if v in only_new]
        n = len(firsts)
        raise WrittenSinceThePlan(
            f"{n} value{'s are' if n != 1 else ' is'} in facts written since the plan ("
            + ", ".join(f"{f.detector} {f.preview}" for f in firsts)
            + "), not forgotten: the plan did not name them; run redact again", result)


class WrittenSinceThePlan(Conflict):
    """Values the run did not erase because facts remembered (or corrected)
    since the plan hold them, which it does not forget unseen: changed
    meanwhile, exit 4, as a file changed since the plan; running redact
    again plans and forgets them.  ``result``: what the run did."""

    def __init__(self, message: str, result: RedactResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def _reasons(kept: list[dict[str, Any]], rows: dict[str, int], f: Finding) -> list[str]:
    """The reasons the ``kept`` row of ``f``'s value gives (none: no row)."""
    i = rows.get(f.hash)
    return [] if i is None else list(kept[i]["reasons"])


_NOTHING_CHANGED = "; nothing was changed"


def _unfinished(exc: MemctlError, result: RedactResult, pending: _Pending,
                plan: RedactPlan) -> MemctlError:
    """``exc`` as it is when nothing was changed yet (but a session id that
    is a value masked); otherwise the same error (same class, same exit
    status) whose message also says what was already redacted, what was
    not, and that a rerun finishes the job."""
    text = plan.shown(exc.message)
    if _changed(result, pending):
        text = _progress(text, result, pending, plan)
    if text == exc.message:
        return exc
    new = copy.copy(exc)
    new.message = text
    new.args = (text,)
    return new


def _progress(text: str, result: RedactResult, pending: _Pending, plan: RedactPlan) -> str:
    text = text.removesuffix(_NOTHING_CHANGED)
    done = []
    if result.files:
        done.append("already redacted: " + ", ".join(plan.shown_file(f) for f in result.files))
    maybe = pending.writing[0] if pending.writing is not None else None
    if maybe is not None:
        # (its rename may have happened, and its bytes now do not tell)
        done.append(f"possibly redacted: {plan.shown_file(maybe.file)}")
    if result.forgotten:
        done.append(f"fact(s) forgotten: {', '.join(result.forgotten)}")
    todo = []
    rest = [c for c in pending.files if c is not maybe]
    if rest:
        todo.append(", ".join(plan.shown_file(c.file) for c in rest))
    if pending.forgets:
        todo.append(f"forgetting fact(s) {', '.join(pending.forgets)}")
    if pending.clean:
        todo.append("the database clean (its free pages may still hold the text of a "
                    "forgotten fact)")
    text += "; " + "; ".join(done)
    if todo:
        text += "; not done: " + ", ".join(todo)
    if "run redact again" not in text:
        text += "; run redact again to finish"
    return text


def clean_database(store: Store, timeout: float = BUSY_TIMEOUT) -> None:
    """``secure_delete`` on, ``VACUUM`` (every page rebuilt: free pages and
    slack gone), ``wal_checkpoint(TRUNCATE)`` (the ``-wal`` emptied to 0 bytes).
    StoreBusy when another connection keeps the checkpoint from finishing;
    StoreWriteError (exit 7) when the disk is full or a write fails."""
    path = os.fspath(store.facts_db)
    from .facts import _Connection, _db_error

    try:
        db = sqlite3.connect(path, timeout=timeout, isolation_level=None, factory=_Connection)
    except sqlite3.Error as exc:
        raise _db_error(Path(path), exc) from exc
    try:
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        db.execute("PRAGMA secure_delete = ON")
        db.execute("VACUUM")
        busy, _log, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreBusy(f"{path}: another connection keeps the -wal from being "
                            "checkpointed; the database was vacuumed, run redact again "
                            "when lecode is idle")
    except sqlite3.Error as exc:
        # the facts store's one classification (facts._db_error): a full disk,
        # an I/O error or a read-only file is a failed write (exit 7; a failed
        # VACUUM leaves the database as it was), busy or locked is StoreBusy,
        # only what is left is StoreCorrupt
        raise _db_error(Path(path), exc) from exc
    finally:
        db.close()


__all__ = ["plan_redaction", "apply_redaction", "clean_database", "rewrite_transcript",
           "RedactPlan", "RedactResult", "RedactInterrupted", "WrittenSinceThePlan", "FileChange",
           "FACTS_DB", "KEPT_HINT",
           "KEPT_REASONS", "kept_row",
           "HEADER_FIELDS", "RECORD_FIELDS"]
