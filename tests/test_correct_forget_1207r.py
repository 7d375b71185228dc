"""correct and forget (review of 2026-12-07): a fact whose revisions are
not exactly 1..facts.revision is hidden to every reader and correct says it
stays invalid; a live fact whose id is forgotten is not valid and correct
refuses it; forget does what its preview showed or nothing."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import iter_fact_rows
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import copy_demo, store_sql
from .conftest import run_cli, tree_hash
from .test_engine import one_fact_rows

PREF = "80fa60fdfe856452"      # demo 'preference' fact: revision 2 (corrected)


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _views(demo, engine: bool = True) -> dict:
    """PREF as each reader gives it: (status, reason, about_revision); with
    ``engine``, the whole-store listing is also that of the one-fact path
    (tests/test_engine.py's, which knows nothing of forgotten ids)."""
    base = ("--store", str(demo), "--no-state")
    out: dict[str, object] = {}
    r = run_cli(*base, "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    row = next(x for x in map(orjson.loads, r.stdout.splitlines()) if x.get("fact_id") == PREF)
    out["facts"] = (row["status"], row["reason"], row["about_revision"])
    for cmd in ("recall", "history"):
        r = run_cli(*base, cmd, PREF, "--json")
        assert r.exit_code == 0, (cmd, r.stderr)
        doc = orjson.loads(r.stdout)
        out[cmd] = (doc["status"], doc["reason"], doc.get("about_revision"))
    r = run_cli(*base, "context", "--json")
    assert r.exit_code == 0, r.stderr
    out["context"] = PREF in [x["fact_id"] for x in orjson.loads(r.stdout)["included"]]
    r = run_cli(*base, "validate", "--format", "jsonl")
    summary = next(x for x in map(orjson.loads, r.stdout.splitlines()) if x["type"] == "summary")
    out["validate_hidden"] = summary["facts"]["hidden"]     # (the demo has none)
    store = store_at(demo)
    with FactStore.open_readonly(store.facts_db) as fs:
        if not engine:
            return out
        sessions = SessionStore(store, exclusions=fs)
        assert list(iter_fact_rows(fs, sessions)) == one_fact_rows(fs, sessions)
    return out


GAPS = {
    # revision 1 deleted under revision 2: a gap below the current one
    "gap_below": ([f"DELETE FROM source_refs WHERE fact_id = '{PREF}' AND revision = 1",
                   f"DELETE FROM revisions WHERE fact_id = '{PREF}' AND revision = 1"], 1),
    # the current revision set back to 1: revision 2 is a row beyond it
    "beyond_current": ([f"UPDATE facts SET revision = 1 WHERE fact_id = '{PREF}'"], 2),
}


@pytest.mark.parametrize("case", sorted(GAPS))
def test_revisions_not_exactly_one_to_current_hide_the_fact_in_every_reader(demo, case):
    """Revision rows 2 alone (1 deleted), or 1 and 2 with facts.revision 1:
    validate said db.revision_gap while facts, recall and history said
    valid and context injected the fact (revision 1's superseded text in
    the second case).  Hidden (invalid_ref) about that revision, everywhere."""
    sql, about = GAPS[case]
    store_sql(demo, *sql)
    views = _views(demo)
    want = ("hidden", "invalid_ref", about)
    assert views == {"facts": want, "recall": want, "history": want, "context": False,
                     "validate_hidden": 1}, views


@pytest.mark.parametrize("deleted", ["current", "all"])
def test_correct_of_a_fact_with_a_missing_revision_says_it_stays_invalid(demo, deleted):
    """Revision 2 (or every revision) of a fact at revision 2 deleted: correct
    exited 0 without a word, and the fact, rows 1 and 3 (or 3 alone), was then
    valid and injected.  It stays invalid: correct refuses without --yes
    (exit 2, nothing written), and with --yes says so; the fact stays hidden."""
    where = f"fact_id = '{PREF}'" + (" AND revision = 2" if deleted == "current" else "")
    store_sql(demo, f"DELETE FROM source_refs WHERE {where}",
              f"DELETE FROM revisions WHERE {where}")
    base = ("--store", str(demo), "--no-state")
    before = tree_hash(demo)
    argv = (*base, "correct", PREF, "2", "demo-alpha:14", "Four spaces.")
    r = run_cli(*argv)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "stays invalid" in lines[0] and "revision 2 is hidden" in lines[0]
    assert tree_hash(demo) == before
    r = run_cli(*argv, "--yes", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["stays_invalid"] is True and doc["revision"] == 3, doc
    assert {"revision": 2, "status": "hidden", "reason": "invalid_ref"} in doc["invalid_revisions"]
    want = ("hidden", "invalid_ref", 2)
    views = _views(demo)
    assert views == {"facts": want, "recall": want, "history": want, "context": False,
                     "validate_hidden": 1}, views


def test_a_live_fact_whose_id_is_forgotten_is_hidden_and_correct_refuses_it(demo):
    """A fact whose id is in forgotten (its rows put back after the forget:
    validate's db.forgotten_fact_present) was valid, injected by context,
    and correct appended a revision to it (exit 0).  It is hidden
    (invalid_ref) to every reader, and correct refuses it (exit 4, one
    line, nothing written), the core's revise too."""
    from lecode_memctl.core.errors import Conflict

    store_sql(demo, f"INSERT INTO forgotten (fact_id, generation) VALUES ('{PREF}', 0)")
    views = _views(demo, engine=False)
    want = ("hidden", "invalid_ref", None)
    assert views == {"facts": want, "recall": want, "history": want, "context": False,
                     "validate_hidden": 1}, views
    from lecode_memctl.core.factview import facts_page

    store = store_at(demo)
    with FactStore.open_readonly(store.facts_db) as fs:
        page = facts_page(fs, SessionStore(store, exclusions=fs))     # memory_list's page
        row = next(x for x in page["facts"] if x["fact_id"] == PREF)
        assert (row["status"], row["reason"]) == ("hidden", "invalid_ref"), row
    r = run_cli("--store", str(demo), "--no-state", "facts", "--all", "--status", "valid",
                "--format", "jsonl")
    assert PREF not in r.stdout
    before = tree_hash(demo)
    for yes in ((), ("--yes",)):
        r = run_cli("--store", str(demo), "--no-state", "correct", PREF, "2", "demo-alpha:14",
                    "Four spaces.", *yes)
        assert r.exit_code == 4, (r.exit_code, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "forgotten" in lines[0], r.stderr
        assert "Traceback" not in r.stderr
    assert tree_hash(demo) == before
    with FactStore(store_at(demo).facts_db) as fs, pytest.raises(Conflict, match="forgotten"):
        fs.revise(PREF, "x", expected_revision=2)
    assert tree_hash(demo) == before


def test_forget_confirmed_on_a_terminal_does_what_its_preview_showed_or_nothing(demo,
                                                                               monkeypatch):
    """A correction committed between forget's preview and the 'y' added an
    exclusion the preview never showed (2 shown, 3 installed).  The forget
    compares the plan it showed inside its transaction: it stops, exit 4,
    one line, nothing forgotten; a forget whose plan did not change goes
    through as before."""
    import lecode_memctl.cli.cmd_facts as cmd_facts
    import lecode_memctl.cli.output as output
    from lecode_memctl.core.sourceref import SourceRef

    store = store_at(demo)
    with FactStore.open_readonly(store.facts_db) as fs:
        exclusions = fs.exclusion_count()
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)

    def correct_then_yes(question: str) -> bool:
        with FactStore(store.facts_db) as fs:
            fs.revise(PREF, "Tabs after all.", expected_revision=2,
                      ref=SourceRef.of_checked("demo-alpha", (30,), "a" * 64))
        return True

    monkeypatch.setattr(output, "confirm", correct_then_yes)
    r = run_cli("--store", str(demo), "--no-state", "forget", PREF)
    assert r.exit_code == 4, (r.exit_code, r.stdout, r.stderr)
    assert "exclusions to install: 2" in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("memctl: error:") and "changed since" in last, r.stderr
    assert "Traceback" not in r.stderr
    with FactStore.open_readonly(store.facts_db) as fs:
        fact = fs.get(PREF)
        assert fact is not None and fact.revision == 3
        assert fs.exclusion_count() == exclusions and not fs.was_forgotten(PREF)
    # nothing changes between the preview and the answer: forgotten
    monkeypatch.setattr(output, "confirm", lambda question: True)
    r = run_cli("--store", str(demo), "--no-state", "forget", PREF)
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert "exclusions to install: 3" in r.stderr, r.stderr
    with FactStore.open_readonly(store.facts_db) as fs:
        assert fs.get(PREF) is None and fs.exclusion_count() == exclusions + 3


def test_a_write_failed_on_a_full_disk_says_what_sqlite_leaves_and_the_next_write_removes_it(
        demo, tmp_path):
    """A forget on a full file system (a real tmpfs, filled): exit 7,
    nothing changed, but SQLite leaves an empty facts.sqlite3-wal and a
    -shm it could not size, which memctl cannot remove safely (another
    process may be opening them).  The one line says so, and the next write
    with room removes them (docs/RELIABILITY.md, "I/O faults")."""
    import shutil
    import subprocess

    from .test_io_faults import _fill, _mount_tmpfs

    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "400k"):
        pytest.skip("needs root and mount(8) for a private tmpfs")
    try:
        store = mnt / "store"
        shutil.copytree(demo, store)
        base = ("--store", str(store), "--no-state")
        assert _fill(mnt / "filler") > 0
        r = run_cli(*base, "forget", PREF, "--yes")
        assert r.exit_code == 7, (r.exit_code, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "nothing was changed" in lines[0], r.stderr
        assert "facts.sqlite3-wal" in lines[0] and "next write" in lines[0], lines
        os.unlink(mnt / "filler")
        r = run_cli(*base, "forget", PREF, "--yes")
        assert r.exit_code == 0, r.stderr
        assert [p.name for p in store.iterdir() if p.name.startswith("facts.sqlite3-")] == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
