"""Findings of a report-only review (2026-12-07), each test failing before
its fix.

1. A source row of ANOTHER fact whose seqs do not parse (a table that lost
   its NOT NULLs: seqs NULL; or not a list of integers) made ``forget
   --dry-run``, the interactive ``forget``'s preview and ``redact`` exit 5
   ("source of <the other fact>: seqs is not JSON"), while ``forget --yes``
   forgot the fact: the preview disagreed with the act, and a credential in
   a fact's text could not be redacted.
2. A main checkout whose ``.git`` is a symbolic link to the git directory
   gives its linked worktrees another store (the store contract's rule):
   the docs did not say so.
3. A linked worktree's ``commondir`` was read with ``.strip()``: one git
   refuses for blanks around its path ("not a git repository") gave the
   worktree the main checkout's store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG, store_sql
from .conftest import run_cli, tree_hash
from .test_damaged_rows import NO_NOT_NULL

# ---------------------------------------------------------------- 1. a damaged source row

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3bD5"


# seqs of the damaged row, as stored (SQL)
DAMAGED_SEQS = {"null": "NULL", "real": "'[1.0,3]'", "text": "'[\"5\",6]'",
                "not_json": "'[1,'"}


def _one_message_store(root: Path) -> tuple[Path, SourceRef]:
    """A store whose session ``w`` has one user message (seq 1), and the
    source reference of that message."""
    store = root / SLUG
    (store / "sessions").mkdir(parents=True)
    recs = [{"seq": 0, "type": "session", "format": 1, "session_id": "w", "project": SLUG,
             "created": "2026-12-01T10:00:00Z"},
            {"seq": 1, "type": "message", "role": "user", "content": "we use tabs"}]
    (store / "sessions" / "w.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return store, SourceRef("w", (1,), canonical_digest(recs[1:2]))


def _damaged_store(root: Path, seqs_sql: str) -> tuple[Path, dict[str, str]]:
    """A store whose session ``w`` has one user message (seq 1), cited by
    three facts: ``a1`` and ``a2`` (its text holds a GitHub token) valid,
    ``c1`` whose source row's seqs are ``seqs_sql`` (source_refs without its
    NOT NULLs)."""
    store, ref = _one_message_store(root)
    ids = {}
    with FactStore(store_at(store).facts_db) as fs:
        for name, text in (("a1", "tabs"), ("a2", f"token {TOKEN}"), ("c1", "damaged row")):
            ids[name] = fs.add(text, ref=ref).fact.fact_id
    store_sql(store, *NO_NOT_NULL,
              f"UPDATE source_refs SET seqs = {seqs_sql} WHERE fact_id = '{ids['c1']}'")
    return store, ids


def _exclusions(store: Path) -> set[tuple[str, int]]:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        return set(db.execute("SELECT session_id, seq FROM exclusions"))
    finally:
        db.close()


@pytest.mark.parametrize("case", sorted(DAMAGED_SEQS))
def test_a_damaged_source_row_of_another_fact_does_not_stop_the_forget_preview(tmp_path, case):
    store, ids = _damaged_store(tmp_path, DAMAGED_SEQS[case])
    base = ("--store", str(store), "--no-state")
    rows = {r["fact_id"]: r for r in map(orjson.loads, run_cli(
        *base, "facts", "--format", "jsonl").stdout.splitlines()) if "fact_id" in r}
    assert (rows[ids["c1"]]["status"], rows[ids["c1"]]["reason"]) == ("hidden", "invalid_ref")
    before = tree_hash(store)
    dry = run_cli(*base, "forget", ids["a1"], "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)
    # the damaged row names no position: it shares none with a1's evidence
    assert plan["suppressed_facts"] == [ids["a2"]], plan
    assert plan["exclusions"] == [{"session_id": "w", "seq": 1}], plan
    assert plan["status_changes"] == [{"fact_id": ids["a2"], "status": "valid", "reason": None,
                                       "new_status": "hidden", "new_reason": "excluded"}], plan
    assert tree_hash(store) == before
    # the plan is what the forget does
    r = run_cli(*base, "forget", ids["a1"], "--yes", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert _exclusions(store) == {(e["session_id"], e["seq"]) for e in plan["exclusions"]}
    after = {r["fact_id"]: (r["status"], r["reason"]) for r in map(orjson.loads, run_cli(
        *base, "facts", "--format", "jsonl").stdout.splitlines()) if "fact_id" in r}
    assert after == {ids["a2"]: ("hidden", "excluded"), ids["c1"]: ("hidden", "invalid_ref")}
    with FactStore.open_readonly(store_at(store).facts_db) as fs:
        assert fs.generation() == plan["new_generation"]


def test_a_damaged_source_row_of_another_fact_does_not_stop_the_interactive_forget(
        tmp_path, monkeypatch):
    import lecode_memctl.cli.cmd_facts as cmd_facts

    store, ids = _damaged_store(tmp_path, DAMAGED_SEQS["null"])
    base = ("--store", str(store), "--no-state")
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    dry = run_cli(*base, "forget", ids["a1"], "--dry-run")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    before = tree_hash(store)
    r = run_cli(*base, "forget", ids["a1"], input="n\n")
    assert r.exit_code == 1 and "nothing forgotten" in r.stderr, (r.exit_code, r.stderr)
    assert dry.stdout.strip() in r.stderr, (dry.stdout, r.stderr)
    assert tree_hash(store) == before
    r = run_cli(*base, "forget", ids["a1"], input="y\n")
    assert r.exit_code == 0 and f"forgot fact {ids['a1']}" in r.stdout + r.stderr, r.stderr


@pytest.mark.parametrize("case", ["null", "text"])
def test_redact_erases_a_token_beside_a_damaged_source_row(tmp_path, case):
    store, ids = _damaged_store(tmp_path, DAMAGED_SEQS[case])
    base = ("--store", str(store), "--no-state")
    dry = run_cli(*base, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)["plan"]
    assert plan["forget_facts"] == [ids["a2"]], plan
    assert plan["suppressed_facts"] == [ids["a1"]], plan
    r = run_cli(*base, "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert TOKEN.encode() not in (store / "facts.sqlite3").read_bytes()
    rows = {r["fact_id"]: (r["status"], r["reason"]) for r in map(orjson.loads, run_cli(
        *base, "facts", "--format", "jsonl").stdout.splitlines()) if "fact_id" in r}
    assert rows == {ids["a1"]: ("hidden", "excluded"), ids["c1"]: ("hidden", "invalid_ref")}


# ---------------------------------------------------------------- 3. commondir as git reads it

def _git_common_dir(cwd: Path) -> str | None:
    """What ``git rev-parse --git-common-dir`` says in ``cwd`` (absolute);
    None when git finds no repository there."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    r = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                       cwd=cwd, capture_output=True, text=True, env=env)
    return r.stdout.strip() if r.returncode == 0 else None


