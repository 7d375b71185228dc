"""Issue 11, point 7: the memory section is what the design says.

``memctl context`` escapes control characters of the stored Markdown in
human output (as ``show`` does), and Markdown that does not fit is truncated
with a marker, never dropped silently."""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.config import MemoryConfig
from lecode_memctl.core.context import (
    MEMORY_HEADING,
    SCRATCHPAD_HEADING,
    _markdown_part,
    build_memory_section,
    truncation_marker,
)
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli

EVIL = "before \x1b[2J\x1b]0;pwned\x07 middle \u202eevil\u202c after\x9b\n"


@pytest.fixture
def store(config_dir, project):
    s = store_for_project(config_dir, project)
    s.path.mkdir(parents=True)
    return s


def test_context_escapes_control_characters_in_human_output(project, store):
    store.memory_file.write_text(EVIL)
    store.scratchpad_file.write_text("- [ ] \x1b[31mred\x1b[0m item\n")
    r = run_cli("-C", str(project), "context")
    assert r.exit_code == 0, r.stderr
    for bad in ("\x1b", "\u202e", "\u202c", "\x07", "\x9b"):
        assert bad not in r.stdout
    assert "before \\x1b[2J\\x1b]0;pwned\\x07 middle \\u202eevil\\u202c after\\x9b" in r.stdout
    assert "- [ ] \\x1b[31mred\\x1b[0m item" in r.stdout
    # explain output too
    r = run_cli("-C", str(project), "context", "--explain")
    assert r.exit_code == 0 and "\x1b" not in r.stdout and "\u202e" not in r.stdout
    # --json keeps the exact text
    doc = orjson.loads(run_cli("-C", str(project), "context", "--json").stdout_bytes)
    assert doc["text"] == MEMORY_HEADING + EVIL + SCRATCHPAD_HEADING + \
        "- [ ] \x1b[31mred\x1b[0m item\n"


def test_scratchpad_is_truncated_with_a_marker_not_dropped(tmp_path):
    """MEMORY.md larger than the budget used to take all of it and leave no
    trace of the scratchpad; now the scratchpad keeps at least its heading and
    a truncation marker."""
    from lecode_memctl.core.layout import store_at

    store = store_at(tmp_path / "s")
    store.path.mkdir()
    store.memory_file.write_text("M" * 5000)
    store.scratchpad_file.write_text("- [ ] item one\n- [ ] item two\n")
    sec = build_memory_section(store, MemoryConfig(max_bytes=1000), None, SessionStore(store))
    assert sec.bytes <= 1000
    assert sec.text.startswith(MEMORY_HEADING)
    assert SCRATCHPAD_HEADING in sec.text
    names = [p.name for p in sec.parts]
    assert names == ["MEMORY.md", "scratchpad.md"]
    mem, scratch = sec.parts
    assert mem.truncated and "[... truncated:" in sec.text.split(SCRATCHPAD_HEADING)[0]
    # the scratchpad is small: it is kept whole, MEMORY.md gave way
    assert not scratch.truncated
    assert sec.text.endswith(SCRATCHPAD_HEADING + "- [ ] item one\n- [ ] item two\n")

    # both too large: each keeps a heading and a marker, the total still holds
    store.scratchpad_file.write_text("S" * 5000)
    sec = build_memory_section(store, MemoryConfig(max_bytes=600), None, SessionStore(store))
    assert sec.bytes <= 600
    assert sec.text.count("[... truncated:") == 2
    assert SCRATCHPAD_HEADING in sec.text and all(p.truncated for p in sec.parts)
    for p in sec.parts:
        assert p.bytes + 0 <= 600 and p.omitted_bytes > 0


def test_part_with_room_for_only_its_marker_shows_the_marker():
    body = b"x" * 50
    need = len(MEMORY_HEADING) + len(truncation_marker(len(body) + 1).encode())
    text, part = _markdown_part("MEMORY.md", MEMORY_HEADING, body, need)
    # (the file's 50 bytes: the newline the section adds is none of them)
    assert text.startswith(MEMORY_HEADING) and "[... truncated: 50 more bytes" in text
    assert part is not None and part.truncated and part.omitted_bytes == 50


def test_part_with_no_room_at_all_is_reported(project, store, config_dir):
    (config_dir / "config.toml").write_text("[memory]\nmax_bytes = 10\n")
    store.memory_file.write_text("M" * 100)
    r = run_cli("-C", str(project), "context")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "MEMORY.md" in r.stderr and "100 bytes" in r.stderr and "not shown" in r.stderr
    doc = orjson.loads(run_cli("-C", str(project), "context", "--json").stdout_bytes)
    assert doc["text"] == ""
    assert doc["parts"] == [{"name": "MEMORY.md", "bytes": 0, "source_bytes": 100,
                             "truncated": True, "omitted_bytes": 100}]
    assert any("MEMORY.md" in n for n in doc["notes"])


def test_injection_inspects_the_first_50_facts_in_id_order(project, store, config_dir):
    """Reference design: "Normal injection also inspects at most 50 facts"
    (ID-ordered).  With 51 valid facts that all fit the budget, the first 50
    in id order are injected and the 51st is omitted as ``not_inspected``
    (``--explain``), not injected."""
    from lecode_memctl.core.facts import FactStore

    (config_dir / "config.toml").write_text(
        "[memory]\nmax_bytes = 65536\nfacts_max_bytes = 65536\n")
    ss = SessionStore(store)
    with ss.create("s1") as w:
        for i in range(51):
            w.append_message("user", f"Convention number {i}: keep it.")   # seq i + 1
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        ids = sorted(fs.remember(f"Convention number {i}: keep it.",
                                 ss.source_snapshot("s1", i + 1, i + 1).ref,
                                 sessions=ss).fact.fact_id for i in range(51))
    r = run_cli("-C", str(project), "context", "--explain", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert [f["fact_id"] for f in doc["included"]] == ids[:50], doc["omitted"]
    omitted = {f["fact_id"]: f["reason"] for f in doc["omitted"]}
    assert omitted == {ids[50]: "not_inspected"}, omitted


@pytest.mark.parametrize("name", ["MEMORY.md", "scratchpad.md"])
def test_invalid_utf8_in_the_markdown_is_said_not_silent(project, store, name):
    """``context`` shows the section as the core builds it for the agent
    (each bad byte a U+FFFD), and says so: a note names the file, byte
    offset and line, on stderr and in ``notes`` (it was silent, exit 0)."""
    (store.path / name).write_bytes(b"ok\nbad \xff here\n")
    r = run_cli("-C", str(project), "context")
    assert r.exit_code == 0, r.stderr
    assert "bad \ufffd here" in r.stdout
    want = f"{name}: not valid UTF-8 (byte offset 7, line 2)"
    assert f"memctl: note: {want}" in r.stderr
    doc = orjson.loads(run_cli("-C", str(project), "context", "--json").stdout_bytes)
    assert any(n.startswith(want) for n in doc["notes"]), doc["notes"]
    # valid Markdown: no such note
    (store.path / name).write_bytes(b"ok\n")
    assert "UTF-8" not in run_cli("-C", str(project), "context").stderr
