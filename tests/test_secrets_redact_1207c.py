"""Findings of the third review of 2026-12-07 on ``secrets`` and ``redact``
(the keyed scan of a transcript's members, the one-pass replacement)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli, tree_hash
from .test_secrets_redact_1207b import _call_store, _redact, _secrets

# -- 1. a learning proposal's evidence (a SourceRef) is no credential

def _proposal_store(base: Path) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    fs = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=fs)
    with ss.create("s2") as w:
        w.append_message("user", "Prefer pytest over unittest.")
        w.append_message("user", "We use tabs.")
    f = fs.add("We use tabs.", ref=SourceRef("s2", (2,), canonical_digest(ss.records("s2", 2, 2))))
    fid = f.fact.fact_id
    ref = ss.source_snapshot("s2", 1, 1).ref.to_json()
    with ss.writer("s2") as w:
        w.append_event("learning", status="proposed", reason_counts={}, facts=[fid],
                       proposals=[{"text": "Prefer pytest.", "kind": "explicit_user_preference",
                                   "source": ref,
                                   "conflicts": [{"fact_id": fid, "revision": 1}]},
                                  # (a proposal giving its evidence as its own members)
                                  {"text": "Prefer pytest.", "kind": "explicit_user_preference",
                                   **ref, "nested": {"deeper": {"ref": ref}}}])
    fs.close()
    return Path(st.path)


def test_a_learning_proposals_source_ref_is_not_a_finding_and_redact_keeps_it(tmp_path):
    store = _proposal_store(tmp_path)
    code, found = _secrets(store, "--jobs", "1")
    assert (code, found) == (0, []), found
    before = tree_hash(store)
    code, _doc = _redact(store, "--yes")
    assert tree_hash(store) == before


def test_record_leaves_give_no_key_in_a_source_ref_nor_for_a_fact_id():
    from lecode_memctl.core.secrets import record_leaves

    ref = {"session_id": "s2", "seqs": [1], "digest": "ab" * 32}
    rec = {"type": "event", "event": "learning", "seq": 3, "status": "proposed",
           "proposals": [{"text": "t", "source": ref, "conflicts": [{"fact_id": "f" * 16}]},
                         {"text": "t", **ref}, {"a": [{"b": {"c": ref}}]}]}
    keyed = [(p, k) for p, _s, k in record_leaves(rec) if k is not None]
    # (a proposal's own text and kind are no part of a SourceRef's shape
    # but for the proposal holding session_id and digest itself)
    assert keyed == [("$.proposals[0].text", "text")], keyed


# -- 2. two values overlapping at different offsets: neither is partly left

GH = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def test_overlapping_values_are_replaced_whole_in_order_of_their_starts():
    from lecode_memctl.core.redact import _replace_bytes, _replace_counted
    from lecode_memctl.core.secrets import replace_values

    values = {GH: "[M1]", "pw=hunter2ghp_ABC": "[M2]"}
    text = f"x pw=hunter2{GH} y"
    assert replace_values(text, values) == ("x [M2][M1] y", 2)
    assert _replace_bytes(text.encode(), values) == (b"x [M2][M1] y", 2)
    # a value inside another's occurrence is covered by it (not counted);
    # a span of one value is its marker; lines counted per span
    values = {"abcdef": "[A]", "cd": "[C]", "efgh": "[E]", "zz": "[Z]"}
    assert replace_values("abcdefgh cd zz", values) == ("[A][E] [C] [Z]", 4)
    assert _replace_counted(b"abcdefgh\ncd\n\nzz zz\n", values) == (
        b"[A][E]\n[C]\n\n[Z] [Z]\n", 5, 3)
    # a span across a newline counts both its lines once
    assert _replace_counted(b"a k1\nk2x\n", {"k1\nk2": "[K]", "2x": "[X]"}) == (
        b"a [K][X]\n", 2, 2)


# -- 3. a marker an earlier run wrote is never searched again

def test_a_second_redact_never_nests_an_earlier_runs_marker(tmp_path):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import marker
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(tmp_path / "store")
    with SessionStore(st).create("s1") as w:
        w.append_message("user", f"db at https://deploy:token@db.example.com and {GH} ok")
    store = Path(st.path)
    (store / "notes.md").write_text(f"db at https://deploy:token@db.example.com\nand {GH} ok\n")
    code, doc = _redact(store, "--detector", "github-token", "--yes")
    assert code == 0, doc
    gh = marker("github-token", GH)
    code, doc = _redact(store, "--yes")
    assert code == 0, doc
    want = f"https://deploy:{marker('basic-auth-credentials', 'token')}@db.example.com"
    note = (store / "notes.md").read_text()
    assert note == f"db at {want}\nand {gh} ok\n"
    data = (store / "sessions" / "s1.jsonl").read_text()
    assert "[REDACTED:github-[" not in data and data.count(gh) == 1 and want in data, data
    assert _secrets(store)[1] == []


def test_an_occurrence_inside_an_existing_marker_is_not_replaced_nor_left():
    from lecode_memctl.core.redact import _replace_counted, _values_left
    from lecode_memctl.core.secrets import replace_values

    old = "[REDACTED:github-token:fc25e1]"
    values = {"token": "[REDACTED:basic-auth-credentials:3c469e]"}
    text = f"a {old} token b"
    assert replace_values(text, values) == (
        f"a {old} [REDACTED:basic-auth-credentials:3c469e] b", 1)
    assert _replace_counted(text.encode(), values)[1:] == (1, 1)
    assert replace_values(old, values) == (old, 0)
    assert _values_left(f"x {old}\n".encode(), values) == []
    assert _values_left(b"x token\n", values) == ["token"]
    # a text that only looks like a marker in part is no marker
    assert replace_values("[REDACTED:github-token:fc25e]", values)[1] == 1


# -- 4. the keyed scan is for the detectors that need the key or the quotes

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"      # 40: AWS's quoted secret key


def test_a_random_identifier_or_commit_in_arguments_is_no_finding(tmp_path):
    sha = "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee1234"
    b64 = "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A"
    store = _call_store(tmp_path, {"commit": sha, "identifier": b64, "sha": "abcdefghijkl"})
    assert _secrets(store, "--jobs", "1") == (0, [])


def test_an_aws_secret_key_under_an_aws_key_is_found_whatever_its_characters(tmp_path):
    import random

    random.seed(1)
    low = "".join(random.choice("abcdefghijKLMNOP0123") for _ in range(40))   # 20 distinct
    store = _call_store(tmp_path, {"aws_key": low, "aws_token": AWS_SECRET,
                                   "password": "hunter2x"})
    _code, found = _secrets(store, "--jobs", "1")
    assert sorted((f["path"], f["detector"]) for f in found) == [
        ("$.tool_calls[0].arguments.aws_key", "aws-access-key"),
        ("$.tool_calls[0].arguments.aws_token", "aws-access-key"),
        ("$.tool_calls[0].arguments.password", "secret-keyword")], found


def test_member_hits_runs_only_the_detectors_that_need_a_key():
    from lecode_memctl.core.secrets import Detector

    d = Detector()
    assert d.member_hits("commit", "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee1234") is None
    assert d.member_hits("blob", "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A") is None
    assert d.member_hits("password", "hunter2x") == [("hunter2x", "secret-keyword")]
    assert d.member_hits("aws_secret_key", AWS_SECRET) == [(AWS_SECRET, "aws-access-key")]


# -- 5. member_hits keeps only the hits inside the value

def test_member_hits_reports_only_the_values_hits_not_the_keys():
    from lecode_memctl.core.secrets import Detector

    d = Detector()
    key = "AKIAQWERTYUIOPASDFGH_password"
    # read as "key": "value", the key's AWS key id is a hit too: it is the
    # key's own finding (at the key's path), never one at the value's path
    assert [h.detector for h in d.scan(f'"{key}": "hunter2x"', "transcript.txt")] == [
        "aws-access-key", "secret-keyword"]
    assert d.member_hits(key, "hunter2x") == [("hunter2x", "secret-keyword")]


def test_a_key_holding_an_aws_id_is_found_once_at_its_own_path(tmp_path):
    key = "AKIAQWERTYUIOPASDFGH_password"
    store = _call_store(tmp_path, {key: "hunter2x"})
    _code, found = _secrets(store, "--jobs", "1")
    got = sorted((f["detector"], f["length"]) for f in found)
    assert got == [("aws-access-key", len(key)), ("secret-keyword", len("hunter2x"))], found
    (aws,) = [f for f in found if f["detector"] == "aws-access-key"]
    (kw,) = [f for f in found if f["detector"] == "secret-keyword"]
    # (the path shows the key masked: the key holds a found value)
    assert aws["path"] == kw["path"] and aws["path"].startswith("$.tool_calls[0].arguments"), found


def test_a_password_beside_a_session_id_and_a_digest_in_tool_arguments_is_found(tmp_path):
    """The SourceRef shape rule reached into a message's tool-call
    arguments (the model's, not the contract's): a password there, beside
    keys named session_id and digest, was not looked for."""
    from lecode_memctl.core.secrets import record_leaves

    rec = {"seq": 1, "type": "message", "role": "assistant", "content": "",
           "tool_calls": [{"id": "c1", "name": "http", "arguments": {
               "session_id": "x", "digest": "y", "password": "hunter2xyz"}}]}
    keyed = {key for _p, _v, key in record_leaves(rec) if key is not None}
    assert "password" in keyed
    ev = {"seq": 2, "type": "event", "event": "learning",
          "proposals": [{"source": {"session_id": "s", "seqs": [1], "digest": "a" * 64}}]}
    assert {key for _p, _v, key in record_leaves(ev) if key is not None} == set()


# ---------------------------------------------------------------- every value of a line

_TWO_KEYS = ('{"a": "-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAq1w2e3r4t5y6u7i8o9p0aSdF'
             'gHjKlZxCvBnM\\n-----END RSA PRIVATE KEY-----", "b": "-----BEGIN RSA PRIVATE KEY-----'
             '\\nMIIEpQIBAAKCAQEAz9x8c7v6b5n4m3l2k1j0hGfDsAqWeRtYuIoP\\n-----END RSA PRIVATE '
             'KEY-----"}')


@pytest.mark.parametrize("line, count", [
    (_TWO_KEYS, 2),
], ids=["two-pem-keys"])
def test_every_private_key_of_a_line_is_found_and_erased(tmp_path, line, count):
    """detect-secrets gives one private key hit a line: the first key was
    found and erased, redact said done (exit 0), and the next secrets found
    the second."""

    store = tmp_path / "store"
    store.mkdir()
    (store / "MEMORY.md").write_text(f"# M\n\n{line}\n")
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl")
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len([x for x in rows if x["type"] == "secret"]) == count, rows
    assert run_cli("--store", str(store), "--no-state", "redact", "--yes").exit_code == 0
    again = run_cli("--store", str(store), "--no-state", "secrets")
    assert again.exit_code == 0, again.stdout


def test_the_plan_says_what_its_forgets_do_to_other_facts_and_summaries(tmp_path):
    """A fact whose text holds a token is forgotten; its evidence, excluded,
    also held another fact's and a summary's: the plan said neither, and
    validate --deep afterwards found a fact suppressed and a summary inert."""

    from lecode_memctl.core import open_project

    store = tmp_path / "store"
    with open_project(store=store) as p:
        ss = p.sessions
        with ss.create("s1") as w:
            w.append_message("user", "We use tabs. Deploy token is in the vault.")
            w.append_message("assistant", "Noted.", epoch=p.generation())
        ref = ss.source_snapshot("s1", 1, 2).ref
        with ss.writer("s1") as w:
            w.append_event("compact", summary="tabs", lineage=[ref.to_json()], prior=None,
                           model="m", usage=None)
        tabs = p.remember("We use tabs.", ss.source_snapshot("s1", 1, 1).ref).fact.fact_id
        p.remember("Deploy token is ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A",
                   ss.source_snapshot("s1", 1, 1).ref)
    r = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    plan = orjson.loads(r.stdout)["plan"]
    assert plan["suppressed_facts"] == [tabs], plan
    assert [(s["session_id"], s["seq"]) for s in plan["summaries_inert"]] == [("s1", 3)], plan
    text = run_cli("--store", str(store), "--no-state", "redact", "--dry-run").stdout
    assert "suppress (evidence excluded): 1: " + tabs in text, text
    assert "make inert: 1: s1:3" in text, text


def test_a_value_found_elsewhere_that_a_file_name_holds_is_kept_and_said(tmp_path):
    """A URL password in one note, and a note named after it: the plan kept
    nothing, redact said done (exit 0), and the name still held it."""

    store = tmp_path / "store"
    (store / "notes").mkdir(parents=True)
    (store / "notes" / "url.md").write_text("# x\n\nsee https://a:Pw1xYz9QqZ7k@h/\n")
    (store / "notes" / "d-Pw1xYz9QqZ7k.md").write_text("# hi\n\nnothing\n")
    plan = orjson.loads(run_cli("--store", str(store), "--no-state", "redact", "--dry-run",
                                "--json").stdout)["plan"]
    (kept,) = plan["kept"]
    assert kept["reasons"] == ["file_name"] and len(kept["files"]) == 1, kept
    assert "Pw1xYz9QqZ7k" not in kept["files"][0]
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 1 and "cannot erase" in r.stderr, r.stderr


def test_a_line_of_many_private_key_headers_searches_each_block_once(monkeypatch):
    """Each BEGIN of a line searched to the end of the text for its END:
    20,000 headers without one took 39 s against 1 s (quadratic).  A BEGIN
    inside the block before it is that block's: one search here."""
    from lecode_memctl.core import secrets

    calls = []
    real = secrets._pem_span

    def counted(*a, **k):
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(secrets, "_pem_span", counted)
    unit = "-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAq1w2e3r4t5y6u7i8\\n"
    text = '{"a": "' + unit * 2000 + '"}'
    hits = secrets.Detector().scan(text)
    assert len([h for h in hits if h.detector == "private-key"]) == 1
    # (one search a window of the line: MAX_SCAN_LINE characters each)
    assert len(calls) <= len(text) // secrets.MAX_SCAN_LINE + 2, len(calls)


@pytest.mark.parametrize("password", ["daily", "notes", "md"])
def test_a_value_the_layout_s_own_names_hold_is_not_kept_for_a_name(tmp_path, password):
    """'daily/2026-12-07.md' held the password 'daily': redact said it could
    not erase it (exit 1), and 'md' was kept for every note."""
    store = tmp_path / "store"
    (store / "daily").mkdir(parents=True)
    (store / "notes").mkdir()
    (store / "MEMORY.md").write_text(f"# x\n\nsee https://admin:{password}@db.example/\n")
    (store / "daily" / "2026-12-07.md").write_text("# d\n")
    (store / "notes" / "url.md").write_text("# n\n")
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert password not in (store / "MEMORY.md").read_text().split("@")[0]
