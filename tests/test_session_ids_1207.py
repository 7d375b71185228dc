"""One reading of a stored session id that is not text (2026-12-07).

``exclusions`` rows and a forget's own evidence rows were read by two near
twins: a session id stored as an INTEGER (a table that lost its TEXT
affinity) named the session of its digits to the exclusions reader, but
no session to forget, which then said the revision's evidence was
``unexcluded`` and left it visible.  A forget reads fail-closed (hide more,
never less): both now read it as its digits, so its positions are excluded.
"""

from __future__ import annotations

import sqlite3

import orjson
import pytest

from lecode_memctl.core.facts import exclusion_position

from .builders import store_sql
from .conftest import run_cli
from .test_forget_1207f import _own_damaged_store
from .test_spec_1207s import _exclusions


def _source_refs_session_id_as(affinity: str) -> tuple[str, ...]:
    """SQL rebuilding source_refs with its session id column declared
    ``affinity`` ('' for none, so that an integer stays one)."""
    return ("PRAGMA foreign_keys = OFF",
            f"CREATE TABLE s2 (fact_id TEXT, revision INTEGER, session_id {affinity}, "
            "seqs TEXT, digest TEXT)",
            "INSERT INTO s2 SELECT * FROM source_refs", "DROP TABLE source_refs",
            "ALTER TABLE s2 RENAME TO source_refs")


@pytest.mark.parametrize("table", ["source_refs", "provenance"])
def test_an_integer_session_id_is_excluded_by_forget(tmp_path, table):
    store, ids = _own_damaged_store(tmp_path, "null")
    c1 = ids["c1"]
    # the table rebuilt without the session id's TEXT affinity, so that an
    # integer stays one
    store_sql(store, *_source_refs_session_id_as(""),
              "CREATE TABLE p2 (fact_id TEXT, revision INTEGER, session_id, seq INTEGER)",
              "INSERT INTO p2 SELECT * FROM provenance", "DROP TABLE provenance",
              "ALTER TABLE p2 RENAME TO provenance")
    if table == "source_refs":
        store_sql(store, f"UPDATE source_refs SET session_id = 77, seqs = '[1]' "
                         f"WHERE fact_id = '{c1}'")
    else:
        store_sql(store, f"DELETE FROM source_refs WHERE fact_id = '{c1}'",
                  f"INSERT INTO provenance VALUES ('{c1}', 1, 77, 1)")
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        kinds = {k for (k,) in db.execute(
            f"SELECT typeof(session_id) FROM {table} WHERE fact_id = ?", (c1,))}
    finally:
        db.close()
    assert kinds == {"integer"}     # (the integer is stored as one)
    base = ("--store", str(store), "--no-state")
    dry = run_cli(*base, "forget", c1, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)
    # excluded as its digits, and said (a code review: the text it was
    # stored from may have named another session, 077 say)
    why = ("the session id is stored as an integer" if table == "source_refs"
           else "a legacy provenance row's session id is stored as an integer")
    assert [u["revision"] for u in plan["unexcluded"]] == [1], plan
    assert plan["unexcluded"][0]["reason"].startswith(why + ": its digits, '77', excluded")
    assert {"session_id": "77", "seq": 1} in plan["exclusions"], plan
    r = run_cli(*base, "forget", c1, "--yes", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert orjson.loads(r.stdout)["unexcluded"] == plan["unexcluded"]
    assert ("77", 1) in _exclusions(store)


def test_an_integer_affinity_column_that_lost_leading_zeros_is_said(tmp_path):
    """A code review: a ``session_id INTEGER`` column stores the text '007'
    as 7; the forget excludes '7' (fail-closed) and names the revision in
    ``unexcluded``, since '007''s evidence may stay visible."""
    store, ids = _own_damaged_store(tmp_path, "null")
    c1 = ids["c1"]
    store_sql(store, *_source_refs_session_id_as("INTEGER"),
              f"UPDATE source_refs SET session_id = '007', seqs = '[1]' WHERE fact_id = '{c1}'")
    dry = run_cli("--store", str(store), "--no-state", "forget", c1, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)
    assert {"session_id": "7", "seq": 1} in plan["exclusions"], plan
    assert len(plan["unexcluded"]) == 1 and "'7'" in plan["unexcluded"][0]["reason"], plan


def test_the_two_readers_agree():
    from lecode_memctl.core.facts import _readable_session_id

    for sid in ("w", b"w", 77, b"\xff", None, 1.5, -3):
        got = exclusion_position(sid, 1)
        assert (got[0] if got else None) == _readable_session_id(sid), sid
