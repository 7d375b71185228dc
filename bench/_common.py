"""Shared helpers for the bench/ scripts: timed child processes with their own
peak RSS, the machine description, and the result rows that run_all.py
gathers into its summary table.

Peak RSS of a child process.  ``os.wait4``/``RUSAGE_CHILDREN`` on a child the
benchmark spawns directly is NOT the child's own peak on Linux: Python starts
children with vfork (or fork), and at exec the kernel folds the *parent's*
memory high-water mark into the child's ``ru_maxrss``; a benchmark that holds
a 100,000-row store in memory would see that in every child.  So a measured
command runs under GNU time (``/usr/bin/time -f %M``), a ~1 MiB C program
that forks it and reports the grandchild's ``ru_maxrss`` from ``wait4``; its
floor is about 1 MiB (``true`` reports 0.9 MiB) and it adds about 1 ms to the
wall time.  Without /usr/bin/time, ``os.wait4`` on the direct child is used
and the figure is labelled as an upper bound.

An in-process measurement (a Python function timed in a loop) runs in a
fresh ``python -c`` subprocess that reports its own ``VmHWM`` (the peak RSS
of its address space after exec, so the parent's size does not leak in),
which includes the interpreter and the modules it imported.

Result rows: when ``BENCH_RESULTS`` names a file, :func:`record` appends one
JSON object per measured operation to it; ``run_all.py`` sets it and prints
the rows as one table.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime

GNU_TIME = "/usr/bin/time"
PY = sys.executable
MEMCTL = os.path.join(os.path.dirname(PY), "memctl")


@dataclass
class Run:
    seconds: float
    rss_kib: int
    rc: int


def rss_method() -> str:
    if os.access(GNU_TIME, os.X_OK):
        return "GNU time %M (wait4 of a fork from a 1 MiB parent)"
    return "os.wait4 of the direct child (upper bound: includes the benchmark's own peak)"


def run(argv: list[str], *, env: dict[str, str] | None = None, stdin=None,
        stdout=subprocess.DEVNULL) -> Run:
    """Run argv once; wall time (perf_counter around spawn..reap) and peak RSS (KiB)."""
    if os.access(GNU_TIME, os.X_OK):
        fd, out = tempfile.mkstemp(prefix="bench-rss-")
        os.close(fd)
        try:
            t0 = time.perf_counter()
            p = subprocess.run([GNU_TIME, "-f", "%M", "-o", out, *argv], env=env, stdin=stdin,
                               stdout=stdout, stderr=subprocess.DEVNULL, check=False)
            dt = time.perf_counter() - t0
            with open(out) as fh:
                text = fh.read()
        finally:
            os.unlink(out)
        # GNU time writes "Command exited with non-zero status N" before the figure
        nums = re.findall(r"^(\d+)\s*$", text, re.M)
        return Run(dt, int(nums[-1]) if nums else 0, p.returncode)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL)
    _pid, status, ru = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(dt, ru.ru_maxrss, proc.returncode)


def median_run(argv: list[str], runs: int, *, env: dict[str, str] | None = None,
               ok_codes: tuple[int, ...] = (0,)) -> tuple[float, int]:
    """Median wall seconds over runs, and the largest peak RSS (KiB) seen."""
    times, rss = [], 0
    for _ in range(runs):
        r = run(argv, env=env)
        if r.rc not in ok_codes:
            raise SystemExit(f"{argv} exited {r.rc}")
        times.append(r.seconds)
        rss = max(rss, r.rss_kib)
    return statistics.median(times), rss


def vmhwm_kib() -> int:
    """This process's own peak RSS (VmHWM), KiB; for in-process runners."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def typer_version() -> str:
    try:
        from importlib.metadata import version
        return version("typer")
    except Exception:  # noqa: BLE001 - a description, never fatal
        return "not installed"


def machine() -> dict[str, str]:
    return {
        "nproc": str(os.cpu_count()),
        "arch": platform.machine(),
        "cpu": cpu_model(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "typer": typer_version(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def machine_line() -> str:
    m = machine()
    return (f"{m['nproc']} CPUs ({m['arch']}, {m['cpu']}), {m['kernel']}, Python {m['python']}, "
            f"SQLite {m['sqlite']}, typer {m['typer']}; {m['date']}; load {loadavg()}")


def record(bench: str, op: str, seconds: float | None, *, rss_kib: int | None,
           rss_how: str = "process", reference: str | None = None,
           ref_seconds: float | None = None, ratio: float | None = None,
           target: str | None = None, met: bool | None = None, note: str = "") -> None:
    """Append one result row to $BENCH_RESULTS (when set).

    ratio defaults to seconds / ref_seconds; pass it explicitly when the
    comparison is a throughput (validate --deep against sha256sum)."""
    path = os.environ.get("BENCH_RESULTS")
    if not path:
        return
    if ratio is None and seconds is not None and ref_seconds:
        ratio = seconds / ref_seconds
    row = {"bench": bench, "op": op, "seconds": seconds, "reference": reference,
           "ref_seconds": ref_seconds, "ratio": ratio, "target": target, "met": met,
           "rss_kib": rss_kib, "rss_how": rss_how, "load": loadavg(), "note": note}
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1:
        return f"{s * 1000:.1f} ms"
    return f"{s:.2f} s"


def fmt_rss(kib: int | None) -> str:
    if not kib:
        return "-"
    return f"{kib / 1024:.1f} MiB"
