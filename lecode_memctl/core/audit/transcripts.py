"""Transcript checks: one job per session file, one sequential read each
(see the package docstring for the cost model)."""

from __future__ import annotations

import itertools
import math
import os
import stat
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import orjson

from .._lazy import lazy_compile
from ..atomic import is_link_refusal, open_in_dir
from ..errors import UsageError
from ..layout import SESSIONS_DIR
from ..sessions import (
    HUGE_LINE,
    INVALID_UTF8,
    LEARNING_EVENT,
    NOT_JSON,
    ROLES,
    TOO_LARGE,
    MarkFinder,
    RecordTooLarge,
    SpanReads,
    _File,
    bad_target,
    epoch_number,
    event_line,
    fast_seq,
    header_problem,
    huge_seq,
    is_generated,
    learning_problems,
    load_record,
    not_an_event,
    record_before,
    record_seq,
    records_by_line,
    search_lands,
    seq_given_twice,
    span_decision,
)
from ..sourceref import MAX_SPAN, RecordsUndigestible, SourceStatus, canonical_digest, status_for
from .codes import ERROR, WARNING

# The event names the store contract lists: one of another name is said
# (``session.unknown_event``, info), not called corrupt
EVENT_NAMES = ("undo", "redo", "clear", "compact", "memory_usage", LEARNING_EVENT)
_ROLE_SET = frozenset(ROLES)

TORN_TAIL_GRACE_SECONDS = 60.0

#: The ``now`` of an audit of a frozen copy (a bundle's store, at export and
#: at verify, :class:`~.run.Audit`'s ``frozen``): no writer is creating or
#: appending to any file of it, so no file is "recent" (modified in the last
#: minute) nor "ahead" (a modification time in the future): every finding
#: that depends on a file's age gets its not-recent severity and message,
#: whatever the files' modification times and the clock (before 2026-12-07 a
#: bundle's staged copy, written at export, was "recent", and its unpacked
#: directory, stamped with the export time, failed verify a minute later).
FROZEN = math.inf


def _ahead(mtime: float, now: float) -> float | None:
    """How far a transcript's modification time is ahead of the clock (the
    later of ``now`` and the time now: a writer may append while the audit
    runs), when that is over ``TORN_TAIL_GRACE_SECONDS`` (a clock stepped
    back, a restore with future times): such a file is no writer's at work
    (before 2026-12-07 it was "modified in the last minute" for ever).
    None otherwise (up to a minute ahead: another machine's clock, on a
    network file system, may be)."""
    import time

    if now == FROZEN:
        return None
    ahead = mtime - max(now, time.time())
    return ahead if ahead > TORN_TAIL_GRACE_SECONDS else None


def _recent(mtime: float, now: float, ahead: float | None) -> bool:
    """Whether a transcript changed in the last ``TORN_TAIL_GRACE_SECONDS``
    (a writer may be at it): a warning, not an error.  Never in an audit
    of a frozen copy (``now`` is :data:`FROZEN`)."""
    return ahead is None and now != FROZEN and now - mtime < TORN_TAIL_GRACE_SECONDS


def _future(ahead: float | None) -> str:
    return "" if ahead is None else f" (its modification time is {ahead:.0f} s in the future)"
READ_CHUNK = 8 << 20

# ---------------------------------------------------------------------------
# Transcript jobs: one sequential read per file

class _Scan:
    """What one transcript job found (private: a plain class, pickled back
    from the pool's workers)."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.raw: list[tuple[str, str, str | None, dict[str, Any]]] = []
        # the statuses of the references that are not valid (a reference not
        # here is valid: the audit keeps only these, and a job of thousands of
        # references does not hold the others)
        self.statuses: dict[tuple[tuple[int, ...], str, str], Any] = {}
        self.max_epoch: tuple[float, int] | None = None   # (epoch, seq) of the newest generated messages
        self.epoch_scanned = False   # max_epoch taken from every line (--deep), not the tail


EPOCH_TAIL = 65536
EPOCH_BACK = 16 << 20    # ... and no further back than this from the end
EPOCH_PIECE = 256 << 10  # ... reading at most this much more each step


def _tail_epoch(fd: int, size: int, sc: _Scan, data: bytes | None = None) -> tuple[float, int] | None:
    """The highest ``epoch`` (with its seq) among the generated messages of the
    complete lines that start in the last 64 KiB; when none of them is a
    generated message (a large paste, many user lines last), of those that
    start in the last 128 KiB, 256 KiB, ... (then 256 KiB more at each
    step) up to ``EPOCH_BACK`` (16 MiB) or the file's start: each step reads
    only the bytes before the last one's, looks for a line start only in
    them, and looks only at the lines that start there.  The search stops at
    the last generated message, with an epoch or not (a legacy one, written
    before epochs, has none: no message before it has a newer one; before
    2026-12-07 such a transcript was read back 16 MiB).  Taken from ``data``
    when the whole file is already in memory.  Epochs are captured before
    each request, so they never decrease along a transcript: its last
    generated message holds its newest epoch.  (--deep takes the highest of
    every line instead: _full.)"""
    if size <= 0:
        return None
    whole = data is not None and len(data) == size
    lo = size           # the lowest byte read so far
    done = size         # the first line start looked at (the lines from there on are done)
    # the bytes from ``lo`` to ``done`` (part of a line that starts before),
    # in pieces, oldest first: joined once, when a line start is found
    carry: list[bytes] = []
    reach = min(size, EPOCH_TAIL)
    while True:
        want = max(size - reach - 1, 0)   # (one byte before the window: does a line start there)
        if whole:
            assert data is not None
            piece = data[want:lo]
        else:
            piece = os.pread(fd, lo - want, want)
            sc.bytes_read += lo - want
        lo = want
        first = size - reach
        # the first line start at or after ``first``, in the new piece only:
        # the file's start, or after a newline
        if first == 0:
            pos = 0
        else:
            nl = piece.find(b"\n", first - 1 - want)
            pos = -1 if nl < 0 else want + nl + 1
        if 0 <= pos < done:
            # the lines that start from there to the first one already looked at
            window = piece[pos - want:] + b"".join(carry)
            best = _window_epoch(window)
            if best is not None or _has_generated(window):
                return best
            done = pos
            carry = [piece[:pos - want]]
        else:
            carry.insert(0, piece)
        if reach >= size or reach >= EPOCH_BACK:
            return None
        reach = min(size, reach + min(reach, EPOCH_PIECE))


def _has_generated(window: bytes) -> bool:
    """Whether a complete line of ``window`` is a generated message (an
    assistant or tool message, or a synthetic one), with an epoch or not:
    the lines that may be one by their bytes are parsed (all of them when a
    \\u escape may spell a key or a role)."""

    escaped = b"\\" in window and b"\\u" in window
    if not escaped and b'"assistant"' not in window and b'"tool"' not in window \
            and b'"synthetic"' not in window:
        return False        # (no line can be one: a paste of user lines, read at C speed)
    pos = 0
    while True:
        end = window.find(b"\n", pos)
        if end < 0:
            return False
        line = window[pos:end]
        pos = end + 1
        if not escaped and b'"assistant"' not in line and b'"tool"' not in line \
                and b'"synthetic"' not in line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict) and _generated_message(rec):
            return True


def _generated_message(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "message" and is_generated(rec)


def _window_epoch(window: bytes) -> tuple[float, int] | None:
    """The highest ``epoch`` (a number: :func:`~..sessions.epoch_number`) (with the seq of the first line that
    carries it) among the generated messages of the complete lines of
    ``window`` (its last piece, not ended by a newline, is left out)."""

    bound = _epoch_bound(window)
    if bound == _NO_EPOCH:
        return None
    # a window with a \u escape may spell the key "\u0065poch": every line parsed
    mark = b'"epoch"' if bound is not None else None
    best: tuple[float, int] | None = None
    pos = 0
    while True:
        end = window.find(b"\n", pos)
        if end < 0:
            break
        line = window[pos:end]
        pos = end + 1
        if mark is not None and mark not in line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not (isinstance(rec, dict) and _generated_message(rec)):
            continue
        epoch, seq = epoch_number(rec.get("epoch")), rec.get("seq")
        if epoch is not None and type(seq) is int and (best is None or epoch > best[0]):
            best = (epoch, seq)
            if bound is not None and epoch >= bound:
                break          # no later line can carry a higher epoch
    return best


# (a JSON number whole: an epoch may be a float, compared as the number it is)
_EPOCH_VALUE = lazy_compile(rb'"epoch"[ \t\r\n]*:[ \t\r\n]*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)')


_NO_EPOCH = float("-inf")


def _epoch_bound(window: bytes) -> float | None:
    """An upper bound of the epochs in ``window``, from its bytes: the
    largest number written after a key ``"epoch"``; :data:`_NO_EPOCH`
    when there is none (no line there can carry an epoch).  None when no
    bound is known: the window holds a ``\\u`` escape (a key could be
    spelt ``"\\u0065poch"``) or a number written in over 20 characters.  The
    epoch scan stops at the first line that reaches the bound: in a clean
    transcript, whose epochs never decrease, it parses one line, not all."""
    if b"\\" in window and b"\\u" in window:   # (memchr first: a window without a
        return None                              # backslash skips the two-byte search)
    best = _NO_EPOCH
    for digits in set(_EPOCH_VALUE.findall(window)):   # (a few distinct values)
        if len(digits) > 20:
            return None
        best = max(best, int(digits) if digits.isdigit() or digits[1:].isdigit()
                   else float(digits))
    return best


# the default mode runs its jobs in worker processes only when they read at
# least this much (a pool of forked workers costs some 10-30 ms to start)
PARALLEL_BYTES = 64 << 20


# ... and at least this many bytes of transcripts per byte of the facts
# database: a fork waits for the audit's integrity_check (about 13 ns a byte
# of database here), which otherwise runs beside the transcripts, while the
# pool saves about half of reading them (1-2 ns a byte): on a store of many
# facts over few transcripts (1,000,000 facts, 98 MB of transcripts, a 390
# MB database) the pool made the default audit 1.2x slower
POOL_DB_RATIO = 16


def worth_a_pool(count: int, deep: bool, cited: Iterable[str], db_bytes: int = 0) -> bool:
    """Whether ``count`` transcript jobs read enough to pay for a pool: with
    ``deep`` (every transcript read and parsed whole), eight jobs or more; in
    the default mode, eight transcripts or more that facts reference (each
    read whole; ``cited``: their paths) holding :data:`PARALLEL_BYTES`
    together (by ``os.stat``; a file that cannot be stat'ed counts nothing:
    its job reports it), and :data:`POOL_DB_RATIO` times the facts
    database's ``db_bytes``."""
    if count < 8 or (os.cpu_count() or 1) < 2:
        return False
    if deep:
        return True
    heavy = list(cited)
    if len(heavy) < 8:
        return False
    need = max(PARALLEL_BYTES, POOL_DB_RATIO * db_bytes)
    total = 0
    for path in heavy:
        try:
            total += os.stat(path, follow_symlinks=False).st_size
        except OSError:
            continue
        if total >= need:
            return True
    return False


