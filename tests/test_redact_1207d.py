"""Findings of the concurrency review of 2026-12-07 on ``memctl redact``:
the plan's preview of its forgets took the square of their number, and a
credential the agent saved while redact ran was "cannot erase"."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import run_cli

TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"


# -- 1. the plan previews all its forgets together, not one by one

def _old_union(fs: Any, sessions: Any, todo: list[str]) -> tuple[list[str], list[dict]]:
    """The plan's answers as they were made before 2026-12-07 (the slow
    reference): the union of ``forget --dry-run``'s of each forget."""
    from lecode_memctl.core.factview import forget_impact

    suppressed: set[str] = set()
    inert: dict[tuple[str, Any], dict] = {}
    for fid in todo:
        doc = forget_impact(fs, sessions, fid)
        suppressed.update(doc["suppressed_facts"])
        for s in doc["summaries_inert"]:
            inert.setdefault((s["session_id"], s["seq"]), s)
    return (sorted(suppressed - set(todo)),
            [inert[k] for k in sorted(inert, key=lambda k: (k[0], str(k[1])))])


def _build(base: Path, ops: list[tuple], sessions_n: int) -> tuple[Path, list[str]]:
    """A store from ``ops``: messages (user or generated, stamped with the
    generation), facts citing spans (overlapping, shared evidence),
    compactions whose lineage cites spans of any session, forgets."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import MemctlError

    store = base / "store"
    facts: list[str] = []
    with open_project(store=store) as p:
        ss = p.sessions
        sids = [f"s{i}" for i in range(sessions_n)]
        for sid in sids:
            with ss.create(sid) as w:       # (seqs 1-6: the spans ops cite)
                for k, role in enumerate(("user", "assistant", "user", "user", "assistant",
                                          "user")):
                    w.append_message(role, f"{role} {k} of {sid}",
                                     **({"epoch": p.generation()} if role != "user" else {}))
        n = itertools.count()
        for op in ops:
            kind = op[0]
            try:
                if kind == "msg":
                    _k, si, generated = op
                    with ss.writer(sids[si]) as w:
                        if generated:
                            w.append_message("assistant", f"said {next(n)}", epoch=p.generation())
                        else:
                            w.append_message("user", f"told {next(n)}")
                elif kind == "fact":
                    _k, si, a, b = op
                    ref = ss.source_snapshot(sids[si], a, max(a, b)).ref
                    facts.append(p.remember(f"fact {next(n)}", ref).fact.fact_id)
                elif kind == "compact":
                    _k, si, spans = op
                    lineage = [ss.source_snapshot(sids[sj], a, max(a, b)).ref.to_json()
                               for sj, a, b in spans]
                    with ss.writer(sids[si]) as w:
                        w.append_event("compact", summary=f"sum {next(n)}", lineage=lineage,
                                       prior=None, model="m", usage=None)
                elif kind == "forget" and facts:
                    p.forget(facts[op[1] % len(facts)])
            except MemctlError:
                continue        # (a span not there, an event cited, evidence excluded)
    return store, facts


def _impacts(store: Path, todo_idx: list[int], facts: list[str]
             ) -> tuple[tuple[list[str], list[dict]], tuple[list[str], list[dict]]]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.factview import forgets_impact
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(store)
    fs = FactStore.open_readonly(st.facts_db)
    try:
        todo = list(dict.fromkeys(facts[i % len(facts)] for i in todo_idx))
        todo = [f for f in todo if fs.get(f) is not None]
        sessions = SessionStore(st, exclusions=fs)
        old = _old_union(fs, sessions, todo)
        got = forgets_impact(fs, sessions, todo)
        new = (got["suppressed_facts"], got["summaries_inert"])
    finally:
        fs.close()
    return old, new


def test_forgets_impact_is_the_union_of_each_forgets_on_a_built_store(tmp_path):
    # (seqs 1-6 of s0 and s1: user, assistant, user, user, assistant, user)
    ops = [("fact", 0, 1, 1), ("fact", 0, 3, 4), ("fact", 1, 1, 1), ("fact", 1, 3, 3),
           ("fact", 0, 1, 1), ("compact", 0, [(0, 3, 4)]),
           ("compact", 1, [(1, 1, 1), (0, 6, 6)]), ("forget", 3), ("msg", 0, True),
           ("fact", 0, 6, 6)]
    store, facts = _build(tmp_path, ops, 2)
    old, new = _impacts(store, [0, 1, 2], facts)
    assert new == old
    assert old[0] and old[1], old       # (the store does exercise both answers)


@pytest.mark.heavy
def test_forgets_impact_is_the_union_of_each_forgets_on_random_stores(tmp_path):
    from hypothesis import HealthCheck, given, settings, strategies as st

    counter = itertools.count()
    span = st.tuples(st.integers(0, 2), st.integers(1, 6), st.integers(1, 6))
    op = st.one_of(
        st.tuples(st.just("msg"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("fact"), st.integers(0, 2), st.integers(1, 6), st.integers(1, 6)),
        st.tuples(st.just("compact"), st.integers(0, 2), st.lists(span, min_size=1, max_size=3)),
        st.tuples(st.just("forget"), st.integers(0, 20)),
    )

    @settings(max_examples=80, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(op, min_size=6, max_size=30), st.integers(1, 3),
           st.lists(st.integers(0, 30), min_size=1, max_size=6))
    def check(ops, sessions_n, todo_idx):
        base = tmp_path / f"h{next(counter)}"
        base.mkdir()
        ops = [o if o[0] == "forget" else (o[0], o[1] % sessions_n, *o[2:]) for o in ops]
        ops = [(o[0], o[1], [(sj % sessions_n, a, b) for sj, a, b in o[2]])
               if o[0] == "compact" else o for o in ops]
        store, facts = _build(base, ops, sessions_n)
        if not facts:
            return
        old, new = _impacts(store, todo_idx, facts)
        assert new == old

    check()


def test_the_plan_reads_each_session_once_however_many_facts_it_forgets(tmp_path, monkeypatch):
    """Before, each forget's preview read every session (and listed every
    fact twice): 400 forgets, 52 s."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.sessions import SessionStore

    store = tmp_path / "store"
    with open_project(store=store) as p:
        for i in range(6):
            with p.sessions.create(f"s{i}") as w:
                s = w.append_message("user", f"my token is {TOKEN[:-2]}{i:02d}")
                s2 = w.append_message("user", f"plain fact {i}")
            p.remember(f"the token is {TOKEN[:-2]}{i:02d}",
                       p.sessions.source_snapshot(f"s{i}", s, s).ref)
            p.remember(f"plain fact {i}", p.sessions.source_snapshot(f"s{i}", s2, s2).ref)
    scans: Counter[str] = Counter()
    real = SessionStore.scan

    def counted(self, session_id, *a, **k):
        scans[session_id] += 1
        return real(self, session_id, *a, **k)

    monkeypatch.setattr(SessionStore, "scan", counted)
    r = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    plan = orjson.loads(r.stdout)["plan"]
    assert len(plan["forget_facts"]) == 6
    assert scans and max(scans.values()) == 1, scans



