"""``validate``: a read-only forensic audit of a store (model: ``git fsck``).

Each problem is a :class:`Finding` with a stable code (``CODES`` lists every
one, with its severity and the location fields it fills), a location and a
one-line message.  Nothing here writes to the store: files are opened
read-only without following symlinks, and the facts database only through
its read-only open.

Cost.  Each transcript is read at most once, in one sequential pass
(:func:`_session_job`).  Without ``deep``, a transcript no fact references is
read only at its header line and its last bytes (torn tail); one that facts
reference is read once from the start, and only the lines of the referenced
spans and the event lines (undo/redo/clear after a span decide its
visibility) are parsed: the others have their seq read from the bytes.  The
references are decided exactly as ``SessionStore.validate_many`` decides
them (same visibility predicate, same reasons; a test compares the two).
``deep`` parses every line (large reads, bytes-level line splitting,
``orjson.loads``), keeps the records of that one transcript in memory to
check compaction lineage without rereading, and runs the whole-transcript
checks: corrupt lines, seq gaps, compaction chains and learning events;
with several transcripts the jobs run in parallel worker processes.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .atomic import is_link_refusal, open_nofollow, read_all
from .errors import UsageError
from .layout import (DAILY_DIR, FACTS_DB, MEMORY_FILE, NOTES_DIR, SCRATCHPAD_FILE,
                     SESSIONS_DIR, Store)
from .sessions import LEARNING_EVENT, LEARNING_REASONS, LEARNING_STATUSES, fast_seq
from .sourceref import (MAX_SPAN, SESSION_ID_RE, STATUSES, VALID, SourceRef, SourceStatus,
                        canonical_digest, status_for)

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {ERROR: 0, WARNING: 1, INFO: 2}

TORN_TAIL_GRACE_SECONDS = 60.0
READ_CHUNK = 8 << 20


@dataclass(frozen=True)
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
        "a temporary file left by an interrupted atomic write (.NAME.tmp-HEX)"),
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
        "facts.sqlite3 cannot be opened read-only or is not a database"),
    "db.integrity": CodeInfo(ERROR, "db", ("file",),
        "PRAGMA integrity_check reported a problem (one finding per line it reports)"),
    "db.foreign_key": CodeInfo(ERROR, "db", ("file", "table"),
        "PRAGMA foreign_key_check found a row whose parent is missing"),
    "db.schema_unknown": CodeInfo(ERROR, "db", ("file",),
        "the schema version is newer than this memctl knows, or unrecognisable"),
    "db.needs_migration": CodeInfo(WARNING, "db", ("file",),
        "the schema is an older known version; lecode migrates it on its next write"),
    "db.generation_mismatch": CodeInfo(ERROR, "db", ("file",),
        "the exclusion generation is lower than the exclusions and retry markers imply"),
    "db.revision_gap": CodeInfo(ERROR, "db", ("fact_id", "revision"),
        "a fact's revisions are not 1..N without gaps, or its current revision is not the last"),
    "db.dangling_ref": CodeInfo(ERROR, "db", ("fact_id", "revision", "table"),
        "a row (provenance, source ref, revision) that names a fact or revision that does not exist"),
    # facts
    "fact.missing": CodeInfo(ERROR, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence is gone: session missing or unreadable, or a position not there"),
    "fact.stale": CodeInfo(ERROR, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence changed: digest mismatch, corrupt records, or not a message"),
    "fact.hidden": CodeInfo(WARNING, "facts", ("fact_id", "revision", "session_id", "seq", "reason"),
        "a revision's evidence is not visible (reason: undone, epoch, refused_*, invalid_ref); "
        "the fact is kept out of the agent's context"),
    "fact.unverified": CodeInfo(WARNING, "facts", ("fact_id", "revision", "reason"),
        "a revision has only legacy provenance, no SourceRef"),
    "fact.suppressed": CodeInfo(WARNING, "facts", ("fact_id", "revision", "session_id", "seq"),
        "a stored fact whose evidence overlaps an exclusion (a forget of another fact): "
        "kept administratively, suppressed from recall"),
    # sessions
    "session.torn_tail": CodeInfo(WARNING, "sessions", ("file", "session_id", "line", "offset"),
        "the last line has no newline: WARNING when the file changed in the last 60 s "
        "(a writer may be appending), ERROR otherwise"),
    "session.corrupt_line": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "reason"),
        "a complete line that is not a JSON object with an integer seq "
        "(reason: not_json, invalid_utf8, not_object, no_seq)", deep_only=True),
    "session.seq_gap": CodeInfo(ERROR, "sessions", ("file", "session_id", "line", "seq", "reason"),
        "seq does not follow the previous record's seq + 1 "
        "(reason: seq_gap, seq_duplicate, seq_regression)", deep_only=True),
    "session.refused": CodeInfo(ERROR, "sessions", ("file", "session_id", "reason"),
        "a transcript lecode refuses: a symbolic link, or a header naming another project"),
    "session.missing_header": CodeInfo(ERROR, "sessions", ("file", "session_id", "line"),
        "the first line is not a valid session header (seq 0, type session, format 1)"),
    "session.unreadable": CodeInfo(ERROR, "sessions", ("file", "session_id"),
        "a transcript that cannot be opened or read"),
    "session.epoch_ahead": CodeInfo(ERROR, "sessions", ("file", "session_id", "seq"),
        "a generated message carries an exclusion epoch above the facts database's "
        "generation: forget exclusions were lost (facts.sqlite3 deleted, emptied or "
        "replaced by an older copy), so forgotten evidence may be visible again"),
    # compaction
    "compact.prior_mismatch": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq"),
        "a compact event's prior is not the previous compact event's seq and digest", deep_only=True),
    "compact.lineage_too_wide": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq"),
        "a lineage chunk spans more than 200 positions", deep_only=True),
    "compact.lineage_stale": CodeInfo(ERROR, "compaction", ("file", "session_id", "seq", "reason"),
        "a lineage chunk is malformed, missing, or its digest no longer holds", deep_only=True),
    "compact.inert": CodeInfo(INFO, "compaction", ("file", "session_id", "seq", "reason"),
        "a summary made inert by a later forget, undo or clear (reason: excluded, undone, "
        "cleared, epoch); lecode rebuilds it lazily", deep_only=True),
    # learning
    "learning.bad_status": CodeInfo(ERROR, "learning", ("file", "session_id", "seq"),
        "a learning event whose status is not one of the fixed set", deep_only=True),
    "learning.bad_reason": CodeInfo(ERROR, "learning", ("file", "session_id", "seq", "key"),
        "a learning event whose reason_counts has a code outside the fixed set, "
        "or a count that is not a non-negative integer", deep_only=True),
}

CHECK_ORDER = ("config", "layout", "markdown", "db", "facts", "sessions", "compaction", "learning")


@dataclass(frozen=True)
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
            parts.append(f"fact {self.fact_id}" + (f" rev {self.revision}" if self.revision is not None else ""))
        if self.key:
            parts.append(self.key)
        if self.table:
            parts.append(f"table {self.table}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "check": self.check,
                "project": self.project, "file": self.file, "line": self.line,
                "offset": self.offset, "seq": self.seq, "session_id": self.session_id,
                "fact_id": self.fact_id, "revision": self.revision, "reason": self.reason,
                "key": self.key, "table": self.table, "message": self.message}


@dataclass
class Summary:
    """Counts for one store, filled while the audit runs."""

    project: str
    store: str
    deep: bool
    started: float = field(default_factory=time.time)
    finished: float | None = None
    by_severity: Counter = field(default_factory=Counter)
    by_code: Counter = field(default_factory=Counter)
    by_code_severity: dict = field(default_factory=dict)   # code -> Counter(severity)
    ignored: int = 0
    facts: Counter = field(default_factory=Counter)     # fact status -> count (worst revision)
    facts_total: int = 0
    sessions: int = 0
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
            "facts": {s: self.facts[s] for s in STATUSES}, "facts_total": self.facts_total,
            "sessions": self.sessions, "transcript_bytes_read": self.bytes_read,
        }


Progress = Callable[[int, int], None]


def check_ignore_codes(codes: Sequence[str]) -> frozenset[str]:
    """``--ignore`` values: exact codes, or ``group.*``; unknown ones are usage errors."""
    out: set[str] = set()
    groups = {c.split(".")[0] for c in CODES}
    for c in codes:
        if c in CODES:
            out.add(c)
        elif c.endswith(".*") and c[:-2] in groups:
            out.update(k for k in CODES if k.startswith(c[:-1]))
        else:
            raise UsageError(f"unknown finding code {c!r} for --ignore (see 'Validate findings' "
                             "in docs/FORMAT.md or 'memctl validate --help')")
    return frozenset(out)


# ---------------------------------------------------------------------------
# Low-level, read-only file access

def _read_all(path: Path) -> bytes:
    fd = open_nofollow(path)
    try:
        return read_all(fd, READ_CHUNK)
    finally:
        os.close(fd)


_TMP_RE = re.compile(r"^\..+\.tmp-[0-9a-f]+$")
_DAILY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
_TOP_FILES = {MEMORY_FILE, SCRATCHPAD_FILE, MEMORY_FILE + ".bak", SCRATCHPAD_FILE + ".bak",
              FACTS_DB, FACTS_DB + "-wal", FACTS_DB + "-shm", FACTS_DB + "-journal"}
# Lock/marker files other modules document in docs/FORMAT.md live beside the database.
_TOP_EXTRA_RE = re.compile(r"^(facts\.sqlite3\.lock|\.memctl[-.][A-Za-z0-9._-]+)$")
_SESSION_FILE_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]{0,127})\.(jsonl|lock)$")


def _is_temp(name: str) -> bool:
    return bool(_TMP_RE.match(name))


def _is_note_file(name: str) -> bool:
    """``<note name>.md`` with a name ``memctl note`` would accept."""
    from .markdown import check_note_name

    if not name.endswith(".md"):
        return False
    try:
        check_note_name(name)
    except UsageError:
        return False
    return True


# ---------------------------------------------------------------------------
# The audit

class Audit:
    """One store's audit.  Iterate :meth:`run` for findings as they are found;
    :attr:`summary` holds the counts afterwards.  Changes nothing."""

    def __init__(self, store: Store, *, config_dir: Path | None = None, deep: bool = False,
                 ignore: frozenset[str] = frozenset(), progress: Progress | None = None,
                 now: float | None = None, parallel: bool = True) -> None:
        self.store = store
        self.config_dir = config_dir
        self.deep = deep
        self.ignore = ignore
        self.progress = progress
        self.now = now
        self.summary = Summary(store.slug, str(store.path), deep)
        self.parallel = parallel
        self._revs: dict[str, list[Any]] = {}
        self._bad_refs: dict[tuple[str, int], str] = {}
        self._need: dict[str, list[tuple[Any, str]]] = {}
        self._statuses: dict[tuple[Any, str], Any] = {}
        self._excluded: dict[str, Any] = {}
        self._generation = 0
        self._generation_known = False  # True once the database was read, or is absent/empty

    # -- plumbing
    def _f(self, code: str, message: str, *, severity: str | None = None, **loc: Any) -> Finding | None:
        info = CODES[code]
        f = Finding(code, severity or info.severity, message, self.store.slug, **loc)
        if code in self.ignore:
            self.summary.ignored += 1
            return None
        self.summary.by_severity[f.severity] += 1
        self.summary.by_code[code] += 1
        self.summary.by_code_severity.setdefault(code, Counter())[f.severity] += 1
        return f

    def run(self) -> Iterator[Finding]:
        self.store.require()
        self.summary.started = time.time()
        if self.now is None:
            self.now = time.time()
        for gen in (self._check_config(), self._check_layout(), self._check_markdown(),
                    self._check_db_and_facts(), self._check_sessions()):
            for f in gen:
                if f is not None:
                    yield f
        self.summary.finished = time.time()

    # -- config
    def _check_config(self) -> Iterator[Finding | None]:
        if self.config_dir is None:
            return
        import tomllib

        from .config import check_memory_values

        path = self.config_dir / "config.toml"
        try:
            raw = _read_all(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            yield self._f("config.invalid", f"cannot read config.toml: {exc.strerror}", file=str(path))
            return
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            yield self._f("config.invalid", "config.toml is not valid UTF-8", file=str(path))
            return
        except tomllib.TOMLDecodeError as exc:
            yield self._f("config.invalid", f"config.toml is not valid TOML: {exc}", file=str(path))
            return
        section = data.get("memory", {})
        if not isinstance(section, dict):
            yield self._f("config.invalid", "[memory] is not a table", file=str(path))
            return
        for p in check_memory_values(section):
            yield self._f("config.out_of_range", p.message, file=str(path), key=f"memory.{p.key}")

    # -- layout
    def _check_layout(self) -> Iterator[Finding | None]:
        root = self.store.path
        yield from self._layout_mode(root, ".")
        stack: list[tuple[Path, str]] = [(root, "")]
        while stack:
            d, rel = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                yield self._f("layout.unreadable", f"cannot list directory: {exc.strerror}",
                              file=rel or ".")
                continue
            for e in entries:
                name = e.name
                r = f"{rel}{name}"
                try:
                    est = e.stat(follow_symlinks=False)
                except OSError as exc:
                    yield self._f("layout.unreadable", f"cannot stat: {exc.strerror}", file=r)
                    continue
                is_dir = stat.S_ISDIR(est.st_mode)
                if (rel == SESSIONS_DIR + "/" and name.endswith(".jsonl")
                        and SESSION_ID_RE.match(name[:-6]) and not stat.S_ISREG(est.st_mode)):
                    continue  # reported by the session check (refused or unreadable)
                if stat.S_ISLNK(est.st_mode):
                    yield self._f("layout.symlink", f"symbolic link to {os.readlink(e.path)!r}; "
                                  "never followed", file=r)
                    continue
                if est.st_mode & 0o077:
                    yield self._f("layout.permissions",
                                  f"mode {stat.S_IMODE(est.st_mode):04o} gives group/others access "
                                  f"(expected {'0700' if is_dir else '0600'})", file=r)
                if _is_temp(name) and not is_dir:
                    yield self._f("layout.temp_file", "temporary file left by an interrupted write",
                                  file=r)
                    continue
                if is_dir:
                    if rel == "" and name in (DAILY_DIR, NOTES_DIR, SESSIONS_DIR):
                        stack.append((Path(e.path), r + "/"))
                    else:
                        yield self._f("layout.unexpected_file", "unexpected directory", file=r + "/")
                    continue
                if not stat.S_ISREG(est.st_mode):
                    yield self._f("layout.unexpected_file", "not a regular file", file=r)
                    continue
                if not self._expected_file(rel, name):
                    yield self._f("layout.unexpected_file", "not part of the store layout", file=r)

    def _layout_mode(self, path: Path, rel: str) -> Iterator[Finding | None]:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if st.st_mode & 0o077:
            yield self._f("layout.permissions", f"mode {stat.S_IMODE(st.st_mode):04o} gives "
                          "group/others access (expected 0700)", file=rel)

    @staticmethod
    def _expected_file(rel: str, name: str) -> bool:
        base = name[:-4] if name.endswith(".bak") else name
        if rel == "":
            return name in _TOP_FILES or bool(_TOP_EXTRA_RE.match(name))
        if rel == DAILY_DIR + "/":
            return bool(_DAILY_RE.match(base))
        if rel == NOTES_DIR + "/":
            return _is_note_file(base)
        if rel == SESSIONS_DIR + "/":
            return bool(_SESSION_FILE_RE.match(name))
        return False

    # -- markdown
    def _markdown_files(self) -> list[tuple[str, Path]]:
        root = self.store.path
        out = [(n, root / n) for n in (MEMORY_FILE, SCRATCHPAD_FILE, MEMORY_FILE + ".bak",
                                       SCRATCHPAD_FILE + ".bak")]
        for sub, ok in ((DAILY_DIR, lambda b: bool(_DAILY_RE.match(b))), (NOTES_DIR, _is_note_file)):
            try:
                names = sorted(os.listdir(root / sub))
            except OSError:
                continue
            for n in names:
                base = n[:-4] if n.endswith(".bak") else n
                if ok(base):
                    out.append((f"{sub}/{n}", root / sub / n))
        return out

    def _check_markdown(self) -> Iterator[Finding | None]:
        files = self._markdown_files()
        present = set()
        for rel, p in files:
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            present.add(rel)
        for rel, p in files:
            if rel not in present:
                continue
            if rel.endswith(".bak") and rel[:-4] not in present:
                yield self._f("markdown.orphan_backup",
                              f"backup without its file {rel[:-4]}", file=rel)
            try:
                data = _read_all(p)
            except OSError as exc:
                yield self._f("layout.unreadable", f"cannot read: {exc.strerror}", file=rel)
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = data.count(b"\n", 0, exc.start) + 1
                yield self._f("markdown.invalid_utf8",
                              f"not valid UTF-8 (line {line}, byte {exc.start})",
                              file=rel, offset=exc.start)

    # -- database and facts (implemented in _facts_checks below)
    def _check_db_and_facts(self) -> Iterator[Finding | None]:
        yield from _check_db_and_facts(self)

    # -- sessions
    def _check_sessions(self) -> Iterator[Finding | None]:
        """One job per transcript, each reading its file at most once (see _session_job);
        with ``deep`` and several sessions the jobs run in parallel processes."""
        ids = self.store.session_ids()
        self.summary.sessions = len(ids)
        total = len(ids)
        need = self._need
        jobs = []
        for sid in ids:
            refs = [(r.seqs, r.digest, p) for (r, p) in need.get(sid, ())]
            jobs.append((os.fspath(self.store.sessions_dir / f"{sid}.jsonl"), sid, self.store.slug,
                         self.deep, refs, self._excluded.get(sid, frozenset()), self._generation,
                         self.now or time.time()))
        present = set(ids)
        for sid, items in need.items():
            if sid not in present:
                for ref, purpose in items:
                    self._statuses[(ref, purpose)] = status_for(
                        "session_missing", f"no session {sid}")
        results = _run_jobs(jobs, parallel=self.deep and self.parallel)
        ahead: list[tuple[str, int, int]] = []
        for i, (sid, sc) in enumerate(zip(ids, results)):
            if self.progress:
                self.progress(i, total)
            self.summary.bytes_read += sc.bytes_read
            for (seqs, digest, purpose), st in sc.statuses.items():
                self._statuses[(SourceRef(sid, seqs, digest), purpose)] = st
            for code, message, severity, loc in sc.raw:
                yield self._f(code, message, severity=severity, **loc)
            if self._generation_known and sc.max_epoch and sc.max_epoch[0] > self._generation:
                ahead.append((sid, *sc.max_epoch))
        if self.progress:
            self.progress(total, total)
        if ahead:
            # The generation was read before the transcripts: a forget in between,
            # then a message stamped with its epoch, is not a loss.  Generations only
            # rise, so a transcript still ahead of the generation read now is one.
            now_gen = _current_generation(self.store.facts_db)
            for sid, epoch, seq in ahead:
                if now_gen is not None and epoch > now_gen:
                    yield self._f("session.epoch_ahead",
                                  f"a generated message carries exclusion epoch {epoch}, but the "
                                  f"facts database is at generation {now_gen}: forget "
                                  "exclusions were lost", file=f"{SESSIONS_DIR}/{sid}.jsonl",
                                  session_id=sid, seq=seq)
        yield from _fact_findings(self)


# ---------------------------------------------------------------------------
# Transcript jobs: one sequential read per file

@dataclass
class _Scan:
    bytes_read: int = 0
    raw: list[tuple[str, str, str | None, dict]] = field(default_factory=list)
    statuses: dict[tuple[tuple[int, ...], str, str], Any] = field(default_factory=dict)
    max_epoch: tuple[int, int] | None = None   # (epoch, seq) of the newest generated messages


EPOCH_TAIL = 65536


def _tail_epoch(fd: int, size: int, sc: _Scan, data: bytes | None = None) -> tuple[int, int] | None:
    """The highest ``epoch`` (with its seq) among the generated messages in the
    last 64 KiB (taken from ``data`` when the whole file is already in memory).
    Epochs are captured before each request, so they never decrease along a
    transcript: its tail holds its newest epoch."""
    from .sessions import is_generated

    n = min(size, EPOCH_TAIL)
    if n <= 0:
        return None
    if data is not None and len(data) == size:
        window = data[size - n:]
    else:
        window = os.pread(fd, n, size - n)
        sc.bytes_read += len(window)
    lines = window.split(b"\n")[:-1]        # the last piece is a torn tail or empty
    if n < size and lines:
        lines = lines[1:]                     # the window may start mid-line
    best: tuple[int, int] | None = None
    for line in lines:
        if b'"epoch"' not in line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not (isinstance(rec, dict) and rec.get("type") == "message" and is_generated(rec)):
            continue
        epoch, seq = rec.get("epoch"), rec.get("seq")
        if type(epoch) is int and type(seq) is int and (best is None or epoch > best[0]):
            best = (epoch, seq)
    return best


def _run_jobs(jobs: list[tuple], *, parallel: bool) -> Iterator[_Scan]:
    """The jobs' results in order, each as soon as it is ready (findings stream)."""
    if parallel and len(jobs) >= 8 and (os.cpu_count() or 1) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:  # pragma: no cover - no fork on this platform
            ctx = None
        if ctx is not None:
            workers = min(os.cpu_count() or 2, 8)
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
                yield from ex.map(_session_job_star, jobs,
                                  chunksize=max(1, min(16, len(jobs) // (workers * 8))))
            return
    for j in jobs:
        yield _session_job(*j)


def _session_job_star(args: tuple) -> _Scan:
    return _session_job(*args)


def _session_job(path: str, sid: str, slug: str, deep: bool,
                 need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int],
                 generation: int, now: float) -> _Scan:
    """Check one transcript in one pass and validate the references into it.

    Without ``deep`` and without references: the header line and the last
    bytes only.  Otherwise one sequential read from the start to the size at
    open time: lines in referenced spans and event lines are parsed (every
    line with ``deep``), the rest only has its seq read from the bytes."""
    sc = _Scan()
    rel = f"{SESSIONS_DIR}/{sid}.jsonl"
    loc = {"file": rel, "session_id": sid}

    def add(code: str, message: str, severity: str | None = None, **more: Any) -> None:
        sc.raw.append((code, message, severity, {**loc, **more}))

    def refuse_all(reason: str, detail: str) -> None:
        for seqs, digest, purpose in need:
            sc.statuses[(seqs, digest, purpose)] = status_for(reason, detail)

    try:
        fd = open_nofollow(path)
    except OSError as exc:
        if is_link_refusal(exc):
            add("session.refused", "transcript is a symbolic link; refused", reason="refused_symlink")
            refuse_all("refused_symlink", "symbolic link")
        else:
            add("session.unreadable", f"cannot open: {exc.strerror}")
            refuse_all("session_unreadable", exc.strerror or "cannot open")
        return sc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            add("session.unreadable", "not a regular file")
            refuse_all("session_unreadable", "not a regular file")
            return sc
        try:
            data = _scan_modes(fd, st, sc, sid, slug, deep, need, excluded, generation, now,
                               add, refuse_all)
            refused = {"session.refused", "session.missing_header"}
            if not any(code in refused for code, *_rest in sc.raw):
                sc.max_epoch = _tail_epoch(fd, st.st_size, sc, data)
        except OSError as exc:
            add("session.unreadable", f"cannot read: {exc.strerror}")
            refuse_all("session_unreadable", exc.strerror or "cannot read")
    finally:
        os.close(fd)
    return sc


def _scan_modes(fd: int, st: os.stat_result, sc: _Scan, sid: str, slug: str, deep: bool,
                need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int],
                generation: int, now: float, add: Callable, refuse_all: Callable) -> bytes | None:
    """Header and tail only (no references, not deep); the in-memory fast path;
    else the line loop.  Returns the file's bytes when they were read whole."""
    if not deep and not need:
        _shallow(fd, st.st_size, sc, sid, slug, st.st_mtime, now, add)
        return None
    data = None
    if not deep and st.st_size <= FAST_LIMIT:
        data = _read_whole(fd, st.st_size, sc)
        mark = len(sc.raw)
        if _fast_spans(data, sc, sid, slug, need, excluded, generation,
                       st.st_mtime, now, add, refuse_all):
            return data
        del sc.raw[mark:]
        sc.statuses.clear()
    _full(fd, st.st_size, sc, sid, slug, deep, need, excluded, generation,
          st.st_mtime, now, add, refuse_all, data)
    return data


def _header_problem(hdr: Any, sid: str, slug: str) -> tuple[str, str] | None:
    """(finding code, refusal reason) for a header line, or None when it is this store's."""
    if not (isinstance(hdr, dict) and hdr.get("seq") == 0 and hdr.get("type") == "session"
            and type(hdr.get("format")) is int and hdr.get("format") == 1
            and hdr.get("session_id") == sid):
        return "session.missing_header", "refused_header"
    if hdr.get("project") != slug:
        return "session.refused", "refused_project"
    return None


def _report_header(hdr: Any, sid: str, slug: str, add: Callable, refuse_all: Callable | None) -> bool:
    """Add the header finding, if any; True when the session is refused."""
    prob = _header_problem(hdr, sid, slug)
    if prob is None:
        return False
    code, reason = prob
    if code == "session.missing_header":
        add(code, "first line is not a session header {seq 0, type session, format 1, "
            "session_id matching the file name}", line=1)
    else:
        add(code, f"header names project {str(hdr.get('project'))[:80]!r}, not this store's "
            f"{slug!r}; refused", reason=reason)
    if refuse_all is not None:
        refuse_all(reason, "session header")
    return True


def _torn(add: Callable, size: int, offset: int, mtime: float, now: float, line: int | None) -> None:
    recent = now - mtime < TORN_TAIL_GRACE_SECONDS
    msg = (f"last line ({size - offset} bytes) has no newline: "
           + ("a writer may be appending (modified in the last minute)" if recent
              else "an interrupted append (not modified for over a minute)"))
    add("session.torn_tail", msg, WARNING if recent else ERROR, line=line, offset=offset)


def _shallow(fd: int, size: int, sc: _Scan, sid: str, slug: str, mtime: float, now: float,
             add: Callable) -> None:
    """The header line and the tail only: a few KiB per transcript."""
    if size == 0:
        return
    head = b""
    want = 4096
    while len(head) < size:
        b = os.pread(fd, min(want, size - len(head)), len(head))
        if not b:
            break
        head += b
        want *= 4
        if b"\n" in head:
            break
    sc.bytes_read += len(head)
    nl = head.find(b"\n")
    if nl >= 0:
        try:
            hdr = orjson.loads(head[:nl])
        except orjson.JSONDecodeError:
            hdr = None
        if _report_header(hdr, sid, slug, add, None) and _header_problem(hdr, sid, slug)[0] == "session.refused":
            return
    if len(head) >= size:
        if not head.endswith(b"\n"):
            _torn(add, size, head.rfind(b"\n") + 1, mtime, now, head.count(b"\n") + 1)
        return
    last = os.pread(fd, 1, size - 1)
    sc.bytes_read += 1
    if last == b"\n":
        return
    pos = size - 1
    while pos > 0:
        start = max(len(head), pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        sc.bytes_read += len(chunk)
        k = chunk.rfind(b"\n")
        if k >= 0:
            _torn(add, size, start + k + 1, mtime, now, None)
            return
        if start == len(head):
            _torn(add, size, head.rfind(b"\n") + 1, mtime, now, None)
            return
        pos = start


def _chunks(fd: int, size: int, sc: _Scan) -> Iterator[bytes]:
    done = 0
    while done < size:
        chunk = os.read(fd, min(READ_CHUNK, size - done))
        if not chunk:
            return
        done += len(chunk)
        sc.bytes_read += len(chunk)
        yield chunk


def _read_whole(fd: int, size: int, sc: _Scan) -> bytes:
    return b"".join(_chunks(fd, size, sc))


def _fast_spans(data: bytes, sc: _Scan, sid: str, slug: str,
                need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int],
                generation: int, mtime: float, now: float, add: Callable,
                refuse_all: Callable) -> bool:
    """Default mode over a transcript held in memory: C-speed searches find the
    event lines and the start of each referenced span (lines the core's writer
    produced begin ``{"seq":N,``); only those lines are parsed.  False when
    the file does not look like that (the caller falls back to the line loop)."""
    from .sessions import UndoState

    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError
    size = len(data)
    end = data.rfind(b"\n") + 1
    if end == 0:
        return False
    nl = data.find(b"\n")
    try:
        hdr = loads(data[:nl])
    except JSONDecodeError:
        hdr = None
    if _report_header(hdr, sid, slug, add, refuse_all):
        if end < size:
            _torn(add, size, end, mtime, now, None)
        return True
    if end < size:
        _torn(add, size, end, mtime, now, None)
    last_start = data.rfind(b"\n", 0, end - 1) + 1
    last_seq = fast_seq(data[last_start:end - 1])
    if last_seq is None:
        return False
    events: list[dict] = []
    pos = data.find(b'"event"', 0, end)
    while pos >= 0:
        ls = data.rfind(b"\n", 0, pos) + 1
        le = data.find(b"\n", pos, end)
        try:
            rec = loads(data[ls:le])
        except JSONDecodeError:
            rec = None
        if (type(rec) is dict and rec.get("type") == "event"
                and rec.get("event") in ("undo", "redo", "clear")):
            events.append(rec)
        pos = data.find(b'"event"', le, end)
    records: dict[int, dict] = {}
    corrupt_after: list[int] = []
    dup_seqs: set[int] = set()
    ranges = sorted({(seqs[0], seqs[-1]) for seqs, _d, _p in need})
    for lo, hi in ranges:
        if all(s in records for s in range(lo, hi + 1)) or lo > last_seq:
            continue
        p = data.find(b'\n{"seq":%d,' % lo, 0, end)
        if p < 0:
            return False
        p += 1
        prev = lo - 1
        expected = lo
        while p < end:
            q = data.find(b"\n", p, end)
            line = data[p:q]
            p = q + 1
            try:
                rec = loads(line)
            except JSONDecodeError:
                rec = None
            if type(rec) is not dict or type(rec.get("seq")) is not int or rec["seq"] < 0:
                corrupt_after.append(prev)
                continue
            seq = rec["seq"]
            if seq > hi:
                break
            if seq != expected and seq <= prev:
                dup_seqs.add(seq)
            records.setdefault(seq, rec)
            if seq > prev:
                prev = seq
                expected = seq + 1
    us = UndoState(events)
    for seqs, digest, purpose in need:
        sc.statuses[(seqs, digest, purpose)] = _span_status(
            seqs, digest, purpose, records, corrupt_after, dup_seqs, last_seq, excluded,
            generation, us)
    return True


FAST_LIMIT = 256 << 20     # default mode holds a transcript in memory up to this size


def _full(fd: int, size: int, sc: _Scan, sid: str, slug: str, deep: bool,
          need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int], generation: int,
          mtime: float, now: float, add: Callable, refuse_all: Callable,
          data: bytes | None = None) -> None:
    from .sessions import UndoState

    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError
    needed: set[int] = set()
    for seqs, _d, _p in need:
        needed.update(range(seqs[0], seqs[-1] + 1))
    records: dict[int, dict] = {}
    corrupt_after: list[int] = []       # the previous record's seq of each corrupt line
    dup_seqs: set[int] = set()
    events: list[dict] = []
    compacts: list[tuple[int, dict]] = []
    expected = 0
    last_seq = -1
    lineno = 0
    offset = 0
    rest = b""
    refused = False
    for chunk in (_chunks(fd, size, sc) if data is None else (data,)):
        if rest:
            chunk = rest + chunk
        parts = chunk.split(b"\n")
        rest = parts.pop()
        for line in parts:
            lineno += 1
            offset += len(line) + 1
            if lineno == 1:
                try:
                    hdr = loads(line)
                except JSONDecodeError:
                    hdr = None
                if _report_header(hdr, sid, slug, add, refuse_all):
                    refused = True
                    if _header_problem(hdr, sid, slug)[0] == "session.refused":
                        return
            rec = None
            if not deep:
                seq = fast_seq(line)
                if seq is not None and seq not in needed and b'"event"' not in line:
                    if seq != expected:
                        if seq <= last_seq:
                            dup_seqs.add(seq)
                    if seq > last_seq:
                        last_seq = seq
                        expected = seq + 1
                    continue
            try:
                rec = loads(line)
            except JSONDecodeError:
                corrupt_after.append(last_seq)
                if deep:
                    try:
                        line.decode("utf-8")
                        reason = "not_json"
                    except UnicodeDecodeError:
                        reason = "invalid_utf8"
                    add("session.corrupt_line", f"line {lineno} is corrupt ({reason})",
                        line=lineno, reason=reason)
                continue
            if type(rec) is not dict or type(rec.get("seq")) is not int or rec["seq"] < 0:
                corrupt_after.append(last_seq)
                if deep:
                    reason = "not_object" if type(rec) is not dict else "no_seq"
                    add("session.corrupt_line", f"line {lineno} is corrupt ({reason})",
                        line=lineno, reason=reason)
                continue
            seq = rec["seq"]
            if seq != expected:
                if seq <= last_seq:
                    dup_seqs.add(seq)
                if deep:
                    reason = ("seq_gap" if seq > expected else
                              "seq_duplicate" if seq == last_seq else "seq_regression")
                    add("session.seq_gap", f"seq {seq} where {expected} was expected ({reason})",
                        line=lineno, seq=seq, reason=reason)
            if seq > last_seq:
                last_seq = seq
                expected = seq + 1
            if deep or seq in needed:
                records.setdefault(seq, rec)
            if rec.get("type") == "event":
                ev = rec.get("event")
                if ev in ("undo", "redo", "clear"):
                    events.append(rec)
                elif deep and ev == "compact":
                    compacts.append((lineno, rec))
                elif deep and ev == LEARNING_EVENT:
                    _learning(rec, add)
    if rest:
        _torn(add, size, offset, mtime, now, lineno + 1)
    us = UndoState(events)
    memo: dict[tuple[tuple[int, ...], str, str], Any] = {}

    def status(seqs: tuple[int, ...], digest: str, purpose: str) -> Any:
        key = (seqs, digest, purpose)
        if key not in memo:
            memo[key] = _span_status(seqs, digest, purpose, records, corrupt_after, dup_seqs,
                                     last_seq, excluded, generation, us)
        return memo[key]

    if not refused:
        for seqs, digest, purpose in need:
            sc.statuses[(seqs, digest, purpose)] = status(seqs, digest, purpose)
    if deep:
        _compaction(compacts, sid, status, add)


