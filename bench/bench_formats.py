#!/usr/bin/env python3
"""``memctl facts --all`` in every format, against ``--format jsonl``.

    python bench/bench_formats.py [--quick] [--keep DIR] [--runs N]

Builds two stores with ``bench_facts.build`` (10,000 and 100,000 facts over
50 transcripts; ``--quick``: 2,000 and 20,000), once when ``--keep DIR``
names where to keep them (``bench_bundle.py --keep`` builds the same two),
then times, each as a real process with its peak RSS (see ``_common.py``):

* on the large store, in paired rounds (``--runs``, default 3): ``facts
  --all`` with ``--format jsonl`` (the reference), ``json``, ``csv``,
  ``tsv``, and the plain table a pipe gets;
* the rich table a terminal gets (``facts --all`` run under ``script(1)``,
  which gives it a pseudo-terminal; once per store, the slowest case by
  far: rich draws the first 1,000 rows and every row that is not printable
  ASCII, ``output._RowLines`` the others), when ``script`` is installed.

The only target is the terminal table's peak RSS on the large store over the
small one: at most 1.5 (issue 13: peak memory flat in data size; before
2026-12-06 that table held every row as rich objects, 104 and 703 MiB
here).  The formats' times are printed against jsonl without a target.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MEMCTL, fmt_rss, machine_line, record, run  # noqa: E402
from bench_facts import stores_in, two_sizes  # noqa: E402

RSS_TARGET = 1.5
FORMATS = ("jsonl", "json", "csv", "tsv", "table")


def _listing(store: Path, fmt: str) -> list[str]:
    argv = [MEMCTL, "--store", str(store), "facts", "--all"]
    return argv if fmt == "table" else [*argv, "--format", fmt]


def _terminal(store: Path) -> list[str] | None:
    """``facts --all`` under script(1) (util-linux), its output discarded."""
    script = shutil.which("script")
    if script is None:
        return None
    import shlex

    command = " ".join(shlex.quote(a) for a in _listing(store, "table"))
    return [script, "-qefc", command, "/dev/null"]


def main(argv: list[str] | None = None) -> int:
    a, small_n, large_n, root = two_sizes(__doc__, argv, "bench-formats-")
    try:
        print(f"({machine_line()})")
        stores = stores_in(root, (small_n, large_n))
        big = stores[large_n]
        times: dict[str, list[float]] = {f: [] for f in FORMATS}
        rss = dict.fromkeys(FORMATS, 0)
        for _ in range(a.runs):
            for fmt in FORMATS:
                r = run(_listing(big, fmt))
                if r.rc != 0:
                    raise SystemExit(f"facts --all --format {fmt} exited {r.rc}")
                times[fmt].append(r.seconds)
                rss[fmt] = max(rss[fmt], r.rss_kib)
        med = {f: statistics.median(v) for f, v in times.items()}
        B = "formats"
        nf = f"{large_n:,} facts"
        ref = f"memctl facts --all --format jsonl ({nf})"
        record(B, ref, med["jsonl"], rss_kib=rss["jsonl"], note="reference")
        print(f"facts --all ({nf}), medians of {a.runs} paired rounds:")
        for fmt in FORMATS:
            name = "the plain table (a pipe)" if fmt == "table" else f"--format {fmt}"
            print(f"  {name:26} {med[fmt]:6.2f} s  {med[fmt] / med['jsonl']:5.2f}x jsonl  "
                  f"peak RSS {fmt_rss(rss[fmt])}")
            if fmt != "jsonl":
                record(B, f"memctl facts --all, {name} ({nf})", med[fmt], rss_kib=rss[fmt],
                       reference=ref, ref_seconds=med["jsonl"], note="reference, no target")
        summary = [f"json {med['json'] / med['jsonl']:.2f}x, csv {med['csv'] / med['jsonl']:.2f}x, "
                   f"table {med['table'] / med['jsonl']:.2f}x jsonl"]
        term = {n: _terminal(s) for n, s in stores.items()}
        if term[large_n] is None:
            print("the terminal table: not measured (no script(1) here)")
        else:
            got = {}
            for n, cmd in term.items():
                assert cmd is not None
                r = run(cmd)
                if r.rc != 0:
                    raise SystemExit(f"script -c 'facts --all' ({n:,} facts) exited {r.rc}")
                got[n] = r
                print(f"the rich table on a terminal ({n:,} facts): {r.seconds:6.2f} s  "
                      f"peak RSS {fmt_rss(r.rss_kib)}")
            s, big_r = got[small_n], got[large_n]
            grow = big_r.rss_kib / s.rss_kib
            record(B, f"memctl facts --all on a terminal, peak RSS, {nf} / {small_n:,} facts",
                   big_r.seconds, rss_kib=big_r.rss_kib,
                   reference=f"the same, {small_n:,} facts ({fmt_rss(s.rss_kib)})",
                   ref_seconds=s.seconds, ratio=grow, target=f"<= {RSS_TARGET}",
                   met=grow <= RSS_TARGET)
            summary.append(f"terminal table RSS {grow:.2f}x from {small_n:,} to {large_n:,} "
                           f"facts ({big_r.seconds:.1f} s)")
        print("summary: " + "; ".join(summary))
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