# a batch sent to a worker holds jobs up to this many bytes of transcripts
# (by os.stat), BATCH_REFS references or BATCH_JOBS jobs: one task per
# transcript costs the pool's threads more than small transcripts cost the
# workers; the references bound what waits in the pool's queues
BATCH_BYTES = 8 << 20
BATCH_REFS = 4096
BATCH_JOBS = 32


def run_jobs(jobs: Iterable[tuple[Any, ...]], *, parallel: bool) -> Iterator[_Scan]:
    """The jobs' results in order, each as soon as it is ready (findings
    stream); in worker processes when ``parallel`` (:func:`worth_a_pool`).
    The jobs are taken from ``jobs`` as they are needed: at most a few
    batches per worker are waiting at any time, so a job's references are
    made when it is about to run, not all of them first.  A batch is a run
    of consecutive jobs (:func:`_batches`), sent to a worker as one task."""
    from ..pools import alone

    # (no fork beside another thread: a program that imports the core and
    # asked for parallel may run threads of its own)
    if parallel and alone():
        import multiprocessing

        from ..pools import in_order

        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:  # pragma: no cover - no fork on this platform
            ctx = None
        if ctx is not None:
            workers = min(os.cpu_count() or 2, 8)
            # (a worker killed meanwhile: its batches run again, in_order)
            for scans, error in in_order(_batch_job, _batches(jobs), workers, ctx,
                                         ahead=3 * workers):
                yield from scans
                if error is not None:
                    raise error
            return
    for j in jobs:
        yield _session_job(*j)


def _batches(jobs: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """Consecutive jobs in batches of at most :data:`BATCH_JOBS` jobs, closed
    once they read :data:`BATCH_BYTES` (a job's size: its transcript's, by
    ``os.stat`` of its path, the job's first field; 0 when that fails) or
    hold :data:`BATCH_REFS` references (its fifth field, ``need``).  An
    error of ``jobs`` (a store read that fails as a job is made) comes
    after the batch of the jobs before it, as one process runs them."""
    batch: list[tuple[Any, ...]] = []
    size = refs = 0
    it = iter(jobs)
    while True:
        try:
            j = next(it)
        except StopIteration:
            break
        except Exception:
            if batch:
                yield batch     # (run, then the error: in_order keeps it for after)
            raise
        batch.append(j)
        refs += len(j[4])
        try:
            size += os.stat(j[0], follow_symlinks=False).st_size
        except OSError:
            pass
        if size >= BATCH_BYTES or refs >= BATCH_REFS or len(batch) >= BATCH_JOBS:
            yield batch
            batch, size, refs = [], 0, 0
    if batch:
        yield batch


def _batch_job(batch: list[tuple[Any, ...]]) -> tuple[list[_Scan], BaseException | None]:
    """A worker's task: the results of the jobs of one batch, in order (a
    job keeps only the statuses that are not valid: :class:`_Scan`); and the
    exception a job raised, if one did, after the results of the jobs before
    it (the caller yields those first, as the serial loop does)."""
    out: list[_Scan] = []
    for j in batch:
        try:
            sc = _session_job(*j)
        except Exception as exc:  # noqa: BLE001 - re-raised by run_jobs after the results before it
            return out, exc
        out.append(sc)
    return out, None


def _session_job(path: str, sid: str, slug: str, deep: bool,
                 need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int],
                 generation: int, now: float, summaries: str | None = None) -> _Scan:
    """Check one transcript in one pass and validate the references into it.

    Without ``deep`` and without references: the header line and the last
    bytes only.  Otherwise one sequential read from the start to the size at
    open time: lines in referenced spans and event lines are parsed (every
    line with ``deep``), the rest only has its seq read from the bytes.
    ``summaries``: the job of :func:`unused_summaries`, a lineage chunk
    judged for that purpose (the audit's: ``working``), no transcript kept
    whole, whatever its size (as ``--deep`` keeps one past
    ``DEEP_KEEP_BYTES``)."""
    sc = _Scan()
    rel = f"{SESSIONS_DIR}/{sid}.jsonl"
    loc = {"file": rel, "session_id": sid}

    def add(code: str, message: str, severity: str | None = None, **more: Any) -> None:
        sc.raw.append((code, message, severity, {**loc, **more}))

    def refuse_all(reason: str, detail: str) -> None:
        for seqs, digest, purpose in need:
            sc.statuses[(seqs, digest, purpose)] = status_for(reason, detail)

    try:
        fd = open_in_dir(path)
    except OSError as exc:
        if is_link_refusal(exc):
            what = ("sessions/ is" if os.path.islink(os.path.dirname(path))
                    else "transcript is")
            add("session.refused", f"{what} a symbolic link; refused", reason="refused_symlink")
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
                               add, refuse_all, summaries)
            refused = {"session.refused", "session.missing_header"}
            if any(code in refused for code, *_rest in sc.raw):
                sc.max_epoch = None
            elif not sc.epoch_scanned:
                sc.max_epoch = _tail_epoch(fd, st.st_size, sc, data)
        except OSError as exc:
            add("session.unreadable", f"cannot read: {exc.strerror}")
            refuse_all("session_unreadable", exc.strerror or "cannot read")
    finally:
        os.close(fd)
    return sc


def unused_summaries(path: str, sid: str, slug: str, excluded: frozenset[int],
                     generation: int, purpose: str = "working") -> frozenset[int]:
    """The seqs of the ``compact`` events of one transcript whose summary
    the agent does not use: each one ``validate --deep`` reports (a
    ``compact.*`` finding: no lineage, a lineage chunk missing, stale or
    hidden, a lineage malformed, too wide or not cumulative, a prior that
    does not match), each lineage chunk judged for ``purpose`` (``durable``:
    a clear hides nothing; the audit judges them for ``working``); not a
    summary whose cutoff breaks the design's rule (compact.boundary,
    compact.few_raw: the agent uses it), which this job does not check.
    The deep audit's own check of the session, one more read of it
    (``memctl grep``, for a session with a hit in a summary)."""
    import time

    sc = _session_job(path, sid, slug, True, [], excluded, generation, time.time(),
                      summaries=purpose)
    return frozenset(loc["seq"] for code, _message, _severity, loc in sc.raw
                     if code.startswith("compact.") and type(loc.get("seq")) is int)


def _scan_modes(fd: int, st: os.stat_result, sc: _Scan, sid: str, slug: str, deep: bool,
                need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int],
                generation: int, now: float, add: Callable[..., None],
                refuse_all: Callable[[str, str], None],
                summaries: str | None = None) -> bytes | None:
    """Header and tail only (no references, not deep); the in-memory fast path;
    else the line loop.  Returns the file's bytes when they were read whole."""
    if not deep and not need:
        _shallow(fd, st.st_size, sc, sid, slug, st.st_mtime, now, add)
        return None
    data = None
    if deep and summaries is None and st.st_size <= WHOLE_BYTES:   # (parsed in one call)
        data = _read_whole(fd, st.st_size, sc)
    elif not deep and st.st_size <= FAST_LIMIT:
        data = _read_whole(fd, st.st_size, sc)
        mark = len(sc.raw)
        if _fast_spans(data, sc, sid, slug, need, excluded, generation,
                       st.st_mtime, now, add, refuse_all):
            return data
        del sc.raw[mark:]
        sc.statuses.clear()
    _full(fd, st.st_size, sc, sid, slug, deep, need, excluded, generation,
          st.st_mtime, now, add, refuse_all, data, summaries)
    return data


def _report_header(hdr: Any, sid: str, slug: str, add: Callable[..., None],
                   refuse_all: Callable[[str, str], None] | None,
                   line: bytes | None = None) -> str | None:
    """Add the header finding, if any, and return its code when the session
    is refused (``session.missing_header``, or ``session.refused`` for another
    project's transcript, where the readers stop); None for this store's.
    ``line``: the header's bytes (:func:`~lecode_memctl.core.sessions.header_problem`)."""
    prob = header_problem(hdr, sid, slug, line)
    if prob is None:
        return None
    code, reason = prob
    if code == "session.missing_header":
        add(code, "first line is not a session header {seq 0, type session, format 1, "
            "session_id matching the file name}", line=1)
    else:
        from ..rowmodel import quoted

        # (a store name's bytes that are not UTF-8 spelt \xNN, as the
        # finding's project spells them; before 2026-12-07 '\udcff')
        add(code, f"header names project {quoted(str(hdr.get('project'))[:80])}, not this "
            f"store's {quoted(slug)}; refused", reason=reason)
    if refuse_all is not None:
        refuse_all(reason, "session header")
    return code


