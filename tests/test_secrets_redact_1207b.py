"""Findings of the second review of 2026-12-07 on ``secrets`` and ``redact``."""

from __future__ import annotations

from pathlib import Path

import orjson

from .conftest import run_cli, tree_hash

PASSWORD = "Tr0ub4dorHorseStaple9"
API_KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee1234"
ARGS = {"headers": {"password": PASSWORD, "api_key": API_KEY}}


def _secrets(store: Path, *args: str) -> tuple[int, list[dict]]:
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl", *args)
    assert r.exit_code in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r.exit_code, [f for f in map(orjson.loads, r.stdout.splitlines())
                         if f.get("type") == "secret"]


def _redact(store: Path, *args: str) -> tuple[int, dict]:
    r = run_cli("--store", str(store), "--no-state", "redact", "--json", *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r.exit_code, orjson.loads(r.stdout_bytes)


def _call_store(base: Path, arguments: object, *more: str, call_id: str = "c1") -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(base / "store")
    fs = FactStore(st.facts_db)
    with SessionStore(st, exclusions=fs).create("s1") as w:
        w.append_message("assistant", "", epoch=fs.generation(),
                         tool_calls=[{"id": call_id, "name": "http", "arguments": arguments}])
        for text in more:
            w.append_message("tool", text, tool_call_id=call_id, epoch=fs.generation())
    fs.close()
    return Path(st.path)


# -- 1. a credential in a tool call's structured arguments is found

def test_a_password_in_structured_tool_call_arguments_is_found_at_its_path(tmp_path):
    store = _call_store(tmp_path, ARGS)
    code, found = _secrets(store, "--jobs", "1")
    assert code == 1
    got = {(f["path"], f["length"]) for f in found}
    assert got == {("$.tool_calls[0].arguments.headers.password", len(PASSWORD)),
                   ("$.tool_calls[0].arguments.headers.api_key", len(API_KEY))}, found
    assert len(found) == 2          # each once
    # the parallel scan says the same
    code2, found2 = _secrets(store, "--jobs", "2")
    assert (code2, found2) == (code, found)


def test_structured_arguments_are_found_as_the_same_json_in_a_note_is(tmp_path):
    store = _call_store(tmp_path, ARGS)
    (store / "notes.md").write_text(orjson.dumps(ARGS["headers"]).decode() + "\n")
    _code, found = _secrets(store, "--jobs", "1")
    by_kind: dict[str, set[str]] = {}
    for f in found:
        by_kind.setdefault(f["kind"], set()).add(f["hash"])
    assert by_kind["transcript"] == by_kind["file"] and len(by_kind["file"]) == 2, found


def test_a_quoted_high_entropy_value_under_a_plain_key_is_no_finding(tmp_path):
    # (the keyed scan is for the detectors that need a key: a commit's SHA
    # or an identifier quoted under any key is no credential; 1207c)
    b64 = "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A"
    store = _call_store(tmp_path, {"blob": API_KEY, "data": b64, "sha": "abcdefghijkl",
                                   "pattern": "ABCDEFGHIJ"})
    _code, found = _secrets(store, "--jobs", "1")
    assert found == [], found


def test_a_value_already_found_alone_is_not_found_twice_under_a_keyword_key(tmp_path):
    token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    store = _call_store(tmp_path, {"token": token, "password": f"x {token} y"})
    _code, found = _secrets(store, "--jobs", "1")
    assert sorted((f["path"], f["detector"], f["length"]) for f in found) == [
        ("$.tool_calls[0].arguments.password", "github-token", len(token)),
        ("$.tool_calls[0].arguments.token", "github-token", len(token))], found


def test_the_contracts_own_members_are_not_scanned_as_quoted_values(tmp_path):
    # a tool call's id is no credential, quoted or not (read as JSON writes
    # it, "id": "toolu_...", the base64 entropy detector takes it for one)
    store = _call_store(tmp_path, {"path": "src/x.py"}, "ok",
                        call_id="toolu_01AbCdEfGhIjKlMnOpQrStUvWx")
    _code, found = _secrets(store, "--jobs", "1")
    assert found == []


def test_redact_erases_a_value_found_in_structured_arguments(tmp_path):
    store = _call_store(tmp_path, ARGS)
    code, doc = _redact(store, "--yes")
    assert code == 0, doc
    data = (store / "sessions" / "s1.jsonl").read_bytes()
    assert PASSWORD.encode() not in data and API_KEY.encode() not in data
    assert b"[REDACTED:secret-keyword:" in data
    code, found = _secrets(store)
    assert (code, found) == (0, [])


# -- 2. a summary whose prior record is rewritten is in the plan's summaries

CHAIN_TOKEN = "ghp_CHNdefghijABCDEFGHIJ0123456789klmnop"


def _chain_store(base: Path) -> Path:
    """Two compactions of one session, the second's ``prior`` the first,
    whose summary holds a token (/tmp/rv3-scratch/mkchain.py)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import canonical_digest

    st = store_at(base / "store")
    fs = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=fs)
    g = fs.generation()
    sid = "s-chain"
    with ss.create(sid, created="2026-05-01T10:00:00Z") as w:
        for i, text in enumerate(("one", "two", "three", "four"), 1):
            w.append_message("user" if i % 2 else "assistant", text,
                             **({} if i % 2 else {"epoch": g}))
        c1 = {"session_id": sid, "seqs": [1, 2, 3, 4],
              "digest": canonical_digest(ss.records(sid, 1, 4))}
        w.append_event("compact", summary=f"User shared token {CHAIN_TOKEN}.", lineage=[c1],
                       prior=None, model="m", usage=None)                          # 5
        for i, text in enumerate(("six", "seven", "eight", "nine"), 6):
            w.append_message("assistant" if i % 2 else "user", text,
                             **({"epoch": g} if i % 2 else {}))
        c2 = {"session_id": sid, "seqs": [6, 7, 8, 9],
              "digest": canonical_digest(ss.records(sid, 6, 9))}
        w.append_event("compact", summary="More chat.", lineage=[c1, c2],
                       prior={"seq": 5, "digest": canonical_digest(ss.records(sid, 5, 5))},
                       model="m", usage=None)                                      # 10
        w.append_message("user", "eleven")
    fs.close()
    return Path(st.path)


def test_a_summary_whose_prior_record_is_rewritten_is_in_the_plan(tmp_path):
    store = _chain_store(tmp_path)
    code, doc = _redact(store, "--dry-run")
    assert code == 0, doc
    plan = doc["plan"]
    assert [f["records"] for f in plan["files"]] == [[5]]
    assert plan["summaries"] == [{"session_id": "s-chain", "seq": 10, "reasons": ["prior"]}]
    text = run_cli("--store", str(store), "--no-state", "redact", "--dry-run")
    assert "compaction summaries covering or following a rewritten record: 1: " \
           "s-chain:10 (prior)" in text.stdout, text.stdout
    # what the plan announced is what validate --deep then says
    code, _doc = _redact(store, "--yes")
    assert code == 0
    audit = run_cli("--store", str(store), "--no-state", "validate", "--deep", "--json")
    codes = {(f["code"], f["seq"]) for f in orjson.loads(audit.stdout)["findings"]}
    assert ("compact.prior_mismatch", 10) in codes, codes


def test_a_summary_listed_for_its_lineage_says_so(tmp_path):
    store = _chain_store(tmp_path)
    path = store / "sessions" / "s-chain.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"two"', b'"token ' + CHAIN_TOKEN.encode() + b'"')
    path.write_bytes(b"\n".join(lines))
    _code, doc = _redact(store, "--dry-run")
    assert doc["plan"]["summaries"] == [
        {"session_id": "s-chain", "seq": 5, "reasons": ["lineage"]},
        {"session_id": "s-chain", "seq": 10, "reasons": ["lineage", "prior"]}], doc["plan"]


def test_record_leaves_are_string_leaves_with_their_members_keys():
    from lecode_memctl.core.grep import string_leaves
    from lecode_memctl.core.secrets import record_leaves

    rec = {"type": "event", "event": "compact", "seq": 10, "summary": "s",
           "lineage": [{"session_id": "a", "seqs": [1], "digest": "d1"},
                       {"session_id": "b", "seqs": [2], "digest": "d2"}],
           "prior": {"seq": 5, "digest": "d3"},
           "x": [["p", {"k": "v"}], {"type": "binary", "data": "AAAA", "n": "m"}]}
    got = list(record_leaves(rec))
    assert [(p, s) for p, s, _k in got] == list(string_leaves(rec, "$", keys=True))
    assert [(p, k) for p, _s, k in got if k is not None] == [
        ("$.x[0][1].k", "k"), ("$.x[1].type", "type"), ("$.x[1].n", "n")]


# -- 3. a value inside another value's marker never nests the markers

GH = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def test_a_value_that_is_in_another_values_marker_is_replaced_once(tmp_path):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import marker
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(tmp_path / "store")
    with SessionStore(st).create("s1") as w:
        w.append_message("user", f"db at https://deploy:token@db.example.com and {GH} ok")
    store = Path(st.path)
    (store / "notes.md").write_text(f"db at https://deploy:token@db.example.com\nand {GH} ok\n")
    # a line that does not parse: its bytes replaced
    with open(store / "sessions" / "s1.jsonl", "ab") as fh:
        fh.write(f"not json: https://deploy:token@db.example.com {GH}".encode())
    code, doc = _redact(store, "--yes")
    assert code == 0, doc
    want = f"https://deploy:{marker('basic-auth-credentials', 'token')}@db.example.com"
    gh = marker("github-token", GH)
    data = (store / "sessions" / "s1.jsonl").read_text()
    note = (store / "notes.md").read_text()
    for text in (data, note):
        assert "[REDACTED:github-[" not in text, text
        assert text.count(gh) == (2 if text is data else 1) and text.count(want) == text.count(gh)
    assert note == f"db at {want}\nand {gh} ok\n"


def test_replace_values_is_one_pass_longest_first():
    from lecode_memctl.core.redact import _replace_bytes
    from lecode_memctl.core.secrets import replace_values

    values = {"abcdef": "[X:abcdef]", "abc": "[X:abc]", "X": "[Y]"}
    assert replace_values("abcdef abc X", values) == ("[X:abcdef] [X:abc] [Y]", 3)
    assert _replace_bytes(b"abcdef abc X", values) == (b"[X:abcdef] [X:abc] [Y]", 3)
    assert replace_values("nothing", values) == ("nothing", 0)
    assert replace_values("abc abc", {"abc": "[abc]"}) == ("[abc] [abc]", 2)


# -- 4. a value kept in a live database row does not call for a clean

SID_KEY = "AKIAQWERTYUIOPASDFGH"


def _kept_sid_store(base: Path) -> Path:
    """A session whose id is an AWS key id, cited by a fact
    (/tmp/rv3-scratch/mk15.py): the id is in live rows of facts.sqlite3."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    fs = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=fs)
    with ss.create(SID_KEY) as w:
        w.append_message("user", f"the key is {SID_KEY} ok")
        w.append_message("user", "We use tabs.")
    fs.add("We use tabs.", ref=SourceRef(SID_KEY, (2,), canonical_digest(ss.records(SID_KEY, 2, 2))))
    fs.close()
    return Path(st.path)


def test_a_value_kept_for_a_live_database_row_does_not_clean_the_database(tmp_path):
    store = _kept_sid_store(tmp_path)
    code, doc = _redact(store, "--dry-run")
    plan = doc["plan"]
    assert [k["reasons"] for k in plan["kept"]] == [["session_id", "database"]]
    assert plan["clean_database"] is False, plan
    code, doc = _redact(store, "--yes")
    assert code == 1 and doc["result"]["database_cleaned"] is False, doc
    # every rerun: nothing to do, no byte changed (it VACUUMed facts.sqlite3 each time)
    before = tree_hash(store)
    for _ in range(2):
        code, doc = _redact(store, "--yes")
        assert code == 1
        assert doc["plan"]["files"] == [] and doc["plan"]["clean_database"] is False, doc
        assert tree_hash(store) == before


# -- 5a. rewrite.lines of a file other than a transcript: the lines changed

def test_the_lines_of_a_rewritten_file_are_the_lines_changed_not_the_replacements(tmp_path):
    from lecode_memctl.core.layout import store_at

    st = store_at(tmp_path / "store")
    store = Path(st.path)
    store.mkdir(parents=True)
    (store / "MEMORY.md").write_text(f"# keys\n{GH} and {API_KEY!r} and {GH}\nplain\n"
                                     f"again {GH}\n")
    code, doc = _redact(store, "--dry-run")
    (row,) = doc["plan"]["files"]
    assert (row["file"], row["replacements"], row["lines"]) == ("MEMORY.md", 4, 2), row


def test_replace_bytes_counts_the_lines_a_value_lies_on():
    from lecode_memctl.core.redact import _replace_counted

    values = {"k1\nk2": "[A]", "zz": "[B]"}
    assert _replace_counted(b"a k1\nk2 zz\nb\nzz zz\n", values) == (
        b"a [A] [B]\nb\n[B] [B]\n", 4, 3)
    assert _replace_counted(b"none\n", values) == (b"none\n", 0, 0)


# -- 5b. an allowlisted digest in upper case is taken

def test_an_upper_case_digest_in_the_allowlist_is_taken(tmp_path):
    store = _call_store(tmp_path, ARGS)
    _code, found = _secrets(store)
    allow = tmp_path / "allow"
    allow.write_text("".join(f"{p}{f['hash'].upper()}  # {i}\n"
                             for i, (p, f) in enumerate(zip(("", "SHA256:"), found, strict=True))))
    r = run_cli("--store", str(store), "--no-state", "secrets", "--json",
                "--allowlist", str(allow))
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert orjson.loads(r.stdout_bytes)["projects"][0]["allowlisted"] == 2


# -- 5c. scan.allowlisted counts findings, and the schema says so

def test_allowlisted_counts_findings_as_the_schema_says(tmp_path):
    store = _call_store(tmp_path, ARGS)
    (store / "notes.md").write_text(orjson.dumps(ARGS["headers"]).decode() + "\n")
    _code, found = _secrets(store)
    assert len(found) == 4 and len({f["hash"] for f in found}) == 2
    allow = tmp_path / "allow"
    allow.write_text("".join(sorted({f["hash"] + "\n" for f in found})))
    r = run_cli("--store", str(store), "--no-state", "secrets", "--json",
                "--allowlist", str(allow))
    assert orjson.loads(r.stdout_bytes)["projects"][0]["allowlisted"] == 4
    schema = orjson.loads(run_cli("schema", "scan").stdout_bytes)
    said = schema["properties"]["allowlisted"]["description"]
    assert said.startswith("findings") and "values found" not in said, said
