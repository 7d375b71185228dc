"""``memctl forget --dry-run`` is exact (issue 11 point 4): it lists every fact
whose status the forget changes -- those whose evidence overlaps the new
exclusions and those that become ``hidden (epoch)`` because their evidence
holds generated messages -- with the status the listing will show afterwards,
and the compaction summaries it makes inert.  Checked on the demo and, over
hypothesis-generated stores, against the statuses read after the real forget."""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.audit import validate_store
from lecode_memctl.core.errors import MemctlError
from lecode_memctl.core.facts import FactStore, Provenance
from lecode_memctl.core.factview import forget_impact, iter_fact_rows
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import canonical_digest

from .builders import SLUG, copy_demo
from .conftest import run_cli, tree_hash

FORGET = "80fa60fdfe856452"      # the demo's corrected indentation fact
EPOCH_VICTIM = "c283ab7d8ed884e4"  # cites an assistant message and a tool result (epoch 1)


def statuses(store_dir: Path) -> dict[str, tuple[str, str | None]]:
    """Every fact's (status, reason) as ``memctl facts`` lists it."""
    store = store_at(store_dir)
    with FactStore.open_readonly(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        return {r["fact_id"]: (r["status"], r["reason"]) for r in iter_fact_rows(fs, ss)}


def preview(store_dir: Path, fact_id: str) -> dict:
    store = store_at(store_dir)
    with FactStore.open_readonly(store.facts_db) as fs:
        return forget_impact(fs, SessionStore(store, exclusions=fs), fact_id)


def predicted(before: dict, impact: dict) -> dict:
    out = {k: v for k, v in before.items() if k != impact["fact_id"]}
    for ch in impact["status_changes"]:
        assert (ch["status"], ch["reason"]) == before[ch["fact_id"]]
        assert (ch["new_status"], ch["new_reason"]) != (ch["status"], ch["reason"])
        out[ch["fact_id"]] = (ch["new_status"], ch["new_reason"])
    return out


def forget(store_dir: Path, fact_id: str) -> None:
    fs = FactStore(store_at(store_dir).facts_db)
    try:
        assert fs.forget(fact_id)
    finally:
        fs.close()


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    return copy_demo(demo_template, tmp_path / "demo")


# ---------------------------------------------------------------- the demo


def test_demo_preview_names_the_fact_that_becomes_hidden_by_epoch(demo):
    impact = preview(demo, FORGET)
    assert impact["suppressed_facts"] == []             # no evidence overlap ...
    assert [(c["fact_id"], c["status"], c["new_status"], c["new_reason"])
            for c in impact["status_changes"]] == [
        (EPOCH_VICTIM, "valid", "hidden", "epoch")]      # ... but the new generation hides it
    before = statuses(demo)
    forget(demo, FORGET)
    assert statuses(demo) == predicted(before, impact)


def test_demo_preview_text_and_json(demo):
    before = tree_hash(demo)
    r = run_cli("--store", str(demo), "forget", FORGET, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "other facts whose status changes: 1" in r.stdout
    assert f"{EPOCH_VICTIM}: valid -> hidden (epoch)" in r.stdout
    assert "other facts suppressed: 0" not in r.stdout
    r = run_cli("--store", str(demo), "forget", FORGET, "--dry-run", "--json")
    doc = orjson.loads(r.stdout)
    assert doc["dry_run"] is True
    assert doc["status_changes"] == [{"fact_id": EPOCH_VICTIM, "status": "valid", "reason": None,
                                      "new_status": "hidden", "new_reason": "epoch"}]
    assert tree_hash(demo) == before                     # a dry run writes nothing


def inert(store_dir: Path) -> set[tuple[str | None, int | None]]:
    """The summaries the deep audit reports inert."""
    found, _ = validate_store(store_at(store_dir), deep=True, parallel=False)
    return {(f.session_id, f.seq) for f in found if f.code == "compact.inert"}


def test_demo_summaries_made_inert_match_the_audit_afterwards(demo):
    """The summaries the preview names are exactly those the deep audit reports
    inert after the real forget and did not before."""
    was = inert(demo)
    impact = preview(demo, FORGET)
    forget(demo, FORGET)
    assert {(s["session_id"], s["seq"]) for s in impact["summaries_inert"]} == inert(demo) - was
    assert impact["summaries_inert"]


def _plant_other_project(store_dir: Path, epochs: tuple[int, ...] = (0, 1, 1)) -> None:
    """A transcript of another project in the store: every reader refuses it
    (refused_project), so nothing in it is this store's to invalidate."""
    from lecode_memctl.core.layout import Store

    ss = SessionStore(Store(store_dir, "other-000000000000"))
    with ss.create("other") as w:
        w.append_message("user", "hello")
        for e in epochs:
            w.append_message("assistant", "hi", epoch=e)


def test_a_session_of_another_project_is_not_counted(demo):
    want = preview(demo, FORGET)
    assert want["generated_messages_invalidated"] > 0
    _plant_other_project(demo)
    got = preview(demo, FORGET)
    assert got["generated_messages_invalidated"] == want["generated_messages_invalidated"]
    assert got == want


def test_every_session_refused_invalidates_nothing(demo):
    """``--slug`` of another project: every transcript is refused (``read`` exits
    4), so the forget invalidates no generated message and makes no summary inert."""
    r = run_cli("--store", str(demo), "--slug", "other-000000000000", "sessions", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.count("refused_project") >= 3
    r = run_cli("--store", str(demo), "--slug", "other-000000000000", "forget", FORGET,
                "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert (doc["generated_messages_invalidated"], doc["summaries_inert"]) == (0, [])


# ---------------------------------------------------------------- generated stores

SID = "gen"

# one transcript: a list of ("user" | "assistant" | "tool" | "undo" | "compact", payload)
record_st = st.one_of(
    st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(0, 1)),  # role, epoch
    st.tuples(st.just("undo"), st.integers(0, 3)),                               # how far back
    st.tuples(st.just("compact"), st.just(0)))
fact_st = st.tuples(st.integers(0, 40), st.integers(0, 3), st.booleans(), st.booleans())


def build(root: Path, sessions: list[list[tuple[str, int]]], facts: list[tuple[int, int, bool, bool]],
          pre_forget: bool) -> tuple[Path, list[str]]:
    """A store with the given transcripts and facts (start index, width, revise?,
    legacy?); returns the store directory and the fact ids."""
    path = root / "config" / "memory" / SLUG
    store = store_at(path)
    ss = SessionStore(store)
    spans: list[tuple[str, int, int]] = []
    for i, recs in enumerate(sessions):
        sid = f"{SID}{i}"
        w = ss.create(sid)
        try:
            w.append_message("user", f"first of {sid}")
            last = 1
            lineage: list[dict] = []
            prior = None
            covered = 1
            for kind, arg in recs:
                if kind == "compact":                       # a cumulative chain, as lecode writes it
                    try:
                        chunk = ss.source_snapshot(sid, covered, last).ref.to_json()
                    except MemctlError:
                        continue                            # nothing new and visible to cover
                    lineage = lineage + [chunk]
                    c = w.append_event("compact", summary="s", lineage=lineage, prior=prior,
                                       model="m", usage=None)
                    prior = {"seq": c, "digest": canonical_digest(ss.records(sid, c, c))}
                    covered = c + 1
                    continue
                if kind == "undo":
                    if last >= 1:
                        w.append_event("undo", target=[max(1, last - arg), last])
                    continue
                if kind == "user":
                    last = w.append_message("user", f"u{last}")
                else:
                    # (raw: epoch 1 is written before the forget that reaches it,
                    # which append_message refuses as ahead of the generation)
                    last = w.append_record({"type": "message", "role": kind,
                                            "content": f"{kind} {last}", "epoch": arg})
        finally:
            w.close()
        spans.extend((sid, s, s) for s in range(1, last + 1))
    ids: list[str] = []
    fs = FactStore(store.facts_db)
    try:
        for n, (start, width, revise, legacy) in enumerate(facts):
            sid, a, _ = spans[start % len(spans)]
            last = max(s for (x, s, _) in spans if x == sid)
            b = min(last, a + width)
            if legacy:
                ids.append(fs.add(f"legacy {n}", provenance=[Provenance(sid, (a,))]).fact.fact_id)
                continue
            try:
                snap = ss.source_snapshot(sid, a, b)
            except MemctlError:
                continue                                    # nothing visible in that range
            fid = fs.add(f"fact {n}", ref=snap.ref).fact.fact_id
            if revise:                                      # share the session's first message
                try:
                    first = ss.source_snapshot(sid, 1, 1).ref
                except MemctlError:
                    first = None                            # undone
                if first is not None:
                    fs.revise(fid, f"fact {n} revised", expected_revision=1, ref=first)
            ids.append(fid)
        if pre_forget and len(ids) > 1:
            fs.forget(ids.pop())
    finally:
        fs.close()
    return path, ids


@pytest.mark.heavy
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sessions=st.lists(st.lists(record_st, min_size=1, max_size=10), min_size=1, max_size=3),
       facts=st.lists(fact_st, min_size=1, max_size=8), pre_forget=st.booleans(),
       pick=st.integers(0, 100))
def test_preview_equals_the_statuses_after_the_real_forget(sessions, facts, pre_forget, pick):
    with tempfile.TemporaryDirectory() as tmp:
        path, ids = build(Path(tmp), sessions, facts, pre_forget)
        if not ids:
            return
        victim = ids[pick % len(ids)]
        before, was_inert = statuses(path), inert(path)
        impact = preview(path, victim)
        assert impact["exists"]
        forget(path, victim)
        assert statuses(path) == predicted(before, impact)
        assert {(s["session_id"], s["seq"]) for s in impact["summaries_inert"]} == \
            inert(path) - was_inert


def test_forget_on_a_terminal_shows_its_impact_before_asking(demo_template, tmp_path, monkeypatch):
    """A fresh-eyes review: the question was asked without the impact (the
    demo's corrected preference fact, hidden by the forget, was not named);
    the dry run's lines now come first, on stderr with the question."""
    import lecode_memctl.cli.cmd_facts as cmd_facts

    from .builders import copy_demo
    from .conftest import run_cli, tree_hash

    store = copy_demo(demo_template, tmp_path / "d")
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    fid = demo_template.facts["verified"]
    dry = run_cli("--store", str(store), "--no-state", "forget", fid, "--dry-run")
    before = tree_hash(store)
    r = run_cli("--store", str(store), "--no-state", "forget", fid, input="n\n")
    assert r.exit_code == 1 and "nothing forgotten" in r.stderr, r.stderr
    assert dry.stdout.strip() and dry.stdout.strip() in r.stderr, (dry.stdout, r.stderr)
    assert r.stderr.index("would forget fact") < r.stderr.index("Forget fact")
    assert tree_hash(store) == before
    r = run_cli("--store", str(store), "--no-state", "forget", fid, input="y\n")
    assert r.exit_code == 0 and f"forgot fact {fid}" in r.stdout + r.stderr, r.stderr
