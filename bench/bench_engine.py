#!/usr/bin/env python3
"""The whole-store evaluation engine (issue 13), paired against the floors.

    python bench/bench_engine.py [--facts N] [--runs N] [--quick] [--keep DIR] [--scan-mib N]
                                 [--only facts|scan]

* ``memctl facts --all --format jsonl`` and ``memctl validate -q`` on the
  store ``bench_facts.py`` builds (100,000 facts, 50 transcripts; ``--quick``
  10,000), each against ``sqlite3 -json facts.sqlite3 "select * from facts
  join revisions using (fact_id)"`` (the same rows dumped by SQLite alone),
  the three run in turn ``--runs`` times (paired: one run shares the load);
  target <= 4x.  ``--keep DIR`` builds the store there once and reuses it.
  A fourth case in the same rounds is the floor of this language: a fresh
  CPython process that reads the rows ``facts --all`` prints (each fact's
  revisions and their source references, one joined query through
  CPython's ``sqlite3``, in whatever order SQLite finds fastest) and writes
  each as a JSON line with ``orjson``, with no check, no status and no
  transcript read.  Its ratio to the dump
  is what any listing written in CPython pays before it decides anything.
  A fifth is SQLite's own floor for the listing: the ``sqlite3`` shell
  making the same rows JSON itself (``json_object``), in the listing's
  order (``ORDER BY fact_id``), again with no check and no transcript read.
  A sixth is memctl's own listing with the evaluation left out (every
  status taken as valid: ``factview._evaluate_sources`` replaced in the
  process), every other step as ``facts --all`` takes it: what the
  statuses cost is the difference from ``facts --all``.  A seventh, a
  reference beside the target, is the same dump joined with ``source_refs``
  as well: the session id, seqs and digest each row of the listing prints
  are in that table, which the target's dump does not read.
* a read at the start of a large transcript (``--scan-mib``, default 256;
  ``--quick`` 32): ``SessionStore.events(sid, 1)`` in-process, whose cost is
  the raw-byte scan for event records, against ``grep -c -F
  '"type":"event"'`` of the same file; the figure is scan throughput / grep
  throughput (higher is better), target >= 0.8.

``--only scan`` runs the scan row alone (no facts store is built), ``--only
facts`` the facts rows alone.

The 1,000,000-fact rows (``--million DIR``: the store built there once,
then ``facts --all`` and ``validate -q`` once each, each against the same
command on the 100,000-fact store run right before and right after it: at
most 12x and 64 MiB) are printed as not measured
without it (building and reading it takes minutes here).  A second event
scan row uses a transcript of English text: the search finds the rarest
byte of ``"event"`` (a ``v``), which ``x`` padding never holds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_line, record, run  # noqa: E402
from bench_facts import build  # noqa: E402

PY = sys.executable
MEMCTL = os.path.join(os.path.dirname(PY), "memctl")


def paired(cases: dict[str, list[str]], runs: int, ok: dict[str, tuple[int, ...]]
           ) -> dict[str, tuple[float, int]]:
    """Each case run once per round, rounds repeated: median seconds, max RSS (KiB)."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    rss: dict[str, int] = {k: 0 for k in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            r = run(argv)
            if r.rc not in ok.get(name, (0,)):
                raise SystemExit(f"{argv} exited {r.rc}")
            times[name].append(r.seconds)
            rss[name] = max(rss[name], r.rss_kib)
    return {k: (statistics.median(v), rss[k]) for k, v in times.items()}


PROSE = ("Move the retry loop into the client and keep the server stateless; ",
         "every value we derive is validated twice before it leaves the service. ",
         "Prefer tabs over spaces, eighty columns, and never vendor a dependency. ",
         "The event log is append-only: we review it weekly and archive it yearly. ")


def big_transcript(path: Path, mib: int, prose: bool = False) -> None:
    """A transcript of ``mib`` MiB: messages, with an undo event every 5,000
    records; each message's text is 200 ``x`` or, with ``prose``, about 200
    bytes of English (a ``v`` every 40 bytes or so, as real text has)."""
    slug = path.parent.parent.name
    sid = path.stem
    with open(path, "wb") as fh:
        fh.write(orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                               "project": slug, "created": "2026-01-01T00:00:00Z"}) + b"\n")
        seq, size, want = 1, 0, mib << 20
        text = "".join(PROSE) * 2
        while size < want:
            body = text[(seq * 37) % 290:][:200] if prose else "x" * 200
            if seq % 5000 == 0:
                line = orjson.dumps({"seq": seq, "type": "event", "event": "undo",
                                     "target": [seq - 2, seq - 1]}) + b"\n"
            else:
                line = orjson.dumps({"seq": seq, "type": "message", "role": "user",
                                     "content": f"{seq} {body}"}) + b"\n"
            fh.write(line)
            size += len(line)
            seq += 1


