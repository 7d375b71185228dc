"""validate --all-projects, whose report a cron job publishes (review of
2026-12-07): one entry of memory/ never stops the others' report."""

from __future__ import annotations

import os

import orjson
import pytest

from . import outkit
from .conftest import run_cli, tree_hash
from .promparse import parse_exposition


@pytest.fixture
def good(config_dir, tmp_path):
    store, _ids = outkit.build(config_dir, tmp_path / "proj", facts=3)
    return store


def _prom(target) -> dict:
    fams = parse_exposition(target.read_text())
    return {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_ignoring_the_finding_of_a_refused_entry_does_not_stop_the_run(config_dir, good, tmp_path,
                                                                        kind):
    """--ignore of the code an entry of memory/ that is not a store gives
    (layout.unexpected_file, layout.symlink) made the run exit 5 ("not a
    directory") with no --output file: the refusal, its finding ignored,
    was taken for "not refused" and the entry read as a store."""
    memory = config_dir / "memory"
    if kind == "file":
        (memory / "README.txt").write_text("notes\n")
        code = "layout.*"
    else:
        os.symlink(good.path, memory / "linked-0123456789ab")
        code = "layout.symlink"
    before = tree_hash(config_dir)
    target = tmp_path / "out" / "m.prom"
    target.parent.mkdir()
    r = run_cli("--no-state", "validate", "--all-projects", "--ignore", code, "--format",
                "prometheus", "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    ok = _prom(target)
    assert ok[good.slug] == 1 and len(ok) == 2, ok
    r = run_cli("--no-state", "validate", "--all-projects", "--ignore", code, "--json")
    assert r.exit_code == 0, r.stderr
    assert tree_hash(config_dir) == before


@pytest.mark.parametrize("gone", ["000-0123456789ab", "zzz-0123456789ab"])
def test_a_store_gone_before_its_audit_is_left_out(config_dir, good, tmp_path, monkeypatch, gone):
    """A store removed after memory/ was listed, before its audit began,
    stopped the whole run with exit 3 ("no memory store") and no --output
    file.  It is left out, as if removed before the listing; config.toml's
    findings go with the first store audited."""
    from lecode_memctl.core import layout

    real = layout.memory_names
    monkeypatch.setattr(layout, "memory_names", lambda cfg: sorted([*real(cfg), gone]))
    target = tmp_path / "m.prom"
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "prometheus",
                "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert _prom(target) == {good.slug: 1}
    fams = parse_exposition(target.read_text())
    assert fams["memctl_validate_stores"].samples[0].value == 1
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert gone not in r.stdout
    (config_dir / "config.toml").write_text("[memory\n")
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "jsonl")
    assert r.exit_code == 1, r.stderr
    assert gone not in r.stdout and '"config.invalid"' in r.stdout, r.stdout


def _small_store(path) -> None:
    """A store at ``path`` with one session and three facts citing it."""
    from lecode_memctl.core import open_project

    path.mkdir(parents=True)
    with open_project(store=path) as p:
        s = p.sessions
        with s.create("s1") as w:
            seqs = [w.append_message("user", f"fact number {i}") for i in range(3)]
        for i, seq in enumerate(seqs):
            p.remember(f"fact number {i}", s.source_snapshot("s1", seq, seq).ref)
    for d, _dirs, files in os.walk(path):
        os.chmod(d, 0o700)
        for f in files:
            os.chmod(os.path.join(d, f), 0o600)


def _damage_root(db_path, table: str) -> None:
    """The root page of ``table`` given a free block past its end (what
    integrity_check reports as "free space corruption", and a read of the
    table stops at: "database disk image is malformed")."""
    import sqlite3

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                             (table,)).fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    finally:
        db.close()
    with open(db_path, "r+b") as f:
        f.seek((root - 1) * size + 3)
        f.write(b"\x00\x07\x00\x01")


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("table", ["revisions", "source_refs"])
def test_a_store_whose_facts_cannot_be_read_does_not_stop_the_others(config_dir, tmp_path,
                                                                     monkeypatch, table, split):
    """A damaged page the facts' reading meets (the root of revisions or of
    source_refs) stopped validate --all-projects with exit 5, "database
    error: database disk image is malformed", no --output file and nothing
    about the good stores.  With --all-projects that store's audit ends
    with a db.unreadable finding and the run goes on (exit 1); validate of
    that store alone still exits 5 (docs/FORMAT.md)."""
    from lecode_memctl.core import split as split_mod
    from lecode_memctl.core.audit import facts as audit_facts

    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1 if split else 10 ** 9)
    # (a thread of the audit joined a moment before the fork may stay in the
    # kernel's count longer than pools.alone waits on a loaded machine: the
    # core then does not fork, which this test would take for a failure)
    from lecode_memctl.core import pools

    monkeypatch.setattr(pools, "_SETTLE_SECONDS", 10.0)
    helpers: list = []
    real_helper = audit_facts.fact_helper

    def helper(audit, fs):  # noqa: ANN001, ANN202
        helpers.append(real_helper(audit, fs))
        return helpers[-1]

    monkeypatch.setattr(audit_facts, "fact_helper", helper)
    memory = config_dir / "memory"
    bad, good = memory / "bad-0123456789ab", memory / "good-0123456789ab"
    _small_store(bad)
    _small_store(good)
    _damage_root(bad / "facts.sqlite3", table)
    before = tree_hash(config_dir)
    target = tmp_path / "m.prom"
    r = run_cli("--no-state", "validate", "--all-projects", "--no-progress", "--format",
                "prometheus", "--output", str(target))
    assert r.exit_code == 1, r.stderr
    assert r.stderr == ""
    fams = parse_exposition(target.read_text())
    ok = {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}
    assert ok == {bad.name: 0, good.name: 1}, ok
    found = {(s.labels["project"], s.labels["code"]) for s in
             fams["memctl_validate_findings"].samples}
    assert (bad.name, "db.unreadable") in found, found
    if split and len(os.sched_getaffinity(0)) > 1:
        assert any(h is not None for h in helpers), "a child checked half the facts"
    r = run_cli("--no-state", "validate", "--all-projects", "--no-progress", "--format", "jsonl")
    assert r.exit_code == 1, r.stderr
    rows = [orjson.loads(line) for line in r.stdout.splitlines()]
    assert [row["project"] for row in rows if row["type"] == "summary"] == [bad.name, good.name]
    assert not [row for row in rows if row["type"] == "error"], rows
    unreadable = [row for row in rows if row.get("code") == "db.unreadable"]
    assert len(unreadable) == 1 and "malformed" in unreadable[0]["message"], unreadable
    alone = run_cli("--store", str(bad), "--no-state", "validate", "--no-progress")
    assert alone.exit_code == 5, alone.stderr
    assert tree_hash(config_dir) == before


