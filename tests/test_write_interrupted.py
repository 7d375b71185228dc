"""A Ctrl-C that lands in a write's transaction, between BEGIN IMMEDIATE
and the block that writes, or just before COMMIT, rolls the transaction
back.  It was left open: the agent's writer held SQLite's write lock for
the rest of its life (every other writer, memctl forget included,
"database is locked") and each later write of its own failed with
"cannot start a transaction within a transaction"."""

from __future__ import annotations

import sqlite3

import pytest

from lecode_memctl.core import facts as facts_mod, open_project


def _session(p, n=3):
    with p.sessions.create("s1") as w:
        return [w.append_message("user", f"fact number {i}") for i in range(n)]


def _other_writer_can_write(db_path) -> None:
    c = sqlite3.connect(db_path, timeout=0)
    try:
        c.execute("BEGIN IMMEDIATE")
        c.rollback()
    finally:
        c.close()


@pytest.mark.parametrize("where", ["begin", "commit", "exit"])
def test_an_interrupted_write_leaves_no_transaction(tmp_path, monkeypatch, where):
    """(exit: before any of __exit__'s code runs; the write method's caller
    frame, FactStore's own, rolls back.)"""
    p = open_project(store=tmp_path / "store")
    seqs = _session(p)
    p.remember("fact number 0", p.sessions.source_snapshot("s1", seqs[0], seqs[0]).ref)
    if where == "begin":
        real = facts_mod._begin

        def begin(db, *args):
            real(db, *args)
            raise KeyboardInterrupt          # as a Ctrl-C just after BEGIN IMMEDIATE

        monkeypatch.setattr(facts_mod, "_begin", begin)
    elif where == "exit":
        def exit_(self, *exc):
            raise KeyboardInterrupt          # as a Ctrl-C as __exit__ is entered

        monkeypatch.setattr(facts_mod.FactStore._Txn, "__exit__", exit_)
    else:
        real_execute = facts_mod._Connection.execute

        def execute(self, sql, parameters=(), /):
            if sql == "COMMIT":
                raise KeyboardInterrupt      # as a Ctrl-C just before COMMIT
            return real_execute(self, sql, parameters)

        monkeypatch.setattr(facts_mod._Connection, "execute", execute)
    ref = p.sessions.source_snapshot("s1", seqs[1], seqs[1]).ref
    with pytest.raises(KeyboardInterrupt):
        p.remember("fact number 1", ref)
    monkeypatch.undo()
    assert not p.facts._conn.in_transaction
    _other_writer_can_write(p.store.facts_db)
    # nothing of the interrupted write was kept, and the next write works
    assert p.list_facts()["total"] == 1
    p.remember("fact number 2", p.sessions.source_snapshot("s1", seqs[2], seqs[2]).ref)
    assert p.list_facts()["total"] == 2
    p.close()


@pytest.mark.parametrize("verb", ["correct", "forget"])
def test_an_interrupt_as_a_write_ends_leaves_no_transaction(tmp_path, monkeypatch, verb):
    p = open_project(store=tmp_path / "store")
    seqs = _session(p)
    ref = p.sessions.source_snapshot("s1", seqs[0], seqs[0]).ref
    fact = p.remember("fact number 0", ref).fact

    def exit_(self, *exc):
        raise KeyboardInterrupt

    monkeypatch.setattr(facts_mod.FactStore._Txn, "__exit__", exit_)
    with pytest.raises(KeyboardInterrupt):
        if verb == "correct":
            p.correct(fact.fact_id, "fact number 0!", expected_revision=1,
                      ref=p.sessions.source_snapshot("s1", seqs[1], seqs[1]).ref)
        else:
            p.forget(fact.fact_id)
    monkeypatch.undo()
    assert not p.facts._conn.in_transaction
    _other_writer_can_write(p.store.facts_db)
    assert p.recall(fact.fact_id)["revision"] == 1
    p.close()


