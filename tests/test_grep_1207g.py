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
