"""``memctl grep`` and ``memctl read --text`` on hand-written transcripts
(2026-12-07, fifth pass): a cut tool result counts every line it did not
show whichever character the cut lands on; ``grep -C`` keeps two records
that share a seq two groups; a field's lines are grep(1)'s (a final
newline ends the last line, it begins none); with a literal pattern the
check of the seqs' order passes over a line that is no record, as the
search with a regex does, whatever its first bytes say; OUTPUT.md's list
of the day's exit statuses names migrate-legacy's --config-dir ones and
the other changes of the day."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from unittest import mock

import orjson
import pytest

# (the hand-written stores of the fourth pass's grep and read tests)
from .conftest import run_cli
from .test_grep_read_1207d import _cli, _msg, _store

# ---------------------------------------------------------------- read --text: a cut tool result

@pytest.mark.parametrize(("content", "more"), [
    ("a" * 1200 + "\nL2\nL3\nL4", 3),              # cut inside line 1
    ("a" * 1000 + "\nL2\nL3\nL4", 3),              # cut exactly at line 1's end
    ("a" * 999 + "\nL2\nL3\nL4", 3),               # cut just after line 1's newline
    ("a" * 998 + "\nL2\nL3\nL4", 2),               # cut inside line 2 (its "L" shown)
    ("a" * 995 + "\nL2\n" + "b" * 100, 0),         # cut inside the last line
    ("a" * 999 + "\nL2\nL3\nL4\n", 3),             # a final newline: no 4th line after it
    ("a" * 999 + "\nL2", 1),                      # cut just after the only newline
])
def test_read_text_counts_the_lines_after_a_cut_wherever_it_lands(tmp_path, content, more):
    st = _store(tmp_path, {"tr": [_msg(1, content, role="tool", tool_call_id="c1")]})
    r = _cli(st, "read", "tr", "1", "1", "--text")
    assert r.exit_code == 0, r.stderr
    last = r.stdout.splitlines()[-1]
    if len(content) <= 1000:
        assert "more" not in last, last
        return
    assert f"the first 1000 of {len(content)} characters shown" in last, last
    if more:
        assert f", {more} more line{'s' if more > 1 else ''};" in last, last
    else:
        assert "more line" not in last, last


# ---------------------------------------------------------------- grep -C: one group a record


def test_grep_context_keeps_two_records_sharing_a_seq_apart(tmp_path):
    """Two records with one seq (a repeated seq: damage) were one group, and
    neither's context was printed; each is its own group, as --json has it."""
    st = _store(tmp_path, {"s1": [_msg(1, "apple\nA-after"), _msg(1, "B-before\napple")]})
    r = _cli(st, "grep", "apple", "-C", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "s1:1 user $.content: apple",
        "s1:1 user $.content-2- A-after",
        "--",
        "s1:1 user $.content-1- B-before",
        "s1:1 user $.content line 2: apple"], r.stdout
    assert "seq_duplicate" in r.stderr
    doc = orjson.loads(_cli(st, "grep", "apple", "-C", "1", "--json").stdout_bytes)
    assert [(m["after"], m["before"]) for m in doc["hits"]] == [
        (["A-after"], []), ([], ["B-before"])]
    assert "record_end" not in doc["hits"][0]


def test_grep_context_still_merges_hits_of_one_field(tmp_path):
    st = _store(tmp_path, {"s1": [_msg(1, "apple\nx\napple"), _msg(2, "apple")]})
    r = _cli(st, "grep", "apple", "-C", "1")
    assert r.stdout.splitlines() == [
        "s1:1 user $.content: apple",
        "s1:1 user $.content-2- x",
        "s1:1 user $.content line 3: apple",
        "--",
        "s1:2 user $.content: apple"], r.stdout


# ---------------------------------------------------------------- grep: a field's lines are grep(1)'s


def _gnu(text: str, *args: str) -> list[str]:
    return subprocess.run(["grep", *args], input=text.encode(), capture_output=True,
                          check=False).stdout.decode().splitlines()


