"""migrate-legacy and projects review fixes (2026-12-07, 1207m): a linked
worktree that resolves to another project is not this project's (its own
store is never a legacy store), a project-store claim wins over a legacy
one, and ``projects`` recognises legacy stores of the current project and
of ``--root`` before their own store exists."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson

from lecode_memctl.core import migrate
from lecode_memctl.core.identity import resolve_project, slug
from lecode_memctl.core.migrate import classify_stores, discover_legacy_stores

from .conftest import git, make_repo, run_cli, tree_hash


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _projects(*args: str, where: Path | None = None) -> dict:
    r = run_cli(*(("-C", str(where)) if where else ()), "projects", *args, "--json")
    assert r.exit_code == 0, r.stderr
    return {d["slug"]: d for d in orjson.loads(r.stdout)}


def _moved_main(tmp_path: Path, config_dir: Path) -> tuple[Path, Path, Path]:
    """A main checkout ``app`` with a linked worktree ``wt``, then moved to
    ``app2`` without ``git worktree repair``: ``wt`` now resolves to its own
    root (its .git names a git dir that is gone), and holds its own live
    project store.  Returns (app2, wt, the worktree's own store)."""
    tmp = Path(os.path.realpath(tmp_path))
    app = make_repo(tmp / "app")
    git("worktree", "add", "-q", str(tmp / "wt"), "-b", "x", cwd=app)
    app2 = tmp / "app2"
    shutil.move(str(app), str(app2))
    wt = tmp / "wt"
    ident = resolve_project(wt)
    assert ident.root == wt and ident.slug == slug(str(wt))
    own = config_dir / "memory" / ident.slug
    put(own / "MEMORY.md", "wt live memory\n")
    return app2, wt, own


# ---------------------------------------------------------------- 1. a worktree of another project

def test_a_worktree_that_resolves_to_another_project_is_not_walked(tmp_path, config_dir):
    """Its own live store was planned (and with --yes copied) as a legacy
    store of the moved main checkout: a store that is some project's own
    store is never legacy.  Now the worktree is skipped with a note."""
    app2, wt, own = _moved_main(tmp_path, config_dir)
    d = discover_legacy_stores(config_dir, app2)
    assert d.legacy == [] and d.worktrees == []
    assert any(str(wt) in n and "another project" in n for n in d.notes), d.notes
    before = tree_hash(config_dir)
    r = run_cli("--project", str(app2), "migrate-legacy", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["legacy_stores"] == [] and doc["items"] == [] and doc["worktrees"] == []
    r = run_cli("--project", str(app2), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert str(own) not in r.stdout
    assert tree_hash(config_dir) == before
    assert not (config_dir / "memory" / slug(str(app2))).exists()


def test_separate_git_dir_worktree_is_not_the_main_checkouts(tmp_path, config_dir):
    """``git init --separate-git-dir``: the main checkout is its own root and
    a linked worktree resolves to the git directory (docs/FORMAT.md).  The
    worktree's cwd-scoped store is a legacy store of the worktree's project
    only, not also of the main checkout's."""
    tmp = Path(os.path.realpath(tmp_path))
    main, gitdir, wt = tmp / "main", tmp / "sep.git", tmp / "wt"
    git("init", "-q", "--separate-git-dir", str(gitdir), str(main), cwd=tmp)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=main)
    git("worktree", "add", "-q", str(wt), cwd=main)
    put(legacy_path(config_dir, wt) / "MEMORY.md", "wt legacy\n")
    d = discover_legacy_stores(config_dir, main)
    assert d.legacy == [] and d.worktrees == []
    d = discover_legacy_stores(config_dir, wt)
    assert d.project.root == gitdir
    assert [(s.directory, s.origin) for s in d.legacy] == [(wt, "cwd")]


def test_projects_does_not_call_a_worktrees_own_store_legacy(tmp_path, config_dir):
    """``projects --root WT`` (run from the moved main checkout, whose store
    exists) labelled the worktree's own store ``legacy`` of the main checkout."""
    app2, wt, own = _moved_main(tmp_path, config_dir)
    put(config_dir / "memory" / slug(str(app2)) / "MEMORY.md", "app2 memory\n")
    rows = _projects("--root", str(wt), where=app2)
    row = rows[own.name]
    assert (row["kind"], row["root"], row["legacy_of"]) == ("project", str(wt), None)
    assert rows[slug(str(app2))]["kind"] == "project"


def test_a_project_store_claim_wins_over_an_earlier_legacy_claim(tmp_path, config_dir,
                                                                 monkeypatch):
    """classify_stores filled its owners root by root in sorted order, first
    claim kept: a legacy claim from an earlier root beat the project-store
    claim of a later one.  Whatever route a legacy claim comes by, the store
    that is a known project's own store is that project's."""
    app2, wt, own = _moved_main(tmp_path, config_dir)
    real = migrate.linked_worktrees

    def unfiltered(ident):
        found, notes = real(ident)
        return ([wt] if ident.root == app2 else found), notes

    monkeypatch.setattr(migrate, "linked_worktrees", unfiltered)
    assert str(app2) < str(wt)      # app2 is classified first
    classes, _notes = classify_stores(config_dir, [app2, wt])
    c = {x.slug: x for x in classes}[own.name]
    assert (c.kind, c.root, c.directory) == ("project", wt, None)


# ---------------------------------------------------------------- 2. projects: known before the store exists

def test_projects_recognises_legacy_stores_of_a_root_whose_store_does_not_exist(tmp_path,
                                                                               config_dir):
    """``--root PATH`` "lets memctl ... recognise legacy stores of directories
    inside it": it did only once PATH's own store existed (the known roots
    were those that verified some store); until then the legacy store of
    app/sub was ``unclaimed``, though ``migrate-legacy`` in app/sub plans it."""
    tmp = Path(os.path.realpath(tmp_path))
    app = make_repo(tmp / "app")
    sub = app / "sub"
    sub.mkdir()
    leg = legacy_path(config_dir, sub)
    put(leg / "notes" / "a.md", "legacy\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    assert not (config_dir / "memory" / slug(str(app))).exists()
    for args, where in ((("--root", str(app)), elsewhere), ((), sub), ((), app)):
        row = _projects(*args, where=where)[leg.name]
        assert (row["kind"], row["legacy_of"], row["legacy_directory"], row["root"]) == (
            "legacy", str(app), str(sub), None), (args, where)
    r = run_cli("--project", str(sub), "migrate-legacy", "--dry-run", "--json")
    assert [s["path"] for s in orjson.loads(r.stdout)["legacy_stores"]] == [str(leg)]


def test_projects_root_of_a_separate_git_dir_worktree(tmp_path, config_dir):
    """``--root WT``, a worktree of a main checkout made with
    ``--separate-git-dir`` (it resolves to the git directory, which is no
    checkout to walk from): WT's cwd-scoped store is a legacy store of that
    project, not a ``project`` store whose root is WT."""
    tmp = Path(os.path.realpath(tmp_path))
    main, gitdir, wt = tmp / "main", tmp / "sep.git", tmp / "wt"
    git("init", "-q", "--separate-git-dir", str(gitdir), str(main), cwd=tmp)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=main)
    git("worktree", "add", "-q", str(wt), cwd=main)
    leg = legacy_path(config_dir, wt)
    put(leg / "MEMORY.md", "wt legacy\n")
    row = _projects("--root", str(wt), where=tmp)[leg.name]
    assert (row["kind"], row["legacy_of"], row["legacy_directory"], row["root"]) == (
        "legacy", str(gitdir), str(wt), None)


# ---------------------------------------------------------------- 3. Markdown that is not UTF-8

def test_legacy_markdown_that_is_not_utf8_is_copied_and_said(tmp_path, config_dir):
    """A legacy Markdown file that is not UTF-8 was planned and copied as a
    plain ``copy``, no hint; then ``show`` exits 5 and ``validate`` reports
    ``markdown.invalid_utf8``.  The copy stays byte-exact (FORMAT.md); the
    plan (text: the copy line marked; JSON: ``not_utf8`` true) and the
    report after the copy say it."""
    tmp = Path(os.path.realpath(tmp_path))
    app = make_repo(tmp / "app")
    leg = legacy_path(config_dir, app / "sub")
    (app / "sub").mkdir()
    bad = b"# caf\xe9\nsecond line\n"
    put(leg / "MEMORY.md", bad)
    put(leg / "notes" / "ok.md", "fine \u00e9\n")
    marker = "(not UTF-8: validate will report markdown.invalid_utf8)"

    r = run_cli("--project", str(app / "sub"), "migrate-legacy", "--dry-run")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln for ln in lines if marker in ln] == [f"  copy  #1   MEMORY.md  {marker}"]
    assert "  copy  #1   notes/ok.md" in lines
    assert any("not valid UTF-8" in ln and "markdown.invalid_utf8" in ln for ln in lines), lines

    r = run_cli("--project", str(app / "sub"), "migrate-legacy", "--dry-run", "--json")
    doc = orjson.loads(r.stdout)
    got = {i["name"]: i["not_utf8"] for i in doc["items"]}
    assert got == {"MEMORY.md": True, "notes/ok.md": False}
    mem = next(i for i in doc["items"] if i["name"] == "MEMORY.md")
    assert "not valid UTF-8 (line 1, byte 5)" in mem["detail"]
    r = run_cli("--project", str(app / "sub"), "migrate-legacy", "--dry-run", "--format", "csv")
    assert "not_utf8" in r.stdout.splitlines()[0].split(",")

    r = run_cli("--project", str(app / "sub"), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert any("not valid UTF-8" in ln and "markdown.invalid_utf8" in ln
               for ln in r.stdout.splitlines()), r.stdout
    store = config_dir / "memory" / slug(str(app))
    assert (store / "MEMORY.md").read_bytes() == bad        # byte-exact, as promised
    r = run_cli("--project", str(app), "validate", "--json")
    assert "markdown.invalid_utf8" in r.stdout

    r = run_cli("schema", "item")
    schema = orjson.loads(r.stdout)
    assert schema["properties"]["not_utf8"]["type"] == "boolean"
    assert "not_utf8" in schema["required"]


def test_a_project_known_by_its_main_checkout_and_a_worktree_is_walked_once(tmp_path,
                                                                            config_dir,
                                                                            monkeypatch):
    """A code review: ``projects`` run in a linked worktree knew the project
    by the worktree's checkout and by its root, and walked the main tree
    and every worktree twice (100,410 directory reads against 50,207).  The
    walk from either is the same one: made once.  A root that is the git
    dir itself (--separate-git-dir) still walks each checkout."""
    tmp = Path(os.path.realpath(tmp_path))
    app = make_repo(tmp / "app")
    (app / "sub").mkdir()
    git("worktree", "add", "-q", str(tmp / "wt"), "-b", "x", cwd=app)
    put(legacy_path(config_dir, app / "sub") / "MEMORY.md", "old\n")
    walked: list[str] = []
    real = migrate.discover_legacy_stores

    def counting(config, cwd, **kw):
        walked.append(os.fspath(cwd))
        return real(config, cwd, **kw)

    monkeypatch.setattr(migrate, "discover_legacy_stores", counting)
    classes, _notes = classify_stores(config_dir, sorted([str(app), str(tmp / "wt")]))
    assert len(walked) == 1, walked
    got = {c.slug: c for c in classes}
    assert got[slug(str(app / "sub"))].kind == migrate.LEGACY_STORE
