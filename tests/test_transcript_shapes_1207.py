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


# ---------------------------------------------------------------- validate --deep: what the contract forbids

OTHER = "evil-0123456789ab"


def _header(seq: int, project: str, sid: str = "s1") -> str:
    return orjson.dumps({"seq": seq, "type": "session", "format": 1, "session_id": sid,
                         "project": project, "created": "2026-12-01T09:00:00+00:00"}).decode()


def _findings(st, *args: str) -> list[dict]:
    r = _cli(st, "validate", "--json", *args)
    assert r.exit_code in (0, 1), r.stderr
    return [f for f in orjson.loads(r.stdout)["findings"]
            if not f["code"].startswith("layout.")]


def _shapes(st) -> list[tuple]:
    return [(f["code"], f["severity"], f["line"], f["seq"], f["reason"])
            for f in _findings(st, "--deep")]


# every line a record whose seq is its line number (the audit's one-call
# parse), or a corrupt line at the end (the line loop)
@pytest.fixture(params=["whole", "line_loop"])
def tail(request) -> list[str]:
    return [] if request.param == "whole" else ["not json"]


def _corrupt(tail):
    return [("session.corrupt_line", "error", 4, None, "not_json")] if tail else []


@pytest.mark.parametrize(("project", "sid", "reason"), [
    (OTHER, "s1", "other_project"), (None, "s2", "other_session"), (None, "s1", "repeated")])
def test_deep_reports_a_second_header(tmp_path, tail, project, sid, reason):
    from .builders import SLUG

    st = _store(tmp_path, {"s1": [_msg(1, "one"), _header(2, project or SLUG, sid), *tail]})
    assert _shapes(st) == [("session.second_header", "error", 3, 2, reason), *_corrupt(tail)]
    # not without --deep (the default audit reads the header and the tail)
    assert not [f for f in _findings(st) if f["code"] == "session.second_header"]


def test_deep_reports_a_record_of_no_type_the_contract_has(tmp_path, tail):
    st = _store(tmp_path, {"s1": [_msg(1, "one"), '{"seq":2,"type":"bogus"}', *tail]})
    assert _shapes(st) == [("session.unknown_type", "warning", 3, 2, None), *_corrupt(tail)]
    st2 = _store(tmp_path / "b", {"s1": [_msg(1, "one"), '{"seq":2,"content":"x"}', *tail]})
    assert _shapes(st2) == [("session.unknown_type", "warning", 3, 2, None), *_corrupt(tail)]


@pytest.mark.parametrize("role", ["wizard", None, 7])
def test_deep_reports_a_message_of_no_role_the_contract_has(tmp_path, tail, role):
    st = _store(tmp_path, {"s1": [_msg(1, "one"), _msg(2, "two", role=role), *tail]})
    assert _shapes(st) == [("session.unknown_role", "warning", 3, 2, None), *_corrupt(tail)]


def test_deep_says_an_event_of_no_name_the_contract_lists(tmp_path, tail):
    st = _store(tmp_path, {"s1": [_msg(1, "one"), '{"seq":2,"type":"event","event":"nonsense"}',
                                  *tail]})
    assert _shapes(st) == [("session.unknown_event", "info", 3, 2, None), *_corrupt(tail)]


def test_deep_is_quiet_on_what_the_contract_allows(tmp_path, tail):
    st = _store(tmp_path, {"s1": [
        _msg(1, "one"), _msg(2, "two", role="assistant", epoch=0), _msg(3, "r", role="tool",
                                                                       epoch=0),
        _msg(4, "s", role="system"),
        '{"seq":5,"type":"event","event":"memory_usage","purpose":"learning","model":"m",'
        '"usage":null}',
        '{"seq":6,"type":"event","event":"clear"}', *tail]})
    assert _shapes(st) == ([("session.corrupt_line", "error", 8, None, "not_json")]
                           if tail else [])


def test_the_review_repro_fails_validate_deep_strict(tmp_path):
    st = _store(tmp_path, {"s1": [
        _msg(1, "one"), _header(2, OTHER), '{"seq":3,"type":"bogus"}',
        _msg(4, "two", role="wizard"), '{"seq":5,"type":"event","event":"nonsense"}']})
    r = _cli(st, "validate", "--deep", "--strict")
    assert r.exit_code == 1, r.stdout
    for code in ("session.second_header", "session.unknown_type", "session.unknown_role",
                 "session.unknown_event"):
        assert code in r.stdout, r.stdout
    assert "Traceback" not in r.stderr
    codes = _cli(st, "validate", "--list-codes", "--json").stdout
    assert "session.second_header" in codes and "session.unknown_event" in codes
