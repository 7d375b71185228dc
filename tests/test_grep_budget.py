"""grep holds a session's pending hits (those an undo, redo or clear later in
the transcript may still hide) only up to ``grep.PENDING_BYTES``; past it, it
reads the visibility events of the rest of the transcript first (a raw-byte
scan from where the pass is, bounded by the size the pass is then bounded
by), decides the pending hits and every later one at once, and emits them.
Memory stays flat in the number of hits; the output is the same."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import grep as grep_mod
from lecode_memctl.core.audit import transcripts as audit_transcripts
from lecode_memctl.core.layout import store_at, store_given

from .conftest import run_cli

SLUG = "proj-0123456789ab"


def _write(root: Path, sid: str, lines: list[bytes]) -> None:
    st = store_at(root / "memory" / SLUG)
    st.sessions_dir.mkdir(parents=True, exist_ok=True)
    with open(st.sessions_dir / f"{sid}.jsonl", "wb") as fh:
        fh.write(b"".join(lines))


def _header(sid: str) -> bytes:
    return orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                         "project": SLUG, "created": "2026-01-01T00:00:00Z"}) + b"\n"


def _every_message_matches(root: Path, n: int) -> Path:
    lines = [_header("big")]
    lines += [orjson.dumps({"seq": i, "type": "message", "role": "user",
                            "content": f"needle number {i} " + "x" * 300}) + b"\n"
              for i in range(1, n + 1)]
    lines.append(orjson.dumps({"seq": n + 1, "type": "event", "event": "undo",
                               "target": [1, 1]}) + b"\n")
    _write(root, "big", lines)
    return root / "memory" / SLUG


def _peak(store: Path, include_hidden: bool = False) -> tuple[int, int]:
    run = grep_mod.grep(store_given(store), "needle", include_hidden=include_hidden)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        hits = sum(1 for _ in run.hits())
        return hits, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.heavy
def test_peak_is_flat_in_the_number_of_hits(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(grep_mod, "PENDING_BYTES", 256 << 10, raising=False)
    n_small, n_large = 2_000, 8_000
    hits_small, small = _peak(_every_message_matches(tmp_path / "a", n_small))
    hits_large, large = _peak(_every_message_matches(tmp_path / "b", n_large))
    assert (hits_small, hits_large) == (n_small - 1, n_large - 1)   # (seq 1 undone)
    # holding every hit costs about 1 KB a hit (6 MB more for the larger);
    # within the budget the growth is what the budget and the allocator leave
    per_hit = (large - small) / (n_large - n_small)
    assert per_hit < 100, (small, large)


def _summaries_with_lineage(root: Path, n: int, positions: int) -> Path:
    lines = [_header("lin")]
    lines += [orjson.dumps({"seq": i, "type": "event", "event": "compact", "prior": None,
                            "summary": f"needle {i}", "model": "m",
                            "usage": {"pad": "x" * 20_000},   # (files past the read buffers)
                            "lineage": [{"session_id": "lin",
                                         "seqs": list(range(100_000, 100_000 + positions)),
                                         "digest": "0" * 64}]}) + b"\n"
              for i in range(1, n + 1)]
    _write(root, "lin", lines)
    return root / "memory" / SLUG


def test_the_lineage_positions_held_count_toward_the_budget(tmp_path: Path, monkeypatch) -> None:
    """A pending summary keeps the positions its lineage names (to judge it
    inert): they count toward the budget, or summaries of long lineages,
    each counted as a short record, were all held (some 25 KB each here)."""
    monkeypatch.setattr(grep_mod, "PENDING_BYTES", 256 << 10, raising=False)
    # (the check of the summaries the agent does not use, validate --deep's,
    # reads 64 KiB at a time: its read buffer, 8 MiB, held these files whole)
    monkeypatch.setattr(audit_transcripts, "READ_CHUNK", 64 << 10)
    # (past the budget from the eighth summary on; held, 36 KB a summary more;
    # every summary is inert, its lineage naming positions the session does
    # not have, so the hits are kept only with include_hidden)
    n_small, n_large = 50, 150
    hits_small, small = _peak(_summaries_with_lineage(tmp_path / "a", n_small, 1_000), True)
    hits_large, large = _peak(_summaries_with_lineage(tmp_path / "b", n_large, 1_000), True)
    assert (hits_small, hits_large) == (n_small, n_large)
    per_hit = (large - small) / (n_large - n_small)
    assert per_hit < 2_000, (small, large)


# --------------------------------------------------------------------------
# The same output whatever the budget


WORDS = ["alpha", "needle", "beta", "NEEDLE", "gamma", "needles", "delta"]


def _text(rnd: random.Random) -> str:
    n = rnd.randint(1, 4)
    return "\n".join(" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 5)))
                     for _ in range(n))


def _session(rnd: random.Random, sid: str) -> tuple[list[bytes], list[dict]]:
    """A transcript of messages, summaries with lineage and undo/redo/clear
    events (each after some hits), with corrupt lines here and there and
    maybe a torn tail; the records for digests."""
    lines = [_header(sid)]
    recs: list[dict] = [orjson.loads(lines[0])]
    n = rnd.randint(3, 40)
    for seq in range(1, n + 1):
        r = rnd.random()
        rec: dict
        if r < 0.12 and seq > 1:
            a = rnd.randint(1, seq - 1)
            rec = {"seq": seq, "type": "event", "event": rnd.choice(["undo", "redo"]),
                   "target": [a, rnd.randint(a, seq - 1)]}
        elif r < 0.17:
            rec = {"seq": seq, "type": "event", "event": "clear"}
        elif r < 0.27 and seq > 1:
            a = rnd.randint(1, seq - 1)
            rec = {"seq": seq, "type": "event", "event": "compact", "prior": None,
                   "summary": _text(rnd), "model": "m", "usage": None,
                   "lineage": [{"session_id": sid, "seqs": list(range(a, rnd.randint(a, seq - 1) + 1)),
                                "digest": "0" * 64}]}
        elif r < 0.30:
            # an event written with an escape: no reader applies it
            rec = {"seq": seq, "type": "event", "event": "undo", "target": [1, max(1, seq - 1)]}
            line = orjson.dumps(rec).replace(b'"event":', b'"\\u0065vent":')
            lines.append(line + b"\n")
            recs.append(rec)
            continue
        else:
            role = rnd.choice(["user", "assistant", "tool"])
            rec = {"seq": seq, "type": "message", "role": role}
            if rnd.random() < 0.2:
                rec["content"] = [{"type": "text", "text": _text(rnd)}]
            else:
                rec["content"] = _text(rnd)
            if role != "user" and rnd.random() < 0.5:
                rec["epoch"] = rnd.randint(0, 2)
            if role == "assistant" and rnd.random() < 0.2:
                # (a member named "event" in a message: the bytes of the mark)
                rec["tool_calls"] = [{"id": "c", "name": "shell",
                                      "arguments": {"event": "clear", "cmd": _text(rnd)}}]
        lines.append(orjson.dumps(rec) + b"\n")
        recs.append(rec)
        if rnd.random() < 0.05:
            lines.append(rnd.choice([b'{"seq": "x", "content": "needle"}\n', b"not json needle\n",
                                     b'{"type":"event","event":"clear"}\n',
                                     b'{"seq":999999,"type":"event","event":"clear"\n']))
    if rnd.random() < 0.3:
        lines.append(rnd.choice([b'{"seq":%d,"type":"event","event":"clear"}' % (n + 1),
                                 b'{"seq":%d,"type":"message","role":"user","content":"needle"' % (n + 1)]))
    return lines, recs


def _random_store(root: Path, seed: int) -> Path:
    from lecode_memctl.core.errors import Conflict
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    rnd = random.Random(seed)
    st = store_at(root / "memory" / SLUG)
    forgotten: list[tuple[str, list[dict]]] = []
    for k in range(rnd.randint(1, 3)):
        sid = f"s{k}"
        lines, recs = _session(rnd, sid)
        _write(root, sid, lines)
        forgotten.append((sid, recs))
    if rnd.random() < 0.6:
        with FactStore(st.facts_db) as fs:
            for sid, recs in forgotten:
                msgs = [r["seq"] for r in recs[1:] if r.get("type") == "message"]
                for _ in range(rnd.randint(0, 2)):
                    if not msgs:
                        break
                    a = rnd.choice(msgs)
                    b = min(a + rnd.randint(0, 3), recs[-1]["seq"])
                    ref = SourceRef(sid, tuple(range(a, b + 1)), canonical_digest(recs[a:b + 1]))
                    try:
                        fid = fs.add(f"fact {sid} {a}", ref=ref).fact.fact_id
                    except Conflict:        # (evidence a forget already removed)
                        continue
                    if rnd.random() < 0.8:
                        fs.forget(fid)
    return st.path


OPTIONS = [
    ["needle"], ["-i", "needle"], ["-c", "needle"], ["-l", "needle"], ["-C", "1", "needle"],
    ["--json", "needle"], ["--include-hidden", "needle"], ["--purpose", "durable", "needle"],
    ["--offset", "2", "--limit", "3", "needle"], ["--include-hidden", "--json", "-C", "2", "ne+dle"],
    ["--include-hidden", "--purpose", "durable", "-c", "-i", "needle"],
    ["--format", "jsonl", "--include-hidden", "needle"], ["--session", "s1", "--session", "s0", "needle"],
]


def _outputs(store: Path) -> list[tuple[int, str, str]]:
    out = []
    for opts in OPTIONS:
        r = run_cli("--store", str(store), "grep", *opts)
        out.append((r.exit_code, r.stdout, r.stderr))
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(30))
def test_same_output_with_a_tiny_budget(tmp_path: Path, monkeypatch, seed: int) -> None:
    store = _random_store(tmp_path, seed)
    monkeypatch.setattr(grep_mod, "PENDING_BYTES", 1 << 60)
    calls: list[int] = []
    real = grep_mod._Lines.events_after

    def counted(self):  # noqa: ANN001, ANN202
        calls.append(1)
        return real(self)

    monkeypatch.setattr(grep_mod._Lines, "events_after", counted)
    unlimited = _outputs(store)
    assert calls == []          # (within the budget: today's path, no extra read)
    for budget in (0, 400, 3000):
        monkeypatch.setattr(grep_mod, "PENDING_BYTES", budget)
        assert _outputs(store) == unlimited, budget
    assert calls                # the scan ran


def test_the_scan_sees_the_events_the_pass_would(tmp_path: Path, monkeypatch) -> None:
    """Lines appended after the pass is past the budget (an undo of every
    hit) are not read by the pass either: both are bounded by the size then."""
    lines = [_header("g")] + [orjson.dumps({"seq": i, "type": "message", "role": "user",
                                            "content": f"needle {i}"}) + b"\n"
                              for i in range(1, 21)]
    _write(tmp_path, "g", lines)
    store = tmp_path / "memory" / SLUG
    monkeypatch.setattr(grep_mod, "PENDING_BYTES", 0)
    run = grep_mod.grep(store_given(store), "needle")
    it = run.hits()
    first = next(it)
    with open(store / "sessions" / "g.jsonl", "ab") as fh:
        fh.write(orjson.dumps({"seq": 21, "type": "event", "event": "undo",
                               "target": [1, 20]}) + b"\n")
    rest = list(it)
    assert [h.seq for h in [first, *rest]] == list(range(1, 21))
