"""Issue 11, point 5: corrections say what they will achieve.

A fact with any revision whose evidence does not validate stays invalid
after ``correct`` (the design injects only facts whose every revision
validates).  ``correct`` says so before writing, asks on a terminal, refuses
without ``--yes`` elsewhere, and points to ``forget`` and a fresh fact.  It
accepts ``SESSION:START-END``, the form memctl prints, as well as the
positional form."""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli, tree_hash

PREF = "We use tabs for indentation."
FIXED = "We use tabs, width 4."


@pytest.fixture
def store(config_dir, project):
    return store_for_project(config_dir, project)


def cli(project, *args, **kw):
    return run_cli("-C", str(project), *args, **kw)


def setup_fact(store):
    ss = SessionStore(store)
    with ss.create("s1") as w:
        w.append_message("user", PREF)                      # 1
        w.append_message("assistant", "Noted.", epoch=0)    # 2
    with ss.create("s2") as w:
        w.append_message("user", "Correction: " + FIXED)    # 1
        w.append_message("user", "and width 4 everywhere")  # 2
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        return fs.remember(PREF, ss.source_snapshot("s1", 1, 1).ref, sessions=ss).fact.fact_id


def make_stale(store):
    """Change the text of s1's message 1 in place: its digest no longer holds."""
    path = store.sessions_dir / "s1.jsonl"
    path.write_bytes(path.read_bytes().replace(PREF.encode(), b"We use spaces, always."))


def status_of(project, fid):
    r = cli(project, "history", fid, "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    return doc["status"], doc["reason"], [(x["revision"], x["status"]) for x in doc["revisions"]]


@pytest.mark.parametrize("form", [("s2:1",), ("s2:1-1",), ("s2", "1", "1")])
def test_correct_accepts_the_printed_source_form(config_dir, project, store, form):
    fid = setup_fact(store)
    r = cli(project, "correct", fid, "1", *form, FIXED, "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["revision"] == 2 and doc["source"]["session_id"] == "s2"
    assert doc["source"]["seqs"] == [1]
    assert doc["stays_invalid"] is False and doc["invalid_revisions"] == []


def test_correct_source_form_ranges_and_errors(config_dir, project, store):
    fid = setup_fact(store)
    r = cli(project, "correct", fid, "1", "s2:1-2", FIXED, "--json")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout_bytes)["source"]["seqs"] == [1, 2]
    # the listing form with runs (s2:1-2 as memctl facts prints it) round-trips
    src = orjson.loads(cli(project, "facts", "--json").stdout_bytes)["facts"][0]["source"]
    assert src == "s2:1-2"
    r = cli(project, "correct", fid, "2", src, "again", "--json")
    assert r.exit_code == 0, r.stderr
    before = tree_hash(config_dir)
    for bad in (["s2:x", "t"], ["s2:2-1", "t"], ["s2:", "t"], ["s2:1-", "t"],
                ["s2:1-2", "1", "2", "t"], ["s2", "1", "t"], ["s2", "1"], ["s2:-1", "t"],
                ["../x:1", "t"], ["s2:0-300", "t"], ["s2", "a", "b", "t"], ["s2:1"]):
        r = cli(project, "correct", fid, "3", *bad)
        assert r.exit_code == 2, (bad, r.exit_code, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.startswith("memctl: error:")
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("breakage, status", [("stale", "stale"), ("missing", "missing")])
def test_correct_of_a_fact_that_stays_invalid_refuses_without_yes(config_dir, project, store,
                                                                  breakage, status):
    fid = setup_fact(store)
    if breakage == "stale":
        make_stale(store)
    else:
        (store.sessions_dir / "s1.jsonl").unlink()
    assert status_of(project, fid)[0] == status
    before = tree_hash(config_dir)
    r = cli(project, "correct", fid, "1", "s2:1", FIXED)
    assert r.exit_code == 2, r.stderr
    assert "stays invalid" in r.stderr and "revision 1" in r.stderr and status in r.stderr
    assert f"memctl forget {fid}" in r.stderr and "fresh fact" in r.stderr
    assert "--yes" in r.stderr
    assert tree_hash(config_dir) == before, "a refused correction wrote something"
    # --json without --yes: refused the same way
    r = cli(project, "correct", fid, "1", "s2:1", FIXED, "--json")
    assert r.exit_code == 2 and tree_hash(config_dir) == before
    # with --yes it writes, and says again that the fact stays invalid
    r = cli(project, "correct", fid, "1", "s2", "1", "1", FIXED, "--yes")
    assert r.exit_code == 0, r.stderr
    assert "revision 1 -> 2" in r.stdout and "stays invalid" in r.stdout
    st, _reason, revs = status_of(project, fid)
    assert st == status and revs == [(1, status), (2, "valid")]
    # the JSON of a forced correction says so too
    r = cli(project, "correct", fid, "2", "s2:2", "width 4", "--yes", "--json")
    doc = orjson.loads(r.stdout_bytes)
    assert doc["stays_invalid"] is True
    assert doc["invalid_revisions"][0]["revision"] == 1
    assert doc["invalid_revisions"][0]["status"] == status


def test_correct_asks_on_a_terminal(config_dir, project, store, monkeypatch):
    import lecode_memctl.cli.cmd_facts as cmd_facts

    fid = setup_fact(store)
    make_stale(store)
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    before = tree_hash(config_dir)
    r = cli(project, "correct", fid, "1", "s2:1", FIXED, input="n\n")
    assert r.exit_code == 1 and "stays invalid" in r.stderr and "nothing corrected" in r.stderr
    assert tree_hash(config_dir) == before
    r = cli(project, "correct", fid, "1", "s2:1", FIXED, input="y\n")
    assert r.exit_code == 0, r.stderr
    assert status_of(project, fid)[2] == [(1, "stale"), (2, "valid")]


def test_correct_of_a_valid_fact_does_not_ask(config_dir, project, store, monkeypatch):
    import lecode_memctl.cli.cmd_facts as cmd_facts

    fid = setup_fact(store)
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    r = cli(project, "correct", fid, "1", "s2:1", FIXED)   # no input: a prompt would abort
    assert r.exit_code == 0, r.stderr
    assert "stays invalid" not in r.stdout + r.stderr


def test_parse_evidence_round_trips_every_printed_source():
    from hypothesis import given, settings, strategies as st

    from lecode_memctl.cli.cmd_facts import parse_evidence
    from lecode_memctl.core.factview import source_label
    from lecode_memctl.core.sourceref import SourceRef

    @settings(max_examples=200, deadline=None)
    @given(st.integers(0, 10_000), st.sets(st.integers(0, 199), min_size=1, max_size=30),
           st.booleans())
    def check(base, offsets, with_text):
        seqs = {base + o for o in offsets}   # a SourceRef spans at most 200 positions
        ref = SourceRef("s-1_A", tuple(sorted(seqs)), "0" * 64)
        rest = ["the text"] if with_text else []
        assert parse_evidence(source_label(ref), rest) == (
            "s-1_A", min(seqs), max(seqs), "the text" if with_text else None)
        assert parse_evidence("s-1_A", [str(min(seqs)), str(max(seqs)), *rest]) == (
            "s-1_A", min(seqs), max(seqs), "the text" if with_text else None)

    check()
