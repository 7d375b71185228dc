"""tabulate formats named for a markup language write a store's text as that
markup's text, escaped, or are refused (docs/OUTPUT.md, "Formats").

Before 2026-12-07 only ``unsafehtml`` and ``latex_raw`` were refused: a
fact's ``use a | b for <script>`` in ``--format github`` or ``pipe`` started
a new cell at the ``|`` (the values shifted under the wrong headers) and
``<script>`` was live HTML; ``mediawiki``'s ``| x`` made an attribute and
``[[..]]``/``{{..}}`` were live; ``orgtbl``, ``jira`` and the others alike.
"""

from __future__ import annotations

import html
import re

import orjson
import pytest

from .conftest import run_cli

TEXT = ("use a | b for <script>alert(1)</script> [[Main Page]] {{tpl}} *x* _y_ `c` "
        "~~s~~ $m$ &amp; \\| close |} ! !! '''b''' ~~~~ __NOTOC__")


@pytest.fixture
def store_path(tmp_path):
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(tmp_path / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1") as w:
        w.append_message("user", TEXT)
    ref = SourceRef("s1", (1,), canonical_digest(sessions.records("s1", 1, 1)))
    facts.add(TEXT, ref=ref)
    facts.close()
    return str(st.path)


def facts(store_path: str, fmt: str):
    return run_cli("--store", store_path, "facts", "--format", fmt)


REFUSED = ["unsafehtml", "latex_raw", "orgtbl", "rst", "asciidoc", "jira", "moinmoin",
           "textile", "youtrack"]


@pytest.mark.parametrize("fmt", REFUSED)
def test_a_markup_format_memctl_cannot_escape_is_refused(store_path, fmt):
    r = facts(store_path, fmt)
    assert r.exit_code == 2, (r.exit_code, r.stdout)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"--format {fmt} writes the store's text unescaped" in r.stderr
    assert "use --format" in r.stderr


def _row(text: str) -> str:
    """The table's line holding the fact."""
    (line,) = [ln for ln in text.splitlines() if "alert(1)" in ln]
    return line


@pytest.mark.parametrize("fmt", ["github", "pipe"])
def test_markdown_tables_escape_the_text(store_path, fmt):
    """github and pipe (GitHub-flavoured Markdown): a | in a cell is \\|, the
    characters that start Markdown markup are backslash-escaped; rendered,
    the row has its columns and the cell is the text."""
    r = facts(store_path, fmt)
    assert r.exit_code == 0, r.stderr
    head = [ln for ln in r.stdout.splitlines() if ln.startswith("|")][0]
    row = _row(r.stdout)
    unescaped = re.compile(r"(?<!\\)(?:\\\\)*\|")
    assert len(unescaped.findall(row)) == len(unescaped.findall(head)), row
    md = pytest.importorskip("markdown_it")
    page = md.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(r.stdout)
    # (the fact's row, the first: the footer lines after the table are
    # rows of it too, in GFM)
    body = page.split("<tbody>")[1].split("</tr>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", body)
    heads = re.findall(r"<th[^>]*>(.*?)</th>", page)
    assert len(cells) == len(heads), cells
    assert html.unescape(cells[heads.index("text")]) == TEXT
    assert "<script" not in page and "<em>" not in page and "<code>" not in page
    assert "<s>" not in page and "<a " not in page


def test_mediawiki_escapes_the_text(store_path):
    """mediawiki: the characters of wiki markup are character references,
    which MediaWiki shows as the characters and never reads as markup."""
    r = facts(store_path, "mediawiki")
    assert r.exit_code == 0, r.stderr
    row = _row(r.stdout)
    assert row.startswith("| ")
    cells = row[2:].split(" || ")
    assert len(cells) == len(r.stdout.split("\n! ")[1].split(" !! "))
    text = [c for c in cells if "alert(1)" in c][0].strip()
    for c in "|![]{}<>'~_":
        assert c not in text, c
    assert html.unescape(text) == TEXT


PLAIN = ["plain", "simple", "grid", "simple_grid", "fancy_grid", "rounded_grid", "heavy_grid",
         "double_grid", "mixed_grid", "colon_grid", "outline", "simple_outline",
         "rounded_outline", "heavy_outline", "double_outline", "mixed_outline",
         "fancy_outline", "psql", "presto", "pretty", "tsv"]


@pytest.mark.parametrize("fmt", PLAIN)
def test_plain_text_formats_write_the_text_as_it_is(store_path, fmt):
    r = facts(store_path, fmt)
    assert r.exit_code == 0, r.stderr
    assert TEXT in r.stdout


@pytest.mark.parametrize(("fmt", "want"), [
    ("html", html.escape(TEXT)),
    ("latex", "\\ensuremath{<}script\\ensuremath{>}alert(1)"),
    ("latex_booktabs", "\\ensuremath{<}script\\ensuremath{>}alert(1)"),
    ("latex_longtable", "\\ensuremath{<}script\\ensuremath{>}alert(1)")])
def test_formats_that_escape_themselves_are_as_they_were(store_path, fmt, want):
    r = facts(store_path, fmt)
    assert r.exit_code == 0, r.stderr
    assert want in r.stdout and "<script>" not in r.stdout


def test_every_tabulate_format_is_decided():
    """A format a later tabulate adds is neither escaped nor refused until
    it is looked at here."""
    import tabulate

    known = set(REFUSED) | {"github", "pipe", "mediawiki", "html", "latex", "latex_booktabs",
                            "latex_longtable", *PLAIN}
    assert set(tabulate.tabulate_formats) <= known, set(tabulate.tabulate_formats) - known


# ------------------------------------------------------------ an empty name

@pytest.mark.parametrize("args", [
    ["facts", "--format="], ["facts", "-f", ""], ["facts", "--json", "--format="],
    ["history", "0123456789abcdef", "--format="], ["sessions", "--format="],
    ["notes", "--format="], ["config", "--format="], ["usage", "--format="],
    ["projects", "--format="], ["search", "x", "--format="], ["grep", "x", "--format="],
    ["validate", "--format", ""], ["validate", "--list-codes", "--format="],
    ["secrets", "--format="], ["migrate-legacy", "--format="],
])
def test_an_empty_format_is_a_usage_error(args, store_path, tmp_path, monkeypatch):
    """``--format=`` was the default format (a table, the text report), as
    if not given; an empty --since= already is exit 2, as an empty path."""
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.chdir(proj)
    store = [] if args[0] in ("projects", "migrate-legacy") else ["--store", store_path]
    r = run_cli(*store, *args)
    assert r.exit_code == 2, (args, r.exit_code, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    assert "--format needs a format name" in r.stderr or "unknown format ''" in r.stderr
    if "--json" in args:    # (the error as a JSON document, as every --json error)
        assert orjson.loads(r.stdout)["error"]["exit_code"] == 2
    else:
        assert r.stdout == ""


@pytest.mark.parametrize("fmt", ["github", "pipe", "mediawiki", "html", "latex"])
def test_a_markup_table_is_stdout_alone(store_path, fmt):
    """The lines after a table (its count, the learning status, whose
    proposals hold a transcript's text) were written on stdout right after a
    markup table: a Markdown table took them for rows, HTML made them live.
    They go to stderr now."""
    r = facts(store_path, fmt)
    assert r.exit_code == 0, r.stderr
    assert "facts 1-1 of 1" in r.stderr and "learning:" in r.stderr
    assert "facts 1-1" not in r.stdout and "learning" not in r.stdout
    if fmt in ("github", "pipe"):
        assert all(line.startswith("|") for line in r.stdout.splitlines()), r.stdout


def test_a_plain_table_keeps_its_lines_on_stdout(store_path):
    r = facts(store_path, "plain")
    assert "facts 1-1 of 1" in r.stdout and "learning:" in r.stdout


@pytest.mark.parametrize("fmt", ["github", "html"])
def test_usage_in_a_markup_format_writes_its_lines_for_people_on_stderr(store_path, fmt):
    """usage wrote '<project>: N session(s) counted' (a store's name, which
    can be '<img onerror=...>') on stdout before the table."""
    r = run_cli("--store", store_path, "usage", "--format", fmt)
    assert r.exit_code == 0, r.stderr
    assert "session(s) counted" in r.stderr and "session(s)" not in r.stdout
