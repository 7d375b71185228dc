"""A code review of the store-contract and compaction changes of
2026-12-07: the places that still decided by a copy of a rule."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli


def _store(base: Path):
    from lecode_memctl.core.layout import store_at

    return store_at(base / "memory" / "demo-000000000000")


def _deep(store: Path) -> list[tuple[str, object, object]]:
    r = run_cli("--store", str(store), "--no-state", "validate", "--deep", "--json")
    assert "Traceback" not in r.stderr, r.stderr
    return [(f["code"], f.get("seq"), f.get("reason")) for f in orjson.loads(r.stdout)["findings"]]


def test_a_raw_message_beyond_a_double_still_counts_for_the_compaction_cutoff(tmp_path):
    """A record holding 1e400 is a record to every reader (it has no
    digest): the cutoff check took it for no message, and four raw messages
    were compact.few_raw."""
    from lecode_memctl.core.sessions import SessionStore

    st = _store(tmp_path)
    ss = SessionStore(st)
    with ss.create("s1") as w:
        w.append_message("user", "hi")
        w.append_message("assistant", "ok", epoch=0)
        for i in range(4):
            w.append_message("user" if i % 2 == 0 else "assistant", f"more {i}",
                             **({} if i % 2 == 0 else {"epoch": 0}))
        ref = ss.source_snapshot("s1", 1, 2).ref.to_json()
        w.append_event("compact", summary="S", lineage=[ref], prior=None, model="m",
                       usage={"input_tokens": 1, "output_tokens": 1, "cost": 0.0})
    store = Path(st.path)
    assert _deep(store) == []
    f = store / "sessions" / "s1.jsonl"
    f.write_bytes(f.read_bytes().replace(b'"more 1"', b'"more 1","n":1e400'))
    assert _deep(store) == []


@pytest.mark.parametrize("epoch", [b"", b',"epoch":0'], ids=["no-epoch", "epoch-0"])
def test_redact_counts_the_generated_messages_forget_counts(tmp_path, epoch):
    """At generation 0 an assistant message written before epochs is left
    behind by the new generation: forget --dry-run counted it, redact's plan
    did not (its byte filter parsed only lines naming an epoch)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = _store(tmp_path)
    facts = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=facts)
    url = "postgres://deploy:Xk29fjQpLm3nZ7@db.internal:5432/app"
    with ss.create("s1") as w:
        w.append_message("user", f"the deploy database is {url}")
    with open(Path(st.path) / "sessions" / "s1.jsonl", "ab") as fh:
        fh.write(b'{"seq":2,"type":"message","role":"assistant","content":"legacy reply"'
                 + epoch + b'}\n')
    fid = facts.add(f"The deploy database URL is {url}",
                    ref=SourceRef("s1", (1,), canonical_digest(ss.records("s1", 1, 1)))
                    ).fact.fact_id
    facts.close()
    store = str(st.path)
    forget = orjson.loads(run_cli("--store", store, "--no-state", "forget", fid, "--dry-run",
                                  "--json").stdout)
    plan = orjson.loads(run_cli("--store", store, "--no-state", "redact", "--dry-run",
                                "--json").stdout)["plan"]
    assert plan["forget_facts"] == [fid]
    assert forget["generated_messages_invalidated"] == 1
    assert plan["generated_messages_invalidated"] == 1


@pytest.mark.parametrize("mark", [b'"synthetic":1', b'"synthetic":"true"', b'"synthetic":false'])
def test_correct_takes_a_user_message_the_contract_does_not_mark_synthetic(tmp_path, mark):
    """correct refused a user message with any truthy "synthetic" as a
    synthetic notification; the contract's mark is the JSON literal true
    (is_generated), as every other reader takes it."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = _store(tmp_path)
    facts = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=facts)
    with ss.create("s1") as w:
        w.append_message("user", "we use tabs")
    with open(Path(st.path) / "sessions" / "s1.jsonl", "ab") as fh:
        fh.write(b'{"seq":2,"type":"message","role":"user","content":"actually we use spaces",'
                 + mark + b'}\n')
    fid = facts.add("We use tabs.", ref=SourceRef("s1", (1,), canonical_digest(
        ss.records("s1", 1, 1)))).fact.fact_id
    facts.close()
    r = run_cli("--store", str(st.path), "--no-state", "correct", fid, "1", "s1", "2", "2",
                "We use spaces.", "--yes")
    assert r.exit_code == 0, r.stderr


def test_correct_still_refuses_a_synthetic_notification(tmp_path):
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = _store(tmp_path)
    facts = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=facts)
    with ss.create("s1") as w:
        w.append_message("user", "we use tabs")
        w.append_message("user", "build finished: we use spaces", synthetic=True, epoch=0)
    fid = facts.add("We use tabs.", ref=SourceRef("s1", (1,), canonical_digest(
        ss.records("s1", 1, 1)))).fact.fact_id
    facts.close()
    r = run_cli("--store", str(st.path), "--no-state", "correct", fid, "1", "s1", "2", "2",
                "We use spaces.", "--yes")
    assert r.exit_code == 4, r.stderr
    assert "synthetic notification" in r.stderr
