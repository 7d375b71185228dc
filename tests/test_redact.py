"""``memctl redact``: nothing left anywhere, other facts still valid, plan, bad input, kills."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
from pathlib import Path

import orjson
import pytest

from . import faultkit, secretstore
from .conftest import run_cli, tree_hash


@pytest.fixture
def planted(tmp_path) -> secretstore.Planted:
    return secretstore.build(tmp_path, seed=11)


def cli(p: secretstore.Planted, *args: str):
    return run_cli("--store", str(p.store), *args)


def raw_hits(root: Path, values) -> int:
    """``grep -r -a`` for each value over every byte of every file under ``root``:
    how many (file, value) pairs match.  Values are never printed."""
    n = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            data = (Path(dirpath) / name).read_bytes()
            for v in values:
                forms = {v.encode(), orjson.dumps(v)[1:-1]}
                if any(f in data for f in forms):
                    n += 1
    return n


def fact_statuses(p: secretstore.Planted) -> dict[str, str]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    fs = FactStore.open_readonly(p.store / "facts.sqlite3")
    try:
        ss = SessionStore(store_at(p.store), fs)
        out = {}
        for fact in fs.iter_facts():
            assert fact.source is not None
            out[fact.fact_id] = ss.validate_source(fact.source, "durable").status
        return out
    finally:
        fs.close()


def secret_values(p: secretstore.Planted) -> list[str]:
    return [p.values[k] for k in ("aws", "ghp", "password", "pem_body_line")] + \
        [p.values["pem"]]


def test_redact_leaves_no_byte_and_other_facts_validate(planted):
    before = fact_statuses(planted)
    assert all(s == "valid" for s in before.values())
    assert raw_hits(planted.store, secret_values(planted)) > 0

    r = cli(planted, "redact", "--yes", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    leaked = any(v in r.stdout + r.stderr for v in secret_values(planted))
    assert not leaked
    assert doc["result"]["forgotten"] == [planted.facts["password"]]
    assert doc["result"]["database_cleaned"] is True

    # 1. secrets finds nothing
    assert cli(planted, "secrets").exit_code == 0
    # 2. a raw byte search of the whole store finds nothing
    assert raw_hits(planted.store, secret_values(planted)) == 0
    assert not (planted.store / "facts.sqlite3-wal").exists() or \
        (planted.store / "facts.sqlite3-wal").stat().st_size == 0
    # 3. every fact whose evidence held no rewritten record still validates
    after = fact_statuses(planted)
    for role in ("keep-main", "keep-tests", "keep-other"):
        assert after[planted.facts[role]] == "valid", role
    assert after[planted.facts["stale"]] == "stale"
    assert planted.facts["password"] not in after

    # records and seqs kept, the marker in place of the value
    lines = (planted.store / "sessions" / "s-main.jsonl").read_bytes().splitlines()
    recs = [orjson.loads(x) for x in lines]
    assert [r["seq"] for r in recs] == list(range(len(recs)))
    assert recs[4]["content"].startswith("use this token: [REDACTED:github-token:")
    # the same value gets the same marker wherever it was
    forgot = orjson.loads((planted.store / "sessions" / "s-forgot.jsonl").read_bytes().splitlines()[1])
    tag = recs[3]["content"].split("[REDACTED:")[1].split("]")[0]
    assert f"[REDACTED:{tag}]" in forgot["content"]
    # idempotent: nothing left to do
    again = cli(planted, "redact", "--yes", "--json")
    assert again.exit_code == 0 and orjson.loads(again.stdout_bytes)["result"] is None


def test_dry_run_plan_changes_nothing(planted):
    from lecode_memctl.core.rowmodel import REWRITE, SCHEMA_VERSION

    before = tree_hash(planted.store)
    r = cli(planted, "redact", "--dry-run", "--json")
    whole = orjson.loads(r.stdout_bytes)
    assert whole["type"] == "redact" and whole["schema_version"] == SCHEMA_VERSION
    assert whole["plan"]["files"] and all(list(f) == REWRITE.names
                                          for f in whole["plan"]["files"])
    assert r.exit_code == 0, r.stderr
    plan = orjson.loads(r.stdout_bytes)["plan"]
    assert tree_hash(planted.store) == before
    leaked = any(v in r.stdout for v in secret_values(planted))
    assert not leaked
    files = {f["file"]: f for f in plan["files"]}
    assert set(files) == {"sessions/s-main.jsonl", "sessions/s-forgot.jsonl", "notes/keys.md",
                          "notes/keys.md.bak"}
    assert files["sessions/s-main.jsonl"]["records"] == [3, 4, 6]
    assert plan["forget_facts"] == [planted.facts["password"]]
    assert [s["fact_id"] for s in plan["stale_facts"]] == [planted.facts["stale"]]
    assert plan["summaries"] == [{"session_id": "s-main", "seq": 7, "reasons": ["lineage"]}]
    assert (plan["generation"], plan["new_generation"]) == (1, 2)
    human = cli(planted, "redact", "--dry-run")
    assert "rewrite sessions/s-main.jsonl: 3 replacements (" in human.stdout
    assert ") in records 3, 4, 6" in human.stdout
    # off a terminal, without --yes: refused, nothing changed
    r = cli(planted, "redact")
    assert r.exit_code == 2 and tree_hash(planted.store) == before


def test_a_session_of_another_project_is_not_counted(planted):
    """The plan's generated_messages_invalidated counts only the sessions a
    reader of this store accepts: a transcript naming another project is
    refused by every reader, so a new generation invalidates nothing in it."""
    from lecode_memctl.core.layout import Store
    from lecode_memctl.core.sessions import SessionStore

    want = orjson.loads(cli(planted, "redact", "--dry-run", "--json").stdout_bytes)["plan"]
    assert want["new_generation"] > want["generation"]
    # (not slug-shaped, as the planted store's own project is not: the store's
    # slug stays the one its headers name)
    ss = SessionStore(Store(planted.store, "another-project"))
    with ss.create("other") as w:
        w.append_message("user", "hello")
        for e in (want["generation"], want["generation"]):
            w.append_message("assistant", "hi", epoch=e)
    got = orjson.loads(cli(planted, "redact", "--dry-run", "--json").stdout_bytes)["plan"]
    assert got["generated_messages_invalidated"] == want["generated_messages_invalidated"]
    assert got["summaries"] == want["summaries"]


def test_selection(planted):
    r = cli(planted, "redact", "--detector", "github-token", "--yes", "--json")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout_bytes)["result"]["files"] == ["sessions/s-main.jsonl"]
    doc = orjson.loads(cli(planted, "secrets", "--json").stdout_bytes)
    assert {f["detector"] for f in doc["findings"]} == {"aws-access-key", "private-key",
                                                          "basic-auth-credentials"}
    # (the options pick values: a picked value is erased wherever it is, the
    # AWS key of s-forgot seq 1 in s-main's tool result too)
    r = cli(planted, "redact", "--session", "s-forgot", "--seq", "1", "--yes", "--json")
    assert orjson.loads(r.stdout_bytes)["result"]["files"] == ["sessions/s-forgot.jsonl",
                                                               "sessions/s-main.jsonl"]
    r = cli(planted, "redact", "--pattern", "^-----BEGIN", "--yes", "--json")
    assert sorted(orjson.loads(r.stdout_bytes)["result"]["files"]) == ["notes/keys.md",
                                                                         "notes/keys.md.bak"]


def test_locked_session_exit_6_nothing_changed(planted):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    before = tree_hash(planted.store)
    w = SessionStore(store_at(planted.store)).writer("s-main")
    try:
        r = cli(planted, "redact", "--yes")
    finally:
        w.close()
    assert r.exit_code == 6, r.stderr
    assert "s-main" in r.stderr and tree_hash(planted.store) == before


def test_foreign_database_exit_5_nothing_changed(planted):
    db = planted.store / "facts.sqlite3"
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES (?)", (f"password = \"{planted.values['password']}x9Q\"",))
    con.commit()
    con.close()
    before = tree_hash(planted.store)
    r = cli(planted, "redact", "--yes")
    assert r.exit_code == 5, r.stderr
    assert tree_hash(planted.store) == before


@pytest.mark.parametrize("args", [["--pattern", "("], ["--seq", "3"], ["--session", "../x"],
                                  ["--pattern", "\udcff"]])
def test_bad_input_exit_2(planted, args):
    before = tree_hash(planted.store)
    r = cli(planted, "redact", "--yes", *args)
    assert r.exit_code == 2 and r.stderr.startswith("memctl: error: ")
    assert tree_hash(planted.store) == before


def test_unknown_session_exit_3(planted):
    assert cli(planted, "redact", "--session", "nope", "--yes").exit_code == 3


@pytest.mark.heavy
def test_huge_line(planted):
    """A 4 MiB line holding a key: found and erased like any other."""
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    with SessionStore(store_at(planted.store)).writer("s-other") as w:
        w.append_message("tool", "x" * (4 << 20) + f" key {planted.values['aws']} end",
                         epoch=1, tool_call_id="c9", name="shell")
    doc = orjson.loads(cli(planted, "secrets", "--json").stdout_bytes)
    assert any(f["session_id"] == "s-other" for f in doc["findings"])
    assert cli(planted, "redact", "--session", "s-other", "--yes").exit_code == 0
    # (the key picked in s-other is erased wherever it is: s-main, s-forgot too)
    assert raw_hits(planted.store / "sessions", [planted.values["aws"]]) == 0


# ---------------------------------------------------------------- kills

def _file_states(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _d, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def _check_whole(now: dict[str, bytes], old: dict[str, bytes], new: dict[str, bytes]) -> None:
    """Every non-database file is its old bytes or its new bytes (a temp file of
    an interrupted atomic write aside); every transcript line is a whole record."""
    for rel, data in now.items():
        name = rel.rsplit("/", 1)[-1]
        if name.startswith("facts.sqlite3") or (name.startswith(".") and ".tmp-" in name):
            continue
        whole = data in (old.get(rel), new.get(rel))   # a bool: no bytes in a failure message
        assert whole, rel
        if rel.endswith(".jsonl"):
            records = all(isinstance(orjson.loads(x), dict) for x in data.splitlines())
            assert records, rel


def _kill_run(template: Path, work: Path, at: int, sql: bool = False) -> faultkit.Run:
    """Kill before file-changing step ``at`` or, with ``sql``, before the
    ``at``-th SQL statement (tests/test_kill_sweeps.py's hook: SQLite's own
    I/O is C code the os wrappers never see)."""
    from .test_kill_sweeps import CODE

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work / "store")
    argv = ["--store", str(work / "store"), "redact", "--yes", "--jobs", "1"]
    if sql:
        run = faultkit.run_counted(argv, code=CODE, under=work, fork=True, no_sync=True,
                                   env={"SQLSTEP_AT": str(at)})
        run.killed = run.returncode == -signal.SIGKILL
        return run
    return faultkit.run_killed_at(at, argv, code=CODE, under=work, fork=True, no_sync=True)


def _redacted(planted: secretstore.Planted, tmp_path: Path) -> dict[str, bytes]:
    """The files of the planted store after a whole ``redact --yes`` (run on a
    copy): the "new bytes" a kill's files are checked against."""
    shutil.copytree(planted.store, tmp_path / "done" / "store")
    r = run_cli("--store", str(tmp_path / "done" / "store"), "redact", "--yes")
    assert r.exit_code == 0, r.stderr
    return _file_states(tmp_path / "done" / "store")