def test_references_that_cannot_be_read_leave_no_fact_judged(config_dir, tmp_path, monkeypatch):
    """The references read one session at a time (source_groups) meet the
    damage: with --all-projects no fact is judged without them (none is
    counted valid), the store has its db.unreadable, the run goes on."""
    import sqlite3

    from lecode_memctl.core import facts as facts_mod

    memory = config_dir / "memory"
    bad, good = memory / "bad-0123456789ab", memory / "good-0123456789ab"
    _small_store(bad)
    _small_store(good)
    real = facts_mod.FactStore.stored_sources_by_session

    def sources(self):  # noqa: ANN001, ANN202
        if self.path.parent.name == bad.name:
            raise sqlite3.DatabaseError("database disk image is malformed")
        yield from real(self)

    monkeypatch.setattr(facts_mod.FactStore, "stored_sources_by_session", sources)
    r = run_cli("--no-state", "validate", "--all-projects", "--no-progress", "--json")
    assert r.exit_code == 1, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    summaries = {s["project"]: s for s in doc["projects"]}
    # (not known: null since 2026-12-07, test_validate_1207u; 0 before)
    assert summaries[bad.name]["facts"] is None, summaries
    assert summaries[bad.name]["facts_total"] is None, summaries
    assert summaries[good.name]["facts"]["valid"] == 3 and summaries[good.name]["ok"], summaries
    codes = [(f["project"], f["code"]) for f in doc["findings"]]
    assert codes == [(bad.name, "db.unreadable")], codes
    alone = run_cli("--store", str(bad), "--no-state", "validate", "--no-progress")
    assert alone.exit_code == 5, alone.stderr


