#!/usr/bin/env python3
"""``memctl export`` and ``memctl verify`` of the store bench_facts.py builds.

    python bench/bench_bundle.py [--quick] [--keep DIR] [--runs N]

Builds two stores with ``bench_facts.build`` (10,000 and 100,000 facts over
50 transcripts; ``--quick``: 2,000 and 20,000), once when ``--keep DIR``
names where to keep them, then times in paired rounds, each as a real
process with its peak RSS (see ``_common.py``):

* ``tar -cf`` of the large store (a reference: an archive of the same
  files, no hash, no audit);
* ``memctl validate --deep -q`` then ``memctl facts --all --format jsonl``
  of the large store (a reference: the audit a bundle's manifest records,
  on the store itself, no copy, no archive);
* ``memctl export -o FILE`` of each store (a new file each run);
* ``memctl verify FILE`` of each bundle.

The rows with a target are the memory ones: export's and verify's peak RSS
on the large store over the small one, at most 1.5 (issue 13: peak memory
flat in data size; before 2026-12-06 both held every fact row: 3.13x and
4.58x here, 168 and 307 MiB).  Times are printed against the two
references, without target.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MEMCTL, fmt_rss, machine_line, record, run  # noqa: E402
from bench_facts import stores_in, two_sizes  # noqa: E402

RSS_TARGET = 1.5


def rounds(cases: dict[str, list[str]], runs: int, out: Path) -> dict[str, tuple[float, int]]:
    """Each case run once per round, in turn (one round shares the load);
    the median time and the largest peak RSS of each.  A case whose argv
    holds ``{out}`` writes a new file there each run."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    rss: dict[str, int] = dict.fromkeys(cases, 0)
    for _ in range(runs):
        for name, argv in cases.items():
            target = out / f"written-{name}.tar"
            if target.exists():
                target.unlink()
            r = run([a.replace("{out}", str(target)) for a in argv])
            if r.rc != 0:
                raise SystemExit(f"{name}: {argv} exited {r.rc}")
            times[name].append(r.seconds)
            rss[name] = max(rss[name], r.rss_kib)
    return {k: (statistics.median(v), rss[k]) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    a, small_n, large_n, root = two_sizes(__doc__, argv, "bench-bundle-")
    out = Path(tempfile.mkdtemp(prefix="bench-bundle-out-"))
    try:
        print(f"({machine_line()})")
        stores = stores_in(root, (small_n, large_n))
        # the bundles verify reads, written once
        for n, store in stores.items():
            bundle = out / f"bundle-{n}.tar"
            subprocess.run([MEMCTL, "--store", str(store), "export", "-o", str(bundle)],
                           check=True, stdout=subprocess.DEVNULL)
        big = str(stores[large_n])
        cases = {"tar": ["tar", "-cf", "{out}", "-C", big, "."],
                 "audit": ["sh", "-c", '"$0" --store "$1" validate --deep -q && '
                           '"$0" --store "$1" facts --all --format jsonl >/dev/null', MEMCTL, big]}
        for n, store in stores.items():
            cases[f"export-{n}"] = [MEMCTL, "--store", str(store), "export", "-o", "{out}"]
            cases[f"verify-{n}"] = [MEMCTL, "verify", str(out / f"bundle-{n}.tar")]
        got = rounds(cases, a.runs, out)
        tar_s, tar_rss = got["tar"]
        B = "bundle"
        nf = f"{large_n:,} facts"
        record(B, f"tar -cf of the store ({nf})", tar_s, rss_kib=tar_rss, note="reference")
        au_s, au_rss = got["audit"]
        AU = f"validate --deep -q, then facts --all ({nf})"
        record(B, AU, au_s, rss_kib=au_rss, note="reference")
        print(f"tar -cf ({nf}):        {tar_s:7.2f} s")
        print(f"validate --deep -q, then facts --all ({nf}): {au_s:7.2f} s")
        summary = []
        for cmd in ("export", "verify"):
            (s_s, s_rss), (l_s, l_rss) = got[f"{cmd}-{small_n}"], got[f"{cmd}-{large_n}"]
            grow = l_rss / s_rss
            print(f"memctl {cmd} ({small_n:,} facts):  {s_s:7.2f} s  peak RSS {fmt_rss(s_rss)}")
            print(f"memctl {cmd} ({nf}): {l_s:7.2f} s  peak RSS {fmt_rss(l_rss)}  "
                  f"{l_s / tar_s:5.1f}x tar, {l_s / au_s:.2f}x the audit; "
                  f"RSS {grow:.2f}x the {small_n:,}-fact store's")
            record(B, f"memctl {cmd} ({nf}) against the audit", l_s, rss_kib=l_rss,
                   reference=AU, ref_seconds=au_s, note="reference, no target")
            record(B, f"memctl {cmd} peak RSS, {nf} / {small_n:,} facts", l_s, rss_kib=l_rss,
                   reference=f"memctl {cmd} ({small_n:,} facts, {fmt_rss(s_rss)})",
                   ref_seconds=s_s, ratio=grow, target=f"<= {RSS_TARGET}",
                   met=grow <= RSS_TARGET)
            summary.append(f"{cmd} {l_s / au_s:.2f}x the audit, RSS {grow:.2f}x from "
                           f"{small_n:,} to {large_n:,} facts")
        print("summary: " + "; ".join(summary))
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
