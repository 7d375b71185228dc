"""Fixes of the reviews of 2026-12-07, afternoon (rv1-rv6)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from .conftest import run_cli, tree_hash


def _editor(tmp_path: Path, monkeypatch, body: str) -> None:
    script = tmp_path / f"ed_{abs(hash(body))}.py"
    script.write_text("import os, sys\npath = sys.argv[1]\n" + body)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")


# ---------------------------------------------------------------- edit's private copy

def test_edit_never_makes_its_copy_inside_the_store(tmp_path, monkeypatch):
    """TMPDIR inside the store: the editor's copy was made in notes/, listed
    by `notes`, found by `search`, exported; a kept copy stayed there."""
    store = tmp_path / "s"
    (store / "notes").mkdir(parents=True)
    (store / "MEMORY.md").write_text("orig\n")
    seen = tmp_path / "seen"
    _editor(tmp_path, monkeypatch,
            f"open({str(seen)!r}, 'w').write(path)\nopen(path, 'a').write('x\\n'); sys.exit(1)\n")
    monkeypatch.setenv("TMPDIR", str(store / "notes"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)   # (read again from TMPDIR)
    before = tree_hash(store)
    r = run_cli("--store", str(store), "edit")
    assert r.exit_code == 1, r.stderr
    copy = Path(seen.read_text())
    assert not str(copy.resolve()).startswith(str(store.resolve()) + os.sep), copy
    assert tree_hash(store) == before
    copy.unlink()


def test_edit_copy_that_cannot_be_written_names_the_directory(tmp_path, monkeypatch):
    """A copy $TMPDIR cannot hold: 'No space left on device', no path."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "MEMORY.md").write_text("orig\n")
    _editor(tmp_path, monkeypatch, "open(path, 'a').write('x\\n')\n")
    tmp = tmp_path / "t"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

    def fdopen(fd, *a, **k):
        f = real_fdopen(fd, *a, **k)
        return Full(f) if a and a[0] == "wb" else f

    monkeypatch.setattr(os, "fdopen", fdopen)
    before = tree_hash(store)
    r = run_cli("--store", str(store), "edit")
    assert r.exit_code == 7, r.stderr
    assert str(tmp) in r.stderr and "No space left on device" in r.stderr, r.stderr
    assert "nothing was written" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert list(tmp.iterdir()) == []
    assert tree_hash(store) == before


# ---------------------------------------------------------------- the writer after a seq regression

