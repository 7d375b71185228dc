"""Read-only open + 20 rows: the private snapshot every read takes, against an
immutable open of the same file (what reads did before), paired in one run.

    python bench/bench_snapshot.py PATH/TO/facts.sqlite3 [--runs 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from urllib.parse import quote

from lecode_memctl.core.facts import FactStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("db")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()

    def snapshot() -> float:
        t = time.perf_counter()
        with FactStore.open_readonly(a.db) as fs:
            fs.list_facts(0, 20)
        return time.perf_counter() - t

    def immutable() -> float:
        t = time.perf_counter()
        db = sqlite3.connect("file:" + quote(a.db) + "?mode=ro&immutable=1", uri=True)
        db.execute("SELECT * FROM facts LIMIT 20").fetchall()
        db.close()
        return time.perf_counter() - t

    snap = statistics.median(snapshot() for _ in range(a.runs))
    imm = statistics.median(immutable() for _ in range(a.runs))
    print(f"snapshot open + 20 rows: {snap * 1000:.1f} ms; immutable open + 20 rows: "
          f"{imm * 1000:.1f} ms (median of {a.runs})")


if __name__ == "__main__":
    main()
