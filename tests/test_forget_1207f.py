"""Findings of a code review (2026-12-07), each test failing before its fix.

1. A fact whose OWN source row does not parse (seqs NULL in a table that
   lost its NOT NULLs, ``[1.0,3]``, ``["5",6]``, not JSON) could not be
   forgotten: ``forget --dry-run``, ``forget --yes`` and ``redact`` all
   exited 5 ("source of ID: seqs is not JSON"), and a credential in its
   text stayed in facts.sqlite3.  Such a revision names no position: the
   forget goes on, excludes what can be read, deletes the fact's rows,
   and says which revisions' evidence it could not exclude
   (``unexcluded``).
2. A NUL byte in a linked worktree's ``commondir`` (or in its ``.git`` file
   after ``gitdir: X``) was kept in the path, which then named no file:
   git stops at the NUL (a C string) and takes the main checkout's common
   dir, memctl said "submodule" with the worktree's own store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from .builders import store_sql
from .conftest import run_cli, tree_hash
from .test_spec_1207s import DAMAGED_SEQS, TOKEN, _damaged_store, _exclusions, _worktree

# ---------------------------------------------------------------- 1. the fact's own source row

REASONS = {"null": "seqs is NULL",
           "real": "seqs is not a list of integers (the 1 position among them excluded)",
           "text": "seqs is not a list of integers (the 1 position among them excluded)",
           "not_json": "seqs is not JSON"}
# the positions a damaged list still holds: excluded (fail-closed; a code
# review: a forget left them out, and the agent could learn from them again)
HELD = {"null": [], "real": [3], "text": [6], "not_json": []}


def _own_damaged_store(root: Path, case: str, provenance: bool = False
                       ) -> tuple[Path, dict[str, str]]:
    """``_damaged_store`` with the token moved into ``c1``, the fact whose
    own source row is damaged; with ``provenance``, c1's revision 1 also
    has a legacy provenance row naming w:1 (evidence that CAN be read)."""
    store, ids = _damaged_store(root, DAMAGED_SEQS[case])
    stmts = [f"UPDATE revisions SET text = 'damaged {TOKEN}' WHERE fact_id = '{ids['c1']}'",
             f"UPDATE revisions SET text = 'token gone' WHERE fact_id = '{ids['a2']}'"]
    if provenance:
        stmts.append("INSERT INTO provenance (fact_id, revision, session_id, seq) "
                     f"VALUES ('{ids['c1']}', 1, 'w', 1)")
    store_sql(store, *stmts)
    return store, ids


def _rows_of(store: Path, fact_id: str) -> dict[str, int]:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        return {t: db.execute(f"SELECT count(*) FROM {t} WHERE fact_id = ?",
                              (fact_id,)).fetchone()[0]
                for t in ("facts", "revisions", "source_refs", "provenance")}
    finally:
        db.close()


def _line(fact_id: str, reason: str, rev: int = 1) -> str:
    return (f"revision {rev} of {fact_id}: its source does not parse ({reason}): "
            "what of its evidence it does not name as a position is not excluded")


@pytest.mark.parametrize("provenance", [False, True])
@pytest.mark.parametrize("case", sorted(DAMAGED_SEQS))
def test_a_fact_whose_own_source_row_is_damaged_can_be_forgotten(tmp_path, case, provenance):
    store, ids = _own_damaged_store(tmp_path, case, provenance)
    c1 = ids["c1"]
    base = ("--store", str(store), "--no-state")
    before = tree_hash(store)
    dry = run_cli(*base, "forget", c1, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    assert tree_hash(store) == before
    plan = orjson.loads(dry.stdout)
    unexcluded = [{"revision": 1, "reason": REASONS[case]}]
    assert plan["unexcluded"] == unexcluded, plan
    # the evidence that can be read is excluded as ever
    assert plan["exclusions"] == sorted(
        [{"session_id": "w", "seq": q} for q in ([1] if provenance else []) + HELD[case]],
        key=lambda e: e["seq"]), plan
    assert plan["suppressed_facts"] == (sorted([ids["a1"], ids["a2"]]) if provenance else [])
    text = run_cli(*base, "forget", c1, "--dry-run")
    assert text.exit_code == 0 and _line(c1, REASONS[case]) in text.stdout, text.stdout
    # the dry run is what the forget does
    r = run_cli(*base, "forget", c1, "--yes", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout)
    assert doc["forgotten"] is True and doc["unexcluded"] == plan["unexcluded"], doc
    assert doc["generation"] == plan["new_generation"]
    assert _exclusions(store) == {(e["session_id"], e["seq"]) for e in plan["exclusions"]}
    assert _rows_of(store, c1) == {"facts": 0, "revisions": 0, "source_refs": 0,
                                   "provenance": 0}
    listed = [r["fact_id"] for r in map(orjson.loads, run_cli(
        *base, "facts", "--format", "jsonl").stdout.splitlines()) if "fact_id" in r]
    assert c1 not in listed
    # a retry: already forgotten, nothing said of its revisions
    again = run_cli(*base, "forget", c1, "--yes", "--json")
    assert again.exit_code == 0
    assert orjson.loads(again.stdout)["unexcluded"] == []


def test_the_text_forget_and_the_interactive_preview_say_what_is_not_excluded(
        tmp_path, monkeypatch):
    import lecode_memctl.cli.cmd_facts as cmd_facts

    store, ids = _own_damaged_store(tmp_path, "null")
    c1 = ids["c1"]
    base = ("--store", str(store), "--no-state")
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    r = run_cli(*base, "forget", c1, input="n\n")
    assert r.exit_code == 1 and "nothing forgotten" in r.stderr, (r.exit_code, r.stderr)
    assert _line(c1, "seqs is NULL") in r.stderr, r.stderr
    r = run_cli(*base, "forget", c1, input="y\n")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert f"forgot fact {c1}" in r.stdout and _line(c1, "seqs is NULL") in r.stdout, r.stdout
    assert _rows_of(store, c1)["facts"] == 0


def test_a_session_id_that_is_not_text_is_not_excluded_either(tmp_path):
    """A BLOB that is UTF-8 names its session (fail-closed: a code review
    found ``X'77'``, ``w``, said to be unknown and left out, so the agent
    could learn from the forgotten evidence again): excluded.  One that is
    not UTF-8 names none."""
    store, ids = _own_damaged_store(tmp_path, "null")
    c1 = ids["c1"]
    base = ("--store", str(store), "--no-state")
    store_sql(store, f"UPDATE source_refs SET session_id = X'77', seqs = '[1]' "
                     f"WHERE fact_id = '{c1}'")
    plan = orjson.loads(run_cli(*base, "forget", c1, "--dry-run", "--json").stdout)
    assert plan["unexcluded"] == [] and plan["exclusions"] == [{"session_id": "w", "seq": 1}]
    store_sql(store, f"UPDATE source_refs SET session_id = X'ff77', seqs = '[1]' "
                     f"WHERE fact_id = '{c1}'")
    dry = run_cli(*base, "forget", c1, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    why = "the session id is stored as a BLOB"
    assert orjson.loads(dry.stdout)["unexcluded"] == [{"revision": 1, "reason": why}]
    r = run_cli(*base, "forget", c1, "--yes", "--json")
    assert r.exit_code == 0 and orjson.loads(r.stdout)["unexcluded"] == [
        {"revision": 1, "reason": why}], (r.exit_code, r.stdout, r.stderr)


@pytest.mark.parametrize("case", ["null", "text", "not_json"])
def test_redact_erases_a_token_in_a_fact_whose_own_source_row_is_damaged(tmp_path, case):
    store, ids = _own_damaged_store(tmp_path, case)
    c1 = ids["c1"]
    base = ("--store", str(store), "--no-state")
    dry = run_cli(*base, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)["plan"]
    unexcluded = [{"fact_id": c1, "revision": 1, "reason": REASONS[case]}]
    assert plan["forget_facts"] == [c1] and plan["unexcluded"] == unexcluded, plan
    text = run_cli(*base, "redact", "--dry-run")
    assert text.exit_code == 0 and _line(c1, REASONS[case]) in text.stdout, text.stdout
    r = run_cli(*base, "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout)
    assert doc["result"]["forgotten"] == [c1], doc
    assert doc["result"]["unexcluded"] == plan["unexcluded"], doc
    assert TOKEN.encode() not in (store / "facts.sqlite3").read_bytes()
    assert _rows_of(store, c1)["revisions"] == 0


def test_redact_says_in_text_what_it_could_not_exclude(tmp_path):
    store, ids = _own_damaged_store(tmp_path, "real")
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert _line(ids["c1"], REASONS["real"]) in r.stdout, r.stdout
    assert TOKEN.encode() not in (store / "facts.sqlite3").read_bytes()


def test_an_unknown_fact_id_is_still_exit_3_beside_a_damaged_row(tmp_path):
    store, _ids = _own_damaged_store(tmp_path, "null")
    base = ("--store", str(store), "--no-state")
    for args in (("--dry-run", "--json"), ("--yes", "--json")):
        r = run_cli(*base, "forget", "0123456789abcdef", *args)
        assert r.exit_code == 3, (args, r.exit_code, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- 2. a NUL in git's one-line files

def _git_says(cwd: Path) -> str | None:
    """``git rev-parse --git-common-dir`` in ``cwd`` (absolute), None when
    git finds no repository there (or refuses the one it finds)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    r = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir",
                        "--show-toplevel"], cwd=cwd, capture_output=True, text=True, env=env)
    return r.stdout.splitlines()[0] if r.returncode == 0 else None