@pytest.mark.parametrize("copied", [2, 5])
def test_the_writer_refuses_a_transcript_whose_seqs_go_back(tmp_path, copied):
    """An earlier record written again at the end: the writer went on from
    its seq, so the next message repeated seq 3, and a fact remembered with
    that message's snapshot cited the older record, 'valid'."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import StoreCorrupt

    st = tmp_path / "st"
    p = open_project(store=st)
    try:
        with p.sessions.create("s1") as w:
            for i in range(6):
                w.append_message("user", f"u{i}")
        path = st / "sessions" / "s1.jsonl"
        line = path.read_bytes().splitlines()[copied]
        with open(path, "ab") as fh:
            fh.write(line + b"\n")
        before = path.read_bytes()
        with pytest.raises(StoreCorrupt) as exc:
            p.sessions.writer("s1")
        assert "seqs go back" in str(exc.value) and "refusing to append" in str(exc.value)
        assert path.read_bytes() == before
    finally:
        p.close()


def test_the_writer_still_appends_after_ascending_seqs(tmp_path):
    from lecode_memctl.core import open_project

    p = open_project(store=tmp_path / "st")
    try:
        with p.sessions.create("s1") as w:
            w.append_message("user", "a")
        for n in range(3):
            with p.sessions.writer("s1") as w:
                assert w.append_message("user", f"b{n}") == 2 + n
    finally:
        p.close()


# ---------------------------------------------------------------- a termination inside Python's own hooks

def _memctl_hooked(tmp_path: Path, prof: str, *args: str):  # noqa: ANN202
    """memctl run with ``args`` in a child Python whose profile function is
    ``prof`` (the source of a function of that name, run with ``os``,
    ``signal`` and ``sys`` imported): a signal sent at a chosen call."""
    import subprocess

    script = tmp_path / "hooked.py"
    script.write_text("import os, signal, sys, runpy\n" + prof
                      + "sys.setprofile(prof)\nsys.argv = ['memctl'] + sys.argv[1:]\n"
                      "runpy.run_module('lecode_memctl', run_name='__main__')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, env=env,
                          timeout=60)


_SET_NAME = r'''
fired = False
def prof(frame, event, arg):
    global fired
    if (not fired and event == "call" and frame.f_code.co_name == "__set_name__"
            and frame.f_back is not None
            and "redact" in str(frame.f_back.f_globals.get("__name__", ""))):
        fired = True
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGTERM)
'''


def test_a_termination_during_a_lazy_import_is_not_an_internal_error(tmp_path):
    """Python wraps a KeyboardInterrupt raised in ``__set_name__`` in a
    RuntimeError: 'internal error: RuntimeError: Error calling __set_name__',
    exit_code 70 in the JSON error while the process exited 143."""
    import signal

    import orjson

    store = tmp_path / "s"
    (store / "notes").mkdir(parents=True)
    (store / "MEMORY.md").write_text("hi\n")
    p = _memctl_hooked(tmp_path, _SET_NAME, "--no-state", "--store", str(store),
                       "redact", "--dry-run", "--json")
    assert p.returncode == -signal.SIGTERM, p
    assert p.stderr == b"memctl: error: terminated by SIGTERM\n", p.stderr
    err = orjson.loads(p.stdout)["error"]
    assert err["code"] == "terminated" and err["exit_code"] == 143, err


# ---------------------------------------------------------------- the core's public calls and their arguments

@pytest.mark.parametrize("call", [
    "store_at('/tmp/x\\0y')",
    "store_at(b'/tmp')",
    "store_at(5)",
    "store_for_project('/tmp', '/tmp/\\0')",
    "store_for_project('/tmp\\0', '/tmp')",
    "resolve_project('/tmp\\0')",
    "resolve_project(b'/tmp')",
    "load_memory_config('/tmp/\\0')",
    "load_memory_config(b'/tmp')",
    "migrate_legacy('/tmp/c', '/tmp/\\0')",
    "migrate_legacy(b'/tmp/c', '/tmp')",
    "SessionStore('/tmp/some/store')",
    "validate_store('/tmp/some/store')",
])
def test_a_path_the_api_cannot_take_is_a_usage_error(call):
    """A NUL, bytes or another type: raw ValueError, TypeError or
    AttributeError (some only at a later use), where open_project's were
    UsageErrors."""
    import lecode_memctl.core as core
    from lecode_memctl.core.errors import UsageError

    with pytest.raises(UsageError):
        eval(call, {n: getattr(core, n) for n in core.__all__})


@pytest.mark.parametrize("text", [b"# notes\n", None, 5])
def test_write_markdown_of_text_that_is_not_str_is_a_usage_error(tmp_path, text):
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import UsageError

    p = open_project(store=tmp_path / "st")
    try:
        with pytest.raises(UsageError) as exc:
            p.write_markdown("memory", text)
        assert "str" in str(exc.value)
        with pytest.raises(UsageError):
            p.write_markdown("memory", text, expected_sha256="0" * 64)
    finally:
        p.close()
    assert not (tmp_path / "st" / "MEMORY.md").exists()


def test_an_impossible_expected_generation_is_not_a_forget(tmp_path):
    """-1, or one the store has not reached: 'stale exclusion generation ...
    (a forget happened meanwhile)', where no forget had happened."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import Conflict, UsageError

    p = open_project(store=tmp_path / "st")
    try:
        with p.sessions.create("s1") as w:
            w.append_message("user", "hi")
        ref = p.sessions.source_snapshot("s1", 1, 1).ref
        with pytest.raises(UsageError) as exc:
            p.remember("x", ref, expected_generation=-1)
        assert "negative" in str(exc.value)
        with pytest.raises(Conflict) as exc:
            p.remember("x", ref, expected_generation=99)
        assert "forget" not in str(exc.value) and "went back" in str(exc.value)
        assert p.remember("x", ref, expected_generation=0).fact.revision == 1
    finally:
        p.close()


