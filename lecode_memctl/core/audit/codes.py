"""The audit's finding codes (``CODES``: severity, check group, location
fields, meaning), findings and the per-store summary."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from .._record import record
from ..errors import UsageError
from ..sourceref import STATUSES

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
SEVERITY_RANK = {ERROR: 0, WARNING: 1, INFO: 2}

@record(frozen=True)
class CodeInfo:
    severity: str            # default severity ("warning or error" codes say so in meaning)
    check: str               # the group in the human summary
    location: tuple[str, ...]
    meaning: str
    deep_only: bool = False


CODES: dict[str, CodeInfo] = {
    # layout
    "layout.unexpected_file": CodeInfo(WARNING, "layout", ("file",),
        "a file or directory that is not part of the store layout"),
    "layout.temp_file": CodeInfo(WARNING, "layout", ("file",),
        "a temporary file left by an interrupted atomic write (.NAME.tmp-HEX); info when "
        "modified in the last minute (a write in progress; never in a bundle's audit)"),
    "layout.permissions": CodeInfo(WARNING, "layout", ("file",),
        "a file or directory accessible by group or others (mode & 077 is not 0)"),
    "layout.symlink": CodeInfo(ERROR, "layout", ("file",),
        "a symbolic link inside the store (memctl and lecode never follow them)"),
    "layout.unreadable": CodeInfo(ERROR, "layout", ("file",),
        "a file or directory that cannot be listed or read"),
    # markdown
    "markdown.invalid_utf8": CodeInfo(ERROR, "markdown", ("file", "offset"),
        "a Markdown file that is not valid UTF-8 (offset of the first bad byte)"),
    "markdown.orphan_backup": CodeInfo(WARNING, "markdown", ("file",),
        "a .bak whose Markdown file does not exist"),
    # config
    "config.invalid": CodeInfo(ERROR, "config", ("file",),
        "config.toml cannot be read or parsed, or [memory] is not a table"),
    "config.out_of_range": CodeInfo(ERROR, "config", ("file", "key"),
        "a [memory] value of the wrong type or outside its valid range"),
    # database
    "db.unreadable": CodeInfo(ERROR, "db", ("file",),
        "facts.sqlite3 cannot be opened read-only, is not a database, or lacks a table or "
        "column memctl reads (with --all-projects also: it stayed busy past --lock-wait, "
        "or this machine's temporary space failed (a full $TMPDIR), and was not audited, "
        "or the reading of its facts met a damaged page, and the facts "
        "from there on were not audited)"),
    "db.integrity": CodeInfo(ERROR, "db", ("file",),
        "PRAGMA integrity_check reported a problem (one finding per line it reports; "
        "where it stops at a damaged page, that, then quick_check's lines)"),
    "db.unchecked": CodeInfo(WARNING, "db", ("file",),
        "PRAGMA integrity_check could not run: the database has a table, index or column "
        "whose collation or function only another application defines; each other table is "
        "checked alone, and the facts are audited"),
    "db.foreign_key": CodeInfo(ERROR, "db", ("file", "table"),
        "a row whose parent is missing (the rows PRAGMA foreign_key_check reports), or a "
        "table that cannot be checked because its parent table lost its primary key"),
    "db.schema_unknown": CodeInfo(ERROR, "db", ("file",),
        "the schema version is newer than this memctl knows, or unrecognisable (an older "
        "version with a table no migration can take as it is), or a lecode table holds "
        "what lecode never writes (a generated column, a CHECK constraint of its own, an "
        "index on an expression or a partial one), which integrity_check then does not check"),
    "db.needs_migration": CodeInfo(WARNING, "db", ("file",),
        "the schema is an older known version; lecode migrates it on its next write"),
    "db.generation_mismatch": CodeInfo(ERROR, "db", ("file",),
        "the exclusion generation is lower than the exclusions and retry markers imply, a "
        "generation (in meta, forgotten or exclusions) is not a non-negative integer, or meta "
        "holds more than one generation row (every command reads the highest), one whose "
        "key is a BLOB, or none (every command reads the implied generation)"),
    "db.malformed_exclusion": CodeInfo(ERROR, "db", ("file",),
        "an exclusions row whose session id is not text or whose position is not a "
        "non-negative integer (a writer that bound the id as bytes, a table that lost its "
        "types): read fail-closed, it still hides the position its value spells (a BLOB "
        "id as its bytes decoded, a position as its digits); one that spells none hides "
        "nothing"),
    "db.rolled_back": CodeInfo(ERROR, "db", ("file",),
        "the exclusion generation or exclusion count is below the highest memctl saw for this "
        "store, or a fact id it saw forgotten is no longer in forgotten (its mark, kept "
        "outside the store, of the same slug, or of the same database under another slug: "
        "\"memctl's mark, outside the store\"): the database was put "
        "back from an older copy, deleted, or deleted and made again, so forgotten evidence "
        "may be visible again"),
    "db.forgotten_fact_present": CodeInfo(ERROR, "db", ("fact_id",),
        "a live fact whose id is in forgotten (its rows put back by hand, or from a copy, after "
        "its forget): a forgotten fact's id cannot be stored again; its fact.suppressed "
        "warnings, if any, are of its own forget"),
    "db.revision_gap": CodeInfo(ERROR, "db", ("fact_id", "revision"),
        "a fact's revisions are not 1..N without gaps, or its current revision is not the last "
        "(or not known: the fact id has several rows in facts); a current revision with no "
        "revision row is db.dangling_ref"),
    "db.dangling_ref": CodeInfo(ERROR, "db", ("fact_id", "revision", "table"),
        "a row that names a fact or revision that does not exist: a provenance, source ref or "
        "revision row, or a fact's row in facts whose current revision has no revision row "
        "(table facts)"),
    # facts
    "fact.missing": CodeInfo(ERROR, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence is gone: session missing or unreadable, or a position not there"),
    "fact.stale": CodeInfo(ERROR, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence changed: digest mismatch, corrupt records, or not a message; "
        "seq is the position at fault where it is known (not a message, a record that cannot "
        "be digested), else null (a digest mismatch: only the span's digest is stored, not "
        "which record changed; a corrupt line or a record missing in the span)"),
    "fact.hidden": CodeInfo(WARNING, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence is not visible (reason: undone, epoch, refused_*, invalid_ref); "
        "the fact is kept out of the agent's context"),
    "fact.unverified": CodeInfo(WARNING, "facts", ("fact_id", "revision", "reason"),
        "a revision has only legacy provenance, no SourceRef"),
    "fact.suppressed": CodeInfo(WARNING, "facts", ("fact_id", "revision", "session_id", "seq"),
        "a stored fact whose evidence overlaps an exclusion (a forget of another fact, or of "
        "this one when it is db.forgotten_fact_present): kept administratively, suppressed "
        "from recall"),
    # sessions
    "session.torn_tail": CodeInfo(WARNING, "sessions", ("file", "session_id", "line", "offset"),
        "the last line has no newline: WARNING when the file changed in the last 60 s "
        "(a writer may be appending), ERROR otherwise (a modification time over 60 s in the "
        "future included)"),
    "session.corrupt_line": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "reason"),
        "a complete line that is not a JSON object with an integer seq "
        "(reason: not_json, invalid_utf8, not_object, no_seq), or valid JSON memctl cannot "
        "parse (reason too_large: too large for the memory at hand or nested deeper than "
        "1024 levels; unusable, but not called corrupt)", deep_only=True),
    "session.seq_gap": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "seq", "reason"),
        "seq does not follow the previous record's seq + 1 "
        "(reason: seq_gap, seq_duplicate, seq_regression)", deep_only=True),
    "session.refused": CodeInfo(ERROR, "sessions", ("file", "session_id", "reason"),
        "a transcript lecode refuses: a symbolic link, or a header naming another project"),
    "session.missing_header": CodeInfo(ERROR, "sessions", ("file", "session_id", "line"),
        "the first line is not a valid session header (seq 0, type session, format 1), or "
        "there is no complete first line (an empty file, a header not ended by a newline; its "
        "facts are hidden, refused_header, as every reader refuses it): WARNING for that when "
        "the file changed in the last 60 s (a writer may be creating it), ERROR otherwise "
        "(a modification time over 60 s in the future included)"),
    "session.unreadable": CodeInfo(ERROR, "sessions", ("file", "session_id"),
        "a transcript that cannot be opened or read"),
    "session.epoch_ahead": CodeInfo(ERROR, "sessions", ("file", "session_id", "seq"),
        "a generated message carries an exclusion epoch above the facts database's "
        "generation: forget exclusions were lost (facts.sqlite3 deleted, emptied or "
        "replaced by an older copy), so forgotten evidence may be visible again; without "
        "--deep, read from the complete lines that start in the last 64 KiB of each "
        "transcript, or further back, to its last generated message, 16 MiB from its end "
        "at most (epochs never decrease along one); with --deep, the highest epoch of every "
        "generated message"),
    "session.bad_target": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "seq"),
        "an undo or redo event whose target is not [FIRST, LAST] with 0 <= FIRST <= LAST < "
        "the event's seq (malformed, outside the session, or not entirely before the event); "
        "it still hides the positions of its target that precede it", deep_only=True),
    "session.ignored_event": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "seq"),
        "a record that parses as an event from a line the event scans do not read as one (its "
        "type written with JSON escapes, or a prefix {\"seq\":N,\"type\":\"T\" naming another "
        "type and a repeated type key): memctl and lecode do not apply it (an undo, redo or clear "
        "there hides nothing); lecode never writes such a line", deep_only=True),
    "session.second_header": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "seq", "reason"),
        "a session header (type session) after the first line, which the store contract "
        "does not allow (seq 0 is the one header; records are messages or events): another "
        "transcript spliced in (reason: other_project, it names another project than the "
        "store's; other_session, another session id; repeated, this session's); the readers "
        "take it for no message and no event, and the first header alone decides the "
        "session's project", deep_only=True),
    "session.unknown_type": CodeInfo(WARNING, "sessions", ("file", "session_id", "line", "seq"),
        "a record whose type is none the store contract has (records are messages or "
        "events): no type, one that is not text, or another; no reader takes it for a "
        "message or an event (it hides nothing, and is never shown, searched or recalled "
        "as a message); lecode never writes one", deep_only=True),
    "session.unknown_role": CodeInfo(WARNING, "sessions", ("file", "session_id", "line", "seq"),
        "a message whose role is not user, assistant, tool or system, as the store contract "
        "requires (none, not text, or another): the readers show and search it as a "
        "message, and the epoch rule never hides it (it is not a generated message); "
        "lecode never writes one", deep_only=True),
    "session.unknown_event": CodeInfo(INFO, "sessions", ("file", "session_id", "line", "seq"),
        "an event whose name is none the store contract lists (undo, redo, clear, compact, "
        "memory_usage, learning; none, or not text, included): no reader applies it, and "
        "the contract does not say an event of another name is corrupt (a later lecode "
        "may write one)", deep_only=True),
    # compaction
    "compact.prior_mismatch": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq"),
        "a compact event's prior is not the previous compact event's seq and digest", deep_only=True),
    "compact.lineage_too_wide": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq"),
        "a lineage chunk spans more than 200 positions", deep_only=True),
    "compact.lineage_stale": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq", "reason"),
        "a lineage chunk is malformed (one naming another session included: a summary covers "
        "its own session's messages), missing, or its digest no longer holds, or it names a "
        "position an undo or clear had already hidden when the compact event was written "
        "(reason: undone, cleared; lecode rechecks visibility before the append and never "
        "writes that)", deep_only=True),
    "compact.lineage_not_cumulative": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq", "reason"),
        "a compact event's lineage is not exactly cumulative (reason: empty, a first lineage "
        "with no chunk; not_cumulative, it does not start with the previous compact event's "
        "lineage, unless that one was inert when this one was written, see compact.inert; "
        "overlap, chunks out of order or overlapping; after_event, a chunk at or after "
        "the event)", deep_only=True),
    "compact.legacy": CodeInfo(INFO, "compaction", ("file", "session_id", "seq"),
        "a compact event without lineage, written before lineage existed: inert (lecode replays "
        "raw history and rebuilds it); its prior is not checked and the next compact event's "
        "prior is the previous one with lineage, or null", deep_only=True),
    "compact.inert": CodeInfo(INFO, "compaction", ("file", "session_id", "seq", "reason"),
        "a summary made inert by a later forget, undo or clear (reason: excluded, undone, "
        "cleared, epoch); lecode rebuilds it lazily: the next compact event's prior may be "
        "null or this one, and its lineage need not start with this one's", deep_only=True),
    "compact.boundary": CodeInfo(WARNING, "compaction", ("file", "session_id", "seq", "reason"),
        "a compact event's lineage does not end at a complete tool-safe exchange boundary: the "
        "assistant message of the exchange at its last position (that position, or the one "
        "before the tool messages that end there) has a tool call no tool message up to that "
        "position answers (reason: split, one of the tool messages right after the lineage's "
        "end answers it; incomplete, none does: the exchange was incomplete or cancelled); the "
        "summary is still used", deep_only=True),
    "compact.few_raw": CodeInfo(WARNING, "compaction", ("file", "session_id", "seq"),
        "fewer than four user, assistant or tool messages after a compact event's lineage "
        "and before the event remained raw (events, system messages, and messages an undo or "
        "clear before the event had hidden are not counted; those appended after it are not "
        "either); the summary is still used", deep_only=True),
    # learning
    "learning.bad_status": CodeInfo(ERROR, "learning", ("file", "session_id", "seq"),
        "a learning event whose status is not one of the fixed set", deep_only=True),
    "learning.bad_reason": CodeInfo(ERROR, "learning", ("file", "session_id", "seq", "key"),
        "a learning event whose reason_counts has a code outside the fixed set, "
        "or a count that is not a non-negative integer", deep_only=True),
}

CHECK_ORDER = ("config", "layout", "markdown", "db", "facts", "sessions", "compaction", "learning")


@record(frozen=True)
class Finding:
    code: str
    severity: str
    message: str
    project: str
    file: str | None = None          # relative to the store (absolute for config.toml)
    line: int | None = None          # 1-based line number
    offset: int | None = None        # byte offset
    seq: int | None = None
    session_id: str | None = None
    fact_id: str | None = None
    revision: int | None = None
    reason: str | None = None
    key: str | None = None
    table: str | None = None

    @property
    def check(self) -> str:
        return CODES[self.code].check

    def location(self) -> str:
        """A compact location for people: ``file:line``, ``session@seq``, ``fact#rev``."""
        parts: list[str] = []
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
            elif self.offset is not None:
                where += f"@{self.offset}"
            parts.append(where)
        elif self.session_id:
            parts.append(self.session_id)
        if self.seq is not None:
            parts.append(f"seq {self.seq}")
        if self.fact_id is not None:
            parts.append(f"fact {self.fact_id}"
                         + (f" rev {self.revision}" if self.revision is not None else ""))
        if self.key:
            parts.append(self.key)
        if self.table:
            parts.append(f"table {self.table}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        # (a seq beyond 64 bits -- a line over 1 MiB placed by its first
        # bytes, {"seq":18446744073709551616,... -- is no JSON integer: null
        # in every format, the message keeping its digits; before 2026-12-07
        # the JSON outputs ended in an internal error)
        seq = self.seq if self.seq is None or self.seq < 1 << 64 else None
        return {"code": self.code, "severity": self.severity, "check": self.check,
                "project": self.project, "file": self.file, "line": self.line,
                "offset": self.offset, "seq": seq, "session_id": self.session_id,
                "fact_id": self.fact_id, "revision": self.revision, "reason": self.reason,
                "key": self.key, "table": self.table, "message": self.message}


@record
class Summary:
    """Counts for one store, filled while the audit runs."""

    project: str
    store: str
    deep: bool
    started: float = field(default_factory=time.time)
    finished: float | None = None
    by_severity: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)
    by_code_severity: dict[str, Counter[str]] = field(default_factory=dict)   # code -> Counter(severity)
    ignored: int = 0
    facts: Counter[str] = field(default_factory=Counter)   # fact status -> count (worst revision)
    # None: the facts were not all read (a database that cannot be read),
    # their count is not known (``facts`` then counts none); 0 for a store
    # with no database or an empty one.  Before 2026-12-07 a database that
    # could not be read was summarised as 0 facts.
    facts_total: int | None = None
    # None: sessions/ cannot be listed, the count is not known (before
    # 2026-12-07 the number of transcripts the facts cite)
    sessions: int | None = 0
    bytes_read: int = 0                                  # transcript bytes read by the audit itself

    def ok(self, strict: bool = False) -> bool:
        if self.by_severity[ERROR]:
            return False
        return not (strict and self.by_severity[WARNING])

    def to_json(self, strict: bool = False) -> dict[str, Any]:
        return {
            "project": self.project, "store": self.store, "deep": self.deep,
            "ok": self.ok(strict), "started": self.started, "finished": self.finished,
            "duration_seconds": None if self.finished is None else round(self.finished - self.started, 6),
            "findings": {s: self.by_severity[s] for s in SEVERITIES},
            "by_code": dict(sorted(self.by_code.items())),
            "ignored": self.ignored,
            "facts": (None if self.facts_total is None
                      else {s: self.facts[s] for s in STATUSES}),
            "facts_total": self.facts_total,
            "sessions": self.sessions, "transcript_bytes_read": self.bytes_read,
        }


