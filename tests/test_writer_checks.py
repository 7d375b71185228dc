"""SessionWriter.append_message / append_event write only records the store
contract allows: no extra field overrides a reserved key, a generated
message carries an integer epoch that is not ahead of the project's
generation (the rule of ``validate``'s ``session.epoch_ahead``), and an
undo/redo target is what ``validate --deep`` accepts (``bad_target``).  A
refused append raises UsageError and writes nothing."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.core import open_project
from lecode_memctl.core.audit import validate_store
from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.sessions import SessionStore


@pytest.fixture
def project(project_cwd):
    with open_project() as p:
        yield p


def _records(p, sid):
    with open(p.sessions.path(sid), "rb") as f:
        return [orjson.loads(line) for line in f]


def _refused(w, call, match):
    """``call`` raises UsageError matching ``match`` and writes nothing."""
    size = os.path.getsize(w.path)
    seq = w.next_seq
    with pytest.raises(UsageError, match=match):
        call()
    assert os.path.getsize(w.path) == size
    assert w.next_seq == seq


def test_extra_fields_cannot_override_reserved_keys(project):
    with project.sessions.create("w1") as w:
        w.append_message("user", "hello")
        _refused(w, lambda: w.append_message("user", "x", type="event"), "reserved")
        _refused(w, lambda: w.append_message("user", "x", seq=40), "reserved")
        _refused(w, lambda: w.append_event("clear", type="message"), "reserved")
        _refused(w, lambda: w.append_event("clear", seq=0), "reserved")
        assert w.append_message("user", "still fine") == 2
    assert [r["type"] for r in _records(project, "w1")] == ["session", "message", "message"]


def test_epoch_is_an_integer_not_ahead_of_the_generation(project):
    p = project
    with p.sessions.create("w1") as w:
        assert p.generation() == 0
        _refused(w, lambda: w.append_message("assistant", "x", epoch=99), "ahead")
        _refused(w, lambda: w.append_message("assistant", "x", epoch=1), "ahead")
        _refused(w, lambda: w.append_message("assistant", "x", epoch="0"), "integer")
        _refused(w, lambda: w.append_message("assistant", "x", epoch=True), "integer")
        _refused(w, lambda: w.append_message("assistant", "x", epoch=0.0), "integer")
        _refused(w, lambda: w.append_message("tool", "x", epoch=-1), "negative")
        said = w.append_message("user", "we use tabs")
        assert w.append_message("assistant", "ok", epoch=0) == said + 1
    fact = p.remember("we use tabs", p.sessions.source_snapshot("w1", said, said).ref).fact
    p.forget(fact.fact_id)                                   # generation 1
    with p.sessions.writer("w1") as w:
        w.append_message("assistant", "after the forget", epoch=1)
        # output of a request made before the forget keeps its own epoch (hidden on read)
        w.append_message("assistant", "stale", epoch=0)
        _refused(w, lambda: w.append_message("assistant", "x", epoch=2), "ahead")
    findings, _summary = validate_store(p.store, deep=True)
    assert [f.code for f in findings if f.severity == "error"] == []


def test_epoch_rule_of_a_session_store_built_by_hand(project):
    p = project
    with p.sessions.create("w1") as w:
        said = w.append_message("user", "we use tabs")
    p.forget(p.remember("tabs", p.sessions.source_snapshot("w1", said, said).ref).fact.fact_id)
    p.facts.close()
    with SessionStore(p.store) as ss, ss.writer("w1") as w:   # reads facts.sqlite3 itself
        w.append_message("assistant", "ok", epoch=1)
        _refused(w, lambda: w.append_message("assistant", "x", epoch=2), "ahead")


def test_a_generated_message_needs_an_epoch(project):
    with project.sessions.create("w1") as w:
        _refused(w, lambda: w.append_message("assistant", "x"), "epoch")
        _refused(w, lambda: w.append_message("tool", "out", tool_call_id="c1", name="read"),
                 "epoch")
        _refused(w, lambda: w.append_message("user", "note", synthetic=True), "epoch")
        _refused(w, lambda: w.append_message("user", "note", synthetic="yes", epoch=0),
                 "synthetic")
        w.append_message("user", "said by the user")                    # no epoch: fine
        w.append_message("user", "note", synthetic=True, epoch=0)
        w.append_message("system", "a system prompt")


def test_undo_redo_targets_follow_the_validate_rule(project):
    with project.sessions.create("w1") as w:
        w.append_message("user", "a")                                    # 1
        w.append_message("user", "b")                                    # 2
        for target in ([5, 99], [2, 3], [2, 1], [-1, 1], [1], "1-2", None, [1.0, 2],
                       [True, 2]):
            _refused(w, lambda t=target: w.append_event("undo", target=t), "target")
        _refused(w, lambda: w.append_event("redo", target=[1, 5]), "target")
        _refused(w, lambda: w.append_event("undo"), "target")
        assert w.append_event("undo", target=[1, 2]) == 3
        assert w.append_event("redo", target=[2, 2]) == 4
        # a tuple is written as the same JSON array (callers passed them before
        # the check came)
        assert w.append_event("undo", target=(1, 2)) == 5
        w.append_event("clear")
    assert _records(project, "w1")[5]["target"] == [1, 2]
    findings, _summary = validate_store(project.store, deep=True)
    assert [f.code for f in findings if f.severity == "error"] == []


def test_learning_events_follow_the_validate_rule(project):
    """A learning event's status is one of the fixed set, and its reason_counts
    (when given: older events have none) map fixed codes to non-negative
    integers: what validate --deep reports as learning.bad_status and
    learning.bad_reason is refused (the rule has one home)."""
    with project.sessions.create("w1") as w:
        for status in ("bogus", None, 3, ""):
            _refused(w, lambda s=status: w.append_event("learning", status=s), "status")
        _refused(w, lambda: w.append_event("learning"), "status")
        for counts in ([1], "x", {"bogus_code": 1}, {"invalid_json": -1},
                       {"invalid_json": True}, {"invalid_json": 1.0}, {"invalid_json": None}):
            _refused(w, lambda c=counts: w.append_event("learning", status="rejected",
                                                        reason_counts=c), "reason|count")
        assert w.append_event("learning", status="rejected",
                              reason_counts={"invalid_json": 2, "candidate_schema": 0}) == 1
        assert w.append_event("learning", status="no_candidates") == 2
        w.append_event("learning_like_other_event", status="anything")     # not a learning event
    findings, _summary = validate_store(project.store, deep=True)
    assert [f.code for f in findings if f.severity == "error"] == []
