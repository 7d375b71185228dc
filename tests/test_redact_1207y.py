"""Findings of the review of 2026-12-07 of redact's "a picked value is
erased wherever it is": a fact holding the value only inside a marker, a
file named both done and not done after an interrupt, transcripts holding
no value searched once per value form."""

from __future__ import annotations

from pathlib import Path

import orjson

from . import secretstore
from .conftest import run_cli


def _cli(store: Path, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


# -- 1. a value inside a marker is no occurrence, in a fact's text too

def _marker_store(base: Path) -> tuple[secretstore.Planted, str, str]:
    """The planted store, a password URL whose password is ``github-token``,
    and a fact and a note holding an earlier run's marker (``github-token``
    in it; a password of 8 characters or more, which redact looks for
    everywhere: a shorter one only where a detector found it, review rv7)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    p = secretstore.build(base, seed=1)
    (p.store / "notes" / "url.md").write_text(
        "# n\n\nconnect: postgres://deploy:github-token@db.internal:5432/app\n")
    (p.store / "notes" / "old.md").write_text("# o\n\nearlier: [REDACTED:github-token:abc123]\n")
    fs = FactStore(store_at(p.store).facts_db)
    try:
        marked = fs.add("the old key was [REDACTED:github-token:abc123]").fact.fact_id
        word = fs.add("the team uses github-token daily").fact.fact_id
    finally:
        fs.close()
    return p, marked, word


def test_a_fact_holding_the_value_only_in_a_marker_is_not_forgotten(tmp_path):
    """The plan forgets the fact that holds ``github-token`` bare, never the
    one holding it only inside a marker (as the note with that marker is
    left alone); the run does what the plan says, exit 0, the marked fact
    still there, no "cannot erase"."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    p, marked, word = _marker_store(tmp_path)
    r = _cli(p.store, "redact", "--dry-run", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    plan = orjson.loads(r.stdout)["plan"]
    assert word in plan["forget_facts"], plan["forget_facts"]
    assert marked not in plan["forget_facts"], plan["forget_facts"]
    assert "notes/old.md" not in {f["file"] for f in plan["files"]}
    r = _cli(p.store, "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    doc = orjson.loads(r.stdout)
    assert marked not in doc["result"]["forgotten"]
    assert word in doc["result"]["forgotten"]
    assert "cannot erase" not in r.stderr
    fs = FactStore.open_readonly(store_at(p.store).facts_db)
    try:
        assert fs.get(marked) is not None
    finally:
        fs.close()


def test_the_check_after_a_run_skips_a_value_inside_a_marker(tmp_path):
    """The check of the database after a run: a cell holding the value only
    inside a marker leaves nothing; one holding it bare, or bare beside a
    marker, does."""
    import sqlite3

    from lecode_memctl.core import redact

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a)")
    db.execute("INSERT INTO t VALUES ('was [REDACTED:github-token:abc123]')")
    assert redact._found_in_rows(db, ["token"], set(), None) == []
    db.execute("INSERT INTO t VALUES ('[REDACTED:github-token:abc123] token')")
    assert redact._found_in_rows(db, ["token"], set(), None) == ["token"]


# -- 2. an interrupt right after a file is counted names it done only

def test_an_interrupt_right_after_a_file_is_counted_names_it_once(tmp_path, monkeypatch):
    """Interrupted just after the first file is added to the files done
    (before it is taken off the ones to do): the message names it as
    already redacted, and never among the ones not done."""
    import pytest

    from lecode_memctl.core import redact
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import scan_store

    p = secretstore.build(tmp_path, seed=1)
    st = store_at(p.store)
    plan = redact.plan_redaction(st, scan_store(st).findings)
    first = plan.files[0].file

    class StopAfterFirst(list):
        def append(self, item):
            super().append(item)
            if isinstance(item, str) and len(self) == 1:
                raise KeyboardInterrupt

    real_init = redact.RedactResult.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.files = StopAfterFirst()

    monkeypatch.setattr(redact.RedactResult, "__init__", init)
    with pytest.raises(KeyboardInterrupt) as e:
        redact.apply_redaction(st, plan)
    progress = e.value.progress
    done, _sep, rest = progress.partition("; not done: ")
    assert f"already redacted: {first}" in done, progress
    assert first not in rest, progress


# -- 3. a transcript holding no value is searched once per form, never line by line

def _transcript(sid: str, *contents: str) -> bytes:
    lines = [orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                           "project": "store", "created": "2026-05-03T10:00:00Z"})]
    lines += [orjson.dumps({"seq": i, "type": "message", "role": "user", "content": c})
              for i, c in enumerate(contents, 1)]
    return b"\n".join(lines) + b"\n"


def test_a_transcript_holding_no_value_is_not_rewritten_line_by_line(tmp_path, monkeypatch):
    """The plan hands only the transcripts that may hold a value (a form's
    bytes, or a ``\\u`` or ``\\/`` escape that could spell one) to the
    line-by-line rewrite; one with neither (other escapes, ``\\n``, ``\\"``,
    are no way to spell a value but its JSON form) is passed over after one
    search of the whole file per form.  One spelling the value with ``\\u``
    escapes only is still found and rewritten."""
    from lecode_memctl.core import redact
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import scan_store

    p = secretstore.build(tmp_path, seed=1)
    key = next(v for v in p.values.values() if v.startswith("AKIA"))
    (p.store / "sessions" / "s-clean.jsonl").write_bytes(
        _transcript("s-clean", "plain words", 'a "quoted"\nline\twith\\escapes'))
    spelled = "".join(f"\\u{ord(c):04x}" for c in key)
    (p.store / "sessions" / "s-escaped.jsonl").write_bytes(
        _transcript("s-escaped", "filler").replace(b"filler", b"key " + spelled.encode()))
    seen: list[bytes] = []
    real = redact.rewrite_transcript

    def counted(data: bytes, values, *more):
        seen.append(data)
        return real(data, values, *more)

    monkeypatch.setattr(redact, "rewrite_transcript", counted)
    st = store_at(p.store)
    plan = redact.plan_redaction(st, scan_store(st).findings)
    rewritten = [d for d in seen if b'"session_id":"s-clean"' in d]
    assert rewritten == [], "s-clean went through the line-by-line rewrite"
    assert any(b'"session_id":"s-escaped"' in d for d in seen)
    files = {f.file: f for f in plan.files}
    assert "sessions/s-clean.jsonl" not in files
    assert files["sessions/s-escaped.jsonl"].records == [1]
    assert plan.kept == [] or all("s-clean" not in str(k) for k in plan.kept)