@pytest.mark.parametrize("command", ["validate", "secrets"])
def test_two_store_names_spelt_the_same_make_no_duplicate_series(config_dir, tmp_path, command):
    """memory/a<0xFF> and memory/a\\\\xff (a backslash, then "xff") are both
    spelt a\\xff in a label: the Prometheus text held each series twice,
    which node_exporter's textfile collector rejects with every memctl
    metric in the file.  The second store's samples carry spelt_same="2"."""
    memory = os.fsencode(config_dir / "memory")
    os.makedirs(memory + b"/a\xff", 0o700)
    os.makedirs(memory + b"/a\\xff", 0o700)
    os.makedirs(memory + b"/b-0123456789ab", 0o700)
    target = tmp_path / "m.prom"
    r = run_cli("--no-state", command, "--all-projects", "--format", "prometheus",
                "--output", str(target))
    assert r.exit_code == 0, r.stderr
    fams = parse_exposition(target.read_text())   # (refuses a repeated series)
    name = f"memctl_{command}_ok"
    labels = sorted(tuple(sorted(s.labels.items())) for s in fams[name].samples)
    assert labels == [(("project", "a\\xff"),), (("project", "a\\xff"), ("spelt_same", "2")),
                      (("project", "b-0123456789ab"),)], labels


@pytest.mark.parametrize("torn", [b'{"seq":9,"type":"mes', b""])
def test_a_torn_tail_modified_in_the_future_is_an_error(tmp_path, torn):
    """A torn tail (or an empty transcript: no complete header) whose file
    mtime lies in the future (a clock stepped back, a restore with future
    times) was "modified in the last minute", a warning, for ever.  More
    than a minute ahead of the clock it is an error; a file changed just now
    is still a warning."""
    import time

    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.layout import store_at

    path = tmp_path / "memory" / "u-0123456789ab"
    _small_store(path)
    f = path / "sessions" / "s1.jsonl"
    code = "session.torn_tail"
    if torn:
        with open(f, "ab") as fh:
            fh.write(torn)
    else:
        f.write_bytes(b"")
        code = "session.missing_header"
    for ahead, severity in ((86400, "error"), (0, "warning"), (-3600, "error")):
        when = time.time() + ahead
        os.utime(f, (when, when))
        found = [x for x in Audit(store_at(path), parallel=False).run() if x.code == code]
        assert [x.severity for x in found] == [severity], (ahead, found)
        if ahead > 0:
            assert "future" in found[0].message, found


@pytest.mark.parametrize("fmt", [(), ("--json",), ("--format", "csv")])
def test_list_codes_honours_output(tmp_path, fmt):
    """validate --list-codes --output FILE printed the list on stdout and
    wrote no file.  It writes FILE, as validate's report is written
    (atomically, the same checks of FILE), and nothing on stdout."""
    target = tmp_path / "codes.out"
    plain = run_cli("validate", "--list-codes", *fmt)
    assert plain.exit_code == 0 and plain.stdout, plain.stderr
    r = run_cli("validate", "--list-codes", *fmt, "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""
    assert target.read_text(encoding="utf-8") == plain.stdout
    link = tmp_path / "link"
    os.symlink(target, link)
    r = run_cli("validate", "--list-codes", *fmt, "--output", str(link))
    assert r.exit_code == 2, r.stderr
    r = run_cli("validate", "--list-codes", *fmt, "--output", str(tmp_path / "none" / "x"))
    assert r.exit_code == 7, r.stderr


def test_a_current_revision_with_no_row_is_documented_as_reported(tmp_path):
    """facts.revision 5 with only revision 1 stored is db.dangling_ref
    (table facts), as the code always reported it; the codes' meanings
    (--list-codes, docs/FORMAT.md) filed it under db.revision_gap and did
    not name facts among db.dangling_ref's tables."""
    import sqlite3

    from lecode_memctl.core.audit import CODES

    from .conftest import REPO

    path = tmp_path / "memory" / "r-0123456789ab"
    _small_store(path)
    db = sqlite3.connect(path / "facts.sqlite3")
    with db:
        (fid,) = db.execute("SELECT fact_id FROM facts ORDER BY fact_id LIMIT 1").fetchone()
        db.execute("UPDATE facts SET revision = 5 WHERE fact_id = ?", (fid,))
    db.close()
    r = run_cli("--store", str(path), "--no-state", "validate", "--json")
    found = [(f["code"], f["table"]) for f in orjson.loads(r.stdout_bytes)["findings"]
             if f["fact_id"] == fid and f["code"].startswith("db.")]
    assert found == [("db.dangling_ref", "facts")], found
    dangling, gap = CODES["db.dangling_ref"].meaning, CODES["db.revision_gap"].meaning
    assert "facts" in dangling and "no revision row" in dangling, dangling
    assert "no revision row" in gap, gap      # (says where that case is filed)
    table = (REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    for code, meaning in (("db.dangling_ref", dangling), ("db.revision_gap", gap)):
        assert meaning in table, code
