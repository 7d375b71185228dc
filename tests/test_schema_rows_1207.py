"""Machine output against ``memctl schema`` (a report-only review, rv73,
2026-12-07): a credential in a fact whose stored id is malformed could not
be redacted; stored values that are no integer in ``secrets``, ``redact``
and ``history`` rows; a bundle manifest's values copied as they are into
``verify``'s rows; ``$id`` values that are no URI reference; the error
document's codes listed nowhere."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli

KEY = "AKIAIOSFODNN7EXAMPLZ"


def _demo(demo_template, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path / "d")


def _sql(store: Path, sql: str, *params: object) -> None:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        with db:
            db.execute(sql, params)
    finally:
        db.close()


def _fact_rows(store: Path, key: object) -> int:
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        return sum(db.execute(f"SELECT count(*) FROM {t} WHERE fact_id = ?", (key,)).fetchone()[0]
                   for t in ("facts", "revisions", "source_refs", "provenance"))
    finally:
        db.close()


# ---------------------------------------------------------------- 1. a malformed stored id

@pytest.mark.parametrize("stored", ["0123456789ABCDEF", "ZZ", b"bbbbbbbbbbbbbbbb"],
                         ids=["upper", "short", "blob"])
def test_redact_forgets_a_fact_whose_stored_id_is_malformed(demo_template, tmp_path, stored):
    """A fact whose stored id is not 16 lower-case hex digits (or a BLOB)
    and whose text holds a credential: ``secrets`` found it (exit 1), but
    ``redact``'s plan checked the id read from the store as if typed and
    exit 2 ("invalid fact id"), nothing erased.  The fact is forgotten by
    its stored id; ``forget`` of the id typed keeps its usage check."""
    store = _demo(demo_template, tmp_path)
    base = ("--store", str(store), "--no-state")
    shown = stored.decode() if isinstance(stored, bytes) else stored
    _sql(store, "INSERT INTO facts VALUES (?, 1, '2026-12-01T00:00:00Z', "
                "'2026-12-01T00:00:00Z')", stored)
    _sql(store, "INSERT INTO revisions VALUES (?, 1, ?, '2026-12-01T00:00:00Z')",
         stored, f"key {KEY}")
    found = run_cli(*base, "secrets", "--format", "jsonl")
    assert found.exit_code == 1, (found.exit_code, found.stderr)
    assert shown in [r.get("fact_id") for r in map(orjson.loads, found.stdout.splitlines())]
    dry = run_cli(*base, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    assert orjson.loads(dry.stdout)["plan"]["forget_facts"] == [shown]
    if not isinstance(stored, bytes):
        typed = run_cli(*base, "forget", shown, "--yes")
        assert typed.exit_code == 2, (typed.exit_code, typed.stderr)
        assert "invalid fact id" in typed.stderr
    red = run_cli(*base, "redact", "--yes", "--json")
    assert red.exit_code == 0, (red.exit_code, red.stdout, red.stderr)
    assert orjson.loads(red.stdout)["result"]["forgotten"] == [shown]
    assert _fact_rows(store, stored) == 0
    again = run_cli(*base, "secrets")
    assert again.exit_code == 0, (again.exit_code, again.stdout, again.stderr)


# ---------------------------------------------------------------- 2. secrets rows

def _csv_rows(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def _plant_odd_numbers(store: Path) -> None:
    """A fact whose revisions are stored as 2.5, 'abc' and a BLOB, each text
    holding a key; a transcript record whose seq is ``true`` holding one."""
    _sql(store, "INSERT INTO facts VALUES ('eeeeeeeeeeeeeeee', 1, '2026-12-01T00:00:00Z', "
                "'2026-12-01T00:00:00Z')")
    for rev, key in [(2.5, "AKIAIOSFODNN7EXAMPLZ"), ("abc", "AKIAIOSFODNN7EXAMPLY"),
                     (b"\x01", "AKIAIOSFODNN7EXAMPLX")]:
        _sql(store, "INSERT INTO revisions VALUES ('eeeeeeeeeeeeeeee', ?, ?, "
                    "'2026-12-01T00:00:00Z')", rev, f"key {key}")
    with (store / "sessions" / "demo-gamma.jsonl").open("ab") as fh:
        fh.write(b'{"seq":25,"type":"message","role":"user","content":"x"}\n'
                 b'{"seq":true,"type":"message","role":"user",'
                 b'"content":"key AKIAIOSFODNN7EXAMPLQ"}\n')


def test_secrets_rows_give_a_revision_or_seq_that_is_no_integer_as_null(demo_template, tmp_path):
    """A revision stored as 2.5, 'abc' or a BLOB came out as 2.5 / "abc" /
    "\\u0001" in JSON and 2.5 / abc / b'\\x01' in CSV, a transcript seq
    ``true`` as true; the schema says integer or null.  Now null (an empty
    cell), in every format alike; ``redact``'s plan ``records`` too."""
    store = _demo(demo_template, tmp_path)
    _plant_odd_numbers(store)
    base = ("--store", str(store), "--no-state")
    jl = run_cli(*base, "secrets", "--format", "jsonl")
    assert jl.exit_code == 1, (jl.exit_code, jl.stderr)
    rows = [r for r in map(orjson.loads, jl.stdout.splitlines()) if r.get("type") == "secret"]
    assert {r["kind"] for r in rows} == {"fact", "transcript"}
    assert [(r["seq"], r["revision"]) for r in rows] == [(None, None)] * len(rows) == \
        [(None, None)] * 4
    csv = run_cli(*base, "secrets", "--format", "csv")
    cells = [(r["seq"], r["revision"]) for r in _csv_rows(csv.stdout) if r["type"] == "secret"]
    assert cells == [("", "")] * 4, cells
    doc = orjson.loads(run_cli(*base, "secrets", "--json").stdout)
    assert {(f["seq"], f["revision"]) for f in doc["findings"]} == {(None, None)}
    dry = run_cli(*base, "redact", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.exit_code, dry.stderr)
    records = [rec for f in orjson.loads(dry.stdout)["plan"]["files"] for rec in f["records"]]
    assert all(type(rec) is int for rec in records), records