def test_a_directory_in_place_of_the_bak_is_the_store_s_problem(tmp_path):
    """exit 7, 'write failed: Is a directory': validate calls it
    layout.unexpected_file, a store problem (exit 5), and nothing is lost."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import StoreCorrupt

    st = tmp_path / "st"
    p = open_project(store=st)
    try:
        p.write_markdown("scratchpad", "v1")
        (st / "scratchpad.md.bak").mkdir()
        with pytest.raises(StoreCorrupt) as exc:
            p.write_markdown("scratchpad", "v2")
        assert "scratchpad.md.bak" in str(exc.value)
    finally:
        p.close()
    assert (st / "scratchpad.md").read_text() == "v1"


def test_every_public_name_is_in_api_md_and_has_a_docstring():
    """MemctlError, ProjectIdentity, RememberResult, SessionInfo, Snapshot
    were public and not in API.md; store_for_project and three session
    errors had no docstring."""
    import inspect

    import lecode_memctl.core as core

    api = (Path(__file__).resolve().parents[1] / "docs" / "API.md").read_text()
    missing = [n for n in core.__all__ if f"`{n}`" not in api and f"`{n}(" not in api
               and f"`{n}." not in api]
    assert missing == []
    undocumented = [n for n in core.__all__
                    if (inspect.isclass(getattr(core, n)) or inspect.isfunction(getattr(core, n)))
                    and not (inspect.getdoc(getattr(core, n)) or "").strip()
                    or inspect.isclass(getattr(core, n))
                    and getattr(core, n).__doc__ is None]
    assert undocumented == []


# ---------------------------------------------------------------- context and first-use legacy Markdown

def _demo_without_memory(tmp_path):
    from lecode_memctl.core.demo import build_demo

    demo = build_demo(tmp_path / "demo")
    (demo.store.path / "MEMORY.md").unlink()
    return demo


def test_context_says_the_agent_would_first_copy_legacy_markdown(tmp_path):
    """The agent started in src/ copies the legacy MEMORY.md in on first use
    (migrate_legacy) and injects it; context showed the store as it is and
    said nothing."""
    import orjson

    demo = _demo_without_memory(tmp_path)
    args = ("--config-dir", str(demo.config_dir), "-C", str(demo.legacy_cwd), "--no-state")
    before = tree_hash(demo.config_dir)
    r = run_cli(*args, "context")
    assert r.exit_code == 0, r.stderr
    assert "## MEMORY.md" not in r.stdout
    assert "legacy" in r.stderr and "MEMORY.md" in r.stderr and "migrate-legacy" in r.stderr, r.stderr
    j = run_cli(*args, "context", "--json")
    notes = orjson.loads(j.stdout)["notes"]
    assert any("legacy" in n and "MEMORY.md" in n for n in notes), notes
    assert tree_hash(demo.config_dir) == before
    # from the project root (no legacy store of its own), and once copied: no note
    r = run_cli("--config-dir", str(demo.config_dir), "-C", str(demo.project), "--no-state",
                "context")
    assert "legacy" not in r.stderr, r.stderr
    assert run_cli(*args, "migrate-legacy", "--yes").exit_code == 0
    r = run_cli(*args, "context")
    assert "legacy" not in r.stderr and "memory kept while working in src/" in r.stdout


def test_context_of_a_store_not_made_yet_names_the_legacy_markdown(tmp_path):
    import shutil

    demo = _demo_without_memory(tmp_path)
    shutil.rmtree(demo.store.path)
    r = run_cli("--config-dir", str(demo.config_dir), "-C", str(demo.legacy_cwd), "--no-state",
                "context")
    assert r.exit_code == 3, r.stderr
    assert r.stderr.startswith("memctl: error: no memory store"), r.stderr
    assert "legacy" in r.stderr and "migrate-legacy" in r.stderr, r.stderr


# ---------------------------------------------------------------- a Ctrl-C as orjson is imported

_IN_ORJSON_INIT = r'''
native = fired = False
def prof(frame, event, arg):
    # the first module imported by orjson's native module as it initialises
    # (dataclasses, json, ...): after importlib made orjson.orjson
    global native, fired
    if fired or event != "call" or frame.f_code.co_name != "module_from_spec":
        return
    name = getattr(frame.f_locals.get("spec"), "name", "")
    if name == "orjson.orjson":
        native = True
    elif native and not name.startswith("orjson"):
        fired = True
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGINT)
'''


def test_a_ctrl_c_as_orjson_is_imported_is_an_interruption_not_a_crash(tmp_path):
    """A KeyboardInterrupt inside orjson's native initialisation: SIGSEGV."""
    p = _memctl_hooked(tmp_path, _IN_ORJSON_INIT, "--no-state", "--store", str(tmp_path / "s"),
                       "where")
    assert (p.returncode, p.stderr) == (130, b"memctl: error: interrupted\n"), p


# ---------------------------------------------------------------- another application's collation

