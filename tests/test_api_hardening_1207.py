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
