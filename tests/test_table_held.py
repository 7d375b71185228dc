"""A plain table (``--format table`` in a pipe) holds its cells compactly,
past ``output.TABLE_HELD_IN_MEMORY`` bytes in an unnamed temporary file,
and writes the text ``plain_table`` makes of them, byte for byte (issue 13:
``facts --all`` on 100,000 facts held 276 MiB of rows, 42 MiB now)."""

from __future__ import annotations

import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.cli import cmd_audit, output

from .builders import copy_demo
from .conftest import run_cli
from .test_plain_table import any_text, tables
from .test_validate_json_held import _legacy_facts, child_peak_kib


@pytest.mark.heavy
@settings(max_examples=300, deadline=None)
@given(tables(), st.sampled_from([0, 1, 40, 1 << 20]), st.integers(0, 40))
def test_held_cells_decide_and_render_as_plain_table(table, bound, cut):
    """Declined exactly where plain_table declines; else the same text.
    The rows' stats taken in two parts (``cut``) and merged, as a split
    listing's two processes take them, decide the same."""
    rows, heads = table
    with output.held_rows(bound, b"") as held:
        stats, second = output.PlainStats(heads), output.PlainStats(heads)
        for i, row in enumerate(rows):
            (stats if i < cut else second).add(row)
            output.hold_value(held, row)
        stats.merge(second.state())
        assert stats.rows == len(rows)
        widths = stats.widths()
        assert list(output.held_values(held.pieces())) == rows
        want = output.plain_table(rows, heads)
        assert (widths is None) == (want is None)
        if widths is not None:
            lines: list[str] = []
            real = output.echo
            output.echo = lines.append          # type: ignore[assignment]
            try:
                output._echo_plain(output.held_values(held.pieces()), heads, widths)
            finally:
                output.echo = real              # type: ignore[assignment]
            assert "\n".join(lines) == want


def _rendered(capsys, monkeypatch, rows, bound, **kw) -> str:  # noqa: ANN001
    monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", bound)
    output.render_rows(rows, ["a", "b", "c"], "table", **kw)
    return capsys.readouterr().out


row_values = st.one_of(any_text, st.none(), st.integers(), st.booleans(),
                       st.lists(st.integers(), max_size=3))


@pytest.mark.heavy
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.fixed_dictionaries({"a": row_values, "b": row_values, "c": row_values}),
                max_size=30), st.sampled_from([0, 1, 100]))
def test_render_rows_is_the_table_made_whole(capsys, rows, bound):
    with pytest.MonkeyPatch.context() as mp:
        want = _rendered(capsys, mp, rows, None, title="a title")
    with pytest.MonkeyPatch.context() as mp:
        assert _rendered(capsys, mp, rows, bound, title="a title") == want


def test_declined_cells_go_to_tabulate_from_the_held_rows(capsys, monkeypatch):
    """Text outside ASCII with wcwidth installed: tabulate renders, from
    rows read back from the temporary file."""
    import importlib.util

    rows = [{"a": "日本語", "b": f"row {i}", "c": "é" * (i % 7)} for i in range(300)]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "wcwidth" else real(name, *a))
    want = _rendered(capsys, monkeypatch, rows, None)
    assert _rendered(capsys, monkeypatch, rows, 0) == want
    assert "日本語" in want