def _collate(store: Path, sql: str) -> None:
    import sqlite3

    c = sqlite3.connect(store / "facts.sqlite3")
    try:
        c.create_collation("weird", lambda a, b: (a > b) - (a < b))
        c.create_function("myf", 1, lambda v: v, deterministic=True)
        c.execute(sql)
        if "other_app" in sql:
            c.executemany("INSERT INTO other_app VALUES (?)", [("b",), ("a",), ("c",)])
        c.commit()
    finally:
        c.close()


@pytest.mark.parametrize("sql", [
    "CREATE TABLE other_app(k TEXT PRIMARY KEY COLLATE weird)",
    "CREATE INDEX other_ix ON revisions(myf(text))",
], ids=["collation", "function"])
def test_validate_audits_the_facts_of_a_database_with_another_application_s_collation(
        demo_pair, sql):
    """integrity_check cannot run over an index whose collation (or a column
    whose function) only another application defines: validate reported the
    whole database unreadable and audited no fact (the demo's stale fact
    went unreported), while every reader listed them."""
    import orjson

    plain, other = demo_pair
    _collate(other, sql)
    before = tree_hash(other)

    def findings(store):
        r = run_cli("--store", str(store), "--no-state", "validate", "--json")
        return r.exit_code, orjson.loads(r.stdout)

    code0, doc0 = findings(plain)
    code1, doc1 = findings(other)
    assert tree_hash(other) == before
    codes0 = sorted(f["code"] for f in doc0["findings"])
    codes1 = sorted(f["code"] for f in doc1["findings"])
    assert "db.unreadable" not in codes1, doc1["findings"]
    if "other_ix" in sql:
        # an expression index on lecode's own table: code lecode never
        # writes, db.schema_unknown whatever its function (test_validate_1207z)
        assert [c for c in codes1 if c != "db.schema_unknown"] == codes0
        schema = [f for f in doc1["findings"] if f["code"] == "db.schema_unknown"]
        assert len(schema) == 1 and "expression index other_ix" in schema[0]["message"], schema
        assert code1 == code0
        return
    assert [c for c in codes1 if c != "db.unchecked"] == codes0
    unchecked = [f for f in doc1["findings"] if f["code"] == "db.unchecked"]
    assert len(unchecked) == 1 and unchecked[0]["severity"] == "warning", unchecked
    assert code1 == code0


def test_facts_counts_past_an_index_of_another_application_s_collation(demo_pair):
    """count(*) went through the smallest index, whose collation SQLite did
    not know: the table and --json were exit 5 while jsonl, csv and tsv
    listed every fact."""
    import orjson

    plain, other = demo_pair
    _collate(other, "CREATE INDEX ix ON facts(fact_id COLLATE weird)")
    for fmt in ("table", "json", "jsonl", "csv", "tsv"):
        r0 = run_cli("--store", str(plain), "--no-state", "facts", "--format", fmt)
        r1 = run_cli("--store", str(other), "--no-state", "facts", "--format", fmt)
        assert (r1.exit_code, r1.stdout) == (r0.exit_code, r0.stdout), (fmt, r1.stderr)
    j = orjson.loads(run_cli("--store", str(other), "facts", "--json", "--limit", "1").stdout)
    assert j["total"] == orjson.loads(run_cli("--store", str(plain), "facts", "--json").stdout)["total"]


@pytest.mark.parametrize("wait", [float("inf"), 1e300, -1.0, 0])
def test_a_store_s_busy_timeout_of_any_size_writes(tmp_path, wait):
    """inf: OverflowError at the first write (int(inf * 1000))."""
    from lecode_memctl.core.facts import FactStore

    fs = FactStore(tmp_path / "f.sqlite3", busy_timeout=wait)
    try:
        assert fs.add("hello").created
    finally:
        fs.close()


@pytest.mark.parametrize("wait", [float("nan"), "5", None, True])
def test_a_busy_timeout_that_is_not_a_number_is_a_usage_error(tmp_path, wait):
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.facts import FactStore

    with pytest.raises(UsageError):
        FactStore(tmp_path / "f.sqlite3", busy_timeout=wait)


