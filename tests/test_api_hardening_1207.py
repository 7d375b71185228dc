"""Hardening of the core's public API after the review of 2026-12-07
(docs/API.md): every error of a documented call is typed, a write never
stores what no later call can undo, the API refuses what memctl refuses,
and the core forks only when the process has no other thread."""

from __future__ import annotations

import pytest

from lecode_memctl.core import errors


def test_position_missing_imports_from_the_errors_module():
    """``read_range`` raises it and ``core.__all__`` names it; it was the one
    session error ``lecode_memctl.core.errors`` did not give."""
    import lecode_memctl.core as core

    assert errors.PositionMissing is core.PositionMissing
    assert issubclass(errors.PositionMissing, errors.NotFound)
    with pytest.raises(AttributeError):
        errors.NoSuchError  # noqa: B018


# ---------------------------------------------------------------- item 2

def _store_with_a_fact(d):
    from lecode_memctl.core import open_project

    with open_project(store=d) as p:
        with p.sessions.create("s1") as w:
            s = w.append_message("user", "we use tabs")
        ref = p.sessions.source_snapshot("s1", s, s).ref
        fid = p.remember("we use tabs", ref).fact.fact_id
    return ref, fid


def _damage_after_first_page(db):
    b = bytearray(db.read_bytes())
    for i in range(4096, len(b)):
        b[i] ^= 0x5A
    db.write_bytes(bytes(b))


def test_a_damaged_database_reaches_factstore_callers_typed(tmp_path):
    """A FactStore given as a SessionStore's exclusions, the writer the agent
    shares (``project.facts``) and a read-only open raised a raw
    ``sqlite3.DatabaseError`` from their reads; each is StoreCorrupt now,
    an iterator's while it is read too."""
    from lecode_memctl.core import FactStore, SessionStore, open_project

    d = tmp_path / "proj-0123456789ab"
    d.mkdir()
    ref, fid = _store_with_a_fact(d)
    _damage_after_first_page(d / "facts.sqlite3")
    p = open_project(store=d)
    fs = p.facts
    ro = FactStore.open_readonly(p.store.facts_db)
    by_writer, by_ro = SessionStore(p.store, exclusions=fs), SessionStore(p.store, exclusions=ro)
    calls = {
        "exclusions=writer validate_source": lambda: by_writer.validate_source(ref),
        "exclusions=writer source_snapshot": lambda: by_writer.source_snapshot("s1", 1, 1),
        "exclusions=read-only validate_source": lambda: by_ro.validate_source(ref),
    }
    for name, store in (("writer", fs), ("read-only", ro)):
        calls.update({
            f"{name} generation": store.generation,
            f"{name} get": lambda store=store: store.get(fid),
            f"{name} count": store.count,
            f"{name} revisions": lambda store=store: store.revisions(fid),
            f"{name} search": lambda store=store: store.search("tabs"),
            f"{name} list_facts": store.list_facts,
            f"{name} integrity": store.integrity,
            f"{name} plan_forget": lambda store=store: store.plan_forget(fid),
            f"{name} iter_facts": lambda store=store: list(store.iter_facts()),
            f"{name} iter_fact_revisions": lambda store=store: list(store.iter_fact_revisions()),
            f"{name} iter_fact_groups": lambda store=store: list(store.iter_fact_groups()),
            f"{name} stored_sources_by_session":
                lambda store=store: list(store.stored_sources_by_session()),
        })
    raw = {}
    for name, call in calls.items():
        try:
            call()
        except errors.MemctlError:
            pass
        except Exception as exc:  # noqa: BLE001
            raw[name] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    ro.close()
    p.close()
    assert raw == {}
    with open_project(store=d) as p, pytest.raises(errors.StoreCorrupt) as got:
        p.facts.generation()
    assert got.value.__cause__ is not None and type(got.value.__cause__).__module__ == "sqlite3"


# ---------------------------------------------------------------- item 1

BIG = (1 << 63, 1 << 64, 1 << 70)


def _one_session(tmp_path):
    from lecode_memctl.core import open_project

    d = tmp_path / "proj-0123456789ab"
    d.mkdir()
    p = open_project(store=d)
    with p.sessions.create("s1") as w:
        s = w.append_message("user", "we use tabs")
    return p, p.sessions.source_snapshot("s1", s, s).ref


def _unchanged(p):
    db = p.store.facts_db
    return db.read_bytes() if db.exists() else None