def _same_as_git(repo: Path, wt: Path) -> None:
    """memctl's project of ``wt`` is the main checkout's exactly when git
    takes ``wt`` for a linked worktree of ``repo``."""
    from lecode_memctl.core.identity import LINKED_WORKTREE, resolve_project

    common = _git_says(wt)
    ident = resolve_project(wt)
    main = resolve_project(repo)
    where = orjson.loads(run_cli("where", str(wt), "--json").stdout)
    if common is not None and Path(common) == (repo / ".git").resolve():
        assert ident.kind == LINKED_WORKTREE and ident.root == repo.resolve(), ident
        assert ident.slug == main.slug and where["slug"] == main.slug, where
        assert where["kind"] == "linked worktree", where
    else:
        assert ident.slug != main.slug and where["slug"] != main.slug, (common, ident, where)


# (form, whether git takes it for the main checkout's common dir): git drops
# the trailing \n and \r of the whole file, then reads it as a C string, up
# to the first NUL (get_common_dir_noenv, read_gitfile_gently)
NUL_FORMS = [
    ("../..\0junk\n", True), ("../..\0junk\r\n", True), ("../..\0", True),
    ("../..\0\n", True), ("{abs}\0junk\n", True),
    ("../..\n\0junk", False),      # the \n is not trailing: "../..\n" is the path
    ("../..\r\0x\n", False),
    ("\0../..\n", False),          # an empty path
]


