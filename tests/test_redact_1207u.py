"""Findings of the reviews of 2026-12-07 (secrets and redact; the write
commands under signals): plain copies of an erased value where no detector
fired, an interrupt right after the first rename, the -wal and -shm the
checks after a run left, JSON-escaped values on a line that is no object."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


# -- 2. an interrupt (or an error) right after a file's rename names that file

_KILL_AFTER_RENAME = """\
import os, signal, sys
SIG = getattr(signal, sys.argv.pop(1))
_real = os.replace
def replace(src, dst, *a, **k):
    r = _real(src, dst, *a, **k)
    if str(dst).endswith(".jsonl"):
        os.kill(os.getpid(), SIG)
    return r
os.replace = replace
sys.argv = ["memctl"] + sys.argv[1:]
from lecode_memctl.cli.main import main
raise SystemExit(main())
"""


def _one_key_store(base: Path) -> tuple[Path, str]:
    """A store with one transcript holding an AWS key."""
    key = "AKIAQWERTYUIOPASDFGH"
    s = base / "p-0123456789ab"
    (s / "sessions").mkdir(parents=True)
    (s / "sessions" / "s1.jsonl").write_text(
        '{"seq":0,"type":"session","format":1,"session_id":"s1","project":"p-0123456789ab",'
        '"created":"2026-12-01T09:00:00+00:00"}\n'
        f'{{"seq":1,"type":"message","role":"user","content":"key {key}"}}\n')
    return s, key


@pytest.mark.parametrize(("sig", "status", "said"), [("SIGTERM", 143, "terminated by SIGTERM"),
                                                     ("SIGINT", 130, "interrupted")])
def test_a_signal_right_after_the_first_rename_names_the_file(tmp_path, sig, status, said):
    """A real signal just after the transcript's rename (before redact
    counted it): the message names the file as redacted, never a bare
    "terminated by SIGTERM" (or, with --json, "interrupted")."""
    import subprocess
    import sys

    store, key = _one_key_store(tmp_path)
    script = tmp_path / "killafter.py"
    script.write_text(_KILL_AFTER_RENAME)
    r = subprocess.run([sys.executable, str(script), sig, "--store", str(store), "--no-state",
                        "redact", "--yes", "--json"],
                       capture_output=True, text=True, timeout=120)
    # (memctl ends as for any interrupt: 130, or killed by SIGTERM again, 143)
    assert r.returncode in (status, 128 - status), (r.stdout, r.stderr)
    assert key not in (store / "sessions" / "s1.jsonl").read_text()
    message = orjson.loads(r.stdout)["error"]["message"]
    assert message.startswith(f"{said}; "), message
    assert "already redacted: sessions/s1.jsonl" in message, message
    assert "nothing was changed" not in message and "Traceback" not in r.stderr


def _stop(monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from lecode_memctl.cli import output

    monkeypatch.setattr(output._SIG, "terminated", signal.SIGTERM)
    raise KeyboardInterrupt


def test_an_interrupt_after_the_first_rename_names_it_with_the_rest(tmp_path, monkeypatch):
    """The planted store: interrupted right after its first transcript is
    written, the message names it redacted, and what is not done."""
    from lecode_memctl.core import atomic

    p = secretstore.build(tmp_path, seed=5)
    real = atomic.atomic_write

    def write_then_stop(path: Any, *args: Any, **kwargs: Any) -> Any:
        real(path, *args, **kwargs)
        _stop(monkeypatch)

    monkeypatch.setattr(atomic, "atomic_write", write_then_stop)
    r = _cli(p.store, "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 143, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("memctl: error: terminated by SIGTERM; already redacted: "
                           "sessions/s-forgot.jsonl; not done: sessions/s-main.jsonl"), line
    assert line.endswith("run redact again to finish"), line


def test_an_error_after_the_first_rename_names_the_file(tmp_path, monkeypatch):
    """A write whose rename happened and whose last step failed (the new
    content in place, exit 7): the file is named as redacted."""
    from lecode_memctl.core import atomic
    from lecode_memctl.core.errors import StoreWriteError

    store, _key = _one_key_store(tmp_path)
    real = atomic.atomic_write

    def write_then_fail(path: Any, *args: Any, **kwargs: Any) -> Any:
        real(path, *args, **kwargs)
        raise StoreWriteError(f"{path}: the new content is in place, but the final step "
                              "failed (Input/output error); it may not survive a crash")

    monkeypatch.setattr(atomic, "atomic_write", write_then_fail)
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 7, r.stderr
    (line,) = r.stderr.splitlines()
    assert "already redacted: sessions/s1.jsonl" in line, line
    assert "run redact again to finish" in line, line


def test_a_file_neither_old_nor_new_after_an_interrupt_is_possibly_redacted(tmp_path,
                                                                           monkeypatch):
    """When the file holds neither its old nor its new bytes (written again
    meanwhile), the message says it was possibly redacted."""
    from lecode_memctl.core import atomic

    store, _key = _one_key_store(tmp_path)
    real = atomic.atomic_write

    def write_then_stop(path: Any, *args: Any, **kwargs: Any) -> Any:
        real(path, *args, **kwargs)
        with open(path, "ab") as fh:
            fh.write(b'{"seq":2,"type":"message","role":"user","content":"hi"}\n')
        _stop(monkeypatch)

    monkeypatch.setattr(atomic, "atomic_write", write_then_stop)
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 143, r.stderr
    (line,) = r.stderr.splitlines()
    assert "possibly redacted: sessions/s1.jsonl" in line, line
    assert "run redact again to finish" in line, line


# -- 3. the checks after a run leave no -wal nor -shm in the store

def test_redact_of_transcripts_only_leaves_no_new_file_in_the_store(tmp_path):
    """A store whose only secret is in a transcript (its facts quote none):
    after redact --yes the store holds the files it held, no new
    facts.sqlite3-wal or -shm (the checks' read-only connection made
    them)."""
    from lecode_memctl.core import open_project

    store = tmp_path / "store"
    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    with open_project(store=store) as p:
        with p.sessions.create("s1") as w:
            w.append_message("user", f"my token is {token}")
            s = w.append_message("user", "we use tabs")
        p.remember("We use tabs.", p.sessions.source_snapshot("s1", s, s).ref)
    (store / "MEMORY.md").write_text(f"# memory\n\ntoken {token}\n")
    before = sorted(os.listdir(store))
    assert "facts.sqlite3" in before and "facts.sqlite3-wal" not in before
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert sorted(os.listdir(store)) == before
    assert _files_holding(store, token) == []


# -- 4. a JSON-escaped value on a line that parses as JSON but is no object

_ODD = ["AKIAZXCVBNMLKJHGFD34", "AKIAPOIUYTREWQLKJH56"]


def _odd_store(base: Path) -> Path:
    """A transcript whose line 2 is a JSON string and line 3 an array, each
    holding an AWS key spelled with a JSON escape (``\\u0041KIA...``)."""
    from lecode_memctl.core import open_project

    store = base / "store"
    with open_project(store=store) as p, p.sessions.create("s-odd") as w:
        w.append_message("user", "hello")
    with open(store / "sessions" / "s-odd.jsonl", "ab") as fh:
        fh.write(b'"a json string line \\u0041' + _ODD[0][1:].encode() + b'"\n')
        fh.write(b'["array", "\\u0041' + _ODD[1][1:].encode() + b'", 1e2]\n')
    return store


def test_escaped_values_on_a_line_that_is_no_object_are_found(tmp_path):
    store = _odd_store(tmp_path)
    r = _cli(store, "secrets", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    lines = sorted(f["line"] for f in orjson.loads(r.stdout)["findings"]
                   if f["detector"] == "aws-access-key")
    assert lines == [3, 4], lines


def test_escaped_values_on_a_line_that_is_no_object_are_erased(tmp_path):
    store = _odd_store(tmp_path)
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    data = (store / "sessions" / "s-odd.jsonl").read_bytes()
    decoded = data.decode().replace("\\u0041", "A")
    assert not any(v in decoded for v in _ODD)
    rows = data.splitlines()
    # (the lines stay JSON, every other byte kept)
    assert orjson.loads(rows[2]).startswith("a json string line [REDACTED:aws-access-key:")
    assert rows[3].startswith(b'["array", "[REDACTED:aws-access-key:') and rows[3].endswith(b'", 1e2]')
    assert _cli(store, "secrets").exit_code == 0