def _span_status(seqs: tuple[int, ...], digest: str, purpose: str, records: dict[int, dict],
                 corrupt_after: list[int], dup_seqs: set[int], last_seq: int,
                 excluded: frozenset[int], generation: int, us: Any) -> Any:
    """The same decision as ``SessionStore.validate_many``, from one pass's data."""
    from .sessions import visible

    lo, hi = seqs[0], seqs[-1]
    for c in corrupt_after:
        if lo <= c < hi or (c == lo - 1 and lo not in records):
            return status_for("records_corrupt", "a corrupt line in the span")
    if any(lo <= d <= hi for d in dup_seqs):
        return status_for("records_corrupt", "a repeated seq in the span")
    span = []
    for s in range(lo, hi + 1):
        r = records.get(s)
        if r is None:
            if s > last_seq:
                return status_for("position_missing", f"the transcript ends at seq {last_seq}", s)
            return status_for("records_corrupt", f"seq {s} is missing from the span")
        span.append(r)
    if canonical_digest(span) != digest:
        return status_for("digest_mismatch")
    for s in seqs:
        ok, reason = visible(records[s], purpose=purpose, excluded=excluded,
                             generation=generation, undo_state=us, clear_seq=us.clear_seq)
        if not ok:
            return status_for(reason, None, s)
    return SourceStatus(VALID)


