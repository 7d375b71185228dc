"""validate on older stores and on the rules the reference design states (issue 11
point 2): a compact event written before lineage existed is inert (info, not an
error), a lineage that is not exactly cumulative is an error, an undo/redo target
outside the session or not before its event is ``session.bad_target``, and every
finding code of the docs/FORMAT.md table is planted by a fixture and found
exactly once."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.audit import CODES, validate_store
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore, SessionWriter

from .conftest import REPO, run_cli
from .test_audit import (
    PLANTED,
    USAGE,
    _hdr,
    _msg,
    _raw,
    _write_session,
    build_clean,
    build_db_stores,
    build_planted,
    findings,
    prior_of,
)


def _session(path: Path, sid: str) -> tuple[SessionStore, SessionWriter]:
    ss = SessionStore(store_at(path))
    w = ss.create(sid)
    w.append_message("user", "one")                      # 1
    w.append_message("assistant", "two", epoch=0)        # 2
    return ss, w


def _ref(ss: SessionStore, sid: str, a: int, b: int) -> dict:
    return ss.source_snapshot(sid, a, b).ref.to_json()


def _legacy(w) -> int:
    """A compact event as lecode wrote it before lineage (and prior) existed."""
    return w.append_event("compact", summary="old summary", model="m", usage=USAGE)


def _compact(w, lineage: list[dict], prior: dict | None) -> int:
    return w.append_event("compact", summary="s", lineage=lineage, prior=prior, model="m",
                          usage=USAGE)


def deep(path: Path) -> list[tuple[str, str, int | None, str | None]]:
    code, fs = findings("--store", str(path), "--deep")
    assert code == (1 if any(f["severity"] == "error" for f in fs) else 0)
    return [(f["code"], f["severity"], f["seq"], f["reason"]) for f in fs]


# ---------------------------------------------------------------- legacy compact events


def test_compact_without_lineage_is_info_not_an_error(config_dir):
    path = build_clean(config_dir)
    ss, w = _session(path, "old")
    c = _legacy(w)                                                   # 3
    w.close()
    assert deep(path) == [("compact.legacy", "info", c, None)]


def test_compactions_after_a_legacy_one_start_a_new_chain(config_dir):
    """lecode does not trust a summary without lineage: the next compaction is built
    from raw history, its prior null; the chain continues from there."""
    path = build_clean(config_dir)
    ss, w = _session(path, "old")
    first = _legacy(w)                                               # 3
    second = _legacy(w)                                              # 4
    w.append_message("user", "three")                                # 5
    w.append_message("assistant", "four", epoch=0)                   # 6
    _raw(w, 4)                                                       # 7..10 (left raw)
    c1 = _compact(w, [_ref(ss, "old", 1, 2), _ref(ss, "old", 5, 6)], None)     # 11
    _raw(w, 4)                                                       # 12..15
    _compact(w, [_ref(ss, "old", 1, 2), _ref(ss, "old", 5, 6), _ref(ss, "old", 7, 10)],
             prior_of(ss, "old", c1))                                # 16
    w.close()
    assert deep(path) == [("compact.legacy", "info", first, None),
                          ("compact.legacy", "info", second, None)]


def test_legacy_store_validates_green(config_dir):
    """A cron job on an older store: --deep --strict exits 0 (info never fails)."""
    path = build_clean(config_dir)
    _ss, w = _session(path, "old")
    _legacy(w)
    w.close()
    assert run_cli("validate", "--store", str(path), "--deep", "--strict", "-q").exit_code == 0


def test_a_null_lineage_is_not_legacy(config_dir):
    """Only an event without the key predates lineage; ``"lineage": null`` is malformed."""
    path = build_clean(config_dir)
    _ss, w = _session(path, "old")
    c = w.append_event("compact", summary="s", lineage=None, prior=None, model="m", usage=None)
    w.close()
    assert deep(path) == [("compact.lineage_stale", "error", c, "invalid_ref")]


# ---------------------------------------------------------------- cumulative lineage


def _chain(config_dir: Path) -> tuple[Path, SessionStore, SessionWriter, int, list[dict]]:
    path = build_clean(config_dir)
    ss, w = _session(path, "cum")
    # (each compaction leaves four messages raw, the design's rule: compact.few_raw)
    w.append_message("user", "three")                                # 3
    w.append_message("assistant", "four", epoch=0)                   # 4
    _raw(w, 2)                                                       # 5..6
    c1 = _compact(w, [_ref(ss, "cum", 1, 2)], None)                  # 7
    _raw(w, 4)                                                       # 8..11
    return path, ss, w, c1, [_ref(ss, "cum", 1, 2), _ref(ss, "cum", 3, 6)]


def test_an_exactly_cumulative_chain_is_clean(config_dir):
    path, ss, w, c1, lineage = _chain(config_dir)
    _compact(w, lineage, prior_of(ss, "cum", c1))
    w.close()
    assert deep(path) == []


@pytest.mark.parametrize("case", ["empty", "dropped_prior_chunk", "reordered", "overlap"])
def test_a_lineage_that_is_not_exactly_cumulative_is_an_error(config_dir, case):
    path, ss, w, c1, lineage = _chain(config_dir)
    a, b = lineage
    bad = {
        "empty": [],                                          # the example
        "dropped_prior_chunk": [b],
        "reordered": [b, a],
        "overlap": [a, _ref(ss, "cum", 2, 5)],
    }[case]
    seq = _compact(w, bad, prior_of(ss, "cum", c1))          # 12, with a valid prior
    w.close()
    reason = "overlap" if case == "overlap" else "not_cumulative"
    assert deep(path) == [("compact.lineage_not_cumulative", "error", seq, reason)]


def test_a_lineage_chunk_at_or_after_its_event_is_an_error(config_dir):
    """A summary cannot cover what follows it: a hand-edited event at seq 12 whose
    lineage names the message at seq 13 (its digest holds)."""
    path, ss, w, c1, lineage = _chain(config_dir)
    seq = _compact(w, lineage, prior_of(ss, "cum", c1))      # 12
    w.append_message("user", "seven")                         # 13
    w.close()
    assert deep(path) == []
    later = _ref(ss, "cum", seq + 1, seq + 1)
    f = path / "sessions" / "cum.jsonl"
    recs = [orjson.loads(x) for x in f.read_bytes().splitlines()]
    recs[seq]["lineage"] = lineage + [later]
    _write_session(f, [orjson.dumps(r) + b"\n" for r in recs])
    assert deep(path) == [("compact.lineage_not_cumulative", "error", seq, "after_event")]


def test_a_first_compaction_with_an_empty_lineage_is_an_error(config_dir):
    path = build_clean(config_dir)
    _ss, w = _session(path, "e")
    seq = _compact(w, [], None)
    w.close()
    assert deep(path) == [("compact.lineage_not_cumulative", "error", seq, "empty")]


# ---------------------------------------------------------------- undo/redo targets


@pytest.mark.parametrize("target", [[3, 9], [1, 3], [-1, 1], [2, 1], "1-2", [1], [1, 2.0], None])
def test_an_undo_target_outside_the_session_or_not_before_it_is_bad_target(config_dir, target):
    path = build_clean(config_dir)
    _ss, w = _session(path, "u")
    seq = w.append_record({"type": "event", "event": "undo", "target": target})  # 3 (raw:
    # append_event refuses such a target)
    w.append_event("redo", target=[1, 2])                      # 4: fine
    w.close()
    code, fs = findings("--store", str(path), "--deep")
    assert [(f["code"], f["seq"], f["line"], f["session_id"]) for f in fs] == [
        ("session.bad_target", seq, seq + 1, "u")]
    assert code == 1
    # the default mode does not parse every event line of every transcript
    assert findings("--store", str(path))[1] == []


def test_the_demo_has_no_bad_target(demo_template, tmp_path):
    from .builders import copy_demo

    store = copy_demo(demo_template, tmp_path / "demo")
    found, _ = validate_store(store_at(store), deep=True, parallel=False)
    assert not [f for f in found if f.code == "session.bad_target"]


# ---------------------------------------------------------------- every code, once


def _format_codes() -> set[str]:
    text = (REPO / "docs" / "FORMAT.md").read_text()
    section = text[text.index("## Validate findings"):]
    return set(re.findall(r"^\| `([a-z0-9_.]+)`", section, re.M))


def _unreadable_notes(config_dir: Path, monkeypatch) -> list:
    """layout.unreadable: the notes/ directory cannot be listed (simulated: the
    suite may run as root, which lists any directory)."""
    import errno


    path = build_clean(config_dir, "unread-0123456789ab")
    os.makedirs(path / "notes", mode=0o700)
    real = os.scandir

    def scandir(p=".", *a):   # only path listings: the snapshot's rmtree lists by fd
        if isinstance(p, (str, os.PathLike)) and os.fspath(p).endswith("/notes"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
        return real(p, *a)

    monkeypatch.setattr(os, "scandir", scandir)  # the os module audit.run lists with
    try:
        return validate_store(store_at(path), parallel=False)[0]
    finally:
        monkeypatch.undo()


def _epoch_ahead(config_dir: Path) -> list:
    path = build_clean(config_dir, "ahead-0123456789ab")
    lines = [_hdr("ahead", "ahead-0123456789ab"), _msg(1),
             orjson.dumps({"seq": 2, "type": "message", "role": "assistant", "content": "x",
                           "epoch": 3}) + b"\n"]
    _write_session(path / "sessions" / "ahead.jsonl", lines)
    return validate_store(store_at(path), parallel=False)[0]


def _ignored_event(config_dir: Path) -> list:
    """session.ignored_event: an undo whose type and name are JSON escapes."""
    path = build_clean(config_dir, "ignored-0123456789ab")
    lines = [_hdr("ign", "ignored-0123456789ab"), _msg(1),
             b'{"seq":2,"type":"\\u0065vent","\\u0065vent":"undo","target":[1,1]}\n']
    _write_session(path / "sessions" / "ign.jsonl", lines)
    return validate_store(store_at(path), deep=True, parallel=False)[0]


def _rolled_back(config_dir: Path) -> list:
    """db.rolled_back: memctl's mark (outside the store) says generation 1, the
    store has no database."""
    from lecode_memctl.core import seen

    path = build_clean(config_dir, "rolled-0123456789ab")
    state = config_dir / "state"
    seen.record(state, path, 1, 1)
    return validate_store(store_at(path), parallel=False, state=state)[0]


def _forgotten_present(config_dir: Path) -> list:
    """db.forgotten_fact_present: a live fact whose id is in forgotten (its
    marker written by hand; the generation raised with it, so the counts
    agree, and no generated message for it to hide)."""
    import sqlite3

    from lecode_memctl.core.facts import FactStore

    path = config_dir / "memory" / "forgot-0123456789ab"
    store = store_at(path)
    ss = SessionStore(store)
    w = ss.create("f1")
    w.append_message("user", "We deploy on Fridays.")
    w.close()
    fs = FactStore(store.facts_db)
    fact = fs.remember("We deploy on Fridays.", ss.source_snapshot("f1", 1, 1).ref,
                       sessions=ss).fact
    fs.close()
    db = sqlite3.connect(store.facts_db)
    with db:
        db.execute("INSERT INTO forgotten VALUES (?, 1)", (fact.fact_id,))
        db.execute("UPDATE meta SET value = 1 WHERE key = 'generation'")
    db.close()
    return validate_store(store, parallel=False)[0]


def _malformed_exclusion(config_dir: Path) -> list:
    """db.malformed_exclusion: an exclusion whose session id is a BLOB (of a
    session the store does not have, so it hides nothing here)."""
    import sqlite3

    path = build_clean(config_dir, "badexcl-0123456789ab")
    db = sqlite3.connect(path / "facts.sqlite3")
    with db:
        db.execute("INSERT INTO exclusions VALUES (CAST('s9' AS BLOB), 5, 0)")
    db.close()
    return validate_store(store_at(path), parallel=False)[0]


def _shape(config_dir: Path, name: str, line: bytes) -> list:
    """A record the store contract does not have (tests/test_transcript_shapes_1207.py):
    one deep finding."""
    slug = f"{name}-0123456789ab"
    path = build_clean(config_dir, slug)
    _write_session(path / "sessions" / "sh.jsonl", [_hdr("sh", slug), _msg(1), line + b"\n"])
    return validate_store(store_at(path), deep=True, parallel=False)[0]


SHAPES = {
    "second_header": b'{"seq":2,"type":"session","format":1,"session_id":"sh",'
                     b'"project":"evil-0123456789ab","created":"2026-12-01T09:00:00+00:00"}',
    "unknown_type": b'{"seq":2,"type":"bogus"}',
    "unknown_role": b'{"seq":2,"type":"message","role":"wizard","content":"x"}',
    "unknown_event": b'{"seq":2,"type":"event","event":"nonsense"}',
}


def test_every_code_of_the_format_table_is_planted_and_found_exactly_once(config_dir, monkeypatch):
    """One run per fixture; each code of the FORMAT.md table is found exactly once
    in a fixture that plants it, and the planted store holds nothing else."""
    assert _format_codes() == set(CODES)
    runs: dict[str, Counter] = {}
    planted = build_planted(config_dir)
    runs["planted"] = Counter(f.code for f in validate_store(
        store_at(planted), config_dir=config_dir, deep=True, parallel=False)[0])
    assert runs["planted"] == Counter(list(PLANTED)), runs["planted"]
    for name, p in build_db_stores(config_dir).items():
        runs[name] = Counter(f.code for f in validate_store(store_at(p), parallel=False)[0])
    bad_config = config_dir / "bad-config"
    os.makedirs(bad_config)
    (bad_config / "config.toml").write_text("[memory\n")
    runs["config"] = Counter(f.code for f in validate_store(
        store_at(build_clean(config_dir, "cfg-0123456789ab")), config_dir=bad_config,
        parallel=False)[0])
    runs["unreadable"] = Counter(f.code for f in _unreadable_notes(config_dir, monkeypatch))
    runs["ahead"] = Counter(f.code for f in _epoch_ahead(config_dir))
    runs["rolled_back"] = Counter(f.code for f in _rolled_back(config_dir))
    runs["ignored"] = Counter(f.code for f in _ignored_event(config_dir))
    runs["malformed_exclusion"] = Counter(f.code for f in _malformed_exclusion(config_dir))
    runs["forgotten_present"] = Counter(f.code for f in _forgotten_present(config_dir))
    for name, line in SHAPES.items():
        runs[name] = Counter(f.code for f in _shape(config_dir, name.replace("_", ""), line))
    for code in sorted(CODES):
        hits = {name: c[code] for name, c in runs.items() if c[code]}
        assert list(hits.values()) == [1], (code, hits)
    for name, c in runs.items():
        if name != "planted":
            assert sum(c.values()) == 1, (name, c)


def test_new_codes_are_deep_only_and_documented():
    for code, sev in (("compact.legacy", "info"), ("compact.lineage_not_cumulative", "error"),
                      ("session.bad_target", "error")):
        assert CODES[code].severity == sev and CODES[code].deep_only
    text = (REPO / "docs" / "FORMAT.md").read_text()
    assert "`compact.legacy` *(deep)* | info" in text
    assert "`session.bad_target` *(deep)* | error" in text


def test_a_deeply_nested_target_is_reported_not_a_crash(config_dir):
    path = build_clean(config_dir)
    deep_target = b"[" * 600 + b"]" * 600
    _write_session(path / "sessions" / "n.jsonl", [
        _hdr("n"), _msg(1), b'{"seq":2,"type":"event","event":"undo","target":' + deep_target + b"}\n"])
    code, fs = findings("--store", str(path), "--deep")
    assert [(f["code"], f["seq"]) for f in fs] == [("session.bad_target", 2)] and code == 1
    assert "deeply nested list" in fs[0]["message"]


@pytest.mark.parametrize("bad_sid", [[1], {"a": 1}, None, 7])
def test_lineage_chunk_whose_session_id_is_not_a_string_is_a_finding_not_a_crash(config_dir, bad_sid):
    """A chunk {"session_id": [1], ...} crashed validate --deep with exit 70
    (an unhashable key in the chunk memo); it is a malformed reference."""
    path = build_clean(config_dir)
    ss, w = _session(path, "odd")
    ref = _ref(ss, "odd", 1, 2)
    ref["session_id"] = bad_sid
    c = _compact(w, [ref], None)                                     # 3
    w.close()
    got = deep(path)
    assert got and all(seq == c for _code, _sev, seq, _reason in got), got
    assert {code for code, *_ in got} <= {"compact.lineage_stale", "compact.lineage_not_cumulative"}, got
