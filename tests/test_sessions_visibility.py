"""Visibility and validation: undo/redo, clear, exclusions, the epoch rule,
tampering and missing sources, each asserting the status and the reason."""

from __future__ import annotations

import os

import orjson
import pytest

from lecode_memctl.core.layout import store_at, store_for_project
from lecode_memctl.core.sessions import SessionStore, SpanHidden
from lecode_memctl.core.sourceref import MemoryExclusions, SourceRef, canonical_digest

from .conftest import make_repo


@pytest.fixture
def ex():
    return MemoryExclusions()


# store: conftest (an empty store at <tmp>/memory/SLUG); ss adds the exclusions
@pytest.fixture
def ss(store, ex):
    return SessionStore(store, ex)


def conversation(ss, sid="s1"):
    """1 user, 2 assistant (epoch 0), 3 tool (epoch 0), 4 user, 5 synthetic user (epoch 0)."""
    w = ss.create(sid)
    w.append_message("user", "I prefer tabs")
    w.append_message("assistant", "ok", epoch=0,
                     tool_calls=[{"id": "c1", "name": "read", "arguments": {"path": "a"}}])
    w.append_message("tool", "contents", tool_call_id="c1", name="read", epoch=0)
    w.append_message("user", "thanks")
    w.append_message("user", "background done", synthetic=True, epoch=0)
    return w


def status(ss, ref, purpose="working"):
    st = ss.validate_source(ref, purpose)
    return st.status, st.reason


def test_valid_then_undo_redo_undo(ss):
    w = conversation(ss)
    ref = ss.source_snapshot("s1", 1, 4).ref
    assert status(ss, ref) == ("valid", None)
    w.append_event("undo", target=[1, 3])
    assert status(ss, ref) == ("hidden", "undone")
    assert ss.validate_source(ref).seq == 1
    w.append_event("redo", target=[1, 3])
    assert status(ss, ref) == ("valid", None)
    w.append_event("undo", target=[2, 2])
    assert status(ss, ref) == ("hidden", "undone")
    assert ss.validate_source(ref).seq == 2
    # The snapshot now leaves the undone position out.
    snap = ss.source_snapshot("s1", 1, 4)
    assert snap.ref.seqs == (1, 3, 4) and snap.hidden == {2: "undone"}
    assert status(ss, snap.ref) == ("valid", None)
    w.close()


def test_redo_of_part_of_an_undo(ss):
    w = conversation(ss)
    w.append_event("undo", target=[1, 4])
    w.append_event("redo", target=[3, 3])
    snap = ss.source_snapshot("s1", 1, 4)
    assert snap.ref.seqs == (3,)
    assert snap.hidden == {1: "undone", 2: "undone", 4: "undone"}
    w.close()


def test_clear_hides_for_working_not_durable(ss):
    w = conversation(ss)
    ref = ss.source_snapshot("s1", 1, 4).ref
    w.append_event("clear")
    assert status(ss, ref, "working") == ("hidden", "cleared")
    assert status(ss, ref, "durable") == ("valid", None)
    w.append_message("user", "after clear")
    assert ss.source_snapshot("s1", 1, 7).ref.seqs == (7,)
    with pytest.raises(SpanHidden) as ei:
        ss.source_snapshot("s1", 1, 4)
    assert ei.value.reason == "cleared"
    w.close()


def test_exclusion_hides_for_both_purposes(ss, ex):
    w = conversation(ss)
    ref = ss.source_snapshot("s1", 4, 4).ref
    ex._generation = 0
    ex._excluded["s1"] = frozenset({4})   # an exclusion without a generation change
    assert status(ss, ref, "working") == ("hidden", "excluded")
    assert status(ss, ref, "durable") == ("hidden", "excluded")
    w.close()