def test_grep_takes_no_line_after_a_fields_final_newline(tmp_path):
    st = _store(tmp_path, {"s1": [_msg(1, "one\napple\n")]})
    r = _cli(st, "grep", "apple", "-C", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["s1:1 user $.content-1- one",
                                     "s1:1 user $.content line 2: apple"], r.stdout
    assert _gnu("one\napple\n", "-n", "-C1", "apple") == ["1-one", "2:apple"]
    for fmt in (("--json",), ("--format", "jsonl")):
        r = _cli(st, "grep", "apple", "-C", "1", *fmt)
        rows = ([ln for ln in r.stdout_bytes.splitlines()] if fmt[0] != "--json"
                else [orjson.dumps(h) for h in orjson.loads(r.stdout_bytes)["hits"]])
        (hit,) = [orjson.loads(x) for x in rows]
        assert (hit["line_no"], hit["before"], hit["after"]) == (2, ["one"], []), hit
    r = _cli(st, "grep", "apple", "-C", "1", "--format", "csv")
    assert r.exit_code == 0 and r.stdout.count("\n") == 2, r.stdout
    # no empty line after the last: '^$' finds nothing, as grep(1) does
    r = _cli(st, "grep", "^$", "-c")
    assert r.exit_code == 1 and r.stdout == "", (r.exit_code, r.stdout)
    assert _gnu("one\napple\n", "-c", "^$") == ["0"]


@pytest.mark.parametrize("text", [
    "one\napple\n", "apple\n", "\n", "\n\n", "a\n\n", "\napple", "apple\n\napple\n\n",
    "x\ny", "apple", "one\n\n\napple\nz\n"])
@pytest.mark.parametrize("pattern", ["^$", "apple", "^", "$", "p*", "e$"])
def test_grep_lines_of_a_field_are_grep1s(tmp_path, text, pattern):
    """Each field's hits (line numbers) and -C 1 lines are those of grep(1)
    on the field's text."""
    st = _store(tmp_path, {"s1": [_msg(1, text)]})
    r = _cli(st, "grep", pattern, "-C", "1", "--json")
    assert r.exit_code in (0, 1), r.stderr
    hits = orjson.loads(r.stdout_bytes)["hits"]
    gnu = _gnu(text, "-n", "--", pattern)
    assert [h["line_no"] for h in hits] == [int(g.split(":", 1)[0]) for g in gnu], (hits, gnu)
    assert [h["line"] for h in hits] == [g.split(":", 1)[1] for g in gnu]
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    for h in hits:
        i = h["line_no"] - 1
        assert h["before"] == lines[max(0, i - 1):i] and h["after"] == lines[i + 1:i + 2], h


def test_grep_an_empty_field_has_no_line(tmp_path):
    """An empty content is no line, as an empty file is none to grep(1)."""
    st = _store(tmp_path, {"s1": [_msg(1, ""), _msg(2, "x")]})
    r = _cli(st, "grep", "^$", "-c")
    assert (r.exit_code, r.stdout) == (1, ""), (r.exit_code, r.stdout)
    assert _gnu("", "-c", "^$") == ["0"]


def test_grep_other_hits_keep_their_match_and_line(tmp_path):
    """What the change leaves: a hit's line_no, match and offsets, a match
    spanning lines, a match at the end of the last line."""
    st = _store(tmp_path, {"s1": [_msg(1, "a\nbc\n"), _msg(2, "a\nbc")]})
    doc = orjson.loads(_cli(st, "grep", "c$", "--json").stdout_bytes)
    assert [(h["seq"], h["line_no"], h["start"], h["match"]) for h in doc["hits"]] == [
        (1, 2, 1, "c"), (2, 2, 1, "c")]
    doc = orjson.loads(_cli(st, "grep", "a\nb", "--json").stdout_bytes)
    assert [(h["seq"], h["line_no"], h["match"]) for h in doc["hits"]] == [(1, 1, "a"), (2, 1, "a")]
    doc = orjson.loads(_cli(st, "grep", "c\n", "--json").stdout_bytes)
    assert [(h["seq"], h["line_no"], h["match"]) for h in doc["hits"]] == [(1, 2, "c")]


# ---------------------------------------------------------------- grep: the order check of a literal


def _damage(st: Path, pattern: str):
    r = _cli(st, "grep", pattern, "--json")
    assert r.exit_code in (0, 1, 5), (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    return r.exit_code, doc["damaged"], r.stderr


SEQ_TWICE = b'{"seq":9999,"type":"message","role":"user","content":"x","seq":3}'


def test_literal_order_check_passes_over_a_line_whose_head_gives_another_seq(tmp_path):
    """A line beginning {"seq":9999, whose parse keeps seq 3 is no record
    (no_seq): the literal's order check placed it at 9999, and called the
    8 good records after it seq_regression."""
    st = _store(tmp_path, {"s1": [_msg(1, "apple"), _msg(2, "b"), SEQ_TWICE,
                                  *(_msg(s, "z") for s in range(4, 12))]})
    code, damaged, err = _damage(st, "apple")
    assert (code, damaged, err) == (0, [], ""), (code, damaged, err)
    # the regex search says the line (it parses every line); its order: clean
    code, damaged, err = _damage(st, "appl.")
    assert code == 0 and damaged == [
        {"session_id": "s1", "reason": "no_seq", "lines": 1, "first_line": 4}], damaged
    # a line that could hold a match is said alike by both
    st2 = _store(tmp_path / "b", {"s1": [_msg(1, "apple"), _msg(2, "b"),
                                         SEQ_TWICE.replace(b'"x"', b'"apple"'),
                                         *(_msg(s, "z") for s in range(4, 12))]})
    for pattern in ("apple", "appl[e]"):
        code, damaged, err = _damage(st2, pattern)
        assert code == 0 and damaged == [
            {"session_id": "s1", "reason": "no_seq", "lines": 1, "first_line": 4}], damaged
        assert err == "memctl: warning: session s1 damaged: 1 no_seq line not searched " \
                      "(first: line 4)\n", err


def test_literal_order_check_passes_over_a_torn_middle_line(tmp_path):
    """A torn line of seq 2 then the record of seq 2: no seq_duplicate."""
    torn = b'{"seq":2,"type":"message","role":"user","content":"tor'
    st = _store(tmp_path, {"s1": [_msg(1, "apple"), torn, _msg(2, "pear"), _msg(3, "z")]})
    assert _damage(st, "apple") == (0, [], "")
    code, damaged, _err = _damage(st, "appl.")
    assert code == 0 and damaged == [
        {"session_id": "s1", "reason": "not_json", "lines": 1, "first_line": 3}], damaged
    st2 = _store(tmp_path / "b", {"s1": [_msg(1, "apple"), torn + b" apple", _msg(2, "pear"),
                                         _msg(3, "z")]})
    for pattern in ("apple", "appl[e]"):
        code, damaged, _err = _damage(st2, pattern)
        assert code == 0 and damaged == [
            {"session_id": "s1", "reason": "not_json", "lines": 1, "first_line": 3}], damaged


def test_literal_order_check_still_counts_what_it_should(tmp_path):
    """Repeated and regressing seqs of records are still counted, the
    first line named, in a session where a record held a match; a long line
    (longer than a block of the second read) is placed as any."""
    lines = [_msg(1, "apple"), _msg(2, "b"), _msg(2, "c"), _msg(5, "d"), _msg(3, "e"),
             _msg(4, "f"), _msg(6, "g" * 200_000), _msg(6, "h")]
    st = _store(tmp_path, {"s1": lines})
    want = [{"session_id": "s1", "reason": "seq_duplicate", "lines": 2, "first_line": 4},
            {"session_id": "s1", "reason": "seq_regression", "lines": 2, "first_line": 6}]
    for pattern in ("apple", "appl[e]"):
        code, damaged, err = _damage(st, pattern)
        assert (code, damaged) == (0, want), (pattern, damaged)


def _corrupt(kind: int, seq: int, word: str) -> bytes:
    good = _msg(seq, word).encode()
    return [
        good[:-2],                                                   # torn: not_json
        good[:-1] + b',"seq":%d}' % (seq + 3),                      # seq given twice: no_seq
        good.replace(b'"user"', b'"\xff"'),                        # invalid_utf8
        b'{"type":"message","content":"%s"}' % word.encode(),      # no seq
        b'[{"seq":%d,"content":"%s"}]' % (seq, word.encode()),     # not_object
        b'{"seq":%d,"type":"message","content":"%s",}' % (seq, word.encode()),  # not_json
    ][kind]


def test_literal_and_regex_say_the_same_damage(tmp_path):
    """On random transcripts with corrupt lines and repeated or regressing
    seqs, a literal pattern and the same pattern as a regex give the same
    ``damaged`` and exit status when every corrupt line holds the pattern's
    bytes (the literal parses only the lines holding them: a corrupt line
    without them cannot hold a match, and is not counted); the seqs' order
    always alike.  The first read's blocks made small too, so that lines
    cross blocks and are longer than one."""
    from hypothesis import HealthCheck, given, settings, strategies as hst

    import lecode_memctl.core.grep as core_grep

    line = hst.one_of(
        hst.tuples(hst.just("rec"), hst.integers(-2, 3), hst.sampled_from(
            ["apple", "pear", "z", "an apple here", "q" * 300])),
        hst.tuples(hst.just("bad"), hst.integers(0, 5), hst.sampled_from(
            ["apple", "pear", "xapplex"])))

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(hst.lists(line, min_size=1, max_size=14), hst.sampled_from([40, 97, 1 << 16]))
    def check(items, block):
        seq, lines, holds = 0, [], True
        for what, n, word in items:
            if what == "rec":
                seq = max(0, seq + n)       # +1..+3 onwards, 0 repeats, < 0 goes back
                lines.append(_msg(seq, word))
            else:
                lines.append(_corrupt(n, seq + 1, word))
                holds = holds and "apple" in word
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(core_grep, "_ORDER_BLOCK", block):
            st = _store(Path(tmp), {"s1": lines})
            lit = _damage(st, "apple")
            rx = _damage(st, "appl[e]")
        order = ("seq_duplicate", "seq_regression")
        assert [d for d in lit[1] if d["reason"] in order] == \
            [d for d in rx[1] if d["reason"] in order], (lines, lit, rx)
        if holds:
            assert lit[:2] == rx[:2], (lines, lit, rx)

    check()


def test_literal_order_check_parses_no_line_of_a_clean_transcript(tmp_path):
    """The lines of a transcript whose seqs only go up (gaps, a line longer
    than a block, lines that do not begin with their seq) are placed by
    their first bytes, or parsed one by one where those give no seq: the
    second, parsing read is not made."""
    import lecode_memctl.core.grep as core_grep

    lines = [_msg(1, "apple"), _msg(2, "b"), _msg(5, "c"), _msg(6, "d" * 200_000),
             orjson.dumps({"type": "message", "role": "user", "content": "e", "seq": 7}),
             _msg(9, "apple")]
    st = _store(tmp_path, {"s1": lines})
    with mock.patch.object(core_grep._Lines, "_order_by_records",
                           side_effect=AssertionError("parsed every line")) as every:
        assert _damage(st, "apple") == (0, [], "")
    assert every.call_count == 0


# ---------------------------------------------------------------- OUTPUT.md: the day's exit statuses

REPO = Path(__file__).resolve().parent.parent


def _exit_list() -> str:
    """The item "Exit statuses and values of 2026-12-07 a script may
    notice" of OUTPUT.md's "Additions within schema version 3", one line."""
    text = (REPO / "docs" / "OUTPUT.md").read_text(encoding="utf-8")
    at = text.index("### Additions within schema version 3")
    start = text.index("- Exit statuses and values of 2026-12-07 a script may notice", at)
    end = text.index("\n- ", start + 1)
    return " ".join(text[start:end].split())


def test_output_md_lists_migrate_legacys_config_dir_exit_statuses(tmp_path):
    item = _exit_list()
    assert "`migrate-legacy` with a `--config-dir`" in item, item
    assert '"--config-dir DIR: no such directory" (was exit 0' in item
    assert '"--config-dir DIR: not a directory" (was exit 5' in item
    # and that is what memctl does
    cfg = tmp_path / "cfg"
    r = run_cli("--config-dir", str(tmp_path / "nonexist"), "migrate-legacy", "--dry-run")
    assert (r.exit_code, r.stderr) == (
        3, f"memctl: error: --config-dir {tmp_path / 'nonexist'}: no such directory\n")
    cfg.write_text("")
    r = run_cli("--config-dir", str(cfg), "migrate-legacy", "--dry-run")
    assert (r.exit_code, r.stderr) == (2, f"memctl: error: --config-dir {cfg}: not a directory\n")


def test_output_md_lists_the_days_other_exit_status_changes():
    item = _exit_list()
    for said in ("`grep` that matched nothing where a line that could hold a match was "
                 "not searched", "is exit 5",
                 "`grep --session` when every session named was skipped",
                 "`redact --yes` that leaves a value held only by facts written since its "
                 "plan", "exit 4 (Conflict",
                 "`[memory] enabled = false`", "raise `UsageError` (exit_code 2",
                 "raise `Conflict` (exit_code 4", "inside the write transaction"):
        assert said in item, said