# ---------------------------------------------------------------- 3. history rows

@pytest.mark.parametrize("stored", [2.5, float("inf"), "abc", b"\x02"],
                         ids=["real", "inf", "text", "blob"])
def test_history_gives_a_revision_that_is_no_integer_as_null(demo_template, tmp_path, stored):
    """A revision stored as 2.5, +Inf or 'abc' came out as 2.5 / null /
    "abc" in JSON and 2.5 / inf / abc in CSV; only a BLOB was null.  Now
    any revision that is no integer is null, JSON and CSV alike, and such a
    row is never the current one."""
    store = _demo(demo_template, tmp_path)
    fid = "8888888888888888"
    _sql(store, "INSERT INTO facts VALUES (?, 1, '2026-12-01T00:00:00Z', "
                "'2026-12-01T00:00:00Z')", fid)
    _sql(store, "INSERT INTO revisions VALUES (?, ?, 'txt', '2026-12-01T00:00:00Z')",
         fid, stored)
    base = ("--store", str(store), "--no-state")
    jl = run_cli(*base, "history", fid, "--format", "jsonl")
    assert jl.exit_code == 0, (jl.exit_code, jl.stderr)
    rows = [r for r in map(orjson.loads, jl.stdout.splitlines()) if r["type"] == "revision"]
    assert [(r["revision"], r["current"]) for r in rows] == [(None, False)]
    doc = orjson.loads(run_cli(*base, "history", fid, "--json").stdout)
    assert [(r["revision"], r["current"]) for r in doc["revisions"]] == [(None, False)]
    csv = run_cli(*base, "history", fid, "--format", "csv")
    cells = [(r["revision"], r["current"]) for r in _csv_rows(csv.stdout)
             if r["type"] == "revision"]
    assert cells == [("", "false")], cells


