"""``memctl secrets`` reads the fact texts in a few queries, not several per
fact.  It asked ``revisions(fact_id)`` of each fact (the one-fact path:
the revisions, then each one's sources and legacy provenance): a third of
its time on a store of 100,000 facts.  It now reads them as the listing
does (``FactStore.iter_fact_revisions``); these tests hold the findings to
the old reads' on damaged databases too."""

from __future__ import annotations

import pytest

from lecode_memctl.core import facts as facts_mod, secrets
from lecode_memctl.core.errors import MemctlError
from lecode_memctl.core.layout import FACTS_DB, store_at

from .builders import copy_demo, store_sql
from .test_damaged_pages import DAMAGE, _damage
from .test_damaged_rows import NO_NOT_NULL, NOT_UTF8, PREF, PROVENANCE, TWICE

KEY = "AKIAQWERTYUIOPASDFGH"


class _OneFactScanner(secrets.Scanner):
    """The fact texts read as before: ``iter_facts``, then ``revisions`` of each."""

    def _facts(self) -> set[str]:
        from lecode_memctl.core.facts import BUSY_TIMEOUT, FactStore

        values: set[str] = set()
        try:
            fs = FactStore.open_readonly(self.store.facts_db, busy_timeout=BUSY_TIMEOUT)
        except MemctlError as exc:
            self.report.skipped.append(secrets.Skipped(FACTS_DB, f"facts not read: {exc}",
                                                       error=exc))
            return values
        try:
            for fact in fs.iter_facts():
                for rev in fs.revisions(fact.fact_id):
                    for value, det, _ln in self._text(rev.text, "fact.txt"):
                        values.add(value)
                        self._add(value, det, secrets.KIND_FACT, FACTS_DB,
                                  fact_id=fact.fact_id, revision=rev.revision)
        except MemctlError as exc:
            self.report.skipped.append(secrets.Skipped(FACTS_DB,
                                                       f"facts not read: {exc}", error=exc))
        except Exception as exc:  # noqa: BLE001
            self.report.skipped.append(secrets.Skipped(FACTS_DB,
                                                       f"facts not read: {type(exc).__name__}"))
        finally:
            fs.close()
        return values


def _report(store, scanner: type[secrets.Scanner]) -> tuple:
    rep = scanner(store_at(store), secrets.Detector()).run()
    return ([f.to_json() for f in rep.findings], [(s.file, s.reason) for s in rep.skipped],
            rep.allowlisted)


_KEYS_IN_TEXTS = (f"UPDATE revisions SET text = text || ' {KEY}' WHERE revision = 1",
                  "UPDATE revisions SET text = text || ' ghp_' || substr(fact_id || "
                  "'0123456789abcdefghijklmnopqrstuvwxyz', 1, 36) WHERE revision = 2")