@pytest.mark.parametrize("form, git_takes", NUL_FORMS)
def test_a_nul_in_commondir_is_read_as_git_reads_it(tmp_path, form, git_takes):
    """A review: with ``commondir`` ``../..\\0junk\\n`` git stops at the
    NUL and takes the main checkout's common dir; memctl called the
    worktree a submodule with its own store (a path holding a NUL names no
    file)."""
    repo, wt, gitdir = _worktree(tmp_path)
    (gitdir / "commondir").write_bytes(
        form.format(abs=(repo / ".git").resolve()).encode("utf-8"))
    assert (_git_says(wt) is not None and Path(_git_says(wt) or "") ==
            (repo / ".git").resolve()) is git_takes, form
    _same_as_git(repo, wt)


@pytest.mark.parametrize("form, git_takes", [
    ("gitdir: {gd}\0junk\n", True), ("gitdir: {gd}\0", True), ("gitdir: {gd}\0\r\n", True),
    ("gitdir: {gd}\n\0junk", False), ("gitdir: {gd}\r\0x\n", False),
    ("gitdir:\0 {gd}\n", False), ("gitdir: \0{gd}\n", False),
])
def test_a_nul_in_a_dot_git_file_is_read_as_git_reads_it(tmp_path, form, git_takes):
    """The same of a linked worktree's ``.git`` file after ``gitdir: X``."""
    repo, wt, gitdir = _worktree(tmp_path)
    (wt / ".git").write_bytes(form.format(gd=gitdir).encode("utf-8"))
    assert (_git_says(wt) is not None and Path(_git_says(wt) or "") ==
            (repo / ".git").resolve()) is git_takes, form
    _same_as_git(repo, wt)


# ---------------------------------------------------------------- code review: fail-closed


@pytest.mark.parametrize(("session", "excluded"), [("X'77'", True), ("X'ff77'", False)])
def test_a_damaged_provenance_row_of_the_fact_itself_no_longer_stops_its_forget(
        tmp_path, session, excluded):
    """A code review: the same damage in a legacy provenance row (a BLOB
    session id) still made ``forget`` and ``redact`` exit 5, the token kept.
    Read fail-closed now: a BLOB that is UTF-8 names its session (excluded);
    one that is not is said in ``unexcluded``.  And the library's
    ``Project.forget`` passes ``unexcluded`` on."""
    from lecode_memctl.core import open_project

    store, ids = _own_damaged_store(tmp_path, "null")
    c1 = ids["c1"]
    store_sql(store, f"INSERT INTO provenance VALUES ('{c1}', 1, {session}, 1)")
    base = ("--store", str(store), "--no-state")
    plan = orjson.loads(run_cli(*base, "forget", c1, "--dry-run", "--json").stdout)
    assert ({"session_id": "w", "seq": 1} in plan["exclusions"]) is excluded, plan
    red = run_cli(*base, "redact", "--yes", "--json")
    assert red.exit_code == 0, (red.exit_code, red.stderr)
    assert TOKEN.encode() not in (store / "facts.sqlite3").read_bytes()
    assert (("w", 1) in _exclusions(store)) is excluded
    # the library: Project.forget tells what it could not exclude
    store2, ids2 = _own_damaged_store(tmp_path / "two", "null")
    told: list[tuple[int | None, str]] = []
    p = open_project(store=store2)
    try:
        assert p.forget(ids2["c1"], unexcluded=told) is True
    finally:
        p.close()
    assert told == [(1, "seqs is NULL")]
