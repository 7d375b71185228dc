"""Stored text is untrusted: no terminal control reaches stdout in human output.

A note, MEMORY.md, a daily log and a note *file name* carry ESC/CSI
sequences, OSC 8 hyperlinks, OSC 52 clipboard writes, C1 controls, a bare
carriage return, a bidi override and rich markup.  Human output must show
them escaped (markup literally); ``--json`` must round-trip the exact text.
"""

from __future__ import annotations

import datetime
import re

import orjson
import pytest

from lecode_memctl.cli import output

from .conftest import run_cli

EVIL = (
    "# Notes\n"
    "red \x1b[31mRED\x1b[0m and clear \x1b[2J\x1b[H\n"
    "link \x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\\n"
    "clip \x1b]52;c;cm0gLXJmIH4=\x07\n"
    "c1 csi \u009b31m, osc \u009d0;title\u009c, nel \u0085 end\n"
    "overwrite\rHIDDEN\n"
    "bidi \u202egnp.exe\n"
    "markup [link=https://evil.example]x[/link] [bold]B[/bold] [/] [red]r\n"
    "bell \x07 backspace \x08 del \x7f nul \x00\n"
)

EVIL_NAME = "x\x1b]8;;http:e\x07[bold]n\u009b\u202e"  # a note file created behind memctl's back
DATE = "2026-03-01"

FORBIDDEN_BYTES = (b"\x1b", b"\x9b", b"\x9d", b"\x07", b"\r", b"\x00", b"\x08",
                   "\u202e".encode(), "\u0085".encode())


@pytest.fixture
def store(tmp_path):
    s = tmp_path / "store"
    (s / "notes").mkdir(parents=True)
    (s / "daily").mkdir()
    (s / "MEMORY.md").write_text(EVIL, newline="")
    (s / "notes" / "evil.md").write_text(EVIL, newline="")
    (s / "daily" / f"{DATE}.md").write_text(EVIL, newline="")
    (s / "notes" / f"{EVIL_NAME}.md").write_text("[link=x]name test\n", newline="")
    return s


def assert_clean(data: bytes) -> None:
    for b in FORBIDDEN_BYTES:
        assert b not in data, f"raw {b!r} reached stdout"


def assert_markup_literal(text: str) -> None:
    assert "[link=https://evil.example]x[/link]" in text
    assert "[bold]B[/bold] [/] [red]r" in text


@pytest.mark.parametrize("args", [("show",), ("notes", "evil"), ("log", DATE)])
def test_file_views_escape_and_json_roundtrips(store, args):
    r = run_cli("--store", str(store), *args)
    assert r.exit_code == 0, r.stderr
    assert_clean(r.stdout_bytes)
    assert_markup_literal(r.stdout)
    assert "\\x1b[31mRED" in r.stdout and "\\x9b31m" in r.stdout and "\\u202e" in r.stdout
    assert "overwrite\\x0dHIDDEN" in r.stdout
    assert "\\x1b]52;c;" in r.stdout
    assert r.stdout.count("\n") == EVIL.count("\n")  # one output line per stored line
    j = run_cli("--store", str(store), *args, "--json")
    assert j.exit_code == 0
    assert orjson.loads(j.stdout_bytes)["text"] == EVIL


def test_search_escapes_hits_and_json_roundtrips(store):
    r = run_cli("--store", str(store), "search", ".", "--limit", "500")
    assert r.exit_code == 0, r.stderr
    assert_clean(r.stdout_bytes)
    assert_markup_literal(r.stdout)
    assert "MEMORY.md:7: bidi \\u202egnp.exe" in r.stdout.splitlines()
    assert f"daily/{DATE}.md:6: overwrite\\x0dHIDDEN" in r.stdout.splitlines()
    doc = orjson.loads(run_cli("--store", str(store), "search", ".", "--limit", "500",
                               "--json").stdout_bytes)
    texts = [h["text"] for h in doc["hits"] if h["file"] == "MEMORY.md"]
    assert "\n".join(texts) + "\n" == EVIL
    assert any(h["file"] == f"notes/{EVIL_NAME}.md" for h in doc["hits"])


def test_search_pattern_with_escapes_in_error(store):
    r = run_cli("--store", str(store), "search", "\x1b[31m(")
    assert r.exit_code == 2
    assert "\x1b" not in r.stderr


def test_bad_note_name_error_is_escaped(store):
    r = run_cli("--store", str(store), "notes", "\x1b]52;c;eA==\x07/x")
    assert r.exit_code == 2
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr


def _check_listing(stdout: str, stdout_bytes: bytes) -> None:
    assert_clean(stdout_bytes)
    assert "evil" in stdout
    assert "[bold]n" in stdout  # markup in a name is shown literally
    assert "\\x1b]8;;http:e\\x07" in stdout and "\\x9b" in stdout and "\\u202e" in stdout


