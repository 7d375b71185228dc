"""memctl sessions and memctl read through the CLI; the FORMAT.md digest
snippet; shell completion of session ids."""

from __future__ import annotations

import base64
import os
import re
import sys

import orjson
import pytest

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.rowmodel import doc_head
from lecode_memctl.core.sessions import SessionStore

from .conftest import REPO, run_cli, run_proc, tree_hash

# store, ss: conftest (an empty store at <tmp>/memory/SLUG and its SessionStore)


def cli(store, *args, **kw):
    return run_cli("--store", str(store.path), *args, **kw)


def make(ss, sid="s1", n=6, created="2026-01-01T00:00:00Z"):
    with ss.create(sid, created=created) as w:
        for i in range(1, n + 1):
            if i % 2:
                w.append_message("user", f"question {i}")
            else:
                w.append_message("assistant", f"answer {i}", epoch=0)
    return sid


def test_sessions_listing_plain(ss, store):
    make(ss, "s1", 4)
    with ss.writer("s1") as w:
        w.append_event("compact", summary="sum", lineage=[], prior=None, model="m", usage=None)
    make(ss, "s2", 2)
    with open(store.sessions_dir / "s2.jsonl", "ab") as f:
        f.write(b'{"seq":3,"type":"mess')
    other = SessionStore(store_at(store.path.parent / "other-000000000000"))
    make(other, "s3", 1)
    os.symlink(store.path.parent / "other-000000000000" / "sessions" / "s3.jsonl",
               store.sessions_dir / "s3.jsonl")
    r = cli(store, "sessions")
    assert r.exit_code == 0, r.stderr
    out = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z", "TIME", r.stdout)
    out = re.sub(r" +", " ", out)
    assert out.splitlines() == [
        "id created last records messages compactions size state",
        f"s1 TIME TIME 6 4 1 {os.path.getsize(store.sessions_dir / 's1.jsonl')} ok",
        f"s2 TIME TIME 3 2 0 {os.path.getsize(store.sessions_dir / 's2.jsonl')} torn tail",
        f"s3 TIME {os.lstat(store.sessions_dir / 's3.jsonl').st_size} refused (refused_symlink)",
    ]
    doc = orjson.loads(cli(store, "sessions", "--json").stdout_bytes)
    assert [d["id"] for d in doc] == ["s1", "s2", "s3"]
    assert doc[0] == {"type": "session", "id": "s1", "created": "2026-01-01T00:00:00.000Z",
                      "last_time": doc[0]["last_time"],
                      "records": 6, "messages": 4, "compactions": 1, "size": doc[0]["size"],
                      "state": "ok", "reason": None, "detail": None}
    assert doc[1]["state"] == "torn_tail" and doc[2]["reason"] == "refused_symlink"
    csv_out = cli(store, "sessions", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "type,id,created,last_time,records,messages,compactions,size,state,reason,detail"
    assert len(cli(store, "sessions", "--format", "jsonl").stdout.splitlines()) == 3


def test_sessions_no_store_and_empty(store):
    assert cli(store, "sessions").exit_code == 3
    os.makedirs(store.path)
    r = cli(store, "sessions", "--json")
    assert r.exit_code == 0 and orjson.loads(r.stdout_bytes) == []


def test_read_json_document(ss, store):
    make(ss, "s1", 6)
    with ss.writer("s1") as w:
        w.append_event("undo", target=[3, 4])
    r = cli(store, "read", "s1", "1", "6")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    snap = ss.source_snapshot("s1", 1, 6)
    assert doc == {
        **doc_head("read"), "session_id": "s1", "start": 1, "end": 6, "last_seq": 7, "purpose": "working",
        "status": "valid", "reason": None, "source": snap.ref.to_json(),
        "hidden": {"undone": [3, 4]}, "hidden_reasons": {"3": "undone", "4": "undone"},
        "source_text": doc["source_text"], "offset": 0, "next_offset": None, "limit": 4096,
        "total_chars": len(doc["source_text"]),
    }
    assert orjson.loads(doc["source_text"]) == [[s, r] for s, r in snap.messages()]
    assert doc["source"]["seqs"] == [1, 2, 5, 6]


def test_read_takes_a_source_as_memctl_prints_it(ss, store):
    """``read SESSION:RANGE``, the form facts and history print a source in
    (and correct takes), reads the span from its first to its last position
    as ``read SESSION START END`` does; it said "Missing argument 'START'"."""
    make(ss, "s1", 6)
    want = cli(store, "read", "s1", "2", "5").stdout
    assert cli(store, "read", "s1:2-5").stdout == want
    assert cli(store, "read", "s1:2-3,5").stdout == want
    assert orjson.loads(cli(store, "read", "s1:4").stdout)["source"]["seqs"] == [4]
    for args, what in ((("s1:2-5", "3"), "already names the range"),
                       (("s1",), "SESSION START END"), (("s1", "2"), "SESSION START END"),
                       (("s1:5-2",), "before the start"), (("s1:x",), "non-negative integer"),
                       (("bad id:1-2",), "invalid session id")):
        r = cli(store, "read", *args)
        assert r.exit_code == 2, (args, r.stdout)
        assert r.stderr.count("\n") == 1 and what in r.stderr, (args, r.stderr)


def test_read_pages_concatenate(ss, store):
    with ss.create("s1") as w:
        for i in range(30):
            w.append_message("user", f"line {i} \"quoted\" \\ é 😀 \x01 " * 40)
    offset, texts, digests = 0, [], set()
    while True:
        r = cli(store, "read", "s1", "1", "30", "--offset", str(offset), "--limit", "3000")
        assert r.exit_code == 0, r.stderr
        assert len(r.stdout_bytes) <= 16384
        doc = orjson.loads(r.stdout_bytes)
        texts.append(doc["source_text"])
        digests.add(doc["source"]["digest"])
        if doc["next_offset"] is None:
            break
        offset = doc["next_offset"]
    assert len(texts) > 3 and len(digests) == 1
    assert orjson.loads("".join(texts)) == [[s, r] for s, r in ss.source_snapshot("s1", 1, 30).messages()]


def test_read_binary_omitted_but_hashed(ss, store):
    data = base64.b64encode(os.urandom(3000)).decode()
    with ss.create("s1") as w:
        w.append_message("user", [{"type": "text", "text": "see"},
                                  {"type": "binary", "media_type": "image/png", "data": data}])
    doc = orjson.loads(cli(store, "read", "s1", "1", "1").stdout_bytes)
    assert data not in doc["source_text"]
    assert orjson.loads(doc["source_text"])[0][1]["content"][1] == {
        "type": "binary", "media_type": "image/png", "omitted_bytes": 3000}
    assert doc["source"]["digest"] == ss.source_snapshot("s1", 1, 1).ref.digest


def test_read_text_escapes_control_characters(ss, store):
    with ss.create("s1") as w:
        w.append_message("user", "red \x1b[31mALERT\x1b[0m \u202e [bold]x[/bold]")
    r = cli(store, "read", "s1", "1", "1", "--text")
    assert r.exit_code == 0
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert "[bold]x[/bold]" in r.stdout
    assert "visible: 1 message(s); hidden: none" in r.stdout and "[1] user" in r.stdout
    assert cli(store, "read", "s1", "1", "1", "--text", "--json").exit_code == 2


@pytest.mark.parametrize("args,code", [
    (["read", "../s1", "0", "1"], 2),
    (["read", "s1/x", "0", "1"], 2),
    (["read", "s1", "5", "1"], 2),
    (["read", "s1", "0", "200"], 2),
    (["read", "s1", "-1", "3"], 2),
    (["read", "s1", "x", "3"], 2),
    (["read", "s1", "1", "2", "--limit", "0"], 2),
    (["read", "s1", "1", "2", "--offset", "999999"], 2),
    (["read", "s", "0", "1"], 3),
    (["read", "s1", "50", "60"], 3),
])
def test_read_exit_codes(ss, store, args, code):
    make(ss)
    r = cli(store, *args)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert r.stderr.startswith("memctl: error:")
    if code == 3 and args[1] == "s":
        assert "did you mean s1" in r.stderr


def test_read_json_error_document(ss, store):
    make(ss)
    r = cli(store, "read", "nope", "0", "1", "--json")
    assert r.exit_code == 3
    assert orjson.loads(r.stdout_bytes)["error"]["code"] == "not_found"


def test_bad_id_checked_before_any_file_access(tmp_path, monkeypatch):
    """The id is refused before the store is even located."""
    import lecode_memctl.cli.state as state_mod

    def boom(self):
        raise AssertionError("store located before the id was checked")

    monkeypatch.setattr(state_mod.State, "store", boom)
    r = run_cli("read", "../../etc/passwd", "0", "1")
    assert r.exit_code == 2


def test_read_uses_facts_exclusions(ss, store):
    """A forget recorded in facts.sqlite3 hides the message from read."""
    facts_mod = pytest.importorskip("lecode_memctl.core.facts")
    make(ss, n=4)
    ref = ss.source_snapshot("s1", 3, 3).ref
    before_missing = cli(store, "read", "s1", "3", "3")
    assert before_missing.exit_code == 0
    fs = facts_mod.FactStore(store.facts_db)
    try:
        res = fs.remember("question 3", ref, sessions=SessionStore(store, fs))
        fid = getattr(res, "fact_id", None) or getattr(getattr(res, "fact", None), "fact_id", None)
        fs.forget(fid)
    finally:
        fs.close()
    before = tree_hash(store.path)
    r = cli(store, "read", "s1", "3", "3")
    assert r.exit_code == 4 and "excluded" in r.stderr
    r = cli(store, "read", "s1", "1", "4")
    assert r.exit_code == 0
    doc = orjson.loads(r.stdout_bytes)
    assert doc["hidden"]["excluded"] == [3]
    assert tree_hash(store.path) == before


def _format_snippet() -> str:
    text = (REPO / "docs" / "FORMAT.md").read_text()
    section = text.split("## Sessions", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "FORMAT.md Sessions section has no python snippet"
    return m.group(1)


def test_format_md_digest_snippet_matches_core_and_cli(ss, store):
    ns: dict = {}
    exec(compile(_format_snippet(), "FORMAT.md", "exec"), ns)
    digest = ns["digest"]
    with ss.create("s1") as w:
        w.append_message("user", "héllo \"there\" 😀")
        w.append_message("assistant", [{"type": "text", "text": "hi"}], epoch=0,
                         tool_calls=[{"id": "c", "name": "t",
                                      "arguments": {"b": 1, "a": [2, {"z": 0, "y": None}]}}])
        w.append_event("memory_usage", purpose="learning", model="m",
                       usage={"input_tokens": 1, "output_tokens": 2, "cost": 0.5})
        w.append_message("user", [{"type": "binary", "media_type": "a/b", "data": "AAAA"}])
    with open(store.sessions_dir / "s1.jsonl", "ab") as f:
        f.write(b'{"seq":5,"type":"message","ro')   # a torn tail
    path = store.sessions_dir / "s1.jsonl"
    snap = ss.source_snapshot("s1", 1, 4)
    assert digest(path, snap.ref.seqs) == snap.ref.digest
    doc = orjson.loads(cli(store, "read", "s1", "1", "4").stdout_bytes)
    assert digest(path, doc["source"]["seqs"]) == doc["source"]["digest"] == snap.ref.digest


def _complete(store_path, line: str, env_extra=None, probe=False):
    env = {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": line,
           "COMP_CWORD": str(len(line.split()) - (0 if line.endswith(" ") else 1))}
    if env_extra:
        env.update(env_extra)
    if not probe:
        return run_proc(env=env)
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            "from lecode_memctl.cli.main import main\n"
            "sys.exit(main([]))\n")
    import subprocess
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=e, timeout=60)


