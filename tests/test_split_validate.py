"""``validate`` checks the facts of a large store in two processes
(``core.split``, ``audit.facts.fact_findings``): a forked child checks the
second half of the fact ids.  Its findings, their order, the counts and the
exit status are those of one process, on damaged stores too; when the child
fails, the parent checks its part; nothing is left behind."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import split as split_mod
from lecode_memctl.core.audit import facts as audit_facts
from lecode_memctl.core.facts import FactStore

from .builders import copy_demo, store_sql
from .conftest import run_cli, tree_hash
from .test_split_listing import DAMAGE, _many, counting

_TIMES = re.compile(rb'"(generated|started|finished|duration_seconds)":("[^"]*"|[0-9.e-]+)')


@pytest.fixture
def store(demo_template, tmp_path) -> Path:
    s = copy_demo(demo_template, tmp_path / "demo")
    _many(s)
    return s


def _validate(store: Path, *argv: str) -> list[tuple[int, bytes]]:
    out = []
    for fmt in (("--json",), ("--format", "jsonl"), ()):
        r = run_cli("--store", str(store), "--no-state", "validate", "--no-progress", *fmt, *argv)
        text = _TIMES.sub(rb'"\1":0', r.stdout_bytes)
        text = re.sub(rb"in [0-9.]+ ?m?s\b", b"in T", text)
        out.append((r.exit_code, text + r.stderr.encode()))
    return out


def _payload_unwritable(monkeypatch) -> None:
    """Every payload handed to an early child fails to be written (ENOSPC)."""
    import errno
    import pickle

    def full(obj, f, *args, **kwargs):   # noqa: ANN001
        raise OSError(errno.ENOSPC, "No space left on device")

    # (split imports pickle where it writes the payload: the module's own dump)
    monkeypatch.setattr(pickle, "dump", full)


@contextlib.contextmanager
def _within(seconds: int, what: str) -> Iterator[None]:
    """TimeoutError(``what``) should the block take over ``seconds``: a hang fails."""
    import signal

    def hung(*_args):   # noqa: ANN002
        raise TimeoutError(what)

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.heavy
@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("argv", [(), ("--ignore", "fact.stale"), ("--deep",), ("--strict",)])
def test_validate_in_two_processes_says_what_one_process_says(store, monkeypatch, damaged, argv):
    if damaged:
        store_sql(store, *DAMAGE)
    before = tree_hash(store)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _validate(store, *argv)
    pids = counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    two = _validate(store, *argv)
    assert two == one
    assert len(pids) == 3, pids
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    summary = orjson.loads(one[0][1].split(b"\n", 1)[0])["projects"][0]
    assert summary["facts_total"] > 30, summary
    if damaged:
        assert one[0][0] != 0 and summary["facts"]["hidden"] > 0, summary
    assert tree_hash(store) == before


def test_a_child_that_fails_leaves_its_facts_to_the_parent(store, monkeypatch):
    store_sql(store, *DAMAGE)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _validate(store)
    pids = counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    parent = os.getpid()
    part = audit_facts._fact_part

    def failing(*args, **kwargs):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return part(*args, **kwargs)

    monkeypatch.setattr(audit_facts, "_fact_part", failing)
    assert _validate(store) == one
    assert len(pids) == 3


def test_the_help_names_the_size_that_is_split():
    r = run_cli("validate", "--help")
    assert r.exit_code == 0
    assert f"{split_mod.SPLIT_LEAST:,} or more" in " ".join(r.stdout.split())


# ---------------------------------------------------------------------------
# Found by a second review (2026-12-05), each failing before its fix.

def test_a_damaged_index_is_reported_as_without_the_split(demo_template, tmp_path):
    """split_bound's count(*) reads the facts' key index, which one process
    never reads: a damaged index made validate and facts exit 5 (an error
    outside the audit's handling) where one process reports it."""
    import sqlite3

    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.layout import store_at

    from .test_audit_deferred import _overwrite_root

    s = copy_demo(demo_template, tmp_path / "demo")
    _overwrite_root(s / "facts.sqlite3", "sqlite_autoindex_facts_1")
    one = [(f.code, f.message) for f in Audit(store_at(s), parallel=False).run()]
    # integrity_check stops at the page, quick_check names it (2026-12-05:
    # before, db.unreadable alone)
    assert one[0] == ("db.integrity", "integrity_check: stopped: database disk image is "
                      "malformed; quick_check, which does not compare the indexes with their "
                      "tables, found:")
    assert "btreeInitPage() returns error code 11" in one[1][1]
    assert one[-1] == ("db.unreadable",
                       "database error while auditing: database disk image is malformed")
    assert [(f.code, f.message) for f in Audit(store_at(s), parallel=True).run()] == one
    r = run_cli("--store", str(s), "--no-state", "validate", "--no-progress")
    assert r.exit_code == 1, r.stderr
    r = run_cli("--store", str(s), "--no-state", "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert sqlite3.sqlite_version    # (the damage is SQLite's to find)


def _overflow_any(s: Path, table: str, col: str, which: int) -> None:
    """One value of ``table.col`` on overflow pages, one link broken."""
    import sqlite3

    db = sqlite3.connect(s / "facts.sqlite3")
    ids = [r[0] for r in db.execute(f"SELECT DISTINCT fact_id FROM {table} ORDER BY fact_id")]
    db.execute(f"UPDATE {table} SET {col} = ? WHERE fact_id = ?", ("Q" * 20000, ids[which]))
    db.commit()
    (ps,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    p = s / "facts.sqlite3"
    data = bytearray(p.read_bytes())
    pages = [i for i in range(len(data) // ps) if data[i * ps + 4:i * ps + 104] == b"Q" * 100]
    data[pages[1] * ps:pages[1] * ps + 4] = (999999).to_bytes(4, "big")
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("cmd", [("validate", "--no-progress", "--format", "jsonl"),
                                 ("facts", "--all", "--format", "jsonl")])
def test_a_page_that_fails_late_stops_both_at_the_same_row(store, monkeypatch, cmd):
    """A read that fails fetched 2,000 rows at a time and dropped those of
    the batch before the damaged row: batches counted from the split's
    bound dropped other rows than one process did.  Now a failed batch
    gives its rows before the damage, then the error: the same rows, the
    most that can be read."""
    store_sql(store, "UPDATE source_refs SET digest = printf('%064x', rowid)")   # every fact stale
    _overflow_any(store, "revisions", "text", -1)                           # the last fact's text
    out = {}
    for least in (10 ** 9, 1):
        monkeypatch.setattr(split_mod, "SPLIT_LEAST", least)
        r = run_cli("--store", str(store), "--no-state", *cmd)
        out[least] = (r.exit_code, r.stdout)
    assert out[1] == out[10 ** 9]
    assert out[1][0] == 5
    # every fact before the damaged one is there
    assert out[1][1].count('"fact_id"') >= 30, out[1][1]


def test_a_reader_that_stops_has_the_counts_of_one_process(store, monkeypatch):
    """The child's fact counts came after its last finding: a library reader
    that stopped during its findings saw fewer facts counted."""
    from lecode_memctl.core.audit import Audit, run as audit_run
    from lecode_memctl.core.layout import store_at

    store_sql(store, "UPDATE source_refs SET digest = printf('%064x', rowid)")
    monkeypatch.setattr(audit_run, "HELD", 2)
    for take in (20, 40, 60):
        got = {}
        for least in (10 ** 9, 1):
            monkeypatch.setattr(split_mod, "SPLIT_LEAST", least)
            a = Audit(store_at(store), parallel=True, now=1.9e9)
            gen = a.run()
            found = [f.fact_id for _, f in zip(range(take), gen, strict=False)]
            gen.close()
            got[least] = (found, a.summary.facts_total, dict(a.summary.facts))
        assert got[1] == got[10 ** 9], take


def test_a_fetch_loop_gives_the_rows_before_the_damage_and_fetchall_none(store):
    """The rows before a damaged page come out of a fetchmany loop, then the
    error; fetchall, read once by its callers, raises as SQLite does (some
    of the rows would pass for all of them)."""
    import sqlite3

    from lecode_memctl.core.facts import FactStore

    _overflow_any(store, "revisions", "text", -1)
    with FactStore.open_readonly(store / "facts.sqlite3") as fs:
        db = fs.read_connection()
        total = db.execute("SELECT count(*) FROM revisions").fetchone()[0]
        cur = db.execute("SELECT fact_id, text FROM revisions ORDER BY rowid")
        got: list = []
        with pytest.raises(sqlite3.DatabaseError):
            while True:
                rows = cur.fetchmany(2000)
                if not rows:
                    break
                got += rows
        assert 0 < len(got) < total
        with pytest.raises(sqlite3.DatabaseError):
            db.execute("SELECT fact_id, text FROM revisions ORDER BY rowid").fetchall()
        cur = db.execute("SELECT fact_id, text FROM revisions ORDER BY rowid")
        assert cur.fetchmany(len(got)) == got      # the same rows, a new statement


def test_a_payload_that_cannot_be_written_leaves_the_facts_to_the_parent(store, monkeypatch):
    """The statuses handed to the child go to a file first: when it could
    not be written (a full $TMPDIR), the child waited for them and the
    parent for the child, for ever."""
    store_sql(store, *DAMAGE)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _validate(store)
    pids = counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)

    _payload_unwritable(monkeypatch)
    with _within(60, "validate hung"):
        assert _validate(store) == one
    assert len(pids) == 3


def test_two_children_waiting_do_not_wait_for_each_other(demo_template, tmp_path, monkeypatch):
    """Two audits at once in one thread (a library caller): the second
    child inherited the first's pipe, so when the first child's work could
    not be written, it never saw the pipe's end, and its parent waited for
    it for ever (the second child waited for its own work meanwhile)."""
    import pickle

    stores = []
    for name in ("a", "b"):
        s = copy_demo(demo_template, tmp_path / name)
        _many(s)
        stores.append(FactStore.open_readonly(s / "facts.sqlite3"))
    a, b = stores

    def work(payload, part):   # noqa: ANN001
        yield from (("row", payload, part[1]),)

    ca = split_mod.EarlyChild(a, a.split_bound(0.5, 1), work, pickle.dumps)
    cb = split_mod.EarlyChild(b, b.split_bound(0.5, 1), work, pickle.dumps)
    assert ca.pid is not None and cb.pid is not None

    _payload_unwritable(monkeypatch)
    try:
        with _within(20, "the first audit waited for its child for ever"):
            got = list(ca.items(lambda part: iter([("mine", part[1])]), "work",
                                split_mod.pickles_written))
    finally:
        cb.cancel()
        a.close()
        b.close()
    # the child had no work: its part made here
    assert got == [("mine", False), ("row", "work", True)]


@pytest.mark.parametrize("table,col,which", [("revisions", "text", 16),
                                             ("source_refs", "digest", -1)])
@pytest.mark.parametrize("argv", [(), ("--query", "e"), ("--since", "2000-01-01")])
def test_a_listing_stopped_by_damage_gives_one_process_rows_then_its_error(
        store, monkeypatch, table, col, which, argv):
    """Where the damage stops a listing (exit 5), each process stops at its
    own first damaged row: the split may print more rows before the error
    (the first half, whose references one process reads with the second's
    before any row; or a fact one process holds back as it meets the
    damage), never other ones, and the same error.  A filtered listing
    too (split since 2026-12-06: a review found the rows it adds)."""
    _overflow_any(store, table, col, which)
    out = {}
    for least in (10 ** 9, 1):
        monkeypatch.setattr(split_mod, "SPLIT_LEAST", least)
        r = run_cli("--store", str(store), "--no-state", "facts", "--all", "--format", "jsonl",
                    *argv)
        lines = r.stdout.splitlines()
        out[least] = (r.exit_code, r.stderr, [x for x in lines if '"type":"fact"' in x],
                      [x for x in lines if '"type":"fact"' not in x])
    (c1, e1, rows1, rest1), (c2, e2, rows2, rest2) = out[10 ** 9], out[1]
    assert (c1, e1, rest1) == (c2, e2, rest2) and c1 == 5
    assert rows2[:len(rows1)] == rows1 and len(rows2) > len(rows1)


@pytest.mark.parametrize("argv", [(), ("--query", "e")])
def test_a_page_before_the_damage_is_given(store, monkeypatch, argv):
    """docs/FORMAT.md: a page whose rows all come before a damaged page is
    given, exit 0, filtered (split since 2026-12-06) or not."""
    _overflow_any(store, "source_refs", "digest", -1)       # the last fact's
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    r = run_cli("--store", str(store), "--no-state", "facts", "--limit", "3", "--format",
                "jsonl", *argv)
    assert r.exit_code == 0, r.stderr
    assert len([x for x in r.stdout.splitlines() if '"type":"fact"' in x]) == 3
