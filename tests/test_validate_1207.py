"""validate's lineage, epoch and fact checks, fixes of a review (2026-12-07):
stores built record by record, as lecode writes them (or does not)."""

from __future__ import annotations

import hashlib
import os

import orjson
import pytest

from lecode_memctl.core.audit import validate_store

SLUG = "proj-0123456789ab"


def _dig(records):
    return hashlib.sha256(orjson.dumps(records, option=orjson.OPT_SORT_KEYS)).hexdigest()


def make_store(tmp_path):
    d = tmp_path / "config" / "memory" / SLUG
    (d / "sessions").mkdir(parents=True, mode=0o700)
    for p in (tmp_path / "config", tmp_path / "config" / "memory", d, d / "sessions"):
        os.chmod(p, 0o700)
    return d


class Session:
    """A transcript built record by record (seq = position)."""

    def __init__(self, d, sid="a"):
        self.d, self.sid, self.recs = d, sid, []
        self.add(type="session", format=1, session_id=sid, project=SLUG,
                 created="2026-12-01T00:00:00Z")

    def add(self, **kw):
        self.recs.append({"seq": len(self.recs), **kw})
        return len(self.recs) - 1

    def msg(self, role, content, **kw):
        if role in ("assistant", "tool") and "epoch" not in kw:
            kw["epoch"] = 0
        return self.add(type="message", role=role, content=content, **kw)

    def ev(self, name, **kw):
        return self.add(type="event", event=name, **kw)

    def ref(self, lo, hi):
        span = [r for r in self.recs if lo <= r["seq"] <= hi]
        return {"session_id": self.sid, "seqs": [r["seq"] for r in span if r["type"] == "message"],
                "digest": _dig(span)}

    def compact(self, chunks, prior="auto", lineage=None):
        if lineage is None:
            lineage = [self.ref(a, b) for a, b in chunks]
        if prior == "auto":
            prev = [r for r in self.recs if r.get("event") == "compact" and "lineage" in r]
            prior = {"seq": prev[-1]["seq"], "digest": _dig([prev[-1]])} if prev else None
        return self.ev("compact", summary="sum", lineage=lineage, prior=prior, model="m",
                       usage={"input_tokens": 1, "output_tokens": 1, "cost": None})

    def cum(self, new_chunks, prior="auto"):
        prev = [r for r in self.recs if r.get("event") == "compact" and "lineage" in r]
        base = prev[-1]["lineage"] if prev else []
        return self.compact([], prior=prior, lineage=base + [self.ref(a, b) for a, b in new_chunks])

    def write(self):
        p = self.d / "sessions" / f"{self.sid}.jsonl"
        p.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in self.recs))
        os.chmod(p, 0o600)
        return p


def audit(d, deep=True):
    from lecode_memctl.core.layout import store_at

    findings, _ = validate_store(store_at(d), deep=deep)
    return findings


def compact_codes(findings):
    return sorted((f.code, f.severity, f.reason) for f in findings if f.code.startswith("compact."))


def sixty(tmp_path):
    d = make_store(tmp_path)
    s = Session(d)
    for i in range(30):
        s.msg("user", f"u{i}")
        s.msg("assistant", f"a{i}")
    return d, s


# -- 1. a summary rebuilt after a clear, undo or forget ---------------------------------


@pytest.mark.parametrize("prior", ["previous", "null"])
def test_rebuilt_after_clear_is_no_error(tmp_path, prior):
    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    c = s.ev("clear")
    for i in range(6):
        s.msg("user", f"p{i}")
        s.msg("assistant", f"q{i}")
    s.compact([(c + 1, c + 4)], prior="auto" if prior == "previous" else None)
    s.write()
    found = audit(d)
    # the first summary is made inert by the later clear (info); the rebuilt one is fine
    assert compact_codes(found) == [("compact.inert", "info", "cleared")]
    assert [f.seq for f in found if f.code == "compact.inert"] == [61]


@pytest.mark.parametrize("prior", ["previous", "null"])
def test_rebuilt_after_undo_is_no_error(tmp_path, prior):
    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    u = s.ev("undo", target=[9, 10])
    for i in range(4):      # (four left raw: compact.few_raw)
        s.msg("user", f"p{i}")
        s.msg("assistant", f"q{i}")
    s.compact([(1, 8), (u + 1, u + 4)], prior="auto" if prior == "previous" else None)
    s.write()
    assert compact_codes(audit(d)) == [("compact.inert", "info", "undone")]


