"""``memctl redact`` never rewrites the structure the store contract defines.

A found value can be a common word: the basic-auth detector finds the
password ``user`` in ``https://deploy:user@mirror.example.com/repo``, and
``content`` in ``https://ci:content@...``.  Before 2026-12-07 redact
replaced the value in every string and key of the transcript: every
message's ``"role":"user"`` (or its ``"content"`` key) became the marker,
the transcript was no transcript any more (ROLE one of user, assistant,
tool, system) and every fact citing the file went stale.  Now the keys the
contract names for each record type (and for a content part, a tool call,
a lineage ref, ``prior``, ``usage``) are never rewritten, nor the values
that say what a record is (``role``, an event's ``event``, a part's
``type``, besides seq, type and the header's fields); the value is replaced
everywhere else, and, left in those places, it is listed under ``kept``.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

ROLES = {"user", "assistant", "tool", "system"}


def _build(base: Path, password: str, third: dict, extra: list[dict] | None = None):
    """A store with one transcript: four messages, the third holding the
    URL with ``password`` (``third``: its record, the URL spelled ``@URL@``),
    and two facts citing the first and the fourth."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T09:00:00Z"):
        pass
    url = f"https://deploy:{password}@mirror.example.com/repo"
    third = orjson.loads(orjson.dumps(third).replace(b"@URL@", url.encode()))
    records = [
        {"seq": 1, "type": "message", "role": "user", "content": "We deploy with make deploy."},
        {"seq": 2, "type": "message", "role": "assistant", "content": "Noted.", "epoch": 0},
        {"seq": 3, **third},
        {"seq": 4, "type": "message", "role": "user", "content": "Tests run with pytest -q."},
    ]
    for i, rec in enumerate(extra or []):
        records.append({"seq": 5 + i, **rec})
    path = st.path / "sessions" / "s1.jsonl"
    with path.open("ab") as f:
        for rec in records:
            line = rec.pop("_raw", None)
            f.write((line.encode() if line else orjson.dumps(rec)) + b"\n")
    ids = []
    for seq in (1, 4):
        ref = SourceRef("s1", (seq,), canonical_digest(sessions.records("s1", seq, seq)))
        ids.append(facts.add(records[seq - 1]["content"], ref=ref).fact.fact_id)
    facts.close()
    return st, path, ids


def _statuses(st) -> dict[str, str]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore

    fs = FactStore.open_readonly(st.facts_db)
    try:
        ss = SessionStore(st, fs)
        return {f.fact_id: ss.validate_source(f.source, "durable").status
                for f in fs.iter_facts() if f.source is not None}
    finally:
        fs.close()