def test_history_marks_no_row_current_when_the_facts_revision_is_no_integer(
        demo_template, tmp_path):
    """The fact's own current revision stored as 2.5 reads as null: no
    revision row is current (a row stored as 2.5 is no integer either)."""
    store = _demo(demo_template, tmp_path)
    fid = "8888888888888888"
    _sql(store, "INSERT INTO facts VALUES (?, 2.5, '2026-12-01T00:00:00Z', "
                "'2026-12-01T00:00:00Z')", fid)
    for rev in (1, 2.5):
        _sql(store, "INSERT INTO revisions VALUES (?, ?, 'txt', '2026-12-01T00:00:00Z')",
             fid, rev)
    r = run_cli("--store", str(store), "--no-state", "history", fid, "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout)
    assert doc["revision"] is None
    assert [(x["revision"], x["current"]) for x in doc["revisions"]] == [(1, False), (None, False)]


# ---------------------------------------------------------------- 4. verify's fact_check rows

def _bundle_with_row(store: Path, tmp_path: Path, row: dict) -> Path:
    """The store's bundle, its manifest given one more facts row ``row``."""
    import tarfile

    out = tmp_path / "b.tar.gz"
    r = run_cli("--store", str(store), "--no-state", "export", "-o", str(out))
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    x = tmp_path / "x"
    with tarfile.open(out) as tf:
        tf.extractall(x, filter="tar")
    m = orjson.loads((x / "manifest.json").read_bytes())
    m["facts"]["rows"].append(row)
    (x / "manifest.json").write_bytes(orjson.dumps(m))
    return x


@pytest.mark.parametrize("revision, status, reason, shown", [
    ("x", 5, ["a"], (None, "5", '["a"]')),
    (2.5, {"k": 1}, None, (None, '{"k":1}', None)),
    (True, "valid", 7, (None, "valid", "7")),
    (3, None, "r", (3, None, "r")),
], ids=["text-number-list", "real-object-null", "bool-string-number", "as-written"])
def test_verify_fact_check_rows_hold_their_schema_types(demo_template, tmp_path, revision,
                                                        status, reason, shown):
    """A manifest row's revision, status and reason were copied as they
    are into the ``fact_check`` row (revision "x", manifest_status 5,
    manifest_reason ["a"]), against the schema (revision integer or null;
    the two string or null).  Now a revision that is no integer is null and
    a status or reason that is no text is its JSON text, as fact_id's; the
    row still differs (exit 1)."""
    store = _demo(demo_template, tmp_path)
    fid = "ffffffffffffff01"
    bundle = _bundle_with_row(store, tmp_path, {
        "fact_id": fid, "revision": revision, "status": status, "reason": reason,
        "about_revision": None, "source_ref": None})
    r = run_cli("verify", str(bundle), "--json")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    rows = [f for f in orjson.loads(r.stdout)["facts"] if f["fact_id"] == fid]
    assert [(f["revision"], f["manifest_status"], f["manifest_reason"], f["same"],
             f["status"], f["reason"]) for f in rows] == [(*shown, False, None, None)]


# ---------------------------------------------------------------- 5. schema $id

def test_every_schema_id_is_a_uri_reference():
    """Two records' ``$id`` held spaces (``memctl/3/validate --list-codes/code``,
    ``memctl/3/grep -c, grep -l/match_count``): no URI reference.  What a
    URI cannot hold is percent-encoded now."""
    import re

    r = run_cli("schema")
    assert r.exit_code == 0, r.stderr
    records = orjson.loads(r.stdout)["records"]
    ids = {t: rec["schema"]["$id"] for t, rec in records.items()}
    # RFC 3986 path characters (unreserved, sub-delims, ':', '@', '/', and %XX)
    pchar = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})+")
    assert all(pchar.fullmatch(i) for i in ids.values()), ids
    assert ids["code"] == "memctl/3/validate%20--list-codes/code"
    assert ids["match_count"] == "memctl/3/grep%20-c,%20grep%20-l/match_count"
    assert ids["fact"] == "memctl/3/facts/fact"


# ---------------------------------------------------------------- 6. the error document's codes

def _error_code_table() -> dict[str, tuple[str, str]]:
    from .conftest import REPO

    text = (REPO / "docs" / "OUTPUT.md").read_text(encoding="utf-8")
    begin, end = "<!-- error-codes:begin -->", "<!-- error-codes:end -->"
    assert begin in text and end in text, "docs/OUTPUT.md has no error-codes table"
    block = text[text.index(begin) + len(begin):text.index(end)].strip().splitlines()
    assert block[:2] == ["| code | exit status | meaning |", "|---|---|---|"], block[:2]
    out = {}
    for row in block[2:]:
        code, status, meaning = (c.strip() for c in row.strip("|").split(" | ", 2))
        out[code.strip("`")] = (status, meaning)
    return out


def test_output_md_lists_every_error_code_with_its_status():
    """The error document's ``code`` values (usage, not_found, ...) were
    listed nowhere in docs/OUTPUT.md.  Its table is the one errors.py
    gives (ERROR_DOCUMENT_CODES), word for word, and every code an error
    class of the package carries, or main and the signal handler give, is
    in it with that class's exit status."""
    import importlib
    import pkgutil

    import lecode_memctl
    from lecode_memctl.core import errors

    table = _error_code_table()
    assert table == {c: (s, m) for c, s, m in errors.ERROR_DOCUMENT_CODES}
    for mod in pkgutil.walk_packages(lecode_memctl.__path__, "lecode_memctl."):
        if not mod.name.endswith("__main__"):       # (that one runs memctl)
            importlib.import_module(mod.name)
    seen: list[type] = [errors.MemctlError]
    while seen:
        cls = seen.pop()
        seen += cls.__subclasses__()
        assert cls.code in table, (cls, cls.code)
        assert str(cls.exit_code) in table[cls.code][0].split(", "), (cls, table[cls.code])
    for code in ("internal", "interrupted", "terminated"):
        assert code in table
    assert table["internal"][0] == "70"
    assert table["terminated"][0] == "129, 143"


def test_an_error_documents_code_is_in_the_table(tmp_path):
    table = _error_code_table()
    r = run_cli("--store", str(tmp_path / "none"), "facts", "--json")
    doc = orjson.loads(r.stdout)
    assert doc["error"]["code"] in table
    assert table[doc["error"]["code"]][0] == str(r.exit_code) == str(doc["error"]["exit_code"])
