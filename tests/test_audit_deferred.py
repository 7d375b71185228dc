"""The database checks run in a thread while the audit reads the transcripts
(``Audit.run``, ``audit.facts._start_checks``): their findings still come
first, a run stopped early waits for the thread, and a database error in
them is reported where it was."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from lecode_memctl.core.audit import Audit, facts as audit_facts, run as audit_run
from lecode_memctl.core.layout import store_at

from .conftest import tree_hash
from .test_audit import build_clean


def damaged(tmp_path: Path, corrupt_lines: int = 3) -> Path:
    """A clean store with two database findings (source_refs rows naming
    revisions that do not exist: db.foreign_key) and ``corrupt_lines`` corrupt transcript
    lines (one session finding each, found by --deep)."""
    path = build_clean(tmp_path / "config")
    db = sqlite3.connect(path / "facts.sqlite3")
    (fid,) = db.execute("SELECT fact_id FROM facts ORDER BY fact_id LIMIT 1").fetchone()
    sid, seqs, digest = db.execute("SELECT session_id, seqs, digest FROM source_refs").fetchone()
    for rev in (7, 8):
        db.execute("INSERT INTO source_refs VALUES (?, ?, ?, ?, ?)", (fid, rev, sid, seqs, digest))
    db.commit()
    db.close()
    with open(path / "sessions" / "s1.jsonl", "ab") as fh:
        fh.write(b"{not json\n" * corrupt_lines)
    return path


def codes(findings) -> list[str]:
    return [f.code for f in findings if f is not None]


def checks_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memctl-db-checks"]


def test_the_checks_run_in_a_thread_while_the_facts_are_loaded(tmp_path):
    """The database phase says PENDING once the facts are loaded (the
    generation, the exclusions) with the checks started, and their findings
    follow it."""
    audit = Audit(store_at(damaged(tmp_path)), parallel=False, deep=True)
    got = list(audit_facts.check_db_and_facts(audit))
    assert got[0] is audit_facts.PENDING
    assert audit._generation_known
    assert codes(got[1:]) == ["db.foreign_key", "db.foreign_key"]
    audit.join_threads()
    audit._fs.close()


@pytest.mark.parametrize("held", [0, 1, 2, 1000])
def test_database_findings_come_before_the_transcripts(tmp_path, monkeypatch, held):
    """As without the thread: every db.* finding, then the transcripts',
    whether the transcripts' findings were held back (up to HELD) or the
    audit had to wait for the checks."""
    monkeypatch.setattr(audit_run, "HELD", held)
    path = damaged(tmp_path)
    before = tree_hash(path)
    got = codes(Audit(store_at(path), parallel=False, deep=True).run())
    assert got == ["db.foreign_key", "db.foreign_key"] + ["session.corrupt_line"] * 3
    assert checks_threads() == []
    assert tree_hash(path) == before


def test_the_same_findings_as_checked_in_order(tmp_path, monkeypatch):
    """With no second connection (the checks run before the transcripts,
    in this thread) the findings are the same, in the same order."""
    path = damaged(tmp_path)
    threaded = [(f.code, f.message) for f in Audit(store_at(path), parallel=False, deep=True).run()]
    from lecode_memctl.core.facts import FactStore

    monkeypatch.setattr(FactStore, "second_reader", lambda self: None)
    inline = [(f.code, f.message) for f in Audit(store_at(path), parallel=False, deep=True).run()]
    assert threaded == inline
    assert len(threaded) == 5


def test_a_run_stopped_early_waits_for_the_checks(tmp_path, monkeypatch):
    """A consumer that stops after the first finding (the generator closed
    while the checks run): the thread is waited for before the database it
    reads is closed, and nothing is left running."""
    release = threading.Event()
    real = audit_facts._db_checks_rest

    def slow(fs, db):
        release.wait(5)
        yield from real(fs, db)

    monkeypatch.setattr(audit_facts, "_db_checks_rest", slow)
    audit = Audit(store_at(damaged(tmp_path, corrupt_lines=0)), parallel=False, deep=True)
    gen = audit.run()
    threading.Timer(0.2, release.set).start()
    # no finding before the checks': the first one waits for them
    assert next(gen).code == "db.foreign_key"
    gen.close()
    assert checks_threads() == []
    assert audit._fs is None


def test_a_database_error_in_the_checks_is_reported_after_their_findings(tmp_path, monkeypatch):
    """The checks stopped by a database error: what they found, then
    db.unreadable, then the transcripts' findings (the facts were loaded
    before the error, so they are still audited)."""
    real = audit_facts._db_checks_rest

    def failing(fs, db):
        it = real(fs, db)
        yield next(it)
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(audit_facts, "_db_checks_rest", failing)
    audit = Audit(store_at(damaged(tmp_path)), parallel=False, deep=True)
    found = [f for f in audit.run()]
    assert codes(found) == ["db.foreign_key", "db.unreadable"] + ["session.corrupt_line"] * 3
    assert "malformed" in found[1].message
    assert audit.summary.facts_total == 2


def test_no_pool_is_forked_while_the_checks_run(tmp_path, monkeypatch):
    """The transcripts read by a pool of processes (forked): the checks'
    thread has ended before the fork (a child never inherits a thread
    inside SQLite), even when the pool was not foreseen when the checks
    started (a transcript grew in between: worth_a_pool says no, then yes)."""
    release = threading.Event()
    real_rest, real_jobs = audit_facts._db_checks_rest, audit_run.run_jobs
    seen: list[list[threading.Thread]] = []
    answers = iter([False, True])

    def slow(fs, db):
        release.wait(5)
        yield from real_rest(fs, db)

    def jobs(it, parallel):
        assert parallel
        seen.append(checks_threads())
        return real_jobs(it, parallel=False)

    monkeypatch.setattr(audit_facts, "_db_checks_rest", slow)
    monkeypatch.setattr(audit_run, "worth_a_pool", lambda *a: next(answers))
    monkeypatch.setattr(audit_run, "run_jobs", jobs)
    threading.Timer(0.2, release.set).start()
    got = codes(Audit(store_at(damaged(tmp_path)), deep=True).run())
    assert seen == [[]]
    assert got == ["db.foreign_key", "db.foreign_key"] + ["session.corrupt_line"] * 3


def test_the_checks_wait_for_nothing_when_a_pool_may_follow(tmp_path, monkeypatch):
    """When the transcripts may be read by a pool (``Audit.may_fork``), the
    checks are not left running: integrity_check in a thread, the rest
    meanwhile in this one, both done before the transcripts (the pool would
    wait for the thread anyway, alone on its core)."""
    monkeypatch.setattr(audit_run, "worth_a_pool", lambda *a: True)
    audit = Audit(store_at(damaged(tmp_path)), deep=True)
    assert audit.may_fork()
    got = list(audit_facts.check_db_and_facts(audit))
    assert audit_facts.PENDING not in got
    assert codes(got) == ["db.foreign_key", "db.foreign_key"]
    audit.join_threads()
    audit._fs.close()
    assert not Audit(store_at(damaged(tmp_path / "b")), deep=True, parallel=False).may_fork()
