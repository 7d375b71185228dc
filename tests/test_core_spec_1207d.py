"""The core against the reference design (a review of 2026-12-07,
docs/API.md): memory_list's learning status is the current session's, a
remember validates its evidence inside its write transaction, disabled
memory creates no fact database, and a proposal's conflict given as a bare
fact id is not taken as still holding."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecode_memctl.core import open_project
from lecode_memctl.core.errors import UsageError


def _project(tmp_path: Path):
    (tmp_path / "proj").mkdir(exist_ok=True)
    return open_project(tmp_path / "proj", config_dir=tmp_path / "cfg")


# ---- 1. memory_list: the project's facts, the current session's learning status

def test_list_facts_gives_the_current_sessions_learning_status_with_every_fact(tmp_path):
    """``list_facts()`` took the learning status of whichever transcript was
    written last (another session's, shown as if current), and
    ``session_id=`` filtered the facts to that session's evidence (a new
    session saw none): ``current_session_id`` names the session whose
    learning status is given, the facts are the project's."""
    with _project(tmp_path) as p:
        s, g = p.sessions, p.generation()
        with s.create("s1") as w:
            for i in range(1, 4):
                w.append_message("user", f"u{i}")
        f = p.remember("F1", s.source_snapshot("s1", 1, 1).ref).fact
        with s.create("s2") as w:
            w.append_message("user", "hello in s2")
            w.append_event("learning", status="no_candidates", reason_counts={}, facts=[],
                           proposals=[], epoch=g)
        with s.create("s3") as w:
            w.append_message("user", "current session, no compaction yet")

        d = p.list_facts(current_session_id="s3")
        assert [r["fact_id"] for r in d["facts"]] == [f.fact_id]
        assert d["total"] == 1
        assert d["learning"] is None            # s3 has no learning event: not s2's

        d = p.list_facts(current_session_id="s2")
        assert [r["fact_id"] for r in d["facts"]] == [f.fact_id]
        assert (d["learning"]["session_id"], d["learning"]["status"]) == ("s2", "no_candidates")

        # a current session with no transcript yet: no learning status, every fact
        d = p.list_facts(current_session_id="s9")
        assert d["learning"] is None and d["total"] == 1

        # unchanged: session_id filters the facts
        assert p.list_facts(session_id="s2")["total"] == 0
        assert p.list_facts()["learning"]["session_id"] == "s2"

        with pytest.raises(UsageError):
            p.list_facts(current_session_id="../x")
        with pytest.raises(UsageError, match="not both"):
            p.list_facts(session_id="s1", current_session_id="s2")


def test_list_facts_with_a_current_session_on_a_project_with_no_database(tmp_path):
    with _project(tmp_path) as p:
        d = p.list_facts(current_session_id="s1")
        assert d["facts"] == [] and d["learning"] is None
        assert not p.store.path.exists()
