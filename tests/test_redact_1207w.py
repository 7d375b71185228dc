"""Review rv7 of 2026-12-07: redact erased a found value wherever its
characters were, inside unrelated words too (``test`` in ``pytest``,
``latest``, ``conftest``), and forgot facts holding only those words.  A
copy elsewhere now counts only at word boundaries, a value shorter than 8
characters is erased only where a detector found it, and the plan tells
found places from copies."""

from __future__ import annotations

from pathlib import Path

import orjson

from .conftest import run_cli


def _cli(store: Path, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


def _short_store(base: Path) -> Path:
    """The reviewer's Markdown store: ``test`` found as a password, the word
    in ``pytest``, ``latest`` and ``conftest``."""
    (base / "notes").mkdir(parents=True)
    (base / "MEMORY.md").write_text(
        "# Memory\n\n- Run pytest before pushing; use the latest release.\n")
    (base / "notes" / "fixtures.md").write_text('conftest.py sets DB_PASSWORD = "test"\n')
    return base


def _transcript_store(base: Path, value: str = "test") -> Path:
    """The reviewer's transcript store (rv7-scratch/buildw.py): a fact
    quoting ``pytest`` and ``latest``, a message giving ``value`` as a
    password, MEMORY.md with ``pytest`` and ``attest``."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base)
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s-w", created="2026-05-01T10:00:00Z") as w:
        w.append_message("user", "Tests run with pytest -q; use the latest release.")
        w.append_message("user", f'in conftest.py: DB_PASSWORD = "{value}"')
    ref = SourceRef("s-w", (1,), canonical_digest(sessions.records("s-w", 1, 1)))
    facts.add("Tests run with pytest -q; use the latest release.", ref=ref)
    facts.close()
    (st.path / "MEMORY.md").write_text("# Memory\n\n- Run pytest before pushing; attest builds.\n")
    return base


def test_a_short_value_is_not_erased_inside_words(tmp_path):
    store = _short_store(tmp_path / "r3")
    memory = (store / "MEMORY.md").read_text()
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert (store / "MEMORY.md").read_text() == memory
    note = (store / "notes" / "fixtures.md").read_text()
    assert note.startswith("conftest.py sets DB_PASSWORD = \"[REDACTED:"), note
    r = _cli(store, "secrets")
    assert r.exit_code == 0, (r.stdout, r.stderr)


def test_a_short_value_in_a_transcript_store(tmp_path):
    """The fact quoting pytest is not forgotten, record 1 and MEMORY.md are
    not rewritten; record 2 is; secrets says OK after the run."""
    store = _transcript_store(tmp_path / "w")
    r = _cli(store, "redact", "--dry-run", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    plan = orjson.loads(r.stdout)["plan"]
    assert plan["forget_facts"] == []
    assert [(f["file"], f["records"]) for f in plan["files"]] == [("sessions/s-w.jsonl", [2])]
    assert plan["files"][0]["found"] == 1 and plan["files"][0]["copies"] == 0
    r = _cli(store, "redact", "--dry-run")
    assert "value of 4 characters: erased only where found" in r.stdout, r.stdout
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "pytest" in (store / "MEMORY.md").read_text()
    lines = (store / "sessions" / "s-w.jsonl").read_text().splitlines()
    assert "pytest -q; use the latest release" in lines[1]
    assert "conftest.py" in lines[2] and "[REDACTED:" in lines[2]
    r = _cli(store, "secrets")
    assert r.exit_code == 0, (r.stdout, r.stderr)


def test_a_long_value_is_erased_at_word_boundaries_only(tmp_path):
    """A long value: its copies elsewhere erased where they stand as a
    token ("x", =x, :x@), never inside a longer word; the plan counts
    found places and copies apart and marks a fact forgotten for a copy."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    value = "ZqLwXnPrKtM"    # (a word: letters alone, under 12; see below for others)
    store = _transcript_store(tmp_path / "w", value)
    (store / "notes").mkdir()
    (store / "notes" / "copies.md").write_text(
        f'quoted "{value}"\nassigned ={value}\nurl :{value}@host\n'
        f"glued x{value} and {value}y\n")
    fs = FactStore(store_at(store).facts_db)
    copy = fs.add(f"the db password is {value} (bare)").fact.fact_id
    glued = fs.add(f"an id like A{value}B is no copy").fact.fact_id
    fs.close()
    r = _cli(store, "redact", "--dry-run", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    plan = orjson.loads(r.stdout)["plan"]
    files = {f["file"]: f for f in plan["files"]}
    assert files["notes/copies.md"]["replacements"] == 3
    assert files["notes/copies.md"]["copies"] == 3
    assert files["notes/copies.md"]["found"] == 0
    assert files["sessions/s-w.jsonl"]["found"] == 1
    assert copy in plan["forget_facts"] and glued not in plan["forget_facts"]
    assert plan["forget_copies"] == [copy]
    r = _cli(store, "redact", "--dry-run")
    assert f"forget fact {copy} (its text holds a copy of a value found elsewhere)" in r.stdout
    assert "notes/copies.md: 3 replacements (3 copies)" in r.stdout, r.stdout
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    text = (store / "notes" / "copies.md").read_text()
    assert f"x{value} and {value}y" in text
    assert text.count("[REDACTED:") == 3
    r = _cli(store, "secrets")
    assert r.exit_code == 0, (r.stdout, r.stderr)


def test_boundaries_in_json_escaped_text():
    """In a JSON-escaped form the rule reads the decoded text: ``\\n`` before
    the value is a newline (a boundary), ``\\u0041`` an ``A`` (none)."""
    from lecode_memctl.core.secrets import replaced_spans

    value = b"ZqLwXnPrKtM"
    text = b'"a\\n' + value + b'" "\\u0041' + value + b'" "pre' + value + b'"'
    spans = replaced_spans(text, [(value, b"M")], bounded=True)
    assert [s for s, _e, _m in spans] == [text.index(value)]


def test_a_glued_finding_is_still_erased(tmp_path):
    """Where a detector found a value not at a word boundary (an AWS key
    glued to a word), its line is still erased: the finding is the value."""
    store = tmp_path / "g"
    (store / "notes").mkdir(parents=True)
    (store / "notes" / "k.md").write_text("key: xAKIAIOSFODNN7EXAMPLQ\n")
    r = _cli(store, "secrets")
    if r.exit_code == 0:
        return      # (no detector finds it glued: nothing to show)
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "AKIAIOSFODNN7EXAMPLQ" not in (store / "notes" / "k.md").read_text()
    r = _cli(store, "secrets")
    assert r.exit_code == 0, (r.stdout, r.stderr)


def test_a_value_with_a_digit_is_erased_even_glued_to_a_word(tmp_path):
    """A code review: the boundary rule applied to every value, so a
    credential glued to an option (``mysql -pZq8vLm2wPx``) or a word was
    left in MEMORY.md and in a live fact, and ``secrets`` then said OK.  The
    rule is for words (letters alone: ``test`` in ``pytest``); a value with
    a digit or a sign in it is erased wherever it is."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at

    value = "Zq8vLm2wPx"
    store = _transcript_store(tmp_path / "w", value)
    (store / "MEMORY.md").write_text(f"- connect with: mysql -uroot -p{value} app\n")
    fs = FactStore(store_at(store).facts_db)
    glued = fs.add(f"connect with: mysql -uroot -p{value} app").fact.fact_id
    fs.close()
    r = _cli(store, "redact", "--yes", "--json")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert value not in (store / "MEMORY.md").read_text()
    assert glued in orjson.loads(r.stdout)["result"]["forgotten"]
    assert value.encode() not in (store / "facts.sqlite3").read_bytes()


def test_a_long_letters_only_value_glued_to_an_option_is_erased(tmp_path):
    """A second code review: a letters-only password (a passphrase) glued
    to ``-p`` was left in MEMORY.md, ``secrets`` then OK.  A value of 12
    letters or more is a copy wherever it is."""
    value = "correcthorsebatterystaple"
    store = _transcript_store(tmp_path / "w", value)
    (store / "MEMORY.md").write_text(f"run: mysql -ucorp -p{value} app\n")
    r = _cli(store, "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert value not in (store / "MEMORY.md").read_text()
