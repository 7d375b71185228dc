"""CSV and TSV are UTF-8 whatever the locale (docs/OUTPUT.md, "Encoding"), as
JSON and JSONL are; tables and text follow the locale.

Before 2026-12-07 CSV and TSV went through stdout's text layer, so under a
Latin-1 locale, ``LC_ALL=C`` (without UTF-8 mode) or
``PYTHONIOENCODING=ascii`` a fact's ``é中😀`` came out as Latin-1 bytes or
as the backslash text ``\\xe9\\u4e2d\\U0001f600``, while JSONL had the text.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import orjson
import pytest

from lecode_memctl.cli import output

TEXT = "caf\u00e9 \u4e2d \U0001f600 x"
NOTE = "\u00e9\u4e2d\U0001f600"

# (the environment of each run: the locale's encoding is ASCII in the first
# two, UTF-8 in the last)
ENVS = {
    "pythonioencoding-ascii": {"PYTHONIOENCODING": "ascii"},
    "lc-all-c": {"LC_ALL": "C", "PYTHONUTF8": "0"},
    "lc-all-c-utf8": {"LC_ALL": "C.UTF-8", "PYTHONUTF8": "0"},
}


@pytest.fixture
def built(store, ss):
    """A store with a fact and a transcript message holding TEXT, a note
    named NOTE holding it, and a note whose name is not UTF-8."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore

    with ss.create("s-1") as w:
        w.append_message("user", TEXT)
    with FactStore(store.facts_db) as fs:
        fs.remember(TEXT, SessionStore(store, exclusions=fs).source_snapshot("s-1", 1, 1).ref,
                    sessions=ss)
    notes = store.path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / f"{NOTE}.md").write_text(TEXT + "\n", encoding="utf-8")
    with open(os.fsencode(notes) + b"/bad\xff.md", "wb") as f:
        f.write(b"x\n")
    return store


def memctl(store, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LC_CTYPE", "LANG")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store.path),
                           *args], capture_output=True, env=e, timeout=60)


# each command: its arguments, the field compared, and the values it must hold
CASES = {
    "facts": (("facts",), "text", {TEXT}),
    "facts-limit": (("facts", "--limit", "5"), "text", {TEXT}),
    "notes": (("notes",), "name", {NOTE, "bad\\xff"}),
    "search": (("search", "caf"), "text", {TEXT}),
    "grep": (("grep", "caf"), "line", {TEXT}),
    "validate": (("validate",), "file", {f"notes/{NOTE}.md"}),
}


@pytest.mark.parametrize("env", list(ENVS), ids=list(ENVS))
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_csv_and_tsv_are_utf8_whatever_the_locale(built, env, case):
    args, field, want = CASES[case]
    jl = memctl(built, *args, "--format", "jsonl", env=ENVS[env])
    assert jl.returncode in (0, 1), jl.stderr     # (validate: 1 for its warnings)
    rows = [orjson.loads(line) for line in jl.stdout.splitlines()]
    kind = rows[0]["type"]
    values = [r[field] for r in rows if r["type"] == kind]
    if not (env == "lc-all-c" and field in ("name", "file")):
        # (under LC_ALL=C without UTF-8 mode file names are ASCII: each byte
        # of another character is one that is not, \xNN in every format)
        assert want <= set(values), values
    for fmt in ("csv", "tsv"):
        p = memctl(built, *args, "--format", fmt, env=ENVS[env])
        assert p.returncode == jl.returncode, p.stderr
        text = p.stdout.decode("utf-8")     # (strict: every byte UTF-8)
        got = list(csv.DictReader(io.StringIO(text, newline=""),
                                  delimiter="," if fmt == "csv" else "\t"))
        assert [r[field] for r in got] == values, (fmt, text)


