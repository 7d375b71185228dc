"""Fixes after the review of the core library as the agent imports it
(2026-12-07, "r"): a writer opened before the database existed, a writer
opened on an empty database file, a forked child's copy of a session lock,
running out of file descriptors, and a path no file system name can hold."""

from __future__ import annotations

import pytest

from .conftest import run_cli


def _store(tmp_path):
    d = tmp_path / "proj-0123456789ab"
    d.mkdir()
    return d


# ---------------------------------------------------------------- finding 2

def test_a_writer_on_an_empty_database_file_leaves_it_empty(tmp_path):
    """A writer opened on a 0-byte facts.sqlite3 (what a writer killed
    between creating the file and its schema leaves) switched it to WAL
    mode at open, writing a 4096-byte header with no schema that validate
    then called db.schema_unknown: the file stays 0 bytes now until a
    write commits, whether the writer is closed unused or its write is
    refused, and a later write makes the schema."""
    from lecode_memctl.core import FactStore, NotFound, open_project

    d = _store(tmp_path)
    with open_project(store=d) as p, p.sessions.create("s1") as w:
        s = w.append_message("user", "we use tabs")
    db = d / "facts.sqlite3"
    db.write_bytes(b"")
    FactStore(db).close()
    assert db.stat().st_size == 0
    with open_project(store=d) as p:
        p.facts.generation()
        with pytest.raises(NotFound):
            p.forget("0000000000000000")
    assert db.stat().st_size == 0
    assert run_cli("--store", str(d), "--no-state", "validate").exit_code == 0
    with open_project(store=d) as p:
        ref = p.sessions.source_snapshot("s1", s, s).ref
        fid = p.remember("we use tabs", ref).fact.fact_id
    with open_project(store=d) as p:
        assert [f.fact_id for f in p.facts.list_facts()] == [fid]
        mode = p.facts._call(lambda: p.facts._conn.execute("PRAGMA journal_mode").fetchone()[0])
        assert str(mode).lower() == "wal"
    assert run_cli("--store", str(d), "--no-state", "validate").exit_code == 0

