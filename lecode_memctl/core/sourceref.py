"""SourceRef, its canonical digest, validation statuses and reason codes.

Shared by sessions (which capture and validate references), facts (which
store them) and the audit (which reports them).  Store contract, "SourceRef
and its digest" and "Validation statuses".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import orjson

from ._lazy import lazy_compile
from ._record import record
from .errors import MemctlError, StoreCorrupt, UsageError
from .hashing import sha256

MAX_SPAN = 200  # positions, inclusive span min(seqs)..max(seqs)
MAX_POSITION = (1 << 63) - 1
"""The largest transcript position a store can name (what SQLite stores; a
larger integer in a transcript is a seq no exclusion can hold)."""
SESSION_ID_RE = lazy_compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}\Z")  # \Z: "$" would accept a trailing newline
SESSION_SUFFIX = ".jsonl"          # sessions/<id>.jsonl

# Validation statuses.
VALID = "valid"
MISSING = "missing"
STALE = "stale"
HIDDEN = "hidden"
UNVERIFIED = "unverified"
STATUSES = (VALID, MISSING, STALE, HIDDEN, UNVERIFIED)

# Machine-readable reasons, one fixed vocabulary for every caller.
REASONS: dict[str, tuple[str, str]] = {
    # reason: (status, meaning)
    "session_missing": (MISSING, "the session file does not exist"),
    "session_unreadable": (MISSING, "the session file cannot be opened or read"),
    "position_missing": (MISSING, "a referenced position is not (yet) in the transcript"),
    "digest_mismatch": (STALE, "the records in the span no longer hash to the digest"),
    "records_corrupt": (STALE, "the span holds a corrupt line or a seq gap"),
    "not_message": (STALE, "a referenced position is an event, not a message"),
    "excluded": (HIDDEN, "a forget installed an exclusion for a referenced position"),
    "undone": (HIDDEN, "the newest undo/redo covering a referenced position is an undo"),
    "cleared": (HIDDEN, "a referenced position precedes the newest clear (purpose working)"),
    "epoch": (HIDDEN, "a referenced generated message predates the exclusion generation"),
    "refused_symlink": (HIDDEN, "the session file is a symbolic link"),
    "refused_project": (HIDDEN, "the session belongs to another project"),
    "refused_header": (HIDDEN, "the session has no valid header record"),
    "invalid_ref": (HIDDEN, "the reference itself is malformed (id syntax, span, digest)"),
    "legacy_provenance": (UNVERIFIED, "legacy provenance with no SourceRef"),
}


def stored_ref_ok(session_id: Any, seqs: Any, digest: Any) -> bool:
    """Whether stored values make a SourceRef without any of the constructor's
    errors, decided in few steps (see :meth:`SourceRef.checked_fast`): a valid
    session id, a non-empty list of ascending distinct non-negative integers
    spanning at most ``MAX_SPAN`` positions, 64 lower-case hex digits."""
    return positions_ok(seqs) and id_and_digest_ok(session_id, digest)


def id_and_digest_ok(session_id: Any, digest: Any) -> bool:
    """:func:`stored_ref_ok`'s rule for the session id and the digest."""
    if not _session_id_ok(session_id):
        return False
    return type(digest) is str and is_digest(digest)


def positions_ok(seqs: Any) -> bool:
    """:func:`stored_ref_ok`'s rule for the positions alone: a non-empty list
    of ascending distinct non-negative integers spanning at most
    ``MAX_SPAN`` positions."""
    if type(seqs) is not list or not seqs:
        return False
    if len(seqs) == 1:
        s = seqs[0]
        return type(s) is int and s >= 0
    prev = -1
    for s in seqs:
        if type(s) is not int or s <= prev:
            return False
        prev = s
    return bool(prev - seqs[0] < MAX_SPAN)


def is_digest(value: object) -> bool:
    """Whether ``value`` is text of 64 lower-case hex digits, as a SHA-256
    ``hexdigest`` writes it: the text, decoded (``bytes.fromhex``: hex
    digits in pairs, ASCII whitespace between them skipped, anything else
    refused) and written again (``hex``: lower case, no whitespace), is
    itself.  (The regular expression ``[0-9a-f]{64}`` said the same in
    twice the time: 0.6 us a digest, twice per fact of a listing.)"""
    if not isinstance(value, str):
        return False
    text = str.__str__(value)   # the characters themselves, whatever a str subclass says
    if len(text) != 64:
        return False
    try:
        return bytes.fromhex(text).hex() == text
    except ValueError:
        return False


