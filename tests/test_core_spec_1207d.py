"""The core against the reference design (a review of 2026-12-07,
docs/API.md): memory_list's learning status is the current session's, a
remember validates its evidence inside its write transaction, disabled
memory creates no fact database, and a proposal's conflict given as a bare
fact id is not taken as still holding."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecode_memctl.core import open_project
from lecode_memctl.core.errors import UsageError


def _project(tmp_path: Path):
    (tmp_path / "proj").mkdir(exist_ok=True)
    return open_project(tmp_path / "proj", config_dir=tmp_path / "cfg")


# ---- 1. memory_list: the project's facts, the current session's learning status

def test_list_facts_gives_the_current_sessions_learning_status_with_every_fact(tmp_path):
    """``list_facts()`` took the learning status of whichever transcript was
    written last (another session's, shown as if current), and
    ``session_id=`` filtered the facts to that session's evidence (a new
    session saw none): ``current_session_id`` names the session whose
    learning status is given, the facts are the project's."""
    with _project(tmp_path) as p:
        s, g = p.sessions, p.generation()
        with s.create("s1") as w:
            for i in range(1, 4):
                w.append_message("user", f"u{i}")
        f = p.remember("F1", s.source_snapshot("s1", 1, 1).ref).fact
        with s.create("s2") as w:
            w.append_message("user", "hello in s2")
            w.append_event("learning", status="no_candidates", reason_counts={}, facts=[],
                           proposals=[], epoch=g)
        with s.create("s3") as w:
            w.append_message("user", "current session, no compaction yet")

        d = p.list_facts(current_session_id="s3")
        assert [r["fact_id"] for r in d["facts"]] == [f.fact_id]
        assert d["total"] == 1
        assert d["learning"] is None            # s3 has no learning event: not s2's

        d = p.list_facts(current_session_id="s2")
        assert [r["fact_id"] for r in d["facts"]] == [f.fact_id]
        assert (d["learning"]["session_id"], d["learning"]["status"]) == ("s2", "no_candidates")

        # a current session with no transcript yet: no learning status, every fact
        d = p.list_facts(current_session_id="s9")
        assert d["learning"] is None and d["total"] == 1

        # unchanged: session_id filters the facts
        assert p.list_facts(session_id="s2")["total"] == 0
        assert p.list_facts()["learning"]["session_id"] == "s2"

        with pytest.raises(UsageError):
            p.list_facts(current_session_id="../x")
        with pytest.raises(UsageError, match="not both"):
            p.list_facts(session_id="s1", current_session_id="s2")


def test_list_facts_with_a_current_session_on_a_project_with_no_database(tmp_path):
    with _project(tmp_path) as p:
        d = p.list_facts(current_session_id="s1")
        assert d["facts"] == [] and d["learning"] is None
        assert not p.store.path.exists()


# ---- 2. the evidence is validated again inside the write transaction, always

def _undo_after_first_validation(p, session_id, target):
    """The next validate_source of ``p.sessions`` runs, then an undo of
    ``target`` is appended (the agent's /undo landing between the first
    validation and the write transaction); later ones run as they are."""
    s = p.sessions
    orig = s.validate_source
    fired = []

    def racing(ref, purpose="working"):
        st = orig(ref, purpose=purpose)
        if not fired:
            fired.append(True)
            with s.writer(session_id) as w:
                w.append_event("undo", target=list(target))
        return st

    s.validate_source = racing
    return fired


def test_remember_refuses_evidence_an_undo_hid_before_its_transaction(tmp_path):
    """The ref was validated again inside the transaction only when the
    generation had moved: an undo (a JSONL append, no generation change)
    landing in between was stored as a fact, created, already hidden."""
    from lecode_memctl.core.errors import Conflict

    with _project(tmp_path) as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", "We use tabs.")
        ref = p.sessions.source_snapshot("s1", 1, 1).ref
        fired = _undo_after_first_validation(p, "s1", (1, 1))
        with pytest.raises(Conflict, match=r"not valid: hidden \(undone\)"):
            p.remember("We use tabs.", ref)
        assert fired
        assert not p.store.facts_db.exists() or p.facts.count() == 0


def test_correct_and_attach_source_refuse_evidence_an_undo_hid_meanwhile(tmp_path):
    from lecode_memctl.core.errors import Conflict

    with _project(tmp_path) as p:
        s = p.sessions
        with s.create("s1") as w:
            w.append_message("user", "We use tabs.")            # 1
            w.append_message("user", "We use spaces.")          # 2
        fact = p.remember("We use tabs.", s.source_snapshot("s1", 1, 1).ref).fact
        ref = s.source_snapshot("s1", 2, 2).ref
        _undo_after_first_validation(p, "s1", (2, 2))
        with pytest.raises(Conflict, match=r"hidden \(undone\)"):
            p.correct(fact.fact_id, "We use spaces.", expected_revision=1, ref=ref)
        assert p.facts.require(fact.fact_id).revision == 1

        with s.writer("s1") as w:
            seq = w.append_message("user", "Tests use pytest.")
        bare = p.facts.add("unverified").fact
        ref = s.source_snapshot("s1", seq, seq).ref
        _undo_after_first_validation(p, "s1", (seq, seq))
        with pytest.raises(Conflict, match=r"hidden \(undone\)"):
            p.facts.attach_source(bare.fact_id, 1, ref, sessions=s)
        assert p.facts.source(bare.fact_id) is None


