"""Issue 11, point 6: reasons are data.

A read of a range that is entirely hidden gives, in its JSON, a ``status``
and a ``reason`` (cleared, undone, excluded, epoch), as ``recall`` does, not
only prose; a partly hidden range gives the reason of each hidden position."""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli

SLUG = "proj-0123456789ab"


@pytest.fixture
def store(tmp_path):
    return store_at(tmp_path / "memory" / SLUG)


def cli(store, *args, **kw):
    return run_cli("--store", str(store.path), *args, **kw)


def conversation(store, n=8):
    ss = SessionStore(store)
    w = ss.create("s1")
    for i in range(1, n + 1):
        if i % 2:
            w.append_message("user", f"question {i}")
        else:
            w.append_message("assistant", f"answer {i}", epoch=0)
    return w


def read_doc(store, *args, code):
    r = cli(store, "read", "s1", *args, "--json")
    assert r.exit_code == code, (r.exit_code, r.stderr)
    assert "Traceback" not in r.stderr
    return orjson.loads(r.stdout_bytes)


@pytest.mark.parametrize("how, reason", [("undo", "undone"), ("clear", "cleared"),
                                         ("forget", "excluded"), ("epoch", "epoch")])
def test_entirely_hidden_range_has_status_and_reason(store, how, reason):
    w = conversation(store)
    if how == "undo":
        w.append_event("undo", target=[3, 4])
    elif how == "clear":
        w.append_event("clear")
    w.close()
    if how in ("forget", "epoch"):
        with FactStore(store.facts_db) as fs:
            ss = SessionStore(store, exclusions=fs)
            # a fact on 3 and one on 1, then forget the one on 3 (generation 1)
            keep = fs.remember("question 1", ss.source_snapshot("s1", 1, 1).ref, sessions=ss)
            gone = fs.remember("question 3", ss.source_snapshot("s1", 3, 3).ref, sessions=ss)
            fs.forget(gone.fact.fact_id)
            assert keep
    lo, hi = ((3, 3) if how == "forget" else (4, 4) if how == "epoch" else (3, 4))
    doc = read_doc(store, str(lo), str(hi), code=4)
    assert doc["status"] == "hidden" and doc["reason"] == reason
    assert doc["session_id"] == "s1" and doc["start"] == lo and doc["end"] == hi
    assert doc["source"] is None
    assert doc["hidden_reasons"] == {str(s): reason for s in range(lo, hi + 1)}
    assert doc["hidden"] == {reason: list(range(lo, hi + 1))}
    # the same without --json: JSON is the default output of read
    r = cli(store, "read", "s1", str(lo), str(hi))
    assert r.exit_code == 4 and orjson.loads(r.stdout_bytes)["reason"] == reason
    assert "no visible message" in r.stderr


def test_only_events_range(store):
    w = conversation(store, n=2)
    w.append_event("clear")
    w.append_event("clear")
    w.close()
    doc = read_doc(store, "3", "4", code=4)
    assert doc["reason"] == "not_message" and doc["status"] == "stale"
    assert doc["hidden_reasons"] == {}


def test_partly_hidden_range_gives_each_position_its_reason(store):
    w = conversation(store)
    w.append_event("undo", target=[3, 4])
    w.close()
    doc = read_doc(store, "1", "6", code=0)
    assert doc["status"] == "valid" and doc["reason"] is None
    assert doc["source"]["seqs"] == [1, 2, 5, 6]
    assert doc["hidden_reasons"] == {"3": "undone", "4": "undone"}
    # mixed reasons
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        f = fs.remember("question 7", ss.source_snapshot("s1", 7, 7).ref, sessions=ss)
        fs.forget(f.fact.fact_id)
    doc = read_doc(store, "1", "8", code=0)
    assert doc["hidden_reasons"] == {"2": "epoch", "3": "undone", "4": "undone", "6": "epoch",
                                     "7": "excluded", "8": "epoch"}
    assert doc["source"]["seqs"] == [1, 5]


def test_hidden_reasons_fit_the_page_cap(store):
    ss = SessionStore(store)
    with ss.create("s1") as w:
        for i in range(1, 201):
            w.append_message("user", f"q{i} " + "x" * 200)
        w.append_event("undo", target=[2, 200])
    doc = read_doc(store, "1", "200", code=0)
    assert len(doc["hidden_reasons"]) == 199 and doc["source"]["seqs"] == [1]
    r = cli(store, "read", "s1", "1", "200", "--json")
    assert len(r.stdout_bytes) <= 16384