def test_another_application_s_collation_does_not_hide_damage_elsewhere(demo_pair):
    """integrity_check stopped by the other table's collation: db.unchecked
    alone, OK, exit 0, where one entry of source_refs' index was changed;
    integrity_check(source_refs) reports it."""
    import sqlite3

    import orjson

    damaged, _ = demo_pair
    db = damaged / "facts.sqlite3"
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,) = c.execute("SELECT rootpage FROM sqlite_master "
                        "WHERE name = 'source_refs_session'").fetchone()
    (page,) = c.execute("PRAGMA page_size").fetchone()
    c.close()
    data = bytearray(db.read_bytes())
    at = bytes(data[(root - 1) * page:root * page]).find(b"demo-")
    assert at > 0
    data[(root - 1) * page + at] = ord("X")
    db.write_bytes(bytes(data))
    _collate(damaged, "CREATE TABLE other_app(k TEXT PRIMARY KEY COLLATE weird)")
    r = run_cli("--store", str(damaged), "--no-state", "validate", "--json")
    found = orjson.loads(r.stdout)["findings"]
    codes = [f["code"] for f in found]
    assert "db.unchecked" in codes and "db.integrity" in codes, found
    assert r.exit_code == 1
    unchecked = next(f for f in found if f["code"] == "db.unchecked")
    assert "other_app" in unchecked["message"], unchecked


# ---------------------------------------------------------------- a write in progress is no leftover

def test_a_temporary_file_of_a_write_in_progress_does_not_fail_strict(tmp_path):
    """An agent writing MEMORY.md: its .MEMORY.md.tmp-HEX was 'left by an
    interrupted write', a warning, and validate --strict failed (60 of 102
    runs beside a writer).  Modified in the last minute it is info; older,
    the warning it was."""
    import orjson

    store = tmp_path / "s"
    store.mkdir(mode=0o700)
    tmp = store / ".MEMORY.md.tmp-0123456789ab"
    tmp.write_text("half\n")
    tmp.chmod(0o600)
    r = run_cli("--store", str(store), "--no-state", "validate", "--strict", "--json")
    (f,) = orjson.loads(r.stdout)["findings"]
    assert (f["code"], f["severity"], r.exit_code) == ("layout.temp_file", "info", 0), r.stdout
    os.utime(tmp, (os.stat(tmp).st_atime, os.stat(tmp).st_mtime - 120))
    r = run_cli("--store", str(store), "--no-state", "validate", "--strict", "--json")
    (f,) = orjson.loads(r.stdout)["findings"]
    assert (f["code"], f["severity"], r.exit_code) == ("layout.temp_file", "warning", 1), r.stdout


def test_list_codes_says_a_temporary_file_is_warning_or_info():
    import orjson

    r = run_cli("validate", "--list-codes", "--json")
    rows = orjson.loads(r.stdout)
    rows = rows if isinstance(rows, list) else rows.get("codes", rows.get("rows"))
    (row,) = [c for c in rows if c["code"] == "layout.temp_file"]
    assert row["severity"] == "warning or info"


# ---------------------------------------------------------------- the stores a run audited

def test_a_stray_file_in_memory_is_no_store_audited(tmp_path):
    """A config directory whose memory/ holds only a .DS_Store: one store
    audited, ok, exit 0 -- the README's 'memctl_validate_stores == 0' alert
    (a cron job with the wrong HOME) stayed silent."""
    import orjson

    cfg = tmp_path / "cfg"
    (cfg / "memory").mkdir(parents=True)
    (cfg / "memory" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    args = ("--config-dir", str(cfg), "--no-state", "validate", "--all-projects")
    doc = orjson.loads(run_cli(*args, "--json").stdout)
    assert doc["stores"] == 0, doc
    prom = run_cli(*args, "--format", "prometheus").stdout
    assert "\nmemctl_validate_stores 0\n" in "\n" + prom, prom
    (cfg / "memory" / "app-0123456789ab").mkdir(mode=0o700)
    assert orjson.loads(run_cli(*args, "--json").stdout)["stores"] == 1


def test_secrets_prometheus_says_how_many_stores_it_scanned(tmp_path):
    """A crontab with the wrong HOME: HELP and TYPE lines, no _ok series,
    exit 0; nothing said that no store was scanned."""
    cfg = tmp_path / "cfg"
    (cfg / "memory").mkdir(parents=True)
    args = ("--config-dir", str(cfg), "--no-state", "secrets", "--all-projects",
            "--format", "prometheus")
    r = run_cli(*args)
    assert r.exit_code == 0 and "\nmemctl_secrets_stores 0\n" in "\n" + r.stdout, r.stdout
    (cfg / "memory" / "app-0123456789ab").mkdir(mode=0o700)
    (cfg / "memory" / "app-0123456789ab" / "MEMORY.md").write_text("nothing here\n")
    r = run_cli(*args)
    assert "\nmemctl_secrets_stores 1\n" in "\n" + r.stdout, r.stdout
