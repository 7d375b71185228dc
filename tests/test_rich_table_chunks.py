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
    any_text.map(lambda t: output.safe(t)),
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


# cells a fact's row mostly holds: printable ASCII (drawn by output._RowLines,
# not rich, after the first chunk), with now and then one that is not
_ASCII_CELL = st.one_of(
    st.text(alphabet="abc xyz-.,:/()0123456789", max_size=70),
    st.sampled_from(["", " ", "  a  b  ", "x" * 90, "word " * 30, "a" * 23 + " b",
                     "trailing   ", "   leading", "0123456789abcdef", "tab\\tsep"]),
)
_MIXED_CELL = st.one_of(_ASCII_CELL, _ASCII_CELL, _ASCII_CELL, _CELL)


@pytest.mark.heavy
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
           st.lists(st.lists(_MIXED_CELL, min_size=n, max_size=n), min_size=2, max_size=16),
           st.lists(st.sampled_from(["ID", "TEXT", "revision", ""]), min_size=n, max_size=n),
           st.sets(st.integers(0, n - 1)))),
       st.sampled_from([20, 40, 80, 132]), st.integers(1, 4), st.sampled_from([None, "facts"]))
def test_rows_drawn_without_rich_are_the_table_drawn_whole(monkeypatch, table, width, chunk, title):
    """Past the first chunk, the rows of printable ASCII are drawn by
    ``_RowLines`` (a run of other rows by rich): the same text as rich's
    whole table, the same as when rich draws every chunk."""
    rows, heads, ids = table
    whole = _draw(monkeypatch, rows, heads, sorted(ids), width, None, title)
    assert _draw(monkeypatch, rows, heads, sorted(ids), width, chunk, title) == whole
    with monkeypatch.context() as mp:
        mp.setattr(output._RowLines, "SAMPLE", 0)      # (never trusted: rich draws all)
        assert _draw(monkeypatch, rows, heads, sorted(ids), width, chunk, title) == whole


def _rows_made_here(monkeypatch) -> list[int]:  # noqa: ANN001
    """The number of rows of each call of ``_RowLines.text`` from now on."""
    made: list[int] = []
    real = output._RowLines.text

    def text(self, rows):  # noqa: ANN001, ANN202
        made.append(len(rows))
        return real(self, rows)

    monkeypatch.setattr(output._RowLines, "text", text)
    return made


def test_the_demo_listing_past_its_first_chunk_is_drawn_without_rich(monkeypatch):
    rows = [[f"{i:016x}", str(i % 3 + 1), "valid" if i % 4 else "stale (the digest differs)",
             f"s-{i % 7}:{i}", "a fact about " + "tabs and spaces " * (i % 9)
             + ("caf\u00e9" if i % 10 == 3 else "")] for i in range(57)]
    heads = ["FACT_ID", "REV", "STATUS", "SOURCE", "TEXT"]
    made = _rows_made_here(monkeypatch)
    for width in (50, 100, 200):
        whole = _draw(monkeypatch, rows, heads, [0], width, None, "facts 1-57 of 57")
        made.clear()
        assert _draw(monkeypatch, rows, heads, [0], width, 10, "facts 1-57 of 57") == whole
        # the first chunk by rich, the sample (the second chunk's plain rows,
        # at most SAMPLE) both ways, every plain row after the first chunk here
        plain = [r for r in rows[10:] if "\u00e9" not in r[4]]
        sample = min(output._RowLines.SAMPLE, sum(1 for r in rows[10:20] if r in plain))
        folds = 6 * 4       # (six rows folding each of the four text columns)
        assert sum(made) == len(plain) + sample + folds


def test_rows_a_different_rich_would_draw_otherwise_are_drawn_by_rich(monkeypatch):
    """Where the sample of plain rows drawn here is not what rich draws (as
    another version of rich might), rich draws every chunk."""
    rows = [[f"{i:016x}", "a fact about " + "tabs and spaces " * (i % 9)] for i in range(40)]
    whole = _draw(monkeypatch, rows, ["ID", "TEXT"], [0], 60, None, None)
    monkeypatch.setattr(output._RowLines, "_folded",
                        lambda self, text, width: [text[:width].ljust(width)])
    made = _rows_made_here(monkeypatch)
    assert _draw(monkeypatch, rows, ["ID", "TEXT"], [0], 60, 8, None) == whole
    assert made == [8 + 6]     # (the sample alone: the second chunk's 8 rows, 6 folding)


