"""Findings of the review of 2026-12-07 (redact, core): "written since the
plan" told by the clocks, the plan's forgets planned one by one, the
learning of a session whose transcript has no complete header yet."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from .conftest import run_cli

TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"


# -- 1. "written since the plan": which revisions the scan and the plan read,
# never a clock

def _token_store(base: Path) -> Path:
    from lecode_memctl.core import open_project

    store = base / "store"
    with open_project(store=store) as p:
        with p.sessions.create("s1") as w:
            s = w.append_message("user", f"my token is {TOKEN}")
            w.append_message("user", "we use tabs")
        p.remember(f"the token is {TOKEN}", p.sessions.source_snapshot("s1", s, s).ref)
    return store


def test_a_fact_remembered_during_the_scan_by_an_agent_whose_clock_is_behind(tmp_path,
                                                                            monkeypatch):
    """The agent's clock 30 s behind memctl's: a fact it remembered after the
    plan read the facts (created "before" the scan began) is written since
    the plan, exit 4, never "cannot erase ... allowlist" (exit 1).  (Since
    the plan reads every fact's text for the picked values, a fact
    remembered between the scan and the plan is in the plan, and
    forgotten.)"""
    from lecode_memctl.core import facts, open_project, redact

    store = _token_store(tmp_path)
    real_plan, real_now = redact.plan_redaction, facts._now

    def behind() -> str:
        t = datetime.now(UTC) - timedelta(seconds=30)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def plan_then_agent(*a: Any, **k: Any) -> Any:
        plan = real_plan(*a, **k)
        monkeypatch.setattr(facts, "_now", behind)
        try:
            with open_project(store=store) as p:
                p.remember(f"again: {TOKEN}", p.sessions.source_snapshot("s1", 2, 2).ref)
        finally:
            monkeypatch.setattr(facts, "_now", real_now)
        return plan

    monkeypatch.setattr(redact, "plan_redaction", plan_then_agent)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert "1 value is in facts written since the plan" in r.stderr, r.stderr
    assert "cannot erase" not in r.stderr and "allowlist" not in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and TOKEN not in r.stdout + r.stderr
    monkeypatch.undo()
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0


def _kept_by_a_fact_the_plan_read(base: Path, created: str | None) -> Any:
    """redact --session s1 of a store whose fact quoting the token (citing
    s1, not picked) is created at ``created`` (None: as written)."""
    store = _token_store(base)
    if created is not None:
        db = sqlite3.connect(store / "facts.sqlite3")
        db.execute("UPDATE revisions SET created = ?", (created,))
        db.commit()
        db.close()
    return run_cli("--store", str(store), "--no-state", "redact", "--session", "s1",
                   "--yes"), store


def test_a_revision_created_in_the_future_is_no_fact_written_since_the_plan(tmp_path):
    """A revision whose ``created`` is ahead of memctl's clock (another
    clock, an offset) that the scan and the plan read is what it is: the run
    ends as with any other ``created``, never a false exit 4 whose rerun
    says "nothing to redact" with the value still there."""
    ref, _ = _kept_by_a_fact_the_plan_read(tmp_path / "a", None)
    for created in ("2027-01-01T00:00:00.000Z", "2026-12-07T23:59:59.000+05:00",
                    "9999-12-31T23:59:59.999Z"):
        r, store = _kept_by_a_fact_the_plan_read(tmp_path / created[:4], created)
        assert (r.exit_code, r.stdout) == (ref.exit_code, ref.stdout), (created, r.stderr)
        assert "written since the plan" not in r.stderr, (created, r.stderr)
        assert "Traceback" not in r.stderr and TOKEN not in r.stdout + r.stderr
        # (the fact quoting the picked value is forgotten with the rest: a
        # value is erased wherever it is)
        assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0


# -- 3. list_facts(current_session_id=X): X's transcript with no complete
# header yet is no transcript yet

def test_learning_is_null_while_the_current_sessions_header_is_still_written(tmp_path):
    """An empty transcript, or one whose header line has no newline yet (an
    append in flight, never an error): learning null, the facts listed; a
    transcript refused for another reason still raises."""
    import os

    import pytest

    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import MemctlError

    (tmp_path / "proj").mkdir()
    with open_project(tmp_path / "proj", config_dir=tmp_path / "cfg") as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", "We use tabs.")
        p.remember("We use tabs.", p.sessions.source_snapshot("s1", 1, 1).ref)
        sd = Path(p.store.path) / "sessions"
        for data in (b"", b'{"seq":0,"type":"sess',
                     b'{"seq":0,"type":"session","format":1,"session_id":"cur"'):
            (sd / "cur.jsonl").write_bytes(data)
            d = p.list_facts(current_session_id="cur")
            assert (d["total"], d["learning"]) == (1, None), data
        refused = {
            b'{"seq":0,"type":"session","format":1,"session_id":"cur","project":'
            b'"other-0123456789ab","created":"2026-12-07T00:00:00Z"}\n': "another project",
            b"not json\n": "is not a format-1 session header",
        }
        for data, said in refused.items():
            (sd / "cur.jsonl").write_bytes(data)
            with pytest.raises(MemctlError) as e:
                p.list_facts(current_session_id="cur")
            assert e.value.exit_code == 4 and said in str(e.value), (data, e.value)
        (sd / "cur.jsonl").unlink()
        os.symlink(sd / "s1.jsonl", sd / "cur.jsonl")
        with pytest.raises(MemctlError) as e:
            p.list_facts(current_session_id="cur")
        assert "symbolic link" in str(e.value)


# -- 2. the plan's forgets planned together: each cited session's source
# rows read once, not once per forget

def _plans_each_and_together(store: Path, fact_ids: list[str]) -> tuple[list, list]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    fs = FactStore.open_readonly(store_at(store).facts_db)
    try:
        return [fs.plan_forget(f) for f in fact_ids], fs.plan_forgets(fact_ids)
    finally:
        fs.close()


def test_plan_forgets_is_plan_forget_of_each_on_a_built_store(tmp_path):
    from .test_redact_1207d import _build

    # (seqs 1-6 of s0 and s1; facts sharing evidence, one forgotten)
    ops = [("fact", 0, 1, 1), ("fact", 0, 1, 3), ("fact", 1, 1, 1), ("fact", 1, 3, 3),
           ("fact", 0, 3, 4), ("fact", 0, 6, 6), ("forget", 1), ("fact", 1, 2, 5)]
    store, facts = _build(tmp_path, ops, 2)
    each, together = _plans_each_and_together(store, facts + facts[:2])
    assert together == each
    assert any(p.suppressed_facts for p in each) and any(not p.exists for p in each), each


def test_plan_forgets_raises_what_the_first_plan_forget_with_an_error_raises(tmp_path):
    import pytest

    from lecode_memctl.core.errors import MemctlError
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    from .test_redact_1207d import _build

    store, facts = _build(tmp_path, [("fact", 0, 1, 1), ("fact", 0, 2, 2)], 1)
    fs = FactStore.open_readonly(store_at(store).facts_db)
    try:
        for bad in ("0" * 16, "not an id"):
            with pytest.raises(MemctlError) as each:
                fs.plan_forget(bad)
            with pytest.raises(MemctlError) as together:
                fs.plan_forgets([facts[0], bad, facts[1]])
            assert (type(together.value), str(together.value)) == (type(each.value),
                                                                   str(each.value))
    finally:
        fs.close()


def test_plan_forgets_is_plan_forget_of_each_on_random_stores(tmp_path):
    import itertools

    from hypothesis import HealthCheck, given, settings, strategies as st

    from .test_redact_1207d import _build

    counter = itertools.count()
    op = st.one_of(
        st.tuples(st.just("msg"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("fact"), st.integers(0, 2), st.integers(1, 6), st.integers(1, 6)),
        st.tuples(st.just("forget"), st.integers(0, 20)),
    )

    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(op, min_size=3, max_size=20), st.integers(1, 3),
           st.lists(st.integers(0, 30), min_size=1, max_size=8))
    def check(ops, sessions_n, todo_idx):
        base = tmp_path / f"h{next(counter)}"
        base.mkdir()
        ops = [o if o[0] == "forget" else (o[0], o[1] % sessions_n, *o[2:]) for o in ops]
        store, facts = _build(base, ops, sessions_n)
        if not facts:
            return
        todo = [facts[i % len(facts)] for i in todo_idx]
        each, together = _plans_each_and_together(store, todo)
        assert together == each

    check()


def test_the_plan_reads_a_sessions_source_rows_once_however_many_facts_cite_it(tmp_path,
                                                                             monkeypatch):
    """One session, N token facts and N plain facts: each forget's plan read
    every source row of the session (N forgets x 2N rows: 136.8 s at
    N=4000); now the plan of all the forgets reads them once."""
    from lecode_memctl.core import facts as facts_mod, open_project

    n = 12
    store = tmp_path / "store"
    with open_project(store=store) as p:
        with p.sessions.create("s0") as w:
            for i in range(n):
                w.append_message("user", f"my token is {TOKEN[:-2]}{i:02d}")
                w.append_message("user", f"plain fact {i}")
        for i in range(n):
            for seq, text in ((2 * i + 1, f"the token is {TOKEN[:-2]}{i:02d}"),
                              (2 * i + 2, f"plain fact {i}")):
                p.remember(text, p.sessions.source_snapshot("s0", seq, seq).ref)
    parsed: list[str] = []
    real = facts_mod._seqs_from_json

    def counted(raw: str, where: str) -> Any:
        parsed.append(where)
        return real(raw, where)

    monkeypatch.setattr(facts_mod, "_seqs_from_json", counted)
    r = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert len(orjson.loads(r.stdout)["plan"]["forget_facts"]) == n
    # (each forgotten fact's own source row, read by its plan, and the
    # session's 2N rows once; before: N x 2N more)
    assert len(parsed) <= 2 * n + n + 2 * n, len(parsed)


def test_a_first_fact_written_between_the_scan_and_the_plan_is_written_since(tmp_path,
                                                                              monkeypatch):
    """A store with transcripts and no facts database yet: the scan read no
    revision (not "unknown"), so the agent's first fact, remembered between
    the scan and the plan, was one written since the plan -- exit 4, never
    "redacted", exit 0, with the token still in that fact (code review).
    Since the plan reads every fact's text for the picked values, it is in
    the plan and forgotten: exit 0, nothing left."""
    from lecode_memctl.core import open_project, secrets

    from .conftest import run_cli

    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    store = tmp_path / "store"
    with open_project(store=store) as p, p.sessions.create("s1") as w:
        w.append_message("user", f"my token is {token}")
        w.append_message("user", "we use tabs")
    real = secrets.scan_store

    def scan_then_agent(*a, **k):  # noqa: ANN002,ANN003,ANN202
        rep = real(*a, **k)
        with open_project(store=store) as p:
            p.remember(f"again: {token}", p.sessions.source_snapshot("s1", 2, 2).ref)
        return rep

    monkeypatch.setattr(secrets, "scan_store", scan_then_agent)
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    assert "1 fact(s) forgotten" in r.stdout, r.stdout
    assert "written since the plan" not in r.stderr
    monkeypatch.setattr(secrets, "scan_store", real)
    assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0
