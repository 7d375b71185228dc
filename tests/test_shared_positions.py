"""The references into one session share one int object per position
(``FactStore.stored_sources_by_session``): the audit's job holds every
reference into its session at once, and a span of 200 positions held as
its own 200 ints cost 36 bytes a position, 8 as pointers to shared ones
(issue 13: 20,000 spans of 200 positions, ``validate -q`` 222 -> 100 MiB)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG

SPAN = 200


def _spans_store(path: Path, facts: int, sessions: tuple[str, ...] = ("t",)) -> Path:
    """Each session: ``facts`` facts, each citing 200 positions, one every 2."""
    store = path / SLUG
    (store / "sessions").mkdir(parents=True)
    fs = FactStore(store_at(store).facts_db)
    for sid in sessions:
        recs = [{"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
                 "created": "2026-01-01T00:00:00Z"}]
        recs += [{"seq": i, "type": "message", "role": "user", "content": f"m {i}"}
                 for i in range(1, 2 * facts + SPAN + 1)]
        (store / "sessions" / f"{sid}.jsonl").write_bytes(
            b"".join(orjson.dumps(r) + b"\n" for r in recs))
        for k in range(facts):
            lo = 1 + 2 * k
            fs.add(f"{sid} fact {k}", ref=SourceRef(sid, tuple(range(lo, lo + SPAN)),
                                                      canonical_digest(recs[lo:lo + SPAN])))
    fs.close()
    return store


def _groups(store: Path) -> list[tuple[str, list]]:
    with FactStore.open_readonly(store_at(store).facts_db) as fs:
        return list(fs.stored_sources_by_session())


def test_a_sessions_spans_share_their_positions(tmp_path: Path) -> None:
    groups = _groups(_spans_store(tmp_path, 60, ("a", "b")))
    assert sorted({sid for sid, _g in groups}) == ["a", "b"]
    for sid in ("a", "b"):
        values = [x for s, g in groups if s == sid for seqs, _d in g for x in seqs]
        assert len(values) == 60 * SPAN
        assert max(values) > 256              # (CPython shares the small ints anyway)
        assert len({id(x) for x in values}) == len(set(values))


def test_holding_a_sessions_references_costs_a_pointer_a_position(tmp_path: Path) -> None:
    """Every group of one session held at once, as the audit's job holds
    them: under 12 bytes of Python allocations a cited position (a tuple's
    pointer, the group's lists and digests; 36 with an int each)."""
    store = _spans_store(tmp_path, 400)
    with FactStore.open_readonly(store_at(store).facts_db) as fs:
        tracemalloc.start()
        try:
            held = list(fs.stored_sources_by_session())
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    positions = sum(len(seqs) for _sid, g in held for seqs, _d in g)
    assert positions == 400 * SPAN
    assert size / positions < 12, size / positions