def _learning(rec: dict, add: Callable) -> None:
    seq = rec.get("seq")
    status = rec.get("status")
    if not isinstance(status, str) or status not in LEARNING_STATUSES:
        add("learning.bad_status", f"learning status {str(status)[:60]!r} is not one of "
            + ", ".join(sorted(LEARNING_STATUSES)), seq=seq)
    counts = rec.get("reason_counts")
    if counts is None:
        return  # older events without counts remain readable
    if not isinstance(counts, dict):
        add("learning.bad_reason", "reason_counts is not an object", seq=seq)
        return
    for k, v in counts.items():
        if k not in LEARNING_REASONS:
            add("learning.bad_reason", f"unknown reason code {k[:60]!r}", seq=seq, key=k)
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            add("learning.bad_reason", f"count for {k!r} is not a non-negative integer",
                seq=seq, key=k)


def _compaction(compacts: list[tuple[int, dict]], sid: str, status: Callable, add: Callable) -> None:
    from .sourceref import SourceRef

    prev: dict | None = None
    seen: dict[tuple, tuple[str, str, str]] = {}
    for _line, rec in compacts:
        seq = rec.get("seq")
        want = None if prev is None else {"seq": prev.get("seq"), "digest": canonical_digest([prev])}
        got = rec.get("prior")
        if got != want:
            if want is None:
                msg = "first compact event has a prior, expected null"
            elif got is None:
                msg = f"prior is null, expected the compact event at seq {want['seq']}"
            else:
                msg = f"prior does not match the compact event at seq {want['seq']} (seq and digest)"
            add("compact.prior_mismatch", msg, seq=seq)
        prev = rec
        lineage = rec.get("lineage")
        if not isinstance(lineage, list):
            add("compact.lineage_stale", "lineage is not a list of source references",
                seq=seq, reason="invalid_ref")
            continue
        bad: tuple[str, str] | None = None
        inert: tuple[str, str] | None = None
        stale_n = 0
        for chunk in lineage:
            seqs = chunk.get("seqs") if isinstance(chunk, dict) else None
            # lineage is cumulative: a chunk seen in an earlier compact event is decided once
            quick = None
            if type(seqs) is list and seqs and isinstance(chunk.get("digest"), str):
                quick = (chunk.get("session_id"), chunk["digest"], seqs[0], seqs[-1], len(seqs))
                hit = seen.get(quick)
                if hit is not None:
                    kind, msg, reason = hit
                    if kind == "stale":
                        stale_n += 1
                        bad = bad or (msg, reason)
                    elif kind == "inert" and inert is None:
                        inert = (msg, reason)
                    elif kind == "wide":
                        add("compact.lineage_too_wide", msg, seq=seq)
                    continue
            if (isinstance(seqs, list) and seqs and all(type(s) is int for s in seqs)
                    and max(seqs) - min(seqs) + 1 > MAX_SPAN):
                msg = (f"lineage chunk {min(seqs)}..{max(seqs)} spans {max(seqs) - min(seqs) + 1} "
                       f"positions (at most {MAX_SPAN})")
                add("compact.lineage_too_wide", msg, seq=seq)
                if quick:
                    seen[quick] = ("wide", msg, "")
                continue
            try:
                ref = SourceRef.from_json(chunk)
            except UsageError as exc:
                stale_n += 1
                bad = bad or (f"a lineage chunk is malformed: {exc}", "invalid_ref")
                continue
            if ref.session_id != sid:
                stale_n += 1
                bad = bad or (f"lineage chunk {ref.label()} names another session", "invalid_ref")
                continue
            st = status(ref.seqs, ref.digest, "working")
            if st.status in ("missing", "stale"):
                stale_n += 1
                msg = f"lineage chunk {ref.label()} is {st.status} ({st.reason})"
                bad = bad or (msg, st.reason)
                if quick:
                    seen[quick] = ("stale", msg, st.reason)
            elif st.status == "hidden":
                msg = f"summary is inert: lineage chunk {ref.label()} is hidden ({st.reason})"
                if inert is None:
                    inert = (msg, st.reason)
                if quick:
                    seen[quick] = ("inert", msg, st.reason)
            elif quick:
                seen[quick] = ("ok", "", "")
        if bad:
            more = f" and {stale_n - 1} more" if stale_n > 1 else ""
            add("compact.lineage_stale", bad[0] + more, seq=seq, reason=bad[1])
        elif inert:
            add("compact.inert", inert[0], seq=seq, reason=inert[1])