def test_completion_lists_session_ids(ss, store):
    make(ss, "alpha-1", 1)
    make(ss, "alpha-2", 1)
    make(ss, "beta", 1)
    os.symlink(store.sessions_dir / "beta.jsonl", store.sessions_dir / "alpha-link.jsonl")
    before = tree_hash(store.path)
    r = _complete(store.path, f"memctl --store {store.path} read al")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["alpha-1", "alpha-2"]
    r = _complete(store.path, f"memctl --store {store.path} read ", probe=True)
    assert r.stdout.decode().split() == ["alpha-1", "alpha-2", "beta"]
    mods = set(r.stderr.decode().split("MODULES ", 1)[1].split())
    assert not {"rich", "sqlite3", "tabulate", "_sqlite3"} & mods
    assert tree_hash(store.path) == before


def test_completion_resolves_project_store(tmp_path, config_dir):
    from lecode_memctl.core.layout import store_for_project

    proj = tmp_path / "proj"
    proj.mkdir()
    ss = SessionStore(store_for_project(config_dir, proj))
    make(ss, "from-project", 1)
    r = _complete(None, f"memctl -C {proj} read f", env_extra={"LECODE_CONFIG_DIR": str(config_dir)})
    assert r.stdout.decode().split() == ["from-project"]
    r = _complete(None, f"memctl --config-dir {config_dir} -C {proj} read ",
                  env_extra={"LECODE_CONFIG_DIR": str(tmp_path / "elsewhere")})
    assert r.stdout.decode().split() == ["from-project"]
    assert not (tmp_path / "elsewhere").exists()


