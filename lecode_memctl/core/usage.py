"""``usage``: model-call accounting from ``compact`` and ``memory_usage`` events.

The reference design's rule: reported usage counts once; a call whose usage
is missing (``"usage": null`` or not a valid USAGE object) is counted in
``unknown_usage_calls`` and never as zero; an event whose seq repeats or goes
back is no new call (``repeated_events``, and its purpose is not complete); numeric totals are *known
subtotals*.  A USAGE whose ``cost`` is null has known tokens and an unknown
cost: it adds to the token subtotals and to ``unknown_cost_calls``.

Purposes: a ``compact`` event is one successful ``summarization`` call; a
``memory_usage`` event carries its own ``purpose`` (``learning``, rejected
``summarization`` attempts, ``answering`` when the agent records it, or any
other name, reported as found; an event without a non-empty string there
is counted under purpose None, null in JSON).

Reading: each transcript is read once, sequentially, up to its size at
``fstat`` time, a block at a time (:meth:`sessions._File.marked_lines`); only
lines containing the bytes ``"event"`` (and the header line) are joined and
parsed: a line without them costs the blocks it spans, one at a time, however
long it is.  Refused sessions
(a symbolic link, a directory, FIFO or anything else that is not a regular
file, or a header naming another project) are skipped and listed; a corrupt line is skipped and counted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from .atomic import open_in_dir
from .errors import NotFound
from .layout import Store, session_file_exists, session_ids
from .rowmodel import record_time
from .sessions import (
    RecordTooLarge,
    _File,
    event_line,
    header_problem,
    load_record,
    record_seq,
)
from .sourceref import check_session_id

PURPOSE_ORDER = ("answering", "summarization", "learning")


@dataclass
class PurposeUsage:
    purpose: str | None             # None: the event named no purpose (no non-empty string)
    calls: int = 0
    input_tokens: int = 0           # known subtotal
    output_tokens: int = 0          # known subtotal
    cost: float = 0.0               # known subtotal
    known_usage_calls: int = 0
    unknown_usage_calls: int = 0    # usage null or malformed: tokens and cost unknown
    unknown_cost_calls: int = 0     # tokens known, cost null
    compact_events: int = 0         # successful summarizations (usage on the compact event)
    memory_usage_events: int = 0    # separate accounting events (learning, rejected attempts, ...)
    repeated_events: int = 0        # events whose seq repeats or goes back: not counted as calls

    def add(self, usage: Any, *, compact: bool) -> None:
        self.calls += 1
        if compact:
            self.compact_events += 1
        else:
            self.memory_usage_events += 1
        u = _check_usage(usage)
        if u is not None and (self.input_tokens + u[0] > MAX_TOTAL
                              or self.output_tokens + u[1] > MAX_TOTAL):
            u = None   # its tokens would carry a subtotal past 64 bits: not counted, unknown
        if u is None:
            self.unknown_usage_calls += 1
            return
        self.known_usage_calls += 1
        self.input_tokens += u[0]
        self.output_tokens += u[1]
        if u[2] is None:
            self.unknown_cost_calls += 1
        else:
            self.cost += u[2]

    def to_json(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "calls": self.calls,
                "known_usage_calls": self.known_usage_calls,
                "unknown_usage_calls": self.unknown_usage_calls,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost": round(self.cost, 10) if self.known_usage_calls > self.unknown_cost_calls else None,
                "unknown_cost_calls": self.unknown_cost_calls,
                "complete": (self.unknown_usage_calls == 0 and self.unknown_cost_calls == 0
                             and self.repeated_events == 0),
                "compact_events": self.compact_events,
                "memory_usage_events": self.memory_usage_events,
                "repeated_events": self.repeated_events}


@dataclass
class UsageReport:
    project: str
    since: str | None
    session: str | None
    sessions: int = 0
    session_ids: list[str] | None = None     # the ids given (--session), None for every one
    sessions_counted: int = 0
    refused: list[str] = field(default_factory=list)
    corrupt_lines: int = 0
    purposes: dict[str | None, PurposeUsage] = field(default_factory=dict)
    _total: PurposeUsage = field(default_factory=lambda: PurposeUsage("total"), init=False,
                                 repr=False)

    def purpose(self, name: str | None) -> PurposeUsage:
        if name not in self.purposes:
            self.purposes[name] = PurposeUsage(name)
        return self.purposes[name]

    def add(self, purpose: str | None, usage: Any, *, compact: bool) -> None:
        """One call, to its purpose and to the total (each applies the 64-bit
        rule on its own subtotals)."""
        self.purpose(purpose).add(usage, compact=compact)
        self._total.add(usage, compact=compact)

    def repeated(self, purpose: str | None) -> None:
        """An event of ``purpose`` whose seq repeats or goes back: not a new
        call (a record written twice, or out of place), counted apart, and
        its purpose and the total are not complete."""
        self.purpose(purpose).repeated_events += 1
        self._total.repeated_events += 1

    def ordered(self) -> list[PurposeUsage]:
        rank = {p: i for i, p in enumerate(PURPOSE_ORDER)}
        # (the known purposes in their order, then the others by name, then
        # the calls of no purpose)
        return sorted(self.purposes.values(),
                      key=lambda p: (p.purpose is None, rank.get(p.purpose or "", 99),
                                     p.purpose or ""))

    def total(self) -> PurposeUsage:
        """Every call of every purpose, summed call by call: where the sum of the
        purposes' subtotals would pass 2^63-1, the calls that would carry it past
        are unknown here, so its counts can differ from the purposes' sums."""
        return self._total

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "since": self.since, "session": self.session,
                "session_ids": self.session_ids, "sessions": self.sessions,
                "sessions_counted": self.sessions_counted,
                "refused_sessions": self.refused, "corrupt_lines": self.corrupt_lines,
                "purposes": [p.to_json() for p in self.ordered()],
                "total": self.total().to_json()}


