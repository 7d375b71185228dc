"""Records nested deeper than orjson serializes (255 levels) but within what
its parser accepts (1024): no command crashes on them (issue 16 done-when).
The digest of such a span cannot be computed (lecode hashes with orjson too),
so a reference to it is ``stale`` (``records_corrupt``) and ``read`` fails with
exit 5 naming the record; the grep/secrets walk over JSON values is iterative."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, strategies as st

from .conftest import run_cli, tree_hash

AWS = "AKIAZ3MPLE7Q4TR2XW5N"     # an AWS-key-shaped value, planted at the bottom


def _deep(depth: int, leaf: str) -> bytes:
    """``{"a":{"a":...{"a":[leaf]}}}``: ``depth`` levels of nesting."""
    return b'{"a":' * (depth - 1) + b"[" + orjson.dumps(leaf) + b"]" + b"}" * (depth - 1)


def build(tmp_path: Path, depth: int) -> tuple[Path, str]:
    """A store with s1: seq 1 a plain message, seq 2 a message whose tool call
    arguments nest ``depth`` levels (written raw: the writer's orjson cannot),
    seq 3 a plain message; a fact cites 1-3 with the digest of its old text."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(tmp_path / "store")
    facts = FactStore(st.facts_db)
    ss = SessionStore(st, exclusions=facts)
    with ss.create("s1", created="2026-05-01T10:00:00Z") as w:
        w.append_message("user", "the deep one follows")                        # 1
        w.append_message("assistant", "placeholder", epoch=0)                   # 2
        w.append_message("user", "the end of the deep session")                 # 3
    ref = SourceRef("s1", (1, 3), canonical_digest(ss.records("s1", 1, 3)))
    fid = facts.add("A fact citing the deep span.", ref=ref).fact.fact_id
    facts.close()
    path = Path(ss.path("s1"))
    lines = path.read_bytes().split(b"\n")
    deep = (b'{"seq":2,"type":"message","role":"assistant","content":"the deep tool call",'
            b'"tool_calls":[{"id":"c1","name":"x","arguments":' + _deep(depth, f"key {AWS} the")
            + b"}],\"epoch\":0}")
    assert orjson.loads(deep)["seq"] == 2          # the parser accepts it
    lines[2] = deep
    path.write_bytes(b"\n".join(lines))
    return st.path, fid


@pytest.mark.parametrize("depth", [300, 1000])
def test_read_of_a_span_too_deep_to_digest_is_exit_5(tmp_path, depth):
    store, _fid = build(tmp_path, depth)
    before = tree_hash(store)
    r = run_cli("--store", str(store), "read", "s1", "1", "3")
    assert r.exit_code == 5, (r.exit_code, r.stderr)
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1
    assert "s1" in r.stderr and "seq 2" in r.stderr
    assert run_cli("--store", str(store), "read", "s1", "3", "3").exit_code == 0
    assert tree_hash(store) == before


@pytest.mark.parametrize("depth", [300, 1000])
def test_a_reference_to_it_is_stale_not_a_crash(tmp_path, depth):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef

    store, fid = build(tmp_path, depth)
    st = SessionStore(store_at(store)).validate_source(SourceRef("s1", (1, 3), "0" * 64))
    assert (st.status, st.reason, st.seq) == ("stale", "records_corrupt", 2)
    assert "seq 2" in (st.detail or "")
    r = run_cli("--store", str(store), "facts", "--all", "--json")
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    assert "Traceback" not in r.stderr
    r = run_cli("--store", str(store), "validate", "--json")
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    r = run_cli("--store", str(store), "history", fid)
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)


@pytest.mark.parametrize("depth", [300, 1000])
def test_grep_and_secrets_walk_any_depth(tmp_path, depth):
    store, _fid = build(tmp_path, depth)
    r = run_cli("--store", str(store), "grep", AWS, "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    (hit,) = orjson.loads(r.stdout_bytes)["hits"]
    assert hit["seq"] == 2 and hit["path"] == "$.tool_calls[0].arguments" + ".a" * (depth - 1) + "[0]"
    r = run_cli("--store", str(store), "secrets", "--json", "--jobs", "1")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    assert any(f["seq"] == 2 and f["detector"] == "aws-access-key" for f in doc["findings"])


def test_string_leaves_order_and_paths():
    from lecode_memctl.core.grep import string_leaves

    doc = {"b": ["x", {"c": "y", "type": "binary", "data": "z"}], "a b": "w", 1: "k"}
    assert list(string_leaves(doc, "$")) == [
        ("$.b[0]", "x"), ("$.b[1].c", "y"), ("$.b[1].type", "binary"), ('$["a b"]', "w")]


def test_string_leaves_with_keys():
    """``keys=True`` (the secrets scan) gives each key at its member's path,
    before the member's value; a binary part's ``data`` stays out."""
    from lecode_memctl.core.grep import string_leaves

    doc = {"b": ["x", {"c": "y", "type": "binary", "data": "z"}], "a b": {"k": 1}}
    assert list(string_leaves(doc, "$", keys=True)) == [
        ("$.b", "b"), ("$.b[0]", "x"), ("$.b[1].c", "c"), ("$.b[1].c", "y"),
        ("$.b[1].type", "type"), ("$.b[1].type", "binary"), ('$["a b"]', "a b"),
        ('$["a b"].k', "k")]


_KEY = st.text(st.characters(codec="utf-8"), max_size=6)
_JSON = st.recursive(st.text(max_size=3) | st.integers(),
                     lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(_KEY, kids, max_size=3), max_leaves=12)


@given(_JSON)
def test_a_path_gives_back_its_keys(doc):
    """Every path string_leaves writes is read back by path_keys as the keys
    of the members it goes through, and rewrite_path_keys writes it again:
    as it was when each key is kept, with each key replaced otherwise."""
    from lecode_memctl.core.grep import path_keys, rewrite_path_keys, string_leaves

    def walk(v, keys):
        if isinstance(v, dict):
            for k, x in v.items():
                yield keys + [k], k
                yield from walk(x, keys + [k])
        elif isinstance(v, list):
            for x in v:
                yield from walk(x, keys)
        elif isinstance(v, str):
            yield keys, v

    got = list(string_leaves(doc, "$", keys=True))
    want = list(walk(doc, []))
    assert [s for _p, s in got] == [s for _k, s in want]
    for (path, _s), (keys, _s2) in zip(got, want, strict=True):
        assert path_keys(path) == keys
        assert rewrite_path_keys(path, lambda k: k) == path
        marked = rewrite_path_keys(path, lambda k: f"[{k}]")
        assert marked is not None and path_keys(marked) == [f"[{k}]" for k in keys]


@pytest.mark.parametrize("text", ["", "content", "$.a[", "$.a..b", '$["a]', "$[x]", '$["\\q"]'])
def test_a_text_that_is_no_path(text):
    from lecode_memctl.core.grep import path_keys, rewrite_path_keys

    assert path_keys(text) is None and rewrite_path_keys(text, str.upper) is None


@pytest.mark.parametrize("depth", [300, 1000])
def test_redact_rewrites_a_deep_record(tmp_path, depth):
    store, _fid = build(tmp_path, depth)
    r = run_cli("--store", str(store), "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    data = (store / "sessions" / "s1.jsonl").read_bytes()
    assert AWS.encode() not in data and b"[REDACTED:aws-access-key:" in data
    assert orjson.loads(data.split(b"\n")[2])["seq"] == 2
    assert run_cli("--store", str(store), "secrets", "--jobs", "1").exit_code == 0