def test_epoch_rule(ss, ex):
    w = conversation(ss)
    user = ss.source_snapshot("s1", 1, 1).ref
    asst = ss.source_snapshot("s1", 2, 2).ref
    tool = ss.source_snapshot("s1", 3, 3).ref
    synth = ss.source_snapshot("s1", 5, 5).ref
    ex.exclude("other-session", [1])   # a forget elsewhere in the project: generation 1
    assert status(ss, user) == ("valid", None)
    for ref in (asst, tool, synth):
        assert status(ss, ref) == ("hidden", "epoch")
        assert status(ss, ref, "durable") == ("hidden", "epoch")
    # A message generated after the forget carries the new epoch.
    s = w.append_message("assistant", "new", epoch=1)
    assert status(ss, ss.source_snapshot("s1", s, s).ref) == ("valid", None)
    w.close()


def test_missing_epoch_is_hidden_only_above_generation_zero(ss, ex):
    w = ss.create("s1")
    w.append_record({"type": "message", "role": "assistant", "content": "legacy, no epoch"})
    ref = ss.source_snapshot("s1", 1, 1).ref
    assert status(ss, ref) == ("valid", None)
    ex.exclude("x", [0])
    assert status(ss, ref) == ("hidden", "epoch")
    w.close()


def test_tampered_middle_record_is_stale(ss, store):
    w = conversation(ss)
    ref = ss.source_snapshot("s1", 1, 4).ref
    w.close()
    p = store.sessions_dir / "s1.jsonl"
    lines = p.read_bytes().split(b"\n")
    rec = orjson.loads(lines[3])
    rec["content"] = "tampered"          # the tool record between two referenced messages
    lines[3] = orjson.dumps(rec)
    p.write_bytes(b"\n".join(lines))
    assert status(ss, ref) == ("stale", "digest_mismatch")


def test_digest_covers_middle_events(ss):
    w = conversation(ss)
    w.append_event("memory_usage", purpose="learning", model="m", usage=None)
    w.append_message("user", "more")
    snap = ss.source_snapshot("s1", 4, 7)
    assert snap.ref.seqs == (4, 5, 7)
    assert snap.ref.digest == canonical_digest(ss.records("s1", 4, 7))
    w.close()


def test_missing_session_and_position(ss, store):
    w = conversation(ss)
    ref = ss.source_snapshot("s1", 4, 5).ref
    w.close()
    p = store.sessions_dir / "s1.jsonl"
    data = p.read_bytes()
    p.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])   # drop seq 5
    st = ss.validate_source(ref)
    assert (st.status, st.reason, st.seq) == ("missing", "position_missing", 5)
    os.unlink(p)
    assert status(ss, ref) == ("missing", "session_missing")


def test_event_position_is_not_message(ss):
    w = conversation(ss)
    e = w.append_event("clear")
    m = w.append_message("user", "x")
    ref = SourceRef("s1", (e, m), canonical_digest(ss.records("s1", e, m)))
    assert status(ss, ref) == ("stale", "not_message")
    with pytest.raises(SpanHidden) as ei:
        ss.source_snapshot("s1", e, e)
    assert ei.value.reason == "not_message"
    w.close()


def test_refused_project_and_symlink_statuses(store, ex, tmp_path):
    other = SessionStore(store_at(tmp_path / "memory" / "other-000000000000"))
    with other.create("s9") as w:
        w.append_message("user", "x")
    ref = other.source_snapshot("s9", 1, 1).ref
    os.makedirs(store.sessions_dir, exist_ok=True)
    ss = SessionStore(store, ex)
    # Copy of another project's session: refused by its header.
    (store.sessions_dir / "s9.jsonl").write_bytes(
        (tmp_path / "memory" / "other-000000000000" / "sessions" / "s9.jsonl").read_bytes())
    assert status(ss, ref) == ("hidden", "refused_project")
    os.unlink(store.sessions_dir / "s9.jsonl")
    os.symlink(tmp_path / "memory" / "other-000000000000" / "sessions" / "s9.jsonl",
               store.sessions_dir / "s9.jsonl")
    assert status(ss, ref) == ("hidden", "refused_symlink")