def _no_header(add: Callable[..., None], refuse_all: Callable[[str, str], None] | None,
               mtime: float, now: float) -> None:
    """A transcript without a complete first line (empty, or its header not
    yet ended by a newline): refused as the readers refuse it
    (``refused_header``); a warning while it changed in the last minute (a
    writer may be creating it), as for a torn tail."""
    ahead = _ahead(mtime, now)
    recent = _recent(mtime, now, ahead)
    add("session.missing_header", "no complete first line: the session header is missing"
        + (" (modified in the last minute: a writer may be creating it)" if recent else "")
        + _future(ahead), WARNING if recent else ERROR, line=1)
    if refuse_all is not None:
        refuse_all("refused_header", "no complete session header")


def _torn(add: Callable[..., None], size: int, offset: int, mtime: float, now: float,
          line: int | None) -> None:
    ahead = _ahead(mtime, now)
    recent = _recent(mtime, now, ahead)
    msg = (f"last line ({size - offset} bytes) has no newline: "
           + ("a writer may be appending (modified in the last minute)" if recent
              else "an interrupted append" + (_future(ahead) or
                                              " (not modified for over a minute)")))
    add("session.torn_tail", msg, WARNING if recent else ERROR, line=line, offset=offset)


def _shallow(fd: int, size: int, sc: _Scan, sid: str, slug: str, mtime: float, now: float,
             add: Callable[..., None]) -> None:
    """The header line and the tail only: a few KiB per transcript."""
    if size == 0:
        _no_header(add, None, mtime, now)
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
            hdr = load_record(head[:nl])   # the readers' loader (a number beyond a double)
        except (orjson.JSONDecodeError, RecordTooLarge):
            hdr = None
        if _report_header(hdr, sid, slug, add, None, head[:nl]) == "session.refused":
            return
    else:
        _no_header(add, None, mtime, now)
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
                generation: int, mtime: float, now: float, add: Callable[..., None],
                refuse_all: Callable[[str, str], None]) -> bool:
    """Default mode over a transcript held in memory: C-speed searches find the
    event lines and the start of each referenced span (lines the core's writer
    produced begin ``{"seq":N,``); only those lines are parsed.  False when
    the file does not look like that (the caller falls back to the line loop)."""
    from ..sessions import UndoState

    loads = load_record   # the session readers' loader (issue 16.5, 16.8)
    JSONDecodeError = (orjson.JSONDecodeError, RecordTooLarge)
    size = len(data)
    end = data.rfind(b"\n") + 1
    if end == 0:
        return False
    nl = data.find(b"\n")
    try:
        hdr = loads(data[:nl])
    except JSONDecodeError:
        hdr = None
    n_lines = data.count(b"\n", 0, end)
    refused = _report_header(hdr, sid, slug, add, refuse_all, data[:nl])
    if refused is not None:
        # (the line loop stops at a header naming another project)
        if end < size and refused != "session.refused":
            _torn(add, size, end, mtime, now, n_lines + 1)
        return True
    if end < size:
        _torn(add, size, end, mtime, now, n_lines + 1)
    last_start = data.rfind(b"\n", 0, end - 1) + 1
    last_seq = fast_seq(data[last_start:end - 1])
    # A transcript whose last seq is not its number of lines less one holds a
    # corrupt line, a gap, or a seq that repeats or goes back: the line loop
    # judges it (a span start found by its bytes would not see the others)
    if last_seq is None or last_seq + 1 != n_lines:
        return False
    if len(need) >= WHOLE_REFS and end <= WHOLE_BYTES:
        # many spans in a small transcript: every line parsed in one call
        # (sessions.records_by_line), when every line is a record whose seq
        # is its line number -- no corrupt line, gap or repeated seq then
        whole = records_by_line(data, end)
        if whole is not None:
            n = len(whole)
            by_seq: dict[int, dict[str, Any]] = {}
            us = UndoState(_visibility_events(data, end, 0, 0))
            for seqs, digest, purpose in need:
                if 0 <= seqs[0] <= seqs[-1] < n:
                    # every line a record whose seq is its number: the span is
                    # the slice _span_status would gather (as in _full)
                    st = span_decision(seqs, digest, whole[seqs[0]:seqs[-1] + 1], purpose,
                                       excluded, generation, us, by_position=True)
                else:
                    if not by_seq:
                        by_seq.update(enumerate(whole))
                    st = _span_status(seqs, digest, purpose, by_seq, [], last_seq, excluded,
                                      generation, us)
                if not st.ok:     # (the audit keeps only these: a valid one is not held)
                    sc.statuses[(seqs, digest, purpose)] = st
            return True
    ranges = sorted({(seqs[0], seqs[-1]) for seqs, _d, _p in need})
    # Each span is read from where the one-reference search finds its first
    # position (sessions.search_lands, which mirrors it in memory), and the
    # visibility events from where it finds the lowest span, as the
    # one-reference read takes them (SpanReads): in a regular transcript
    # that is where they are, and the events before change no span; in one
    # whose records repeat or go back somewhere (which the count of lines
    # above does not always show: a record moved, or written over another)
    # the line loop takes that read's statuses, and so does this pass.
    # Only a regular stretch is read: each line the record whose seq is the
    # next one, to the line after the span; anything else (a corrupt line,
    # a seq that skips, repeats or goes back, a search that would parse a
    # line to go on) is the line loop's to judge.
    # The records read are kept up to WHOLE_BYTES of their lines (as the line
    # loop keeps them); past that, the spans read so far are decided, and
    # from then on each span as soon as it is read, its records dropped once
    # no span left starts at or below them: memory follows the spans'
    # overlap.  (The visibility events are then taken first: the same ones,
    # from the same line.)
    lowest = ranges[0][0]
    probes: dict[int, Any] = {}  # (the lines the searches probed)
    records: dict[int, dict[str, Any]] = {}
    starts: dict[int, int] = {}  # the line start of each record read
    at, nxt = 0, -1              # a line start and its seq once lines were read (else -1)
    kept = 0
    vis: UndoState | None = None  # the visibility events, once past the budget
    decided: dict[tuple[tuple[int, ...], str, str], SourceStatus] = {}   # (those not valid)
    by_range: dict[tuple[int, int], list[tuple[tuple[int, ...], str, str]]] = {}
    todo = dropped = 0           # the first range not decided; the records below dropped
    for r, (lo, hi) in enumerate(ranges):
        if lo > last_seq:
            return False         # (the line loop says whether it is past the end)
        p = search_lands(data, lo, probes)
        if p is None:
            return False
        if lo < nxt:             # overlaps what was read: read on from there
            if p != starts[lo]:
                return False
            start, expected = at, nxt
        else:
            # (never true, as far as the tests and a fuzz of 3,000 transcripts
            # tell: where search_lands lands never moves back as the target
            # grows, and it stops on no line read so far, whose seqs are all
            # below lo.  The guard of that invariant: a line is never read twice.)
            if p < at:
                return False
            start, expected = p, lo
        # the span's lines and the line after it
        while expected <= hi + 1 and start < end:
            q = data.find(b"\n", start, end)
            line = data[start:q]
            try:
                rec = loads(line)
            except JSONDecodeError:
                return False
            if not isinstance(rec, dict) or type(rec.get("seq")) is not int or rec["seq"] != expected:
                return False
            if not line.startswith(b'{"seq":%d,' % expected) \
                    and seq_given_twice(line, expected) is not None:
                return False     # (a corrupt line: the line loop's)
            records[expected] = rec
            starts[expected] = start
            kept += q - start
            expected += 1
            start = q + 1
        at, nxt = start, expected
        if vis is None and kept > WHOLE_BYTES:
            vis = UndoState(_visibility_events(data, end, starts[lowest], lowest))
            for key in need:
                by_range.setdefault((key[0][0], key[0][-1]), []).append(key)
        if vis is not None:
            # ranges[todo:r + 1] are read whole (the later ones start at or past lo)
            for rng in ranges[todo:r + 1]:
                for key in by_range.pop(rng):
                    st = _span_status(*key, records, [], last_seq, excluded, generation, vis)
                    if not st.ok:     # (the audit keeps only these)
                        decided[key] = st
            todo = r + 1
            # (no record read is at nxt or past it: the next start may be far
            # past the transcript's end, a fact citing seq 10**12)
            below = min(ranges[todo][0], nxt) if todo < len(ranges) else nxt
            for s in range(dropped, below):
                records.pop(s, None)
                starts.pop(s, None)
            dropped = max(dropped, below)
    if vis is None:
        # the events from where the search finds the lowest span (read above)
        us = UndoState(_visibility_events(data, end, starts[lowest], lowest))
        for seqs, digest, purpose in need:
            st = _span_status(seqs, digest, purpose, records, [], last_seq, excluded, generation,
                              us)
            if not st.ok:
                sc.statuses[(seqs, digest, purpose)] = st
        return True
    for key in need:          # (in the order of the references, as above)
        if key in decided:
            sc.statuses[key] = decided[key]
    return True


FAST_LIMIT = 256 << 20     # default mode holds a transcript in memory up to this size
WHOLE_REFS = 64            # a transcript cited this often, and at most
WHOLE_BYTES = 4 << 20      # this large, is parsed in one call (records_by_line)


