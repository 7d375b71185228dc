"""A fact whose current revision row is malformed (its text stored as a
BLOB, or as text that is not UTF-8) is hidden / invalid_ref with no source,
in every view: the default page of ``memctl facts`` (``facts_page``, made
from ``FactStore.list_facts``) showed the source of its ``source_refs`` row,
where ``--all``, ``--status``, every machine format and ``history`` showed
none (``revisions()`` and the listing read that row as malformed:
``revision_from_stored``).  The page's rows are now the listing's, field
for field, and ``get`` gives the fact no source either."""

from __future__ import annotations

import sqlite3

import pytest

from lecode_memctl.core import factview
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import copy_demo
from .conftest import run_cli


@pytest.mark.parametrize("text_sql", ["CAST('blob text' AS BLOB)", "CAST(X'ff41' AS TEXT)"])
def test_the_page_and_the_listing_give_a_malformed_revision_the_same_row(demo_template, tmp_path,
                                                                         text_sql):
    s = store_at(copy_demo(demo_template, tmp_path / "demo"))
    fid = demo_template.facts["verified"]
    db = sqlite3.connect(s.facts_db)
    with db:
        db.execute(f"UPDATE revisions SET text = {text_sql} WHERE fact_id = ? AND revision = "
                   "(SELECT revision FROM facts WHERE fact_id = ?)", (fid, fid))
    db.close()
    fs = FactStore.open_readonly(s.facts_db)
    sessions = SessionStore(s, exclusions=fs)
    paged = {r["fact_id"]: r for r in factview.facts_page(fs, sessions)["facts"]}
    listed = {r["fact_id"]: r for r in factview.iter_fact_rows(fs, sessions)}
    assert paged == listed
    bad = listed[fid]
    assert (bad["status"], bad["reason"], bad["source"], bad["source_ref"]) == (
        "hidden", "invalid_ref", None, None)
    got = fs.get(fid)
    assert got is not None and got.source is None
    fs.close()
    # the default table (a pipe: the plain table of the page) shows no source
    r = run_cli("--store", str(s.path), "facts")
    assert r.exit_code == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(fid))
    assert line.split()[:5] == [fid, "1", "hidden", "(invalid_ref)", "-"]