def test_every_sessions_row_matches_the_schema(ss, store):
    """Every state's row is what 'memctl schema session' declares, in --json
    and jsonl: a refused or unreadable file was not read, so its counts are
    null (0 would claim it holds no records), and the schema and
    docs/OUTPUT.md say they may be."""
    from .test_output_contract import _check_against_schema

    make(ss, "ok1", 4)
    make(ss, "torn", 2)
    with open(store.sessions_dir / "torn.jsonl", "ab") as f:
        f.write(b'{"seq":3,"type":"mess')
    make(ss, "corrupt", 2)      # the last line is no record: no last seq, records null
    with open(store.sessions_dir / "corrupt.jsonl", "ab") as f:
        f.write(b"garbage\n")
    os.symlink("ok1.jsonl", store.sessions_dir / "alias.jsonl")
    other = SessionStore(store_at(store.path.parent / "other-000000000000"))
    make(other, "theirs", 1)
    os.link(other.store.sessions_dir / "theirs.jsonl", store.sessions_dir / "theirs.jsonl")
    (store.sessions_dir / "bad name.jsonl").write_bytes(
        (store.sessions_dir / "ok1.jsonl").read_bytes())
    os.mkfifo(store.sessions_dir / "fifo.jsonl")
    (store.sessions_dir / "dir.jsonl").mkdir()
    schema = orjson.loads(run_cli("schema", "session").stdout_bytes)
    doc = orjson.loads(cli(store, "sessions", "--json").stdout_bytes)
    lines = [orjson.loads(x) for x in cli(store, "sessions", "--format", "jsonl").stdout_bytes.splitlines()]
    assert lines == doc
    states = {r["id"]: (r["state"], r["reason"]) for r in doc}
    assert states == {
        "ok1": ("ok", None), "torn": ("torn_tail", "torn_tail"), "corrupt": ("corrupt", "not_json"),
        "alias": ("refused", "refused_symlink"), "theirs": ("refused", "refused_project"),
        "bad name": ("refused", "invalid_ref"),
        "fifo": ("unreadable", "session_unreadable"), "dir": ("unreadable", "session_unreadable")}
    for row in doc:
        _check_against_schema(row, schema)
        if row["state"] in ("refused", "unreadable"):
            assert (row["records"], row["messages"], row["compactions"]) == (None, None, None), row
    nullable = {k for k, p in schema["properties"].items()
                if isinstance(p.get("type"), list) and "null" in p["type"]}
    assert {"records", "messages", "compactions"} <= nullable


@pytest.mark.parametrize(("option", "value", "bound"), [
    ("--offset", "-1", "0<=x"), ("--limit", "0", "1<=x"), ("--limit", "-5", "1<=x")])
def test_read_help_shows_the_bounds_it_enforces(option, value, bound):
    """``read --help`` showed --offset and --limit with no lower bound while
    a negative offset or a limit below 1 was refused (exit 2): the bound is
    now the option's own, shown in --help and named in the error."""
    shown = run_cli("read", "--help").stdout
    line = re.search(rf"{option} N.*?\]", shown, re.S)
    assert line is not None and bound in line.group(0), shown
    r = run_cli("read", "s1", "1", "2", option, value)
    assert r.exit_code == 2
    assert f"Invalid value for '{option}'" in r.stderr and bound in r.stderr
