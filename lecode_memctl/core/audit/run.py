"""The audit of one store: :class:`Audit` runs the checks in order (config,
layout, Markdown here; the database and facts in ``facts``; transcripts in
``transcripts``)."""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from .._lazy import lazy_compile
from ..atomic import open_nofollow, read_pieces
from ..layout import (
    DAILY_DIR,
    FACTS_DB,
    MEMORY_FILE,
    NOTES_DIR,
    SCRATCHPAD_FILE,
    SESSION_SUFFIX,
    SESSIONS_DIR,
    Store,
    looks_like_slug,
)
from ..mdnames import is_daily_file, is_note_file, utf8_problem
from ..sessions import LOCK_SUFFIX, epoch_ahead
from ..sourceref import SourceRef, StoredSource, session_file_id, status_for
from .codes import CODES, INFO, Finding, Progress, Summary
from .facts import (
    PENDING,
    Pending,
    check_db_and_facts,
    current_generation,
    fact_findings,
    source_groups,
)
from .transcripts import READ_CHUNK, run_jobs, worth_a_pool

#: The transcripts' findings held, at most, while the database checks run
#: in a thread (``Audit._beside``): past it, the audit waits for the checks.
HELD = 1000

_TMP_RE = lazy_compile(r"^\..+\.tmp-[0-9a-f]+\Z")  # \Z: "$" would accept a trailing newline
_TOP_FILES = {MEMORY_FILE, SCRATCHPAD_FILE, MEMORY_FILE + ".bak", SCRATCHPAD_FILE + ".bak",
              FACTS_DB, FACTS_DB + "-wal", FACTS_DB + "-shm", FACTS_DB + "-journal"}
# Lock/marker files other modules document in docs/FORMAT.md live beside the database.
_TOP_EXTRA_RE = lazy_compile(r"^(facts\.sqlite3\.lock|\.memctl[-.][A-Za-z0-9._-]+)\Z")


def _is_temp(name: str) -> bool:
    return bool(_TMP_RE.match(name))


# ---------------------------------------------------------------------------
# The audit

def _count(summary: Summary, f: Finding | None) -> None:
    """``f`` counted in ``summary`` (None: a finding ignored)."""
    if f is None:
        summary.ignored += 1
        return
    summary.by_severity[f.severity] += 1
    summary.by_code[f.code] += 1
    summary.by_code_severity.setdefault(f.code, Counter())[f.severity] += 1


def _uncount(summary: Summary, f: Finding) -> None:
    """``f`` taken out of ``summary`` again (:func:`_count`), with no code
    or severity left at zero that was not there."""
    for counter, key in ((summary.by_severity, f.severity), (summary.by_code, f.code)):
        counter[key] -= 1
        if not counter[key]:
            del counter[key]
    per = summary.by_code_severity[f.code]
    per[f.severity] -= 1
    if not per[f.severity]:
        del per[f.severity]
    if not per:
        del summary.by_code_severity[f.code]


