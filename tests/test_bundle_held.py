"""Evidence bundles of large stores (issue 13): ``export`` holds the fact
rows of its manifest in a temporary file outside the store
(``bundle.HeldFactRows``), and writes the manifest from there
(``bundle.manifest_bytes``), so that its memory does not follow the number
of facts; the manifest's bytes are the canonical form they always were."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import bundle
from lecode_memctl.core.bundle import HeldFactRows, canonical, manifest_bytes

from .builders import copy_demo
from .conftest import run_cli, tree_hash
from .test_validate_json_held import child_peak_kib, filling_temporary_files


def sourced_facts(store: Path, n: int) -> None:
    """``n`` more facts (the first ones in id order), each citing what one
    of the demo's valid facts cites: valid facts, and no finding."""
    listed = orjson.loads(run_cli("--store", str(store), "--no-state", "facts", "--all",
                                  "--json").stdout)
    ref = next(r["source_ref"] for r in listed["facts"] if r["status"] == "valid")
    sid, seqs, digest = ref["session_id"], orjson.dumps(ref["seqs"]).decode(), ref["digest"]
    db = sqlite3.connect(store / "facts.sqlite3")
    now = "2026-01-01T00:00:00.000Z"
    ids = [f"{i:016x}" for i in range(n)]
    db.executemany("INSERT INTO facts VALUES (?, 1, ?, ?)", ((i, now, now) for i in ids))
    db.executemany("INSERT INTO revisions VALUES (?, 1, ?, ?)",
                   ((i, f"a fact with a source, number {k}", now) for k, i in enumerate(ids)))
    db.executemany("INSERT INTO source_refs (fact_id, revision, session_id, seqs, digest) "
                   "VALUES (?, 1, ?, ?, ?)", ((i, sid, seqs, digest) for i in ids))
    db.commit()
    db.close()


def test_export_does_not_follow_the_facts(demo_template, tmp_path):
    """At 6,000 and 24,000 facts (before: 23 MiB apart, now 4); the bundles verify."""
    peaks = []
    for n in (6000, 24000):
        store = copy_demo(demo_template, tmp_path / f"demo{n}")
        sourced_facts(store, n)
        out = tmp_path / f"b{n}.tar"
        peak, _ = child_peak_kib(store, "export", "--output", str(out))
        peaks.append(peak)
        r = run_cli("verify", str(out), "--json")
        doc = orjson.loads(r.stdout)
        assert r.exit_code == 0, doc["problems"]
        assert len(doc["facts"]) > n
        assert {f["status"] for f in doc["facts"][:n]} == {"valid"}
    assert peaks[1] - peaks[0] < 10 << 10, peaks


def test_export_json_lists_every_row_from_the_file(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "demo")
    sourced_facts(store, 3000)
    r = run_cli("--store", str(store), "export", "-o", str(tmp_path / "b.tar"), "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    listed = orjson.loads(run_cli("--store", str(store), "facts", "--all", "--json").stdout)
    assert doc["facts"] == [{k: row[k] for k in bundle.FACT_FIELDS} for row in listed["facts"]]
    assert list(doc)[-2:] == ["facts", "facts_error"] and doc["facts_error"] is None


def test_a_full_temporary_directory_fails_the_export(demo_template, tmp_path, monkeypatch):
    """The rows' file takes no more: exit 7, no bundle, nothing left behind,
    the store unchanged (not a database error recorded in the manifest)."""
    store = copy_demo(demo_template, tmp_path / "demo")
    sourced_facts(store, 200)
    before = tree_hash(store)
    monkeypatch.setattr(bundle, "CHUNK", 4096)
    closed = filling_temporary_files(monkeypatch, left=5000)
    out = tmp_path / "b.tar"
    r = run_cli("--store", str(store), "export", "--output", str(out))
    assert r.exit_code == 7, (r.exit_code, r.stderr)
    assert "cannot hold the fact rows in a temporary file: No space left on device" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert closed and not out.exists() and list(tmp_path.glob("b.tar*")) == []
    assert tree_hash(store) == before


_ROW = st.fixed_dictionaries({
    "fact_id": st.text(max_size=20), "revision": st.integers(-3, 10**12),
    "status": st.sampled_from(["valid", "stale", "hidden", "missing", "unverified"]),
    "reason": st.none() | st.text(max_size=30), "about_revision": st.none() | st.integers(1, 9),
    "source_ref": st.none() | st.fixed_dictionaries({
        "session_id": st.text(max_size=12), "seqs": st.lists(st.integers(0, 10**9), max_size=5),
        "digest": st.text(max_size=64)})})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_ROW, max_size=40), note=st.text(max_size=40), on_disk=st.booleans(),
       chunk=st.sampled_from([64, 1 << 20]))
def test_the_manifest_bytes_are_its_canonical_form(tmp_path, monkeypatch, rows, note, on_disk,
                                                   chunk):
    """Rows of any text (commas, brackets, newlines, quotes, the marker's
    own shape), on disk or in memory, read back a MiB or 64 bytes at a
    time: the pieces are ``canonical`` of the document with the rows as a
    list, and iterating gives the rows back."""
    monkeypatch.setattr(bundle, "CHUNK", chunk)
    held = HeldFactRows(tmp_path if on_disk else None)
    try:
        for row in rows:
            held.add(row)
        doc = {"format": "memctl-bundle", "database": {"note": note},
               "facts": {"rows": held, "error": None},
               "validate": {"findings_list": [{"message": '"memctl-fact-rows-' + note}]}}
        want = canonical({**doc, "facts": {"rows": rows, "error": None}})
        assert b"".join(manifest_bytes(doc)) == want
        assert list(held) == rows and len(held) == len(rows)
        assert list(held) == rows       # (as often as asked)
    finally:
        held.close()


@pytest.mark.parametrize("on_disk", [True, False])
def test_no_rows_is_an_empty_array(tmp_path, on_disk):
    held = HeldFactRows(tmp_path if on_disk else None)
    doc = {"facts": {"rows": held, "error": None}}
    assert b"".join(manifest_bytes(doc)) == b'{"facts":{"error":null,"rows":[]}}'
    assert list(held) == [] and not held
    held.close()
