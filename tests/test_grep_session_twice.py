"""``grep --session ID --session ID``: the session given twice is searched
once.  Before 2026-12-07 it was searched as often as it was given: every hit
printed twice, its count doubled (``-c``, ``count``, the ``sessions``
counts) and ``sessions_searched`` 2 for one session."""

from __future__ import annotations

import orjson

from .builders import copy_demo
from .conftest import run_cli


def test_a_session_given_twice_is_searched_once(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "x")

    def grep(*args: str):
        r = run_cli("--store", str(store), "--no-state", "grep", *args)
        assert r.exit_code == 0, r.stderr
        return r

    once = ("--session", "demo-alpha")
    twice = ("--session", "demo-alpha", "--session", "demo-beta", "--session", "demo-alpha")
    both = ("--session", "demo-alpha", "--session", "demo-beta")
    for fmt in ((), ("-c",), ("-l",), ("--format", "jsonl")):
        assert grep("tabs", *twice, *fmt).stdout == grep("tabs", *both, *fmt).stdout, fmt
    assert grep("tabs", *once, "-c").stdout == grep("tabs", *once, *once, "-c").stdout
    doc = orjson.loads(grep("tabs", *once, *once, "--json").stdout_bytes)
    alone = orjson.loads(grep("tabs", *once, "--json").stdout_bytes)
    assert doc["sessions_searched"] == 1 and doc["count"] == alone["count"] > 0, doc
    assert doc["hits"] == alone["hits"] and doc["sessions"] == alone["sessions"]
    assert orjson.loads(grep("e", *twice, "--json").stdout_bytes)["sessions_searched"] == 2
