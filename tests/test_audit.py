"""memctl validate: one planted instance of every finding code, a clean store,
output formats, --ignore/--strict/--quiet, and "changes nothing"."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.atomic import atomic_write
from lecode_memctl.core.audit import CODES
from lecode_memctl.core.audit.transcripts import _batch_job as _REAL_BATCH_JOB
from lecode_memctl.core.facts import MIGRATIONS, FactStore, Provenance
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG
from .conftest import run_cli, tree_hash
from .promparse import parse_exposition

OLD = time.time() - 3600
USAGE = {"input_tokens": 10, "output_tokens": 5, "cost": 0.01}


def _records(ss: SessionStore, sid: str, a: int, b: int) -> list[dict]:
    return ss.records(sid, a, b)


def _compact(w, ss: SessionStore, sid: str, lineage: list[dict], prior: dict | None) -> int:
    return w.append_event("compact", summary="summary", lineage=lineage, prior=prior,
                          model="m", usage=USAGE)


def _raw(w, n: int) -> None:
    """``n`` messages, user and assistant in turn: what a compaction leaves raw."""
    for i in range(n):
        if i % 2:
            w.append_message("assistant", f"reply {i}", epoch=0)
        else:
            w.append_message("user", f"ask {i}")


def prior_of(ss: SessionStore, sid: str, seq: int) -> dict:
    return {"seq": seq, "digest": canonical_digest(ss.records(sid, seq, seq))}


def build_clean(config_dir: Path, slug: str = SLUG) -> Path:
    """A store with Markdown, two sessions (one with a compaction chain and a
    learning event) and valid source-linked facts: validate finds nothing."""
    path = config_dir / "memory" / slug
    store = store_at(path)
    ss = SessionStore(store)
    w = ss.create("s1")
    w.append_message("user", "We use tabs for indentation.")      # 1
    w.append_message("assistant", "Noted.", epoch=0)               # 2
    w.append_message("user", "And spaces in YAML.")                # 3
    w.append_message("assistant", "Understood.", epoch=0)          # 4
    w.close()
    # (each compaction leaves four messages raw, the design's rule: compact.few_raw)
    w = ss.create("s2")
    w.append_message("user", "hello")                              # 1
    w.append_message("assistant", "hi", epoch=0)                   # 2
    _raw(w, 4)                                                     # 3..6
    c1 = _compact(w, ss, "s2", [ss.source_snapshot("s2", 1, 2).ref.to_json()], None)  # 7
    _raw(w, 4)                                                     # 8..11
    lineage = [ss.source_snapshot("s2", 1, 2).ref.to_json(), ss.source_snapshot("s2", 3, 6).ref.to_json()]
    _compact(w, ss, "s2", lineage, prior_of(ss, "s2", c1))          # 12
    w.append_event("learning", status="learned", reason_counts={"invalid_json": 1},
                   facts=[], proposals=[])                          # 13
    w.append_event("memory_usage", purpose="learning", model="m", usage=None)  # 14
    w.close()
    fs = FactStore(store.facts_db)
    fs.remember("We use tabs for indentation.", ss.source_snapshot("s1", 1, 1).ref, sessions=ss)
    fs.remember("And spaces in YAML.", ss.source_snapshot("s1", 3, 3).ref, sessions=ss)
    fs.close()
    atomic_write(path / "MEMORY.md", b"# Memory\n\ntabs\n")
    atomic_write(path / "MEMORY.md", b"# Memory\n\ntabs, spaces in YAML\n")   # leaves MEMORY.md.bak
    os.makedirs(path / "daily", mode=0o700, exist_ok=True)
    atomic_write(path / "daily" / "2026-01-02.md", b"- did things\n")
    return path


def _write_session(path: Path, lines: list[bytes], *, mtime: float | None = None) -> None:
    with open(path, "wb") as fh:
        fh.write(b"".join(lines))
    os.chmod(path, 0o600)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _hdr(sid: str, project: str = SLUG) -> bytes:
    return orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                         "project": project, "created": "2026-01-01T00:00:00Z"}) + b"\n"


def _msg(seq: int, text: str = "x") -> bytes:
    return orjson.dumps({"seq": seq, "type": "message", "role": "user", "content": text}) + b"\n"


def build_planted(config_dir: Path) -> Path:
    """The clean store plus exactly one instance of each finding code that can
    coexist in one store (see PLANTED)."""
    path = build_clean(config_dir)
    store = store_at(path)
    ss = SessionStore(store)
    sd = path / "sessions"
    # layout
    (path / "stray.txt").write_bytes(b"?")
    os.chmod(path / "stray.txt", 0o600)
    (path / ".MEMORY.md.tmp-0123456789ab").write_bytes(b"half")
    os.chmod(path / ".MEMORY.md.tmp-0123456789ab", 0o600)
    os.makedirs(path / "notes", mode=0o700, exist_ok=True)
    (path / "notes" / "open.md").write_bytes(b"world-readable\n")
    os.chmod(path / "notes" / "open.md", 0o644)
    os.symlink("../MEMORY.md", path / "notes" / "link.md")
    # markdown
    (path / "daily" / "2026-01-01.md").write_bytes(b"ok\n\xff\xfe broken\n")
    os.chmod(path / "daily" / "2026-01-01.md", 0o600)
    (path / "notes" / "gone.md.bak").write_bytes(b"old\n")
    os.chmod(path / "notes" / "gone.md.bak", 0o600)
    # config
    (config_dir / "config.toml").write_text("[memory]\nfacts_max_bytes = 70000\n")
    # sessions: an undo in s1 (hides seq 4), then more sessions
    w = ss.writer("s1")
    ref4 = ss.source_snapshot("s1", 4, 4).ref
    w.append_event("undo", target=[4, 4])                               # 5
    w.close()
    # s3: a summary made inert by a later undo
    w = ss.create("s3")
    w.append_message("user", "a")
    w.append_message("assistant", "b", epoch=0)
    _raw(w, 4)                                                                   # 3..6
    _compact(w, ss, "s3", [ss.source_snapshot("s3", 1, 2).ref.to_json()], None)  # 7
    w.append_event("undo", target=[1, 2])
    w.close()
    # s2: too-wide chunk, bad learning events.  Lineage is cumulative, so a later
    # compact event would inherit a bad chunk: each broken chain gets its own session.
    w = ss.writer("s2")
    lineage12 = [ss.source_snapshot("s2", 1, 2).ref.to_json(), ss.source_snapshot("s2", 3, 6).ref.to_json()]
    wide = {"session_id": "s2", "seqs": [1, 250], "digest": "a" * 64}
    _compact(w, ss, "s2", lineage12 + [wide], prior_of(ss, "s2", 12))             # 15: too wide
    # (the raw writer: append_event refuses both, by the rule validate applies)
    w.append_record({"type": "event", "event": "learning", "status": "exploded",     # 16
                     "reason_counts": {}, "facts": [], "proposals": []})
    w.append_record({"type": "event", "event": "learning", "status": "rejected",
                     "reason_counts": {"bogus_code": 2}, "facts": [], "proposals": []})
    w.close()
    # s4: prior mismatch, then a stale chunk
    w = ss.create("s4")
    w.append_message("user", "a")
    w.append_message("assistant", "b", epoch=0)
    _raw(w, 4)                                                                   # 3..6
    _compact(w, ss, "s4", [ss.source_snapshot("s4", 1, 2).ref.to_json()], None)  # 7
    _raw(w, 4)                                                                   # 8..11
    lineage = [ss.source_snapshot("s4", 1, 2).ref.to_json(), ss.source_snapshot("s4", 3, 6).ref.to_json()]
    _compact(w, ss, "s4", lineage, {"seq": 7, "digest": "c" * 64})               # 12: prior mismatch
    _raw(w, 4)                                                                   # 13..16
    stale = {"session_id": "s4", "seqs": [8, 11], "digest": "b" * 64}
    _compact(w, ss, "s4", lineage + [stale], prior_of(ss, "s4", 12))             # 17: stale chunk
    w.close()
    # s5: an older summary (no lineage), a lineage that is not cumulative, a bad undo target
    w = ss.create("s5")
    w.append_message("user", "a")
    w.append_message("assistant", "b", epoch=0)
    w.append_event("compact", summary="old", model="m", usage=USAGE)             # 3: legacy
    _raw(w, 4)                                                                   # 4..7
    c8 = _compact(w, ss, "s5", [ss.source_snapshot("s5", 1, 2).ref.to_json()], None)  # 8
    _compact(w, ss, "s5", [], prior_of(ss, "s5", c8))                            # 9: not cumulative
    # 10: bad target (the raw writer: append_event refuses it)
    w.append_record({"type": "event", "event": "undo", "target": [10, 10]})
    w.close()
    # s6: a cutoff inside a tool exchange, then one that leaves one message raw
    w = ss.create("s6")
    w.append_message("user", "read x")                                           # 1
    w.append_message("assistant", "", epoch=0, tool_calls=[
        {"id": "c1", "name": "read_file", "arguments": {"path": "x"}}])          # 2
    w.append_message("tool", "x", tool_call_id="c1", name="read_file", epoch=0)  # 3
    _raw(w, 4)                                                                   # 4..7
    c8 = _compact(w, ss, "s6", [ss.source_snapshot("s6", 1, 2).ref.to_json()], None)  # 8: boundary
    _raw(w, 2)                                                                   # 9..10
    _compact(w, ss, "s6", [ss.source_snapshot("s6", 1, 2).ref.to_json(),
                           ss.source_snapshot("s6", 3, 9).ref.to_json()],
             prior_of(ss, "s6", c8))                                             # 11: few_raw
    w.close()
    _write_session(sd / "torn.jsonl", [_hdr("torn"), _msg(1), b'{"seq":2,"type":"mess'], mtime=OLD)
    _write_session(sd / "corrupt.jsonl", [_hdr("corrupt"), _msg(1), b"not json at all\n", _msg(2)])
    _write_session(sd / "gap.jsonl", [_hdr("gap"), _msg(1), _msg(3)])
    _write_session(sd / "foreign.jsonl", [_hdr("foreign", "other-000000000000"), _msg(1)])
    _write_session(sd / "headless.jsonl", [_msg(0), _msg(1)])
    os.mkdir(sd / "weird.jsonl", 0o700)
    # facts
    fs = FactStore(store.facts_db)
    victim = fs.remember("Noted.", ss.source_snapshot("s1", 2, 2).ref,
                         sessions=ss).fact.fact_id
    good3 = ss.source_snapshot("s1", 3, 3).ref
    fs.add("evidence in a deleted session", ref=SourceRef("gone", (1,), "d" * 64))      # missing
    fs.add("tampered evidence", ref=SourceRef("s1", (3,), "e" * 64))                   # stale
    fs.add("undone evidence", ref=ref4)                                                # hidden
    fs.add("legacy fact", provenance=[Provenance("s1", (3,))])                         # unverified
    fs.close()
    _plant_db(store.facts_db, ss, victim, good3)
    return path


def _plant_db(db_path: Path, ss: SessionStore, victim: str, good3: SourceRef) -> None:
    snap12 = ss.source_snapshot("s1", 1, 2).ref
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA foreign_keys = OFF")
    now = "2026-01-01T00:00:00Z"
    seqs3 = orjson.dumps(list(good3.seqs)).decode()
    # suppressed: a fact whose evidence (s1:1-2) overlaps what a forget of `victim` (s1:2) excludes
    sup = "5000000000000000"
    db.execute("INSERT INTO facts VALUES (?, 1, ?, ?)", (sup, now, now))
    db.execute("INSERT INTO revisions VALUES (?, 1, 'overlapping', ?)", (sup, now))
    db.execute("INSERT INTO source_refs VALUES (?, 1, 's1', ?, ?)",
               (sup, orjson.dumps(list(snap12.seqs)).decode(), snap12.digest))
    # revision gap: revisions 1 and 3, current 3
    gap = "6000000000000000"
    db.execute("INSERT INTO facts VALUES (?, 3, ?, ?)", (gap, now, now))
    for rev in (1, 3):
        db.execute("INSERT INTO revisions VALUES (?, ?, 'gappy', ?)", (gap, rev, now))
        db.execute("INSERT INTO source_refs VALUES (?, ?, 's1', ?, ?)", (gap, rev, seqs3, good3.digest))
    # dangling: current revision 2 has no row
    dang = "7000000000000000"
    db.execute("INSERT INTO facts VALUES (?, 2, ?, ?)", (dang, now, now))
    db.execute("INSERT INTO revisions VALUES (?, 1, 'dangling', ?)", (dang, now))
    db.execute("INSERT INTO source_refs VALUES (?, 1, 's1', ?, ?)", (dang, seqs3, good3.digest))
    # foreign key: provenance of a revision that does not exist
    db.execute("INSERT INTO provenance VALUES ('8000000000000000', 1, 's1', 3)")
    db.commit()
    db.close()
    fs = FactStore(db_path)
    assert fs.forget(victim)
    fs.close()
    db = sqlite3.connect(db_path)
    db.execute("UPDATE meta SET value = 0 WHERE key = 'generation'")   # generation mismatch
    db.commit()
    db.close()


# Codes planted in build_planted (deep), each exactly once.
PLANTED = {
    "layout.unexpected_file": "stray.txt",
    "layout.temp_file": ".MEMORY.md.tmp-0123456789ab",
    "layout.permissions": "notes/open.md",
    "layout.symlink": "notes/link.md",
    "markdown.invalid_utf8": "daily/2026-01-01.md",
    "markdown.orphan_backup": "notes/gone.md.bak",
    "config.out_of_range": None,
    "db.foreign_key": "facts.sqlite3",
    "db.generation_mismatch": "facts.sqlite3",
    "db.revision_gap": None,
    "db.dangling_ref": None,
    "fact.missing": None,
    "fact.stale": None,
    "fact.hidden": None,
    "fact.unverified": None,
    "fact.suppressed": None,
    "session.torn_tail": "sessions/torn.jsonl",
    "session.corrupt_line": "sessions/corrupt.jsonl",
    "session.seq_gap": "sessions/gap.jsonl",
    "session.refused": "sessions/foreign.jsonl",
    "session.missing_header": "sessions/headless.jsonl",
    "session.unreadable": "sessions/weird.jsonl",
    "session.bad_target": "sessions/s5.jsonl",
    "compact.prior_mismatch": "sessions/s4.jsonl",
    "compact.lineage_too_wide": "sessions/s2.jsonl",
    "compact.lineage_stale": "sessions/s4.jsonl",
    "compact.lineage_not_cumulative": "sessions/s5.jsonl",
    "compact.legacy": "sessions/s5.jsonl",
    "compact.inert": "sessions/s3.jsonl",
    "compact.boundary": "sessions/s6.jsonl",
    "compact.few_raw": "sessions/s6.jsonl",
    "learning.bad_status": "sessions/s2.jsonl",
    "learning.bad_reason": "sessions/s2.jsonl",
}


def _empty_db(path: Path, version: int | None = None) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    n = len(MIGRATIONS) if version is None else version
    for _name, fn in MIGRATIONS[:n]:
        fn(db)
    db.execute(f"PRAGMA user_version = {n}")
    db.commit()
    os.chmod(path, 0o600)
    return db


def build_db_stores(config_dir: Path) -> dict[str, Path]:
    """Stores each holding one database finding that excludes the others."""
    out = {}
    mem = config_dir / "memory"
    for name in ("integrity", "future", "garbage", "legacy", "unchecked"):
        p = mem / f"{name}-0123456789ab"
        os.makedirs(p, mode=0o700)
        out[name] = p
    db = _empty_db(out["integrity"] / "facts.sqlite3")
    db.execute("CREATE TABLE junk (x)")
    db.execute("CREATE INDEX junk_i ON junk(x)")
    db.execute("INSERT INTO junk VALUES (1)")
    db.commit()
    db.execute("PRAGMA writable_schema = ON")
    db.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX junk_i ON junk(x+1)' WHERE name = 'junk_i'")
    db.commit()
    db.close()
    db = _empty_db(out["future"] / "facts.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    (out["garbage"] / "facts.sqlite3").write_bytes(b"this is not a database\n" * 10)
    os.chmod(out["garbage"] / "facts.sqlite3", 0o600)
    _empty_db(out["legacy"] / "facts.sqlite3", 2).close()
    # another application's table, ordered by a collation only it defines
    db = _empty_db(out["unchecked"] / "facts.sqlite3")
    db.create_collation("theirs", lambda a, b: (a > b) - (a < b))
    db.execute("CREATE TABLE their_table (k TEXT PRIMARY KEY COLLATE theirs)")
    db.executemany("INSERT INTO their_table VALUES (?)", [("b",), ("a",)])
    db.commit()
    db.close()
    return out


def findings(*args: str) -> tuple[int, list[dict]]:
    r = run_cli("validate", *args, "--json")
    assert r.stdout, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["exit_code"] == r.exit_code
    return r.exit_code, doc["findings"]


# ---------------------------------------------------------------- clean


def test_clean_store_reports_nothing(config_dir):
    path = build_clean(config_dir)
    for extra in ((), ("--deep",)):
        code, fs = findings("--store", str(path), *extra)
        assert fs == [], fs
        assert code == 0
    r = run_cli("validate", "--store", str(path), "--deep", "--strict")
    assert r.exit_code == 0, r.stdout
    assert "OK" in r.stdout and "0 errors, 0 warnings, 0 info" in r.stdout


def test_clean_store_json_summary(config_dir):
    path = build_clean(config_dir)
    r = run_cli("validate", "--store", str(path), "--json")
    doc = orjson.loads(r.stdout)
    (proj,) = doc["projects"]
    assert proj["project"] == SLUG
    assert proj["facts"]["valid"] == 2 and proj["facts_total"] == 2
    assert proj["sessions"] == 2
    assert doc["totals"] == {"error": 0, "warning": 0, "info": 0, "ignored": 0}


# ---------------------------------------------------------------- planted


@pytest.fixture
def planted(config_dir) -> Path:
    return build_planted(config_dir)


def test_every_planted_code_reported_once_with_location(planted):
    code, fs = findings("--store", str(planted), "--deep")
    assert code == 1
    counts = Counter(f["code"] for f in fs)
    assert counts == Counter(list(PLANTED)), sorted(fs, key=lambda f: f["code"])
    by = {f["code"]: f for f in fs}
    for c, file in PLANTED.items():
        if file is not None:
            assert by[c]["file"] == file, by[c]
        assert by[c]["severity"] in ("error", "warning", "info")
        assert by[c]["message"] and "\n" not in by[c]["message"]
    assert by["config.out_of_range"]["key"] == "memory.facts_max_bytes"
    assert by["config.out_of_range"]["file"].endswith("config.toml")
    assert by["session.torn_tail"]["severity"] == "error"        # not modified for an hour
    assert by["session.torn_tail"]["line"] == 3
    assert by["session.corrupt_line"]["line"] == 3 and by["session.corrupt_line"]["reason"] == "not_json"
    assert by["session.seq_gap"]["line"] == 3 and by["session.seq_gap"]["seq"] == 3
    assert by["session.refused"]["reason"] == "refused_project"
    assert by["session.missing_header"]["line"] == 1
    assert by["markdown.invalid_utf8"]["offset"] == 3
    assert by["compact.lineage_too_wide"]["seq"] == 15
    assert by["compact.lineage_stale"]["seq"] == 17
    assert by["compact.prior_mismatch"]["seq"] == 12
    assert by["compact.inert"]["reason"] == "undone" and by["compact.inert"]["seq"] == 7
    assert by["compact.legacy"]["seq"] == 3 and by["compact.legacy"]["severity"] == "info"
    assert by["compact.boundary"]["seq"] == 8 and by["compact.boundary"]["reason"] == "split"
    assert by["compact.few_raw"]["seq"] == 11 and by["compact.few_raw"]["severity"] == "warning"
    assert by["compact.lineage_not_cumulative"]["seq"] == 9
    assert by["compact.lineage_not_cumulative"]["reason"] == "not_cumulative"
    assert by["session.bad_target"]["seq"] == 10 and by["session.bad_target"]["line"] == 11
    assert by["learning.bad_status"]["seq"] == 16
    assert by["learning.bad_reason"]["key"] == "bogus_code"
    assert by["db.revision_gap"]["fact_id"] == "6000000000000000"
    assert by["db.revision_gap"]["revision"] == 3
    assert by["db.dangling_ref"]["fact_id"] == "7000000000000000"
    assert by["db.foreign_key"]["table"] == "provenance"
    assert by["fact.suppressed"]["fact_id"] == "5000000000000000"
    assert by["fact.suppressed"]["session_id"] == "s1" and by["fact.suppressed"]["seq"] == 2
    assert by["fact.missing"]["reason"] == "session_missing"
    assert by["fact.stale"]["reason"] == "digest_mismatch"
    assert by["fact.hidden"]["reason"] == "undone" and by["fact.hidden"]["seq"] == 4
    assert by["fact.unverified"]["revision"] == 1


def test_default_mode_skips_whole_transcript_checks(planted):
    _code, fs = findings("--store", str(planted))
    got = {f["code"] for f in fs}
    deep_only = {c for c, i in CODES.items() if i.deep_only}
    assert not got & deep_only
    assert got == set(PLANTED) - deep_only


def test_database_codes_each_once(config_dir):
    stores = build_db_stores(config_dir)
    expect = {"integrity": "db.integrity", "future": "db.schema_unknown",
              "garbage": "db.unreadable", "legacy": "db.needs_migration",
              "unchecked": "db.unchecked"}
    for name, path in stores.items():
        _code, fs = findings("--store", str(path))
        assert [f["code"] for f in fs] == [expect[name]], (name, fs)
        assert fs[0]["file"] == "facts.sqlite3"


def test_config_invalid(config_dir):
    path = build_clean(config_dir)
    (config_dir / "config.toml").write_text("[memory\n")
    code, fs = findings("--store", str(path))
    assert [f["code"] for f in fs] == ["config.invalid"] and code == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_layout_unreadable(config_dir):
    path = build_clean(config_dir)
    os.makedirs(path / "notes", mode=0o700)
    os.chmod(path / "notes", 0o000)
    try:
        _code, fs = findings("--store", str(path))
    finally:
        os.chmod(path / "notes", 0o700)
    assert [f["code"] for f in fs] == ["layout.unreadable"]


def test_every_code_is_planted_somewhere():
    covered = set(PLANTED) | {"db.integrity", "db.schema_unknown", "db.unreadable", "db.unchecked",
                              "db.needs_migration", "config.invalid", "layout.unreadable",
                              "session.epoch_ahead",  # tests/test_audit_epoch.py
                              "db.rolled_back",  # tests/test_seen_state.py
                              "db.malformed_exclusion",  # tests/test_damaged_exclusions.py
                              "db.forgotten_fact_present",  # tests/test_rollback_1207b.py
                              "session.ignored_event",  # tests/test_event_rule.py
                              # tests/test_transcript_shapes_1207.py
                              "session.second_header", "session.unknown_type",
                              "session.unknown_role", "session.unknown_event"}
    assert covered == set(CODES)    # each found exactly once: tests/test_audit_old.py


def test_torn_tail_recently_modified_is_a_warning(config_dir):
    path = build_clean(config_dir)
    _write_session(path / "sessions" / "live.jsonl", [_hdr("live"), _msg(1), b'{"seq":2'])
    code, fs = findings("--store", str(path))
    assert [(f["code"], f["severity"]) for f in fs] == [("session.torn_tail", "warning")]
    assert code == 0
    assert run_cli("validate", "--store", str(path), "--strict", "-q").exit_code == 1


# ---------------------------------------------------------------- read-only


def test_validate_changes_nothing(planted, config_dir):
    before = tree_hash(config_dir)
    for args in ((), ("--deep",), ("--format", "prometheus"), ("--format", "jsonl")):
        run_cli("validate", "--store", str(planted), *args)
    assert tree_hash(config_dir) == before


def test_validate_changes_nothing_with_live_wal(config_dir):
    path = build_clean(config_dir)
    store = store_at(path)
    ss = SessionStore(store)
    fs = FactStore(store.facts_db)          # a live writer connection keeps the -wal
    fs.remember("And spaces in YAML!", ss.source_snapshot("s1", 3, 4).ref, sessions=ss)
    assert (path / "facts.sqlite3-wal").exists()
    try:
        before = tree_hash(path)
        code, fs_found = findings("--store", str(path), "--deep")
        assert fs_found == [] and code == 0
        assert tree_hash(path) == before
    finally:
        fs.close()


# ---------------------------------------------------------------- output


@pytest.mark.heavy
def test_ignore_strict_quiet(planted):
    r = run_cli("validate", "--store", str(planted), "-q")
    assert r.exit_code == 1 and r.stdout == "" and r.stderr == ""
    errors = [c for c, i in CODES.items() if i.severity == "error"] + ["session.torn_tail"]
    args = [a for c in errors for a in ("--ignore", c)]
    r = run_cli("validate", "--store", str(planted), "--deep", *args, "--json")
    doc = orjson.loads(r.stdout)
    assert r.exit_code == 0, doc["findings"]
    assert doc["totals"]["error"] == 0 and doc["totals"]["ignored"] >= 20
    assert run_cli("validate", "--store", str(planted), "--deep", *args, "--strict", "-q").exit_code == 1
    r = run_cli("validate", "--store", str(planted), "--ignore", "layout.*", "--json")
    assert not [f for f in orjson.loads(r.stdout)["findings"] if f["check"] == "layout"]
    r = run_cli("validate", "--store", str(planted), "--ignore", "no.such_code")
    assert r.exit_code == 2 and "unknown finding code" in r.stderr


def test_jsonl_streams_findings_then_summary(planted):
    r = run_cli("validate", "--store", str(planted), "--deep", "--format", "jsonl")
    assert r.exit_code == 1
    rows = [orjson.loads(line) for line in r.stdout_bytes.splitlines()]
    assert rows[-1]["type"] == "summary" and rows[-1]["project"] == SLUG
    assert {x["type"] for x in rows[:-1]} == {"finding"}
    assert Counter(x["code"] for x in rows[:-1]) == Counter(list(PLANTED))
    assert rows[-1]["ok"] is False


def test_human_output_groups_by_check(planted):
    r = run_cli("validate", "--store", str(planted), "--deep")
    assert r.exit_code == 1
    out = r.stdout
    assert out.startswith(f"{SLUG}: PROBLEMS")
    heads = [line.strip() for line in out.splitlines() if line.strip().startswith("[")]
    assert heads == ["[config]", "[layout]", "[markdown]", "[db]", "[facts]", "[sessions]",
                     "[compaction]", "[learning]"]
    assert "layout.symlink" in out and "notes/link.md" in out


def test_prometheus_output_parses(planted, config_dir):
    build_db_stores(config_dir)
    r = run_cli("validate", "--all-projects", "--format", "prometheus")
    assert r.exit_code == 1
    fams = parse_exposition(r.stdout)
    ok = {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}
    assert ok == {SLUG: 0, "integrity-0123456789ab": 0, "future-0123456789ab": 0,
                  "garbage-0123456789ab": 0, "legacy-0123456789ab": 1,
                  "unchecked-0123456789ab": 1}
    assert fams["memctl_validate_ok"].type == "gauge"
    f = {(s.labels["project"], s.labels["code"]): s.value
         for s in fams["memctl_validate_findings"].samples}
    assert f[(SLUG, "layout.symlink")] == 1
    assert f[("legacy-0123456789ab", "db.needs_migration")] == 1
    facts = {s.labels["status"]: s.value for s in fams["memctl_validate_facts"].samples
             if s.labels["project"] == SLUG}
    assert set(facts) == {"valid", "missing", "stale", "hidden", "unverified"}
    ts = fams["memctl_validate_last_run_timestamp_seconds"].samples[0].value
    assert abs(ts - time.time()) < 600
    # the run itself: exit status, time, stores audited (no labels)
    assert fams["memctl_validate_exit_status"].samples[0].value == 1
    assert fams["memctl_validate_stores"].samples[0].value == 6
    assert abs(fams["memctl_validate_run_timestamp_seconds"].samples[0].value - time.time()) < 600


def test_prometheus_label_escaping(config_dir):
    path = config_dir / "memory" / 'we"ird\\name'
    os.makedirs(path, mode=0o700)
    r = run_cli("validate", "--store", str(path), "--format", "prometheus")
    fams = parse_exposition(r.stdout)
    assert fams["memctl_validate_ok"].samples[0].labels["project"] == 'we"ird\\name'


def test_missing_store_and_bad_format(config_dir):
    r = run_cli("validate", "--store", str(config_dir / "nope"))
    assert r.exit_code == 3 and "memctl: error:" in r.stderr
    path = build_clean(config_dir)
    assert run_cli("validate", "--store", str(path), "--format", "xml").exit_code == 2
    assert run_cli("validate", "--all-projects", "--store", str(path)).exit_code == 2


def test_all_projects_reports_config_once(planted, config_dir):
    build_clean(config_dir, "other-0123456789ab")
    code, fs = findings("--all-projects")
    assert code == 1
    assert Counter(f["code"] for f in fs)["config.out_of_range"] == 1
    assert {f["project"] for f in fs if f["code"] != "config.out_of_range"} == {SLUG}


@pytest.mark.parametrize("whole", [False, True])
def test_one_pass_statuses_match_session_store(planted, monkeypatch, whole):
    """The audit's single-pass reference decisions equal SessionStore.validate_many:
    the audit keeps the references that are not valid (any other is valid).
    ``whole``: a transcript cited even once is parsed in one call when it can
    be (records_by_line), else the span search and the line loop."""
    from lecode_memctl.core.audit import Audit, transcripts

    monkeypatch.setattr(transcripts, "WHOLE_REFS", 1 if whole else 1 << 30)

    store = store_at(planted)
    with FactStore.open_readonly(store.facts_db) as fs:
        refs = [r for _sid, group in fs.source_refs_by_session() for r in group]
        expect = SessionStore(store, exclusions=fs).validate_many(refs, "durable")
    assert len(refs) >= 6
    assert sum(not s.ok for s in expect.values()) >= 3
    assert any(s.ok for s in expect.values())
    for deep in (False, True):
        a = Audit(store, deep=deep, parallel=False)
        list(a.run())
        got = {ref: st for (ref, p), st in a._statuses.items() if p == "durable"}
        assert {r: (s.status, s.reason, s.seq) for r, s in got.items()} == \
            {r: (s.status, s.reason, s.seq) for r, s in expect.items() if not s.ok}


def test_parallel_deep_equals_serial(planted):
    from lecode_memctl.core.audit import Audit

    store = store_at(planted)
    runs = []
    for parallel in (False, True):
        a = Audit(store, deep=True, parallel=parallel)
        runs.append(sorted((f.code, f.location()) for f in a.run()))
    assert runs[0] == runs[1]


def test_symlinked_store_is_unreadable(config_dir, tmp_path):
    real = build_clean(config_dir)
    link = config_dir / "memory" / "link-0123456789ab"
    os.symlink(real, link)
    r = run_cli("validate", "--store", str(link))
    assert r.exit_code == 5 and "symbolic link" in r.stderr


def test_unreferenced_transcripts_read_only_at_head_and_tail(config_dir):
    from lecode_memctl.core.audit import Audit

    path = build_clean(config_dir)
    # (an assistant message in its last 64 KiB: the epoch check stops there)
    big = ([_hdr("big")] + [_msg(i, "y" * 500) for i in range(1, 3990)]
           + [orjson.dumps({"seq": 3990, "type": "message", "role": "assistant",
                            "content": "a", "epoch": 0}) + b"\n"]
           + [_msg(i, "y" * 500) for i in range(3991, 4000)])
    _write_session(path / "sessions" / "big.jsonl", big)
    size = sum(len(x) for x in big)
    a = Audit(store_at(path), parallel=False)
    assert list(a.run()) == []
    s1 = (path / "sessions" / "s1.jsonl").stat().st_size
    # s1 is referenced (read once, whole; its epoch tail comes from memory); s2 and big:
    # header line, last byte, and the last EPOCH_TAIL bytes for the epoch check only
    from lecode_memctl.core.audit.transcripts import EPOCH_BACK, EPOCH_TAIL

    s2 = (path / "sessions" / "s2.jsonl").stat().st_size
    assert a.summary.bytes_read < s1 + 3 * 4096 + 10 + min(s2, EPOCH_TAIL) + EPOCH_TAIL
    assert size > 1_000_000
    # a transcript with no generated message is read back to EPOCH_BACK
    # bytes from its end, at most (here the whole of it), each byte once
    _write_session(path / "sessions" / "big.jsonl", [x for x in big if b'"assistant"' not in x])
    a = Audit(store_at(path), parallel=False)
    assert list(a.run()) == []
    assert a.summary.bytes_read < s1 + 3 * 4096 + 10 + min(s2, EPOCH_TAIL) + min(size, EPOCH_BACK)


def test_hand_formatted_transcript_uses_the_line_loop(config_dir):
    """Lines not in the writer's exact layout: the byte search gives up and the
    line loop decides, with the same result as SessionStore.validate_many."""
    from lecode_memctl.core.audit import Audit

    path = build_clean(config_dir)
    store = store_at(path)
    recs = [{"seq": 0, "type": "session", "format": 1, "session_id": "hand", "project": SLUG,
             "created": "2026-01-01T00:00:00Z"},
            {"seq": 1, "type": "message", "role": "user", "content": "spaced out"},
            {"seq": 2, "type": "message", "role": "user", "content": "second"},
            {"seq": 3, "type": "event", "event": "undo", "target": [2, 2]}]
    lines = [orjson.dumps(r, option=orjson.OPT_SORT_KEYS).replace(b":", b": ", 1) + b"\n" for r in recs]
    _write_session(path / "sessions" / "hand.jsonl", lines)
    fs = FactStore(store.facts_db)
    fs.add("spaced", ref=SourceRef("hand", (1,), canonical_digest(recs[1:2])))
    fs.add("undone", ref=SourceRef("hand", (2,), canonical_digest(recs[2:3])))
    fs.close()
    a = Audit(store, parallel=False)
    found = [(f.code, f.reason) for f in a.run()]
    assert found == [("fact.hidden", "undone")]
    with FactStore.open_readonly(store.facts_db) as ro:
        refs = [r for (r, p) in a._statuses if r.session_id == "hand"]
        expect = SessionStore(store, exclusions=ro).validate_many(refs, "durable")
    assert {r: a._statuses[(r, "durable")].status for r in refs} == {r: s.status for r, s in expect.items()}


def test_symlinked_session_is_refused_once(config_dir):
    path = build_clean(config_dir)
    os.symlink(path / "sessions" / "s1.jsonl", path / "sessions" / "alias.jsonl")
    _code, fs = findings("--store", str(path), "--deep")
    assert [(f["code"], f["reason"], f["file"]) for f in fs] == [
        ("session.refused", "refused_symlink", "sessions/alias.jsonl")]


def test_format_md_lists_every_finding_code_with_its_severity():
    """docs/FORMAT.md "Validate findings" documents every code, with the severity CODES gives."""
    import re

    from .conftest import REPO

    text = (REPO / "docs" / "FORMAT.md").read_text()
    section = text[text.index("## Validate findings"):]
    rows = dict(re.findall(r"^\| `([a-z0-9_.]+)`(?: \*\(deep\)\*)? \| ([a-z /]+) \|", section, re.M))
    assert set(rows) == set(CODES)
    for code, info in CODES.items():
        # "warning / error" for a code whose severity depends on the case
        assert info.severity in rows[code].split(" / "), code


@pytest.mark.parametrize("memmem", [False, True])
@pytest.mark.parametrize("misses", [0, 16])
def test_event_search_full_of_its_rare_byte_matches_session_store(config_dir, monkeypatch, misses,
                                                                  memmem):
    """The default audit finds the undo/redo events of an in-memory transcript
    by the memchr of the ``v`` of ``"event"``; prose full of ``v`` hands the
    search over to ``bytes.find`` (at once with ``misses`` 0): either way every
    event is found and the statuses are SessionStore.validate_many's."""
    from lecode_memctl.core import sessions as sessions_mod
    from lecode_memctl.core.audit import Audit

    from .conftest import memmem_or_not

    monkeypatch.setattr(sessions_mod, "_RARE_MISSES", misses)
    memmem_or_not(monkeypatch, memmem)  # (the whole-mark search by memmem, else bytes.find)
    path = build_clean(config_dir)
    store = store_at(path)
    recs: list[dict] = [{"seq": 0, "type": "session", "format": 1, "session_id": "vvv",
                         "project": SLUG, "created": "2026-01-01T00:00:00Z"}]
    for seq in range(1, 400):
        if seq % 40 == 0:
            recs.append({"seq": seq, "type": "event", "event": "undo" if seq % 80 else "redo",
                         "target": [seq - 3, seq - 2]})
        else:
            recs.append({"seq": seq, "type": "message", "role": "user",
                         "content": f"{seq} vivid velvet vines never ever evolve " * 8})
    _write_session(path / "sessions" / "vvv.jsonl", [orjson.dumps(r) + b"\n" for r in recs])
    fs = FactStore(store.facts_db)
    for seq in range(1, 400, 3):
        if recs[seq]["type"] == "message":
            fs.add(f"fact {seq}", ref=SourceRef("vvv", (seq,), canonical_digest(recs[seq:seq + 1])))
    fs.close()
    a = Audit(store, parallel=False)
    list(a.run())
    with FactStore.open_readonly(store.facts_db) as ro:
        refs = [r for _sid, group in ro.source_refs_by_session("vvv") for r in group]
        expect = SessionStore(store, exclusions=ro).validate_many(refs, "durable")
    # the audit keeps the statuses that are not valid
    got = {r: (st.status, st.reason) for (r, _p), st in a._statuses.items() if r.session_id == "vvv"}
    assert got == {r: (s.status, s.reason) for r, s in expect.items() if not s.ok}
    assert ("hidden", "undone") in got.values() and any(s.ok for s in expect.values())