def _worktree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A repository (``main``) with a linked worktree (``wt``, branch
    ``feature``): (repo, worktree, the worktree's git dir)."""
    import shutil

    from .conftest import git, make_repo

    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = make_repo(tmp_path / "main")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    gitdir = Path((wt / ".git").read_text().strip()[len("gitdir: "):])
    return repo, wt, gitdir


@pytest.mark.parametrize("form, git_takes", [
    ("../..\n", True), ("../..", True), ("../..\r\n", True), ("../..\n\r\n", True),
    ("{abs}\n", True),
    ("../..  \n", False),          # trailing blanks are part of the path: no such directory
    ("  ../..\n", False),          # leading blanks too
    ("../..\t\n", False),
    ("{abs} \n", False),
])
def test_a_worktrees_commondir_is_read_as_git_reads_it(tmp_path, form, git_takes):
    """Differential: a ``commondir`` git takes gives the worktree its main
    checkout's store; one git refuses ("not a git repository": blanks kept,
    the path names no directory) never does.  memctl stripped blanks from
    it, taking ``../..  `` for the main checkout's common dir."""
    from lecode_memctl.core.identity import LINKED_WORKTREE, resolve_project

    repo, wt, gitdir = _worktree(tmp_path)
    (gitdir / "commondir").write_bytes(
        form.format(abs=(repo / ".git").resolve()).encode("utf-8"))
    common = _git_common_dir(wt)
    assert (common is not None) is git_takes, (form, common)
    ident = resolve_project(wt)
    main = resolve_project(repo)
    if git_takes:
        assert Path(common) == (repo / ".git").resolve()
        assert ident.kind == LINKED_WORKTREE and ident.root == repo.resolve(), ident
        assert ident.slug == main.slug
    else:
        # the path, blanks kept, is the common dir (store contract: not
        # named .git, no core.worktree there): never the main checkout's store
        assert ident.root != repo.resolve() and ident.slug != main.slug, ident
        r = run_cli("where", str(wt), "--json")
        assert r.exit_code == 0, r.stderr
        assert orjson.loads(r.stdout)["slug"] != main.slug


# ---------------------------------------------------------------- 2. a .git that is a symbolic link

REPO = Path(__file__).resolve().parent.parent


def test_a_symlinked_dot_git_gives_its_worktrees_another_store_as_documented(tmp_path):
    """docs/FORMAT.md, "Locating a store", and README.md: a main checkout
    whose ``.git`` is a symbolic link to a directory (not named ``.git``)
    is its own root, but a linked worktree of it resolves to the git
    directory itself, the store contract's rule taken exactly (a common dir
    not named ``.git``, no ``core.worktree``): another store.  A real
    ``.git`` directory, or ``--store``, keeps one store.  (The behaviour is
    the contract's; the test pins it and that the docs say it.)"""
    import shutil

    from lecode_memctl.core import identity
    from lecode_memctl.core.identity import resolve_project

    from .conftest import git

    if shutil.which("git") is None:
        pytest.skip("no git")
    main, gitdir, wt = tmp_path / "r", tmp_path / "r.gitdir", tmp_path / "w"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "i", cwd=main)
    (main / ".git").rename(gitdir)
    (main / ".git").symlink_to("../r.gitdir")
    git("worktree", "add", "-q", str(wt), cwd=main)
    ident = resolve_project(main)
    assert ident.kind == identity.MAIN_CHECKOUT and ident.root == main.resolve(), ident
    ident = resolve_project(wt)
    assert ident.kind == identity.LINKED_WORKTREE and ident.root == gitdir.resolve(), ident
    a = orjson.loads(run_cli("where", "-C", str(main), "--json").stdout)
    b = orjson.loads(run_cli("where", "-C", str(wt), "--json").stdout)
    assert (a["root"], a["kind"]) == (str(main.resolve()), "main checkout"), a
    assert (b["root"], b["kind"]) == (str(gitdir.resolve()), "linked worktree"), b
    assert a["slug"] != b["slug"] and a["store"] != b["store"]
    # the way out the docs give: a real .git directory (git worktree repair)
    (main / ".git").unlink()
    gitdir.rename(main / ".git")
    git("worktree", "repair", cwd=main)
    assert resolve_project(wt).slug == resolve_project(main).slug
    # and the docs say it
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    fmt = (REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    assert "`.git` is a symbolic link" in readme
    assert "`.git` is a symbolic link" in fmt


# ---------------------------------------------------------------- 1b. an id stored as a BLOB

def test_a_fact_id_stored_as_a_blob_beside_the_forgotten_fact_is_no_internal_error(tmp_path):
    """Found while fixing 1: another fact citing the same position whose id
    is stored as a BLOB (a writer that bound it as bytes) made the plan
    sort a BLOB among texts: ``forget --dry-run`` and ``redact`` exit 70
    (TypeError).  The plan names it by the id the listing shows."""
    store, ids = _damaged_store(tmp_path, "'[1]'")
    c1 = ids["c1"]
    store_sql(store, "PRAGMA foreign_keys = OFF",
              *(f"UPDATE {t} SET fact_id = CAST(fact_id AS BLOB) WHERE fact_id = '{c1}'"
                for t in ("facts", "revisions", "source_refs")))
    base = ("--store", str(store), "--no-state")
    listed = [r["fact_id"] for r in map(orjson.loads, run_cli(
        *base, "facts", "--format", "jsonl").stdout.splitlines()) if "fact_id" in r]
    assert c1 in listed
    dry = run_cli(*base, "forget", ids["a1"], "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    plan = orjson.loads(dry.stdout)
    assert plan["suppressed_facts"] == sorted([ids["a2"], c1]), plan
    red = run_cli(*base, "redact", "--dry-run", "--json")
    assert red.exit_code == 0, (red.exit_code, red.stderr)
    assert orjson.loads(red.stdout)["plan"]["suppressed_facts"] == sorted([ids["a1"], c1])
    r = run_cli(*base, "forget", ids["a1"], "--yes")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert _exclusions(store) == {(e["session_id"], e["seq"]) for e in plan["exclusions"]}



def test_the_forgotten_facts_own_blob_id_is_not_among_the_others(tmp_path):
    """A code review: a BLOB copy of the forgotten fact's own id (here its
    provenance row, bound as bytes by some writer) was taken out of the
    other facts before the ids became text, so the fact listed itself in
    its own ``suppressed_facts``.  The list is of the OTHER facts."""
    from lecode_memctl.core.facts import Provenance

    store, ref = _one_message_store(tmp_path)
    with FactStore(store_at(store).facts_db) as fs:
        a1 = fs.add("tabs", ref=ref, provenance=[Provenance("w", (1,))]).fact.fact_id
        a2 = fs.add("other", ref=ref).fact.fact_id
    store_sql(store, "PRAGMA foreign_keys = OFF",
              f"UPDATE provenance SET fact_id = CAST(fact_id AS BLOB) WHERE fact_id = '{a1}'")
    dry = run_cli("--store", str(store), "--no-state", "forget", a1, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    assert orjson.loads(dry.stdout)["suppressed_facts"] == [a2]