# The largest token count and cost one call can report (issue 16.5): counts
# are exact JSON integers (2^53 - 1) and costs finite, so that a cost sum
# never becomes ``inf``; anything beyond is malformed usage
# (unknown), like a negative count.
MAX_TOKENS = (1 << 53) - 1
MAX_COST = 1e12
# A token subtotal stays within 64 bits (JSON and CSV readers' int64): a call
# whose tokens would carry one past 2^63-1 (after 1,024 calls of 2^53-1 tokens
# each) is counted in unknown_usage_calls instead, so the figure stays an
# exact known subtotal and the purpose is not complete.
MAX_TOTAL = (1 << 63) - 1


def _check_usage(u: Any) -> tuple[int, int, float | None] | None:
    """(input, output, cost or None) for a valid USAGE object, else None (unknown)."""
    if not isinstance(u, dict):
        return None
    i, o = u.get("input_tokens"), u.get("output_tokens")
    c = u.get("cost")
    if isinstance(i, bool) or isinstance(o, bool) or not isinstance(i, int) or not isinstance(o, int):
        return None
    if not (0 <= i <= MAX_TOKENS and 0 <= o <= MAX_TOKENS):
        return None
    if c is None:
        return i, o, None
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= MAX_COST:
        return i, o, None   # (NaN fails the comparison too)
    return i, o, float(c)


