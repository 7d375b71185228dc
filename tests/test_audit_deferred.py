"""The database checks run in a thread while the audit reads the transcripts
(``Audit.run``, ``audit.facts._start_checks``), and the audit is the same as
with the checks done first: the same findings in the same order, the same
summary, the same state mark, on clean and damaged databases alike (an
error inside the checks makes the audit read the transcripts again, as it
reads them without the facts); a run stopped early waits for the thread and
still records what it read; no pool is forked while the thread runs."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from lecode_memctl.core import seen
from lecode_memctl.core.audit import Audit, facts as audit_facts, run as audit_run
from lecode_memctl.core.layout import store_at

from .conftest import tree_hash
from .test_audit import SLUG, build_clean

DAMAGE = ["clean", "dangling", "source_refs_root", "exclusions_root", "index_root",
          "facts_root", "revisions_root", "provenance_root", "meta_root", "overflow"]


def _overwrite_root(db_path: Path, name: str) -> None:
    """The root page of table or index ``name`` overwritten with bytes that
    are no b-tree page (the database stays openable: page 1 is intact)."""
    con = sqlite3.connect(db_path)
    (page_size,) = con.execute("PRAGMA page_size").fetchone()
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    con.close()
    assert root > 1
    with open(db_path, "r+b") as fh:
        fh.seek((root - 1) * page_size)
        fh.write(bytes([0x0D, 0xFF, 0xFF]) + b"\xa5" * (page_size - 3))


#: where :func:`damaged` keeps the stores it built, by (kind, corrupt_lines),
#: for this module's tests (set by :func:`_templates`)
_TEMPLATES: Path | None = None


@pytest.fixture(scope="module", autouse=True)
def _templates(tmp_path_factory):
    """Each damaged store built once for the module, copied for each test
    (about 40 ms to build, 3 ms to copy; no test changes a template).
    Those the tests take are built here, before any test patches the core."""
    global _TEMPLATES
    _TEMPLATES = tmp_path_factory.mktemp("damaged")
    for kind, lines in [*((k, 3) for k in DAMAGE), ("clean", 0), ("index_root", 0),
                        ("dangling", 50)]:
        _build_damaged(_TEMPLATES / f"{kind}-{lines}", kind, lines)
    yield
    _TEMPLATES = None


def damaged(tmp_path: Path, kind: str, corrupt_lines: int = 3) -> Path:
    """A clean store (two sessions, two facts, an exclusion) with ``kind`` of
    damage to its database and ``corrupt_lines`` corrupt transcript lines
    (a session finding each, found by --deep): a copy of the one built
    for the module (the same files, the same path under ``tmp_path``)."""
    if _TEMPLATES is None:
        return _build_damaged(tmp_path, kind, corrupt_lines)
    template = _TEMPLATES / f"{kind}-{corrupt_lines}"
    if not template.exists():
        _build_damaged(template, kind, corrupt_lines)
    shutil.copytree(template / "config", tmp_path / "config", symlinks=True)
    return tmp_path / "config" / "memory" / SLUG


def _build_damaged(tmp_path: Path, kind: str, corrupt_lines: int = 3) -> Path:
    path = build_clean(tmp_path / "config")
    assert path == tmp_path / "config" / "memory" / SLUG
    db_path = path / "facts.sqlite3"
    db = sqlite3.connect(db_path)
    db.execute("INSERT INTO exclusions (session_id, seq, generation) VALUES ('s1', 2, 0)")
    if kind == "dangling":
        (fid,) = db.execute("SELECT fact_id FROM facts ORDER BY fact_id LIMIT 1").fetchone()
        sid, seqs, digest = db.execute("SELECT session_id, seqs, digest FROM source_refs").fetchone()
        for rev in (7, 8):
            db.execute("INSERT INTO source_refs VALUES (?, ?, ?, ?, ?)", (fid, rev, sid, seqs, digest))
    if kind == "overflow":   # a text on overflow pages, one of their links broken
        (fid,) = db.execute("SELECT fact_id FROM revisions ORDER BY fact_id LIMIT 1").fetchone()
        db.execute("UPDATE revisions SET text = ? WHERE fact_id = ?", ("Q" * 20000, fid))
    db.commit()
    db.close()
    if kind == "overflow":
        # integrity_check reports it (a finding; the checks succeed), and
        # reading the facts fails later: the transcripts' findings come first
        (page_size,) = sqlite3.connect(db_path).execute("PRAGMA page_size").fetchone()
        data = bytearray(db_path.read_bytes())
        pages = [i for i in range(len(data) // page_size)
                 if data[i * page_size + 4:i * page_size + 104] == b"Q" * 100]
        data[pages[1] * page_size:pages[1] * page_size + 4] = (999999).to_bytes(4, "big")
        db_path.write_bytes(bytes(data))
    if kind.endswith("_root"):
        name = kind[:-len("_root")]
        _overwrite_root(db_path, "source_refs_session" if name == "index" else name)
    with open(path / "sessions" / "s1.jsonl", "ab") as fh:
        fh.write(b"{not json\n" * corrupt_lines)
    return path


def outcome(path: Path, state: Path, *, deferred: bool, monkeypatch, tmp: Path,
            take: int | None = None) -> dict:
    """What an audit of ``path`` gives: its findings in order, its summary
    (times left out), the mark it records, or the error it ends with."""
    with monkeypatch.context() as m:
        m.setattr(Audit, "may_fork", lambda self: not deferred)
        pending = []
        real = audit_facts.check_db_and_facts

        def spy(audit):
            for f in real(audit):
                if f is audit_facts.PENDING:
                    pending.append(True)
                yield f

        m.setattr(audit_run, "check_db_and_facts", spy)
        audit = Audit(store_at(path), parallel=False, deep=True, state=state, record_state=True,
                      ignore=frozenset({"session.seq_gap"}))
        found: list[tuple[str, ...]] = []
        gen = audit.run()
        try:
            for f in gen:   # one at a time: what a streaming reader gets before an error
                message = f.message.replace(os.fspath(tmp), "TMP")
                message = re.sub(r"stores/[0-9a-f]+\.json", "stores/MARK.json", message)
                message = re.sub(r"\(by [0-9 :-]+ UTC\)", "(by TIME)", message)  # the prior mark's
                found.append((f.code, f.severity, message, f.location()))
                if take is not None and len(found) == take:
                    gen.close()     # a reader that stops (memctl ... | head)
                    break
        except BaseException as exc:  # noqa: BLE001 - compared as data
            found.append(("raised", type(exc).__name__, str(exc), ""))
    summary = audit.summary.to_json()
    for k in ("started", "finished", "duration_seconds", "store"):
        summary.pop(k, None)
    mark = seen.load(state, path)
    return {"found": found, "summary": summary, "pending": bool(pending),
            "mark": None if mark is None else (mark.generation, mark.exclusions)}


@pytest.mark.heavy
@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("prior_mark", [False, True])
def test_the_same_audit_with_the_checks_beside_the_transcripts(tmp_path, monkeypatch, kind,
                                                               prior_mark):
    """Deferred (the checks in a thread) and in order (the checks first),
    on the same store: the same findings, summary and mark.  With a prior
    mark of more exclusions than the database holds, db.rolled_back is
    reported (or not) alike."""
    got = {}
    for deferred in (True, False):
        path = damaged(tmp_path / ("d" if deferred else "s"), kind)
        state = tmp_path / ("d" if deferred else "s") / "state"
        if prior_mark:
            seen.record(state, path, 0, 5)
        before = tree_hash(path)
        got[deferred] = outcome(path, state, deferred=deferred, monkeypatch=monkeypatch,
                                tmp=tmp_path / ("d" if deferred else "s"))
        assert tree_hash(path) == before
    assert got[False]["pending"] is False
    if kind == "clean":
        assert got[True]["pending"] is True     # the thread was used
    assert got[True]["found"] == [tuple(x) for x in got[False]["found"]]
    assert got[True]["summary"] == got[False]["summary"]
    assert got[True]["mark"] == got[False]["mark"]
    assert [t for t in threading.enumerate() if t.name.startswith("memctl-")] == []


@pytest.mark.parametrize("deferred", [True, False])
@pytest.mark.parametrize("kind", DAMAGE)
def test_a_small_database_is_checked_at_once_with_the_same_findings(tmp_path, monkeypatch, kind,
                                                                     deferred):
    """A database smaller than AT_ONCE_BYTES (the rule the suite's
    conftest turns off) is checked on the audit's own connection as it is
    reached, no thread started: the same findings, summary and mark as
    with the thread, beside the transcripts (``deferred``) or beside the
    other checks (a pool may fork: ``Audit.may_fork``)."""
    real = 256 << 10
    got = {}
    for at_once in (True, False):
        tmp = tmp_path / ("a" if at_once else "t")
        path = damaged(tmp, kind)
        assert (path / "facts.sqlite3").stat().st_size < real
        monkeypatch.setattr(audit_facts, "AT_ONCE_BYTES", real if at_once else 0)
        started: list[str] = []
        spawn = threading.Thread.start

        def start(self, spawn=spawn, started=started):   # noqa: ANN001,ANN202
            started.append(self.name)
            return spawn(self)

        with monkeypatch.context() as m:
            m.setattr(threading.Thread, "start", start)
            got[at_once] = outcome(path, tmp / "state", deferred=deferred,
                                   monkeypatch=monkeypatch, tmp=tmp)
        got[at_once]["threads"] = sorted({n for n in started
                                          if n in ("memctl-db-checks", "memctl-integrity")})
    assert got[True]["pending"] is False and got[True]["threads"] == []
    if kind == "clean":
        assert got[False]["pending"] is deferred
        assert got[False]["threads"] == ["memctl-db-checks" if deferred else "memctl-integrity"]
    assert got[True]["found"] == got[False]["found"]
    assert got[True]["summary"] == got[False]["summary"]
    assert got[True]["mark"] == got[False]["mark"]


@pytest.mark.parametrize("held", [0, 1, 2, 1000])
def test_database_findings_come_before_the_transcripts(tmp_path, monkeypatch, held):
    """Every db.* finding, then the transcripts', whether the transcripts'
    findings were held back (up to HELD) or the audit had to wait."""
    monkeypatch.setattr(audit_run, "HELD", held)
    path = damaged(tmp_path, "dangling")
    found = [f.code for f in Audit(store_at(path), parallel=False, deep=True).run()]
    assert found == ["db.foreign_key", "db.foreign_key"] + ["session.corrupt_line"] * 3


class Stop(Exception):
    pass


@pytest.mark.parametrize("when", ["first_job", "facts"])
def test_a_run_stopped_during_the_transcripts_waits_and_records(tmp_path, monkeypatch, when):
    """An error (or Ctrl-C) while the transcripts are read and the checks
    still run: the thread is waited for before its connection closes, no
    thread is left, and the state mark is recorded, as the audit records it
    before it reads the transcripts."""
    release = threading.Event()
    real_rest = audit_facts._db_checks_rest

    def slow(fs, db, **kw):
        release.wait(5)
        yield from real_rest(fs, db, **kw)

    def fail(*a, **k):
        threading.Timer(0.2, release.set).start()
        raise Stop

    monkeypatch.setattr(audit_facts, "_db_checks_rest", slow)
    if when == "first_job":
        monkeypatch.setattr(audit_run, "run_jobs", fail)
    else:
        monkeypatch.setattr(audit_run, "fact_findings", fail)
    path = damaged(tmp_path, "clean", corrupt_lines=0)
    state = tmp_path / "state"
    audit = Audit(store_at(path), parallel=False, deep=True, state=state, record_state=True)
    with pytest.raises(Stop):
        list(audit.run())
    assert [t for t in threading.enumerate() if t.name.startswith("memctl-")] == []
    assert audit._fs is None
    mark = seen.load(state, path)
    assert mark is not None and mark.exclusions == 1


def test_no_pool_is_forked_while_the_checks_run(tmp_path, monkeypatch):
    """The transcripts read by a pool of processes (forked): the checks'
    thread has ended before the fork, even when the pool was not foreseen
    when the checks started (a transcript grew in between: worth_a_pool says
    no, then yes)."""
    release = threading.Event()
    real_rest, real_jobs = audit_facts._db_checks_rest, audit_run.run_jobs
    seen_threads: list[list[str]] = []
    answers = iter([False, True])

    timer = threading.Timer(0.2, release.set)

    def slow(fs, db, **kw):
        release.wait(5)
        timer.join(5)       # (no thread of the test's left: the pool forks beside none)
        yield from real_rest(fs, db, **kw)

    def jobs(it, parallel):
        assert parallel
        seen_threads.append([t.name for t in threading.enumerate() if t.name.startswith("memctl-")])
        return real_jobs(it, parallel=False)

    monkeypatch.setattr(audit_facts, "_db_checks_rest", slow)
    monkeypatch.setattr(audit_run, "worth_a_pool", lambda *a: next(answers))
    monkeypatch.setattr(audit_run, "run_jobs", jobs)
    timer.start()
    found = [f.code for f in Audit(store_at(damaged(tmp_path, "dangling")), deep=True).run()]
    assert seen_threads == [[]]
    assert found == ["db.foreign_key", "db.foreign_key"] + ["session.corrupt_line"] * 3


def test_the_checks_come_first_when_a_pool_may_follow(tmp_path, monkeypatch):
    """When the transcripts may be read by a pool (``Audit.may_fork``), the
    checks are done before the transcripts (the pool would wait for the
    thread anyway); without a pool allowed, may_fork says no."""
    monkeypatch.setattr(audit_run, "worth_a_pool", lambda *a: True)
    path = damaged(tmp_path, "dangling")
    audit = Audit(store_at(path), deep=True)
    assert audit.may_fork()
    found = list(audit_facts.check_db_and_facts(audit))
    assert audit_facts.PENDING not in found
    assert [f.code for f in found] == ["db.foreign_key", "db.foreign_key"]
    audit._fs.close()
    assert not Audit(store_at(path), deep=True, parallel=False).may_fork()


def test_the_cli_exit_status_is_the_audits(tmp_path, monkeypatch):
    """`memctl validate` of a store whose source_refs page is damaged: the
    findings and exit status 1, not an error (the transcripts read again
    without the facts, as the audit reads them when the checks fail)."""
    from .conftest import run_cli

    path = damaged(tmp_path, "source_refs_root")
    r = run_cli("--store", os.fspath(path), "--no-state", "validate", "-q")
    assert r.exit_code == 1, r.output


@pytest.mark.parametrize("error", ["StoreCorrupt", "DatabaseError"])
def test_an_error_reading_the_facts_after_failed_checks_is_not_the_audits(tmp_path, monkeypatch,
                                                                          error):
    """The checks fail (a database error) and the facts, read while they
    ran, fail too: the audit is the one of checks that fail first (the
    facts never read), not an error."""
    from lecode_memctl.core.errors import StoreCorrupt
    from lecode_memctl.core.facts import FactStore

    def failing_rest(fs, db, **kw):
        yield ("db.foreign_key", "row 1 of x references a missing row of y", {"table": "x"})
        raise sqlite3.DatabaseError("database disk image is malformed")

    def failing_groups(self, *a, **k):
        if error == "StoreCorrupt":
            raise StoreCorrupt("facts database: database disk image is malformed")
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(audit_facts, "_db_checks_rest", failing_rest)
    monkeypatch.setattr(FactStore, "iter_fact_groups", failing_groups)
    got = {}
    for deferred in (True, False):
        path = damaged(tmp_path / ("d" if deferred else "s"), "clean")
        got[deferred] = outcome(path, tmp_path / ("d" if deferred else "s") / "state",
                                deferred=deferred, monkeypatch=monkeypatch,
                                tmp=tmp_path / ("d" if deferred else "s"))
    assert got[True]["pending"]
    assert [f[0] for f in got[True]["found"]] == ["db.foreign_key", "db.unreadable"] + \
        ["session.corrupt_line"] * 3
    assert got[True]["found"] == got[False]["found"]
    assert got[True]["summary"] == got[False]["summary"]
    assert got[True]["mark"] == got[False]["mark"] is None


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["clean", "dangling", "source_refs_root", "many"])
@pytest.mark.parametrize("take", [1, 2, 3])
def test_a_reader_that_stops_gets_what_it_got_before(tmp_path, monkeypatch, kind, take):
    """A reader that stops after ``take`` findings (memctl ... | head): the
    same findings, summary and state mark as with the checks first (the
    mark is recorded after the checks' last finding is given; a finding is
    counted as it is given, none of those held and not given)."""
    got = {}
    for deferred in (True, False):
        path = damaged(tmp_path / ("d" if deferred else "s"),
                       "dangling" if kind == "many" else kind,
                       corrupt_lines=50 if kind == "many" else 3)
        state = tmp_path / ("d" if deferred else "s") / "state"
        got[deferred] = outcome(path, state, deferred=deferred, monkeypatch=monkeypatch,
                                tmp=tmp_path / ("d" if deferred else "s"), take=take)
    assert got[True]["found"] == got[False]["found"]
    assert len(got[True]["found"]) == take
    assert got[True]["mark"] == got[False]["mark"]
    # the findings counted are those given (the work counters, sessions,
    # facts and bytes read, may have gone further: the transcripts were read
    # while the checks ran)
    for key in ("findings", "by_code", "ignored", "ok"):
        assert got[True]["summary"][key] == got[False]["summary"][key], key


@pytest.mark.parametrize("kind", ["dangling", "source_refs_root"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_an_interrupt_while_the_transcripts_are_read(tmp_path, monkeypatch, kind, exc):
    """An error while the transcripts are read: what a reader got before it
    is what it gets with the checks first (their findings), and the mark
    is the same.  Ctrl-C (or SIGTERM) there ends the run at once, without
    waiting for the checks (seconds at 1,000,000 facts): what the reader got
    is the start of that, and no mark is recorded (the checks' findings
    were not all given)."""
    def fail(*a, **k):
        raise exc("stop")

    monkeypatch.setattr(audit_run, "run_jobs", fail)
    got = {}
    for deferred in (True, False):
        path = damaged(tmp_path / ("d" if deferred else "s"), kind)
        state = tmp_path / ("d" if deferred else "s") / "state"
        got[deferred] = outcome(path, state, deferred=deferred, monkeypatch=monkeypatch,
                                tmp=tmp_path / ("d" if deferred else "s"))
    assert got[True]["found"][-1][:2] == got[False]["found"][-1][:2] == ("raised", exc.__name__)
    if exc is KeyboardInterrupt:
        given = got[True]["found"][:-1]
        assert given == got[False]["found"][:len(given)]
        # (none of the checks' findings given: their mark is not recorded)
        assert given == [] and got[True]["mark"] is None
        return
    assert got[True]["mark"] == got[False]["mark"]
    assert got[True]["found"] == got[False]["found"]
    assert got[True]["summary"] == got[False]["summary"]


@pytest.mark.parametrize("gap", [False, True])
@pytest.mark.parametrize("kind", ["clean", "index_root"])
def test_the_grouped_revision_check_runs_on_a_sound_database_only_for_a_gap(
        tmp_path, monkeypatch, kind, gap):
    """The checks' thread takes integrity_check's word: on a sound database
    the revision check groups the facts (``_GAPS``) only where one scan of
    the table finds a fact to report; on a damaged one (an index's root page
    overwritten) it groups them as before.  ``_GAPS`` made a query that
    fails shows where it ran (the audit's database error)."""
    path = damaged(tmp_path, kind, corrupt_lines=0)
    if gap:
        db = sqlite3.connect(path / "facts.sqlite3")
        db.execute("UPDATE facts SET revision = revision + 1 WHERE rowid = "
                   "(SELECT min(rowid) FROM facts)")
        db.commit()
        db.close()
    monkeypatch.setattr(audit_facts, "_GAPS", "SELECT * FROM memctl_no_such_table")
    found = [(f.code, f.message) for f in Audit(store_at(path), parallel=False).run()]
    ran = any("memctl_no_such_table" in m for _c, m in found)
    assert ran == (gap or kind != "clean"), found