def test_rebuilt_after_forget_is_no_error(tmp_path):
    from lecode_memctl.core import open_project

    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    s.write()
    with open_project(store=d) as p:
        f = p.remember("x", p.sessions.source_snapshot("a", 3, 3).ref).fact
        p.forget(f.fact_id)
    s.msg("user", "after")
    s.msg("assistant", "gen 1", epoch=1)
    for i in range(2):      # (four left raw: compact.few_raw)
        s.msg("user", f"p{i}")
        s.msg("assistant", f"q{i}", epoch=1)
    s.compact([(62, 63)], prior=None)
    s.write()
    # the first summary is inert (its assistant messages' epoch 0, position 3 excluded)
    assert [c[:2] for c in compact_codes(audit(d))] == [("compact.inert", "info")]


def test_inert_predecessor_still_needs_a_valid_lineage(tmp_path):
    """The lineage of the rebuilt summary is checked on its own: ordered,
    disjoint, before the event."""
    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    c = s.ev("clear")
    for i in range(6):
        s.msg("user", f"p{i}")
        s.msg("assistant", f"q{i}")
    s.compact([(c + 5, c + 8), (c + 1, c + 4)], prior=None)
    s.write()
    assert ("compact.lineage_not_cumulative", "error", "overlap") in compact_codes(audit(d))


def test_a_predecessor_hidden_only_later_still_chains(tmp_path):
    """A predecessor hidden by a clear after the next event was written
    was not inert then: the next one had to be cumulative."""
    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    s.compact([(11, 20)], prior=None)
    s.ev("clear")
    s.write()
    codes = compact_codes(audit(d))
    assert ("compact.prior_mismatch", "error", None) in codes
    assert ("compact.lineage_not_cumulative", "error", "not_cumulative") in codes


# -- 3. a summary over positions already hidden when it was written --------------------


@pytest.mark.parametrize("how", ["clear", "undo"])
def test_summary_over_positions_hidden_before_it_is_an_error(tmp_path, how):
    d, s = sixty(tmp_path)
    if how == "clear":
        s.ev("clear")
    else:
        s.ev("undo", target=[5, 6])
    s.msg("user", "z")
    s.compact([(1, 10)])
    s.write()
    found = audit(d)
    reason = "cleared" if how == "clear" else "undone"
    assert compact_codes(found) == [("compact.lineage_stale", "error", reason)]


def test_summary_hidden_after_it_stays_inert(tmp_path):
    d, s = sixty(tmp_path)
    s.compact([(1, 10)])
    s.ev("undo", target=[5, 6])
    s.write()
    assert compact_codes(audit(d)) == [("compact.inert", "info", "undone")]


def test_undo_then_redo_before_the_summary_is_fine(tmp_path):
    d, s = sixty(tmp_path)
    s.ev("undo", target=[5, 6])
    s.ev("redo", target=[5, 6])
    s.compact([(1, 20)])
    s.write()
    assert compact_codes(audit(d)) == []


# -- 2. session.epoch_ahead past the last 64 KiB -----------------------------------------


def epoch_store(tmp_path, tail):
    """No facts database (generation 0): an assistant message with epoch 3, then ``tail``."""
    d = make_store(tmp_path)
    s = Session(d)
    s.msg("user", "hi")
    s.msg("assistant", "hello", epoch=3)
    tail(s)
    s.write()
    return d


def ahead(findings):
    return [(f.severity, f.seq) for f in findings if f.code == "session.epoch_ahead"]


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("tail", ["one_paste", "many_lines"])
def test_epoch_ahead_behind_a_long_tail(tmp_path, deep, tail):
    def paste(s):
        s.msg("user", "here is my log:\n" + "L" * 70000)

    def lines(s):
        for i in range(400):
            s.msg("user", f"{i} " + "y" * 300)

    d = epoch_store(tmp_path, paste if tail == "one_paste" else lines)
    assert ahead(audit(d, deep=deep)) == [("error", 2)]


