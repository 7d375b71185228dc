"""``memctl secrets``: find credential-shaped values wherever a store keeps text.

The detectors are detect-secrets' plugins (Yelp's maintained library: AWS
keys, GitHub, GitLab, Slack, Stripe, npm, PyPI, OpenAI and other tokens,
private keys, JWTs, basic-auth URLs, keyword assignments, and high-entropy
strings with its own thresholds), with its default heuristic filters, and
never its network verification, and memctl's own patterns
(:mod:`.secret_plugins`).  ``IPPublicDetector`` is left out: a public
IP address is not a credential.  detect-secrets is imported only when a
:class:`Detector` is built.

Places scanned (a store's every file is walked, symbolic links never
followed):

* ``sessions/<id>.jsonl``: every complete record, hidden ones included,
  each string leaf of the record (binary attachment data excepted) named by
  its JSON path, and a string member the contract does not name (a tool
  call's structured arguments) also as JSON writes it, ``"key": "value"``,
  by the detectors that need a key (:meth:`Detector.member_hits`); lines that do not parse and a torn tail
  as raw text;
* ``facts.sqlite3``: the text of every revision of every fact (read-only
  open); and the raw bytes of ``facts.sqlite3``, ``facts.sqlite3-wal`` and
  ``facts.sqlite3-journal`` (a rollback journal), as printable strings (free
  pages, old WAL frames and journalled pages keep deleted text), a
  value already reported in a live fact text is not reported again there;
* every other regular file (``MEMORY.md``, ``scratchpad.md``, daily logs,
  notes, every ``.bak``, leftover temporary files): its lines.

A finding carries the detector, the place, a masked preview (a few leading
characters and the length) and the value's SHA-256 (for the allowlist and
the redaction marker).  The value itself stays in the object (``_value``,
not a dataclass field: never in ``repr``, ``asdict`` or :meth:`Finding.to_json`) so that ``redact`` can erase
it; nothing in this module prints.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import os
import re
import stat
import string
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

import orjson

from ._lazy import lazy_compile
from .atomic import open_nofollow, open_owned, open_regular, read_file_or_pipe
from .errors import MemctlError, UsageError
from .layout import FACTS_DB, SESSIONS_DIR, Store
from .secret_plugins import PRIVATE_KEY_PLUGINS, base64_bytes

EXCLUDED_PLUGINS = frozenset({"IPPublicDetector"})
# Specific detectors win over generic ones when two find overlapping text.
GENERIC_PLUGINS = ("KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString")
MAX_SCAN_LINE = 1 << 16       # longer lines are scanned in windows of this many characters
WINDOW_OVERLAP = 1 << 10
MIN_RAW_STRING = 8            # printable runs shorter than this in database pages are skipped
_RAW_STRING = lazy_compile(rb"[\t\n\r\x20-\x7e\x80-\xff]{%d,}" % MIN_RAW_STRING)
_PEM_BEGIN = lazy_compile(r"-----BEGIN[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----")
_PEM_END = lazy_compile(r"-----END[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----")
_PEM_END_BYTES = lazy_compile(rb"-----END[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----")

# What follows a text given to :meth:`Detector.scan` (a piece of a file,
# :func:`_file_hits`): nothing (the text is all of it); more lines, which
# may hold the END line of a private key; more lines, none of them one.
TAIL_NONE, TAIL_UNKNOWN, TAIL_NO_END = 0, 1, 2


class PieceTooShort(Exception):
    """A private key block found in a piece of a file may end beyond it: the
    piece is scanned again with more of the file (:func:`_file_hits`)."""

KIND_TRANSCRIPT = "transcript"
KIND_FILE = "file"
KIND_FACT = "fact"
KIND_DATABASE = "database"
KINDS = (KIND_TRANSCRIPT, KIND_FILE, KIND_FACT, KIND_DATABASE)


def detector_slug(secret_type: str) -> str:
    """``AWS Access Key`` -> ``aws-access-key``."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-") or "secret"


