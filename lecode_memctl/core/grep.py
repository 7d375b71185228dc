"""``memctl grep``: search the text of session transcripts.

What is searched, per record (each string is one *field*, named by its JSON
path from the record, e.g. ``$.content``, ``$.content[1].text``,
``$.tool_calls[0].arguments.path``, ``$.summary``):

* messages: the content (a string, or the ``text`` of each part of any type
  but binary, as ``read --text`` shows them; binary parts are never
  searched; of content that is neither a string nor a list, and of a part
  that is neither a string nor an object, which ``read --text`` shows as
  JSON, the string leaves, each at its path: ``$.content.text``), and the
  string leaves of every tool call's ``arguments``; tool results are
  messages of role ``tool``;
* ``compact`` events: the ``summary`` (reported with role ``summary``).

By default only what the agent may see is reported: messages through the
store contract's visibility predicate (:func:`sessions.visible`, purpose
``working`` or ``durable``), and summaries unless they precede the newest
``clear`` (purpose ``working``) or are inert: summaries the agent does not
use, which ``validate --deep`` reports (``compact.*``: no lineage, a lineage
chunk that names an excluded or undone position or is otherwise hidden,
missing or stale, a lineage malformed or not cumulative, a prior that does
not match; each lineage chunk judged for the purpose searched: for
``durable`` a ``clear`` hides nothing).  ``include_hidden`` reports hidden hits too,
each labelled with its reason.

Reading only: sessions are read through :class:`SessionStore` (symbolic
links refused, sessions of another project skipped and listed) and the
exclusions through a read-only :class:`FactStore`.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import field
from datetime import datetime
from typing import Any, BinaryIO

import orjson  # (the session readers import it anyway)

from ._record import record
from .atomic import open_nofollow
from .errors import MemctlError, StoreCorrupt, UsageError
from .layout import Store, session_file_exists
from .rowmodel import record_time
from .sessions import (
    _WINDOW_SEQS,
    NO_SEQ,
    PURPOSES,
    ROLES,
    SEQ_DUPLICATE,
    SEQ_REGRESSION,
    VISIBILITY_EVENTS,
    RecordTooLarge,
    SessionStore,
    UndoState,
    _classify,
    _File,
    event_line,
    fast_seq,
    load_record,
    not_an_event,
    record_seq,
    undo_target,
    visible,
)
from .sourceref import NoExclusions, check_session_id

SUMMARY_ROLE = "summary"
GREP_ROLES = ROLES + (SUMMARY_ROLE,)
MAX_CONTEXT = 100
LINE_SHOWN = 400          # characters of a long line kept around the match in ``line``


# --------------------------------------------------------------------------
# JSON paths and the fields of a record


def _key_path(key: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return "." + key
    import orjson

    return "[" + orjson.dumps(key).decode("utf-8") + "]"


# One step of a path as :func:`_key_path` and :func:`_items` write it: a key
# that is an identifier, an index, a key in JSON's quotes.
_PATH_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[[0-9]+\]|\[("(?:[^"\\]|\\.)*")\]')


def _path_steps(path: str) -> list[tuple[str, str | None]] | None:
    """Each step of a JSON path as :func:`string_leaves` writes it: (the step
    as written, its member's key, or None for an index); None for a text
    that is no such path."""
    if not path.startswith("$"):
        return None
    steps: list[tuple[str, str | None]] = []
    pos = 1
    while pos < len(path):
        m = _PATH_STEP.match(path, pos)
        if m is None:
            return None
        key = m.group(1)
        if m.group(2) is not None:
            try:
                key = orjson.loads(m.group(2))
            except orjson.JSONDecodeError:
                return None
        steps.append((m.group(0), key))
        pos = m.end()
    return steps


def path_keys(path: str) -> list[str] | None:
    """The keys of the members a JSON path (as :func:`string_leaves` writes
    it) goes through, in order; None for a text that is no such path."""
    steps = _path_steps(path)
    return None if steps is None else [key for _step, key in steps if key is not None]


def rewrite_path_keys(path: str, fn: Callable[[str], str]) -> str | None:
    """``path`` written again with each member's key replaced by ``fn(key)``
    (the secrets scan's marker in place of a credential); None for a text
    that is no path :func:`string_leaves` writes."""
    steps = _path_steps(path)
    if steps is None:
        return None
    return "$" + "".join(step if key is None else _key_path(fn(key)) for step, key in steps)


def string_leaves(value: Any, path: str, *, skip_binary: bool = True,
                  keys: bool = False) -> Iterator[tuple[str, str]]:
    """(JSON path, string) for every string leaf under ``value`` (dict keys are
    not leaves), depth first in document order.  ``skip_binary``: the ``data``
    of a ``{"type": "binary"}`` part is left out (base64 attachments are not
    text).  ``keys``: each object key too, at its member's path, before the
    member's value (the secrets scan: a credential can be a key).
    Iterative: a record nested 1,000 levels deep (the JSON parser accepts
    1024) is walked like any other, never a RecursionError."""
    stack: list[Iterator[tuple[str, Any]]] = [iter(((path, value),))]
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            continue
        p, v = nxt
        if isinstance(v, str):
            yield p, v
        elif isinstance(v, Mapping):
            stack.append(_members(v, p, skip_binary and v.get("type") == "binary", keys))
        elif isinstance(v, list):
            stack.append(_items(v, p))


def _members(value: Mapping[Any, Any], path: str, binary: bool,
             keys: bool = False) -> Iterator[tuple[str, Any]]:
    for k, v in value.items():
        if isinstance(k, str) and not (binary and k == "data"):
            member = path + _key_path(k)
            if keys:
                yield member, k
            yield member, v


def _items(value: list[Any], path: str) -> Iterator[tuple[str, Any]]:
    for i, v in enumerate(value):
        yield f"{path}[{i}]", v


def searchable_fields(record: Mapping[str, Any]) -> Iterator[tuple[str | None, str, str]]:
    """(role, JSON path, text) of the fields grep searches in one record.
    The role is a message's own (any string; ``summary`` too, a message all
    the same: its path is ``$.content...``), None for a message without a
    string role (it was ``"?"``, a value no role has, before 2026-12-07);
    ``summary`` and the path ``$.summary`` for a compaction summary."""
    if record.get("type") == "message":
        role = record.get("role")
        role = role if isinstance(role, str) else None
        content = record.get("content")
        if isinstance(content, str):
            yield role, "$.content", content
        elif isinstance(content, list):
            for i, part in enumerate(content):
                if isinstance(part, str):
                    yield role, f"$.content[{i}]", part
                elif isinstance(part, Mapping):
                    # the text of a part of any type but binary, as read
                    # --text shows it ([output_text part] TEXT; before
                    # 2026-12-07 only a part of type "text" was searched)
                    if part.get("type") != "binary" and isinstance(part.get("text"), str):
                        yield role, f"$.content[{i}].text", part["text"]
                else:
                    # a part that is neither (a list, a number): read shows
                    # its JSON; its strings are searched, each at its path
                    for p, s in string_leaves(part, f"$.content[{i}]"):
                        yield role, p, s
        elif content is not None:
            # content that is neither a string nor a list (an object, which
            # the contract does not allow): read --text shows its JSON, and
            # secrets scans its strings; grep searches them, each at its
            # path ($.content.text), as it searches a tool call's arguments
            for p, s in string_leaves(content, "$.content"):
                yield role, p, s
        calls = record.get("tool_calls")
        if isinstance(calls, list):
            for i, call in enumerate(calls):
                if isinstance(call, Mapping) and "arguments" in call:
                    for p, s in string_leaves(call["arguments"], f"$.tool_calls[{i}].arguments"):
                        yield role, p, s
    elif record.get("type") == "event" and record.get("event") == "compact":
        summary = record.get("summary")
        if isinstance(summary, str):
            yield SUMMARY_ROLE, "$.summary", summary


# --------------------------------------------------------------------------
# Options


def compile_pattern(pattern: str, *, fixed: bool = False, ignore_case: bool = False,
                    show: bool = True,
                    warn: Callable[[str], None] | None = None) -> re.Pattern[str]:
    """The search pattern; a bad regex or a pattern that is not valid text is a UsageError.
    Compiled as ``search`` compiles its own (:func:`userregex.compile_user_regex`):
    what ``re`` warns of (``[[:alpha:]]``) is told to ``warn``, never printed
    by Python; ``show``: the error and the warning quote the pattern (not
    for ``redact --pattern``, which may be the credential)."""
    # (an empty pattern matches every line of every field, as grep(1)'s and
    # search's do, the same hits as ^; it was refused, "the pattern is
    # empty", before 2026-12-07)
    if not isinstance(pattern, str):
        raise UsageError("the pattern is not text")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the pattern is not valid UTF-8 (undecodable bytes on the command "
                         "line)") from None
    from .mdnames import _show
    from .userregex import compile_user_regex

    # (MULTILINE: ^ and $ at each line of a field, as the search was made
    # line by line before 2026-12-07; it now searches the whole field, so
    # that a match spanning lines is found where it is)
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    return compile_user_regex(pattern, flags, fixed=fixed,
                              shown=_show(pattern) if show else None, warn=warn)


# --------------------------------------------------------------------------
# Hits


@record(frozen=True)
class GrepHit:
    session_id: str
    seq: int
    role: str | None          # None: a message without a string role
    path: str                 # JSON path of the field in the record
    line_no: int              # 1-based line of the field's text
    start: int                # match offsets in ``line``
    end: int
    line: str                 # the line holding the match (cut around it when very long)
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    hidden: str | None = None  # None: visible; else excluded, undone, cleared, epoch, inert
    # Which record of its session this is (the byte offset where its line
    # ends): no output field, the one key of a record for ``grep -C``'s
    # groups, where two records may share a seq (a seq repeated: damage)
    record_end: int = field(default=0, repr=False)

    @property
    def visible(self) -> bool:
        return self.hidden is None

    def to_json(self) -> dict[str, Any]:
        from .rowmodel import MATCH

        return MATCH.row(session_id=self.session_id, seq=self.seq, role=self.role,
                         path=self.path, line_no=self.line_no, line=self.line,
                         start=self.start, end=self.end, match=self.line[self.start:self.end],
                         before=list(self.before), after=list(self.after),
                         visible=self.hidden is None, hidden_reason=self.hidden)


@record
class GrepRun:
    """The search; iterate :meth:`hits`.  ``skipped`` lists sessions not read
    (refused or unreadable) with the reason, filled while iterating; a
    ``sessions/`` that cannot be listed is one entry with no session id.
    ``damaged`` lists, per session searched and kind, its lines that could
    hold a match and are no record (not searched: invalid_utf8, not_json,
    not_object, no_seq, too_large; with a literal pattern only the lines
    holding its bytes are parsed) and, in a session where a record held a
    match, its records whose seq repeats or goes back (seq_duplicate,
    seq_regression: their visibility is uncertain): (session id, kind,
    lines, the 1-based line number of the first)."""

    store: Store
    regex: re.Pattern[str]
    session_ids: list[str] | None = None
    roles: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    purpose: str = "working"
    include_hidden: bool = False
    context: int = 0
    literal: str | None = None      # the pattern, when it is literal text
    skipped: list[tuple[str | None, str]] = field(default_factory=list)
    sessions_searched: int = 0
    # the exit status of each skip, as ``read`` gives it (4 refused, 5 unreadable)
    skipped_status: list[int] = field(default_factory=list)
    # (session id, kind, lines, 1-based line of the first), filled while iterating
    damaged: list[tuple[str, str, int, int]] = field(default_factory=list)
    lock_wait: float | None = None  # seconds for a stable facts snapshot; None: 5 s

    def hits(self) -> Iterator[GrepHit]:
        if self.purpose not in PURPOSES:
            raise UsageError(f"unknown purpose {self.purpose!r}; use working or durable")
        if not (0 <= self.context <= MAX_CONTEXT):
            raise UsageError(f"context is 0..{MAX_CONTEXT} lines")
        if self.roles is not None:
            bad = sorted(self.roles - set(GREP_ROLES))
            if bad:
                raise UsageError(f"unknown role {bad[0]!r}; use one of {', '.join(GREP_ROLES)}")
        self.store.require()
        sessions, closer = _open_sessions(self.store, self.lock_wait)
        try:
            ids = self.session_ids
            if ids is None:
                try:
                    ids = sessions.session_ids()
                except StoreCorrupt as exc:
                    # not an empty store: say what was not searched
                    self.skipped.append((None, str(exc)))
                    ids = []
            else:
                for sid in ids:
                    check_session_id(sid)
                # a session given twice is searched once, where it came first
                ids = list(dict.fromkeys(ids))
                for sid in ids:
                    if not session_file_exists(sessions.dir, sid):
                        raise sessions.not_found(sid)
            for sid in ids:
                yield from self._session(sessions, sid)
        finally:
            if closer is not None:
                closer()

    def _session(self, sessions: SessionStore, sid: str) -> Iterator[GrepHit]:
        try:
            hdr = sessions.header(sid)
            reader = sessions.exclusion_reader(sid)
        except (MemctlError, OSError) as exc:
            self._skip(sid, exc)
            return
        # The store's exclusions and generation: when they cannot be read
        # (StoreCorrupt, exit 5) no session's visibility can be decided; that
        # is the store's failure, not one session's to skip (issue 16.4).
        excluded = reader.excluded_seqs(sid)
        generation = reader.generation()
        try:
            items = _Lines(sessions.path(sid), self._literal())
        except (MemctlError, OSError) as exc:
            self._skip(sid, exc)
            return
        self.sessions_searched += 1
        created = record_time({"created": hdr.get("created")}, None)
        unused = _UnusedSummaries(sessions.path(sid), sid, self.store.slug, excluded, generation,
                                  self.purpose)
        us = UndoState()
        # (a record hidden before any undo/redo/clear event is known stays
        # hidden after: the events only hide more; without include_hidden
        # it is dropped now, not kept with the pending hits)
        no_events = UndoState()
        # The hits wait for the undo/redo/clear events after them, up to
        # PENDING_BYTES of them; past that, the events of the rest of the
        # transcript are read first (_Lines.events_after) and every hit is
        # decided, and emitted, at once (``decided``).
        pending: list[tuple[dict[str, Any], list[_Span], int]] = []
        held = 0
        decided = False
        matched = False         # whether a record held a match (hidden or not)
        regex = self.regex
        try:
            for rec, read_as_event in items:
                if read_as_event and rec.get("event") in VISIBILITY_EVENTS:
                    if not decided:     # (else events_after read it already)
                        us.add(rec)
                    continue
                if rec.get("type") == "event" and not read_as_event:
                    continue        # an event no reader applies: not a summary either
                found = []
                for role, path, text in searchable_fields(rec):
                    if self.roles is not None and role not in self.roles:
                        continue
                    if regex.search(text) is None:
                        continue
                    found.extend(_line_hits(regex, role, path, text, self.context))
                if not found:
                    continue
                matched = True
                if self.since is not None or self.until is not None:
                    when = record_time(rec, created)
                    if when is None or (self.since is not None and when < self.since) or \
                            (self.until is not None and when > self.until):
                        continue
                slim = _pending_record(rec, sid)
                where = items.end_of_last()
                if not self.include_hidden and \
                        self._hidden(sid, slim, excluded, generation, no_events,
                                     unused) is not None:
                    continue
                if decided:
                    yield from self._decide(sid, slim, found, excluded, generation, us, unused,
                                            where)
                    continue
                pending.append((slim, found, where))
                held += _held_bytes(found) + \
                    _POSITION_BYTES * len(slim.get(_LINEAGE_POSITIONS, ()))
                if held > PENDING_BYTES:
                    for ev in items.events_after():
                        us.add(ev)
                    decided = True
                    for slim, found, where in pending:
                        yield from self._decide(sid, slim, found, excluded, generation, us,
                                                unused, where)
                    pending = []
            # Records whose seq repeats or goes back: said where a record
            # held a match, whose visibility (by seq) they make uncertain
            if matched:
                items.check_order()
        except (MemctlError, OSError) as exc:
            self.skipped.append((sid, str(exc)))
            return
        finally:
            items.close()
        for slim, found, where in pending:
            yield from self._decide(sid, slim, found, excluded, generation, us, unused, where)
        # (said once the session's hits are all given: a search cut short
        # by its consumer, --limit, says the same whatever it held pending)
        self.damaged.extend((sid, kind, n, first)
                            for kind, (n, first) in sorted(items.damage.items(),
                                                           key=lambda kv: kv[1][1])
                            if matched or kind not in (SEQ_DUPLICATE, SEQ_REGRESSION))

    def _skip(self, sid: str, exc: MemctlError | OSError) -> None:
        self.skipped.append((sid, str(exc)))
        self.skipped_status.append(exc.exit_code if isinstance(exc, MemctlError) else 5)

    def nothing_searched_status(self) -> int | None:
        """After the search: when sessions were named (``session_ids``) and
        every one was skipped, the exit status ``read`` gives the worst of
        them (5 unreadable above 4 refused); else None (the search's own 0
        or 1)."""
        if self.session_ids is None or self.sessions_searched or not self.skipped_status:
            return None
        return max(self.skipped_status)

    def damaged_status(self) -> int | None:
        """After a search that found nothing: 5 (what ``read`` gives such a
        transcript) when a searched session had a line that could hold a
        match and is no record (not searched), so that "no match" cannot be
        said; else None."""
        bad = any(kind not in (SEQ_DUPLICATE, SEQ_REGRESSION) for _s, kind, _n, _f in self.damaged)
        return 5 if bad else None

    def _decide(self, sid: str, rec: dict[str, Any], found: list[_Span], excluded: frozenset[int],
                generation: int, us: UndoState, unused: _UnusedSummaries,
                where: int) -> list[GrepHit]:
        """The hits of one record (its line ending at byte ``where``), once the
        events that may hide it are known.
        (Without include_hidden, a record kept was found visible with no
        events: where the events hide nothing either, it is visible still,
        and not judged twice.)"""
        if self.include_hidden or not us.hides_nothing():
            reason = self._hidden(sid, rec, excluded, generation, us, unused)
            if reason is not None and not self.include_hidden:
                return []
        else:
            reason = None
        seq = rec["seq"]
        return [GrepHit(sid, seq, role, path, line_no, start, end, line, before, after, reason,
                        where)
                for role, path, line_no, start, end, line, before, after in found]

    def _literal(self) -> tuple[bytes, bool] | None:
        """The pattern's bytes when it is literal text (-F, or a regex without
        any metacharacter), for a byte-level pre-check of each line; with -i
        only for ASCII text, and a line holding other bytes is folded as
        IGNORECASE folds it first (:func:`_caseless`)."""
        text = self.literal
        if not text or any(ord(c) < 0x20 or c in '"\\' for c in text):
            return None
        if self.regex.flags & re.IGNORECASE:
            return (text.lower().encode("utf-8"), True) if text.isascii() else None
        return text.encode("utf-8"), False

    def _hidden(self, sid: str, rec: dict[str, Any], excluded: frozenset[int], generation: int,
                us: UndoState, unused: _UnusedSummaries) -> str | None:
        if rec.get("type") == "message":
            ok, reason = visible(rec, purpose=self.purpose, excluded=excluded,
                                 generation=generation, undo_state=us, clear_seq=us.clear_seq)
            return None if ok else reason
        # a compaction summary
        if self.purpose == "working" and us.clear_seq is not None and rec["seq"] < us.clear_seq:
            return "cleared"
        for s in rec[_LINEAGE_POSITIONS]:
            if s in excluded or us.state(s) == "undo":
                return "inert"
        # a summary the agent does not use, as validate --deep says (compact.*),
        # its lineage judged for this purpose (durable: a clear hides nothing)
        if unused.has(rec["seq"]):
            return "inert"
        return None


class _UnusedSummaries:
    """The summaries of one session that the agent does not use
    (:func:`~lecode_memctl.core.audit.transcripts.unused_summaries`), found
    the first time a summary with a hit is judged: a session without one
    is not read again."""

    def __init__(self, path: str, sid: str, slug: str, excluded: frozenset[int],
                 generation: int, purpose: str) -> None:
        self._args = (path, sid, slug, excluded, generation, purpose)
        self._unused: frozenset[int] | None = None

    def has(self, seq: int) -> bool:
        """Whether the agent does not use the summary at ``seq``."""
        if self._unused is None:
            from .audit.transcripts import unused_summaries

            self._unused = unused_summaries(*self._args)
        return seq in self._unused


# What _hidden reads of a record with hits, all that a session's pending hits
# keep of it until its undo/redo/clear events are known: the fields of the
# visibility predicate, and for a summary the positions of its own session
# that its lineage names; not the content, tool calls or summary, whose
# matching lines the hits hold already (a session whose every record
# matched held every parsed record of it).
_VISIBILITY_FIELDS = ("type", "seq", "role", "epoch", "synthetic")
_LINEAGE_POSITIONS = " lineage positions"      # (never a JSON key of a record)


def _pending_record(rec: dict[str, Any], sid: str) -> dict[str, Any]:
    slim = {k: rec[k] for k in _VISIBILITY_FIELDS if k in rec}
    if rec.get("type") != "message":
        lineage = rec.get("lineage")
        slim[_LINEAGE_POSITIONS] = tuple(
            s for ref in (lineage if isinstance(lineage, list) else ())
            if isinstance(ref, Mapping) and isinstance(ref.get("seqs"), list)
            and ref.get("session_id") == sid
            for s in ref["seqs"] if isinstance(s, int))
    return slim


# (role, JSON path, line, start, end, line shown, context before, context after)
_Span = tuple[str | None, str, int, int, int, str, tuple[str, ...], tuple[str, ...]]


def _line_hits(regex: re.Pattern[str], role: str | None, path: str, text: str, context: int
               ) -> list[_Span]:
    """One hit per line of ``text`` where a match starts (the first match
    starting there), the matches found in the whole field: a match spanning
    lines is reported at its first line, ``start``/``end`` its part of that
    line, with the line's context as any hit's.  (Before 2026-12-07 each
    line was searched alone, and the field only when no line held a match:
    a spanning match beside another hit was lost, only the first spanning
    one was found, and it had no context and no cut.)

    The field's lines are grep(1)'s: a final newline ends the last line and
    begins none, and an empty field has no line (before 2026-12-07 the
    empty text after a final newline was a line: a context line that is
    not there, a hit of ``^$``)."""
    if "\n" not in text:
        m = regex.search(text) if text else None
        return [] if m is None else [_hit(role, path, [text], 0, m.start(), m.end(), context)]
    lines = text.split("\n")
    last = len(text)             # the last position a match may start at
    if not lines[-1]:
        lines.pop()             # (the final newline's empty rest: no line)
        last -= 1
    out: list[_Span] = []
    line_no, line_start, next_start = 0, 0, len(lines[0]) + 1
    pos = 0
    while pos <= last:
        m = regex.search(text, pos)
        if m is None or m.start() > last:
            break
        at = m.start()
        while at >= next_start and line_no + 1 < len(lines):
            line_no += 1
            line_start = next_start
            next_start += len(lines[line_no]) + 1
        out.append(_hit(role, path, lines, line_no, at - line_start,
                        min(m.end() - line_start, len(lines[line_no])), context))
        pos = next_start        # (the next line: one hit a line, however many matches)
    return out


def _hit(role: str | None, path: str, lines: list[str], i: int, start: int, end: int,
         context: int) -> _Span:
    """The hit of ``lines[i]`` whose match is ``start``..``end`` of it: the
    line cut to about :data:`LINE_SHOWN` characters around the match, and
    up to ``context`` lines before and after, each its first
    :data:`LINE_SHOWN` characters."""
    line = lines[i]
    shown = line
    if len(line) > LINE_SHOWN:
        lo = max(0, start - LINE_SHOWN // 4)
        hi = min(len(line), max(end, lo + LINE_SHOWN))
        shown = line[lo:hi]
        start, end = start - lo, min(end, hi) - lo
    # (context lines cut as ``line`` is, to their first LINE_SHOWN
    # characters; before 2026-12-07 they were copied whole: one hit next to
    # a 100,000-character line printed 200 KB in every format)
    before = tuple(ln[:LINE_SHOWN] for ln in lines[max(0, i - context):i]) if context else ()
    after = tuple(ln[:LINE_SHOWN] for ln in lines[i + 1:i + 1 + context]) if context else ()
    return (role, path, i + 1, start, end, shown, before, after)


# A session's pending hits are held up to this many bytes (their lines,
# context lines and what visibility reads, as _held_bytes counts them, which
# is more than they take: about 3,700 hits of a 300-character line, which
# take some 2.5 MiB).  Past it, the visibility events of the
# rest of the transcript are read first, by a raw-byte scan (the cost: the
# rest of the file read once more, at the speed of the event scans), and the
# hits are decided and emitted as they are found: memory stays flat in the
# number of hits.  4 MiB is the audit's WHOLE_BYTES (what it holds parsed of
# a transcript before it does the same), small beside the 25 MiB the process
# takes anyway, and more than the hits of a session nearly always take, so
# that a session usually takes the one pass and no extra read.
PENDING_BYTES = 4 << 20
_HIT_BYTES = 400        # a hit's tuples, its GrepHit-to-be and list slots, beside its strings
_RECORD_BYTES = 400     # the visibility fields kept of its record
_POSITION_BYTES = 40    # each position a summary's lineage names (its int and tuple slot)


def _held_bytes(found: list[_Span], size: Callable[[object], int] = sys.getsizeof) -> int:
    """What the pending hits of one record hold, about (sys.getsizeof of
    their lines and context lines; the role and path, short and often
    shared, within _HIT_BYTES)."""
    n = _RECORD_BYTES
    for hit in found:
        n += _HIT_BYTES + size(hit[5])
        before, after = hit[6], hit[7]
        if before or after:
            n += sum(map(size, before)) + sum(map(size, after)) + 8 * (len(before) + len(after))
    return n


class _Lines:
    """Every complete record of a transcript (the torn tail and lines that are
    not JSON objects with a seq are left out; the file is opened without
    following a symbolic link), with whether it is an event the readers
    apply (``sessions.event_line``).  With ``literal``, a line that is not an
    event, holds no JSON escape and does not contain the literal's bytes
    cannot match, and is not parsed.

    The lines are read to the end of the file (a line appended while it is
    read is read too) until :meth:`events_after` bounds them by the size
    the file has then."""

    def __init__(self, path: str, literal: tuple[bytes, bool] | None) -> None:
        self._path = path
        self._fh: BinaryIO | None = None    # (opened by the iteration, as a generator did)
        self._literal = literal
        self._pos = 0                  # the end of the last line read
        self._bound: int | None = None
        # What the iteration found wrong, by kind (sessions' corruption
        # kinds): [lines, the 1-based line number of the first]
        self.damage: dict[str, list[int]] = {}

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()

    def end_of_last(self) -> int:
        """The byte offset where the line of the record yielded last ends."""
        return self._pos

    def __iter__(self) -> Iterator[tuple[dict[str, Any], bool]]:
        """The records.  A complete line that is parsed and is no record (not
        UTF-8, not JSON, no seq, ...) is counted in :attr:`damage`, and
        without a literal (every line parsed) so is a record whose seq is
        not above every seq before it (repeated, gone back); with one,
        :meth:`check_order` finds those (the lines the literal rules out
        are not parsed, and cannot hold a match: their bytes are read no
        more than before, so that a search of clean transcripts is not
        slowed)."""
        literal = self._literal
        self._fh = fh = os.fdopen(open_nofollow(self._path), "rb", buffering=1 << 20)
        top = -1                       # the highest seq so far (the header's is 0)
        for raw in fh:
            end = self._pos + len(raw)
            if not raw.endswith(b"\n") or (self._bound is not None and end > self._bound):
                return                 # an append in flight (or past the bound)
            self._pos = end
            if literal is not None and b'"event"' not in raw and b"\\" not in raw:
                hay = (raw.lower() if raw.isascii() else _caseless(raw)) if literal[1] else raw
                if literal[0] not in hay:
                    continue
            got = _line_record(raw)
            if got is None:
                self._damaged(_corruption_kind(raw))
                continue
            if literal is None:
                seq = got[0]["seq"]
                top = seq if seq == top + 1 else self._order(seq, top)
            yield got

    def check_order(self) -> None:
        """With a literal, after the iteration: the records up to where it
        stopped whose seq is not above every seq before it, counted in
        :attr:`damage`, as the iteration counts them without one: a line
        that is no record is passed over (the iteration counted it when it
        could hold a match), whatever its first bytes say.  Without a
        literal the iteration counted them.

        A second read of the lines: first :meth:`_order_by_heads`, which
        reads most lines' seqs from their first bytes only; when that finds
        no seq at or below one before it, no record has one (it places a
        record where its parse does, and a line that is no record only ever
        raises the seqs a record must be above), and nothing is counted.
        Else, or when it cannot tell, :meth:`_order_by_records` reads the
        lines again and parses each, as the iteration without a literal
        does (before 2026-12-07 the first bytes decided: a torn line, or one
        whose parse keeps another seq, was placed by them, and the records
        after it were called repeated or gone back)."""
        if self._literal is None or self._fh is None:
            return
        if not self._order_by_heads():
            self._order_by_records()

    def _order_by_heads(self) -> bool:
        """Whether every line up to where the iteration stopped is placed in
        order (each seq above every seq before it) when a line beginning
        ``{"seq":N,`` is placed at N unparsed (a block of lines at a time
        when their seqs run on by one), and another is parsed and placed
        by its record (passed over when it is none).  False as soon as one
        is not, and for a line longer than a block whose first bytes give
        no seq (it is not held whole here)."""
        assert self._fh is not None
        fd, end = self._fh.fileno(), self._pos
        pos, top, rest, long = 0, -1, b"", False
        while pos < end:
            block = os.pread(fd, min(_ORDER_BLOCK, end - pos), pos)
            if not block:
                break
            pos += len(block)
            cut = block.rfind(b"\n") + 1
            if not cut:
                # a line longer than a block: its first bytes are kept, enough
                # for its seq when it begins {"seq":N, never the line whole
                # (memory flat in its length)
                rest, long = (rest + block[:64])[:64], True
                continue
            block, rest = rest + block[:cut], block[cut:]
            spliced, long = long, False     # (the first line: its head and its end)
            n = block.count(b"\n")
            seqs = _WINDOW_SEQS.findall(b"\n" + block)
            if len(seqs) == n and list(map(int, seqs)) == list(range(top + 1, top + 1 + n)):
                top += n            # every line written as the writer writes, in order
                continue
            for i, raw in enumerate(block.split(b"\n")[:-1]):
                seq = fast_seq(raw[:64])
                if seq is None:
                    if spliced and not i:
                        return False        # (not held whole: the parse decides)
                    got = _line_record(raw + b"\n")
                    if got is None:
                        continue
                    seq = got[0]["seq"]
                if seq <= top:
                    return False
                top = seq
        return True

    def _order_by_records(self) -> None:
        """The records up to where the iteration stopped whose seq is not
        above every seq before it, counted in :attr:`damage`: every line
        read again and parsed (:func:`_line_record`), a line that is no
        record passed over, as the iteration without a literal does.  (The
        iteration is over: its file is read again from the start.)"""
        assert self._fh is not None
        fh, end = self._fh, self._pos
        fh.seek(0)
        pos, top = 0, -1
        for line_no, raw in enumerate(fh, 1):
            pos += len(raw)
            if pos > end:
                break
            got = _line_record(raw)
            if got is None:
                continue
            seq = got[0]["seq"]
            top = seq if seq == top + 1 else self._order(seq, top, line_no)

    def _damaged(self, kind: str, line_no: int | None = None) -> None:
        """One more line of ``kind``: the line ``line_no``, else the line that
        ends at ``_pos``."""
        got = self.damage.get(kind)
        if got is None:
            self.damage[kind] = [1, line_no or self._line_no()]
        else:
            got[0] += 1

    def _line_no(self) -> int:
        """The 1-based number of the line that ends at ``_pos``: the newlines
        before it counted (only for the first damaged line of a kind: the
        iteration counts no lines)."""
        assert self._fh is not None
        fd, pos, n = self._fh.fileno(), 0, 0
        while pos < self._pos:
            chunk = os.pread(fd, min(1 << 20, self._pos - pos), pos)
            if not chunk:
                break
            n += chunk.count(b"\n")
            pos += len(chunk)
        return n

    def _order(self, seq: int, top: int, line_no: int | None = None) -> int:
        """The highest seq after a record of ``seq``; one not above ``top`` is
        counted (``seq_duplicate``: equal to it, else ``seq_regression``).  A
        seq that skips some is no such damage."""
        if seq <= top:
            self._damaged(SEQ_DUPLICATE if seq == top else SEQ_REGRESSION, line_no)
            return top
        return seq

    def events_after(self) -> Generator[dict[str, Any], None, None]:
        """The undo, redo and clear events this iteration will yield from here
        on, to be read before it goes on: the lines from the end of the last
        one read to the size of the file now (which bounds the iteration from
        now on, at this call, so a line appended meanwhile is seen by
        neither), found by their bytes (:meth:`sessions._File.marked_lines`:
        complete lines holding ``"event"``, the torn tail never), each taken
        by the rule the iteration applies (:func:`_line_record`).

        An iterator, not a list: its one caller adds each event to an
        ``UndoState``, which keeps four numbers of it (a list of the records
        took 23 MiB at 80,000 events).  They are read through a duplicate of
        the descriptor (``pread`` only: the iteration's offset is not moved)
        owned by a file object from the moment ``os.dup`` returns it (as
        :func:`atomic.open_owned` owns one: FileIO keeps what its ``opener``
        returns, in C): the iterator closes it when it ends or is closed, and
        one dropped unstarted, or cut short by an interrupt, is closed by the
        file object's finalizer, never twice."""
        assert self._fh is not None
        fd = self._fh.fileno()
        self._bound = size = os.fstat(fd).st_size
        raw = io.FileIO(self._path, "rb", opener=lambda _path, _flags: os.dup(fd))
        return _visibility_events(raw, self._pos, size)


def _caseless(raw: bytes) -> bytes:
    """A line that is not ASCII as :meth:`_Lines.__iter__` compares it with
    an ASCII literal under -i: every character IGNORECASE takes for an ASCII
    letter is that letter in lower case (``utf8.caseless``; bytes that are
    not UTF-8 cannot be a record: they are replaced)."""
    from .utf8 import caseless

    # (before 2026-12-07 the -i pre-check lowered a line's bytes only,
    # ASCII, and skipped 'İstanbul' for "istanbul" before the regex ran)
    return caseless(raw.decode("utf-8", "replace")).encode("utf-8")


def _visibility_events(raw: io.FileIO, pos: int, size: int
                       ) -> Generator[dict[str, Any], None, None]:
    """:meth:`_Lines.events_after`'s events from ``raw`` (closed at the end)."""
    with raw, _File(raw, "", "", size) as f:
        for line in f.marked_lines(pos, skip=_not_an_event_head):
            got = _line_record(line + b"\n")
            if got is not None and got[1] and got[0].get("event") in VISIBILITY_EVENTS:
                yield got[0]


def _not_an_event_head(head: bytes) -> bool:
    """``not_an_event`` of a line's first bytes (``marked_lines`` may give
    bytes of the next line after a short one): no line skipped here is one
    :func:`event_line` reads."""
    nl = head.find(b"\n")
    return not_an_event(head if nl < 0 else head[:nl])


_ORDER_BLOCK = 1 << 16     # bytes :meth:`_Lines._order_by_heads` reads at a time


def _corruption_kind(raw: bytes) -> str:
    """What is wrong with a complete line (with its newline) that
    :func:`_line_record` found no record: the kind ``read`` and ``sessions``
    name (invalid_utf8, not_json, not_object, no_seq, too_large)."""
    kind = _classify(raw[:-1])[0]
    return NO_SEQ if kind == "record" else kind


def _line_record(raw: bytes) -> tuple[dict[str, Any], bool] | None:
    """The record of one complete line (with its newline) and whether it is an
    event the readers apply, or None for a line that is not a record."""
    try:
        rec = load_record(raw)     # the session readers' loader (1e400 is a number)
    except (orjson.JSONDecodeError, RecordTooLarge):
        return None
    if record_seq(rec, raw) is None:     # (a corrupt line, no_seq)
        return None
    return rec, rec.get("type") == "event" and event_line(raw)


def _open_sessions(store: Store, lock_wait: float | None = None
                   ) -> tuple[SessionStore, Callable[[], None] | None]:
    """A SessionStore with the project's exclusions, read-only (nothing created).
    No facts database: no exclusions.  One that cannot be looked up (a store
    directory that cannot be searched) is an unreadable store (exit 5), as
    to every other reader: not one without exclusions, whose every session
    would then be "not searched" (exit 1, "no match"; before 2026-12-07)."""
    try:
        os.lstat(store.facts_db)
    except (FileNotFoundError, NotADirectoryError):
        return SessionStore(store, NoExclusions()), None
    except OSError as exc:
        raise StoreCorrupt(f"{store.facts_db}: cannot stat: {exc.strerror}") from None
    from .facts import BUSY_TIMEOUT, FactStore

    fs = FactStore.open_readonly(store.facts_db,
                                 busy_timeout=BUSY_TIMEOUT if lock_wait is None else lock_wait)
    return SessionStore(store, fs), fs.close


def grep(store: Store, pattern: str, *, fixed: bool = False, ignore_case: bool = False,
         session_ids: Iterable[str] | None = None, roles: Iterable[str] | None = None,
         since: datetime | None = None, until: datetime | None = None,
         purpose: str = "working", include_hidden: bool = False, context: int = 0,
         lock_wait: float | None = None) -> GrepRun:
    """Prepare a search (the pattern is compiled now: a bad one is a UsageError);
    iterate ``.hits()`` for the results.  ``lock_wait``: seconds to wait for a
    stable snapshot of the facts database (default the 5 s busy timeout)."""
    regex = compile_pattern(pattern, fixed=fixed, ignore_case=ignore_case)
    if purpose not in PURPOSES:
        raise UsageError(f"unknown purpose {purpose!r}; use working or durable")
    literal = pattern if fixed or not any(c in pattern for c in ".^$*+?{}[]|()\\") else None
    return GrepRun(store, regex, list(session_ids) if session_ids is not None else None,
                   frozenset(roles) if roles is not None else None, since, until, purpose,
                   include_hidden, context, literal, lock_wait=lock_wait)


__all__ = ["grep", "GrepRun", "GrepHit", "compile_pattern", "searchable_fields",
           "string_leaves", "path_keys", "rewrite_path_keys", "GREP_ROLES", "SUMMARY_ROLE", "undo_target"]
