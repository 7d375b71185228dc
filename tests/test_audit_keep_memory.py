"""The default audit (not ``--deep``) keeps the parsed records facts cite
only up to a budget (``audit.transcripts.WHOLE_BYTES`` of their lines): a
span whose records were not all kept is decided from records read again
(from the transcript in memory, or from the file), in one forward pass
over the spans left (``_reread_spans``), which keeps a record only while a
span that needs it is open.  Memory stays flat in the data's size (issue
13); the statuses are those of the audit that keeps every cited record,
and ``SessionStore.validate_many``'s."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.audit import Audit, transcripts
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import FILE_MODE, store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG, store_generation, traced_peak

PAD = "lorem ipsum dolor sit amet " * 6


def _hdr(sid: str) -> dict:
    return {"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
            "created": "2026-01-01T00:00:00Z"}


def _msg(seq: int) -> dict:
    return {"seq": seq, "type": "message", "role": "user", "content": f"msg {seq} {PAD}"}


# size -> the facts database _cited_store made for it (one add, one commit,
# per fact: over a second of each shape's setup for the 2 MiB store)
_FACTS_DB: dict[int, bytes] = {}


def _cited_store(path: Path, size: int, corrupt: bool) -> Path:
    """A store whose one transcript of about ``size`` bytes has every message
    cited: spans of 200 positions every 100 (each message in two spans);
    ``corrupt``: a corrupt line near the start (the line loop decides then)."""
    store = path / SLUG
    (store / "sessions").mkdir(parents=True)
    recs = [_hdr("t")]
    lines = [orjson.dumps(recs[0]) + b"\n"]
    written = len(lines[0])
    while written < size:
        recs.append(_msg(len(recs)))
        lines.append(orjson.dumps(recs[-1]) + b"\n")
        written += len(lines[-1])
        if corrupt and len(recs) == 3:
            lines.append(b'{"seq": oops\n')
    (store / "sessions" / "t.jsonl").write_bytes(b"".join(lines))
    db = store_at(store).facts_db
    if size in _FACTS_DB:
        # the same records whether or not the line is corrupt (it is not
        # counted in the size), so the same facts: the database made for the
        # first store of this size, its bytes as FactStore left them
        fd = os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_FACTS_DB[size])
        return store
    fs = FactStore(db)
    for lo in range(100, len(recs) - 200, 100):
        fs.add(f"fact {lo}", ref=SourceRef("t", tuple(range(lo, lo + 200)),
                                           canonical_digest(recs[lo:lo + 200])))
    fs.close()
    assert sorted(os.listdir(store)) == ["facts.sqlite3", "sessions"]    # (no -wal left)
    _FACTS_DB[size] = db.read_bytes()
    return store


def _audit_statuses(store: Path) -> dict:
    a = Audit(store_at(store), parallel=False, now=1.9e9)
    list(a.run())
    return {(r, p): (s.status, s.reason, s.seq) for (r, p), s in a._statuses.items()}


@pytest.mark.heavy
@pytest.mark.parametrize("shape", ["regular", "corrupt", "corrupt_no_memory_copy"])
def test_default_audit_memory_is_flat_in_cited_bytes(tmp_path, monkeypatch, shape):
    """Two transcripts, 512 KiB and 2 MiB, every message cited, a budget of
    64 KiB: the larger audit's peak of Python allocations (tracemalloc)
    grows by the transcript held in memory (its bytes, read whole, and in
    the line loop its lines) and the references, not by its parsed records.
    Bytes of peak per byte of transcript, every cited record kept (the
    budget unlimited) then re-read: regular (the span search) 3.97 -> 1.01,
    corrupt (the line loop over the transcript in memory) 5.32 -> 2.81, and
    read from the file in 64 KiB pieces (``no_memory_copy``: what grows is
    the references) 3.14 -> 0.56.  (At 1 and 4 MiB with a budget of
    128 KiB: 4.18 -> 1.25, 5.30 -> 2.80, 3.12 -> 0.63; at 2 and 8 MiB with
    256 KiB: 4.26 -> 2.48, 5.43 -> 2.93, 3.26 -> 0.75; each halving of the
    sizes cuts the test's time by half or more, the margins alike.)"""
    monkeypatch.setattr(transcripts, "WHOLE_BYTES", 64 << 10)
    if shape == "corrupt_no_memory_copy":
        monkeypatch.setattr(transcripts, "FAST_LIMIT", -1)
        monkeypatch.setattr(transcripts, "READ_CHUNK", 64 << 10)
    peaks = {}
    for kib in (512, 2048):
        store = _cited_store(tmp_path / f"k{kib}", kib << 10, shape != "regular")
        got, peaks[kib] = traced_peak(lambda store=store: _audit_statuses(store))
        assert got == {}, got        # every span valid
    per_byte = (peaks[2048] - peaks[512]) / (1536 << 10)
    limit = {"regular": 3.25, "corrupt": 4.0, "corrupt_no_memory_copy": 1.25}[shape]
    assert per_byte < limit, (peaks, per_byte)


# ---------------------------------------------------------------- equivalence

def _random_transcript(rng: random.Random, sid: str
                       ) -> tuple[list[bytes], list[dict | None], list[tuple[int, ...]]]:
    """Lines of a transcript with what a reviewer would try: corrupt lines
    (inside spans, after them, a prefix {"seq":N, that does not parse),
    seq gaps, now and then a repeated seq, undo/redo/clear events after the
    spans, a torn tail; the records (by seq, for digests) and the spans cited."""
    n = rng.randint(30, 160)
    odd = 0.0 if rng.random() < 0.4 else 1.0      # (a regular transcript: the span search)
    recs: dict[int, dict] = {0: _hdr(sid)}
    lines = [orjson.dumps(recs[0]) + b"\n"]
    seq = 1
    while seq < n:
        r = rng.random()
        if r < 0.04 * odd:
            lines.append(b'{"seq":%d,"type":"mess\n' % seq if rng.random() < 0.5 else b"not json\n")
        elif r < 0.07 * odd:
            seq += rng.randint(1, 3)          # a gap
            continue
        elif r < 0.08 * odd and seq > 2:
            lines.append(orjson.dumps(_msg(seq - 2)) + b"\n")   # a repeated seq
        elif r < 0.16 and seq > 3:
            kind = rng.choice(["undo", "redo", "clear"])
            a = rng.randint(1, seq - 1)
            b = rng.randint(a, seq - 1)
            ev = {"seq": seq, "type": "event", "event": kind}
            if kind != "clear":
                ev["target"] = [a, b]
            recs[seq] = ev
            lines.append(orjson.dumps(ev) + b"\n")
            seq += 1
        else:
            recs[seq] = _msg(seq)
            lines.append(orjson.dumps(recs[seq]) + b"\n")
            seq += 1
    if rng.random() < 0.2 * odd:
        lines.append(b'{"seq":%d,"type":"mes' % seq)   # a torn tail
    spans = []
    for _ in range(rng.randint(1, 25)):
        lo = rng.randint(1, n + 3)
        spans.append(tuple(range(lo, lo + rng.randint(1, 12))))
    return lines, [recs.get(s) for s in range(n + 20)], spans


def _random_store(tmp_path: Path, seed: int) -> Path:
    rng = random.Random(seed)
    store = tmp_path / SLUG
    (store / "sessions").mkdir(parents=True)
    fs = FactStore(store_at(store).facts_db)
    for k in range(rng.randint(1, 3)):
        sid = f"s{k}"
        lines, recs, spans = _random_transcript(rng, sid)
        f = store / "sessions" / f"{sid}.jsonl"
        f.write_bytes(b"".join(lines))
        os.utime(f, (1.0e9, 1.0e9))
        for i, seqs in enumerate(spans):
            got = [r for s in seqs if s < len(recs) and (r := recs[s]) is not None]
            digest = canonical_digest(got) if got and rng.random() < 0.9 else "0" * 64
            fs.add(f"fact {sid} {i}", ref=SourceRef(sid, seqs, digest))
    fs.close()
    gen = store_generation(store, readonly=False)
    db = sqlite3.connect(store / "facts.sqlite3")
    for _ in range(rng.randint(0, 3)):
        db.execute("INSERT OR IGNORE INTO exclusions (session_id, seq, generation) VALUES (?, ?, ?)",
                   (f"s{rng.randint(0, 2)}", rng.randint(1, 60), gen))
    db.commit()
    db.close()
    return store


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(24))
def test_reread_spans_decide_as_kept_records(tmp_path, monkeypatch, seed):
    """Generated transcripts: the statuses with a budget that keeps nothing or
    a few lines (checkpoints every few bytes or none past the start; the
    transcript in memory or read from the file) equal those with an
    unlimited budget, and SessionStore.validate_many's."""
    store = _random_store(tmp_path, seed)
    with FactStore.open_readonly(store_at(store).facts_db) as ro:
        refs = [r for _sid, group in ro.source_refs_by_session() for r in group]
        expect = SessionStore(store_at(store), exclusions=ro).validate_many(refs, "durable")
    want = {(r, "durable"): (s.status, s.reason, s.seq) for r, s in expect.items() if not s.ok}
    monkeypatch.setattr(transcripts, "WHOLE_BYTES", 1 << 62)
    assert _audit_statuses(store) == want
    for budget in (-1, 0, 150, 600):
        for cp in (1, 70, 1 << 20):
            for fast in (256 << 20, -1):
                monkeypatch.setattr(transcripts, "WHOLE_BYTES", budget)
                monkeypatch.setattr(transcripts, "CHECKPOINT_BYTES", cp)
                monkeypatch.setattr(transcripts, "FAST_LIMIT", fast)
                assert _audit_statuses(store) == want, (budget, cp, fast)


