"""Transcript records of shapes the store contract does not describe
(2026-12-07, a review of hostile transcript bytes): ``grep`` searches what
``read --text`` shows of them, ``sessions`` counts only records as
messages, and ``validate --deep`` says what the contract forbids."""

from __future__ import annotations

import orjson
import pytest

from .test_grep_read_1207d import _cli, _msg, _store

TOKEN = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _grep(st, *args: str):
    r = _cli(st, "grep", *args, "--include-hidden", "--json")
    assert "Traceback" not in r.stderr, r.stderr
    return r, orjson.loads(r.stdout) if r.stdout else None


# ---------------------------------------------------------------- grep: what read shows


@pytest.mark.parametrize("fixed", [False, True])
def test_grep_finds_the_text_of_a_part_of_any_type(tmp_path, fixed):
    st = _store(tmp_path, {"s1": [
        _msg(1, [{"type": "output_text", "text": "deploy key is in vault-7"},
                 {"text": "untyped vault-7 part"},
                 {"type": "binary", "media_type": "image/png", "data": "AAAA",
                  "text": "vault-7 not shown"}])]})
    shown = _cli(st, "read", "s1", "1", "1", "--text")
    assert "[output_text part] deploy key is in vault-7" in shown.stdout, shown.stdout
    r, doc = _grep(st, *(["-F"] if fixed else []), "vault-7")
    assert r.exit_code == 0, r.stderr
    assert [(h["seq"], h["path"], h["line"]) for h in doc["hits"]] == [
        (1, "$.content[0].text", "deploy key is in vault-7"),
        (1, "$.content[1].text", "untyped vault-7 part")]
    assert doc["damaged"] == []


@pytest.mark.parametrize("fixed", [False, True])
def test_grep_finds_the_strings_of_content_that_is_an_object(tmp_path, fixed):
    """read --text shows such content as JSON, and secrets reports the
    credential at $.content.text: grep finds it there too."""
    st = _store(tmp_path, {"s1": [
        _msg(1, {"text": f"token {TOKEN}", "more": {"deep": ["x", "ghp_ again"]}}),
        _msg(2, [7, ["nested ghp_ list"]])]})
    assert TOKEN in _cli(st, "read", "s1", "1", "1", "--text").stdout
    sec = _cli(st, "secrets", "--json")
    assert "$.content.text" in sec.stdout, sec.stdout
    r, doc = _grep(st, *(["-F"] if fixed else []), "ghp_")
    assert r.exit_code == 0, r.stderr
    assert [(h["seq"], h["path"]) for h in doc["hits"]] == [
        (1, "$.content.text"), (1, "$.content.more.deep[1]"), (2, "$.content[1][0]")]
    assert doc["damaged"] == []
    text = _cli(st, "grep", "ghp_")
    assert text.exit_code == 0 and "s1:1 user $.content.text: token ghp_" in text.stdout, \
        text.stdout


# ---------------------------------------------------------------- sessions: what a message is


@pytest.mark.parametrize("seq", [str(1 << 64), "1" * 51, str(10 ** 19 * 5)])
def test_sessions_counts_no_line_without_a_seq_as_a_message(tmp_path, seq):
    """A seq beyond 64 bits is a float to the readers: the line is no record
    (no_seq, which grep does not search), and no message."""
    line = '{"seq":' + seq + ',"type":"message","role":"user","content":"x"}'
    st = _store(tmp_path, {"s1": [_msg(1, "one"), line]})
    r = _cli(st, "sessions", "--json")
    assert r.exit_code == 0, r.stderr
    (row,) = orjson.loads(r.stdout)
    assert (row["messages"], row["state"], row["reason"]) == (1, "corrupt", "no_seq"), row
    assert _cli(st, "grep", "-c", "x").exit_code == 5


@pytest.mark.parametrize("seq", [str((1 << 63) - 1), str(1 << 63), str((1 << 64) - 1)])
def test_sessions_counts_a_message_whose_seq_is_an_integer(tmp_path, seq):
    """A seq that is still an integer (up to 2^64-1: a record, out of
    order) is a message, as grep and validate --deep take it."""
    line = '{"seq":' + seq + ',"type":"message","role":"user","content":"x"}'
    st = _store(tmp_path, {"s1": [_msg(1, "one"), line]})
    (row,) = orjson.loads(_cli(st, "sessions", "--json").stdout)
    assert row["messages"] == 2, row
    assert _cli(st, "grep", "-c", "x").stdout.strip() == "s1:1"