def _sweep(planted: secretstore.Planted, tmp_path: Path, points, sql: bool = False,
           reran: set | None = None, new: dict[str, bytes] | None = None) -> int:
    """Kill at each of ``points`` until a run is not killed; check each kill's
    store, and rerun redact on it unless a store of the same files, modes
    and bytes was already rerun (``reran``, shared between sweeps: a kill
    before a statement that reads leaves what the kill before it left, and
    the rerun's input is the same).  A kill that leaves the same files,
    modes and bytes as one checked before (in ``reran`` too, keyed apart)
    is not checked again: the checks and the rerun read nothing else, so
    they would do and find the same.  ``new``: :func:`_redacted`'s, when
    the caller has it."""
    if reran is None:
        reran = set()
    template = planted.store
    work = tmp_path / "work"
    old = _file_states(planted.store)
    if new is None:
        new = _redacted(planted, tmp_path)
    kills = 0
    for n in points:
        run = _kill_run(template, work, n, sql)
        if not run.killed:
            break
        kills += 1
        store = work / "store"
        # (untimed: nothing below reads a time)
        killed = ("killed", frozenset(tree_hash(store, untimed=lambda _name: True).items()))
        if killed in reran:
            continue
        reran.add(killed)
        _check_whole(_file_states(store), old, new)
        con = sqlite3.connect(store / "facts.sqlite3")
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        con.close()
        # (redact and secrets read the files' names, modes and bytes, never their times)
        key = frozenset(tree_hash(store, untimed=lambda _name: True).items())
        if key in reran:
            continue
        reran.add(key)
        # a rerun finishes the job: nothing left, the other facts valid
        rr = run_cli("--store", str(store), "redact", "--yes", "--jobs", "1")
        assert rr.exit_code == 0, (n, rr.stderr)
        assert run_cli("--store", str(store), "secrets", "--jobs", "1").exit_code == 0, n
        assert raw_hits(store, secret_values(planted)) == 0, n
    return kills


