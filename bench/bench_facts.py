#!/usr/bin/env python3
"""``memctl facts`` on a 100,000-fact store, against ``memctl --version``.

    python bench/bench_facts.py [--facts N] [--runs N] [--quick] [--keep DIR]

Builds a store (once per run, in a temporary directory) with N facts
(default 100,000; ``--quick`` 10,000), each remembered from one user message
of one of 50 hand-written session transcripts, so every fact validates.  The
database is created through FactStore (schema, WAL) and filled in bulk with
the same rows FactStore writes.  Then measures, as real processes (median of
``--runs``, default 5):

* ``memctl --version`` (the start-up floor) and ``memctl where`` (a command
  that loads the whole command tree and reads no database);
* ``memctl facts`` (first page, 20 facts, validated) and ``memctl facts --json --limit 20``;
* ``memctl facts --all --format jsonl`` to /dev/null (one run);
* the read-only open itself, in-process (in a fresh subprocess): immutable
  open of a cleanly closed database against the private snapshot taken while
  a live writer holds 1,000 uncheckpointed facts in the ``-wal``;
* ``memctl facts`` while that live writer holds the ``-wal``.

Every case also reports its peak RSS: the process's own (GNU time, see
``_common.py``), or for the in-process opens the VmHWM of the fresh
subprocess that timed them (interpreter and imports included).

Prints one line per case and a ``summary:`` line.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_line, median_run, record, rss_method  # noqa: E402

from lecode_memctl.core.facts import FactStore, fact_id_for  # noqa: E402
from lecode_memctl.core.layout import store_at  # noqa: E402
from lecode_memctl.core.sourceref import SourceRef, canonical_digest  # noqa: E402

PY = sys.executable
MEMCTL = os.path.join(os.path.dirname(PY), "memctl")
SESSIONS = 50


def build(root: Path, n: int) -> Path:
    store = store_at(root / "bench-store")
    sdir = store.sessions_dir
    sdir.mkdir(parents=True)
    per = -(-n // SESSIONS)
    rows = []
    for s in range(SESSIONS):
        sid = f"bench-{s:03d}"
        lines = [{"seq": 0, "type": "session", "format": 1, "session_id": sid,
                  "project": store.slug, "created": "2026-01-01T00:00:00Z"}]
        for i in range(1, per + 1):
            k = s * per + i - 1
            if k >= n:
                break
            rec: dict[str, Any] = {"seq": i, "type": "message", "role": "user",
                                   "content": f"Project convention {k}: use tabs, width {k % 8 + 1}."}
            lines.append(rec)
            ref = SourceRef(sid, (i,), canonical_digest([rec]))
            rows.append((rec["content"], ref))
        with open(sdir / f"{sid}.jsonl", "wb") as fh:
            fh.write(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    with FactStore(store.facts_db) as fs:
        fs.add("schema bootstrap")
        fid0 = fact_id_for("schema bootstrap", None)
        fs.forget(fid0)
        db = fs._conn
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        now = "2026-01-01T00:00:00.000Z"
        for text, ref in rows:
            fid = fact_id_for(text, ref)
            db.execute("INSERT INTO facts VALUES (?, 1, ?, ?)", (fid, now, now))
            db.execute("INSERT INTO revisions VALUES (?, 1, ?, ?)", (fid, text, now))
            db.execute("INSERT INTO source_refs VALUES (?, 1, ?, ?, ?)",
                       (fid, ref.session_id, orjson.dumps(list(ref.seqs)).decode(), ref.digest))
        db.execute("COMMIT")
        # the bootstrap forget left generation 1; keep the bench at 0
        db.execute("UPDATE meta SET value = 0 WHERE key = 'generation'")
        db.execute("DELETE FROM forgotten")
    return store.path


def two_sizes(doc: str, argv: list[str] | None, prefix: str
              ) -> tuple[argparse.Namespace, int, int, Path]:
    """The command line of a benchmark of two store sizes (``--quick``,
    ``--keep DIR``, ``--runs N``): its arguments, the small and large
    sizes (10,000 and 100,000 facts; ``--quick`` 2,000 and 20,000), and
    where the stores are (``--keep``'s directory, or a new temporary one
    named ``prefix``...)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", metavar="DIR", default=None)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    small_n, large_n = (2_000, 20_000) if a.quick else (10_000, 100_000)
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix=prefix))
    return a, small_n, large_n, root


def stores_in(root: Path, sizes: tuple[int, ...]) -> dict[int, Path]:
    """A store of each of ``sizes`` facts (:func:`build`), in ``root/N``,
    built there unless it already is (``--keep DIR`` of the benchmarks
    that use two sizes): {N: the store's path}."""
    stores = {}
    for n in sizes:
        where = root / str(n)
        if not (where / "bench-store" / "facts.sqlite3").exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
            build(where, n)
        stores[n] = where / "bench-store"
    return stores


def timed(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, int]:
    """Median wall time, and the child's own peak RSS in KiB (largest over the runs)."""
    return median_run(argv, runs, env=env)


LIVE = textwrap.dedent("""
    import sys
    from lecode_memctl.core.facts import FactStore
    fs = FactStore(sys.argv[1], on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    db = fs._conn
    db.execute("BEGIN IMMEDIATE")
    for i in range(1000):
        db.execute("INSERT INTO facts VALUES (?, 1, 'x', 'x')", (f"{i:016x}",))
        db.execute("INSERT INTO revisions VALUES (?, 1, ?, 'x')", (f"{i:016x}", f"live {i}"))
    db.execute("COMMIT")
    print("ready", flush=True)
    sys.stdin.read()
    fs.close()
""")


