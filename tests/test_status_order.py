"""The order in which a reference's problems are decided, as docs/FORMAT.md
("Validation") states it: the session, the span's lines in file order, the
digest, then each cited position in seq order (its type, then its
visibility).  Pinned so that the paragraph and the validator cannot part
again (before 2026-12-07 it said missing, stale, hidden "in that order")."""

from __future__ import annotations

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore
from lecode_memctl.core.sourceref import SourceRef, canonical_digest

from .builders import SLUG


def _store(tmp_path):
    store = store_at(tmp_path / "memory" / SLUG)
    ss = SessionStore(store)
    w = ss.create("s1")
    try:
        w.append_message("user", "a")                 # 1
        w.append_event("undo", target=[1, 1])         # 2
        w.append_message("user", "b")                 # 3
        w.append_event("clear")                       # 4
    finally:
        w.close()
    return store, ss


def _status(ss, seqs):
    ref = SourceRef("s1", tuple(seqs), canonical_digest(ss.records("s1", seqs[0], seqs[-1])))
    st = ss.validate_source(ref, "durable")
    return st.status, st.reason, st.seq


def test_the_first_cited_position_decides_between_hidden_and_not_message(tmp_path):
    _store_, ss = _store(tmp_path)
    assert _status(ss, (1, 4)) == ("hidden", "undone", 1)
    assert _status(ss, (3, 4)) == ("stale", "not_message", 4)


def test_a_corrupt_line_inside_the_span_comes_before_a_missing_end(tmp_path):
    store, ss = _store(tmp_path)
    path = store.sessions_dir / "s1.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:2] + [b"not json"] + lines[2:]))
    st = ss.validate_source(SourceRef("s1", (1, 9), "0" * 64), "durable")
    assert (st.status, st.reason) == ("stale", "records_corrupt")


def test_the_digest_comes_before_the_positions(tmp_path):
    _store_, ss = _store(tmp_path)
    st = ss.validate_source(SourceRef("s1", (1, 4), "0" * 64), "durable")
    assert (st.status, st.reason) == ("stale", "digest_mismatch")
