"""Contract fixes of 2026-12-07 (d): a number beyond a double has no digest;
the slug shape refuses a trailing newline; generated messages and their
epochs as the contract says; a ``.git`` file as git reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_cli, tree_hash

SLUG = "proj-0123456789ab"
HEADER = ('{"seq":0,"type":"session","format":1,"session_id":"s1","project":"' + SLUG + '",'
          '"created":"2026-05-01T10:00:00Z"}')


def _store(tmp_path: Path, *lines: str) -> Path:
    store = tmp_path / "memory" / SLUG
    (store / "sessions").mkdir(parents=True)
    (store / "sessions" / "s1.jsonl").write_text(
        "".join(x + "\n" for x in (HEADER, *lines)), encoding="utf-8")
    return store


# -- 1. a number beyond a double -----------------------------------------------

@pytest.mark.parametrize("value", ["1e400", "-1e400", "9e999", "1" + "0" * 400])
def test_read_of_a_number_beyond_a_double_is_exit_5_not_a_digest(tmp_path, value):
    store = _store(tmp_path, '{"seq":1,"type":"message","role":"user","content":"budget",'
                             f'"amount":{value}}}',
                   '{"seq":2,"type":"message","role":"user","content":"after"}')
    before = tree_hash(store)
    r = run_cli("--store", str(store), "read", "s1", "1", "1", "--json")
    assert r.exit_code == 5, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1
    assert "seq 1" in r.stderr and "Traceback" not in r.stderr
    # the line is still a record: the next one reads, and grep finds it
    assert run_cli("--store", str(store), "read", "s1", "2", "2").exit_code == 0
    g = run_cli("--store", str(store), "grep", "budget", "--json")
    assert g.exit_code == 0, g.stderr
    assert '"seq":1' in g.stdout.replace(" ", "")
    assert tree_hash(store) == before


def test_a_reference_over_a_number_beyond_a_double_is_stale_records_corrupt(tmp_path):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    store = _store(tmp_path, '{"seq":1,"type":"message","role":"user","content":"x","n":null}')
    ss = SessionStore(store_at(store))
    # the digest the reference held when the value was null (what orjson
    # would write for an infinite float) does not make 1e400 valid
    digest = canonical_digest(ss.records("s1", 1, 1))
    (store / "sessions" / "s1.jsonl").write_text(
        HEADER + '\n{"seq":1,"type":"message","role":"user","content":"x","n":1e400}\n',
        encoding="utf-8")
    for purpose in ("working", "durable"):
        st = SessionStore(store_at(store)).validate_source(SourceRef("s1", (1,), digest), purpose)
        assert (st.status, st.reason, st.seq) == ("stale", "records_corrupt", 1)
    # nested anywhere in the record
    (store / "sessions" / "s1.jsonl").write_text(
        HEADER + '\n{"seq":1,"type":"message","role":"user","content":[{"type":"text",'
        '"text":"x","meta":{"a":[1,-1e400]}}]}\n', encoding="utf-8")
    st = SessionStore(store_at(store)).validate_source(SourceRef("s1", (1,), digest))
    assert (st.status, st.reason) == ("stale", "records_corrupt")


@pytest.mark.parametrize("deep", [False, True])
def test_a_fact_citing_a_number_beyond_a_double_is_stale_in_facts_and_validate(tmp_path, deep):
    """The reviewer's repro: a fact cites a record whose value was null; the
    value edited to 1e400 (which orjson would write null) is no longer the
    record cited, to the listing and to the audit (in memory and --deep)."""
    import orjson

    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    line = '{"seq":1,"type":"message","role":"user","content":"budget","amount":%s}'
    store = _store(tmp_path, line % "null")
    st = store_at(store)
    facts = FactStore(st.facts_db)
    ref = SessionStore(st, exclusions=facts).source_snapshot("s1", 1, 1).ref
    fid = facts.add("The budget.", ref=ref).fact.fact_id
    facts.close()
    r = run_cli("--store", str(store), "facts", "--all", "--json")
    assert '"valid"' in r.stdout, r.stdout
    for value in ("1e400", "-1e400"):
        (store / "sessions" / "s1.jsonl").write_text(HEADER + "\n" + line % value + "\n",
                                                     encoding="utf-8")
        r = run_cli("--store", str(store), "facts", "--all", "--json")
        assert r.exit_code in (0, 1) and "Traceback" not in r.stderr, r.stderr
        doc = orjson.loads(r.stdout_bytes)
        (row,) = [f for f in doc["facts"] if f["fact_id"] == fid]
        assert (row["status"], row["reason"]) == ("stale", "records_corrupt"), row
        args = ["--store", str(store), "validate", "--json"] + (["--deep"] if deep else [])
        r = run_cli(*args)
        assert r.exit_code == 1, (r.exit_code, r.stderr)
        found = orjson.loads(r.stdout_bytes)["findings"]
        assert any(f.get("fact_id") == fid and f.get("reason") == "records_corrupt"
                   for f in found), found
        assert not any(f["code"] == "session.corrupt_line" for f in found), found


def test_canonical_bytes_refuses_a_record_read_with_an_infinite_float():
    from lecode_memctl.core.sessions import load_record
    from lecode_memctl.core.sourceref import RecordsUndigestible, canonical_bytes

    plain = load_record(b'{"seq":1,"a":null,"b":"null","c":1e300}')
    assert canonical_bytes([plain]) == b'[{"a":null,"b":"null","c":1e+300,"seq":1}]'
    for line in (b'{"seq":3,"v":1e400}', b'{"seq":3,"v":[1.0,{"x":-1e400}]}',
                 b'{"seq":3,"v":' + b"9" * 400 + b"}"):
        rec = load_record(line)
        assert isinstance(rec, dict) and rec["seq"] == 3   # a record like any other to read
        with pytest.raises(RecordsUndigestible) as ei:
            canonical_bytes([plain, rec])
        assert ei.value.seq == 3 and "number beyond a double" in ei.value.detail


def test_a_snapshot_over_a_number_beyond_a_double_is_refused(tmp_path):
    from lecode_memctl.core.errors import StoreCorrupt
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = _store(tmp_path, '{"seq":1,"type":"message","role":"user","content":"x","n":1e400}',
                   '{"seq":2,"type":"message","role":"user","content":"y"}')
    ss = SessionStore(store_at(store))
    with pytest.raises(StoreCorrupt, match="seq 1 cannot be digested"):
        ss.source_snapshot("s1", 1, 2)
    assert ss.source_snapshot("s1", 2, 2).ref.seqs == (2,)


# -- 2. a slug with a trailing newline is no slug --------------------------------

def test_looks_like_slug_refuses_a_trailing_newline():
    from lecode_memctl.core.layout import looks_like_slug

    assert looks_like_slug(SLUG) and looks_like_slug("root-0123456789ab")
    for bad in (SLUG + "\n", "root-0123456789ab\n", SLUG + "\n\n", "\n" + SLUG):
        assert not looks_like_slug(bad), repr(bad)


def test_slug_option_with_a_trailing_newline_is_a_usage_error(tmp_path):
    store = _store(tmp_path)
    r = run_cli("--store", str(store), "--slug", SLUG + "\n", "where", "--json")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr


def test_a_header_slug_with_a_newline_is_not_slug_shaped(tmp_path):
    from lecode_memctl.core.layout import store_given

    store = tmp_path / "evidence"
    (store / "sessions").mkdir(parents=True)
    (store / "sessions" / "s1.jsonl").write_text(
        HEADER.replace(SLUG, SLUG + "\\n") + "\n", encoding="utf-8")
    st = store_given(store)
    assert st.slug != SLUG + "\n" and st.slug_source != "headers", st


def test_a_store_directory_named_a_slug_and_a_newline_is_not_named_by_it(tmp_path):
    """``--store <config>/memory/<slug>`` takes the slug from the directory's
    name only when that name is slug-shaped: ``proj-...\n`` is not."""
    from lecode_memctl.core.layout import store_given

    good = tmp_path / "memory" / SLUG
    good.mkdir(parents=True)
    assert "a store in a config directory" in store_given(good).slug_detail
    bad = tmp_path / "memory" / (SLUG + "\n")
    bad.mkdir()
    assert "a store in a config directory" not in store_given(bad).slug_detail


def test_other_name_patterns_refuse_a_trailing_newline():
    from lecode_memctl.core.audit import run
    from lecode_memctl.core.migrate import _SQLITE_NAME

    assert run._TMP_RE.match(".MEMORY.md.tmp-ab12") and not run._TMP_RE.match(".MEMORY.md.tmp-ab12\n")
    assert run._TOP_EXTRA_RE.match("facts.sqlite3.lock")
    assert not run._TOP_EXTRA_RE.match("facts.sqlite3.lock\n")
    assert _SQLITE_NAME.search("x.db-wal") and not _SQLITE_NAME.search("x.db\n")


# -- 3. generated messages: assistant, tool, and synthetic user notifications ----

@pytest.mark.parametrize("who, generated", [
    ({"role": "assistant"}, True), ({"role": "tool"}, True),
    ({"role": "user", "synthetic": True}, True),
    ({"role": "system", "synthetic": True}, False),   # not a user notification
    ({"role": "user", "synthetic": "true"}, False), ({"role": "user", "synthetic": 1}, False),
    ({"role": "user"}, False), ({"role": "system"}, False),
])
def test_generated_is_the_contracts_rule(who, generated):
    from lecode_memctl.core.sessions import UndoState, is_generated, visible

    rec = {"seq": 3, "type": "message", **who, "content": "x"}
    assert is_generated(rec) is generated
    got = visible(rec, purpose="working", excluded=frozenset(), generation=1,
                  undo_state=UndoState(), clear_seq=None)
    assert got == ((False, "epoch") if generated else (True, None))


def test_a_synthetic_system_message_is_visible_above_generation_zero(tmp_path):
    """Through the CLI: at generation 1 (one forget), a synthetic system
    message without an epoch reads; a synthetic user one is hidden."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    store = _store(tmp_path,
                   '{"seq":1,"type":"message","role":"user","content":"keep"}',
                   '{"seq":2,"type":"message","role":"system","content":"sys","synthetic":true}',
                   '{"seq":3,"type":"message","role":"user","content":"note","synthetic":true}')
    facts = FactStore(store_at(store).facts_db)
    fid = facts.add("a fact to forget").fact.fact_id
    facts.forget(fid)
    assert facts.generation() == 1
    facts.close()
    r = run_cli("--store", str(store), "read", "s1", "2", "2", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    r = run_cli("--store", str(store), "read", "s1", "3", "3", "--json")
    assert r.exit_code == 4 and '"epoch"' in r.stdout, (r.exit_code, r.stdout, r.stderr)


# -- 4. an epoch is compared as the number it is ---------------------------------

@pytest.mark.parametrize("epoch, generation, hidden", [
    (-0.5, 0, True), (0.0, 0, False), (1.0, 1, False), (0.5, 1, True), (1.5, 1, False),
    (0, 1, True), (1, 1, False), (2, 1, False), (-1, 0, True),
    (None, 0, False), (None, 1, True), (True, 0, False), (True, 1, True), (False, 1, True),
    ("1", 0, False), ("1", 1, True), ([1], 1, True), ({"g": 1}, 0, False),
    (float("-inf"), 0, True), (float("inf"), 1, False),
])
def test_epoch_is_compared_numerically(epoch, generation, hidden):
    from lecode_memctl.core.sessions import UndoState, epoch_hides, visible

    assert epoch_hides(epoch, generation) is hidden
    rec = {"seq": 3, "type": "message", "role": "assistant", "content": "x"}
    if epoch is not None:
        rec["epoch"] = epoch
    for purpose in ("working", "durable"):
        got = visible(rec, purpose=purpose, excluded=frozenset(), generation=generation,
                      undo_state=UndoState(), clear_seq=None)
        assert got == ((False, "epoch") if hidden else (True, None)), (epoch, generation)


def test_a_float_epoch_through_read_and_validate(tmp_path):
    """``"epoch":-0.5`` is hidden at generation 0; ``"epoch":1.0`` is
    visible at generation 1 and ``"epoch":1.5`` is ahead of it."""
    import orjson

    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    store = _store(tmp_path,
                   '{"seq":1,"type":"message","role":"user","content":"q"}',
                   '{"seq":2,"type":"message","role":"assistant","content":"a","epoch":-0.5}')
    r = run_cli("--store", str(store), "read", "s1", "2", "2", "--json")
    assert r.exit_code == 4 and '"epoch"' in r.stdout, (r.exit_code, r.stdout, r.stderr)
    facts = FactStore(store_at(store).facts_db)
    facts.forget(facts.add("a fact to forget").fact.fact_id)
    assert facts.generation() == 1
    facts.close()
    p = store / "sessions" / "s1.jsonl"
    p.write_text(p.read_text().replace('"epoch":-0.5', '"epoch":1.0'), encoding="utf-8")
    r = run_cli("--store", str(store), "read", "s1", "2", "2", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    for deep in ([], ["--deep"]):
        r = run_cli("--store", str(store), "validate", "--json", *deep)
        codes = [f["code"] for f in orjson.loads(r.stdout_bytes)["findings"]]
        assert "session.epoch_ahead" not in codes, (deep, codes)
    p.write_text(p.read_text().replace('"epoch":1.0', '"epoch":1.5'), encoding="utf-8")
    for deep in ([], ["--deep"]):
        r = run_cli("--store", str(store), "validate", "--json", *deep)
        codes = [f["code"] for f in orjson.loads(r.stdout_bytes)["findings"]]
        assert "session.epoch_ahead" in codes, (deep, codes)


# -- 5. a .git file read as git reads it (setup.c, read_gitfile_gently) ----------

def _git_toplevel(cwd: Path) -> str | None:
    """What ``git rev-parse --show-toplevel`` says in ``cwd``; None when git
    refuses the .git file there."""
    import subprocess

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("GIT_")}
    r = subprocess.run(["git", "rev-parse", "--show-toplevel", "--git-common-dir"], cwd=cwd,
                       capture_output=True, text=True, env=env)
    return r.stdout.splitlines()[0] if r.returncode == 0 else None


@pytest.mark.parametrize("form, git_takes", [
    ("gitdir: {}\n", True), ("gitdir: {}", True), ("gitdir: {}\r\n", True),
    ("gitdir: {}\n\n\r\n", True),
    ("gitdir:{}\n", False),           # no space after the colon: "invalid gitfile format"
    (" gitdir: {}\n", False), ("GITDIR: {}\n", False), ("\ufeffgitdir: {}\n", False),
    ("gitdir: \n", False),            # no path
    ("gitdir:   {}   \n", None),      # more blanks: part of the path, which is no repository
    ("gitdir: {}  \n", None),         # trailing blanks are kept: no such directory
])
def test_a_dot_git_file_is_read_as_git_reads_it(tmp_path, form, git_takes):
    """Differential: what ``git rev-parse`` takes is a linked worktree of the
    main checkout to memctl too; a file git refuses never is (None: refused
    for its path, which names no git directory, not for its format)."""
    import shutil

    from lecode_memctl.core.identity import LINKED_WORKTREE, MAIN_CHECKOUT, resolve_project

    from .conftest import git, make_repo

    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = make_repo(tmp_path / "main")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    target = (wt / ".git").read_text().strip()[len("gitdir: "):]
    (wt / ".git").write_bytes(form.format(target).encode("utf-8"))
    ident = resolve_project(wt)
    top = _git_toplevel(wt)
    assert (top is not None) is bool(git_takes), (form, top)
    if git_takes:
        assert ident.kind == LINKED_WORKTREE and ident.root == repo.resolve(), ident
        return
    # a .git file git refuses: its directory is the checkout root, never the
    # main checkout's store
    assert ident.kind != LINKED_WORKTREE and ident.root == wt.resolve(), ident
    if git_takes is False:   # refused for its format: as any other invalid .git file
        assert ident.kind == MAIN_CHECKOUT and "unreadable .git file" in ident.detail, ident
