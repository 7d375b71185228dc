"""memctl's mark must never be written into the store it is about (a review
of 2026-12-05): with ``XDG_STATE_HOME`` (or ``HOME``, when that variable is
empty) pointing inside the store, ``validate`` -- documented to change
nothing in the store -- created ``state/lecode-memctl/stores/{.lock,
<hash>.json}`` there, and ``forget`` did too.  A mark inside the store
would also roll back with it.  Such a state directory, after resolving
symbolic links, is used as ``--no-state`` uses none: the mark is read, not
written, and a one-line note on stderr says so (as a ``$TMPDIR`` inside the
store is passed over)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lecode_memctl.core import seen

from .builders import copy_demo
from .conftest import run_cli, tree_hash

PREFERENCE = "80fa60fdfe856452"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _envs(store: Path, tmp_path: Path) -> dict[str, dict[str, str]]:
    link = tmp_path / "link-to-store"
    link.symlink_to(store)
    return {"xdg": {"XDG_STATE_HOME": str(store / "state")},
            "home": {"XDG_STATE_HOME": "", "HOME": str(store)},
            "symlink": {"XDG_STATE_HOME": str(link / "state")},
            "the_store": {"XDG_STATE_HOME": str(store)}}


@pytest.mark.parametrize("case", ["xdg", "home", "symlink", "the_store"])
def test_validate_writes_no_mark_inside_the_store(demo, tmp_path, case):
    env = _envs(demo, tmp_path)[case]
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "validate", env=env)
    assert r.exit_code in (0, 1), r.stderr
    assert tree_hash(demo) == before
    notes = [line for line in r.stderr.splitlines() if "inside the store" in line]
    assert len(notes) == 1 and notes[0].startswith("memctl: note: "), r.stderr


@pytest.mark.parametrize("case", ["xdg", "symlink"])
def test_forget_writes_no_mark_inside_the_store(demo, tmp_path, case):
    env = _envs(demo, tmp_path)[case]
    r = run_cli("--store", str(demo), "forget", PREFERENCE, "--yes", env=env)
    assert r.exit_code == 0, r.stderr
    assert not os.path.lexists(demo / "state")
    assert "inside the store" in r.stderr


def test_validate_all_projects_writes_no_mark_inside_any_store(demo, tmp_path):
    memory = demo.parent
    before = {p.name: tree_hash(p) for p in memory.iterdir()}
    r = run_cli("--config-dir", str(memory.parent), "validate", "--all-projects",
                env={"XDG_STATE_HOME": str(demo / "state")})
    assert r.exit_code in (0, 1), r.stderr
    assert {p.name: tree_hash(p) for p in memory.iterdir()} == before


def test_the_core_refuses_too(demo):
    """``seen.record`` itself writes no mark into the store it is about."""
    assert seen.record(demo / "state" / "lecode-memctl", demo, 3, 3) is None
    assert not os.path.lexists(demo / "state")


def test_a_state_dir_beside_the_store_is_still_used(demo, tmp_path):
    state = tmp_path / "elsewhere"
    r = run_cli("--store", str(demo), "validate", env={"XDG_STATE_HOME": str(state)})
    assert r.exit_code in (0, 1), r.stderr
    assert "inside the store" not in r.stderr
    assert list((state / "lecode-memctl" / "stores").glob("*.json"))