@pytest.mark.parametrize("big", BIG)
def test_a_position_no_store_can_hold_is_refused_before_a_write(tmp_path, big):
    """A SourceRef or provenance position above 2^63-1 was stored by ``add``
    (unverified storage), ``revise`` and ``attach_source`` -- and the fact
    could then never be forgotten (``forget``: StoreCorrupt, exit 5) -- or
    raised a raw OverflowError / TypeError.  Each write method refuses it
    with UsageError now, before anything is written."""
    from lecode_memctl.core import SourceRef
    from lecode_memctl.core.facts import Provenance

    p, ref = _one_session(tmp_path)
    fid = p.remember("we use tabs", ref).fact.fact_id
    bad = SourceRef("s1", (big,), "0" * 64)
    wide = SourceRef.of_checked("s1", (big - 1, big), "0" * 64)   # as from_json builds it
    fs = p.facts
    before = _unchanged(p)
    writes = {
        "add ref": lambda r: fs.add("x", ref=r),
        "add provenance": lambda r: fs.add("y", provenance=[Provenance("s1", r.seqs)]),
        "revise ref": lambda r: fs.revise(fid, "x", expected_revision=1, ref=r),
        "revise provenance": lambda r: fs.revise(fid, "y", expected_revision=1,
                                                 provenance=[Provenance("s1", r.seqs)]),
        "attach_source": lambda r: fs.attach_source(fid, 1, r),
        "remember": lambda r: p.remember("x", r),
        "correct": lambda r: p.correct(fid, "x", expected_revision=1, ref=r),
        "FactStore.remember": lambda r: fs.remember("x", r, sessions=p.sessions),
    }
    for name, write in writes.items():
        for r in (bad, wide):
            with pytest.raises(errors.UsageError, match="at most 9223372036854775807"):
                write(r)
            assert _unchanged(p) == before, name
    assert p.forget(fid) is True
    p.close()


def test_the_largest_position_is_still_stored(tmp_path):
    from lecode_memctl.core import SourceRef

    p, _ref = _one_session(tmp_path)
    top = (1 << 63) - 1
    fact = p.facts.add("x", ref=SourceRef("s1", (top,), "0" * 64)).fact
    assert p.facts.get(fact.fact_id).source.seqs == (top,)
    assert p.forget(fact.fact_id) is True
    p.close()


def test_write_methods_refuse_a_ref_that_is_no_source_ref(tmp_path):
    p, _ref = _one_session(tmp_path)
    fs = p.facts
    for write in (lambda: fs.add("x", ref={"session_id": "s1"}),
                  lambda: fs.add("x", provenance=["s1:1"]),
                  lambda: fs.revise("0" * 16, "x", expected_revision=1, ref=("s1", (1,))),
                  lambda: fs.revise("0" * 16, "x", expected_revision=1, provenance=[3])):
        with pytest.raises(errors.UsageError):
            write()
    p.close()


# ---------------------------------------------------------------- item 3

def _linked_store(tmp_path):
    """A project whose store was moved and linked back: the store directory
    ``<config>/memory/<slug>`` is a symbolic link."""
    import shutil

    from lecode_memctl.core import open_project

    (tmp_path / "proj").mkdir()
    with open_project(tmp_path / "proj", config_dir=tmp_path / "cfg") as p:
        with p.sessions.create("s1") as w:
            s = w.append_message("user", "my token is hunter2")
        fid = p.remember("token is hunter2", p.sessions.source_snapshot("s1", s, s).ref).fact.fact_id
        store = p.store.path
    shutil.move(store, tmp_path / "elsewhere")
    store.symlink_to(tmp_path / "elsewhere")
    return store, fid


def test_a_store_directory_that_is_a_symbolic_link_is_refused_as_memctl_refuses_it(tmp_path):
    """The API read and wrote (recall, list_facts, a session writer's
    append, forget) through a store directory that memctl (and the API's
    own memory_section) refuse: FORMAT.md, "Opening"."""
    from lecode_memctl.core import open_project

    from .conftest import run_cli

    store, _fid = _linked_store(tmp_path)
    before = sorted(p.name for p in (tmp_path / "elsewhere").rglob("*"))
    with pytest.raises(errors.StoreCorrupt, match="store directory is a symbolic link") as got:
        open_project(tmp_path / "proj", config_dir=tmp_path / "cfg")
    with pytest.raises(errors.StoreCorrupt) as given:
        open_project(store=store)
    r = run_cli("--config-dir", str(tmp_path / "cfg"), "-C", str(tmp_path / "proj"), "facts")
    assert r.exit_code == 5 and str(got.value) in r.stderr
    assert str(given.value) == str(got.value)
    assert sorted(p.name for p in (tmp_path / "elsewhere").rglob("*")) == before


def test_a_store_that_does_not_exist_yet_still_opens(tmp_path):
    from lecode_memctl.core import open_project

    (tmp_path / "proj").mkdir()
    with open_project(tmp_path / "proj", config_dir=tmp_path / "cfg") as p:
        assert not p.store.path.exists()
        assert p.list_facts()["facts"] == []
        with p.sessions.create("s1") as w:
            w.append_message("user", "hello")
    with open_project(store=tmp_path / "nowhere") as p:
        assert p.generation() == 0


