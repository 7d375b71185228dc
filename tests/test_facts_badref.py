"""A stored source reference that does not parse (a span over 200 positions, a bad
digest, a bad id) is that fact's problem: its status is hidden / invalid_ref; the
other facts still list, and validate's tally agrees with its finding."""

from __future__ import annotations

import sqlite3

import orjson
import pytest

from lecode_memctl.core.audit import validate_store
from lecode_memctl.core.layout import store_at

from .builders import copy_demo
from .conftest import run_cli


@pytest.fixture
def template(demo_template):
    """conftest's demo (shared: ``store`` works on a copy)."""
    return demo_template


@pytest.fixture
def store(template, tmp_path):
    s = store_at(copy_demo(template, tmp_path / "demo"))
    db = sqlite3.connect(s.facts_db)
    with db:
        db.execute("UPDATE source_refs SET seqs = ? WHERE fact_id = ?",
                   ("[1, 500]", template.facts["verified"]))
    db.close()
    return s


def test_listing_survives_and_reports_the_bad_ref(store, template):
    r = run_cli("--store", str(store.path), "facts", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    by_id = {f["fact_id"]: f for f in doc["facts"]}
    bad = by_id[template.facts["verified"]]
    assert (bad["status"], bad["reason"]) == ("hidden", "invalid_ref")
    assert by_id[template.facts["preference"]]["status"] == "valid"


def test_recall_of_the_bad_fact_is_a_status_not_an_error(store, template):
    r = run_cli("--store", str(store.path), "recall", template.facts["verified"])
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert (doc["status"], doc["reason"]) == ("hidden", "invalid_ref")
    assert "text" not in doc or doc["text"] is None


def test_context_leaves_the_bad_fact_out(store, template):
    r = run_cli("--store", str(store.path), "context", "--explain")
    assert r.exit_code == 0, r.stderr
    assert template.facts["preference"] in r.stdout
    assert f"omitted {template.facts['verified']}" in r.stdout


def test_validate_tally_agrees_with_its_finding(store, template):
    findings, summary = validate_store(store)
    hidden = [f for f in findings if f.code == "fact.hidden" and f.fact_id == template.facts["verified"]]
    assert [f.reason for f in hidden] == ["invalid_ref"]
    tally = summary.to_json(False).get("facts")
    assert tally is not None and tally.get("hidden") == 1 and tally.get("unverified", 0) == 0, tally
