"""A fact whose revision has a SourceRef and legacy provenance is suppressed
from recall when its provenance overlaps an exclusion, as when its
SourceRef does (the reference design: forget excludes "every source
position in every revision's provenance and attached source ref", and
"overlapping facts are retained administratively but suppressed from
recall"; docs/FORMAT.md: "A revision whose evidence (SourceRef or legacy
provenance) overlaps an exclusion is `fact.suppressed`").

Before 2026-12-07 only ``validate`` said so: ``recall`` gave such a fact
``valid`` with its text, ``facts`` listed it valid, ``context`` injected it
into the agent's prompt, and ``forget --dry-run`` of the fact whose forget
caused it listed no status change."""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.facts import FactStore, Provenance
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import SLUG
from .conftest import run_cli


@pytest.fixture
def shared(tmp_path):
    """Fact A: SourceRef s1:1 and legacy provenance s1:2.  Fact B: SourceRef
    s1:2.  Fact C: SourceRef s1:3 only (never touched)."""
    path = tmp_path / "config" / "memory" / SLUG
    store = store_at(path)
    ss = SessionStore(store)
    w = ss.create("s1")
    try:
        for text in ("We use tabs.", "The CI runs on Fridays.", "Deploys are manual."):
            w.append_message("user", text)
    finally:
        w.close()
    fs = FactStore(store.facts_db)
    try:
        a = fs.add("We use tabs.", provenance=[Provenance("s1", (2,))],
                   ref=ss.source_snapshot("s1", 1, 1).ref).fact.fact_id
        b = fs.add("The CI runs on Fridays.", ref=ss.source_snapshot("s1", 2, 2).ref).fact.fact_id
        c = fs.add("Deploys are manual.", ref=ss.source_snapshot("s1", 3, 3).ref).fact.fact_id
    finally:
        fs.close()
    return path, a, b, c


def cli(path, *args):
    return run_cli("--store", str(path), "--no-state", *args)


def test_the_forget_preview_names_the_fact_its_provenance_suppresses(shared):
    path, a, b, _c = shared
    r = cli(path, "forget", b, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    changes = orjson.loads(r.stdout)["status_changes"]
    assert [(ch["fact_id"], ch["new_status"], ch["new_reason"]) for ch in changes] == \
        [(a, "hidden", "excluded")], changes


def test_every_reader_suppresses_a_fact_whose_provenance_is_excluded(shared):
    path, a, b, c = shared
    assert cli(path, "forget", b, "--yes").exit_code == 0
    r = cli(path, "recall", a, "--json")
    doc = orjson.loads(r.stdout)
    assert (doc["status"], doc["reason"]) == ("hidden", "excluded"), doc
    assert "text" not in doc
    listed = cli(path, "facts", "--format", "jsonl").stdout.splitlines()
    rows = {x["fact_id"]: x for x in map(orjson.loads, listed)}
    assert (rows[a]["status"], rows[a]["reason"]) == ("hidden", "excluded")
    assert rows[c]["status"] == "valid"
    context = cli(path, "context").stdout
    assert a not in context and c in context
    hist = orjson.loads(cli(path, "history", a, "--json").stdout)
    assert (hist["status"], hist["reason"]) == ("hidden", "excluded"), hist
    # validate: suppressed, and the fact counted with the status the readers give
    v = [orjson.loads(x) for x in cli(path, "validate", "--format", "jsonl").stdout.splitlines()]
    codes = [(f["code"], f.get("fact_id")) for f in v if f["type"] == "finding"]
    assert ("fact.suppressed", a) in codes, codes
    summary = next(f for f in v if f["type"] == "summary")
    assert summary["facts"].get("hidden") == 1, summary


def test_a_provenance_elsewhere_changes_nothing(shared):
    path, a, _b, c = shared
    assert cli(path, "forget", c, "--yes").exit_code == 0
    doc = orjson.loads(cli(path, "recall", a, "--json").stdout)
    assert doc["status"] == "valid", doc
