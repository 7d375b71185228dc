"""redact forgets a fact by its id exactly as stored (a code review of
68bb2ae, cr13, 2026-12-07): the plan and the forget went by the id as the
listing shows it, a BLOB's bytes decoded, so that a BLOB id b'ZZ' holding a
credential made redact forget the innocent text id 'ZZ' beside it (the
credential kept, exit 1), and a BLOB id that is not UTF-8 was "no fact",
exit 3 on every run, after the files were rewritten."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli

KEY = "AKIAIOSFODNN7EXAMPLZ"


def _demo(demo_template, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path / "d")


def _sql(store: Path, *statements: str | tuple[str, tuple[object, ...]]) -> None:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        with db:
            for st in statements:
                sql, params = (st, ()) if isinstance(st, str) else st
                db.execute(sql, params)
    finally:
        db.close()


def _fact(store: Path, fid: object, text: str) -> None:
    _sql(store, ("INSERT INTO facts VALUES (?, 1, '2026-12-01T00:00:00Z', "
                 "'2026-12-01T00:00:00Z')", (fid,)),
         ("INSERT INTO revisions VALUES (?, 1, ?, '2026-12-01T00:00:00Z')", (fid, text)))


def _rows(store: Path) -> list[tuple[str, Any, Any]]:
    """(storage class, id, text) of every revision of every fact, as stored."""
    db = sqlite3.connect(store / "facts.sqlite3")
    db.text_factory = bytes
    try:
        return sorted((t.decode(), i, x) for t, i, x in db.execute(
            "SELECT typeof(f.fact_id), f.fact_id, r.text FROM facts f "
            "JOIN revisions r ON r.fact_id = f.fact_id"))
    finally:
        db.close()


def _redact(store: Path, shown: list[str]) -> None:
    """The dry run and the run agree; the credential is gone after the run,
    and a second run finds nothing left."""
    base = ("--store", str(store), "--no-state")
    dry = run_cli(*base, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    assert orjson.loads(dry.stdout)["plan"]["forget_facts"] == shown
    red = run_cli(*base, "redact", "--yes", "--json")
    assert red.exit_code == 0, (red.exit_code, red.stdout, red.stderr)
    doc = orjson.loads(red.stdout)
    assert doc["plan"]["forget_facts"] == shown
    assert doc["result"]["forgotten"] == shown
    assert all(KEY.encode() not in (x or b"") for _t, _i, x in _rows(store))
    again = run_cli(*base, "redact", "--yes", "--json")
    assert again.exit_code == 0, (again.exit_code, again.stdout, again.stderr)
    assert orjson.loads(again.stdout)["plan"]["forget_facts"] == []
    assert run_cli(*base, "secrets").exit_code == 0


@pytest.mark.parametrize("fid", ["ZZ", "aaaaaaaaaaaaaaaa"], ids=["short", "well_formed"])
def test_redact_forgets_the_blob_holding_the_key_not_the_text_id_of_its_bytes(
        demo_template, tmp_path, fid):
    """The review's coll.py: the text id and the BLOB of the same bytes,
    the BLOB holding the key: redact forgot the TEXT fact (no credential),
    the BLOB stayed, exit 1.  Now the BLOB is forgotten, the text kept."""
    store = _demo(demo_template, tmp_path)
    _fact(store, fid, "innocent")
    _fact(store, fid.encode(), f"key {KEY}")
    _redact(store, [fid])
    left = [r for r in _rows(store) if r[1] == fid.encode()]
    assert left == [("text", fid.encode(), b"innocent")]


@pytest.mark.parametrize("holder", ["text", "blob"])
def test_redact_of_a_text_and_a_blob_id_of_the_same_bytes_forgets_the_one_holding_it(
        demo_template, tmp_path, holder):
    """Either one holds the key: that one is forgotten, the other kept, as
    its bytes and storage class show."""
    store = _demo(demo_template, tmp_path)
    innocent, holding = ("ZZ", b"ZZ") if holder == "blob" else (b"ZZ", "ZZ")
    _fact(store, innocent, "innocent")
    _fact(store, holding, f"key {KEY}")
    _redact(store, ["ZZ"])
    kept = "blob" if holder == "text" else "text"
    assert [r for r in _rows(store) if r[1] == b"ZZ"] == [(kept, b"ZZ", b"innocent")]


@pytest.mark.parametrize("fid", [b"ZZ", b"\xff\xfe"], ids=["utf8", "not_utf8"])
def test_redact_forgets_a_lone_blob_id_by_its_bytes(demo_template, tmp_path, fid):
    """A BLOB id alone, UTF-8 or not: forgotten by its bytes (one not
    UTF-8 was "no fact ...", exit 3, on every run)."""
    store = _demo(demo_template, tmp_path)
    _fact(store, fid, f"key {KEY}")
    _redact(store, [fid.decode("utf-8", "replace")])
    assert all(i != fid for _t, i, _x in _rows(store))


def test_redact_of_a_blob_id_not_utf8_and_a_file_finishes(demo_template, tmp_path):
    """The review's part.py: the key in MEMORY.md too.  ``redact --yes``
    rewrote MEMORY.md, then exit 3 "no fact ..., run redact again to
    finish", and every later run exit 3: the credential never went."""
    store = _demo(demo_template, tmp_path)
    _fact(store, b"\xff\xfe", f"key {KEY}")
    memory = store / "MEMORY.md"
    memory.write_text(memory.read_text() + f"\nkey {KEY}\n")
    red = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert red.exit_code == 0, (red.exit_code, red.stdout, red.stderr)
    assert "1 fact(s) forgotten" in red.stdout
    assert KEY not in memory.read_text()
    assert all(i != b"\xff\xfe" for _t, i, _x in _rows(store))
    assert run_cli("--store", str(store), "--no-state", "secrets").exit_code == 0


