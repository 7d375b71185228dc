#!/usr/bin/env python3
"""Run every benchmark in bench/ and print one summary table.

    python bench/run_all.py [--quick] [--only NAME ...]

Runs each ``bench/bench_*.py`` script found (in name order) with this Python,
passing ``--quick`` through, shows each script's own output as it goes, and
ends with a table: script, exit status, wall time, and the script's result
line (its last line that starts with ``summary:``, else its last output line).
Exits 1 when a script failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
    a = ap.parse_args(argv)

    scripts = sorted(HERE.glob("bench_*.py"))
    if a.only:
        wanted = {n.removeprefix("bench_").removesuffix(".py") for n in a.only}
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    if not scripts:
        print("run_all: no bench/bench_*.py scripts to run", file=sys.stderr)
        return 1

    rows: list[tuple[str, int, float, str]] = []
    for script in scripts:
        cmd = [sys.executable, str(script), *(["--quick"] if a.quick else [])]
        print(f"== {script.name}{' --quick' if a.quick else ''}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        dt = time.perf_counter() - t0
        sys.stdout.write(proc.stdout)
        if proc.stdout and not proc.stdout.endswith("\n"):
            sys.stdout.write("\n")
        print(flush=True)
        rows.append((script.name, proc.returncode, dt, result_line(proc.stdout)))

    w = max(len("script"), *(len(r[0]) for r in rows))
    print("summary" + (" (--quick)" if a.quick else ""))
    print(f"{'script':<{w}}  {'status':>6}  {'seconds':>7}  result")
    for name, rc, dt, res in rows:
        print(f"{name:<{w}}  {('ok' if rc == 0 else f'exit {rc}'):>6}  {dt:7.1f}  {res}")
    return 0 if all(rc == 0 for _n, rc, _d, _r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
