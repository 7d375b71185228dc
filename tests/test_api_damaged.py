"""A damaged facts database reaches the API's caller as a memctl error
(StoreCorrupt, or StoreBusy), never as a raw ``sqlite3.DatabaseError``:
an agent that catches ``MemctlError`` around its memory calls must not be
ended by one.  The message is the one ``memctl`` prints for the same
store: the library and the tool never disagree."""

from __future__ import annotations

import pytest

from lecode_memctl.core import SessionStore, open_project
from lecode_memctl.core.errors import MemctlError, StoreCorrupt
from lecode_memctl.core.layout import store_at

from .builders import copy_demo
from .conftest import run_cli
from .test_damaged_pages import _damage

FACT = "80fa60fdfe856452"


def _uses(p):
    return {
        "generation": p.generation,
        "recall": lambda: p.recall(FACT),
        "list_facts": p.list_facts,
        "read_range": lambda: p.read_range("demo-alpha", 1, 3),
        "memory_section": p.memory_section,
        "snapshot": lambda: p.sessions.source_snapshot("demo-alpha", 1, 3),
    }


@pytest.mark.parametrize("writer", [False, True])
@pytest.mark.parametrize("table", ["meta", "exclusions", "facts"])
def test_a_damaged_database_is_store_corrupt(demo_template, tmp_path, table, writer):
    store = copy_demo(demo_template, tmp_path / "demo")
    _damage(store / "facts.sqlite3", table, 8 if table != "exclusions" else 0,
            200 if table != "exclusions" else 1)
    with open_project(store=store) as p:
        if writer:
            p.facts  # noqa: B018 - the writer's connection, as an agent's after a write
        for name, use in _uses(p).items():
            try:
                use()
            except MemctlError:
                pass
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{name}: {type(exc).__module__}.{type(exc).__name__}: {exc}")
        with pytest.raises(MemctlError):
            p.generation() if table in ("meta",) else p.recall(FACT)
    ss = SessionStore(store_at(store))
    try:
        ss.source_snapshot("demo-alpha", 1, 3)
    except MemctlError:
        pass


def test_the_library_and_memctl_say_the_same(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "demo")
    _damage(store / "facts.sqlite3", "meta", 8, 200)
    with open_project(store=store) as p, pytest.raises(StoreCorrupt) as got:
        p.read_range("demo-alpha", 1, 3)
    res = run_cli("--store", str(store), "--no-state", "read", "demo-alpha", "1", "3")
    assert res.exit_code == StoreCorrupt.exit_code
    assert res.stderr == f"memctl: error: {got.value.message}\n"


@pytest.mark.parametrize("table", ["meta", "facts"])
def test_the_public_read_functions_on_a_damaged_database(demo_template, tmp_path, table):
    """recall, history, facts_page and build_memory_section, the public
    functions over a FactStore, raise memctl errors too."""
    from lecode_memctl.core import (
        FactStore,
        build_memory_section,
        facts_page,
        history,
        load_memory_config,
        recall,
    )

    store = copy_demo(demo_template, tmp_path / "demo")
    _damage(store / "facts.sqlite3", table, 8, 200)
    st = store_at(store)
    config = load_memory_config(tmp_path / "demo" / "config")
    for fs in (FactStore.open_readonly(st.facts_db), FactStore(st.facts_db)):
        ss = SessionStore(st, exclusions=fs)
        uses = {
            "recall": (recall, (fs, ss, FACT)),
            "history": (history, (fs, ss, FACT)),
            "facts_page": (facts_page, (fs, ss)),
            "build_memory_section": (build_memory_section, (st, config, fs, ss)),
        }
        for name, (fn, args) in uses.items():
            try:
                fn(*args)
            except MemctlError:
                pass
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{name}: {type(exc).__module__}.{type(exc).__name__}: {exc}")
        fs.close()


def test_the_sqlite_error_is_the_cause(demo_template, tmp_path):
    """API.md: a damaged database is raised as ``StoreCorrupt`` "with the
    ``sqlite3`` error as its ``__cause__``" (``StoreBusy`` when locked): it
    was raised ``from None``, the cause hidden (``__cause__`` None)."""
    import sqlite3

    store = copy_demo(demo_template, tmp_path / "demo")
    (store / "facts.sqlite3").write_bytes(b"x" * 8192)
    with open_project(store=store) as p:
        for name, use in _uses(p).items():
            try:
                use()
            except StoreCorrupt as exc:
                if "facts database" in exc.message:
                    assert isinstance(exc.__cause__, sqlite3.Error), (name, exc.__cause__)
    live = copy_demo(demo_template, tmp_path / "live")
    holder = sqlite3.connect(live / "facts.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        from lecode_memctl.core import FactStore
        from lecode_memctl.core.errors import StoreBusy

        with FactStore(live / "facts.sqlite3", busy_timeout=0.05) as fs, \
                pytest.raises(StoreBusy) as got:
            fs.forget(FACT)
        assert isinstance(got.value.__cause__, sqlite3.OperationalError), got.value.__cause__
    finally:
        holder.execute("ROLLBACK")
        holder.close()