@functools.lru_cache(maxsize=1024)
def _session_id_ok(session_id: object) -> bool:
    """:func:`check_session_id` as a yes/no, remembered (a store has few sessions)."""
    return type(session_id) is str and SESSION_ID_RE.match(session_id) is not None


def session_file_id(name: str, suffix: str = SESSION_SUFFIX) -> str | None:
    """The session id of a ``sessions/`` entry named ``<id><suffix>`` (the
    transcript ``.jsonl`` or, with ``suffix=".lock"``, its lock) when ``<id>``
    has the valid syntax; None for any other name."""
    if not name.endswith(suffix):
        return None
    sid = name[:-len(suffix)]
    return sid if SESSION_ID_RE.match(sid) else None


def check_session_id(session_id: object) -> str:
    """The id unchanged, or ``UsageError``: exact ids only, checked before any file access."""
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        shown = repr(session_id)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise UsageError(
            f"invalid session id {shown}: ids are 1-128 characters of A-Z a-z 0-9 _ -, "
            "starting with a letter or digit (exact ids only, never a path or prefix)")
    return session_id


class RecordsUndigestible(StoreCorrupt):
    """The records of a span have no canonical bytes: orjson refuses to
    serialize them (a value nested deeper than its 255 levels, which its
    parser, good to 1024, accepted), or one holds a number beyond a double
    (``1e400``, which orjson cannot parse: :func:`canonical_bytes`).  lecode,
    hashing with orjson too, cannot digest them either: a reference to them
    can never validate.  Validation
    reports the span ``stale`` (``records_corrupt``) with :attr:`detail`; a
    command that needs the digest (``read``) fails with exit 5."""

    def __init__(self, message: str, *, detail: str, seq: object = None) -> None:
        super().__init__(message)
        self.detail = detail
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def held_bytes(data: bytes) -> bytes:
    """``data`` (orjson's output) as bytes of their own size, for bytes held
    among many: orjson's keep the buffer they were written in, 4 KiB or
    more for a few hundred bytes (``sys.getsizeof`` does not show it).
    Bytes used at once and let go need no copy."""
    return bytes(memoryview(data))


class NonFiniteRecord(dict[str, Any]):
    """A record holding a number beyond a double (``1e400``) anywhere in it:
    valid JSON that orjson cannot parse, read by the standard library's
    parser as an infinite float (``sessions.load_record``, the only way
    such a float gets into a record, marks it so).  A record like any other
    to every reader, but it has no digest (:func:`canonical_bytes`)."""

    __slots__ = ()


_UNDIGESTIBLE_DETAIL = ("it holds a number beyond a double, which orjson cannot parse: the "
                        "contract's digest of the records as parsed from their lines cannot be "
                        "computed")


