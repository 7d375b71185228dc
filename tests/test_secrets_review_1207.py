"""Findings of the review of 2026-12-07's commits on ``secrets`` and ``redact``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from .conftest import run_cli

LIVE = "xoxb-205755947090-0547499525255-2Mq"                          # 35 chars
OTHER = "xoxb-205755947090-0547499525255-2MqtYygX0bKRVitGoPZrpulR"    # 56: begins with LIVE


def _fact_store(base: Path, *texts: str) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T09:00:00Z") as w:
        for i, _t in enumerate(texts):
            w.append_message("user", f"m{i}")
    for i, t in enumerate(texts, 1):
        ref = SourceRef("s1", (i,), canonical_digest(sessions.records("s1", i, i)))
        facts.add(t, ref=ref)
    facts.close()
    return st.path


def _secrets(store: Path, *args: str) -> tuple[int, list[dict]]:
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1", *args)
    assert r.exit_code in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r.exit_code, [f for f in map(orjson.loads, r.stdout.splitlines())
                         if f.get("type") == "secret"]


# -- 1. a different token that begins with a live fact's value is reported

def test_a_longer_token_in_a_free_page_beginning_with_a_live_fact_value_is_reported(tmp_path):
    store = _fact_store(tmp_path, f"the CI test bot token is {LIVE}.")
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("PRAGMA secure_delete = OFF")
    db.execute("CREATE TABLE junk (t TEXT)")
    db.execute("INSERT INTO junk VALUES (?)", (f"prod bot token: {OTHER}",))
    db.commit()
    db.execute("DROP TABLE junk")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert OTHER.encode() in (store / "facts.sqlite3").read_bytes()
    code, found = _secrets(store)
    assert [(f["kind"], f["length"]) for f in found if f["kind"] == "fact"] == [("fact", 35)]
    allow = tmp_path / "allow"
    allow.write_text(next(f["hash"] for f in found if f["kind"] == "fact") + "\n")
    code, found = _secrets(store, "--allowlist", str(allow))
    assert code == 1
    assert [(f["kind"], f["length"]) for f in found] == [("database", 56)], found
    assert all(OTHER not in orjson.dumps(f).decode() for f in found)