def test_a_span_far_past_the_end_does_not_stall_the_span_search(tmp_path, monkeypatch):
    """Past the budget the span search drops the records below the next
    span's start, seq by seq: up to the records it read, not up to a start
    far past the transcript's end (a fact citing seq 10**12 made that a
    loop of 10**12 steps, the audit stalled).  The span is missing, as
    validate_many says."""
    import signal

    store = tmp_path / SLUG
    (store / "sessions").mkdir(parents=True)
    recs = [_hdr("t")] + [_msg(s) for s in range(1, 20)]
    (store / "sessions" / "t.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    fs = FactStore(store_at(store).facts_db)
    fs.add("near", ref=SourceRef("t", (1, 2), canonical_digest(recs[1:3])))
    far = SourceRef("t", (10**12, 10**12 + 1), "0" * 64)
    fs.add("far", ref=far)
    fs.close()
    monkeypatch.setattr(transcripts, "WHOLE_BYTES", 0)

    def stalled(*_a):
        raise RuntimeError("the audit stalled")   # (not an OSError: that reads as unreadable)

    old = signal.signal(signal.SIGALRM, stalled)
    signal.setitimer(signal.ITIMER_REAL, 10.0)
    try:
        got = _audit_statuses(store)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert got == {(far, "durable"): ("missing", "position_missing", 10**12)}
