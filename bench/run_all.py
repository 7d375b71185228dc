#!/usr/bin/env python3
"""Run every benchmark in bench/ and print one summary table.

    python bench/run_all.py [--quick] [--only NAME ...] [--million DIR]

Runs each ``bench/bench_*.py`` script found (start-up, facts, read, validate,
then any others in name order, but those of ``BY_HAND``), one after the
other, with this Python, passing ``--quick`` through, and shows each script's
own output as it goes.  Each script appends one JSON row per measured
operation to the file named by ``$BENCH_RESULTS`` (see ``_common.py``); at
the end this prints ONE table of them: operation, time (median), reference
(what it is compared with, and its time), ratio, target, met?, peak RSS and
the 1-minute load average when the figure was taken; then each script's exit
status and wall time.  ``--markdown`` prints the table as Markdown too (for
docs/PERFORMANCE.md), ``--json FILE`` saves the rows.

Ratios are time / reference time, except against ``sha256sum`` where they
are throughput / sha256sum's throughput (higher is better; target >= 0.5).
Exits 1 when a script failed (bench_validate.py fails when --deep misses
its target).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import fmt_rss, fmt_time, machine_line, rss_method  # noqa: E402

ORDER = ("bench_startup.py", "bench_facts.py", "bench_read.py", "bench_validate.py")
# scripts run by hand, with arguments of their own, never by this one (it ran
# bench_snapshot.py with none, which exited 2, so that every full run exited 1)
BY_HAND = {"bench_snapshot.py": "needs a database: python bench/bench_snapshot.py "
                                "STORE/facts.sqlite3 (bench_facts.py measures the same on its store)",
           "bench_instructions.py": "counts instructions under valgrind, minutes at 50x the "
                                    "time: python bench/bench_instructions.py"}
COLUMNS = ("operation", "time", "reference", "ratio", "target", "met?", "peak RSS", "load")


def table_rows(rows: list[dict]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in rows:
        ref = "-"
        if r["reference"]:
            ref = r["reference"] + (f" ({fmt_time(r['ref_seconds'])})" if r["ref_seconds"] else "")
        elif r.get("note") == "reference":
            ref = "(is a reference)"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        rss = fmt_rss(r["rss_kib"])
        if r.get("rss_how") not in (None, "process"):
            rss += " *"
        out.append((r["op"], fmt_time(r["seconds"]), ref, ratio, r["target"] or "-", met, rss,
                    f"{r['load']:.2f}"))
    return out


def print_table(rows: list[tuple[str, ...]]) -> None:
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    right = {1, 3, 6, 7}
    fmt = lambda cells: "  ".join(  # noqa: E731
        (c.rjust(w[i]) if i in right else c.ljust(w[i])) for i, c in enumerate(cells)).rstrip()
    print(fmt(COLUMNS))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(fmt(r))


def print_markdown(rows: list[tuple[str, ...]]) -> None:
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("---:" if i in (1, 3, 6, 7) else "---" for i in range(len(COLUMNS))) + "|")
    for r in rows:
        cells = [c.replace("|", "\\|") for c in r]
        print("| " + " | ".join(cells) + " |")


def result_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.lower().startswith("summary:"):
            return ln.split(":", 1)[1].strip()
    return lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="passed to every script: a short run")
    ap.add_argument("--only", nargs="+", metavar="NAME", default=None,
                    help="run only these scripts (bench_startup or startup)")
    ap.add_argument("--million", metavar="DIR", default=None,
                    help="bench_engine.py also measures 1,000,000 facts (store built once in DIR)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--json", metavar="FILE", type=Path, default=None, help="save the result rows as JSON")
    a = ap.parse_args(argv)

    order = {n: i for i, n in enumerate(ORDER)}
    scripts = sorted((p for p in HERE.glob("bench_*.py") if p.name not in BY_HAND),
                     key=lambda p: (order.get(p.name, len(order)), p.name))
    by_hand = sorted(BY_HAND)
    if a.only:
        wanted = {n.removeprefix("bench_").removesuffix(".py") for n in a.only}
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
        by_hand = [n for n in by_hand if n.removeprefix("bench_").removesuffix(".py") in wanted]
    for name in by_hand:
        print(f"== {name}: not run here ({BY_HAND[name]})", flush=True)
    if not scripts:
        print("run_all: no bench/bench_*.py scripts to run", file=sys.stderr)
        return 1

    fd, results = tempfile.mkstemp(prefix="bench-results-", suffix=".jsonl")
    os.close(fd)
    env = {**os.environ, "BENCH_RESULTS": results}
    start = machine_line()
    runs: list[tuple[str, int, float, str]] = []
    try:
        for script in scripts:
            cmd = [sys.executable, str(script), *(["--quick"] if a.quick else [])]
            if a.million and script.name == "bench_engine.py":
                cmd += ["--million", a.million]
            print(f"== {script.name}{' --quick' if a.quick else ''}", flush=True)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env)
            dt = time.perf_counter() - t0
            sys.stdout.write(proc.stdout)
            if proc.stdout and not proc.stdout.endswith("\n"):
                sys.stdout.write("\n")
            print(flush=True)
            runs.append((script.name, proc.returncode, dt, result_line(proc.stdout)))
        with open(results) as fh:
            rows = [json.loads(ln) for ln in fh if ln.strip()]
    finally:
        os.unlink(results)

    print("summary" + (" (--quick)" if a.quick else ""))
    print(f"machine: {start}; at the end: load {os.getloadavg()[0]:.2f}")
    print(f"peak RSS: {rss_method()}; * = in-process figure (VmHWM of a fresh subprocess, "
          f"interpreter and imports included) or see the script's notes")
    print("ratio: time / reference time; against sha256sum: throughput / sha256sum throughput")
    print()
    cells = table_rows(rows)
    if cells:
        print_table(cells)
    else:
        print("(no result rows)")
    print()
    w = max(len("script"), *(len(r[0]) for r in runs))
    print(f"{'script':<{w}}  {'status':>6}  {'seconds':>7}  result")
    for name, rc, dt, res in runs:
        print(f"{name:<{w}}  {('ok' if rc == 0 else f'exit {rc}'):>6}  {dt:7.1f}  {res}")
    if a.markdown and cells:
        print()
        print_markdown(cells)
    if a.json:
        a.json.write_text(json.dumps({"machine": start, "quick": a.quick, "rows": rows,
                                      "scripts": runs}, indent=2) + "\n")
    return 0 if all(rc == 0 for _n, rc, _d, _r in runs) else 1

if __name__ == "__main__":
    sys.exit(main())
