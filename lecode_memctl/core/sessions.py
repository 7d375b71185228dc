"""Session transcripts: the writer, the range reader, snapshots and validation.

Implements the transcript half of the store contract ("Session transcript",
"SourceRef and its digest", "Visibility", "Validation statuses") and the
"Source-linked recall" part of the reference design.

Reading never loads a whole transcript.  A range read finds ``start`` by a
binary search over byte offsets (seek to the middle, skip to the next line
start, parse that line's ``seq``), reads the span forward, and then reads on
to the end of the file only to collect ``undo``/``redo``/``clear`` events:
an undo/redo always targets positions before itself and a clear hides what
precedes it, so the visibility of positions ``>= start`` depends only on
records with ``seq >= start``.  Lines after the span are parsed only when
they contain the bytes ``"event"`` and their prefix does not name another
type (:func:`not_an_event`); the search reads a line's seq from its first
bytes, so a huge record is never held or parsed by it (issue 16.5).

Every read works on the file's size at ``fstat`` time: bytes a concurrent
writer appends later, and a last line without ``\\n`` (an append in flight),
are invisible.  Session files are opened with ``O_NOFOLLOW`` and checked with
``fstat``; a symbolic link is refused, and so is a header whose ``project``
is not the store's slug.
"""

from __future__ import annotations

import bisect
import difflib
import errno
import fcntl
import functools
import heapq
import io
import itertools
import math
import operator
import os
import stat
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Self, TypeGuard

import orjson

from ._lazy import lazy_compile
from .atomic import (
    O_CLOEXEC,
    O_DIRECTORY,
    O_NOFOLLOW,
    O_NONBLOCK,
    fsync_dir,
    is_link_refusal,
    make_dirs,
    open_owned,
    write_all,
)
from .errors import (
    Conflict,
    MemctlError,
    NotFound,
    StoreBusy,
    StoreCorrupt,
    StoreWriteError,
    UsageError,
    raise_if_out_of_fds,
    typed_errors,
)
from .layout import SESSION_SUFFIX, Store, UnknownSlug, check_store_arg, session_ids
from .sourceref import (
    MAX_POSITION,
    MAX_SPAN,
    REASONS,
    SESSION_ID_RE,
    VALID,
    ExclusionReader,
    NoExclusions,
    NonFiniteRecord,
    RecordsUndigestible,
    SourceRef,
    SourceStatus,
    StoredSource,
    canonical_digest,
    check_session_id,
    holds_non_finite,
    status_for,
)

if TYPE_CHECKING:
    from .scanitem import ScanItem as ScanItem
    from .sessiondata import SessionInfo as SessionInfo, Snapshot as Snapshot
else:
    from ._lazy import lazy_getattr

    # What a capture, the listing and a line-by-line scan return, loaded on
    # first use (core/_lazy.py).
    _MOVED = {"SessionInfo": ".sessiondata", "Snapshot": ".sessiondata",
              "ScanItem": ".scanitem"}
    __getattr__ = lazy_getattr(__name__, _MOVED)

FORMAT_VERSION = 1
SUFFIX = SESSION_SUFFIX
LOCK_SUFFIX = ".lock"
ROLES = ("user", "assistant", "tool", "system")
# the keys the writer sets: an extra field may not override them
MESSAGE_KEYS = ("seq", "type", "role", "content")
EVENT_KEYS = ("seq", "type", "event")
GENERATED_ROLES = ("assistant", "tool")
PURPOSES = ("working", "durable")
VISIBILITY_EVENTS = ("undo", "redo", "clear")
# The learning event (reference design, "Bounds, deduplication, and failure handling"):
# its type, its fixed statuses and its reason codes (the audit checks them, facts reads them).
LEARNING_EVENT = "learning"
LEARNING_STATUSES = frozenset({"no_candidates", "rejected", "learned", "proposed", "failed", "stale"})
LEARNING_REASONS = frozenset({
    "response_schema", "invalid_json", "output_too_large", "unexpected_tool_calls",
    "incomplete_response", "candidate_schema", "invalid_text", "invalid_source",
    "invalid_preference_source", "temporary_preference", "exact_text_mismatch",
    "invalid_preference", "invalid_conflicts", "unverified_project_evidence",
    "stale_context", "extraction_error",
})

# Corruption kinds reported by ``scan`` (and in StoreCorrupt messages).
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
NO_SEQ = "no_seq"                    # an object without an integer "seq"
SEQ_GAP = "seq_gap"
SEQ_DUPLICATE = "seq_duplicate"
SEQ_REGRESSION = "seq_regression"
INVALID_UTF8 = "invalid_utf8"
TORN_TAIL = "torn_tail"              # not corruption: an append in flight
BAD_HEADER = "bad_header"            # line 1 is not a seq-0 session header
BAD_TARGET = "bad_target"            # undo/redo target malformed or not entirely before the event
# Not corruption, but a line memctl cannot use: valid JSON too large for the
# memory at hand, or nested deeper than the parsers take (issue 16.5).  It is
# unusable as a corrupt line is, and is reported as what it is.
TOO_LARGE = "too_large"
CORRUPTION_KINDS = (NOT_JSON, NOT_OBJECT, NO_SEQ, SEQ_GAP, SEQ_DUPLICATE, SEQ_REGRESSION,
                    INVALID_UTF8, BAD_HEADER, BAD_TARGET, TOO_LARGE)

# Session states reported by list_sessions.
STATE_OK = "ok"
STATE_TORN = "torn_tail"
STATE_CORRUPT = "corrupt"
STATE_REFUSED = "refused"
STATE_UNREADABLE = "unreadable"

_EVENT_MARK = b'"event"'
_CHUNK = 1 << 20
_BUFFER = 1 << 14     # small: each binary-search probe fills one buffer
# the first read of a newline search: less than the buffer, so that it is
# served from it (a probe's line and the next probes of the scan near it
# read no more), where a read of a whole buffer's size bypassed it: two
# system calls and 16 KiB copied each probe, for lines of 100 bytes
_FIRST_READ = 512
_LINEAR_BELOW = 1 << 13   # binary search stops when the window is this small
_TAIL_BYTES = 1 << 16
_SCAN_BLOCK = 1 << 20     # raw-byte scans (marked_lines) read this much at a time
_WHOLE_LIMIT = 4 << 20   # a whole-store evaluation parses a transcript this small in one call
_RARE_MISSES = 16         # marked_lines: hits of the rare byte that are not the mark,
_RARE_PAUSE = 16          # per block (plus one per 4 KiB), before bytes.find takes
                          # over for this many blocks
# bytes by how often they occur in transcripts (JSON, prose, code), most first:
# a mark's rarest byte is the one found by memchr (_rare_offset)
_COMMON_BYTES = b' "etaoinsrhldcum,:fpgwyb.{}_\\0123456789-vkxjqzETAOINSRHLDCUMFPGWYBVKXJQZ'
_MEMMEM_FROM = 1 << 16    # MarkFinder: a buffer this large is searched by memmem
_SWEEP_GAP = 256          # a span sweep seeks past more positions than this between spans


# --------------------------------------------------------------------------
# Errors that carry a machine-readable reason (a key of sourceref.REASONS or a
# corruption kind).  Callers may catch the base classes.


class SessionNotFound(NotFound):
    """No transcript of that session id in the store (exit 3)."""

    reason = "session_missing"