def usage_report(store: Store, *, session: str | Sequence[str] | None = None,
                 since: datetime | None = None, until: datetime | None = None) -> UsageReport:
    """Accounting over every session of the store (or those named: one id or
    several, each counted once, where it came first), optionally only for
    events at or after ``since`` (an event's own ``ts``/``time``/``created``
    when it has one, else its session header's ``created``).  ``session`` in
    the report is the id when one is named, else None; ``session_ids`` the
    ids named, None for every session."""
    named = None if session is None else [session] if isinstance(session, str) else list(session)
    sdir = store.sessions_dir
    if named is not None:
        for sid in named:
            check_session_id(sid)
        ids = list(dict.fromkeys(named))
        for sid in ids:
            if not session_file_exists(sdir, sid):
                raise NotFound(f"no session {sid} in {sdir}")
    else:
        ids = session_ids(sdir)
    rep = UsageReport(store.slug, since.isoformat() if since else None,
                      ids[0] if named is not None and len(ids) == 1 else None,
                      session_ids=None if named is None else ids)
    for sid in ids:
        rep.sessions += 1
        path = sdir / f"{sid}.jsonl"
        try:
            fd = open_in_dir(path)
        except OSError:
            rep.refused.append(sid)
            continue
        try:
            # a directory in a transcript's place opens (open_nofollow lets
            # one through, to fail where it is read): refused before it
            # reaches a file object, as a FIFO is
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            f = _File(fd, sid, str(path)) if regular else None   # (owns fd from here)
        except BaseException:
            os.close(fd)
            raise
        if f is None:
            os.close(fd)
            rep.refused.append(sid)
            continue
        with f:
            _account(rep, store, sid, f, since, until)
    return rep


def _account(rep: UsageReport, store: Store, sid: str, f: _File, since: datetime | None,
             until: datetime | None = None) -> None:
    """The events of one transcript: its header line, then only the lines
    holding ``"event"`` (:meth:`_File.marked_lines`: the file is searched a
    block at a time, and a line without the mark is never joined, however
    long; issue 16.5).  A transcript without a complete line (empty, or a
    header without its newline) is refused, as every reader refuses it
    (``refused_header``)."""
    start, first = f.line_at(0)
    if first is None:
        rep.refused.append(sid)
        return
    counted, created = _header(rep, store, sid, first)
    if not counted:
        return
    last = 0                   # the highest seq read so far (the header's)
    for line in f.marked_lines(start + len(first) + 1):
        last = _count_line(rep, line, created, since, until, last)


def _header(rep: UsageReport, store: Store, sid: str,
            line: bytes) -> tuple[bool, datetime | None]:
    """Check a transcript's first line: (False, None), the session refused,
    when it is not this session's header in this store's project, by the
    rule every reader applies (:func:`header_problem`); else (True,
    its ``created`` time or None), the session counted."""
    try:
        hdr = load_record(line)     # the readers' loader (a number beyond a double)
    except (orjson.JSONDecodeError, RecordTooLarge):
        hdr = None
    if header_problem(hdr, sid, store.slug, line) is not None:
        rep.refused.append(sid)
        return False, None
    rep.sessions_counted += 1
    return True, record_time(hdr, None)


def _count_line(rep: UsageReport, line: bytes, created: datetime | None,
                since: datetime | None, until: datetime | None, last: int) -> int:
    """Account one line after the header that holds ``"event"``, ``last``
    the highest seq of the records read before it; return the highest seq
    with it.  A corrupt line is counted as such; an event by the one
    event-line rule (:func:`event_line`) that is a ``compact`` or
    ``memory_usage`` in the time window is a call, unless its seq is not
    above ``last`` (it repeats or goes back: the transcript is corrupt, and
    a record written twice is one call): then it is a repeated event."""
    try:
        rec = load_record(line)
    except (orjson.JSONDecodeError, RecordTooLarge):
        rep.corrupt_lines += 1
        return last
    seq = record_seq(rec, line)
    if seq is None:                     # no record to any reader: a corrupt line
        rep.corrupt_lines += 1
        return last
    if rec.get("type") != "event" or not event_line(line):
        return max(last, seq)
    ev = rec.get("event")
    if ev not in ("compact", "memory_usage"):
        return max(last, seq)
    if since is not None or until is not None:
        t = record_time(rec, created)
        if t is None or (since is not None and t < since) \
                or (until is not None and t > until):
            return max(last, seq)
    name: str | None
    if ev == "compact":
        name = "summarization"
    else:
        p = rec.get("purpose")
        # (no purpose, null, empty or not a string: None, a row of its own;
        # before 2026-12-07 "unknown", merged with a purpose so named)
        name = p if isinstance(p, str) and p else None
    if seq <= last:
        rep.repeated(name)
        return last
    rep.add(name, rec.get("usage"), compact=ev == "compact")
    return seq