@pytest.mark.heavy
@pytest.mark.parametrize("limits", [(1, 1 << 30, 32), (1 << 30, 1, 32), (1 << 30, 1 << 30, 2),
                                    (8 << 20, 4096, 32)])
def test_pool_batches_give_the_serial_audit(planted, monkeypatch, tmp_path, limits):
    """The pool's batches (closed by bytes, references or jobs) give the
    serial audit's findings and kept statuses, default and --deep; a worker
    sends back only the statuses that are not valid."""
    from lecode_memctl.core.audit import Audit, run as run_mod, transcripts

    monkeypatch.setattr(transcripts, "BATCH_BYTES", limits[0])
    monkeypatch.setattr(transcripts, "BATCH_REFS", limits[1])
    monkeypatch.setattr(transcripts, "BATCH_JOBS", limits[2])
    store = store_at(planted)
    pids = tmp_path / "pids"
    monkeypatch.setattr(transcripts, "_batch_job", _recording_batch_job)
    monkeypatch.setenv("MEMCTL_TEST_PIDS", str(pids))
    for deep in (False, True):
        runs = []
        for parallel in (False, True):
            monkeypatch.setattr(run_mod, "worth_a_pool", lambda *a, p=parallel: p)
            a = Audit(store, deep=deep, parallel=True, now=1.9e9)
            found = [(f.code, f.severity, f.message, f.location()) for f in a.run()]
            runs.append((found, {k: (v.status, v.reason, v.seq) for k, v in a._statuses.items()},
                         dict(a.summary.facts)))
        assert runs[0] == runs[1]
        assert runs[0][1], "the planted store has references that are not valid"
        # the pool ran: its batches were run by other processes
        assert pids.exists() and {int(x) for x in pids.read_text().split()} - {os.getpid()}
        pids.unlink()


