"""Findings of the reviews of 2026-12-07 (secrets and redact; the write
commands under signals): plain copies of an erased value where no detector
fired, an interrupt right after the first rename, the -wal and -shm the
checks after a run left, JSON-escaped values on a line that is no object."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from . import secretstore
from .conftest import run_cli


def _cli(store: Path, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


def _files_holding(root: Path, value: str) -> list[str]:
    """The store's files whose bytes hold ``value`` (as UTF-8 or
    JSON-escaped), relative to ``root``; never the value itself."""
    forms = {value.encode(), orjson.dumps(value)[1:-1]}
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if any(f in path.read_bytes() for f in forms):
                out.append(str(path.relative_to(root)))
    return sorted(out)


# -- 1. a value erased wherever it is, found by a detector or not

@pytest.fixture
def bare_copies(tmp_path) -> tuple[secretstore.Planted, str]:
    """The planted store (a password URL in s-main seq 6 and in a fact's
    text) and the bare password repeated without its URL, where no detector
    finds it: in a note, in a message of s-other, in a fact's text."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    p = secretstore.build(tmp_path, seed=1)
    pw = p.values["password"]
    (p.store / "notes" / "bare.md").write_text(f"# n\n\nthe db password alone: {pw}\n")
    with open(p.store / "sessions" / "s-other.jsonl", "ab") as fh:
        fh.write(orjson.dumps({"seq": 2, "type": "message", "role": "user",
                               "content": f"the db pw is {pw}"}) + b"\n")
    fs = FactStore(store_at(p.store).facts_db)
    try:
        p.facts["bare"] = fs.add(f"the pw alone is {pw}").fact.fact_id
    finally:
        fs.close()
    return p, pw


def test_the_plan_names_every_copy_of_a_picked_value(bare_copies):
    """The dry run lists the files and the fact that hold the bare password
    (no detector fired there), and keeps nothing."""
    p, pw = bare_copies
    r = _cli(p.store, "redact", "--dry-run", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    plan = orjson.loads(r.stdout)["plan"]
    files = {f["file"]: f for f in plan["files"]}
    assert "notes/bare.md" in files, sorted(files)
    assert files["notes/bare.md"]["replacements"] == 1
    assert files["notes/bare.md"]["lines"] == 1
    assert "sessions/s-other.jsonl" in files, sorted(files)
    assert files["sessions/s-other.jsonl"]["records"] == [2]
    assert p.facts["bare"] in plan["forget_facts"], plan["forget_facts"]
    assert p.facts["password"] in plan["forget_facts"]
    assert plan["kept"] == []
    assert pw not in r.stdout + r.stderr


def test_redact_erases_every_copy_and_the_store_is_clean_after(bare_copies):
    """The run does what the plan says: every copy erased, exit 0, nothing
    kept, `secrets` clean, a rerun has nothing to do; never "cannot
    erase" for the fact the plan did not name."""
    p, pw = bare_copies
    plan = orjson.loads(_cli(p.store, "redact", "--dry-run", "--json").stdout)["plan"]
    r = _cli(p.store, "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    doc = orjson.loads(r.stdout)
    assert doc["result"]["kept"] == [] == plan["kept"]
    assert "notes/bare.md" in doc["result"]["files"]
    assert "sessions/s-other.jsonl" in doc["result"]["files"]
    assert p.facts["bare"] in doc["result"]["forgotten"]
    assert sorted(doc["result"]["forgotten"]) == sorted(plan["forget_facts"])
    assert _files_holding(p.store, pw) == []
    assert "cannot erase" not in r.stderr and pw not in r.stdout + r.stderr
    s = _cli(p.store, "secrets")
    assert s.exit_code == 0, (s.stdout, s.stderr)
    again = _cli(p.store, "redact", "--yes")
    assert again.exit_code == 0 and "nothing to redact" in again.stdout + again.stderr, \
        (again.stdout, again.stderr)


def test_a_copy_in_a_file_only_is_erased_and_counted(tmp_path):
    """Human output: the values counted as redacted are erased everywhere
    (before, "redacted N values", exit 0, with the note still holding one)."""
    p = secretstore.build(tmp_path, seed=2)
    pw = p.values["password"]
    (p.store / "MEMORY.md").write_text(f"# memory\n\npassword: {pw}\n")
    r = _cli(p.store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "MEMORY.md" in r.stdout
    assert _files_holding(p.store, pw) == []


def test_a_copy_in_an_older_revision_of_a_fact_forgets_it(tmp_path):
    """A fact whose earlier revision quoted the value (corrected since) is
    forgotten too: any revision's text."""
    from lecode_memctl.core import open_project

    p = secretstore.build(tmp_path, seed=3)
    pw = p.values["password"]
    with open_project(store=p.store) as proj:
        ref = proj.sessions.source_snapshot("s-other", 1, 1).ref
        fid = proj.remember(f"pw {pw}", ref).fact.fact_id
        proj.correct(fid, "the password was rotated", expected_revision=1, ref=ref)
    plan = orjson.loads(_cli(p.store, "redact", "--dry-run", "--json").stdout)["plan"]
    assert fid in plan["forget_facts"]
    r = _cli(p.store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert _files_holding(p.store, pw) == []