def test_an_epoch_ahead_of_the_generation_is_hidden_by_all_the_forgets_together(tmp_path):
    """The one case where the union of each forget's preview differs: a
    generated message whose epoch is ahead of the generation (by hand; a
    writer refuses it; validate's session.epoch_ahead).  Two forgets raise
    the generation past it, one does not: the plan says the summary citing
    it is made inert, and after the forgets it is."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.factview import forgets_impact
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = tmp_path / "store"
    with open_project(store=store) as p:
        with p.sessions.create("s0") as w:
            w.append_message("user", "one")
            w.append_message("user", "two")
        a = p.remember("fact one", p.sessions.source_snapshot("s0", 1, 1).ref).fact.fact_id
        b = p.remember("fact two", p.sessions.source_snapshot("s0", 2, 2).ref).fact.fact_id
        path = Path(p.sessions.path("s0"))
    with open(path, "ab") as f:
        f.write(orjson.dumps({"seq": 3, "type": "message", "role": "assistant",
                              "content": "ahead", "epoch": 1}) + b"\n")
    with open_project(store=store) as p:
        ref = p.sessions.source_snapshot("s0", 3, 3).ref
        with p.sessions.writer("s0") as w:
            w.append_event("compact", summary="s", lineage=[ref.to_json()], prior=None,
                           model="m", usage=None)
    st = store_at(store)
    fs = FactStore.open_readonly(st.facts_db)
    try:
        ss = SessionStore(st, exclusions=fs)
        assert _old_union(fs, ss, [a, b]) == ([], [])
        got = forgets_impact(fs, ss, [a, b])
        assert (got["suppressed_facts"], got["summaries_inert"]) == \
            ([], [{"session_id": "s0", "seq": 4}])
    finally:
        fs.close()
    with open_project(store=store) as p:
        p.forget(a)
        p.forget(b)
        (after,) = p.sessions.validate_many([ref], purpose="working").values()
    assert (after.status, after.reason) == ("hidden", "epoch")

# -- 2. a credential the agent saves while redact runs: changed since the plan

def _token_store(base: Path) -> Path:
    from lecode_memctl.core import open_project

    store = base / "store"
    with open_project(store=store) as p:
        with p.sessions.create("s1") as w:
            s = w.append_message("user", f"my token is {TOKEN}")
            w.append_message("user", "we use tabs")
        p.remember(f"the token is {TOKEN}", p.sessions.source_snapshot("s1", s, s).ref)
    return store


def _agent_remembers_after_the_plan(monkeypatch, store: Path) -> list[str]:
    """Between the plan and its apply, the agent remembers a new fact
    quoting a planned value (as it did while `redact --yes` ran)."""
    from lecode_memctl.core import open_project, redact

    real = redact.plan_redaction
    new: list[str] = []

    def plan_then_agent(*a: Any, **k: Any) -> Any:
        plan = real(*a, **k)
        with open_project(store=store) as p:
            ref = p.sessions.source_snapshot("s1", 2, 2).ref
            new.append(p.remember(f"again: {TOKEN}", ref).fact.fact_id)
        return plan

    monkeypatch.setattr(redact, "plan_redaction", plan_then_agent)
    return new


def test_a_value_in_a_fact_written_since_the_plan_is_changed_meanwhile_exit_4(tmp_path,
                                                                              monkeypatch):
    store = _token_store(tmp_path)
    new = _agent_remembers_after_the_plan(monkeypatch, store)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and TOKEN not in r.stdout + r.stderr
    assert "cannot erase" not in r.stderr and "allowlist" not in r.stderr, r.stderr
    line, = r.stderr.strip().splitlines()
    assert "1 value is in facts written since the plan" in line, line
    assert "run redact again" in line, line
    # (the fact the plan did not show was not forgotten)
    from lecode_memctl.core import open_project

    with open_project(store=store) as p:
        assert p.facts.get(new[0]) is not None
    monkeypatch.undo()
    # a rerun forgets it, erases the value: exit 0, nothing left
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0


def test_changed_since_the_plan_with_json_is_the_error_document(tmp_path, monkeypatch):
    store = _token_store(tmp_path)
    _agent_remembers_after_the_plan(monkeypatch, store)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 4, (r.stdout, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    assert doc["type"] == "error", doc
    assert doc["error"]["code"] == "conflict", doc
    assert doc["error"]["exit_code"] == 4
    assert "in facts written since the plan" in doc["error"]["message"]
    assert TOKEN not in r.stdout + r.stderr


def test_a_value_a_live_row_keeps_is_still_kept_with_a_new_fact_holding_it(tmp_path,
                                                                          monkeypatch):
    """Only a value that facts written since the plan alone hold is changed
    meanwhile: one a live row the plan read also holds (here the exclusions
    naming the session SID_KEY, to a plan blind to them) is still "cannot
    erase", reason database, exit 1."""
    from lecode_memctl.core import open_project, redact

    from .test_redact_kept import SID_KEY, _forgotten_and_deleted

    store = _forgotten_and_deleted(tmp_path)
    with open_project(store=store) as p, p.sessions.create("s5") as w:
        w.append_message("user", "we use tabs")
    monkeypatch.setattr(redact, "_live_session_ids", lambda fs: [])
    real = redact.plan_redaction

    def plan_then_agent(*a: Any, **k: Any) -> Any:
        plan = real(*a, **k)
        with open_project(store=store) as p:
            p.remember(f"the key is {SID_KEY}", p.sessions.source_snapshot("s5", 1, 1).ref)
        return plan

    monkeypatch.setattr(redact, "plan_redaction", plan_then_agent)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    (kept,) = orjson.loads(r.stdout_bytes)["result"]["kept"]
    assert kept["reasons"] == ["database"]
    assert "cannot erase 1 value" in r.stderr


def test_a_fact_remembered_after_the_scan_before_the_plan_is_forgotten(tmp_path,
                                                                      monkeypatch):
    """The race as it ran: the scan had read the facts when the agent
    remembered one.  The plan, read after, has it: since it reads every
    fact's text for the picked values (not only the scan's findings), it
    lists the fact among its forgets and the run forgets it, exit 0 (it was
    "written since the plan", exit 4, while the plan showed only the
    scan's)."""
    from lecode_memctl.core import open_project, secrets

    store = _token_store(tmp_path)
    real = secrets.scan_store

    def scan_then_agent(*a: Any, **k: Any) -> Any:
        report = real(*a, **k)
        with open_project(store=store) as p:
            p.remember(f"again: {TOKEN}", p.sessions.source_snapshot("s1", 2, 2).ref)
        return report

    monkeypatch.setattr(secrets, "scan_store", scan_then_agent)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    assert len(doc["plan"]["forget_facts"]) == 2
    assert sorted(doc["result"]["forgotten"]) == sorted(doc["plan"]["forget_facts"])
    assert "cannot erase" not in r.stderr and "written since" not in r.stderr
    monkeypatch.undo()
    assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0