class SessionRefused(Conflict):
    """A symlinked session file, a missing/invalid header, or another project's session."""

    def __init__(self, message: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


class NoHeaderYet(SessionRefused):
    """A transcript with no complete first line: empty, or its header line
    still being written (a last line without ``\n`` is an append in
    flight).  Refused as any transcript with no header (``refused_header``,
    exit 4) where a header is needed; a reader asking whether the session
    has begun (``list_facts(current_session_id=)``) takes it for no
    transcript yet."""


class SessionUnreadable(StoreCorrupt):
    """A transcript that is there but cannot be read: not a regular file, no
    permission, an I/O error (exit 5)."""

    reason = "session_unreadable"


class SessionCorrupt(StoreCorrupt):
    """A complete line in the span is not a JSON object, or seqs are not consecutive."""

    reason = "records_corrupt"

    def __init__(self, message: str, *, kind: str, line: int | None, offset: int,
                 session_id: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.line = line
        self.offset = offset
        self.session_id = session_id


class SpanHidden(Conflict):
    """A valid range in which no message is visible."""

    def __init__(self, message: str, reason: str, seq: int | None = None, *,
                 hidden: dict[int, str] | None = None, end: int | None = None,
                 last_seq: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.seq = seq
        self.hidden = dict(hidden or {})   # message seq -> reason, for each hidden position
        self.end = end                     # the requested end clamped to the last record
        self.last_seq = last_seq


class PositionMissing(NotFound):
    """A position past the session's last complete record (exit 3)."""

    reason = "position_missing"


# --------------------------------------------------------------------------
# Data


# --------------------------------------------------------------------------
# Visibility


class UndoState:
    """The undo/redo/clear events of a session from some seq on."""

    def __init__(self, events: Iterable[dict[str, Any]] = ()) -> None:
        self._undo: list[tuple[int, str, int, int]] = []   # (event seq, kind, first, last)
        self.clear_seq: int | None = None
        # the newest event covering each position, as segments (starts,
        # names): position p lies in segment i = bisect_right(starts, p) - 1,
        # whose winner is names[i] (None: no event covers it); built on the
        # first state() after an add (one attribute: a reader in another
        # thread sees both lists or neither), so a query costs O(log U), not
        # a walk over every event
        self._segs: tuple[list[int], list[str | None]] | None = None
        for ev in events:
            self.add(ev)

    def add(self, ev: dict[str, Any]) -> None:
        name = ev.get("event")
        seq = ev.get("seq")
        if not _is_int(seq):
            return
        if name == "clear":
            if self.clear_seq is None or seq > self.clear_seq:
                self.clear_seq = seq
        elif name in ("undo", "redo"):
            target = undo_target(ev)
            if target is not None:
                first, last = target
                # A target reaching the event itself or beyond is corruption
                # (scan reports it); apply it to the positions before the event.
                last = min(last, seq - 1)
                if first <= last:
                    self._undo.append((seq, name, first, last))
                    self._segs = None

    def hides_nothing(self) -> bool:
        """Whether no event here can hide a position: no clear, no undo or
        redo with a target (then every question is answered as with no
        events at all)."""
        return self.clear_seq is None and not self._undo

    def state(self, pos: int) -> str | None:
        """``undo``/``redo`` of the newest such event covering ``pos`` (the
        first added among events of the same seq), else None."""
        segs = self._segs
        if segs is None:
            segs = self._segs = self._segments()
        i = bisect.bisect_right(segs[0], pos) - 1
        return segs[1][i] if i >= 0 else None

    def _segments(self) -> tuple[list[int], list[str | None]]:
        """Sweep the targets in order of their first position with a heap of
        the events covering the sweep point, newest on top: one segment per
        stretch of positions that no target starts or ends inside."""
        order = sorted(range(len(self._undo)), key=lambda k: self._undo[k][2])
        bounds = sorted({b for _, _, first, last in self._undo for b in (first, last + 1)})
        heap: list[tuple[int, int]] = []        # (-event seq, index added)
        starts: list[int] = []
        names: list[str | None] = []
        j = 0
        for b in bounds:
            while j < len(order) and self._undo[order[j]][2] <= b:
                k = order[j]
                heapq.heappush(heap, (-self._undo[k][0], k))
                j += 1
            while heap and self._undo[heap[0][1]][3] < b:
                heapq.heappop(heap)
            name = self._undo[heap[0][1]][1] if heap else None
            if not names or names[-1] != name:
                starts.append(b)
                names.append(name)
        return starts, names


def undo_target(ev: dict[str, Any]) -> tuple[int, int] | None:
    t = ev.get("target")
    if (isinstance(t, list) and len(t) == 2 and _is_int(t[0]) and _is_int(t[1])
            and 0 <= t[0] <= t[1]):
        return t[0], t[1]
    return None


def bad_target(ev: dict[str, Any]) -> bool:
    """An undo/redo event whose target is malformed, outside the session or not
    entirely before the event (corruption ``bad_target``; scan and the audit)."""
    t = undo_target(ev)
    seq = ev.get("seq")
    return t is None or not _is_int(seq) or t[1] >= seq


def learning_problems(ev: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """What breaks the contract in a ``learning`` event: ``(code, message,
    key)`` for a status outside the fixed set (``learning.bad_status``) and
    for each reason count that is not a fixed code mapped to a non-negative
    integer (``learning.bad_reason``, ``key`` the code); an event without
    ``reason_counts`` (an older one) has none to check.  The rule of
    ``validate --deep`` and of :meth:`SessionWriter.append_event`."""
    status = ev.get("status")
    if not isinstance(status, str) or status not in LEARNING_STATUSES:
        yield ("learning.bad_status", f"learning status {str(status)[:60]!r} is not one of "
               + ", ".join(sorted(LEARNING_STATUSES)), None)
    counts = ev.get("reason_counts")
    if counts is None:
        return      # older events without counts remain readable
    if not isinstance(counts, dict):
        yield "learning.bad_reason", "reason_counts is not an object", None
        return
    for k, v in counts.items():
        if k not in LEARNING_REASONS:
            yield "learning.bad_reason", f"unknown reason code {str(k)[:60]!r}", k
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            yield "learning.bad_reason", f"count for {k!r} is not a non-negative integer", k


def header_problem(hdr: Any, sid: str, slug: str, line: bytes | None = None
                    ) -> tuple[str, str] | None:
    """(``validate``'s finding code, the refusal reason) for the header line
    of session ``sid`` (``hdr`` its parse, ``line`` its bytes when they were
    not checked yet) in the store of ``slug``, or None when it is this
    store's: a format-1 session header with seq 0, naming this session and
    this project.  The rule of the audit and of ``usage``; the readers'
    (:meth:`_File.header`) is the same, decided from their own parse.  A
    slug that cannot be known (:class:`~lecode_memctl.core.layout.UnknownSlug`)
    is ``StoreCorrupt``: no header is this store's or another's."""
    if isinstance(slug, UnknownSlug):
        raise StoreCorrupt(slug.why)
    # (seq the integer 0, as the readers' parse wants it: 0.0 and false equal
    # 0; and no other seq in its first bytes: seq_given_twice)
    if not (isinstance(hdr, dict) and type(hdr.get("seq")) is int and hdr["seq"] == 0
            and hdr.get("type") == "session"
            and type(hdr.get("format")) is int and hdr.get("format") == FORMAT_VERSION
            and hdr.get("session_id") == sid
            and (line is None or seq_given_twice(line, 0) is None)):
        return "session.missing_header", "refused_header"
    if hdr.get("project") != slug:
        return "session.refused", "refused_project"
    return None


def epoch_number(value: Any) -> int | float | None:
    """A message's ``epoch`` as the contract compares it: a JSON number (an
    int or a float, never a bool: JSON has no bool numbers), else None, as
    a message with no epoch.  The one reading of an epoch: visibility
    (:func:`epoch_hides`), ``validate``'s ``session.epoch_ahead``, and the
    impact counts of ``forget`` and ``redact``."""
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def epoch_hides(epoch: Any, generation: int) -> bool:
    """The contract's epoch rule for a generated message: hidden when its
    ``epoch`` is below the project's exclusion ``generation`` (compared as
    numbers: ``-0.5`` is below 0, ``1.0`` is not below 1), or when it has no
    epoch (absent, null, or not a number) and the generation is above 0.
    (Before 2026-12-07 an epoch that was not an integer counted as none.)"""
    n = epoch_number(epoch)
    return generation > 0 if n is None else n < generation


def epoch_ahead(epoch: float, generation: int) -> bool:
    """Whether a generated message's ``epoch`` is ahead of the project's
    exclusion ``generation``: an epoch is a generation captured before a
    request, and generations only rise, so a transcript that holds one means
    the forgets that raised it were lost (``validate``'s
    ``session.epoch_ahead``), or the writer was handed a number that was
    never the generation (refused by :class:`SessionWriter`)."""
    return epoch > generation


def is_generated(record: Mapping[str, Any]) -> bool:
    """Whether a message record is generated, as the store contract says:
    an assistant or tool message, or a synthetic user notification (role
    ``user`` with ``"synthetic": true``, the JSON literal; ``"true"`` or
    ``1`` is no mark).  A message of another role is not generated, marked
    synthetic or not.  The one rule of visibility, the audit, ``forget``'s
    and ``redact``'s impact and the writer's epoch check (before 2026-12-07
    any message with ``"synthetic": true`` counted, a synthetic ``system``
    message included)."""
    role = record.get("role")
    return role in GENERATED_ROLES or (role == "user" and record.get("synthetic") is True)


def visible(record: dict[str, Any], *, purpose: str, excluded: frozenset[int], generation: int,
            undo_state: UndoState, clear_seq: int | None) -> tuple[bool, str | None]:
    """The contract's single visibility predicate for one message record
    (:func:`first_hidden` of that one record).

    Returns ``(True, None)`` or ``(False, reason)`` with reason one of
    ``excluded``, ``undone``, ``cleared``, ``epoch`` (checked in that order), or
    ``not_message`` for an event.  ``clear_seq`` is the newest clear's seq
    (ignored for purpose ``durable``).
    """
    hidden = first_hidden((record,), purpose=purpose, excluded=excluded, generation=generation,
                          undo_state=undo_state, clear_seq=clear_seq)
    return (True, None) if hidden is None else (False, hidden[1])


def first_hidden(records: Iterable[dict[str, Any]], *, purpose: str, excluded: frozenset[int],
                 generation: int, undo_state: UndoState,
                 clear_seq: int | None) -> tuple[int | None, str] | None:
    """The contract's single visibility predicate, over records in turn: the
    seq of the first record it hides and the reason (see :func:`visible`),
    or None when it hides none.  A span's records are checked in one call:
    what does not depend on the record is decided once."""
    if purpose not in PURPOSES:
        raise UsageError(f"unknown purpose {purpose!r}; use working or durable")
    undo = undo_state.state if undo_state._undo else None   # (no undo/redo: nothing undone)
    clear = clear_seq if purpose == "working" else None
    # (this loop runs for every cited record, and with --deep for every
    # record of every lineage chunk: an exact int is told apart without a call)
    for record in records:
        get = record.get
        if get("type") != "message":
            seq = get("seq")
            return (seq if _is_int(seq) else None), "not_message"
        pos = record["seq"]
        if pos in excluded:
            return pos, "excluded"
        if undo is not None and undo(pos) == "undo":
            return pos, "undone"
        if clear is not None and pos < clear:
            return pos, "cleared"
        # a generated message is hidden by an epoch below the generation (a
        # number: epoch_hides), or by none once the generation is above 0;
        # the epoch is looked at first (most records pass by it alone, and
        # is_generated has no effect to order)
        epoch = get("epoch")
        if epoch is None:
            if generation > 0 and is_generated(record):
                return pos, "epoch"
        elif type(epoch) is int:
            if epoch < generation and is_generated(record):
                return pos, "epoch"
        elif is_generated(record) and epoch_hides(epoch, generation):
            return pos, "epoch"
    return None


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------
# Low-level file access


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class RecordTooLarge(Exception):
    """Valid JSON, as far as can be told, that cannot be parsed with the memory
    or the nesting depth at hand: not a corrupt record (issue 16.5)."""


_INT64 = (-(1 << 63), (1 << 64) - 1)   # orjson's integer range; beyond it, a float


def _orjson_int(s: str) -> int | float:
    """An integer literal as orjson reads it: an int within 64 bits, else a
    float (infinite beyond a double).  ``float(s)`` has no digit limit."""
    if len(s) <= 20:
        n = int(s)
        if _INT64[0] <= n <= _INT64[1]:
            return n
    return float(s)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_record(line: bytes) -> Any:
    """Parse one transcript line: the one JSON loader of the session readers
    and the transcript audit.

    ``orjson.loads``; for the two kinds of valid JSON orjson refuses, the
    standard library's parser: a number beyond a double (``1e400``, a
    400-digit integer) is read as orjson reads an integer beyond 64 bits, as
    a float (here infinite), so the line is a record (issue 16.8).
    :class:`RecordTooLarge` when the line is too large for the memory at
    hand (MemoryError) or nested deeper than either parser takes (orjson
    stops at 1024 levels, the standard library at Python's recursion
    limit): valid JSON memctl cannot hold, said to be that (issue 16.5).
    ``orjson.JSONDecodeError`` for anything else (not JSON, not UTF-8, and
    what only the standard library accepts: NaN, a lone surrogate)."""
    try:
        return orjson.loads(line)
    except MemoryError:
        raise RecordTooLarge(f"a {len(line)}-byte record is too large for the memory at hand") \
            from None
    except orjson.JSONDecodeError as exc:
        why = str(exc)
        if why.startswith("Not enough memory"):   # orjson's MemoryError
            raise RecordTooLarge(f"a {len(line)}-byte record is too large for the memory at "
                                 "hand") from None
        if why.startswith("depth limit exceeded"):
            raise RecordTooLarge("the record is nested deeper than memctl parses "
                                 "(1024 levels)") from None
        if not why.startswith("number is infinity"):
            raise
        first = exc
    import json

    try:
        obj = json.loads(line, parse_int=_orjson_int, parse_constant=_no_constant)
        # What the standard library accepts and orjson does not (a lone
        # surrogate) stays not JSON: every record can be written out again.
        orjson.dumps(obj)
    except RecursionError:
        raise RecordTooLarge("the record is nested deeper than memctl parses") from None
    except MemoryError:
        raise RecordTooLarge(f"a {len(line)}-byte record is too large for the memory at hand") \
            from None
    except (ValueError, TypeError):   # JSONDecodeError, UnicodeDecodeError, NaN, a surrogate
        raise first from None
    if type(obj) is dict and holds_non_finite(obj):
        # a record with no digest: orjson cannot parse it (canonical_bytes)
        return NonFiniteRecord(obj)
    return obj


def _classify(line: bytes) -> tuple[str, Any]:
    """Parse one complete line (without its ``\\n``): ("record", dict) or (kind, detail)."""
    try:
        obj = load_record(line)
    except RecordTooLarge as exc:
        return TOO_LARGE, str(exc)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return INVALID_UTF8, "the line is not valid UTF-8"
        return NOT_JSON, f"not JSON ({str(exc).split(':')[0]})"
    if not isinstance(obj, dict):
        return NOT_OBJECT, f"a JSON {type(obj).__name__}, not an object"
    seq = obj.get("seq")
    if not _is_int(seq) or seq < 0:
        return NO_SEQ, "no non-negative integer seq"
    if not line.startswith(b'{"seq":%d,' % seq):   # (seq_given_twice's first test, inline)
        first = seq_given_twice(line, seq)
        if first is not None:
            return NO_SEQ, f"seq given twice: {first} first, {seq} last"
    return "record", obj


def _first_line(dir_fd: int, name: str) -> bytes | None:
    """The first line (without its ``\\n``) of the regular file ``name`` in
    the directory open as ``dir_fd``, as :meth:`_File.line_at` gives line 0:
    None when no newline ends it within the size the file has at open.
    ``OSError`` for a link, a file that is not regular or cannot be read."""
    # (O_NONBLOCK kept: pread of a regular file never waits, and open_owned
    # then makes no fcntl calls to clear it)
    with open_owned(name, os.O_RDONLY | O_NONBLOCK, dir_fd=dir_fd) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        head = b""
        want = 4096
        while len(head) < size:
            got = os.pread(fd, min(want, size - len(head)), len(head))
            if not got:
                return None
            nl = got.find(b"\n")
            if nl >= 0:
                return head + got[:nl]
            head += got
            want = min(want * 4, 1 << 24)
        return None


def header_record(line: bytes | None, session_id: str) -> dict[str, Any]:
    """The session header of transcript ``session_id`` whose first line is
    ``line`` (without its ``\\n``; None when the file has no complete first
    line), or ``SessionRefused`` (``refused_header``) when it holds none:
    the record ``{"seq": 0, "type": "session", "format": 1, "session_id"}``
    of this session."""
    if line is None:
        raise NoHeaderYet(f"session {session_id}: no complete header record",
                          "refused_header")
    kind, obj = _classify(line)
    if (kind != "record" or obj.get("seq") != 0 or obj.get("type") != "session"
            or not _is_int(obj.get("format")) or obj.get("format") != FORMAT_VERSION):
        raise SessionRefused(
            f"session {session_id}: line 1 is not a format-{FORMAT_VERSION} session "
            "header with seq 0", "refused_header")
    if obj.get("session_id") != session_id:
        raise SessionRefused(
            f"session {session_id}: the header names another session id",
            "refused_header")
    header: dict[str, Any] = obj
    return header


# what orjson says of a line's first bytes that does not say what it says of
# the whole line: the first bytes end there (end of data), all blank (empty),
# or what load_record does not take as not JSON (infinity, depth, memory,
# UTF-8: decided otherwise)
_UNDECIDED_BY_HEAD = ("unexpected end of data", "input data is empty", "Input is a zero-length",
                      "number is infinity", "depth limit exceeded", "Not enough memory",
                      "str is not valid UTF-8")
_HEAD_PARSE = 1 << 16   # the first bytes of a huge line that may decide it


def classify_huge(fd: int, start: int, length: int) -> tuple[str, Any] | None:
    """:func:`_classify` of the complete line of ``length`` bytes at byte
    ``start`` of the file ``fd``, when its first 64 KiB decide it, without
    holding it whole: a line that does not begin ``{"seq":N,`` whose first
    bytes are no JSON value (``xxx...``, NUL bytes, the middle of a record)
    is not JSON or, when any of its bytes is not UTF-8, invalid_utf8 --
    what parsing it whole says, found reading it a piece at a time (a read
    next to a 300 MiB such line held it whole: 947 MB).  orjson checks the
    whole input's UTF-8 first, then parses from the first byte on: an error
    it finds well inside the first bytes (not their end, not one of
    :data:`_UNDECIDED_BY_HEAD`) is the error of the whole line.  None when
    the first bytes do not decide (they parse, or they begin ``{"seq":N,``):
    the caller parses the line whole."""
    import codecs

    head = os.pread(fd, min(length, _HEAD_PARSE), start)
    if fast_seq(head[:64]) is not None:
        return None
    try:
        text, n = codecs.utf_8_decode(head, "strict", False)
    except UnicodeDecodeError:
        return INVALID_UTF8, "the line is not valid UTF-8"
    try:
        orjson.loads(head[:n])
        return None
    except orjson.JSONDecodeError as exc:
        why = str(exc).split(":")[0]
        if why.startswith(_UNDECIDED_BY_HEAD) or exc.pos + 64 >= len(text):
            return None
    except MemoryError:
        return None
    from .mdnames import utf8_problem  # (the one UTF-8 rule; a cold path)

    shrank = False

    def pieces() -> Iterator[bytes]:
        nonlocal shrank
        pos, end = start, start + length
        while pos < end:
            piece = os.pread(fd, min(_CHUNK, end - pos), pos)
            if not piece:
                shrank = True
                return
            yield piece
            pos += len(piece)

    bad = utf8_problem(pieces())
    if shrank:
        return None     # (the file shrank: the caller reads what is there)
    if bad is not None:
        return INVALID_UTF8, "the line is not valid UTF-8"
    return NOT_JSON, f"not JSON ({why})"


# a record's first bytes as fast_seq reads them (at most 50 digits: a longer
# number is no seq a record can have, and int() refuses more than 4,300
# digits, which made such a line an internal error)
_SEQ_PREFIX = rb'\{"seq":(0|[1-9][0-9]{0,49})[,}]'
_FAST_SEQ = lazy_compile(_SEQ_PREFIX)
# ... the seq of each line, after its newline, of a block of lines that begins
# so (a literal first: 4x faster than a multiline ^ over 64 KiB)
_WINDOW_SEQS = lazy_compile(rb'\n\{"seq":(0|[1-9][0-9]{0,49})[,}]')


def seq_given_twice(line: bytes, seq: int) -> int | None:
    """The seq a record's first bytes give (``{"seq":N,``, as :func:`fast_seq`
    reads it) when its parse kept another: the key written twice, and
    orjson keeps the last.  The session search places lines by their first
    bytes, the parse by the value it keeps, so such a line is no record to
    any reader but a corrupt line (``no_seq``): the range reads, the engine
    and both audits judge its spans alike.  None for any other line (one
    that begins ``{"seq":SEQ,`` is decided without the expression; ``seq``
    is the parse's, an integer)."""
    if line.startswith(b'{"seq":%d,' % seq):
        return None
    fast = fast_seq(line[:64])
    return fast if fast is not None and fast != seq else None


def record_seq(obj: Any, line: bytes) -> int | None:
    """The seq of a parsed line (``obj``, from ``line``) that is a record to
    every reader: a dict with a non-negative integer seq, its first bytes
    naming no other (:func:`seq_given_twice`); None for a corrupt line
    (``no_seq``).  The readers that skip corrupt lines rather than report
    them (``grep``, ``usage``) take records by it."""
    seq = obj.get("seq") if isinstance(obj, dict) else None
    if type(seq) is not int or seq < 0 or seq_given_twice(line, seq) is not None:
        return None
    return seq


def _classify_capped(line: bytes | HugeLine) -> tuple[str, Any]:
    """:func:`_classify`, a :class:`HugeLine` judged by its first and last
    bytes (:func:`huge_seq`): a record ``{"seq": N}`` or a corrupt line."""
    if isinstance(line, HugeLine):
        seq = line.seq()
        if seq is None:
            return NOT_JSON, f"a line of {line.length} bytes that does not end a record"
        return "record", {"seq": seq}
    return _classify(line)


def fast_seq(line: bytes) -> int | None:
    """The seq of a line shaped ``{"seq":N,...`` or ``{"seq":N}`` (as the core
    writer and orjson write it), read without parsing the rest; None for any
    other shape, and for a number JSON does not allow (a leading zero), so
    that such a line is parsed, and found corrupt, by the caller.  Used to
    step over lines: the session search and the audit's transcript scan."""
    m = _FAST_SEQ.match(line)
    return int(m.group(1)) if m else None


HUGE_LINE = 1 << 20   # a longer line that begins {"seq":N, is placed without being parsed


def huge_seq(length: int, head: bytes, tail: bytes) -> int | None:
    """The seq a line of ``length`` bytes (without its newline) counts as
    for placing the corrupt lines after it, from its first bytes ``head``
    and its last bytes ``tail`` (up to 64 of each) alone: N for a line over
    :data:`HUGE_LINE` bytes that begins ``{"seq":N,`` and whose last
    non-blank byte is ``}``, whether or not it parses (docs/FORMAT.md,
    "Torn tail and corruption": a huge record is not read whole to be
    placed, issue 16.5).  None for any other line: a shorter one is
    parsed, and a huge one that does not end as an object does is a
    corrupt line (the first half of a record split in two).  The one test
    of the range reads, the engine and both audits."""
    if length <= HUGE_LINE:
        return None
    seq = fast_seq(head)
    # (a seq beyond 64 bits is a float to every parser, no seq: the line is
    # corrupt, no_seq, as a short one is; before 2026-12-08 it was placed at
    # its number, and the next record was a false seq_regression)
    if seq is None or seq >= 1 << 64 or not _ends_object(tail):
        return None
    return seq


def _ends_object(tail: bytes) -> bool:
    """Whether a line's last bytes end as a JSON object does (``}``, then blanks)."""
    return tail.rstrip(b" \t\r").endswith(b"}")


def search_lands(data: bytes, target: int,
                 probes: dict[int, tuple[int, int | None, int] | None] | None = None) -> int | None:
    """Where the one-reference search (:meth:`_File.seek_span`) for seq
    ``target`` lands in a transcript whose bytes are ``data``, decided in
    memory as the search decides: its binary search over byte offsets,
    then the lines from the window it ends on, stepped over while their
    seq (:func:`fast_seq` of the first 64 bytes) is below the target; the
    offset of the first line whose seq is not.  None when the search would
    have to parse a line to go on (one it looks at that does not begin
    ``{"seq":N,``, a huge one, the torn tail): its answer is then not
    decided here.  Where the line at that offset is the record ``target``
    (it parses, its seq is ``target``), the search's read reads it.
    ``probes``: the lines probed, by offset, kept between the searches of
    one transcript.  The audit's in-memory pass reads each span from here,
    so that in a transcript whose records repeat or go back somewhere it
    reads it where the one-reference read does (docs/FORMAT.md)."""
    if target <= 0:
        return 0
    if probes is None:
        probes = {}
    lo, hi = 0, len(data)
    while hi - lo > _LINEAR_BELOW:
        mid = (lo + hi) // 2
        if mid in probes:
            probe = probes[mid]
        else:
            probe = probes[mid] = _probe_in(data, mid)
        if probe is not None and probe[0] < hi:
            if probe[1] is None:
                return None
            if probe[1] < target:
                lo = probe[2]
                continue
        hi = mid
    if lo == 0:       # the first line, which no newline precedes
        probe = _probe_in(data, 0)
        if probe is None or probe[1] is None or probe[2] - 1 > HUGE_LINE:
            return None
        if probe[1] >= target:
            return 0
        lo = probe[2]
    # the lines from lo: each begins {"seq":N, with N below the target (N of
    # at most 50 digits, as fast_seq finds it in 64 bytes), none huge
    for m in _LINE_SEQS.finditer(data, lo - 1):
        start = m.start() + 1
        seq = m.group(1)
        if seq is None or start - lo > HUGE_LINE:
            return None
        if int(seq) >= target:
            return start if data.find(b"\n", start) >= 0 else None
    return None


_LINE_SEQS = lazy_compile(rb'\n(?:\{"seq":(0|[1-9][0-9]{0,49})[,}])?')


def _probe_in(data: bytes, pos: int) -> tuple[int, int | None, int] | None:
    """:meth:`_File.probe_seq` of bytes in memory: the first complete line
    starting at or after ``pos``, as (start, :func:`fast_seq` of its first
    64 bytes, the offset after its newline); None when there is none."""
    if pos <= 0:
        start = 0
    else:
        nl = data.find(b"\n", pos - 1)
        if nl < 0:
            return None
        start = nl + 1
    end = data.find(b"\n", start)
    if end < 0:
        return None
    return start, fast_seq(data[start:min(start + 64, end)]), end + 1


# a record's first bytes as the core writer writes them, {"seq":N,"type":"T",
# for any run of digits: the one rule of which lines are events
# (:func:`not_an_event`); group 1 is the type
_TYPED = lazy_compile(rb'\{"seq":(?:0|[1-9][0-9]*),"type":"([^"\\]*)"')


# The listing's own form of :data:`_TYPED`: a seq of at most 19 digits,
# which the listing of ``sessions`` takes without parsing the line (group 1
# the type).  Below 10^19 a seq is an integer to every parser; a line with
# a longer run is parsed, and is no record when its seq is beyond 64 bits,
# which orjson reads as a float: no seq.  (Before 2026-12-07 the listing
# counted such a line a message; a first fix bounded :data:`_TYPED` itself,
# which changed which lines the event scans take for events; a second
# checked the digits in a Python function per line, 5% of the listing: a
# code review.)
_LISTED_TYPED = lazy_compile(rb'\{"seq":(?:0|[1-9][0-9]{0,18}),"type":"([^"\\]*)"')


# the run of digits a line's first bytes give its seq, {"seq":DIGITS
_HEAD_DIGITS = lazy_compile(rb'\{"seq":([0-9]+)')


def _seq_beyond_64_bits(head: bytes) -> bool:
    """Whether a line whose first bytes (up to 64) are ``head`` begins
    ``{"seq":N`` with N a number beyond 64 bits: every reader parses it as a
    float, no seq, so the line is no record (``no_seq``).  A run of digits
    that reaches the end of ``head`` (57 or more) is one.  The listing of
    ``sessions`` judges a huge line by it, as it parses a short one."""
    m = _HEAD_DIGITS.match(head)
    if m is None:
        return False
    return m.end() >= len(head) or int(m.group(1)) >= 1 << 64


class HugeLine:
    """A line longer than :data:`HUGE_LINE`, not held whole: its length
    (without the newline), its first and last 64 bytes, and whether it holds
    the bytes ``"event"`` (for :meth:`SessionStore.info`'s listing)."""

    __slots__ = ("length", "head", "tail", "has_event")

    def __init__(self, length: int, head: bytes, tail: bytes, has_event: bool) -> None:
        self.length, self.head, self.tail, self.has_event = length, head, tail, has_event

    def seq(self) -> int | None:
        """The seq it counts as (:func:`huge_seq`), or None: a corrupt line."""
        return huge_seq(self.length, self.head, self.tail)

    def is_object(self) -> bool:
        """Whether it begins with ``{`` and ends with ``}`` (blanks aside)."""
        return (self.head.lstrip(b" \t\r").startswith(b"{")
                and self.tail.rstrip(b" \t\r").endswith(b"}"))


def not_an_event(head: bytes) -> bool:
    """Whether a line whose first bytes are ``head`` is, by its prefix, a
    record of another type than ``event``: ``{"seq":N,"type":"message",...``
    as the core writer and orjson write it.  Such a line is not parsed by the
    event scans, however large it is (issue 16.5: a 200 MiB tool message
    after a range was parsed for its events).  The prefix is trusted as
    :func:`fast_seq` trusts it; any other shape is parsed."""
    m = _TYPED.match(head)
    return m is not None and m.group(1) != b"event"


def event_line(line: bytes) -> bool:
    """Whether the event scans read ``line`` (a complete line) for an event:
    it holds the bytes ``"event"`` and its first 64 bytes do not begin with
    a prefix naming another type (:func:`not_an_event`; 64 bytes are what
    the scans look at of a line they may skip).  This is the one rule for
    every reader (``usage``, ``forget``'s preview and ``redact``'s impact
    report count and list events by it too): a record
    that parses as an event from any other line -- its type and the name of
    its ``event`` member written with JSON escapes (``"\\u0065vent"``), or a
    ``{"seq":N,"type":"message",...`` line that repeats ``"type"`` later --
    is not applied (an undo, redo or clear there hides nothing) by range
    reads, the evaluation engine, the audit or ``grep``, as lecode, reading
    through this module, does not apply it; ``validate --deep`` reports it
    (``session.ignored_event``).  lecode's writer never produces such a line."""
    return _EVENT_MARK in line and not not_an_event(line[:64])


def _rare_offset(mark: bytes) -> int:
    """Offset in ``mark`` of its rarest byte by :data:`_COMMON_BYTES` (a byte
    not listed is rarer than any listed)."""
    def rank(i: int) -> int:
        r = _COMMON_BYTES.find(mark[i:i + 1])
        return len(_COMMON_BYTES) if r < 0 else r
    return max(range(len(mark)), key=rank)


_MEMMEM: list[Any] = []     # [the C library's memmem through ctypes, or None], once looked up


def _libc_memmem() -> Any:
    """The C library's ``memmem`` (glibc, musl, the BSDs and macOS have it),
    through :mod:`ctypes`, or None where there is none (Windows) or ctypes
    cannot load the process's own symbols.  Looked up once, on the first
    large buffer: ctypes is not imported by commands that never scan one.
    ``memmem`` of a short needle compares two bytes at a time and skips by
    the needle's length, two to three times ``bytes.find`` on prose, whose
    skip stops at every byte of the needle (``e``, ``n``, ``t``)."""
    if not _MEMMEM:
        found = None
        try:
            import ctypes
            fn = ctypes.CDLL(None).memmem
            fn.restype = ctypes.c_void_p
            fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
            found = fn
        except (ImportError, OSError, AttributeError, TypeError):
            found = None
        _MEMMEM.append(found)
    return _MEMMEM[0]


def finder_in(buf: bytes | bytearray) -> Callable[[bytes, int, int], int]:
    """``buf.find(needle, i, end)`` for ``i`` and ``end`` within ``buf``: by
    the C library's ``memmem`` (:func:`_libc_memmem`) when ``buf`` holds at
    least :data:`_MEMMEM_FROM` bytes and there is one, else ``buf.find``
    itself.  ``buf`` must not be resized while the function is kept (a
    ``bytearray`` cannot be while ctypes views it; ``bytes`` never is)."""
    fn = _libc_memmem() if buf and len(buf) >= _MEMMEM_FROM else None
    if fn is None:
        return buf.find
    import ctypes
    if isinstance(buf, bytearray):
        pin: Any = ctypes.c_char.from_buffer(buf)
        base = ctypes.addressof(pin)
    else:
        pin = ctypes.c_char_p(buf)        # (points into the bytes object)
        base = ctypes.cast(pin, ctypes.c_void_p).value or 0
    size = len(buf)
    slow = buf.find

    def find(needle: bytes, i: int, end: int) -> int:
        if end > size:
            end = size
        if i < 0 or end < 0 or not needle:    # (counted from the end, as bytes.find does)
            return slow(needle, i, end)
        if end - i < len(needle):
            return -1
        at = fn(base + i, end - i, needle, len(needle))
        return -1 if at is None else int(at) - base
    find.pin = pin      # type: ignore[attr-defined]  # (keeps base valid as long as find)
    return find


class MarkFinder:
    """Finds every occurrence of ``mark`` in a buffer, block after block:
    ``memchr`` (``find`` of one byte) for the mark's rarest byte, each hit
    checked in place, while such hits are rare; in a block where they are
    not (prose full of that byte), a search for the whole mark for the
    rest of that block and the next :data:`_RARE_PAUSE` blocks: by
    :func:`finder_in` when the finder was given the buffer it searches
    (``buf``; the C library's ``memmem`` on a large one), else
    ``bytes.find``.  All of them find every occurrence; on a buffer without
    the rare byte (the ``v`` of ``"event"``) the first runs at the speed of
    ``memchr``."""

    __slots__ = ("mark", "k", "rare", "block_no", "rare_from", "budget", "whole")

    def __init__(self, mark: bytes, buf: bytes | bytearray | None = None) -> None:
        self.mark = mark
        self.k = _rare_offset(mark)
        self.rare = mark[self.k:self.k + 1]
        self.block_no = 0
        self.rare_from = 0     # the first block searched by the rare byte again
        self.budget = -1       # misses left in this block (-1: a search for the whole mark)
        # the search for the whole mark in buf (None: bytes.find in the buffer given)
        self.whole = None if buf is None else finder_in(buf)

    def new_block(self, n: int) -> None:
        """Start a block of ``n`` bytes (its miss budget: 16 plus one per 4 KiB)."""
        self.block_no += 1
        self.budget = _RARE_MISSES + (n >> 12) if self.block_no >= self.rare_from else -1

    def find(self, buf: bytes | bytearray, i: int, end: int) -> int:
        """Offset of the first occurrence of the mark in ``buf[i:end]`` (wholly
        inside it), or -1.  ``buf`` is the buffer given at construction, if one was."""
        mark = self.mark
        if self.budget >= 0:
            k = self.k
            find, startswith, rare = buf.find, buf.startswith, self.rare
            j = find(rare, i + k, end)
            while j >= 0:
                if startswith(mark, j - k, end):
                    return j - k
                self.budget -= 1
                if self.budget < 0:
                    self.rare_from = self.block_no + _RARE_PAUSE
                    break
                j = find(rare, j + 1, end)
            else:
                return -1
        if self.whole is not None:
            return self.whole(mark, i, end)
        return buf.find(mark, i, end)


def _preadinto(fd: int, into: memoryview, offset: int) -> int:
    """``os.preadv`` of one buffer (``os.pread`` and a copy where it is missing)."""
    if _HAVE_PREADV:
        return os.preadv(fd, [into], offset)
    data = os.pread(fd, len(into), offset)
    into[:len(data)] = data
    return len(data)


_HAVE_PREADV = hasattr(os, "preadv")


_PARALLEL_SCAN = 32 << 20  # marked_lines: this much left to read is searched by two threads,
_AHEAD_BLOCK = 2 << 20     # in blocks of this size (three buffers)


def _scan_blocks(fd: int, pos: int, size: int, mark: bytes
                 ) -> Iterator[tuple[bytearray, memoryview, int, int, int, Callable[[int], int]]]:
    """The blocks of ``fd`` from ``pos`` to ``size`` for
    :meth:`_File.marked_lines`, in order: ``(buf, view, base, n, last,
    next_mark)``: the block is ``buf[:n]``, read from offset ``base``; ``last``
    its last newline (-1: none); ``next_mark(i)`` the offset of the first
    ``mark`` wholly inside ``buf[i:last]``, or -1.  A block is valid until the
    next one is asked for.

    With :data:`_PARALLEL_SCAN` bytes or more to read and two CPUs or more,
    two threads read and search the blocks ahead (:func:`_searched_block`):
    ``os.preadv`` and the C library's ``memmem`` run without Python's lock,
    so the search of a large transcript of prose, where ``memmem`` is what
    costs, goes at about twice the speed of one thread.  Otherwise one
    buffer, read and searched as the caller goes."""
    if size - pos >= _PARALLEL_SCAN and (os.cpu_count() or 1) >= 2 \
            and _libc_memmem() is not None:
        yield from _scan_blocks_ahead(fd, pos, size, mark)
        return
    yield from _scan_blocks_one(fd, pos, size, mark)


def _scan_blocks_one(fd: int, pos: int, size: int, mark: bytes
                     ) -> Iterator[tuple[bytearray, memoryview, int, int, int, Callable[[int], int]]]:
    """:func:`_scan_blocks` with one buffer, read and searched as the caller goes."""
    buf = bytearray(min(_SCAN_BLOCK, size - pos))
    finder = MarkFinder(mark, buf)
    view = memoryview(buf)
    off = pos
    while off < size:
        n, last = _read_block(fd, buf, view, finder, off, min(len(buf), size - off))
        if n <= 0:
            return
        yield buf, view, off, n, last, functools.partial(finder.find, buf, end=last)
        off += n


def _read_block(fd: int, buf: bytearray, view: memoryview, finder: MarkFinder, off: int,
                want: int) -> tuple[int, int]:
    """Read ``want`` bytes at ``off`` into ``buf`` as a new block of
    ``finder``'s: (bytes read, the offset of the block's last newline or
    -1)."""
    n = _preadinto(fd, view[:want], off)
    if n <= 0:
        return n, -1
    finder.new_block(n)
    return n, buf.rfind(b"\n", 0, n)


def _searched_block(fd: int, slot: tuple[bytearray, memoryview, MarkFinder], off: int,
                    want: int) -> tuple[int, int, list[int]]:
    """Read ``want`` bytes at ``off`` into the slot's buffer and find every
    mark before its last newline: (bytes read, that newline or -1, the
    marks' offsets, ascending).  Run by a worker thread."""
    buf, view, finder = slot
    n, last = _read_block(fd, buf, view, finder, off, want)
    hits: list[int] = []
    j = finder.find(buf, 0, last) if last > 0 else -1
    while j >= 0:
        hits.append(j)
        j = finder.find(buf, j + 1, last)
    return n, last, hits


def _scan_blocks_ahead(fd: int, pos: int, size: int, mark: bytes
                       ) -> Iterator[tuple[bytearray, memoryview, int, int, int, Callable[[int], int]]]:
    """:func:`_scan_blocks` by two worker threads, each reading and searching
    a block ahead into a buffer of its own (three buffers: two being filled
    while the caller reads the third).  A read shorter than asked (the file
    shrank) ends the blocks read ahead: the rest is read as one thread
    reads it, from where that read ended."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor, wait

    slots = []
    block = _AHEAD_BLOCK
    for _ in range(3):
        buf = bytearray(block)
        slots.append((buf, memoryview(buf), MarkFinder(mark, buf)))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="memctl-scan") as ex:
        ahead: deque[tuple[int, int, int, Any]] = deque()   # (slot, offset, bytes asked, future)
        off = pos

        def submit(k: int) -> None:
            nonlocal off
            want = min(block, size - off)
            ahead.append((k, off, want, ex.submit(_searched_block, fd, slots[k], off, want)))
            off += want

        for k in range(2):
            if off < size:
                submit(k)
        free = 2
        while ahead:
            k, base, want, fut = ahead.popleft()
            n, last, hits = fut.result()
            if n <= 0:
                return
            block_item = (slots[k][0], slots[k][1], base, n, last,
                          _next_in(hits, last, len(mark)))
            if n < want:      # the file shrank: nothing read ahead is where it should be
                wait([later for *_rest, later in ahead if not later.cancel()])
                yield block_item
                if base + n < size:
                    yield from _scan_blocks_one(fd, base + n, size, mark)
                return
            if off < size:
                submit(free)
            free = k
            yield block_item


def _next_in(hits: list[int], last: int, width: int) -> Callable[[int], int]:
    """``next_mark`` of a block whose marks were found ahead (``hits``)."""
    from bisect import bisect_left

    def next_mark(i: int) -> int:
        k = bisect_left(hits, i)
        if k < len(hits) and hits[k] + width <= last:
            return hits[k]
        return -1

    return next_mark


class _File:
    """An open transcript, bounded by its size at ``fstat`` time."""

    def __init__(self, fd: int | BinaryIO, session_id: str, path: str,
                 size: int | None = None) -> None:
        """``fd``: a descriptor, or a file object already made from one (owned
        from here: see :meth:`SessionStore._open`)."""
        st = os.fstat(fd if isinstance(fd, int) else fd.fileno())
        if isinstance(fd, int) and stat.S_ISDIR(st.st_mode):
            # what open(fd) would raise, naming the file rather than the
            # descriptor's number (the caller still owns fd here)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path or None)
        self.session_id = session_id
        self.path = path
        self.st = st
        self.size = st.st_size if size is None else size   # (a caller may bound it lower)
        self.fh = (open(fd, "rb", buffering=_BUFFER, closefd=True)  # noqa: SIM115 - closed by close()
                   if isinstance(fd, int) else fd)
        # (start, offset of the next newline) of long stretches without one,
        # found by _newline_from: the binary search never rescans a huge line
        self._no_newline: list[tuple[int, int]] = []
        self._too_large: dict[int, str] = {}   # line start -> why, for lines too large to parse
        # line start -> (kind, detail), for huge corrupt lines judged by classify_huge
        self._huge: dict[int, tuple[str, Any]] = {}
        self._torn: int | None = None           # torn_start(), once known

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lines

    def line_at(self, pos: int) -> tuple[int, bytes | None]:
        """The first line starting at or after byte ``pos``: (start, bytes
        without ``\\n``), or (start, None) when there is no complete line."""
        if pos <= 0:
            start = 0
            self.fh.seek(0)
        else:
            self.fh.seek(pos - 1)
            if self.fh.read(1) == b"\n":
                start = pos
            else:
                self.fh.readline()
                start = self.fh.tell()
        if start >= self.size:
            return start, None
        raw = self.fh.readline()
        end = start + len(raw)
        if not raw.endswith(b"\n") or end > self.size:
            return start, None
        return start, raw[:-1]

    def classify(self, off: int, line: bytes) -> tuple[str, Any]:
        """:func:`_classify` of the line at ``off``, remembering a line too
        large to parse: the one-ref reads that follow a span sweep, each
        reaching the same huge record, do not parse it again (issue 16.5)."""
        known = self._too_large.get(off)
        if known is not None:
            return TOO_LARGE, known
        kind, obj = _classify(line)
        if kind == TOO_LARGE:
            self._too_large[off] = obj
        return kind, obj

    def huge_verdict(self, start: int, nl: int) -> tuple[str, Any] | None:
        """:func:`classify_huge` of the complete line from ``start`` to its
        newline at ``nl`` when it is longer than :data:`HUGE_LINE`
        (remembered: a huge line is read once); None for a shorter line, and
        for one its first bytes do not decide (the caller reads it)."""
        if nl - start <= HUGE_LINE:
            return None
        known = self._huge.get(start)
        if known is None:
            known = classify_huge(self.fh.fileno(), start, nl - start)
            if known is not None:
                self._huge[start] = known
        return known

    def _newline_from(self, pos: int) -> int | None:
        """Offset of the first ``\\n`` at or after ``pos`` (within the size
        bound), scanned a chunk at a time (the first one small, as one line
        usually is; then doubling up to 1 MiB): a 200 MiB line costs no
        200 MiB object (issue 16.5).  None when there is none."""
        first = pos
        step = _FIRST_READ
        self.fh.seek(pos)
        while pos < self.size:
            for lo, nl in self._no_newline:   # a stretch scanned before: not again
                if lo <= pos <= nl:
                    if nl - first > _CHUNK:
                        self._no_newline.append((first, nl))
                    return nl
            chunk = self.fh.read(min(step, self.size - pos))
            if not chunk:
                return None
            i = chunk.find(b"\n")
            if i >= 0:
                if pos + i - first > _CHUNK:
                    self._no_newline.append((first, pos + i))
                return pos + i
            pos += len(chunk)
            step = min(step * 2, _CHUNK)
        return None

    def probe_seq(self, pos: int) -> tuple[int, int | None, int] | None:
        """For the search: the first complete line starting at or after
        ``pos`` as (start, its seq read from the line's first bytes with
        :func:`fast_seq`, or None, the offset after its ``\\n``); None when
        there is no complete line.  Neither the skipped part nor the line is
        read into memory whole."""
        if pos <= 0:
            start = 0
        else:
            nl = self._newline_from(pos - 1)
            if nl is None:
                return None
            start = nl + 1
        if start >= self.size:
            return None
        self.fh.seek(start)
        head = self.fh.read(min(64, self.size - start))
        nl = head.find(b"\n")
        end = start + nl if nl >= 0 else self._newline_from(start + len(head))
        if end is None:
            return None
        return start, fast_seq(head[:nl] if nl >= 0 else head), end + 1

    def torn_start(self) -> int:
        """Where the torn tail begins (the byte after the last newline before
        the size bound), or the size when the file ends in a newline; found
        reading backwards (:func:`line_start`), so a huge torn tail is never
        held."""
        if self._torn is None:
            size, fd = self.size, self.fh.fileno()
            ends = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
            self._torn = size if ends else line_start(fd, size)
        return self._torn

    def lines(self, pos: int) -> Iterator[tuple[int, bytes | None]]:
        """Complete lines from byte ``pos`` (a line start) to the size bound:
        (start, bytes without ``\\n``); the torn tail last as (start, None),
        not read (a crash in the middle of a huge record leaves a huge one)."""
        size = self.size
        torn = self.torn_start()
        self.fh.seek(pos)
        readline = self.fh.readline
        while pos < torn:
            raw = readline()
            end = pos + len(raw)
            if end > size or not raw.endswith(b"\n"):
                break
            yield pos, raw[:-1]
            pos = end
        if pos < size:
            yield pos, None

    def judged_lines(self, pos: int
                     ) -> Iterator[tuple[int, bytes | None, tuple[str, Any] | None]]:
        """:meth:`lines` as (start, bytes, None), except a line longer than
        :data:`HUGE_LINE` that :meth:`huge_verdict` decides: (start, None,
        its verdict), not read whole (a range read of a huge corrupt line
        held it whole, 1.2 GB for 300 MiB, to say it is corrupt).  The torn
        tail last as (start, None, None)."""
        size = self.size
        torn = self.torn_start()
        self.fh.seek(pos)
        readline = self.fh.readline
        while pos < torn:
            raw = readline(HUGE_LINE + 1)
            if len(raw) > HUGE_LINE and not raw.endswith(b"\n"):
                nl = self._newline_from(pos + len(raw))
                verdict = self.huge_verdict(pos, nl) if nl is not None else None
                if nl is not None and verdict is not None:
                    yield pos, None, verdict
                    pos = nl + 1
                    self.fh.seek(pos)
                    continue
                self.fh.seek(pos + len(raw))   # (_newline_from moved it)
                raw += readline()
            end = pos + len(raw)
            if end > size or not raw.endswith(b"\n"):
                break
            yield pos, raw[:-1], None
            pos = end
        if pos < size:
            yield pos, None, None

    def capped_lines(self, pos: int) -> Iterator[tuple[int, bytes | HugeLine | None]]:
        """:meth:`lines`, each line longer than :data:`HUGE_LINE` given as a
        :class:`HugeLine`, read a block at a time and never held whole."""
        size = self.size
        torn = self.torn_start()
        self.fh.seek(pos)
        readline = self.fh.readline
        while pos < torn:
            raw = readline(HUGE_LINE + 1)
            item: bytes | HugeLine
            if len(raw) > HUGE_LINE and not raw.endswith(b"\n"):
                head, n, ev, last = raw[:64], len(raw), _EVENT_MARK in raw, raw[-72:]
                while not last.endswith(b"\n"):
                    chunk = readline(_CHUNK)
                    if not chunk:
                        break
                    ev = ev or _EVENT_MARK in last[-8:] + chunk[:8] or _EVENT_MARK in chunk
                    n += len(chunk)
                    last = (last + chunk)[-72:]
                end = pos + n
                if end > size or not last.endswith(b"\n"):
                    break
                item = HugeLine(n - 1, head, last[:-1][-64:], ev)
            else:
                end = pos + len(raw)
                if end > size or not raw.endswith(b"\n"):
                    break
                item = raw[:-1]
            yield pos, item
            pos = end
        if pos < size:
            yield pos, None

    def marked_lines(self, pos: int, mark: bytes = _EVENT_MARK,
                     skip: Callable[[bytes], bool] | None = None) -> Iterator[bytes]:
        """The complete lines from byte ``pos`` (a line start) to the size
        bound that contain ``mark``, without their ``\\n``: the raw bytes are
        read in large blocks (``os.preadv`` into one reused buffer, no
        allocation per block) and searched in place, so the lines between
        are never split or iterated in Python.  A torn tail (no final
        ``\\n``) is never yielded.  ``pread`` rather than ``mmap``: a file
        truncated under a mapping would raise SIGBUS.

        The marks are found by :class:`MarkFinder` (``memchr`` of the mark's
        rarest byte while that is rare, else ``bytes.find``).

        ``skip(head)``, given a line's first bytes (up to 64), says a line is
        not wanted whatever it holds.  A line longer than a block is never
        joined in memory unless it is wanted: without ``mark``, or skipped
        by its head, it costs the blocks it spans, one at a time (issue
        16.5); one that is wanted is read again whole from its start."""
        fd = self.fh.fileno()
        size = self.size
        if pos >= size:
            return
        keep = len(mark) - 1
        # a line that runs past a block: its start, first bytes, last bytes
        # (for a mark across blocks) and whether it holds the mark
        carry_start = -1
        carry_head = carry_tail = b""
        carry_mark = False
        for buf, view, base, n, last, next_mark in _scan_blocks(fd, pos, size, mark):
            find, rfind = buf.find, buf.rfind
            if last < 0:
                # (bounded by n: a short read leaves the rest of the buffer
                # holding an earlier block)
                if carry_start < 0:
                    carry_start, carry_head, carry_tail, carry_mark = (
                        base, bytes(view[:min(n, 64)]), b"", False)
                elif len(carry_head) < 64:
                    carry_head = (carry_head + bytes(view[:min(n, 64)]))[:64]
                carry_mark = (carry_mark or find(mark, 0, n) >= 0
                              or mark in carry_tail + bytes(view[:min(n, keep)]))
                carry_tail = (carry_tail + bytes(view[max(0, n - keep):n]))[-keep:] if keep else b""
                continue
            if carry_start >= 0:
                head_end = find(b"\n", 0, n)
                if len(carry_head) < 64:
                    carry_head = (carry_head + bytes(view[:min(head_end, 64)]))[:64]
                if ((carry_mark or find(mark, 0, head_end) >= 0
                     or mark in carry_tail + bytes(view[:min(keep, head_end)]))
                        and not (skip is not None and skip(carry_head))):
                    line_end = base + head_end
                    yield os.pread(fd, line_end - carry_start, carry_start)
                carry_start = -1
                i = head_end + 1
            else:
                i = 0
            while True:
                j = next_mark(i)
                if j < 0:
                    break
                start = rfind(b"\n", i, j) + 1
                start = start if start > i else i
                end = find(b"\n", j, last + 1)
                if skip is None or not skip(bytes(view[start:start + 64])):
                    yield bytes(view[start:end])
                i = end + 1
            if last + 1 < n:
                carry_start, carry_head = base + last + 1, bytes(view[last + 1:min(n, last + 65)])
                carry_mark = find(mark, last + 1, n) >= 0
                carry_tail = bytes(view[max(last + 1, n - keep):n]) if keep else b""

    def line_number(self, offset: int) -> int:
        """1-based number of the line starting at ``offset`` (counts newlines; error paths only)."""
        self.fh.seek(0)
        n = 0
        left = offset
        while left > 0:
            chunk = self.fh.read(min(_CHUNK, left))
            if not chunk:
                break
            n += chunk.count(b"\n")
            left -= len(chunk)
        return n + 1

    # -- header and search

    def header(self) -> dict[str, Any]:
        return header_record(self.line_at(0)[1], self.session_id)

    def seek_seq(self, target: int) -> int:
        """Byte offset of the first line whose seq is ``>= target`` (a line
        start; the size bound when there is none).  Binary search over byte
        offsets: seek to the middle, skip to the next line start, parse that
        line's seq.  When the record ``target`` itself is absent and bad lines
        precede the next record, the first of those bad lines is returned so
        that the forward reader reports it."""
        return self.seek_span(target)[0]

    def seek_span(self, target: int) -> tuple[int, bool]:
        """:meth:`seek_seq`, and whether the offset is the first of bad lines
        that no record follows (only bad lines, then a torn tail or the end):
        ``target`` is then past the last record, and whether those lines are
        in its way depends on where they sit (:func:`record_before`)."""
        if target <= 0:
            return 0, False
        lo, hi = 0, self.size   # lo is a line start; every line before lo has seq < target
        # the line that ends at lo: its start, and its seq when it is known
        # to be a record (parsed), None when it was taken for one by its
        # first bytes (see _past_end)
        prev: tuple[int, int | None] | None = None
        while hi - lo > _LINEAR_BELOW:
            mid = (lo + hi) // 2
            pos = mid
            found = None
            while True:
                probe = self.probe_seq(pos)
                if probe is None or probe[0] >= hi:
                    break
                if probe[1] is not None:   # the seq from the line's first bytes
                    found = (probe[2], probe[1], probe[0], None)
                    break
                if self.huge_verdict(probe[0], probe[2] - 1) is not None:
                    pos = probe[2]        # a huge corrupt line, not read whole
                    continue
                start, line = self.line_at(probe[0])
                if line is None:
                    break
                kind, obj = self.classify(start, line)
                if kind == "record":
                    found = (start + len(line) + 1, obj["seq"], start, obj["seq"])
                    break
                pos = start + len(line) + 1
            if found is not None and found[1] < target:
                lo = found[0]
                prev = found[2], found[3]
            else:
                hi = mid
        off, tail, before = self._scan_from(lo, target, prev, trust=True, check=lo > 0)
        if before is not None and before >= target:
            # The search was misled: a corrupt line whose first bytes name a
            # seq below the records before it ({"seq":3,"x" after record 9),
            # taken for a record, made it skip the records it wants.  Only a
            # corrupt transcript does this; it is read again from its start,
            # every line parsed (a huge one judged by huge_seq).
            off, tail, before = self._scan_from(0, target, None, trust=False, check=False)
        return off, tail

    def _scan_from(self, pos: int, target: int, prev: tuple[int, int | None] | None,
                   trust: bool, check: bool) -> tuple[int, bool, int | None]:
        """The last step of :meth:`seek_span`, from the line start ``pos``
        (``prev``: the line that ends there, as the search keeps it), and
        the seq of the record before the offset returned when that offset is
        not the record ``target`` itself (None when it is, or when not
        ``check``): a record before it at or past ``target`` says the search
        was misled.

        The lines from ``pos``, each probed first: a line whose seq its
        first bytes give is stepped over (below the target; only when
        ``trust``) or, when huge, judged by its first and last bytes
        (huge_seq) and returned unread (the forward reader decides on it
        once): a huge record is never read whole by the search (issue 16.5:
        21 s for a 200 MiB one)."""
        fd = self.fh.fileno()
        bad: int | None = None
        while pos < self.size:
            probe = self.probe_seq(pos)
            if probe is None or probe[0] != pos:
                break                 # the torn tail
            start, fast, after = probe
            seq: int
            if fast is not None and after - 1 - start > HUGE_LINE:
                if not _ends_object(os.pread(fd, 64, after - 65)):
                    # a corrupt line (the first half of a record split in two)
                    bad = start if bad is None else bad
                    pos = after
                    continue
                seq = fast            # a record for placing, whether or not it parses
            elif trust and fast is not None and bad is None and fast < target:
                prev = start, None
                pos = after
                continue
            else:
                verdict = self.huge_verdict(start, after - 1) if fast is None else None
                if verdict is not None:
                    kind, obj = verdict   # a huge corrupt line, not read whole
                else:
                    _start, line = self.line_at(start)
                    if line is None:
                        break
                    kind, obj = self.classify(start, line)
                if kind == TOO_LARGE and fast is not None:
                    seq = fast        # unusable, but its seq counts (as record_before's)
                elif kind != "record":
                    bad = start if bad is None else bad
                    pos = after
                    continue
                else:
                    seq = obj["seq"]
            pos = after
            if seq < target:
                bad = None
                prev = start, seq
                continue
            if seq == target:
                return start, False, None
            if not check:
                return (start if bad is None else bad), False, None
            if bad is None:           # a gap: the record before it
                known = prev[1] if prev is not None else None
                if known is None and prev is not None:
                    known = self._line_seq(prev[0], start - 1)
                return start, False, known if known is not None else record_before(fd, start)
            return bad, False, record_before(fd, bad)
        if bad is not None:
            return bad, True, record_before(fd, bad) if check else None
        return self._past_end(pos, prev)

    def _past_end(self, end: int, prev: tuple[int, int | None] | None
                  ) -> tuple[int, bool, int | None]:
        """The end of a search that met no record at or past its target and
        no bad line after the last line it stepped over: ``end`` (the torn
        tail or the size bound), unless the last lines it stepped over by
        their first bytes are corrupt -- a line whose prefix repeats a seq or
        goes back (``{"seq":5,"x"`` after record 5) is stepped over as if it
        were a record -- then the first of them, as bad lines that no record
        follows; and the last record's seq.  The last record is found reading
        backwards (:func:`record_placed_before`) only when the last line,
        ``prev`` (its start, and its seq when known), is not one: in a
        regular transcript that line alone is read (at most 1 MiB: a longer
        one is judged by its first and last bytes)."""
        if prev is not None:
            start, known = prev
            if known is None:
                known = self._line_seq(start, end - 1)
            if known is not None:
                return end, False, known
        found = record_placed_before(self.fh.fileno(), end)
        if found is None:
            return end, False, None
        if found[1] < end:
            return found[1], True, found[0]
        return end, False, found[0]

    def _line_seq(self, start: int, nl: int) -> int | None:
        """:func:`line_counts_as`, remembering a line too large to parse."""
        return line_counts_as(self.fh.fileno(), start, nl,
                              lambda line: self.classify(start, line))

    def capped_last_lines(self) -> tuple[list[tuple[int, bytes | HugeLine]], bool]:
        """:meth:`last_lines`, never holding more than about :data:`HUGE_LINE`
        bytes: when no complete line ends in the last 1 MiB, the last complete
        line alone, as a :class:`HugeLine` when it is longer than that (its
        ``has_event`` is not looked for)."""
        tail, torn = self.last_lines(_TAIL_BYTES, cap=HUGE_LINE)
        out: list[tuple[int, bytes | HugeLine]] = list(tail)
        if out:
            return out, torn
        fd = self.fh.fileno()
        end = self.torn_start()           # the byte after the last complete line
        if end == 0:
            return [], torn
        start = line_start(fd, end - 1)
        length = end - 1 - start
        if length <= HUGE_LINE:
            return [(start, os.pread(fd, length, start))], torn
        return [(start, HugeLine(length, os.pread(fd, 64, start), os.pread(fd, 64, end - 65),
                                 False))], torn

    def last_lines(self, nbytes: int = _TAIL_BYTES, cap: int | None = None
                   ) -> tuple[list[tuple[int, bytes]], bool]:
        """The complete lines in the last ``nbytes`` (the first, possibly partial,
        one dropped unless the window reaches the file start) and whether the
        file ends in a torn tail.  The window doubles until it holds at least
        one complete line or reaches the file start, so the last complete
        record is always there however long it (or a torn tail after it) is;
        with ``cap``, it stops short of ``cap`` bytes and may hold none."""
        size = self.size
        while True:
            begin = max(0, size - nbytes)
            self.fh.seek(begin)
            data = self.fh.read(size - begin)
            torn = bool(data) and not data.endswith(b"\n")
            parts = data.split(b"\n")
            parts.pop()  # the torn tail, or b"" after the final newline
            offs = []
            pos = begin
            for p in parts:
                offs.append((pos, p))
                pos += len(p) + 1
            if begin > 0 and offs:
                # The window may have started mid-line; unless the byte before it is a
                # newline, the first piece is partial.
                self.fh.seek(begin - 1)
                if self.fh.read(1) != b"\n":
                    offs.pop(0)
            if offs or begin == 0 or (cap is not None and nbytes * 2 > cap):
                return offs, torn
            nbytes *= 2


def record_before(fd: int, off: int) -> int | None:
    """The seq of the nearest record before the line at byte ``off`` (a line
    start) of the file ``fd``: the lines before it are read backwards (a
    block at a time, doubling up to ``_CHUNK``), those that are not records
    stepped over, so a corrupt line whose first bytes look like
    ``{"seq":N,`` (the first half of a record split in two) is not taken for
    record N.  None when no record precedes it.  A line longer than
    :data:`HUGE_LINE` whose first bytes give its seq is not parsed: it is
    judged by :func:`huge_seq`, as every reader judges it -- record N when
    its last bytes end an object, even if it would not parse, else a
    corrupt line (issue 16.5: a huge record is not read whole to be
    placed).  A corrupt line sits at the
    position after this record: the range reads ask for bad lines after the
    last record, the default audit for one after a line it did not parse."""
    found = record_placed_before(fd, off)
    return None if found is None else found[0]


def line_start(fd: int, end: int) -> int:
    """The start of the line that ends at byte ``end`` (its newline, or the
    end of the file): the byte after the newline before it, or 0.  Read
    backwards a block at a time (doubling up to ``_CHUNK``), so a huge line
    is never held."""
    start, step = end, 256
    while start > 0:
        n = min(step, start)
        i = os.pread(fd, n, start - n).rfind(b"\n")
        if i >= 0:
            return start - n + i + 1
        start -= n
        step = min(step * 2, _CHUNK)
    return 0


def record_placed_before(fd: int, off: int) -> tuple[int, int] | None:
    """:func:`record_before`, with the offset of the line after that record:
    (seq, start of the next line); where it is below ``off``, the lines from
    there to ``off`` are corrupt lines that sit after the record."""
    end = off - 1            # the newline ending the line before
    while end > 0:
        start = line_start(fd, end)
        seq = line_counts_as(fd, start, end)
        if seq is not None:
            return seq, end + 1
        end = start - 1
    return None


def line_counts_as(fd: int, start: int, end: int,
                   classify: Callable[[bytes], tuple[str, Any]] = _classify) -> int | None:
    """The seq the complete line from ``start`` to its newline at ``end``
    counts as for placing the corrupt lines after it: a record's; a
    too_large line's, from its ``{"seq":N,`` prefix; a line over
    :data:`HUGE_LINE` is not read whole but judged by its first and last
    bytes (:func:`huge_seq`: the first half of a split record does not end
    as an object does).  None for a corrupt line."""
    head = os.pread(fd, min(64, end - start), start)
    fast = fast_seq(head)
    if end - start > HUGE_LINE:
        if fast is not None:
            return huge_seq(end - start, head, os.pread(fd, 64, end - 64))
        if classify_huge(fd, start, end - start) is not None:
            return None           # a corrupt line, not read whole
    kind, obj = classify(os.pread(fd, end - start, start))
    if kind == "record":
        seq: int = obj["seq"]
        return seq
    return fast if kind == TOO_LARGE else None


_DICT_TYPE = {dict}
_INT_TYPE = {int}
_LIST_TYPE = {list}
_ONE = {1}
# a "]" followed (after JSON whitespace other than a newline) by "," and "[":
# what would close one of records_by_line's one-item lists and open the next
_CLOSE_OPEN = lazy_compile(rb"\][ \t\r]*,[ \t\r]*\[")


def records_by_line(data: bytes, end: int) -> list[dict[str, Any]] | None:
    """The records of the complete lines ``data[:end]`` (``end`` just after a
    newline), each line parsed on its own, when every line is a record whose
    seq is its line number (the header 0, then 1, 2, ...): then the span of
    a reference is the slice of its positions, exactly as a line-by-line
    read gives it.  None for anything else (no complete line, a line that is
    not a record on its own, a gap or a repeated seq, valid JSON orjson
    refuses ...): the caller reads line by line then.

    Each line is parsed as ``orjson.loads`` parses it alone, in one call when
    it can be told that this is the same (:func:`_lines_as_lists`), else
    one call per line in a ``map`` (no Python step per line either way).
    (Not the lines simply joined into one JSON array: that parses a record
    split across two lines, or two records on one line, as if each line were
    one record.)"""
    if end <= 0:
        return None
    records = _lines_as_lists(data, end)
    if records is None:
        try:
            records = list(map(orjson.loads, data[:end - 1].split(b"\n")))
        except (orjson.JSONDecodeError, MemoryError):
            return None     # (the line by line read parses each on its own, or says too_large)
    # every record a dict whose seq is an int equal to its line number (in
    # maps, not a Python step per line)
    if set(map(type, records)) != _DICT_TYPE:
        return None
    seqs = list(map(dict.get, records, itertools.repeat("seq")))
    if set(map(type, seqs)) != _INT_TYPE or any(map(operator.ne, seqs, range(len(seqs)))):
        return None
    # A line holding "seq" twice may begin with another seq than the one its
    # parse kept (seq_given_twice): a corrupt line, for the line by line read
    # to place.  Each line's parse kept its line number: the seqs its first
    # bytes give (fast_seq), read in one search, must be those numbers; where
    # a line does not begin so, each line is checked.
    n = len(records)
    if fast_seq(data[:64]) not in (None, 0) or not _lines_begin_with_their_seq(data, end, n):
        lines = data[:end - 1].split(b"\n")
        if any(first is not None for first in map(seq_given_twice, lines, range(n))):
            return None
    return records


def _lines_begin_with_their_seq(data: bytes, end: int, n: int) -> bool:
    """Whether each of the ``n`` complete lines of ``data[:end]`` after the
    first begins ``{"seq":i,`` (or ``}``; as :func:`fast_seq` reads it),
    ``i`` its line number: one search of the line starts, a piece of about
    ``PARSE_PIECE`` bytes at a time (no list of the lines' length), the
    numbers compared in C."""
    expect, start = 1, 0
    while start < end:
        # (a piece ends at a newline: a line start found in it lies in it)
        stop = data.find(b"\n", min(start + PARSE_PIECE, end - 1), end)
        if stop <= start:
            stop = end
        firsts = _LINE_FIRST_SEQ.findall(data, start, stop)
        if list(map(int, firsts)) != list(range(expect, expect + len(firsts))):
            return False
        expect += len(firsts)
        start = stop
    return expect == n


# the seq a line after the first begins with, as fast_seq reads it
_LINE_FIRST_SEQ = lazy_compile(rb'\n' + _SEQ_PREFIX)


def _lines_as_lists(data: bytes, end: int) -> list[Any] | None:
    """The value of each complete line of ``data[:end]`` (``end`` just after
    a newline), as ``orjson.loads`` of that line alone gives it, from one
    parse of ``[[line 0],[line 1],...,[line N-1],[]]``; None when that parse
    may differ from the lines' own (the caller parses them one by one then,
    which decides).

    The parse is each line's own when the outer array holds N + 1 items and
    no line holds ``]``, ``,`` and ``[`` in a row (with spaces, tabs or CRs
    between): the outer array's N top-level commas each stand between a
    ``]`` and a ``[``, and one that is not among the N inserted ``],[``
    (one per newline) would be such bytes in a line; so each inserted one
    separates two items, and item k is ``[`` + line k + ``]``.  When each of
    the first N items is a list of exactly one value, that value is line
    k's (surrounding whitespace aside, which JSON ignores); a line that is
    not one JSON value (none, two, half of one) cannot make one.  The bytes
    are looked for at each ``]`` (found by ``memchr``); lines with many give
    way to the caller at once."""
    find = data.find
    p = find(b"]", 0, end)
    left = 16 + (end >> 12)     # (one "]" in 4 KiB of lines, on average, at most)
    while p >= 0:
        if _CLOSE_OPEN.match(data, p, end):
            return None
        left -= 1
        if left < 0:
            return None
        p = find(b"]", p + 1, end)
    # The lines are parsed a piece of about PARSE_PIECE bytes at a time (each
    # piece whole lines, judged as above on its own): a copy of one piece
    # and its item lists are what this holds besides data and the records.
    out: list[Any] = []
    start = 0
    while start < end:
        stop = find(b"\n", min(start + PARSE_PIECE, end) - 1, end) + 1
        piece = data[start:stop]
        joined = piece.replace(b"\n", b"],[")       # (ends with "],[")
        lines = (len(joined) - len(piece)) // 2
        text = b"".join((b"[[", joined, b"]]"))
        del joined, piece
        try:
            items = orjson.loads(text)
        except (orjson.JSONDecodeError, MemoryError):
            return None
        del text
        if len(items) != lines + 1 or items.pop() != []:
            return None
        if set(map(type, items)) != _LIST_TYPE or set(map(len, items)) != _ONE:
            return None
        out.extend(itertools.chain.from_iterable(items))
        del items
        start = stop
    return out


PARSE_PIECE = 256 << 10


def span_decision(seqs: tuple[int, ...], digest: str, records: list[dict[str, Any]], purpose: str,
                  excluded: frozenset[int], generation: int, us: UndoState, *,
                  by_position: bool = False) -> SourceStatus:
    """The status of a reference (``seqs``, ``digest``) whose span ``records``
    were read completely and cleanly: the digest, then each cited position's
    type and visibility.  The one decision of the session readers and of the
    audit (``audit.transcripts._span_status``, after its own checks).
    ``by_position``: the caller knows that record i has seq ``seqs[0] + i``
    (the audit gathers a span so), which spares the look at their seqs."""
    try:
        got = canonical_digest(records)
    except RecordsUndigestible as exc:
        return status_for("records_corrupt", exc.detail, exc.seq)
    if got != digest:
        return status_for("digest_mismatch")
    if len(seqs) == 1 and len(records) == 1:
        cited: Iterable[dict[str, Any]] = records
    elif len(seqs) == len(records) and (by_position
                                        or list(map(_SEQ_OF, records)) == list(seqs)):
        # every record cited, in order (a lineage chunk, a pair): the records
        # themselves, as the lookup below gives them (the seqs are distinct;
        # by position, as many records as seqs means the seqs are contiguous)
        cited = records
    else:
        by_seq = {r["seq"]: r for r in records}
        cited = (by_seq[s] for s in seqs)
    hidden = first_hidden(cited, purpose=purpose, excluded=excluded, generation=generation,
                          undo_state=us, clear_seq=us.clear_seq)
    if hidden is not None:
        return status_for(hidden[1], None, hidden[0])
    return _VALID_STATUS


_SEQ_OF = operator.itemgetter("seq")
_VALID_STATUS = SourceStatus(VALID)   # frozen: one for every valid reference


class _SpanRead:
    """What one span read found (private: a plain class with slots)."""

    __slots__ = ("records", "last_seq", "corruption")

    def __init__(self, records: list[dict[str, Any]], last_seq: int | None,
                 corruption: tuple[str, int, str] | None) -> None:
        self.records = records
        self.last_seq = last_seq          # last complete record seen (in the span or after)
        self.corruption = corruption      # (kind, byte offset, detail) inside the span


# --------------------------------------------------------------------------
# The store


NO_EXCLUSIONS = NoExclusions()
"""Pass as ``SessionStore(store, exclusions=NO_EXCLUSIONS)`` to say explicitly
that the store has no facts database to honour: nothing excluded, generation 0."""


class SpanReads:
    """The one-reference read of spans of the open transcript ``f``: a span
    is read from where the search finds its first position
    (:meth:`SessionStore._read_span`), then decided by :func:`span_decision`.
    The visibility events are read once, from the lowest position asked or
    ``lowest`` if that is lower (``us``: already read from ``lowest``), and
    the transcript's last seq once, for the first span past its end.  Every
    reader takes this read's status where the records of a transcript
    repeat a seq or go back (docs/FORMAT.md)."""

    def __init__(self, f: _File, lowest: int, excluded: frozenset[int], generation: int,
                 us: UndoState | None = None) -> None:
        self.f = f
        self.excluded = excluded
        self.generation = generation
        self._lowest = lowest
        self._us = us
        self._last_seq: int | None = None
        self._last_known = False

    def status(self, seqs: tuple[int, ...], digest: str, purpose: str) -> SourceStatus:
        f = self.f
        sr = SessionStore._read_span(f, seqs[0], seqs[-1])
        if sr.corruption:
            kind, off, _detail = sr.corruption
            return status_for("records_corrupt", f"line {f.line_number(off)}: {kind}")
        if not sr.records or sr.records[-1]["seq"] < seqs[-1]:
            if not self._last_known:
                self._last_seq, self._last_known = SessionStore._last_seq(f), True
            missing = seqs[0] if not sr.records else sr.records[-1]["seq"] + 1
            return status_for("position_missing", f"the transcript ends at seq {self._last_seq}",
                              missing)
        if self._us is None or seqs[0] < self._lowest:
            self._lowest = min(seqs[0], self._lowest)
            self._us = UndoState(SessionStore._events_from(f, self._lowest, set(VISIBILITY_EVENTS)))
        return span_decision(seqs, digest, sr.records, purpose, self.excluded, self.generation,
                             self._us)


class StoreExclusions:
    """The ExclusionReader of a store's own ``facts.sqlite3``, read-only.

    Each call opens the database with :meth:`FactStore.open_readonly` and closes
    it again, so a forget committed by any writer is seen by the next read, and
    nothing in the store is created or changed (no database, ``-wal`` or
    ``-shm``).  No database: generation 0, nothing excluded.  A database that
    cannot be read raises (StoreCorrupt, StoreBusy): evidence is never called
    valid when its exclusions are unknown.  ``busy_timeout``: seconds each
    open waits for a stable snapshot (``--lock-wait``; default 5 s)."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float | None = None) -> None:
        self.path = Path(os.fspath(path))
        self.busy_timeout = busy_timeout

    def _read(self, fn: Any) -> Any:
        if not os.path.lexists(self.path):
            return None
        from .facts import BUSY_TIMEOUT, FactStore

        timeout = BUSY_TIMEOUT if self.busy_timeout is None else self.busy_timeout
        with typed_errors(), FactStore.open_readonly(self.path, busy_timeout=timeout) as fs:
            return fn(fs)

    def generation(self) -> int:
        got = self._read(lambda fs: fs.generation())
        return 0 if got is None else got

    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        got = self._read(lambda fs: fs.excluded_seqs(session_id))
        return frozenset() if got is None else got

    def read_all(self) -> tuple[int, dict[str, frozenset[int]]]:
        """The generation and every session's exclusions from one open (an
        evaluation of many sessions reads the database once, not per session)."""
        got = self._read(lambda fs: (fs.generation(), fs.exclusions_by_session()))
        return (0, {}) if got is None else got


class _ExclusionsOnce:
    """The exclusions and generation of each ExclusionReader, read once for
    one evaluation (``validate_many``): a :class:`StoreExclusions` is opened
    once for all its sessions, any other reader asked once per session."""

    def __init__(self) -> None:
        # the last transcript parsed whole (_whole_records): its session id,
        # size and records, for the next group of references into it
        self.whole: tuple[str, int, list[dict[str, Any]] | None] | None = None
        # the visibility events of the last group's transcript: its session
        # id, size, the lowest seq they were read from, and their state
        self._undo: tuple[str, int, int, UndoState] | None = None
        self._readers: dict[int, Any] = {}       # id -> reader (kept alive: ids stay unique)
        self._generation: dict[int, int] = {}
        self._tables: dict[int, dict[str, frozenset[int]] | None] = {}
        self._seqs: dict[tuple[int, str], frozenset[int]] = {}

    def undo_state(self, f: _File, session_id: str, lo: int) -> UndoState:
        """The visibility events of ``f`` (transcript ``session_id``) from
        seq ``lo`` on: those the previous group of references into the same
        transcript at the same size read, when they were read from ``lo`` or
        lower (an event hides only positions before its own seq, so events
        before ``lo`` change no answer about a span from ``lo`` on: as
        :class:`SpanReads` reuses them); else read from ``lo``.  A session
        cited more often than ``GROUP_REFS`` comes in several groups, each of
        which read its events to the end of the transcript before."""
        held = self._undo
        if held is not None and held[:2] == (session_id, f.size) and held[2] <= lo:
            return held[3]
        us = UndoState(SessionStore._events_from(f, lo, set(VISIBILITY_EVENTS)))
        self._undo = (session_id, f.size, lo, us)
        return us

    def get(self, reader: ExclusionReader, session_id: str) -> tuple[frozenset[int], int]:
        # (each read once per reader, or per reader and session: an error of
        # SQLite's in one -- a FactStore given as the exclusions, a writer's
        # or a read-only open's, on a damaged database -- is raised as its
        # memctl error, as StoreExclusions and _ProjectExclusions raise theirs)
        key = id(reader)
        if key not in self._readers:
            with typed_errors():
                if isinstance(reader, StoreExclusions):
                    self._generation[key], self._tables[key] = reader.read_all()
                else:
                    self._generation[key] = reader.generation()
                    self._tables[key] = None
            self._readers[key] = reader      # (once read: a failed read is tried again)
        table = self._tables[key]
        if table is not None:
            return table.get(session_id, frozenset()), self._generation[key]
        if (key, session_id) not in self._seqs:
            with typed_errors():
                self._seqs[(key, session_id)] = reader.excluded_seqs(session_id)
        return self._seqs[(key, session_id)], self._generation[key]


def _check_tail_ascends(session_id: str, tail: list[tuple[int, bytes]], last: int) -> None:
    """A writer's check of a transcript's last lines (``last_lines``' window,
    the last record's seq ``last``): SessionCorrupt when a record there has a
    seq at or above ``last`` (the seqs went back: an earlier record written
    again, say), since the next record, ``last + 1``, would repeat a seq that
    evidence may already cite (before 2026-12-07 the writer took it, and a
    fact remembered with the new message's snapshot cited the older record
    of that seq, valid).  A regression before the window is ``validate
    --deep``'s to report (``session.seq_gap``); the writer reads no more than
    the window.  The lines whose first bytes give their seq, as the writer
    writes them, are read by one pattern over the window's bytes (a line at
    a time in Python made opening a writer 6x slower); the others parsed."""
    lines = tail[:-1]
    if not lines:
        return
    seqs = _WINDOW_SEQS.findall(b"\n" + b"\n".join([line for _off, line in lines]))
    if len(seqs) == len(lines) and max(map(int, seqs)) < last:
        return
    for off, line in lines:
        fast = fast_seq(line[:64])
        if fast is not None and fast < last:
            continue        # (a record's first bytes, as the writer writes them: no parse)
        if b'"seq"' not in line:
            continue
        kind, obj = _classify(line)
        if kind == "record" and obj["seq"] >= last:
            raise SessionCorrupt(
                f"session {session_id}: the seqs go back (a record with seq {obj['seq']} "
                f"before the last one, seq {last}); refusing to append: the next record "
                f"would repeat a seq", kind=SEQ_GAP, line=None, offset=off,
                session_id=session_id)


class SessionStore:
    """The transcripts of one project store (``<store>/sessions/``).

    ``exclusions`` is the project's ExclusionReader.  Left out (``None``), the
    store's own ``facts.sqlite3`` is found and read read-only on each use
    (:class:`StoreExclusions`; no file is created), so a SessionStore built
    from the store alone never calls forgotten evidence valid.  Pass
    :data:`NO_EXCLUSIONS` to say explicitly that there is no facts database
    to honour.  A :meth:`bind_facts` binding takes precedence for the sessions
    of its project.  :meth:`close` ends the use of the store.
    """

    def __init__(self, store: Store, exclusions: ExclusionReader | None = None) -> None:
        check_store_arg(store, "SessionStore")
        self.store = store
        # (a path made once: a listing of 20,000 sessions built it 60,000 times)
        self._dir = os.fspath(store.sessions_dir)
        self._exclusions: ExclusionReader = (StoreExclusions(store.facts_db) if exclusions is None
                                             else exclusions)
        self._bound: dict[str, ExclusionReader] = {}
        self._closed = False

    def close(self) -> None:
        """End the use of this store: drop the exclusion bindings; later reads
        and writes raise UsageError.  Open SessionWriters are closed by their
        owners; a reader passed in ``exclusions`` is the caller's to close.
        Idempotent."""
        self._closed = True
        self._bound.clear()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the session store is closed")

    # -- paths and opening

    @property
    def dir(self) -> str:
        return self._dir

    def path(self, session_id: str) -> str:
        check_session_id(session_id)
        return os.path.join(self.dir, session_id + SUFFIX)

    def session_ids(self, *, unlistable_ok: bool = False) -> list[str]:
        """Ids of the ``*.jsonl`` entries with a valid id syntax (no file
        opened); an unlistable directory is ``StoreCorrupt`` unless
        ``unlistable_ok`` (``layout.session_ids``)."""
        self._check_open()
        return session_ids(self.dir, unlistable_ok=unlistable_ok)

    def header_projects(self, *, strict: bool = False) -> dict[str, int]:
        """How many transcripts name each project in their header: the evidence a
        store given by path (``--store``) takes its slug from.  Reads one line per
        file; symbolic links, unreadable files and bad headers are not counted,
        exactly as :meth:`_open` and ``header()`` refuse them.  ``sessions/`` is
        opened once and each file below it (a store of 20,000 sessions took
        0.9 s through the reader's own open, before every command).

        A ``sessions/`` that is missing, a symbolic link or not a directory
        counts nothing (no transcript can be opened through it).  One that is
        a directory but cannot be listed or opened counts nothing too, unless
        ``strict``: then it is ``StoreCorrupt`` ("cannot list"), as is a
        ``sessions/`` that cannot be looked up, since its transcripts may
        still be opened by name and no count can say which project they
        name (``layout.store_given``)."""
        self._check_open()
        counts: dict[str, int] = {}
        if strict and self._is_a_directory():
            ids = self.session_ids()             # StoreCorrupt: cannot list
        else:
            # only a guess: an unlistable sessions/ is reported by the
            # command that reads it
            ids = self.session_ids(unlistable_ok=True)
        if not ids:
            return counts
        try:
            # (a link in sessions/' place is refused, as _open refuses it)
            dfd = os.open(self.dir, os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        except OSError as exc:
            raise_if_out_of_fds(exc, self.dir)
            if strict and self._is_a_directory():
                raise StoreCorrupt(f"{self.dir}: cannot list: {exc.strerror or exc}") from None
            return counts
        try:
            for sid in ids:
                try:
                    project = header_record(_first_line(dfd, sid + SUFFIX), sid).get("project")
                except (MemctlError, OSError):
                    continue
                if isinstance(project, str):
                    counts[project] = counts.get(project, 0) + 1
        finally:
            os.close(dfd)
        return counts

    def _is_a_directory(self) -> bool:
        """Whether ``sessions/`` is a directory (not followed); False when it
        is missing.  One that cannot be looked up is ``StoreCorrupt``."""
        try:
            return stat.S_ISDIR(os.lstat(self.dir).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise StoreCorrupt(f"{self.dir}: cannot look up: {exc.strerror or exc}") from None

    def not_found(self, session_id: str) -> SessionNotFound:
        """The error for an id with no transcript, with close matches as a hint."""
        known = self.session_ids(unlistable_ok=True)     # a hint only
        close = difflib.get_close_matches(session_id, known, n=3, cutoff=0.6)
        prefixed = [s for s in known if s.startswith(session_id) and s not in close][:3]
        hint = None
        cands = close + prefixed
        if cands:
            hint = "did you mean " + ", ".join(cands) + "? ids are exact, never resolved"
        return SessionNotFound(f"no session {session_id} in {self.dir}", hint=hint)

    def _lstat_dir(self, session_id: str) -> os.stat_result:
        """``sessions/`` (lstat): none is no such session; one that cannot
        be looked at (the store a regular file, say) is unreadable."""
        try:
            return os.lstat(self.dir)
        except FileNotFoundError:
            raise self.not_found(session_id) from None
        except OSError as exc:
            raise SessionUnreadable(f"{self.dir}: {exc.strerror}") from None

    def _open(self, session_id: str) -> _File:
        self._check_open()
        check_session_id(session_id)
        dst = self._lstat_dir(session_id)
        if stat.S_ISLNK(dst.st_mode):
            raise SessionRefused(f"{self.dir} is a symbolic link; refused", "refused_symlink")
        path = os.path.join(self.dir, session_id + SUFFIX)
        # One owner of the descriptor at any time, whatever an interrupt (a
        # signal handler runs between any two bytecodes, a call's return
        # included) cuts short: the FileIO from the moment os.open returns it
        # (open_owned), the _File's reader from when it is made.  Never
        # os.close: a file object an interrupt dropped closes it too, and the
        # second close hit whatever the process had opened meanwhile under
        # that number.
        try:
            raw = open_owned(path)
        except FileNotFoundError:
            raise self.not_found(session_id) from None
        except IsADirectoryError:
            raise SessionUnreadable(f"session {session_id}: {path} is not a regular file") from None
        except OSError as exc:
            if is_link_refusal(exc):
                raise SessionRefused(f"session {session_id}: {path} is a symbolic link; refused",
                                     "refused_symlink") from None
            if exc.errno == errno.ENOTDIR:
                raise self.not_found(session_id) from None
            raise_if_out_of_fds(exc, path)
            raise SessionUnreadable(f"session {session_id}: cannot open {path}: "
                                    f"{exc.strerror}") from None
        try:
            # (open_owned refuses what is not a regular file or a directory)
            return _File(io.BufferedReader(raw, _BUFFER), session_id, path)
        except BaseException:
            raw.close()         # (idempotent: closed already when the reader was dropped)
            raise

    def _open_checked(self, session_id: str) -> tuple[_File, dict[str, Any]]:
        # (a slug that cannot be known refuses every read: StoreCorrupt, not
        # a session "of another project" nor an unreadable one)
        slug = self.store.known_slug()
        f = self._open(session_id)
        try:
            hdr = f.header()
            if hdr.get("project") != slug:
                raise SessionRefused(
                    f"session {session_id} belongs to another project "
                    f"({_short(hdr.get('project'))}, not {slug}); refused",
                    "refused_project")
            return f, hdr
        except BaseException:
            f.close()
            raise

    # -- exclusions

    def bind_facts(self, project_root: str | os.PathLike[str], facts: ExclusionReader) -> None:
        """Bind the facts database of the project at ``project_root``: sessions
        whose header names that project's slug use it for exclusions."""
        from .identity import resolve_project

        self._bound[resolve_project(project_root).slug] = facts

    def exclusions_once(self) -> Callable[[str], frozenset[int]]:
        """A function giving a session's excluded positions as this store's
        validation reads them (:meth:`exclusion_reader`'s reader), each
        reader read once for the function's life: for a check made beside
        one evaluation (a revision's legacy provenance, ``fact_status``).  A
        session id that is not one (a damaged provenance row) has none."""
        once = _ExclusionsOnce()

        def excluded(session_id: str) -> frozenset[int]:
            try:
                reader = self.exclusion_reader(session_id)
            except MemctlError:
                return frozenset()
            return once.get(reader, session_id)[0]

        return excluded

    def exclusion_reader(self, session_id: str) -> ExclusionReader:
        """The ExclusionReader for a session: the binding of its header's
        project, else the store's reader: the one given, or the store's own
        facts database (:class:`StoreExclusions`), or :data:`NO_EXCLUSIONS`."""
        check_session_id(session_id)
        if self._bound:
            try:
                f, hdr = self._open_checked(session_id)
                f.close()
                bound = self._bound.get(hdr["project"])  # present: _open_checked compared it
                if bound is not None:
                    return bound
            except MemctlError:
                pass
        return self._exclusions

    def _reader_for(self, hdr: dict[str, Any]) -> ExclusionReader:
        bound = self._bound.get(hdr["project"])  # hdr comes from _open_checked: present
        if bound is not None:
            return bound
        return self._exclusions

    # -- writing

    def create(self, session_id: str, *, created: str | None = None,
               project: str | None = None) -> SessionWriter:
        """Create ``sessions/<id>.jsonl`` with its header (seq 0) and return its
        writer.  An existing session is a Conflict."""
        self._check_open()
        check_session_id(session_id)
        _ensure_dirs(os.fspath(self.store.path), self.dir)
        lock = lock_session(self.dir, session_id)
        path = os.path.join(self.dir, session_id + SUFFIX)
        try:
            try:
                f = open_owned(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                raise Conflict(f"session {session_id} already exists") from None
            except OSError as exc:
                raise StoreWriteError(f"{path}: cannot create: {exc.strerror}") from None
        except BaseException:
            lock.close()
            raise
        w = SessionWriter(session_id, path, f, lock, next_seq=0,
                          exclusions=self._reader_for(
                              {"project": project if project is not None else self.store.slug}))
        try:
            w.append_record({"type": "session", "format": FORMAT_VERSION, "session_id": session_id,
                             "project": project if project is not None else self.store.slug,
                             "created": created if created is not None else _now_iso()})
            fsync_dir(self.dir)
        except BaseException as exc:
            # The file is ours (O_EXCL, still under our lock): remove it, so that a
            # failed create leaves no header-less session behind and can be retried.
            try:
                os.unlink(path)
            except OSError:
                pass
            w.close()
            if isinstance(exc, OSError):
                raise StoreWriteError(f"{path}: cannot create: {exc.strerror or exc}") from None
            raise
        return w

    def writer(self, session_id: str) -> SessionWriter:
        """Append to an existing session (holds ``<id>.lock``; StoreBusy when
        another writer has it).  A torn tail left by a crashed append is cut off."""
        self._check_open()
        check_session_id(session_id)
        self._lstat_dir(session_id)
        if not os.path.lexists(os.path.join(self.dir, session_id + SUFFIX)):
            # (before the lock: a lock file is never removed, and a writer of
            # no session left one behind for every id asked for)
            raise self.not_found(session_id)
        lock = lock_session(self.dir, session_id)
        try:
            f, hdr = self._open_checked(session_id)
            try:
                tail, torn = f.last_lines()
                last = None
                for _off, line in reversed(tail):
                    kind, obj = _classify(line)
                    if kind == "record":
                        last = obj["seq"]
                        break
                    raise SessionCorrupt(
                        f"session {session_id}: the last complete line is corrupt ({kind}); "
                        "refusing to append", kind=kind, line=None, offset=_off,
                        session_id=session_id)
                if last is None:
                    last = 0
                else:
                    _check_tail_ascends(session_id, tail, last)
                good_size = f.size
                if torn:
                    good_size = tail[-1][0] + len(tail[-1][1]) + 1 if tail else 0
            finally:
                f.close()
            path = os.path.join(self.dir, session_id + SUFFIX)
            try:
                out = open_owned(path, os.O_WRONLY | os.O_APPEND)
            except OSError as exc:
                raise StoreWriteError(f"{path}: cannot open for append: {exc.strerror}") from None
            if torn:
                try:
                    os.ftruncate(out.fileno(), good_size)
                    os.fsync(out.fileno())
                except OSError as exc:
                    out.close()
                    raise StoreWriteError(f"{path}: cannot cut the torn tail: {exc.strerror}") from None
            return SessionWriter(session_id, path, out, lock, next_seq=last + 1,
                                 exclusions=self._reader_for(hdr))
        except BaseException:
            lock.close()
            raise

    # -- reading

    def header(self, session_id: str) -> dict[str, Any]:
        f, hdr = self._open_checked(session_id)
        f.close()
        return hdr

    @staticmethod
    def _read_span(f: _File, start: int, end: int) -> _SpanRead:
        """Records with start <= seq <= end, checked for consecutive seqs.
        Stops at the first corruption inside the span.  A corrupt line sits
        at the position after the record before it: bad lines after the last
        record that sit before ``start`` leave the span past the end (no
        records, no corruption), as the audit judges it."""
        pos, bad_tail = f.seek_span(start)
        records: list[dict[str, Any]] = []
        expect = start
        last_seq = None
        if bad_tail:
            # only bad lines from pos on: they are in the span only where they
            # sit, at the position after the record before them -- decided
            # before any of them is read (a huge one is never held for a span
            # it is not in)
            c = record_before(f.fh.fileno(), pos)
            if c is None or not start - 1 <= c < end:
                return _SpanRead(records, last_seq, None)
        for off, line, verdict in f.judged_lines(pos):
            if verdict is not None:   # a huge corrupt line, not read whole
                if expect > end:
                    break
                return _SpanRead(records, last_seq, (verdict[0], off, str(verdict[1])))
            if line is None:
                break
            kind, obj = f.classify(off, line)
            if kind != "record":
                if expect > end:
                    break        # after the span: not ours
                return _SpanRead(records, last_seq, (kind, off, str(obj)))
            seq = obj["seq"]
            if seq != expect:
                if seq > expect and expect > end:
                    break        # a gap after the span: not ours
                if records and seq == records[-1]["seq"]:
                    k = SEQ_DUPLICATE
                elif seq < expect:
                    k = SEQ_REGRESSION
                else:
                    k = SEQ_GAP
                return _SpanRead(records, last_seq, (k, off, f"seq {seq} where {expect} was expected"))
            last_seq = seq
            if seq > end:
                break
            records.append(obj)
            expect = seq + 1
            if expect > end:
                # The span is read; only the next line's seq matters now (a
                # repeated seq is corruption of the span).  When its first
                # bytes give it, the line is not read: a huge record after
                # the span costs nothing (issue 16.5).
                nxt = off + len(line) + 1
                probe = f.probe_seq(nxt) if nxt < f.size else None
                if probe is None or probe[1] is None or probe[1] < expect:
                    if probe is not None and f.huge_verdict(probe[0], probe[2] - 1) is not None:
                        return _SpanRead(records, last_seq, None)   # a huge corrupt line
                    _start, after = f.line_at(nxt)   # (the generator's file position moved)
                    return SessionStore._after_span(f, nxt, after, records, last_seq, expect)
                return _SpanRead(records, probe[1] if probe[1] == expect else last_seq, None)
        return _SpanRead(records, last_seq, None)

    @staticmethod
    def _after_span(f: _File, off: int, line: bytes | None, records: list[dict[str, Any]],
                    last_seq: int | None, expect: int) -> _SpanRead:
        """The end of :meth:`_read_span` once its span is read: the line at
        ``off`` after it (None: no complete line) is checked for a repeated
        seq, as the loop would."""
        if line is None:
            return _SpanRead(records, last_seq, None)
        kind, obj = f.classify(off, line)
        if kind != "record":
            return _SpanRead(records, last_seq, None)
        seq = obj["seq"]
        if seq > expect:
            return _SpanRead(records, last_seq, None)
        if seq < expect:
            k = SEQ_DUPLICATE if seq == records[-1]["seq"] else SEQ_REGRESSION
            return _SpanRead(records, last_seq, (k, off, f"seq {seq} where {expect} was expected"))
        return _SpanRead(records, seq, None)

    @staticmethod
    def _last_seq(f: _File) -> int | None:
        """The seq of the transcript's last record, as the corrupt-line rule
        places lines (:func:`record_placed_before` from the end; a torn tail
        is no record): bounded, a huge last line judged by its first and last
        bytes, never held whole (issue 16.5).  None when there is none."""
        found = record_placed_before(f.fh.fileno(), f.torn_start())
        return None if found is None else found[0]

    @staticmethod
    def _events_from(f: _File, start: int, kinds: set[str] | None = None) -> list[dict[str, Any]]:
        """Event records with seq >= start (lines pre-filtered on the bytes
        ``"event"``, and on their first bytes: see :func:`not_an_event`)."""
        pos = f.seek_seq(start)
        out = []
        for line in f.marked_lines(pos, skip=not_an_event):
            kind, obj = _classify(line)
            if kind != "record" or obj.get("type") != "event" or obj["seq"] < start:
                continue
            if kinds is None or type(ev := obj.get("event")) is str and ev in kinds:
                out.append(obj)
        return out

    def _raise_corrupt(self, f: _File, corruption: tuple[str, int, str]) -> None:
        kind, off, detail = corruption
        line = f.line_number(off)
        raise SessionCorrupt(f"session {f.session_id}: line {line}: {kind}: {detail}",
                             kind=kind, line=line, offset=off, session_id=f.session_id)

    def records(self, session_id: str, start: int, end: int) -> list[dict[str, Any]]:
        """Complete records with ``start <= seq <= end`` (fewer when the
        transcript ends sooner).  SessionCorrupt when a line in that span is
        corrupt or the seqs are not consecutive."""
        check_range(start, end, max_span=None)
        f, _hdr = self._open_checked(session_id)
        with f:
            sr = self._read_span(f, start, end)
            if sr.corruption:
                self._raise_corrupt(f, sr.corruption)
            return sr.records

    def events(self, session_id: str, start: int = 0, kinds: set[str] | None = None) -> list[dict[str, Any]]:
        """Event records from seq ``start`` on, optionally only the named kinds."""
        if not _is_int(start) or start < 0:
            raise UsageError("start must be a non-negative integer")
        f, _hdr = self._open_checked(session_id)
        with f:
            return self._events_from(f, start, kinds)

    def _visibility(self, hdr: dict[str, Any], session_id: str, f: _File, span_records: list[dict[str, Any]],
                    start: int, purpose: str) -> dict[int, str | None]:
        """Reason (or None when visible) for each message record of the span."""
        reader = self._reader_for(hdr)
        excluded = reader.excluded_seqs(session_id)
        generation = reader.generation()
        evs = self._events_from(f, start, set(VISIBILITY_EVENTS))
        us = UndoState(evs)
        out: dict[int, str | None] = {}
        for r in span_records:
            if r.get("type") != "message":
                continue
            ok, reason = visible(r, purpose=purpose, excluded=excluded, generation=generation,
                                 undo_state=us, clear_seq=us.clear_seq)
            out[r["seq"]] = None if ok else reason
        return out

    def source_snapshot(self, session_id: str, start: int, end: int,
                        purpose: str = "working") -> Snapshot:
        """Capture the visible messages of ``start..end`` (at most 200 positions).

        UsageError: bad id, bad range, unknown purpose.  NotFound: no such
        session, or ``start`` beyond the last complete record.  Conflict:
        the session is refused (symlink, header, project), or no message in the
        range is visible.  StoreCorrupt: a corrupt line or seq gap in the span.
        """
        from .sessiondata import Snapshot

        check_session_id(session_id)
        check_range(start, end, max_span=MAX_SPAN)
        _check_purpose(purpose)
        f, hdr = self._open_checked(session_id)
        with f:
            sr = self._read_span(f, start, end)
            if sr.corruption:
                self._raise_corrupt(f, sr.corruption)
            if not sr.records:
                last = self._last_seq(f)
                raise PositionMissing(
                    f"session {session_id} has records 0..{last if last is not None else '?'}; "
                    f"position {start} is not in it")
            reasons = self._visibility(hdr, session_id, f, sr.records, start, purpose)
            last_seq = self._last_seq(f)
        vis = [s for s, r in reasons.items() if r is None]
        hidden = {s: r for s, r in reasons.items() if r is not None}
        if not vis:
            where = {"hidden": hidden, "end": sr.records[-1]["seq"], "last_seq": last_seq}
            if hidden:
                first = min(hidden)
                reason = hidden[first]
                raise SpanHidden(
                    f"no visible message in {session_id}:{start}-{end}: "
                    f"{len(hidden)} hidden (first: seq {first}, {reason})", reason, first,
                    **where)
            raise SpanHidden(f"no message in {session_id}:{start}-{end} (only events)",
                             "not_message", start, **where)
        lo, hi = vis[0], vis[-1]
        try:
            digest = canonical_digest(r for r in sr.records if lo <= r["seq"] <= hi)
        except RecordsUndigestible as exc:
            raise StoreCorrupt(f"session {session_id}: {exc}") from None
        ref = SourceRef(session_id, tuple(vis), digest)
        clamped_end = sr.records[-1]["seq"]
        return Snapshot(ref, sr.records, vis, start, clamped_end,
                        last_seq if last_seq is not None else clamped_end, hidden)

    def validate_source(self, ref: SourceRef, purpose: str = "working") -> SourceStatus:
        """Recheck a reference: project identity, id, symlink, presence, JSON
        integrity, digest and visibility.  Never raises for store content."""
        _check_purpose(purpose)
        return self.validate_many([ref], purpose)[ref]

    def validate_many(self, refs: Iterable[SourceRef], purpose: str = "durable"
                      ) -> dict[SourceRef, SourceStatus]:
        """Validate many references at once: the evaluation engine.

        References are grouped by session; each session file is opened once,
        its visibility events are read once (a raw-byte scan from the smallest
        start among its refs), and its cited spans are read in one forward
        sweep (:meth:`_sweep_spans`).  The exclusions and generation of each
        ExclusionReader are read once for the whole call.  A single reference
        (``validate_source``) keeps its bounded read: one seek to its span."""
        _check_purpose(purpose)
        by_session: dict[str, list[SourceRef]] = {}
        out: dict[SourceRef, SourceStatus] = {}
        for ref in refs:
            by_session.setdefault(ref.session_id, []).append(ref)
        for got in self.validate_sessions(by_session.items(), purpose):
            out.update(got)
        return out

    def validate_sessions(self, groups: Iterable[tuple[str, list[SourceRef]]],
                          purpose: str = "durable") -> Iterator[dict[SourceRef, SourceStatus]]:
        """:meth:`validate_many` one session at a time: ``groups`` yields
        (session id, the refs of that session), and the statuses of each group
        are yielded before the next group is read, so a caller that keeps only
        what it needs holds one session's refs at a time.  The exclusions of
        each ExclusionReader are read once for the whole iteration."""
        held: list[SourceRef] = []      # the group being validated

        def stored(groups: Iterable[tuple[str, list[SourceRef]]]
                   ) -> Iterator[tuple[str, list[StoredSource]]]:
            nonlocal held
            for sid, group in groups:
                if group:
                    held = group
                    yield sid, [(r.seqs, r.digest) for r in group]

        for _sid, got in self.validate_stored(stored(groups), purpose):
            yield {r: got[(r.seqs, r.digest)] for r in held}

    def validate_stored(self, groups: Iterable[tuple[str, list[StoredSource]]],
                        purpose: str = "durable"
                        ) -> Iterator[tuple[str, dict[StoredSource, SourceStatus]]]:
        """:meth:`validate_sessions` of references given as their stored
        values, (seqs, digest) pairs (``FactStore.stored_sources_by_session``:
        each checked as :class:`SourceRef` checks it), keyed so, each group's
        with its session id: the whole-store evaluation validates every
        source of a store without making an object of each.  An empty group
        gives nothing."""
        _check_purpose(purpose)
        once = _ExclusionsOnce()
        for sid, group in groups:
            if group:
                yield sid, self._validate_session(sid, group, purpose, once)
        once.whole = None

    def _validate_session(self, sid: str, refs: list[StoredSource], purpose: str,
                          once: _ExclusionsOnce | None = None
                          ) -> dict[StoredSource, SourceStatus]:
        try:
            check_session_id(sid)
        except UsageError:
            return {r: status_for("invalid_ref", "bad session id") for r in refs}
        try:
            f, hdr = self._open_checked(sid)
        except SessionNotFound:
            return {r: status_for("session_missing", f"no session {sid}") for r in refs}
        except SessionRefused as exc:
            return {r: status_for(exc.reason, exc.message) for r in refs}
        except (SessionUnreadable, OSError) as exc:
            return {r: status_for("session_unreadable", str(exc)) for r in refs}
        out: dict[StoredSource, SourceStatus] = {}
        once = once or _ExclusionsOnce()
        try:
            with f:
                excluded, generation = once.get(self._reader_for(hdr), sid)
                lo = min(r[0][0] for r in refs)
                us = once.undo_state(f, sid, lo)
                whole = None
                if len(refs) > 1:
                    # the previous group's parse when it was of this file at this size
                    if once.whole is None or once.whole[:2] != (sid, f.size):
                        once.whole = None           # one transcript's records at a time
                        once.whole = (sid, f.size, self._whole_records(f))
                    whole = once.whole[2]
                ordered: Iterable[StoredSource] = refs
                if whole is not None:
                    # every line a record whose seq is its line number: a span is a slice
                    n = len(whole)
                    for ref in refs:
                        seqs = ref[0]
                        if seqs[-1] < n:
                            out[ref] = span_decision(seqs, ref[1], whole[seqs[0]:seqs[-1] + 1],
                                                     purpose, excluded, generation, us)
                elif len(refs) > 1:
                    ordered = sorted(set(refs), key=lambda r: (r[0][0], r[0][-1]))
                    # each span decided as the sweep completes it: its records are dropped
                    for ref, records in self._sweep_spans(f, ordered):
                        out[ref] = span_decision(ref[0], ref[1], records, purpose, excluded,
                                                 generation, us)
                reads = SpanReads(f, lo, excluded, generation, us)
                for ref in ordered:
                    if ref not in out:
                        out[ref] = reads.status(ref[0], ref[1], purpose)
        except OSError as exc:
            for r in refs:
                out.setdefault(r, status_for("session_unreadable", exc.strerror or str(exc)))
        return out

    @staticmethod
    def _whole_records(f: _File) -> list[dict[str, Any]] | None:
        """:func:`records_by_line` of a transcript of at most ``_WHOLE_LIMIT``
        bytes (its complete lines), else None."""
        if f.size > _WHOLE_LIMIT:
            return None
        data = os.pread(f.fh.fileno(), f.size, 0)
        return records_by_line(data, data.rfind(b"\n") + 1)

    def _sweep_spans(self, f: _File, refs: list[StoredSource]
                     ) -> Iterator[tuple[StoredSource, list[dict[str, Any]]]]:
        """The spans of many refs (sorted by start) from one forward read.

        Lines are read from the first span's start; a span's records are kept
        only while it is open, so memory follows the overlap of spans, not
        the transcript.  Where the next span starts more than
        ``_SWEEP_GAP`` positions after the last one read, the sweep seeks to
        it (the same binary search as a single read) instead of reading the
        lines between.  Only spans read cleanly -- consecutive seqs, every
        line a record, and the line after it (if any) not a repeated seq --
        are yielded, with their records, as they complete; any other ref (a
        corrupt line, a seq out of order, the end of the transcript) is left
        to the one-ref read (``_read_span``), so the statuses are those of
        the one-ref path."""
        items = [(r[0][0], r[0][-1], r) for r in refs]
        n = len(items)
        k = 0                                   # next ref to open
        while k < n:
            k0 = k
            lines = f.lines(f.seek_seq(items[k][0]))
            active: list[tuple[int, int, StoredSource]] = []
            # read spans: decided once the next line shows no repeated seq
            ready: list[tuple[StoredSource, list[dict[str, Any]]]] = []
            buf: dict[int, dict[str, Any]] = {}
            min_end = -1
            expect = items[k][0]
            for off, line in lines:
                if line is None:
                    break
                s = fast_seq(line)
                obj = None
                if s is None:
                    kind, obj = f.classify(off, line)
                    if kind != "record":
                        ready = []
                        break                   # anomaly: the one-ref read decides
                    s = obj["seq"]
                if s != expect:
                    ready = []
                    break
                expect = s + 1
                if ready:
                    yield from ready
                    ready = []
                while k < n and items[k][0] <= s:
                    if items[k][0] == s:
                        active.append(items[k])
                        if len(active) == 1 or items[k][1] < min_end:
                            min_end = items[k][1]
                    k += 1
                if not active:
                    if k >= n or items[k][0] > s + _SWEEP_GAP:
                        break                   # nothing open: seek to the next span
                    continue
                if obj is None:
                    kind, obj = f.classify(off, line)
                    if kind != "record" or obj["seq"] != s:
                        break
                buf[s] = obj
                if s >= min_end:
                    keep = []
                    for it in active:
                        if it[1] <= s:
                            ready.append((it[2], [buf[q] for q in range(it[0], it[1] + 1)]))
                        else:
                            keep.append(it)
                    active = keep
                    if keep:
                        min_end = min(it[1] for it in keep)
                        low = min(it[0] for it in keep)
                        for q in [q for q in buf if q < low]:
                            del buf[q]
                    else:
                        buf.clear()
            yield from ready                    # (emptied on an anomaly)
            if k == k0:
                k += 1                          # its first line is not where it should be

    # -- listing and scanning

    def list_sessions(self) -> list[SessionInfo]:
        """One entry per ``sessions/*.jsonl``, by file name: header and tail
        for the state, plus a byte-level pass that parses only event lines
        to count messages and compactions."""
        return [self._info(sid) for sid in sorted(self._listed_ids(), key=lambda i: i + SUFFIX)]

    def iter_sessions(self) -> Iterator[SessionInfo]:
        """:meth:`list_sessions`' entries in id order, each read as it is
        asked for (``memctl sessions`` in its default order reads only the
        page it prints).  The directory is listed now: a ``sessions/`` that
        cannot be listed raises here, before any entry."""
        return map(self._info, sorted(self._listed_ids()))

    def _listed_ids(self) -> list[str]:
        """The names of ``sessions/*.jsonl`` without the suffix, any name."""
        self._check_open()
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise_if_out_of_fds(exc, self.dir)
            raise SessionUnreadable(f"{self.dir}: cannot list: {exc.strerror}") from None
        return [name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX)]

    def info(self, session_id: str) -> SessionInfo:
        self._check_open()
        check_session_id(session_id)
        self._lstat_dir(session_id)
        path = self.path(session_id)
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):   # (sessions/ a file: no session)
            raise self.not_found(session_id) from None
        except OSError as exc:
            raise SessionUnreadable(f"session {session_id}: cannot stat {path}: "
                                    f"{exc.strerror}") from None
        return self._info(session_id)

    def _info(self, sid: str) -> SessionInfo:
        from .rowmodel import utc_time  # (the files' times as every listing prints them)
        from .sessiondata import SessionInfo

        self._check_open()      # (iter_sessions: closed meanwhile, no entry after)
        path = os.path.join(self.dir, sid + SUFFIX)
        try:
            lst = os.lstat(path)
        except OSError as exc:
            return SessionInfo(sid, None, None, None, None, None, 0, STATE_UNREADABLE,
                               "session_unreadable", exc.strerror)
        mtime = utc_time(lst.st_mtime)
        if not SESSION_ID_RE.match(sid):
            return SessionInfo(sid, None, mtime, None, None, None, lst.st_size, STATE_REFUSED,
                               "invalid_ref", "the file name is not a valid session id")
        try:
            f, hdr = self._open_checked(sid)
        except SessionRefused as exc:
            return SessionInfo(sid, None, mtime, None, None, None, lst.st_size, STATE_REFUSED,
                               exc.reason, exc.message)
        except (MemctlError, OSError) as exc:
            return SessionInfo(sid, None, mtime, None, None, None, lst.st_size, STATE_UNREADABLE,
                               "session_unreadable", str(exc))
        with f:
            created = hdr.get("created") if isinstance(hdr.get("created"), str) else None
            mtime = utc_time(f.st.st_mtime)
            tail, torn = f.capped_last_lines()
            state, reason, detail = STATE_OK, None, None
            # The first problem of the file is reported (the lowest line
            # number): the first one in the last lines (by seq order and
            # parse) or the first one of the pass over every line (by
            # shape), whichever comes first; before 2026-12-07 the last one
            # found in the last lines hid an earlier one.
            tail_problem: tuple[int, str] | None = None
            last = None
            prev = None
            line: bytes | None        # the loop below: complete lines, then possibly the torn tail
            for off, tail_line in tail:
                kind, obj = _classify_capped(tail_line)
                if kind != "record":
                    if tail_problem is None:
                        tail_problem = (f.line_number(off), kind)
                    last = None
                    prev = None
                    continue
                if prev is not None and obj["seq"] != prev + 1 and tail_problem is None:
                    k = SEQ_GAP if obj["seq"] > prev + 1 else (
                        SEQ_DUPLICATE if obj["seq"] == prev else SEQ_REGRESSION)
                    tail_problem = (f.line_number(off), k)
                prev = last = obj["seq"]
            # (a last seq beyond a position, 2^63-1, counts no records: null,
            # not a number no JSON reader takes)
            records = last + 1 if last is not None and last < MAX_POSITION else None
            messages = compactions = 0
            events = 0
            lines_seen = 0
            problem: tuple[int, str] | None = None    # the first one of this pass
            for off, item in f.capped_lines(0):
                if item is None:
                    break
                lines_seen += 1
                if isinstance(item, HugeLine):
                    if not (item.has_event and not not_an_event(item.head)):
                        # judged by its first and last bytes (a huge tool
                        # output is not held): as the lines below are
                        typed = _TYPED.match(item.head)
                        if (lines_seen > 1 and item.is_object()
                                and _seq_beyond_64_bits(item.head)):
                            # a seq beyond 64 bits is none to the readers: no
                            # record, no message, a corrupt line, as a short
                            # one parses (before 2026-12-07 it was a message)
                            if problem is None:
                                problem = (lines_seen, NO_SEQ)
                        elif item.has_event:
                            if typed and typed.group(1) == b"message" and item.seq() is not None:
                                messages += 1
                        elif item.is_object():
                            if lines_seen > 1 and (typed is None or typed.group(1) == b"message"):
                                messages += 1
                        elif problem is None:
                            problem = (lines_seen, NOT_JSON)
                        continue
                    # a huge line that may be an event (lecode writes none): read
                    _start, line = f.line_at(off)
                    if line is None:
                        break
                else:
                    line = item
                if lines_seen == 1:
                    continue             # the header (checked when the file was opened)
                if _EVENT_MARK in line:
                    kind, obj = _classify(line)
                    if kind == "record" and obj.get("type") == "event" and event_line(line):
                        events += 1
                        if obj.get("event") == "compact":
                            compactions += 1
                        continue
                    # (an event no reader applies is no message either: the
                    # readers take its parsed type, see event_line)
                    if kind == "record" and obj.get("type") == "message":
                        messages += 1
                    continue
                bare = line.strip(b" \t\r")  # JSON whitespace: a CRLF line is an object too
                listed = _LISTED_TYPED.match(line)
                if listed is not None and bare.endswith(b"}"):
                    # Cheap structural check: a line that begins as the
                    # writer writes a record and ends with }.  (No parse:
                    # see validate --deep.)
                    if listed.group(1) == b"message":
                        messages += 1
                    continue
                # any other line is parsed: an object in another shape, or a
                # type written with JSON escapes ("\u0065vent": an event to
                # the readers, not applied, and no message)
                kind, obj = _classify(line)
                if kind != "record":
                    if problem is None:
                        problem = (lines_seen, kind)
                elif obj.get("type") == "message":
                    messages += 1
            first = min((p for p in (tail_problem, problem) if p is not None), default=None)
            if first is not None:
                state, reason, detail = STATE_CORRUPT, first[1], f"line {first[0]}: {first[1]}"
            if state == STATE_OK and torn:
                state, reason, detail = STATE_TORN, TORN_TAIL, "the last line is an append in flight"
            if state == STATE_OK and records is not None and records != lines_seen:
                state, reason = STATE_CORRUPT, SEQ_GAP
                detail = f"{lines_seen} complete lines but the last seq is {last}"
            return SessionInfo(sid, created, mtime, records, messages, compactions, f.size,
                               state, reason, detail)

    def scan(self, session_id: str) -> Iterator[ScanItem]:
        """Every line with its number: records, corruption (with its kind) and
        the torn tail.  Refuses symlinks; does not check the header's project.

        Each complete line that parses as an object with a seq yields exactly
        one ``kind == "record"`` item carrying the record; a problem about such
        a line (seq order, header, undo target) is an extra item just before
        it, with ``record=None``.  Lines that do not parse yield one corruption
        item (``record=None``)."""
        f = self._open(session_id)
        return self._scan(f)

    def _scan(self, f: _File) -> Iterator[ScanItem]:
        from .scanitem import ScanItem

        with f:
            prev: int | None = None
            lineno = 0
            for off, line in f.lines(0):
                self._check_open()          # (closed meanwhile: no item read ahead)
                lineno += 1
                if line is None:
                    yield ScanItem(lineno, off, TORN_TAIL, detail="an append in flight (no final newline)")
                    return
                kind, obj = _classify(line)
                if kind != "record":
                    if lineno == 1:
                        yield ScanItem(lineno, off, BAD_HEADER, detail=str(obj))
                    yield ScanItem(lineno, off, kind, detail=str(obj))
                    prev = None   # resynchronise on the next record
                    continue
                seq = obj["seq"]
                if lineno == 1 and (seq != 0 or obj.get("type") != "session"):
                    yield ScanItem(lineno, off, BAD_HEADER, seq, None, "line 1 is not a seq-0 session header")
                if prev is not None and seq != prev + 1:
                    if seq == prev:
                        k = SEQ_DUPLICATE
                    elif seq < prev:
                        k = SEQ_REGRESSION
                    else:
                        k = SEQ_GAP
                    yield ScanItem(lineno, off, k, seq, None, f"seq {seq} after {prev}")
                    prev = max(prev, seq)
                else:
                    prev = seq
                is_event = obj.get("type") == "event" and event_line(line)
                if is_event and obj.get("event") in ("undo", "redo") and bad_target(obj):
                    yield ScanItem(lineno, off, BAD_TARGET, seq, None,
                                   "undo/redo target must be [first, last] entirely before the event")
                yield ScanItem(lineno, off, "record", seq, obj, event=is_event)


# --------------------------------------------------------------------------
# The writer


class ClosesOnExit:
    """A resource (file descriptors, a database connection) whose ``close``
    is idempotent: a context manager that closes it, and closes it when
    collected, as a last resort."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except KeyboardInterrupt:
            # A Ctrl-C that lands in the close (a signal handler runs in
            # __del__ too) is not let end it: ``close`` is idempotent, and
            # called again it closes what the interrupt left open (each
            # resource is closed or still recorded at any point).  The
            # interrupt is raised once it is done; Python reports it from
            # here, as it did.  (One that lands as __del__ is entered, before
            # the try, still ends it: nothing here can run first.)
            while True:
                try:
                    self.close()
                    break
                except KeyboardInterrupt:
                    continue
                except Exception:
                    break
            raise
        except Exception:
            pass


class SessionWriter(ClosesOnExit):
    """Appends records to one session; holds ``<id>.lock`` until closed.

    Each append writes one whole line with a single ``write`` on an
    ``O_APPEND`` descriptor, then ``fsync``s.  :meth:`append_message` and
    :meth:`append_event` write only what the store contract allows (see
    there); :meth:`append_record` writes a record as given.  ``exclusions``
    is the session's ExclusionReader (its project's generation bounds the
    epochs written); None: no facts database, generation 0.
    """

    def __init__(self, session_id: str, path: str, file: io.FileIO, lock: io.FileIO, *,
                 next_seq: int, exclusions: ExclusionReader | None = None) -> None:
        """``file``: the transcript opened to append; ``lock``: its
        ``<id>.lock``, locked (:func:`lock_session`); both owned from here."""
        self.session_id = session_id
        self.path = path
        self._file = file
        self._lock = lock
        self.next_seq = next_seq
        self._exclusions = exclusions
        self._generation = 0     # the highest generation read (generations only rise)

    def append_record(self, record: dict[str, Any]) -> int:
        """Append ``record`` with the next seq (any ``seq`` it holds is replaced);
        the other keys are kept as given, unchecked: the raw writer (the
        header, records copied as they are).  Messages and events go through
        :meth:`append_message` and :meth:`append_event`."""
        if self._file.closed or self._lock.closed:
            # (the lock closed alone: a child forked while the writer was
            # open, which let go of its copy of the lock)
            raise UsageError(f"session {self.session_id}: writer is closed")
        if not isinstance(record, dict):
            raise UsageError("a record is a JSON object")
        seq = self.next_seq
        body = {"seq": seq}
        body.update((k, v) for k, v in record.items() if k != "seq")
        try:
            line = orjson.dumps(body) + b"\n"
        except TypeError as exc:
            raise UsageError(f"record is not JSON-serialisable: {exc}") from None
        if b"null" in line and _non_finite(body):
            # orjson writes NaN and the infinities as null: the record read
            # back would not be the one given (JSON has no such number)
            raise UsageError("record is not JSON-serialisable: a number is NaN or infinite, "
                             "which JSON cannot hold")
        fd = self._file.fileno()
        try:
            before = os.fstat(fd).st_size
        except OSError as exc:
            raise StoreWriteError(f"{self.path}: append failed: {exc.strerror or exc}") from None
        try:
            write_all(fd, line)
            os.fsync(fd)
            self.next_seq = seq + 1
        except BaseException as exc:
            # an append that raises wrote nothing: an I/O error, or a Ctrl-C
            # after the line (or a piece of it) was written and before it was
            # counted, whose seq the next append gave again, or ran its line
            # into the torn one
            try:
                os.ftruncate(fd, before)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise StoreWriteError(f"{self.path}: append failed: "
                                      f"{exc.strerror or exc}") from None
            raise
        return seq

    @staticmethod
    def _check_reserved(kind: str, reserved: tuple[str, ...], extra: dict[str, Any]) -> None:
        for key in reserved:
            if key in extra:
                raise UsageError(f"{key!r} is reserved in a {kind} record ({', '.join(reserved)} "
                                 "are set by the writer); it cannot be given as an extra field")

    def _check_epoch(self, rec: dict[str, Any]) -> None:
        """The store contract's epoch: a generated message (assistant, tool,
        synthetic notification) carries the project's exclusion generation
        captured before the request that produced it; any epoch given is a
        non-negative integer not ahead of the generation (:func:`epoch_ahead`)."""
        synthetic = rec.get("synthetic", False)
        if type(synthetic) is not bool:
            raise UsageError(f"synthetic is true or false, not {_short(synthetic)}")
        if "epoch" not in rec:
            if is_generated(rec):
                what = "synthetic notification" if rec.get("synthetic") else f"{rec['role']} message"
                raise UsageError(
                    f"a generated {what} carries epoch=: the project's exclusion generation "
                    "captured before the request that produced it (project.generation()); "
                    "it is not filled in at write time, when a forget may have happened meanwhile")
            return
        epoch = rec["epoch"]
        if not _is_int(epoch):
            raise UsageError(f"epoch is an integer (the project's exclusion generation), "
                             f"not {_short(epoch)}")
        if epoch < 0:
            raise UsageError(f"epoch {epoch} is negative; it is the project's exclusion "
                             "generation, 0 or more")
        if epoch_ahead(epoch, self._generation):
            if self._exclusions is not None:
                self._generation = max(self._generation, self._exclusions.generation())
            if epoch_ahead(epoch, self._generation):
                raise UsageError(f"epoch {epoch} is ahead of the project's exclusion generation "
                                 f"{self._generation}; an epoch is the generation captured before "
                                 "the request (validate reports session.epoch_ahead)")

    def append_message(self, role: str, content: Any, /, **extra: Any) -> int:
        """``{"seq","type":"message","role","content",...extra}``; returns the seq.

        Refused (UsageError, nothing written): an extra ``seq`` or ``type``;
        a generated message (``assistant``, ``tool``, a ``user`` one with ``synthetic=True``)
        without ``epoch``; an ``epoch`` that is not an integer, is negative or
        is ahead of the project's generation; a ``synthetic`` that is not a
        bool."""
        if role not in ROLES:
            raise UsageError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
        if not isinstance(content, (str, list)):
            raise UsageError("message content is a string or a list of parts")
        self._check_reserved("message", MESSAGE_KEYS, extra)
        rec = {"type": "message", "role": role, "content": content}
        rec.update(extra)
        self._check_epoch(rec)
        return self.append_record(rec)

    def append_event(self, event: str, /, **fields: Any) -> int:
        """``{"seq","type":"event","event":event,...fields}``; returns the seq.

        Refused (UsageError, nothing written): an extra ``seq`` or ``type``;
        an ``undo``/``redo`` whose ``target`` is not ``[first, last]`` with
        ``0 <= first <= last <`` its own seq (:func:`bad_target`, the rule
        of ``validate``'s ``session.bad_target``; a tuple is taken as the
        list it is written as); a ``learning`` event whose ``status`` or
        ``reason_counts`` ``validate --deep`` would report
        (:func:`learning_problems`)."""
        if not isinstance(event, str) or not event:
            raise UsageError("an event has a name")
        self._check_reserved("event", EVENT_KEYS, fields)
        rec: dict[str, Any] = {"type": "event", "event": event}
        rec.update(fields)
        if event in ("undo", "redo") and type(rec.get("target")) is tuple:
            rec["target"] = list(rec["target"])     # (the same JSON array)
        if event in ("undo", "redo") and bad_target({**rec, "seq": self.next_seq}):
            raise UsageError(f"{event} target {_short(fields.get('target'))} is not "
                             f"[first, last] with 0 <= first <= last < {self.next_seq} "
                             "(this event's seq)")
        if event == LEARNING_EVENT:
            for _code, message, _key in learning_problems(rec):
                raise UsageError(message)
        return self.append_record(rec)

    def close(self) -> None:
        # Each file object's close is one call, done or not: an interrupt
        # anywhere leaves each either closed or still here to close.  (The
        # descriptors were ints, each cleared before it was closed: an
        # interrupt in between left the lock held until the process ended.)
        for f in (self._file, self._lock):
            try:
                f.close()
            except OSError:
                pass



# --------------------------------------------------------------------------
# Helpers


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def check_range(start: Any, end: Any, *, max_span: int | None) -> None:
    if not _is_int(start) or not _is_int(end) or start < 0 or end < 0:
        raise UsageError("START and END are non-negative integers")
    if start > end:
        raise UsageError(f"bad range {start}..{end}: START is after END")
    if max_span is not None and end - start + 1 > max_span:
        raise UsageError(f"bad range {start}..{end}: at most {max_span} positions "
                         f"(END - START + 1 = {end - start + 1})")


def _check_purpose(purpose: str) -> None:
    if purpose not in PURPOSES:
        raise UsageError(f"unknown purpose {purpose!r}; use working or durable")


def _ensure_dirs(*paths: str) -> None:
    """Create each directory (and missing parents) with mode 0700; an
    existing symbolic link or non-directory is refused."""
    for p in paths:
        final = Path(os.path.abspath(p))

        def refuse_final(level: Path, st: os.stat_result) -> str | None:
            # called by make_dirs below, in this iteration
            if level == final and (stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode)):  # noqa: B023
                return f"{level}: not a directory (or a symbolic link); refused"
            return None

        make_dirs(final, strict=True, existing=refuse_final)


def _non_finite(value: Any) -> bool:
    """Whether ``value`` (a record's values, at any depth, in every container
    orjson writes: dicts, lists, tuples, dataclasses, enum members) holds a
    float that is NaN or infinite."""
    import dataclasses
    import enum

    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(map(_non_finite, value.values()))
    if isinstance(value, (list, tuple)):
        return any(map(_non_finite, value))
    if isinstance(value, enum.Enum):
        return _non_finite(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_non_finite(getattr(value, f.name, None)) for f in dataclasses.fields(value))
    return False


# The session locks this process holds (each writer's ``<id>.lock``): a
# child forked without exec (a multiprocessing pool's worker) closes its copy
# of each at once, so that the parent's close lets go of the lock (it kept
# it until the child exited: the parent could not open its own session
# again, StoreBusy), as a child forked inside a Markdown writer's turn does
# (``markdown.writing``); the child's writer, its lock closed, appends no more.
# A lock is recorded as soon as it is opened, before its flock: a fork by
# another thread between the two leaves the child a copy it closes (before
# 2026-12-07 it was recorded after the flock, and a fork in between left
# the child a copy nothing closed, the parent's session StoreBusy again).
# (No lock is held across a fork for it: an interrupt in an at-fork hook
# would leave such a lock held, and the next fork waiting for it forever.)
_LOCKS: weakref.WeakSet[io.FileIO] = weakref.WeakSet()


def _let_go_in_child() -> None:
    for lock in list(_LOCKS):
        try:
            lock.close()        # the child's copy; the parent keeps the lock
        except OSError:
            pass
    _LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_in_child)


def lock_session(sessions_dir: str, session_id: str) -> io.FileIO:
    """Take the session's ``<id>.lock`` (the lock every writer of the session
    holds), without waiting; the lock file, locked (owned by the file object from
    the open on: :func:`~.atomic.open_owned`).  StoreBusy (exit 6) while another
    writer holds it: another process's, or another of this process's (the
    lock belongs to an open file, not to a process)."""
    path = os.path.join(sessions_dir, session_id + LOCK_SUFFIX)
    try:
        lock = open_owned(path, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        if is_link_refusal(exc):
            raise SessionRefused(f"{path} is a symbolic link; refused", "refused_symlink") from None
        raise StoreWriteError(f"{path}: cannot open lock: {exc.strerror}") from None
    _LOCKS.add(lock)            # (before the flock: see _LOCKS)
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        _LOCKS.discard(lock)
        lock.close()
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StoreBusy(f"session {session_id} is being written by another writer, of "
                            f"another process or of this one ({path} is locked)") from None
        raise StoreWriteError(f"{path}: cannot lock: {exc.strerror}") from None
    return lock


__all__ = [
    "SessionStore", "SessionWriter", "Snapshot", "SessionInfo", "ScanItem", "UndoState",
    "visible", "is_generated", "epoch_number", "epoch_hides", "epoch_ahead", "undo_target",
    "bad_target", "event_line", "learning_problems", "header_problem",
    "SessionNotFound", "SessionRefused",
    "SessionUnreadable", "SessionCorrupt", "SpanHidden", "PositionMissing", "REASONS",
    "CORRUPTION_KINDS", "NO_EXCLUSIONS", "StoreExclusions",
]