def _full(fd: int, size: int, sc: _Scan, sid: str, slug: str, deep: bool,
          need: list[tuple[tuple[int, ...], str, str]], excluded: frozenset[int], generation: int,
          mtime: float, now: float, add: Callable[..., None], refuse_all: Callable[[str, str], None],
          data: bytes | None = None, summaries: str | None = None) -> None:
    from ..sessions import UndoState

    loads = load_record   # the session readers' loader (issue 16.5, 16.8)
    orjson_loads = orjson.loads
    JSONDecodeError = (orjson.JSONDecodeError, RecordTooLarge)
    needed: set[int] = set()
    for seqs, _d, _p in need:
        needed.update(range(seqs[0], seqs[-1] + 1))
    # The line loop steps over a line no span needs by its first bytes
    # ({"seq":N,), taking it for record N; a corrupt line may begin so too.
    # That is harmless for a prefix that goes forward (N > last_seq) and stays
    # below ``gate``, the first cited position no record has reached: any
    # other line is parsed.  In a regular transcript every seq goes forward
    # and the record ``gate`` comes before any line past it and moves it on
    # (every cited position below ``gate`` is then at most last_seq: no line
    # stepped over is cited).  So a prefix never makes a cited position look
    # below the last record (records_corrupt) when no record is past it
    # (position_missing), nor a cited record look repeated, and a corrupt
    # line whose prefix repeats a seq or goes back is always seen and placed
    # (a line stepped over by its prefix is never such a line).
    cited = sorted(needed)
    gate = cited[0] if cited else _NO_GATE
    # --deep keeps every record of a transcript of at most DEEP_KEEP_BYTES
    # (its lineage chunks are then looked up in memory); of a larger one only
    # those facts cite, as the default mode does, and a lineage chunk's span
    # is read again from the file (_span_records), from the last checkpoint
    # before it: the line start every CHECKPOINT_BYTES or so, with the seq of
    # the record before it.  Memory stays flat in the transcript's size.
    keep_all = deep and summaries is None and size <= DEEP_KEEP_BYTES
    # The records facts cite are kept up to WHOLE_BYTES of their lines (what
    # the default mode already holds parsed of a transcript it parses in one
    # call); past that, none from the seq ``cut`` on, and the spans that reach
    # it are decided from records read again (_reread_spans), from the
    # checkpoints too: memory follows the spans' overlap, not the data.
    budget = WHOLE_BYTES
    kept = 0
    cut = _NO_GATE
    cp_off: list[int] = [0]     # checkpoints: a line start ...
    cp_seq: list[int] = [-1]    # ... and last_seq before it (never decreasing)
    cp_next = (CHECKPOINT_BYTES if deep and not keep_all or not deep and size > budget
               else _NO_GATE)
    records: dict[int, dict[str, Any]] = {}
    corrupt_after: list[int] = []       # the previous record's seq of each corrupt line
    dup_seqs: set[int] = set()
    events: list[dict[str, Any]] = []
    compacts: list[tuple[int, dict[str, Any]]] = []
    compacts_at: list[tuple[int, int, int]] = []   # (line, offset, length), when not kept
    expected = 0
    last_seq = -1
    lineno = 0
    top: tuple[float, int] | None = None     # --deep: (epoch, seq) of the highest epoch
    run = [-1, -1]            # the last corrupt line placed by _sits_after, and its place
    offset = 0
    rest = b""
    refused = False
    # --deep (not grep's job, which reads only the summaries' findings): the
    # records of a type or role the store contract does not have
    shapes = deep and summaries is None

    def event(rec: dict[str, Any], seq: int, lineno: int,
              at: tuple[int, int] | None = None) -> None:
        ev = rec.get("event")
        if ev in ("undo", "redo", "clear"):
            events.append(rec)
            if deep and ev != "clear" and bad_target(rec):
                add("session.bad_target", f"{ev} target {_short(rec.get('target'))} is not "
                    f"[first, last] with 0 <= first <= last < {seq} (this event's seq)",
                    line=lineno, seq=seq)
        elif deep and ev == "compact":
            if keep_all or at is None:
                compacts.append((lineno, rec))
            else:       # (a large transcript's: read again when checked)
                compacts_at.append((lineno, *at))
        elif deep and ev == LEARNING_EVENT:
            _learning(rec, add)
        elif shapes and ev not in EVENT_NAMES:   # (a tuple: an event name may be a list)
            add("session.unknown_event", f"seq {seq} is an event named {_short(ev)}, none the "
                "store contract lists: no reader applies it", line=lineno, seq=seq)

    def shape(rec: dict[str, Any], seq: int, lineno: int) -> None:
        """--deep, a record after the first line: one of a type the store
        contract does not have (a second header included), or a message of
        a role it does not have (2026-12-07: validate --deep --strict
        passed them)."""
        kind = rec.get("type")
        if kind == "message":
            role = rec.get("role")
            if type(role) is not str or role not in _ROLE_SET:
                what = _short(role) if "role" in rec else "(none)"
                add("session.unknown_role", f"seq {seq} is a message whose role {what} is not "
                    "user, assistant, tool or system", line=lineno, seq=seq)
        elif kind == "session":
            from ..rowmodel import quoted

            project = rec.get("project")
            if project != slug:
                reason = "other_project"
                said = (f"naming project {quoted(str(project)[:80])}, not this store's "
                        f"{quoted(slug)}: another project's transcript spliced in")
            elif rec.get("session_id") != sid:
                reason = "other_session"
                said = (f"naming session {_short(rec.get('session_id'))}: another session's "
                        "transcript spliced in")
            else:
                reason = "repeated"
                said = "this session's header again"
            add("session.second_header", f"line {lineno} (seq {seq}) is a second session "
                f"header, {said}; only the first one decides the session", line=lineno,
                seq=seq, reason=reason)
        elif kind != "event":
            what = _short(kind) if "type" in rec else "(none)"
            add("session.unknown_type", f"seq {seq} is a record of type {what}, neither a "
                "message nor an event: no reader takes it for either", line=lineno, seq=seq)

    def ignored(rec: dict[str, Any], seq: int, lineno: int) -> None:
        """A record that parses as an event from a line the event scans do
        not read (sessions.event_line): applied by no reader, reported."""
        if deep:
            add("session.ignored_event", f"seq {seq} parses as an event ({_short(rec.get('event'))}) "
                "but its line is not read as one (its type written with JSON escapes, or a "
                "prefix naming another type): memctl and lecode do not apply it",
                line=lineno, seq=seq)

    # --deep of a transcript read whole: every line parsed in one call when
    # every line is a record whose seq is its line number (records_by_line):
    # no corrupt line and no seq gap to report then, only the header, the
    # events and a torn tail; anything else takes the line loop
    end = data.rfind(b"\n") + 1 if deep and data is not None else 0
    whole = (records_by_line(data, end) if end and size <= WHOLE_BYTES and data is not None
             else None)
    if whole is not None:
        code = _report_header(whole[0], sid, slug, add, refuse_all)
        if code == "session.refused":
            return
        refused = code is not None
        # (records, by seq, is filled from whole only for a span past its end:
        # a span within it is its slice, status below)
        # (the records are dicts: their types in one map, the events found by
        # list.index, which compares as == does, not a Python step per record)
        types = list(map(dict.get, whole, itertools.repeat("type")))
        read = None
        for n in _positions(types, "event"):
            if read is None:
                read = _event_lines(data, end, whole) if data is not None else set()
            if n in read:
                event(whole[n], n, n + 1)
            else:
                ignored(whole[n], n, n + 1)
        if shapes:
            roles = list(map(dict.get, whole, itertools.repeat("role")))
            for n in range(1, len(whole)):
                kind = types[n]
                if kind != "event" and (kind != "message" or type(roles[n]) is not str
                                        or roles[n] not in _ROLE_SET):
                    shape(whole[n], n, n + 1)
        if summaries is None:
            for r in whole:
                e = epoch_number(r.get("epoch"))
                if e is not None and (top is None or e > top[0]) and _generated_message(r):
                    top = (e, r["seq"])
        last_seq, lineno = len(whole) - 1, len(whole)
        offset = end
        rest = data[end:] if data is not None else b""
        chunks: Iterable[bytes] = ()
    else:
        chunks = _chunks(fd, size, sc) if data is None else (data,)
    pend: list[bytes] = []      # the reads after ``rest`` of a line longer than a read
    for chunk in chunks:
        if rest:
            if b"\n" not in chunk:
                pend.append(chunk)  # (joined once, not copied again at every read)
                continue
            chunk = b"".join((rest, *pend, chunk))
            pend.clear()
        parts = chunk.split(b"\n")
        del chunk                   # (the lines are their own copies: a huge one is held once)
        rest = parts.pop()
        for line in parts:
            lineno += 1
            if offset >= cp_next:
                cp_off.append(offset)
                cp_seq.append(last_seq)
                cp_next = offset + CHECKPOINT_BYTES
            offset += len(line) + 1
            if lineno == 1:
                try:
                    hdr = loads(line)
                except JSONDecodeError:
                    hdr = None
                code = _report_header(hdr, sid, slug, add, refuse_all, line)
                if code == "session.refused":
                    return
                refused = code is not None
            rec = None
            if not deep:
                seq = fast_seq(line)
                if seq is not None and last_seq < seq < gate and b'"event"' not in line:
                    last_seq, expected = seq, seq + 1
                    continue
            try:
                try:
                    rec = orjson_loads(line)   # (load_record's first step, without its call)
                except (orjson.JSONDecodeError, MemoryError) as first:
                    _no_memory(first, line)
                    rec = loads(line)          # its fallbacks, and RecordTooLarge
            except JSONDecodeError as exc:
                corrupt_after.append(last_seq if deep or last_seq + 1 not in needed
                                     else _sits_after(run, fd, lineno, offset - len(line) - 1))
                too_large = isinstance(exc, RecordTooLarge)
                if deep:
                    if too_large:   # (decoding it would need the memory again)
                        add("session.corrupt_line", f"line {lineno} cannot be parsed: {exc} "
                            f"({TOO_LARGE}, not corrupt)", line=lineno, reason=TOO_LARGE)
                    else:
                        try:
                            if not line.isascii():     # (ASCII is UTF-8: no copy to check it)
                                line.decode("utf-8")
                            reason = NOT_JSON
                        except UnicodeDecodeError:
                            reason = INVALID_UTF8
                        add("session.corrupt_line", f"line {lineno} is corrupt ({reason})",
                            line=lineno, reason=reason)
                # Unusable, but a record for placing the lines after it when
                # its first 64 bytes give its seq: a too_large line, and one
                # over 1 MiB (too_large or not) when it ends as an object does
                # (sessions.huge_seq), as the range reads judge it without
                # reading it whole
                seq = (fast_seq(line[:64]) if too_large and len(line) <= HUGE_LINE
                       else huge_seq(len(line), line[:64], line[-64:]))
                if seq is None:
                    continue
                run[0] = -1        # (the corrupt lines after it sit after it)
                # (its seq counts, checked below as a record's: no false
                # seq_gap after it; rec stays None: there is nothing to keep)
            else:
                seq = rec.get("seq") if isinstance(rec, dict) else None
                if type(seq) is not int or seq < 0 or (
                        not line.startswith(b'{"seq":%d,' % seq)
                        and seq_given_twice(line, seq) is not None):
                    corrupt_after.append(last_seq if deep or last_seq + 1 not in needed
                                         else _sits_after(run, fd, lineno,
                                                          offset - len(line) - 1))
                    if deep:
                        reason = "not_object" if not isinstance(rec, dict) else "no_seq"
                        add("session.corrupt_line", f"line {lineno} is corrupt ({reason})",
                            line=lineno, reason=reason)
                    # a line over 1 MiB is placed by its first and last bytes,
                    # whether or not it parses, as the range reads place it
                    # (a seq given twice, say): as above
                    seq = huge_seq(len(line), line[:64], line[-64:])
                    if seq is None:
                        continue
                    run[0] = -1
                    rec = None
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
            if seq >= gate:
                i = bisect_right(cited, seq)
                gate = cited[i] if i < len(cited) else _NO_GATE
            if rec is None:
                continue           # a too_large or huge line: placed, not kept
            if deep:
                e = epoch_number(rec.get("epoch"))
                if e is not None and (top is None or e > top[0]) and _generated_message(rec):
                    top = (e, seq)
            if keep_all:
                records.setdefault(seq, rec)
            elif seq in needed and seq < cut and seq not in records:
                kept += len(line)
                if kept > budget:
                    cut = seq      # (seqs go forward where records decide: else SpanReads)
                else:
                    records[seq] = rec
            kind = rec.get("type")
            if kind == "event":
                if event_line(line):
                    event(rec, seq, lineno, (offset - len(line) - 1, len(line)))
                elif deep:
                    ignored(rec, seq, lineno)
            elif shapes:
                # a cheap check first, as the one-call parse's above: only a
                # record that may be flagged reaches shape (a message of a
                # role the contract has is most of them; 2026-12-07, every
                # record reached it: +14% to a 40 MB transcript's deep audit)
                try:
                    fine = kind == "message" and rec.get("role") in _ROLE_SET
                except TypeError:      # (an unhashable role: a list or an object)
                    fine = False
                if not fine and lineno > 1:
                    shape(rec, seq, lineno)
    if lineno == 0:
        _no_header(add, refuse_all, mtime, now)
        refused = True
    if deep:
        # every line parsed: the highest epoch of every generated message (the
        # tail's answer when epochs never decrease, as lecode writes them);
        # grep's job (``summaries``) has no use for it
        sc.max_epoch, sc.epoch_scanned = (top if summaries is None else None), True
    if rest:
        _torn(add, size, offset, mtime, now, lineno + 1)
    us = UndoState(events)
    corrupt_after.sort()      # (each span looks its corrupt lines up: _span_status)
    memo: dict[tuple[tuple[int, ...], str, str], SourceStatus] = {}
    # Records whose seq repeats or goes back: no rule of this loop's own
    # decides the spans of such a transcript, but the one-reference read
    # (sessions.SpanReads), so that the audit, the engine and the agent's
    # recall give each span one status (docs/FORMAT.md): the transcript's
    # bytes up to ``size``, through a second descriptor, its visibility
    # events read once from the lowest position asked, as the engine reads
    # them for a group of references.
    reads: SpanReads | None = None
    if cut != _NO_GATE and not dup_seqs and not refused:
        # the spans that reach ``cut``, decided in one forward pass
        memo.update(_reread_spans(fd, sc, data, cp_off, cp_seq, offset,
                                  [k for k in need if k[0][-1] >= cut], corrupt_after,
                                  last_seq, excluded, generation, us))

    def status(seqs: tuple[int, ...], digest: str, purpose: str) -> SourceStatus:
        nonlocal reads
        key = (seqs, digest, purpose)
        if key not in memo:
            if dup_seqs:
                if reads is None:
                    reads = SpanReads(_File(os.dup(fd), sid, "", size),
                                      min((s[0] for s, _d, _p in need), default=0),
                                      excluded, generation)
                memo[key] = reads.status(seqs, digest, purpose)
            elif whole is not None and 0 <= seqs[0] <= seqs[-1] < len(whole):
                # every line a record whose seq is its number, none corrupt or
                # repeated: the span is the slice _span_status would gather
                memo[key] = span_decision(seqs, digest, whole[seqs[0]:seqs[-1] + 1], purpose,
                                          excluded, generation, us, by_position=True)
            else:
                if whole is not None and not records:
                    records.update(enumerate(whole))
                span = records
                if deep and not keep_all and (
                        seqs[-1] >= cut or not needed.issuperset(range(seqs[0], seqs[-1] + 1))):
                    # (a lineage chunk of a large transcript: its records were
                    # not kept, past the budget or not cited, every seq goes
                    # forward: read again)
                    span = _span_records(fd, sc, cp_off, cp_seq, offset, seqs[0], seqs[-1])
                memo[key] = _span_status(seqs, digest, purpose, span, corrupt_after,
                                         last_seq, excluded, generation, us)
        return memo[key]

    try:
        if not refused:
            for seqs, digest, purpose in need:
                st = status(seqs, digest, purpose)
                if not st.ok:
                    sc.statuses[(seqs, digest, purpose)] = st
        if deep:
            rec_at: Callable[[int], Any] | None = None
            if summaries is not None:
                pass                # (grep's job: which summaries the agent uses)
            elif whole is not None:
                def rec_at(pos: int) -> Any:
                    return whole[pos] if 0 <= pos < len(whole) else None
            elif keep_all:
                rec_at = records.get
            else:
                rec_at = _Near(lambda lo, hi: _span_records(fd, sc, cp_off, cp_seq, offset,
                                                            lo, hi)).get
            _compaction(compacts if not compacts_at
                        else _records_at(fd, sc, compacts_at), sid, status, add,
                        summaries or "working", events, rec_at)
    finally:
        if reads is not None:
            reads.f.close()


