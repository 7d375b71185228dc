#!/usr/bin/env python3
"""Start-up time: ``memctl --version`` against ``python -c "import typer"``.

    python bench/bench_startup.py [--runs N] [--quick] [--json]

Runs the virtual environment's ``memctl`` console script (next to this Python)
and ``python -c "import typer"`` side by side, N times each (default 10,
``--quick`` 5), with hyperfine when it is installed and otherwise with an
interleaved ``time.perf_counter`` loop around ``subprocess.run``.  Prints the
median wall times and their ratio; the target is a ratio of at most 1.3.  A
completion request (``_MEMCTL_COMPLETE=complete_bash``) and ``python -c pass``
are measured too, for context, and so is the floor of a reading command:
``python -c`` importing typer and the libraries every command that reads a
store loads (``orjson``, ``sqlite3``, ``hashlib``), with none of memctl.
Peak RSS of each command is taken from 3 further runs under GNU time (see
``_common.py``), the largest of them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine_line, record, rss_method, run  # noqa: E402

TARGET = 1.3
PY = sys.executable
MEMCTL = os.path.join(os.path.dirname(PY), "memctl")


READ_TARGET = 1.4        # each read command on the demo store / import typer
TAB_TARGET = 1.0         # a TAB completion / import typer
#: The read commands measured on the demo store (issue 13: each <= 1.4x import typer).
READ_COMMANDS = (["where"], ["show"], ["facts"], ["validate", "-q"], ["context"],
                 ["sessions"], ["notes"], ["history", "--help"])
_DEMO: dict[str, str] = {}
FLOOR_NAME = 'python -c "import typer, orjson, sqlite3, hashlib"'


def demo_store() -> str:
    """A demo store (``core.demo.build_demo``) in a temporary directory, built once."""
    if "store" not in _DEMO:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from lecode_memctl.core.demo import build_demo

        demo = build_demo(__import__("pathlib").Path(tempfile.mkdtemp(prefix="bench-demo-")))
        _DEMO["store"] = os.fspath(demo.store.path)
        _DEMO["base"] = os.fspath(demo.base)
    return _DEMO["store"]


def read_name(words: list[str]) -> str:
    return "memctl " + " ".join(words) + " (demo store)"


def cases() -> list[tuple[str, list[str], dict[str, str]]]:
    store = demo_store()
    return [
        ("memctl --version", [MEMCTL, "--version"], {}),
        ('python -c "import typer"', [PY, "-c", "import typer"], {}),
        ("memctl completion (TAB on 'memctl s')", [MEMCTL],
         {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl s", "COMP_CWORD": "1"}),
        ("python -c pass", [PY, "-c", "pass"], {}),
        (FLOOR_NAME, [PY, "-c", "import typer, orjson, sqlite3, hashlib"], {}),
    ] + [(read_name(w), [MEMCTL, "--store", store, *w], {}) for w in READ_COMMANDS]


def with_hyperfine(runs: int) -> dict[str, float]:
    exe = shutil.which("hyperfine")
    assert exe
    out = {}
    with tempfile.TemporaryDirectory() as d:
        # hyperfine takes one command string per benchmark; the environment of the
        # completion request goes through env(1).
        cmds, names = [], []
        for name, argv, env in cases():
            prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
            cmds.append(shlex.join(prefix + argv))
            names.append(name)
        path = os.path.join(d, "h.json")
        subprocess.run([exe, "-N", "--runs", str(runs), "--warmup", "2", "--style", "none",
                        "--export-json", path, *cmds], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path) as f:
            results = json.load(f)["results"]
    for name, r in zip(names, results, strict=True):  # hyperfine: one result per command
        out[name] = r["median"]
    return out


def with_loop(runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name, _a, _e in cases()}
    base = dict(os.environ)
    for i in range(runs + 2):
        for name, argv, env in cases():  # interleaved: side by side, same conditions
            e = {**base, **env}
            t0 = time.perf_counter()
            subprocess.run(argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)
            dt = time.perf_counter() - t0
            if i >= 2:  # the first two rounds warm the page cache
                times[name].append(dt)
    return {name: statistics.median(ts) for name, ts in times.items()}


def peak_rss(runs: int = 3) -> dict[str, int]:
    out = {}
    base = dict(os.environ)
    for name, argv, env in cases():
        out[name] = max(run(argv, env={**base, **env}).rss_kib for _ in range(runs))
    return out


def machine() -> str:
    return (f"{os.cpu_count()} CPUs ({platform.machine()}), Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="runs of each command (default 10)")
    ap.add_argument("--quick", action="store_true", help="5 runs instead of 10")
    ap.add_argument("--loop", action="store_true", help="use the perf_counter loop even if hyperfine exists")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    runs = a.runs or (5 if a.quick else 10)
    if not os.access(MEMCTL, os.X_OK):
        print(f"bench_startup: no memctl console script at {MEMCTL}", file=sys.stderr)
        return 2
    # memctl's own modules compiled, as typer's are (pip compiles what it installs;
    # an editable install under PYTHONDONTWRITEBYTECODE=1 would compile every
    # module from source on every run and measure the compiler, not memctl)
    subprocess.run([PY, "-m", "compileall", "-q", os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lecode_memctl")],
        check=False, stdout=subprocess.DEVNULL)
    tool = "hyperfine" if shutil.which("hyperfine") and not a.loop else "perf_counter loop"
    medians = with_hyperfine(runs) if tool == "hyperfine" else with_loop(runs)
    v = medians["memctl --version"]
    t = medians['python -c "import typer"']
    ratio = v / t
    rss = peak_rss()
    ok = ratio <= TARGET
    typer_name = 'python -c "import typer"'
    reads = {read_name(w) for w in READ_COMMANDS}
    tab = "memctl completion (TAB on 'memctl s')"
    for name, m in medians.items():
        if name == "memctl --version":
            record("startup", name, m, rss_kib=rss[name], reference=typer_name, ref_seconds=t,
                   target=f"<= {TARGET}", met=ok)
        elif name in reads:
            record("startup", name, m, rss_kib=rss[name], reference=typer_name, ref_seconds=t,
                   target=f"<= {READ_TARGET}", met=m / t <= READ_TARGET)
        elif name == tab:
            record("startup", name, m, rss_kib=rss[name], reference=typer_name, ref_seconds=t,
                   target=f"<= {TAB_TARGET}", met=m / t <= TAB_TARGET)
        elif name == FLOOR_NAME:
            record("startup", name, m, rss_kib=rss[name], reference=typer_name, ref_seconds=t,
                   note="the floor of a command that reads a store")
        else:
            record("startup", name, m, rss_kib=rss[name],
                   note="reference" if name == typer_name else "context")
    if a.json:
        print(json.dumps({"runs": runs, "tool": tool, "machine": machine(),
                          "medians_s": medians, "peak_rss_kib": rss, "ratio": ratio,
                          "target": TARGET}))
        return 0
    print(f"start-up, median of {runs} runs each ({tool}); {machine_line()}")
    print(f"peak RSS: {rss_method()}, largest of 3 runs")
    width = max(len(n) for n in medians)
    print(f"{'command':<{width}}  median ms  peak RSS MiB  / import typer")
    for name, m in medians.items():
        print(f"{name:<{width}}  {m * 1000:9.1f}  {rss[name] / 1024:12.1f}  {m / t:6.2f}")
    if "base" in _DEMO:
        shutil.rmtree(_DEMO["base"], ignore_errors=True)
    verdict = "within" if ratio <= TARGET else "OVER"
    print(f"summary: memctl --version / import typer = {ratio:.2f} ({verdict} the {TARGET} target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