class Audit:
    """One store's audit.  Iterate :meth:`run` for findings as they are found;
    :attr:`summary` holds the counts afterwards.  Changes nothing."""

    def __init__(self, store: Store, *, config_dir: Path | None = None, deep: bool = False,
                 ignore: frozenset[str] = frozenset(), progress: Progress | None = None,
                 now: float | None = None, parallel: bool = True,
                 lock_wait: float | None = None, state: Path | None = None,
                 record_state: bool = False, listed: bool = False,
                 frozen: bool = False) -> None:
        """``lock_wait``: seconds to wait for a stable database snapshot.
        ``state``: memctl's state directory (``core.seen``), whose mark of the
        store is compared with its database (``db.rolled_back``); None: no marks.
        ``record_state``: raise the mark to what this audit read (outside the store).
        ``listed``: --all-projects: a non-store entry of memory/ is a finding.
        ``frozen``: the store is a frozen copy no writer is at (a bundle's, at
        export and at verify): no finding depends on a file's modification
        time or the clock (``now`` is then ignored: see ``transcripts.FROZEN``)."""
        self.store = store
        self.listed = listed
        self.lock_wait = lock_wait
        self.state = state
        self.record_state = record_state
        self.config_dir = config_dir
        self.deep = deep
        self.ignore = ignore
        self.progress = progress
        if frozen:
            from .transcripts import FROZEN

            now = FROZEN
        self.now = now
        self.summary = Summary(store.slug, str(store.path), deep)
        self.parallel = parallel
        self._fs: Any = None       # the facts database, read-only, while the audit runs
        self._listing: Any = None  # its listing (FactStore.start_listing), started early
        self._child: Any = None    # or a forked child checking half of them (fact_helper)
        self._cited: frozenset[str] = frozenset()   # the sessions references cite
        self._statuses: dict[tuple[Any, str], Any] = {}   # the references not valid
        self._excluded: dict[str, frozenset[int]] = {}
        self._generation = 0
        self._exclusion_count = 0
        self._database_id: str | None = None  # facts.database_id, for memctl's mark
        # facts.forgotten_ids, for memctl's mark ({}: no database; None: not known)
        self._forgotten: dict[str, int] | None = {}
        self._generation_known = False  # True once the database was read, or is absent/empty
        self._redo = False              # they failed: the transcripts are read again, without facts
        # --all-projects: why the references could not all be read (source_groups);
        # fact_findings then judges no fact and reports it (db.unreadable)
        self._facts_failed: str | None = None
        self._unlisted: str | None = None   # why no transcript can be checked (_session_ids)
        self._sessions_unknown = False      # sessions/ cannot be listed (_session_ids)
        #: --all-projects: the store was gone when its audit began (removed
        #: since memory/ was listed): nothing audited, no finding, and the
        #: caller leaves it out of the report (its summary included)
        self.gone = False
        # --all-projects: the entry is no store directory (a stray file, a
        # symbolic link): reported, not audited, and not counted as a store
        self.refused = False

    # -- plumbing
    def _f(self, code: str, message: str, *, severity: str | None = None, **loc: Any) -> Finding | None:
        info = CODES[code]
        f = Finding(code, severity or info.severity, message, self.store.slug, **loc)
        if code in self.ignore:
            _count(self.summary, None)
            return None
        _count(self.summary, f)
        return f

    def _temp_file(self, mtime: float, rel: str) -> Finding | None:
        """``layout.temp_file``: a warning, or, modified in the last minute
        (the grace of a torn tail), info: the temporary file of a write in
        progress (an agent writing MEMORY.md made ``validate --strict`` fail
        60 times in 102 runs before 2026-12-07)."""
        from .transcripts import _ahead, _recent

        now = self.now if self.now is not None else time.time()
        if _recent(mtime, now, _ahead(mtime, now)):
            return self._f("layout.temp_file", "temporary file of a write in progress? (modified "
                           "in the last minute)", severity=INFO, file=rel)
        return self._f("layout.temp_file", "temporary file left by an interrupted write", file=rel)

    def run(self) -> Generator[Finding, None, None]:
        if self.listed:
            refused, finding = self._refused_store()
            if self.gone:
                return
            self.refused = refused
            if refused:
                # (not audited, its finding ignored or not: before 2026-12-07
                # an ignored one was taken for "not refused", and the entry
                # read as a store stopped the run, exit 5); no store, so
                # no fact, as no session (a code review of 2026-12-07:
                # not "unknown", as a database that cannot be read is)
                self.summary.facts_total = 0
                for f in self._check_config():
                    if f is not None:
                        yield f
                if finding is not None:
                    yield finding
                return
            from ..errors import NotFound

            try:
                self.store.require()
            except NotFound:
                # removed right after _refused_store's look: left out as a store
                # gone before (before 2026-12-07 this look stopped the run, exit 3)
                self.gone = True
                return
        else:
            self.store.require()
        self.summary.started = time.time()
        if self.now is None:
            self.now = time.time()
        db = self._check_db_and_facts()
        pending = False
        try:
            for gen in (self._check_config(), self._check_layout(), self._check_markdown()):
                for f in gen:
                    if f is not None:
                        yield f
            for g in db:
                if g is PENDING:
                    pending = True
                    break
                if g is not None:
                    yield g  # type: ignore[misc]
            if pending:
                yield from self._beside(db)
            else:
                for f in self._check_sessions():
                    if f is not None:
                        yield f
        finally:
            db.close()
            if self._child is not None:
                self._child.cancel()    # (the facts were not checked: an error)
                self._child = None
            if self._fs is not None:
                self._fs.close()    # (waits for the checks' thread)
                self._fs = None
        self.summary.finished = time.time()

    def _beside(self, db: Generator[Finding | Pending | None, None, None]) -> Iterator[Finding]:
        """The transcripts read while the database checks run in a thread
        (``check_db_and_facts`` said PENDING), given as without the thread:

        - Nothing of the transcripts is given before the checks' findings,
          which come first: their findings are held (until HELD of them,
          then the audit waits for the checks), and counted apart.
        - The checks' findings are then given one at a time, each counted as
          it is given (a reader that stops takes no more, and the state
          mark, recorded after the last, is not recorded).
        - Should the checks fail (``_redo``), what the transcripts gave is
          dropped and they are read again without the facts, as the audit
          reads them when its checks fail first (the ``progress`` callback
          then sees the transcripts twice).
        - An error while the transcripts are read waits for the checks,
          whose findings come first, then what was held, then the error;
          should the checks have failed, the error is dropped with the rest
          (the transcripts read again).  An interrupt (Ctrl-C, SIGTERM) ends
          the run at once: the checks are stopped, not waited for (seconds
          at 1,000,000 facts).  (What is held is counted as it is given.)"""
        import copy

        main = self.summary
        self.summary = read = copy.deepcopy(main)   # the transcripts' counts, apart
        sessions = self._check_sessions()
        held: list[Finding] = []
        error: BaseException | None = None
        try:
            for f in sessions:
                if f is not None:
                    held.append(f)
                    if len(held) >= HELD:
                        break
        except Exception as exc:  # noqa: BLE001 - raised below, after the checks' findings
            if isinstance(exc, MemoryError):
                # what the transcript job held (its frames' locals, which the
                # traceback keeps) is let go before the checks' findings are
                # given, so that they and the error can still be written
                import traceback

                traceback.clear_frames(exc.__traceback__)
            error = exc
        finally:
            self.summary = main
        for g in db:        # waits for the checks; each counted in main by _f
            if isinstance(g, Pending):
                continue
            _count(read, g)
            if g is not None:
                yield g
        if self._redo:
            sessions.close()
            self._statuses = {}
            if self._fs is not None:
                self._fs.close()
                self._fs = None
            for f in self._check_sessions():
                if f is not None:
                    yield f
            return
        self.summary = read
        for f in held:      # counted when given, as the transcripts' findings are
            _uncount(read, f)
        for f in held:
            _count(read, f)
            yield f
        if error is not None:
            raise error
        for f in sessions:
            if f is not None:
                yield f

    def may_fork(self) -> bool:
        """Whether the transcripts may be read by a pool of forked processes:
        ``worth_a_pool`` over every transcript, cited or not (the references
        are not read yet; the cited ones, which decide the pool in
        ``_check_sessions``, are among them)."""
        from ..pools import alone

        if not self.parallel:
            return False
        ids = self.store.session_ids(unlistable_ok=True)   # layout.unreadable reports it
        # (and no thread of the caller's: no fork beside it)
        return worth_a_pool(len(ids), self.deep, (self._transcript(sid) for sid in ids),
                            self._db_bytes()) and alone()

    def _db_bytes(self) -> int:
        """The facts database's size (0 when it cannot be stat'ed)."""
        try:
            return os.stat(self.store.facts_db, follow_symlinks=False).st_size
        except OSError:
            return 0

    def _transcript(self, sid: str) -> str:
        """The path of session ``sid``'s transcript."""
        return os.fspath(self.store.sessions_dir / f"{sid}{SESSION_SUFFIX}")

    def _refused_store(self) -> tuple[bool, Finding | None]:
        """``--all-projects``: an entry of ``<config>/memory/`` that is not a
        store directory (a symbolic link, never followed, or another file) is
        a finding, where ``validate`` of that project alone exits 5: (True,
        the finding, None when its code is ignored), or (False, None) for a
        store directory, audited.  An entry gone since memory/ was listed
        sets :attr:`gone` (before 2026-12-07 the run then stopped, exit 3)."""
        from ..errors import NotFound, StoreCorrupt

        try:
            st: os.stat_result | None = os.lstat(self.store.path)
        except FileNotFoundError:
            self.gone = True     # removed meanwhile: nothing to report
            return False, None
        except OSError:
            st = None            # (cannot be stat'ed: require() says why, below)
        now = time.time()
        self.summary.started = self.summary.finished = now
        if st is not None and stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(self.store.path)
            except FileNotFoundError:
                self.gone = True
                return False, None
            except OSError:
                target = "?"     # (replaced meanwhile by something else)
            return True, self._f("layout.symlink", f"the store directory is a symbolic link to "
                                 f"{target!r}; never followed", file=".")
        try:
            self.store.require()
        except NotFound:
            self.gone = True     # removed between the two looks
            return False, None
        except StoreCorrupt as exc:
            if looks_like_slug(self.store.path.name):
                return True, self._f("layout.unreadable", f"not a store: {exc.message}", file=".")
            return True, self._f("layout.unexpected_file",
                                 f"not a store directory: {exc.message}", file=".")
        return False, None

    # -- config
    def _check_config(self) -> Iterator[Finding | None]:
        if self.config_dir is None:
            return
        from ..config import (
            ConfigSyntax,
            ConfigTooLarge,
            check_memory_values,
            parse_config,
            read_config_bytes,
        )

        path = self.config_dir / "config.toml"
        try:
            raw = read_config_bytes(path, follow=False)
        except FileNotFoundError:
            return
        except OSError as exc:
            yield self._f("config.invalid", f"cannot read config.toml: {exc.strerror}", file=str(path))
            return
        try:
            data = parse_config(raw)
        except ConfigTooLarge as exc:
            yield self._f("config.invalid", f"config.toml is {exc}", file=str(path))
            return
        except UnicodeDecodeError:
            yield self._f("config.invalid", "config.toml is not valid UTF-8", file=str(path))
            return
        except ConfigSyntax as exc:
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
                # (names, not os.DirEntry objects: an entry kept with its
                # cached stat result was about 850 bytes a session, 25 MiB
                # at 30,000 transcripts; a name is about 70)
                with os.scandir(d) as it:
                    names = sorted(e.name for e in it)
            except OSError as exc:
                yield self._f("layout.unreadable", f"cannot list directory: {exc.strerror}",
                              file=rel or ".")
                continue
            for name in names:
                r = f"{rel}{name}"
                path = os.path.join(d, name)
                try:
                    est = os.lstat(path)
                except FileNotFoundError:
                    continue  # gone since the listing (a writer's -wal/-shm on close)
                except OSError as exc:
                    yield self._f("layout.unreadable", f"cannot stat: {exc.strerror}", file=r)
                    continue
                is_dir = stat.S_ISDIR(est.st_mode)
                if (rel == SESSIONS_DIR + "/" and session_file_id(name) is not None
                        and not stat.S_ISREG(est.st_mode)):
                    continue  # reported by the session check (refused or unreadable)
                if stat.S_ISLNK(est.st_mode):
                    yield self._f("layout.symlink", f"symbolic link to {os.readlink(path)!r}; "
                                  "never followed", file=r)
                    continue
                if est.st_mode & 0o077:
                    yield self._f("layout.permissions",
                                  f"mode {stat.S_IMODE(est.st_mode):04o} gives group/others access "
                                  f"(expected {'0700' if is_dir else '0600'})", file=r)
                if _is_temp(name) and not is_dir:
                    yield self._temp_file(est.st_mtime, r)
                    continue
                if is_dir:
                    if rel == "" and name in (DAILY_DIR, NOTES_DIR, SESSIONS_DIR):
                        stack.append((Path(path), r + "/"))
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
            return is_daily_file(base)
        if rel == NOTES_DIR + "/":
            return is_note_file(base)
        if rel == SESSIONS_DIR + "/":
            return session_file_id(name) is not None or session_file_id(name, LOCK_SUFFIX) is not None
        return False

    # -- markdown
    def _markdown_files(self) -> list[tuple[str, Path]]:
        root = self.store.path
        out = [(n, root / n) for n in (MEMORY_FILE, SCRATCHPAD_FILE, MEMORY_FILE + ".bak",
                                       SCRATCHPAD_FILE + ".bak")]
        for sub, ok in ((DAILY_DIR, is_daily_file), (NOTES_DIR, is_note_file)):
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
                # (read and checked a piece at a time: memory follows a piece,
                # not the file, a 200 MiB note included)
                fd = open_nofollow(p)
                try:
                    where = utf8_problem(read_pieces(fd, READ_CHUNK))
                finally:
                    os.close(fd)
            except OSError as exc:
                yield self._f("layout.unreadable", f"cannot read: {exc.strerror}", file=rel)
                continue
            if where is not None:
                offset, line = where
                yield self._f("markdown.invalid_utf8",
                              f"not valid UTF-8 (line {line}, byte {offset})",
                              file=rel, offset=offset)

    # -- database and facts (implemented in _facts_checks below)
    def _check_db_and_facts(self) -> Generator[Finding | Pending | None, None, None]:
        yield from check_db_and_facts(self)

    # -- sessions
    def _session_jobs(self, ids: list[str]) -> Iterator[tuple[Any, ...]]:
        """One job per transcript (``ids``, sorted) with every reference into
        it, read one session at a time (``source_groups``, in the same order;
        a job holds its session's references: before 2026-12-05 it kept only
        the last group of GROUP_REFS, and the others were never checked);
        the references into a session that is not there are missing."""
        groups = source_groups(self)
        group = next(groups, None)
        for sid in ids:
            refs: list[tuple[tuple[int, ...], str, str]] = []
            while group is not None and group[0] <= sid:
                if group[0] == sid:
                    # every group of the session (GROUP_REFS references each):
                    # the job reads its transcript once for all of them
                    refs.extend((seqs, digest, "durable") for seqs, digest in group[1])
                else:
                    self._missing(group)
                group = next(groups, None)
            yield (self._transcript(sid), sid, self.store.slug,
                   self.deep, refs, self._excluded.get(sid, frozenset()), self._generation,
                   self.now or time.time())
        while group is not None:
            self._missing(group)
            group = next(groups, None)

    def _missing(self, group: tuple[str, list[StoredSource]]) -> None:
        sid, refs = group
        st = (status_for("session_unreadable", self._unlisted) if self._unlisted is not None
              else status_for("session_missing", f"no session {sid}"))
        for seqs, digest in refs:
            self._statuses[(SourceRef.of_checked(sid, seqs, digest), "durable")] = st

    def _session_ids(self) -> list[str]:
        """The transcripts to check: every one ``sessions/`` lists.  One that
        cannot be listed is the layout check's finding (``layout.unreadable``);
        its transcripts may still open by name (a directory of mode 100), as
        ``facts`` and ``recall`` open them, so the cited ones are checked
        (those the facts database names and a lookup does not say are
        absent).  With the slug unknown as well (``--store`` without
        ``--slug``: it comes from the headers), no header can be matched and
        their references are unreadable, not "no session" (before
        2026-12-07, every reference of such a store was ``session_missing``).
        A ``sessions`` that is a symbolic link (``layout.symlink``), dangling
        too, is never followed to a transcript: the ones it lists and the
        cited ones are the jobs, each refused as ``facts`` and ``recall``
        refuse it (``refused_symlink``;
        before 2026-12-07 a dangling one listed as empty, and every reference
        was ``session_missing``)."""
        from ..errors import StoreCorrupt
        from ..layout import UnknownSlug, session_file_exists

        try:
            linked = stat.S_ISLNK(os.lstat(self.store.sessions_dir).st_mode)
        except OSError:
            linked = False  # (none, or it cannot be looked at: as the listing finds it)
        if linked:
            try:
                listed = self.store.session_ids()   # (the names it lists, if any)
            except StoreCorrupt:
                listed = []
            return sorted(set(listed) | set(self._cited))
        try:
            return self.store.session_ids()
        except StoreCorrupt as exc:
            # (how many transcripts it holds is not known: the summary's
            # count is null, as projects says; before 2026-12-07 it was
            # the number of those the facts cite)
            self._sessions_unknown = True
            if isinstance(self.store.slug, UnknownSlug):
                self._unlisted = (f"{exc}, so the slug its transcripts must name is "
                                  "unknown (--slug SLUG names it)")
                return []
        sessions_dir = self.store.sessions_dir

        def there(sid: str) -> bool:
            try:
                return session_file_exists(sessions_dir, sid)
            except StoreCorrupt:
                return True         # (cannot be looked up: its job says why)

        return sorted(sid for sid in self._cited if there(sid))

    def _check_sessions(self) -> Generator[Finding | None, None, None]:
        """One job per transcript, each reading its file at most once (see _session_job);
        with ``deep`` and several sessions, or many large referenced transcripts,
        the jobs run in parallel processes (``run_jobs``)."""
        self._sessions_unknown = False
        ids = self._session_ids()
        self.summary.sessions = None if self._sessions_unknown else len(ids)
        total = len(ids)
        jobs = self._session_jobs(ids)
        # the pool is decided before the jobs are made (they are made one at a
        # time, as the pool or this loop takes them)
        parallel = self.parallel and worth_a_pool(
            len(ids), self.deep, (self._transcript(sid) for sid in ids if sid in self._cited),
            self._db_bytes())
        if parallel and self._fs is not None:
            # no fork while a thread is inside SQLite (may_fork said no pool,
            # but a transcript grew meanwhile): the checks' thread ended
            self._fs.wait_background()
        if parallel:
            from ..pools import alone

            parallel = alone()      # (a caller's thread: no pool, run_jobs forks none)
        if not parallel and self._fs is not None and self._child is None:
            # the facts' sorts (fact_findings) run while the transcripts are read
            self._listing = self._fs.start_listing()
        results = run_jobs(jobs, parallel=parallel)
        ahead: list[tuple[str, float, int]] = []
        for i, (sid, sc) in enumerate(zip(ids, results, strict=True)):  # one result per job
            if self.progress:
                self.progress(i, total)
            self.summary.bytes_read += sc.bytes_read
            for (seqs, digest, purpose), st in sc.statuses.items():
                if not st.ok:
                    self._statuses[(SourceRef(sid, seqs, digest), purpose)] = st
            for code, message, severity, loc in sc.raw:
                yield self._f(code, message, severity=severity, **loc)
            if (self._generation_known and sc.max_epoch
                    and epoch_ahead(sc.max_epoch[0], self._generation)):
                ahead.append((sid, *sc.max_epoch))
        if self.progress:
            self.progress(total, total)
        if ahead:
            # The generation was read before the transcripts: a forget in between,
            # then a message stamped with its epoch, is not a loss.  Generations only
            # rise, so a transcript still ahead of the generation read now is one.
            now_gen = current_generation(self.store.facts_db)
            for sid, epoch, seq in ahead:
                if now_gen is not None and epoch_ahead(epoch, now_gen):
                    yield self._f("session.epoch_ahead",
                                  f"a generated message carries exclusion epoch {epoch}, but the "
                                  f"facts database is at generation {now_gen}: forget "
                                  "exclusions were lost", file=f"{SESSIONS_DIR}/{sid}.jsonl",
                                  session_id=sid, seq=seq)
        yield from fact_findings(self)
