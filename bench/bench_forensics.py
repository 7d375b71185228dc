#!/usr/bin/env python3
"""``memctl grep`` and ``memctl secrets`` on the 501 MB store of bench_validate.py.

    python bench/bench_forensics.py [--quick] [--dir DIR] [--runs N] [--json]

Builds the same store as ``bench_validate.py`` (10,000 facts over 1,000
sessions, about 500 MB of transcripts; ``--quick``: 100 sessions, about
50 MB), warms the page cache, then times, each as a real process with its
peak RSS (see ``_common.py``):

* ``grep -c omicron sessions/*.jsonl`` (GNU grep: the reference; it counts
  raw lines, and knows nothing of records, fields or visibility);
* ``memctl grep -c omicron --include-hidden`` (parses every record, searches
  its text fields; every record counted, none hidden);
* ``memctl grep -c omicron`` (the default: visibility applied);
* the same two greps for a literal no line holds (``memctl grep`` checks a
  literal pattern against each line's bytes before parsing it);
* ``memctl secrets -q`` (detect-secrets' plugins over every string of every
  record, the database pages and the Markdown; one worker per CPU) and the
  same with ``--jobs 1``.

Prints a table and the MB/s of each over the transcript bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MEMCTL, fmt_rss, fmt_time, machine_line, median_run, record  # noqa: E402
from bench_validate import build  # noqa: E402

PATTERN = "omicron"             # in almost every message: every record parsed
RARE = "AKIAIOSFODNN7EXAMPLE"   # in none: the literal pre-check skips parsing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 sessions (~50 MB)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="build the store in a new directory under DIR (made if missing)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each measurement (median)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sessions, facts = (100, 1000) if a.quick else (1000, 10000)
    if a.dir is not None:
        a.dir.mkdir(parents=True, exist_ok=True)   # (mkdtemp makes no parent)
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-", dir=a.dir))
    try:
        t0 = time.perf_counter()
        info = build(tmp, sessions, facts, 500_000)
        build_s = time.perf_counter() - t0
        store = info["store"]
        files = sorted(str(p) for p in Path(store, "sessions").glob("*.jsonl"))
        median_run(["cat", *files], 1)          # warm the page cache
        mb = info["transcript_bytes"] / 1e6
        rows = []
        cases = [
            ("`grep -c omicron` (GNU grep) over the transcripts", ["grep", "-c", PATTERN, *files], (0, 1)),
            ("`memctl grep -c omicron --include-hidden`",
             [MEMCTL, "--store", store, "grep", "-c", PATTERN, "--include-hidden"], (0, 1)),
            ("`memctl grep -c omicron` (visible only)",
             [MEMCTL, "--store", store, "grep", "-c", PATTERN], (0, 1)),
            ("`grep -c AKIAIOSFODNN7EXAMPLE` (GNU grep; no line matches)",
             ["grep", "-c", RARE, *files], (0, 1)),
            ("`memctl grep -c AKIAIOSFODNN7EXAMPLE` (no record matches)",
             [MEMCTL, "--store", store, "grep", "-c", RARE, "--include-hidden"], (0, 1)),
            ("`memctl secrets -q` (one worker per CPU)",
             [MEMCTL, "--store", store, "secrets", "-q"], (0, 1)),
            ("`memctl secrets -q --jobs 1`",
             [MEMCTL, "--store", store, "secrets", "-q", "--jobs", "1"], (0, 1)),
        ]
        ref = None
        for label, cmd, ok in cases:
            secs, rss = median_run(cmd, max(1, a.runs), ok_codes=ok)
            if ref is None:
                ref = secs
            rows.append({"op": label, "seconds": round(secs, 3), "mb_per_s": round(mb / secs, 2),
                         "vs_grep": round(secs / ref, 1), "rss_kib": rss})
            record("forensics", label, secs, rss_kib=rss,
                   reference="`grep -c` (GNU grep)" if ref != secs else None,
                   ref_seconds=ref if ref != secs else None)
            print(f"{label}: {fmt_time(secs)}  {mb / secs:.2f} MB/s  x{secs / ref:.1f}  "
                  f"{fmt_rss(rss)}", flush=True)
        res = {"machine": machine_line(), "quick": a.quick, "build_seconds": round(build_s, 1),
               "transcript_bytes": info["transcript_bytes"], "sessions": info["sessions"],
               "facts": info["facts"], "rows": rows}
        if a.json:
            print(json.dumps(res, indent=2))
        else:
            print(f"summary: {info['sessions']} sessions, {mb:.0f} MB of transcripts; "
                  + machine_line())
        return 0
    finally:
        if a.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