def test_redact_refuses_a_stored_id_in_two_rows_of_facts(demo_template, tmp_path):
    """The stored id names two rows of facts (the table lost its primary
    key): which is the fact is not known, so redact refuses before it
    changes anything, the dry run alike: exit 5, one line, no file
    rewritten."""
    store = _demo(demo_template, tmp_path)
    _sql(store, "PRAGMA foreign_keys = OFF", "CREATE TABLE facts2 AS SELECT * FROM facts",
         "DROP TABLE facts", "ALTER TABLE facts2 RENAME TO facts")
    _fact(store, b"ZZ", f"key {KEY}")
    _sql(store, ("INSERT INTO facts VALUES (?, 1, '2026-12-01T00:00:00Z', "
                 "'2026-12-01T00:00:00Z')", (b"ZZ",)))
    memory = store / "MEMORY.md"
    memory.write_text(memory.read_text() + f"\nkey {KEY}\n")
    before = memory.read_bytes()
    rows = _rows(store)
    base = ("--store", str(store), "--no-state")
    for argv in (("--dry-run",), ("--yes",), ("--yes", "--json")):
        r = run_cli(*base, "redact", *argv)
        assert r.exit_code == 5, (argv, r.exit_code, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        line = r.stderr.strip().splitlines()[0]
        assert "2 rows of facts" in line and "primary key" in line, r.stderr
        assert memory.read_bytes() == before
        assert _rows(store) == rows


def test_forget_typed_keeps_its_id_check(demo_template, tmp_path):
    """``forget ID`` typed: a malformed id is still exit 2, a BLOB id exit 5."""
    store = _demo(demo_template, tmp_path)
    _fact(store, "ZZ", f"key {KEY}")
    _fact(store, b"bbbbbbbbbbbbbbbb", f"key {KEY}")
    base = ("--store", str(store), "--no-state")
    typed = run_cli(*base, "forget", "ZZ", "--yes")
    assert typed.exit_code == 2 and "invalid fact id" in typed.stderr, typed.stderr
    blob = run_cli(*base, "forget", "bbbbbbbbbbbbbbbb", "--yes")
    assert blob.exit_code == 5, (blob.exit_code, blob.stderr)


def test_redact_forgets_a_text_id_not_utf8_not_the_blob_of_its_bytes(demo_template, tmp_path):
    """A TEXT id whose bytes are not UTF-8 (a writer outside SQLite's text
    API) holding the key, beside the BLOB of the same bytes: the TEXT is
    forgotten, the BLOB kept."""
    store = _demo(demo_template, tmp_path)
    _sql(store, "INSERT INTO facts VALUES (CAST(x'fffe' AS TEXT), 1, '2026-12-01T00:00:00Z', "
                "'2026-12-01T00:00:00Z')",
         f"INSERT INTO revisions VALUES (CAST(x'fffe' AS TEXT), 1, 'key {KEY}', "
         "'2026-12-01T00:00:00Z')")
    _fact(store, b"\xff\xfe", "innocent")
    _redact(store, ["\ufffd\ufffd"])
    assert [r for r in _rows(store) if r[1] == b"\xff\xfe"] == [("blob", b"\xff\xfe", b"innocent")]


def test_held_findings_keep_the_stored_id(tmp_path):
    """The findings a report holds encoded (``secrets``' spill) give back
    each fact's id as stored, its storage class too."""
    from lecode_memctl.core.facts import InvalidText
    from lecode_memctl.core.held import Spill
    from lecode_memctl.core.secrets import Finding, HeldFindings

    held = HeldFindings(Spill(lambda: tmp_path), 1)
    ids: list[Any] = ["ab", b"ab", InvalidText(b"\xff"), b"\xff\xfe", None]
    for sid in ids:
        f = Finding("d", "fact", "facts.sqlite3", "p", 1, "h" * 64, fact_id="x", revision=1,
                    value="v")
        if sid is not None:
            object.__setattr__(f, "_stored_fact_id", sid)
        held.append(f)
    back = [f.stored_fact_id() for f in held]
    assert [(type(b), b) for b in back] == [(type(s), s) for s in ids[:-1]] + [(str, "x")]


# ---------------------------------------------------------------- code review (cr14)

def test_the_plan_names_the_text_fact_its_blob_twin_s_forget_hides(demo_template, tmp_path):
    """A code review: the text 'ZZ' beside the forgotten BLOB b'ZZ', both
    citing demo-alpha:5, is hidden by the forget's exclusion, but the plan's
    ``suppressed_facts`` dropped it (it subtracted the shown ids)."""
    store = _demo(demo_template, tmp_path)
    _fact(store, b"ZZ", f"key {KEY}")
    _fact(store, "ZZ", "innocent")
    _sql(store, "INSERT INTO provenance VALUES (X'5A5A', 1, 'demo-alpha', 5)",
         "INSERT INTO provenance VALUES ('ZZ', 1, 'demo-alpha', 5)")
    dry = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    plan = orjson.loads(dry.stdout)["plan"]
    assert plan["forget_facts"] == ["ZZ"] and plan["suppressed_facts"] == ["ZZ"], plan


def test_a_lone_blob_id_forgotten_is_known_forgotten_to_typed_commands(demo_template, tmp_path):
    """A code review: the BLOB b'aaaaaaaaaaaaaaaa' redacted left its marker
    as a BLOB, which ``forget ID`` and ``history ID`` (typed, text) did not
    see: exit 3 "no fact" where "already forgotten" was said before.  A
    BLOB id's marker is the text of its bytes (unless a live fact has that
    text as its id)."""
    store = _demo(demo_template, tmp_path)
    fid = "aaaaaaaaaaaaaaaa"
    _fact(store, fid.encode(), f"key {KEY}")
    _redact(store, [fid])
    base = ("--store", str(store), "--no-state")
    r = run_cli(*base, "forget", fid, "--yes")
    assert r.exit_code == 0 and "already forgotten" in (r.stdout + r.stderr), (r.exit_code,
                                                                                r.stderr)
    h = run_cli(*base, "history", fid)
    assert h.exit_code == 3 and "was forgotten" in h.stderr, h.stderr


@pytest.mark.parametrize("ids", [("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"),
                                 (b"cccccccccccccccc", b"dddddddddddddddd"),
                                 (b"ZZ", b"YY"), ("aaaaaaaaaaaaaaaa", b"dddddddddddddddd")],
                         ids=["text", "blob", "blob_short", "mixed"])
def test_two_forgets_citing_one_message_do_not_list_each_other(demo_template, tmp_path, ids):
    """A code review: two BLOB facts holding a value, both citing
    demo-alpha:5, were each listed in ``suppressed_facts`` (the plan
    subtracted stored bytes from shown ids)."""
    store = _demo(demo_template, tmp_path)
    for fid in ids:
        _fact(store, fid, f"key {KEY}")
        _sql(store, ("INSERT INTO provenance VALUES (?, 1, 'demo-alpha', 5)", (fid,)))
    dry = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    plan = orjson.loads(dry.stdout)["plan"]
    assert len(plan["forget_facts"]) == 2 and plan["suppressed_facts"] == [], plan


def test_a_retry_of_a_blob_ids_forget_finds_its_marker(demo_template, tmp_path):
    """A code review: a BLOB id's marker written as its text, the retry of
    its stored forget looked for the BLOB and raised NotFound."""
    from lecode_memctl.core.facts import FactStore

    store = _demo(demo_template, tmp_path)
    _fact(store, b"cccccccccccccccc", "x")
    with FactStore(store / "facts.sqlite3") as fs:
        assert fs.forget(b"cccccccccccccccc", stored=True) is True
        assert fs.forget(b"cccccccccccccccc", stored=True) is False


def test_twins_both_forgotten_are_not_suppressed(demo_template, tmp_path):
    """A code review: the text 'ZZ' and the BLOB b'ZZ' both holding the
    value and citing one message: both forgotten, and the plan listed 'ZZ'
    among the facts its exclusions hide."""
    store = _demo(demo_template, tmp_path)
    for fid in ("ZZ", b"ZZ"):
        _fact(store, fid, f"key {KEY}")
        _sql(store, ("INSERT INTO provenance VALUES (?, 1, 'demo-alpha', 5)", (fid,)))
    dry = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    plan = orjson.loads(dry.stdout)["plan"]
    assert plan["forget_facts"] == ["ZZ", "ZZ"] and plan["suppressed_facts"] == [], plan


def test_a_live_text_twin_hit_by_another_forget_is_suppressed(demo_template, tmp_path):
    """A code review: the BLOB b'ZZ' (the value, demo-alpha:5) and the text
    'aaaaaaaaaaaaaaaa' (the value, demo-alpha:7) forgotten; the innocent
    text 'ZZ' citing demo-alpha:7 stays, its evidence excluded: listed."""
    store = _demo(demo_template, tmp_path)
    for fid, text, seq in ((b"ZZ", f"key {KEY}", 5), ("aaaaaaaaaaaaaaaa", f"key {KEY}", 7),
                           ("ZZ", "innocent", 7)):
        _fact(store, fid, text)
        _sql(store, ("INSERT INTO provenance VALUES (?, 1, 'demo-alpha', ?)", (fid, seq)))
    dry = run_cli("--store", str(store), "--no-state", "redact", "--dry-run", "--json")
    plan = orjson.loads(dry.stdout)["plan"]
    assert plan["suppressed_facts"] == ["ZZ"], plan
