"""A hypothesis state machine over FactStore with real session transcripts.

Rules: remember, correct, add (legacy provenance) + attach_source, forget,
forget again, reopen.  Invariants: the generation never decreases and rises
by exactly one per first forget; revisions are contiguous; no revision or
ref points at a deleted fact; excluded evidence is never attached again;
``is_excluded``/``excluded_seqs`` match a model.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from lecode_memctl.core.errors import Conflict, NotFound
from lecode_memctl.core.facts import FactStore, Provenance
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

SID = "sm"
N_USER = 10                       # user messages at seqs 1..10
TOOL_SEQ = 11                     # a tool message: never valid evidence for correct
TEXTS = ["tabs", "Tabs", "spaces", "width 4", "  tabs  ", "no trailing commas"]

_TEMPLATE: dict[str, Path] = {}


def template() -> Path:
    """A store with one session, written once per test run and copied per example."""
    if "dir" not in _TEMPLATE:
        d = Path(tempfile.mkdtemp(prefix="facts-sm-"))
        store = store_at(d / "store")
        with SessionStore(store).create(SID) as w:
            for i in range(N_USER):
                w.append_message("user", f"message {i + 1}")
            w.append_message("tool", "output", epoch=0, tool_call_id="t", name="read")
        _TEMPLATE["dir"] = d
    return _TEMPLATE["dir"]


def teardown_module():
    if "dir" in _TEMPLATE:
        shutil.rmtree(_TEMPLATE.pop("dir"), ignore_errors=True)


class FactMachine(RuleBasedStateMachine):
    facts = Bundle("facts")
    forgotten = Bundle("forgotten")

    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="facts-sm-ex-"))
        shutil.copytree(template() / "store", self.tmp / "store")
        self.store = store_at(self.tmp / "store")
        self.db = self.store.facts_db
        self.open()
        # refs captured before any exclusion: the digests stay right, only
        # visibility can change
        self.refs = {s: self.sessions.source_snapshot(SID, s, s).ref for s in range(1, N_USER + 1)}
        self.refs[TOOL_SEQ] = self.sessions.source_snapshot(SID, TOOL_SEQ, TOOL_SEQ).ref
        self.generation = 0
        self.excluded: set[int] = set()
        self.model: dict[str, dict] = {}   # fact id -> {"revision", "positions": set, "refd": {rev}}
        self.gone: set[str] = set()

    def open(self):
        self.fs = FactStore(self.db)
        self.sessions = SessionStore(self.store, exclusions=self.fs)

    def teardown(self):
        self.fs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- rules

    @rule(target=facts, text=st.sampled_from(TEXTS), seq=st.integers(1, N_USER),
          dedup=st.booleans())
    def remember(self, text, seq, dedup):
        ref = self.refs[seq]
        try:
            res = self.fs.remember(text, ref, sessions=self.sessions, deduplicate=dedup,
                                   expected_generation=self.generation)
        except Conflict:
            assert seq in self.excluded
            return "none"
        assert seq not in self.excluded
        fid = res.fact.fact_id
        if res.created:
            assert fid not in self.model
            self.model[fid] = {"revision": 1, "positions": {seq}, "refd": {1}}
        else:
            assert fid in self.model
        return fid

    @rule(target=facts, text=st.sampled_from(TEXTS), seq=st.integers(1, N_USER))
    def add_legacy(self, text, seq):
        try:
            res = self.fs.add(text, provenance=[Provenance(SID, (seq,))])
        except Conflict as exc:
            assert seq in self.excluded or "retired" in str(exc)
            return "none"
        assert seq not in self.excluded
        fid = res.fact.fact_id
        if res.created:
            self.model[fid] = {"revision": 1, "positions": {seq}, "refd": set()}
        return fid

    @rule(fid=facts, seq=st.integers(1, N_USER))
    def attach(self, fid, seq):
        if fid not in self.model:
            return
        m = self.model[fid]
        rev = m["revision"]
        try:
            attached = self.fs.attach_source(fid, rev, self.refs[seq], sessions=self.sessions)
        except Conflict as exc:
            assert seq in self.excluded or rev in m["refd"], str(exc)
            return
        assert seq not in self.excluded
        if attached:
            assert rev not in m["refd"]
            m["refd"].add(rev)
            m["positions"].add(seq)
        else:
            assert rev in m["refd"]

    @rule(fid=facts, seq=st.sampled_from(list(range(1, N_USER + 1)) + [TOOL_SEQ]),
          stale=st.booleans(), text=st.sampled_from(TEXTS))
    def correct(self, fid, seq, stale, text):
        if fid not in self.model:
            return
        m = self.model[fid]
        expected = m["revision"] - 1 if stale else m["revision"]
        try:
            self.fs.correct(fid, text + " (corrected)", expected_revision=expected,
                            ref=self.refs[seq], sessions=self.sessions,
                            expected_generation=self.generation)
        except Conflict:
            assert stale or seq in self.excluded or seq == TOOL_SEQ
            return
        assert not stale and seq not in self.excluded and seq != TOOL_SEQ
        m["revision"] += 1
        m["refd"].add(m["revision"])
        m["positions"].add(seq)

    @rule(target=forgotten, fid=consumes(facts))
    def forget(self, fid):
        if fid not in self.model:
            return "none"
        assert self.fs.forget(fid) is True
        self.generation += 1
        self.excluded |= self.model.pop(fid)["positions"]
        self.gone.add(fid)
        return fid

    @rule(fid=forgotten)
    def forget_again(self, fid):
        if fid == "none" or fid in self.model:
            return
        assert self.fs.forget(fid) is False

    @rule()
    def forget_unknown(self):
        with pytest.raises(NotFound):
            self.fs.forget("f" * 16)

    @rule()
    def read_only_view(self):
        """What a read command sees while this writer is open (its commits may
        be only in the -wal) equals the writer's view; nothing is written."""
        before = sorted(p.name for p in self.db.parent.iterdir())
        ro = FactStore.open_readonly(self.db)
        try:
            assert ro.generation() == self.generation
            assert ro.excluded_seqs(SID) == frozenset(self.excluded)
            assert {f.fact_id: f.revision for f in ro.iter_facts()} == {
                k: v["revision"] for k, v in self.model.items()}
        finally:
            ro.close()
        assert sorted(p.name for p in self.db.parent.iterdir()) == before

    @rule()
    def reopen(self):
        self.fs.close()
        self.open()

    # ---- invariants

    @invariant()
    def generation_matches(self):
        assert self.fs.generation() == self.generation

    @invariant()
    def exclusions_match(self):
        assert self.fs.excluded_seqs(SID) == frozenset(self.excluded)
        for s in range(0, TOOL_SEQ + 2):
            assert self.fs.is_excluded(SID, s) == (s in self.excluded)

    @invariant()
    def facts_match_and_integrity(self):
        if not self.db.exists():
            assert not self.model
            return
        assert self.fs.integrity() == []
        got = {f.fact_id: f.revision for f in self.fs.iter_facts()}
        assert got == {k: v["revision"] for k, v in self.model.items()}
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            orphans = db.execute(
                "SELECT count(*) FROM source_refs WHERE fact_id NOT IN (SELECT fact_id FROM facts)"
            ).fetchone()[0]
            assert orphans == 0
            # every fact's evidence is exactly what the model saw succeed, and
            # the model only adds positions that were not excluded at the time:
            # excluded evidence is never attached again
            import orjson

            got_pos: dict[str, set[int]] = {}
            for fid, seqs in db.execute("SELECT fact_id, seqs FROM source_refs"):
                got_pos.setdefault(fid, set()).update(orjson.loads(seqs))
            for fid, seq in db.execute("SELECT fact_id, seq FROM provenance"):
                got_pos.setdefault(fid, set()).add(seq)
            assert got_pos == {k: v["positions"] for k, v in self.model.items()}
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        finally:
            db.close()
        for fid in self.gone:
            assert self.fs.get(fid) is None and self.fs.was_forgotten(fid)


FactMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestFactMachine = FactMachine.TestCase
