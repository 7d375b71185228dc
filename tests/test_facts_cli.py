"""memctl facts/recall/history/correct/forget/context end to end, and read
commands that leave the store byte-identical in every state."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.facts import FactStore, fact_id_for
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.rowmodel import doc_head
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli, tree_hash

PREF = "We use tabs for indentation."
FIXED = "We use tabs, width 4."


@pytest.fixture
def store(config_dir, project):
    return store_for_project(config_dir, project)


def write_session(store, sid="s1"):
    ss = SessionStore(store)
    with ss.create(sid) as w:
        w.append_message("user", PREF)                              # 1
        w.append_message("assistant", "Noted.", epoch=0)            # 2
        w.append_message("user", "Correction: " + FIXED)            # 3
        w.append_message("tool", "3 files", epoch=0, tool_call_id="c1", name="read")  # 4
        w.append_event("learning", status="learned", reason_counts={"exact_text_mismatch": 1},
                       facts=[], proposals=[])                      # 5
    return ss


def remember(store, seq=1, text=PREF, sid="s1"):
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        ref = ss.source_snapshot(sid, seq, seq).ref
        return fs.remember(text, ref, sessions=ss).fact


def cli(project, *args, **kw):
    return run_cli("-C", str(project), *args, **kw)


def read_json(project, *args):
    r = cli(project, *args, "--json")
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout_bytes)


READS = [
    ("facts",), ("facts", "--json"), ("facts", "--all", "--format", "jsonl"),
    ("facts", "--session", "s1", "--json"), ("context",), ("context", "--explain"),
    ("context", "--json"),
]


def fact_reads(fid):
    return [("recall", fid), ("history", fid), ("history", fid, "--json"),
            ("forget", fid, "--dry-run"), ("forget", fid, "--dry-run", "--json")]


def assert_reads_change_nothing(project, root: Path, fid: str):
    before = tree_hash(root)
    outs = {}
    for args in READS + fact_reads(fid):
        r = cli(project, *args)
        assert r.exit_code in (0, 3), (args, r.stderr)
        assert "Traceback" not in r.stderr
        outs[args] = r
        assert tree_hash(root) == before, f"{args} changed the store"
    return outs


def test_story_remember_correct_forget(config_dir, project, store):
    write_session(store)
    fact = remember(store)
    fid = fact.fact_id
    assert fid == fact_id_for(PREF, fact.source)

    # --- remembered
    outs = assert_reads_change_nothing(project, config_dir, fid)
    page = read_json(project, "facts")
    assert page["total"] == 1 and page["next_offset"] is None
    row = page["facts"][0]
    assert row | {"updated": "T", "created": "T"} == {
        "type": "fact", "created": "T", "fact_id": fid, "revision": 1, "status": "valid",
        "reason": None, "about_revision": None,
        "source": "s1:1", "source_ref": fact.source.to_json(), "text": PREF,
        "fact_text_truncated": False, "updated": "T"}
    assert page["learning"]["status"] == "learned"
    assert page["learning"]["reason_counts"] == {"exact_text_mismatch": 1}
    rec = orjson.loads(outs[("recall", fid)].stdout_bytes)
    assert rec["status"] == "valid" and rec["text"] == PREF and rec["revision"] == 1
    assert rec["source"] == fact.source.to_json() and rec["next_offset"] is None
    arr = orjson.loads(rec["source_text"])
    assert arr == [[1, {"seq": 1, "type": "message", "role": "user", "content": PREF}]]
    hist = read_json(project, "history", fid)
    assert [(r["revision"], r["text"], r["status"]) for r in hist["revisions"]] == [(1, PREF, "valid")]
    ctx = read_json(project, "context")
    assert [f["fact_id"] for f in ctx["included"]] == [fid]
    assert f"- fact {fid} revision 1 source " in ctx["text"] and orjson.dumps(PREF).decode() in ctx["text"]
    assert "untrusted evidence" in ctx["text"]

    # --- corrected from a later user message; tool output alone is refused
    r = cli(project, "correct", fid, "1", "s1", "4", "4", FIXED)
    assert r.exit_code == 4 and "tool output alone" in r.stderr
    r = cli(project, "correct", fid, "1", "s1", "3", "3", FIXED)
    assert r.exit_code == 0, r.stderr
    assert "revision 1 -> 2" in r.stdout and PREF in r.stdout and FIXED in r.stdout
    before = tree_hash(config_dir)
    r = cli(project, "correct", fid, "1", "s1", "3", "3", "stale")
    assert r.exit_code == 4 and "stale revision" in r.stderr
    assert tree_hash(config_dir) == before
    outs = assert_reads_change_nothing(project, config_dir, fid)
    row = read_json(project, "facts")["facts"][0]
    assert (row["revision"], row["text"], row["status"], row["source"]) == (2, FIXED, "valid", "s1:3")
    hist = read_json(project, "history", fid)
    assert [(r["revision"], r["text"], r["status"], r["current"]) for r in hist["revisions"]] == [
        (1, PREF, "valid", False), (2, FIXED, "valid", True)]
    rec = orjson.loads(outs[("recall", fid)].stdout_bytes)
    assert rec["revision"] == 2 and rec["text"] == FIXED
    assert [s for s, _m in orjson.loads(rec["source_text"])] == [3]
    ctx = read_json(project, "context")
    assert f"- fact {fid} revision 2 " in ctx["text"] and PREF not in ctx["text"]
    dry = read_json(project, "forget", fid, "--dry-run")
    assert dry["exclusions"] == [{"session_id": "s1", "seq": 1}, {"session_id": "s1", "seq": 3}]
    assert dry["new_generation"] == 1 and dry["generated_messages_invalidated"] == 2

    # --- forgotten: refused without --yes off a terminal, then done once
    r = cli(project, "forget", fid)
    assert r.exit_code == 2 and "--yes" in r.stderr
    r = cli(project, "forget", fid, "--yes")
    assert r.exit_code == 0 and "forgot fact" in r.stdout
    r = cli(project, "forget", fid, "--yes")
    assert r.exit_code == 0 and "already forgotten" in r.stdout
    assert read_json(project, "forget", fid, "--yes") == {
        **doc_head("forget"), "dry_run": False, "fact_id": fid, "forgotten": False,
        "already_forgotten": True, "generation": 1, "unexcluded": []}
    outs = assert_reads_change_nothing(project, config_dir, fid)
    page = read_json(project, "facts")
    assert page["total"] == 0 and page["facts"] == []
    assert outs[("recall", fid)].exit_code == 3 and "forgotten" in outs[("recall", fid)].stderr
    assert outs[("history", fid)].exit_code == 3
    ctx = read_json(project, "context")
    assert ctx["included"] == [] and fid not in ctx["text"] and ctx["generation"] == 1
    # the evidence is excluded for good
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        assert fs.excluded_seqs("s1") == {1, 3}
        from lecode_memctl.core.errors import Conflict

        with pytest.raises(Conflict):
            ss.source_snapshot("s1", 1, 1)
    r = cli(project, "forget", "0123456789abcdef", "--yes")
    assert r.exit_code == 3
    r = cli(project, "recall", "not-a-fact-id")
    assert r.exit_code == 2


def test_overlapping_fact_is_suppressed_and_context_explains(config_dir, project, store):
    ss = write_session(store)
    a = remember(store, 1, PREF)
    b = remember(store, 1, "Indentation: tabs.")
    c = remember(store, 3, FIXED)
    dry = read_json(project, "forget", a.fact_id, "--dry-run")
    assert dry["suppressed_facts"] == [b.fact_id]
    assert cli(project, "forget", a.fact_id, "--yes").exit_code == 0
    rows = {r["fact_id"]: r for r in read_json(project, "facts")["facts"]}
    assert rows[b.fact_id]["status"] == "hidden" and rows[b.fact_id]["reason"] == "excluded"
    assert rows[c.fact_id]["status"] == "valid"
    rec = read_json(project, "recall", b.fact_id)
    assert rec == {**doc_head("recall"), "fact_id": b.fact_id, "revision": 1, "status": "hidden",
                   "reason": "excluded",
                   "about_revision": 1}
    ctx = read_json(project, "context")
    assert [f["fact_id"] for f in ctx["included"]] == [c.fact_id]
    assert {o["fact_id"]: o["reason"] for o in ctx["omitted"]} == {b.fact_id: "invalid_evidence"}
    r = cli(project, "context", "--explain")
    assert f"omitted {b.fact_id}: invalid_evidence: hidden (excluded) at revision 1" in r.stdout
    del ss


def test_facts_pages_and_caps(config_dir, project, store):
    ss = SessionStore(store)
    long_text = "x\u202e" * 700
    with ss.create("s2") as w:
        for i in range(45):
            w.append_message("user", f"fact {i} " + ("\"\\" * 400 if i % 2 else long_text))
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        for i in range(45):
            rec = ss.records("s2", i + 1, i + 1)[0]
            fs.remember(rec["content"], ss.source_snapshot("s2", i + 1, i + 1).ref, sessions=ss)
    seen = []
    offset = 0
    while offset is not None:
        # machine formats page only when asked to (--limit/--offset); no byte cap
        r = cli(project, "facts", "--offset", str(offset), "--limit", "20", "--json")
        assert r.exit_code == 0
        doc = orjson.loads(r.stdout_bytes)
        assert 1 <= len(doc["facts"]) <= 20
        for row in doc["facts"]:
            assert len(row["text"]) <= 512
            assert row["fact_text_truncated"] == (len(row["text"]) == 512)
        seen += [row["fact_id"] for row in doc["facts"]]
        offset = doc["next_offset"]
    assert len(seen) == len(set(seen)) == 45 and seen == sorted(seen)
    r = cli(project, "facts", "--all", "--format", "jsonl")
    rows = [orjson.loads(line) for line in r.stdout_bytes.splitlines()]
    assert [row["fact_id"] for row in rows] == seen
    assert [row["fact_id"] for row in orjson.loads(cli(project, "facts", "--json").stdout_bytes)
            ["facts"]] == seen
    assert cli(project, "facts", "--limit", "21").exit_code == 2
    # the table is the agent's page: at most 20 facts and 16 KiB of JSON, the next page on stderr
    r = cli(project, "facts")
    shown = [line.split()[0] for line in r.stdout.splitlines() if line[:16] in seen]
    assert 1 <= len(shown) <= 20 and shown == seen[:len(shown)]
    assert f"--offset {len(shown)}" in r.stderr
    r = cli(project, "facts")
    assert "\u202e" not in r.stdout and "\\u202e" in r.stdout  # stored text is escaped


def test_recall_pages_concatenate(config_dir, project, store):
    ss = SessionStore(store)
    big = "".join(chr(0x41 + i % 50) for i in range(9000)) + "\"\\\n\x1b"
    with ss.create("s3") as w:
        w.append_message("user", [{"type": "text", "text": big},
                                  {"type": "binary", "media_type": "image/png", "data": "AAAA" * 10}])
    fact = remember(store, 1, "big source", sid="s3")
    text, offset = "", 0
    while offset is not None:
        r = cli(project, "recall", fact.fact_id, "--offset", str(offset), "--limit", "3000")
        assert r.exit_code == 0 and len(r.stdout_bytes) <= 16384
        doc = orjson.loads(r.stdout_bytes)
        text += doc["source_text"]
        offset = doc["next_offset"]
    arr = orjson.loads(text)
    assert arr[0][0] == 1 and arr[0][1]["content"][0]["text"] == big
    assert "data" not in arr[0][1]["content"][1] and arr[0][1]["content"][1]["omitted_bytes"] == 30


LIVE_WRITER = textwrap.dedent("""
    import sys
    from lecode_memctl.core.facts import FactStore, Provenance
    fs = FactStore(sys.argv[1], on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    for i in range(int(sys.argv[2])):
        fs.add(f"live fact {i}", provenance=[Provenance("s1", (1,))])
    print("ready", flush=True)
    sys.stdin.read()
    fs.close()
""")


@pytest.mark.parametrize("state", ["none", "clean", "live"])
def test_reads_leave_store_identical(config_dir, project, store, state):
    from lecode_memctl.cli.completion import complete_fact_id

    write_session(store)
    proc = None
    expected_ids: list[str] = []
    if state == "clean":
        fact = remember(store)
        expected_ids = [fact.fact_id]
        assert not Path(str(store.facts_db) + "-wal").exists()
    elif state == "live":
        fact = remember(store)  # checkpointed and closed: in the main file
        proc = subprocess.Popen([sys.executable, "-c", LIVE_WRITER, str(store.facts_db), "3"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        wal = Path(str(store.facts_db) + "-wal")
        assert wal.stat().st_size > 0
        # the live rows are only in the -wal: an immutable open of the main file misses them
        db = sqlite3.connect(f"file:{store.facts_db}?mode=ro&immutable=1", uri=True)
        assert db.execute("SELECT count(*) FROM facts").fetchone()[0] == 1
        db.close()
        expected_ids = [fact.fact_id] + [fact_id_for(f"live fact {i}", None) for i in range(3)]
    try:
        before = tree_hash(config_dir)
        fid = expected_ids[0] if expected_ids else "0123456789abcdef"
        outs = assert_reads_change_nothing(project, config_dir, fid)
        ids = [orjson.loads(line)["fact_id"]
               for line in outs[("facts", "--all", "--format", "jsonl")].stdout_bytes.splitlines()]
        assert ids == sorted(expected_ids)

        class Ctx:
            params = {"project": str(project)}
            parent = None
        assert complete_fact_id(Ctx(), "") == sorted(expected_ids)
        assert tree_hash(config_dir) == before
        if state == "none":
            assert not store.facts_db.exists()
            assert outs[("recall", fid)].exit_code == 3
        if state == "live":
            rows = orjson.loads(outs[("facts", "--json")].stdout_bytes)["facts"]
            live = [r for r in rows if r["text"].startswith("live fact")]
            assert len(live) == 3 and {r["status"] for r in live} == {"unverified"}
    finally:
        if proc is not None:
            proc.communicate(b"", timeout=30)


def test_legacy_database_reads_without_migrating(config_dir, project, store):
    from .test_facts import make_legacy

    make_legacy(store.facts_db)
    before = tree_hash(config_dir)
    r = cli(project, "facts", "--json")
    assert r.exit_code == 0 and "needs migration" in r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert [(f["fact_id"], f["status"], f["reason"], f["source"]) for f in doc["facts"]] == [
        ("00000000000000aa", "unverified", "legacy_provenance", "old-session:7")]
    hist = read_json(project, "history", "00000000000000aa")
    assert [r["status"] for r in hist["revisions"]] == ["unverified", "unverified"]
    assert read_json(project, "recall", "00000000000000aa")["status"] == "unverified"
    assert tree_hash(config_dir) == before


def test_future_schema_exits_5(config_dir, project, store):
    with FactStore(store.facts_db) as fs:
        fs.add("x")
    db = sqlite3.connect(store.facts_db)
    db.execute("PRAGMA user_version = 99")
    db.close()
    r = cli(project, "facts")
    assert r.exit_code == 5 and "newer" in r.stderr and "Traceback" not in r.stderr


def test_correct_usage_errors(config_dir, project, store):
    write_session(store)
    fid = remember(store).fact_id
    assert cli(project, "correct", fid, "1", "../x", "1", "1", "t").exit_code == 2
    assert cli(project, "correct", fid, "1", "s1", "3", "1", "t").exit_code == 2
    assert cli(project, "correct", fid, "1", "s1", "3", "3").exit_code == 2
    assert cli(project, "correct", fid, "1", "nosuch", "3", "3", "t").exit_code == 3
    assert cli(project, "correct", "ffffffffffffffff", "1", "s1", "3", "3", "t").exit_code == 3
    r = cli(project, "correct", fid, "1", "s1", "3", "3", "--text-file", "-", input=FIXED + "\n")
    assert r.exit_code == 0, r.stderr
    assert read_json(project, "history", fid)["revisions"][-1]["text"] == FIXED


def test_context_budgets(config_dir, project, store):
    (config_dir).mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text("[memory]\nmax_bytes = 1200\nfacts_max_bytes = 700\n")
    ss = SessionStore(store)
    with ss.create("s4") as w:
        w.append_message("user", "short one")
        w.append_message("user", "y" * 900)
        w.append_message("user", "short two")
    a = remember(store, 1, "short one", sid="s4")
    big = remember(store, 2, "y" * 900, sid="s4")
    b = remember(store, 3, "short two", sid="s4")
    store.memory_file.write_text("M" * 2000)
    store.scratchpad_file.write_text("todo\n")
    doc = read_json(project, "context")
    assert doc["bytes"] <= 1200 and len(doc["text"].encode()) == doc["bytes"]
    assert doc["facts_bytes"] <= 700
    omitted = {o["fact_id"]: o["reason"] for o in doc["omitted"]}
    assert omitted[big.fact_id] == "too_large"
    included = {f["fact_id"] for f in doc["included"]}
    assert included | set(omitted) == {a.fact_id, big.fact_id, b.fact_id}
    parts = {p["name"]: p for p in doc["parts"]}
    assert parts["MEMORY.md"]["truncated"] and "[... truncated:" in doc["text"]
    assert doc["text"].index("## Facts") < doc["text"].index("## MEMORY.md")
    (config_dir / "config.toml").write_text("[memory]\nenabled = false\n")
    doc = read_json(project, "context")
    assert doc["text"] == "" and not doc["enabled"]


def test_session_filter_and_learning_per_session(config_dir, project, store):
    write_session(store, "s1")
    ss = SessionStore(store)
    with ss.create("s2") as w:
        w.append_message("user", "Prefer pytest over unittest.")           # 1
        w.append_event("learning", status="proposed", reason_counts={},
                       facts=[], proposals=[
                           {"text": "Prefer pytest.", "kind": "explicit_user_preference",
                            "source": ss.source_snapshot("s2", 1, 1).ref.to_json()},
                           {"text": "no evidence"}])                       # 2
    a = remember(store, 1, PREF, sid="s1")
    b = remember(store, 1, "Prefer pytest over unittest.", sid="s2")
    doc = read_json(project, "facts", "--session", "s2")
    assert [f["fact_id"] for f in doc["facts"]] == [b.fact_id] and doc["total"] == 1
    assert doc["learning"]["session_id"] == "s2" and doc["learning"]["status"] == "proposed"
    assert [p["text"] for p in doc["learning"]["proposals"]] == ["Prefer pytest."]
    assert doc["learning"]["proposals_hidden"] == 1
    doc = read_json(project, "facts", "--session", "s1")
    assert [f["fact_id"] for f in doc["facts"]] == [a.fact_id]
    assert doc["learning"]["status"] == "learned"
    rows = [orjson.loads(x) for x in cli(project, "facts", "--all", "--session", "s2",
                                         "--format", "jsonl").stdout_bytes.splitlines()]
    assert [r["fact_id"] for r in rows] == [b.fact_id]
    assert cli(project, "facts", "--session", "../s1").exit_code == 2
    r = cli(project, "facts")
    assert "learning: " in r.stdout


def test_proposals_hidden_by_clear_and_by_a_missing_epoch(config_dir, project, store):
    """A learning event's proposals are extraction output: their evidence is
    validated as new evidence is (purpose ``working``: a ``clear`` after it
    hides it, as for ``correct``), and one with no epoch (of its own or its
    event's) is hidden once a forget has raised the generation (store
    contract, "Visibility", rule 4; reference design, "hides proposals whose
    epoch or evidence no longer validates")."""
    write_session(store, "s1")
    ss = SessionStore(store)

    def proposal(sid, seq, **extra):
        return {"text": f"proposal {sid}:{seq}", "kind": "explicit_user_preference",
                "source": ss.source_snapshot(sid, seq, seq).ref.to_json(), **extra}

    with ss.create("s2") as w:
        w.append_message("user", "Prefer pytest over unittest.")           # 1
        w.append_message("user", "Prefer ruff over flake8.")               # 2
    with ss.writer("s2") as w:
        w.append_event("learning", status="proposed", reason_counts={}, facts=[],
                       proposals=[proposal("s2", 1, epoch=0), proposal("s2", 2)])  # 3
    doc = read_json(project, "facts", "--session", "s2")
    assert [p["text"] for p in doc["learning"]["proposals"]] == ["proposal s2:1", "proposal s2:2"]
    with ss.writer("s2") as w:
        w.append_event("clear")                                            # 4
    doc = read_json(project, "facts", "--session", "s2")
    assert doc["learning"]["proposals"] == [] and doc["learning"]["proposals_hidden"] == 2

    with ss.create("s3") as w:
        w.append_message("user", "Prefer black over yapf.")                # 1
        w.append_event("learning", status="proposed", reason_counts={}, facts=[],
                       proposals=[proposal("s3", 1), proposal("s3", 1, epoch=1),
                                  proposal("s3", 1, epoch=0)])             # 2
    doc = read_json(project, "facts", "--session", "s3")
    assert len(doc["learning"]["proposals"]) == 3      # generation 0: every epoch is current
    gone = remember(store, 1, PREF, sid="s1")
    assert cli(project, "forget", gone.fact_id, "--yes").exit_code == 0    # generation 1
    doc = read_json(project, "facts", "--session", "s3")
    assert [p["text"] for p in doc["learning"]["proposals"]] == ["proposal s3:1"]
    assert doc["learning"]["proposals_hidden"] == 2


def test_a_proposals_conflicts_must_name_facts_at_their_revision(config_dir, project, store):
    """A proposal's conflicts are objects with the fact id and the revision
    supplied to the extraction call: one that names a fact forgotten, never
    there or at another revision hides the proposal, and so does a plain
    fact id (the model's form, which says no revision: fail closed).
    Before 2026-12-07 only the objects were checked: a plain id of a
    forgotten fact, or of none, was shown; later that day a plain id of a
    fact there was still shown, whatever its revision now."""
    write_session(store, "s1")
    here = remember(store, 1, PREF, sid="s1")
    gone = remember(store, 3, "Correction: " + FIXED, sid="s1")
    ss = SessionStore(store)
    source = ss.source_snapshot("s1", 1, 1).ref.to_json()
    cases = {
        "no conflicts": [],
        "an id": [here.fact_id],
        "an object": [{"fact_id": here.fact_id, "revision": 1}],
        "a forgotten id": [gone.fact_id],
        "a forgotten object": [{"fact_id": gone.fact_id, "revision": 1}],
        "an id never there": ["0000000000000000"],
        "another revision": [{"fact_id": here.fact_id, "revision": 2}],
        "not an id": ["tabs"],
        "a number": [12],
        "null": None,
        "one id, not in a list": here.fact_id,
        "a forgotten id, not in a list": gone.fact_id,
        "an object, not in a list": {"fact_id": here.fact_id},
    }
    assert cli(project, "forget", gone.fact_id, "--yes").exit_code == 0    # generation 1
    with ss.writer("s1") as w:
        w.append_event("learning", status="proposed", reason_counts={}, facts=[], epoch=1,
                       proposals=[{"text": name, "kind": "explicit_user_preference",
                                   "source": source, "conflicts": conflicts}
                                  for name, conflicts in cases.items()])
    doc = read_json(project, "facts", "--session", "s1")
    assert [p["text"] for p in doc["learning"]["proposals"]] == [
        "no conflicts", "an object", "null"]
    assert doc["learning"]["proposals_hidden"] == 10


def test_symlinked_store_directory_is_refused(config_dir, project, store, tmp_path):
    real = tmp_path / "real-store"
    real.mkdir()
    store.path.parent.mkdir(parents=True)
    os.symlink(real, store.path)
    for args in (("facts",), ("context",), ("recall", "0123456789abcdef"),
                 ("forget", "0123456789abcdef", "--yes")):
        r = cli(project, *args)
        assert r.exit_code == 5 and "symbolic link" in r.stderr, args


def test_fact_id_completion_through_the_shell_protocol(config_dir, project, store):
    """A real TAB: offers the store's fact ids, imports neither rich nor
    tabulate, and writes nothing."""
    write_session(store)
    fid = remember(store).fact_id
    before = tree_hash(config_dir)
    env = dict(os.environ, _MEMCTL_COMPLETE="complete_bash", COMP_CWORD="4",
               COMP_WORDS=f"memctl -C {project} recall {fid[:3]}")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "lecode_memctl"],
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0
    assert fid in proc.stdout.decode().split()
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert not imported & {"rich", "tabulate"}
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("spec", [("s1", "9" * 5000, "9" * 5000), ("s1:1-" + "9" * 5000,),
                                  ("s1:" + "9" * 5000 + "-" + "9" * 5000,),
                                  ("s1", "3", str(2 ** 63))])
def test_correct_refuses_a_position_beyond_64_bits(config_dir, project, store, spec):
    """A START or END of thousands of digits went to int(), which refuses
    more than 4,300: an internal error (exit 70).  A position is at most
    2^63-1 (what SQLite stores); beyond, a usage error that says so."""
    write_session(store)
    fid = remember(store).fact_id
    r = cli(project, "correct", fid, "1", *spec, "t", "--yes")
    assert r.exit_code == 2, (r.exit_code, r.stderr[-300:])
    assert "internal error" not in r.stderr and "at most 9223372036854775807" in r.stderr