@pytest.mark.heavy
@pytest.mark.parametrize("other", ["add", "forget_missing"])
def test_a_write_of_another_thread_does_not_roll_back_one_in_its_transaction(tmp_path, other):
    """The leftover rollbacks are of this thread's own transaction: a write
    that another thread starts (or fails) on the same store while one is
    inside its BEGIN..COMMIT neither rolls that one back (its remaining
    statements then committed one by one, and its COMMIT failed, 'cannot
    commit - no transaction is active', with its forget in effect) nor
    runs inside it; it waits for that one to end (tests/test_threads.py),
    and is made (or fails) after it."""
    import threading

    from lecode_memctl.core.errors import NotFound

    store = facts_mod.FactStore(tmp_path / "facts.sqlite3")
    fact_id = store.add("fact to forget").fact.fact_id
    real = facts_mod.meta_generation
    paused, go = threading.Event(), threading.Event()

    def meta_generation(db):
        if threading.current_thread().name == "forgetter":
            paused.set()
            assert go.wait(10)
        return real(db)

    result: dict[str, object] = {}

    def forgetter():
        try:
            result["forget"] = store.forget(fact_id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            result["forget"] = exc

    facts_mod.meta_generation = meta_generation
    try:
        t = threading.Thread(target=forgetter, name="forgetter")
        t.start()
        assert paused.wait(10)

        def second():
            try:
                if other == "add":
                    result["second"] = store.add("fact from another thread").created
                else:
                    result["second"] = store.forget("0123456789abcdef")
            except BaseException as exc:  # noqa: BLE001 - reported below
                result["second"] = exc

        t2 = threading.Thread(target=second, name="second")
        t2.start()
        t2.join(0.3)
        assert t2.is_alive()        # waiting for the forget's transaction
        go.set()
        t.join(10)
        t2.join(10)
    finally:
        facts_mod.meta_generation = real
        go.set()
    assert result["forget"] is True
    if other == "add":
        assert result["second"] is True
    else:
        assert isinstance(result["second"], NotFound)
    assert not store._conn.in_transaction
    store.close()
    db = sqlite3.connect(tmp_path / "facts.sqlite3")
    try:
        assert len(db.execute("SELECT fact_id FROM facts").fetchall()) == (other == "add")
        assert db.execute("SELECT fact_id FROM forgotten").fetchall() == [(fact_id,)]
    finally:
        db.close()


def test_a_leftover_migrating_transaction_rolled_back_at_the_next_write_migrates_again(
        tmp_path, monkeypatch):
    """A first write that migrates a legacy database, left in its
    transaction by a Ctrl-C at _Txn.__exit__'s entry whose rollback (the
    write method's) a second Ctrl-C cut short: the next write rolls that
    transaction back, migration included, and migrates again.  It rolled
    it back as a bare ROLLBACK: the store still took the schema for
    migrated, and every later write failed ('no such table: forgotten')."""
    from .test_facts import make_legacy

    db_path = tmp_path / "facts.sqlite3"
    make_legacy(db_path)
    fs = facts_mod.FactStore(db_path)

    def interrupted(self, *args):
        raise KeyboardInterrupt             # as a Ctrl-C as the call is entered

    monkeypatch.setattr(facts_mod.FactStore._Txn, "__exit__", interrupted)
    monkeypatch.setattr(facts_mod.FactStore._Txn, "_rolled_back", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fs.add("x")
    monkeypatch.undo()
    assert fs._conn.in_transaction          # (the leftover)
    fs.add("y")
    assert not fs._conn.in_transaction
    assert fs.schema_version == facts_mod.SCHEMA_VERSION and not fs.needs_migration
    assert fs.get("00000000000000aa").text == "tabs, width 4"
    fs.close()
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == facts_mod.SCHEMA_VERSION
        assert db.execute("SELECT count(*) FROM facts").fetchone()[0] == 2
    finally:
        db.close()
