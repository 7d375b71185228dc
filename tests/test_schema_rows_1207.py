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