@pytest.mark.parametrize("line_loop", [False, True])
def test_deep_takes_the_highest_epoch_of_the_whole_transcript(tmp_path, monkeypatch, line_loop):
    """--deep parses every line: an epoch ahead anywhere is found, even one
    followed by lower ones (which lecode never writes); in one call or line
    by line (a transcript over WHOLE_BYTES)."""
    from lecode_memctl.core.audit import transcripts as T

    if line_loop:
        monkeypatch.setattr(T, "WHOLE_BYTES", 4096)
    def tail(s):
        for i in range(400):
            s.msg("user", f"{i} " + "y" * 300)
        s.msg("assistant", "older", epoch=0)
        s.msg("user", "last")

    d = epoch_store(tmp_path, tail)
    assert ahead(audit(d, deep=True)) == [("error", 2)]


def test_default_mode_reads_back_to_the_last_generated_message_within_its_bound(tmp_path,
                                                                            monkeypatch):
    from lecode_memctl.core.audit import transcripts as T

    def tail(s):
        for i in range(400):
            s.msg("user", f"{i} " + "y" * 300)

    d = epoch_store(tmp_path, tail)
    monkeypatch.setattr(T, "EPOCH_BACK", 64 << 10)
    assert ahead(audit(d, deep=False)) == []          # past the bound: not looked for
    assert ahead(audit(d, deep=True)) == [("error", 2)]


# -- 4. --ignore GROUP.* (the group column of --list-codes, a finding's check) --------------


@pytest.mark.parametrize("group,prefix", [("compaction", "compact"), ("facts", "fact"),
                                          ("sessions", "session"), ("db", "db")])
def test_ignore_takes_a_group_or_a_code_prefix(group, prefix):
    from lecode_memctl.core.audit.codes import CODES, check_ignore_codes

    by_group = check_ignore_codes([f"{group}.*"])
    by_prefix = check_ignore_codes([f"{prefix}.*"])
    assert by_group == by_prefix == {c for c, i in CODES.items() if i.check == group}
    assert by_group


def test_ignore_group_through_the_cli(tmp_path):
    from .conftest import run_cli

    d, s = sixty(tmp_path)
    s.compact([(1, 10)])
    s.compact([(11, 20)], prior=None)    # not cumulative, prior null: two errors
    s.write()
    for ignore in ("compaction.*", "compact.*"):
        r = run_cli("--store", str(d), "validate", "--no-state", "--deep", "--ignore", ignore)
        assert r.exit_code == 0, (ignore, r.stdout, r.stderr)
    r = run_cli("--store", str(d), "validate", "--no-state", "--ignore", "nosuch.*")
    assert r.exit_code == 2 and "unknown finding code" in r.stderr


def test_completion_offers_the_groups_too():
    from lecode_memctl.cli.completion import complete_finding_code

    got = complete_finding_code("")
    assert {"compaction.*", "compact.*", "facts.*", "fact.*", "sessions.*"} <= set(got)
    assert len(got) == len(set(got))


# -- 5. --list-codes meanings and FORMAT.md's findings table agree -----------------------


def _format_rows():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "FORMAT.md").read_text()
    section = text[text.index("## Validate findings"):text.index("Notes on the checks:")]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z0-9_]+\.[a-z0-9_]+)`( \*\(deep\)\*)? \| ([^|]+) \| ([^|]+) \| (.*) \|$",
                     line)
        if m:
            rows[m.group(1)] = (m.group(2) is not None, m.group(3).strip(),
                                tuple(x.strip().strip("`") for x in m.group(4).split(",")),
                                m.group(5))
    return rows


def _words(text):
    import re

    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def test_every_code_has_one_row_that_says_what_list_codes_says():
    """The table's meaning is --list-codes' meaning, word for word (its
    backticks aside), and so are its severity, location and deep mark."""
    from lecode_memctl.core.audit.codes import CODES

    rows = _format_rows()
    assert set(rows) == set(CODES)
    for code, info in CODES.items():
        deep, severity, location, meaning = rows[code]
        assert deep == info.deep_only, code
        assert severity.split(" / ")[0] in (info.severity, "error"), code
        assert info.severity in severity, code
        assert location == info.location, code
        assert _words(meaning) == _words(info.meaning), code


# -- 6. one finding per failing revision ---------------------------------------------------