def test_without_a_temporary_file_the_cells_stay_in_memory(capsys, monkeypatch):
    import tempfile

    rows = [{"a": f"{i:016x}", "b": "x" * (i % 50), "c": i} for i in range(2000)]
    want = _rendered(capsys, monkeypatch, rows, None)

    def no_room(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    assert _rendered(capsys, monkeypatch, rows, 0) == want


@pytest.mark.heavy
def test_facts_all_as_a_table_does_not_follow_the_facts(demo_template, tmp_path):
    """At 6,000 and 24,000 facts (before: some 60 MiB apart); the footer
    still counts every fact."""
    peaks = []
    for n in (6000, 24000):
        store = copy_demo(demo_template, tmp_path / f"demo{n}")
        _legacy_facts(store, n)
        peak, out = child_peak_kib(store, "facts", "--all")
        peaks.append(peak)
        total = run_cli("--store", str(store), "--no-state", "facts", "--json",
                        "--limit", "1").stdout_bytes
        n_all = orjson.loads(total)["total"]
        assert f"\nfacts 1-{n_all} of {n_all}\n".encode() in out
        assert out.count(b"\n") > n
    assert peaks[1] - peaks[0] < 10 << 10, peaks


@pytest.mark.parametrize("bound", [None, 0])
def test_an_empty_listing_is_its_note(demo_template, tmp_path, monkeypatch, bound):
    store = copy_demo(demo_template, tmp_path / "demo")
    monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", bound)
    r = run_cli("--store", str(store), "--no-state", "facts", "--all", "--query", "no such words")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("no facts matching the filters\n")


def test_the_listing_is_read_before_the_learning_status(demo_template, tmp_path, monkeypatch):
    """facts --all as a table reads the learning status once every row is
    read (as when it held the rows): a listing that fails after its first
    row is the error, not a learning status that fails too (review of
    d19b01f: the status was read after the first row)."""
    from lecode_memctl.core import factview
    from lecode_memctl.core.errors import StoreCorrupt

    store = copy_demo(demo_template, tmp_path / "demo")
    real = factview._listing_rows      # (every listing's rows, in one process or two)
    order: list[str] = []

    def failing_rows(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        it = real(*a, **kw)
        yield next(it)
        order.append("rows")
        raise StoreCorrupt("the listing failed after its first row")

    def learning(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        order.append("learning")
        raise StoreCorrupt("the learning status failed")

    monkeypatch.setattr(factview, "_listing_rows", failing_rows)
    monkeypatch.setattr(factview, "learning_status", learning)
    r = run_cli("--store", str(store), "--no-state", "facts", "--all")
    assert r.exit_code == 5 and r.stdout == ""
    assert "the listing failed after its first row" in r.stderr, r.stderr
    assert order == ["rows"]


def test_no_column_is_the_header_line_alone(capsys, monkeypatch):
    """(plain_table's answer; no caller passes no column)"""
    for bound in (None, 0):
        monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", bound)
        output.render_rows([{}, {}, {}], [], "table")
        assert capsys.readouterr().out == "\n"


def test_a_tmpdir_inside_the_store_is_passed_over(demo_template, tmp_path, monkeypatch):
    """The held rows' temporary file is never made in the store, even with
    $TMPDIR (and TEMP, TMP) pointing into it: a read command makes no
    file there, not even one unlinked at once (docs/FORMAT.md)."""
    import tempfile

    from lecode_memctl.core.atomic import resolves_inside

    store = copy_demo(demo_template, tmp_path / "demo")
    _legacy_facts(store, 300)
    cases = [("facts", "--all"), ("validate", "--json"), ("validate",),
             ("validate", "--format", "csv")]
    want = {}
    for args in cases:
        monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", None)
        monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", None)
        r = run_cli("--store", str(store), "--no-state", *args)
        want[args] = (r.exit_code, r.stdout_bytes)
    inside = store / "sessions"
    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.setenv(var, str(inside))
    real = tempfile.TemporaryFile
    dirs: list[str] = []

    def recorded(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        dirs.append(kw.get("dir") or tempfile.gettempdir())
        return real(*a, **kw)

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", 0)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", 0)
    before = sorted(os.listdir(inside))
    for args in cases:
        r = run_cli("--store", str(store), "--no-state", *args)
        got = (r.exit_code, r.stdout_bytes)
        if args == ("validate", "--json"):
            assert orjson.loads(got[1])["findings"] == orjson.loads(want[args][1])["findings"]
        else:
            assert got == want[args], args
    assert dirs and not any(resolves_inside(d, store) for d in dirs), dirs
    # validate's own --store (not the global option: a review of 63c118a)
    dirs.clear()
    r = run_cli("--no-state", "validate", "--store", str(store))
    assert (r.exit_code, r.stdout_bytes) == want[("validate",)]
    assert dirs and not any(resolves_inside(d, store) for d in dirs), dirs
    assert sorted(os.listdir(inside)) == before


def test_with_no_temporary_directory_outside_the_store_the_rows_stay_in_memory(
        demo_template, tmp_path, monkeypatch):
    from lecode_memctl.core import atomic

    store = copy_demo(demo_template, tmp_path / "demo")
    _legacy_facts(store, 300)
    want = run_cli("--store", str(store), "--no-state", "facts", "--all").stdout_bytes
    with monkeypatch.context() as mp:
        mp.setattr(atomic, "_temp_candidates", lambda: iter([str(store / "sessions"), ""]))
        assert atomic.temp_parent([store]) is None
        assert atomic.temp_parent([tmp_path / "elsewhere"]) == os.path.realpath(store / "sessions")
    monkeypatch.setattr(atomic, "temp_parent", lambda outside: None)
    monkeypatch.setattr(output, "TABLE_HELD_IN_MEMORY", 0)
    r = run_cli("--store", str(store), "--no-state", "facts", "--all")
    assert (r.exit_code, r.stdout_bytes) == (0, want)


def test_no_descriptor_left_for_the_temporary_file_keeps_the_rows_in_memory(monkeypatch):
    """With every descriptor taken, even ``import tempfile`` fails (EMFILE):
    the rows stay in memory, the command goes on (a review of 08e5631: the
    error escaped, and validate printed no report, exit 5)."""
    import builtins
    import sys

    real = builtins.__import__

    def no_fd(name, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if name == "tempfile":
            raise OSError(24, "Too many open files")
        return real(name, *a, **kw)

    monkeypatch.delitem(sys.modules, "tempfile", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_fd)
    with output.held_rows(10, b",") as held:
        for i in range(5):
            held.add(b"row %d" % i)
        assert b"".join(held.pieces()) == b"row 0,row 1,row 2,row 3,row 4"


def test_a_value_longer_than_many_pieces_comes_back_whole():
    """A cell of 3 MiB between small ones, held in a file read back a MiB at
    a time: each value whole and in order."""
    big = "x" * (3 << 20) + "é"
    values = [["a", "b"], ["c", big], ["d", ""], [big[:10], "e"]]
    with output.held_rows(0, b"") as held:
        for v in values:
            output.hold_value(held, v)
        assert list(output.held_values(held.pieces())) == values
        assert list(output.held_values(iter([b"".join(held.pieces())]))) == values
    with pytest.raises(OSError, match="middle of a row"):
        list(output.held_values(iter([b"\x09\x00\x00\x00abc"])))


@pytest.mark.parametrize("state", [(-3, True, [1, 2, 3], True, True, False),
                                   (1, True, [1, 2, "x"], True, True, False),
                                   (1, True, [1, 2], True, True, False),
                                   (1, 1, [1, 2, 3], True, True, False),
                                   (1, True, (1, 2, 3), True, True, False),
                                   (1, True, [1, 2, 3], True, True)])
def test_stats_refuse_a_state_that_is_not_one_and_change_nothing(state):
    """(a review of the split table: a state with a width that is no int
    was taken in, and the table failed as an internal error)"""
    import marshal

    stats = output.PlainStats(["a", "b", "c"])
    stats.add(["x", "y", "z"])
    before = stats.state()
    with pytest.raises(ValueError):
        stats.merge(marshal.dumps(state))
    with pytest.raises(ValueError):
        stats.merge(b"not marshal")
    assert stats.state() == before
    stats.merge(output.PlainStats(["a", "b", "c"]).state())
    assert stats.rows == 1
