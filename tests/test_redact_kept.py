"""Values redact cannot erase, said as they are: a credential in a file's
name (shown masked everywhere, a finding of its own, kept), and a session
id the database's live rows name (kept, exit 1, never "redacted")."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

NAME_KEY = "AKIAZ7QWERTYUI0P1ASD"
SID_KEY = "AKIAQ3ZX7PLMNB4VC2WE"


def _store(base: Path, sid: str = "s1") -> tuple[Path, str]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create(sid, created="2026-05-01T09:00:00Z") as w:
        w.append_message("user", "We deploy with make deploy.")
    ref = SourceRef(sid, (1,), canonical_digest(sessions.records(sid, 1, 1)))
    fid = facts.add("We deploy with make deploy.", ref=ref).fact.fact_id
    facts.close()
    return Path(st.path), fid


def cli(store: Path, *args: str):
    return run_cli("--store", str(store), *args)


# ---------------------------------------------------------------- a file's name


@pytest.fixture
def named(tmp_path) -> Path:
    store, _fid = _store(tmp_path)
    notes = store / "notes"
    notes.mkdir(exist_ok=True)
    note = notes / f"{NAME_KEY}.md"
    note.write_text(f"# aws\nkey {NAME_KEY}\n")
    os.chmod(note, 0o600)
    return store


@pytest.mark.parametrize("fmt", ["table", "json", "jsonl", "csv", "tsv"])
def test_secrets_never_shows_a_value_in_a_file_name(named, fmt):
    r = cli(named, "secrets", "--format", fmt)
    assert r.exit_code == 1, r.stderr
    assert NAME_KEY not in r.stdout + r.stderr
    assert "[REDACTED:aws-access-key:" in r.stdout


def test_secrets_reports_a_value_in_a_file_name(named):
    # the name alone (the content holds nothing): still found
    note = named / "notes" / f"{NAME_KEY}.md"
    note.write_text("# aws\nnothing here\n")
    r = cli(named, "secrets", "--json")
    assert r.exit_code == 1, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    (f,) = doc["findings"]
    assert f["kind"] == "file" and f["line"] is None
    assert f["file"].startswith("notes/[REDACTED:aws-access-key:")
    assert NAME_KEY not in r.stdout


def test_redact_keeps_a_value_in_a_file_name_and_says_so(named):
    dry = cli(named, "redact", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert NAME_KEY not in dry.stdout + dry.stderr
    assert "file name" in dry.stdout
    dj = cli(named, "redact", "--dry-run", "--json")
    assert NAME_KEY not in dj.stdout + dj.stderr
    plan = orjson.loads(dj.stdout_bytes)["plan"]
    (kept,) = plan["kept"]
    assert kept["reasons"] == ["file_name"]
    assert kept["files"] == [f"notes/{plan['files'][0]['file'].split('/')[1]}"]
    assert plan["files"][0]["file"].startswith("notes/[REDACTED:aws-access-key:")

    r = cli(named, "redact", "--yes", "--json")
    assert r.exit_code == 1, r.stderr
    assert NAME_KEY not in r.stdout + r.stderr
    assert "file name" in r.stderr
    # the content is redacted, the file is not renamed
    note = named / "notes" / f"{NAME_KEY}.md"
    assert note.exists()
    assert NAME_KEY not in note.read_text()
    # secrets still reports the name, exit 1, masked
    s = cli(named, "secrets")
    assert s.exit_code == 1 and NAME_KEY not in s.stdout
    again = cli(named, "redact", "--yes")
    assert again.exit_code == 1 and NAME_KEY not in again.stdout + again.stderr


# ---------------------------------------------------------------- live rows


def test_session_id_in_live_rows_is_kept_not_redacted(tmp_path):
    store, fid = _store(tmp_path, SID_KEY)
    first = cli(store, "redact", "--yes")
    assert first.exit_code == 1, first.stderr
    assert SID_KEY not in first.stdout + first.stderr
    # the hint must not promise what cannot work
    assert "delete the session's file by hand" not in first.stderr
    # following what a user would do: forget, delete the transcript
    assert cli(store, "forget", fid, "--yes").exit_code == 0
    for suffix in (".jsonl", ".lock"):
        p = store / "sessions" / f"{SID_KEY}{suffix}"
        if p.exists():
            p.unlink()
    assert cli(store, "secrets").exit_code == 1      # the exclusions name it
    dry = cli(store, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0 and SID_KEY not in dry.stdout
    (kept,) = orjson.loads(dry.stdout_bytes)["plan"]["kept"]
    assert kept["reasons"] == ["database"]
    r = cli(store, "redact", "--yes")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert SID_KEY not in r.stdout + r.stderr
    assert "redacted 1 value" not in r.stdout
    assert "facts.sqlite3" in r.stderr
    assert cli(store, "secrets").exit_code == 1


def _forgotten_and_deleted(tmp_path):  # noqa: ANN001,ANN202
    """The store of a fact citing the session SID_KEY, the fact forgotten and
    the transcript (and its lock) deleted: the id lives on in database rows."""
    store, fid = _store(tmp_path, SID_KEY)
    assert cli(store, "forget", fid, "--yes").exit_code == 0
    for suffix in (".jsonl", ".lock"):
        p = store / "sessions" / f"{SID_KEY}{suffix}"
        if p.exists():
            p.unlink()
    return store


def test_value_left_in_live_rows_after_the_clean_is_reported(tmp_path, monkeypatch):
    """Whatever the plan missed: a value still in the database's bytes after
    the clean is kept, exit 1 (never 'redacted' with exit 0)."""
    from lecode_memctl.core import redact

    store = _forgotten_and_deleted(tmp_path)
    # a plan blind to the live rows: the check after the clean catches it
    monkeypatch.setattr(redact, "_live_session_ids", lambda fs: [])
    r = cli(store, "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    assert SID_KEY not in r.stdout + r.stderr
    assert doc["plan"]["kept"] == []
    (kept,) = doc["result"]["kept"]
    assert kept["reasons"] == ["database"]
    # (no session the plan named: the warning says where it was found)
    assert "cannot erase 1 value" in r.stderr
    assert "the facts database's files, after their clean" in r.stderr


def test_a_kept_row_gains_the_database_reason_the_clean_leaves(tmp_path, monkeypatch):
    """A value kept for its file name and left in a live row the plan did
    not read: the result's row says both, the plan's row is the plan's."""
    from lecode_memctl.core import redact

    store = _forgotten_and_deleted(tmp_path)
    note = store / "notes" / f"{SID_KEY}.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("nothing\n")
    os.chmod(note, 0o600)
    monkeypatch.setattr(redact, "_live_session_ids", lambda fs: [])
    r = cli(store, "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert SID_KEY not in r.stdout + r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert [k["reasons"] for k in doc["plan"]["kept"]] == [["file_name"]]
    assert [k["reasons"] for k in doc["result"]["kept"]] == [["file_name", "database"]]


def test_a_transcript_name_its_records_do_not_hold_is_reported_once(tmp_path):
    """A transcript's name is reported through its header; a name its
    records do not hold (a header naming another session) is reported for
    the name, masked; a session id the header holds is not reported twice."""
    store, _fid = _store(tmp_path, SID_KEY)
    r = cli(store, "secrets", "--json")
    found = orjson.loads(r.stdout_bytes)["findings"]
    assert sorted(f["kind"] for f in found) == ["database", "transcript"], found
    odd = store / "sessions" / f"{NAME_KEY}.jsonl"
    odd.write_bytes(b'{"seq":0,"type":"session","session_id":"s9","project":"p","format":1}\n')
    os.chmod(odd, 0o600)
    r = cli(store, "secrets", "--json")
    assert r.exit_code == 1 and NAME_KEY not in r.stdout
    names = [f for f in orjson.loads(r.stdout_bytes)["findings"] if f["line"] is None
             and f["kind"] == "file"]
    assert [f["file"] for f in names] == ["sessions/[REDACTED:aws-access-key:37a4b1].jsonl"]


def test_the_check_after_the_clean_never_waits_on_a_fifo(tmp_path):
    """A FIFO where a database file would be is no file of SQLite's: the
    check reads regular files only (an open of a FIFO no process writes
    would wait for ever)."""
    from lecode_memctl.core import redact
    from lecode_memctl.core.layout import store_at

    store = tmp_path / "store"
    store.mkdir()
    (store / "facts.sqlite3").write_bytes(b"x " + SID_KEY.encode())
    os.mkfifo(store / "facts.sqlite3-journal")
    assert redact._left_in_database(store_at(store), [SID_KEY, NAME_KEY]) == [SID_KEY]
