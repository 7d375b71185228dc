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


def _export_peak(store: Path, out: Path) -> tuple[int, bytes]:
    from lecode_memctl.core.bundle import export_bundle

    def run() -> bytes:
        with open(out, "wb") as fh:
            res = export_bundle(store_at(store), fh, now=1_800_000_000.0)
        res.close()
        return res.manifest_sha256.encode()

    if out.exists():
        out.unlink()
    digest, peak = traced_peak(run)
    return peak, digest


def test_export_memory_per_session_is_small(tmp_path: Path) -> None:
    small = _many_sessions(tmp_path / "a", 500)
    large = _many_sessions(tmp_path / "b", 3000)
    _export_peak(small, tmp_path / "w.tar")     # (imports: not counted below)
    p_small, _ = _export_peak(small, tmp_path / "a.tar")
    p_large, _ = _export_peak(large, tmp_path / "b.tar")
    per = (p_large - p_small) / 2500
    # what must stay per file: the manifest's entry (a dict, its path and
    # digest) and its bytes, the staged name; no DirEntry, no TarInfo
    assert per < 1150, per  # (1,331 with a DirEntry, a dict and a TarInfo per file; 1,018 since)


def test_export_manifest_unchanged_on_many_sessions(tmp_path: Path) -> None:
    import hashlib
    import tarfile

    store = _many_sessions(tmp_path / "s", 200)
    (store / "notes").mkdir(mode=0o700)
    (store / "notes" / "n1.md").write_text("note\n")
    (store / "sessions" / "stray.txt").write_text("x")
    first = _export_peak(store, tmp_path / "a.tar")[1]
    assert first == _export_peak(store, tmp_path / "b.tar")[1]
    with tarfile.open(tmp_path / "a.tar") as tf:
        files = [m.name for m in tf.getmembers() if m.isfile()]
        manifest = tf.extractfile("manifest.json").read()  # type: ignore[union-attr]
    assert hashlib.sha256(manifest).hexdigest().encode() == first
    doc = orjson.loads(manifest)
    assert files[0] == "manifest.json"
    assert [f["path"] for f in doc["files"]] == files[1:]
    assert files[1:3] == ["store/MEMORY.md", "store/notes/n1.md"]
    assert len(files) == 203
    assert doc["skipped"] == [{"path": "sessions/stray.txt", "reason": "not_in_layout"}]