def value_hash(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def mask(value: str) -> str:
    """A few leading characters (at most 4, at most a quarter of the value)
    and the length: ``AKIA…(20 chars)``."""
    keep = min(4, len(value) // 4)
    shown = "".join(c if c.isprintable() and c not in "\n\r\t" else "?" for c in value[:keep])
    return f"{shown}…({len(value)} chars)"


def marker(detector: str, value: str) -> str:
    """What redaction writes in place of a value."""
    return f"[REDACTED:{detector}:{value_hash(value)[:6]}]"


# --------------------------------------------------------------------------
# Findings


@dataclass(frozen=True)
class Finding:
    detector: str
    kind: str                        # transcript, file, fact, database
    file: str                        # relative to the store
    preview: str
    length: int
    hash: str                        # sha256 of the value
    project: str = ""
    session_id: str | None = None
    seq: int | None = None
    path: str | None = None          # JSON path in the record
    line: int | None = None          # 1-based line of the file (or of the field's text)
    offset: int | None = None        # byte offset in the file (database pages)
    fact_id: str | None = None
    revision: int | None = None
    value: InitVar[str] = ""

    def __post_init__(self, value: str) -> None:
        # Not a dataclass field: dataclasses.asdict, repr and == never see it,
        # so no generic encoder can put the value in an output by accident.
        object.__setattr__(self, "_value", value)

    def secret_value(self) -> str:
        """The value itself: for redact and --pattern selection, never for output."""
        value: str = self.__dict__["_value"]
        return value

    def stored_fact_id(self) -> Any:
        """A fact's finding: the fact's id exactly as the database stores it
        (a ``str`` for a TEXT, ``bytes`` for a BLOB, ``facts.InvalidText``
        for a TEXT not UTF-8), what redact forgets; :attr:`fact_id` is the
        id as the listing shows it (a BLOB's bytes decoded), which two
        facts may share.  Not a dataclass field: no output shows it."""
        return self.__dict__.get("_stored_fact_id", self.fact_id)

    @property
    def marker(self) -> str:
        return f"[REDACTED:{self.detector}:{self.hash[:6]}]"

    def shown(self) -> tuple[str, str | None]:
        """``(file, session_id)`` as outputs show them: a session id that holds
        a found value with the value's marker in its place
        (:func:`mask_session_ids`); the real ones otherwise."""
        shown: tuple[str, str | None] | None = self.__dict__.get("_shown")
        return shown if shown is not None else (self.file, self.session_id)

    def place(self) -> str:
        file, session_id = self.shown()
        if self.kind == KIND_TRANSCRIPT and session_id is not None:
            where = f"{session_id}:{self.seq}" if self.seq is not None else \
                f"{file} line {self.line}"
            return f"{where} {self.path}" if self.path else where
        if self.kind == KIND_FACT:
            from .rowmodel import stored_int

            # (a revision stored as no integer is null in the rows, ``-``
            # here, as history and facts print it; it said ``None``)
            rev = stored_int(self.revision)
            return f"fact {self.fact_id} revision {'-' if rev is None else rev}"
        if self.kind == KIND_DATABASE:
            return f"{file} byte {self.offset}"
        if self.line is None:
            return f"{file} (its name)"     # (a value in a file's name: in_name)
        return f"{file} line {self.line}"

    @property
    def in_name(self) -> bool:
        """A value found in the name of a file or directory of the store (not
        in what it holds): kind ``file`` without a ``line``."""
        return self.kind == KIND_FILE and self.line is None

    def shown_project(self) -> str:
        """The project as outputs show it: a found value its name holds
        masked (:func:`mask_store_names`)."""
        shown: str | None = self.__dict__.get("_shown_project")
        return shown if shown is not None else self.project

    def to_json(self) -> dict[str, Any]:
        from .rowmodel import SECRET, stored_int

        file, session_id = self.shown()
        # (a revision or seq stored as no integer -- 2.5, 'abc', a BLOB,
        # true -- is null, as the schema says and the listings give it;
        # before 2026-12-07 it came out as stored, a BLOB as b'\x01' in CSV)
        return SECRET.row(detector=self.detector, kind=self.kind, project=self.shown_project(),
                          file=file, session_id=session_id, seq=stored_int(self.seq),
                          path=self.path, line=self.line, offset=self.offset,
                          fact_id=self.fact_id, revision=stored_int(self.revision),
                          preview=self.preview, length=self.length, hash=self.hash)


def session_id_values(findings: Iterable[Finding],
                      locations: Iterable[str] = (),
                      names: Iterable[str] = ()) -> dict[str, str]:
    """value -> marker of each found value that a location shows: a session
    id, or a file's or directory's name as a user or the agent chose it (a
    note's, a directory's in ``notes/``: :func:`user_named`), of a finding
    or of ``locations`` (the skipped entries' files), wherever the value was
    found -- a password found in a URL in a note's text is the same
    credential when it also names the note.  No output may show it, not
    even as a location.  The layout's own names at the top of the store are
    no credential: the password ``facts`` does not make ``facts.sqlite3`` a
    location to mask (before 2026-12-07 it was shown
    ``[REDACTED:...].sqlite3``).  ``names``: texts read whole, the store's
    own name and path (:func:`mask_store_names`).  Longest value first."""
    if not isinstance(findings, HeldFindings):
        findings = list(findings)
    values = found_values(findings)     # (longest first)
    if not values:
        return {}
    texts = findings.locations if isinstance(findings, HeldFindings) else \
        {text for f in findings for text in (user_named(f.file), f.session_id or "")}
    shown = "\n".join(texts | {user_named(loc) for loc in locations} | set(names))
    return {v: m for v, m in values.items() if v in shown}


#: the store layout's own names at the top of a store (files and
#: directories): no credential, never masked in a location
#: (:func:`hide_in_location`).  Below them every name is chosen by a user
#: or the agent (a note's, a session id's, a day's).
LAYOUT_NAMES = frozenset({FACTS_DB, FACTS_DB + "-wal", FACTS_DB + "-shm", FACTS_DB + "-journal",
                          SESSIONS_DIR, "notes", "daily", "MEMORY.md", "scratchpad.md",
                          "MEMORY.md.bak", "scratchpad.md.bak"})


def _location_parts(path: str) -> list[tuple[str, bool]]:
    """Each component of a store-relative ``path``, and whether a user or
    the agent named it (all but a layout name at the top of the store)."""
    parts = path.split("/")
    return [(comp, not (i == 0 and comp in LAYOUT_NAMES)) for i, comp in enumerate(parts)]


def user_named(path: str) -> str:
    """The components of a store-relative ``path`` a user or the agent
    named, whole (their suffixes too: a value can run into ``.md``), joined
    by ``/``."""
    return "/".join(comp for comp, named in _location_parts(path) if named)


def hide_in_location(path: str, masks: Mapping[str, str]) -> str:
    """A store-relative ``path`` with each value of ``masks`` replaced by its
    marker in the components a user or the agent named, the layout's own
    names at the top of the store as they are."""
    if not masks:
        return path
    return "/".join(hide_values(comp, masks) if named else comp
                    for comp, named in _location_parts(path))


def replace_values(text: str, values: Mapping[str, str], *, bounded: bool = False,
                   loose: Collection[str] = (),
                   tally: dict[str, int] | None = None) -> tuple[str, int]:
    """``text`` with each occurrence of a value of ``values`` replaced by its
    marker, and how many occurrences were replaced: redact's replacement in
    a string, and :func:`hide_values`'.  The occurrences of every value are
    found in ``text`` as it is, each value by its own search
    (:func:`replaced_spans`); overlapping ones make one span, written as the
    markers of the values that make it up in order of their starts, so no
    value is ever partly left and no marker written is searched again.
    (Before 2026-12-07 the values were replaced one after the other, so a
    value inside another's marker, ``token`` in
    ``[REDACTED:github-token:...]``, was replaced in it; then in one pass
    of one alternation, whose leftmost match left the rest of a longer
    value that began later in plain text.)  An occurrence inside a marker
    ``text`` already holds, an earlier run's, is not replaced
    (:func:`existing_markers`: before 2026-12-07 a second run nested it).
    ``bounded``: only the occurrences at word boundaries count
    (:func:`at_boundaries`), but those of a value in ``loose``;
    ``tally``: marker -> how many of its occurrences were replaced, added to."""
    present = [(v, m) for v, m in values.items() if v and v in text]
    if not present:
        return text, 0
    if len(present) == 1 and "[REDACTED:" not in text and tally is None and \
            (not bounded or present[0][0] in loose):
        v, m = present[0]
        return text.replace(v, m), text.count(v)
    out: list[str] = []
    at = n = 0
    for start, end, marks in replaced_spans(text, present, bounded=bounded, loose=loose):
        out.append(text[at:start])
        out.extend(marks)
        at = end
        n += len(marks)
        if tally is not None:
            for mark in marks:
                tally[mark] = tally.get(mark, 0) + 1
    if not n:
        return text, 0
    out.append(text[at:])
    return "".join(out), n


def replaced_spans(text: Any, needles: Iterable[tuple[Any, Any]], *, bounded: bool = False,
                   loose: Collection[Any] = ()) -> list[tuple[int, int, list[Any]]]:
    """The spans of ``text`` (a str or bytes) to replace: each
    ``(needle, marker)``'s occurrences, found by the needle's own search
    (non-overlapping, as ``str.replace`` finds them), merged where they
    overlap, in order: ``(start, end, markers)``, the markers of the
    occurrences that make up the span in order of their starts.  An
    occurrence inside the span the ones before it make (``abc`` in
    ``abcdef``) is covered by them: neither its marker nor its count; one
    inside a marker ``text`` holds (:func:`existing_markers`) is no
    occurrence.  ``bounded``: an occurrence counts only at word boundaries
    (:func:`at_boundaries`; since 2026-12-07, review rv7: ``test`` was
    found in ``pytest``), but one of a needle in ``loose``."""
    # (start, -end, marker): sorted in order of start, the longer first
    # where two begin at one place (two needles never give one start and
    # end: they would be one string)
    needles = [(needle, mark) for needle, mark in needles if len(needle)]
    marks_in = existing_markers(text)
    if len(needles) == 1 and not marks_in:
        # (one needle: its occurrences never overlap, each is a span)
        needle, mark = needles[0]
        return [(i, i + len(needle), [mark])
                for i in _occurrences(text, needle, bounded and needle not in loose)]
    occ: list[tuple[int, int, Any]] = []
    for needle, mark in needles:
        size = len(needle)
        occ.extend((i, -i - size, mark)
                   for i in _occurrences(text, needle, bounded and needle not in loose))
    return merged_spans(text, occ, marks_in)


def merged_spans(text: Any, occ: list[tuple[int, int, Any]],
                 marks_in: list[tuple[int, int]] | None = None
                 ) -> list[tuple[int, int, list[Any]]]:
    """The spans :func:`replaced_spans` gives of occurrences ``occ``, each
    ``(start, -end, marker)``, found in ``text`` however they were found."""
    if marks_in is None:
        marks_in = existing_markers(text)
    occ.sort()
    spans: list[tuple[int, int, list[Any]]] = []
    last_end = -1
    k = 0                               # the first marker not ending before a start
    for start, neg_end, mark in occ:
        end = -neg_end
        if marks_in:
            while k < len(marks_in) and marks_in[k][1] <= start:
                k += 1
            if k < len(marks_in) and marks_in[k][0] <= start and end <= marks_in[k][1]:
                continue                # (inside a marker an earlier run wrote)
        if start < last_end:
            if end <= last_end:
                continue                # (covered: nothing of it left)
            marks = spans[-1][2]
            if marks[-1] != mark:       # (two forms of one value: one marker)
                marks.append(mark)
            spans[-1] = (spans[-1][0], end, marks)
        else:
            spans.append((start, end, [mark]))
        last_end = end
    return spans


#: a marker as redaction writes it (:func:`marker`), in a str or in bytes
MARKER_TEXT = lazy_compile(r"\[REDACTED:[a-z0-9-]+:[0-9a-f]{6}\]")
MARKER_BYTES = lazy_compile(rb"\[REDACTED:[a-z0-9-]+:[0-9a-f]{6}\]")


def existing_markers(text: Any) -> list[tuple[int, int]]:
    """The spans of the markers ``text`` (a str or bytes) already holds,
    written by this run or an earlier one: a value is never replaced in
    one (``token`` in ``[REDACTED:github-token:fc25e1]``)."""
    if isinstance(text, str):
        if "[REDACTED:" not in text:
            return []
        return [m.span() for m in MARKER_TEXT.finditer(text)]
    if b"[REDACTED:" not in text:
        return []
    return [m.span() for m in MARKER_BYTES.finditer(text)]


def _occurrences(text: Any, needle: Any, bounded: bool = False) -> Iterator[int]:
    """The starts of the non-overlapping occurrences of ``needle`` in
    ``text``; ``bounded``: only those at word boundaries
    (:func:`at_boundaries`), for a needle that is a word (ASCII letters
    alone: ``test`` is not in ``pytest``).  A needle with a digit or a sign
    in it counts wherever it is (a code review: ``Zq8vLm2wPx`` was left in
    ``mysql -pZq8vLm2wPx``, a credential glued to an option)."""
    size = len(needle)
    find = text.find
    first = last = False
    if bounded:
        # (a word shorter than WORD_COPY_BOUNDED: ``correcthorsebatterystaple``
        # glued to ``-p`` is a copy, a second code review found it left)
        bounded = _word_like(needle) and size < WORD_COPY_BOUNDED
        first = last = bounded
    i = find(needle)
    while i >= 0:
        if bounded and not at_boundaries(text, i, i + size, first, last):
            i = find(needle, i + 1)
            continue
        yield i
        i = find(needle, i + size)


#: the word characters of the boundary rule (ASCII letters, digits, ``_``)
WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_WORD_BYTES = frozenset(ord(c) for c in WORD_CHARS)
#: a value shorter than this is erased only where a detector found it,
#: never searched for elsewhere (``test``, ``admin``: ordinary words)
MIN_COPY_LENGTH = 8
#: a value of letters alone this long or longer is a copy wherever it is,
#: as one with a digit or a sign (no ordinary word is so long and a password)
WORD_COPY_BOUNDED = 12
_ESCAPED = frozenset(b'nrtbf"/\\')


def _word_like(needle: Any) -> bool:
    """Whether ``needle`` (a str or bytes) is ASCII letters alone."""
    if isinstance(needle, str):
        return needle.isascii() and needle.isalpha()
    return bool(needle.isalpha())


def _is_word(text: Any, i: int) -> bool:
    c = text[i]
    return (c in _WORD_BYTES) if isinstance(c, int) else (c in WORD_CHARS)


def at_boundaries(text: Any, start: int, end: int, first: bool = True,
                  last: bool = True) -> bool:
    """Whether ``text[start:end]`` (a str or bytes) stands at word
    boundaries: where it begins with a word character (``first``) the one
    before is none, where it ends with one (``last``) the one after is none.
    In bytes a JSON escape is read as what it decodes to (``\\n`` before is
    a newline, ``\\u0041`` an ``A``; a backslash after begins an escape,
    read so too)."""
    if first and start > 0 and _is_word(text, start - 1):
        if isinstance(text, str):
            return False
        # (an escape's letter: \n, \t, ... is no word character)
        if not (start >= 2 and text[start - 2] == 0x5C and text[start - 1] in _ESCAPED
                and not _escaped_backslash(text, start - 2)):
            u = _unicode_escape_at(text, start - 6)
            if u is None or _is_word(u, 0):
                return False
    if last and end < len(text):
        if _is_word(text, end):
            return False
        if isinstance(text, bytes) and text[end] == 0x5C:
            u = _unicode_escape_at(text, end)
            if u is not None and _is_word(u, 0):
                return False
    return True


def _escaped_backslash(text: bytes, i: int) -> bool:
    """Whether the backslash at ``i`` is itself escaped (an odd run before it)."""
    n = 0
    while i - 1 - n >= 0 and text[i - 1 - n] == 0x5C:
        n += 1
    return n % 2 == 1


def _unicode_escape_at(text: bytes, i: int) -> str | None:
    """The character a ``\\uXXXX`` escape at ``i`` of ``text`` decodes to."""
    if i < 0 or text[i:i + 2] != b"\\u" or _escaped_backslash(text, i):
        return None
    digits = text[i + 2:i + 6]
    if len(digits) != 4 or not all(c in b"0123456789abcdefABCDEF" for c in digits):
        return None
    return chr(int(digits, 16))


def hide_values(text: str, masks: Mapping[str, str]) -> str:
    """``text`` (a file name, a session id, a message) with each value of
    ``masks`` replaced by its marker."""
    return replace_values(text, masks)[0]


def hide_found(detector: Detector, text: str) -> str:
    """``text`` (a message to print) with each value ``detector`` finds in
    it replaced by its marker: what may name a credential before any scan
    has found it (the session ids a "did you mean" offers, say)."""
    masks = {value: marker(det, value) for value, det, _ln in _text_hits(detector, text,
                                                                           "memory.txt")}
    return hide_values(text, dict(sorted(masks.items(), key=lambda kv: -len(kv[0]))))


def mask_session_ids(report: SecretsReport) -> None:
    """Show every location whose session id or file name holds a found value
    with the marker in place of the value (findings' ``file`` and
    ``session_id``, skipped files): no output ever holds a value (before
    2026-12-07 a value in a note's name was shown as the note's location)."""
    masks = session_id_values(report.findings, (s.file for s in report.skipped))
    if not masks:
        return
    if isinstance(report.findings, HeldFindings):
        report.findings.location_masks = masks
    for f in _objects(report.findings):
        shown = (hide_in_location(f.file, masks),
                 None if f.session_id is None else hide_values(f.session_id, masks))
        if shown != (f.file, f.session_id):
            object.__setattr__(f, "_shown", shown)
    for s in report.skipped:
        s.file = hide_in_location(s.file, masks)


def found_values(findings: Iterable[Finding]) -> dict[str, str]:
    """value -> marker of every value ``findings`` found, longest first (a
    value inside another is replaced after it): what no message may show."""
    values: dict[str, str] = {}
    if isinstance(findings, HeldFindings):
        values = findings.markers(last=False)
    else:
        for f in findings:
            v = f.secret_value()
            if v:
                values.setdefault(v, f.marker)
    return dict(sorted(values.items(), key=lambda kv: -len(kv[0])))


def reports_values(reports: Iterable[SecretsReport]) -> dict[str, str]:
    """:func:`found_values` of the findings of every one of ``reports``
    (their values, each once: a report's findings need not be read again)."""
    values: dict[str, str] = {}
    for r in reports:
        if isinstance(r.findings, HeldFindings):
            for v, m in r.findings.markers(last=False).items():
                values.setdefault(v, m)
        else:
            for f in r.findings:
                v = f.secret_value()
                if v:
                    values.setdefault(v, f.marker)
    return dict(sorted(values.items(), key=lambda kv: -len(kv[0])))


def mask_store_names(reports: Iterable[SecretsReport],
                     values: Mapping[str, str] | None = None) -> dict[str, str]:
    """Show each report's project and store path (the name of the store's
    own directory, and every directory above it), its findings' project and
    its skipped entries' reasons (a linked store's target) with the marker
    in place of every value found by any of ``reports`` (or of ``values``:
    :func:`found_values`): a store's name is no location below it, yet no
    output may hold a value there either (before 2026-12-07 a token naming
    the store's directory was shown whole in ``project`` and ``store``).
    The masks applied are returned.  Two stores can then be spelt alike
    (the Prometheus writer labels the second ``spelt_same``)."""
    reports = list(reports)
    if values is None:
        values = reports_values(reports)
    if not values:
        return {}
    texts = "\n".join(t for r in reports
                      for t in (r.project, r.store, *(s.reason for s in r.skipped)))
    masks = {v: m for v, m in values.items() if v in texts}
    if not masks:
        return {}
    for r in reports:
        project, store = hide_values(r.project, masks), hide_values(r.store, masks)
        r.__dict__["_shown_names"] = (project, store)
        for s in r.skipped:
            s.reason = hide_values(s.reason, masks)
        if project != r.project:
            if isinstance(r.findings, HeldFindings):
                r.findings.shown_project = project
            for f in _objects(r.findings):
                object.__setattr__(f, "_shown_project", project)
    return masks


def mask_paths(report: SecretsReport) -> None:
    """Each finding's JSON path with the marker in place of every found value
    a key on the path holds: a credential can be an object key, and its own
    finding and every finding under it would show it.  The path itself is
    masked (no reader of a finding needs the key: redact replaces values
    wherever they are, keys included), a key the store contract names too
    (``content``), which redact keeps (``redact.STRUCTURE``): a path never
    shows a value."""
    from .grep import path_keys, rewrite_path_keys

    # each distinct path read once: its keys (a text that is no path
    # string_leaves writes: the text itself)
    held = report.findings if isinstance(report.findings, HeldFindings) else None
    paths = held.paths if held is not None else (f.path for f in report.findings)
    keys = {p: path_keys(p) for p in paths if p}
    texts = "\n".join(k for path, ks in keys.items() for k in (ks if ks is not None else (path,)))
    if held is not None:
        masks = {v: m for v, m in held.markers(last=True).items() if v in texts}
    else:
        masks = {f.secret_value(): f.marker for f in report.findings
                 if f.secret_value() and f.secret_value() in texts}
    if not masks:
        return
    masks = dict(sorted(masks.items(), key=lambda kv: -len(kv[0])))
    shown: dict[str, str] = {}
    for path, ks in keys.items():
        if ks is None:
            shown[path] = hide_values(path, masks)
        elif any(v in k for k in ks for v in masks):
            shown[path] = rewrite_path_keys(path, lambda k: hide_values(k, masks)) or path
    if held is not None:
        held.shown_paths = shown
    for f in _objects(report.findings):
        if f.path in shown:
            object.__setattr__(f, "path", shown[f.path])


@dataclass
class Skipped:
    file: str
    reason: str
    unreadable: bool = True       # False: a symbolic link or special file, skipped on purpose
    # the memctl error that stopped the read, when one did (never shown: its
    # class is what ``redact`` refuses with, a full $TMPDIR exit 7, say)
    error: MemctlError | None = field(default=None, compare=False, repr=False)


#: Bytes of encoded findings a report of ``secrets`` holds in memory before
#: it holds them in an unnamed temporary file (:class:`HeldFindings`); None:
#: every finding held as a :class:`Finding` in a list, as before 2026-12-07
#: (and as ``redact``'s scan holds them).
FINDINGS_HELD_IN_MEMORY: int | None = 1 << 20


class HeldFindings:
    """A report's findings held encoded (:func:`.held.hold_value`): in memory
    up to :data:`FINDINGS_HELD_IN_MEMORY` bytes, then in ``spill``, an
    unnamed temporary file outside the stores (:class:`.held.Spill`: where
    none can be written, in memory), so that memory does not follow their
    number (100,000 findings of one key: 148 MiB to 230 MiB before
    2026-12-07).  Each value found is kept once, in memory (the findings
    hold its number): what every output masks, and what the findings give
    back (:meth:`Finding.secret_value`).  Also kept, once each: the
    locations' texts and the JSON paths (what :func:`mask_session_ids` and
    :func:`mask_paths` search for values), and the findings of each
    detector.  Iterated, the findings come back in order, new objects
    each time, the masks of :func:`mask_session_ids`, :func:`mask_paths` and
    :func:`mask_store_names` applied (they set the masks here, not on
    objects)."""

    def __init__(self, spill: Any, limit: int) -> None:
        from .held import HeldRows

        self._rows = HeldRows(limit, b"", spill)
        self._index: dict[str, int] = {}     # value -> its number
        self._values: list[str] = []
        self._first: dict[str, str] = {}     # value -> marker of its first finding
        self._last: dict[str, str] = {}      # value -> detector of its last finding
        self._file: str | None = None        # (the last finding's file, named)
        self._count = 0
        self.by_detector: dict[str, int] = {}
        self.locations: set[str] = set()     # user_named(file), session ids
        self.paths: dict[str, None] = {}     # the findings' JSON paths, in order
        # the masks (set by mask_session_ids, mask_paths, mask_store_names)
        self.location_masks: Mapping[str, str] = {}
        self.shown_paths: dict[str, str] = {}
        self.shown_project: str | None = None

    def append(self, f: Finding) -> None:
        from .held import hold_value

        v = f.secret_value()
        i = self._index.get(v)
        if i is None:
            i = self._index[v] = len(self._values)
            self._values.append(v)
        if v:
            if v not in self._first:
                self._first[v] = f.marker
            self._last[v] = f.detector
        self.by_detector[f.detector] = self.by_detector.get(f.detector, 0) + 1
        if f.file != self._file:
            self._file = f.file
            self.locations.add(user_named(f.file))
        self.locations.add(f.session_id or "")
        if f.path:
            self.paths[f.path] = None
        hold_value(self._rows, (f.detector, f.kind, f.file, f.preview, f.length, f.hash,
                                f.project, f.session_id, f.seq, f.path, f.line, f.offset,
                                f.fact_id, f.revision, _held_id(f), i))
        self._count += 1

    def markers(self, *, last: bool) -> dict[str, str]:
        """value -> the marker of its first (or ``last``) finding, in order of
        their first findings."""
        if not last:
            return dict(self._first)
        # (a value's marker: its detector's, and its hash, the same for each)
        return {v: f"[REDACTED:{self._last[v]}:{m[-7:-1]}]" for v, m in self._first.items()}

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[Finding]:
        from .held import held_values

        values, paths, project = self._values, self.shown_paths, self.shown_project
        masks = self.location_masks
        shown: dict[tuple[str, str | None], tuple[str, str | None]] = {}
        for row in held_values(self._rows.pieces()):
            f = Finding(*row[:-2], value=values[row[-1]])  # type: ignore[misc]
            if row[-2] is not None:
                object.__setattr__(f, "_stored_fact_id", _id_held(row[-2]))
            if masks:
                key = (f.file, f.session_id)
                place = shown.get(key)
                if place is None:
                    if len(shown) >= SHORT_KEPT:
                        shown.clear()
                    place = shown[key] = (
                        hide_in_location(f.file, masks),
                        None if f.session_id is None else hide_values(f.session_id, masks))
                if place != key:
                    object.__setattr__(f, "_shown", place)
            if f.path in paths:
                object.__setattr__(f, "path", paths[f.path])
            if project is not None:
                object.__setattr__(f, "_shown_project", project)
            yield f

    def close(self) -> None:
        """The encoded findings let go (the spill is whoever made it's to close)."""
        self._rows.close()


def _held_id(f: Finding) -> Any:
    """A fact's id as stored (:meth:`Finding.stored_fact_id`), as held
    (marshal: a bytes subclass is none of its types): None when it is the
    id shown, else (kind, value)."""
    from .facts import InvalidText

    stored = f.stored_fact_id()
    if type(stored) is str and stored == f.fact_id:
        return None
    if isinstance(stored, InvalidText):
        return ("invalid_text", bytes(stored))
    return ("stored", stored)


def _stored_key(stored: Any) -> tuple[str, object]:
    """:func:`facts.stored_id_key` (imported when a fact is found)."""
    from .facts import stored_id_key

    return stored_id_key(stored)


def _id_held(held: Any) -> Any:
    """The stored id :func:`_held_id` held."""
    from .facts import InvalidText

    kind, value = held
    return InvalidText(value) if kind == "invalid_text" else value


def _objects(findings: Iterable[Finding]) -> Iterable[Finding]:
    """The findings to mask one by one: a list's; none of
    :class:`HeldFindings` (masked as they are read back)."""
    return () if isinstance(findings, HeldFindings) else findings


@dataclass
class SecretsReport:
    project: str
    store: str
    findings: list[Finding] | HeldFindings = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    allowlisted: int = 0
    files_scanned: int = 0
    bytes_scanned: int = 0
    #: the (fact id as stored -- a BLOB's bytes, as the plan reads the
    #: revision rows --, revision) of every revision whose text the scan read
    #: (found something or not): a revision not among them was written
    #: after the scan read the facts (``redact.plan_redaction``'s ``scanned``);
    #: None unless the scan was asked to keep them (``scan_store(revisions=True)``)
    fact_revisions: frozenset[tuple[str, int]] | None = field(default=None, compare=False,
                                                              repr=False)

    @property
    def unreadable(self) -> list[Skipped]:
        return [s for s in self.skipped if s.unreadable]

    @property
    def ok(self) -> bool:
        """Nothing found, and every file read (an unreadable file may hide one)."""
        return not self.findings and not self.unreadable

    @property
    def shown_project(self) -> str:
        """:attr:`project` as outputs show it (:func:`mask_store_names`)."""
        shown: tuple[str, str] | None = self.__dict__.get("_shown_names")
        return self.project if shown is None else shown[0]

    @property
    def shown_store(self) -> str:
        """:attr:`store` as outputs show it (:func:`mask_store_names`)."""
        shown: tuple[str, str] | None = self.__dict__.get("_shown_names")
        return self.store if shown is None else shown[1]

    def summary(self) -> dict[str, Any]:
        by: dict[str, int] = {}
        if isinstance(self.findings, HeldFindings):
            by = self.findings.by_detector
        else:
            for f in self.findings:
                by[f.detector] = by.get(f.detector, 0) + 1
        from .rowmodel import SECRETS_SCAN

        return SECRETS_SCAN.row(
            project=self.shown_project, store=self.shown_store, ok=self.ok,
            findings=len(self.findings), by_detector=dict(sorted(by.items())),
            allowlisted=self.allowlisted, files_scanned=self.files_scanned,
            bytes_scanned=self.bytes_scanned, unreadable=len(self.unreadable),
            skipped=[{"file": s.file, "reason": s.reason, "unreadable": s.unreadable}
                     for s in self.skipped])


# --------------------------------------------------------------------------
# The allowlist (hashes only)


#: The most an allowlist may hold: 16 MiB, some 240,000 digests.
ALLOWLIST_MOST = 16 << 20


def load_allowlist(path: str | os.PathLike[str] | None) -> frozenset[str]:
    """SHA-256 hex digests of values not to report: one per line, optionally
    ``sha256:`` prefixed, ``#`` comments, in either case (a digest in upper
    case, as some tools print it, is taken in lower case: the scan's form;
    before 2026-12-07 it was refused).  A missing default file is empty;
    anything that is not a digest is a UsageError (a value is never stored)."""
    if path is None or os.path.realpath(path) == os.devnull:
        return frozenset()   # /dev/null: no allowlist, the one device allowed
    try:
        # a regular file or a pipe (<(...)), opened without blocking: a FIFO
        # no process writes is empty at once, a device (/dev/zero) refused
        raw = read_file_or_pipe(path, ALLOWLIST_MOST)
        if len(raw) > ALLOWLIST_MOST:
            raise UsageError(f"{path}: more than {ALLOWLIST_MOST >> 20} MiB; an allowlist holds "
                             "SHA-256 digests, one per line")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such allowlist file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the allowlist: {exc.strerror}") from None
    out = set()
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        text = line.split("#", 1)[0].strip().lower()
        if not text:
            continue
        if text.startswith("sha256:"):
            text = text[7:]
        if not re.fullmatch(r"[0-9a-f]{64}", text):
            # never echo the line: it might be a pasted secret
            if re.fullmatch(r"[0-9a-f]{8,63}", text):
                # (the text report's sha256:<12 digits>, pasted)
                raise UsageError(f"{path}: line {n} holds {len(text)} hex digits, not a whole "
                                 "SHA-256 (64): the text report shows only the first 12; "
                                 "'memctl secrets --json' (or --format jsonl, csv) gives each "
                                 "value's whole 'hash'")
            raise UsageError(f"{path}: line {n} is not a SHA-256 hex digest; the allowlist "
                             "holds hashes of values, never values")
        out.add(text)
    return frozenset(out)


# --------------------------------------------------------------------------
# The detector


@dataclass(frozen=True)
class Hit:
    start: int
    end: int
    detector: str


class Detector:
    """detect-secrets' plugins over one text at a time."""

    def __init__(self) -> None:
        try:
            from detect_secrets.filters import heuristic
            from detect_secrets.settings import default_settings, get_plugins
        except ImportError:  # pragma: no cover - a broken install
            raise MemctlError("the detect-secrets package is not installed "
                              "(pip install detect-secrets)") from None
        from .secret_plugins import own_plugins

        with default_settings():
            plugins = [p for p in get_plugins() if type(p).__name__ not in EXCLUDED_PLUGINS]
        own = own_plugins()
        # (memctl's own patterns that widen one of detect-secrets' of the same
        # type before the other specific ones, the rest of its own after them:
        # where two overlap, the first wins)
        types = {p.secret_type for p in plugins}
        group = {id(p): 0 if p.secret_type in types else 2 for p in own}
        plugins += own
        order = {name: i for i, name in enumerate(GENERIC_PLUGINS)}
        plugins.sort(key=lambda p: (order.get(type(p).__name__, -1), group.get(id(p), 1),
                                    type(p).__name__))
        self.plugins = plugins
        self._h = heuristic
        self._gates = [_regex_gate(p) or _keyword_gate(p) for p in plugins]
        # the detectors that need a key before a value (:data:`KEYED_PLUGINS`),
        # and KeywordDetector's words (its gate): a key holding one of those
        # or of :data:`_KEYED_WORDS` has its member scanned as JSON writes
        # it, by them alone (:meth:`member_hits`)
        self._keyed_plugins = [(prio, p) for prio, p in enumerate(plugins)
                               if type(p).__name__ in KEYED_PLUGINS]
        self._keywords = next((g[0][0] for g, p in zip(self._gates, plugins, strict=True)
                               if g and type(p).__name__ == "KeywordDetector"), None)
        self._keyed_keys: dict[str, bool] = {}
        # (the line :meth:`_likely_id` last searched, and its first id match)
        self._id_first: tuple[str, re.Match[str] | None] | None = None

    def _filtered(self, plugin: Any, secret: str, line: str) -> bool:
        h = self._h
        # (a UUID is no credential where a keyword or the entropy found it; a
        # pattern's own, a URL's password or an npm authToken, is one)
        if h.is_sequential_string(secret) or (
                h.is_potential_uuid(secret) and not isinstance(plugin, _regex_based())) or \
                h.is_templated_secret(secret) or h.is_prefixed_with_dollar_sign(secret) or \
                h.is_not_alphanumeric_string(secret):
            return True
        valid = getattr(plugin, "memctl_valid", None)     # (memctl's own plugins)
        if valid is not None and not valid(secret):
            return True
        return self._likely_id(secret, line, plugin)

    def _likely_id(self, secret: str, line: str, plugin: Any) -> bool:
        """detect-secrets' ``is_likely_id_string``: whether its id pattern
        (``_id`` and a separator, say) is found in ``line`` before the
        first place of ``secret`` -- the same answer, without searching the
        line from its start again for each value: the pattern's first
        match in the line is found once a line (the id pattern has no
        look past its end, so every match before the value's place is a
        match of the whole line, none starting before that first one).
        A line of 20,000 assignments took 11 s in that search alone."""
        h = self._h
        rx_of = getattr(h, "_get_id_detector_regex", None)
        if rx_of is None:           # (another detect-secrets: its own function)
            return bool(h.is_likely_id_string(secret, line, plugin))
        if isinstance(plugin, _regex_based()):
            return False
        index = line.find(secret)
        if index < 0:
            return False
        rx = rx_of()
        held = self._id_first
        if held is None or held[0] is not line:
            held = self._id_first = (line, rx.search(line))
        first = held[1]
        if first is None:
            return False
        if first.end() <= index:
            return True
        return rx.search(line, first.start(), index) is not None

    def scan(self, text: str, filename: str = "memory.txt", *, whole_tokens: bool = True,
             tail: int = TAIL_NONE) -> list[Hit]:
        """Non-overlapping hits in ``text`` (offsets in characters), specific
        detectors first.  ``whole_tokens``: a hit runs to the end of its token
        (:func:`token_end`); off for raw database pages, where a record's
        next column follows its text with no separator.  ``tail``: what
        follows ``text`` in its file (``TAIL_*``); :class:`PieceTooShort` when
        a private key block may run past its end (:func:`_pem_span`)."""
        return self._scan(text, filename, whole_tokens, tail, enumerate(self.plugins))

    def _scan(self, text: str, filename: str, whole_tokens: bool, tail: int,
              plugins: Iterable[tuple[int, Any]]) -> list[Hit]:
        """:meth:`scan` by ``plugins`` (each with its priority) alone."""
        chosen = list(plugins)
        cands: list[tuple[int, int, int, str]] = []   # (priority, start, end, slug)
        pos = 0
        for line in text.split("\n"):
            if line.strip():
                for wstart, window in _windows(line):
                    base = pos + wstart
                    size = len(window)
                    for prio, plugin in chosen:
                        gate = self._gates[prio]
                        if gate is not None:
                            for pattern, least in gate:
                                if size >= least and pattern.search(window) is not None:
                                    break
                            else:
                                continue        # (none of its patterns: no hit from it)
                        for s, e in self._plugin_spans(plugin, window, filename, text, base,
                                                         whole_tokens, tail):
                            cands.append((prio, s, e, detector_slug(plugin.secret_type)))
            pos += len(line) + 1
        cands.sort()
        return _non_overlapping(cands)

    def member_hits(self, key: str, value: str) -> list[tuple[str, str]] | None:
        """(value, detector) of each hit in the string ``value`` of an
        object's member ``key`` when it is read as the member is written in
        JSON, ``"key": "value"``, by the detectors that need a key before
        the value to see a credential (:data:`KEYED_PLUGINS`: the keyword
        detector, AWS's quoted secret key, Cloudant's, IBM Cloud's and
        SoftLayer's key assignments).  A leaf scanned alone has no key:
        before 2026-12-07 a password in a tool call's structured arguments
        was never found, the same JSON in a note was.  Not the entropy
        detectors: a value quoted under any key is a commit's SHA or an
        identifier far more often than a credential (a store of 20,000
        tool calls gave 9,784 such findings); a lone value is scanned for
        them as before.  Only the hits inside the value count.  None when
        the member cannot give any: a key without any of
        KeywordDetector's words nor of :data:`_KEYED_WORDS`, or a value
        with a newline or a quote (JSON would write it escaped)."""
        if not value or "\n" in value or '"' in value:
            return None
        keyed = self._keyed_keys.get(key)
        if keyed is None:
            # (the keys of a transcript's arguments repeat: each is looked at once)
            if len(self._keyed_keys) >= SHORT_KEPT:
                self._keyed_keys.clear()
            keyed = self._keyed_keys[key] = _KEYED_WORDS.search(key) is not None or (
                self._keywords is not None and self._keywords.search(key) is not None)
        if not keyed:
            return None
        text = f'"{key}": "{value}"'
        start = len(key) + 5
        end = start + len(value)
        return [(text[h.start:h.end], h.detector)
                for h in self._scan(text, "transcript.txt", True, TAIL_NONE, self._keyed_plugins)
                if start <= h.start and h.end <= end]

    def _plugin_spans(self, plugin: Any, line: str, filename: str, text: str, base: int,
                      whole_tokens: bool = True, tail: int = TAIL_NONE
                      ) -> Iterator[tuple[int, int]]:
        """The spans of ``plugin``'s hits in ``line`` (at ``base`` in
        ``text``).  KeywordDetector's hits are every assignment its patterns
        find (:func:`_keyword_values`), not the first of each."""
        try:
            found = (_keyword_values(plugin, line, filename) if type(plugin).__name__
                     == "KeywordDetector" else plugin.analyze_line(
                         filename=filename, line=line, line_number=0, context=None))
        except Exception:  # noqa: BLE001 - a plugin bug must not stop the audit
            return
        if not found:
            return
        name = type(plugin).__name__
        # detect-secrets' line filter (``x = get_secret()``): a keyword
        # assignment's value that is a call or a subscript is no credential.
        # The keyword detector's hits alone: a value with a pattern of its
        # own is one wherever the line has a call (before 2026-12-07
        # ``gh = Github("ghp_...")`` or ``s3 = boto3.client(..., "AKIA...")``
        # dropped every hit of the line).  Checked only for a line with a
        # hit: its regex is slow on long lines.
        # (the entropy detectors' hits too: they have no pattern of their
        # own, and a call's quoted argument is a commit's SHA far more often
        # than a credential -- a code review found ``repo.get_commit("<sha>")``
        # reported, and redact then erasing that SHA in MEMORY.md)
        # (a second code review: dropping every entropy hit of a call line
        # lost ``OpenAI(api_key="sk-proj-...")`` and a Twilio auth token; on a
        # call line an entropy hit is dropped only when it is shaped as data,
        # a digest's hex (40 or 64 digits) or base64 of text)
        call_line = name in _CALL_LINE_PLUGINS and len(line) <= 4096 \
            and self._h.is_indirect_reference(line)
        if call_line and name == "KeywordDetector":
            return
        for ps in found:
            v = ps if type(ps) is str else ps.secret_value
            if not isinstance(v, str) or not v:
                continue
            if call_line and _data_shaped(v):
                continue
            if name in PRIVATE_KEY_PLUGINS:
                # every BEGIN line of the line (keys in a JSON string, their
                # newlines escaped, are one line; detect-secrets gives one
                # hit for all: before 2026-12-07 the second key was left)
                # (a BEGIN inside the block before it is that block's: each
                # block is searched once, however many BEGIN lines follow)
                line_end = base + len(line)
                reached = -1
                for m in _PEM_BEGIN.finditer(text, base, line_end):
                    if m.start() < reached:
                        continue
                    span = _pem_span(text, m.start(), tail)
                    if span is None:
                        break
                    reached = span[1]
                    yield span
                if reached < 0:
                    span = _pem_span(text, base, tail)
                    if span is not None:
                        yield span
                continue
            if self._filtered(plugin, v, line):
                continue
            if name == "Base64HighEntropyString" and _SRI.fullmatch(v):
                continue            # (a lockfile's "integrity": a digest)
            for s, e in _value_spans(plugin, line, v):
                if name == "HexHighEntropyString" and _under_a_hash_key(line, s):
                    continue        # ("sha": "...", checksum = "...": a digest)
                yield base + s, (token_end(text, base + s, base + e, name) if whole_tokens
                                 else base + e)


_HEX_DIGEST = lazy_compile(r"(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})")


def _data_shaped(value: str) -> bool:
    """Whether an entropy detector's ``value`` on a call line is data, no
    credential: a digest's hex (40 or 64 digits: a commit, a SHA-256) or
    base64 that decodes to printable text (``b64decode("SGVsbG8g...")``)."""
    if _HEX_DIGEST.fullmatch(value):
        return True
    text = base64_bytes(value)
    if text is None:
        return False
    try:
        decoded = text.decode("ascii")
    except UnicodeDecodeError:
        return False
    return decoded.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in decoded)


#: A Subresource Integrity string (a lockfile's ``"integrity"``): a digest,
#: never a credential (before 2026-12-07 ``base64-high-entropy-string``).
#: The detectors whose hits a line shaped ``x = f(...)`` drops
#: (detect-secrets' indirect-reference filter): those without a pattern of
#: their own.
_CALL_LINE_PLUGINS = frozenset({"KeywordDetector", "HexHighEntropyString",
                                "Base64HighEntropyString"})
_SRI = lazy_compile(r"sha(?:1|256|384|512)-[A-Za-z0-9+/]+={0,2}")
#: The key a value is assigned to or is the member of, just before it:
#: ``"sha": "``, ``checksum = "``, ``headSha: '``; or the word before it in
#: prose (``lockfile hash "``).
_KEY_BEFORE = lazy_compile(r"""([A-Za-z0-9_.-]+)["']?\s*(?::=|=>|:|=|(?<=\s))\s*["']?$""")
_KEY_PARTS = lazy_compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
#: The words of a key that name a hash: a hex value under such a key
#: (as a whole word or segment of it, in any case) is a digest.
HASH_KEY_WORDS = frozenset({"sha", "sha1", "sha256", "sha384", "sha512", "checksum", "digest",
                            "hash", "commit", "oid", "integrity", "etag", "rev", "revision",
                            "tree", "parent", "blob"})
#: The words that name a credential: a key holding one is no hash's.
CREDENTIAL_KEY_WORDS = frozenset({"token", "tokens", "secret", "secrets", "key", "apikey",
                                  "password", "passwd", "pass", "pwd", "auth", "credential",
                                  "credentials", "bearer", "private"})


def _under_a_hash_key(line: str, start: int) -> bool:
    """Whether the value at ``start`` of ``line`` is the value of a key (a
    JSON member's name, an assignment's name) one of whose words names a
    hash (:data:`HASH_KEY_WORDS`): ``{"sha": "..."}`` from ``gh api``,
    Cargo.lock's ``checksum = "..."``, ``"commit_oid": "..."``.  A hex
    value under any other key may be a credential (OAuth tokens of 40 hex
    digits exist) and is reported as before."""
    m = _KEY_BEFORE.search(line, max(0, start - 128), start)
    if m is None:
        return False
    segs = [seg for seg in re.split(r"[_.-]+", m.group(1)) if seg]
    words = [p.lower() for seg in segs for p in (_KEY_PARTS.findall(seg) or [seg])]
    # the key's LAST word (or last segment: ``ETag``) names a hash, and none
    # of its words a credential (a code review: ``commit_token``,
    # ``parentToken``, ``BLOB_READ_WRITE_TOKEN`` are tokens, whatever word
    # they hold)
    if not words or (words[-1] not in HASH_KEY_WORDS
                     and segs[-1].lower() not in HASH_KEY_WORDS):
        return False
    if any(w in CREDENTIAL_KEY_WORDS for w in words):
        return False
    # in prose (the word before the value), no credential word earlier on
    # the line (``this token for the tree "<hex>"``)
    before = line[max(0, start - 128):m.start()].lower()
    return not any(w in CREDENTIAL_KEY_WORDS for w in re.findall(r"[a-z]+", before))


def _keyword_values(plugin: Any, line: str, filename: str) -> Iterable[Any]:
    """What KeywordDetector reports of ``line``, with every assignment of
    the line in it: detect-secrets' ``analyze_string`` takes the first
    match of each of its patterns (``search``); here each pattern is run
    over the line once (``finditer``), so the first match of each is the
    same and the ones after it are found too, in time linear in the line
    (each pattern reads it once, as the one ``search`` that finds nothing
    does).  Before 2026-12-07 ``{"db_password": "...", "api_secret":
    "..."}`` on one line was one finding, and ``redact`` left the second
    value (reading the rest of the line again after each hit, tried
    first, was quadratic: over 8 minutes for one line of 1 MB).  A
    KeywordDetector that is not detect-secrets' own (another version's
    methods) is asked as before: its values, as ``analyze_line`` gives
    them."""
    from detect_secrets.plugins import keyword
    from detect_secrets.util.filetype import determine_file_type

    kind = type(plugin)
    if kind.analyze_line is not keyword.KeywordDetector.analyze_line \
            or kind.analyze_string is not keyword.KeywordDetector.analyze_string:
        found: Iterable[Any] = plugin.analyze_line(filename=filename, line=line, line_number=0,
                                                   context=None)
        return found
    exclude = plugin.keyword_exclude
    if exclude and exclude.search(line):
        return ()
    table = keyword.REGEX_BY_FILETYPE.get(determine_file_type(filename),
                                          keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
    # (the values once each, in the order found: analyze_line gives a set)
    return dict.fromkeys(m.group(group) for rx, group in table.items()
                         for m in rx.finditer(line))


#: The detectors whose patterns need a key (a name, a quote, ``=`` or
#: ``:``) before the value: those a member of a transcript's structured
#: JSON is scanned by as ``"key": "value"`` (:meth:`Detector.member_hits`).
KEYED_PLUGINS = frozenset({"KeywordDetector", "AWSKeyDetector", "CloudantDetector",
                           "IbmCloudIamDetector", "IbmCosHmacDetector", "SoftlayerDetector"})
#: A word one of the key of each of their patterns holds (AWS's quoted
#: secret key: ``aws.{0,20}?(?:key|pwd|pw|password|pass|token)``), as
#: IGNORECASE matches it: a key without it nor any of KeywordDetector's
#: words gives none of their hits.
_KEYED_WORDS = lazy_compile(r"key|pw|pass|token", re.IGNORECASE)


def _regex_based() -> type:
    from detect_secrets.plugins.base import RegexBasedDetector

    return RegexBasedDetector


def _regex_gate(plugin: Any) -> tuple[tuple[re.Pattern[str], int], ...] | None:
    """The patterns of a regex-based plugin that finds nothing in a line
    none of them finds anything in, each with the fewest characters it can
    match (:func:`_least_width`), or None for any other plugin.  Such a
    plugin's ``analyze_line`` is detect-secrets' own, which yields only
    what its ``analyze_string`` yields, and that is what ``findall`` of
    each of the plugin's ``denylist`` patterns finds (``JwtTokenDetector``:
    of those, the ones it takes for a JWT).  A line none of them matches
    (one ``search`` each, none for a line shorter than the pattern can
    match: most string leaves of a transcript) skips the plugin: most of a
    scan was calling 23 plugins in Python on strings that hold none of
    their patterns."""
    from detect_secrets.plugins import base, jwt

    kind = type(plugin)
    if not isinstance(plugin, base.RegexBasedDetector) \
            or kind.analyze_line is not base.BasePlugin.analyze_line \
            or kind.analyze_string not in (base.RegexBasedDetector.analyze_string,
                                           jwt.JwtTokenDetector.analyze_string):
        return None
    patterns = tuple(plugin.denylist)
    if not patterns or not all(isinstance(r, re.Pattern) for r in patterns):
        return None
    return tuple((r, _least_width(r)) for r in patterns)


def _keyword_gate(plugin: Any) -> tuple[tuple[Any, int], ...] | None:
    """:func:`_regex_gate` of ``KeywordDetector``, whose regexes are the slow
    part of a scan: each needs one of the plugin's own ``DENYLIST`` words,
    matched as its regexes match them (case-insensitively, on the line as
    it is: :class:`_CaselessWords`), so a line without any is skipped for
    it.  None for any other plugin."""
    if type(plugin).__name__ != "KeywordDetector":
        return None
    from detect_secrets.plugins import keyword

    words = _CaselessWords(keyword.DENYLIST)
    return ((words, _least_width(words.caseless)),)


class _CaselessWords:
    """A search for any of ``words`` (regular expressions) as
    ``re.IGNORECASE`` finds them, without it (IGNORECASE has no literal to
    look for first: a scan took a quarter longer).  The line is lower-cased
    and searched for the words written in lower case; before that, the
    three characters IGNORECASE takes for another letter that ``lower()``
    does not give are made that letter (``utf8.CASE_FOLD``: 'ſ' is an 's', 'ı'
    and 'İ' an 'i').  A gate that only lower-cased the line skipped such a
    hit of KeywordDetector's.  Words not all in lower case are searched
    with IGNORECASE itself."""

    def __init__(self, words: Sequence[str]) -> None:
        joined = "|".join(words)
        self.caseless = re.compile(joined, re.IGNORECASE)
        self._lower = re.compile(joined) if joined == joined.lower() else None

    def search(self, line: str) -> re.Match[str] | None:
        if self._lower is None:
            return self.caseless.search(line)
        from .utf8 import caseless

        return self._lower.search(caseless(line))


def _least_width(pattern: re.Pattern[str]) -> int:
    """The fewest characters ``pattern`` can match (a lower bound: the
    parser's own, ``getwidth``); 0 where it cannot be had."""
    try:
        from re import _parser  # type: ignore[attr-defined, unused-ignore]

        return max(0, int(_parser.parse(pattern.pattern, pattern.flags).getwidth()[0]))
    except Exception:  # noqa: BLE001 - (another Python: every line searched, as before)
        return 0


def _non_overlapping(cands: list[tuple[int, int, int, str]]) -> list[Hit]:
    """The hits the sorted candidates ``(priority, start, end, slug)`` leave, in
    order of start: each in turn is taken unless it is empty or overlaps a hit
    taken before it.  The candidates come a priority at a time, each priority's
    in order of start; the hits taken are disjoint, so in order of start they
    are in order of end too.  A candidate is then checked against the last hit
    of its own priority and, with a cursor that only moves forward, against the
    first hit of the earlier priorities that ends after it starts; each
    priority's hits are merged in after it.  (A check against every hit taken
    made 20,000 keys in one text quadratic: 10 s.)"""
    taken: list[Hit] = []
    i, n = 0, len(cands)
    while i < n:
        prio = cands[i][0]
        new: list[Hit] = []
        j = 0
        while i < n and cands[i][0] == prio:
            _prio, s, e, slug = cands[i]
            i += 1
            if e <= s or (new and s < new[-1].end):
                continue
            while j < len(taken) and taken[j].end <= s:
                j += 1
            if j < len(taken) and taken[j].start < e:
                continue
            new.append(Hit(s, e, slug))
        if new:
            taken = list(heapq.merge(taken, new, key=lambda h: h.start)) if taken else new
    return taken


class _Prefixes:
    """Whether a value is a prefix of any of a set of values: the first value
    not less than it in sorted order starts with it iff any does (a binary
    search where a test of every value was hits x values); and whether one
    of them is a prefix of a value (a look-up per length the set holds)."""

    def __init__(self, values: Iterable[str]) -> None:
        self._set = set(values)
        self._sorted = sorted(self._set)
        self._lengths = sorted({len(v) for v in self._set})

    def any_starts_with(self, value: str) -> bool:
        i = bisect.bisect_left(self._sorted, value)
        return i < len(self._sorted) and self._sorted[i].startswith(value)

    def begins_with_one(self, value: str) -> bool:
        return next(self.ones_it_begins_with(value), None) is not None

    def ones_it_begins_with(self, value: str) -> Iterator[str]:
        """Each of the values ``value`` begins with, shortest first."""
        for n in self._lengths:
            if n > len(value):
                return
            if value[:n] in self._set:
                yield value[:n]


def _windows(line: str) -> Iterator[tuple[int, str]]:
    if len(line) <= MAX_SCAN_LINE:
        yield 0, line
        return
    step = MAX_SCAN_LINE - WINDOW_OVERLAP
    for start in range(0, len(line), step):
        yield start, line[start:start + MAX_SCAN_LINE]
        if start + MAX_SCAN_LINE >= len(line):
            return


def _value_spans(plugin: Any, line: str, value: str) -> Iterator[tuple[int, int]]:
    """Where ``value`` (what the plugin reported) is in ``line``.  A regex
    detector may report only a capture group that is a prefix of the token
    (detect-secrets' GitHub pattern captures ``ghp``): then the whole match
    of its pattern is the secret.  Every pattern of the plugin is tried (the
    Slack webhook and AWS's quoted secret key are second patterns); the
    plain text search is the fallback."""
    found = False
    for rx in getattr(plugin, "denylist", ()) or ():
        if not isinstance(rx, re.Pattern):
            continue
        for m in rx.finditer(line):
            whole = m.group(0)
            if value == whole:
                found = True
                yield m.span()
            elif value in m.groups():
                found = True
                gi = m.groups().index(value) + 1
                if len(value) < 8 and m.span(gi)[0] == m.start():
                    yield m.span()           # a prefix group: the token is the match
                else:
                    yield m.span(gi)
    if found:
        return
    start = line.find(value)
    while start >= 0:
        yield start, start + len(value)
        start = line.find(value, start + len(value))


# The characters a credential token goes on with after a detector's pattern
# stopped (issue 14.3): base64url, plus the punctuation a value of that shape
# holds.  A JWT goes on over all its three parts (header.payload.signature).
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-_")
_TOKEN_PUNCT = "+/=."
_TOKEN_CHARS_BY_PLUGIN = {"JwtTokenDetector": _TOKEN_CHARS | frozenset(_TOKEN_PUNCT)}


def token_end(text: str, start: int, end: int, plugin_name: str = "") -> int:
    """Where the token that ``text[start:end]`` (a detector's value) begins
    ends: detect-secrets' patterns have fixed lengths (GitHub, Stripe,
    Discord, OpenAI) or stop early (a JWT's signature), so the value may be a
    prefix of a longer token of the same characters; all of it is the secret."""
    chars = _TOKEN_CHARS_BY_PLUGIN.get(plugin_name)
    if chars is None:
        chars = _TOKEN_CHARS | frozenset(c for c in _TOKEN_PUNCT if c in text[start:end])
    n = len(text)
    while end < n and text[end] in chars:
        end += 1
    return end


def _pem_span(text: str, base: int, tail: int = TAIL_NONE) -> tuple[int, int] | None:
    """The whole private key block around a PrivateKeyDetector hit: from
    ``-----BEGIN ... PRIVATE KEY-----`` to the next END line (however far),
    or, when none follows, to the end of the block of non-empty lines.

    ``text`` may be a piece of a file cut after a newline, with ``tail``
    saying what follows it: the block's end is known from the piece alone
    when an END line follows in it, or when no END line follows in the file
    (``TAIL_NO_END``) and an empty line does in the piece (the first ``\n\n``
    of the file after the start is then the piece's); otherwise
    :class:`PieceTooShort`."""
    line_end = text.find("\n", base)
    m = _PEM_BEGIN.search(text, base, line_end if line_end >= 0 else len(text))
    # Without a BEGIN line (PuTTY keys, unframed headers): the rest of the line
    # and the block below it.
    start = base if m is None else m.start()
    e = _PEM_END.search(text, start)
    if e is not None:
        return start, e.end()
    if tail == TAIL_UNKNOWN:
        raise PieceTooShort
    blank = text.find("\n\n", start)
    if blank >= 0:
        return start, blank
    if tail == TAIL_NO_END:
        raise PieceTooShort
    return start, len(text)


# --------------------------------------------------------------------------
# Scanning a store


def is_transcript(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 2 and parts[0] == SESSIONS_DIR and parts[1].endswith(".jsonl")


def is_database(rel: str) -> bool:
    return rel in (FACTS_DB, FACTS_DB + "-wal")


#: The files of the facts database itself: SQLite's to write, never a file
#: redact rewrites (a value there is the database's, erased by its clean).
DATABASE_FILES = frozenset({FACTS_DB, FACTS_DB + "-wal", FACTS_DB + "-shm",
                            FACTS_DB + "-journal"})


def raw_scanned(rel: str) -> bool:
    """Whether ``rel`` is scanned as raw database pages: the database, its
    ``-wal`` and its rollback ``-journal`` (before 2026-12-07 the journal was
    read as a text file, and redact rewrote its bytes: a hot journal so
    damaged was played back only up to the changed page)."""
    return is_database(rel) or rel == FACTS_DB + "-journal"


def _skip_file(rel: str) -> bool:
    # the -shm is SQLite's index of the -wal (no row content); locks are empty
    return rel == FACTS_DB + "-shm" or (rel.startswith(SESSIONS_DIR + "/")
                                        and rel.endswith(".lock"))


_NOT_A_DATABASE = "not a regular file: the facts database cannot be read"


#: The reason of a file listed and then removed before it was read (another
#: writer's temporary file renamed into place, a ``-wal`` SQLite removed):
#: skipped, not unreadable, since nothing is there to hold a value.
GONE = "removed before it was read"


def store_files(store: Store, report: SecretsReport) -> list[str]:
    """Relative paths of the regular files of the store, sorted; symbolic
    links and other special files are listed in ``report.skipped``, and so
    is a directory that cannot be listed (the store's own, ``.``, included):
    unreadable, since what it holds may hide a value."""
    out = []
    root = os.fspath(store.path)

    def unlistable(exc: OSError) -> None:
        where = os.fspath(exc.filename) if exc.filename is not None else root
        rel = os.path.relpath(where, root).replace(os.sep, "/")
        report.skipped.append(Skipped(rel, f"directory cannot be listed: "
                                           f"{exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable, followlinks=False):
        for name in sorted(dirnames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            if os.path.islink(p):
                report.skipped.append(Skipped(rel, "symbolic link; not followed", False))
            elif is_database(rel):
                report.skipped.append(Skipped(rel, _NOT_A_DATABASE))
        for name in filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                report.skipped.append(Skipped(rel, GONE, False))
                continue
            except OSError as exc:
                report.skipped.append(Skipped(rel, exc.strerror or str(exc)))
                continue
            if stat.S_ISLNK(st.st_mode):
                report.skipped.append(Skipped(rel, "symbolic link; not followed", False))
            elif not stat.S_ISREG(st.st_mode):
                # the facts database (or its -wal) not a regular file: its facts
                # cannot be read, and may hold a value
                report.skipped.append(Skipped(rel, _NOT_A_DATABASE) if is_database(rel)
                                      else Skipped(rel, "not a regular file", False))
            elif not _skip_file(rel):
                out.append(rel)
    return sorted(out)


POOL_BYTES = 1 << 20
"""A store's files are scanned by worker processes when they hold this many
bytes together: the detectors take about 0.3 to 0.7 s a MB, forking a pool
some 50 ms (a pool for each store of two files or more made
``secrets --all-projects`` over 3,000 small stores take 250 s, not 1 s)."""


def _worth_a_pool(root: str, rels: Iterable[str]) -> bool:
    """Whether the files ``rels`` of the store at ``root`` hold
    :data:`POOL_BYTES` together (by ``lstat``; one that cannot be stat'ed
    counts nothing: its scan reports it)."""
    total = 0
    for rel in rels:
        try:
            total += os.lstat(os.path.join(root, rel)).st_size
        except OSError:
            continue
        if total >= POOL_BYTES:
            return True
    return False


class Scanner:
    """One store's scan.  :meth:`run` fills and returns a :class:`SecretsReport`."""

    def __init__(self, store: Store, detector: Detector, *,
                 allowlist: frozenset[str] = frozenset(), lock_wait: float | None = None,
                 revisions: bool = False, spill: Any = None) -> None:
        self.store = store
        # whether the report keeps the (fact id, revision) of every revision
        # read (SecretsReport.fact_revisions: redact's, about 100 bytes a
        # revision, so not for a plain audit)
        self.revisions = revisions
        self.lock_wait = lock_wait   # seconds for a stable facts snapshot; None: 5 s
        self.detector = detector
        self.allowlist = allowlist
        self.report = SecretsReport(store.slug, os.fspath(store.path))
        if spill is not None and FINDINGS_HELD_IN_MEMORY is not None:
            self.report.findings = HeldFindings(spill, FINDINGS_HELD_IN_MEMORY)
        if revisions:
            # (no facts database read: no revision read, not "unknown" -- a
            # first fact written before the plan is then one written since)
            self.report.fact_revisions = frozenset()
        # the findings' keys, to add each once (:meth:`_add`): those of one
        # line at a time (of a file, a transcript or a revision's text; a
        # file's name), whose findings come one after the other; and of
        # the database files, each value once a file (their offsets are no
        # part of the key)
        self._seen: set[tuple[Any, ...]] = set()
        self._seen_at: tuple[Any, ...] | None = None
        self._seen_raw: set[tuple[str, str]] = set()
        #: (file, hash) of each value reported in a transcript (:meth:`_names`)
        self._in_transcripts: set[tuple[str, str]] = set()
        #: live fact value -> text + created of each revision holding it
        self._fact_runs: dict[str, set[str]] = {}

    def run(self, jobs: int = 1) -> SecretsReport:
        """Scan; ``jobs`` > 1 scans transcripts and files in that many worker
        processes (the database and fact texts are read here)."""
        self.store.require()
        files = store_files(self.store, self.report)
        live_fact_values: set[str] = set()
        if FACTS_DB in files:
            live_fact_values = self._facts()
        root = os.fspath(self.store.path)
        plain = [rel for rel in files if not raw_scanned(rel)]
        for rel in files:
            if raw_scanned(rel):
                try:
                    shrank = self._database(rel, os.path.join(root, rel), live_fact_values)
                except FileNotFoundError:
                    shrank = True
                    self.report.skipped.append(Skipped(rel, GONE, False))
                except OSError as exc:
                    self._not_read(rel, exc.strerror or str(exc))
                    continue
                if shrank and rel != FACTS_DB and FACTS_DB in files:
                    # a -wal gone meanwhile, or cut short, was checkpointed
                    # into the database (SQLite removes it when the last
                    # connection closes; TRUNCATE empties it): the database,
                    # read before, is read again (a value already found
                    # there is not found twice)
                    counted = self.report.files_scanned   # (one file, read twice)
                    try:
                        self._database(FACTS_DB, os.path.join(root, FACTS_DB),
                                       live_fact_values)
                        self.report.files_scanned = counted
                    except OSError as exc:
                        self._not_read(FACTS_DB, exc.strerror or str(exc))
        from .pools import alone

        # (no fork beside another thread: a program that imports the core)
        if jobs > 1 and len(plain) > 1 and alone() and _worth_a_pool(root, plain):
            import multiprocessing

            from .pools import in_order

            ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
            size = max(1, len(plain) // (jobs * 8))
            chunks = ([(root, rel) for rel in plain[i:i + size]]
                      for i in range(0, len(plain), size))
            # (a worker killed meanwhile: its files are scanned again, in_order)
            for scans in in_order(_scan_files_job, chunks, jobs, ctx, ahead=3 * jobs):
                for res in scans:
                    self._merge(res)
        else:
            for rel in plain:
                self._merge(scan_file(self.detector, root, rel))
        self._names(files)
        mask_session_ids(self.report)
        mask_paths(self.report)
        mask_store_names([self.report])
        return self.report

    def _not_read(self, rel: str, reason: str) -> None:
        """``rel`` could not be read (its raw pages): one ``skipped`` entry
        a file.  The database already skipped as unreadable by the facts'
        read (a mode-000 ``facts.sqlite3``) keeps that entry, this reason
        added to it unless that entry says it already; before 2026-12-07
        (review rv6) it was listed twice, ``unreadable`` 2 for one file."""
        for i, s in enumerate(self.report.skipped):
            if s.file == rel and s.unreadable:
                if reason not in s.reason:
                    self.report.skipped[i] = Skipped(rel, f"{s.reason}; {reason}", error=s.error)
                return
        self.report.skipped.append(Skipped(rel, reason))

    def _names(self, files: list[str]) -> None:
        """The names of the store's files (those read, those skipped, the
        session locks), and of the directories holding them: a value in one
        is a finding of its own (kind ``file``, no ``line``:
        :attr:`Finding.in_name`), which no output shows but masked (before
        2026-12-07 a note named by a key was shown as its location, and
        reported only for what it held).  A transcript's name is its session
        id, which its header holds and the scan of its records reports: a
        value found there is not reported again for the name (only one its
        records do not hold, a header naming another session, say); nor a
        lock's while its transcript is there.  The database's files have
        fixed names."""
        names = dict.fromkeys([*files, *(s.file for s in self.report.skipped if s.file != ".")])
        sessions = os.path.join(os.fspath(self.store.path), SESSIONS_DIR)
        try:
            with os.scandir(sessions) as it:
                for entry in it:
                    if entry.name.endswith(".lock"):
                        names.setdefault(f"{SESSIONS_DIR}/{entry.name}")
        except OSError:
            pass
        for rel in list(names):
            parts = rel.split("/")
            for i in range(1, len(parts)):
                names.setdefault("/".join(parts[:i]))
        present = set(names)
        reported = self._in_transcripts
        for rel in sorted(names):
            if rel in DATABASE_FILES:
                continue
            if rel.startswith(SESSIONS_DIR + "/") and rel.endswith(".lock") \
                    and rel[:-len(".lock")] + ".jsonl" in present:
                continue
            base = rel.rsplit("/", 1)[-1]
            for value, det, _ln in self._text(base, "memory.txt"):
                h = value_hash(value)
                if (rel, h) not in reported and not (is_transcript(rel) and h in self.allowlist):
                    self._add(value, det, KIND_FILE, rel)

    def _merge(self, res: FileScan) -> None:
        if res.gone:
            self.report.skipped.append(Skipped(res.rel, GONE, unreadable=False))
            return
        if res.error is not None:
            self.report.skipped.append(Skipped(res.rel, res.error))
            return
        self.report.files_scanned += 1
        self.report.bytes_scanned += res.size
        for value, det, kind, loc in res.hits:
            self._add(value, det, kind, res.rel, **loc)

    # -- adding findings

    def _add(self, value: str, detector: str, kind: str, file: str, *,
             stored: Any = None, **loc: Any) -> None:
        """A finding (once).  ``stored``: a fact's id exactly as stored
        (:meth:`Finding.stored_fact_id`), when ``loc``'s ``fact_id`` is it
        as shown."""
        h = value_hash(value)
        if kind == KIND_DATABASE:
            raw = (file, h)
            if raw in self._seen_raw:
                return
            self._seen_raw.add(raw)
        else:
            # (a key holds its line: two findings with one key come from
            # one line, one after the other -- a file's hits in order of
            # their lines, a transcript's in order of its records, a
            # revision's after each other; before 2026-12-07 the keys of
            # every finding were kept, 100,000 of them for 100,000)
            # (a fact by its id as stored: the text 'ZZ' and the BLOB b'ZZ'
            # are two facts, each with its findings)
            at = (kind, file, loc.get("line"), loc.get("fact_id"), loc.get("revision"),
                  None if stored is None else _stored_key(stored))
            if at != self._seen_at:
                self._seen.clear()
                self._seen_at = at
            key = (loc.get("session_id"), loc.get("seq"), loc.get("path"), h)
            if key in self._seen:
                return
            self._seen.add(key)
        if h in self.allowlist:
            self.report.allowlisted += 1
            return
        if kind == KIND_TRANSCRIPT:
            self._in_transcripts.add((file, h))
        found = Finding(detector, kind, file, mask(value), len(value), h,
                        self.store.slug, value=value, **loc)
        if stored is not None:
            object.__setattr__(found, "_stored_fact_id", stored)
        self.report.findings.append(found)

    def _text(self, text: str, filename: str) -> Iterator[tuple[str, str, int]]:
        return _text_hits(self.detector, text, filename)

    def _facts(self) -> set[str]:
        """Scan every revision's text: the values found; and in
        :attr:`_fact_runs` each value -> the texts of the revisions it was
        found in, each followed by its ``created`` (the bytes a revision's
        record holds from its text on: see :meth:`_database`)."""
        from .facts import BUSY_TIMEOUT, FactStore, fact_from_group

        values: set[str] = set()
        try:
            fs = FactStore.open_readonly(
                self.store.facts_db,
                busy_timeout=BUSY_TIMEOUT if self.lock_wait is None else self.lock_wait)
        except MemctlError as exc:
            self.report.skipped.append(Skipped(FACTS_DB, f"facts not read: {exc}", error=exc))
            return values
        try:
            # (the listing's reads: a few queries, not several per fact)
            read: set[tuple[str, int]] | None = set() if self.revisions else None
            # (each fact's id as stored, group[0], carried in its findings:
            # what redact forgets -- fact.fact_id is it as the listing shows
            # it, a BLOB's bytes decoded, which a text id may share)
            for group in fs.iter_fact_groups(bare=True):
                fact, revs = fact_from_group(group)
                stored = group[0]
                for rev in revs:
                    if read is not None:
                        read.add((stored, rev.revision))
                    for value, det, _ln in self._text(rev.text, "fact.txt"):
                        values.add(value)
                        self._fact_runs.setdefault(value, set()).add(rev.text + rev.created)
                        self._add(value, det, KIND_FACT, FACTS_DB, stored=stored,
                                  fact_id=fact.fact_id, revision=rev.revision)
            if read is not None:
                self.report.fact_revisions = frozenset(read)
        except MemctlError as exc:
            self.report.skipped.append(Skipped(FACTS_DB, f"facts not read: {exc}", error=exc))
        except Exception as exc:  # noqa: BLE001 - sqlite3 errors of a damaged database
            self.report.skipped.append(Skipped(FACTS_DB, f"facts not read: {type(exc).__name__}"))
        finally:
            fs.close()
        return values

    def _database(self, rel: str, path: str, live: set[str]) -> bool:
        """Printable strings of the raw pages (a value already reported in a
        live fact text is not reported again: it is the same text; so is a
        value that begins with one of them and is part of the text of a
        revision it was found in followed by that revision's ``created``:
        a pattern with an open-ended tail, a Slack token's, having gone on
        from the text into the next column's bytes of the record, the
        ``created`` timestamp -- before 2026-12-07 it was reported a second
        time, with another hash, which allowlisting the fact's did not
        silence; a different token that merely begins with a live value is
        reported).  ``live``: :meth:`_facts`' values.  Whether the file was cut
        short while it was read (a ``-wal`` checkpointed with TRUNCATE:
        what it held is in the database now)."""
        fd = open_nofollow(path)
        try:
            size = os.fstat(fd).st_size
            self.report.files_scanned += 1
            self.report.bytes_scanned += size
            if size == 0:
                return False
            prefixes = _Prefixes(live)
            seen: set[str] = set()
            cut: list[int] = []
            for start, raw in raw_strings(fd, size=size, cut=cut):
                text = raw.decode("utf-8", "surrogateescape")
                # bytes before character ``at`` of text, counted on from
                # the previous hit (hits come in order of start; each
                # character encodes on its own)
                at = nbytes = 0
                for hit in self.detector.scan(text, "database.txt", whole_tokens=False):
                    value = text[hit.start:hit.end]
                    if value in seen or prefixes.any_starts_with(value) \
                            or any(value in run for one in prefixes.ones_it_begins_with(value)
                                   for run in self._fact_runs.get(one, ())):
                        continue
                    seen.add(value)
                    if hit.start < at:
                        at = nbytes = 0
                    nbytes += len(text[at:hit.start].encode("utf-8", "surrogateescape"))
                    at = hit.start
                    self._add(value, hit.detector, KIND_DATABASE, rel, offset=start + nbytes)
            return bool(cut)
        finally:
            os.close(fd)


#: How much of a database file :func:`raw_strings` reads at a time.
RAW_PIECE = 1 << 22
_PRINTABLE = bytes([9, 10, 13, *range(0x20, 0x7f), *range(0x80, 0x100)])


def raw_strings(fd: int, piece: int = RAW_PIECE, *, size: int | None = None,
                cut: list[int] | None = None) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of each printable run of :data:`MIN_RAW_STRING` bytes
    or more in the open file ``fd``, read with ``pread`` a piece at a time,
    never mapped: a file cut short under a mapping kills the process with
    SIGBUS, and a live ``-wal`` is cut to nothing by a ``wal_checkpoint
    (TRUNCATE)`` (the agent's, or ``memctl redact``'s) -- before 2026-12-07
    ``secrets`` died so in a third of its runs beside such a writer.  A file
    that shrinks meanwhile is read to where it now ends.  A run longer than
    ``piece`` comes in parts that overlap by :data:`WINDOW_OVERLAP` bytes
    (at most half a piece) (a
    value across a cut is in the next part too); memory follows ``piece``,
    not the file.  ``size``: the file's size when it was opened, read no
    further (a file growing meanwhile is not followed); when the file ends
    before it (cut short, even if it grew again), its offset is appended to
    ``cut``."""
    overlap = min(WINDOW_OVERLAP, piece // 2)
    pos = 0             # the file offset of buf[0]
    buf = b""
    while True:
        at = pos + len(buf)
        want = piece if size is None else max(0, min(piece, size - at))
        chunk = os.pread(fd, want, at) if want else b""
        buf += chunk
        if len(chunk) < want and cut is not None:
            cut.append(at + len(chunk))     # (ended before the size it had)
        if not chunk:       # the end (or the file cut short meanwhile)
            for m in _RAW_STRING.finditer(buf):
                yield pos + m.start(), m.group(0)
            return
        # a printable run at the end may go on in the next piece: held back
        tail = len(buf.rstrip(_PRINTABLE))
        for m in _RAW_STRING.finditer(buf, 0, tail):
            yield pos + m.start(), m.group(0)
        keep = tail
        if len(buf) - tail > piece:
            # (one run longer than a piece: given in parts, the next one
            # starting WINDOW_OVERLAP bytes before this one ends)
            yield pos + tail, buf[tail:]
            keep = len(buf) - overlap
        pos += keep
        buf = buf[keep:]


#: The places a hit of a file can name (:class:`Hits`).
HIT_PLACES = ("session_id", "seq", "path", "line", "offset", "fact_id", "revision")


class Hits:
    """A file's hits, ``(value, detector, kind, place)`` each (``place``: a
    dict of some of :data:`HIT_PLACES`), held until the file is read to its
    end (an unreadable file reports none of them: :meth:`clear`), each as
    one line of numbers: every text (a value, a detector, a session id, a
    path) kept once, and a hit of a transcript some 30 bytes, not the
    objects a list held (409 bytes a hit: 100,000 hits of one key in one
    transcript took some 40 MiB in the worker that scanned it, and again
    in the process that took its scan, before 2026-12-07).  Iterated, the
    hits come back in order, as they were appended."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._index: dict[Any, int] = {}
        self._texts: list[Any] = []

    def _text(self, text: Any) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self._texts)
            self._texts.append(text)
        return i

    def append(self, hit: tuple[str, str, str, dict[str, Any]]) -> None:
        value, det, kind, place = hit
        text = self._text
        row = [text(value), text(det), text(kind), 0, 0]
        given = texts = 0       # (bit k: place k given; given as a text's number)
        for k, name in enumerate(HIT_PLACES):
            if name in place:
                v = place[name]
                given |= 1 << k
                if type(v) is not int:      # (a str, None: as a text)
                    texts |= 1 << k
                    v = text(v)
                row.append(v)
        row[3], row[4] = given, texts
        self._data += (",".join(map(str, row)) + "\n").encode("ascii")

    def clear(self) -> None:
        self._data = bytearray()
        self._index, self._texts = {}, []

    def __len__(self) -> int:
        return self._data.count(b"\n")

    def __eq__(self, other: object) -> bool:
        """The same hits, in order, as ``other`` (hits, or a list of them)."""
        if isinstance(other, Hits | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None     # type: ignore[assignment]

    def __iter__(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        texts, data = self._texts, self._data
        at = 0
        while at < len(data):
            end = data.index(b"\n", at)
            row = [int(n) for n in data[at:end].split(b",")]
            at = end + 1
            place: dict[str, Any] = {}
            given, as_text = row[3], row[4]
            j = 5
            for k, name in enumerate(HIT_PLACES):
                if given >> k & 1:
                    v = row[j]
                    j += 1
                    place[name] = texts[v] if as_text >> k & 1 else v
            yield texts[row[0]], texts[row[1]], texts[row[2]], place

    def __getstate__(self) -> dict[str, Any]:
        # (to the process that takes a worker's scan: no index)
        return {"_data": self._data, "_texts": self._texts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data, self._texts = state["_data"], state["_texts"]
        self._index = {t: i for i, t in enumerate(self._texts)}


@dataclass
class FileScan:
    rel: str
    size: int = 0
    hits: Hits = field(default_factory=Hits)
    error: str | None = None
    gone: bool = False      # listed, then removed before it was opened


def _text_hits(detector: Detector, text: str, filename: str) -> Iterator[tuple[str, str, int]]:
    """(value, detector, 1-based line) of each hit in ``text``."""
    return _hit_lines(text, detector.scan(text, filename))


def _hit_lines(text: str, hits: Iterable[Hit], first: int = 1) -> Iterator[tuple[str, str, int]]:
    """(value, detector, line) of each of the ``hits`` in ``text``, whose first
    line is line ``first``.  The hits come in order of start: the newlines
    are counted on from the previous hit, not from the start of the text
    (hits x text was quadratic)."""
    line, at = first, 0
    for hit in hits:
        if hit.start < at:              # (not in order: count from the start)
            line, at = first, 0
        line += text.count("\n", at, hit.start)
        at = hit.start
        yield text[hit.start:hit.end], hit.detector, line


def scan_file(detector: Detector, root: str, rel: str) -> FileScan:
    """One transcript (read a line at a time: memory follows its longest
    line, not the file) or text file of a store (read a piece at a time,
    :func:`_file_hits`)."""
    out = FileScan(rel)
    path = os.path.join(root, rel)
    try:
        if is_transcript(rel):
            with open(open_regular(path), "rb", buffering=TRANSCRIPT_PIECE) as f:
                out.size = _transcript_hits(detector, rel, f, out.hits)
        else:
            with open_owned(path) as f:
                out.size = _file_hits(detector, f.fileno(),
                                      os.path.basename(rel).removesuffix(".bak"), out.hits)
    except FileNotFoundError:
        # (listed, then gone: another writer's temporary file renamed into
        # place, say; nothing is there to hold a value, and the store is not
        # unreadable: exit 5 from redact, 1 from secrets, before 2026-12-07)
        out.gone = True
        out.hits.clear()
    except OSError as exc:
        out.error = exc.strerror or str(exc)
        out.hits.clear()    # (an unreadable file: none of it is reported, as before it was read)
    return out


FILE_PIECE = 1 << 20
"""Bytes of a text file scanned at a time (:func:`_file_hits`)."""


def _file_hits(detector: Detector, fd: int, filename: str, hits: Any) -> int:
    """The hits of the text file open as ``fd`` (read from its start), scanned
    a piece of :data:`FILE_PIECE` bytes or more at a time, cut after a
    newline; its size.  Memory follows the piece, the longest line and the
    longest private key block, not the file (a 30 MB MEMORY.md read whole,
    with its list of lines, took 190 MiB).

    The hits are exactly those of the whole text (:func:`_text_hits`), in the
    same order, with the same lines:

    * a piece ends after a newline (or at the end of the file), and a newline
      byte is never part of a UTF-8 sequence: the pieces decode (with
      ``surrogateescape``) to the whole text's characters, cut after its
      newlines, and a piece's lines are the text's own;
    * a detector sees one line (or a window of it) at a time, and its hit,
      run on to the end of its token (:func:`token_end`, which stops at a
      newline), stays in its line; only a private key block spans lines,
      and :func:`_pem_span` raises :class:`PieceTooShort` when its end may
      lie past the piece: the piece is then scanned again with the file up
      to the next END line (found by reading ahead, nothing kept: when the
      file has none, a block ends at an empty line, which a piece twice as
      long is looked for in until one holds it or the file ends);
    * so no candidate hit of the whole text crosses the end of a piece
      scanned without that error, and :func:`_non_overlapping`, which takes
      each candidate in turn unless it overlaps one taken before, decides
      each candidate by the ones it overlaps alone: those of its own piece.
      The pieces' hits, one piece after another, are the whole text's,
      and a piece's first line is one more than the newlines before it.
    """
    size = 0            # bytes before buf: scanned
    line = 1            # the line buf starts
    buf = bytearray()   # read, not scanned; starts a line
    eof = False
    no_end_from: int | None = None   # from this offset on the file has no END line
    need = FILE_PIECE
    while True:
        # read until buf holds ``need`` bytes and a newline at or after them
        looked = max(need - 1, 0)      # (a newline is looked for once a byte)
        while not eof:
            if len(buf) >= need:
                if buf.find(b"\n", looked) >= 0:
                    break
                looked = len(buf)
            data = os.read(fd, FILE_PIECE)
            if data:
                buf += data
            else:
                eof = True
        # (cut after the first newline from ``need`` on, not the last one
        # read: a piece cut inside the next private key block would be read
        # ahead and grown again, block after block -- a file of keys was one
        # piece, scanned again at each)
        nl = buf.find(b"\n", max(need - 1, 0))
        cut = nl + 1 if nl >= 0 else len(buf)
        if cut == 0:
            return size
        text = buf[:cut].decode("utf-8", "surrogateescape")
        if eof and cut == len(buf):
            tail = TAIL_NONE
        elif no_end_from is not None and no_end_from <= size + cut:
            tail = TAIL_NO_END
        else:
            tail = TAIL_UNKNOWN
        try:
            found = detector.scan(text, filename, tail=tail)
        except PieceTooShort:
            del text
            if tail == TAIL_UNKNOWN:
                end = _next_pem_end(fd, size + cut)
                if end is not None:
                    need = end - size
                    continue
                no_end_from = size + cut
            else:
                need = 2 * cut
            continue
        for value, det, ln in _hit_lines(text, found, line):
            hits.append((value, det, KIND_FILE, {"line": ln}))
        line += text.count("\n")
        size += cut
        del buf[:cut]
        need = FILE_PIECE


def _next_pem_end(fd: int, offset: int) -> int | None:
    """The offset just past the first END line of a private key in the file
    ``fd`` at or after ``offset`` (a line's start), or None: read ahead
    (``pread``) a piece at a time, keeping only a line cut by a piece's end.
    (The pattern is ASCII: it matches the bytes where it matches the text
    they decode to.)"""
    carry = b""
    at = offset            # the offset of carry
    while True:
        data = os.pread(fd, FILE_PIECE, at + len(carry))
        if not data:            # (the last line, with no newline)
            m = _PEM_END_BYTES.search(carry)
            return None if m is None else at + m.end()
        data = carry + data
        cut = data.rfind(b"\n") + 1
        m = _PEM_END_BYTES.search(data, 0, cut)
        if m is not None:
            return at + m.end()
        carry = data[cut:]
        at += cut


TRANSCRIPT_PIECE = 1 << 20


def parsed_record(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """(the line parsed when it is a JSON object, else None; whether one of
    its objects gives a key twice: a parser keeps one of the two values,
    orjson the last, and the other is on disk all the same, so the scan
    reads every string of such a line (:func:`json_strings`) and ``redact``
    rewrites them in the line (before 2026-12-07 the other value was
    neither found nor erased).  A line as orjson writes it (lecode's,
    every line of the bench stores) is told by writing the record again;
    any other by one pass over its strings and brackets
    (:func:`_gives_a_key_twice`).  The line is parsed as every session
    reader parses it (:func:`~lecode_memctl.core.sessions.load_record`: a
    number beyond a double is a record too; before 2026-12-07 such a line
    was scanned as raw text, so a value spelled with a JSON escape in it was
    neither found nor erased)."""
    from .sessions import RecordTooLarge, load_record

    try:
        obj = load_record(line)
    except (orjson.JSONDecodeError, RecordTooLarge):
        return None, False
    if not isinstance(obj, dict):
        return None, False
    try:
        same = orjson.dumps(obj) == line
    except orjson.JSONEncodeError:     # (nested past what orjson writes)
        same = False
    return obj, not same and _gives_a_key_twice(line)


# a JSON string (unrolled: the engine keeps no state per character, so a
# 16 MiB string costs what its bytes do), or a bracket or comma
_JSON_TOKEN = lazy_compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]')


def other_json_strings(line: bytes) -> list[tuple[int, int, str]] | None:
    """Of a line that parses as JSON but is no object, no record (a string,
    an array, a number), as every session reader parses it
    (:func:`~lecode_memctl.core.sessions.load_record`): the (start, end,
    decoded text) of each of its strings, keys included, in the order of
    the line; None for a line that does not parse, or is an object
    (:func:`parsed_record`).  Its strings are searched decoded, as a
    record's are, so a value spelled with a JSON escape there is found and
    erased (before 2026-12-07 such a line was read as raw text, the escape
    not decoded)."""
    from .sessions import RecordTooLarge, load_record

    try:
        obj = load_record(line)
    except (orjson.JSONDecodeError, RecordTooLarge):
        return None
    if isinstance(obj, dict):
        return None
    # (well formed: outside its strings no quote, so each string token the
    # pattern meets is one of its strings)
    return [(m.start(), m.end(), _decoded(m.group())) for m in _JSON_TOKEN.finditer(line)
            if m.group()[:1] == b'"']

#: What :func:`json_strings` gives for each string of a line: the token's
#: (start, end) in the line, its text, whether it is a key, the top-level
#: key it lies under (None for a top-level key itself), whether it lies in
#: the ``session_id`` member (its key or anything in its value) of an
#: object in the top-level ``lineage`` list, whether it lies in a binary
#: part's ``data`` member, and whether it lies in a member a parse drops (a
#: key given twice: every occurrence but the last).
JsonString = tuple[int, int, str, bool, str | None, bool, bool, bool]


def _decoded(tok: bytes) -> str:
    if b"\\" not in tok:
        return tok[1:-1].decode("utf-8", "surrogateescape")
    text: str = orjson.loads(tok)
    return text


def _object_members(line: bytes
                    ) -> tuple[dict[int, str | None], dict[int, dict[str, int]], bool]:
    """Of each object of ``line``, by the order its ``{`` comes in: its
    ``type`` as a parse keeps it (the last one given; None when that one is
    not a string), and where the last occurrence of each of its keys starts;
    and whether an object gives a key twice (a key compared as its decoded
    text: ``"a"`` and ``"\\u0061"`` are one key)."""
    types: dict[int, str | None] = {}
    last: dict[int, dict[str, int]] = {}
    twice = False
    stack: list[list[Any]] = []      # [is an object, its number, its current key]
    count = 0
    want_key = False
    for m in _JSON_TOKEN.finditer(line):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            top = stack[-1]
            if want_key:
                key = _decoded(tok)
                top[2] = key
                keys = last.setdefault(top[1], {})
                twice = twice or key in keys
                keys[key] = m.start()
                if key == "type":
                    types[top[1]] = None        # (until a string value says what)
                want_key = False
            elif top[0] and top[2] == "type":
                types[top[1]] = _decoded(tok)
        elif c == b"{":
            stack.append([True, count, None])
            count += 1
            want_key = True
        elif c == b"[":
            stack.append([False, -1, None])
            want_key = False
        elif c == b",":
            want_key = bool(stack) and stack[-1][0]
        else:
            stack.pop()
            want_key = False
    return types, last, twice


def json_strings(line: bytes) -> Iterator[JsonString]:
    """Every string of the JSON text ``line`` (which orjson parsed, so well
    formed), keys included, in the order of the line: each as
    :data:`JsonString`.  Two passes over its strings and brackets (the
    first finds each object's ``type`` and the last occurrence of each key,
    as a parse keeps them) with a stack, no recursion (a record nested
    1,000 deep is read as a flat one), time and memory following the line.
    A key given twice is met twice: the values a parse keeps one of are all
    here, the others marked as dropped."""
    types, last, _twice = _object_members(line)
    # a frame per open container: [is an object, its current key, its
    # number, a binary part, the current member kept by a parse, and what
    # it inherits: in a binary part's data, dropped, in a lineage ref's
    # session_id]
    stack: list[list[Any]] = []
    count = 0
    want_key = False
    for m in _JSON_TOKEN.finditer(line):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            text = _decoded(tok)
            top = stack[-1]
            depth = len(stack)
            ref = depth == 3 and stack[0][1] == "lineage" and not stack[1][0]
            if want_key:
                kept = last[top[2]][text] == m.start()
                top[1], top[4] = text, kept
                yield (m.start(), m.end(), text, True,
                       stack[0][1] if depth > 1 else None,
                       top[7] or (ref and text == "session_id"),
                       top[5] or (top[3] and text == "data"),
                       top[6] or not kept)
                want_key = False
            else:
                member = top[0]
                yield (m.start(), m.end(), text, False, stack[0][1],
                       top[7] or (ref and top[1] == "session_id"),
                       top[5] or (member and top[3] and top[1] == "data"),
                       top[6] or (member and not top[4]))
        elif c in b"{[":
            parent = stack[-1] if stack else None
            member = bool(parent and parent[0])
            ref = (len(stack) == 3 and stack[0][1] == "lineage" and not stack[1][0])
            inherit = (
                bool(parent and (parent[5] or (member and parent[3] and parent[1] == "data"))),
                bool(parent and (parent[6] or (member and not parent[4]))),
                bool(parent and (parent[7] or (ref and parent[1] == "session_id"))))
            if c == b"{":
                stack.append([True, None, count, types.get(count) == "binary", True, *inherit])
                count += 1
                want_key = True
            else:
                stack.append([False, None, -1, False, True, *inherit])
                want_key = False
        elif c == b",":
            want_key = bool(stack) and stack[-1][0]
        else:                                   # } or ]
            stack.pop()
            want_key = False


def _gives_a_key_twice(line: bytes) -> bool:
    """Whether an object of the JSON text ``line`` (which orjson parsed, so
    well formed) gives a key twice (:func:`_object_members`)."""
    return _object_members(line)[2]


SHORT_TEXT = 64          # a transcript's strings up to this length have their hits kept ...
SHORT_KEPT = 4096        # ... this many of them at a time


#: keys whose string members are never read as "key": "value": a fact's id
#: (a learning proposal's conflicts name facts by it)
NOT_KEYED = frozenset({"fact_id"})


def record_leaves(rec: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """:func:`~lecode_memctl.core.grep.string_leaves` of a record, keys
    included, in the same order and at the same paths, each with the key
    of its member when it is the string value of a member the store
    contract does not name where it is (``redact.STRUCTURE``: a tool
    call's arguments, not a message's ``content`` or a lineage's
    ``digest``), nor, in an event, a member of an object shaped as a
    SourceRef (with ``session_id`` and ``digest`` members, at any depth: a
    learning proposal's evidence) nor a ``fact_id`` (:data:`NOT_KEYED`), else
    None: the members scanned as JSON writes them
    (:meth:`Detector.member_hits`).  Iterative, as ``string_leaves``."""
    from .redact import _child, _kind, _structure

    kind = _kind(rec)
    # (a SourceRef's shape is the contract's only in events: a learning
    # proposal's evidence; in a message, tool-call arguments are the model's)
    refs = kind in ("event", "compact")
    stack: list[Iterator[tuple[str, Any, str | None, Any]]] = [
        _leaf_members(rec, "$", _structure(kind, ())[0], (), refs)]
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            continue
        p, v, key, place = nxt
        if isinstance(v, str):
            yield p, v, key
        elif isinstance(v, Mapping):
            stack.append(_leaf_members(v, p, _structure(kind, place)[0], place, refs))
        elif isinstance(v, list):
            stack.append(_leaf_items(v, p, _child(place, None)))


def _leaf_items(items: list[Any], path: str, place: Any
                ) -> Iterator[tuple[str, Any, str | None, Any]]:
    for i, v in enumerate(items):
        yield f"{path}[{i}]", v, None, place


def _leaf_members(obj: Mapping[Any, Any], path: str, named: frozenset[str], place: Any,
                  refs: bool = True) -> Iterator[tuple[str, Any, str | None, Any]]:
    """(path, value, its key when a string the contract does not name, the
    place of a container) of each member of ``obj``, its key first.
    ``refs``: an object shaped as a SourceRef is the contract's (in an
    event), its members not keyed."""
    from .grep import _key_path

    binary = obj.get("type") == "binary"
    # an object shaped as a SourceRef, wherever it is (a learning proposal's
    # source, source_snapshot or ref, or the proposal's own session_id,
    # seqs and digest): evidence the contract defines, none of its members
    # read as "key": "value" (before 2026-12-07 a proposal's digest was a
    # hex-high-entropy-string, and redact wrote its marker in it)
    # (in a message's tool-call arguments the same shape is the model's: a
    # password beside a session_id and a digest was not looked for)
    ref = refs and "session_id" in obj and "digest" in obj
    for k, v in obj.items():
        if isinstance(k, str) and not (binary and k == "data"):
            member = path + _key_path(k)
            yield member, k, None, None
            if isinstance(v, str):
                yield member, v, (None if ref or k in named or k in NOT_KEYED else k), None
            elif isinstance(v, (Mapping, list)):
                # (no place the contract names is deeper than two steps)
                yield member, v, None, (place + (k,) if place is not None and len(place) < 2
                                        else None)


def _transcript_hits(detector: Detector, rel: str, lines: Iterable[bytes],
                     hits: Any) -> int:
    """The hits of a transcript given as its ``lines`` (each with its newline,
    the last one maybe without: a torn tail, scanned as text); its size."""
    sid = rel.split("/", 1)[1][:-len(".jsonl")]
    size = 0
    # The hits of the short strings met so far (the keys and the roles, names
    # and ids every record repeats): a scan is a function of its text alone.
    short: dict[str, list[tuple[str, str, int]]] = {}
    keyed_cache: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for lineno, raw in enumerate(lines, 1):
        size += len(raw)
        whole = raw.endswith(b"\n")
        line = raw[:-1] if whole else raw
        rec, twice = parsed_record(line) if whole else (None, False)
        if rec is not None:
            # (a seq that is no integer -- true is none -- is null, as the
            # schema says: before 2026-12-07 ``"seq": true`` came out true)
            seq = rec.get("seq") if type(rec.get("seq")) is int else None
            leaves = list(record_leaves(rec))
            if twice:
                # the strings a parse dropped (a key given twice), each
                # scanned with the record's seq, no path (json_strings)
                held = {s for _p, s, _k in leaves}
                for _a, _b, text, _key, _top, _lineage, binary_data, dropped in \
                        json_strings(line):
                    if binary_data and not dropped:
                        continue        # (a binary part's data, as string_leaves skips it)
                    if text not in held:
                        held.add(text)
                        for value, det, _ln in _text_hits(detector, text, "transcript.txt"):
                            hits.append((value, det, KIND_TRANSCRIPT,
                                         {"session_id": sid, "seq": seq, "line": lineno}))
            for jpath, s, key in leaves:
                if len(s) > SHORT_TEXT:
                    found: list[tuple[str, str, int]] = list(
                        _text_hits(detector, s, "transcript.txt"))
                else:
                    got = short.get(s)
                    if got is None:
                        if len(short) >= SHORT_KEPT:
                            short.clear()
                        got = short[s] = list(_text_hits(detector, s, "transcript.txt"))
                    found = got
                for value, det, _ln in found:
                    hits.append((value, det, KIND_TRANSCRIPT,
                                 {"session_id": sid, "seq": seq, "path": jpath, "line": lineno}))
                if key is not None and not found:
                    # a member's value the leaf alone gave nothing in, read
                    # as its member is written: "key": "value"; found at
                    # the value's path, as the leaf's own hits
                    keyed = keyed_cache.get((key, s))
                    if keyed is None:
                        keyed = detector.member_hits(key, s) or []
                        if len(key) + len(s) <= SHORT_TEXT:
                            if len(keyed_cache) >= SHORT_KEPT:
                                keyed_cache.clear()
                            keyed_cache[(key, s)] = keyed
                    for value, det in keyed:
                        hits.append((value, det, KIND_TRANSCRIPT,
                                     {"session_id": sid, "seq": seq, "path": jpath,
                                      "line": lineno}))
        else:
            text = line.decode("utf-8", "surrogateescape")
            for value, det, _ln in _text_hits(detector, text, "transcript.txt"):
                hits.append((value, det, KIND_TRANSCRIPT, {"session_id": sid, "line": lineno}))
            # a whole line that is JSON but no object (a string, an array):
            # its strings with an escape searched decoded too (a value
            # found twice is one finding); a line that does not parse (a
            # torn tail) is read as raw text only, its escapes as written
            strings = other_json_strings(line) if whole and b"\\" in line else None
            for start, end, s in strings or ():
                if b"\\" not in line[start:end]:
                    continue        # (its raw text is the text: searched above)
                for value, det, _ln in _text_hits(detector, s, "transcript.txt"):
                    hits.append((value, det, KIND_TRANSCRIPT,
                                 {"session_id": sid, "line": lineno}))
    return size


_WORKER_DETECTOR: Detector | None = None


def _scan_files_job(files: list[tuple[str, str]]) -> list[FileScan]:
    """A worker's task: the scans of some files, each ``(root, rel)``."""
    global _WORKER_DETECTOR
    if _WORKER_DETECTOR is None:
        _WORKER_DETECTOR = Detector()
    return [scan_file(_WORKER_DETECTOR, root, rel) for root, rel in files]


def scan_store(store: Store, *, detector: Detector | None = None,
               allowlist: frozenset[str] = frozenset(), jobs: int = 1,
               lock_wait: float | None = None, revisions: bool = False,
               spill: Any = None) -> SecretsReport:
    """Scan one store (reads only).  ``lock_wait``: seconds to wait for a stable
    snapshot of the facts database (default the 5 s busy timeout).
    ``revisions``: keep the (fact id, revision) of every revision read, in
    :attr:`SecretsReport.fact_revisions` (redact's plan needs them).
    ``spill``: a :class:`.held.Spill` the report's findings are held in past
    :data:`FINDINGS_HELD_IN_MEMORY` bytes (:class:`HeldFindings`, the
    ``secrets`` command's); without it, a list of :class:`Finding`."""
    return Scanner(store, detector or Detector(), allowlist=allowlist,
                   lock_wait=lock_wait, revisions=revisions, spill=spill).run(jobs=jobs)


def select(findings: Iterable[Finding], *, sessions: Iterable[str] | None = None,
           seqs: Iterable[int] | None = None, detectors: Iterable[str] | None = None,
           pattern: re.Pattern[str] | None = None) -> list[Finding]:
    """The findings picked by ``redact``'s options (all of them by default)."""
    ss = set(sessions) if sessions else None
    qq = set(seqs) if seqs else None
    dd = set(detectors) if detectors else None
    out = []
    for f in findings:
        if ss is not None and f.session_id not in ss:
            continue
        if qq is not None and f.seq not in qq:
            continue
        if dd is not None and f.detector not in dd:
            continue
        if pattern is not None and pattern.search(f.secret_value()) is None:
            continue
        out.append(f)
    return out


__all__ = ["Detector", "Finding", "SecretsReport", "Scanner", "scan_store", "load_allowlist",
           "mask", "marker", "value_hash", "detector_slug", "select", "KINDS",
           "session_id_values", "replace_values", "replaced_spans", "hide_values", "mask_session_ids",
           "hide_in_location", "user_named", "LAYOUT_NAMES",
           "mask_paths", "found_values", "mask_store_names"]


# --------------------------------------------------------------------------
# Prometheus text (for cron and node_exporter's textfile collector)
