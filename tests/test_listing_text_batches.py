"""The listing fetches revisions by a byte budget, not a row count.

The revisions come from SQLite 2,000 rows at a time with their text: 200
revisions of 200 KiB held 40 MB in one batch, 800 of them 160 MB
(`facts --all` 77 -> 220 MiB, `validate` the same: a scale review).  A
batch is now sized from the text of the one before it, the first one
small, so that what a batch holds stays near ``TEXT_BATCH_BYTES``
whatever the texts' size (the sorted scans and the joined read alike).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lecode_memctl.core import facts as facts_mod
from lecode_memctl.core.facts import FactStore

from .builders import empty_facts_db

TEXT = 16 << 10
BUDGET = 64 << 10


def _store(tmp_path: Path, n: int) -> Path:
    db_path = tmp_path / "facts.sqlite3"
    now = "2026-01-01T00:00:00.000Z"
    with empty_facts_db(db_path) as db:
        for i in range(n):
            fid = f"{i:016x}"
            db.execute("INSERT INTO facts VALUES (?, 1, ?, ?)", (fid, now, now))
            db.execute("INSERT INTO revisions VALUES (?, 1, ?, ?)", (fid, "t" * TEXT, now))
    return db_path


def _largest_batch(db_path: Path, monkeypatch, joined: bool) -> tuple[int, int]:
    """The most text bytes one fetch of the listing returned, and the facts listed."""
    # (the first fetch, before any text is seen, is _TEXT_FIRST rows: 64 of
    # these texts would be 1 MiB, so the test's budget takes 2)
    monkeypatch.setattr(facts_mod, "TEXT_BATCH_BYTES", BUDGET, raising=False)
    monkeypatch.setattr(facts_mod, "_TEXT_FIRST", 2, raising=False)
    if joined:      # (the read by key, as where SQLite's temporary directory is in the store)
        monkeypatch.setattr(FactStore, "_sibling", lambda self: None)
    largest = [0]
    real = facts_mod._Cursor.fetchmany

    def fetchmany(self, size=None):  # noqa: ANN001, ANN202
        rows = real(self, size)
        got = sum(len(v) for r in rows for v in r if isinstance(v, str) and len(v) >= TEXT)
        largest[0] = max(largest[0], got)
        return rows

    monkeypatch.setattr(facts_mod._Cursor, "fetchmany", fetchmany)
    with FactStore.open_readonly(db_path) as fs:
        n = sum(1 for _ in fs.iter_fact_groups())
    return largest[0], n


@pytest.mark.parametrize("joined", [False, True])
def test_a_batch_of_revisions_holds_about_the_budget_whatever_the_texts(tmp_path: Path,
                                                                       monkeypatch,
                                                                       joined: bool) -> None:
    small = _largest_batch(_store(tmp_path / "a", 40), monkeypatch, joined)
    large = _largest_batch(_store(tmp_path / "b", 160), monkeypatch, joined)
    assert (small[1], large[1]) == (40, 160)
    # 2,000 rows a batch held every text of both stores (640 KiB, 2.5 MiB)
    assert large[0] <= BUDGET + TEXT, large
    assert small[0] <= BUDGET + TEXT, small