@pytest.mark.parametrize("env", ["pythonioencoding-ascii", "lc-all-c"])
def test_tables_and_text_still_follow_the_locale(built, env):
    """An ASCII locale: a table and search's text write what they cannot
    carry as backslash escapes, never an error."""
    for args in (("facts",), ("search", "caf")):
        p = memctl(built, *args, env=ENVS[env])
        assert p.returncode == 0, p.stderr
        assert p.stdout.isascii()
        assert b"\\u4e2d" in p.stdout and b"\\xe9" in p.stdout


def test_output_file_is_utf8_under_an_ascii_locale(built, tmp_path):
    out = tmp_path / "v.csv"
    p = memctl(built, "validate", "--format", "csv", "--output", str(out),
               env=ENVS["pythonioencoding-ascii"])
    assert p.returncode in (0, 1), p.stderr
    assert p.stdout == b""
    assert f"notes/{NOTE}.md".encode() in out.read_bytes()
    out.read_bytes().decode("utf-8")


# ------------------------------------------------------- in this process

def _ascii_stdout(monkeypatch) -> io.BytesIO:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii",
                                                        errors="backslashreplace",
                                                        newline="\n"))
    return raw


ROWS = [{"type": "x", "text": TEXT}, {"type": "x", "text": "lone \ud800 \udcff end"},
        {"type": "x", "text": 'two\nlines, "q"'}]
WANT = {"csv": 'type,text\nx,caf\u00e9 \u4e2d \U0001f600 x\nx,lone \\ud800 \\xff end\n'
               'x,"two\nlines, ""q"""\n',
        "tsv": 'type\ttext\nx\tcaf\u00e9 \u4e2d \U0001f600 x\nx\tlone \\ud800 \\xff end\n'
               'x\t"two\nlines, ""q"""\n'}


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_emit_csv_writes_utf8_bytes(monkeypatch, fmt, tty):
    """emit_csv and emit_csv_lines (the lines csv_line encoded) write UTF-8
    to an ASCII stdout; a lone surrogate is its escape, so that the bytes
    stay UTF-8; text written before comes first."""
    if tty:
        monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    for emit in ("rows", "lines"):
        raw = _ascii_stdout(monkeypatch)
        sys.stdout.write("before\n")
        if emit == "rows":
            output.emit_csv(iter(ROWS), ["type", "text"], fmt)
        else:
            line = output.csv_line(["type", "text"], fmt)
            output.emit_csv_lines((line(r) for r in ROWS), ["type", "text"], fmt)
        sys.stdout.flush()
        assert raw.getvalue().decode("utf-8") == "before\n" + WANT[fmt], emit


def test_csv_rows_before_an_error_are_written(monkeypatch):
    """The rows are gathered and encoded a chunk at a time in a pipe: those
    made before an error (or an interrupt) are written all the same."""
    raw = _ascii_stdout(monkeypatch)

    def rows():
        yield from ROWS[:2]
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        output.emit_csv(rows(), ["type", "text"], "csv")
    assert raw.getvalue().decode("utf-8") == WANT["csv"].rsplit("x,", 1)[0]


def test_csv_pieces_cut_inside_a_character_are_written_whole(capsysbinary, monkeypatch):
    """validate --format csv on a terminal reads its held rows back 1 MiB at
    a time: a piece could end inside a character, and the terminal's stream
    decodes each piece (exit 70, UnicodeDecodeError, before 2026-12-07)."""
    from lecode_memctl.cli import output

    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    text = "café 中文 😀\n".encode()
    pieces = [text[:i] for i in (4,)] + [text[4:8], text[8:9], text[9:16], text[16:]]
    assert b"".join(pieces) == text
    output.emit_csv_lines(pieces, ["a"], "csv")
    assert capsysbinary.readouterr().out == b"a\n" + text


def test_utf8_whole_end_at_every_cut():
    from lecode_memctl.core.utf8 import whole_end as _utf8_whole_end

    text = "aé中😀b".encode()
    for cut in range(len(text) + 1):
        piece = text[:cut]
        end = _utf8_whole_end(piece)
        piece[:end].decode("utf-8")                 # whole characters
        assert end >= cut - 3 and text[:end].decode("utf-8")[-1:] == piece[:end].decode()[-1:]