# ---------------------------------------------------------------------------
# Entry points

def validate_store(store: Store, **kwargs: Any) -> tuple[list[Finding], Summary]:
    """Run the whole audit of one store and return its findings and summary."""
    a = Audit(store, **kwargs)
    findings = list(a.run())
    return findings, a.summary


def sort_findings(findings: Sequence[Finding]) -> list[Finding]:
    """By check (in CHECK_ORDER), then severity, then location (stable otherwise)."""
    order = {c: i for i, c in enumerate(CHECK_ORDER)}
    return sorted(findings, key=lambda f: (order.get(f.check, 99), _RANK[f.severity]))


def codes_table() -> list[Mapping[str, Any]]:
    return [{"code": k, "severity": v.severity, "check": v.check, "location": list(v.location),
             "deep_only": v.deep_only, "meaning": v.meaning} for k, v in CODES.items()]


# ---------------------------------------------------------------------------
# Prometheus text exposition format (node_exporter textfile collector)

def _prom_escape(value: str) -> str:
    """A label value escaped per the exposition format: backslash, quote, newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_prom_escape(v)}"' for k, v in kv.items()) + "}"


PROM_METRICS: tuple[tuple[str, str, str], ...] = (
    ("memctl_validate_ok", "gauge",
     "1 when the last memctl validate found nothing at error severity (warnings too with --strict), else 0."),
    ("memctl_validate_findings", "gauge",
     "Findings of the last memctl validate by severity and code (ignored codes excluded)."),
    ("memctl_validate_findings_by_severity", "gauge",
     "Findings of the last memctl validate by severity, zero included."),
    ("memctl_validate_facts", "gauge",
     "Facts by validation status (a fact counts under its worst revision's status)."),
    ("memctl_validate_sessions", "gauge", "Session transcripts in the store."),
    ("memctl_validate_duration_seconds", "gauge", "Wall-clock time the audit of the store took."),
    ("memctl_validate_last_run_timestamp_seconds", "gauge",
     "Unix time at which the audit of the store finished."),
)


def prometheus_text(summaries: Sequence[Summary], *, strict: bool = False) -> str:
    """Every metric, HELP and TYPE once each, then one sample per project/label set."""
    out: list[str] = []
    for name, typ, help_ in PROM_METRICS:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {typ}")
        for s in summaries:
            p = s.project
            if name == "memctl_validate_ok":
                out.append(f"{name}{_labels(project=p)} {1 if s.ok(strict) else 0}")
            elif name == "memctl_validate_findings":
                for code, n in sorted(s.by_code.items()):
                    sev = CODES[code].severity
                    # torn tails may be counted at either severity; split them by severity
                    out.extend(_findings_lines(name, p, code, sev, n, s))
            elif name == "memctl_validate_findings_by_severity":
                for sev in SEVERITIES:
                    out.append(f"{name}{_labels(project=p, severity=sev)} {s.by_severity[sev]}")
            elif name == "memctl_validate_facts":
                for st in STATUSES:
                    out.append(f"{name}{_labels(project=p, status=st)} {s.facts[st]}")
            elif name == "memctl_validate_sessions":
                out.append(f"{name}{_labels(project=p)} {s.sessions}")
            elif name == "memctl_validate_duration_seconds":
                d = (s.finished or s.started) - s.started
                out.append(f"{name}{_labels(project=p)} {d:.6f}")
            else:
                out.append(f"{name}{_labels(project=p)} {int(s.finished or s.started)}")
    return "\n".join(out) + "\n"


def _findings_lines(name: str, project: str, code: str, sev: str, n: int, s: Summary) -> list[str]:
    by = s.by_code_severity.get(code)
    if not by:
        return [f"{name}{_labels(project=project, severity=sev, code=code)} {n}"]
    return [f"{name}{_labels(project=project, severity=sv, code=code)} {k}"
            for sv, k in sorted(by.items(), key=lambda kv: _RANK[kv[0]])]


# ---------------------------------------------------------------------------
# Database, facts and lineage (need sqlite3 and the session store: imported here)

_SQLITE_MAGIC = b"SQLite format 3\x00"


def _header_user_version(path: Path) -> int | None:
    """``PRAGMA user_version`` read from the file header (offset 60), without SQLite."""
    try:
        fd = open_nofollow(path)
    except OSError:
        return None
    try:
        head = os.pread(fd, 100, 0)
    finally:
        os.close(fd)
    if len(head) < 64 or not head.startswith(_SQLITE_MAGIC):
        return None
    return int.from_bytes(head[60:64], "big")


def _open_facts(audit: Audit) -> Any:
    """The store's FactStore opened read-only, or None (no database, or a finding)."""
    from .errors import MemctlError
    from .facts import FactStore

    path = audit.store.facts_db
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a symlink or odd type is a layout finding
    try:
        return FactStore.open_readonly(path)
    except MemctlError as exc:
        return exc


