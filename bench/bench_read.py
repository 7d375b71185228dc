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
  memctl read
            the real command, ``memctl --store DIR read ID last-199 last
            --json``, as a process (start-up included)

Peak RSS: each in-process operation is timed in its own fresh subprocess
(one per operation and transcript), which reports its VmHWM (interpreter
and imports included) and its VmHWM before the first call; ``memctl read``
is measured under GNU time (see ``_common.py``).  The two transcripts take
turns, ``ROUNDS`` times (each time a fresh subprocess per operation and
transcript, and ``memctl read`` ``--runs`` times): a figure is the median
of the rounds' medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import orjson  # noqa: E402

from lecode_memctl.core.layout import store_at  # noqa: E402
from lecode_memctl.core.sessions import SessionStore  # noqa: E402

sys.path.insert(0, str(HERE))
from _common import MEMCTL, PY, fmt_rss, machine_line, median_run, record, rss_method, vmhwm_kib  # noqa: E402

OPS = ("records", "snapshot", "validate")
# the turns the two sizes take, each op in a fresh subprocess (measure)
ROUNDS = 3
K = TypeVar("K")
V = TypeVar("V")

SLUG = "bench-000000000000"
RATIO_MET = 1.5    # "about 1": a large/small ratio up to this counts as met
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
        # write back now: dirty pages still being flushed while the reads are timed
        # made the large file's reads up to 2x slower than the small one's
        f.flush()
        os.fsync(f.fileno())
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


def measure_op(store_dir: Path, sid: str, last: int, op: str, runs: int) -> float:
    store = store_at(store_dir)
    lo, hi = last - 199, last

    def records():
        got = SessionStore(store).records(sid, lo, hi)
        assert len(got) == 200 and got[-1]["seq"] == hi

    def snapshot():
        SessionStore(store).source_snapshot(sid, lo, hi)

    if op == "validate":
        ref = SessionStore(store).source_snapshot(sid, lo, hi).ref

        def validate():
            assert SessionStore(store).validate_source(ref).ok
        return median_ms(validate, runs)
    return median_ms({"records": records, "snapshot": snapshot}[op], runs)


def in_turns(keys: list[K], once: Callable[[K], V], rounds: int = ROUNDS) -> dict[K, list[V]]:
    """``once(key)`` for each key in turn, ``rounds`` times: {key: its
    results, one a round}.  Side by side: a pause of the machine that lands
    on one measure no longer makes a ratio."""
    got: dict[K, list[V]] = {k: [] for k in keys}
    for _ in range(rounds):
        for k in keys:
            got[k].append(once(k))
    return got


def measure(store_dir: Path, sizes: dict[str, int], runs: int
            ) -> dict[str, dict[str, tuple[float, int, int]]]:
    """{size: {op: (median ms, peak RSS KiB, RSS KiB before the first call)}}
    of each session of ``sizes`` ({session id: its last seq}), each op in a
    fresh subprocess of this script, the sizes in turn (:func:`in_turns`):
    the median of the rounds, the peak RSS the largest."""
    def once(key: tuple[str, str]) -> dict[str, float]:
        op, sid = key
        p = subprocess.run([PY, __file__, "--_one", op, sid, str(sizes[sid]), str(runs),
                            str(store_dir)], check=True, capture_output=True, text=True)
        return json.loads(p.stdout)

    got = in_turns([(op, sid) for op in OPS for sid in sizes], once)
    return {sid: {op: (statistics.median(r["ms"] for r in got[op, sid]),
                       int(max(r["rss_kib"] for r in got[op, sid])),
                       int(max(r["base_kib"] for r in got[op, sid]))) for op in OPS}
            for sid in sizes}


def one(op: str, sid: str, last: str, runs: str, store_dir: str) -> int:
    base = vmhwm_kib()
    ms = measure_op(Path(store_dir), sid, int(last), op, int(runs))
    print(json.dumps({"ms": ms, "rss_kib": vmhwm_kib(), "base_kib": base}))
    return 0