def _forgotten_beside(tmp_path):  # noqa: ANN001,ANN202
    """A store whose fact a cites 1..3 (user, assistant of epoch 0, user) and
    whose fact b, citing 3, is forgotten: (store, its Session, fact a)."""
    from lecode_memctl.core import open_project

    d = make_store(tmp_path)
    s = Session(d)
    s.msg("user", "u1")
    s.msg("assistant", "a2", epoch=0)
    s.msg("user", "u3")
    s.write()
    with open_project(store=d) as p:
        a = p.remember("fact a", p.sessions.source_snapshot("a", 1, 3).ref).fact
        b = p.remember("fact b", p.sessions.source_snapshot("a", 3, 3).ref).fact
        p.forget(b.fact_id)
    return d, s, a


def test_an_excluded_revision_hidden_otherwise_too_gets_the_one_finding_facts_shows(tmp_path):
    from .conftest import run_cli

    d, _s, a = _forgotten_beside(tmp_path)
    found = [(f.code, f.fact_id, f.revision, f.seq) for f in audit(d, deep=False)
             if f.code.startswith("fact.")]
    # position 3 excluded (the forget of b), position 2 hidden by its epoch 0
    # (the forget raised the generation to 1): one finding, the one `facts`
    # lists (hidden, epoch: position 2 is read first), naming the exclusion
    assert found == [("fact.hidden", a.fact_id, 1, 2)]
    (f,) = [f for f in audit(d, deep=False) if f.code.startswith("fact.")]
    assert f.reason == "epoch" and "a:3 is excluded by a forget too" in f.message, f.message
    r = run_cli("--store", str(d), "--no-state", "facts", "--format", "jsonl")
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [(x["status"], x["reason"]) for x in rows if x["fact_id"] == a.fact_id] == [
        ("hidden", "epoch")]


def test_an_excluded_revision_whose_evidence_changed_is_only_stale(tmp_path):
    d, s, a = _forgotten_beside(tmp_path)
    s.recs[1]["content"] = "u1 changed"
    s.write()
    found = [(f.code, f.fact_id, f.reason) for f in audit(d, deep=False)
             if f.code.startswith("fact.")]
    assert found == [("fact.stale", a.fact_id, "digest_mismatch")]


# -- 7. fact.stale's seq -------------------------------------------------------------------


@pytest.mark.parametrize("deep", [False, True])
def test_fact_stale_seq_is_null_where_the_table_says(tmp_path, deep):
    """Only the span's digest is stored: which record changed is not known
    (digest_mismatch), nor, for a corrupt line, which position it held
    (records_corrupt): seq is null for both, as the table says; a cited
    position that is no message (not_message) is named."""
    from lecode_memctl.core import open_project

    d = make_store(tmp_path)
    s = Session(d)
    for i in range(3):
        s.msg("user", f"u{i}")
        s.msg("assistant", f"a{i}")
    s.write()
    with open_project(store=d) as p:
        changed = p.remember("changed", p.sessions.source_snapshot("a", 1, 2).ref).fact
        corrupt = p.remember("corrupt", p.sessions.source_snapshot("a", 3, 4).ref).fact
        event = p.remember("event", p.sessions.source_snapshot("a", 5, 6).ref).fact
    s.recs[2]["content"] = "a0 changed"
    s.recs[6] = {"seq": 6, "type": "event", "event": "memory_usage", "purpose": "x",
                 "model": "m", "usage": None}
    p = s.write()
    lines = p.read_bytes().split(b"\n")
    lines[4] = b'{"seq": 4, oops'
    p.write_bytes(b"\n".join(lines))
    found = {f.fact_id: (f.code, f.reason, f.seq) for f in audit(d, deep=deep)
             if f.code.startswith("fact.")}
    assert found[changed.fact_id] == ("fact.stale", "digest_mismatch", None)
    assert found[corrupt.fact_id] == ("fact.stale", "records_corrupt", None)
    assert found[event.fact_id][:2] == ("fact.stale", "digest_mismatch")


def test_the_table_says_when_fact_stale_has_no_seq():
    (_deep, _sev, _loc, meaning) = _format_rows()["fact.stale"]
    assert "else null (a digest mismatch" in meaning