def _redact(st):
    r = run_cli("--store", str(st.path), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r, orjson.loads(r.stdout_bytes)


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


MESSAGE = {"type": "message", "role": "user", "content": "the mirror is @URL@"}


@pytest.mark.parametrize("password", ["user", "content"])
def test_a_common_word_is_not_replaced_in_roles_and_keys(tmp_path, password):
    st, path, ids = _build(tmp_path, password, MESSAGE)
    before = path.read_bytes().splitlines()
    assert set(_statuses(st).values()) == {"valid"}
    r, doc = _redact(st)
    after = path.read_bytes().splitlines()
    # the credential's occurrence in the URL is replaced ...
    assert f"deploy:{password}@".encode() not in after[3]
    assert b"deploy:[REDACTED:basic-auth-credentials:" in after[3]
    # ... and nothing else: every other record keeps its bytes, the
    # rewritten one its role and its keys
    assert [a for i, a in enumerate(after) if i != 3] == \
        [b for i, b in enumerate(before) if i != 3]
    recs = _lines(path)
    assert all(rec["role"] in ROLES and "content" in rec for rec in recs[1:])
    assert list(recs[3]) == ["seq", "type", "role", "content"] and recs[3]["role"] == "user"
    # the transcript is still one, and the unrelated facts keep validating
    assert _statuses(st) == {ids[0]: "valid", ids[1]: "valid"}
    assert doc["plan"]["stale_facts"] == []
    assert doc["plan"]["files"][0]["records"] == [3]
    v = run_cli("--store", str(st.path), "--no-state", "validate", "--json")
    assert v.exit_code == 0 and orjson.loads(v.stdout)["totals"]["error"] == 0, v.stdout
    # the value stays in the file, in the contract's structure: listed as
    # kept (exit 1), never said to be erased
    assert [k["detector"] for k in doc["plan"]["kept"]] == ["basic-auth-credentials"]
    assert doc["result"]["kept"] == doc["plan"]["kept"]
    assert r.exit_code == 1
    assert password not in r.stdout + r.stderr.replace("credentials", "")
    # and secrets finds no credential any more
    s = run_cli("--store", str(st.path), "--no-state", "secrets")
    assert s.exit_code == 0, s.stdout


def test_parts_tool_calls_and_events_keep_their_keys_and_kinds(tmp_path):
    """The keys of a content part, a tool call, an event (and the values
    ``type`` of a part and ``event`` of an event) are structure; a key the
    contract does not name (inside a tool call's arguments, say) is not."""
    third = {"type": "message", "role": "assistant", "epoch": 0,
             "content": [{"type": "text", "text": "the mirror is @URL@"}],
             "tool_calls": [{"id": "c1", "name": "fetch",
                             "arguments": {"text": "@URL@", "url": "text"}}]}
    extra = [{"type": "event", "event": "memory_usage", "purpose": "learning",
              "model": "text", "usage": {"input_tokens": 1, "output_tokens": 2, "cost": None}}]
    st, path, ids = _build(tmp_path, "text", third, extra)
    r, doc = _redact(st)
    recs = _lines(path)
    part = recs[3]["content"][0]
    assert part["type"] == "text" and list(part) == ["type", "text"]
    assert "deploy:text@" not in part["text"] and "[REDACTED:" in part["text"]
    call = recs[3]["tool_calls"][0]
    assert list(call) == ["id", "name", "arguments"]
    # free-form arguments: the value is replaced in their keys and strings
    marker = part["text"].split("deploy:")[1].split("@")[0]
    assert list(call["arguments"]) == [marker, "url"] and call["arguments"]["url"] == marker
    # an event's keys are not replaced; its free string ``text`` neither:
    # a value of 4 characters is erased only where a detector found it
    # (review rv7, 2026-12-07; before, recs[5]["model"] became the marker)
    assert recs[5]["model"] == "text" and "usage" in recs[5]
    assert recs[5]["event"] == "memory_usage"
    assert _statuses(st) == {ids[0]: "valid", ids[1]: "valid"}
    assert doc["plan"]["files"][0]["records"] == [3]


def test_a_clear_event_keeps_its_name(tmp_path):
    st, path, ids = _build(tmp_path, "clear", MESSAGE,
                           [{"type": "event", "event": "clear"}])
    r, doc = _redact(st)
    recs = _lines(path)
    assert recs[5] == {"seq": 5, "type": "event", "event": "clear"}
    assert "deploy:clear@" not in recs[3]["content"]
    # (``clear``, 5 characters, is erased only where a detector found it:
    # the event's name is no place it was found, nothing kept; review rv7)
    assert doc["plan"]["kept"] == []
    assert _statuses(st) == {ids[0]: "valid", ids[1]: "valid"}


@pytest.mark.parametrize("password", ["user", "content"])
def test_a_record_rewritten_in_place_keeps_its_structure_too(tmp_path, password):
    """A record orjson cannot write back as written (a number beyond a
    double here) keeps its bytes but for the strings holding the value: the
    same structure is kept there."""
    raw = ('{"seq":3,"type":"message","role":"user","content":"the mirror is '
           f'https://deploy:{password}@mirror.example.com/repo",'
           f'"meta":{{"{password}":"{password}"}},"n":1e400}}')
    st, path, ids = _build(tmp_path, password, {**MESSAGE, "_raw": raw})
    r, doc = _redact(st)
    line = path.read_bytes().splitlines()[3]
    assert line.startswith(b'{"seq":3,"type":"message","role":"user","content":"the mirror is '
                           b'https://deploy:[REDACTED:basic-auth-credentials:')
    assert line.endswith(b'"n":1e400}')
    # a key the contract does not name is rewritten, as its value
    assert b'"meta":{"[REDACTED:basic-auth-credentials:' in line
    assert line.count(b"[REDACTED:") == 3
    assert _statuses(st) == {ids[0]: "valid", ids[1]: "valid"}
