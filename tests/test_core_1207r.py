"""Fixes after the review of the core library as the agent imports it
(2026-12-07, "r"): a writer opened before the database existed, a writer
opened on an empty database file, a forked child's copy of a session lock,
running out of file descriptors, and a path no file system name can hold."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

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
    # (the mode read by a connection of its own: a writer's open would switch
    # a current-schema file to WAL itself, whatever the first write left)
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
    finally:
        raw.close()
    with open_project(store=d) as p:
        assert [f.fact_id for f in p.facts.list_facts()] == [fid]
    assert run_cli("--store", str(d), "--no-state", "validate").exit_code == 0


# ---------------------------------------------------------------- finding 1

_OTHER = textwrap.dedent('''
    import sys
    from lecode_memctl.core import open_project
    with open_project(store=sys.argv[1]) as p:
        with p.sessions.writer("s1") as w:
            s = w.append_message("user", "we use tabs")
        p.remember("we use tabs", p.sessions.source_snapshot("s1", s, s).ref)
        r = p.remember("the token", p.sessions.source_snapshot("s1", 1, 1).ref).fact
        p.forget(r.fact_id)
        print(r.fact_id)
''')


def test_a_writer_opened_before_the_database_reads_what_another_process_created(tmp_path):
    """A FactStore writer made before facts.sqlite3 existed (the one a
    caller kept as ``facts = project.facts``, or built by hand) never
    looked at the file again: it said generation 0, no exclusions and no
    facts however much another process wrote, and a SessionStore given it
    as its exclusions read forgotten evidence back.  Each read of such a
    writer now looks whether the database exists and reads it."""
    from lecode_memctl.core import FactStore, SessionStore, facts_page, open_project
    from lecode_memctl.core.sessions import SpanHidden

    d = _store(tmp_path)
    with open_project(store=d) as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", "my token is hunter2")
        facts = p.facts
        by_hand = FactStore(p.store.facts_db)
        try:
            assert facts.generation() == 0 and not (d / "facts.sqlite3").exists()
            subprocess.run([sys.executable, "-c", _OTHER, str(d)], check=True,
                           capture_output=True)
            assert p.generation() == 1
            for fs in (facts, by_hand):
                assert fs.generation() == 1
                assert fs.excluded_seqs("s1") == frozenset({1})
                ss = SessionStore(p.store, exclusions=fs)
                with pytest.raises(SpanHidden, match="excluded"):
                    ss.source_snapshot("s1", 1, 1).messages()
                assert facts_page(fs, p.sessions)["total"] == 1
        finally:
            by_hand.close()


# ---------------------------------------------------------------- finding 3

_FORKED = textwrap.dedent('''
    import os, sys, time
    from lecode_memctl.core import MemctlError, open_project
    with open_project(store=sys.argv[1]) as p:
        w = p.sessions.create("s1")
        r, wr = os.pipe()
        pid = os.fork()             # a worker forked without exec, holding nothing of its own
        if pid == 0:
            os.close(r)
            os.write(wr, b"x")
            time.sleep(30)
            os._exit(0)
        os.close(wr)
        os.read(r, 1)
        w.close()
        try:
            p.sessions.writer("s1").close()
            print("reopened")
        except MemctlError as e:
            print(type(e).__name__, e.exit_code)
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
''')


def test_a_forked_child_lets_go_of_the_session_lock(tmp_path):
    """A child forked without exec while a session writer was open kept
    its copy of the writer's flock: the parent, having closed its writer,
    could not open its own session again until the child exited
    (StoreBusy).  The child lets go of its copy at once now, as a child
    forked inside a Markdown writer's turn does."""
    d = _store(tmp_path)
    out = subprocess.run([sys.executable, "-c", _FORKED, str(d)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["reopened"]


def test_the_forked_child_of_a_session_writer_cannot_append(tmp_path):
    """The child's writer let go of the lock: an append of its own is
    refused (UsageError: closed), never made without the lock."""
    import os

    from lecode_memctl.core import MemctlError, open_project

    d = _store(tmp_path)
    with open_project(store=d) as p, p.sessions.create("s1") as w:
        w.append_message("user", "one")
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                w.append_message("user", "from the child")
            except MemctlError:
                code = 0
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert w.append_message("user", "two") == 2


# ---------------------------------------------------------------- finding 4

_NO_FDS = textwrap.dedent('''
    import os, sys
    from lecode_memctl.core import FactStore, MemctlError, load_memory_config, open_project
    from lecode_memctl.core.layout import session_ids
    store, config_dir = sys.argv[1], sys.argv[2]
    with open_project(store=store, config_dir=config_dir) as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", "hi")
        p.write_markdown("memory", "# notes\\n")
        p.remember("hi", p.sessions.source_snapshot("s1", 1, 1).ref)
        calls = {
            "read_markdown": lambda: p.read_markdown("memory"),
            "memory_section": lambda: p.memory_section(),
            "read_range": lambda: p.read_range("s1", 1, 1),
            "list_sessions": lambda: p.sessions.list_sessions(),
            "session_ids": lambda: session_ids(p.sessions.dir),
            "load_memory_config": lambda: load_memory_config(config_dir),
            "open_readonly": lambda: FactStore.open_readonly(p.store.facts_db).close(),
        }
        for call in calls.values():     # (the lazy imports made)
            call()
        for name, call in calls.items():
            hog = []
            while True:
                try:
                    hog.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    break
            try:
                call()
                got = "ok"
            except MemctlError as e:
                got = f"{e.exit_code} {type(e).__name__}: {e}"
            finally:
                for fd in hog:
                    os.close(fd)
            print(name, got)
''')


def test_running_out_of_file_descriptors_is_exit_7_not_a_corrupt_store(tmp_path):
    """A process with no file descriptor left (EMFILE) was told the store
    was unreadable or corrupt (exit 5) by the Markdown reads, the session
    reads, the session listing, the config read and a read-only open of
    the facts database; each is LocalResourceError (exit 7, "too many open
    files") now, as the facts commands already said."""
    d = _store(tmp_path)
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text("[memory]\nenabled = true\n")
    out = subprocess.run([sys.executable, "-c", _NO_FDS, str(d), str(cfg)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 7, out.stdout
    for line in lines:
        name, _, got = line.partition(" ")
        assert got.startswith("7 LocalResourceError") or got == "ok", line
        assert "too many open files" in got or got == "ok", line
    assert [line for line in lines if line.endswith(" ok")] != lines


# ---------------------------------------------------------------- finding 5

@pytest.mark.parametrize("call", ["open_project_store", "open_project_config_dir",
                                  "resolve_project", "load_memory_config",
                                  "migrate_legacy", "FactStore", "resolve_config_dir"])
def test_a_path_with_a_lone_surrogate_is_a_usage_error(tmp_path, call):
    """A str path holding a lone surrogate (no file system name can be
    encoded from it) raised a raw UnicodeEncodeError; it is a UsageError
    at the call now, as bytes or a NUL byte are."""
    from lecode_memctl.core import (
        FactStore,
        UsageError,
        load_memory_config,
        migrate_legacy,
        open_project,
        resolve_config_dir,
        resolve_project,
    )

    bad = str(tmp_path) + "/x\ud800"
    calls = {
        "open_project_store": lambda: open_project(store=bad),
        "open_project_config_dir": lambda: open_project(store=tmp_path / "p", config_dir=bad),
        "resolve_project": lambda: resolve_project(bad),
        "load_memory_config": lambda: load_memory_config(bad),
        "migrate_legacy": lambda: migrate_legacy(config_dir=bad, cwd=tmp_path),
        "FactStore": lambda: FactStore(bad + "/facts.sqlite3"),
        "resolve_config_dir": lambda: resolve_config_dir(bad),
    }
    with pytest.raises(UsageError, match="cannot be encoded|surrogate"):
        calls[call]()


# ---------------------------------------------------------------- the code review of these fixes

def _two_messages(d):
    from lecode_memctl.core import open_project

    with open_project(store=d) as p, p.sessions.create("s1") as w:
        return w.append_message("user", "we use tabs"), w.append_message("user", "we use spaces")


def test_a_new_database_busy_at_its_wal_switch_is_switched_at_the_next_write(tmp_path,
                                                                          monkeypatch):
    """The first write of a new database commits, then a reader holds a read
    transaction as the writer switches to WAL: the switch waited the whole
    busy timeout inside SQLite (5 s no Ctrl-C could cut short) and left the
    database in rollback-journal mode for the writer's whole life.  Now it
    is tried without waiting, and again before the writer's next write."""
    import time

    from lecode_memctl.core import FactStore, open_project

    d = _store(tmp_path)
    s, s2 = _two_messages(d)
    db = d / "facts.sqlite3"
    held: list[sqlite3.Connection] = []
    real = FactStore._migration_committed

    def committed(self):
        if not held:
            other = sqlite3.connect(db, isolation_level=None)
            other.execute("BEGIN")
            other.execute("SELECT count(*) FROM facts").fetchall()
            held.append(other)
        real(self)

    monkeypatch.setattr(FactStore, "_migration_committed", committed)

    def mode() -> str:
        raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        finally:
            raw.close()

    with open_project(store=d) as p:
        p.facts.busy_timeout = 30.0
        began = time.monotonic()
        p.remember("we use tabs", p.sessions.source_snapshot("s1", s, s).ref)
        assert time.monotonic() - began < 15     # (not the 30 s busy timeout)
        assert mode() == "delete"
        held[0].execute("COMMIT")
        held[0].close()
        p.remember("we use spaces", p.sessions.source_snapshot("s1", s2, s2).ref)
        assert mode() == "wal"                   # (the same writer, its next write)


def test_a_fork_while_another_thread_takes_a_session_lock_leaves_the_child_no_copy(
        tmp_path, monkeypatch):
    """A fork by one thread while another was between the open of a
    session's lock and its record: the child kept a copy nothing closed, and
    the parent could not open its own session again (StoreBusy) until the
    child exited."""
    import fcntl as real_fcntl
    import os
    import threading
    import time
    import types

    from lecode_memctl.core import open_project, sessions as S

    d = _store(tmp_path)
    slow = types.SimpleNamespace(**{k: getattr(real_fcntl, k) for k in dir(real_fcntl)
                                    if not k.startswith("__")})

    def flock(fd, op):
        real_fcntl.flock(fd, op)
        time.sleep(0.5)

    slow.flock = flock
    monkeypatch.setattr(S, "fcntl", slow)
    with open_project(store=d) as p:
        box: dict[str, object] = {}
        t = threading.Thread(target=lambda: box.setdefault("w", p.sessions.create("s1")))
        t.start()
        time.sleep(0.2)
        pid = os.fork()
        if pid == 0:
            time.sleep(3)
            os._exit(0)
        try:
            t.join()
            monkeypatch.setattr(S, "fcntl", real_fcntl)
            box["w"].close()                     # type: ignore[attr-defined]
            p.sessions.writer("s1").close()      # (StoreBusy before)
        finally:
            os.waitpid(pid, 0)


def test_a_database_gone_again_between_two_looks_is_no_database(tmp_path, monkeypatch):
    """A writer made with no database: a file appears, then is gone again
    between the read's look and the writer's open: NotFound ('facts database
    disappeared', exit 3) from a read, where no database means generation 0."""
    import os

    from lecode_memctl.core import facts as F

    db = tmp_path / "facts.sqlite3"
    fs = F.FactStore(db)
    try:
        db.write_bytes(b"")
        real = F.lstat_regular
        looks = [0]

        def lstat(p):
            got = real(p)
            if os.fspath(p) == os.fspath(db):
                looks[0] += 1
                if looks[0] == 1:
                    os.unlink(db)
            return got

        monkeypatch.setattr(F, "lstat_regular", lstat)
        assert fs.generation() == 0
    finally:
        fs.close()