def _current_generation(path: Path) -> int | None:
    """The facts database's exclusion generation as it is now (0 with no
    database or an empty file), read-only; None when it cannot be read."""
    from .errors import MemctlError
    from .facts import FactStore

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size == 0:
        return 0
    try:
        fs = FactStore.open_readonly(path)
    except MemctlError:
        return None
    try:
        return fs.generation()
    except Exception:  # noqa: BLE001 - a database that cannot say: no finding from it
        return None
    finally:
        fs.close()


def _check_db_and_facts(audit: Audit) -> Iterator[Finding | None]:
    import sqlite3

    from .errors import MemctlError, StoreBusy
    from .facts import SCHEMA_VERSION

    fs = _open_facts(audit)
    rel = FACTS_DB
    if fs is None:
        # No database at all: generation 0, nothing excluded.  (A symlink or odd
        # file type is a layout finding, and then the generation is unknown.)
        audit._generation_known = not os.path.lexists(audit.store.facts_db)
        return
    if isinstance(fs, MemctlError):
        if isinstance(fs, StoreBusy):
            raise fs
        v = _header_user_version(audit.store.facts_db)
        if v is not None and v > SCHEMA_VERSION:
            yield audit._f("db.schema_unknown", f"schema version {v} is newer than this memctl "
                           f"knows ({SCHEMA_VERSION}); upgrade memctl", file=rel)
        else:
            yield audit._f("db.unreadable", str(fs), file=rel)
        return
    try:
        db = fs.read_connection()  # immutable file or private snapshot
        if db is None or not fs.tables:
            if audit.store.facts_db.stat().st_size > 0:
                yield audit._f("db.schema_unknown", "no lecode tables in the database", file=rel)
            else:
                audit._generation_known = True  # an empty file: generation 0
            return
        try:
            yield from _db_checks(audit, fs, db, SCHEMA_VERSION)
            _load_facts(audit, fs, db)
        except sqlite3.DatabaseError as exc:
            yield audit._f("db.unreadable", f"database error while auditing: {exc}", file=rel)
    finally:
        fs.close()


