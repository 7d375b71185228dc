"""``core.worktree`` read from a hand-edited common dir ``config`` as git
itself reads it: every case is compared with ``git config --file F --get
core.worktree`` (the real git command), and a worktree of a submodule whose
config was edited by hand keeps its root."""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from lecode_memctl.core import identity
from lecode_memctl.core.identity import git_config_value, resolve_project

from .conftest import git, make_repo


def git_says(tmp_path, text: str) -> str | None:
    """What ``git config --get core.worktree`` prints for a config of
    ``text``: None when it is not set or git refuses the file."""
    f = tmp_path / "config"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))
    r = subprocess.run(["git", "config", "--file", str(f), "--get", "core.worktree"],
                       capture_output=True)
    if r.returncode != 0:
        return None
    out = r.stdout.decode("utf-8", "surrogateescape")
    assert out.endswith("\n")
    return out[:-1]


CASES = [
    "[core]\n\tworktree = ../../../Sub.Mod\n",
    # a subsection is another section, in either syntax
    '[core]\n\tworktree = /a\n[core "x"]\n\tworktree = /b\n',
    "[core]\n\tworktree = /a\n[core.x]\n\tworktree = /b\n",
    '[core "x"]\n\tworktree = /b\n',
    # comments anywhere outside quotes, with or without a blank before them
    '[core]\n\tworktree = "../../../Sub.Mod" ; set by hand\n',
    "[core]\n\tworktree = ../../../Sub.Mod#x\n",
    "[core]\n\tworktree = ../a;b\n",
    '[core]\n\tworktree = "../a;b#c"\n',
    # quotes anywhere, escapes, blanks kept as one space each
    '[core]\n\tworktree = /a/"b c"/d\n',
    '[core]\n\tworktree = "/a\\\\b\\"c"\n',
    "[core]\n\tworktree = /a  b\t c  \n",
    '[core]\n\tworktree = "  /a  "\n',
    "[core]\n\tworktree = /a\\\n/b\n",
    "[core]\n\tworktree = /a\\tb\n",
    # names in any case; the last value wins; one line with its header
    "[CORE]\n\tWorkTree = /up\n",
    "[core]\n\tworktree = /a\n\tworktree = /b\n",
    "[core] worktree = /inline\n",
    "[core]\n\tworktree=/tight\n",
    "; comment\n# comment\n[core]\n# worktree = /no\n\tworktree = /yes\n",
    # CRLF line ends, a BOM, no final newline
    "[core]\r\n\tworktree = /crlf\r\n",
    "\ufeff[core]\n\tworktree = /bom\n",
    "[core]\n\tworktree = /eof",
    # not set, or a file git refuses
    "[core]\n\tbare = false\n",
    "[core]\n\tworktree\n",
    "[core]\n\tworktree = \"/open\n",
    "[core]\n\tworktree = /a\\q\n",
    "[core\n\tworktree = /a\n",
    "[ core ]\n\tworktree = /a\n",
    "[]\n\tworktree = /a\n",
    "[core]\n\t9worktree = /a\n",
    "[core]\n\tworktree /a\n",
    "",
]


@pytest.mark.parametrize("text", CASES)
def test_core_worktree_as_git_reads_it(tmp_path, text):
    assert git_config_value(text, "core", "worktree") == git_says(tmp_path, text)


_PIECES = st.sampled_from([
    "[core]", '[core "x"]', "[core.x]", "[Core]", "[user]", "\n", "\t", " ", "\r\n",
    "worktree", "WorkTree", "bare", "=", " = ", "/a", "b", '"', "\\", "\\\\", '\\"',
    "\\n", "\\t", "#", ";", " # c", "x y", "\n\tworktree = ", "\n[core]\n\tworktree = ",
])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_PIECES, max_size=14))
@example(pieces=["\n[core]\n\tworktree = ", "\\"])   # a backslash that ends the file
def test_core_worktree_agrees_with_git(tmp_path, pieces):
    text = "".join(pieces)
    assert git_config_value(text, "core", "worktree") == git_says(tmp_path, text)


def test_worktree_of_submodule_with_hand_edited_config(tmp_path):
    lib = make_repo(tmp_path / "lib")
    repo = make_repo(tmp_path / "app")
    git("submodule", "add", "-q", str(lib), "vendor/lib", cwd=repo)
    sub = repo / "vendor" / "lib"
    wt = tmp_path / "libwt"
    git("worktree", "add", "-q", str(wt), "-b", "x", cwd=sub)
    config = repo / ".git" / "modules" / "vendor" / "lib" / "config"
    elsewhere = make_repo(tmp_path / "elsewhere")
    text, n = re.subn(r"(worktree = )(.*)", r'\1"\2" ; set by hand', config.read_text(), count=1)
    assert n == 1                       # git wrote it: a relative path to the submodule
    # a comment after the quoted value is not part of it, and a subsection
    # of core is another section
    config.write_text(text + f'[core "x"]\n\tworktree = {elsewhere}\n')
    ident = resolve_project(wt)
    assert ident.kind == identity.LINKED_WORKTREE
    assert ident.root == sub.resolve()


def test_separate_git_dir_gives_two_stores_as_documented(tmp_path):
    """docs/FORMAT.md, "Locating a store": the store contract's rule, taken
    exactly, makes the main checkout of a repository made with
    --separate-git-dir its own root (a .git file with no commondir), and a
    linked worktree of it resolves to the git directory itself."""
    main, gitdir, wt = tmp_path / "main", tmp_path / "sep.git", tmp_path / "wt"
    git("init", "-q", "--separate-git-dir", str(gitdir), str(main), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=main)
    git("worktree", "add", "-q", str(wt), cwd=main)
    ident = resolve_project(main)
    assert ident.kind == identity.SUBMODULE and ident.root == main.resolve()
    ident = resolve_project(wt)
    assert ident.kind == identity.LINKED_WORKTREE and ident.root == gitdir.resolve()
    assert resolve_project(wt).slug != resolve_project(main).slug
