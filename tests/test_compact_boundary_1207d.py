"""validate --deep checks the rule the reference design states for each
compaction (spec, "Incremental working memory"): at least four recent
messages remain raw after the summary's cutoff, and the cutoff is a
complete tool-safe exchange boundary (no assistant tool call covered while a
result answering it is not).  compact.boundary and compact.few_raw, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .test_audit import USAGE, findings, prior_of

CALL = [{"id": "c1", "name": "read_file", "arguments": {"path": "x"}}]


def _store(config_dir: Path) -> tuple[Path, SessionStore]:
    path = config_dir / "memory" / "demo-000000000000"
    return path, SessionStore(store_at(path))


def _ref(ss: SessionStore, sid: str, a: int, b: int) -> dict:
    return ss.source_snapshot(sid, a, b).ref.to_json()


def _compact(w, lineage: list[dict], prior: dict | None) -> int:
    return w.append_event("compact", summary="S", lineage=lineage, prior=prior, model="m",
                          usage=USAGE)


def _deep(path: Path) -> tuple[int, list[tuple[str, str, int | None, str | None]]]:
    code, fs = findings("--store", str(path), "--deep")
    return code, [(f["code"], f["severity"], f["seq"], f["reason"]) for f in fs]


def _exchange(w) -> None:
    w.append_message("user", "read x")                                           # 1
    w.append_message("assistant", "", epoch=0, tool_calls=CALL)                  # 2
    w.append_message("tool", "contents", tool_call_id="c1", name="read_file", epoch=0)  # 3
    w.append_message("assistant", "done", epoch=0)                               # 4


@pytest.mark.parametrize("pad", [0, 5 << 20, 9 << 20])
def test_a_lineage_ending_between_a_tool_call_and_its_result_is_compact_boundary(config_dir, pad):
    # the review's repro (t16.py, session s1): 1..2 covered, the result at 3 raw;
    # pad: a transcript read in one call, kept whole by the line loop, or
    # larger (its records around the cutoff read again)
    path, ss = _store(config_dir)
    w = ss.create("s1")
    if pad:
        w.append_message("user", "p" * pad)                                      # 1
        w.append_message("assistant", "ok", epoch=0)                             # 2
        w.append_message("user", "q")                                            # 3
        w.append_message("assistant", "ok", epoch=0)                             # 4
        w.append_message("user", "q")                                            # 5
        w.append_message("assistant", "ok", epoch=0)                             # 6
        c = _compact(w, [_ref(ss, "s1", 1, 2)], None)                            # 7
        w.close()
        assert _deep(path) == (0, [])
        w = ss.writer("s1")
        w.append_message("user", "read x")                                       # 8
        w.append_message("assistant", "", epoch=0, tool_calls=CALL)              # 9
        w.append_message("tool", "contents", tool_call_id="c1", name="read_file", epoch=0)
        w.append_message("assistant", "done", epoch=0)                           # 11
        for i in range(4):
            w.append_message("user", f"more {i}")                                # 12..15
        _compact(w, [_ref(ss, "s1", 1, 2), _ref(ss, "s1", 3, 9)], prior_of(ss, "s1", c))  # 16
        w.close()
        assert _deep(path)[1] == [("compact.boundary", "warning", 16, "split")]
        return
    _exchange(w)
    for i in range(4):
        w.append_message("user", f"more {i}")                                    # 5..8
    _compact(w, [_ref(ss, "s1", 1, 2)], None)                                    # 9
    w.close()
    code, fs = _deep(path)
    assert code == 0                                   # a warning: exit 0 without --strict
    assert fs == [("compact.boundary", "warning", 9, "split")]
    code, _ = findings("--store", str(path), "--deep", "--strict")
    assert code == 1


def test_a_lineage_covering_a_call_whose_result_is_not_written_yet_is_incomplete(config_dir):
    path, ss = _store(config_dir)
    w = ss.create("s1")
    w.append_message("user", "read x")                                           # 1
    w.append_message("assistant", "", epoch=0, tool_calls=CALL)                  # 2
    for i in range(4):
        w.append_message("user", f"more {i}")                                    # 3..6
    _compact(w, [_ref(ss, "s1", 1, 2)], None)                                    # 7
    w.close()
    assert _deep(path)[1] == [("compact.boundary", "warning", 7, "incomplete")]


def test_a_lineage_covering_every_message_is_compact_few_raw(config_dir):
    # the review's repro (t16.py, session s2): 1..4 covered, none left raw
    path, ss = _store(config_dir)
    w = ss.create("s2")
    for i in range(1, 5):
        w.append_message("user", f"u{i}")
    _compact(w, [_ref(ss, "s2", 1, 4)], None)                                    # 5
    w.close()
    assert _deep(path)[1] == [("compact.few_raw", "warning", 5, None)]


def test_the_raw_messages_are_counted_when_the_event_was_written(config_dir):
    """Messages appended after the compact event do not count, events between
    do not count, and a message an undo before the event had hidden does not
    count either; one undone after the event still does."""
    path, ss = _store(config_dir)
    w = ss.create("s1")
    _exchange(w)                                                                 # 1..4
    w.append_message("user", "a")                                                # 5
    w.append_event("memory_usage", purpose="summarization", model="m", usage=None)  # 6
    w.append_message("assistant", "b", epoch=0)                                  # 7
    w.append_message("user", "c")                                                # 8
    w.append_message("assistant", "d", epoch=0)                                  # 9
    w.append_event("undo", target=[9, 9])                                        # 10
    _compact(w, [_ref(ss, "s1", 1, 4)], None)                                    # 11: 5, 7, 8 raw
    for i in range(4):
        w.append_message("user", f"later {i}")                                   # 12..15
    w.close()
    assert _deep(path)[1] == [("compact.few_raw", "warning", 11, None)]
    # the same with four raw messages, one undone only after the event: clean
    path2 = config_dir / "memory" / "two-000000000000"
    ss2 = SessionStore(store_at(path2))
    w = ss2.create("s1")
    _exchange(w)                                                                 # 1..4
    for i in range(4):
        w.append_message("user", f"raw {i}")                                     # 5..8
    _compact(w, [_ref(ss2, "s1", 1, 4)], None)                                   # 9
    w.append_event("undo", target=[8, 8])                                        # 10
    w.close()
    assert _deep(path2) == (0, [])


def test_a_complete_exchange_boundary_with_four_raw_messages_is_clean(config_dir):
    path, ss = _store(config_dir)
    w = ss.create("s1")
    _exchange(w)                                                                 # 1..4
    w.append_message("user", "read y")                                           # 5
    w.append_message("assistant", "", epoch=0, tool_calls=[
        {"id": "c2", "name": "read_file", "arguments": {"path": "y"}},
        {"id": "c3", "name": "read_file", "arguments": {"path": "z"}}])           # 6
    w.append_message("tool", "y", tool_call_id="c2", name="read_file", epoch=0)  # 7
    w.append_message("tool", "z", tool_call_id="c3", name="read_file", epoch=0)  # 8
    for i in range(4):
        w.append_message("user", f"raw {i}")                                     # 9..12
    c1 = _compact(w, [_ref(ss, "s1", 1, 3)], None)                               # 13: ends at a result
    w.close()
    # 1..3 ends after the only result of the call at 2: tool-safe (4 is raw)
    assert _deep(path) == (0, [])
    # a second summary cutting the parallel call at 6 from its second result
    w = ss.writer("s1")
    for i in range(4):
        w.append_message("user", f"again {i}")                                   # 14..17
    _compact(w, [_ref(ss, "s1", 1, 3), _ref(ss, "s1", 4, 7)], prior_of(ss, "s1", c1))  # 18
    w.close()
    assert _deep(path)[1] == [("compact.boundary", "warning", 18, "split")]


def test_the_new_codes_do_not_make_grep_hide_a_summary(config_dir):
    """The agent uses a summary made against these rules (lineage validates):
    grep reports it visible, not inert, as before."""
    import orjson

    from .conftest import run_cli

    path, ss = _store(config_dir)
    w = ss.create("s1")
    for i in range(1, 5):
        w.append_message("user", f"u{i}")
    _compact(w, [_ref(ss, "s1", 1, 4)], None)
    w.close()
    r = run_cli("--store", str(path), "grep", "S", "--role", "summary", "--include-hidden",
                "--json")
    assert r.exit_code == 0, r.stderr
    hits = {(h["session_id"], h["seq"]): h["hidden_reason"]
            for h in orjson.loads(r.stdout_bytes)["hits"]}
    assert hits == {("s1", 5): None}
    code, fs = _deep(path)
    assert fs == [("compact.few_raw", "warning", 5, None)]


def test_the_demos_compactions_follow_the_rule(demo_template, tmp_path):
    """memctl demo's two summaries each leave four messages raw (before
    2026-12-07 both covered every message before them: compact.few_raw)."""
    from lecode_memctl.core.audit import validate_store

    from .builders import copy_demo

    store = copy_demo(demo_template, tmp_path / "demo")
    found, _ = validate_store(store_at(store), deep=True, parallel=False)
    assert [f.code for f in found if f.code.startswith("compact.")] == []