def test_kill_early_and_mid_rewrite(planted, tmp_path):
    """Representative (inner loop): a kill before the first write, one in the
    middle of the transcript rewrites, and one inside the database work."""
    new = _redacted(planted, tmp_path)
    # (the counts apart: the files' bytes stay out of a failure message)
    kills = _sweep(planted, tmp_path, [1, 12], new=new)
    assert kills == 2
    sql_kills = _sweep(planted, tmp_path / "sql", [6], sql=True, new=new)
    assert sql_kills == 1


@pytest.mark.sweep
@pytest.mark.slow
def test_kill_sweep_every_step(planted, tmp_path):
    """A kill before every file-changing step, then before every SQL statement
    (the forget's transaction, the clean's VACUUM and checkpoint, each close):
    each file whole before or after, the database intact, a rerun finishes."""
    reran: set = set()
    new = _redacted(planted, tmp_path)
    kills = _sweep(planted, tmp_path, range(1, 400), reran=reran, new=new)
    assert kills >= 20
    sql_kills = _sweep(planted, tmp_path / "sql", range(1, 400), sql=True, reran=reran, new=new)
    assert sql_kills >= 10


def test_deleted_text_in_the_wal(planted):
    """While another connection keeps the -wal alive, a forgotten fact's text is
    still in its frames: secrets reports it there, redact's clean empties it."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sourceref import SourceRef

    db = planted.store / "facts.sqlite3"
    holder = sqlite3.connect(db)
    holder.execute("SELECT count(*) FROM facts").fetchone()
    try:
        token = planted.values["ghp"]
        fs = FactStore(db)
        ref = fs.source(planted.facts["keep-other"])
        assert isinstance(ref, SourceRef)
        fid = fs.add(f"The CI token is {token}", ref=ref).fact.fact_id
        fs.forget(fid)
        fs.close()
        wal = planted.store / "facts.sqlite3-wal"
        assert raw_hits(wal.parent, [token]) >= 2        # the transcript and the -wal
        doc = orjson.loads(cli(planted, "secrets", "--json").stdout_bytes)
        assert any(f["kind"] == "database" and f["file"] == "facts.sqlite3-wal"
                   and f["detector"] == "github-token" for f in doc["findings"])
        r = cli(planted, "redact", "--yes")
        assert r.exit_code == 0, r.stderr
        assert wal.stat().st_size == 0
        assert raw_hits(planted.store, secret_values(planted)) == 0
    finally:
        holder.close()
    assert raw_hits(planted.store, secret_values(planted)) == 0


def test_a_plan_never_carries_a_value_into_generic_output(planted):
    import dataclasses

    from lecode_memctl.cli.output import dumps
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.redact import plan_redaction
    from lecode_memctl.core.secrets import scan_store

    st = store_at(planted.store)
    plan = plan_redaction(st, scan_store(st).findings)
    texts = [repr(plan), dumps(plan).decode(), str(dataclasses.asdict(plan)), str(plan.to_json())]
    leaked = any(v in t for t in texts for v in secret_values(planted))
    assert plan.files and not leaked


def test_markdown_changed_since_the_plan_is_a_conflict(planted):
    from lecode_memctl.core.errors import Conflict
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.redact import apply_redaction, plan_redaction
    from lecode_memctl.core.secrets import scan_store

    st = store_at(planted.store)
    plan = plan_redaction(st, [f for f in scan_store(st).findings if f.kind == "file"])
    note = planted.store / "notes" / "keys.md"
    note.write_bytes(note.read_bytes() + b"edited meanwhile\n")
    with pytest.raises(Conflict):
        apply_redaction(st, plan)
    assert note.read_bytes().endswith(b"edited meanwhile\n")


def test_no_chunk_of_a_long_token_survives(planted):
    """Issue 14.3: after redact no 8-character piece of any part of a planted
    long token (a JWT's signature, the tail of a Stripe or GitHub token, a
    Slack webhook's secret, ...) is left in any byte of the store."""
    values = secretstore.plant_long_tokens(planted, seed=13)
    pieces = set().union(*(secretstore.chunks(v) for v in values.values()))
    assert raw_hits(planted.store, pieces) > 0
    r = cli(planted, "redact", "--yes", "--json")
    assert r.exit_code == 0, r.stderr
    survivors = {name for name, v in values.items()
                 if raw_hits(planted.store, secretstore.chunks(v))}
    assert survivors == set()
    assert cli(planted, "secrets").exit_code == 0


# ---------------------------------------------------------------- order, partial runs

def _redact_argv(p: secretstore.Planted) -> list[str]:
    return ["--store", str(p.store), "redact", "--yes", "--jobs", "1"]


def _first_temp_open(p: secretstore.Planted, where: str, work: Path) -> int:
    """The step at which a clean redact (of a copy of the store) opens its
    first temporary file in ``where`` (``sessions``, ``notes``): the write a
    fault there stops."""
    from .test_kill_sweeps import CODE

    shutil.copytree(p.store, work / "store")
    argv = ["--store", str(work / "store"), *_redact_argv(p)[2:]]
    run = faultkit.run_counted(argv, code=CODE, under=work / "store", fork=True,
                               log=True, no_sync=True)
    assert run.returncode == 0, run.stderr
    for entry in run.log:
        n, op, path = entry.split(" ", 2)
        if op == "open" and f"/{where}/." in path and ".tmp-" in path:
            return int(n)
    raise AssertionError(f"no temporary file opened in {where}")


def test_order_transcripts_before_other_files(planted):
    """FORMAT.md's order: locks, transcripts, other files, forgets, the clean.
    Neither the plan nor a run puts a Markdown file before a transcript."""
    plan = orjson.loads(cli(planted, "redact", "--dry-run", "--json").stdout_bytes)["plan"]
    kinds = [f["kind"] for f in plan["files"]]
    assert kinds == sorted(kinds, key=lambda k: k != "transcript"), kinds
    r = cli(planted, "redact", "--yes", "--json")
    files = orjson.loads(r.stdout_bytes)["result"]["files"]
    assert [f.startswith("sessions/") for f in files] == [True, True, False, False], files


def test_transcript_write_fails_no_other_file_changed(planted, tmp_path):
    """A transcript that cannot be written (``chattr +i sessions``: every
    temporary file there refused) stops redact before any other file is
    touched: exit 7, the notes keep their bytes, and the message says so."""
    import errno

    from .test_io_faults import one_line
    from .test_kill_sweeps import CODE

    at = _first_temp_open(planted, "sessions", tmp_path / "count")
    before = _file_states(planted.store)
    proc = faultkit.run_fault_at(at, errno.EACCES, _redact_argv(planted), sticky=True,
                                 code=CODE, under=planted.store, fork=True, no_sync=True)
    line = one_line(proc.stderr, "redact")
    assert proc.returncode == 7, line
    after = _file_states(planted.store)
    changed = sorted(k for k in set(after) | set(before) if after.get(k) != before.get(k))
    assert changed == []     # names only: no bytes in a failure message
    assert "already redacted" not in line, line
    assert "the file was not changed" in line or "nothing was changed" in line, line
    assert not any(v in line for v in secret_values(planted))


def test_partial_run_says_what_was_already_changed(planted, tmp_path):
    """A write that fails after the transcripts were rewritten (a note): the
    message names what was redacted, what was not, and that a rerun finishes;
    and a rerun does."""
    import errno

    from .test_io_faults import one_line
    from .test_kill_sweeps import CODE

    at = _first_temp_open(planted, "notes", tmp_path / "count")
    proc = faultkit.run_fault_at(at, errno.ENOSPC, _redact_argv(planted), code=CODE,
                                 under=planted.store, fork=True, no_sync=True)
    line = one_line(proc.stderr, "redact")
    assert proc.returncode == 7, line
    assert "nothing was changed" not in line, line
    assert "already redacted: sessions/s-forgot.jsonl, sessions/s-main.jsonl" in line, line
    assert "not done:" in line and "run redact again" in line, line
    assert not any(v in line for v in secret_values(planted))
    r = cli(planted, "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert raw_hits(planted.store, secret_values(planted)) == 0


# ---------------------------------------------------------------- a full disk

# Runs in the child after test_kill_sweeps' SQL_HOOK: from the SQL statement
# that starts with $FSIZE_AT_SQL on, no file may grow past 1 KiB (SIGXFSZ
# ignored, so a write gets EFBIG and SQLite reports "disk I/O error" or
# "database or disk is full"): the disk fills at that statement.
FULL_AT_HOOK = r'''
import resource
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_full_at_trace = _sql_trace
def _sql_trace(sql):
    if sql.lstrip().upper().startswith(os.environ["FSIZE_AT_SQL"]):
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    _full_at_trace(sql)
'''


@pytest.mark.parametrize("at", ["BEGIN IMMEDIATE", "VACUUM"])
def test_full_disk_at_the_forget_or_the_clean_exit_7_says_what_was_done(planted, at):
    """The disk fills once the files are rewritten: at the forget's
    transaction (the fact is not forgotten) or at the clean's VACUUM (the
    fact is forgotten, the pages not cleaned).  Exit 7 (write failed: not 5,
    the database is not damaged), one line that names what was redacted and
    what was not, never "nothing was changed"; the database intact; a rerun
    with room finishes the job."""
    from .test_io_faults import one_line
    from .test_kill_sweeps import CODE

    proc = faultkit.run_counted(_redact_argv(planted), code=CODE.replace(
        "from lecode_memctl.cli.main", FULL_AT_HOOK + "from lecode_memctl.cli.main"),
        under=planted.store, fork=True, no_sync=True, env={"FSIZE_AT_SQL": at})
    line = one_line(proc.stderr, at)
    assert proc.returncode == 7, line
    assert "disk I/O error" in line or "disk is full" in line, line
    assert "nothing was changed" not in line, line
    assert "already redacted: sessions/s-forgot.jsonl, sessions/s-main.jsonl, " \
        "notes/keys.md, notes/keys.md.bak" in line, line
    fid = planted.facts["password"]
    if at == "VACUUM":
        assert f"fact(s) forgotten: {fid}" in line, line
        assert "not done: the database clean" in line, line
    else:
        assert f"not done: forgetting fact(s) {fid}, the database clean" in line, line
    assert "run redact again" in line, line
    assert not any(v in line for v in secret_values(planted))
    con = sqlite3.connect(planted.store / "facts.sqlite3")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    r = cli(planted, "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert cli(planted, "secrets", "--jobs", "1").exit_code == 0
    assert raw_hits(planted.store, secret_values(planted)) == 0


# ---------------------------------------------------------------- a credential as a session id

SID_KEY = "AKIAIOSFODNN7EXAMPLQ"   # a valid session id, and an AWS access key id


@pytest.fixture
def key_session(tmp_path) -> secretstore.Planted:
    """A store whose session id is itself a credential; a fact cites it; a
    message of that session also holds the id and a GitHub token."""
    from lecode_memctl.core import open_project

    root = tmp_path / "S" / "r-0123456789ab"
    root.mkdir(parents=True)
    ghp = "ghp_" + "k3Y9pQ2rT7vX1zB5nM8wC4dF6hJ0lA2sE4gU"
    with open_project(store=str(root)) as p:
        with p.sessions.create(SID_KEY) as w:
            w.append_message("user", "hello")                                  # 1
            w.append_message("user", "we use tabs")                            # 2
            w.append_message("user", f"my session is {SID_KEY}, token {ghp}")  # 3
        fid = p.remember("tabs", p.sessions.source_snapshot(SID_KEY, 2, 2).ref).fact.fact_id
    return secretstore.Planted(root, "r-0123456789ab", {"aws": SID_KEY, "ghp": ghp},
                               {"tabs": fid})


def test_rewrite_transcript_keeps_identifying_fields():
    """No value, whatever it equals, changes a record's seq or type, the
    header's session_id/project/format, or a compaction lineage's session_id;
    it is still replaced in message text and in keys."""
    from lecode_memctl.core.redact import rewrite_transcript

    k = SID_KEY
    lines = [
        {"seq": 0, "type": "session", "format": 1, "session_id": k, "project": k, "created": "x"},
        {"seq": 1, "type": "message", "role": "user", "content": f"id {k}", "meta": {k: k}},
        {"seq": 2, "type": "event", "event": "compact", "summary": k, "prior": None,
         "lineage": [{"session_id": k, "seqs": [1], "digest": "0" * 64}], "model": "m",
         "usage": None},
    ]
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    marker = "[REDACTED:aws-access-key:f8e02e]"
    new, seqs, n, _raw = rewrite_transcript(data, {k: marker, "session": "[X]", "1": "[Y]"})
    recs = [orjson.loads(x) for x in new.splitlines()]
    assert [(r["seq"], r["type"]) for r in recs] == [(0, "session"), (1, "message"), (2, "event")]
    assert (recs[0]["session_id"], recs[0]["project"], recs[0]["format"]) == (k, k, 1)
    assert recs[2]["lineage"][0]["session_id"] == k
    assert recs[1]["content"] == f"id {marker}" and recs[1]["meta"] == {marker: marker}
    assert recs[2]["summary"] == marker
    assert seqs == [1, 2]


def test_a_credential_that_is_a_session_id_is_kept_and_said(key_session):
    """redact never breaks a transcript: the header keeps its session_id, the
    file keeps its name, the fact keeps validating.  The id cannot be erased
    (file name, header, the facts citing it): the plan and the result list it
    in ``kept``, masked; the run ends 1 with one warning line and a hint.
    Every other copy of the value, and the other token, are erased."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    p = key_session
    k, ghp = p.values["aws"], p.values["ghp"]
    marker = "[REDACTED:aws-access-key:" + hashlib_sha256(k)[:6] + "]"
    dry = cli(p, "redact", "--dry-run", "--json", "-j1")
    assert dry.exit_code == 0, dry.stderr
    assert k not in dry.stdout and ghp not in dry.stdout
    plan = orjson.loads(dry.stdout_bytes)["plan"]
    assert [f["file"] for f in plan["files"]] == [f"sessions/{marker}.jsonl"]
    assert plan["files"][0]["records"] == [3]
    assert plan["kept"] == [{"detector": "aws-access-key", "hash": hashlib_sha256(k),
                             "preview": "AKIA…(20 chars)", "length": 20,
                             "session_ids": [marker], "files": [],
                             # (the facts citing the session name it in live rows)
                             "reasons": ["session_id", "database"]}]
    human = cli(p, "redact", "--dry-run", "-j1")
    assert k not in human.stdout + human.stderr
    assert f"cannot erase aws-access-key AKIA…(20 chars): the session id of {marker}" \
        in human.stdout, human.stdout

    r = cli(p, "redact", "--yes", "--json", "-j1")
    assert r.exit_code == 1, r.stderr
    assert k not in r.stdout + r.stderr and ghp not in r.stdout + r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["result"]["files"] == [f"sessions/{marker}.jsonl"]
    assert doc["result"]["kept"] == plan["kept"]
    warn = r.stderr.strip().splitlines()
    assert len(warn) == 1 and warn[0].startswith("memctl: warning: "), r.stderr
    assert "cannot erase 1 value" in warn[0] and "rotate" in warn[0], warn[0]

    # the transcript is whole: the header names its file, the fact validates
    path = p.store / "sessions" / f"{k}.jsonl"
    recs = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert recs[0]["session_id"] == k and [x["seq"] for x in recs] == [0, 1, 2, 3]
    assert recs[3]["content"].startswith(f"my session is {marker}, token [REDACTED:github-token:")
    v = cli(p, "validate", "--json")
    assert v.exit_code == 0, v.stdout
    fs = FactStore.open_readonly(p.store / "facts.sqlite3")
    try:
        fact = fs.get(p.facts["tabs"])
        assert fact is not None and fact.source is not None
        status = SessionStore(store_at(p.store), fs).validate_source(fact.source, "durable")
        assert status.status == "valid", status
    finally:
        fs.close()
    # what is left is the id alone, and secrets still says so (exit 1)
    s = cli(p, "secrets", "--json", "-j1")
    assert s.exit_code == 1
    assert {f["kind"] for f in orjson.loads(s.stdout_bytes)["findings"]} <= {"transcript",
                                                                            "database"}
    assert raw_hits(p.store, [ghp]) == 0
    # and again: the same outcome, nothing else to do
    again = cli(p, "redact", "--yes", "-j1")
    assert again.exit_code == 1 and k not in again.stdout + again.stderr


@pytest.mark.parametrize("fmt", ["human", "json", "jsonl", "csv", "tsv"])
def test_secrets_shows_a_credential_session_id_masked(key_session, fmt):
    """No output holds a value: a finding in a session whose id is a value
    shows the location with the marker in place of the id, in every format."""
    p = key_session
    k = p.values["aws"]
    marker = "[REDACTED:aws-access-key:" + hashlib_sha256(k)[:6] + "]"
    args = ["--json"] if fmt == "json" else ([] if fmt == "human" else ["--format", fmt])
    r = cli(p, "secrets", "-j1", *args)
    assert r.exit_code == 1, r.stderr
    assert k not in r.stdout + r.stderr
    assert marker in r.stdout
    if fmt == "jsonl":
        rows = [orjson.loads(x) for x in r.stdout_bytes.splitlines()]
        tr = [x for x in rows if x.get("kind") == "transcript"]
        assert tr and all(x["file"] == f"sessions/{marker}.jsonl" and x["session_id"] == marker
                          for x in tr)


def hashlib_sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_a_rewrite_holds_each_line_at_its_size():
    """Each rewritten record waits for the join as bytes of its own size,
    not in orjson's buffer (4 KiB or more a line: 5,000 lines of a key
    held 20 MiB beside their 0.6 MiB)."""
    from lecode_memctl.core.redact import rewrite_transcript

    from .builders import traced_peak

    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    data = b"\n".join(orjson.dumps({"seq": i, "type": "message", "role": "user",
                                    "content": f"token {key} number {i}"}) for i in range(5000))
    (new, seqs, n, raw), peak = traced_peak(lambda: rewrite_transcript(data, {key: "[REDACTED]"}))
    assert n == 5000 and len(seqs) == 5000 and key.encode() not in new
    assert peak < 8 * len(data), (peak, len(data))


def test_a_value_spelt_with_json_escapes_is_replaced_and_other_lines_kept():
    """A line written by json.dumps (ensure_ascii: any character past ASCII
    as \\uXXXX), or with any character escaped, held the value in neither of
    the forms redact looked for: 'memctl secrets' found it (it reads the
    parsed strings) and redact left it, exit 0.  Every line with a \\u
    escape is parsed and searched now; one with nothing to replace is kept
    byte for byte (not written again by orjson)."""
    import json

    from lecode_memctl.core.redact import rewrite_transcript

    secret = "postgres://admin:S3cr\u00e9tPassw0rd99@db.example.com/"
    lines = [
        json.dumps({"seq": 1, "type": "message", "role": "user", "content": f"use {secret}"},
                   separators=(",", ":")).encode(),
        b'{"seq":2,"type":"message","role":"user","content":"\\u0041KIAIOSFODNN7EXAMPLQ"}',
        b'{"seq":3,"type":"message","role":"user","content":"colour \\u001b[31mred"}',
    ]
    assert b"\\u00e9" in lines[0]
    data = b"\n".join(lines) + b"\n"
    new, seqs, n, _raw = rewrite_transcript(data, {secret: "[R1]", "AKIAIOSFODNN7EXAMPLQ": "[R2]"})
    out = new.split(b"\n")
    assert orjson.loads(out[0])["content"] == "use [R1]"
    assert orjson.loads(out[1])["content"] == "[R2]"
    assert out[2] == lines[2]                   # nothing to replace: the same bytes
    assert (seqs, n) == ([1, 2], 2)


def test_a_stray_file_under_sessions_is_redacted_without_a_lock_made_beside_it(planted):
    """A file under sessions/ whose name is no session id ('bad name.jsonl',
    '.hidden.jsonl') was taken for a transcript and locked: redact made
    'bad name.lock' beside it, which validate then reported as an unexpected
    file.  Its value is still erased; no lock file is made."""
    sessions = Path(planted.store) / "sessions"
    for name in ("bad name.jsonl", ".hidden.jsonl"):
        (sessions / name).write_text("AKIAIOSFODNN7EXAMPLQ\n")
    before = sorted(os.listdir(sessions))
    r = cli(planted, "redact", "--yes", "--json")
    assert r.exit_code in (0, 1), r.stderr
    assert sorted(os.listdir(sessions)) == before
    for name in ("bad name.jsonl", ".hidden.jsonl"):
        assert b"AKIAIOSFODNN7EXAMPLQ" not in (sessions / name).read_bytes()


def test_a_value_in_a_lineage_session_id_is_kept_and_said(demo_template, tmp_path):
    """A credential in a compaction lineage's session_id (an identifying
    field: never rewritten) was left without a word: not under 'kept', no
    warning, exit 0, and 'memctl secrets' still found it.  It is kept and
    said, as a value in a transcript's name is (docs/FORMAT.md, 'A value
    redact cannot erase'): exit 1."""
    from .builders import copy_demo

    store = copy_demo(demo_template, tmp_path / "demo")
    path = store / "sessions" / "demo-alpha.jsonl"
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, ln in enumerate(lines) if b'"compact"' in ln)
    rec = orjson.loads(lines[at])
    rec["lineage"][0]["session_id"] = "AKIAIOSFODNN7EXAMPLQ"
    lines[at] = orjson.dumps(rec)
    path.write_bytes(b"\n".join(lines))
    r = run_cli("--store", str(store), "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert "cannot erase 1 value" in r.stderr
    doc = orjson.loads(r.stdout)
    kept = doc["plan"]["kept"]
    assert kept and len(kept) == 1 and len(kept[0]["session_ids"]) == 1
    assert "AKIAIOSFODNN7EXAMPLQ" not in r.stdout + r.stderr      # shown masked
