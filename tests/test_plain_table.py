"""``output.plain_table`` gives tabulate's "plain" table byte for byte (issue 13:
a listing in a pipe renders without importing tabulate).

Compared with tabulate itself over arbitrary cells: ASCII, wide and
combining characters, white space at either end, control characters (where
plain_table declines and tabulate renders), empty tables."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tabulate
from hypothesis import given, settings, strategies as st

from lecode_memctl.cli import output
from lecode_memctl.cli.output import plain_table


def reference(rows: list[list[str]], heads: list[str]) -> str:
    tabulate.PRESERVE_WHITESPACE = False
    return tabulate.tabulate(rows, headers=heads, tablefmt="plain", disable_numparse=True)


def _wcwidth_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("wcwidth") is not None


ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=12)
# everything: wide (CJK), combining, Unicode spaces that str.strip removes,
# controls (newline, ESC, \x01 = tabulate's separating line), "True"/"1.5"
# (tabulate types them, but with numparse off it aligns them as text)
any_text = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["True", "False", "1", "1.5", "1,000", "", " ", "\u3000x\u3000", "\x01",
                     "a\nb", "\x1b[31mred\x1b[0m", "日本語", "e\u0301", "\xa0x", "-", "nan"]),
)


@st.composite
def tables(draw, cell=any_text):
    n = draw(st.integers(min_value=1, max_value=5))
    heads = draw(st.lists(cell, min_size=n, max_size=n))
    rows = draw(st.lists(st.lists(cell, min_size=n, max_size=n), max_size=6))
    return rows, heads


@settings(max_examples=400, deadline=None)
@given(tables(ascii_text))
def test_printable_ascii_is_tabulate(table):
    rows, heads = table
    got = plain_table(rows, heads)
    assert got is not None          # the common case never needs tabulate
    assert got == reference(rows, heads)


@pytest.mark.heavy
@settings(max_examples=600, deadline=None)
@given(tables())
def test_any_text_is_tabulate_or_declined(table):
    rows, heads = table
    got = plain_table(rows, heads)
    if got is not None:
        assert got == reference(rows, heads)
    joined = "".join(heads) + "".join(c for r in rows for c in r)
    if not any(ord(c) < 0x20 or c == "\x7f" for c in joined) and (
            joined.isascii() or not _wcwidth_installed()):
        assert got is not None


def test_declines_control_characters():
    for cell in ("a\nb", "\x1b[31mred\x1b[0m", "\x01", "a\rb"):
        assert plain_table([[cell]], ["h"]) is None


def test_declines_ragged_rows_and_other_types():
    assert plain_table([["a", "b"]], ["h"]) is None
    assert plain_table([[1]], ["h"]) is None        # type: ignore[list-item]


def test_non_ascii_declined_when_wcwidth_is_installed(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "wcwidth" else real(name, *a))
    assert plain_table([["日本語"]], ["h"]) is None
    assert plain_table([["abc"]], ["h"]) == reference([["abc"]], ["h"])


def test_empty_listing_is_the_header_line():
    assert plain_table([], ["id", "name"]) == reference([], ["id", "name"]) == "id    name"


@pytest.mark.parametrize("fmt", ["table"])
def test_render_rows_in_a_pipe_does_not_import_tabulate(fmt):
    code = (
        "import sys\n"
        "from lecode_memctl.cli import output\n"
        f"output.render_rows([{{'a': 'x', 'b': 'yy'}}], ['a', 'b'], {fmt!r})\n"
        "sys.stderr.write(str('tabulate' in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout == reference([["x", "yy"]], ["a", "b"]) + "\n"
    assert r.stderr == "False"


def test_render_rows_falls_back_to_tabulate(capsys):
    output.render_rows([{"a": "x", "b": "y"}], ["a", "b"], "grid")
    assert capsys.readouterr().out == tabulate.tabulate(
        [["x", "y"]], headers=["a", "b"], tablefmt="grid", disable_numparse=True) + "\n"


_CELL_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text() | st.text(alphabet=st.characters(max_codepoint=0x7f)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=2),
    max_leaves=5)


@settings(max_examples=400, deadline=None)
@given(_CELL_VALUES)
def test_a_table_cell_is_the_escaped_display_text(value):
    """The fast path for printable ASCII text and integers gives what the
    escaping of the display text gives, for every kind of value."""
    from lecode_memctl.core.rowmodel import flat

    def outcome(f):  # noqa: ANN001, ANN202 - (a value flat cannot encode raises on both ways)
        try:
            return f()
        except TypeError as exc:
            return type(exc)

    assert outcome(lambda: output._table_cell(value, flat)) == outcome(
        lambda: output.safe(output._display_cell(value, flat)))


@settings(max_examples=400, deadline=None)
@given(_CELL_VALUES)
def test_a_csv_cell_is_the_escaped_flat_text(value):
    """CSV and TSV cells take the same fast path (printable ASCII text,
    integers, none): each gives what escaping the flat encoding gives, for
    every kind of value."""
    from lecode_memctl.core.rowmodel import flat

    def outcome(f):  # noqa: ANN001, ANN202 - (a value flat cannot encode raises on both ways)
        try:
            return f()
        except TypeError as exc:
            return type(exc)

    cells = output.csv_cells(["v"])
    assert outcome(lambda: cells({"v": value})) == outcome(
        lambda: [output.safe(flat(value), keep_newlines=True)])
    assert outcome(lambda: output._csv_cell(value, flat)) == outcome(
        lambda: output.safe(flat(value), keep_newlines=True))