def test_summary_over_positions_undone_then_and_redone_later_is_an_error(tmp_path):
    """Visible now (a redo after it), but undone when the summary was
    written: lecode's recheck before the append would have refused it."""
    d, s = sixty(tmp_path)
    s.ev("undo", target=[5, 6])
    s.msg("user", "z")
    s.compact([(1, 10)])
    s.ev("redo", target=[5, 6])
    s.write()
    assert compact_codes(audit(d)) == [("compact.lineage_stale", "error", "undone")]


def test_a_carried_chunk_undone_between_two_summaries_is_an_error(tmp_path):
    d, s = sixty(tmp_path)
    s.cum([(1, 10)])
    s.ev("undo", target=[5, 6])
    s.ev("redo", target=[5, 6])
    s.cum([(11, 20)])
    s.ev("undo", target=[7, 7])
    s.cum([(21, 30)])
    s.write()
    found = [(f.code, f.reason, f.seq) for f in audit(d) if f.code.startswith("compact.")]
    assert found == [("compact.inert", "undone", 61),
                     ("compact.inert", "undone", 64),
                     ("compact.lineage_stale", "undone", 66)]


def test_the_dating_of_a_chunk_is_the_visibility_of_the_events_before():
    """_Before.hidden (the events touching a chunk, answers kept) says what
    UndoState of every undo, redo and clear before the seq says."""
    from hypothesis import given, settings, strategies as st

    from lecode_memctl.core.audit.transcripts import _Before
    from lecode_memctl.core.sessions import UndoState

    event = st.tuples(st.sampled_from(["undo", "redo", "clear"]), st.integers(0, 30),
                      st.integers(0, 30))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(event, max_size=12), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)),
                                                   min_size=1, max_size=6),
           st.sampled_from(["working", "durable"]))
    def check(evs, chunks, purpose):
        events = []
        for i, (name, a, b) in enumerate(evs):
            ev = {"seq": 40 + 3 * i, "type": "event", "event": name}
            if name != "clear":
                ev["target"] = [min(a, b), max(a, b)]
            events.append(ev)
        b = _Before(events, purpose)
        for at in range(38, 40 + 3 * len(evs) + 2):
            us = UndoState(e for e in events if e["seq"] < at)
            for lo, w in chunks:
                seqs = tuple(range(lo, lo + w + 1))
                want = None
                if any(us.state(p) == "undo" for p in seqs):
                    want = "undone"
                elif purpose == "working" and us.clear_seq is not None and lo < us.clear_seq:
                    want = "cleared"
                assert b.hidden(seqs, at, ("k", lo, w)) == want, (evs, seqs, at)

    check()


def test_a_legacy_transcript_is_not_read_back_16_mib(tmp_path):
    """A code review: default validate read back up to 16 MiB of every
    transcript whose generated messages carry no epoch (written before
    epochs), about 240 times what it read before: the last generated
    message stops the read-back, with an epoch or not."""
    import orjson as oj

    d = make_store(tmp_path)
    sd = d / "sessions"
    sd.mkdir(parents=True, exist_ok=True)
    hdr = {"seq": 0, "type": "session", "format": 1, "session_id": "old", "project": SLUG,
           "created": "2026-01-01T00:00:00Z"}
    lines = [oj.dumps(hdr)]
    pad = "x" * 1000
    for i in range(1, 3001):
        role = "user" if i % 2 else "assistant"
        lines.append(oj.dumps({"seq": i, "type": "message", "role": role, "content": pad}))
    (sd / "old.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    from lecode_memctl.core.layout import store_given

    findings, summary = validate_store(store_given(d))
    assert summary.bytes_read < 1 << 20, summary.bytes_read     # (3 MB transcript)
    assert not [f for f in findings if f.code.startswith("session.")], findings


def test_has_generated_answers_a_window_of_user_lines_by_its_bytes(monkeypatch):
    """A code review: a read-back through user lines only parsed each of
    them (about 10x the time of before); such a window is answered by a
    search of its bytes, no line parsed."""
    from lecode_memctl.core.audit import transcripts as T

    window = b"".join(b'{"seq":%d,"type":"message","role":"user","content":"x"}\n' % i
                      for i in range(1, 200))
    calls = []
    real = T.orjson.loads
    monkeypatch.setattr(T.orjson, "loads", lambda b: calls.append(1) or real(b))
    assert T._has_generated(window) is False and calls == []
    assert T._has_generated(window + b'{"seq":200,"type":"message","role":"assistant"}\n')