def test_listing_pipe_path(store):
    r = run_cli("--store", str(store), "notes")
    assert r.exit_code == 0, r.stderr
    _check_listing(r.stdout, r.stdout_bytes)
    for fmt in ("csv", "tsv", "github", "grid"):
        r = run_cli("--store", str(store), "notes", "--format", fmt)
        assert r.exit_code == 0, (fmt, r.stderr)
        # (github escapes Markdown with backslashes: the text it shows)
        shown = re.sub(r"\\(.)", r"\1", r.stdout) if fmt == "github" else r.stdout
        _check_listing(shown, r.stdout_bytes)


def test_listing_rich_table_path(store, monkeypatch):
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    r = run_cli("--store", str(store), "notes")
    assert r.exit_code == 0, r.stderr
    _check_listing(r.stdout, r.stdout_bytes)
    assert "name" in r.stdout and "modified" in r.stdout
    assert "\u2500" in r.stdout  # rich's box rule: the terminal path was taken


def test_listing_json_roundtrips_names(store):
    for args in (("--json",), ("--format", "jsonl")):
        r = run_cli("--store", str(store), "notes", *args)
        raw = r.stdout_bytes
        rows = (orjson.loads(raw) if args == ("--json",)
                else [orjson.loads(x) for x in raw.splitlines()])
        assert sorted(row["name"] for row in rows) == sorted(["evil", EVIL_NAME])


def test_today_log_escaped(store):
    today = datetime.date.today().isoformat()
    (store / "daily" / f"{today}.md").write_text(EVIL, newline="")
    r = run_cli("--store", str(store), "log")
    assert r.exit_code == 0
    assert_clean(r.stdout_bytes)
    assert_markup_literal(r.stdout)


# ----------------------------------------------------------------- issue 16.6

HOSTILE = "tabs\u009b31m\u009d0;x\u0007\u202eevil"


def _hostile_world(tmp_path, world):
    import sqlite3

    cfg = world.fresh(tmp_path / "hostile-cfg")
    store = world.store(cfg)
    p = store / "sessions" / "demo-alpha.jsonl"
    p.write_bytes(p.read_bytes().replace(b"tabs for", orjson.dumps(HOSTILE)[1:-1] + b" for", 1))
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("UPDATE revisions SET text = ? WHERE fact_id = 'c283ab7d8ed884e4'", (HOSTILE,))
    db.commit()
    db.close()
    return cfg


@pytest.mark.parametrize("argv", [("read", "demo-alpha", "0", "3"), ("read", "demo-alpha", "0", "3", "--all"),
                                  ("recall", "c283ab7d8ed884e4", "--json"),
                                  ("facts", "--json"), ("facts", "--format", "jsonl"),
                                  ("grep", "evil", "--format", "jsonl")],
                         ids=["read", "read-all", "recall", "facts-json", "facts-jsonl",
                              "grep-jsonl"])
def test_json_on_a_terminal_escapes_c1_and_bidi(tmp_path, world, monkeypatch, argv):
    """read, recall and the JSON listings: on a terminal U+009B, U+009D and
    U+202E are written as \\u escapes (the same JSON value); in a pipe the
    exact text."""
    import orjson

    from lecode_memctl.cli import output

    cfg = _hostile_world(tmp_path, world)
    monkeypatch.chdir(world.project)
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(cfg))
    piped = run_cli(*argv)
    assert piped.exit_code == 0, piped.stderr
    for c in "\u009b\u009d\u202e":
        assert c in piped.stdout, (argv, c)   # the exact text when piped
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    tty = run_cli(*argv)
    assert tty.exit_code == 0, tty.stderr
    for c in "\u009b\u009d\u202e\u0007":
        assert c not in tty.stdout, (argv, c)
    lines = "--all" in argv or "jsonl" in argv
    docs = [orjson.loads(line) for line in tty.stdout_bytes.splitlines() if line.strip()] \
        if lines else [orjson.loads(tty.stdout_bytes)]
    piped_docs = [orjson.loads(line) for line in piped.stdout_bytes.splitlines() if line.strip()] \
        if lines else [orjson.loads(piped.stdout_bytes)]
    assert docs == piped_docs


def test_a_learning_status_cannot_forge_lines(tmp_path, world, monkeypatch):
    cfg = world.fresh(tmp_path / "learn-cfg")
    p = world.store(cfg) / "sessions" / "demo-alpha.jsonl"
    p.write_bytes(p.read_bytes().replace(
        b'"status":"learned","reason_counts":{}',
        b'"status":"learned\\nfact_id  revision  status\\nFORGED",'
        b'"reason_counts":{"a\\nb":"1\\nFORGED2"}', 1))
    monkeypatch.chdir(world.project)
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(cfg))
    r = run_cli("facts")
    assert r.exit_code == 0, r.stderr
    assert not [line for line in r.stdout.splitlines() if line.startswith("FORGED")], r.stdout
    assert "learned\\nfact_id" in r.stdout
