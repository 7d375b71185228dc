"""``memctl sessions`` in id order (its default) reads the transcripts as it
prints their rows: ``--limit 5`` reads five, not every one (20,000 sessions
took 2.9 s), and memory does not hold a row per session.  Any other
``--sort`` still reads them all first.  The rows and their order are those
of the whole listing sorted by id."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import sessions as sessions_mod
from lecode_memctl.core.layout import store_at

from .conftest import run_cli

SLUG = "proj-0123456789ab"


def _store(tmp_path: Path) -> Path:
    store = store_at(tmp_path / "memory" / SLUG)
    d = store.sessions_dir
    d.mkdir(parents=True)
    # ids whose file names sort otherwise than the ids ('.' after '-')
    ids = ["a", "a-", "a-b", "a.b", "b", "2026-01-01-0001", "2026-01-01-0001-x", "zz"]
    for i, sid in enumerate(ids):
        hdr = {"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
               "created": f"2026-01-0{1 + i % 9}T00:00:00Z"}
        recs = [hdr] + [{"seq": n, "type": "message", "role": "user", "content": f"m{n}"}
                        for n in range(1, 2 + i)]
        (d / f"{sid}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    (d / "bad name!.jsonl").write_bytes(b"not a transcript\n")      # an invalid id
    (d / "other-project.jsonl").write_bytes(
        orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "other-project",
                      "project": "x-0123456789ab", "created": "2026-01-01T00:00:00Z"}) + b"\n")
    (d / "notes.txt").write_bytes(b"not a session\n")
    return store.path


def _sessions(store: Path, *args: str) -> tuple[int, bytes, str]:
    r = run_cli("--store", str(store), "--no-state", "sessions", *args)
    return r.exit_code, r.stdout_bytes, r.stderr


def _whole_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing as it was made: every row read, then sorted by id (what
    the command did with them in its default order)."""
    monkeypatch.setattr(sessions_mod.SessionStore, "iter_sessions",
                        lambda self: iter(sorted(self.list_sessions(),
                                                 key=lambda i: i.to_json()["id"])))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv", "table", "plain"])
@pytest.mark.parametrize("window", [(), ("--limit", "3"), ("--offset", "2", "--limit", "4"),
                                    ("--offset", "9"), ("--sort", "-id"),
                                    ("--sort", "created", "--limit", "2"),
                                    ("--since", "2000-01-01", "--limit", "2")])
def test_the_rows_are_those_of_the_whole_listing(tmp_path, monkeypatch, fmt, window):
    store = _store(tmp_path)
    got = _sessions(store, "--format", fmt, *window)
    with pytest.MonkeyPatch.context() as mp:
        _whole_sorted(mp)
        want = _sessions(store, "--format", fmt, *window)
    assert got == want
    assert got[0] == 0


def test_a_page_reads_its_own_sessions_only(tmp_path, monkeypatch):
    store = _store(tmp_path)
    read: list[str] = []
    real = sessions_mod.SessionStore._info

    def counted(self, sid):  # noqa: ANN001, ANN202
        read.append(sid)
        return real(self, sid)

    monkeypatch.setattr(sessions_mod.SessionStore, "_info", counted)
    code, out, _err = _sessions(store, "--format", "jsonl", "--limit", "3")
    assert code == 0 and len(out.splitlines()) == 3
    assert len(read) == 3
    read.clear()
    _sessions(store, "--format", "jsonl", "--sort", "-id", "--limit", "3")
    assert len(read) == 10          # (another order: every session, then sorted)


def test_an_unlistable_sessions_directory_is_the_error_before_any_output(tmp_path):
    store = _store(tmp_path)
    sessions = store / "sessions"
    for p in sessions.iterdir():
        p.unlink()
    sessions.rmdir()
    sessions.write_bytes(b"a file where sessions/ should be")
    for fmt in ("jsonl", "json", "csv"):
        code, out, err = _sessions(store, "--format", fmt)
        with pytest.MonkeyPatch.context() as mp:
            _whole_sorted(mp)
            assert (code, out, err) == _sessions(store, "--format", fmt)
        assert code != 0 or out in (b"", b"[]\n")