_CASES = {
    "intact": (),
    **{f"twice_{k}": v for k, v in TWICE.items()},
    **{f"not_utf8_{k}": (v,) for k, v in NOT_UTF8.items()},
    **{f"provenance_{k}": (v,) for k, v in PROVENANCE.items()},
    **{f"null_{c}": (*NO_NOT_NULL, f"UPDATE source_refs SET {c} = NULL WHERE fact_id = '{PREF}' "
                     "AND revision = 2") for c in ("session_id", "seqs", "digest")},
    "blob_id": ("PRAGMA foreign_keys = OFF",
                *(f"UPDATE {t} SET fact_id = CAST(fact_id AS BLOB) WHERE fact_id = '{PREF}'"
                  for t in ("facts", "revisions", "source_refs"))),
    "no_revisions": ("PRAGMA foreign_keys = OFF",
                     f"DELETE FROM source_refs WHERE fact_id = '{PREF}'",
                     f"DELETE FROM revisions WHERE fact_id = '{PREF}'"),
    "orphan_revisions": ("PRAGMA foreign_keys = OFF", f"DELETE FROM facts WHERE fact_id = '{PREF}'"),
    "revision_gap": ("PRAGMA foreign_keys = OFF",
                     f"DELETE FROM source_refs WHERE fact_id = '{PREF}' AND revision = 1",
                     f"DELETE FROM revisions WHERE fact_id = '{PREF}' AND revision = 1"),
    "no_facts": ("PRAGMA foreign_keys = OFF", "DELETE FROM source_refs", "DELETE FROM revisions",
                 "DELETE FROM facts"),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_findings_of_the_one_fact_reads(demo_template, tmp_path, case):
    store = copy_demo(demo_template, tmp_path / "demo")
    store_sql(store, *_KEYS_IN_TEXTS)
    if _CASES[case]:
        store_sql(store, *_CASES[case])
    got = _report(store, secrets.Scanner)
    assert got == _report(store, _OneFactScanner)
    if case == "intact":
        assert sum(f["kind"] == secrets.KIND_FACT for f in got[0]) >= 4, got


def _statements(demo_template, tmp_path, n: int, monkeypatch) -> int:
    """The SQL statements the fact texts' read runs on a store of the demo's
    facts and ``n`` more."""
    store = copy_demo(demo_template, tmp_path / f"demo{n}")
    store_sql(store, *(f"INSERT INTO facts VALUES ('{i:016x}', 1, '2026-01-01T00:00:00.000Z', "
                       "'2026-01-01T00:00:00.000Z')" for i in range(n)),
              *(f"INSERT INTO revisions VALUES ('{i:016x}', 1, 'text {i} {KEY}', "
                "'2026-01-01T00:00:00.000Z')" for i in range(n)))
    calls = 0
    real = facts_mod._Cursor.execute

    def counted(self, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        nonlocal calls
        calls += 1
        return real(self, *a, **kw)

    monkeypatch.setattr(facts_mod._Cursor, "execute", counted)
    scanner = secrets.Scanner(store_at(store), secrets.Detector())
    values = scanner._facts()
    monkeypatch.undo()
    assert KEY in values
    return calls


def test_the_fact_texts_are_read_in_a_few_queries(demo_template, tmp_path, monkeypatch):
    small = _statements(demo_template, tmp_path, 50, monkeypatch)
    large = _statements(demo_template, tmp_path, 200, monkeypatch)
    assert large <= small + 5, (small, large)


@pytest.mark.parametrize("name, offset, count", DAMAGE)
def test_a_damaged_page_loses_no_value(demo_template, tmp_path, name, offset, count):
    """A damaged table stops both reads alike ("facts not read"; the raw
    scan of the pages still finds the values).  A damaged index stopped
    the one-fact reads, which look facts up by it; the listing's reads scan
    the tables, and name each value's fact and revision."""
    store = copy_demo(demo_template, tmp_path / "demo")
    store_sql(store, *_KEYS_IN_TEXTS)
    _damage(store / "facts.sqlite3", name, offset, count)
    got = _report(store, secrets.Scanner)
    old = _report(store, _OneFactScanner)
    if not name.startswith("sqlite_autoindex_"):
        assert got == old
        return
    # (the one-fact reads' error is StoreCorrupt since 2026-12-07: FactStore's
    # public methods type SQLite's errors; before, a raw DatabaseError)
    assert old[1] == [(FACTS_DB, "facts not read: database error: database disk image is "
                       "malformed")] and got[1] == []

    def values(findings: list[dict], kind: str) -> set[str]:
        return {f["hash"] for f in findings if f["kind"] == kind}

    assert values(got[0], "fact") == values(old[0], "database") != set()
    assert {(f["fact_id"], f["revision"]) for f in got[0] if f["kind"] == "fact"} == {
        ("0fae3f4a2974d11f", 1), (PREF, 1), (PREF, 2), ("c283ab7d8ed884e4", 1)}


@pytest.mark.heavy
@pytest.mark.parametrize("name, offset, count", [d for d in DAMAGE
                                                 if not d[0].startswith("sqlite_autoindex_")])
def test_a_damaged_table_of_many_facts_loses_no_value(demo_template, tmp_path, name, offset,
                                                       count):
    """More facts than a page: the two reads stop at a damaged table page in
    other places (the one-fact reads at the first fact whose rows are on it,
    the listing's sorted reads where their scan reaches it), so a value may
    be named with its fact by one and only as a raw database string by the
    other (a review: 600 against 596 fact values at a damaged source_refs
    page).  Both say the facts were not all read, and neither loses a
    value."""
    store = copy_demo(demo_template, tmp_path / "demo")
    store_sql(store, *_KEYS_IN_TEXTS)
    store_sql(store, *(f"INSERT INTO facts VALUES ('{i:016x}', 1, '2026-01-01T00:00:00.000Z', "
                       "'2026-01-01T00:00:00.000Z')" for i in range(300)),
              *(f"INSERT INTO revisions VALUES ('{i:016x}', 1, 'text {i} AKIA{i:016d}', "
                "'2026-01-01T00:00:00.000Z')" for i in range(300)))
    _damage(store / "facts.sqlite3", name, offset, count)
    got = _report(store, secrets.Scanner)
    old = _report(store, _OneFactScanner)
    assert got[1] == old[1]

    def values(findings: list[dict]) -> set[str]:
        return {f["hash"] for f in findings if f["kind"] in ("fact", "database")}

    assert values(got[0]) == values(old[0])
