"""Two findings of a code review of the revision-gap fix (2026-12-07).

1. ``correct`` of a fact with a revision row beyond its current revision
   said it stays invalid and pointed at ``--yes``; ``--yes`` then exited 5,
   "facts database unreadable: UNIQUE constraint failed": the revision it
   appends already has a row.  Now a conflict (exit 4), one line, with or
   without ``--yes``, nothing written.
2. A revision stored as no integer inside 1..current (rows 1, 2.5, 3 of a
   fact at revision 3) hid the fact in every reader, but ``validate``
   reported nothing for it (its gap test took count 3 = max 3).  Now
   ``db.revision_gap``, as for any other such fact.
"""

from __future__ import annotations

import orjson

from .builders import store_sql
from .conftest import run_cli, tree_hash
from .test_correct_forget_1207r import PREF, _views, demo  # noqa: F401 - the fixture


def test_correct_of_a_fact_with_a_row_beyond_its_current_revision_is_a_conflict(demo):  # noqa: F811
    store_sql(demo, f"UPDATE facts SET revision = 1 WHERE fact_id = '{PREF}'")
    base = ("--store", str(demo), "--no-state")
    before = tree_hash(demo)
    argv = (*base, "correct", PREF, "1", "demo-alpha:14", "Four spaces.")
    for extra in ((), ("--yes",), ("--yes", "--json")):
        r = run_cli(*argv, *extra)
        assert r.exit_code == 4, (extra, r.exit_code, r.stdout, r.stderr)
        if "--json" in extra:
            assert orjson.loads(r.stdout)["error"]["code"] == "conflict"
        else:
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "revision 2" in lines[0], lines
            assert "unreadable" not in lines[0] and "UNIQUE" not in lines[0], lines
        assert tree_hash(demo) == before


def test_a_revision_stored_as_no_integer_inside_the_run_is_a_revision_gap(demo):  # noqa: F811
    # rows 1, 2.5 and 3: revision 3 a copy of 2, revision 2 then stored as 2.5
    store_sql(demo,
              "INSERT INTO revisions (fact_id, revision, text, created) SELECT fact_id, 3, "
              f"text, created FROM revisions WHERE fact_id = '{PREF}' AND revision = 2",
              "INSERT INTO source_refs (fact_id, revision, session_id, seqs, digest) SELECT "
              "fact_id, 3, session_id, seqs, digest FROM source_refs "
              f"WHERE fact_id = '{PREF}' AND revision = 2",
              "PRAGMA foreign_keys = OFF",
              f"UPDATE source_refs SET revision = 2.5 WHERE fact_id = '{PREF}' AND revision = 2",
              f"UPDATE revisions SET revision = 2.5 WHERE fact_id = '{PREF}' AND revision = 2",
              f"UPDATE facts SET revision = 3 WHERE fact_id = '{PREF}'")
    views = _views(demo)
    assert views["facts"][:2] == ("hidden", "invalid_ref"), views
    r = run_cli("--store", str(demo), "--no-state", "validate", "--json")
    found = [f for f in orjson.loads(r.stdout)["findings"] if f["fact_id"] == PREF]
    assert [f["code"] for f in found] == ["db.revision_gap"], found
    assert "no integer" in found[0]["message"], found


def test_the_library_refuses_it_inside_its_write(demo):  # noqa: F811
    """``FactStore.revise`` (the write ``correct`` ends in) meets the row
    itself: a Conflict, nothing written, not a SQLite error."""
    import pytest

    from lecode_memctl.core.errors import Conflict
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    store_sql(demo, f"UPDATE facts SET revision = 1 WHERE fact_id = '{PREF}'")
    before = tree_hash(demo)
    with FactStore(store_at(demo).facts_db) as fs, pytest.raises(
            Conflict, match="already has a row for revision 2"):
        fs.revise(PREF, "Four spaces.", expected_revision=1)
    assert {k: v for k, v in tree_hash(demo).items() if not k.endswith(("-wal", "-shm"))} == {
        k: v for k, v in before.items() if not k.endswith(("-wal", "-shm"))}
