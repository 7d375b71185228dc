"""grep keeps a session's hits until the session's undo/redo/clear events are
known, and of each record with a hit only what visibility needs: not the
parsed record itself.  A session of large records that all match held every
one of them (a 9 MB transcript of summaries with cumulative lineage: 64 MiB
peak against 34 MiB at a quarter of it)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson

from lecode_memctl.core.grep import grep
from lecode_memctl.core.layout import store_at

from .builders import traced_peak

SLUG = "proj-0123456789ab"
BODY = 20_000          # characters of each record's one long line (the hit shows 400)


def _store(root: Path, n: int) -> Path:
    st = store_at(root / "memory" / SLUG)
    st.sessions_dir.mkdir(parents=True)
    recs: list[dict] = [{"seq": 0, "type": "session", "format": 1, "session_id": "big",
                         "project": SLUG, "created": "2026-01-01T00:00:00Z"}]
    for i in range(1, n + 1):
        if i % 2:
            recs.append({"seq": i, "type": "message", "role": "user",
                         "content": "needle " + "x" * BODY})
        else:
            recs.append({"seq": i, "type": "event", "event": "compact", "prior": None,
                         "summary": "needle " + "y" * BODY, "model": "m", "usage": None,
                         "lineage": [{"session_id": "big", "seqs": [i - 1], "digest": "0" * 64,
                                      "note": "z" * BODY}]})
    recs.append({"seq": n + 1, "type": "event", "event": "undo", "target": [1, 1]})
    with open(st.sessions_dir / "big.jsonl", "wb") as fh:
        fh.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return st.path


def _peak(store: Path) -> tuple[int, int]:
    from lecode_memctl.core.layout import store_given

    run = grep(store_given(store), "needle", include_hidden=True)
    return traced_peak(lambda: sum(1 for _ in run.hits()))


def test_pending_hits_do_not_hold_their_records(tmp_path: Path, monkeypatch) -> None:
    from lecode_memctl.core.audit import transcripts

    # (the check of the summaries the agent does not use, validate --deep's,
    # reads 64 KiB at a time: its read buffer, 8 MiB, held these files whole)
    monkeypatch.setattr(transcripts, "READ_CHUNK", 64 << 10)
    n_small, n_large = 40, 160
    hits_small, small = _peak(_store(tmp_path / "a", n_small))
    hits_large, large = _peak(_store(tmp_path / "b", n_large))
    assert (hits_small, hits_large) == (n_small, n_large)
    # each record is about 20-40 KB parsed; a hit keeps about 1 KB (400
    # characters of line, its path and the visibility fields)
    per_record = (large - small) / (n_large - n_small)
    assert per_record < 4_000, per_record


def test_visibility_of_pending_hits_is_unchanged(tmp_path: Path) -> None:
    from lecode_memctl.core.layout import store_given

    store = _store(tmp_path, 6)
    got = [(h.seq, h.role, h.hidden) for h in
           grep(store_given(store), "needle", include_hidden=True).hits()]
    # seq 1 is undone (the undo event at the end), so the summary citing it is
    # inert; so are the others, as validate --deep says: their lineage's
    # digests are made up (stale) and not cumulative
    assert got == [(1, "user", "undone"), (2, "summary", "inert"), (3, "user", None),
                   (4, "summary", "inert"), (5, "user", None), (6, "summary", "inert")]


def _excluded_store(root: Path, n: int) -> Path:
    """n matching messages, all excluded (forgotten in facts of 200 positions each)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(root / "memory" / SLUG)
    st.sessions_dir.mkdir(parents=True)
    recs: list[dict] = [{"seq": 0, "type": "session", "format": 1, "session_id": "ex",
                         "project": SLUG, "created": "2026-01-01T00:00:00Z"}]
    recs += [{"seq": i, "type": "message", "role": "user", "content": f"needle {i} " + "x" * 300}
             for i in range(1, n + 1)]
    recs.append({"seq": n + 1, "type": "message", "role": "user", "content": "needle kept"})
    with open(st.sessions_dir / "ex.jsonl", "wb") as fh:
        fh.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    with FactStore(st.facts_db) as fs:
        for lo in range(1, n + 1, 200):
            seqs = tuple(range(lo, min(lo + 200, n + 1)))
            ref = SourceRef("ex", seqs, canonical_digest(recs[seqs[0]:seqs[-1] + 1]))
            fs.forget(fs.add(f"fact {lo}", ref=ref).fact.fact_id)
    return st.path


def _excluded_peak(store: Path, include_hidden: bool) -> tuple[list[int], int]:
    from lecode_memctl.core.layout import store_given

    run = grep(store_given(store), "needle", include_hidden=include_hidden)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        seqs = [h.seq for h in run.hits()]
        return seqs, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_hits_hidden_whatever_the_events_are_not_kept(tmp_path: Path) -> None:
    small_store, large_store = _excluded_store(tmp_path / "a", 400), _excluded_store(tmp_path / "b", 1600)
    got_small, small = _excluded_peak(small_store, False)
    got_large, large = _excluded_peak(large_store, False)
    assert (got_small, got_large) == ([401], [1601])
    # a kept hit is about 1 KB (its 300-character line and what visibility reads)
    assert (large - small) / 1200 < 200, (small, large)
    # with --include-hidden every one is reported, excluded
    seqs, _ = _excluded_peak(small_store, True)
    assert seqs == list(range(1, 402))