def _db_checks(audit: Audit, fs: Any, db: Any, schema_version: int) -> Iterator[Finding | None]:
    rel = FACTS_DB
    tables = fs.tables
    if fs.needs_migration:
        yield audit._f("db.needs_migration", f"schema version {fs.schema_version}, current is "
                       f"{schema_version}; lecode migrates it on its next write", file=rel)
    for (msg,) in db.execute("PRAGMA integrity_check"):
        if msg != "ok":
            yield audit._f("db.integrity", f"integrity_check: {msg}", file=rel)
    fk_rows: set[tuple[str, int | None]] = set()
    for table, rowid, parent, _fkid in db.execute("PRAGMA foreign_key_check"):
        fk_rows.add((table, rowid))
        yield audit._f("db.foreign_key", f"row {rowid} of {table} references a missing row of "
                       f"{parent}", file=rel, table=table)
    # generation against exclusions and retry markers
    if "meta" in tables:
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        gen = int(row[0]) if row else None
        markers = db.execute("SELECT count(*), coalesce(max(generation), 0) FROM forgotten").fetchone() \
            if "forgotten" in tables else (0, 0)
        ex_max = db.execute("SELECT coalesce(max(generation), 0) FROM exclusions").fetchone()[0]
        if gen is None:
            yield audit._f("db.generation_mismatch", "meta has no generation row", file=rel)
        elif gen < markers[1] or gen < ex_max or gen < markers[0]:
            yield audit._f("db.generation_mismatch",
                           f"generation {gen}, but {markers[0]} forget retry marker(s) (newest at "
                           f"generation {markers[1]}) and exclusions installed up to generation "
                           f"{ex_max}", file=rel)
    # revisions contiguous, current revision present
    for fid, cur, n, lo, hi, has_cur in db.execute(
            "SELECT f.fact_id, f.revision, count(r.revision), min(r.revision), max(r.revision), "
            "sum(r.revision = f.revision) FROM facts f LEFT JOIN revisions r "
            "ON r.fact_id = f.fact_id GROUP BY f.fact_id ORDER BY f.fact_id"):
        if not has_cur:
            yield audit._f("db.dangling_ref", f"the fact's current revision {cur} has no "
                           "revision row", fact_id=fid, revision=cur, table="facts")
        elif n != hi or lo != 1 or hi != cur:
            yield audit._f("db.revision_gap",
                           f"{n} revision(s) numbered {lo}..{hi}; expected 1..{cur} without gaps",
                           fact_id=fid, revision=cur)
    # refs to missing facts/revisions that foreign_key_check did not already report
    checks = [("revisions", "SELECT rowid, fact_id, revision FROM revisions WHERE fact_id NOT IN "
               "(SELECT fact_id FROM facts)")]
    for t in ("provenance", "source_refs"):
        if t in tables:
            checks.append((t, f"SELECT x.rowid, x.fact_id, x.revision FROM {t} x LEFT JOIN revisions r "
                              "ON r.fact_id = x.fact_id AND r.revision = x.revision "
                              "WHERE r.fact_id IS NULL"))
    for table, sql in checks:
        seen: set[tuple[str, int]] = set()
        for rowid, fid, rev in db.execute(sql):
            if (table, rowid) in fk_rows or (fid, rev) in seen:
                continue
            seen.add((fid, rev))
            yield audit._f("db.dangling_ref", f"{table} row names fact {fid} revision {rev}, "
                           "which does not exist", fact_id=fid, revision=rev, table=table)