_NO_GATE = 1 << 63     # (no cited position left: every line may be stepped over)
DEEP_KEEP_BYTES = READ_CHUNK   # --deep keeps the records of a transcript up to this size
CHECKPOINT_BYTES = 64 << 10    # ... and of a larger one, a checkpoint every this many bytes


class _Near:
    """The record at a seq of a transcript --deep did not keep, read again in
    blocks of BLOCK positions (``fetch(lo, hi)``: the records of ``lo..hi``),
    the last few blocks kept: a compaction's cutoff asks about a few
    positions around its lineage's end (:func:`_cutoff`)."""

    BLOCK = 32
    KEEP = 8

    def __init__(self, fetch: Callable[[int, int], dict[int, dict[str, Any]]]) -> None:
        self.fetch = fetch
        self.blocks: dict[int, dict[int, dict[str, Any]]] = {}

    def get(self, pos: int) -> dict[str, Any] | None:
        b = pos // self.BLOCK
        got = self.blocks.get(b)
        if got is None:
            if len(self.blocks) >= self.KEEP:
                self.blocks.pop(next(iter(self.blocks)))
            got = self.blocks[b] = self.fetch(b * self.BLOCK, b * self.BLOCK + self.BLOCK - 1)
        return got.get(pos)


def _span_records(fd: int, sc: _Scan, cp_off: list[int], cp_seq: list[int], end: int,
                  lo: int, hi: int) -> dict[int, dict[str, Any]]:
    """The records whose seq is in ``lo..hi`` of the complete lines before
    byte ``end``, read again from the file for ``--deep``'s line loop, which
    did not keep them: what it would have kept, in a transcript whose seqs
    never repeat or go back (else SpanReads decides).  Read from the last
    checkpoint (``cp_off``, ``cp_seq``: a line start and the seq of the last
    record before it) below ``lo`` to the first record past ``hi``; a line
    is a record exactly as the line loop takes one (:func:`_line_record`)."""
    i = max(bisect_left(cp_seq, lo) - 1, 0)
    out: dict[int, dict[str, Any]] = {}
    for line in _lines_at(fd, sc, cp_off[i], end):
        got = _line_record(line)
        if got is None:
            continue
        seq, rec = got
        if seq > hi:
            break
        if seq >= lo:
            out.setdefault(seq, rec)
    return out


