"""Findings of the review of 2026-12-07's commits on ``secrets`` and ``redact``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

LIVE = "xoxb-205755947090-0547499525255-2Mq"                          # 35 chars
OTHER = "xoxb-205755947090-0547499525255-2MqtYygX0bKRVitGoPZrpulR"    # 56: begins with LIVE


def _fact_store(base: Path, *texts: str) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T09:00:00Z") as w:
        for i, _t in enumerate(texts):
            w.append_message("user", f"m{i}")
    for i, t in enumerate(texts, 1):
        ref = SourceRef("s1", (i,), canonical_digest(sessions.records("s1", i, i)))
        facts.add(t, ref=ref)
    facts.close()
    return st.path


def _secrets(store: Path, *args: str) -> tuple[int, list[dict]]:
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1", *args)
    assert r.exit_code in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r.exit_code, [f for f in map(orjson.loads, r.stdout.splitlines())
                         if f.get("type") == "secret"]


# -- 1. a different token that begins with a live fact's value is reported

def test_a_longer_token_in_a_free_page_beginning_with_a_live_fact_value_is_reported(tmp_path):
    store = _fact_store(tmp_path, f"the CI test bot token is {LIVE}.")
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("PRAGMA secure_delete = OFF")
    db.execute("CREATE TABLE junk (t TEXT)")
    db.execute("INSERT INTO junk VALUES (?)", (f"prod bot token: {OTHER}",))
    db.commit()
    db.execute("DROP TABLE junk")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert OTHER.encode() in (store / "facts.sqlite3").read_bytes()
    code, found = _secrets(store)
    assert [(f["kind"], f["length"]) for f in found if f["kind"] == "fact"] == [("fact", 35)]
    allow = tmp_path / "allow"
    allow.write_text(next(f["hash"] for f in found if f["kind"] == "fact") + "\n")
    code, found = _secrets(store, "--allowlist", str(allow))
    assert code == 1
    assert [(f["kind"], f["length"]) for f in found] == [("database", 56)], found
    assert all(OTHER not in orjson.dumps(f).decode() for f in found)


# -- 2. the check after the clean does not count the database's own schema

def _transcript_fact_store(base: Path, *texts: str) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(base / "memory" / "proj-0123456789ab")
    store.path.mkdir(parents=True, exist_ok=True)
    ss = SessionStore(store)
    with ss.create("s1") as w:
        for t in texts:
            w.append_message("user", t)
    fs = FactStore(store.facts_db)
    for i, t in enumerate(texts, 1):
        fs.add(t, ref=ss.source_snapshot("s1", i, i).ref)
    fs.close()
    return Path(store.path)


def test_a_value_that_is_a_table_name_is_redacted_not_kept(tmp_path):
    store = _transcript_fact_store(tmp_path, "db at https://admin:facts@db.example.com/x")
    dry = run_cli("--store", str(store), "--no-state", "redact", "--dry-run")
    assert dry.exit_code == 0 and "would redact 1 value" in dry.stdout, dry.stdout
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "cannot erase" not in r.stderr and "Traceback" not in r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["result"]["kept"] == []
    # the schema still says "facts"; no row does
    assert b"CREATE TABLE facts" in (store / "facts.sqlite3").read_bytes()


def test_a_value_left_in_a_live_row_of_another_table_is_still_kept(tmp_path):
    # (a password of 8 characters or more: a shorter one is erased only
    # where a detector found it, never looked for in another table; review
    # rv7, 2026-12-07)
    store = _transcript_fact_store(tmp_path, "db at https://admin:factsfacts@db.example.com/x")
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("CREATE TABLE notes_of_mine (t TEXT)")
    db.execute("INSERT INTO notes_of_mine VALUES ('xx factsfacts xx')")
    db.commit()
    db.close()
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    (kept,) = orjson.loads(r.stdout_bytes)["result"]["kept"]
    assert kept["reasons"] == ["database"]
    assert "cannot erase 1 value" in r.stderr


def test_a_value_in_a_schema_memctl_did_not_write_is_kept(tmp_path):
    key = "AKIAZ7QWERTYUI0P1ASE"
    store = _transcript_fact_store(tmp_path, f"key {key}")
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute(f'CREATE TABLE "t_{key}" (x)')
    db.commit()
    db.close()
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    (kept,) = orjson.loads(r.stdout_bytes)["result"]["kept"]
    assert kept["reasons"] == ["database"]
    assert key not in r.stdout + r.stderr


# -- 5. a number that underflows to zero keeps its bytes

def test_an_underflowing_number_keeps_its_bytes():
    from lecode_memctl.core.redact import rewrite_transcript

    line = (b'{"seq":1,"type":"message","role":"user","content":"key hunter2secret",'
            b'"meta":{"x":1e-400,"y":-1e-400,"z":0,"w":-0.0}}')
    new = rewrite_transcript(line, {"hunter2secret": "[REDACTED:x:1]"})[0]
    assert new == line.replace(b"hunter2secret", b"[REDACTED:x:1]")


# -- 4. a kept identifying field names every transcript that keeps the value

def _deploy_store(base: Path, *more: str) -> Path:
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(base / "memory" / "proj-0123456789ab")
    store.path.mkdir(parents=True, exist_ok=True)
    ss = SessionStore(store)
    with ss.create("s1") as w:
        w.append_message("user", "deploy with https://deploy:user@example.com/x please")
        w.append_message("user", "ok")
    for sid in ("s2", *more):
        with ss.create(sid) as w:
            w.append_message("user", "hello")
    (store.path / "MEMORY.md").write_text("url https://deploy:user@example.com/x\n")
    return Path(store.path)


def _kept(store: Path) -> list[dict]:
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 1, (r.stdout, r.stderr)
    return orjson.loads(r.stdout_bytes)["plan"]["kept"]


def test_a_kept_role_names_every_transcript_holding_it(tmp_path):
    # (the password ``user``, 4 characters, is erased only where a detector
    # found it, s1's record, never looked for in s2: review rv7, 2026-12-07;
    # before, s2's role was named too)
    (kept,) = _kept(_deploy_store(tmp_path))
    assert kept["session_ids"] == ["s1"]
    assert kept["reasons"] == ["identifying_field"]


def test_a_value_kept_for_a_session_id_also_gets_its_identifying_field(tmp_path):
    # (a session id ``user-9`` holds the short value at word boundaries, but
    # no detector found it there: not looked for, review rv7; the id that
    # holds it where it was found is, below in test_secrets_redact_*)
    (kept,) = _kept(_deploy_store(tmp_path, "user-9"))
    assert kept["session_ids"] == ["s1"]
    assert kept["reasons"] == ["identifying_field"]


# -- 3. a value is masked in the names it was found in, not in every path

def test_a_value_that_is_part_of_a_fixed_file_name_does_not_mask_it(tmp_path):
    store = _transcript_fact_store(tmp_path, "db at https://admin:facts@db.example.com/x",
                                   "go to https://me:sessions@h.example.com/y")
    code, found = _secrets(store)
    assert code == 1
    files = {f["file"] for f in found}
    assert "facts.sqlite3" in files and "sessions/s1.jsonl" in files, files
    assert all("REDACTED" not in f["file"] for f in found), files


def test_a_value_in_a_file_name_is_still_masked(tmp_path):
    key = "AKIAZ7QWERTYUI0P1ASF"
    store = _transcript_fact_store(tmp_path, f"key {key}")
    (store / "notes").mkdir(exist_ok=True)
    (store / "notes" / f"{key}.md").write_text("nothing\n")
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1")
    assert r.exit_code == 1 and key not in r.stdout + r.stderr
    assert "notes/[REDACTED:aws-access-key:" in r.stdout


def test_a_value_found_in_a_text_is_masked_where_a_name_holds_it(tmp_path):
    """A code review of the masking by names: a password a pattern finds
    only in context (inside a URL) is never found in a bare name, so a note
    or directory named by it was printed unmasked as a location.  A found
    value is masked in every name a user or the agent chose; the layout's
    own names are left as they are."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    st = store_at(tmp_path / "store")
    st.path.mkdir(parents=True)
    FactStore(st.facts_db).close()
    pw = "Zq8wPx3LmN7vR2tK"
    url = f"postgres://deploy:{pw}@db.internal:5432/app"
    (st.path / "notes" / f"db-{pw}").mkdir(parents=True)
    (st.path / "notes" / f"db-{pw}" / "conn.md").write_text(f"# conn\n\n{url}\n")
    (st.path / "notes" / f"{pw}.md").write_text(f"# x\n\n{url}\n")
    for args in (["secrets", "--jobs", "1"], ["secrets", "--jobs", "1", "--format", "jsonl"],
                 ["redact", "--dry-run"], ["redact", "--dry-run", "--json"]):
        r = run_cli("--store", str(st.path), "--no-state", *args)
        assert pw not in r.stdout and pw not in r.stderr, (args, r.stdout, r.stderr)
        assert "notes/db-[REDACTED:" in r.stdout and ".md" in r.stdout, (args, r.stdout)


