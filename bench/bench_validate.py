#!/usr/bin/env python3
"""``memctl validate`` on a large store: time, bytes read, ``--deep`` throughput.

    python bench/bench_validate.py [--quick] [--dir DIR] [--keep] [--json]
                                   [--reuse DIR] [--only cli]

Builds a store of 10,000 facts over 1,000 sessions (about 500 MB of
transcripts; ``--quick``: 1,000 facts over 100 sessions, about 50 MB) with a
fast generator that writes exactly the core's formats: transcript lines as
``SessionWriter.append_record`` writes them (``orjson.dumps`` of
``{"seq":..,...}`` plus ``\\n``), compact events with a valid prior and
cumulative lineage, and a facts database created by the core's own
migrations with rows as ``FactStore`` inserts them (ids from
``fact_id_for``, digests from ``canonical_digest``), all in one transaction.
Each fact references a user/assistant pair (two positions).

Then, with the page cache warm (every file read once first):

* default ``validate``: wall time, and the bytes the process read
  (``rchar`` of ``/proc/self/io`` around the audit, in a fresh subprocess
  that has already imported everything) against the bytes of the lines the
  facts reference;
* ``validate --deep``: wall time and throughput, as a ratio against
  ``sha256sum`` over the same transcript files in the same run (target
  >= 0.5).

* the same two as real ``memctl validate -q [--deep]`` processes (start-up
  included), and ``sha256sum`` itself, each with its peak RSS.

The real processes and ``sha256sum`` are paired: each round runs
``sha256sum``, ``validate -q`` and ``validate --deep -q`` in turn, so a
round's ratios share its load; the figures are the medians.  ``--reuse DIR``
builds the store in DIR the first time and reuses it afterwards (for
iterating); ``--only cli`` measures the real processes alone.  ``--fleet``
times ``validate --all-projects`` over 100 and 1,000 copies of the demo
store instead, and prints the ratio (target about 10).

Peak RSS: processes under GNU time (see ``_common.py``); for ``--deep``,
which runs a pool of worker processes, that is the largest single process
of the tree (``wait4`` folds in the largest reaped descendant), not their
sum.  The in-process runs report the fresh subprocess's own VmHWM and, for
``--deep``, the largest worker's ``ru_maxrss`` (RUSAGE_CHILDREN).

Prints a table and a ``summary:`` line; ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MEMCTL, machine_line, median_run, record, rss_method  # noqa: E402

from lecode_memctl.core.facts import MIGRATIONS, fact_id_for  # noqa: E402
from lecode_memctl.core.sourceref import SourceRef, canonical_digest  # noqa: E402

SLUG = "bench-0123456789ab"
TARGET = 0.5
# issue 13, for the real processes: default validate -q >= 2x and
# validate --deep -q >= 1x sha256sum's throughput over the same files
CLI_DEFAULT_TARGET = 2.0
CLI_DEEP_TARGET = 1.0
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
         "rho sigma tau upsilon phi chi psi omega tabs spaces yaml json sqlite config").split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build(root: Path, sessions: int, facts: int, per_session_bytes: int, seed: int = 1) -> dict:
    """Write the store; return what the bench needs to know about it."""
    rng = random.Random(seed)
    store = root / "memory" / SLUG
    sdir = store / "sessions"
    sdir.mkdir(parents=True, mode=0o700)
    os.chmod(store, 0o700)
    os.chmod(root / "memory", 0o700)
    facts_per_session = max(1, facts // sessions)
    now = "2026-01-01T00:00:00Z"
    fact_rows: list[tuple[str, str, SourceRef]] = []
    referenced = 0
    total = 0
    for s in range(sessions):
        sid = f"s{s:05d}"
        lines: list[bytes] = []
        recs: list[dict] = []

        written = [0]

        def add(rec: dict) -> dict:  # called only in this iteration: B023 does not apply
            body = {"seq": len(recs)}  # noqa: B023
            body.update(rec)
            recs.append(body)  # noqa: B023
            line = orjson.dumps(body) + b"\n"
            lines.append(line)  # noqa: B023
            written[0] += len(line)  # noqa: B023
            return body

        add({"type": "session", "format": 1, "session_id": sid, "project": SLUG, "created": now})
        pairs: list[int] = []           # seq of each user message (its pair is seq + 1)
        lineage: list[dict] = []
        prior = None
        covered_from = 1
        while written[0] < per_session_bytes:
            user = add({"type": "message", "role": "user", "content": _text(rng, rng.randint(20, 120))})
            add({"type": "message", "role": "assistant", "epoch": 0,
                 "content": _text(rng, rng.randint(60, 260))})
            pairs.append(user["seq"])
            if len(pairs) % 60 == 0:
                # compact the messages since the last compaction (chunks of <= 200 positions),
                # leaving the last two pairs raw: the design's rule (four messages at least)
                end = len(recs) - 5
                start = covered_from
                while start <= end:
                    stop = min(end, start + 199)
                    span = [r for r in recs[start:stop + 1]]
                    seqs = [r["seq"] for r in span if r.get("type") == "message"]
                    lo, hi = seqs[0], seqs[-1]
                    lineage.append({"session_id": sid, "seqs": seqs,
                                    "digest": canonical_digest(recs[lo:hi + 1])})
                    start = stop + 1
                covered_from = end + 1
                ev = add({"type": "event", "event": "compact", "summary": _text(rng, 80),
                          "lineage": list(lineage), "prior": prior, "model": "m",
                          "usage": {"input_tokens": 1000, "output_tokens": 100, "cost": None}})
                prior = {"seq": ev["seq"], "digest": canonical_digest([ev])}
        for i in range(facts_per_session):
            u = pairs[(i * len(pairs)) // facts_per_session]
            ref = SourceRef(sid, (u, u + 1), canonical_digest(recs[u:u + 2]))
            referenced += len(lines[u]) + len(lines[u + 1])
            text = recs[u]["content"][:200] + f" #{s}.{i}"
            fact_rows.append((fact_id_for(text, ref), text, ref))
        data = b"".join(lines)
        total += len(data)
        p = sdir / f"{sid}.jsonl"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    db_path = store / "facts.sqlite3"
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)")
    for name, fn in MIGRATIONS:
        fn(db)
        db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, now))
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
    for fid, text, ref in fact_rows:
        db.execute("INSERT INTO facts (fact_id, revision, created, updated) VALUES (?, 1, ?, ?)",
                   (fid, now, now))
        db.execute("INSERT INTO revisions (fact_id, revision, text, created) VALUES (?, 1, ?, ?)",
                   (fid, text, now))
        db.execute("INSERT INTO source_refs VALUES (?, 1, ?, ?, ?)",
                   (fid, ref.session_id, orjson.dumps(list(ref.seqs)).decode(), ref.digest))
    db.execute("COMMIT")
    db.close()
    os.chmod(db_path, 0o600)
    return {"store": str(store), "sessions": sessions, "facts": len(fact_rows),
            "transcript_bytes": total, "referenced_bytes": referenced}


RUNNER = r"""
import json, resource, sys, time
from lecode_memctl.core.audit import Audit
from lecode_memctl.core.layout import store_at
import lecode_memctl.core.facts, lecode_memctl.core.sessions, sqlite3  # imported before measuring

