"""Exclusion rows that a writer other than the core left (a review of
2026-12-05): a session id stored as a BLOB, a position stored as text or as
a real number.  Before the fix every reader compared them with the TEXT id
and the INTEGER position of a transcript, matched nothing, and so let the
damage un-forget evidence: ``facts`` said valid, ``read`` showed the
message, ``validate --deep`` was silent.

Now the one exclusion reader (``FactStore``) reads them fail-closed -- a
BLOB as its bytes decoded (as a BLOB fact id is read), a position written
as decimal digits or as an integral real as that number -- so every command
hides what they name, exactly as for the well-formed row; and ``validate``
reports each such row (``db.malformed_exclusion``)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.facts import FactStore

from .builders import copy_demo, store_sql
from .conftest import run_cli, tree_hash

VERIFIED = "c283ab7d8ed884e4"    # demo 'verified' fact: evidence demo-alpha:2-4

# the exclusions table rebuilt without column types: SQLite then keeps '3'
# as text (an INTEGER column would convert it)
UNTYPED = ("CREATE TABLE e2 (session_id, seq, generation)",
           "INSERT INTO e2 SELECT * FROM exclusions", "DROP TABLE exclusions",
           "ALTER TABLE e2 RENAME TO exclusions")

CASES = {
    "blob_session": ("INSERT INTO exclusions VALUES (CAST('demo-alpha' AS BLOB), 3, 1)",),
    "text_seq": (*UNTYPED, "INSERT INTO exclusions VALUES ('demo-alpha', '3', 1)"),
    "blob_session_text_seq": (*UNTYPED,
                              "INSERT INTO exclusions VALUES (CAST('demo-alpha' AS BLOB), '3', 1)"),
    "real_seq": (*UNTYPED, "INSERT INTO exclusions VALUES ('demo-alpha', 3.0, 1)"),
}
WELL_FORMED = ("INSERT INTO exclusions VALUES ('demo-alpha', 3, 1)",)


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _answers(store: Path) -> dict[str, object]:
    base = ("--store", str(store), "--no-state")
    listed = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert listed.exit_code == 0, listed.stderr
    rows = [orjson.loads(line) for line in listed.stdout.splitlines()]
    verified = [(r["status"], r["reason"]) for r in rows if r["fact_id"] == VERIFIED]
    read = run_cli(*base, "read", "demo-alpha", "3", "3", "--json")
    fs = FactStore.open_readonly(store / "facts.sqlite3")
    try:
        seqs = sorted(fs.excluded_seqs("demo-alpha"))
        by_session = sorted(fs.exclusions_by_session().get("demo-alpha", ()))
        one = fs.is_excluded("demo-alpha", 3)
    finally:
        fs.close()
    audit = run_cli(*base, "validate", "--deep", "--json")
    codes = sorted(f["code"] for f in orjson.loads(audit.stdout)["findings"]
                   if f["code"] != "db.malformed_exclusion")
    return {"verified": verified, "read_exit": read.exit_code, "read_hidden": "excluded" in read.stdout,
            "excluded_seqs": seqs, "by_session": by_session, "is_excluded": one,
            "validate_codes": codes}


@pytest.fixture
def expected(demo_template, tmp_path):
    """What every command says with the well-formed row."""
    store = copy_demo(demo_template, tmp_path / "good")
    store_sql(store, *WELL_FORMED)
    got = _answers(store)
    assert got["verified"] == [("hidden", "excluded")]
    assert got["read_exit"] == 4 and got["read_hidden"]
    assert 3 in got["excluded_seqs"]
    return got


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_exclusion_still_hides_what_it_names(demo, expected, case):
    store_sql(demo, *CASES[case])
    before = tree_hash(demo)
    assert _answers(demo) == expected
    assert tree_hash(demo) == before


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_reports_the_damaged_exclusion_row(demo, case):
    store_sql(demo, *CASES[case])
    r = run_cli("--store", str(demo), "--no-state", "validate", "--json")
    assert r.exit_code == 1
    found = [f for f in orjson.loads(r.stdout)["findings"] if f["code"] == "db.malformed_exclusion"]
    assert len(found) == 1, found
    assert found[0]["severity"] == "error" and found[0]["file"] == "facts.sqlite3"


@pytest.mark.parametrize("row", ["(CAST(x'ff' AS BLOB), 3, 1)", "(NULL, 3, 1)", "('demo-alpha', 'x', 1)",
                                 "('demo-alpha', -2, 1)", "('demo-alpha', 2.5, 1)"])
def test_a_row_that_names_no_position_is_reported_and_hides_nothing_else(demo, row):
    store_sql(demo, *UNTYPED, f"INSERT INTO exclusions VALUES {row}")
    base = ("--store", str(demo), "--no-state")
    r = run_cli(*base, "validate", "--json")
    assert r.exit_code == 1
    assert [f["code"] for f in orjson.loads(r.stdout)["findings"]].count("db.malformed_exclusion") == 1
    listed = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert listed.exit_code == 0, listed.stderr
    assert run_cli(*base, "read", "demo-alpha", "3", "3").exit_code == 0


def test_a_writer_refuses_evidence_a_damaged_row_excludes(demo):
    """Exclusions are authoritative for the writers too: ``add`` refuses
    evidence that a BLOB-keyed exclusion names (exit 4), in its transaction."""
    from lecode_memctl.core.errors import Conflict
    from lecode_memctl.core.sourceref import SourceRef

    store_sql(demo, *CASES["blob_session"])
    fs = FactStore(demo / "facts.sqlite3")
    try:
        with pytest.raises(Conflict, match="demo-alpha:3 is excluded"):
            fs.add("a text", ref=SourceRef("demo-alpha", (3,), "a" * 64))
    finally:
        fs.close()
