"""``validate`` on crafted schemas whose expressions integrity_check
evaluates on every row, by routes a review of 2026-12-07 found after the
first fix (test_validate_1207t.py): a CHECK behind a comment or right after
a string, an index on an expression, a partial index; and the bound on the
length of a value integrity_check computes (TOO_LONG)."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from lecode_memctl.core.audit.facts import MIN_LENGTH_BOUND, TOO_LONG, _start_checks
from lecode_memctl.core.facts import FactStore, _checks_of, foreign_expressions

from .test_validate_1207t import _findings, _rewrite_table_sql

# seconds a row, unbounded before the fix (0.3 s here: the test stays short
# when it fails; a real store's rows made it hours)
SLOW = "length(printf('%.*c', 100000000, 'x'))"


@pytest.fixture
def copy(demo_template, tmp_path) -> tuple[Path, str]:
    dst = tmp_path / "sz"
    shutil.copytree(demo_template.store.path, dst, symlinks=True)
    return dst, demo_template.store.slug


def _rewrite_index_sql(store: Path, table: str, name: str, column: str, crafted: str) -> None:
    """An index ``name`` on ``table``(``column``) created, then its SQL
    rewritten in the schema alone to ``crafted`` (nothing evaluated)."""
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute(f"CREATE INDEX {name} ON {table}({column})")
    db.commit()
    (version,) = db.execute("PRAGMA schema_version").fetchone()
    db.execute("PRAGMA writable_schema = ON")
    db.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (crafted, name))
    db.execute(f"PRAGMA schema_version = {version + 1}")
    db.commit()
    db.close()


def _schema_unknown(store: Path, slug: str, table: str, *words: str) -> list[dict]:
    start = time.monotonic()
    code, found = _findings(store, "--slug", slug)
    assert time.monotonic() - start < 10
    assert code == 1
    schema = [f for f in found if f["code"] == "db.schema_unknown"]
    assert len(schema) == 1 and f"table {table}" in schema[0]["message"], found
    for word in words:
        assert word in schema[0]["message"], schema
    assert "integrity_check did not check that table" in schema[0]["message"]
    assert not any(f["code"] in ("db.unreadable", "db.integrity") for f in found), found
    assert any(f["code"] == "fact.stale" for f in found), found
    return found


@pytest.mark.parametrize(("table", "more"), [
    ("revisions", f", CHECK /**/ ({SLOW} > 0)"),
    ("revisions", f", CHECK -- a comment\n ({SLOW} > 0)"),
    ("facts", f", x TEXT DEFAULT 'a'CHECK({SLOW} > 0)"),
    ("provenance", f", CONSTRAINT \"c\"CHECK({SLOW} > 0)"),
])
def test_a_check_hidden_by_a_comment_or_string_is_a_finding(copy, table, more):
    store, slug = copy
    _rewrite_table_sql(store, table, more)
    _schema_unknown(store, slug, table, "CHECK constraint")


def test_an_expression_index_is_a_finding_and_its_table_is_not_checked(copy):
    store, slug = copy
    _rewrite_index_sql(store, "revisions", "ix_x", "length(text)",
                       f"CREATE INDEX ix_x ON revisions({SLOW}+(revision-revision))")
    _schema_unknown(store, slug, "revisions", "expression index ix_x")


def test_a_partial_index_is_a_finding_and_its_table_is_not_checked(copy):
    store, slug = copy
    _rewrite_index_sql(store, "revisions", "ix_p", "fact_id) WHERE length(text) > 0 AND (1",
                       f"CREATE INDEX ix_p ON revisions(fact_id) WHERE {SLOW} > 0")
    _schema_unknown(store, slug, "revisions", "partial index ix_p")


def test_checks_of_reads_past_comments_and_strings_not_into_them():
    assert _checks_of("CREATE TABLE t (a INT CHECK (a >= 1), b TEXT)") == ["a>=1"]
    assert _checks_of("CREATE TABLE t (a INT CHECK/* x */(a>=1))") == ["a>=1"]
    assert _checks_of("CREATE TABLE t (a TEXT DEFAULT 'x'CHECK(f(a)))") == ["f(a)"]
    assert _checks_of("CREATE TABLE t (a TEXT DEFAULT 'it''s check (1)')") == []
    assert _checks_of('CREATE TABLE t ("check" INT, [check] INT, `check` INT)') == []
    assert _checks_of("CREATE TABLE t (a INT) -- CHECK (1)\n") == []
    assert _checks_of("CREATE TABLE t (a INT /* CHECK (1) */)") == []
    assert _checks_of("CREATE TABLE t (a INT, checked INT, xcheck INT)") == []
    # a string inside the expression is kept as it is written
    assert _checks_of("CREATE TABLE t (a TEXT CHECK (a <> 'A B'))") == ["a<>'A B'"]


def test_lecode_own_schema_holds_nothing_foreign(copy):
    store, _slug = copy
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        assert foreign_expressions(db) == {}
    finally:
        db.close()


def test_a_value_longer_than_the_bound_stops_integrity_check_with_a_line(copy):
    """The bound (SQLITE_LIMIT_LENGTH) where the schema judge would miss an
    expression: zeroblob() past it raises "string or blob too big", which
    is integrity_check's TOO_LONG line (printf returns NULL instead: the
    bound keeps memory, not time, and the judge is what keeps the time)."""
    store, _slug = copy
    _rewrite_table_sql(store, "revisions",
                       f", CHECK (length(zeroblob({2 * MIN_LENGTH_BOUND}+(revision-revision))) > 0)")
    fs = FactStore.open_readonly(store / "facts.sqlite3")
    try:
        db = fs.read_connection()
        assert "revisions" in foreign_expressions(db)
        integrity, _rest, _in_thread = _start_checks(fs, db, defer=False, skip=frozenset())
        messages, stopped = integrity()
    finally:
        fs.close()
    assert stopped is None
    assert len(messages) == 1, messages
    head = TOO_LONG.split("{bound}")[0]
    assert head in messages[0] and "string or blob too big" in messages[0], messages


def test_the_bound_keeps_memory_and_printf_returns_null_past_it():
    """What FORMAT.md says of the bound: printf() past it is NULL (no line,
    no error), zeroblob() raises "string or blob too big" (TOO_LONG)."""
    db = sqlite3.connect(":memory:")
    try:
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MIN_LENGTH_BOUND)
        n = 2 * MIN_LENGTH_BOUND
        assert db.execute(f"SELECT printf('%.*c', {n}, 'x')").fetchone() == (None,)
        with pytest.raises(sqlite3.DataError, match="string or blob too big"):
            db.execute(f"SELECT zeroblob({n})").fetchone()
    finally:
        db.close()


def test_redact_looking_for_values_left_evaluates_no_virtual_generated_column():
    """``redact``'s look at the live rows (redact._found_in_rows) read every
    table with SELECT *, which evaluates a VIRTUAL generated column on every
    row (a crafted schema: printf('%.*c', 900000000, 'x'), seconds a row).
    Its value is in no row: it is not read; the stored columns still are."""
    from lecode_memctl.core.redact import _found_in_rows

    calls: list[object] = []
    db = sqlite3.connect(":memory:")
    try:
        db.create_function("slow", 1, lambda v: calls.append(v) or v, deterministic=True)
        db.execute("CREATE TABLE t (a TEXT, g TEXT GENERATED ALWAYS AS (slow(a)) VIRTUAL, "
                   "s TEXT GENERATED ALWAYS AS (a || 'x') STORED)")
        db.executemany("INSERT INTO t (a) VALUES (?)", [("AKIAVALUE1",), ("plain",)])
        calls.clear()
        found = _found_in_rows(db, ["AKIAVALUE1", "AKIAVALUE2"], set(), None)
    finally:
        db.close()
    assert calls == []
    assert found == ["AKIAVALUE1"]
