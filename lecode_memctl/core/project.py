"""One entry point that wires a project: :func:`open_project` -> :class:`Project`.

The agent opens its project once and gets the store, the project's
:class:`~lecode_memctl.core.facts.FactStore` and a
:class:`~lecode_memctl.core.sessions.SessionStore` whose exclusions are that
FactStore's, so no read of a transcript can forget the project's forgets.
``docs/API.md`` walks through a whole session with it.

Reads create nothing: opening a project touches no file; reading sessions,
recalling and building the memory section before the first write open the
facts database read-only (or not at all when it does not exist).  The
FactStore writer is opened at the first use of :attr:`Project.facts` (or of
:meth:`Project.remember`, :meth:`Project.correct`, :meth:`Project.forget`),
and ``facts.sqlite3`` is created by the first write, never by a read.
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from .config import ConfigDir, path_text, resolve_config_dir, shown_path
from .errors import UsageError, typed_errors
from .identity import working_directory
from .layout import Store, store_for_project, store_given
from .memory_config import MemoryConfig, load_memory_config
from .sessions import SessionStore, StoreExclusions, check_range
from .sourceref import ExclusionReader, SourceRef

if TYPE_CHECKING:  # imported lazily: sqlite3 is loaded by the first facts access
    from .context import MemorySection
    from .facts import Fact, FactStore, RememberResult
    from .markdown import MarkdownFile


class _ProjectExclusions:
    """The project's ExclusionReader: the FactStore writer once it holds a
    connection (it sees its own forgets at once), else the store's
    ``facts.sqlite3`` read read-only on each use."""

    def __init__(self, project: Project) -> None:
        self._project = project

    def _reader(self) -> ExclusionReader:
        fs = self._project._facts
        if fs is not None and fs.exists:
            return fs
        return self._project._file_exclusions

    def generation(self) -> int:
        with typed_errors():
            return self._reader().generation()

    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        with typed_errors():
            return self._reader().excluded_seqs(session_id)


class Project:
    """A project's store, its facts and its sessions, wired together.

    Attributes: ``store`` (:class:`Store`), ``config_dir`` (:class:`ConfigDir`),
    ``sessions`` (:class:`SessionStore` bound to this project's exclusions),
    ``facts`` (the :class:`FactStore` writer, opened at first use) and
    ``config`` (the ``[memory]`` settings, read at first use).  Use it as a
    context manager, or call :meth:`close`.  It may be shared by threads
    (``docs/API.md``, "Threads"): they get one writer, whose calls wait
    for each other's.
    """

    def __init__(self, store: Store, config_dir: ConfigDir) -> None:
        self.store = store
        self.config_dir = config_dir
        self._facts: FactStore | None = None
        # (the writer opened once, whichever threads touch ``facts`` at once;
        # one replaced because another process created the database since
        # is still closed by close(): a thread may hold it)
        self._facts_lock = _thread.allocate_lock()
        self._replaced: list[FactStore] = []
        self._file_exclusions = StoreExclusions(store.facts_db)
        self._exclusions = _ProjectExclusions(self)
        self.sessions = SessionStore(store, exclusions=self._exclusions)
        self._config: MemoryConfig | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"Project(store={os.fspath(self.store.path)!r})"

    # ---- what it holds ---------------------------------------------------

    @property
    def slug(self) -> str:
        """The store's slug (``<name>-<12 hex>``, its directory's name under
        ``<config>/memory/``)."""
        return self.store.slug

    @property
    def root(self) -> Path | None:
        """The project root (None for a store given directly with ``store=``)."""
        return self.store.identity.root if self.store.identity is not None else None

    @property
    def config(self) -> MemoryConfig:
        """The effective ``[memory]`` settings of ``<config dir>/config.toml``."""
        self._check_open()      # (read from the file after close() before 2026-12-07)
        if self._config is None:
            self._config = load_memory_config(self.config_dir.path)
        return self._config

    @property
    def facts(self) -> FactStore:
        """The FactStore writer.  Creating it creates no file; the database is
        created by the first write.  On an existing database it connects for
        writing (WAL mode; an empty, 0-byte file and an older schema are left
        as they are until the first write, which makes or migrates the schema
        and then switches to WAL), as the agent's writer does; use the read
        methods below to read without writing."""
        with self._facts_lock:
            self._check_open()
            fs = self._facts
            # (``exists`` waits for a write of another thread in progress,
            # which may be the one creating the database)
            if fs is None or (not fs.exists and os.path.lexists(self.store.facts_db)):
                # None yet, or opened before another process created the database:
                # a FactStore without a connection would never see that database.
                from .facts import FactStore

                if fs is not None:
                    self._replaced.append(fs)
                # (the writer opened through no link put in the store
                # directory's place since the open: open_project's check, again)
                _refuse_linked_store(self.store.path)
                fs = self._facts = FactStore(self.store.facts_db)
                fs.write_guard = self._refuse_if_disabled
            return fs

    def _refuse_if_disabled(self) -> None:
        """UsageError when ``[memory] enabled = false``: the reference design's
        "Disabled memory creates no fact database".  Called by the writer
        before every write that adds a fact, a revision or a source
        (``remember``, ``correct``, ``add``, ``revise``, ``attach_source``);
        ``forget`` only protects, and is never refused."""
        config = self.config
        if not config.enabled:
            where = shown_path(os.fspath(config.path)) if config.path is not None else "config.toml"
            raise UsageError(f"memory is disabled ([memory] enabled = false in {where}): "
                             "no fact is written")

    @contextmanager
    def _reading(self) -> Iterator[FactStore]:
        """The writer when it holds a connection, else a read-only FactStore
        for the duration of one call (no file created or changed)."""
        self._check_open()
        fs = self._facts
        if fs is not None and fs.exists:
            yield fs
            return
        from .facts import FactStore

        with FactStore.open_readonly(self.store.facts_db) as ro:
            yield ro

    # ---- writes (validated evidence, exclusions checked in the transaction)

    def remember(self, text: str, ref: SourceRef, *, deduplicate: bool = False,
                 expected_generation: int | None = None) -> RememberResult:
        """``FactStore.remember`` with this project's sessions.  UsageError
        when the project's memory is disabled (``[memory] enabled =
        false``): nothing written, no ``facts.sqlite3`` created."""
        with typed_errors():
            self._refuse_if_disabled()
            return self.facts.remember(text, ref, sessions=self.sessions,
                                       deduplicate=deduplicate,
                                       expected_generation=expected_generation)

    def correct(self, fact_id: str, text: str, *, expected_revision: int, ref: SourceRef,
                expected_generation: int | None = None) -> Fact:
        """``FactStore.correct`` with this project's sessions (UsageError when
        the project's memory is disabled, as :meth:`remember`)."""
        with typed_errors():
            self._refuse_if_disabled()
            return self.facts.correct(fact_id, text, expected_revision=expected_revision,
                                      ref=ref, sessions=self.sessions,
                                      expected_generation=expected_generation)

    def forget(self, fact_id: str, *,
               unexcluded: list[tuple[int | None, str]] | None = None) -> bool:
        """``FactStore.forget``: True the first time, False on a retry.  Also
        when the project's memory is disabled: a forget only protects.
        ``unexcluded``, when given, gets each (revision, reason) whose
        evidence could not be excluded (a damaged row), as
        ``FactStore.forget``'s."""
        with typed_errors():
            return self.facts.forget(fact_id, unexcluded=unexcluded)

    def write_markdown(self, kind: str, text: str, *, name: str | None = None,
                       expected_sha256: str | None | EllipsisType = ...) -> Path:
        """Write a Markdown file of the store, as the reference design writes
        it: atomically (temporary file, fsync, rename), its previous content
        first copied to ``<file>.bak``, in the Markdown writers' turn (an
        exclusive lock on the store directory that ``memctl edit`` and
        ``memctl redact`` take too: ``markdown.writing``).

        ``kind``: ``"memory"`` (MEMORY.md), ``"scratchpad"``, ``"log"``
        (``daily/<name>.md``, ``name`` a ``YYYY-MM-DD`` date, default today
        in local time, as ``memctl log`` and ``memctl edit log`` take it)
        or ``"note"`` (``notes/<name>.md``).  ``expected_sha256``:
        ``...`` (the default) writes whatever the file holds now; ``None``
        writes only if the file is still missing; a hex SHA-256 writes only
        if the file still has those bytes (:meth:`read_markdown` gives it).
        Otherwise ``Conflict`` (exit 4), nothing written: a compare-and-write
        never overwrites a write made after its read.  Returns the path."""
        from . import markdown

        self._check_open()
        with typed_errors():
            target = markdown.target_for(kind, name)
            if expected_sha256 is ...:
                return markdown.write(self.store, target, text)
            if expected_sha256 is not None and not (
                    isinstance(expected_sha256, str) and len(expected_sha256) == 64
                    and all(c in "0123456789abcdef" for c in expected_sha256)):
                # (a malformed digest is the caller's mistake, not "changed on disk")
                raise UsageError("expected_sha256 must be 64 lower-case hex digits (the sha256 "
                                 f"read_markdown gives) or None, not {expected_sha256!r:.80}")
            return markdown.write_if_unchanged(self.store, target,
                                               markdown.encode_text(target, text), expected_sha256)

    # ---- reads (create nothing) ------------------------------------------

    def read_markdown(self, kind: str, name: str | None = None) -> MarkdownFile | None:
        """A Markdown file of the store (``kind`` and ``name`` as for
        :meth:`write_markdown`; a note by the reading rule, so a name too
        long to write is still read): its ``path``, ``text``, ``size`` and
        ``sha256`` (pass it to :meth:`write_markdown` to write only over
        these bytes), or ``None`` when it does not exist.  A symbolic link,
        a file that is not regular or not UTF-8 is ``StoreCorrupt``."""
        from . import markdown

        self._check_open()
        with typed_errors():
            target = (markdown.note_target(name, reading=True)
                      if kind == markdown.NOTE and name is not None
                      else markdown.target_for(kind, name))
            return markdown.read_if_there(self.store, target)

    def generation(self) -> int:
        """The project's exclusion generation (stamp it as ``epoch`` on generated messages)."""
        self._check_open()
        return self._exclusions.generation()

    def recall(self, fact_id: str, *, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """memory_recall by fact id (:func:`lecode_memctl.core.facts.recall`)."""
        from .factview import recall

        with typed_errors(), self._reading() as fs:
            return recall(fs, self.sessions, fact_id, offset=offset, limit=limit)

    def read_range(self, session_id: str, start: int, end: int, *, offset: int = 0,
                   limit: int | None = None) -> dict[str, Any]:
        """memory_recall by session range (:func:`read_range`)."""
        self._check_open()
        with typed_errors():
            return read_range(self.sessions, session_id, start, end, offset=offset, limit=limit)

    def list_facts(self, *, offset: int = 0, limit: int = 20,
                   session_id: str | None = None,
                   current_session_id: str | None = None) -> dict[str, Any]:
        """memory_list: one page of facts with their status (:func:`facts_page`),
        as the model may read it: the text of a fact whose status is not
        ``valid`` is null (``fact_text_truncated`` false), as
        :meth:`recall` gives it none (a fact that shares evidence with a
        forgotten one is suppressed from recall, kept administratively:
        ``memctl facts`` lists its text).  memory_list passes
        ``current_session_id`` (the agent's current session): the
        project's facts, with that session's latest learning status (None
        when it has none).  ``session_id`` instead lists only the facts
        citing that session; neither: the learning status of the session
        written last."""
        from .factview import facts_page

        with typed_errors(), self._reading() as fs:
            return facts_page(fs, self.sessions, offset=offset, limit=limit,
                              session_id=session_id, valid_texts=True,
                              current_session_id=current_session_id)

    def memory_section(self, *, explain: bool = False) -> MemorySection:
        """The memory section to inject (:func:`build_memory_section`)."""
        from .context import build_memory_section

        config = self.config
        with typed_errors(), self._reading() as fs:
            return build_memory_section(self.store, config, fs, self.sessions, explain=explain)

    # ---- lifetime --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the project is closed")

    def close(self) -> None:
        """Close the FactStore and the SessionStore.  Idempotent."""
        with self._facts_lock:      # (no writer opened after it: see facts)
            self._closed = True
        for fs in [*self._replaced, self._facts]:
            if fs is not None:
                fs.close()      # (waits for a call of another thread to end)
        self.sessions.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_project(path: str | os.PathLike[str] | None = None, *,
                 config_dir: str | os.PathLike[str] | None = None,
                 store: str | os.PathLike[str] | None = None) -> Project:
    """Open the project of working directory ``path`` (default: the current
    directory): its store is ``<config dir>/memory/<slug of the project root>/``
    (store contract).  ``config_dir`` is resolved as ``--config-dir`` is
    (option, ``$LECODE_CONFIG_DIR``, ``$XDG_CONFIG_HOME/lecode``,
    ``~/.config/lecode``).  ``store`` names a store directory directly, as
    memctl's ``--store`` does (no project identity; ``path`` must then be
    left out).  Nothing is created or opened: a new project's store appears
    with its first write."""
    if store is not None and path is not None:
        raise UsageError("open_project: give a project path or a store, not both")
    # (each a str or os.PathLike of text with no NUL, else UsageError; an
    # empty store or config_dir names no directory, as memctl's --store and
    # --config-dir: taken as given, it was the current one, or the default)
    texts = {name: path_text(value, f"open_project: {name}")
             for name, value in (("path", path), ("store", store), ("config_dir", config_dir))
             if value is not None}
    for name in ("store", "config_dir"):
        if texts.get(name) == "":
            raise UsageError(f"open_project: {name} is an empty path")
    cfg = resolve_config_dir(texts.get("config_dir"))
    if "store" in texts:
        store_path = texts["store"]
        # (refused before its transcripts' headers are read through it)
        _refuse_linked_store(Path(os.path.abspath(store_path)))
        st = store_given(store_path, None)   # as the CLI's --store: the slug from the headers
    else:
        where = working_directory() if path is None else texts["path"]
        if not os.path.isdir(where):
            raise UsageError(f"open_project: {shown_path(where)} is not a directory")
        st = store_for_project(cfg.path, where)
        _refuse_linked_store(st.path)
    return Project(st, cfg)


def _refuse_linked_store(path: Path) -> None:
    """The check memctl makes of a store directory (``Store.require``), but
    for its absence: a symbolic link there (never followed), another file in
    the directory's place, or an ``lstat`` that fails is ``StoreCorrupt``
    (exit 5), with memctl's message (docs/FORMAT.md, "Opening"); a store
    that does not exist yet is fine (the first write creates it).  Before
    2026-12-07 the API read and wrote through a linked store that every
    memctl command refused."""
    from .atomic import lstat_dir

    lstat_dir(path, link_what="store directory is")


def read_range(sessions: SessionStore, session_id: str, start: int, end: int, *,
               offset: int = 0, limit: int | None = None) -> dict[str, Any]:
    """Direct session recall (memory_recall with session_id, start_seq,
    end_seq; ``memctl sessions recall``): a validated snapshot of the visible
    messages of ``start..end`` (inclusive, at most 200 positions; purpose
    ``working``) as one JSON document of at most 16,384 bytes, with a
    character page of ``source_text`` from ``offset`` and ``next_offset``
    (None on the last page).  Each page is a new snapshot: compare
    ``source.digest`` before joining pages."""
    from .paging import DEFAULT_LIMIT, page_document

    check_range(start, end, max_span=200)
    snap = sessions.source_snapshot(session_id, start, end, "working")
    meta = range_meta(session_id, start, end, snap)
    doc, _page = page_document(meta, snap.messages(), offset=offset,
                               limit=DEFAULT_LIMIT if limit is None else limit)
    return doc


def _by_reason(hidden: dict[int, str]) -> dict[str, list[int]]:
    """{reason: [seq, ...]} of the hidden message positions."""
    out: dict[str, list[int]] = {}
    for seq, reason in sorted(hidden.items()):
        out.setdefault(reason, []).append(seq)
    return out


def _reasons_by_seq(hidden: dict[int, str]) -> dict[str, str]:
    """{"seq": reason} for each hidden message position, in seq order (a JSON
    object: compact enough that 200 positions fit the 16 KiB page cap)."""
    return {str(seq): reason for seq, reason in sorted(hidden.items())}


def range_meta(session_id: str, start: int, end: int, snap: Any) -> dict[str, Any]:
    """The metadata of every page of a range read (:func:`read_range`): the
    status (valid) and reason (None), the source reference, and the reason
    of each hidden position, grouped (``hidden``) and by seq
    (``hidden_reasons``)."""
    return {"session_id": session_id, "start": start, "end": end, "last_seq": snap.last_seq,
            "purpose": "working", "status": "valid", "reason": None,
            "source": snap.ref.to_json(), "hidden": _by_reason(snap.hidden),
            "hidden_reasons": _reasons_by_seq(snap.hidden)}


def hidden_range(session_id: str, start: int, end: int, exc: Any) -> dict[str, Any]:
    """What a range read with no visible message says, as data (``exc`` is
    the :class:`SpanHidden` that :func:`read_range` raised): status and
    reason as recall gives them (hidden with cleared, undone, excluded or
    epoch; stale with not_message when the range holds only events), the
    first hidden position, and the reason of each hidden position."""
    from .sourceref import status_for

    st = status_for(exc.reason)
    return {"session_id": session_id, "start": start, "end": end, "last_seq": exc.last_seq,
            "purpose": "working", "status": st.status, "reason": exc.reason, "seq": exc.seq,
            "source": None, "hidden": _by_reason(exc.hidden),
            "hidden_reasons": _reasons_by_seq(exc.hidden)}


__all__ = ["Project", "open_project", "read_range", "range_meta", "hidden_range"]
