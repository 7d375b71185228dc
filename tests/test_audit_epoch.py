"""validate notices lost forget exclusions: transcripts whose generated messages carry an
exclusion epoch above the facts database's generation (facts.sqlite3 deleted, emptied or
replaced by an older copy)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.audit import validate_store

from .builders import copy_demo
from .conftest import run_cli, tree_hash


@pytest.fixture
def demo(demo_template, tmp_path):
    """A private copy of conftest's demo: its store directory."""
    return copy_demo(demo_template, tmp_path / "demo")


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


def test_a_forget_during_the_audit_is_not_a_false_alarm(demo, monkeypatch):
    """The database's generation is read before the transcripts: a forget that lands
    in between, followed by an agent message stamped with the new epoch, must not be
    reported (found by the mixed-load test).  Generations only rise, so the audit
    re-reads the generation before it reports a transcript as ahead."""
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(demo)
    audit = Audit(store, parallel=False)
    original = audit._check_sessions

    def forget_then_scan():
        fs = FactStore(store.facts_db)
        try:
            victim = next(f.fact_id for f in fs.list_facts() if fs.generation() >= 0)
            assert fs.forget(victim)
            epoch = fs.generation()
        finally:
            fs.close()
        with SessionStore(store).writer("demo-alpha") as w:
            w.append_message("assistant", "after the forget", epoch=epoch)
        yield from original()

    monkeypatch.setattr(audit, "_check_sessions", forget_then_scan)
    findings = list(audit.run())
    assert [f for f in findings if f and f.code == "session.epoch_ahead"] == []