Progress = Callable[[int, int], None]


def check_ignore_codes(codes: Sequence[str]) -> frozenset[str]:
    """``--ignore`` values: exact codes, ``PREFIX.*`` (the codes' own prefix,
    ``compact.*``) or ``GROUP.*`` (their group: the ``group`` column of
    --list-codes, a finding's ``check``, ``compaction.*``); unknown ones are
    usage errors.  (Before 2026-12-07 a group that is not also a prefix,
    ``facts``, ``sessions``, ``compaction``, was an unknown code.)"""
    out: set[str] = set()
    prefixes = {c.split(".")[0] for c in CODES}
    groups = {i.check for i in CODES.values()}
    for c in codes:
        if c in CODES:
            out.add(c)
        elif c.endswith(".*") and c[:-2] in prefixes | groups:
            out.update(k for k, i in CODES.items()
                       if k.startswith(c[:-1]) or i.check == c[:-2])
        else:
            raise UsageError(f"unknown finding code {c!r} for --ignore (see 'Validate findings' "
                             "in docs/FORMAT.md or 'memctl validate --help')")
    return frozenset(out)


def finding_rank() -> Callable[[Finding], tuple[int, int]]:
    """The key :func:`sort_findings` sorts by: the finding's check's place in
    CHECK_ORDER (99 for any other), then its severity's rank."""
    order = {c: i for i, c in enumerate(CHECK_ORDER)}
    return lambda f: (order.get(f.check, 99), SEVERITY_RANK[f.severity])


def sort_findings(findings: Sequence[Finding]) -> list[Finding]:
    """By check (in CHECK_ORDER), then severity, then location (stable otherwise)."""
    return sorted(findings, key=finding_rank())


def codes_table() -> list[Mapping[str, Any]]:
    return [{"code": k, "severity": v.severity, "check": v.check, "location": list(v.location),
             "deep_only": v.deep_only, "meaning": v.meaning} for k, v in CODES.items()]