def test_the_layouts_own_names_at_the_top_are_never_masked():
    """The layout's names at the top of the store stay readable; every name
    below them was chosen by a user or the agent and is masked whole, its
    suffix too (a value can run into '.md': a second masking review)."""
    from lecode_memctl.core.secrets import hide_in_location, user_named

    masks = {"Kx7pQ2wL9z.md": "[K]", "facts": "[X]", "notes": "[Z]", "abc": "[A]"}
    assert hide_in_location("facts.sqlite3", masks) == "facts.sqlite3"
    assert hide_in_location("notes/x.md", masks) == "notes/x.md"
    assert hide_in_location("sessions/abc.jsonl", masks) == "sessions/[A].jsonl"
    assert hide_in_location("notes/my-facts.md", masks) == "notes/my-[X].md"
    assert hide_in_location("notes/Kx7pQ2wL9z.md", masks) == "notes/[K]"
    assert hide_in_location("notes/notes/a.md", masks) == "notes/[Z]/a.md"
    assert user_named("sessions/s1.jsonl") == "s1.jsonl"
    assert user_named("MEMORY.md") == ""


@pytest.mark.parametrize("case", ["suffix", "skipped", "nested_layout_word"])
def test_no_output_shows_a_value_a_name_holds(tmp_path, case):
    """A second review of the masking: a password ending in '.md' named a
    note (the suffix was cut before the search), a symlink or FIFO named by
    it was shown as a skipped entry, and a directory inside notes/ named
    like a layout directory was never masked."""
    import os

    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    pw = {"suffix": "Kx7pQ2wL9z.md", "skipped": "Rt5vB8nM3qW4",
          "nested_layout_word": "sessions"}[case]
    st = store_at(tmp_path / "store")
    (st.path / "notes").mkdir(parents=True)
    FactStore(st.facts_db).close()
    url = f"postgres://deploy:{pw}@db.internal:5432/app"
    (st.path / "MEMORY.md").write_text(f"# m\n\n{url}\n")
    if case == "suffix":
        (st.path / "notes" / pw).write_text(f"# n\n\n{url}\n")
    elif case == "skipped":
        os.symlink("/etc/hostname", st.path / "notes" / f"{pw}.md")
        os.mkfifo(st.path / "notes" / f"fifo-{pw}.md")
    else:
        (st.path / "notes" / pw).mkdir()
        (st.path / "notes" / pw / "a.md").write_text(f"# n\n\n{url}\n")
    for args in (["secrets", "--jobs", "1"], ["secrets", "--jobs", "1", "--format", "jsonl"],
                 ["secrets", "--jobs", "1", "--format", "csv"],
                 ["redact", "--dry-run"], ["redact", "--dry-run", "--json"]):
        r = run_cli("--store", str(st.path), "--no-state", *args)
        out = r.stdout + r.stderr
        shown = out.replace("sessions.", "").replace("sqlite3", "")
        if case == "nested_layout_word":
            assert "notes/sessions/" not in out, (args, out)
        else:
            assert pw not in shown, (args, out)


@pytest.mark.parametrize("pw", ["generation", "initial"])
def test_memctls_own_bookkeeping_is_no_value_left(tmp_path, pw):
    """After the clean, the live rows were read for every value: meta's key
    'generation' and the migration name 'm001_initial' made the passwords
    'generation' and 'initial' 'cannot erase' (exit 1), though every copy
    of the credential was erased (a code review)."""
    store = _transcript_fact_store(tmp_path, f"db at https://admin:{pw}@db.example.com/x")
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stderr, r.stdout)
    assert orjson.loads(r.stdout)["result"]["kept"] == []