def _load_facts(audit: Audit, fs: Any, db: Any) -> None:
    """Every revision with its evidence, read in bulk; the references are validated
    later, in the one pass over each transcript."""
    from .facts import Provenance, Revision

    revs: dict[str, list[Any]] = {}

    refs_by: dict[tuple[str, int], SourceRef | None] = {}
    bad_refs: dict[tuple[str, int], str] = {}
    if "source_refs" in fs.tables:
        for fid, rev, sid, seqs, digest in db.execute(
                "SELECT fact_id, revision, session_id, seqs, digest FROM source_refs"):
            try:
                raw = orjson.loads(seqs)
                refs_by[(fid, rev)] = SourceRef(sid, tuple(raw) if isinstance(raw, list) else (), digest)
            except (orjson.JSONDecodeError, UsageError, TypeError) as exc:
                bad_refs[(fid, rev)] = str(exc)
    prov_by: dict[tuple[str, int], dict[str, list[int]]] = {}
    for fid, rev, sid, seq in db.execute("SELECT fact_id, revision, session_id, seq FROM provenance "
                                         "ORDER BY fact_id, revision, session_id, seq"):
        prov_by.setdefault((fid, rev), {}).setdefault(sid, []).append(seq)
    fact_ids = set()
    for fid, rev, text, created in db.execute(
            "SELECT r.fact_id, r.revision, r.text, r.created FROM revisions r "
            "JOIN facts f ON f.fact_id = r.fact_id ORDER BY r.fact_id, r.revision"):
        fact_ids.add(fid)
        prov = tuple(Provenance(s, tuple(q)) for s, q in prov_by.get((fid, rev), {}).items())
        revs.setdefault(fid, []).append(Revision(fid, rev, text, created, refs_by.get((fid, rev)),
                                                 prov, bad_refs.get((fid, rev))))
    for (fid,) in db.execute("SELECT fact_id FROM facts"):
        if fid not in fact_ids:
            revs.setdefault(fid, [])
    audit._revs = revs
    audit._bad_refs = bad_refs
    for rl in revs.values():
        for r in rl:
            if r.source is not None:
                audit._need.setdefault(r.source.session_id, []).append((r.source, "durable"))
    audit._generation = fs.generation()
    audit._generation_known = True
    for sid, seq in db.execute("SELECT session_id, seq FROM exclusions"):
        audit._excluded.setdefault(sid, set()).add(seq)
    audit._excluded = {k: frozenset(v) for k, v in audit._excluded.items()}


