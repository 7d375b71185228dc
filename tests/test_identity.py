"""Project identity and slug, with layouts built by the real git command."""

from __future__ import annotations

import hashlib
import os

from hypothesis import given, strategies as st

from lecode_memctl.core import identity
from lecode_memctl.core.identity import resolve_project, slug

from .conftest import git, make_repo, run_cli


def expected_slug(p: str) -> str:
    import re

    name = re.sub(r"[^a-z0-9]+", "-", os.path.basename(p).lower()).strip("-")[:40] or "root"
    return f"{name}-{hashlib.sha256(os.fsencode(p)).hexdigest()[:12]}"


def test_slug_examples():
    assert slug("/home/u/My Project!") == ("my-project-"
                                           + hashlib.sha256(b"/home/u/My Project!").hexdigest()[:12])
    assert slug("/").startswith("root-")
    assert slug("/x/___").startswith("root-")
    long_digest = hashlib.sha256(os.fsencode("/x/" + "a" * 60)).hexdigest()[:12]
    assert slug("/x/" + "a" * 60) == "a" * 40 + "-" + long_digest
    assert slug("/x/Ünïcode").startswith("n-code-")


@given(st.text(min_size=1, max_size=80).filter(lambda s: "/" not in s and "\x00" not in s))
def test_slug_matches_contract(name):
    p = "/base/" + name
    s = slug(p)
    assert s == expected_slug(p)
    assert len(s.rsplit("-", 1)[1]) == 12


def test_main_checkout_and_nested(tmp_path):
    repo = make_repo(tmp_path / "app")
    nested = repo / "src" / "deep"
    nested.mkdir(parents=True)
    for d in (repo, nested):
        ident = resolve_project(d)
        assert ident.root == repo.resolve()
        assert ident.kind == identity.MAIN_CHECKOUT
        assert ident.slug == expected_slug(str(repo.resolve()))


def test_linked_worktree_shares_main_root(tmp_path):
    repo = make_repo(tmp_path / "app")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    (wt / "pkg" / "sub").mkdir(parents=True)
    for d in (wt, wt / "pkg" / "sub"):
        ident = resolve_project(d)
        assert ident.kind == identity.LINKED_WORKTREE
        assert ident.root == repo.resolve()
        assert ident.checkout == wt.resolve()
    assert resolve_project(wt).slug == resolve_project(repo).slug


def test_submodule_and_worktree_of_submodule(tmp_path):
    lib = make_repo(tmp_path / "lib")
    repo = make_repo(tmp_path / "app")
    git("submodule", "add", "-q", str(lib), "vendor/lib", cwd=repo)
    sub = repo / "vendor" / "lib"
    ident = resolve_project(sub)
    assert ident.kind == identity.SUBMODULE
    assert ident.root == sub.resolve()
    assert resolve_project(sub).slug != resolve_project(repo).slug
    wt = tmp_path / "libwt"
    git("worktree", "add", "-q", str(wt), "-b", "x", cwd=sub)
    ident = resolve_project(wt)
    assert ident.kind == identity.LINKED_WORKTREE
    assert ident.root == sub.resolve()


def test_worktree_of_bare_repository(tmp_path):
    src = make_repo(tmp_path / "src")
    bare = tmp_path / "app.git"
    git("clone", "-q", "--bare", str(src), str(bare), cwd=tmp_path)
    wt = tmp_path / "bwt"
    git("worktree", "add", "-q", str(wt), "-b", "y", cwd=bare)
    ident = resolve_project(wt)
    assert ident.kind == identity.LINKED_WORKTREE
    assert ident.root == bare.resolve()


def test_symlinked_directory_and_no_git(tmp_path):
    repo = make_repo(tmp_path / "app")
    (repo / "src").mkdir()
    link = tmp_path / "link"
    link.symlink_to(repo / "src")
    assert resolve_project(link).root == repo.resolve()
    plain = tmp_path / "plain" / "dir"
    plain.mkdir(parents=True)
    ident = resolve_project(plain)
    assert ident.kind == identity.NOT_GIT
    assert ident.root == plain.resolve()
    alias = tmp_path / "alias"
    alias.symlink_to(plain)
    assert resolve_project(alias).root == plain.resolve()


def test_where_same_store_from_worktree_and_main(tmp_path):
    repo = make_repo(tmp_path / "app")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    a = run_cli("--project", str(repo), "where", "--json")
    b = run_cli("where", str(wt / "."), "--json")
    import orjson

    assert a.exit_code == 0 and b.exit_code == 0, (a.stderr, b.stderr)
    assert orjson.loads(a.stdout)["store"] == orjson.loads(b.stdout)["store"]
    assert orjson.loads(b.stdout)["kind"] == "linked worktree"
    text = run_cli("where", str(wt)).stdout
    assert f"worktree of {repo.resolve()}" in text


def test_a_nul_byte_in_a_git_file_is_no_path_not_an_internal_error(tmp_path):
    """A path read from ``.git``, ``commondir`` or ``core.worktree`` that holds
    a NUL names no file: it is treated as unreadable (the rule's fallbacks),
    where ``os.path.realpath`` raised ValueError, an internal error (exit 70)
    in every command that looks for the project.  Since 2026-12-07 (tests/
    test_forget_1207f.py) a ``.git`` file's or a ``commondir``'s path ends
    at its first NUL, as git reads it (a C string): ``/tmp/x\\0y`` is
    ``/tmp/x``."""
    p1 = tmp_path / "p1"
    p1.mkdir()
    (p1 / ".git").write_bytes(b"gitdir: " + bytes(tmp_path / "nowhere-a") + b"\x00b\n")
    assert resolve_project(p1).root == p1.resolve()   # (no commondir there: a submodule)
    p2 = tmp_path / "p2"
    (p2 / "gd").mkdir(parents=True)
    (p2 / ".git").write_bytes(b"gitdir: gd\n")
    (p2 / "gd" / "commondir").write_bytes(bytes(tmp_path / "nowhere-x") + b"\x00y\n")
    # (a common dir not named .git, no core.worktree there: that path itself)
    assert resolve_project(p2).root == (tmp_path / "nowhere-x").resolve()
    p3 = tmp_path / "p3"
    (p3 / "gd" / "common").mkdir(parents=True)
    (p3 / ".git").write_bytes(b"gitdir: gd\n")
    (p3 / "gd" / "commondir").write_bytes(b"common\n")
    (p3 / "gd" / "common" / "config").write_bytes(b"[core]\n\tworktree = /tmp/q\x00z\n")
    assert resolve_project(p3).root == (p3 / "gd" / "common").resolve()
    for p in (p1, p2, p3):
        r = run_cli("where", str(p), "--json")
        assert r.exit_code == 0, (p, r.stderr)
