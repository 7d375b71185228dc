"""Project.remember / Project.correct: the check and the write agree.

The evidence is validated before the write transaction; a forget that commits
in between raises the generation (hiding every generated message stamped
with an older epoch) and may exclude positions.  Inside the transaction the
evidence is validated again (always: before 2026-12-07 only when the
generation had moved), under the write lock, so a fact is never
stored with evidence that is not visible when it commits.  The hook below
only fixes the timing: it runs a forget through a second connection right
after the first validation returns.
"""

from __future__ import annotations

import pytest

from lecode_memctl.core import open_project
from lecode_memctl.core.errors import Conflict
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.sessions import SessionStore


@pytest.fixture
def project(project_cwd):
    with open_project() as p:
        with p.sessions.create("s") as w:
            w.append_message("user", "other")                               # 1
            w.append_message("user", "we use tabs")                         # 2
            w.append_message("assistant", "Noted", epoch=p.generation())    # 3
            w.append_message("user", "we use 4 spaces now")                 # 4
        yield p


def _forget_after_first_validation(monkeypatch, project, fact_id):
    """Make the next validate_source run, then forget ``fact_id`` through a
    second connection (once: a validation inside the write transaction must
    not start another writer)."""
    orig = SessionStore.validate_source
    fired = []

    def hooked(self, *a, **k):
        r = orig(self, *a, **k)
        if not fired:
            fired.append(True)
            with FactStore(project.store.facts_db) as other:
                assert other.forget(fact_id) is True
        return r

    monkeypatch.setattr(SessionStore, "validate_source", hooked)
    return fired


def test_remember_refuses_evidence_a_concurrent_forget_hid(project, monkeypatch):
    p = project
    other = p.remember("other", p.sessions.source_snapshot("s", 1, 1).ref).fact
    ref = p.sessions.source_snapshot("s", 2, 3).ref      # user + assistant at epoch 0
    assert p.sessions.validate_source(ref).status == "valid"
    fired = _forget_after_first_validation(monkeypatch, p, other.fact_id)

    with pytest.raises(Conflict, match=r"hidden \(epoch\)"):
        p.remember("We use tabs.", ref)
    assert fired
    assert p.generation() == 1
    assert p.facts.count() == 0          # nothing stored
    monkeypatch.undo()

    # A forget meanwhile that leaves the evidence visible does not refuse it:
    # the evidence is validated again, not rejected for the forget alone.
    third = p.remember("third", p.sessions.source_snapshot("s", 1, 2).ref).fact
    assert p.forget(third.fact_id) is True    # excludes 1, 2; generation 2
    with p.sessions.create("t") as w:
        w.append_message("user", "a")                                       # 1
        w.append_message("user", "tests run with pytest -q")                # 2
    keep = p.remember("a", p.sessions.source_snapshot("t", 1, 1).ref).fact
    ref = p.sessions.source_snapshot("t", 2, 2).ref
    _forget_after_first_validation(monkeypatch, p, keep.fact_id)
    res = p.remember("Tests run with pytest -q.", ref)
    assert res.created
    assert p.generation() == 3
    assert p.recall(res.fact.fact_id)["status"] == "valid"


def test_correct_refuses_evidence_a_concurrent_forget_hid(project, monkeypatch):
    p = project
    fact = p.remember("We use tabs.", p.sessions.source_snapshot("s", 2, 2).ref).fact
    other = p.remember("other", p.sessions.source_snapshot("s", 1, 1).ref).fact
    ref = p.sessions.source_snapshot("s", 3, 3).ref      # the assistant's "Noted", epoch 0
    assert p.sessions.validate_source(ref).status == "valid"
    _forget_after_first_validation(monkeypatch, p, other.fact_id)

    with pytest.raises(Conflict, match=r"hidden \(epoch\)"):
        p.correct(fact.fact_id, "We use tabs, noted.", expected_revision=1, ref=ref)
    monkeypatch.undo()
    assert p.generation() == 1
    assert p.facts.require(fact.fact_id).revision == 1     # nothing revised
    assert p.recall(fact.fact_id)["status"] == "valid"

    # Evidence that the forget leaves visible: corrected after validating again.
    with p.sessions.create("t") as w:
        w.append_message("user", "a")                                       # 1
    keep = p.remember("a", p.sessions.source_snapshot("t", 1, 1).ref).fact
    ref = p.sessions.source_snapshot("s", 4, 4).ref
    _forget_after_first_validation(monkeypatch, p, keep.fact_id)
    got = p.correct(fact.fact_id, "We use 4 spaces.", expected_revision=1, ref=ref)
    assert got.revision == 2
    assert p.generation() == 2
    assert p.recall(fact.fact_id)["status"] == "valid"


def test_attach_source_refuses_evidence_a_concurrent_forget_hid(project, monkeypatch):
    p = project
    fact = p.facts.add("unverified").fact                   # no source yet
    other = p.remember("other", p.sessions.source_snapshot("s", 1, 1).ref).fact
    ref = p.sessions.source_snapshot("s", 2, 3).ref
    _forget_after_first_validation(monkeypatch, p, other.fact_id)
    with pytest.raises(Conflict, match=r"hidden \(epoch\)"):
        p.facts.attach_source(fact.fact_id, 1, ref, sessions=p.sessions)
    monkeypatch.undo()
    assert p.facts.source(fact.fact_id) is None
