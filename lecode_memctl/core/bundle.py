"""Evidence bundles: ``export`` one store as a self-verifying tar archive, and
``verify`` one offline (models: ``git bundle verify``, restic ``check
--read-data``, hashdeep's audit mode).  The format is in docs/FORMAT.md,
"Evidence bundles".

Export is a read command.  It stages a copy of the store in a private
temporary directory (never in the store): first the facts database through
SQLite's backup API from the read-only open (a private snapshot of the
database, with its ``-wal`` when one holds commits), then every transcript up
to its last complete record, then the Markdown.  In that order, a fact in the
copy cites records already written (the agent appends a transcript record
before it commits a fact citing it).  The manifest is computed from the
staged copy -- file hashes, the ``validate`` audit and the fact statuses --
so that it describes exactly what the archive holds, even while a writer
works on the store; then the archive is written: ``manifest.json`` first, the
files in manifest order.

Verify recomputes every hash, names each added, missing, changed or refused
member, checks the archive's order and end, then audits the bundle's store
with the same code as ``validate`` and ``facts`` (the slug from the manifest)
and compares with the manifest.  An archive is unpacked into a private
temporary directory by our own member checks (never ``extractall``): only
regular files with relative, normalised names are written, with
``O_EXCL|O_NOFOLLOW``, and of those only the manifest and the files it
lists at their size (any other is hashed as it is read); absolute names,
``..``, links, devices, FIFOs and sparse files are refused and reported,
and a mode, an owner or a directory that export does not write is
reported too (``tar -x`` would apply them).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import os
import stat
import sys
import tarfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from ._lazy import lazy_compile
from ._record import record
from .atomic import O_NONBLOCK, fenced, open_nofollow, refuse_inside, remove_private, write_all
from .errors import (
    Conflict,
    MemctlError,
    NotFound,
    StoreCorrupt,
    StoreWriteError,
    UsageError,
    raise_if_out_of_fds,
)
from .layout import DAILY_DIR, FACTS_DB, MEMORY_FILE, NOTES_DIR, SCRATCHPAD_FILE, SESSIONS_DIR, Store
from .mdnames import is_daily_file, is_note_file
from .rowmodel import FACT_CHECK, FINDING, stored_int
from .sessions import LOCK_SUFFIX
from .snapshot import owned_tempdir
from .sourceref import held_bytes, session_file_id

BUNDLE_FORMAT = "memctl-bundle"
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"
STORE_DIR = "store"
MANIFEST_MAX_BYTES = 256 << 20
CHUNK = 1 << 20

# Fields of the validate summary that describe the run, not the store.
_RUN_FIELDS = ("store", "started", "finished", "duration_seconds", "transcript_bytes_read")
# Fields of a `memctl facts` row that the manifest keeps (the text is in the database).
FACT_FIELDS = ("fact_id", "revision", "status", "reason", "about_revision", "source_ref")
_REF_KEYS = ("session_id", "seqs", "digest")    # a source_ref's, in SourceRef.to_json's order


def held_canonical(doc: Any) -> bytes:
    """``canonical(doc)`` for one held among many (``sourceref.held_bytes``:
    100,000 findings sorted by orjson's own bytes held 800 MiB)."""
    return held_bytes(canonical(doc))


def canonical(doc: Any) -> bytes:
    """The manifest's byte form: orjson, keys sorted, no whitespace (a name
    with bytes that are not UTF-8, in a finding of a store verify unpacked,
    written as ``\\xNN``: ``rowmodel.no_surrogates``)."""
    try:
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        if "surrogates" not in str(exc):
            raise
        from .rowmodel import no_surrogates

        return orjson.dumps(no_surrogates(doc), option=orjson.OPT_SORT_KEYS)


def _iso_now(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --------------------------------------------------------------------------
# Reading the store (read-only, never through a link)


def _open_regular(path: Path) -> tuple[int, os.stat_result] | None:
    """A read-only descriptor of a regular file, or None (symlink, FIFO, device,
    directory: never opened in a way that blocks or follows)."""
    try:
        fd = open_nofollow(path, os.O_RDONLY | O_NONBLOCK)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def _pump(read: Callable[[int], bytes], out: int, what: str, size: int | None = None
          ) -> Iterator[bytes]:
    """Copy what ``read(n)`` gives, ``CHUNK`` bytes at a time, into the open
    file ``out`` until end of file (or ``size`` bytes), yielding each chunk
    once written.  Reading errors are the caller's (OSError); a failing write
    is StoreWriteError (exit 7) ``"<what>: <strerror>"``."""
    done = 0
    while size is None or done < size:
        chunk = read(CHUNK if size is None else min(CHUNK, size - done))
        if not chunk:
            return
        done += len(chunk)
        try:
            write_all(out, chunk)
        except OSError as exc:
            raise StoreWriteError(f"{what}: {exc.strerror}") from None
        yield chunk


def _copy_out(fd: int, size: int, dest: Path, *, whole_records: bool) -> int:
    """Copy the first ``size`` bytes of ``fd`` into the new file ``dest``; with
    ``whole_records``, only up to the last ``\\n`` (a transcript's torn tail is
    an append in flight, not yet a record).  Returns the bytes kept.
    Reading errors are the caller's (OSError); writing the private copy fails
    with StoreWriteError (exit 7)."""
    try:
        out = open_nofollow(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as exc:
        raise StoreWriteError(f"cannot stage {dest.name} in a temporary directory: "
                              f"{exc.strerror}") from None
    kept = done = 0
    try:
        for chunk in _pump(lambda n: os.read(fd, n), out,
                           f"cannot stage {dest.name} in a temporary directory", size):
            done += len(chunk)
            if whole_records:
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    kept = done - len(chunk) + nl + 1
            else:
                kept = done
        if kept != done:
            os.ftruncate(out, kept)
    finally:
        os.close(out)
    return kept


def _sha256_file(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    fd = open_nofollow(path)
    try:
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
    finally:
        os.close(fd)
    return n, h.hexdigest()


def _classify(rel_dir: str, name: str, with_backups: bool) -> str | None:
    """None when ``rel_dir/name`` is exported, else why it is left out."""
    base = name[:-4] if name.endswith(".bak") else name
    backup = base != name
    if rel_dir == "":
        if name in (MEMORY_FILE, SCRATCHPAD_FILE):
            return None
        if base in (MEMORY_FILE, SCRATCHPAD_FILE):
            return None if with_backups else "backup"
        if name == FACTS_DB:
            return None
        if name.startswith(FACTS_DB):
            return "database_sidecar"
        return "not_in_layout"
    if rel_dir == DAILY_DIR:
        ok = is_daily_file(base)
    elif rel_dir == NOTES_DIR:
        ok = is_note_file(base)
    elif rel_dir == SESSIONS_DIR:
        if session_file_id(name, LOCK_SUFFIX) is not None:
            return "lock"
        return None if session_file_id(name) is not None else "not_in_layout"
    else:  # pragma: no cover - callers pass the layout's directories only
        return "not_in_layout"
    if not ok:
        return "not_in_layout"
    if backup and not with_backups:
        return "backup"
    return None


def _shown(name: str) -> str:
    """A name as a report shows it: bytes that are not UTF-8 as ``\\xNN``
    (export's ``not_utf8_name`` entries write them so)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _utf8(name: str) -> bool:
    """Whether a listed name is UTF-8 (not one with surrogateescape's stand-ins)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@record
class _Staged:
    files: list[str] = field(default_factory=list)          # relative to the store, staged
    skipped: list[dict[str, str]] = field(default_factory=list)
    database: dict[str, Any] = field(default_factory=dict)


def _stage_database(store: Store, dest: Path, st: _Staged, lock_wait: float | None = None) -> None:
    from .facts import BUSY_TIMEOUT, FactStore

    try:
        fs = FactStore.open_readonly(store.facts_db,
                                     busy_timeout=BUSY_TIMEOUT if lock_wait is None else lock_wait)
    except StoreCorrupt as exc:
        # Not readable as a lecode database (garbage, a newer schema, ...): keep its
        # bytes as they are, so that the recipient sees what validate saw.
        opened = _open_regular(store.facts_db)
        if opened is None:
            # (named as _stage names every other entry: a link is a symlink)
            st.skipped.append({"path": FACTS_DB, "reason": "symlink"
                               if os.path.islink(store.facts_db) else "not_regular"})
            st.database = {"copy": "none", "note": exc.message}
            return
        fd, fst = opened
        try:
            _copy_out(fd, fst.st_size, dest / FACTS_DB, whole_records=False)
        finally:
            os.close(fd)
        st.files.append(FACTS_DB)
        st.database = {"copy": "raw", "note": exc.message}
        return
    try:
        if fs.backup_to(dest / FACTS_DB):
            st.files.append(FACTS_DB)
            st.database = {"copy": "backup", "note": None}
        else:
            st.database = {"copy": "none", "note": "no facts database"}
    finally:
        fs.close()


def _stage(store: Store, dest: Path, with_backups: bool, lock_wait: float | None = None) -> _Staged:
    st = _Staged()
    os.mkdir(dest, 0o700)
    _stage_database(store, dest, st, lock_wait)
    # transcripts, then Markdown; anything else is named in `skipped`.  A
    # transcript is copied as its directory's sorted names come, the other
    # files after them (``later``): no DirEntry nor entry to copy is kept
    # per transcript (before 2026-12-07, about 1 KiB a session)
    later: list[tuple[str, str]] = []
    root = store.path
    for rel_dir in ("", SESSIONS_DIR, DAILY_DIR, NOTES_DIR):
        d = root / rel_dir if rel_dir else root
        try:
            dst = os.lstat(d)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(dst.st_mode) or not stat.S_ISDIR(dst.st_mode):
            st.skipped.append({"path": rel_dir, "reason": "symlink" if stat.S_ISLNK(dst.st_mode)
                               else "not_regular"})
            continue
        try:
            with os.scandir(d) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            raise_if_out_of_fds(exc, d)
            raise StoreCorrupt(f"{d}: cannot list: {exc.strerror}") from None
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if rel_dir == "" and name in (SESSIONS_DIR, DAILY_DIR, NOTES_DIR):
                continue
            if not _utf8(name):
                # the manifest (UTF-8 JSON) and verify name every file: a name
                # with bytes that are not UTF-8 is left out, written as \xNN
                st.skipped.append({"path": _shown(rel), "reason": "not_utf8_name"})
                continue
            if rel == FACTS_DB:
                continue
            try:
                est = os.lstat(os.path.join(d, name))
            except OSError:
                st.skipped.append({"path": rel, "reason": "unreadable"})
                continue
            if stat.S_ISLNK(est.st_mode):
                st.skipped.append({"path": rel, "reason": "symlink"})
                continue
            if stat.S_ISDIR(est.st_mode):
                st.skipped.append({"path": rel + "/", "reason": "not_in_layout"})
                continue
            why = _classify(rel_dir, name, with_backups)
            if why is None and not stat.S_ISREG(est.st_mode):
                why = "not_regular"
            if why is not None:
                st.skipped.append({"path": rel, "reason": why})
                continue
            if rel_dir == SESSIONS_DIR:
                _stage_file(root, dest, st, rel_dir, rel, transcript=True)
            else:
                later.append((rel_dir, rel))
    # (transcripts first, see the module docstring; the rest in name order)
    later.sort(key=lambda t: t[1])
    for rel_dir, rel in later:
        _stage_file(root, dest, st, rel_dir, rel, transcript=False)
    return st


def _stage_file(root: Path, dest: Path, st: _Staged, rel_dir: str, rel: str, *,
                transcript: bool) -> None:
    """The store's file ``rel`` copied to ``dest`` (a transcript up to its
    last complete record) and named in ``st.files``, or in ``st.skipped``
    as unreadable."""
    opened = _open_regular(root / rel)
    if opened is None:
        st.skipped.append({"path": rel, "reason": "unreadable"})
        return
    fd, fst = opened
    try:
        if rel_dir and not (dest / rel_dir).exists():
            os.mkdir(dest / rel_dir, 0o700)
        _copy_out(fd, fst.st_size, dest / rel, whole_records=transcript)
    except OSError:
        # a read error: leave nothing of it in the copy the manifest describes
        try:
            os.unlink(dest / rel)
        except FileNotFoundError:
            pass
        st.skipped.append({"path": rel, "reason": "unreadable"})
        return
    finally:
        os.close(fd)
    st.files.append(rel)


# --------------------------------------------------------------------------
# The audit both sides compute (same code as `validate` and `facts`)


class _HoldFailed(StoreWriteError):
    """A write of the held rows' temporary file failed (exit 7): the
    export fails, it is not the bundled database's error."""


class HeldFactRows:
    """The fact rows of an audit (:data:`FACT_FIELDS`), each held as its
    canonical bytes (:func:`canonical`; or as ``encode`` gives them: verify's
    check rows), one per line, in an unnamed temporary file in ``parent``,
    a private directory outside the store (``held.HeldRows``, strict: a
    file that fails is exit 7, not rows kept in memory); in memory, as
    bytes, without one.  So that memory does not follow the number of
    facts: 100,000 rows as dicts were 100 MB, and ``export`` held them
    twice more as the manifest's bytes.  Iterating gives the rows again as
    dicts, in order, as often as asked."""

    def __init__(self, parent: str | os.PathLike[str] | None,
                 encode: Callable[[Any], bytes] = canonical) -> None:
        from .held import HeldRows, Spill

        self._encode = encode
        self.count = 0
        self._rows = HeldRows(CHUNK if parent is not None else sys.maxsize, b"\n",
                              Spill(lambda: parent, strict=_hold_failed), own=True)

    def add(self, row: dict[str, Any]) -> None:
        self._rows.add(self._encode(row))
        self.count += 1

    def add_lines(self, piece: bytes) -> None:
        """Rows already encoded, each followed by a newline (``encode``'s
        bytes never hold one: JSON escapes it)."""
        self._rows.add(piece[:-1])
        self.count += piece.count(b"\n")

    def _pieces(self) -> Iterator[bytes]:
        """The rows' bytes, a MiB or so at a time (a piece may cut a row)."""
        try:
            yield from self._rows.pieces()
        except OSError as exc:
            raise _HoldFailed(f"cannot read the fact rows back from their temporary "
                              f"file: {exc.strerror}") from None

    def joined(self) -> Iterator[bytes]:
        """The rows' bytes joined by commas: a JSON array's inside."""
        for piece in self._pieces():
            yield piece.replace(b"\n", b",")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        rest = b""
        for piece in self._pieces():
            lines = (rest + piece).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield orjson.loads(line)
        if rest:
            yield orjson.loads(rest)

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        self._rows.close()


def _hold_failed(exc: OSError) -> _HoldFailed:
    return _HoldFailed(f"cannot hold the fact rows in a temporary file: {exc.strerror}")


class HeldFindings:
    """The findings of an audit, each held as its canonical bytes (of
    their own size: ``held_canonical``), sorted: a manifest's
    ``findings_list`` (and, in the same way, its ``files``, in path
    order).  Iterating gives them again as dicts; ``joined()`` the inside
    of their JSON array, a piece at a time."""

    def __init__(self, items: list[bytes]) -> None:
        self.items = items

    def joined(self) -> Iterator[bytes]:
        for i in range(0, len(self.items), 4096):
            piece = b",".join(self.items[i:i + 4096])
            yield piece if i == 0 else b"," + piece

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for item in self.items:
            yield orjson.loads(item)

    def __len__(self) -> int:
        return len(self.items)


def audit_store(path: Path, slug: str, rows_in: str | os.PathLike[str] | None = None, *,
                parallel: bool = False, frozen: bool = True) -> dict[str, Any]:
    """``validate`` (deep, no config file) and ``facts`` over the store at
    ``path`` with slug ``slug``: ``{"validate": {...}, "facts": {...}}``,
    without anything that depends on where or when it ran.  The facts' rows
    are a :class:`HeldFactRows`, its file in ``rows_in`` (a private
    directory outside the store) when given.  ``parallel``: the audit and
    the listing may fork, as ``memctl validate`` and ``memctl facts`` do
    (a pool of workers for the transcripts; two processes for the facts of
    a large store); the same result.  Off by default, as for
    ``validate_store``: a process with threads is not safe to fork.
    ``frozen``: the audit of a frozen copy (below); off only to verify a
    bundle exported before that rule (:func:`_made_before_frozen`)."""
    import sqlite3

    from .audit import Audit
    from .facts import FactStore, _db_error as db_error
    from .factview import iter_fact_lines
    from .sessions import SessionStore

    store = Store(path, slug, None, "option", "the bundle manifest")
    # (validate_store's audit, each finding held only as its canonical bytes;
    # of a frozen copy: no finding depends on a file's modification time or
    # the clock, so export and verify, of the archive or of the directory tar
    # -x gives at any time after, judge the same bytes alike)
    audit = Audit(store, deep=True, parallel=parallel, frozen=frozen)
    held: list[bytes] = []
    for f in audit.run():
        doc = f.to_json()
        doc["message"] = _strip_path(doc["message"], path)
        held.append(held_canonical(doc))
    held.sort()
    summary = {k: v for k, v in audit.summary.to_json().items() if k not in _RUN_FIELDS}
    summary["findings_list"] = HeldFindings(held)
    rows = HeldFactRows(rows_in)
    facts: dict[str, Any] = {"rows": rows, "error": None}
    try:
        fs = FactStore.open_readonly(store.facts_db)
        try:
            if fs.exists:
                sessions = SessionStore(store, exclusions=fs)
                # (each row encoded where it is made: a child's part of a
                # split listing is added as the bytes it wrote)
                for piece in iter_fact_lines(
                        fs, sessions, lambda row: canonical({k: row[k] for k in FACT_FIELDS})
                        + b"\n", parallel=parallel, record=False):
                    rows.add_lines(piece)
        finally:
            fs.close()
    except _HoldFailed:
        rows.close()
        raise
    except (MemctlError, sqlite3.Error) as exc:
        # (an error of SQLite's that a read let through: classified as every
        # other one of the fact store's, so the bundle records it as a
        # database that cannot be opened, not an export that stops at it)
        err = exc if isinstance(exc, MemctlError) else db_error(store.facts_db, exc)
        code = getattr(err, "code", StoreCorrupt.code)
        rows.close()
        facts = {"rows": HeldFactRows(None),
                 "error": {"code": code, "message": _strip_path(str(err), path)}}
    return {"validate": summary, "facts": facts}


def _strip_path(message: str, path: Path) -> str:
    """Some messages name a file by its absolute path (a database that cannot be
    opened); where the copy was unpacked is not data: make it relative."""
    return message.replace(os.fspath(path) + os.sep, "").replace(os.fspath(path), ".")


# --------------------------------------------------------------------------
# Export


@record
class ExportResult:
    output: str | None                # the file written, None for a stream
    compression: str | None           # "gzip" or None
    manifest: dict[str, Any]          # its facts' rows: a HeldFactRows
    manifest_sha256: str              # sha256 of manifest.json's bytes
    files: int
    bytes: int                        # archive bytes written

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {"output": self.output, "compression": self.compression,
                "manifest_sha256": self.manifest_sha256, "files": self.files,
                "bytes": self.bytes, "exported": m["exported"], "project": m["project"],
                "skipped": m["skipped"], "database": m["database"],
                "validate": {k: v for k, v in m["validate"].items() if k != "findings_list"},
                "facts": self.fact_rows(), "facts_error": m["facts"]["error"]}

    def fact_rows(self) -> Iterator[dict[str, Any]]:
        """The manifest's fact rows, read back from the file that holds them,
        each with its keys in the listing's order (``FACT_FIELDS``; the
        manifest's bytes have them sorted)."""
        for row in self.manifest["facts"]["rows"]:
            out = {k: row[k] for k in FACT_FIELDS if k in row}
            ref = out.get("source_ref")
            if isinstance(ref, dict) and ref.keys() == set(_REF_KEYS):
                out["source_ref"] = {k: ref[k] for k in _REF_KEYS}
            yield out

    def close(self) -> None:
        """Let go the file that holds the fact rows (its descriptor and space)."""
        self.manifest["facts"]["rows"].close()


def compression_for(name: str) -> str | None:
    """gzip for ``*.tar.gz``/``*.tgz``; none otherwise."""
    low = name.lower()
    return "gzip" if low.endswith((".tar.gz", ".tgz", ".gz")) else None


def build_manifest(store: Store, staged: _Staged, stage_dir: Path, *, with_backups: bool,
                   now: float, parallel: bool = False) -> dict[str, Any]:
    from lecode_memctl import __version__

    # (each entry held as its canonical bytes, about 180 bytes a file, not a
    # dict of three objects, about 400, then encoded again with the rest)
    files = []
    for rel in sorted(staged.files):
        size, digest = _sha256_file(stage_dir / rel)
        files.append(held_canonical({"path": f"{STORE_DIR}/{rel}", "size": size,
                                     "sha256": digest}))
    ident = store.identity
    doc: dict[str, Any] = {
        "format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "memctl_version": __version__,
        "exported": _iso_now(now),
        "project": {"slug": store.slug, "slug_source": store.slug_source,
                    "root": str(ident.root) if ident else None,
                    "kind": ident.kind if ident else None, "store": str(store.path)},
        "with_backups": with_backups,
        "database": staged.database,
        "files": HeldFindings(files),
        "skipped": sorted(staged.skipped, key=lambda s: s["path"]),
        **audit_store(stage_dir, store.slug, rows_in=stage_dir.parent, parallel=parallel),
    }
    h = hashlib.sha256()
    try:
        for piece in manifest_bytes(doc):
            h.update(piece)
    except BaseException:
        doc["facts"]["rows"].close()    # (a read back that failed: exit 7)
        raise
    doc["digest"] = h.hexdigest()
    return doc


def manifest_bytes(doc: dict[str, Any]) -> Iterator[bytes]:
    """``canonical(doc)`` in pieces, its fact rows (a :class:`HeldFactRows`)
    read back from their file as the pieces come, and its findings (a
    :class:`HeldFindings`) from their bytes: the manifest's bytes, never all
    in memory.  The rest of the document is encoded once with a random
    text where each of them goes, cut there."""
    held: list[tuple[str | None, str, Any]] = [("facts", "rows", doc["facts"]["rows"])]
    found = (doc.get("validate") or {}).get("findings_list")
    if isinstance(found, HeldFindings):
        held.append(("validate", "findings_list", found))
    if isinstance(doc.get("files"), HeldFindings):
        held.append((None, "files", doc["files"]))
    while True:
        marks = {f"memctl-held-{os.urandom(16).hex()}": part for part in held}
        shown = dict(doc)
        for mark, (outer, key, _) in marks.items():
            if outer is None:
                shown[key] = mark
            else:
                shown[outer] = {**shown[outer], key: mark}
        data = canonical(shown)
        quoted = [b'"' + mark.encode() + b'"' for mark in marks]
        if all(data.count(q) == 1 for q in quoted):     # (nothing else holds one: random)
            break
    # (in the order the document holds them: its keys sorted)
    cuts = sorted((data.index(q), q, part[2]) for q, part in zip(quoted, marks.values(),
                                                                   strict=True))
    at = 0
    for where, q, part in cuts:
        yield data[at:where] + b"["
        yield from part.joined()
        yield b"]"
        at = where + len(q)
    yield data[at:]


def write_manifest(doc: dict[str, Any], path: Path) -> tuple[int, str]:
    """manifest.json's bytes (:func:`manifest_bytes`, then a newline) into
    the new file ``path`` (in the private staging directory): (size, sha256)."""
    h = hashlib.sha256()
    n = 0
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as exc:
        raise StoreWriteError(f"cannot write the manifest in a temporary directory: "
                              f"{exc.strerror}") from None
    try:
        for piece in itertools.chain(manifest_bytes(doc), (b"\n",)):
            h.update(piece)
            n += len(piece)
            try:
                write_all(fd, piece)
            except OSError as exc:
                raise StoreWriteError(f"cannot write the manifest in a temporary directory: "
                                      f"{exc.strerror}") from None
    finally:
        os.close(fd)
    return n, h.hexdigest()


class _Counting(io.RawIOBase):
    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.n = 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self.out.write(data)
        self.n += len(data)
        return len(data)


def _tarinfo(name: str, size: int, mtime: int, *, directory: bool = False) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mode = 0o700 if directory else 0o600
    ti.mtime = mtime
    ti.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def write_bundle(out: IO[bytes], stage_dir: Path, manifest: dict[str, Any],
                 compression: str | None) -> tuple[str, int]:
    """The archive: manifest.json, then every file in manifest order, each
    directory (mode 0700, so that ``tar -x`` gives the store its modes) just
    before its first file.  The manifest's bytes are written first to
    ``manifest.json`` beside ``stage_dir`` (:func:`write_manifest`), and
    copied from there.  Returns (sha256 of the manifest's bytes, archive
    bytes written)."""
    manifest_path = stage_dir.parent / MANIFEST
    size, digest = write_manifest(manifest, manifest_path)
    counter = _Counting(out)
    mtime = int(datetime.strptime(manifest["exported"][:19], "%Y-%m-%dT%H:%M:%S")
                .replace(tzinfo=UTC).timestamp())
    mode = "w|gz" if compression == "gzip" else "w|"
    # typeshed's overloads want a literal mode and an IO[bytes], not a RawIOBase
    with tarfile.open(fileobj=counter, mode=mode, format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
                      encoding="utf-8") as tf:
        with open(manifest_path, "rb") as fh:
            tf.addfile(_tarinfo(MANIFEST, size, mtime), fh)
        tf.addfile(_tarinfo(STORE_DIR + "/", 0, mtime, directory=True))
        dirs = {STORE_DIR}
        for entry in manifest["files"]:
            rel = entry["path"][len(STORE_DIR) + 1:]
            parent = entry["path"].rpartition("/")[0]
            if parent not in dirs:
                dirs.add(parent)
                tf.addfile(_tarinfo(parent + "/", 0, mtime, directory=True))
            with open(stage_dir / rel, "rb") as fh:
                tf.addfile(_tarinfo(entry["path"], entry["size"], mtime), fh)
            # (tarfile keeps every TarInfo it wrote, about 0.5 KiB a file,
            # for reading back: nothing here reads back)
            tf.members.clear()
    return digest, counter.n


def export_bundle(store: Store, out: IO[bytes], *, compression: str | None = None,
                  with_backups: bool = False, now: float | None = None,
                  lock_wait: float | None = None, parallel: bool = False) -> ExportResult:
    """Write a bundle of ``store`` to the binary stream ``out``.  Reads the store only.
    ``lock_wait``: seconds to wait for a stable snapshot of the facts database
    (default the 5 s busy timeout).  ``parallel``: see :func:`audit_store`
    (the bundle is the same; nothing is written to ``out`` before the audit
    ends, so a forked worker has nothing of it to write again)."""
    store.require()
    with fenced(store.path):    # (nor the staged copy's snapshot: fenced out of the store too)
        return _export(store, out, compression, with_backups, now, lock_wait, parallel)


def _export(store: Store, out: IO[bytes], compression: str | None, with_backups: bool,
            now: float | None, lock_wait: float | None, parallel: bool) -> ExportResult:
    tmp = Path(owned_tempdir("export", store.path))  # never inside the store
    try:
        os.chmod(tmp, 0o700)
        stage_dir = tmp / STORE_DIR
        staged = _stage(store, stage_dir, with_backups, lock_wait)
        manifest = build_manifest(store, staged, stage_dir, with_backups=with_backups,
                                  now=time.time() if now is None else now, parallel=parallel)
        try:
            digest, n = write_bundle(out, stage_dir, manifest, compression)
        except BaseException:
            manifest["facts"]["rows"].close()
            raise
        return ExportResult(None, compression, manifest, digest, len(manifest["files"]), n)
    finally:
        remove_private(tmp)     # (whole, even when an interrupt comes meanwhile)


def export_to_file(store: Store, output: str | os.PathLike[str], *,
                   with_backups: bool = False, now: float | None = None,
                   lock_wait: float | None = None, parallel: bool = False) -> ExportResult:
    """Write a bundle to a new file ``output`` (never inside the store; an
    existing file is a conflict).  Written to a temporary file beside it, then
    linked into place, so that a failed export leaves nothing behind."""
    target = Path(os.path.abspath(os.fspath(output)))
    store.require()
    refuse_inside(target, [(store.path, "the store being exported")], command="export")
    if os.path.lexists(target):
        raise Conflict(f"{target}: already exists; not overwritten")
    if not os.path.isdir(target.parent):
        # (as the --output of validate and secrets: the file cannot be
        # written, exit 7; the directory is never made)
        raise StoreWriteError(f"{target}: cannot write: no such directory {target.parent}")
    from .atomic import fsync_dir, open_new_temp, temp_name

    tmp = temp_name(target)
    try:
        fd = open_new_temp(tmp)
    except OSError as exc:
        raise StoreWriteError(f"{target}: cannot create: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            res = export_bundle(store, fh, compression=compression_for(target.name),
                                with_backups=with_backups, now=now, lock_wait=lock_wait,
                                parallel=parallel)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise Conflict(f"{target}: appeared meanwhile; not overwritten") from None
        except OSError as exc:
            raise StoreWriteError(f"{target}: cannot create: {exc.strerror}") from None
        fsync_dir(target.parent)
    except OSError as exc:
        raise StoreWriteError(f"{target}: cannot write: {exc.strerror}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    res.output = str(target)
    return res


# --------------------------------------------------------------------------
# Verify


@record(frozen=True)
class Problem:
    kind: str          # archive, manifest, changed, missing, added, refused, order, duplicate,
    path: str | None   # validate, facts
    detail: str

    def to_json(self) -> dict[str, Any]:
        from .rowmodel import PROBLEM

        return PROBLEM.row(kind=self.kind, path=self.path, detail=self.detail)


@record
class VerifyReport:
    bundle: str
    kind: str                               # "archive" or "directory"
    compression: str | None = None
    manifest: dict[str, Any] | None = None
    manifest_sha256: str | None = None
    problems: list[Problem] = field(default_factory=list)
    files_checked: int = 0
    audit: dict[str, Any] | None = None     # recomputed {"validate", "facts"}
    facts: Any = field(default_factory=list)   # fact_check rows (a HeldFactRows once audited)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, kind: str, path: str | None, detail: str) -> None:
        # (a name or a detail of more than SHOWN_MAX characters: cut, :func:`_cut`)
        self.problems.append(Problem(kind, None if path is None else _cut(path), _cut(detail)))

    def close(self) -> None:
        """Let go the files that hold the fact rows (the manifest's, the checks')."""
        facts = _of_type((self.manifest or {}).get("facts"), dict, {})
        found = _of_type((self.manifest or {}).get("validate"), dict, {})
        for held in (facts.get("rows"), found.get("findings_list"), self.facts,
                     ((self.audit or {}).get("facts") or {}).get("rows")):
            if isinstance(held, ManifestRows | HeldFactRows):
                held.close()

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("changed", "missing", "added", "refused")}
        for p in self.problems:
            if p.kind in out:
                out[p.kind] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        m = self.manifest or {}
        validate = (self.audit or {}).get("validate")
        return {
            "ok": self.ok, "exit_code": 0 if self.ok else 1, "bundle": self.bundle,
            "kind": self.kind, "compression": self.compression,
            "manifest_sha256": self.manifest_sha256,
            "manifest": {k: m.get(k) for k in ("format", "version", "memctl_version", "exported",
                                              "project", "with_backups", "database")}
            if self.manifest is not None else None,
            "files": {"checked": self.files_checked, **self.counts()},
            "problems": [p.to_json() for p in self.problems],
            "validate": {k: v for k, v in validate.items() if k != "findings_list"}
            if validate is not None else None,
            # (a generator: the recomputed findings, each made a row as it is
            # written; none when no audit ran, "validate" null says so)
            "findings": (FINDING.row(**f) for f in (validate or {}).get("findings_list") or []),
            "facts": self.facts,
        }


# The characters of a name (or a detail) a problem shows: a longer one is
# cut, its length in bytes and its SHA-256 after it (600 member names of a
# million characters were each held in the report and printed whole).
SHOWN_MAX = 4096
# The bytes a member's name may have: PATH_MAX, the longest path a file
# system takes (a longer one cannot be unpacked anywhere; export writes none).
NAME_MAX_BYTES = 4096
# What an archive's headers (everything tarfile reads that is not a
# member's data: the 512-byte headers, pax headers, GNU long names) may
# total: this, plus HEADERS_PER_FILE for each file the manifest lists (export
# writes at most 1.5 KiB for a file, a pax header of its name included, and
# 512 bytes for each of the four directories).  The members' names are kept
# until the comparison: their bytes are bounded so.
HEADERS_CAP = 64 << 20
HEADERS_PER_FILE = 4 << 10
# ... and never more than this, however many files a crafted manifest lists
# (a gzip makes a manifest of millions of entries a few hundred KB)
HEADERS_MAX = 256 << 20


def _cut(text: str) -> str:
    """``text`` as a problem shows it: at most :data:`SHOWN_MAX` characters
    of it, then, when it is longer, ``... (N bytes, sha256 HEX)`` of its
    UTF-8 bytes."""
    if len(text) <= SHOWN_MAX:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    return f"{text[:SHOWN_MAX]}... ({len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()})"


_SAFE_PART = lazy_compile(r"^[^\x00/]+\Z")


def _member_problem(name: str) -> str | None:
    """Why a member name may not be written below the target, or None."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return "absolute or malformed path"
    parts = name.split("/")
    if parts and parts[-1] == "":
        parts = parts[:-1]       # a directory member "store/"
    for part in parts:
        if part in ("", ".", ".."):
            return "'..', '.' or an empty component in the path"
        if not _SAFE_PART.match(part):
            return "malformed path"
    return None


def _kind_name(ti: tarfile.TarInfo) -> str:
    if ti.issym():
        return "symbolic link"
    if ti.islnk():
        return "hard link"
    if ti.ischr() or ti.isblk():
        return "device"
    if ti.isfifo():
        return "FIFO"
    if ti.isdir():
        return "directory"
    return f"member type {ti.type!r}"


class _NotStreamed(Exception):
    """The manifest is not in the form :func:`_rows_at` reads without
    holding it (not as export writes it): it is read whole, as before."""


_TRIES = 64     # the ends _rows_at tries for one element


def _read_at(fd: int, at: int, size: int) -> bytes:
    """``size`` bytes of ``fd`` at ``at`` (fewer only at its end)."""
    parts = []
    while size > 0:
        piece = os.pread(fd, min(size, CHUNK), at)
        if not piece:
            break
        parts.append(piece)
        at += len(piece)
        size -= len(piece)
    return b"".join(parts)


def _key_at(fd: int, size: int, key: bytes, at: int = 0) -> int | None:
    """Where the first ``key`` of the file from ``at`` starts (None: nowhere)."""
    while at < size:
        window = _read_at(fd, at, CHUNK + len(key))
        i = window.find(key)
        if i >= 0:
            return at + i
        at += CHUNK
    return None


def _rows_at(fd: int, start: int, size: int) -> Generator[tuple[bytes, Any], None, int]:
    """The elements of the JSON array whose first element would start at
    ``start`` in ``fd`` (just after its ``[``), each as (its bytes, its
    value), read a MiB at a time; the generator's value at the end is the
    offset of the array's ``]``.  Every element must be an object, and the
    elements be separated by a comma alone (as ``canonical`` writes them);
    anything else is :class:`_NotStreamed`.  An element ends at the first
    ``},{`` or ``}]`` where the bytes from its ``{`` are one JSON object: a
    parser reading the whole text ends it there too (bytes that end
    earlier are no whole value: a ``}`` inside a string, or an inner
    object's).  Such bytes fail to parse only at their end; bytes that fail
    before it are no JSON whatever follows (a damaged manifest), and an
    element that ends at none of its first ``_TRIES`` candidates, or
    holds more than ``MANIFEST_MAX_BYTES``, is no row export writes: both
    :class:`_NotStreamed` at once (trying every later candidate made a
    damaged manifest of 20,000 rows take 22 s, not 0.2)."""
    buf, base, pos = b"", start, 0      # buf: the file's bytes from base

    def more() -> bool:
        nonlocal buf
        if base + len(buf) >= size or len(buf) - pos > MANIFEST_MAX_BYTES:
            return False
        # (reads that grow with the element: a long one is copied a few times, not once a MiB)
        piece = _read_at(fd, base + len(buf), max(CHUNK, len(buf) - pos))
        buf += piece
        return bool(piece)

    while pos >= len(buf):
        if not more():
            raise _NotStreamed
    if buf[pos] == 0x5D:        # "]": no element
        return base + pos
    while True:
        if pos > CHUNK:
            buf, base, pos = buf[pos:], base + pos, 0
        while pos >= len(buf):
            if not more():
                raise _NotStreamed
        if buf[pos] != 0x7B:    # "{"
            raise _NotStreamed
        search, tries = pos, 0
        while True:
            j = buf.find(b"},{", search)
            # (the "}]" before it: searched no further, or each element would
            # search the rest of the buffer)
            last = buf.find(b"}]", search, len(buf) if j < 0 else j)
            if last >= 0:
                j = last
            elif j < 0:
                held = len(buf)
                if not more():
                    raise _NotStreamed
                search = max(pos, held - 2)     # (an end cut by the read)
                continue
            try:
                value = orjson.loads(buf[pos:j + 1])
            except orjson.JSONDecodeError as exc:
                tries += 1
                if tries >= _TRIES or not _ends_early(buf[pos:j + 1], exc.pos):
                    raise _NotStreamed from None
                search = j + 1
                continue
            if not isinstance(value, dict):     # (cannot be: it starts with "{")
                raise _NotStreamed
            break
        yield buf[pos:j + 1], value
        if buf[j + 1] == 0x5D:
            return base + j + 1
        pos = j + 2


def _array_end(fd: int, start: int, size: int) -> tuple[int, int]:
    """:func:`_rows_at` read to its end: (the offset of the array's ``]``,
    its number of elements)."""
    count = 0
    elements = _rows_at(fd, start, size)
    while True:
        try:
            next(elements)
        except StopIteration as stop:
            return stop.value, count
        count += 1


def _ends_early(text: bytes, at: int) -> bool:
    """Whether orjson's error at ``at`` parsing ``text`` is its end (the
    bytes are a whole value's beginning): ``at`` counts characters, not
    bytes."""
    if at >= len(text):
        return True
    try:
        return at >= len(text.decode("utf-8"))
    except UnicodeDecodeError:
        return False


class ManifestRows:
    """The fact rows of a manifest that :func:`_parse_manifest_file` read
    without holding them: iterating reads them again from the file, in
    order, as dicts (the file's descriptor is held, so the rows can still
    be read once a private copy of it is removed)."""

    def __init__(self, fh: IO[bytes], start: int, size: int, count: int) -> None:
        self._fh = fh
        self._start = start
        self._size = size
        self.count = count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        rows = _rows_at(self._fh.fileno(), self._start, self._size)
        for _, value in rows:
            yield value

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        self._fh.close()


def _parse_manifest_file(path: Path, rep: VerifyReport) -> dict[str, Any] | None:
    """:func:`_parse_manifest` of the file at ``path``, without holding its
    fact rows where it is as export writes it (:func:`_rows_at`): the rest
    of the document is read with a random text in their place, and
    :class:`ManifestRows` reads them again when asked.  Its digest and
    canonical form are checked as the rows are read, one at a time.  A
    manifest in any other form is read whole (at most
    ``MANIFEST_MAX_BYTES``), as before; so is the rest of the document
    (the findings, say) beside the rows."""
    fh = os.fdopen(open_nofollow(path), "rb")
    keep = False
    try:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        sha = _hash_stream(fh)[1]       # (the reads below are at offsets: pread)
        try:
            doc = _streamed_manifest(fh, size, rep, sha)
            keep = doc is not None
            return doc
        except _NotStreamed:
            pass
        if size > MANIFEST_MAX_BYTES:
            rep.manifest_sha256 = sha
            rep.add("manifest", MANIFEST, f"{size} bytes: too large")
            return None
        return _parse_manifest(_read_at(fd, 0, size), rep)
    finally:
        if not keep:
            fh.close()


# The arrays of a manifest read one element at a time (each found by its key,
# in the document's order: its keys sorted): its fact rows, then its findings.
_CUTS = ((b'"rows":[', ("facts", "rows")), (b'"findings_list":[', ("validate", "findings_list")))


def _streamed_manifest(fh: IO[bytes], size: int, rep: VerifyReport, sha: str
                       ) -> dict[str, Any] | None:
    """:func:`_parse_manifest_file`'s reading of a manifest as export
    writes it: its fact rows, and its findings where they too are as
    export writes them, read one at a time, three times (to find their
    end; to check their canonical bytes and hash them, since the digest's
    text begins with what comes before them, known only once the rest of
    the document is read; then by the comparison)."""
    fd = fh.fileno()
    cuts: list[tuple[int, int, int, tuple[str, str]]] = []     # (start, end, count, where)
    at = 0
    for key, where in _CUTS:
        k = _key_at(fd, size, key, at)
        if k is None:
            if not cuts:
                raise _NotStreamed
            break
        start = k + len(key)
        try:
            end, count = _array_end(fd, start, size)
        except _NotStreamed:
            if not cuts:
                raise
            break                       # (the findings, then, parsed with the rest)
        cuts.append((start, end, count, where))
        at = end + 1
    try:
        return _read_cut(fh, size, rep, sha, cuts)
    except _NotStreamed:
        if len(cuts) == 1:
            raise
        return _read_cut(fh, size, rep, sha, cuts[:1])


def _read_cut(fh: IO[bytes], size: int, rep: VerifyReport, sha: str,
              cuts: list[tuple[int, int, int, tuple[str, str]]]) -> dict[str, Any] | None:
    """The manifest parsed with a random text in place of each array of
    ``cuts``, those read one element at a time (:class:`_NotStreamed`:
    the texts are not where the cuts said)."""
    fd = fh.fileno()
    bounds = [0] + [b for start, end, _, _ in cuts for b in (start - 1, end + 1)] + [size]
    if sum(bounds[i + 1] - bounds[i] for i in range(0, len(bounds), 2)) > MANIFEST_MAX_BYTES:
        raise _NotStreamed
    segments = [_read_at(fd, bounds[i], bounds[i + 1] - bounds[i])
                for i in range(0, len(bounds), 2)]
    while True:
        marks = [f"memctl-held-{os.urandom(16).hex()}" for _ in cuts]
        quoted = [b'"' + m.encode() + b'"' for m in marks]
        if not any(q in seg for q in quoted for seg in segments):
            break
    text = segments[0] + b"".join(q + seg for q, seg in zip(quoted, segments[1:], strict=True))
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise _NotStreamed from None
    for mark, (_, _, _, (outer, key)) in zip(marks, cuts, strict=True):
        inner = doc.get(outer) if isinstance(doc, dict) else None
        if not isinstance(inner, dict) or inner.get(key) != mark:
            raise _NotStreamed
    rep.manifest_sha256 = sha
    if not _manifest_version_ok(doc, rep):
        return None
    body = canonical({k: v for k, v in doc.items() if k != "digest"})
    hashed = hashlib.sha256()
    canon = True
    for q, (start, _, _, _) in zip(quoted, cuts, strict=True):
        before, _, body = body.partition(q)
        hashed.update(before + b"[")
        for i, (raw, value) in enumerate(_rows_at(fd, start, size)):
            c = canonical(value)
            canon = canon and c == raw
            hashed.update(b"," + c if i else c)
        hashed.update(b"]")
    hashed.update(body)
    whole = canonical(doc)
    pieces = []
    for q in quoted:
        before, _, whole = whole.partition(q)
        pieces.append(before)
    pieces.append(whole + b"\n")
    if doc.get("digest") != hashed.hexdigest():
        rep.add("manifest", MANIFEST, "changed: its digest does not match its content")
    elif not (canon and pieces == segments):
        rep.add("manifest", MANIFEST, "changed: not in its canonical byte form")
    if not _manifest_shape_ok(doc, rep):
        return None
    for start, _, count, (outer, key) in cuts:
        doc[outer][key] = ManifestRows(fh, start, size, count)
    rep.manifest = doc
    return rep.manifest


def _manifest_version_ok(doc: dict[str, Any], rep: VerifyReport) -> bool:
    """Whether the manifest is one of this format and version (else a problem)."""
    if doc.get("format") != BUNDLE_FORMAT:
        rep.add("manifest", MANIFEST, f"not a {BUNDLE_FORMAT} manifest")
        return False
    version = doc.get("version")
    if type(version) is not int or version != BUNDLE_VERSION:    # (not true, not 1.0)
        rep.add("manifest", MANIFEST, f"bundle format version {doc.get('version')!r}; this "
                f"memctl reads version {BUNDLE_VERSION}")
        return False
    return True


def _manifest_shape_ok(doc: dict[str, Any], rep: VerifyReport) -> bool:
    """Whether the manifest has the files and project verify reads (else a problem)."""
    files = doc.get("files")
    project = doc.get("project")
    if (not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("path"), str)
            and type(f.get("size")) is int and isinstance(f.get("sha256"), str)   # (not true)
            for f in files)
            or not isinstance(project, dict) or not isinstance(project.get("slug"), str)):
        rep.add("manifest", MANIFEST, "malformed: files or project missing")
        return False
    return True


def _parse_manifest(data: bytes, rep: VerifyReport) -> dict[str, Any] | None:
    rep.manifest_sha256 = hashlib.sha256(data).hexdigest()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        rep.add("manifest", MANIFEST, f"not valid JSON ({exc}); nothing can be compared")
        return None
    if not isinstance(doc, dict):
        rep.add("manifest", MANIFEST, f"not a {BUNDLE_FORMAT} manifest")
        return None
    if not _manifest_version_ok(doc, rep):
        return None
    body = {k: v for k, v in doc.items() if k != "digest"}
    if doc.get("digest") != hashlib.sha256(canonical(body)).hexdigest():
        rep.add("manifest", MANIFEST, "changed: its digest does not match its content")
    elif canonical(doc) + b"\n" != data:
        rep.add("manifest", MANIFEST, "changed: not in its canonical byte form")
    if not _manifest_shape_ok(doc, rep):
        return None
    rep.manifest = doc
    return doc


class _Refused(Exception):
    pass


class _Unpacker:
    """Writes regular members below ``root`` only (a fresh private directory
    that nothing else writes to: every path was checked by ``_member_problem``,
    and nothing here creates a link)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, src: IO[bytes]) -> tuple[int, str]:
        parts = name.split("/")
        d = self.root
        try:
            for part in parts[:-1]:
                d = d / part
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:
                    if not stat.S_ISDIR(os.lstat(d).st_mode):
                        raise _Refused("a file is in the way; not unpacked") from None
            fd = open_nofollow(d / parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            raise _Refused("a directory or file is in the way; not unpacked") from None
        except OSError as exc:
            raise _Refused(f"cannot unpack: {exc.strerror}") from None
        h = hashlib.sha256()
        n = 0
        try:
            # read errors: the archive's (callers report them)
            for chunk in _pump(src.read, fd, f"cannot unpack {name} into a temporary directory"):
                h.update(chunk)
                n += len(chunk)
        finally:
            os.close(fd)
        return n, h.hexdigest()


def _hash_stream(src: IO[bytes]) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return n, h.hexdigest()
        h.update(chunk)
        n += len(chunk)


class _HeaderTooLarge(Exception):
    """A read of more than :data:`READ_CAP` bytes asked of the archive."""

    def __init__(self, n: int | None) -> None:
        super().__init__(n)
        self.n = n


# The largest read verify lets tarfile ask of the archive: a member's data is
# read CHUNK bytes at a time (at most this), but tarfile reads a pax extended
# header ('x', 'g') or a GNU long name or link ('L', 'K') whole, in one read
# of the size its header declares: 1 GiB of them was 1 GiB of memory.
READ_CAP = CHUNK


class _Capped:
    """The archive's file object as tarfile gets it: ``read(n)`` of more than
    :data:`READ_CAP` bytes (or of all) raises :class:`_HeaderTooLarge`
    before reading anything; ``seek`` and ``tell`` are the file's."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0 or n > READ_CAP:
            raise _HeaderTooLarge(n)
        return self._f.read(n)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()


def _too_large(exc: _HeaderTooLarge) -> str:
    size = "all of the rest" if exc.n is None or exc.n < 0 else f"{exc.n} bytes"
    return (f"a header of {size} (a pax header or a GNU long name), more than the "
            f"{READ_CAP} bytes verify reads at once; not read")


class _RawTarInfo(tarfile.TarInfo):
    """A TarInfo that keeps the 512 bytes of its own header (``raw``): after
    a pax extended header or a GNU long name, the member's, not the
    extension's (tarfile makes the member's TarInfo from its own block)."""

    raw = b""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> _RawTarInfo:
        obj = super().frombuf(buf, encoding, errors)
        obj.raw = bytes(buf)
        return obj


# A POSIX ustar header's magic (export writes only these, the pax headers
# too, with an empty prefix field; GNU tar takes the prefix by these 6 bytes
# alone, whatever the version field after them holds).
_USTAR_MAGIC = b"ustar\x00"
_PREFIX = slice(345, 500)


def _prefix_problem(ti: tarfile.TarInfo) -> str | None:
    """Why a member's own header may make ``tar -x`` unpack it under
    another name than tarfile gives, or None: a prefix field (bytes
    345-500) in a header that is not POSIX ustar (magic ``ustar\\0``,
    whatever the version).  tarfile joins the prefix to the name whatever the
    magic says; GNU tar only in a POSIX ustar header (in a GNU or V7
    header those bytes are something else), and unpacks the name field
    alone."""
    raw = getattr(ti, "raw", b"")
    if len(raw) != tarfile.BLOCKSIZE or raw[257:263] == _USTAR_MAGIC:
        return None
    prefix = raw[_PREFIX].split(b"\0", 1)[0]
    if not prefix or ti.type in tarfile.GNU_TYPES:     # (tarfile joins none there)
        return None
    magic = "GNU" if raw[257:265] == b"ustar  \0" else (
        "V7" if not raw[257:265].strip(b"\0") else "unknown")
    alone = _shown(os.fsdecode(raw[:100].split(b"\0", 1)[0]))
    return (f"a prefix field in a header that is not POSIX ustar ({magic} magic): tar -x "
            f"ignores it and unpacks the member as {alone}; not unpacked")


# What reading an archive's bytes raises when they are cut short or corrupt;
# and on a header it cannot read, ValueError too, for a GNU sparse map that
# is not numbers or is cut short (it was exit 70).
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error)
_HEADER_ERRORS = (*_READ_ERRORS, ValueError)


def _read_archive(path: Path, root: Path, rep: VerifyReport) -> dict[str, tuple[int, str]]:
    """Check the archive at ``path`` and unpack into ``root`` what the audit
    reads: the members seen ({name: (size, sha256)}, in archive order),
    problems added to ``rep``.  Only the manifest, and a ``store/`` member
    the manifest lists at that member's size, are written to disk; any
    other member is hashed as it is read (the comparison names it ``added``
    or ``changed``), so that the disk taken follows the manifest's sizes.
    A member before the manifest (an ``order`` problem) is hashed as it
    comes, then, once the archive is read, read again and unpacked if the
    manifest lists it at its size (the audit then sees the whole store)."""
    seen: dict[str, tuple[int, str]] = {}
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise_if_out_of_fds(exc, path)
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    unpack = _Unpacker(root)
    try:
        magic = raw.read(2)
        raw.seek(0)
        inner: IO[bytes] = raw
        if magic == b"\x1f\x8b":
            rep.compression = "gzip"
            inner = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]  # typeshed: not an IO
        src: Any = _Capped(inner)
        try:
            tf = tarfile.open(fileobj=src, mode="r:", encoding="utf-8",  # noqa: SIM115 - wraps raw, closed below
                              tarinfo=_RawTarInfo)
        except _HeaderTooLarge as exc:
            rep.add("archive", None, _too_large(exc))
            return seen
        except _HEADER_ERRORS as exc:
            rep.add("archive", None, f"not a tar archive ({exc})")
            return seen
        deferred: list[tarfile.TarInfo] = []
        _read_members(tf, src, unpack, rep, seen, deferred)
        if rep.manifest is not None and deferred:
            _unpack_deferred(tf, unpack, rep, seen, deferred)
    finally:
        raw.close()
    return seen


def _listed_sizes(rep: VerifyReport) -> dict[str, int]:
    """{path: size} of the manifest's files (none without a manifest)."""
    return {f["path"]: f["size"] for f in (rep.manifest or {}).get("files", [])}


def _read_members(tf: tarfile.TarFile, src: Any, unpack: _Unpacker, rep: VerifyReport,
                  seen: dict[str, tuple[int, str]], deferred: list[tarfile.TarInfo]) -> None:
    """:func:`_read_archive`'s pass over the members, then the archive's end."""
    last = None
    dirs: list[str] = []        # the directory members' names
    sizes: dict[str, int] | None = None     # the listed sizes, once the manifest is read
    index = 0
    headers = 0                 # the bytes of the headers read (HEADERS_CAP)
    while True:
        start = tf.offset if index else 0   # (tarfile.open read the first member's)
        try:
            ti = tf.next()
        except _HeaderTooLarge as exc:
            rep.add("archive", last, f"after {last or 'the start'}: {_too_large(exc)}")
            return
        except _HEADER_ERRORS as exc:
            rep.add("archive", last, f"truncated or corrupt after {last or 'the start'} ({exc})")
            return
        if ti is None:
            break
        # (tarfile keeps every member it reads in tf.members: none here, the
        # names that are needed are kept below, bounded)
        tf.members.clear()  # type: ignore[attr-defined]  # (typeshed: not listed)
        headers += ti.offset_data - start
        limit = min(HEADERS_CAP + HEADERS_PER_FILE * len(sizes or {}), HEADERS_MAX)
        if headers > limit:
            rep.add("archive", last, f"the archive's headers (names, pax headers, GNU long "
                    f"names) total more than {limit} bytes after {index + 1} members; the "
                    "rest is not read")
            return
        name = ti.name
        first = index == 0
        index += 1
        n = len(os.fsencode(name))
        if n > NAME_MAX_BYTES:
            rep.add("refused", _shown(name), f"a name of {n} bytes, longer than the "
                    f"{NAME_MAX_BYTES} a path may have; not unpacked")
            continue
        if not _utf8(name):
            # (a name the report, UTF-8 JSON, cannot hold as it is: \xNN)
            rep.add("refused", _shown(name), "a name that is not UTF-8; not unpacked")
            continue
        why = _member_problem(name)
        if why is not None:
            rep.add("refused", name, f"{why}; not unpacked")
            continue
        why = _prefix_problem(ti)
        if why is not None:
            rep.add("refused", name, why)
            continue
        if ti.isdir():
            dirs.append(name.rstrip("/"))
            _check_meta(ti, name.rstrip("/") + "/", rep)
            continue
        if ti.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            rep.add("refused", name, f"{_kind_name(ti)}; not unpacked")
            continue
        if ti.sparse is not None:
            # (GNU sparse in pax headers: a regular file to tarfile, of
            # its real size, zeros in the holes; export writes none)
            rep.add("refused", name, "sparse file; not unpacked")
            continue
        if name in seen:
            rep.add("duplicate", name, "appears twice in the archive; the second is ignored")
            continue
        _check_meta(ti, name, rep)
        fh = tf.extractfile(ti)
        assert fh is not None
        try:
            if name == MANIFEST:
                if not first:
                    rep.add("order", MANIFEST, "manifest.json is not the first member")
                # (read from a copy: its rows are not held, _parse_manifest_file)
                seen[name] = unpack.write(name, fh)
                _parse_manifest_file(unpack.root / MANIFEST, rep)
                sizes = _listed_sizes(rep)
            elif name.startswith(STORE_DIR + "/") and sizes is None:
                seen[name] = _hash_stream(fh)       # (before the manifest: see _unpack_deferred)
                ti.pax_headers = {}     # (not read again; held until the manifest is)
                deferred.append(ti)
            elif sizes is not None and sizes.get(name) == ti.size:
                seen[name] = unpack.write(name, fh)
            else:
                seen[name] = _hash_stream(fh)       # (not listed, or not at this size)
        except _Refused as exc:
            rep.add("refused", name, str(exc))
            continue
        except _HeaderTooLarge as exc:   # (never: memctl reads CHUNK at most)
            rep.add("archive", name, _too_large(exc))
            return
        except _READ_ERRORS as exc:
            rep.add("archive", name, f"truncated or corrupt inside {name} ({exc})")
            return
        last = name
    # a directory member of a file member's name: tar -x keeps one of the
    # two (GNU tar makes the file a directory), so what it unpacks is
    # not what was checked
    # a directory member no listed file is in: tar -x makes it (and
    # validate of the result reports it), so it is no part of the store
    # the manifest describes
    implied = {STORE_DIR}
    for path in (sizes or {}):
        parts = path.split("/")[:-1]
        implied.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    for d in dirs:
        if d in seen:
            rep.add("duplicate", d, "given both as a file and as a directory; tar -x "
                    "keeps only one of them")
        elif rep.manifest is not None and d not in implied:
            rep.add("added", d + "/", "a directory member no listed file is in; tar -x "
                    "would make it")
    # a directory export writes (store/, and each listed file's directory)
    # that has no member: tar -x makes it with the umask's mode, not the
    # 0700 a store needs, and verify of what it unpacked rejects it
    if rep.manifest is not None:
        for d in sorted(implied.difference(dirs)):
            rep.add("missing", d + "/", "a directory member export writes is not in the "
                    "archive; tar -x would make the directory with the umask's mode, "
                    "not 0700")
    _check_end(tf, src, rep, last)


# The pax records export writes (tarfile writes them, in PAX_FORMAT, for a
# name longer than a ustar header holds or not ASCII, and a size of 8 GiB or
# more): any other (an ACL, an extended attribute, atime, a charset, ...) is
# something tar -x may apply that export never wrote.
_PAX_EXPORT_WRITES = frozenset({"path", "size"})


def _check_meta(ti: tarfile.TarInfo, shown: str, rep: VerifyReport) -> None:
    """A member's mode and owner, which ``tar -x`` applies, must be what
    export writes (files 0600, directories 0700, owner 0:0 without names),
    and its pax records (its own and a global header's before it) only
    those export writes (``path``, ``size``): else ``changed``."""
    want = 0o700 if ti.isdir() else 0o600
    what = []
    if ti.mode != want:
        what.append(f"mode {ti.mode:04o}")
    if ti.uid or ti.gid or ti.uname or ti.gname:
        names = f" ({ti.uname}:{ti.gname})" if ti.uname or ti.gname else ""
        what.append(f"owner {ti.uid}:{ti.gid}{names}")
    extra = sorted(k for k in ti.pax_headers if k not in _PAX_EXPORT_WRITES)
    if extra:
        what.append(f"pax record{'s' if len(extra) > 1 else ''} {', '.join(extra)}")
    if what:
        rep.add("changed", shown, ", ".join(what) + f"; export writes mode {want:04o}, owner "
                "0:0 without names, no pax record but path and size, and tar -x applies "
                "them")


def _check_end(tf: tarfile.TarFile, src: Any, rep: VerifyReport, last: str | None) -> None:
    """The end-of-archive marker where the members end, then zeros only."""
    # tarfile stops quietly at a short or garbled header: insist on the
    # end-of-archive marker (two zero blocks) where the members end.
    try:
        src.seek(tf.offset)
        tail = src.read(2 * tarfile.BLOCKSIZE)
    except (EOFError, OSError, zlib.error) as exc:
        rep.add("archive", last, f"truncated after {last or 'the start'} ({exc})")
        return
    if len(tail) < 2 * tarfile.BLOCKSIZE or tail.strip(b"\0"):
        rep.add("archive", last, f"truncated or corrupt after {last or 'the start'}: no "
                "end-of-archive marker")
        return
    # after the marker, zeros only (tar pads to a record): `tar -i` reads
    # on past zero blocks, so another archive appended (or another gzip
    # stream, which gzip reads as the same stream) would be unpacked
    at = tf.offset + len(tail)
    try:
        while chunk := src.read(CHUNK):
            if chunk.strip(b"\0"):
                bad_at = at + len(chunk) - len(chunk.lstrip(b"\0"))
                rep.add("archive", last, f"bytes that are not zeros after the end-of-archive "
                        f"marker, at offset {bad_at} (tar -i would read members there)")
                break
            at += len(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        rep.add("archive", None, f"compressed stream truncated or corrupt ({exc})"
                if rep.compression == "gzip" else f"cannot read after the end-of-archive "
                f"marker ({exc})")


def _unpack_deferred(tf: tarfile.TarFile, unpack: _Unpacker, rep: VerifyReport,
                     seen: dict[str, tuple[int, str]], deferred: list[tarfile.TarInfo]) -> None:
    """The ``store/`` members before the manifest that it lists at their
    size, read again (in archive order: a gzip stream is read from its
    start once) and unpacked; their hashes are those of the bytes written."""
    sizes = _listed_sizes(rep)
    for ti in deferred:
        if sizes.get(ti.name) != ti.size:
            continue
        fh = tf.extractfile(ti)
        assert fh is not None
        try:
            seen[ti.name] = unpack.write(ti.name, fh)
        except _Refused as exc:
            rep.add("refused", ti.name, str(exc))
        except (_HeaderTooLarge, *_READ_ERRORS) as exc:
            rep.add("archive", ti.name, f"cannot read {ti.name} again ({exc})")
            return


def _read_directory(path: Path, rep: VerifyReport) -> dict[str, tuple[int, str]]:
    """Hash every file of an unpacked bundle, never following a link.  A
    directory outside ``store/`` (empty, or not) is ``added``, as its member
    is in an archive; one in ``store/`` is the audit's to report."""
    seen: dict[str, tuple[int, str]] = {}
    outside: list[str] = []
    stack = [("", path)]
    while stack:
        rel, d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            rep.add("refused", rel or ".", f"cannot list: {exc.strerror}")
            continue
        for e in entries:
            r = f"{rel}{e.name}"
            if not _utf8(e.name):
                rep.add("refused", _shown(r), "a name that is not UTF-8; not read")
                continue
            st = e.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                rep.add("refused", r, "symbolic link; not followed")
            elif stat.S_ISDIR(st.st_mode):
                if r != STORE_DIR and not r.startswith(STORE_DIR + "/"):
                    outside.append(r + "/")
                stack.append((r + "/", Path(e.path)))
            elif not stat.S_ISREG(st.st_mode):
                rep.add("refused", r, "not a regular file")
            else:
                try:
                    seen[r] = _sha256_file(Path(e.path))
                except OSError as exc:
                    rep.add("refused", r, f"cannot read: {exc.strerror}")
    if MANIFEST not in seen:
        if not any(p.path == MANIFEST for p in rep.problems):
            rep.add("manifest", MANIFEST, "missing")
    else:
        _parse_manifest_file(path / MANIFEST, rep)
    if rep.manifest is not None:
        for extra in sorted(outside):
            rep.add("added", extra, "a directory no listed file is in")
    return seen


def _compare_files(seen: dict[str, tuple[int, str]], manifest: dict[str, Any],
                   rep: VerifyReport, *, ordered: bool) -> None:
    listed: dict[str, Any] = {}
    for f in manifest["files"]:
        if f["path"] in listed:
            # (as a fact listed twice: the entries collapsed into one, and
            # such a bundle verified, "8 checked" of 9; since 2026-12-07)
            rep.add("manifest", f["path"], "listed twice in the manifest's files")
            continue
        listed[f["path"]] = f
        got = seen.get(f["path"])
        if got is None:
            rep.add("missing", f["path"], "listed in the manifest, not in the bundle")
        elif got != (f["size"], f["sha256"]):
            rep.add("changed", f["path"], f"size {got[0]}, sha256 {got[1][:16]}...; the manifest "
                    f"says size {f['size']}, sha256 {f['sha256'][:16]}...")
    for name in seen:
        if name != MANIFEST and name not in listed:
            rep.add("added", name, "in the bundle, not in the manifest")
    rep.files_checked = sum(1 for n in seen if n in listed)
    if ordered:
        order = [n for n in seen if n in listed]
        want = [p for p in listed if p in seen]     # (each once, in manifest order)
        for got_name, want_name in zip(order, want, strict=False):
            if got_name != want_name:
                rep.add("order", got_name, f"member out of order: the manifest lists {want_name} "
                        "here")
                break


def _unread_as_zero(key: str, want_v: dict[str, Any], got_v: dict[str, Any]) -> bool:
    """The manifest's ``facts`` and ``facts_total`` say what a bundle exported
    before 2026-12-07 said of a database the audit could not read (0 facts,
    each status 0), where the audit now says not known (null): the same."""
    if key not in ("facts", "facts_total") or got_v.get("facts_total") is not None:
        return False
    facts = want_v.get("facts")
    return (want_v.get("facts_total") == 0 and isinstance(facts, dict)
            and all(type(n) is int and n == 0 for n in facts.values()))


def _compare_audit(got: dict[str, Any], manifest: dict[str, Any], rep: VerifyReport,
                   rows_in: str | os.PathLike[str] | None = None) -> None:
    # (a manifest with its digest right may still hold any JSON where these
    # are: each compared as what export writes, anything else taken as
    # none, never an internal error)
    want_v = _of_type(manifest.get("validate"), dict, {})
    got_v = got["validate"]
    for key in sorted(set(want_v) | set(got_v)):
        if key == "findings_list":
            continue
        if want_v.get(key) != got_v.get(key) and not _unread_as_zero(key, want_v, got_v):
            rep.add("validate", None, f"summary {key}: {_short(got_v.get(key))}; at export: "
                    f"{_short(want_v.get(key))}")
    # (as multisets: before 2026-12-07 as sets, and a finding the manifest
    # listed twice, its digest recomputed, verified OK)
    want_list = _of_type(want_v.get("findings_list"), list | ManifestRows, [])
    want_f = Counter(held_canonical(f) for f in want_list)
    got_list = got_v.get("findings_list") or []
    got_f = Counter(got_list.items if isinstance(got_list, HeldFindings)
                    else (held_canonical(f) for f in got_list))
    if isinstance(want_v.get("findings_list"), list | ManifestRows):
        _check_findings_list(want_list, want_f, want_v.get("findings"), rep)
    for f in sorted(got_f - want_f):
        d = orjson.loads(f)
        rep.add("validate", d.get("file"), f"new finding {d.get('code')}: {d.get('message')}")
    for f in sorted(want_f - got_f):
        d = orjson.loads(f)
        d = d if isinstance(d, dict) else {"message": f.decode()}
        file = d.get("file")
        if got_f[f]:
            # (export lists each finding as often as the audit gives it: one
            # listed more often is the manifest's problem, as a fact row
            # listed twice is)
            rep.add("manifest", MANIFEST, f"finding {_short(d.get('code'))} of "
                    f"{_short(file)} listed {want_f[f]} times in the manifest's "
                    f"findings_list, found {got_f[f]}: {_short(d.get('message'))}")
            continue
        rep.add("validate", file if isinstance(file, str) else None,
                f"finding at export no longer found: {d.get('code')}: {d.get('message')}")
    want_facts = _of_type(manifest.get("facts"), dict, {})
    got_facts = got["facts"]
    if want_facts.get("error") != got_facts.get("error"):
        rep.add("facts", FACTS_DB, f"facts: {_short(got_facts.get('error'))}; at export: "
                f"{_short(want_facts.get('error'))}")
    want_rows = _of_type(want_facts.get("rows"), list | ManifestRows, [])
    got_rows = got_facts.get("rows") or []
    checks = HeldFactRows(rows_in, encode=orjson.dumps)
    found: list[Problem] = []
    try:
        for fid, g, w in _merged_rows(want_rows, got_rows):
            _check_row(fid, g, w, checks, found)
    except BaseException as exc:
        checks.close()
        if not isinstance(exc, _Unordered):
            raise
        # (rows not in id order, or not each a dict with a text id: a
        # manifest that export did not write so: each side held by id)
        checks, found = HeldFactRows(rows_in, encode=orjson.dumps), []
        want: dict[str, dict[str, Any]] = {}
        for r in want_rows:
            if not isinstance(r, dict):
                continue
            key = _id_key(r.get("fact_id"))
            if key in want:
                # (export lists each fact once: a second row of an id was
                # taken in place of the first, and the bundle verified)
                found.append(Problem("manifest", MANIFEST, f"fact {key}: listed twice in the "
                                     "manifest's rows"))
                continue
            want[key] = r
        got_by = {r["fact_id"]: r for r in got_rows}
        for key in sorted(set(want) | set(got_by), key=str):
            _check_row(key, got_by.get(key), want.get(key), checks, found)
    rep.problems.extend(found)
    rep.facts = checks


class _Unordered(Exception):
    pass


def _check_findings_list(want_list: Any, want_f: Counter[bytes], counts: Any,
                         rep: VerifyReport) -> None:
    """A ``manifest`` problem when the manifest's ``findings_list`` does not
    hold, by severity, what its summary's ``findings`` counts (export
    writes both from one audit)."""
    if not isinstance(counts, dict):
        return      # (a summary of another shape: a `validate` difference)
    listed: Counter[str] = Counter()
    for f, n in want_f.items():
        d = orjson.loads(f)
        sev = d.get("severity") if isinstance(d, dict) else None
        listed[sev if isinstance(sev, str) else "?"] += n
    said = {k: v for k, v in counts.items() if v}
    if dict(+listed) != said:
        shown = ", ".join(f"{k} {listed[k]}" for k in sorted(set(listed) | set(said), key=str))
        rep.add("manifest", MANIFEST, f"the findings_list holds {len(want_list)} "
                f"finding(s) ({shown or 'none'}), the summary counts {_short(counts)}")


def _id_key(fid: Any) -> str:
    """A manifest row's fact id as a key: itself, or (a number, a list, an
    object, null: never what export writes) its JSON text, so that the
    fact_check row's ``fact_id`` is text as the schema says (a number
    12 was given as the number)."""
    return fid if isinstance(fid, str) else _short(fid)


def _of_type(value: Any, kind: Any, default: Any) -> Any:
    """``value`` when it is an instance of ``kind``, else ``default``."""
    return value if isinstance(value, kind) else default


def _merged_rows(want: Iterable[Any], got: Iterable[dict[str, Any]]
                 ) -> Iterator[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]:
    """The rows of both sides by fact id, in id order, merged as they are
    read: (id, the row now or None, the row at export or None).
    :class:`_Unordered` where a side is not a dict with a text id, each in
    ascending order (as the listing and export give them)."""
    def ordered(rows: Iterable[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        last: str | None = None
        for r in rows:
            fid = r.get("fact_id") if isinstance(r, dict) else None
            if type(fid) is not str or (last is not None and fid <= last):
                raise _Unordered
            last = fid
            yield fid, r

    ws, gs = ordered(want), ordered(got)
    w, g = next(ws, None), next(gs, None)
    while w is not None or g is not None:
        if g is not None and (w is None or g[0] < w[0]):
            yield g[0], g[1], None
            g = next(gs, None)
        elif w is not None and (g is None or w[0] < g[0]):
            yield w[0], None, w[1]
            w = next(ws, None)
        else:
            assert w is not None and g is not None
            yield w[0], g[1], w[1]
            w, g = next(ws, None), next(gs, None)


def _check_row(fid: Any, g: dict[str, Any] | None, w: dict[str, Any] | None,
               checks: HeldFactRows, found: list[Problem]) -> None:
    """One fact's check row (into ``checks``), and its problem (into ``found``)."""
    same = g == w
    # (each value as its schema type: a manifest is untrusted, and before
    # 2026-12-07 its revision "x", status 5 or reason ["a"] were copied as
    # they are; now a revision that is no integer is null, a status or a
    # reason that is no text its JSON text, as fact_id's; the row still
    # differs, as the values compared are the manifest's own)
    checks.add(FACT_CHECK.row(fact_id=fid,
                              revision=stored_int((g or w or {}).get("revision")),
                              status=_text_or_json(g.get("status")) if g else None,
                              reason=_text_or_json(g.get("reason")) if g else None,
                              manifest_status=_text_or_json(w.get("status")) if w else None,
                              manifest_reason=_text_or_json(w.get("reason")) if w else None,
                              same=same))
    if same:
        return
    if w is None:
        found.append(Problem("facts", None, f"fact {fid}: not in the manifest"))
    elif g is None:
        found.append(Problem("facts", None, f"fact {fid}: in the manifest, not in the database"))
    else:
        diff = [k for k in FACT_FIELDS if g.get(k) != w.get(k)] or \
            [k for k in sorted(set(g) | set(w), key=str) if g.get(k) != w.get(k)]
        found.append(Problem("facts", None, f"fact {fid}: " + "; ".join(
            f"{k} now {_short(g.get(k))}, at export {_short(w.get(k))}" for k in diff)))


def _text_or_json(v: Any) -> str | None:
    """A manifest's value where the schema says string or null: null, or
    as a fact id is given (:func:`_id_key`: the text, or a number's, a
    list's, an object's, a bool's JSON text)."""
    return None if v is None else _id_key(v)


def _short(v: Any) -> str:
    text = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= 120 else text[:117] + "..."


def verify_bundle(path: str | os.PathLike[str], *, parallel: bool = False) -> VerifyReport:
    """Verify a bundle (an archive, or a directory it was unpacked into).
    Writes nothing but a private temporary directory, removed afterwards.
    ``parallel``: the store's audit may fork (:func:`audit_store`)."""
    p = Path(os.path.abspath(os.fspath(path)))
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        raise NotFound(f"{p}: no such bundle") from None
    except OSError as exc:
        raise StoreCorrupt(f"{p}: cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(p)  # a bundle named through a link is the user's choice; its members never are
    rep = VerifyReport(str(p), "directory" if stat.S_ISDIR(st.st_mode) else "archive")
    try:
        with fenced(p):     # (the copy's snapshot: never in the bundle either)
            return _verify(p, st, rep, parallel)
    except BaseException:
        rep.close()         # (its files of rows, let go now, not by the collector)
        raise


def _verify(p: Path, st: os.stat_result, rep: VerifyReport, parallel: bool) -> VerifyReport:
    if stat.S_ISDIR(st.st_mode):
        seen = _read_directory(p, rep)
        if rep.manifest is not None:
            _compare_files(seen, rep.manifest, rep, ordered=False)
            store_dir = p / STORE_DIR
            if os.path.isdir(store_dir) and not os.path.islink(store_dir):
                # (the rows' temporary files: in a private directory, never in the bundle)
                tmp = Path(owned_tempdir("verify", p))
                try:
                    _audit_into(rep, store_dir, tmp, parallel)
                finally:
                    remove_private(tmp)
            else:
                rep.add("missing", STORE_DIR + "/", "the bundle has no store directory")
        return rep
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{p}: not a file or directory")
    tmp = Path(owned_tempdir("verify", p))
    try:
        os.chmod(tmp, 0o700)
        seen = _read_archive(p, tmp, rep)
        if rep.manifest is None and MANIFEST not in seen and not any(
                pr.kind in ("manifest", "archive") for pr in rep.problems):
            rep.add("manifest", MANIFEST, "missing")
        if rep.manifest is not None:
            _compare_files(seen, rep.manifest, rep, ordered=True)
            store_dir = tmp / STORE_DIR
            if not store_dir.exists():
                os.mkdir(store_dir, 0o700)
            _audit_into(rep, store_dir, tmp, parallel)
        return rep
    finally:
        remove_private(tmp)     # (whole, even when an interrupt comes meanwhile)


def _made_before_frozen(manifest: dict[str, Any]) -> bool:
    """Whether ``manifest`` was written by an export that audited its fresh
    copy by the clock (before 2026-12-07): one of its findings is in the
    form a file "modified in the last minute" gives, which the audit of a
    frozen copy never gives.  Such a bundle is verified as it was made (its
    archive as before; its ``tar -x`` directory only within a minute of
    unpacking, as before): audited frozen, that untouched archive was
    DIFFERS."""
    v = manifest.get("validate")
    found = v.get("findings_list") if isinstance(v, dict) else None
    if not isinstance(found, list | ManifestRows):
        return False
    return any(isinstance(f, dict) and _recent_form(f) for f in found)


# the messages, whole or their end, of the three findings a file "modified in
# the last minute" gave, with their severity (core/audit: _no_header, _torn,
# Audit._temp_file): nothing else an audit writes ends so (a name a finding
# quotes is no message's end)
_RECENT_FORMS = {
    "session.missing_header": ("warning", "no complete first line: the session header is "
                               "missing (modified in the last minute: a writer may be "
                               "creating it)", True),
    "session.torn_tail": ("warning", "has no newline: a writer may be appending (modified in "
                          "the last minute)", False),
    "layout.temp_file": ("info", "temporary file of a write in progress? (modified in the "
                         "last minute)", True),
}


def _recent_form(f: dict[str, Any]) -> bool:
    """Whether the manifest finding ``f`` is in the form a "recent" file gave."""
    form = _RECENT_FORMS.get(f.get("code"))  # type: ignore[arg-type]
    message = f.get("message")
    if form is None or f.get("severity") != form[0] or not isinstance(message, str):
        return False
    return message == form[1] if form[2] else message.endswith(form[1])


def _audit_into(rep: VerifyReport, store_dir: Path, rows_in: Path, parallel: bool) -> None:
    assert rep.manifest is not None
    got = audit_store(store_dir, rep.manifest["project"]["slug"], rows_in, parallel=parallel,
                      frozen=not _made_before_frozen(rep.manifest))
    rep.audit = got
    _compare_audit(got, rep.manifest, rep, rows_in)


__all__ = ["export_bundle", "export_to_file", "verify_bundle", "audit_store", "VerifyReport",
           "ExportResult", "Problem", "compression_for", "BUNDLE_FORMAT", "BUNDLE_VERSION"]
