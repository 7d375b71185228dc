"""What ``memctl facts``, ``recall``, ``history`` and ``forget`` report (and
lecode's memory_list / memory_recall return): fact statuses, rows, pages,
the learning status, recall and history.  Each returns plain data read
through a :class:`~lecode_memctl.core.facts.FactStore` and a
:class:`~lecode_memctl.core.sourceref.SessionReader`; the CLI renders it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .atomic import open_in_dir
from .errors import MemctlError, NotFound, UsageError, raises_typed
from .facts import (
    FACT_ID_RE,
    Fact,
    FactGroup,
    FactStore,
    Part,
    Revision,
    Window,
    check_fact_id,
    fact_from_group,
    fact_status,
    plain_seqs,
    row_text,
    stored_id_key,
)
from .paging import MAX_OUTPUT_BYTES, pretty_json
from .rowmodel import stored_int, utc_time  # (utc_time: the whole printed page, metadata included)
from .sessions import LEARNING_EVENT, SessionStore, epoch_hides, epoch_number, is_generated
from .sourceref import (
    HIDDEN,
    VALID,
    EvaluatedStatuses,
    ExclusionReader,
    SessionReader,
    SourceRef,
    SourceStatus,
    accepted,
    check_session_id,
    status_for,
)
from .split import Tail, bytes_written, in_two, lines_written, pickles_written

if TYPE_CHECKING:
    from .factresults import ForgetPlan
    from .facts import Provenance


# --------------------------------------------------------------------------
# Reports: what `memctl facts`, `recall` and `history` print (and memory_list
# / memory_recall return).  Each returns plain data; the CLI renders it.

PAGE_FACTS = 20                 # facts per page (memory_list)
FACT_TEXT_CHARS = 512           # fact text cap in listings and recall


def cap_text(text: str, limit: int = FACT_TEXT_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def seqs_label(seqs: Iterable[int]) -> str:
    """``3-5,8`` for positions 3, 4, 5 and 8."""
    if (type(seqs) is tuple or type(seqs) is list) and len(seqs) == 1:
        return str(seqs[0])
    out: list[str] = []
    run: list[int] = []
    for s in sorted(seqs):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def source_label(ref: SourceRef | None, provenance: Sequence[Provenance] = ()) -> str | None:
    if ref is not None:
        return f"{ref.session_id}:{seqs_label(ref.seqs)}"
    if provenance:
        return " ".join(f"{p.session_id}:{seqs_label(p.seqs)}" for p in provenance)
    return None


def _statuses_for(facts: FactStore, sessions: SessionReader, fact_ids: Sequence[str], purpose: str
                  ) -> tuple[dict[str, list[Revision]], dict[SourceRef, SourceStatus]]:
    revs = {fid: facts.revisions(fid) for fid in fact_ids}
    refs = [r.source for rs in revs.values() for r in rs if r.source is not None]
    statuses = sessions.validate_many(refs, purpose=purpose) if refs else {}
    return revs, statuses


def provenance_exclusions(sessions: SessionReader) -> Callable[[str], frozenset[int]] | None:
    """What ``fact_status`` checks a revision's legacy provenance against:
    each session's exclusions as ``sessions`` validates with them
    (``SessionStore.exclusions_once``); None for a reader that has none."""
    once = getattr(sessions, "exclusions_once", None)
    return once() if once is not None else None


def fact_row(fact: Fact, revisions: Sequence[Revision],
             statuses: Mapping[SourceRef, SourceStatus],
             excluded: Callable[[str], frozenset[int]] | None = None,
             forgotten: bool = False) -> dict[str, Any]:
    """One fact of a listing: id, revision, status and reason, source, capped
    text.  ``excluded``: :func:`provenance_exclusions`; ``forgotten``: its
    id is in forgotten (``fact_status``)."""
    st, about = fact_status(revisions, statuses, fact.revision, excluded, forgotten)
    text, truncated = cap_text(fact.text)
    return {
        "fact_id": fact.fact_id,
        "revision": fact.revision,
        "status": st.status,
        "reason": st.reason,
        "about_revision": about,
        "source": source_label(fact.source, fact.provenance),
        "source_ref": fact.source.to_json() if fact.source is not None else None,
        "text": text,
        "fact_text_truncated": truncated,
        "created": fact.created,
        "updated": fact.updated,
    }


def _evaluate_sources(facts: FactStore, sessions: SessionReader, session_id: str | None,
                      purpose: str, part: Part | Window | None = None) -> EvaluatedStatuses:
    """The statuses of every source of the facts (with evidence in
    ``session_id`` when given; of ``part`` of the ids), validated one
    session at a time (``SessionStore.validate_stored``); only the ones
    not valid are kept."""
    bad: dict[SourceRef, SourceStatus] = {}
    # (a SessionStore validates the stored values, no object each; any other
    # reader, or a SessionStore whose validate_sessions is its own, SourceRefs)
    stored = (sessions.validate_stored if isinstance(sessions, SessionStore)
              and type(sessions).validate_sessions is SessionStore.validate_sessions else None)
    if stored is None:
        for got in sessions.validate_sessions(facts.source_refs_by_session(session_id, part=part),
                                              purpose):
            bad.update((ref, st) for ref, st in got.items() if not st.ok)
        return EvaluatedStatuses(bad)
    for sid, judged in stored(facts.stored_sources_by_session(session_id, part=part), purpose):
        bad.update((SourceRef.of_checked(sid, seqs, digest), st)
                   for (seqs, digest), st in judged.items() if not st.ok)
    return EvaluatedStatuses(bad)


def evaluate_facts(facts: FactStore, sessions: SessionReader, *, session_id: str | None = None,
                   purpose: str = "durable"
                   ) -> Iterator[tuple[Fact, list[Revision], Mapping[SourceRef, SourceStatus]]]:
    """The whole-store evaluation engine: every fact (of those with evidence
    in ``session_id`` when given), in id order, with its revisions and the
    statuses of their sources.

    The sources of every revision are read in one query, grouped by the
    session they cite, and validated one session at a time
    (``SessionStore.validate_sessions``: each transcript opened and read
    once, its events once, its cited spans from one read, the exclusions
    once for the whole evaluation); only the sources that are not valid are
    kept.  The facts and revisions are then streamed, so memory follows one
    session's sources and the invalid ones, not the store.
    :func:`~lecode_memctl.core.facts.fact_status` decides each fact from
    them, exactly as for one fact."""
    with facts.one_state() as state:    # (the listing reads what was evaluated)
        statuses = _evaluate_sources(state, sessions, session_id, purpose)
        for fact, revs in state.iter_fact_revisions(session_id):
            yield fact, revs, statuses
            state.check_open()      # (closed meanwhile: no row read ahead is given)


def iter_fact_rows(facts: FactStore, sessions: SessionReader, *,
                   session_id: str | None = None,
                   where: Callable[[Fact], bool] | None = None,
                   parallel: bool = False) -> Iterator[dict[str, Any]]:
    """Every fact (for which ``where`` holds) as a listing row
    (:func:`fact_row`, from :func:`evaluate_facts`'s statuses).

    A fact whose every revision has a plainly well-formed source and no
    legacy provenance -- nearly every fact of a store -- is made into its row
    from the stored values directly (:func:`_plain_row`); any other through
    the Fact and Revision objects, so its status, reason and detail are
    those of the one-fact path (tests/test_engine.py compares the two).

    ``parallel``: a whole-store listing (no ``session_id``) of a large
    store may fork a child process to make part of the rows
    (:mod:`~lecode_memctl.core.split`); the rows and their order are the
    same, but ``where`` is then called in that child for its part's facts
    (what it changes or prints there is not seen here: a filter with no
    other effect, as memctl's own), and a damaged database may give more
    rows before its error (each process stops at its own first damaged
    row).  Off by default: a program that imports this may not want to be
    forked."""
    return _rows(facts, sessions, session_id, where, record=False, parallel=parallel)


def iter_fact_records(facts: FactStore, sessions: SessionReader, *,
                      session_id: str | None = None,
                      where: Callable[[Fact], bool] | None = None,
                      parallel: bool = False) -> Iterator[dict[str, Any]]:
    """:func:`iter_fact_rows` as ``memctl facts`` prints them: each row a
    ``FACT`` record (``rowmodel.FACT.record``: ``type`` first, times in RFC
    3339 UTC), made so directly."""
    return _rows(facts, sessions, session_id, where, record=True, parallel=parallel)


def iter_fact_page(facts: FactStore, sessions: SessionReader, start: int, stop: int,
                   session_id: str | None = None) -> Iterator[dict[str, Any]]:
    """``itertools.islice(iter_fact_records(facts, sessions,
    session_id=session_id, parallel=True), start, stop)``: the records of a
    bounded page of the listing (of the facts with evidence in
    ``session_id`` when given; no other filter), made by the same listing
    (:func:`_listing_rows`), whose evaluation validates the sources of the
    page's facts only (:meth:`~lecode_memctl.core.facts.FactStore.page_window`),
    not every source of the store (of the session's facts).  Where the
    store gives no such window (a bound that is not a text id, a page that
    reaches the end from the first fact), the whole listing, sliced."""
    import itertools

    if stop <= start:
        return
    with facts.one_state() as state:   # (the window and the listing: one state)
        window = state.page_window(start, stop, session_id)
        if window is not None:
            yield from itertools.islice(_listing_rows(state, sessions, session_id, True, window),
                                        stop - start)
            return
    yield from itertools.islice(iter_fact_records(facts, sessions, session_id=session_id,
                                                  parallel=True), start, stop)


def _rows(facts: FactStore, sessions: SessionReader, session_id: str | None,
          where: Callable[[Fact], bool] | None, *, record: bool,
          parallel: bool = False) -> Iterator[dict[str, Any]]:
    if not parallel or session_id is not None:
        yield from _listing_rows(facts, sessions, session_id, record, where=where)
        return
    # (the child's rows come back pickled: every stored value as it was)
    import pickle

    yield from in_two(facts, lambda p: _listing_rows(facts, sessions, None, record, p, where),
                      pickle.dumps, pickles_written)


def iter_fact_lines(facts: FactStore, sessions: SessionReader, encode: Callable[[Any], bytes],
                    *, session_id: str | None = None,
                    where: Callable[[Fact], bool] | None = None,
                    keep: Callable[[dict[str, Any]], bool] | None = None,
                    parallel: bool = False, record: bool = True,
                    tail: Tail | None = None, lines: bool = True) -> Iterator[bytes]:
    """The records :func:`iter_fact_records` gives (of the facts for which
    ``where`` holds, the records for which ``keep`` holds), each encoded by
    ``encode`` (one line of JSON, say): pieces of
    the output, each one or more encoded records, in order.  With
    ``parallel``, the child's part of a split listing (:mod:`~lecode_memctl.core.split`)
    comes as the bytes it wrote, never decoded here, in pieces of about 1
    MiB: each cut after a newline (``encode`` must end each record with
    one), or with ``lines`` false cut anywhere (records that say their own
    length); and ``tail`` (:data:`~lecode_memctl.core.split.Tail`) brings
    back what its ``encode`` gathered there.  Without ``record``, the rows
    :func:`iter_fact_rows` gives instead."""
    def part(p: Part | None = None) -> Iterator[bytes]:
        for row in _listing_rows(facts, sessions, session_id, record, p, where):
            if keep is None or keep(row):
                yield encode(row)

    if not parallel or session_id is not None:
        return part()
    return in_two(facts, part, lambda piece: piece, lines_written if lines else bytes_written,
                  tail)


def _listing_rows(facts: FactStore, sessions: SessionReader, session_id: str | None,
                  record: bool, part: Part | Window | None = None,
                  where: Callable[[Fact], bool] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`_rows` of every fact (with evidence in ``session_id``; of
    ``part`` of the ids) for which ``where`` holds (given the Fact
    :meth:`~lecode_memctl.core.facts.FactStore.iter_fact_revisions` gives)."""
    from .rowmodel import FACT

    with facts.one_state() as state:    # (the listing reads what was evaluated)
        listing = state.start_listing(session_id, part=part)   # read while the sources are validated
        statuses = _evaluate_sources(state, sessions, session_id, "durable", part)
        by_values = statuses.by_values
        excluded = provenance_exclusions(sessions)
        gone = state.forgotten_present()    # (one query; nearly always empty)
        for group in listing.groups(bare=True):
            made = None
            if where is not None:
                made = fact_from_group(group)
                if not where(made[0]):
                    state.check_open()
                    continue
            forgotten = bool(gone) and row_text(group[0]) in gone
            plain = None if forgotten else _plain_row(group, by_values, record)
            if plain is not None:
                yield plain
            else:
                fact, revs = made or fact_from_group(group)
                row = fact_row(fact, revs, statuses, excluded, forgotten)
                yield FACT.record(row) if record else row
            state.check_open()      # (closed meanwhile: no row read ahead is given)


def _plain_row(group: FactGroup, bad: Mapping[tuple[str, tuple[int, ...], str], SourceStatus],
               record: bool = False) -> dict[str, Any] | None:
    """:func:`fact_row` of a stored fact (:data:`~lecode_memctl.core.facts.FactGroup`)
    whose revisions are all plain (:func:`~lecode_memctl.core.facts.plain_seqs`)
    and exactly ``1..revision``; None for any other fact.  ``bad``:
    the statuses not valid, by (session, seqs, digest).  ``record``: as
    ``FACT.record`` makes it (``type`` first, RFC 3339 times)."""
    fid, revision, created, updated, stored = group
    if type(fid) is not str or type(revision) is not int or not FACT_ID_RE.match(fid):
        return None
    status: SourceStatus | None = None
    about: int | None = None
    current: tuple[Any, ...] | None = None
    seqs_of_current: tuple[int, ...] = ()
    # fact_status: the first failing revision, current (highest) first; the
    # revisions are stored in ascending order (plain ones are integers); a
    # number stored twice is the Revision objects' to judge (flag_stored_twice)
    prev = None
    for rev in reversed(stored):
        seqs = plain_seqs(rev)
        if seqs is None or rev[0] == prev:
            return None
        prev = rev[0]
        if rev[0] == revision:
            current, seqs_of_current = rev, seqs
        if status is None and bad:
            st = bad.get((rev[3], seqs, rev[5]))
            if st is not None:
                status, about = st, rev[0]
    if current is None or len(stored) != revision or stored[-1] is not current \
            or stored[0][0] != 1:
        return None     # (revisions not exactly 1..revision: fact_status's revision_gap)
    text, truncated = cap_text(current[1])
    sid, digest = current[3], current[5]
    created, updated = row_text(created), row_text(updated)
    row = {
        "type": "fact",
        "fact_id": fid,
        "revision": revision,
        "status": VALID if status is None else status.status,
        "reason": None if status is None else status.reason,
        "about_revision": about,
        "source": f"{sid}:{seqs_label(seqs_of_current)}",
        "source_ref": {"session_id": sid, "seqs": list(seqs_of_current), "digest": digest},
        "text": text,
        "fact_text_truncated": truncated,
        "created": created,
        "updated": updated,
    }
    if not record:
        del row["type"]
        return row
    # FACT.record: "type" first, the times in RFC 3339 (a fact at revision 1
    # was updated when it was created: converted once); keys keep their places
    # (one dict made, not a second one copied from the first)
    when = utc_time(created)
    row["created"] = when
    row["updated"] = when if updated == created else utc_time(updated)
    return row


def _doc_size(doc: Any) -> int:
    return len(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)) + 1


def check_listed_session(sessions: SessionReader, facts: FactStore | None,
                         session_id: str) -> bool:
    """The one check of a listing's session filter (``facts --session``,
    memory_list), before anything is listed.  ``--session`` picks facts by
    the evidence the facts database records, so the facts citing a session
    whose transcript is gone are listed (``missing``, ``session_missing``):
    False then, and the listing has no learning status.  True when the
    transcript opens (its header and project checked): its learning status
    is read.  NotFound "no session X" when the transcript is gone and no
    fact cites it; the transcript's own error (a symbolic link: Conflict;
    not a regular file, unreadable: StoreCorrupt; another project's) when
    it is there but cannot be read, as ``memctl read`` reports it."""
    try:
        sessions.header(session_id)
    except NotFound:
        if facts is not None and facts.ids_with_evidence_in(session_id):
            return False
        raise
    return True


def learning_status(sessions: SessionReader, facts: FactStore | None, session_id: str | None = None,
                    *, generation: int | None = None) -> dict[str, Any] | None:
    """The newest ``learning`` event (of ``session_id``, else of the most
    recently appended session that has one): status, reason counts and the
    proposals whose evidence and epoch still validate.  None when there is none."""
    if session_id is not None:
        candidates = [session_id]
    else:
        def mtime(sid: str) -> float:
            try:
                return os.lstat(sessions.path(sid)).st_mtime
            except OSError:
                return 0.0
        candidates = sorted(sessions.session_ids(unlistable_ok=True),
                            key=lambda s: (-mtime(s), s))
    gen = generation if generation is not None else (facts.generation() if facts else 0)
    for sid in candidates:
        if session_id is None and not _mentions(sessions, sid, _LEARNING_BYTES):
            # a byte scan rules the session out without parsing its lines
            continue
        try:
            events = sessions.events(sid, 0, {LEARNING_EVENT})
        except (MemctlError, OSError):
            if session_id is not None:
                raise
            continue  # a refused or unreadable session has no learning status
        if not events:
            continue
        ev = events[-1]
        counts = ev.get("reason_counts")
        if not isinstance(counts, dict):
            counts = {}
        counts = {str(k): v for k, v in counts.items()
                  if isinstance(v, int) and not isinstance(v, bool)}
        fact_ids = [f for f in ev.get("facts", []) if isinstance(f, str)] \
            if isinstance(ev.get("facts"), list) else []
        proposals = ev.get("proposals")
        raw = proposals if isinstance(proposals, list) else []
        valid, hidden = _valid_proposals(raw, sessions, facts, gen, ev)
        return {"session_id": sid, "seq": ev.get("seq"),
                "status": ev.get("status") if isinstance(ev.get("status"), str) else None,
                "reason_counts": counts, "facts": fact_ids, "proposals": valid,
                "proposals_hidden": hidden}
    return None


# The bytes of the name "learning" in a JSON string: as written, or with one
# of its letters as a JSON escape, which begins \u006 (a, e, g, i, l, n) or
# \u0072 (r); an escape of another character (\u001b in a tool's output)
# spells none of them.
_LEARNING_BYTES = (b'"%s"' % LEARNING_EVENT.encode(), b"\\u006", b"\\u0072")


def _mentions(sessions: SessionReader, session_id: str, needles: tuple[bytes, ...]) -> bool:
    """Whether the session file contains any of ``needles`` at all (read
    with ``O_NOFOLLOW``, in chunks, each searched by the C library's
    ``memmem`` where there is one: ``sessions.finder_in``, three times
    ``bytes.find`` here).  True when it cannot be read: the parser then
    reports why."""
    from .sessions import finder_in

    try:
        fd = open_in_dir(sessions.path(session_id))
    except OSError:
        return True
    try:
        keep = max(map(len, needles))
        tail = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return False
            joined = tail + chunk[:keep]
            find, n = finder_in(chunk), len(chunk)
            if any(x in joined or find(x, 0, n) >= 0 for x in needles):
                return True
            tail = chunk[-keep:]
    except OSError:
        return True
    finally:
        os.close(fd)


def _proposal_ref(p: Mapping[str, Any]) -> SourceRef | None:
    for key in ("source", "source_snapshot", "ref"):
        if isinstance(p.get(key), Mapping):
            try:
                return SourceRef.from_json(p[key])
            except UsageError:
                return None
    if {"session_id", "seqs", "digest"} <= set(p):
        try:
            return SourceRef.from_json({k: p[k] for k in ("session_id", "seqs", "digest")})
        except UsageError:
            return None
    return None


def _valid_proposals(raw: Sequence[Any], sessions: SessionReader, facts: FactStore | None, generation: int,
                     event: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Proposals whose epoch is current, whose evidence validates and whose
    conflict ids still name facts at the same revision.  A proposal is the
    output of an extraction, not an existing fact: its evidence is validated
    for purpose ``working`` (the reference design: "working" is the purpose
    of new extraction; a ``clear`` after it hides it, as ``correct`` would
    refuse it), and its epoch (its own, else its event's) as a generated
    message's is (store contract, "Visibility", rule 4): below the
    generation, or absent once the generation is above 0, it is hidden."""
    valid: list[dict[str, Any]] = []
    hidden = 0
    for p in raw:
        if not isinstance(p, Mapping):
            hidden += 1
            continue
        if epoch_hides(p.get("epoch", event.get("epoch")), generation):
            hidden += 1
            continue
        ref = _proposal_ref(p)
        if ref is None or not sessions.validate_source(ref, purpose="working").ok:
            hidden += 1
            continue
        if not _conflicts_hold(p.get("conflicts", []), facts):
            hidden += 1
            continue
        text = p.get("text")
        text = text if isinstance(text, str) else ""
        capped, truncated = cap_text(text)
        valid.append({"text": capped, "fact_text_truncated": truncated,
                      "source": ref.to_json(), "kind": p.get("kind"),
                      "conflicts": p.get("conflicts", [])})
    return valid, hidden


def _conflicts_hold(conflicts: Any, facts: FactStore | None) -> bool:
    """Whether a proposal's conflicts still name facts at their revision (the
    reference design: "Conflict IDs must identify facts actually supplied to
    that call, and those facts must still have the same revision").  Each
    is ``{"fact_id", "revision"}`` (the fact as it was supplied to the
    extraction call); one that names no fact (forgotten, never there, not
    an id) or a fact now at another revision fails.  So does anything else:
    a plain fact id, or an object without an integer revision, says no
    revision, so whether the fact still has the one the call was given
    cannot be known, and the proposal is not taken as valid (fail closed;
    before 2026-12-07 a plain id was checked only for existence, and a
    proposal naming a fact corrected since was still listed).  ``conflicts``
    null is none; any other value that is not a list (one id or object not
    in a list included) names no fact at its revision."""
    if conflicts is None:
        conflicts = []          # (null: none, as a missing list is)
    elif not isinstance(conflicts, list):
        return False
    for c in conflicts:
        if not (isinstance(c, Mapping) and isinstance(c.get("fact_id"), str)
                and type(c.get("revision")) is int):
            return False
        fid, rev = c["fact_id"], c["revision"]
        if facts is None or not FACT_ID_RE.match(fid):
            return False
        cur = facts.get(fid)
        if cur is None or cur.revision != rev:
            return False
    return True


MAX_OFFSET = (1 << 63) - 1


@raises_typed
def facts_page(facts: FactStore | None, sessions: SessionReader, *, offset: int = 0, limit: int = PAGE_FACTS,
               session_id: str | None = None,
               max_bytes: int = MAX_OUTPUT_BYTES,
               transcript: bool | None = None, valid_texts: bool = False,
               current_session_id: str | None = None) -> dict[str, Any]:
    """One page of ``memctl facts`` / memory_list: at most ``limit`` (<= 20) facts,
    the whole JSON document at most ``max_bytes``; ``next_offset`` is null at
    the end.  Then the latest learning status (of ``session_id`` when given:
    null when its transcript is gone, :func:`check_listed_session`, whose
    answer ``transcript`` is when the caller already has it).
    ``valid_texts`` (memory_list, which the model reads): the text of a fact
    whose status is not ``valid`` is null, ``fact_text_truncated`` false,
    before the page is fitted to ``max_bytes`` (as :func:`recall` gives it
    none).
    ``current_session_id`` (memory_list: the agent's current session)
    names the session whose learning status is given, and only that: the
    facts are the whole project's, as without ``session_id``; the learning
    status is null when that session has no learning event or no
    transcript yet (never another session's, as without it: the most
    recently written session's).  It and ``session_id`` are not given
    together (UsageError)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError("offset must be 0 or more")
    if offset > MAX_OFFSET:   # SQLite and JSON integers are 64-bit (issue 16.5)
        raise UsageError(f"offset {offset} is too large (at most {MAX_OFFSET})")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_FACTS:
        raise UsageError(f"limit must be 1..{PAGE_FACTS}")
    if current_session_id is not None:
        if session_id is not None:
            raise UsageError("give session_id (the facts citing a session) or current_session_id "
                             "(the session whose learning status is given), not both")
        check_session_id(current_session_id)
    if session_id is not None:
        check_session_id(session_id)
        if transcript is None:
            transcript = check_listed_session(sessions, facts, session_id)
    rows: list[dict[str, Any]] = []
    total = 0
    excluded = provenance_exclusions(sessions)
    if facts is not None:
        gone = facts.forgotten_present()    # (a forgotten id stored again: hidden)
        if session_id is None:
            total = facts.count()
            page = facts.list_facts(offset, limit)
            revs, statuses = _statuses_for(facts, sessions, [f.fact_id for f in page], "durable")
            rows = [fact_row(f, revs[f.fact_id], statuses, excluded, f.fact_id in gone)
                    for f in page]
        else:
            ids = facts.ids_with_evidence_in(session_id)
            total = len(ids)
            page = [f for f in map(facts.get, ids[offset:offset + limit]) if f is not None]
            revs, statuses = _statuses_for(facts, sessions, [f.fact_id for f in page], "durable")
            rows = [fact_row(f, revs[f.fact_id], statuses, excluded, f.fact_id in gone)
                    for f in page]
    if valid_texts:
        for row in rows:
            if row["status"] != VALID:
                row["text"], row["fact_text_truncated"] = None, False
    if current_session_id is not None:
        learning = _current_learning(sessions, facts, current_session_id)
    else:
        learning = learning_status(sessions, facts, session_id) if transcript is not False else None
    doc: dict[str, Any] = {"offset": offset, "limit": limit, "total": total,
                           "next_offset": None, "facts": rows, "learning": learning}
    shown = len(rows)
    doc["next_offset"] = offset + shown if offset + shown < total else None
    while _doc_size(doc) > max_bytes and learning and learning["proposals"]:
        learning["proposals"].pop()
        learning["proposals_truncated"] = True
    while _doc_size(doc) > max_bytes and len(rows) > 1:
        rows.pop()
        doc["next_offset"] = offset + len(rows)
    return doc


def _current_learning(sessions: SessionReader, facts: FactStore | None,
                      session_id: str) -> dict[str, Any] | None:
    """The learning status of the agent's current session (memory_list):
    None when its transcript is not there yet (``NotFound``), has no
    complete header yet (empty, or its first line still being written:
    ``NoHeaderYet``), or holds no learning event; a transcript refused for
    another reason (another project's, a symbolic link, a bad header) or
    that cannot be read raises its own error, as ``session_id`` does."""
    from .sessions import NoHeaderYet

    try:
        sessions.header(session_id)
    except (NotFound, NoHeaderYet):
        return None
    return learning_status(sessions, facts, session_id)


def _require_fact(facts: FactStore | None, fact_id: str) -> Fact:
    """The fact at its current revision (``FactStore.require``): UsageError for
    a bad id, NotFound "no fact X" (also when there is no facts database) or
    "fact X was forgotten"."""
    check_fact_id(fact_id)
    if facts is None:
        raise NotFound(f"no fact {fact_id}")
    return facts.require(fact_id)


@raises_typed
def recall(facts: FactStore | None, sessions: SessionReader, fact_id: str, *, offset: int = 0,
           limit: int | None = None, max_bytes: int = MAX_OUTPUT_BYTES,
           head: Mapping[str, Any] | None = None,
           render: Callable[[Any], bytes] = pretty_json) -> dict[str, Any]:
    """memory_recall by fact id: ids, current revision and status; the fact
    text (capped) and a page of its source evidence only when every revision's
    evidence validates (purpose ``durable``).  ``head`` (memctl's type and
    schema_version) comes first, inside ``max_bytes`` (the page as
    ``render`` gives it: :func:`~.paging.page_document`)."""
    from . import paging

    fact = _require_fact(facts, fact_id)
    assert facts is not None
    revs, statuses = _statuses_for(facts, sessions, [fact_id], "durable")
    st, about = fact_status(revs[fact_id], statuses, fact.revision,
                            provenance_exclusions(sessions), facts.was_forgotten(fact_id))
    meta: dict[str, Any] = {**(head or {}), "fact_id": fact_id, "revision": fact.revision,
                            "status": st.status, "reason": st.reason}
    if not st.ok or fact.source is None:
        meta["about_revision"] = about
        return meta
    ref = fact.source
    records = sessions.records(ref.session_id, ref.start, ref.end)
    from .sourceref import RecordsUndigestible, canonical_digest

    try:
        digest: str | None = canonical_digest(records)
    except RecordsUndigestible:
        digest = None
    if digest != ref.digest:  # changed since it was validated
        s = status_for("digest_mismatch" if digest is not None else "records_corrupt")
        return {**(head or {}), "fact_id": fact_id, "revision": fact.revision, "status": s.status,
                "reason": s.reason, "about_revision": fact.revision}
    wanted = set(ref.seqs)
    items = [(r["seq"], r) for r in records if r.get("seq") in wanted]
    text, truncated = cap_text(fact.text)
    meta.update({"session_id": ref.session_id, "source": ref.to_json(), "text": text,
                 "fact_text_truncated": truncated})
    doc, _page = paging.page_document(meta, items, offset=offset,
                                      limit=paging.DEFAULT_LIMIT if limit is None else limit,
                                      max_bytes=max_bytes, render=render)
    return doc


@raises_typed
def history(facts: FactStore | None, sessions: SessionReader, fact_id: str) -> dict[str, Any]:
    """Every revision with its text, time, source and each source's status today."""
    fact = _require_fact(facts, fact_id)
    assert facts is not None
    revs, statuses = _statuses_for(facts, sessions, [fact_id], "durable")
    st, about = fact_status(revs[fact_id], statuses, fact.revision,
                            provenance_exclusions(sessions), facts.was_forgotten(fact_id))
    out = []
    for r in revs[fact_id]:
        if r.source is not None:
            s = statuses.get(r.source) or SourceStatus(HIDDEN, "invalid_ref")
        elif r.source_error is not None:    # a malformed row: as fact_status says it
            s = status_for("invalid_ref", r.source_error)
        else:
            s = status_for("legacy_provenance")
        # (a revision stored as no integer -- a BLOB, a real, +Inf, a text:
        # a damaged row -- is null, as the listing gives a fact's, JSON and
        # CSV alike; before 2026-12-07 only a BLOB was, and 2.5, +Inf and
        # 'abc' came out as 2.5 / inf / abc.  Such a row is never current,
        # and none is when the fact's own revision reads as null)
        rev = stored_int(r.revision)
        out.append({"revision": rev,
                    "text": r.text, "created": r.created,
                    "current": rev is not None and rev == stored_int(fact.revision),
                    "source": source_label(r.source, r.provenance),
                    "source_ref": r.source.to_json() if r.source is not None else None,
                    "provenance": [p.to_json() for p in r.provenance],
                    "status": s.status, "reason": s.reason})
    return {"fact_id": fact_id, "revision": fact.revision, "status": st.status,
            "reason": st.reason, "about_revision": about, "created": fact.created,
            "updated": fact.updated, "revisions": out}


class PlannedExclusions:
    """The exclusions and generation planned forgets leave: ``base`` (the facts
    database as it is) plus the new exclusions of ``plans`` (one ForgetPlan,
    or several: forgets done one after the other), at the generation they
    leave (each forget that does anything raises it by one: one plan's
    ``new_generation``; N plans' first ``generation`` + N).  An
    ExclusionReader: given to a SessionStore, the listing's own status code
    answers what the forgets will do."""

    def __init__(self, base: ExclusionReader, plans: ForgetPlan | Sequence[ForgetPlan]) -> None:
        from .factresults import ForgetPlan

        todo = [plans] if isinstance(plans, ForgetPlan) else list(plans)
        self._base = base
        self._generation = (base.generation() if not todo else todo[0].generation
                            + sum(p.new_generation - p.generation for p in todo))
        added: dict[str, set[int]] = {}
        for plan in todo:
            for sid, seq in plan.exclusions:
                added.setdefault(sid, set()).add(seq)
        self._added = {sid: frozenset(seqs) for sid, seqs in added.items()}

    def generation(self) -> int:
        return self._generation

    def excluded_seqs(self, session_id: str) -> frozenset[int]:
        return self._base.excluded_seqs(session_id) | self._added.get(session_id, frozenset())


def _after_forget(sessions: SessionReader, facts: FactStore,
                  plans: ForgetPlan | Sequence[ForgetPlan]) -> SessionReader:
    """``sessions`` as it will read once the planned forget(s) are committed."""
    if not isinstance(sessions, SessionStore):
        raise UsageError("a forget preview needs a SessionStore")
    return SessionStore(sessions.store, exclusions=PlannedExclusions(facts, plans))


def _status_changes(facts: FactStore, before: SessionReader, after: SessionReader,
                    fact_id: str) -> list[dict[str, Any]]:
    """Every other fact whose listed (status, reason) the forget changes: the
    listing's rows (``iter_fact_rows``) read now and read with the planned
    exclusions and generation, joined on the fact id (both in id order, both
    of one state of the database: ``FactStore.one_state``)."""
    changes: list[dict[str, Any]] = []
    with facts.one_state() as state:
        later = iter_fact_rows(state, after)
        new = next(later, None)
        for old in iter_fact_rows(state, before):
            fid = old["fact_id"]
            while new is not None and new["fact_id"] < fid:
                new = next(later, None)
            if new is None or new["fact_id"] != fid or fid == fact_id:
                continue
            if (old["status"], old["reason"]) != (new["status"], new["reason"]):
                changes.append({"fact_id": fid, "status": old["status"], "reason": old["reason"],
                                "new_status": new["status"], "new_reason": new["reason"]})
    return changes


def _summaries_made_inert(compacts: Sequence[tuple[str, Any, list[SourceRef]]],
                          before: SessionReader, after: SessionReader) -> list[dict[str, Any]]:
    """Compact events whose lineage validates now (purpose ``working``, as the
    audit checks it) and will not once the forget is committed."""
    refs = sorted({r for _sid, _seq, lineage in compacts for r in lineage},
                  key=lambda r: (r.session_id, r.start, r.end, r.digest))
    if not refs:
        return []
    now = before.validate_many(refs, purpose="working")
    later = after.validate_many(refs, purpose="working")
    return [{"session_id": sid, "seq": seq} for sid, seq, lineage in compacts
            if all(now[r].ok for r in lineage) and not all(later[r].ok for r in lineage)]


def unexcluded_rows(unexcluded: Iterable[tuple[int | None, str]]) -> list[dict[str, Any]]:
    """The ``unexcluded`` of a forget document: ``[{revision, reason}]`` of
    each revision whose source row does not parse (``ForgetPlan.unexcluded``;
    ``FactStore.forget(unexcluded=)``)."""
    return [{"revision": rev, "reason": reason} for rev, reason in unexcluded]


def unexcluded_line(fact_id: str, row: Mapping[str, Any]) -> str:
    """One ``unexcluded`` row as the text reports say it."""
    rev = "?" if row["revision"] is None else row["revision"]
    return (f"revision {rev} of {fact_id}: its source does not parse ({row['reason']}): "
            "what of its evidence it does not name as a position is not excluded")


def forget_impact(facts: FactStore, sessions: SessionReader, fact_id: str) -> dict[str, Any]:
    """``memctl forget --dry-run``: the plan plus what it does, each read through
    the code that reads it after the forget (the exclusions and generation the
    plan leaves, :class:`PlannedExclusions`): every other fact whose listed
    status changes (``status_changes``: evidence overlapping the new exclusions,
    or holding generated messages the new generation hides), the generated
    messages the new generation invalidates, and the compaction summaries whose
    lineage stops validating (made inert)."""
    plan = facts.plan_forget(fact_id)
    doc: dict[str, Any] = {
        "fact_id": fact_id, "exists": plan.exists,
        "already_forgotten": not plan.exists,
        "exclusions": [{"session_id": s, "seq": q} for s, q in plan.exclusions],
        "already_excluded": [{"session_id": s, "seq": q} for s, q in plan.already_excluded],
        "suppressed_facts": list(plan.suppressed_facts),
        "unexcluded": unexcluded_rows(plan.unexcluded),
        "status_changes": [],
        "generation": plan.generation, "new_generation": plan.new_generation,
        "generated_messages_invalidated": 0, "summaries_inert": [],
    }
    if not plan.exists:
        return doc
    after = _after_forget(sessions, facts, plan)
    doc["status_changes"] = _status_changes(facts, sessions, after, fact_id)
    invalidated, compacts = _scan_generated_and_compacts(sessions, plan.generation,
                                                         plan.new_generation)
    doc["generated_messages_invalidated"] = invalidated
    doc["summaries_inert"] = _summaries_made_inert(compacts, sessions, after)
    return doc


def _scan_generated_and_compacts(sessions: SessionReader, gen: int, new: int
                                 ) -> tuple[int, list[tuple[str, Any, list[SourceRef]]]]:
    """One read of every session this store's readers accept: how many
    generated messages a raise of the generation from ``gen`` to ``new``
    hides, and every compact event with its lineage (session id, seq,
    lineage refs)."""
    invalidated = 0
    compacts: list[tuple[str, Any, list[SourceRef]]] = []
    # (every session is read: an unlistable sessions/ is exit 5, as for
    # `memctl sessions`, never a preview of nothing invalidated)
    for sid in sessions.session_ids():
        if not accepted(sessions, sid):
            continue  # a session every reader refuses: nothing in it is this store's
        try:
            items = sessions.scan(sid)   # (scan itself does not check the header's project)
            for item in items:
                rec = item.record
                if rec is None:
                    continue
                if rec.get("type") == "message" and is_generated(rec):
                    epoch = epoch_number(rec.get("epoch"))
                    if epoch is not None:
                        if gen <= epoch < new:
                            invalidated += 1
                    elif gen == 0:
                        invalidated += 1
                elif item.event and rec.get("event") == "compact":
                    lineage = _lineage_refs(rec.get("lineage"))
                    if lineage:
                        compacts.append((sid, rec.get("seq"), lineage))
        except (MemctlError, OSError):
            continue  # refused or unreadable sessions are skipped
    return invalidated, compacts


def forgets_impact(facts: FactStore, sessions: SessionReader, fact_ids: Sequence[Any],
                   *, stored: bool = False) -> dict[str, Any]:
    """What forgetting every fact of ``fact_ids`` (one after the other, as
    ``memctl redact`` does) does to the others, named as
    :func:`forget_impact` names it: ``suppressed_facts`` (the other facts
    whose evidence the new exclusions overlap, sorted), ``summaries_inert``
    (the compaction summaries whose lineage stops validating, by session
    id and seq) and ``generated_messages_invalidated`` (the generated
    messages the raised generation leaves behind, counted by the same scan
    as ``forget --dry-run``'s) and ``unexcluded`` (``[{fact_id, revision,
    reason}]``: each revision of the facts whose source row does not parse,
    whose evidence the forget cannot exclude).  The union of
    what :func:`forget_impact` says of each forget, computed for all of
    them together: the facts' ``plan_forgets`` (each one's exclusions and
    the facts they suppress, each cited session's source rows read once),
    then one reader with the union of the planned
    exclusions at the generation the forgets leave
    (:class:`PlannedExclusions`), one read of the sessions and one
    validation of the lineages (each :func:`forget_impact` reads every
    session and lists every fact twice: ``redact``'s plan took the square
    of the number of its forgets).

    The same answer: a lineage ref is hidden by an excluded position of
    its span or by a generated message whose epoch is below the
    generation; the union of the exclusions hides a position iff one
    forget's does, and every raise of the generation (one forget's, N
    forgets') hides the same epochs, those below the current generation
    plus the current generation itself -- no epoch is above the current
    generation (a writer refuses one; a transcript that holds one is
    ``validate``'s ``session.epoch_ahead``, and the N forgets then do hide
    it, as said here).  A fact already forgotten, or one of ``fact_ids``,
    is in neither answer's facts.  ``stored``: the ids are the values as
    stored, not typed (``FactStore.forget``'s ``stored``: an id that is not
    16 lower-case hex digits, or a BLOB, is planned by exactly that value,
    not refused; the answer names facts as the listing shows them)."""
    # (ids as stored, with ``stored``: each once by its storage class, the
    # text 'ZZ' and the BLOB b'ZZ' two facts -- facts.stored_id_key)
    once = list({stored_id_key(f): f for f in fact_ids}.values()) if stored \
        else list(dict.fromkeys(fact_ids))
    plans = [p for p in facts.plan_forgets(once, stored=stored, together=True) if p.exists]
    if not plans:
        return {"suppressed_facts": [], "summaries_inert": [],
                "generated_messages_invalidated": 0, "unexcluded": []}
    unexcluded = [{"fact_id": p.fact_id, **row} for p in plans
                  for row in unexcluded_rows(p.unexcluded)]
    # (with ``stored``, the plans leave the run's facts out themselves, by
    # their stored ids: comparing shown ids listed two BLOB forgets as each
    # other's, or dropped a live text twin 'ZZ' of a forgotten BLOB b'ZZ'
    # -- code reviews of 2026-12-07)
    suppressed = {f for p in plans for f in p.suppressed_facts}
    if not stored:
        suppressed -= set(fact_ids)
    after = _after_forget(sessions, facts, plans)
    gen = plans[0].generation
    invalidated, compacts = _scan_generated_and_compacts(sessions, gen, gen + len(plans))
    inert = _summaries_made_inert(compacts, sessions, after)
    return {"suppressed_facts": sorted(suppressed),
            "summaries_inert": sorted(inert, key=lambda s: (s["session_id"], str(s["seq"]))),
            "generated_messages_invalidated": invalidated, "unexcluded": unexcluded}


def _lineage_refs(lineage: Any) -> list[SourceRef] | None:
    """A compact event's lineage as SourceRefs; None when it is absent (an older
    event), empty or has a chunk that does not parse (the summary is not valid now)."""
    if not isinstance(lineage, list) or not lineage:
        return None
    try:
        return [SourceRef.from_json(c) for c in lineage]
    except UsageError:
        return None


__all__ = ["facts_page", "check_listed_session", "recall", "history", "forget_impact",
           "forgets_impact", "unexcluded_rows", "unexcluded_line",
            "PlannedExclusions", "learning_status",
            "evaluate_facts", "iter_fact_rows", "iter_fact_records", "iter_fact_page",
            "iter_fact_lines", "fact_row",
            "cap_text", "seqs_label", "source_label"]
