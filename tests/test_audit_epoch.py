"""validate notices lost forget exclusions: transcripts whose generated messages carry an
exclusion epoch above the facts database's generation (facts.sqlite3 deleted, emptied or
replaced by an older copy)."""

from __future__ import annotations

import shutil

import pytest

from lecode_memctl.core.audit import validate_store
from lecode_memctl.core.demo import build_demo

from .conftest import run_cli, tree_hash


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("epoch") / "demo")


@pytest.fixture
def demo(demo_template, tmp_path):
    dst = tmp_path / "demo"
    shutil.copytree(demo_template.base, dst, symlinks=True)
    store = demo_template.store.path.relative_to(demo_template.base)
    return dst / store


def codes(findings):
    return [(f.code, f.session_id) for f in findings if f.code == "session.epoch_ahead"]


def test_intact_demo_has_no_epoch_finding(demo):
    from lecode_memctl.core.layout import store_at

    findings, _ = validate_store(store_at(demo))
    assert codes(findings) == []


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
@pytest.mark.parametrize("deep", [False, True])
def test_lost_exclusions_are_an_error(demo, damage, deep):
    from lecode_memctl.core.layout import store_at

    db = demo / "facts.sqlite3"
    if damage == "deleted":
        db.unlink()
    else:
        db.write_bytes(b"")
    findings, summary = validate_store(store_at(demo), deep=deep)
    found = [f for f in findings if f.code == "session.epoch_ahead"]
    # demo-alpha and demo-beta hold messages generated after the forget (epoch 1)
    assert sorted(f.session_id for f in found) == ["demo-alpha", "demo-beta"]
    assert all(f.severity == "error" and f.seq is not None for f in found)
    assert "generation 0" in found[0].message


def test_epoch_finding_through_the_cli_changes_nothing(demo):
    (demo / "facts.sqlite3").unlink()
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "validate", "--format", "jsonl")
    assert r.exit_code == 1
    assert r.stdout.count('"code":"session.epoch_ahead"') == 2
    assert tree_hash(demo) == before