def test_bad_undo_target_is_reported_by_scan(ss):
    w = conversation(ss)
    s = w.append_record({"type": "event", "event": "undo", "target": [4, 9]})  # past itself
    bad = [i for i in ss.scan("s1") if i.corrupt]
    assert [(i.kind, i.seq) for i in bad] == [("bad_target", s)]
    # It still hides the positions of its target that precede it.
    assert ss.source_snapshot("s1", 1, 5).hidden == {4: "undone", 5: "undone"}
    w.close()


def test_validate_many_opens_each_file_once(ss, monkeypatch):
    w = conversation(ss)
    refs = [ss.source_snapshot("s1", a, a).ref for a in (1, 2, 4)]
    w.close()
    conversation(ss, "s2").close()
    refs.append(ss.source_snapshot("s2", 1, 1).ref)
    refs.append(SourceRef("gone", (1,), "0" * 64))
    import lecode_memctl.core.sessions as mod

    opened = []
    real_open = os.open

    def counting_open(path, *a, **kw):
        opened.append(os.fspath(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(mod.os, "open", counting_open)
    out = ss.validate_many(refs, purpose="durable")
    monkeypatch.undo()
    assert {r.session_id: st.status for r, st in out.items()} == {
        "s1": "valid", "s2": "valid", "gone": "missing"}
    jsonl = [p for p in opened if p.endswith(".jsonl")]
    assert sorted(os.path.basename(p) for p in jsonl) == ["gone.jsonl", "s1.jsonl", "s2.jsonl"]


def test_bind_facts_by_project_root(tmp_path, config_dir):
    repo = make_repo(tmp_path / "app")
    store = store_for_project(config_dir, repo)
    ss = SessionStore(store)
    conversation(ss).close()
    ref = ss.source_snapshot("s1", 4, 4).ref
    facts = MemoryExclusions(excluded={"s1": [4]})
    assert ss.exclusion_reader("s1").excluded_seqs("s1") == frozenset()
    ss.bind_facts(repo, facts)
    assert ss.exclusion_reader("s1") is facts
    assert status(ss, ref) == ("hidden", "excluded")
    # A binding for another project does not apply to this store's sessions.
    ss2 = SessionStore(store)
    ss2.bind_facts(make_repo(tmp_path / "other"), facts)
    assert status(ss2, ref) == ("valid", None)


class _IntSub(int):
    pass


@pytest.mark.parametrize("epoch, generation, hidden", [
    (0, 0, False), (1, 1, False), (2, 1, False), (0, 1, True), (-1, 0, True),
    (None, 0, False), (None, 1, True), (True, 0, False), (True, 1, True),   # a bool is no epoch
    (1.0, 1, False), (0.5, 1, True), ("1", 1, True),   # a number is compared as one
    (_IntSub(1), 1, False), (_IntSub(0), 1, True),
])
@pytest.mark.parametrize("who", [{"role": "assistant"}, {"role": "tool"},
                                 {"role": "user", "synthetic": True}])
def test_epoch_rule_of_the_predicate_itself(epoch, generation, hidden, who):
    from lecode_memctl.core.sessions import UndoState, visible

    rec = {"seq": 3, "type": "message", **who, "content": "x"}
    if epoch is not None:
        rec["epoch"] = epoch
    for purpose in ("working", "durable"):
        got = visible(rec, purpose=purpose, excluded=frozenset(), generation=generation,
                      undo_state=UndoState(), clear_seq=None)
        assert got == ((False, "epoch") if hidden else (True, None))
    user = {"seq": 3, "type": "message", "role": "user", "content": "x", "epoch": epoch}
    assert visible(user, purpose="working", excluded=frozenset(), generation=generation,
                   undo_state=UndoState(), clear_seq=None) == (True, None)
    # the contract: a synthetic *user* notification is generated; a synthetic
    # system message is not (before 2026-12-07 any synthetic message was)
    system = {**user, "role": "system", "synthetic": True}
    assert visible(system, purpose="working", excluded=frozenset(), generation=generation,
                   undo_state=UndoState(), clear_seq=None) == (True, None)
