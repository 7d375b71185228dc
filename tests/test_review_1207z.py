"""Findings of a code review (2026-12-07) of 7c09d7d (sessions: a seq beyond
64 bits is no message), 4091d70 (validate --deep: records the contract does
not have) and cfbcd4d (secrets: a revision or seq stored as no integer)."""

from __future__ import annotations

import orjson
import pytest

from .test_engine import build
from .test_grep_read_1207d import _cli, _msg, _store

# ---------------------------------------------------------------- 1. which lines are events


@pytest.mark.parametrize("seq", ["10000000000000000000", str((1 << 64) - 1), str(1 << 64),
                                 "1" * 51, "3"])
def test_a_line_typed_message_that_repeats_type_is_no_applied_event_for_any_seq(tmp_path, seq):
    """``{"seq":N,"type":"message",..."type":"event","event":"undo"}`` is an
    event no reader applies whatever N's length (docs/FORMAT.md): the undo
    hides nothing, grep searches the record it targets, validate --deep says
    session.ignored_event.  7c09d7d made the rule hold for at most 19 digits."""
    recs = [{"seq": i, "type": "message", "role": "user", "content": f"m{i} zebra"}
            for i in range(1, 6)]
    spec = {"sessions": {"s0": recs}, "damage": {"s0": None}, "damage_at": {"s0": 1},
            "facts": [("0000000000000001", [("s0", [3], "right")])],
            "excluded": {"s0": set()}, "generation": 0}
    st = build(tmp_path, spec)
    f = st / "sessions" / "s0.jsonl"
    f.write_bytes(f.read_bytes() + b'{"seq":' + seq.encode()
                  + b',"type":"message","type":"event","event":"undo","target":[3,3]}\n')
    r = _cli(st, "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [(j["status"], j["reason"]) for j in map(orjson.loads, r.stdout.splitlines())] \
        == [("valid", None)], r.stdout
    r = _cli(st, "validate", "--json")
    codes = [x["code"] for x in orjson.loads(r.stdout)["findings"]]
    assert "fact.hidden" not in codes, codes
    r = _cli(st, "validate", "--json", "--deep")
    assert "Traceback" not in r.stderr and "internal" not in r.stderr, r.stderr
    codes = [x["code"] for x in orjson.loads(r.stdout)["findings"]]
    assert "fact.hidden" not in codes, codes
    if int(seq) < 1 << 64:      # (a record: beyond, a float, no seq, a corrupt line)
        assert "session.ignored_event" in codes, codes
    r = _cli(st, "grep", "-F", "m3")
    assert r.exit_code == 0 and "s0:3" in r.stdout, (r.stdout, r.stderr)


# ---------------------------------------------------------------- 2. a huge line's seq


@pytest.mark.parametrize("extra", ["", ',"event":"no"'])
@pytest.mark.parametrize(("seq", "messages"), [
    (str(1 << 64), 1), ("1" * 51, 1), ("9" * 60, 1),
    (str((1 << 64) - 1), 2), (str(10 ** 19), 2), ("7", 2)])
def test_sessions_counts_a_huge_line_as_a_message_only_when_its_seq_is_an_integer(
        tmp_path, seq, messages, extra):
    """A line over 1 MiB is judged by its first bytes: one whose seq is beyond
    64 bits (a float to every reader, no seq) is no message, as a short one
    is not (it was counted, and the transcript ok); with the bytes "event"
    in it too."""
    line = '{"seq":' + seq + ',"type":"message","role":"user","content":"' \
        + "x" * (1 << 21) + '"' + extra + "}"
    st = _store(tmp_path, {"s1": [_msg(1, "one"), line]})
    r = _cli(st, "sessions", "--json")
    assert r.exit_code == 0, r.stderr
    (row,) = orjson.loads(r.stdout)
    assert row["messages"] == messages, row
    if messages == 1 and not extra:     # (read whole when it may be an event)
        assert (row["state"], row["reason"], row["detail"]) \
            == ("corrupt", "no_seq", "line 3: no_seq"), row


# ---------------------------------------------------------------- 3. validate --deep, line by line


def _deep(st) -> list[tuple]:
    r = _cli(st, "validate", "--json", "--deep")
    assert r.exit_code in (0, 1), r.stderr
    return [(f["code"], f["line"], f["seq"], f["reason"]) for f in orjson.loads(r.stdout)["findings"]
            if not f["code"].startswith("layout.")]


def test_deep_line_by_line_flags_the_records_the_whole_parse_flags(tmp_path):
    """The line loop checks a record's type and role before shape, as the
    one-call parse does (every record reached shape: a speed regression);
    both flag the same records, in the same order, an unhashable role too."""
    recs = [_msg(1, "one"), _msg(2, "two", role=["user"]), '{"seq":3,"type":"bogus"}',
            _msg(4, "three", role={"r": 1}), _msg(5, "four", role=7), '{"seq":6}',
            '{"seq":7,"type":"event","event":"nonsense"}', _msg(8, "x", role="system"),
            '{"seq":9,"type":"session","format":1,"session_id":"s1","project":"other",'
            '"created":"2026-12-01T09:00:00+00:00"}', _msg(10, "y", role="wizard"),
            '{"seq":11,"type":["message"],"role":"user"}']
    whole = _deep(_store(tmp_path / "w", {"s1": recs}))
    lines = _deep(_store(tmp_path / "l", {"s1": [*recs, "not json"]}))
    # (the one-call parse says the events first, the line loop in line order)
    assert sorted(lines, key=lambda f: f[1]) == [
        *sorted(whole, key=lambda f: f[1]), ("session.corrupt_line", 13, None, "not_json")], \
        (whole, lines)
    assert sorted((line, code) for code, line, *_ in whole) == [
        (3, "session.unknown_role"), (4, "session.unknown_type"), (5, "session.unknown_role"),
        (6, "session.unknown_role"), (7, "session.unknown_type"), (8, "session.unknown_event"),
        (10, "session.second_header"), (11, "session.unknown_role"),
        (12, "session.unknown_type")], whole


# ---------------------------------------------------------------- 4. text outputs: no None


def test_secrets_text_says_a_revision_stored_as_no_integer_as_a_dash(demo_template, tmp_path):
    """A revision stored as 2.5 is null in the rows (cfbcd4d); the text place
    said ``revision None`` (history and facts say ``revision -``)."""
    from .test_schema_rows_1207 import _demo, _plant_odd_numbers

    store = _demo(demo_template, tmp_path)
    _plant_odd_numbers(store)
    r = _cli(store, "secrets")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert "None" not in r.stdout, r.stdout
    assert r.stdout.count("fact eeeeeeeeeeeeeeee revision -") == 3, r.stdout


# ---------------------------------------------------------------- 5. validate --deep: a seq beyond 64 bits


@pytest.mark.parametrize("fmt", ["--json", "jsonl", "csv"])
def test_deep_findings_of_a_huge_line_whose_seq_is_beyond_64_bits_are_output(tmp_path, fmt):
    """A line over 1 MiB is placed by its first bytes' seq (huge_seq): 2^64
    here, and the seq_gap finding carrying it ended the JSON outputs in an
    internal error (orjson: Integer exceeds 64-bit range).  Since
    2026-12-08 such a line is placed nowhere, as a short one (no seq to
    any parser): one corrupt line, no_seq, and no seq_gap; every format is
    output whole."""
    line = '{"seq":' + str(1 << 64) + ',"type":"message","role":"user","content":"' \
        + "x" * (1 << 21) + '"}'
    st = _store(tmp_path, {"s1": [_msg(1, "one"), line]})
    args = ["--json"] if fmt == "--json" else ["--format", fmt]
    r = _cli(st, "validate", "--deep", *args)
    assert r.exit_code == 1 and "internal" not in r.stderr, (r.exit_code, r.stdout, r.stderr)
    if fmt == "csv":
        import csv
        import io

        rows = [(x["code"], x["line"], x["reason"]) for x in csv.DictReader(io.StringIO(r.stdout))
                if x["code"].startswith("session.")]
        assert rows == [("session.corrupt_line", "3", "no_seq")], rows
        return
    found = (orjson.loads(r.stdout)["findings"] if fmt == "--json"
             else [x for x in map(orjson.loads, r.stdout.splitlines()) if x["type"] == "finding"])
    got = [(x["code"], x["line"], x["reason"]) for x in found if x["code"].startswith("session.")]
    assert got == [("session.corrupt_line", 3, "no_seq")], got
