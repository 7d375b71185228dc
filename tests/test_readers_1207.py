"""Defects in grep, usage, sessions and read found by a review on
2026-12-07, each tested on a bare store (a directory with ``sessions/``)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

SLUG = "rep-0123456789ab"


def header(sid: str) -> str:
    return orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                         "project": SLUG, "created": "2026-12-01T09:00:00Z"}).decode()


def write(store: Path, sid: str, *lines: str) -> Path:
    (store / "sessions").mkdir(parents=True, exist_ok=True)
    p = store / "sessions" / f"{sid}.jsonl"
    p.write_text("".join(line + "\n" for line in (header(sid), *lines)), encoding="utf-8")
    return p


def msg(seq: int, content: str, role: str = "user") -> str:
    return orjson.dumps({"seq": seq, "type": "message", "role": role, "content": content}).decode()


def cli(store: Path, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


# -- 1. grep -i and the letters IGNORECASE folds that bytes.lower() does not

@pytest.mark.parametrize(("text", "pattern"), [
    ("deploy to İstanbul region", "istanbul"),
    ("deploy to ıstanbul region", "ISTANBUL"),
    ("a 5 \u212aelvin probe", "kelvin"),
    ("the ſecret place", "secret"),
    ("the ſecret place", "SECRET"),
])
def test_grep_ignore_case_finds_unicode_case_matches(tmp_path, text, pattern):
    assert re.search(pattern, text, re.IGNORECASE)
    write(tmp_path, "k", msg(1, text))
    for fixed in ((), ("-F",)):
        r = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k")
        assert r.exit_code == 0 and text in r.stdout, (r.exit_code, r.stdout, r.stderr)
        c = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k", "-c")
        assert c.exit_code == 0 and c.stdout.strip().endswith("1"), c.stdout
        l_ = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k", "-l")
        assert l_.exit_code == 0 and l_.stdout.strip() == "k", l_.stdout
    # and what does not match still does not
    assert cli(tmp_path, "grep", "-i", "zzz" + pattern, "--session", "k").exit_code == 1


# -- 2. usage and an event whose seq repeats or goes back

def usage_event(seq: int, purpose: str = "learning", tokens: int = 1000) -> str:
    return orjson.dumps({"seq": seq, "type": "event", "event": "memory_usage",
                         "purpose": purpose, "model": "m",
                         "usage": {"input_tokens": tokens, "output_tokens": 100,
                                   "cost": 0.5}}).decode()


def usage_rows(store: Path, *args: str) -> list[dict]:
    r = cli(store, "usage", *args, "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [orjson.loads(x) for x in r.stdout.splitlines()]


def test_usage_does_not_count_a_repeated_event_twice(tmp_path):
    ev = usage_event(2)
    write(tmp_path, "d", msg(1, "hi"), ev, ev)
    rows = usage_rows(tmp_path, "--session", "d")
    for row in rows:           # the learning row, then the total
        assert row["calls"] == 1 and row["input_tokens"] == 1000, row
        assert row["repeated_events"] == 1 and row["complete"] is False, row
    assert rows[-1]["type"] == "total"
    # its table says so
    r = cli(tmp_path, "usage", "--session", "d")
    assert r.exit_code == 0 and "seq repeats or goes back" in r.stdout, r.stdout


def test_usage_seqs_9_9_11_10_count_two_calls(tmp_path):
    write(tmp_path, "g", *(msg(i, "x") for i in range(1, 9)),
          usage_event(9, tokens=1), usage_event(9, tokens=10),
          usage_event(11, tokens=100), usage_event(10, tokens=1000))
    total = usage_rows(tmp_path, "--session", "g")[-1]
    assert total["calls"] == 2 and total["input_tokens"] == 101, total
    assert total["repeated_events"] == 2 and total["complete"] is False


def test_usage_in_order_events_stay_complete(tmp_path):
    write(tmp_path, "o", usage_event(1), msg(2, "x"), usage_event(3))
    write(tmp_path, "p", usage_event(1), usage_event(2))    # a second session: its own seqs
    total = usage_rows(tmp_path)[-1]
    assert total["calls"] == 4 and total["repeated_events"] == 0 and total["complete"] is True
    doc = orjson.loads(cli(tmp_path, "usage", "--json").stdout)
    assert doc["total"]["repeated_events"] == 0


# -- 3. usage --session is repeatable, as grep's is

def test_usage_counts_every_session_given(tmp_path):
    write(tmp_path, "a", usage_event(1, tokens=1))
    write(tmp_path, "b", usage_event(1, tokens=10))
    write(tmp_path, "c", usage_event(1, tokens=100))
    doc = orjson.loads(cli(tmp_path, "usage", "--session", "a", "--session", "b",
                           "--session", "a", "--json").stdout)
    assert doc["total"]["calls"] == 2 and doc["total"]["input_tokens"] == 11, doc
    assert doc["sessions"] == doc["sessions_counted"] == 2
    assert doc["session"] is None and doc["session_ids"] == ["a", "b"]
    one = orjson.loads(cli(tmp_path, "usage", "--session", "b", "--json").stdout)
    assert one["session"] == "b" and one["session_ids"] == ["b"]
    assert one["total"]["input_tokens"] == 10
    every = orjson.loads(cli(tmp_path, "usage", "--json").stdout)
    assert every["session"] is None and every["session_ids"] is None
    assert every["total"]["input_tokens"] == 111
    # an unknown id among them is exit 3, a bad one exit 2, before anything is counted
    assert cli(tmp_path, "usage", "--session", "a", "--session", "nope").exit_code == 3
    assert cli(tmp_path, "usage", "--session", "a", "--session", "../x").exit_code == 2


# -- 4. grep --session where every session named was skipped

def test_grep_exit_status_when_every_named_session_was_skipped(tmp_path):
    import os
    write(tmp_path, "k", msg(1, "hello"))
    write(tmp_path, "k2", msg(1, "nothing"))
    other = tmp_path / "sessions" / "o.jsonl"
    other.write_text(header("o").replace(SLUG, "rep-ffffffffffff") + "\n" + msg(1, "hello") + "\n")
    os.mkfifo(tmp_path / "sessions" / "f.jsonl")
    (tmp_path / "sessions" / "l.jsonl").symlink_to("k.jsonl")
    (tmp_path / "sessions" / "d.jsonl").mkdir()
    (tmp_path / "sessions" / "b.jsonl").write_text('{"seq":0}\n')
    expect = {"o": 4, "l": 4, "b": 4, "f": 5, "d": 5}
    for sid, code in expect.items():
        r = cli(tmp_path, "grep", "hello", "--session", sid)
        assert r.exit_code == code, (sid, r.exit_code, r.stderr)
        assert f"session {sid} skipped" in r.stderr
        assert cli(tmp_path, "read", sid, "0", "1").exit_code == code, sid
        j = cli(tmp_path, "grep", "hello", "--session", sid, "--json")
        assert j.exit_code == code and orjson.loads(j.stdout)["sessions_searched"] == 0
        assert cli(tmp_path, "grep", "hello", "--session", sid, "-c").exit_code == code
    # mixed: the highest status
    assert cli(tmp_path, "grep", "hello", "--session", "o", "--session", "f").exit_code == 5
    # one searched: today's behaviour, 0 on a hit, 1 without
    assert cli(tmp_path, "grep", "hello", "--session", "o", "--session", "k").exit_code == 0
    assert cli(tmp_path, "grep", "hello", "--session", "o", "--session", "k2").exit_code == 1
    # every session (no --session): some skipped, still 0/1
    assert cli(tmp_path, "grep", "hello").exit_code == 0
    assert cli(tmp_path, "grep", "zzz").exit_code == 1


# -- 5. the sessions listing: the first problem, and an escaped event

def listed(store: Path, sid: str) -> dict:
    r = cli(store, "sessions", "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    return {x["id"]: x for x in map(orjson.loads, r.stdout.splitlines())}[sid]


def test_sessions_reports_the_first_seq_problem(tmp_path):
    write(tmp_path, "a", msg(1, "a"), msg(1, "b"), msg(5, "c"))
    row = listed(tmp_path, "a")
    assert (row["state"], row["reason"], row["detail"]) == (
        "corrupt", "seq_duplicate", "line 3: seq_duplicate"), row
    assert row["records"] == 6          # the last seq + 1, as documented


def test_sessions_reports_a_bad_line_before_a_later_duplicate(tmp_path):
    write(tmp_path, "b", msg(1, "a"), "{not json", msg(2, "b"), msg(2, "c"))
    row = listed(tmp_path, "b")
    assert (row["state"], row["reason"], row["detail"]) == (
        "corrupt", "not_json", "line 3: not_json"), row
    # a line that is an object but no record is found where it is too
    write(tmp_path, "c", msg(1, "a"), '{"x":1}', msg(2, "b"), msg(2, "c"))
    row = listed(tmp_path, "c")
    assert (row["state"], row["detail"]) == ("corrupt", "line 3: no_seq"), row


def test_sessions_counts_an_escaped_event_as_read_does(tmp_path):
    write(tmp_path, "e", msg(1, "hi"), '{"seq":2,"type":"\\u0065vent","\\u0065vent":"clear"}',
          msg(3, "yo"), '{"seq":4,"type":"event","\\u0065vent":"compact","summary":"s"}',
          '{"seq":5,"type":"message","role":"user","content":"x","type":"event","event":"clear"}')
    row = listed(tmp_path, "e")
    assert (row["records"], row["messages"], row["compactions"], row["state"]) == (
        6, 2, 1, "ok"), row     # (seq 4 is a compact event: "type":"event" is there)
    doc = orjson.loads(cli(tmp_path, "read", "e", "0", "5", "--json").stdout)
    assert doc["source"]["seqs"] == [1, 3]


# -- 6. usage: a purpose named like the total, and events without a purpose

def purpose_event(seq: int, purpose: object, tokens: int, *, drop: bool = False) -> str:
    rec: dict = {"seq": seq, "type": "event", "event": "memory_usage", "purpose": purpose,
                 "usage": {"input_tokens": tokens, "output_tokens": 0, "cost": 0}}
    if drop:
        del rec["purpose"]
    return orjson.dumps(rec).decode()


def test_usage_purposes_cannot_pass_for_the_total_or_for_none(tmp_path):
    write(tmp_path, "p", purpose_event(1, "total", 1), purpose_event(2, "unknown", 10),
          purpose_event(3, None, 100), purpose_event(4, 5, 1000),
          purpose_event(5, None, 10000, drop=True), purpose_event(6, "(total)", 100000),
          purpose_event(7, "(none)", 1000000))
    doc = orjson.loads(cli(tmp_path, "usage", "--json").stdout)
    by = {p["purpose"]: p["input_tokens"] for p in doc["purposes"]}
    assert by == {"total": 1, "unknown": 10, None: 11100, "(total)": 100000,
                  "(none)": 1000000}, by
    assert doc["total"]["purpose"] == "total" and doc["total"]["type"] == "total"
    # a table has no type column: the total row and the row of no purpose
    # are labelled so that no purpose's own name can be taken for them
    for fmt in ("table", "github", "tsv"):
        r = cli(tmp_path, "usage", "-f", fmt)
        assert r.exit_code == 0, r.stderr
        first = [ln.strip("|").split("|" if fmt == "github" else "\t" if fmt == "tsv" else None)[0]
                 .strip() for ln in r.stdout.splitlines()]
        if fmt == "tsv":
            first = [ln.split("\t")[1] for ln in r.stdout.splitlines()]   # (type, purpose, ...)
            assert first.count("total") == 2 and first.count("") == 1, first
            continue
        assert first.count("(total)") == 1 and first.count("(none)") == 1, first
        assert first.count("total") == 1 and first.count("unknown") == 1, first
        assert '"(total)"' in first and '"(none)"' in first, first


# -- 7. read START END: the strict numbers of SESSION:RANGE; runs ascending

def test_read_start_end_take_ascii_digits_only(tmp_path):
    write(tmp_path, "p", *(msg(i, f"m{i}") for i in range(1, 9)))
    good = cli(tmp_path, "read", "p", "4", "7", "--json")
    assert good.exit_code == 0, good.stderr
    assert orjson.loads(good.stdout)["source"]["seqs"] == [4, 5, 6, 7]
    assert cli(tmp_path, "read", "p:4-7", "--json").stdout == good.stdout
    assert cli(tmp_path, "read", "p", "04", "7", "--json").exit_code == 0    # as p:04-7
    for start, end in (("٤", "٧"), ("4_0", "4_2"), ("+4", "7"), (" 4", "7"), ("4", "7 "),
                       ("４", "7"), ("4", "0x7"), ("4.0", "7")):
        r = cli(tmp_path, "read", "p", start, end)
        assert r.exit_code == 2, (start, end, r.exit_code, r.stdout)
        assert "must be a non-negative integer" in r.stderr, r.stderr
    assert cli(tmp_path, "read", "p:٤-٧").exit_code == 2


def test_read_refuses_runs_out_of_order(tmp_path):
    write(tmp_path, "p", *(msg(i, f"m{i}") for i in range(1, 9)))
    for spec in ("p:7,4", "p:5-7,2", "p:2-4,4", "p:3,3"):
        r = cli(tmp_path, "read", spec)
        assert r.exit_code == 2, (spec, r.exit_code)
        assert "ascending" in r.stderr, r.stderr
    assert cli(tmp_path, "read", "p:7-4").exit_code == 2
    ok = cli(tmp_path, "read", "p:2-4,6", "--json")
    assert ok.exit_code == 0 and orjson.loads(ok.stdout)["start"] == 2
    assert orjson.loads(ok.stdout)["end"] == 6


# -- 8. read --text --all: --all adds nothing to --text, which prints it all
# (a review first had it refused; a code review found that a regression for
# scripts that gave both, as the help never refused it)

def test_read_text_with_all_prints_the_text(tmp_path):
    write(tmp_path, "p", msg(1, "m1"))
    r = cli(tmp_path, "read", "p", "1", "1", "--text", "--all")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert r.stdout == cli(tmp_path, "read", "p", "1", "1", "--text").stdout
    assert cli(tmp_path, "read", "p", "1", "1", "--all").exit_code == 0


def test_correct_refuses_runs_that_do_not_ascend_as_read_does(tmp_path):
    """One parser of a range (cmd_facts.parse_evidence): before the fix of a
    code review, 'read S:4,2' was exit 2 while 'correct F 1 S:4,2 TEXT'
    recorded S:2-4."""
    from lecode_memctl.cli.cmd_facts import parse_evidence
    from lecode_memctl.core.errors import UsageError

    for spec in ("s1:4,2", "s1:3,3", "s1:2-5,4"):
        with pytest.raises(UsageError, match="ascending"):
            parse_evidence(spec, ["text"])
    assert parse_evidence("s1:2-3,5", ["t"]) == ("s1", 2, 5, "t")
    write(tmp_path, "p", msg(1, "m1"))
    r = cli(tmp_path, "correct", "0123456789abcdef", "1", "p:4,2", "new text")
    assert r.exit_code == 2 and "ascending" in r.stderr, (r.exit_code, r.stderr)