def canonical_bytes(records: Iterable[Mapping[str, Any]]) -> bytes:
    """The JSON array of the records, keys sorted at every level, no whitespace, UTF-8.
    :class:`RecordsUndigestible` when orjson cannot serialize them, or when a
    record holds a number beyond a double (a :class:`NonFiniteRecord`): the
    contract's digest is ``orjson.dumps`` of the records as parsed from
    their lines, and orjson cannot parse such a line; memctl reads it as an
    infinite float, which orjson would write ``null`` -- a digest over that
    would not see the number edited to another beyond a double, or to
    ``null``.  The one check of every digest memctl computes (snapshots,
    validation, the audit, ``correct``), at no cost to other records:
    orjson refuses the marked record itself (``OPT_PASSTHROUGH_SUBCLASS``
    without a ``default``)."""
    recs = list(records)
    try:
        return orjson.dumps(recs, option=orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError:
        pass
    for r in recs:
        if type(r) is NonFiniteRecord:
            seq = r.get("seq")
            where = f"the record at seq {seq}" if seq is not None else "a record of the span"
            detail = f"{where} cannot be digested ({_UNDIGESTIBLE_DETAIL})"
            raise RecordsUndigestible(f"{detail}: no reference to it can be computed or validated",
                                      detail=detail, seq=seq)
    try:   # (a subclass of str, int, dict or list made in memory: written as its base)
        return orjson.dumps(recs, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        seq = None
        for r in recs:   # the first record that fails alone: the one to name
            try:
                orjson.dumps(r, option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError:
                seq = r.get("seq") if isinstance(r, Mapping) else None
                break
        where = f"the record at seq {seq}" if seq is not None else "a record of the span"
        detail = f"{where} cannot be digested ({exc}; orjson serializes at most 255 levels of nesting)"
        raise RecordsUndigestible(f"{detail}: no reference to it can be computed or validated",
                                  detail=detail, seq=seq) from None


def holds_non_finite(value: Any) -> bool:
    """Whether a non-finite float is anywhere in ``value`` (iterative: a
    record may nest deep)."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            extend(v.values())
        elif isinstance(v, list):
            extend(v)
    return False


def canonical_digest(records: Iterable[Mapping[str, Any]]) -> str:
    """``sha256(orjson.dumps(records, option=orjson.OPT_SORT_KEYS)).hexdigest()``."""
    return sha256(canonical_bytes(records)).hexdigest()


StoredSource = tuple[tuple[int, ...], str]
"""A reference into a session known from context, as its stored values:
``(seqs, digest)``, each checked as :class:`SourceRef` checks it (the
whole-store evaluation's form: ``FactStore.stored_sources_by_session``,
``SessionStore.validate_stored``)."""


@record(frozen=True)
class SourceRef:
    """An immutable reference to visible message positions of one session."""

    session_id: str
    seqs: tuple[int, ...]
    digest: str

    def __post_init__(self) -> None:
        check_session_id(self.session_id)
        seqs = tuple(self.seqs)
        object.__setattr__(self, "seqs", seqs)
        if not seqs:
            raise UsageError("a source reference needs at least one position")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seqs):
            raise UsageError("source positions must be non-negative integers")
        if list(seqs) != sorted(set(seqs)):
            raise UsageError("source positions must be sorted and distinct")
        if seqs[-1] - seqs[0] + 1 > MAX_SPAN:
            raise UsageError(f"a source reference spans at most {MAX_SPAN} positions")
        if not is_digest(self.digest):
            raise UsageError("a digest is 64 lower-case hex digits")
        # hashed once: an evaluation keys dicts and sets by reference many times
        object.__setattr__(self, "_hash", hash((self.session_id, seqs, self.digest)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined, no-any-return]

    def __reduce__(self) -> tuple[Any, tuple[str, tuple[int, ...], str]]:
        # pickled as its three values, the hash made again where it is read:
        # a text's hash differs from one process to another (PYTHONHASHSEED),
        # and a ref unpickled with the hash of the process that pickled it was
        # equal to its twin made here but not found in a set of them
        return (SourceRef.of_checked, (self.session_id, self.seqs, self.digest))

    @classmethod
    def checked_fast(cls, session_id: str, seqs: Any, digest: Any) -> SourceRef | None:
        """The SourceRef of stored values when they are plainly well formed
        (a known-good session id shape, a JSON list of distinct ascending
        non-negative integers within ``MAX_SPAN``, 64 hex digits), built
        without the constructor's per-field checks; None when any of them is
        not, so that the caller builds it the checked way and reports the
        constructor's own error.  The whole-store listing builds one per
        revision: this is the same rule, decided in fewer steps."""
        if not stored_ref_ok(session_id, seqs, digest):
            return None
        return cls.of_checked(session_id, tuple(seqs), digest)

    @classmethod
    def of_checked(cls, session_id: str, seqs: tuple[int, ...], digest: str) -> SourceRef:
        """The SourceRef of values already checked as the constructor checks
        them (:func:`stored_ref_ok`, or another SourceRef's), made without
        checking them again."""
        ref = object.__new__(cls)
        ref.__dict__.update(session_id=session_id, seqs=seqs, digest=digest,
                            _hash=hash((session_id, seqs, digest)))
        return ref

    @property
    def start(self) -> int:
        return self.seqs[0]

    @property
    def end(self) -> int:
        return self.seqs[-1]

    def label(self) -> str:
        """``session:first-last`` (or ``session:seq``), for people."""
        if self.start == self.end:
            return f"{self.session_id}:{self.start}"
        return f"{self.session_id}:{self.start}-{self.end}"

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "seqs": list(self.seqs), "digest": self.digest}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SourceRef:
        if not isinstance(doc, Mapping):
            raise UsageError("a source reference is an object with session_id, seqs and digest")
        extra = set(doc) - {"session_id", "seqs", "digest"}
        if extra:
            raise UsageError(f"unknown source reference keys: {', '.join(sorted(extra))}")
        seqs = doc.get("seqs")
        if not isinstance(seqs, list):
            raise UsageError("seqs must be a list of integers")
        sid, digest = doc.get("session_id"), doc.get("digest")
        if type(sid) is str and type(digest) is str:
            ref = cls.checked_fast(sid, seqs, digest)    # the same rule in fewer steps
            if ref is not None:
                return ref
        # untyped JSON values: __post_init__ checks each one (and says what is wrong)
        return cls(sid, tuple(seqs), digest)  # type: ignore[arg-type]


@record(frozen=True)
class SourceStatus:
    """The outcome of validating one reference."""

    status: str
    reason: str | None = None      # a key of REASONS; None when valid
    detail: str | None = None      # one line for people (never stored text)
    seq: int | None = None         # the position the reason is about, when there is one

    @property
    def ok(self) -> bool:
        return self.status == VALID

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "detail": self.detail, "seq": self.seq}


def status_for(reason: str, detail: str | None = None, seq: int | None = None) -> SourceStatus:
    return SourceStatus(REASONS[reason][0], reason, detail, seq)


class EvaluatedStatuses(Mapping[SourceRef, SourceStatus]):
    """The statuses of every source an evaluation validated, kept small: only
    the sources that are not valid are stored; any other source of the
    evaluated facts is valid.  The facts listed with them are read in the
    state of the database the evaluation read (``FactStore.one_state``: a
    read-only open is one snapshot; a writer's store is read through a
    second, read-only connection in one transaction; tests/test_writer_snapshot.py).
    The exclusions come from the SessionStore's reader, which may be newer
    (a forget committed meanwhile hides more, never less).  Iterating
    gives the sources that are not valid."""

    _VALID = SourceStatus(VALID)

    def __init__(self, not_valid: dict[SourceRef, SourceStatus]) -> None:
        self._bad = not_valid
        # the same, keyed by (session id, seqs, digest): the listing's stored values
        self.by_values = {(r.session_id, r.seqs, r.digest): st for r, st in not_valid.items()}

    def __getitem__(self, ref: SourceRef) -> SourceStatus:
        return self._bad.get(ref, self._VALID)

    def __iter__(self) -> Iterator[SourceRef]:
        return iter(self._bad)

    def __len__(self) -> int:
        return len(self._bad)


class ExclusionReader(Protocol):
    """What visibility needs from the facts database: content-free exclusions and
    the project's exclusion generation.  FactStore implements it; tests may use
    :class:`MemoryExclusions`."""

    def generation(self) -> int: ...

    def excluded_seqs(self, session_id: str) -> frozenset[int]: ...


class SessionReader(Protocol):
    """What facts, context and the reports need from "something that reads
    sessions": ``SessionStore`` implements it (``bind_facts``, when a reader
    has it, is optional and looked up with ``hasattr``)."""

    def path(self, session_id: str) -> str: ...

    def session_ids(self, *, unlistable_ok: bool = False) -> list[str]: ...

    def header(self, session_id: str) -> dict[str, Any]: ...

    def records(self, session_id: str, start: int, end: int) -> list[dict[str, Any]]: ...

    def events(self, session_id: str, start: int = 0,
               kinds: set[str] | None = None) -> list[dict[str, Any]]: ...

    def scan(self, session_id: str) -> Iterator[Any]: ...

    def validate_source(self, ref: SourceRef, purpose: str = "working") -> SourceStatus: ...

    def validate_many(self, refs: Iterable[SourceRef], purpose: str = "durable"
                      ) -> dict[SourceRef, SourceStatus]: ...

    def validate_sessions(self, groups: Iterable[tuple[str, list[SourceRef]]],
                          purpose: str = "durable") -> Iterator[dict[SourceRef, SourceStatus]]: ...


def accepted(sessions: SessionReader, session_id: str) -> bool:
    """Whether this store's readers read the session at all: the checks every
    reader makes on opening it (``SessionStore.header``: a regular file, not
    a symbolic link, a session header of this session id naming this store's
    project).  A session every reader refuses (``refused_project``,
    ``refused_header``, ``refused_symlink``) or cannot open holds nothing this
    store's generation can hide: what a forget or a redaction would
    invalidate is counted only in the sessions accepted (``forget_impact``,
    ``redact.plan_redaction``)."""
    try:
        sessions.header(session_id)
    except (MemctlError, OSError):
        return False
    return True


class NoExclusions:
    """A project with no facts database: generation 0, nothing excluded."""

    def generation(self) -> int:
        return 0

    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        return frozenset()


class MemoryExclusions:
    """An in-memory ExclusionReader (tests, dry runs)."""

    def __init__(self, generation: int = 0,
                 excluded: Mapping[str, Iterable[int]] | None = None) -> None:
        self._generation = generation
        self._excluded = {k: frozenset(v) for k, v in (excluded or {}).items()}

    def generation(self) -> int:
        return self._generation

    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        return self._excluded.get(session_id, frozenset())

    def exclude(self, session_id: str, seqs: Iterable[int]) -> None:
        self._excluded[session_id] = self.excluded_seqs(session_id) | frozenset(seqs)
        self._generation += 1
