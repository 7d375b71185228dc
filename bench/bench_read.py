#!/usr/bin/env python3
"""Range reads on large transcripts: the last 200 records of a ~1 MB and a
~1 GB session, side by side.

    python bench/bench_read.py                 # 1 MB vs 1024 MB
    python bench/bench_read.py --size-mb 64    # a smaller large file
    python bench/bench_read.py --runs 21 --keep

Transcripts are written under bench/out/ (gitignored) in the exact format
of the core writer (compact JSON, seq first, one line each; a
``memory_usage`` event every 50 records so the event pass has something to
find), reused when already present with the same parameters (``--keep``
keeps them afterwards; by default the large one is deleted).  The page
cache is warm after the first run: the figures are CPU cost of seeking and
parsing, not disk latency.

Timed operations, each in a fresh SessionStore (the file is opened anew):
  records   SessionStore.records(id, last-199, last)
  snapshot  SessionStore.source_snapshot(id, last-199, last): binary search,
            span read, the event pass to EOF, visibility and the digest
  validate  SessionStore.validate_source(ref) of that snapshot
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import orjson  # noqa: E402

from lecode_memctl.core.layout import store_at  # noqa: E402
from lecode_memctl.core.sessions import SessionStore  # noqa: E402

SLUG = "bench-000000000000"
RECORD_TEXT = 900   # characters of content per message: ~1 KB lines


def build(store_dir: Path, sid: str, size_mb: float) -> tuple[Path, int]:
    """Write sessions/<sid>.jsonl of about size_mb MiB; returns (path, last seq)."""
    sessions = store_dir / "sessions"
    sessions.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = sessions / f"{sid}.jsonl"
    target = int(size_mb * 1024 * 1024)
    if path.exists() and abs(path.stat().st_size - target) < 4096:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - 65536))
            last = orjson.loads(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])["seq"]
        return path, last
    tmp = path.with_suffix(".tmp")
    filler = ("lorem ipsum dolor sit amet é 😀 \"quoted\" \\ " * 40)[:RECORD_TEXT]
    size = 0
    seq = 0
    with open(tmp, "wb", buffering=1 << 22) as f:
        line = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                             "project": SLUG, "created": "2026-01-01T00:00:00Z"}) + b"\n"
        f.write(line)
        size += len(line)
        while size < target:
            seq += 1
            if seq % 50 == 0:
                rec = {"seq": seq, "type": "event", "event": "memory_usage", "purpose": "learning",
                       "model": "m", "usage": {"input_tokens": seq, "output_tokens": 1, "cost": None}}
            elif seq % 2:
                rec = {"seq": seq, "type": "message", "role": "user", "content": f"{seq} {filler}"}
            else:
                rec = {"seq": seq, "type": "message", "role": "assistant",
                       "content": [{"type": "text", "text": f"{seq} {filler}"}], "epoch": 0}
            line = orjson.dumps(rec) + b"\n"
            f.write(line)
            size += len(line)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path, seq


def median_ms(fn, runs: int) -> float:
    fn()  # warm-up (page cache, imports)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(store_dir: Path, sid: str, last: int, runs: int) -> dict[str, float]:
    store = store_at(store_dir)
    lo, hi = last - 199, last

    def records():
        got = SessionStore(store).records(sid, lo, hi)
        assert len(got) == 200 and got[-1]["seq"] == hi

    def snapshot():
        SessionStore(store).source_snapshot(sid, lo, hi)

    ref = SessionStore(store).source_snapshot(sid, lo, hi).ref

    def validate():
        assert SessionStore(store).validate_source(ref).ok

    return {"records": median_ms(records, runs), "snapshot": median_ms(snapshot, runs),
            "validate": median_ms(validate, runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1024, help="size of the large transcript (MiB)")
    ap.add_argument("--quick", action="store_true", help="a 64 MiB large transcript and 5 runs (for run_all.py --quick)")
    ap.add_argument("--small-mb", type=float, default=1, help="size of the small transcript (MiB)")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per operation (median)")
    ap.add_argument("--out", type=Path, default=HERE / "out", help="where to write the transcripts")
    ap.add_argument("--keep", action="store_true", help="keep the large transcript afterwards")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb, args.runs = min(args.size_mb, 64), min(args.runs, 5)

    store_dir = args.out / SLUG
    t0 = time.perf_counter()
    small_path, small_last = build(store_dir, "small", args.small_mb)
    large_path, large_last = build(store_dir, "large", args.size_mb)
    build_s = time.perf_counter() - t0
    try:
        small = measure(store_dir, "small", small_last, args.runs)
        large = measure(store_dir, "large", large_last, args.runs)
    finally:
        if not args.keep:
            large_path.unlink(missing_ok=True)

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{datetime.now(timezone.utc).strftime('%Y-%m-%d')}")
    print(f"transcripts: small {small_path.stat().st_size / 2**20:.1f} MiB ({small_last + 1} records), "
          f"large {args.size_mb:.0f} MiB ({large_last + 1} records); built/reused in {build_s:.1f} s")
    print(f"last 200 records, median of {args.runs} runs (ms):")
    print(f"{'operation':<10} {'small':>10} {'large':>10} {'ratio':>8}")
    for op in ("records", "snapshot", "validate"):
        ratio = large[op] / small[op] if small[op] else float("inf")
        print(f"{op:<10} {small[op]:>10.2f} {large[op]:>10.2f} {ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