def memctl_read(store_dir: Path, sizes: dict[str, int], runs: int) -> dict[str, tuple[float, int]]:
    """The real command as a process, on each session of ``sizes`` ({session
    id: its last seq}): {session id: (median ms, peak RSS KiB)}, the sizes
    in turn (:func:`in_turns`): the median of the rounds' medians, the
    largest peak."""
    argv = {sid: [MEMCTL, "--store", str(store_dir), "read", sid, str(last - 199), str(last),
                  "--json"] for sid, last in sizes.items()}
    for a in argv.values():
        median_run(a, 1)  # warm-up
    got = in_turns(list(argv), lambda sid: median_run(argv[sid], runs))
    return {sid: (statistics.median(s for s, _r in rs) * 1000, max(r for _s, r in rs))
            for sid, rs in got.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1024, help="size of the large transcript (MiB)")
    ap.add_argument("--quick", action="store_true",
                    help="a 64 MiB large transcript and 5 runs (for run_all.py --quick)")
    ap.add_argument("--small-mb", type=float, default=1, help="size of the small transcript (MiB)")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per operation (median)")
    ap.add_argument("--out", type=Path, default=HERE / "out", help="where to write the transcripts")
    ap.add_argument("--keep", action="store_true", help="keep the large transcript afterwards")
    ap.add_argument("--_one", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._one:
        return one(*args._one)
    if args.quick:
        args.size_mb, args.runs = min(args.size_mb, 64), min(args.runs, 5)

    store_dir = args.out / SLUG
    t0 = time.perf_counter()
    small_path, small_last = build(store_dir, "small", args.small_mb)
    large_path, large_last = build(store_dir, "large", args.size_mb)
    build_s = time.perf_counter() - t0
    try:
        sizes = {"small": small_last, "large": large_last}
        both = measure(store_dir, sizes, args.runs)
        small, large = both["small"], both["large"]
        process = memctl_read(store_dir, sizes, args.runs)
        small["memctl read"] = (*process["small"], 0)
        large["memctl read"] = (*process["large"], 0)
    finally:
        if not args.keep:
            large_path.unlink(missing_ok=True)

    print(f"machine: {machine_line()}")
    print(f"transcripts: small {small_path.stat().st_size / 2**20:.1f} MiB ({small_last + 1} records), "
          f"large {args.size_mb:.0f} MiB ({large_last + 1} records); built/reused in {build_s:.1f} s")
    print(f"last 200 records, median of {args.runs} runs (ms; the median of {ROUNDS} rounds, "
          f"the sizes in turn); peak RSS (MiB): in-process "
          f"operations in a fresh subprocess each (VmHWM; 'base' = after imports, before the "
          f"first call), memctl read by {rss_method()}")
    print(f"{'operation':<12} {'small':>9} {'large':>9} {'ratio':>6}  {'RSS small':>9} "
          f"{'RSS large':>9} {'base':>6}")
    small_name = f"{small_path.stat().st_size / 2**20:.0f} MiB"
    large_name = f"{args.size_mb:.0f} MiB" if args.size_mb < 1024 else f"{args.size_mb / 1024:.0f} GiB"
    worst = 0.0
    for op in (*OPS, "memctl read"):
        (sm, srss, sbase), (lg, lrss, _lbase) = small[op], large[op]
        ratio = lg / sm if sm else float("inf")
        worst = max(worst, ratio)
        print(f"{op:<12} {sm:>9.2f} {lg:>9.2f} {ratio:>6.2f}  {srss / 1024:>9.1f} "
              f"{lrss / 1024:>9.1f} {(sbase / 1024 if sbase else 0):>6.1f}")
        label = ("memctl read SESSION START END, last 200" if op == "memctl read"
                 else f"{op}() last 200 (in-process)")
        how = "process" if op == "memctl read" else "fresh subprocess VmHWM"
        record("read", f"{label}, {small_name}", sm / 1000, rss_kib=srss, rss_how=how,
               note="reference")
        record("read", f"{label}, {large_name}", lg / 1000, rss_kib=lrss, rss_how=how,
               reference=f"same on {small_name}", ref_seconds=sm / 1000,
               target="~1 (<= 1.5)", met=ratio <= RATIO_MET)
    print(f"summary: last 200 records, {large_name} / {small_name}: worst ratio {worst:.2f} "
          f"(target about 1; <= {RATIO_MET} counted as met); memctl read peak RSS "
          f"{fmt_rss(small['memctl read'][1])} / {fmt_rss(large['memctl read'][1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
