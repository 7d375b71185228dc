"""Memory that follows the number of sessions (a store of many small
transcripts): the layout check of ``validate`` keeps the sorted names of a
directory, not an ``os.DirEntry`` (with its cached stat) per entry, and
the audit's findings are those of before.  Measured with tracemalloc (what
the interpreter allocates), at two sizes: no timing, no RSS."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from lecode_memctl.core.audit import Audit
from lecode_memctl.core.layout import store_at

from .builders import SLUG, traced_peak


def _many_sessions(base: Path, n: int) -> Path:
    """A store of ``n`` transcripts of one small record each (mode 0600)."""
    store = base / SLUG
    sessions = store / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    os.chmod(store, 0o700)
    (store / "MEMORY.md").write_text("# mem\n")
    os.chmod(store / "MEMORY.md", 0o600)
    for i in range(n):
        sid = f"s{i:07d}"
        hdr = {"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
               "created": "2026-12-01T09:00:00+00:00"}
        msg = {"seq": 1, "type": "message", "role": "user", "content": "hello world"}
        p = sessions / f"{sid}.jsonl"
        p.write_bytes(orjson.dumps(hdr) + b"\n" + orjson.dumps(msg) + b"\n")
        os.chmod(p, 0o600)
    return store


def _findings(store: Path) -> list[bytes]:
    audit = Audit(store_at(store), parallel=False, now=1_800_000_000.0)
    return [orjson.dumps(f.to_json()) for f in audit.run()]


def _layout_peak(store: Path) -> int:
    audit = Audit(store_at(store), parallel=False)
    _, peak = traced_peak(lambda: list(audit._check_layout()))
    return peak


def test_layout_check_memory_per_session_is_small(tmp_path: Path) -> None:
    small = _many_sessions(tmp_path / "a", 500)
    large = _many_sessions(tmp_path / "b", 3000)
    _layout_peak(small)     # (imports, compiled patterns: not counted below)
    per = (_layout_peak(large) - _layout_peak(small)) / 2500
    # a sorted list of names: about 70 bytes a session; a DirEntry with its
    # cached stat result each was about 850
    assert per < 250, per


def test_validate_findings_unchanged_on_many_sessions(tmp_path: Path) -> None:
    store = _many_sessions(tmp_path / "s", 300)
    os.chmod(store / "sessions" / "s0000007.jsonl", 0o644)
    (store / "sessions" / "stray.txt").write_text("x")
    os.chmod(store / "sessions" / "stray.txt", 0o600)
    (store / "sessions" / "sub").mkdir(mode=0o700)
    os.symlink("s0000001.jsonl", store / "sessions" / "zlink.jsonl")
    got = _findings(store)
    codes = sorted(orjson.loads(f)["code"] + " " + str(orjson.loads(f)["file"]) for f in got)
    assert codes == sorted([
        "layout.permissions sessions/s0000007.jsonl",
        "layout.unexpected_file sessions/stray.txt",
        "layout.unexpected_file sessions/sub/",
        "session.refused sessions/zlink.jsonl",
    ]), codes
    assert got == _findings(store)