def test_a_store_linked_after_the_open_is_refused_by_the_writer(tmp_path):
    from lecode_memctl.core import open_project

    (tmp_path / "proj").mkdir()
    p = open_project(tmp_path / "proj", config_dir=tmp_path / "cfg")
    (tmp_path / "elsewhere").mkdir()
    p.store.path.parent.mkdir(parents=True)
    p.store.path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(errors.StoreCorrupt, match="symbolic link"):
        p.facts  # noqa: B018
    assert list((tmp_path / "elsewhere").iterdir()) == []
    p.close()


# ---------------------------------------------------------------- item 4

_THREADS_CODE = r"""
import _thread, sys, threading, time
from lecode_memctl.core import FactStore, open_project
from lecode_memctl.core.pools import alone, kernel_threads

d = sys.argv[1]
with open_project(store=d) as p:
    with p.sessions.create("s1") as w:
        s = w.append_message("user", "we use tabs")
    p.remember("we use tabs", p.sessions.source_snapshot("s1", s, s).ref)
ro = FactStore.open_readonly(d + "/facts.sqlite3")
print("before", alone(), ro.may_fork())
started, done, ended = _thread.allocate_lock(), _thread.allocate_lock(), _thread.allocate_lock()
started.acquire(); done.acquire(); ended.acquire()

def beside():                                      # a thread threading does not count
    started.release()
    done.acquire()                                 # (runs until the checks are made)
    ended.release()

_thread.start_new_thread(beside, ())
started.acquire()
print("beside", alone(), ro.may_fork(), threading.active_count(), kernel_threads())
try:
    ro.fork(lambda: 0)
    print("forked")
except Exception as exc:
    print("refused", type(exc).__name__)
done.release()
ended.acquire()
for _ in range(200):                               # it ended (the kernel's count follows)
    if alone():
        break
    time.sleep(0.01)
print("after", alone(), ro.may_fork())
ro.close()
"""


def test_a_thread_threading_does_not_count_keeps_the_core_from_forking(tmp_path):
    """``alone()`` counted only ``threading``'s threads: with a thread of
    ``_thread`` (or a C library's) running, ``may_fork()`` said yes and the
    core forked beside it (API.md, "Forks": a process with threads does not
    fork).  Run in a fresh interpreter: its only other threads are the
    test's."""
    import subprocess
    import sys
    from pathlib import Path

    from lecode_memctl.core.pools import kernel_threads

    if kernel_threads() is None:
        pytest.skip("no /proc/self/status here: threading's count decides")
    d = tmp_path / "proj-0123456789ab"
    d.mkdir()
    repo = Path(__file__).resolve().parents[1]
    env = {**__import__("os").environ, "PYTHONPATH": str(repo)}
    r = subprocess.run([sys.executable, "-c", _THREADS_CODE, str(d)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "before True True"
    assert lines[1] == "beside False False 1 2"
    assert lines[2] == "refused UsageError"
    assert lines[3] == "after True True"


# ---------------------------------------------------------------- item 5

class _BytesPath:
    def __fspath__(self):
        return b"/tmp"


@pytest.mark.parametrize("kwargs", [
    {"store": "/tmp/a\0b"}, {"store": b"/tmp"}, {"store": 5}, {"store": _BytesPath()},
    {"config_dir": "/tmp/cfg\0x"}, {"config_dir": b"/tmp/cfg"},
    {"path": "/tmp/a\0b"}, {"path": b"/tmp"},
])
def test_a_path_that_names_no_file_is_a_usage_error_at_open(tmp_path, kwargs):
    """``open_project`` raised ValueError (embedded null byte) or TypeError
    for such a path, or took a config_dir with a NUL and failed later, at
    each use, with a raw ValueError; a path with a NUL gave a message
    holding the raw byte."""
    from lecode_memctl.core import open_project

    with pytest.raises(errors.UsageError) as got:
        p = open_project(**kwargs)
        p.config  # noqa: B018 - (before: accepted, then ValueError here)
    assert "\0" not in str(got.value)
    if any(isinstance(v, str) and "\0" in v for v in kwargs.values()):
        assert "\\x00" in str(got.value)


def test_resolve_config_dir_refuses_a_nul_too():
    from lecode_memctl.core import resolve_config_dir

    with pytest.raises(errors.UsageError, match=r"\\x00"):
        resolve_config_dir("/tmp/a\0b")
    with pytest.raises(errors.UsageError, match=r"\\x00"):
        resolve_config_dir(None, {"LECODE_CONFIG_DIR": "/tmp/a\0b"})
    assert resolve_config_dir("/tmp/ok").path.name == "ok"
