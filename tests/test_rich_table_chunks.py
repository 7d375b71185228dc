"""A listing's rich table on a terminal, past ``output.RICH_CHUNK`` rows, is
drawn a chunk of rows at a time with the column widths the whole table
would have (measured while the cells are held compactly, past
``TABLE_HELD_IN_MEMORY`` bytes in an unnamed temporary file): the same
text as the table drawn whole, in memory that does not grow with the rows
(2026-12-06: ``facts --all`` of 100,000 facts on a terminal held every
row as rich objects, 704 MiB; 10,000 facts 104 MiB)."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.cli import output

from .test_plain_table import any_text

# cells as output._table_cell makes them (no newline; other escapes kept)
_CELL = st.one_of(
    any_text.map(lambda t: output.safe(t, keep_newlines=False)),
    st.sampled_from(["", " ", "   ", "a b", "x" * 200, "word " * 40, "\u2028x", "日本語 テキスト",
                     "\xa0\xa0", "tab\\tsep", "0123456789abcdef"]),
    st.text(alphabet="ab \u3000日", max_size=60),
)


def _draw(monkeypatch, rows, heads, ids, width, chunk, title) -> str:  # noqa: ANN001
    buf = io.StringIO()
    real = output.console

    def console(stderr=False, width=None, _default=width):  # noqa: ANN001, ANN202
        c = real(stderr=stderr, width=width or _default)
        c.file = buf
        return c

    with monkeypatch.context() as mp:
        mp.setattr(output, "console", console)
        mp.setattr(output, "RICH_CHUNK", chunk)
        mp.setattr(output, "TABLE_HELD_IN_MEMORY", 64)
        output._rich_table(iter(rows), [f"c{i}" for i in range(len(heads))], heads,
                           title=title, ids=[f"c{i}" for i in ids])
    return buf.getvalue()


@pytest.mark.heavy
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
           st.lists(st.lists(_CELL, min_size=n, max_size=n), min_size=0, max_size=14),
           st.lists(st.sampled_from(["ID", "TEXT", "revision", "", "日本"]), min_size=n,
                    max_size=n),
           st.sets(st.integers(0, n - 1)))),
       st.sampled_from([20, 40, 80, 132]), st.integers(1, 4), st.sampled_from([None, "facts"]))
def test_a_table_drawn_in_chunks_is_the_table_drawn_whole(monkeypatch, table, width, chunk, title):
    rows, heads, ids = table
    whole = _draw(monkeypatch, rows, heads, sorted(ids), width, None, title)
    assert _draw(monkeypatch, rows, heads, sorted(ids), width, chunk, title) == whole


def test_the_demo_listing_is_the_same_in_chunks(monkeypatch):
    rows = [[f"{i:016x}", str(i % 3 + 1), "valid" if i % 4 else "stale (the digest differs)",
             f"s-{i % 7}:{i}", "a fact about " + "tabs and spaces " * (i % 9)] for i in range(57)]
    heads = ["FACT_ID", "REV", "STATUS", "SOURCE", "TEXT"]
    for width in (50, 100, 200):
        whole = _draw(monkeypatch, rows, heads, [0], width, None, "facts 1-57 of 57")
        assert _draw(monkeypatch, rows, heads, [0], width, 10, "facts 1-57 of 57") == whole
        assert whole.count("\n") > 57