FLOOR = """
import sqlite3, sys, orjson
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
cur = db.execute("SELECT f.fact_id, f.revision, f.created, f.updated, r.revision, r.text, "
                 "r.created, s.session_id, s.seqs, s.digest FROM facts f "
                 "JOIN revisions r USING (fact_id) LEFT JOIN source_refs s "
                 "ON s.fact_id = r.fact_id AND s.revision = r.revision")
out = sys.stdout.buffer
dumps, loads = orjson.dumps, orjson.loads
while True:
    rows = cur.fetchmany(2000)
    if not rows:
        break
    for fid, rev, created, updated, rrev, text, rcreated, sid, seqs, digest in rows:
        out.write(dumps({"type": "fact", "fact_id": fid, "revision": rev, "text": text,
                         "source_ref": {"session_id": sid, "seqs": loads(seqs), "digest": digest},
                         "created": created, "updated": updated}) + b"\\n")
"""


# The target's dump (facts joined with revisions) with each revision's row of
# source_refs joined as well: the session id, seqs and digest that every row
# of the listing prints come from that table, which the target's dump never
# reads.  A reference for the figures, not a target.
SOURCED_DUMP = ("select * from facts join revisions using (fact_id) "
                "left join source_refs using (fact_id, revision)")


# SQLite's own floor for the listing: the rows ``facts --all`` prints, in its
# order (by fact id), each made a JSON line by SQLite itself (json_object), with
# no check, no status and no transcript read
NO_EVALUATION = """
import sys
from lecode_memctl.core import factview
from lecode_memctl.core.sourceref import EvaluatedStatuses
factview._evaluate_sources = lambda *args, **kwargs: EvaluatedStatuses({})
sys.argv = ["memctl", *sys.argv[1:]]
from lecode_memctl.cli.main import main
main()
"""

SQL_FLOOR = ("SELECT json_object('type', 'fact', 'fact_id', f.fact_id, 'revision', f.revision, "
             "'text', r.text, 'source_ref', json_object('session_id', s.session_id, "
             "'seqs', json(s.seqs), 'digest', s.digest), 'created', f.created, "
             "'updated', f.updated) FROM facts f JOIN revisions r USING (fact_id) "
             "LEFT JOIN source_refs s ON s.fact_id = r.fact_id AND s.revision = r.revision "
             "ORDER BY f.fact_id, r.revision")