_PLAIN_CELL = st.one_of(
    st.text(alphabet="ab xyz-.,:/()019", max_size=70),
    st.sampled_from(["", " ", "  a  b  ", "x" * 90, "word " * 30, "a" * 23 + " b",
                     "trailing   ", "   leading", "a  " * 20, "tab\\tsep"]),
)


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
           st.lists(st.lists(_PLAIN_CELL, min_size=n, max_size=n), min_size=1, max_size=8),
           st.lists(st.integers(1, 40), min_size=n, max_size=n),
           st.sets(st.integers(0, n - 1)))))
def test_plain_rows_are_drawn_as_rich_draws_them(table):
    """``_RowLines.text`` on its own (not behind the check of its sample)
    against rich's table of the same rows: the same text."""
    from rich.console import Console
    from rich.text import Text

    rows, fixed, id_at = table
    columns = [f"c{i}" for i in range(len(fixed))]
    ids = [columns[i] for i in id_at]
    for i in id_at:             # (an id column is as wide as its longest id)
        fixed[i] = max([fixed[i], *(len(r[i]) for r in rows)])
    lines = output._RowLines(columns, ids, fixed)
    assert all(lines.plain(r) for r in rows)
    buf = io.StringIO()
    con = Console(file=buf, width=sum(fixed) + 3 * len(fixed) + 10, markup=False,
                  highlight=False, emoji=False, force_terminal=True, soft_wrap=True)
    frame = output._rich_frame(columns, columns, title=None, ids=ids, widths=fixed,
                               fixed=fixed, header=False)
    for r in rows:
        frame.add_row(*(Text(c) for c in r))
    con.print(frame)
    assert lines.text(rows) == buf.getvalue()


def test_a_column_rich_draws_0_wide_is_left_to_rich(monkeypatch):
    """Ids wider than the terminal squeeze a text column to 0 wide: no line
    to fold a text into, so rich draws every chunk (it was a ValueError,
    ``divide_line`` asked for lines 0 wide: exit 70)."""
    rows = [["", "", "", ""]] * 12 + [["", "", "", "0"], ["", "", "\u2e80\u2e80\u2ff0\u2ff0", ""]]
    whole = _draw(monkeypatch, rows, ["ID"] * 4, [0, 2], 20, None, None)
    for chunk in (1, 2, 3, 4):
        assert _draw(monkeypatch, rows, ["ID"] * 4, [0, 2], 20, chunk, None) == whole


def test_a_sample_that_fits_its_columns_still_checks_the_folding(monkeypatch):
    """The check of the sample folds each text column itself: a data sample
    whose rows all fit does not leave a folding rich would not make (as
    another rich might fold) to the rows after it (a review of cf59c3e)."""
    rows = [[f"{i:04x}", "short"] for i in range(8)] + [[f"{i:04x}", "word " * 10]
                                                       for i in range(8, 12)]
    whole = _draw(monkeypatch, rows, ["ID", "TEXT"], [0], 30, None, None)
    monkeypatch.setattr(output._RowLines, "_folded",
                        lambda self, text, width: [text[:width].ljust(width)])
    assert _draw(monkeypatch, rows, ["ID", "TEXT"], [0], 30, 4, None) == whole


def test_lines_break_where_rich_breaks_them():
    """``_ascii_breaks`` against rich's own ``divide_line`` (a private
    function of the rich this runs with): every text of up to 8 characters
    over space, 'a' and 'b' at widths 1 to 6, and long random texts of
    printable ASCII."""
    import itertools
    import random

    divide_line = pytest.importorskip("rich._wrap").divide_line
    for size in range(9):
        for chars in itertools.product(" ab", repeat=size):
            text = "".join(chars)
            for width in range(1, 7):
                assert output._ascii_breaks(text, width) == divide_line(text, width, fold=True), \
                    (text, width)
    rnd = random.Random(13)
    alphabet = "".join(map(chr, range(32, 127))) + "     "
    for _ in range(2000):
        text = "".join(rnd.choice(rnd.choice([" ab", " x", alphabet]))
                       for _ in range(rnd.randint(0, 400)))
        width = rnd.randint(1, 90)
        assert output._ascii_breaks(text, width) == divide_line(text, width, fold=True), \
            (text, width)