def rchar():
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0

store = store_at(sys.argv[1])
deep = sys.argv[2] == "1"
r0 = rchar()
t0 = time.perf_counter()
a = Audit(store, deep=deep)
findings = list(a.run())
dt = time.perf_counter() - t0
r1 = rchar()
def vmhwm():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0
print(json.dumps({"seconds": dt, "rchar": r1 - r0, "findings": len(findings),
                  "rss_kib": vmhwm(),
                  "workers_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "codes": sorted({f.code for f in findings}),
                  "facts_valid": a.summary.facts["valid"],
                  "transcript_bytes_read": a.summary.bytes_read}))
"""


def run_validate(store: str, deep: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", RUNNER, store, "1" if deep else "0"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run_cli(store: str, deep: bool, runs: int) -> tuple[float, int]:
    """``memctl validate -q [--deep]`` as a process: median seconds, peak RSS KiB."""
    cmd = [MEMCTL, "--store", store, "validate", "-q"]
    if deep:
        cmd.append("--deep")
    return median_run(cmd, runs, ok_codes=(0, 1))


def sha256sum_run(files: list[str]) -> tuple[float, int]:
    return median_run(["sha256sum", *files], 1)


Round = tuple[tuple[float, int], tuple[float, int], tuple[float, int]]


def paired_cli(store: str, files: list[str], runs: int) -> list[Round]:
    """``runs`` rounds of (sha256sum, validate -q, validate --deep -q), each
    (seconds, peak RSS KiB), in turn so that each round shares its load."""
    return [(sha256sum_run(files), run_cli(store, False, 1), run_cli(store, True, 1))
            for _ in range(runs)]


def print_rounds(rounds: list[Round], nbytes: int) -> None:
    for i, (sha, d, deep) in enumerate(rounds, 1):
        print(f"round {i}: sha256sum {sha[0]:.3f} s, validate -q {d[0]:.3f} s "
              f"({sha[0] / d[0]:.2f}x), --deep -q {deep[0]:.3f} s ({sha[0] / deep[0]:.2f}x)")
    med = statistics.median
    sha_s = med([r[0][0] for r in rounds])
    d_s, deep_s = med([r[1][0] for r in rounds]), med([r[2][0] for r in rounds])
    print(f"median ({nbytes / 1e6:.0f} MB): sha256sum {sha_s:.3f} s; validate -q {d_s:.3f} s = "
          f"{sha_s / d_s:.2f}x sha256sum throughput (target {CLI_DEFAULT_TARGET:g}); "
          f"validate --deep -q {deep_s:.3f} s = {sha_s / deep_s:.2f}x (target {CLI_DEEP_TARGET:g}); "
          f"peak RSS -q {max(r[1][1] for r in rounds) // 1024} MiB, "
          f"--deep {max(r[2][1] for r in rounds) // 1024} MiB")


def fleet(parent: Path | None, runs: int) -> int:
    """``validate --all-projects -q`` over 100 and over 1,000 copies of the
    demo store (``memctl demo``): the median user CPU seconds of each (real
    processes, ``--no-state``) and the ratio, which grows with the store
    count (about 10), not with its square (about 19 before 2026-12-07:
    every store's snapshot resolved every store fenced)."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-fleet-", dir=parent))
    try:
        subprocess.run([MEMCTL, "demo", "--into", str(tmp / "demo")], check=True,
                       stdout=subprocess.DEVNULL)
        # (the demo's project store: facts, sessions; not its legacy store)
        src = next(p for p in (tmp / "demo" / "config" / "memory").iterdir()
                   if p.name.startswith("demo-app-"))
        figures = {}
        for n in (100, 1000):
            cfg = tmp / f"f{n}"
            for i in range(n):
                shutil.copytree(src, cfg / "memory" / f"proj{i:04d}-{i:012x}", symlinks=True)
            users = []
            for _ in range(runs):
                before = os.times()
                subprocess.run([MEMCTL, "--no-state", "--config-dir", str(cfg), "validate",
                                "--all-projects", "-q"], check=False)
                after = os.times()
                users.append(after.children_user - before.children_user)
            figures[n] = statistics.median(users)
            shutil.rmtree(cfg)
        print(f"({machine_line()})")
        for n, s in figures.items():
            print(f"validate --all-projects, {n:>5} stores: {s:7.2f} s user CPU")
        print(f"summary: ratio 1000/100 stores {figures[1000] / figures[100]:.1f} (target ~10)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 facts over 100 sessions (~50 MB)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="build the store in a new directory under DIR (made if missing; "
                    "default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    ap.add_argument("--runs", type=int, default=3, help="runs of each measurement (median)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--reuse", type=Path, default=None, metavar="DIR",
                    help="build the store in DIR once and reuse it in later runs")
    ap.add_argument("--only", choices=("cli",), default=None,
                    help="cli: only the real processes against sha256sum (paired rounds)")
    ap.add_argument("--fleet", action="store_true",
                    help="validate --all-projects over 100 and 1,000 copies of the demo "
                    "store: user CPU of each and their ratio (target about 10)")
    a = ap.parse_args(argv)
    if a.fleet:
        return fleet(a.dir, max(1, a.runs))
    sessions, facts = (100, 1000) if a.quick else (1000, 10000)
    if a.reuse is not None:
        tmp = a.reuse
        tmp.mkdir(parents=True, exist_ok=True)
    else:
        if a.dir is not None:
            a.dir.mkdir(parents=True, exist_ok=True)   # (mkdtemp makes no parent)
        tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-", dir=a.dir))
    try:
        t0 = time.perf_counter()
        saved = tmp / "build.json"
        if a.reuse is not None and saved.exists():
            info = json.loads(saved.read_text())
        else:
            info = build(tmp, sessions, facts, 500_000)
            saved.write_text(json.dumps(info))
        build_s = time.perf_counter() - t0
        store = info["store"]
        files = sorted(str(p) for p in Path(store, "sessions").glob("*.jsonl"))
        sha256sum_run(files)            # warm the page cache
        runs = max(1, a.runs)
        rounds = paired_cli(store, files, runs)
        if a.only == "cli":
            print(f"({machine_line()})")
            print_rounds(rounds, info["transcript_bytes"])
            return 0
        default = [run_validate(store, False) for _ in range(runs)]
        deep = [run_validate(store, True) for _ in range(runs)]

        def med(xs: list[float]) -> float:
            return sorted(xs)[len(xs) // 2]

        sha = [r[0][0] for r in rounds]
        sha_rss = max(r[0][1] for r in rounds)
        cli_default = med([r[1][0] for r in rounds])
        cli_default_rss = max(r[1][1] for r in rounds)
        cli_deep = med([r[2][0] for r in rounds])
        cli_deep_rss = max(r[2][1] for r in rounds)

        d_s = med([r["seconds"] for r in default])
        deep_s = med([r["seconds"] for r in deep])
        sha_s = med(sha)
        mb = info["transcript_bytes"] / 1e6
        res = {
            "date": _dt.date.today().isoformat(),
            "machine": machine_line(),
            "quick": a.quick, "build_seconds": round(build_s, 1), **info,
            "default_seconds": round(d_s, 3),
            "default_rchar": med([r["rchar"] for r in default]),
            "default_transcript_bytes_read": default[0]["transcript_bytes_read"],
            "deep_seconds": round(deep_s, 3),
            "deep_mb_per_s": round(mb / deep_s, 1),
            "sha256sum_seconds": round(sha_s, 3),
            "sha256sum_mb_per_s": round(mb / sha_s, 1),
            "deep_vs_sha256sum": round(sha_s / deep_s, 3),
            "cli_default_seconds": round(cli_default, 3),
            "cli_default_vs_sha256sum": round(sha_s / cli_default, 3),
            "cli_deep_seconds": round(cli_deep, 3),
            "cli_deep_vs_sha256sum": round(sha_s / cli_deep, 3),
            "default_rss_kib": max(r["rss_kib"] for r in default),
            "deep_rss_kib": max(r["rss_kib"] for r in deep),
            "deep_workers_rss_kib": max(r["workers_rss_kib"] for r in deep),
            "cli_default_rss_kib": cli_default_rss,
            "cli_deep_rss_kib": cli_deep_rss,
            "sha256sum_rss_kib": sha_rss,
            "rss_method": rss_method(),
            "facts_valid": default[0]["facts_valid"],
            "findings": default[0]["findings"], "deep_findings": deep[0]["findings"],
            "finding_codes": sorted(set(default[0]["codes"]) | set(deep[0]["codes"])),
        }
    finally:
        if a.reuse is None and not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"store kept in {tmp}", file=sys.stderr)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            print(f"{k:32} {v}")
    ok = res["deep_vs_sha256sum"] >= TARGET and res["findings"] == 0 and res["deep_findings"] == 0
    B = "validate"
    size = f"{res['facts']:,} facts / {res['sessions']:,} sessions, {mb:.0f} MB"
    sha_ref = "sha256sum, same files (throughput)"
    record(B, f"sha256sum of the {res['sessions']:,} transcripts ({mb:.0f} MB)", sha_s,
           rss_kib=sha_rss, note="reference")
    record(B, f"validate, in-process ({size})", d_s, rss_kib=res["default_rss_kib"],
           rss_how="fresh subprocess VmHWM", reference=sha_ref, ref_seconds=sha_s,
           ratio=sha_s / d_s)
    record(B, f"memctl validate -q ({size})", cli_default, rss_kib=cli_default_rss,
           reference=sha_ref, ref_seconds=sha_s, ratio=sha_s / cli_default,
           target=f">= {CLI_DEFAULT_TARGET:g}", met=sha_s / cli_default >= CLI_DEFAULT_TARGET)
    record(B, f"validate --deep, in-process ({size})", deep_s,
           rss_kib=max(res["deep_rss_kib"], res["deep_workers_rss_kib"]),
           rss_how=f"fresh subprocess VmHWM {res['deep_rss_kib'] // 1024} MiB, largest worker "
                   f"{res['deep_workers_rss_kib'] // 1024} MiB",
           reference=sha_ref, ref_seconds=sha_s, ratio=sha_s / deep_s,
           target=f">= {TARGET}", met=res["deep_vs_sha256sum"] >= TARGET)
    record(B, f"memctl validate --deep -q ({size})", cli_deep, rss_kib=cli_deep_rss,
           rss_how="largest process of the pool", reference=sha_ref, ref_seconds=sha_s,
           ratio=sha_s / cli_deep, target=f">= {CLI_DEEP_TARGET:g}",
           met=sha_s / cli_deep >= CLI_DEEP_TARGET)
    print(f"summary: default {res['default_seconds']} s reading {res['default_rchar'] / 1e6:.1f} MB "
          f"for {res['referenced_bytes'] / 1e6:.1f} MB referenced of {mb:.0f} MB; --deep "
          f"{res['deep_mb_per_s']} MB/s = {res['deep_vs_sha256sum']}x sha256sum "
          f"(target {TARGET}){'' if ok else ' MISSED'}; memctl validate -q "
          f"{res['cli_default_vs_sha256sum']}x (target {CLI_DEFAULT_TARGET:g}), --deep -q "
          f"{res['cli_deep_vs_sha256sum']}x (target {CLI_DEEP_TARGET:g}), paired rounds")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