OPEN = textwrap.dedent("""
    import json, statistics, sys, time
    sys.path.insert(0, sys.argv[3])
    from lecode_memctl.core.facts import FactStore
    from _common import vmhwm_kib
    times = []
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        fs = FactStore.open_readonly(sys.argv[1])
        fs.list_facts(0, 20)
        fs.close()
        times.append(time.perf_counter() - t)
    print(json.dumps({"seconds": statistics.median(times), "rss_kib": vmhwm_kib()}))
""")


def in_process_open(db: Path, runs: int) -> tuple[float, int]:
    """Median of the read-only open + 20 rows, timed in a fresh subprocess; and
    that subprocess's peak RSS (KiB)."""
    out = subprocess.run([PY, "-c", OPEN, str(db), str(runs), str(Path(__file__).resolve().parent)],
                         check=True, capture_output=True, text=True)
    r = orjson.loads(out.stdout)
    return r["seconds"], r["rss_kib"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", metavar="DIR", default=None, help="build the store here and keep it")
    a = ap.parse_args(argv)
    n = a.facts or (10_000 if a.quick else 100_000)
    runs = 3 if a.quick else a.runs
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-facts-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        store = build(root, n)
        build_s = time.perf_counter() - t
        db = store / "facts.sqlite3"
        env = dict(os.environ)
        print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
              f"{platform.system()} {platform.release()}, Python {platform.python_version()}")
        print(f"date: {datetime.now(UTC).isoformat(timespec='seconds')}")
        print(f"store: {n} facts, {SESSIONS} sessions, facts.sqlite3 {db.stat().st_size} bytes "
              f"(built in {build_s:.1f} s)")
        base = [MEMCTL, "--store", str(store)]
        version, version_rss = timed([MEMCTL, "--version"], runs, env)
        where, where_rss = timed(base + ["where"], runs, env)
        page, page_rss = timed(base + ["facts"], runs, env)
        page_json, page_json_rss = timed(base + ["facts", "--json", "--limit", "20"], runs, env)
        all_s, rss = timed(base + ["facts", "--all", "--format", "jsonl"], 1, env)
        immut, immut_rss = in_process_open(db, runs)
        proc = subprocess.Popen([PY, "-c", LIVE, str(db)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        try:
            wal = Path(str(db) + "-wal").stat().st_size
            snap, snap_rss = in_process_open(db, runs)
            page_live, page_live_rss = timed(base + ["facts"], runs, env)
        finally:
            proc.communicate(b"", timeout=60)
        mib = lambda k: f"peak RSS {k / 1024:6.1f} MiB"  # noqa: E731
        print(f"(medians of {runs} runs; {machine_line()})")
        print(f"(peak RSS: {rss_method()})")
        print(f"memctl --version:                    {version * 1000:8.1f} ms  {mib(version_rss)}")
        print(f"memctl where (command-tree floor):   {where * 1000:8.1f} ms  {mib(where_rss)}")
        print(f"memctl facts (first page):           {page * 1000:8.1f} ms  {mib(page_rss)} "
              f"({page / version:.1f}x --version)")
        print(f"memctl facts --json --limit 20:      {page_json * 1000:8.1f} ms  {mib(page_json_rss)}")
        print(f"memctl facts --all --format jsonl:   {all_s * 1000:8.1f} ms  {mib(rss)}")
        print(f"read-only open + 20 rows, immutable: {immut * 1000:8.1f} ms  {mib(immut_rss)} "
              f"(in-process, fresh subprocess)")
        print(f"read-only open + 20 rows, snapshot:  {snap * 1000:8.1f} ms  {mib(snap_rss)} "
              f"(in-process; db {db.stat().st_size} bytes + wal {wal} bytes copied)")
        print(f"memctl facts with a live writer:     {page_live * 1000:8.1f} ms  {mib(page_live_rss)}")
        B, V = "facts", "memctl --version"
        nf = f"{n:,} facts"
        record(B, "memctl --version (facts bench)", version, rss_kib=version_rss, note="reference")
        record(B, f"memctl where ({nf} store, no database read)", where, rss_kib=where_rss,
               reference=V, ref_seconds=version, note="context")
        record(B, f"memctl facts, first page ({nf})", page, rss_kib=page_rss,
               reference=V, ref_seconds=version)
        record(B, f"memctl facts --json --limit 20 ({nf})", page_json, rss_kib=page_json_rss,
               reference=V, ref_seconds=version)
        record(B, f"memctl facts --all --format jsonl ({nf})", all_s, rss_kib=rss,
               reference=V, ref_seconds=version)
        record(B, "read-only open + 20 rows, immutable (in-process)", immut, rss_kib=immut_rss,
               rss_how="fresh subprocess VmHWM")
        record(B, "read-only open + 20 rows, live -wal snapshot (in-process)", snap,
               rss_kib=snap_rss, rss_how="fresh subprocess VmHWM",
               reference="immutable open", ref_seconds=immut)
        record(B, f"memctl facts, first page, live writer ({nf})", page_live,
               rss_kib=page_live_rss, reference=V, ref_seconds=version)
        print(f"summary: {n} facts: facts page {page * 1000:.0f} ms vs --version "
              f"{version * 1000:.0f} ms; snapshot open {snap * 1000:.0f} ms vs immutable "
              f"{immut * 1000:.0f} ms; --all {all_s:.1f} s")
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
