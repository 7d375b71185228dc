"""A SessionStore built with nothing but the store reads the store's own facts
database for exclusions (issue 11 point 3): forgotten evidence is never valid
through it, and reading creates nothing in the store."""

from __future__ import annotations

import hashlib
import os

import pytest

from lecode_memctl.core.errors import StoreCorrupt, UsageError
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import NO_EXCLUSIONS, SessionStore
from lecode_memctl.core.sourceref import MemoryExclusions

SLUG = "proj-0123456789ab"


@pytest.fixture
def store(tmp_path):
    return store_at(tmp_path / "memory" / SLUG)


def _session(store, sid="s1"):
    with SessionStore(store, exclusions=NO_EXCLUSIONS).create(sid, project=store.slug) as w:
        w.append_message("user", "We use tabs for indentation.")
        w.append_message("assistant", "Noted.", epoch=0)
        w.append_message("user", "The tests run with pytest -q.")
    return store


def _tree(path):
    out = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_forgotten_evidence_is_not_valid_through_a_store_only_session_store(store):
    _session(store)
    with FactStore(store.facts_db) as fs:
        writer_sessions = SessionStore(store, exclusions=fs)
        ref = writer_sessions.source_snapshot("s1", 1, 1).ref
        fact = fs.remember("We use tabs for indentation.", ref, sessions=writer_sessions).fact
        other = writer_sessions.source_snapshot("s1", 3, 3).ref
        assert SessionStore(store).validate_source(ref).status == "valid"
        fs.forget(fact.fact_id)

    ss = SessionStore(store)                       # no exclusions= at all
    st = ss.validate_source(ref)
    assert (st.status, st.reason) == ("hidden", "excluded")
    assert ss.exclusion_reader("s1").generation() == 1
    assert ss.exclusion_reader("s1").excluded_seqs("s1") == frozenset({1})
    # The generated message at epoch 0 is hidden too (generation 1 now).
    snap = ss.source_snapshot("s1", 1, 3)
    assert [seq for seq, _ in snap.messages()] == [3]
    assert ss.validate_source(other).status == "valid"


def test_a_forget_after_the_session_store_was_built_is_seen(store):
    """The reader opens the database per read: a forget by another writer after
    the SessionStore was built is seen by its next read."""
    _session(store)
    ss = SessionStore(store)
    ref = ss.source_snapshot("s1", 1, 1).ref
    with FactStore(store.facts_db) as fs:
        fact = fs.remember("tabs", ref, sessions=SessionStore(store, exclusions=fs)).fact
        assert ss.validate_source(ref).status == "valid"
        fs.forget(fact.fact_id)
        assert ss.validate_source(ref).status == "hidden"   # writer still open (-wal)
    assert ss.validate_source(ref).status == "hidden"       # writer closed


def test_reading_through_the_default_reader_creates_nothing(store):
    _session(store)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        fs.remember("tabs", ss.source_snapshot("s1", 1, 1).ref, sessions=ss)
    before = _tree(store.path)
    ss = SessionStore(store)
    ss.source_snapshot("s1", 1, 3)
    ss.validate_many([ss.source_snapshot("s1", 1, 1).ref])
    ss.list_sessions()
    ss.close()
    assert _tree(store.path) == before


def test_no_facts_database_is_not_created_by_reads(store):
    _session(store)
    ss = SessionStore(store)
    assert ss.source_snapshot("s1", 1, 3).ref.seqs == (1, 2, 3)
    assert ss.exclusion_reader("s1").generation() == 0
    assert not os.path.lexists(store.facts_db)


def test_explicit_no_exclusions_ignores_the_database(store):
    _session(store)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        ref = ss.source_snapshot("s1", 1, 1).ref
        fs.forget(fs.remember("tabs", ref, sessions=ss).fact.fact_id)
    assert SessionStore(store, exclusions=NO_EXCLUSIONS).validate_source(ref).status == "valid"


def test_a_given_reader_is_used_as_is(store):
    _session(store)
    ex = MemoryExclusions()
    ss = SessionStore(store, exclusions=ex)
    ref = ss.source_snapshot("s1", 1, 1).ref
    ex.exclude("s1", [1])
    assert ss.validate_source(ref).status == "hidden"
    assert ss.exclusion_reader("s1") is ex


def test_an_unreadable_facts_database_fails_closed(store):
    """Evidence cannot be called valid when the exclusions cannot be read."""
    _session(store)
    ss = SessionStore(store, exclusions=NO_EXCLUSIONS)
    ref = ss.source_snapshot("s1", 1, 1).ref
    store.facts_db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreCorrupt):
        SessionStore(store).validate_source(ref)


def test_close_is_idempotent_and_ends_use(store):
    _session(store)
    ss = SessionStore(store)
    with ss:
        assert ss.records("s1", 0, 1)[0]["type"] == "session"
    ss.close()
    with pytest.raises(UsageError, match="closed"):
        ss.records("s1", 0, 1)
    with pytest.raises(UsageError, match="closed"):
        ss.create("s2", project=store.slug)