def _fact_findings(audit: Audit) -> Iterator[Finding | None]:
    from .facts import fact_status

    revs = audit._revs
    bad_refs = audit._bad_refs
    statuses = {ref: st for (ref, purpose), st in audit._statuses.items() if purpose == "durable"}

    def excluded(sid: str) -> frozenset[int]:
        return audit._excluded.get(sid, frozenset())

    audit.summary.facts_total = len(revs)
    for fid in sorted(revs):
        rl = revs[fid]
        st, _rev = fact_status(rl, statuses)
        audit.summary.facts[st.status] += 1
        for r in rl:
            key = (fid, r.revision)
            if key in bad_refs:
                yield audit._f("fact.hidden", f"the stored source reference is malformed: "
                               f"{bad_refs[key]}", fact_id=fid, revision=r.revision,
                               reason="invalid_ref")
                continue
            hit: tuple[str, int] | None = None
            for sid, seqs in sorted(r.evidence_positions().items()):
                common = excluded(sid).intersection(seqs)
                if common:
                    hit = (sid, min(common))
                    break
            if hit:
                yield audit._f("fact.suppressed",
                               f"evidence {hit[0]}:{hit[1]} is excluded by a forget; the fact is "
                               "kept but suppressed from recall", fact_id=fid, revision=r.revision,
                               session_id=hit[0], seq=hit[1])
            if r.source is None:
                if not hit:
                    what = "legacy provenance" if r.provenance else "no evidence at all"
                    yield audit._f("fact.unverified", f"{what}, no SourceRef",
                                   fact_id=fid, revision=r.revision, reason="legacy_provenance")
                continue
            s = statuses.get(r.source)
            if s is None or s.ok:
                continue
            if s.reason == "excluded" and hit:
                continue  # reported as fact.suppressed
            code = {"missing": "fact.missing", "stale": "fact.stale"}.get(s.status, "fact.hidden")
            if s.reason == "excluded":
                code = "fact.suppressed"
            detail = f": {s.detail}" if s.detail else ""
            yield audit._f(code, f"evidence {r.source.label()} is {s.status} ({s.reason}){detail}",
                           fact_id=fid, revision=r.revision, session_id=r.source.session_id,
                           seq=s.seq, reason=s.reason)