SCAN = """
import sys, time
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import NO_EXCLUSIONS, SessionStore
s = SessionStore(store_at(sys.argv[1]), exclusions=NO_EXCLUSIONS)
s.events(sys.argv[2], 1)    # untimed: the code and the page cache warm
best = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    s.events(sys.argv[2], 1)
    best.append(time.perf_counter() - t)
best.sort()
print(best[len(best) // 2])
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", metavar="DIR", default=None)
    ap.add_argument("--scan-mib", type=int, default=None)
    ap.add_argument("--only", choices=("facts", "scan"), default=None,
                    help="run only the facts rows or only the event-scan row")
    ap.add_argument("--million", metavar="DIR", default=None,
                    help="also measure 1,000,000 facts, with the store built (once) in DIR")
    a = ap.parse_args(argv)
    n = a.facts or (10_000 if a.quick else 100_000)
    mib = a.scan_mib or (32 if a.quick else 256)
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-engine-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        print(f"({machine_line()})")
        summary = []
        if a.only != "scan":
            summary.append(facts_rows(root, n, a.runs))
            if a.million:
                summary.append(million_rows(Path(a.million)))
            else:
                record("engine", "facts --all and validate, 1,000,000 facts", None, rss_kib=None,
                       target="<= 12x the 100k time, <= 64 MiB", note="not measured (--million)")
        if a.only != "facts":
            summary.append(scan_row(root, mib, a.runs))
            summary.append(scan_row(root, mib, a.runs, prose=True))
        print("summary: " + "; ".join(summary))
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def facts_rows(root: Path, n: int, runs: int) -> str:
    """``facts --all`` and ``validate -q`` against the sqlite3 dump."""
    store = root / "bench-store"
    if not (store / "facts.sqlite3").exists():
        build(root, n)
    db = store / "facts.sqlite3"
    dump = ["sqlite3", "-json", str(db), "select * from facts join revisions using (fact_id)"]
    base = [MEMCTL, "--store", str(store)]
    got = paired({"dump": dump, "sourced": ["sqlite3", "-json", str(db), SOURCED_DUMP],
                  "facts": base + ["facts", "--all", "--format", "jsonl"],
                  "validate": base + ["validate", "-q"], "floor": [PY, "-c", FLOOR, str(db)],
                  "sqlfloor": ["sqlite3", str(db), SQL_FLOOR],
                  "noeval": [PY, "-c", NO_EVALUATION, *base[1:], "facts", "--all",
                             "--format", "jsonl"]},
                 runs, {"validate": (0, 1)})
    d, f, v, fl, sq = got["dump"], got["facts"], got["validate"], got["floor"], got["sqlfloor"]
    ne, sd = got["noeval"], got["sourced"]
    nf = f"{n:,} facts"
    print(f"sqlite3 -json dump ({nf}):          {d[0]:7.2f} s")
    print(f"the dump with the source_refs:      {sd[0]:7.2f} s  {sd[0] / d[0]:5.1f}x  "
          f"(facts --all {f[0] / sd[0]:.1f}x it, validate -q {v[0] / sd[0]:.1f}x)")
    print(f"floor: CPython rows -> JSON lines:  {fl[0]:7.2f} s  {fl[0] / d[0]:5.1f}x  "
          "(no check, no status, no transcript)")
    print(f"floor: SQLite, id order, as JSON:   {sq[0]:7.2f} s  {sq[0] / d[0]:5.1f}x  "
          "(json_object, ORDER BY fact_id; no check, no status, no transcript)")
    print(f"memctl's listing, no evaluation:    {ne[0]:7.2f} s  {ne[0] / d[0]:5.1f}x  "
          "(facts --all with every status taken as valid)")
    print(f"memctl facts --all --format jsonl:  {f[0]:7.2f} s  {f[0] / d[0]:5.1f}x  "
          f"peak RSS {f[1] / 1024:.1f} MiB")
    print(f"memctl validate -q:                 {v[0]:7.2f} s  {v[0] / d[0]:5.1f}x  "
          f"peak RSS {v[1] / 1024:.1f} MiB")
    B, R = "engine", f"`sqlite3 -json` dump ({nf})"
    record(B, R, d[0], rss_kib=d[1], note="reference")
    record(B, f"floor: the same rows and their sources fetched by CPython's sqlite3, "
           f"written by orjson, no check ({nf})", fl[0], rss_kib=fl[1], reference=R,
           ref_seconds=d[0], note="the language's floor for a listing")
    record(B, f"floor: the listing's rows in id order made JSON by SQLite itself "
           f"(json_object, ORDER BY fact_id), no check ({nf})", sq[0], rss_kib=sq[1],
           reference=R, ref_seconds=d[0], note="SQLite's floor for the listing")
    record(B, f"floor: memctl facts --all with the evaluation left out (every status "
           f"taken as valid) ({nf})", ne[0], rss_kib=ne[1], reference=R, ref_seconds=d[0],
           note="what the listing costs without the statuses")
    RS = f"`sqlite3 -json` dump joined with source_refs ({nf})"
    record(B, RS, sd[0], rss_kib=sd[1], reference=R, ref_seconds=d[0],
           note="reference: the target's dump leaves out the source_refs table, whose "
                "values every listing row prints")
    record(B, f"memctl facts --all --format jsonl ({nf}) against the dump with source_refs",
           f[0], rss_kib=f[1], reference=RS, ref_seconds=sd[0], note="reference, no target")
    record(B, f"memctl validate -q ({nf}) against the dump with source_refs",
           v[0], rss_kib=v[1], reference=RS, ref_seconds=sd[0], note="reference, no target")
    record(B, f"memctl facts --all --format jsonl ({nf})", f[0], rss_kib=f[1], reference=R,
           ref_seconds=d[0], target="<= 4", met=f[0] / d[0] <= 4)
    record(B, f"memctl validate -q ({nf})", v[0], rss_kib=v[1], reference=R,
           ref_seconds=d[0], target="<= 4", met=v[0] / d[0] <= 4)
    FACTS_TIMES.update(facts=f[0], validate=v[0], n=n, store=store)
    return (f"facts --all {f[0] / d[0]:.1f}x, validate -q {v[0] / d[0]:.1f}x the sqlite3 dump "
            f"(a CPython listing's floor: {fl[0] / d[0]:.1f}x; SQLite's, in id order: "
            f"{sq[0] / d[0]:.1f}x; memctl's listing without the evaluation: "
            f"{ne[0] / d[0]:.1f}x)")


FACTS_TIMES: dict[str, Any] = {}


def million_rows(root: Path) -> str:
    """``facts --all`` and ``validate -q`` once each on a store of 1,000,000
    facts (built in ``root`` once: about a minute here, 390 MB of database),
    each against the same command on this run's 100,000-fact store, run
    right before and right after it (the mean of the two: on this shared
    machine a command's time drifts by a quarter within minutes, and the
    100,000-fact rows were taken minutes earlier).  Target: at most 12x,
    peak RSS at most 64 MiB."""
    store = root / "bench-store"
    if not (store / "facts.sqlite3").exists():
        build(root, 1_000_000)
    small = FACTS_TIMES.get("store")
    out = []
    for name, args, ok in (("facts", ["facts", "--all", "--format", "jsonl"], (0,)),
                           ("validate", ["validate", "-q"], (0, 1))):
        argv = [MEMCTL, "--store", str(store), *args]
        around = []
        for i in range(3):
            if i == 1:
                r = run(argv)
                if r.rc not in ok:
                    raise SystemExit(f"{argv} exited {r.rc}")
            elif small is not None:
                s = run([MEMCTL, "--store", str(small), *args])
                if s.rc not in ok:
                    raise SystemExit(f"{args} on {small} exited {s.rc}")
                around.append(s.seconds)
        ref = statistics.mean(around) if around else FACTS_TIMES.get(name)
        ratio = r.seconds / ref if ref else None
        label = "memctl facts --all --format jsonl" if name == "facts" else "memctl validate -q"
        print(f"{label} (1,000,000 facts): {r.seconds:7.2f} s"
              + (f"  {ratio:5.1f}x its {FACTS_TIMES['n']:,}-fact time" if ratio else "")
              + f"  peak RSS {r.rss_kib / 1024:.1f} MiB")
        record("engine", f"{label} (1,000,000 facts)", r.seconds, rss_kib=r.rss_kib,
               reference=(f"the same on {int(FACTS_TIMES.get('n', 0)):,} facts, run right "
                          "before and after" if ref else None),
               ref_seconds=ref, ratio=ratio, target="<= 12x, <= 64 MiB",
               met=None if ratio is None else (ratio <= 12 and r.rss_kib <= 64 * 1024))
        out.append(f"{name} 1M {ratio:.1f}x, {r.rss_kib / 1024:.0f} MiB" if ratio else
                   f"{name} 1M {r.seconds:.1f} s")
    return "; ".join(out)


def scan_row(root: Path, mib: int, runs: int, prose: bool = False) -> str:
    """The event scan from the start of a ``mib`` MiB transcript against
    ``grep -c -F``, paired: each round runs grep once and the scan once (in a
    fresh process, after one untimed scan), so both share the round's load.
    ``prose``: messages of English text rather than ``x`` padding (the search
    looks for the rarest byte of ``"event"``, a ``v``: padding has none)."""
    sdir = root / "scan-store" / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    name = "prose" if prose else "big"
    big = sdir / f"{name}.jsonl"
    if not big.exists() or big.stat().st_size < mib << 20:
        big_transcript(big, mib, prose)
    # (stdout a pipe: GNU grep stops at the first match when it writes to /dev/null)
    g = ["grep", "-c", "-F", '"type":"event"', str(big)]
    run(g, stdout=subprocess.PIPE)    # the file in the page cache, as for the scan
    greps, scans = [], []
    for _ in range(runs):
        greps.append(run(g, stdout=subprocess.PIPE).seconds)
        out = subprocess.run([PY, "-c", SCAN, str(root / "scan-store"), name, "1"],
                             check=True, capture_output=True, text=True)
        scans.append(float(out.stdout))
    grep_s, scan = statistics.median(greps), statistics.median(scans)
    ratio = grep_s / scan
    what = f"{mib} MiB transcript of {'English text' if prose else 'x padding'}"
    print(f"read at the start of a {what}: events scan {scan:.3f} s, "
          f"grep -c -F {grep_s:.3f} s: throughput {ratio:.2f}x grep "
          f"(rounds: {' '.join(f'{x / y:.2f}' for x, y in zip(greps, scans, strict=True))})")
    record("engine", f"event scan from the start of a {what} (in-process)", scan,
           rss_kib=None, reference="`grep -c -F '\"type\":\"event\"'`, throughput",
           ref_seconds=grep_s, ratio=ratio, target=">= 0.8", met=ratio >= 0.8)
    return f"event scan {ratio:.2f}x grep"


if __name__ == "__main__":
    sys.exit(main())