def _recording_batch_job(batch):
    """transcripts._batch_job, noting the pid of the process that runs it."""
    with open(os.environ["MEMCTL_TEST_PIDS"], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return _REAL_BATCH_JOB(batch)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_failing_job_comes_after_the_results_before_it(tmp_path, monkeypatch, parallel):
    """run_jobs yields the results of the jobs before one that raises, then
    raises its error, in the pool as in one process (a batch does not lose
    the results of its first jobs)."""
    from lecode_memctl.core.audit import transcripts

    monkeypatch.setattr(transcripts, "_session_job", _job_failing_at_two)
    jobs = [(str(tmp_path / f"s{i}.jsonl"), f"s{i}", "slug", False, [], frozenset(), 0, 0.0)
            for i in range(5)]
    got = []
    with pytest.raises(RuntimeError, match="job s2"):
        for sc in transcripts.run_jobs(jobs, parallel=parallel):
            got.append(sc.bytes_read)
    assert got == [0, 1]
    assert list(transcripts.run_jobs([], parallel=parallel)) == []


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("made", [10, 45])
def test_an_error_making_the_jobs_comes_after_the_results_before_it(tmp_path, monkeypatch,
                                                                     parallel, made):
    """The jobs are made as they are taken (a store read can fail there):
    the results of those made before the error come first, then the error,
    in the pool as in one process (a review: the pool gave none of the
    unfinished batch's, nor, before in_order, of the batches before it)."""
    from lecode_memctl.core.audit import transcripts

    monkeypatch.setattr(transcripts, "_session_job", _job_of)

    def jobs():
        for i in range(made):
            yield (str(tmp_path / f"s{i}.jsonl"), f"s{i}", "slug", False, [], frozenset(), 0, 0.0)
        raise OSError("the next job's references cannot be read")

    got = []
    with pytest.raises(OSError, match="next job"):
        for sc in transcripts.run_jobs(jobs(), parallel=parallel):
            got.append(sc.bytes_read)
    assert got == list(range(made))


def _job_of(path, sid, *rest):
    from lecode_memctl.core.audit.transcripts import _Scan

    sc = _Scan()
    sc.bytes_read = int(sid[1:])
    return sc


def _job_failing_at_two(path, sid, *rest):
    from lecode_memctl.core.audit.transcripts import _Scan

    if sid == "s2":
        raise RuntimeError(f"job {sid}")
    sc = _Scan()
    sc.bytes_read = int(sid[1:])
    return sc


def test_batches_keep_every_job_in_order(tmp_path, monkeypatch):
    from lecode_memctl.core.audit import transcripts

    monkeypatch.setattr(transcripts, "BATCH_BYTES", 100)
    monkeypatch.setattr(transcripts, "BATCH_REFS", 5)
    monkeypatch.setattr(transcripts, "BATCH_JOBS", 3)
    sizes = [10, 95, 0, 40, 40, 40, 1, 1, 1, 1, 300]
    refs = [1, 0, 0, 0, 0, 0, 5, 0, 1, 0, 0]
    jobs = []
    for i, (n, r) in enumerate(zip(sizes, refs, strict=True)):
        p = tmp_path / f"s{i}.jsonl"
        p.write_bytes(b"x" * n)
        jobs.append((str(p), f"s{i}", "slug", False, [((1,), "d", "durable")] * r))
    jobs.append((str(tmp_path / "gone.jsonl"), "gone", "slug", False, []))   # stat fails: 0 bytes
    batches = list(transcripts._batches(jobs))
    assert [j for b in batches for j in b] == jobs
    # closed by bytes (10 + 95), jobs (3), references (5), jobs, bytes (300), the end
    assert [len(b) for b in batches] == [2, 3, 2, 3, 1, 1]


_REV_VALUES = [1, 2, 3, 0, -1, 2.0, 1.5, "1", "2", b"\x01", None, True]


@pytest.mark.parametrize("seed", range(40))
def test_revision_checks_filtered_by_sqlite_find_what_the_loop_found(seed):
    """The revision-contiguity check has SQLite leave out the facts whose
    revisions are plainly 1..n with the current one among them; on damaged
    tables (revision numbers stored as text, reals, BLOBs, NULL, gaps,
    duplicates, no current row) the findings are those of the check that
    judged every fact in Python (reproduced here as the oracle)."""
    import random

    from lecode_memctl.core.audit.facts import _db_checks_rest
    from lecode_memctl.core.facts import row_text

    rnd = random.Random(seed)
    db = sqlite3.connect(":memory:")
    # (no column types: a revision number stays the text, real or BLOB written)
    db.execute("CREATE TABLE facts (fact_id, revision, created, updated)")
    db.execute("CREATE TABLE revisions (fact_id, revision, text, created)")
    for i in range(30):
        fid = f"{i:016x}"
        n = rnd.randint(0, 4)
        revs = list(range(1, n + 1))
        if rnd.random() < 0.5 and revs:        # damage one revision number
            revs[rnd.randrange(len(revs))] = rnd.choice(_REV_VALUES)
        if rnd.random() < 0.2 and revs:
            revs.append(rnd.choice(revs))      # a duplicate row
        cur = n if rnd.random() < 0.7 else rnd.choice(_REV_VALUES)
        db.execute("INSERT INTO facts VALUES (?, ?, 'c', 'u')", (fid, cur))
        for r in revs:
            db.execute("INSERT INTO revisions VALUES (?, ?, 't', 'c')", (fid, r))

    class _Facts:
        tables = {"facts", "revisions"}

    got = [f for f in _db_checks_rest(_Facts(), db) if f[0] in ("db.revision_gap", "db.dangling_ref")
           and f[2].get("table") != "revisions"]
    expect = []
    for fid, cur, n, lo, hi, odd, has_cur in db.execute(
            "SELECT f.fact_id, f.revision, count(r.revision), min(r.revision), max(r.revision), "
            # the revisions stored as no integer (since 2026-12-07 a gap too:
            # rows 1, 2.5 and 3 are no run 1..3)
            "count(r.revision) - total(typeof(r.revision) = 'integer'), "
            # the current revision is a row of the same integer (fact_status:
            # a row numbered 2.0 is no revision 2, though SQLite says 2.0 = 2)
            "sum(r.revision = f.revision AND typeof(r.revision) = typeof(f.revision) "
            "AND typeof(f.revision) = 'integer') FROM facts f LEFT JOIN revisions r "
            "ON r.fact_id = f.fact_id GROUP BY f.fact_id ORDER BY f.fact_id"):
        # (a revision that is no integer: its repr in the message, null in the field)
        def said(v):  # noqa: ANN001,ANN202
            return str(v) if type(v) is int else repr(v)

        num = cur if type(cur) is int else None
        if not has_cur:
            expect.append(("db.dangling_ref", f"the fact's current revision {said(cur)} has no "
                           "revision row", {"fact_id": row_text(fid), "revision": num, "table": "facts"}))
        elif n != hi or lo != 1 or hi != cur or odd:
            expect.append(("db.revision_gap",
                           f"{n} revision(s) numbered {said(lo)}..{said(hi)}"
                           + (f", {int(odd)} of them stored as no integer" if odd else "")
                           + f"; expected 1..{said(cur)} without gaps",
                           {"fact_id": row_text(fid), "revision": num}))
    assert expect and got == expect


@pytest.mark.parametrize("seed", range(90))
def test_a_sound_database_s_first_scan_for_revision_gaps_changes_no_finding(seed):
    """On a database integrity_check found sound, the revision check first
    asks whether any row of facts fails the test (one scan of the table)
    and groups by fact only then: its findings are the grouped query's, on
    stores with no gap at all, one, ids stored twice (each row fine, the
    group not), NULL ids, revisions stored as no integer, id columns
    declared NOCASE or RTRIM."""
    import random

    from lecode_memctl.core.audit.facts import _db_checks_rest

    rnd = random.Random(seed)
    damage = rnd.choice([0.0, 0.02, 0.3])
    twice = 0
    db = sqlite3.connect(":memory:")
    # (a collation on an id column: ids one spelt 'a', the other 'A', are
    # two facts to every reader; a review of 8d2cafd)
    coll = ["", " COLLATE NOCASE", " COLLATE RTRIM"][seed % 5 % 3]
    if seed % 2:
        db.execute(f"CREATE TABLE facts (fact_id TEXT{coll}, revision INTEGER, created, updated)")
    else:       # lecode's keys: an id stored twice is then a NULL one
        db.execute(f"CREATE TABLE facts (fact_id TEXT{coll} PRIMARY KEY, revision INTEGER, "
                   "created, updated)")
    rcoll = ["", " COLLATE NOCASE"][seed % 7 % 2]
    db.execute(f"CREATE TABLE revisions (fact_id TEXT{rcoll}, revision, text, created, "
               "PRIMARY KEY (fact_id, revision))" if seed % 3 else
               f"CREATE TABLE revisions (fact_id TEXT{rcoll}, revision, text, created)")
    for i in range(40):
        fid = None if rnd.random() < damage / 4 else f"{i:016x}"
        if coll and rnd.random() < 0.15:
            fid = f"{i:016X}" if coll.endswith("NOCASE") else f"{i:016x} "
        n = rnd.randint(1, 3)
        revs = list(range(1, n + 1))
        if rnd.random() < damage and revs:
            revs[rnd.randrange(len(revs))] = rnd.choice(_REV_VALUES)
        cur = n if rnd.random() >= damage else rnd.choice(_REV_VALUES)
        rows = 2 if seed % 2 and rnd.random() < 0.1 else 1     # the fact stored twice
        twice += rows - 1
        for _ in range(rows):
            db.execute("INSERT INTO facts VALUES (?, ?, 'c', 'u')", (fid, cur))
        for r in revs:
            try:
                db.execute("INSERT INTO revisions VALUES (?, ?, 't', 'c')", (fid, r))
            except sqlite3.IntegrityError:
                pass

    class _Facts:
        tables = {"facts", "revisions"}

    grouped = list(_db_checks_rest(_Facts(), db))
    assert list(_db_checks_rest(_Facts(), db, sound=True)) == grouped
    assert len(grouped) >= twice
    if damage == 0.0 and not twice:
        assert grouped == []


# the shapes of the two tables the merged gap scan is tested on: lecode's
# (id columns TEXT, no collation: the merge answers), and others (the scan
# of each fact answers)
_GAP_SHAPES = [
    ("fact_id TEXT PRIMARY KEY, revision INTEGER, created, updated",
     "fact_id TEXT, revision, text, created, PRIMARY KEY (fact_id, revision)", True),
    ("fact_id TEXT, revision INTEGER, created, updated",
     "fact_id TEXT, revision, text, created", True),
    ("fact_id TEXT NOT NULL, revision, created, updated",
     "fact_id TEXT NOT NULL, revision INTEGER, text, created", True),
    ("fact_id TEXT COLLATE NOCASE, revision INTEGER, created, updated",
     "fact_id TEXT, revision, text, created", False),
    ("fact_id TEXT, revision INTEGER, created, updated",
     "fact_id TEXT COLLATE RTRIM, revision, text, created", False),
    ("fact_id, revision INTEGER, created, updated",
     "fact_id TEXT, revision, text, created", False),
    ("fact_id TEXT, revision INTEGER, created, updated",
     "fact_id INTEGER, revision, text, created", False),
    ("fact_id TEXT, revision INTEGER, created, updated",
     "fact_id, revision, text, created", False),
]
_GAP_IDS = ["a", "b", "A", "a ", "1", 1, 1.0, b"a", b"1", None]


@pytest.mark.parametrize("seed", range(120))
def test_the_merged_gap_scan_answers_as_the_scan_of_each_fact(seed):
    """On a sound database the revision check asks first whether any fact
    fails the test of its revisions; where both id columns are TEXT and no
    collation is declared, that question is asked of two sorted streams,
    merged (``_MERGED_GAP``), not fact by fact through the revisions' index
    (``_ANY_GAP``: at 1,000,000 facts, one index page read again per
    fact).  Its answer is the other's on stores of ids that look alike
    ('a', 'A', 'a ', BLOBs, numbers, NULL), ids stored twice, revisions
    that are no integers, gaps and revisions of no fact; on the other
    shapes the scan of each fact answers."""
    import random

    from lecode_memctl.core.audit.facts import _ANY_GAP, _any_gap, _merged_gap_fits

    rnd = random.Random(seed)
    fshape, rshape, merged = _GAP_SHAPES[seed % len(_GAP_SHAPES)]
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE facts ({fshape})")
    db.execute(f"CREATE TABLE revisions ({rshape})")
    damage = rnd.choice([0.0, 0.05, 0.3])
    for fid in rnd.sample(_GAP_IDS, rnd.randint(1, len(_GAP_IDS))):
        n = rnd.randint(1, 3)
        revs = list(range(1, n + 1))
        if rnd.random() < damage:
            revs[rnd.randrange(n)] = rnd.choice(_REV_VALUES)
        if rnd.random() < damage:
            del revs[rnd.randrange(n)]
        cur = n if rnd.random() >= damage else rnd.choice(_REV_VALUES)
        for _ in range(2 if rnd.random() < damage else 1):      # stored twice
            with contextlib.suppress(sqlite3.IntegrityError):
                db.execute("INSERT INTO facts VALUES (?, ?, 'c', 'u')", (fid, cur))
        if rnd.random() < damage:
            fid = rnd.choice(_GAP_IDS)        # its revisions under another id
        for r in revs:
            with contextlib.suppress(sqlite3.IntegrityError):
                db.execute("INSERT INTO revisions VALUES (?, ?, 't', 'c')", (fid, r))
    assert _merged_gap_fits(db) is merged
    assert _any_gap(db) == (db.execute(_ANY_GAP).fetchone() is not None)


@pytest.mark.parametrize(("facts", "revisions", "gap"), [
    ([("a", 2.0)], [("a", 1), ("a", 2)], True),       # a current revision stored as a real
    ([("a", "2")], [("a", 1), ("a", 2)], True),       # ... as text
    ([("a", 1)], [("a", 1.0)], True),                 # a revision stored as a real
    ([(None, 1)], [(None, 1)], True),                 # a NULL id has no revisions
    ([(b"a", 1)], [("a", 1)], True),                  # a BLOB id is not the text id
    ([("a", 1), ("a", 1)], [("a", 1)], False),        # an id stored twice, each row fine
    ([("a", 1)], [("a", 1), (b"a", 1), ("A", 2)], False),
    ([("a", 2), ("b", 1)], [("a", 1), ("a", 2), ("b", 1), ("c", 3)], False),
    ([("a", 3)], [("a", 1), ("a", 3)], True),
])
def test_the_merged_gap_scan_compares_as_the_join(facts, revisions, gap):
    """The merged gap scan on values the join compares in its own way: a
    current revision stored as no integer, NULL and BLOB ids, ids stored
    twice, revisions of no fact."""
    from lecode_memctl.core.audit.facts import _ANY_GAP, _any_gap, _merged_gap_fits

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE facts (fact_id TEXT, revision, created, updated)")
    db.execute("CREATE TABLE revisions (fact_id TEXT, revision, text, created)")
    db.executemany("INSERT INTO facts VALUES (?, ?, 'c', 'u')", facts)
    db.executemany("INSERT INTO revisions VALUES (?, ?, 't', 'c')", revisions)
    assert _merged_gap_fits(db)
    assert (db.execute(_ANY_GAP).fetchone() is not None) is gap
    assert _any_gap(db) is gap


def test_the_merged_gap_scan_that_fails_leaves_the_answer_to_the_other():
    """The merged gap scan sorts, and a sort can fail (a full temporary
    directory): the scan of each fact answers then; an interrupt is raised."""
    from lecode_memctl.core.audit import facts as audit_facts

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE facts (fact_id TEXT PRIMARY KEY, revision INTEGER, created, updated)")
    db.execute("CREATE TABLE revisions (fact_id TEXT, revision, text, created, "
               "PRIMARY KEY (fact_id, revision))")
    db.execute("INSERT INTO facts VALUES ('a', 2, 'c', 'u'), ('b', 1, 'c', 'u')")
    db.execute("INSERT INTO revisions VALUES ('a', 1, 't', 'c'), ('b', 1, 't', 'c')")
    assert audit_facts._merged_gap_fits(db)
    assert audit_facts._any_gap(db) is True
    # the merged query alone interrupted (the scan after it would answer)
    merging = [False]
    db.set_trace_callback(lambda sql: merging.__setitem__(0, sql == audit_facts._MERGED_GAP))
    db.set_progress_handler(lambda: int(merging[0]), 1)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        audit_facts._any_gap(db)
    db.set_progress_handler(None, 0)
    db.set_trace_callback(None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit_facts, "_MERGED_GAP", "SELECT * FROM memctl_no_such_table")
        assert audit_facts._any_gap(db) is True
        db.execute("UPDATE facts SET revision = 1 WHERE fact_id = 'a'")
        assert audit_facts._any_gap(db) is False


@pytest.mark.parametrize("sound", [False, True])
def test_ids_a_collation_makes_equal_are_two_facts_to_the_revision_check(sound):
    """'a' and 'A' in a fact id column declared NOCASE are two facts, each
    with its revision 1 (as every reader shows them): no revision gap
    (before, one group of two revisions numbered 1..1, reported with the
    grouped query and not after the scan of a sound database)."""
    from lecode_memctl.core.audit.facts import _db_checks_rest

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE facts (fact_id TEXT COLLATE NOCASE, revision INTEGER, created, "
               "updated)")
    db.execute("CREATE TABLE revisions (fact_id TEXT, revision, text, created, "
               "PRIMARY KEY (fact_id, revision))")
    db.execute("INSERT INTO facts (fact_id, revision) VALUES ('a', 1), ('A', 1), ('b', 2)")
    db.execute("INSERT INTO revisions (fact_id, revision) VALUES ('a', 1), ('A', 1), ('b', 2)")
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    class _Facts:
        tables = {"facts", "revisions"}

    got = [(c, loc["fact_id"]) for c, _m, loc in _db_checks_rest(_Facts(), db, sound=sound)]
    assert got == [("db.revision_gap", "b")]


@pytest.mark.parametrize("table", ["forgotten", "exclusions"])
@pytest.mark.parametrize("value", ["zzz", b"\x00", 2.5, -1])
def test_a_generation_that_is_no_integer_is_a_finding(tmp_path, table, value):
    """A generation of a forget's retry marker or of an exclusion stored as
    text, a BLOB, a real or a negative number: db.generation_mismatch naming
    the table (exit 1), not an internal error (it was exit 70: a TypeError
    comparing it with the generation in meta)."""
    path = build_clean(tmp_path / "config")
    db = sqlite3.connect(path / "facts.sqlite3")
    if table == "forgotten":
        db.execute("INSERT INTO forgotten VALUES ('00000000000000aa', ?)", (value,))
    else:
        db.execute("INSERT INTO exclusions (session_id, seq, generation) VALUES ('s1', 2, ?)",
                   (value,))
    db.commit()
    db.close()
    before = tree_hash(path)
    r = run_cli("--store", str(path), "--no-state", "validate", "--json")
    assert r.exit_code == 1, r.output
    doc = orjson.loads(r.stdout)
    found = [f for f in doc["findings"] if f["code"] == "db.generation_mismatch"
             and f"1 row(s) of {table} hold a generation" in f["message"]]
    assert len(found) == 1, doc["findings"]
    assert tree_hash(path) == before
