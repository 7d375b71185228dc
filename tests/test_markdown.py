"""The Markdown store: names, dates, reading, listing, search, edit, faults."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from lecode_memctl.core import atomic, markdown
from lecode_memctl.core.atomic import is_temp_name
from lecode_memctl.core.errors import NotFound, StoreCorrupt, UsageError
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.rowmodel import doc_head

from .conftest import run_cli, tree_hash
from .test_atomic import BEFORE_REPLACE, FaultyOS, _fsync_dir

# ---------------------------------------------------------------- fixtures

@pytest.fixture
def store_dir(tmp_path) -> Path:
    """A populated store, addressed with --store."""
    s = tmp_path / "evidence" / "app-0123456789ab"
    (s / "daily").mkdir(parents=True)
    (s / "notes").mkdir()
    (s / "sessions").mkdir()
    (s / "MEMORY.md").write_text("# Memory\n- deploy with make release\n- tabs\there\n")
    (s / "MEMORY.md.bak").write_text("# Memory\n- deploy with the old script\n")
    (s / "scratchpad.md").write_text("- [ ] deploy staging\n")
    (s / "daily" / "2026-03-01.md").write_text("morning\ndeploy failed\n")
    (s / "daily" / "2026-03-02.md").write_text("all fine\n")
    (s / "notes" / "deploy-checklist.md").write_text("1. tag\n2. deploy\n")
    (s / "notes" / "café notes.md").write_text("olé\n")
    (s / "notes" / ".deploy.md.tmp-0123456789ab").write_text("deploy (temp)\n")
    (s / "sessions" / "abc.jsonl").write_text('{"seq":0,"type":"session","text":"deploy"}\n')
    return s


def cli(store: Path, *args, **kw):
    return run_cli("--store", str(store), *args, **kw)


# ---------------------------------------------------------------- names and dates

@pytest.mark.parametrize("name,canonical", [
    ("todo", "todo"),
    ("todo.md", "todo"),
    ("deploy checklist", "deploy checklist"),
    ("café-notes_2", "café-notes_2"),
    ("日本語", "日本語"),
    ("a.b", "a.b"),
    ("x" * 100, "x" * 100),
    ("x" * 100 + ".md", "x" * 100),
    ("é" * 100, "é" * 100),          # 200 bytes + ".md" fits 255
])
def test_note_names_accepted(name, canonical):
    assert markdown.check_note_name(name) == canonical
    t = markdown.note_target(name)
    assert t.rel == ("notes", canonical + ".md")


@pytest.mark.parametrize("name", [
    "", ".md", ".", "..", "a/b", "/etc/passwd", "a\\b", "..x", "x..y", "../x", ".hidden",
    "a\x00b", "a\x1bb", "a\tb", "a\nb", "a\x7fb", "a\x85b", "a\x9bb", "a\u202eb", "a\u200bb",
    "a\u2028b", "a\udcffb", " lead", "trail ", "x" * 101, "😀" * 64, "x.md.md", "notes.MD.md.md",
])
def test_note_names_refused(name):
    with pytest.raises(UsageError):
        markdown.check_note_name(name)


def test_note_name_checked_before_any_filesystem_call(monkeypatch, tmp_path):
    def boom(*a, **k):
        raise AssertionError("filesystem touched")

    for fn in ("open", "lstat", "stat", "scandir", "listdir"):
        monkeypatch.setattr(markdown.os, fn, boom)
    store = store_at(tmp_path / "s")
    for bad in ("../x", "a/b", ".x", "a\x00"):
        with pytest.raises(UsageError):
            markdown.read_note(store, bad)
    with pytest.raises(UsageError):
        markdown.read_log(store, "2026-02-30")


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_accepted_names_stay_inside_notes(name):
    try:
        n = markdown.check_note_name(name)
    except UsageError:
        return
    p = Path("/store/notes") / (n + ".md")
    assert p.parent == Path("/store/notes")
    assert os.path.normpath(p) == str(p)
    assert len(p.name.encode()) <= 255
    assert not n.startswith(".") and "/" not in n and "\x00" not in n


@pytest.mark.parametrize("date", ["2024-02-29", "2026-12-31", "0001-01-01"])
def test_dates_accepted(date):
    assert markdown.check_date(date) == date
    assert markdown.log_target(date).rel == ("daily", date + ".md")


@pytest.mark.parametrize("date", [
    "2026-02-30", "2023-02-29", "2026-13-01", "2026-00-10", "0000-01-01", "26-01-01",
    "2026-1-1", "2026/01/01", "20260101", "２０２６-01-01", "2026-01-01\n", " 2026-01-01",
    "../../x", "today", "",
])
def test_dates_refused(date):
    with pytest.raises(UsageError):
        markdown.check_date(date)


def test_log_defaults_to_local_today():
    import datetime

    assert markdown.log_target().rel == ("daily", datetime.date.today().isoformat() + ".md")


# ---------------------------------------------------------------- show / log / notes

def test_show_prints_memory_exactly(store_dir):
    r = cli(store_dir, "show")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "# Memory\n- deploy with make release\n- tabs\there\n"
    j = cli(store_dir, "show", "--json")
    assert orjson.loads(j.stdout_bytes) == {
        **doc_head("markdown"), "path": str(store_dir / "MEMORY.md"),
        "text": "# Memory\n- deploy with make release\n- tabs\there\n"}


def test_show_adds_final_newline_only_for_display(store_dir):
    (store_dir / "MEMORY.md").write_text("no newline")
    assert cli(store_dir, "show").stdout == "no newline\n"
    assert orjson.loads(cli(store_dir, "show", "--json").stdout_bytes)["text"] == "no newline"


def test_show_without_store_says_where_it_looked(tmp_path, config_dir):
    proj = tmp_path / "proj"
    proj.mkdir()
    r = run_cli("--project", str(proj), "show")
    assert r.exit_code == 3
    assert r.stdout == ""
    # the message every command that needs a store gives (issue 12.7)
    assert r.stderr.startswith(f"memctl: error: no memory store for {proj} (expected at ")
    assert str(config_dir / "memory") in r.stderr and "'memctl where'" in r.stderr
    assert r.stderr.count("\n") == 1
    assert not (config_dir / "memory").exists()


def test_show_missing_memory_in_existing_store(store_dir):
    (store_dir / "MEMORY.md").unlink()
    r = cli(store_dir, "show")
    assert r.exit_code == 3
    assert f"looked for {store_dir / 'MEMORY.md'}" in r.stderr
    assert "memctl edit" in r.stderr


def test_log_by_date_and_errors(store_dir):
    r = cli(store_dir, "log", "2026-03-01")
    assert (r.exit_code, r.stdout) == (0, "morning\ndeploy failed\n")
    assert orjson.loads(cli(store_dir, "log", "2026-03-02", "--json").stdout_bytes) == {
        **doc_head("markdown"), "path": str(store_dir / "daily" / "2026-03-02.md"),
        "text": "all fine\n"}
    r = cli(store_dir, "log", "2026-03-03")
    assert r.exit_code == 3 and "no daily log 2026-03-03" in r.stderr
    for bad in ("2026-02-30", "../MEMORY", "2026-3-1"):
        r = cli(store_dir, "log", bad)
        assert r.exit_code == 2, bad
        assert r.stderr.startswith("memctl: error: invalid date")


def test_log_today(store_dir):
    import datetime

    today = datetime.date.today().isoformat()
    assert cli(store_dir, "log").exit_code == 3
    (store_dir / "daily" / f"{today}.md").write_text("today\n")
    assert cli(store_dir, "log").stdout == "today\n"


def test_notes_listing_pipe_and_formats(store_dir):
    os.utime(store_dir / "notes" / "deploy-checklist.md", (1_700_000_000, 1_700_000_000))
    r = cli(store_dir, "notes")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["name", "size", "modified"]
    assert lines[1].split()[:3] == ["café", "notes", "5"]
    assert lines[2].split()[:2] == ["deploy-checklist", "17"]
    assert len(lines) == 3  # the temp file is not a note
    rows = orjson.loads(cli(store_dir, "notes", "--json").stdout_bytes)
    assert [r["name"] for r in rows] == ["café notes", "deploy-checklist"]
    assert rows[1]["path"] == str(store_dir / "notes" / "deploy-checklist.md")
    assert rows[1]["size"] == 17
    import datetime
    assert datetime.datetime.fromisoformat(rows[1]["modified"]).timestamp() == 1_700_000_000
    csv_out = cli(store_dir, "notes", "--format", "csv").stdout
    assert csv_out.splitlines()[0] == "type,name,path,size,modified"
    jl = cli(store_dir, "notes", "--format", "jsonl").stdout.splitlines()
    assert [orjson.loads(x)["name"] for x in jl] == ["café notes", "deploy-checklist"]
    assert cli(store_dir, "notes", "--format", "nope").exit_code == 2


def test_notes_listing_empty_and_missing_store(store_dir, tmp_path):
    for p in (store_dir / "notes").iterdir():
        p.unlink()
    r = cli(store_dir, "notes")
    assert r.exit_code == 0 and r.stdout == "" and "no notes" in r.stderr
    assert orjson.loads(cli(store_dir, "notes", "--json").stdout_bytes) == []
    r = run_cli("--store", str(tmp_path / "nowhere"), "notes")
    assert r.exit_code == 3 and "no memory store" in r.stderr
    assert not (tmp_path / "nowhere").exists()


def test_notes_name_prints_one(store_dir):
    for name in ("deploy-checklist", "deploy-checklist.md"):
        r = cli(store_dir, "notes", name)
        assert (r.exit_code, r.stdout) == (0, "1. tag\n2. deploy\n")
    doc = orjson.loads(cli(store_dir, "notes", "café notes", "--json").stdout_bytes)
    assert doc == {**doc_head("markdown"), "path": str(store_dir / "notes" / "café notes.md"),
                   "text": "olé\n"}
    r = cli(store_dir, "notes", "nope")
    assert r.exit_code == 3 and "no note 'nope'" in r.stderr and "memctl notes" in r.stderr
    r = cli(store_dir, "notes", "deploy-checklist", "--format", "csv")
    assert r.exit_code == 2


@pytest.mark.parametrize("bad", ["../MEMORY", "../../etc/passwd", ".hidden", "a\\b", "x" * 101])
def test_notes_bad_names_exit_2_and_touch_nothing(tmp_path, config_dir, bad):
    proj = tmp_path / "proj"
    proj.mkdir()
    before = tree_hash(config_dir)
    r = run_cli("--project", str(proj), "notes", bad)
    assert r.exit_code == 2
    assert r.stderr.startswith("memctl: error: invalid note name")
    assert tree_hash(config_dir) == before


# ---------------------------------------------------------------- symlinks, odd files, bad UTF-8

def test_symlinked_note_is_refused(store_dir, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    (store_dir / "notes" / "link.md").symlink_to(secret)
    r = cli(store_dir, "notes", "link")
    assert r.exit_code == 5
    assert "symbolic link" in r.stderr and "top secret" not in r.stdout
    # not listed as a note, and not searched
    assert "link" not in cli(store_dir, "notes").stdout
    assert cli(store_dir, "search", "secret").stdout == ""


def test_symlinked_memory_and_dirs_are_refused(store_dir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("outside\n")
    (store_dir / "MEMORY.md").unlink()
    (store_dir / "MEMORY.md").symlink_to(outside / "x.md")
    r = cli(store_dir, "show")
    assert r.exit_code == 5 and "symbolic link" in r.stderr
    os.rename(store_dir / "notes", store_dir / "notes.real")
    (store_dir / "notes").symlink_to(outside)
    r = cli(store_dir, "notes", "x")
    assert r.exit_code == 5 and "symbolic link" in r.stderr
    r = cli(store_dir, "notes")
    assert r.exit_code == 5 and "symbolic link" in r.stderr
    link = tmp_path / "store-link"
    link.symlink_to(store_dir)
    r = run_cli("--store", str(link), "log", "2026-03-01")
    assert r.exit_code == 5 and "symbolic link" in r.stderr


def test_fifo_and_directory_notes_do_not_hang(store_dir):
    os.mkfifo(store_dir / "notes" / "pipe.md")
    (store_dir / "notes" / "dir.md").mkdir()
    r = cli(store_dir, "notes", "pipe")
    assert r.exit_code == 5 and "not a regular file" in r.stderr
    r = cli(store_dir, "notes", "dir")
    assert r.exit_code == 5 and "directory" in r.stderr
    assert cli(store_dir, "search", "x").exit_code == 0


def test_invalid_utf8_is_store_corrupt_naming_the_file(store_dir):
    (store_dir / "MEMORY.md").write_bytes(b"fine\nbad \xff byte\n")
    r = cli(store_dir, "show")
    assert r.exit_code == 5
    assert str(store_dir / "MEMORY.md") in r.stderr and "not valid UTF-8" in r.stderr
    assert "line 2" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    j = cli(store_dir, "show", "--json")
    assert j.exit_code == 5
    assert orjson.loads(j.stdout_bytes)["error"]["code"] == "store_corrupt"


def test_search_skips_undecodable_files_with_a_warning(store_dir):
    (store_dir / "notes" / "broken.md").write_bytes(b"deploy \xc3\x28\n")
    r = cli(store_dir, "search", "deploy")
    assert r.exit_code == 0
    assert "memctl: warning: notes/broken.md: not valid UTF-8" in r.stderr
    assert "notes/deploy-checklist.md:2: 2. deploy" in r.stdout
    doc = orjson.loads(cli(store_dir, "search", "deploy", "--json").stdout_bytes)
    assert doc["skipped"][0]["file"] == "notes/broken.md"
    assert "not valid UTF-8" in doc["skipped"][0]["reason"]


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--format", "jsonl"], ["--format", "csv"],
                                 ["--format", "table"]])
def test_search_reports_every_skipped_file_as_memory_md_is(store_dir, tmp_path, fmt):
    """A symlinked or non-regular daily/*.md or notes/*.md is skipped with a
    warning (and under "skipped" with --json), as a symlinked MEMORY.md is:
    the help promises it for every file search covers."""
    secret = tmp_path / "secret.md"
    secret.write_text("deploy secret\n")
    (store_dir / "MEMORY.md").unlink()
    (store_dir / "MEMORY.md").symlink_to(secret)
    (store_dir / "daily" / "2026-12-02.md").symlink_to("../notes/deploy-checklist.md")
    (store_dir / "notes" / "link.md").symlink_to(secret)
    os.mkfifo(store_dir / "notes" / "pipe.md")
    (store_dir / "notes" / "dir.md").mkdir()
    r = cli(store_dir, "search", "deploy", *fmt)
    assert r.exit_code == 0, r.stderr
    assert "secret" not in r.stdout
    skipped = {"MEMORY.md": "is a symbolic link",
               "daily/2026-12-02.md": "is a symbolic link",
               "notes/dir.md": "is a directory",
               "notes/link.md": "is a symbolic link",
               "notes/pipe.md": "not a regular file"}
    warnings = [line for line in r.stderr.splitlines() if line.startswith("memctl: warning: ")]
    assert [w.split(": ")[2] for w in warnings] == list(skipped)
    for w, why in zip(warnings, skipped.values(), strict=True):
        assert why in w and w.endswith("; skipped"), w
    if fmt == ["--json"]:
        doc = orjson.loads(r.stdout_bytes)
        assert [s["file"] for s in doc["skipped"]] == list(skipped)
        for s, why in zip(doc["skipped"], skipped.values(), strict=True):
            assert why in s["reason"], s
        assert doc["files_searched"] == 5   # scratchpad, 2 daily logs, 2 notes


# ---------------------------------------------------------------- search

def test_search_output_and_scope(store_dir):
    r = cli(store_dir, "search", "deploy")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "MEMORY.md:2: - deploy with make release",
        "scratchpad.md:1: - [ ] deploy staging",
        "daily/2026-03-01.md:2: deploy failed",
        "notes/deploy-checklist.md:2: 2. deploy",
    ]  # never MEMORY.md.bak, the temp file or sessions/
    doc = orjson.loads(cli(store_dir, "search", "deploy", "--json").stdout_bytes)
    assert doc["hits"][0] == {"type": "hit", "file": "MEMORY.md", "line": 2,
                              "text": "- deploy with make release"}
    # machine formats give every hit unless --limit is given
    assert doc["truncated"] is False and doc["limit"] is None and doc["skipped"] == []
    assert doc["files_searched"] == 6


def test_search_regex_case_and_tabs(store_dir):
    assert cli(store_dir, "search", r"^\d\. ").stdout.splitlines() == [
        "notes/deploy-checklist.md:1: 1. tag", "notes/deploy-checklist.md:2: 2. deploy"]
    assert cli(store_dir, "search", "MORNING").stdout == ""
    assert cli(store_dir, "search", "-i", "MORNING").stdout == "daily/2026-03-01.md:1: morning\n"
    assert cli(store_dir, "search", "tabs").stdout == "MEMORY.md:3: - tabs\there\n"
    assert cli(store_dir, "search", "olé").stdout == "notes/café notes.md:1: olé\n"


def test_search_limit(store_dir):
    (store_dir / "notes" / "many.md").write_text("".join(f"hit {i}\n" for i in range(120)))
    r = cli(store_dir, "search", "hit")
    assert len(r.stdout.splitlines()) == 50
    assert "stopped after 50 hits" in r.stderr
    r = cli(store_dir, "search", "hit", "--limit", "3")
    assert r.stdout.splitlines() == ["notes/many.md:1: hit 0", "notes/many.md:2: hit 1",
                                     "notes/many.md:3: hit 2"]
    doc = orjson.loads(cli(store_dir, "search", "hit", "-n", "120", "--json").stdout_bytes)
    assert len(doc["hits"]) == 120 and doc["truncated"] is False
    assert cli(store_dir, "search", "hit", "--limit", "0").exit_code == 2


def test_search_offset_in_every_format(store_dir):
    """--offset/--limit page the hits in every format (issue 12.2)."""
    (store_dir / "notes" / "many.md").write_text("".join(f"hit {i}\n" for i in range(120)))
    r = cli(store_dir, "search", "hit", "--offset", "2", "--limit", "2")
    assert r.stdout.splitlines() == ["notes/many.md:3: hit 2", "notes/many.md:4: hit 3"]
    doc = orjson.loads(cli(store_dir, "search", "hit", "--offset", "100", "--json").stdout_bytes)
    assert [h["text"] for h in doc["hits"]] == [f"hit {i}" for i in range(100, 120)]
    assert (doc["offset"], doc["limit"], doc["truncated"]) == (100, None, False)
    doc = orjson.loads(cli(store_dir, "search", "hit", "--offset", "5", "-n", "3",
                           "--json").stdout_bytes)
    assert [h["line"] for h in doc["hits"]] == [6, 7, 8] and doc["truncated"] is True
    r = cli(store_dir, "search", "hit", "--offset", "118", "--format", "jsonl")
    assert [orjson.loads(x)["text"] for x in r.stdout_bytes.splitlines()] == ["hit 118", "hit 119"]
    r = cli(store_dir, "search", "hit", "--offset", "119", "--format", "csv")
    assert r.stdout.splitlines() == ["type,file,line,text", "hit,notes/many.md,120,hit 119"]
    assert cli(store_dir, "search", "hit", "--offset", "-1").exit_code == 2
    assert cli(store_dir, "search", "hit", "--offset", "500").stdout == ""


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "(?P<1>x)", "a{2,1}"])
def test_search_invalid_regex_is_usage_error(store_dir, pattern):
    r = cli(store_dir, "search", pattern)
    assert r.exit_code == 2
    assert r.stderr.startswith("memctl: error: invalid regular expression")
    assert r.stderr.count("\n") == 1


def test_search_no_hits_and_no_store(store_dir, tmp_path):
    r = cli(store_dir, "search", "zzz-nothing")
    assert (r.exit_code, r.stdout) == (0, "")
    assert "no matches in 6 Markdown files" in r.stderr
    (store_dir / "MEMORY.md").unlink()
    assert "no matches in 5 Markdown files" in cli(store_dir, "search", "zzz").stderr
    # past the last hit there were matches: not "no matches"
    hits = cli(store_dir, "search", "e", "--format", "jsonl").stdout.count("\n")
    assert hits > 0
    r = cli(store_dir, "search", "e", "--offset", str(hits))
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == f"memctl: no hits past --offset {hits} in 5 Markdown files\n"
    r = run_cli("--store", str(tmp_path / "none"), "search", "x")
    assert r.exit_code == 3


def test_core_search_api(store_dir):
    res = markdown.search(store_at(store_dir), "deploy", limit=2)
    assert [(h.file, h.line) for h in res.hits] == [("MEMORY.md", 2), ("scratchpad.md", 1)]
    assert res.truncated
    with pytest.raises(UsageError):
        markdown.search(store_at(store_dir), "(")
    with pytest.raises(NotFound):
        markdown.search(store_at(store_dir / "missing"), "x")


# ---------------------------------------------------------------- edit

def editor_script(tmp_path: Path, body: str) -> str:
    """An $EDITOR command: a Python script that gets the temp file as argv[1]."""
    script = tmp_path / f"editor_{abs(hash(body))}.py"
    script.write_text("import os, sys\npath = sys.argv[1]\n" + body)
    return f"{sys.executable} {script}"


@pytest.fixture
def editor(tmp_path, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)

    def use(body: str, var: str = "EDITOR"):
        monkeypatch.setenv(var, editor_script(tmp_path, body))
    return use


def test_edit_writes_back_with_bak(store_dir, editor, tmp_path):
    record = tmp_path / "seen.txt"
    editor(f"""
st = os.stat(path)
open({str(record)!r}, "w").write(path + "\\n" + oct(st.st_mode & 0o777) + "\\n" + open(path).read())
open(path, "a").write("- new line\\n")
""")
    r = cli(store_dir, "edit")
    assert r.exit_code == 0, r.stderr
    seen_path, mode, *content = record.read_text().split("\n", 2)
    assert mode == "0o600"
    assert not seen_path.startswith(str(store_dir)) and not os.path.exists(seen_path)
    assert content[0] == "# Memory\n- deploy with make release\n- tabs\there\n"
    assert (store_dir / "MEMORY.md").read_text().endswith("- tabs\there\n- new line\n")
    assert (store_dir / "MEMORY.md.bak").read_text() == "# Memory\n- deploy with make release\n- tabs\there\n"
    assert f"wrote {store_dir / 'MEMORY.md'}" in r.stderr
    assert [n for n in os.listdir(store_dir) if is_temp_name(n)] == []


def test_edit_unchanged_writes_nothing(store_dir, editor):
    editor("pass\n")
    before = tree_hash(store_dir)
    for args in ((), ("scratchpad",), ("note", "deploy-checklist"), ("log", "2026-03-01"),
                 ("note", "brand-new"), ("log", "2030-01-01")):
        r = cli(store_dir, "edit", *args)
        assert r.exit_code == 0, (args, r.stderr)
        assert "no changes" in r.stderr
    assert tree_hash(store_dir) == before


def test_edit_creates_new_note_and_store(tmp_path, editor, config_dir):
    editor("open(path, 'w').write('fresh\\n')\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    r = run_cli("--project", str(proj), "edit", "note", "ideas.md")
    assert r.exit_code == 0, r.stderr
    (store,) = (config_dir / "memory").iterdir()
    assert (store / "notes" / "ideas.md").read_text() == "fresh\n"
    assert not (store / "notes" / "ideas.md.bak").exists()
    assert stat.S_IMODE(os.stat(store / "notes").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store / "notes" / "ideas.md").st_mode) == 0o600
    r = run_cli("--project", str(proj), "notes", "ideas")
    assert r.stdout == "fresh\n"


def test_edit_log_and_scratchpad(store_dir, editor):
    editor("open(path, 'a').write('more\\n')\n")
    assert cli(store_dir, "edit", "log", "2026-03-02").exit_code == 0
    assert (store_dir / "daily" / "2026-03-02.md").read_text() == "all fine\nmore\n"
    assert (store_dir / "daily" / "2026-03-02.md.bak").read_text() == "all fine\n"
    assert cli(store_dir, "edit", "scratchpad").exit_code == 0
    assert (store_dir / "scratchpad.md").read_text() == "- [ ] deploy staging\nmore\n"


def test_an_editor_that_removes_its_file_writes_nothing_exit_1(store_dir, editor):
    """The editor removed the temporary file it was given (or renamed it):
    exit 3 ('no such file'), the code of a missing fact or note.  It is an
    editor that failed: one line, exit 1, nothing written."""
    editor("os.unlink(path)\n")
    before = tree_hash(store_dir)
    r = cli(store_dir, "edit")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert r.stderr.count("\n") == 1 and "the editor left no file" in r.stderr
    assert tree_hash(store_dir) == before


def test_edit_conflict_keeps_copy(store_dir, editor):
    target = store_dir / "notes" / "deploy-checklist.md"
    editor(f"""
open({str(target)!r}, "a").write("3. concurrent change\\n")
open(path, "a").write("3. my change\\n")
""")
    r = cli(store_dir, "edit", "note", "deploy-checklist")
    assert r.exit_code == 4
    assert target.read_text() == "1. tag\n2. deploy\n3. concurrent change\n"
    assert not (store_dir / "notes" / "deploy-checklist.md.bak").exists()
    assert r.stderr.count("\n") == 1 and "changed on disk" in r.stderr
    kept = r.stderr.split("your edited copy is kept at ")[1].split(" ")[0].rstrip(";\n")
    try:
        assert Path(kept).read_text() == "1. tag\n2. deploy\n3. my change\n"
    finally:
        os.unlink(kept)


def test_edit_conflict_when_file_appears_meanwhile(store_dir, editor):
    target = store_dir / "notes" / "new.md"
    editor(f"""
open({str(target)!r}, "w").write("someone else\\n")
open(path, "w").write("mine\\n")
""")
    r = cli(store_dir, "edit", "note", "new")
    assert r.exit_code == 4
    assert target.read_text() == "someone else\n"
    kept = r.stderr.split("your edited copy is kept at ")[1].split(" ")[0].rstrip(";\n")
    os.unlink(kept)


def test_edit_editor_failure_writes_nothing(store_dir, editor, tmp_path):
    record = tmp_path / "tmpname"
    editor(f"open(path, 'w').write('half done'); open({str(record)!r}, 'w').write(path); sys.exit(3)\n")
    before = tree_hash(store_dir)
    r = cli(store_dir, "edit")
    assert r.exit_code == 1
    assert "editor exited with status 3" in r.stderr and "nothing was written" in r.stderr
    assert tree_hash(store_dir) == before
    # (since 2026-12-07 a copy the editor changed is kept, its path printed)
    assert f"your edited copy is kept at {record.read_text()}" in r.stderr
    assert Path(record.read_text()).read_text() == "half done"
    os.unlink(record.read_text())


def test_edit_without_editor_or_bad_editor(store_dir, monkeypatch, tmp_path):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    before = tree_hash(store_dir)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no vi to fall back to
    r = cli(store_dir, "edit")
    assert r.exit_code == 2 and "cannot run the editor 'vi'" in r.stderr
    assert "neither $VISUAL nor $EDITOR is set" in r.stderr
    monkeypatch.setenv("EDITOR", "/nonexistent/editor --flag")
    r = cli(store_dir, "edit")
    assert r.exit_code == 2 and "cannot run the editor" in r.stderr
    monkeypatch.setenv("EDITOR", "'unbalanced")
    assert cli(store_dir, "edit").exit_code == 2
    assert tree_hash(store_dir) == before


@pytest.mark.parametrize("unset", ["unset", "empty"])
def test_edit_falls_back_to_vi_as_git_does(store_dir, monkeypatch, tmp_path, unset):
    """Neither $VISUAL nor $EDITOR (unset, or blank): memctl edit runs vi from PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    vi = bindir / "vi"
    vi.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[1], 'a').write('by vi\\n')\n")
    vi.chmod(0o755)
    for var in ("VISUAL", "EDITOR"):
        if unset == "unset":
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, "  ")
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    r = cli(store_dir, "edit", "scratchpad")
    assert r.exit_code == 0, r.stderr
    assert (store_dir / "scratchpad.md").read_text().endswith("by vi\n")


def test_edit_visual_wins_and_bad_arguments(store_dir, editor, tmp_path):
    editor("open(path, 'a').write('from visual\\n')\n", var="VISUAL")
    os.environ["EDITOR"] = "false"
    try:
        assert cli(store_dir, "edit", "scratchpad").exit_code == 0
    finally:
        del os.environ["EDITOR"]
    assert (store_dir / "scratchpad.md").read_text().endswith("from visual\n")
    before = tree_hash(store_dir)
    for args in (("bogus",), ("note",), ("note", "../x"), ("log", "2026-02-30"),
                 ("memory", "extra"), ("note", "a", "b")):
        r = cli(store_dir, "edit", *args)
        assert r.exit_code == 2, args
    assert tree_hash(store_dir) == before


def test_edit_refuses_invalid_utf8_from_editor(store_dir, editor):
    editor("open(path, 'wb').write(b'bad \\xff')\n")
    before = tree_hash(store_dir)
    r = cli(store_dir, "edit")
    assert r.exit_code == 2 and "not valid UTF-8" in r.stderr
    assert tree_hash(store_dir) == before
    kept = r.stderr.split("your edited copy is kept at ")[1].strip()
    assert Path(kept).read_bytes() == b"bad \xff"
    os.unlink(kept)


def test_edit_refuses_symlinked_target(store_dir, editor, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("outside\n")
    (store_dir / "notes" / "l.md").symlink_to(outside)
    editor("open(path, 'a').write('x')\n")
    r = cli(store_dir, "edit", "note", "l")
    assert r.exit_code == 5 and "symbolic link" in r.stderr
    assert outside.read_text() == "outside\n"


# ---------------------------------------------------------------- faults through the CLI

@pytest.mark.parametrize("func,hook", [(f, h) for _, f, h in BEFORE_REPLACE],
                         ids=[i for i, _, _ in BEFORE_REPLACE])
def test_edit_write_failure_exit_7_keeps_old_bytes(store_dir, editor, monkeypatch, func, hook):
    editor("open(path, 'a').write('lost?\\n')\n")
    old = (store_dir / "MEMORY.md").read_bytes()
    old_bak = (store_dir / "MEMORY.md.bak").read_bytes()
    monkeypatch.setattr(atomic, "os", FaultyOS(func, hook))
    r = cli(store_dir, "edit")
    monkeypatch.undo()
    assert r.exit_code == 7
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr and "not changed" in r.stderr
    assert (store_dir / "MEMORY.md").read_bytes() == old
    assert (store_dir / "MEMORY.md.bak").read_bytes() in (old_bak, old)
    assert [n for n in os.listdir(store_dir) if is_temp_name(n)] == []
    kept = r.stderr.split("your edited copy is kept at ")[1].strip()
    assert Path(kept).read_bytes() == old + b"lost?\n"
    os.unlink(kept)


def test_edit_directory_fsync_failure_after_replace(store_dir, editor, monkeypatch):
    editor("open(path, 'a').write('kept\\n')\n")
    old = (store_dir / "MEMORY.md").read_bytes()
    monkeypatch.setattr(atomic, "os", FaultyOS("fsync", _fsync_dir))
    r = cli(store_dir, "edit")
    monkeypatch.undo()
    assert r.exit_code == 7 and r.stderr.count("\n") == 1
    assert "in place" in r.stderr and "not changed" not in r.stderr
    assert (store_dir / "MEMORY.md").read_bytes() == old + b"kept\n"
    assert (store_dir / "MEMORY.md.bak").read_bytes() == old
    assert [n for n in os.listdir(store_dir) if is_temp_name(n)] == []
    os.unlink(r.stderr.split("your edited copy is kept at ")[1].strip())


def test_core_write_and_read_roundtrip(tmp_path):
    store = store_at(tmp_path / "s")
    t = markdown.note_target("x")
    markdown.write(store, t, "one\n")
    markdown.write(store, t, "two\n")
    assert markdown.read(store, t).text == "two\n"
    assert (tmp_path / "s" / "notes" / "x.md.bak").read_text() == "one\n"
    with pytest.raises(StoreCorrupt):
        (tmp_path / "s" / "notes" / "y.md").symlink_to(tmp_path / "elsewhere")
        markdown.write(store, markdown.note_target("y"), "z")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("args", [["show"], ["notes"], ["validate"], ["read", "abc", "0", "1"],
                                  ["sessions"]])
def test_store_path_that_is_a_file_is_an_unreadable_store(tmp_path, args):
    """One store-directory check (Store.require) serves every command: nothing
    there is exit 3; a file where the store directory should be is exit 5, as
    a symbolic link there is (the audit and ``sessions`` said 3 for it, the
    Markdown commands 5)."""
    not_dir = tmp_path / "app-0123456789ab"
    not_dir.write_text("not a store\n")
    r = run_cli("--store", str(not_dir), *args)
    assert r.exit_code == 5, r.stderr
    assert "not a directory" in r.stderr and "Traceback" not in r.stderr
    assert not_dir.read_text() == "not a store\n"
    with pytest.raises(StoreCorrupt):
        store_at(not_dir).require()
    with pytest.raises(NotFound):
        store_at(tmp_path / "nowhere").require()


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64) | st.text(max_size=24).map(lambda t: t.encode("utf-8")),
       bad=st.sampled_from([b"", b"\xff", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf0\x9f\x98"]),
       more=st.text(max_size=8).map(lambda t: t.encode("utf-8")),
       cuts=st.lists(st.integers(0, 120), max_size=6))
def test_utf8_problem_in_pieces_is_the_whole_decode(data, bad, more, cuts):
    """The first byte that is not UTF-8, found piece by piece (the audit reads a
    note so: memory follows a piece, not the file), is the one decoding the
    whole text names, with the same line, wherever the pieces are cut."""
    whole = data + b"\n" * (len(cuts) % 3) + bad + more
    try:
        whole.decode("utf-8")
        expected = None
    except UnicodeDecodeError as exc:
        expected = (exc.start, whole.count(b"\n", 0, exc.start) + 1)
    at = sorted({min(c, len(whole)) for c in cuts})
    pieces = [whole[a:b] for a, b in zip([0, *at], [*at, len(whole)], strict=True)]
    assert markdown.utf8_problem(pieces) == expected
    assert markdown.utf8_problem([whole]) == expected


def test_search_text_escapes_file_names_as_the_table_does(store_dir):
    """A note file named ``x.md:1: FORGED HIT<newline>MEMORY.md`` (made by
    another tool) forged a hit line in search's text output, and a tab or
    newline in a skipped file's name split its warning: the name is escaped
    (``\\n``, ``\\t``) as --format table, notes and validate escape it."""
    (store_dir / "notes" / "x.md:1: FORGED HIT\nMEMORY.md").write_text("harmless deploy\n")
    (store_dir / "notes" / "a\tb.md").write_text("tab deploy\n")
    (store_dir / "notes" / "bad\nmemctl: warning: FORGED.md").write_bytes(b"deploy \xc3\x28\n")
    r = cli(store_dir, "search", "deploy")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "notes/x.md:1: FORGED HIT\\nMEMORY.md:1: harmless deploy" in lines
    assert "notes/a\\tb.md:1: tab deploy" in lines
    assert "notes/x.md:1: FORGED HIT" not in lines and "MEMORY.md:1: harmless deploy" not in lines
    assert len(lines) == 6, lines
    [warning] = r.stderr.splitlines()
    assert warning.startswith("memctl: warning: notes/bad\\nmemctl: warning: FORGED.md: "
                              "not valid UTF-8"), warning
    assert warning.endswith("; skipped"), warning
    table = cli(store_dir, "search", "deploy", "--format", "table").stdout
    assert "notes/x.md:1: FORGED HIT\\nMEMORY.md" in table and "notes/a\\tb.md" in table
    doc = orjson.loads(cli(store_dir, "search", "deploy", "--json").stdout_bytes)
    assert {h["file"] for h in doc["hits"]} >= {"notes/x.md:1: FORGED HIT\nMEMORY.md",
                                                "notes/a\tb.md"}


def test_a_name_byte_that_is_not_utf8_is_shown_as_xnn():
    """A note name from ``os.listdir`` carries a byte that is not UTF-8 as a
    lone surrogate; the error named it ``'x\\udcff.md'`` (``migrate-legacy``'s
    ``detail``, where ``name`` and ``source`` say ``x\\xff.md``).  A name that
    holds a backslash and ``udcff`` as text keeps them."""
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.mdnames import check_note_name

    with pytest.raises(UsageError) as info:
        check_note_name("x\udcff.md")
    assert "'x\\xff.md'" in info.value.message and "udc" not in info.value.message
    with pytest.raises(UsageError) as info:
        check_note_name("a\\udcff.md")
    assert "'a\\\\udcff.md'" in info.value.message
