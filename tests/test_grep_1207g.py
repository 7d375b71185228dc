"""``memctl grep``, ``search`` and ``redact --pattern`` (2026-12-07, a
review of the transcript-reading commands): a pattern Python's ``re``
warns about (``[[:alpha:]]``, ``[a&&b]``) is one ``memctl: warning:``
line, never Python's own warning text on stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import run_cli, run_proc
from .test_grep_read_1207d import _msg, _store


def _world(tmp_path):
    st = _store(tmp_path, {"a": [_msg(1, "abc"), _msg(2, "abc more")]})
    (st / "MEMORY.md").write_text("abc\n")
    return st


def _proc(store, *args: str, env: dict | None = None):
    return run_proc("--store", str(store), "--no-state", *args, env=env)


# ---------------------------------------------------------------- regex warnings


WARNED = [
    ("[[:alpha:]]", "possible nested set at position 1"),
    ("[a&&b]", "possible set intersection at position 2"),
    ("[a||b]", "possible set union at position 2"),
    ("[a~~b]", "possible set symmetric difference at position 2"),
]


@pytest.mark.parametrize(("pattern", "said"), WARNED)
@pytest.mark.parametrize("cmd", [
    ["grep", "--json"], ["grep"], ["search", "--format", "jsonl"], ["search"],
    ["redact", "--dry-run"]])
def test_a_pattern_python_warns_about_is_one_memctl_warning(tmp_path, cmd, pattern, said):
    st = _world(tmp_path)
    args = [*cmd, "--pattern", pattern] if cmd[0] == "redact" else [cmd[0], pattern, *cmd[1:]]
    r = _proc(st, *args)
    err = r.stderr.decode()
    assert "Warning" not in err and "re.compile" not in err and ".py:" not in err, err
    lines = err.splitlines()
    warned = [ln for ln in lines if ln.startswith("memctl: warning: ")]
    assert len(warned) == 1, err
    assert said in warned[0] and "Python regular expression" in warned[0], warned
    if cmd[0] == "redact":
        # (never the pattern itself: it may be the credential)
        assert pattern not in warned[0], warned
    else:
        assert f"'{pattern}'" in warned[0], warned
    # the exit status is the search's own (grep: 0 for the 'a' of a set,
    # 1 for no ']' after one; search and redact 0), not a failure
    nothing = pattern == "[[:alpha:]]"
    assert r.returncode == (int(nothing) if cmd[0] == "grep" else 0), err
    assert not [ln for ln in lines if not ln.startswith("memctl")], err


def test_the_warning_is_the_same_under_pythonwarnings_error(tmp_path):
    """PYTHONWARNINGS=error made the FutureWarning an exception: a traceback."""
    st = _world(tmp_path)
    for args in (["grep", "[[:alpha:]]"], ["search", "[[:alpha:]]"]):
        r = _proc(st, *args, env={"PYTHONWARNINGS": "error"})
        err = r.stderr.decode()
        assert "Traceback" not in err and "FutureWarning" not in err, err
        assert err.count("memctl: warning: ") == 1, err
        assert r.returncode in (0, 1), err


def test_two_warnings_of_one_pattern_are_one_line(tmp_path):
    st = _world(tmp_path)
    r = _proc(st, "grep", "[[:alpha:]][a&&b]")
    err = r.stderr.decode()
    warned = [ln for ln in err.splitlines() if ln.startswith("memctl: warning: ")]
    assert len(warned) == 1 and "nested set" in warned[0] \
        and "set intersection" in warned[0], err
    assert ".py:" not in err, err


def test_the_warning_in_process_is_given_every_run(tmp_path):
    """(re's own cache would keep a second compile of a pattern silent: each
    run of memctl in one process warns all the same)"""
    st = _world(tmp_path)
    for _ in range(2):
        r = run_cli("--store", str(st), "--no-state", "grep", "[[:alpha:]]", "--count")
        assert r.stderr.count("memctl: warning: ") == 1, r.stderr
        r = run_cli("--store", str(st), "--no-state", "search", "[[:alpha:]]")
        assert r.stderr.count("memctl: warning: ") == 1, r.stderr


def test_a_bad_pattern_is_still_one_error_line(tmp_path):
    st = _world(tmp_path)
    for args in (["grep", "("], ["search", "("], ["redact", "--pattern", "(", "--dry-run"]):
        r = _proc(st, *args)
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert err.startswith("memctl: error: ") and err.count("\n") == 1, err


def test_grep_and_search_compile_with_one_implementation():
    from lecode_memctl.core import grep, markdown_search, userregex

    assert os.path.exists(userregex.__file__)
    src = "".join(Path(m.__file__).read_text() for m in (grep, markdown_search))
    assert "re.compile(pattern" not in src and "re.compile(re.escape" not in src


# ---------------------------------------------------------------- the role of a hit


def _roles_world(tmp_path):
    import orjson

    no_role = orjson.dumps({"seq": 2, "type": "message", "content": "abc no role"}).decode()
    return _store(tmp_path, {"a": [
        _msg(1, "abc user"), no_role, _msg(3, "abc seven", role=7),
        _msg(4, "abc said as summary", role="summary"),
        orjson.dumps({"seq": 5, "type": "event", "event": "compact",
                      "summary": "abc compacted"}).decode()]})


def _cli(store, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


def test_a_message_without_a_string_role_has_role_null(tmp_path):
    """The role was "?", a value the match table does not have."""
    import orjson

    st = _roles_world(tmp_path)
    r = _cli(st, "grep", "abc", "--format", "jsonl", "--include-hidden")
    assert r.exit_code == 0, r.stderr
    rows = {row["seq"]: row for row in map(orjson.loads, r.stdout.splitlines())}
    assert rows[1]["role"] == "user"
    assert rows[2]["role"] is None and rows[3]["role"] is None
    assert "?" not in [row["role"] for row in rows.values()]
    r = _cli(st, "grep", "abc", "--json", "--include-hidden")
    doc = orjson.loads(r.stdout)
    assert [h["role"] for h in doc["hits"] if h["seq"] in (2, 3)] == [None, None]
    r = _cli(st, "grep", "abc", "--format", "csv", "--include-hidden")
    assert r.exit_code == 0, r.stderr
    assert "?" not in r.stdout.replace("no role", ""), r.stdout


def test_grep_text_labels_a_message_without_a_role_as_read_text_does(tmp_path):
    st = _roles_world(tmp_path)
    r = _cli(st, "grep", "abc no role")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["a:2 message $.content: abc no role"]
    r = _cli(st, "grep", "seven", "-C", "1")
    assert r.stdout.splitlines() == ["a:3 message $.content: abc seven"]
    r = _cli(st, "read", "a", "1", "3", "--text")
    assert "[2] message" in r.stdout and "[3] message" in r.stdout, r.stdout


def test_no_role_is_selected_by_no_role_option(tmp_path):
    st = _roles_world(tmp_path)
    for role in ("user", "assistant", "tool", "system", "summary"):
        r = _cli(st, "grep", "no role|seven", "--role", role, "--format", "jsonl")
        assert r.exit_code == 1 and r.stdout == "", (role, r.stdout)


def test_a_message_of_role_summary_is_a_message_told_by_its_path(tmp_path):
    """A message whose role is "summary" keeps it; a compaction summary is
    told by its path, $.summary."""
    import orjson

    st = _roles_world(tmp_path)
    r = _cli(st, "grep", "abc", "--role", "summary", "--format", "jsonl", "--include-hidden")
    assert r.exit_code == 0, r.stderr
    rows = [orjson.loads(ln) for ln in r.stdout.splitlines()]
    assert [(row["seq"], row["role"], row["path"]) for row in rows] == [
        (4, "summary", "$.content"), (5, "summary", "$.summary")]


def test_the_match_table_and_schema_say_role_may_be_null():
    import orjson

    from .conftest import REPO

    out = (REPO / "docs" / "OUTPUT.md").read_text()
    table = out[out.index("### `match` (grep)"):out.index("### `match_count`")]
    (row,) = [ln for ln in table.splitlines() if ln.startswith("| `role` |")]
    assert "| yes |" in row and "null" in row and "$.summary" in row, row
    r = run_cli("schema", "match")
    assert r.exit_code == 0, r.stderr
    role = orjson.loads(r.stdout)["properties"]["role"]
    assert "null" in (role.get("type") if isinstance(role.get("type"), list)
                      else [role.get("type")]) or any(
        t.get("type") == "null" for t in role.get("anyOf", ())), role


# ---------------------------------------------------------------- the empty pattern


def test_grep_empty_pattern_matches_every_line_as_grep1_and_search_do(tmp_path):
    """``grep ''`` was exit 2 ("the pattern is empty") where ``search ''``
    and grep(1) match every line; it is every line of every field, as ``^``."""
    import orjson

    st = _store(tmp_path, {"a": [_msg(1, "one\ntwo\n"), _msg(2, ""), _msg(3, "three")]})
    (st / "MEMORY.md").write_text("abc\n")
    for flags in ([], ["-F"]):
        r = _cli(st, "grep", "", *flags, "--format", "jsonl")
        assert r.exit_code == 0, r.stderr
        rows = [orjson.loads(ln) for ln in r.stdout.splitlines()]
        assert [(h["seq"], h["line_no"], h["line"], h["match"]) for h in rows] == [
            (1, 1, "one", ""), (1, 2, "two", ""), (3, 1, "three", "")]
        assert _cli(st, "grep", "", *flags).stdout == _cli(st, "grep", "^").stdout
    r = _cli(st, "grep", "", "-c")
    assert r.exit_code == 0 and r.stdout == _cli(st, "grep", "^", "-c").stdout, r.stdout
    r = _cli(st, "search", "")
    assert r.exit_code == 0 and r.stdout.startswith("MEMORY.md:1: abc"), r.stdout


def test_redact_refuses_an_empty_pattern(tmp_path):
    """redact's --pattern picks values to erase: an empty one (an unset
    shell variable) would pick every finding, as leaving it out does;
    refused, as an empty --session or --detector is."""
    st = _world(tmp_path)
    r = _cli(st, "redact", "--pattern", "", "--dry-run")
    assert r.exit_code == 2, r.stderr
    assert r.stderr.splitlines() == [
        "memctl: error: --pattern is empty; leave it out to pick every finding"], r.stderr


# ---------------------------------------------------------------- the library's compilation (code review)


def test_the_library_compiles_without_touching_warnings_or_res_cache():
    """Through the library (no ``warn``), a pattern is compiled by
    ``re.compile`` alone: ``catch_warnings`` (process-wide, not thread-safe:
    another thread's warnings were taken and told as the pattern's) and
    ``re.purge()`` (the agent's own compiled patterns dropped) are never
    used there; Python warns as the caller's filters say."""
    import re
    import warnings
    from unittest import mock

    from lecode_memctl.core import grep as core_grep, markdown_search

    pattern = "[[:alpha:]]library-" + os.urandom(4).hex()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with mock.patch.object(re, "purge", side_effect=AssertionError("re.purge called")), \
                mock.patch.object(warnings, "catch_warnings",
                                  side_effect=AssertionError("catch_warnings called")):
            core_grep.compile_pattern(pattern)
            markdown_search.compile_pattern(pattern + "x")
    told = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert told and all("nested set" in t for t in told), told


@pytest.mark.parametrize("pattern", [
    "(?P=hunter2pass)", "\\N{hunter2}", "(?P<sk-live-abc!>x)", "AKIA\\qSECRET",
])
def test_redacts_refused_pattern_is_never_quoted_even_in_res_message(tmp_path, pattern):
    """``redact --pattern``'s error never quotes the pattern (it may be the
    credential), re's message included: it names pieces of it (a group's
    name, an escape, a character name).  Where re stopped is said."""
    st = _world(tmp_path)
    r = _proc(st, "redact", "--pattern", pattern, "--dry-run")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith("memctl: error: invalid regular expression"), err
    for piece in ("hunter2", "sk-live", "\\q", "SECRET"):
        assert piece not in err, err
    assert "at position " in err, err


def test_the_posix_class_hint_is_given_only_for_a_nested_set(tmp_path):
    st = _world(tmp_path)
    nested = _proc(st, "search", "[[:alpha:]]").stderr.decode()
    inter = _proc(st, "search", "[a&&b]").stderr.decode()
    assert "[:alpha:] is no POSIX class" in nested, nested
    assert "POSIX" not in inter and "a later Python may read it otherwise" in inter, inter