# ---- 3. disabled memory creates no fact database

def _disabled(tmp_path: Path):
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "cfg" / "config.toml").write_text("[memory]\nenabled = false\n")
    return _project(tmp_path)


def test_disabled_memory_refuses_every_write_that_adds_facts(tmp_path):
    """``Project.remember`` (and ``correct``, the writer's ``add``...)
    created ``facts.sqlite3`` with ``[memory] enabled = false``."""
    from lecode_memctl.core import FactStore
    from lecode_memctl.core.errors import MemctlError

    with _disabled(tmp_path) as p:
        assert p.config.enabled is False
        with p.sessions.create("s1") as w:
            w.append_message("user", "hello")
        ref = p.sessions.source_snapshot("s1", 1, 1).ref
        calls = {
            "remember": lambda: p.remember("hello fact", ref),
            "correct": lambda: p.correct("0123456789abcdef", "x", expected_revision=1, ref=ref),
            "add": lambda: p.facts.add("hello fact", ref=ref),
            "revise": lambda: p.facts.revise("0123456789abcdef", "x", expected_revision=1),
            "facts.remember": lambda: p.facts.remember("hello fact", ref, sessions=p.sessions),
            "attach_source": lambda: p.facts.attach_source("0123456789abcdef", 1, ref,
                                                           sessions=p.sessions),
        }
        for name, call in calls.items():
            with pytest.raises(UsageError, match=r"memory is disabled") as got:
                call()
            assert got.value.exit_code == 2, name
            assert "\n" not in str(got.value), name
            assert not p.store.facts_db.exists(), name
        # reads unchanged
        assert p.list_facts()["facts"] == []
        assert p.read_range("s1", 1, 1)["status"] == "valid"
        with pytest.raises(MemctlError):
            p.recall("0123456789abcdef")
    # a FactStore opened by hand (memctl's own commands) is not the project's
    with FactStore(tmp_path / "elsewhere.sqlite3") as fs:
        assert fs.add("x").created


def test_disabled_memory_still_forgets_and_protects_on_an_existing_database(tmp_path):
    """A database written while memory was enabled: forget (it only
    protects) still works, and its exclusions keep hiding the evidence."""
    with _project(tmp_path) as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", "my token is hunter2")
            w.append_message("user", "We use tabs.")
        leaked = p.remember("token", p.sessions.source_snapshot("s1", 1, 1).ref).fact
        kept = p.remember("We use tabs.", p.sessions.source_snapshot("s1", 2, 2).ref).fact
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "cfg" / "config.toml").write_text("[memory]\nenabled = false\n")
    with _project(tmp_path) as p:
        assert p.forget(leaked.fact_id) is True
        assert p.sessions.validate_source(leaked.source).status == "hidden"
        with pytest.raises(UsageError, match="memory is disabled"):
            p.correct(kept.fact_id, "We use tabs!", expected_revision=1,
                      ref=p.sessions.source_snapshot("s1", 2, 2).ref)
        assert p.facts.require(kept.fact_id).revision == 1
        assert [r["fact_id"] for r in p.list_facts()["facts"]] == [kept.fact_id]


# ---- 4. a conflict must say the revision it was given at

def test_a_conflict_given_as_a_bare_id_hides_its_proposal(tmp_path):
    """A conflict given as a plain fact id was never checked for its
    revision: after the fact was corrected, the proposal was still listed
    as valid.  The revision a plain id meant cannot be known: such a
    proposal is hidden, as one whose conflict names another revision is."""
    with _project(tmp_path) as p:
        s, g = p.sessions, p.generation()
        with s.create("s1") as w:
            for i in range(1, 6):
                w.append_message("user", f"u{i}")
        a = p.remember("Tabs.", s.source_snapshot("s1", 1, 1).ref).fact
        ref = s.source_snapshot("s1", 2, 2).ref.to_json()
        cases = {
            "bare id": [a.fact_id],
            "bare id, not in a list": a.fact_id,
            "object at revision 1": [{"fact_id": a.fact_id, "revision": 1}],
            "object without revision": [{"fact_id": a.fact_id}],
            "object with a revision not an int": [{"fact_id": a.fact_id, "revision": "1"}],
            "none": [],
            "null": None,
        }
        with s.writer("s1") as w:
            w.append_event("learning", status="proposed", reason_counts={}, facts=[], epoch=g,
                           proposals=[{"text": name, "source": ref,
                                       "kind": "explicit_user_preference", "conflicts": c}
                                      for name, c in cases.items()])

        def shown():
            d = p.list_facts(current_session_id="s1")["learning"]
            return [x["text"] for x in d["proposals"]], d["proposals_hidden"]

        assert shown() == (["object at revision 1", "none", "null"], 4)
        p.correct(a.fact_id, "Two spaces.", expected_revision=1,
                  ref=s.source_snapshot("s1", 3, 3).ref)
        assert shown() == (["none", "null"], 5)
