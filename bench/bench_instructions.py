#!/usr/bin/env python3
"""Where issue 13's two rows spend their instructions: counts, not seconds.

    python bench/bench_instructions.py [--facts N] [--keep DIR]

Runs ``memctl facts --all --format jsonl`` and ``memctl validate -q`` in
one process (the split into two processes turned off in the process:
``split.SPLIT_LEAST``), and the ``sqlite3 -json`` dump of the same rows,
each under ``valgrind --tool=callgrind``, on two stores ``bench_facts.py``
builds: N facts (default 10,000) and 100.  An instruction count does not
move with the machine's load (two runs of the same command agree to about
0.2%), so it shows what the wall-clock rows of ``bench_engine.py`` cannot
on a shared machine: the cost of one more fact, (count at N - count at
100) / (N - 100), in all and by shared library (the interpreter, SQLite,
libc, orjson, SHA-256), against the dump's.  The fixed cost (start-up and
imports) is what the two sizes share, so it falls out.

Needs valgrind (``callgrind_annotate`` comes with it); without it, says so
and exits 0.  Slow: valgrind runs the interpreter about 50 times slower,
about three minutes in all at 10,000 facts.  Prints a table and a
``summary:`` line; the figures are in docs/PERFORMANCE.md ("Issue 13: the
two rows not met").  ``run_all.py`` leaves it to be run by hand.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PY, machine_line  # noqa: E402
from bench_facts import build  # noqa: E402

#: memctl in this process, with the split into two processes turned off.
ONE_PROCESS = """
import sys
from lecode_memctl.core import split
split.SPLIT_LEAST = 1 << 62
sys.argv = ["memctl", *sys.argv[1:]]
from lecode_memctl.cli.main import main
main()
"""

OTHER = "the rest (the sqlite3 program itself, other modules)"
DUMP_SQL = "select * from facts join revisions using (fact_id)"

#: shared object -> the row it is counted in
LIBS = (("libpython", "the interpreter (libpython)"), ("libsqlite3", "SQLite (libsqlite3)"),
        ("libc.so", "libc (memory, copies, mutexes)"), ("orjson", "orjson"),
        ("libcrypto", "SHA-256 (libcrypto, _sha256)"), ("_sha256", "SHA-256 (libcrypto, _sha256)"))


def callgrind(argv: list[str], out: Path) -> dict[str, int]:
    """Instructions of ``argv`` (its output to /dev/null): the total and
    each row of :data:`LIBS`."""
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   cwd=tempfile.gettempdir())
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", str(out)],
                          capture_output=True, text=True, check=True).stdout
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if m is None:
            continue
        n, rest = int(m.group(1).replace(",", "")), m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            counts["total"] = n
            continue
        lib = re.search(r"\[([^\]]*)\]\s*$", rest)
        for key, row in LIBS:
            if lib is not None and key in os.path.basename(lib.group(1)):
                counts[row] = counts.get(row, 0) + n
                break
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=10_000)
    ap.add_argument("--keep", metavar="DIR", default=None,
                    help="build the two stores under DIR once and reuse them")
    a = ap.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("valgrind is not installed: no instruction counts (apt install valgrind)")
        return 0
    small, n = 100, a.facts
    if n <= small:
        ap.error(f"--facts must be more than {small}")
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-instr-"))
    try:
        print(f"({machine_line()})")
        stores = {}
        for size in (small, n):
            where = root / f"facts-{size}"
            if not (where / "bench-store" / "facts.sqlite3").exists():
                where.mkdir(parents=True, exist_ok=True)
                build(where, size)
            stores[size] = where / "bench-store"
        cases = {
            "dump": lambda s: ["sqlite3", "-json", str(s / "facts.sqlite3"), DUMP_SQL],
            "facts --all --format jsonl": lambda s: [PY, "-c", ONE_PROCESS, "--store", str(s),
                                                     "facts", "--all", "--format", "jsonl"],
            "validate -q": lambda s: [PY, "-c", ONE_PROCESS, "--store", str(s), "validate", "-q"],
        }
        per: dict[str, dict[str, float]] = {}
        for name, argv_of in cases.items():
            got = {size: callgrind(argv_of(stores[size]), root / f"callgrind.{size}.out")
                   for size in (small, n)}
            per[name] = {k: (got[n].get(k, 0) - got[small].get(k, 0)) / (n - small)
                         for k in got[n]}
            per[name][OTHER] = per[name]["total"] - sum(v for k, v in per[name].items()
                                                        if k != "total")
        rows = ["total"] + list(dict.fromkeys(row for _key, row in LIBS)) + [OTHER]
        width = max(len(r) for r in rows)
        print(f"instructions per fact, {n:,} facts against {small} (one process):")
        print(f"{'':{width}}  " + "  ".join(f"{c:>26}" for c in cases))
        for r in rows:
            cells = []
            for c in cases:
                v = per[c].get(r)
                if v is None:
                    cells.append(f"{'':>26}")
                    continue
                ratio = f" ({v / per['dump']['total']:4.1f}x)" if r == "total" and c != "dump" else ""
                cells.append(f"{v:>18,.0f}{ratio:>8}")
            print(f"{r:{width}}  " + "  ".join(cells))
        d = per["dump"]["total"]
        f, v = per["facts --all --format jsonl"]["total"], per["validate -q"]["total"]
        print(f"summary: per fact, facts --all {f / d:.1f}x and validate -q {v / d:.1f}x the "
              f"dump's instructions ({d:,.0f}); the interpreter alone "
              f"{per['facts --all --format jsonl'].get(rows[1], 0) / d:.1f}x and "
              f"{per['validate -q'].get(rows[1], 0) / d:.1f}x")
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