def _reread_spans(fd: int, sc: _Scan, data: bytes | None, cp_off: list[int], cp_seq: list[int],
                  end: int, spans: list[tuple[tuple[int, ...], str, str]], corrupt_after: list[int],
                  last_seq: int, excluded: frozenset[int], generation: int, us: Any
                  ) -> dict[tuple[tuple[int, ...], str, str], SourceStatus]:
    """The statuses of ``spans``, whose records the default mode's line loop
    did not all keep (past its budget), from records read again: from
    ``data`` when the transcript is in memory, else from the file to byte
    ``end``, in one forward pass over the spans sorted by their start, from
    the checkpoint below the first (a jump to the checkpoint below the next
    when none is open and it is past where the pass is).  A record is kept
    only while an open span holds it, and a span is decided
    (:func:`_span_status`) once a record past its end, or the end, is read:
    memory follows the spans' overlap.  A line is a record exactly as the
    line loop takes one (:func:`_line_record`); its seqs go forward (else
    SpanReads decides), so a span gets the records the loop would have kept,
    as :func:`_span_records` gives them."""
    import heapq
    from collections import deque

    by_range: dict[tuple[int, int], list[tuple[tuple[int, ...], str, str]]] = {}
    for key in spans:
        by_range.setdefault((key[0][0], key[0][-1]), []).append(key)
    ranges = sorted(by_range)
    out: dict[tuple[tuple[int, ...], str, str], SourceStatus] = {}
    buf: dict[int, dict[str, Any]] = {}
    order: deque[int] = deque()          # buf's seqs, in order (they go forward)
    by_hi: list[tuple[int, int]] = []    # the open spans (hi, lo), by their end ...
    by_lo: list[tuple[int, int]] = []    # ... and (lo, hi), by their start (lazily)
    done: set[tuple[int, int]] = set()
    i = 0                                # the next span to open

    def decide(upto: int) -> None:
        """Decide the open spans that end before ``upto``; drop the records
        below every open span's start."""
        while by_hi and by_hi[0][0] < upto:
            hi, lo = heapq.heappop(by_hi)
            done.add((lo, hi))
            for key in by_range.pop((lo, hi)):
                out[key] = _span_status(key[0], key[1], key[2], buf, corrupt_after, last_seq,
                                        excluded, generation, us)
            while by_lo and (by_lo[0][0], by_lo[0][1]) in done:
                done.discard(heapq.heappop(by_lo))
            low = by_lo[0][0] if by_lo else _NO_GATE
            while order and order[0] < low:
                del buf[order.popleft()]

    while i < len(ranges):
        k = max(bisect_left(cp_seq, ranges[i][0]) - 1, 0)
        jumped = False
        for at, line in _lines_from(fd, sc, data, cp_off[k], end):
            got = _line_record(line)
            if got is None:
                continue
            seq, rec = got
            while i < len(ranges) and ranges[i][0] <= seq:
                lo, hi = ranges[i]
                heapq.heappush(by_hi, (hi, lo))
                heapq.heappush(by_lo, (lo, hi))
                i += 1
            decide(seq)
            if by_hi:
                if seq not in buf:
                    buf[seq] = rec
                    order.append(seq)
            elif i == len(ranges):
                break
            elif cp_off[max(bisect_left(cp_seq, ranges[i][0]) - 1, 0)] > at:
                jumped = True        # (nothing open: on from the checkpoint below the next)
                break
        if not jumped:
            break
    # the end: the spans still open, and those that open past the last record
    for lo, hi in ranges[i:]:
        heapq.heappush(by_hi, (hi, lo))
        heapq.heappush(by_lo, (lo, hi))
    decide(_NO_GATE)
    return out


def _lines_from(fd: int, sc: _Scan, data: bytes | None, pos: int, end: int
                ) -> Iterator[tuple[int, bytes]]:
    """(line start, line without its newline) from the line start ``pos`` to
    ``end`` (just after a newline): of ``data`` when the transcript is in
    memory, else read from the file in growing pieces (:func:`_lines_at`)."""
    if data is not None:
        while pos < end:
            q = data.find(b"\n", pos, end)
            if q < 0:
                return
            yield pos, data[pos:q]
            pos = q + 1
        return
    for line in _lines_at(fd, sc, pos, end):
        yield pos, line
        pos += len(line) + 1


def _records_at(fd: int, sc: _Scan, where: list[tuple[int, int, int]]
                ) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each line at (line number, offset, length)
    of ``where``, a record the line loop kept, read and parsed again (one
    that no longer is, the file changed since, is left out)."""
    for lineno, off, n in where:
        line = os.pread(fd, n, off)
        sc.bytes_read += len(line)
        got = _line_record(line)
        if got is not None:
            yield lineno, got[1]


def _lines_at(fd: int, sc: _Scan, pos: int, end: int) -> Iterator[bytes]:
    """The lines (without their newline) from the line start ``pos`` to
    ``end`` (just after a newline), read in growing pieces."""
    rest = b""
    block = CHECKPOINT_BYTES
    while pos < end:
        got = os.pread(fd, min(block, end - pos), pos)
        if not got:
            return
        sc.bytes_read += len(got)
        pos += len(got)
        parts = (rest + got if rest else got).split(b"\n")
        rest = parts.pop()
        yield from parts
        block = min(block * 2, READ_CHUNK)


def _no_memory(exc: Exception, line: bytes) -> None:
    """RecordTooLarge, as ``load_record`` says it, when ``orjson.loads`` of
    ``line`` failed for want of memory: without calling it again, which
    under an address-space limit crashed the process (SIGSEGV in orjson on
    a 300 MiB line, the second attempt)."""
    if isinstance(exc, MemoryError) or str(exc).startswith("Not enough memory"):
        raise RecordTooLarge(f"a {len(line)}-byte record is too large for the memory at hand") \
            from None


def _line_record(line: bytes) -> tuple[int, dict[str, Any]] | None:
    """(seq, record) for a line the line loop of :func:`_full` keeps as a
    record, else None: the same parse (``load_record``, which says
    RecordTooLarge at orjson's first want of memory, never parsing again)
    and the same test of its seq (``record_seq``)."""
    try:
        rec = load_record(line)
    except (orjson.JSONDecodeError, RecordTooLarge):
        return None
    seq = record_seq(rec, line)
    return None if seq is None else (seq, rec)


def _event_lines(data: bytes, end: int, whole: list[dict[str, Any]]) -> set[int]:
    """The numbers of the lines of ``data[:end]`` that the event scans read
    (``sessions.event_line``), in a transcript whose every line is the
    record whose seq is its number, ``whole`` (``records_by_line``): a line's
    number is the seq of the record it parses to.  That is N, for a line
    beginning ``{"seq":N,``, when the line holds the bytes ``"seq"`` only
    there and no ``\\u`` escape (which could spell it), or when it is
    ``orjson.dumps`` of record N (then it parses to that record, whose seq
    is N); else the line is parsed again.  The lines are found by their
    mark (:func:`_marked_lines`)."""
    out: set[int] = set()
    for line in _marked_lines(data, end):
        if event_line(line):
            seq = fast_seq(line)
            if seq is not None and not (
                    line.count(b'"seq"') == 1 and b"\\u" not in line
                    or seq < len(whole) and _dumps(whole[seq]) == line):
                seq = None
            out.add(orjson.loads(line)["seq"] if seq is None else seq)
    return out


def _visibility_events(data: bytes, end: int, start: int, lowest: int) -> list[dict[str, Any]]:
    """The undo, redo and clear events of ``data[start:end]`` (``start`` a
    line start) whose seq is ``lowest`` or more, as the one-reference read
    takes them from where it finds ``lowest`` (``sessions._events_from``):
    records (an object with a seq) whose type is event, read from the lines
    holding the bytes ``"event"`` whose prefix names no other type
    (``not_an_event``)."""
    events: list[dict[str, Any]] = []
    for line in _marked_lines(data, end, start):
        try:
            # (a line whose prefix names another type is no event: event_line)
            rec = None if not_an_event(line[:64]) else load_record(line)
        except (orjson.JSONDecodeError, RecordTooLarge):
            continue
        if (isinstance(rec, dict) and rec.get("type") == "event"
                and rec.get("event") in ("undo", "redo", "clear")
                and (seq := record_seq(rec, line)) is not None and seq >= lowest):
            events.append(rec)
    return events


def _marked_lines(data: bytes, end: int, start: int = 0) -> Iterator[bytes]:
    """The lines of ``data[start:end]`` (``start`` a line start, ``end`` just
    after a newline) holding the bytes ``"event"``, each once, in order,
    without its newline: found by ``MarkFinder`` (``memchr`` of the mark's
    ``v`` while that is rare)."""
    marks = MarkFinder(b'"event"', data)
    marks.new_block(end)
    pos = marks.find(data, start, end)
    while pos >= 0:
        ls = data.rfind(b"\n", 0, pos) + 1
        le = data.find(b"\n", pos, end)
        yield data[ls:le]
        pos = marks.find(data, le, end)


def _dumps(rec: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps(rec)
    except orjson.JSONEncodeError:
        return None


def _positions(values: list[Any], value: Any) -> Iterator[int]:
    """The indexes of ``values`` whose item equals ``value``, in order."""
    i = 0
    while True:
        try:
            i = values.index(value, i)
        except ValueError:
            return
        yield i
        i += 1


def _sits_after(run: list[int], fd: int, lineno: int, off: int) -> int:
    """The seq of the record before the corrupt line ``lineno`` at byte
    ``off``, for the default mode's line loop, which steps over a line no
    span needs by its first bytes: the line that gave ``last_seq`` may be
    the first half of a record split in two (``{"seq":N,`` and no record),
    which sits, as ``--deep`` and the range reads place it, after the record
    before it (sessions.record_before; -1 when none).  Asked only where it
    matters: when the position after ``last_seq`` is cited (a line the loop
    parsed is never such a half: it is a record or counted corrupt).  A run
    of consecutive corrupt lines sits after one record, so it is looked for
    once per run: ``run`` is [the last corrupt line placed, its place]."""
    if run[0] != lineno - 1:
        c = record_before(fd, off)
        run[1] = c if c is not None else -1
    run[0] = lineno
    return run[1]


def _span_status(seqs: tuple[int, ...], digest: str, purpose: str, records: dict[int, dict[str, Any]],
                 corrupt_after: list[int], last_seq: int,
                 excluded: frozenset[int], generation: int, us: Any) -> SourceStatus:
    """The same decision as ``SessionStore.validate_many``, from one pass's data:
    the span's own corruption here, then ``sessions.span_decision``.
    ``corrupt_after`` is sorted: a span finds its corrupt lines by a binary
    search, not by a walk over every corrupt line of the transcript (once per
    span, that was spans x corrupt lines)."""
    lo, hi = seqs[0], seqs[-1]
    if corrupt_after:
        # a corrupt line inside the span (placed after lo..hi-1), or right
        # before it (after lo-1) when the span's first record is not there
        i = bisect_left(corrupt_after, lo - 1)
        n = len(corrupt_after)
        if i < n and corrupt_after[i] == lo - 1 and lo not in records:
            return status_for("records_corrupt", "a corrupt line in the span")
        i = bisect_left(corrupt_after, lo, i)
        if i < n and corrupt_after[i] < hi:
            return status_for("records_corrupt", "a corrupt line in the span")
    got = list(map(records.get, range(lo, hi + 1)))
    if None in got:
        s = lo + got.index(None)
        if s > last_seq:
            return status_for("position_missing", f"the transcript ends at seq {last_seq}", s)
        return status_for("records_corrupt", f"seq {s} is missing from the span")
    # (records holds each record under its own seq: got is by position)
    return span_decision(seqs, digest, cast("list[dict[str, Any]]", got), purpose, excluded,
                         generation, us, by_position=True)


def _learning(rec: dict[str, Any], add: Callable[..., None]) -> None:
    seq = rec.get("seq")
    for code, message, key in learning_problems(rec):
        if key is None:
            add(code, message, seq=seq)
        else:
            add(code, message, seq=seq, key=key)


def _short(v: Any) -> str:
    """A parsed JSON value in at most 60 characters, for a message."""
    try:
        text = orjson.dumps(v).decode()
    except orjson.JSONEncodeError:      # nested deeper than orjson writes
        text = f"<a deeply nested {type(v).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _not_cumulative(seq: Any, lineage: list[Any], prev_lineage: Any,
                    spans: list[tuple[int, int] | None]) -> tuple[str, str] | None:
    """(reason, message) when a lineage is not exactly cumulative: it starts with the
    previous compact event's lineage (chunk for chunk), holds at least one chunk,
    and its chunks are in order, disjoint and before the event.  ``spans`` has the
    (first, last) of each chunk, None for one already reported (malformed, too wide)."""
    if not lineage:
        if isinstance(prev_lineage, list) and prev_lineage:
            return "not_cumulative", (f"lineage is empty; it must start with the {len(prev_lineage)} "
                                      "chunk(s) of the previous compact event's lineage")
        return "empty", "lineage is empty: a summary covers at least one chunk"
    if isinstance(prev_lineage, list) and lineage[:len(prev_lineage)] != prev_lineage:
        return "not_cumulative", ("lineage does not start with the previous compact event's "
                                  f"lineage ({len(prev_lineage)} chunk(s)), chunk for chunk")
    last = -1
    for span in spans:
        if span is None:
            continue
        lo, hi = span
        if lo <= last:
            return "overlap", f"lineage chunk {lo}..{hi} is not after the chunk before it (ends at {last})"
        last = hi
        if type(seq) is int and hi >= seq:
            return "after_event", f"lineage chunk {lo}..{hi} is not before the compact event (seq {seq})"
    return None


class _Before:
    """Which positions the undo, redo and clear events before a seq hide:
    what a summary's lineage could name when it was written.  A chunk is
    asked about the undo and redo events whose target overlaps its span
    alone (found once per chunk), and its answer kept by how many of them
    come before the seq: lineage is cumulative, and a chunk carried from
    one compact event to the next with no such event between them is
    answered by a lookup; a clear by a binary search."""

    def __init__(self, events: list[dict[str, Any]], purpose: str) -> None:
        from ..sessions import undo_target

        self.purpose = purpose
        self.clears = sorted(e["seq"] for e in events
                             if e.get("event") == "clear" and type(e.get("seq")) is int)
        # (seq, event, first, last) of each undo or redo with a target, as
        # UndoState applies it (to the positions before the event)
        self.targets: list[tuple[int, dict[str, Any], int, int]] = []
        for e in events:
            seq = e.get("seq")
            if e.get("event") in ("undo", "redo") and type(seq) is int:
                t = undo_target(e)
                if t is not None and t[0] <= min(t[1], seq - 1):
                    self.targets.append((seq, e, t[0], min(t[1], seq - 1)))
        self.targets.sort(key=lambda t: t[0])
        self.touching: dict[Any, tuple[list[int], list[dict[str, Any]]]] = {}
        self.memo: dict[tuple[Any, int], str | None] = {}

    def hidden(self, seqs: tuple[int, ...], before: Any, key: Any = None) -> str | None:
        """``undone`` or ``cleared`` when an event before ``before`` hides a
        position of ``seqs`` (sorted), else None; ``key`` names the chunk
        (its answers kept), None for none."""
        if type(before) is not int or not seqs or not (self.targets or self.clears):
            return None     # (no undo, redo or clear: asked once per chunk of every event)
        if self.targets:
            lo, hi = seqs[0], seqs[-1]
            k = key if key is not None else (lo, hi, len(seqs), seqs)
            near = self.touching.get(k)
            if near is None:
                got = [(t[0], t[1]) for t in self.targets if t[2] <= hi and t[3] >= lo]
                near = self.touching[k] = ([g[0] for g in got], [g[1] for g in got])
            n = bisect_left(near[0], before)
            if n:
                if (k, n) not in self.memo:
                    from ..sessions import UndoState  # (once a chunk and count, not a call)

                    us = UndoState(near[1][:n])
                    self.memo[(k, n)] = next(("undone" for pos in seqs if us.state(pos) == "undo"),
                                             None)
                if self.memo[(k, n)] is not None:
                    return self.memo[(k, n)]
        if self.purpose == "working" and self.clears:
            i = bisect_left(self.clears, before)
            if i and seqs[0] < self.clears[i - 1]:
                return "cleared"
        return None

    def inert(self, chunks: list[tuple[Any, tuple[int, ...]]], undated: bool, at: Any) -> bool:
        """Whether a compact event whose lineage chunks are ``chunks`` ((key,
        seqs) each) was inert at seq ``at``: ``undated`` (a chunk hidden by
        an exclusion or an epoch), or a chunk hidden by an undo or clear
        before ``at``."""
        return undated or any(self.hidden(c, at, k) is not None for k, c in chunks)


def _compaction(compacts: Iterable[tuple[int, dict[str, Any]]], sid: str,
                status: Callable[[tuple[int, ...], str, str], SourceStatus],
                add: Callable[..., None], purpose: str = "working",
                events: list[dict[str, Any]] | None = None,
                rec_at: Callable[[int], Any] | None = None) -> None:
    """Prior chain, cumulative lineage and each chunk's status, per compact event.
    An event without a ``lineage`` key predates lineage: inert, reported at info,
    and left out of the chain (lecode rebuilds from raw history: the next event's
    prior is null, or the previous event with lineage).  So is, for the chain,
    one that was inert when the next was written (``events``, the undo, redo
    and clear events, tell which: a chunk hidden by one before the next event;
    a forget's exclusion or epoch has no place in the transcript, and is taken
    as before it): the next event's prior is null or that event, and its
    lineage need not start with that event's.  A chunk hidden by an undo or
    clear before its own event was never visible to lecode's recheck before
    the append: compact.lineage_stale (undone, cleared), not compact.inert.
    ``rec_at`` (the record at a seq, or None) gives the records around each
    lineage's end for the design's rule of the cutoff (:func:`_cutoff`:
    compact.boundary, compact.few_raw), checked for an event whose lineage
    is otherwise sound; None (grep's job) checks no cutoff."""
    from ..sourceref import SourceRef

    before = _Before(events or [], purpose)
    prev: dict[str, Any] | None = None
    # the well-formed chunks of ``prev`` (their seqs), and whether one is
    # hidden by an exclusion or an epoch (no seq tells when that began)
    prev_chunks: list[tuple[Any, tuple[int, ...]]] = []   # (quick key or None, seqs)
    prev_undated = False
    seen: dict[tuple[Any, ...], tuple[str, str, str | None, tuple[int, ...] | None]] = {}
    # (seqs, span) of each well-formed chunk by its quick key: lineage is
    # cumulative, so the same chunks come back in every later compact event
    # (O(events^2) chunks a session); one equal to a chunk seen costs a list
    # compare in C, not a Python loop over its seqs
    chunk_spans: dict[tuple[Any, ...], tuple[list[Any], tuple[int, int]]] = {}
    for _line, rec in compacts:
        seq = rec.get("seq")
        if "lineage" not in rec:
            add("compact.legacy", "compact event without lineage (written before lineage "
                "existed): inert, lecode replays raw history and rebuilds it", seq=seq)
            continue
        prev_lineage = prev.get("lineage") if prev is not None else None
        try:
            want = None if prev is None else {"seq": prev.get("seq"), "digest": canonical_digest([prev])}
        except RecordsUndigestible as exc:
            want = {"seq": exc.seq, "digest": None}   # nothing can match it
        got = rec.get("prior")
        # whether ``prev`` was inert when this event was written (asked of
        # its chunks only where the chain breaks, once)
        p_chunks, p_undated = prev_chunks, prev_undated
        p_inert: bool | None = None
        if got != want and prev is not None and got is None:
            p_inert = before.inert(p_chunks, p_undated, seq)
            if p_inert:
                want = None     # (the previous one inert: rebuilt as if first)
        if got != want:
            if want is None:
                msg = "first compact event has a prior, expected null"
            elif got is None:
                msg = f"prior is null, expected the compact event at seq {want['seq']}"
            else:
                msg = f"prior does not match the compact event at seq {want['seq']} (seq and digest)"
            add("compact.prior_mismatch", msg, seq=seq)
        had_prev = prev is not None
        prev = rec
        prev_chunks = []
        prev_undated = False
        lineage = rec.get("lineage")
        if not isinstance(lineage, list):
            add("compact.lineage_stale", "lineage is not a list of source references",
                seq=seq, reason="invalid_ref")
            continue
        # every chunk that is well formed, of this session, and not missing
        # or stale, as (quick key, seqs, label): was it visible at this event
        kept: list[tuple[Any, tuple[int, ...], str]] = []
        bad: tuple[str, str | None] | None = None       # (message, reason)
        inert: tuple[str, str | None] | None = None
        stale_n = 0
        spans: list[tuple[int, int] | None] = []
        for chunk in lineage:
            seqs = chunk.get("seqs") if isinstance(chunk, dict) else None
            # lineage is cumulative: a chunk seen in an earlier compact event is decided once
            quick = None
            if (type(seqs) is list and seqs and isinstance(chunk.get("digest"), str)
                    and isinstance(chunk.get("session_id"), str)
                    and type(seqs[0]) is int and type(seqs[-1]) is int):
                # (a malformed chunk is not memoised: it is reported where it stands)
                quick = (chunk["session_id"], chunk["digest"], seqs[0], seqs[-1], len(seqs))
                known = chunk_spans.get(quick)
                # (equal, and ints only: 1 == 1.0 == True, but only ints make a span)
                if known is not None and known[0] == seqs and set(map(type, seqs)) == _INTS:
                    spans.append(known[1])
                else:
                    spans.append(_chunk_span(chunk))
                    if spans[-1] is not None:
                        chunk_spans[quick] = (seqs, spans[-1])
            else:
                spans.append(_chunk_span(chunk))
            if quick is not None:
                hit = seen.get(quick)
                if hit is not None:
                    kind, msg, reason, hseqs = hit
                    if hseqs is not None and kind in ("ok", "inert"):
                        prev_chunks.append((quick, hseqs))
                        kept.append((quick, hseqs, msg))
                    if kind == "stale":
                        stale_n += 1
                        bad = bad or (msg, reason)
                    elif kind == "inert":
                        if reason not in ("undone", "cleared"):
                            prev_undated = True
                        if inert is None:
                            inert = (msg, reason)
                    elif kind == "wide":
                        spans[-1] = None
                        add("compact.lineage_too_wide", msg, seq=seq)
                    continue
            # (spans[-1] is (min, max) of seqs exactly when they are a non-empty
            # list of ints, _chunk_span, or the same list seen before)
            span = spans[-1]
            if span is not None and span[1] - span[0] + 1 > MAX_SPAN:
                spans[-1] = None
                msg = (f"lineage chunk {span[0]}..{span[1]} spans {span[1] - span[0] + 1} "
                       f"positions (at most {MAX_SPAN})")
                add("compact.lineage_too_wide", msg, seq=seq)
                if quick:
                    seen[quick] = ("wide", msg, "", None)
                continue
            try:
                ref = SourceRef.from_json(chunk)
            except UsageError as exc:
                spans[-1] = None
                stale_n += 1
                bad = bad or (f"a lineage chunk is malformed: {exc}", "invalid_ref")
                continue
            if ref.session_id != sid:
                spans[-1] = None
                stale_n += 1
                bad = bad or (f"lineage chunk {ref.label()} names another session", "invalid_ref")
                continue
            st = status(ref.seqs, ref.digest, purpose)
            if st.status in ("missing", "stale"):
                stale_n += 1
                msg = f"lineage chunk {ref.label()} is {st.status} ({st.reason})"
                bad = bad or (msg, st.reason)
                if quick:
                    seen[quick] = ("stale", msg, st.reason, None)
            elif st.status == "hidden":
                prev_chunks.append((quick, ref.seqs))
                msg = f"lineage chunk {ref.label()}"
                kept.append((quick, ref.seqs, msg))
                if st.reason not in ("undone", "cleared"):
                    prev_undated = True
                if inert is None:
                    inert = (msg, st.reason)
                if quick:
                    seen[quick] = ("inert", msg, st.reason, ref.seqs)
            else:
                prev_chunks.append((quick, ref.seqs))
                msg = f"lineage chunk {ref.label()}"
                kept.append((quick, ref.seqs, msg))
                if quick:
                    seen[quick] = ("ok", msg, "", ref.seqs)
        # a chunk hidden by an undo or clear written before this event (visible
        # now or not: a redo may have come after): lecode rechecks visibility
        # before the append, it never writes such a summary
        for key, hseqs, label in kept:
            early = before.hidden(hseqs, seq, key)
            if early is not None:
                stale_n += 1
                bad = bad or (f"{label} names a position already {early} before this compact "
                              f"event was written (lecode never writes that)", early)
        nc = _not_cumulative(seq, lineage, prev_lineage, spans)
        if nc and nc[0] == "not_cumulative" and had_prev and (
                p_inert if p_inert is not None else before.inert(p_chunks, p_undated, seq)):
            # the previous one inert at this event: a rebuild need not start with it
            nc = _not_cumulative(seq, lineage, None, spans)
        if nc:
            add("compact.lineage_not_cumulative", nc[1], seq=seq, reason=nc[0])
        if bad:
            more = f" and {stale_n - 1} more" if stale_n > 1 else ""
            add("compact.lineage_stale", bad[0] + more, seq=seq, reason=bad[1])
        elif inert:
            add("compact.inert", f"summary is inert: {inert[0]} is hidden ({inert[1]})",
                seq=seq, reason=inert[1])
        if (rec_at is not None and not bad and not nc and type(seq) is int and spans
                and None not in spans):
            _cutoff(rec_at, before, max(sp[1] for sp in spans if sp is not None), seq, add)


_INTS = {int}
MIN_RAW = 4                          # messages a compaction leaves raw, at least (the design)
RAW_ROLES = ("user", "assistant", "tool")


def _cutoff(rec_at: Callable[[int], Any], before: _Before, end: int, seq: int,
            add: Callable[..., None]) -> None:
    """The reference design's rule of a summary's cutoff ("at least four
    recent messages remain raw, with a complete tool-safe exchange
    boundary"), for the compact event at ``seq`` whose lineage ends at
    ``end``, as the transcript stood when it was written: a message counts
    when an undo or clear before the event had not hidden it (a forget's
    exclusion or epoch cannot be dated: not taken into account), records
    after the event do not.  compact.boundary: the last exchange at or
    before ``end`` (back over tool messages to an assistant message, at most
    MAX_SPAN positions) has a tool call no tool message up to ``end``
    answers (split when one in the tool messages right after ``end``
    does); compact.few_raw: fewer than MIN_RAW user, assistant or tool
    messages between ``end`` and the event.  Reads a few records around
    ``end`` (the tail up to the fourth raw message, or the end of the tool
    messages right after it)."""

    def message(pos: int) -> dict[str, Any] | None:
        r = rec_at(pos)
        if (isinstance(r, dict) and r.get("type") == "message"
                and before.hidden((pos,), seq) is None):
            return r
        return None

    answered: set[Any] = set()
    pending: list[str] = []
    call_at = None
    pos = end
    while pos >= max(1, end - MAX_SPAN + 1):
        r = message(pos)
        if r is not None:
            if r.get("role") != "tool":
                calls = r.get("tool_calls") if r.get("role") == "assistant" else None
                if isinstance(calls, list):
                    ids = [c.get("id") for c in calls if isinstance(c, dict)]
                    pending = [i for i in ids if isinstance(i, str) and i not in answered]
                    call_at = pos
                break
            tid = r.get("tool_call_id")
            if isinstance(tid, str):
                answered.add(tid)
        pos -= 1
    raw = 0
    split: int | None = None
    in_run = True            # still in the tool messages right after ``end``
    pos = end + 1
    while pos < seq and (raw < MIN_RAW or (pending and in_run)):
        r = message(pos)
        pos += 1
        if r is None:
            continue
        role = r.get("role")
        if role in RAW_ROLES:
            raw += 1
        if role == "tool" and in_run:
            if split is None and r.get("tool_call_id") in pending:
                split = pos - 1
        else:
            in_run = False
    if pending:
        calls = ", ".join(_short(i) for i in pending[:3]) + (
            f" and {len(pending) - 3} more" if len(pending) > 3 else "")
        if split is not None:
            add("compact.boundary", f"lineage ends at seq {end}, inside a tool exchange: the "
                f"result at seq {split} answers a call of the assistant message at seq "
                f"{call_at} ({calls}) the summary covers", seq=seq, reason="split")
        else:
            add("compact.boundary", f"lineage ends at seq {end}, inside an incomplete tool "
                f"exchange: the call(s) {calls} of the assistant message at seq {call_at} "
                "have no result at or right after it", seq=seq, reason="incomplete")
    if raw < MIN_RAW:
        add("compact.few_raw", f"{raw} message(s) after the lineage's end (seq {end}) remained "
            f"raw when the compact event was written (at least {MIN_RAW})", seq=seq)


def _chunk_span(chunk: Any) -> tuple[int, int] | None:
    """(first, last) of a lineage chunk whose seqs are a non-empty list of integers."""
    seqs = chunk.get("seqs") if isinstance(chunk, dict) else None
    if not (isinstance(seqs, list) and seqs and set(map(type, seqs)) == _INTS):
        return None
    return min(seqs), max(seqs)
