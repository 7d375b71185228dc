"""``memctl grep``: fields, visibility, options, output, bad input, read-only."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli, tree_hash


@pytest.fixture
def store(tmp_path) -> Path:
    """A store built with the core's writers: a tool call and its result, a
    compaction, an undone pair, a forgotten fact's evidence, a clear."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(tmp_path / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T10:00:00Z") as w:
        w.append_message("user", "please deploy the widget")                        # 1
        w.append_message("assistant", "", epoch=0, tool_calls=[
            {"id": "c1", "name": "shell", "arguments": {"cmd": "make deploy WIDGET=1"}}])  # 2
        w.append_message("tool", "deploy ok\nwidget v2 live\nbye", tool_call_id="c1",
                         name="shell", epoch=0)                                      # 3
        w.append_message("user", [{"type": "text", "text": "secret plan: widget"},
                                  {"type": "binary", "media_type": "image/png", "data": "d2lkZ2V0"}])  # 4
        # (its lineage the user's message alone: 2 and 3, generated at epoch 0,
        # are below the generation the forget below advances to, and would
        # make it inert)
        w.append_event("compact", summary="The widget was deployed.",
                       lineage=[{"session_id": "s1", "seqs": [1],
                                 "digest": canonical_digest(sessions.records("s1", 1, 1))}],
                       prior=None, model="m", usage=None)                            # 5
        a = w.append_message("user", "undo this widget talk")                       # 6
        w.append_event("undo", target=[a, a])                                       # 7
    with sessions.create("s2", created="2026-06-01T10:00:00Z") as w:
        w.append_message("user", "forget the widget colour: blue")                  # 1
        w.append_message("user", "WIDGET size is 3")                                # 2
        w.append_event("clear")                                                     # 3
        w.append_message("user", "after the clear, widget again", ts="2026-06-02T00:00:00Z")  # 4
    ref = SourceRef("s2", (1,), canonical_digest(sessions.records("s2", 1, 1)))
    fid = facts.add("The widget colour is blue.", ref=ref).fact.fact_id
    facts.forget(fid)
    facts.close()
    return st.path


def grep(store: Path, *args: str):
    return run_cli("--store", str(store), "grep", *args)


def test_fields_roles_and_paths(store):
    r = grep(store, "widget", "--include-hidden", "--purpose", "durable", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    got = {(h["session_id"], h["seq"], h["role"], h["path"], h["line_no"]) for h in doc["hits"]}
    assert got == {
        ("s1", 1, "user", "$.content", 1),
        ("s1", 3, "tool", "$.content", 2),
        ("s1", 4, "user", "$.content[0].text", 1),
        ("s1", 5, "summary", "$.summary", 1),
        ("s1", 6, "user", "$.content", 1),
        ("s2", 1, "user", "$.content", 1),
        ("s2", 4, "user", "$.content", 1),
    }
    # binary data ("d2lkZ2V0" is base64 of "widget") and tool names are not searched
    assert all(h["match"] == "widget" for h in doc["hits"])


def test_tool_call_arguments_and_case(store):
    r = grep(store, "-i", "widget=", "--include-hidden", "--json")
    doc = orjson.loads(r.stdout_bytes)
    assert [(h["seq"], h["role"], h["path"]) for h in doc["hits"]] == [
        (2, "assistant", "$.tool_calls[0].arguments.cmd")]
    assert grep(store, "widget=", "--include-hidden").exit_code == 1   # case matters without -i


def test_visibility_default_and_forensic_labels(store):
    r = grep(store, "widget", "--json")
    seen = {(h["session_id"], h["seq"]) for h in orjson.loads(r.stdout_bytes)["hits"]}
    # s1:6 undone; s2:1 excluded by the forget (and before the clear); s1:2-3
    # generated at epoch 0, below the generation the forget advanced to 1
    assert seen == {("s1", 1), ("s1", 4), ("s1", 5), ("s2", 4)}
    r = grep(store, "widget", "--include-hidden", "--json")
    reasons = {(h["session_id"], h["seq"]): h["hidden_reason"]
               for h in orjson.loads(r.stdout_bytes)["hits"]}
    assert reasons[("s1", 6)] == "undone"
    assert reasons[("s2", 1)] == "excluded"
    assert reasons[("s1", 3)] == "epoch"
    assert reasons[("s1", 1)] is None
    human = grep(store, "widget", "--include-hidden")
    assert "s1:6 user $.content [hidden: undone]: undo this widget talk" in human.stdout
    # durable ignores the clear: s2:2 (WIDGET, -i) visible only then
    assert grep(store, "-i", "widget size", "--session", "s2").exit_code == 1
    assert grep(store, "-i", "widget size", "--session", "s2", "--purpose", "durable").exit_code == 0


def test_count_list_limit_context_session_role_time(store):
    r = grep(store, "widget", "-c")
    assert r.stdout == "s1:3\ns2:1\n"
    r = grep(store, "widget", "-l", "--include-hidden")
    assert r.stdout == "s1\ns2\n"
    r = grep(store, "widget", "--limit", "2", "--json")
    doc = orjson.loads(r.stdout_bytes)
    assert doc["count"] == 2 and doc["truncated"] is True
    r = grep(store, "v2", "-C", "1", "--include-hidden", "--json")
    (hit,) = orjson.loads(r.stdout_bytes)["hits"]
    assert (hit["before"], hit["line"], hit["after"]) == (["deploy ok"], "widget v2 live", ["bye"])
    assert grep(store, "widget", "--role", "summary", "-c").stdout == "s1:1\n"
    r = grep(store, "widget", "--since", "2026-06-02", "-c")
    assert r.stdout == "s2:1\n"          # only the record with its own ts after that date
    r = grep(store, "widget", "--until", "2026-05-02", "-c")
    assert r.stdout == "s1:3\n"
    r = grep(store, "widget", "--format", "jsonl")
    rows = [orjson.loads(x) for x in r.stdout_bytes.splitlines()]
    assert len(rows) == 4 and all(x["type"] == "match" and "path" in x for x in rows)


def test_since_and_until_are_the_other_commands_when(store):
    """grep's --since/--until take what facts, sessions and usage take (a
    date, an RFC 3339 time, an age such as 7d), and --until is "at or
    before", a date the end of that day; before 2026-12-07 an age was exit
    2 and --until was "before" (a date its first moment)."""
    assert grep(store, "widget", "--since", "1000w", "-c").stdout == \
        grep(store, "widget", "-c").stdout
    assert grep(store, "widget", "--since", "1d", "-c").exit_code == 1   # (all from May, June)
    # s1's records are from its header's created, 2026-05-01T10:00:00Z
    assert grep(store, "widget", "--until", "2026-05-01", "-c").stdout == "s1:3\n"
    # s2's last record has its own ts, 2026-06-02T00:00:00Z: at WHEN is in
    r = grep(store, "widget", "--since", "2026-06-01T12:00:00Z", "--until",
             "2026-06-02T00:00:00Z", "-c")
    assert r.stdout == "s2:1\n", r.stdout + r.stderr
    bad = grep(store, "widget", "--until", "soon")
    assert bad.exit_code == 2 and "--until 'soon'" in bad.stderr and "7d" in bad.stderr


def test_offset_pages_the_hits_in_every_format(store):
    """--offset/--limit work in every format (issue 12.2)."""
    every = [orjson.loads(x) for x in grep(store, "widget", "--format", "jsonl")
             .stdout_bytes.splitlines()]
    assert len(every) == 4
    r = grep(store, "widget", "--offset", "1", "--limit", "2", "--format", "jsonl")
    assert [orjson.loads(x) for x in r.stdout_bytes.splitlines()] == every[1:3]
    doc = orjson.loads(grep(store, "widget", "--offset", "3", "--json").stdout_bytes)
    assert doc["hits"] == every[3:] and doc["count"] == 1 and doc["offset"] == 3
    assert doc["truncated"] is False
    r = grep(store, "widget", "--offset", "2", "--format", "csv")
    assert len(r.stdout.splitlines()) == 1 + 2
    human = grep(store, "widget").stdout.splitlines()
    assert grep(store, "widget", "--offset", "2").stdout.splitlines() == human[2:]
    assert grep(store, "widget", "--offset", "3", "-c").stdout == "s2:1\n"
    assert grep(store, "widget", "--offset", "-1").exit_code == 2


def test_json_has_one_shape_whatever_the_options(store):
    """-c and -l change what a person reads, not the --json document's shape;
    JSONL lines are typed rows (match, or match_count with -c/-l)."""
    from lecode_memctl.core.rowmodel import MATCH, MATCH_COUNT, SCHEMA_VERSION

    docs = {opt: orjson.loads(grep(store, "widget", *opt, "--json").stdout_bytes)
            for opt in ((), ("-c",), ("-l",))}
    keys = {tuple(d) for d in docs.values()}
    assert len(keys) == 1, keys
    plain = docs[()]
    assert plain["type"] == "grep" and plain["schema_version"] == SCHEMA_VERSION
    assert plain["limit"] is None and plain["count"] == 4
    assert [list(h) for h in plain["hits"]] == [MATCH.names] * 4
    counts = [{"type": "match_count", "session_id": "s1", "count": 3},
              {"type": "match_count", "session_id": "s2", "count": 1}]
    for d in docs.values():
        assert d["sessions"] == counts
    assert docs[("-c",)]["hits"] == [] == docs[("-l",)]["hits"]
    for opt in ("-c", "-l"):
        lines = [orjson.loads(x) for x in grep(store, "widget", opt, "--format", "jsonl")
                 .stdout_bytes.splitlines()]
        assert lines == counts and all(list(x) == MATCH_COUNT.names for x in lines)
    csv_text = grep(store, "widget", "-c", "--format", "csv").stdout
    assert csv_text == "type,session_id,count\nmatch_count,s1,3\nmatch_count,s2,1\n"


@pytest.mark.parametrize("args,code", [
    (["("], 2),                           # bad regex
    (["x", "--role", "robot"], 2),
    (["x", "--purpose", "fun"], 2),
    (["x", "--since", "yesterday"], 2),
    (["x", "--session", "../etc"], 2),
    (["x", "--session", "nope"], 3),
    (["x", "--format", "yaml"], 2),
    (["\udcff"], 2),                      # an undecodable byte on the command line
])
def test_bad_input(store, args, code):
    r = grep(store, *args)
    assert r.exit_code == code, r.stderr
    assert r.stderr.startswith("memctl: error: ") and "Traceback" not in r.stderr


def test_reads_only(store):
    before = tree_hash(store)
    for args in (["widget", "--include-hidden"], ["-c", "."], ["nothing-matches"]):
        grep(store, *args)
    assert tree_hash(store) == before


def test_refused_session_is_skipped_and_listed(store):
    (store / "sessions" / "other.jsonl").write_bytes(
        b'{"seq":0,"type":"session","format":1,"session_id":"other","project":"elsewhere",'
        b'"created":"2026-01-01T00:00:00Z"}\n'
        b'{"seq":1,"type":"message","role":"user","content":"widget"}\n')
    r = grep(store, "widget", "-l")
    assert "other" not in r.stdout.split()
    assert "session other skipped" in r.stderr


def test_huge_line_is_cut_around_the_match(store):
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    with SessionStore(store_at(store)).writer("s2") as w:
        w.append_message("user", "a" * (3 << 20) + " needle " + "b" * (1 << 20))
    r = grep(store, "needle", "--json")
    (hit,) = orjson.loads(r.stdout_bytes)["hits"]
    assert hit["match"] == "needle" and len(hit["line"]) <= 500


def test_another_applications_database_is_a_clear_error(store):
    import sqlite3

    db = store / "facts.sqlite3"
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = tree_hash(store)
    r = grep(store, "widget")
    assert r.exit_code == 5 and r.stderr.startswith("memctl: error: ")
    assert tree_hash(store) == before


def test_completion_roles_are_the_cores():
    """Completion keeps its own copy of the roles so a TAB imports nothing of the core."""
    from lecode_memctl.cli.completion import GREP_ROLES as completed
    from lecode_memctl.core.grep import GREP_ROLES

    assert tuple(completed) == tuple(GREP_ROLES)


@pytest.mark.parametrize("value", ["'abc'", "x'00ff'", "-1"])
def test_an_unreadable_generation_is_store_corrupt_not_no_match(store, value):
    """meta.generation 'abc' (or a BLOB): no session's visibility can be
    decided, so grep fails with exit 5 like facts, read and validate, instead
    of skipping every session and exiting 1 ("no match")."""
    import sqlite3

    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute(f"UPDATE meta SET value = {value} WHERE key = 'generation'")
    db.commit()
    db.close()
    before = tree_hash(store)
    for args in (["widget"], ["widget", "--json"], ["widget", "-c"]):
        r = grep(store, *args)
        assert r.exit_code == 5, (args, r.exit_code, r.stderr)
        assert "generation" in r.stderr and "skipped" not in r.stderr
    assert tree_hash(store) == before


def test_a_record_with_seq_twice_is_no_hit(store):
    """A line that begins {"seq":M, and whose parse keeps another seq ("seq"
    written twice) is a corrupt line to every reader
    (sessions.seq_given_twice): grep, which gave it as a message at the
    last seq, passes over it as it passes over any corrupt line."""
    path = store / "sessions" / "s2.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert lines[2].startswith(b'{"seq":2,')
    lines[2] = b'{"seq":1,' + lines[2][len(b'{"seq":2,'):-1] + b',"seq":2}'
    path.write_bytes(b"\n".join(lines))
    r = grep(store, "size is", "--include-hidden", "--json")
    # (no hit; the line could hold one and was not searched: exit 5 since
    # 2026-12-07, "damaged" names it)
    assert r.exit_code == 5, (r.exit_code, r.stdout, r.stderr)
    assert orjson.loads(r.stdout_bytes)["damaged"] == [
        {"session_id": "s2", "reason": "no_seq", "lines": 1, "first_line": 3}]
    same = b'{"seq":2,' + lines[2][len(b'{"seq":1,'):]     # the key twice, the same seq
    lines[2] = same
    path.write_bytes(b"\n".join(lines))
    r = grep(store, "size is", "--include-hidden", "--json")
    assert r.exit_code == 0 and '"seq":2' in r.stdout, (r.exit_code, r.stdout, r.stderr)


def test_a_record_with_a_negative_seq_is_no_hit(store):
    """{"seq":-1,...} is a corrupt line (no_seq) to the readers and to
    validate --deep; grep gave it as a visible hit at seq -1."""
    path = store / "sessions" / "s1.jsonl"
    path.write_bytes(path.read_bytes()
                     + b'{"seq":-1,"type":"message","role":"user","content":"minus widget"}\n')
    r = grep(store, "minus", "--include-hidden", "--json")
    assert r.exit_code == 5, (r.exit_code, r.stdout, r.stderr)     # (1 before 2026-12-07)
    assert [d["reason"] for d in orjson.loads(r.stdout_bytes)["damaged"]] == ["no_seq"]


# ---------------------------------------------------------------- --json, streamed

GREP_HEAD = ["type", "schema_version", "pattern", "offset", "limit"]
GREP_TAIL = ["truncated", "count", "sessions_searched", "skipped", "damaged", "sessions"]


def test_json_hits_are_written_while_the_search_runs(store, monkeypatch):
    """grep --json streams its hits (docs/OUTPUT.md: the machine formats give
    every row in constant memory): each hit is on stdout before the search
    is over, and only what is known at the end (the counts) comes after.
    The whole document was built in memory and written at the end: 365 MB
    for 240,000 hits."""
    import sys

    from lecode_memctl.core import grep as core

    real = core.GrepRun.hits
    at_end: list[bytes] = []

    def hits(self):  # noqa: ANN001,ANN202
        yield from real(self)
        at_end.append(sys.stdout.buffer.getvalue())     # the search is over

    monkeypatch.setattr(core.GrepRun, "hits", hits)
    r = grep(store, "widget", "--include-hidden", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    (written,) = at_end
    assert len(doc["hits"]) == 7
    assert written.count(b'"type":"match"') == 7, written
    assert b'"count"' not in written and r.stdout_bytes.startswith(written)


def test_json_members_come_in_the_documented_order(store):
    """The head (known before the search), the hits, then what only the end
    of the search knows -- with -c and -l too (hits empty)."""
    for opt in ((), ("-c",), ("-l",), ("--limit", "1")):
        doc = orjson.loads(grep(store, "widget", *opt, "--json").stdout_bytes)
        assert list(doc) == [*GREP_HEAD, "hits", *GREP_TAIL], opt


# the members other than hits, as memctl printed them before --json streamed
# (captured from the commit before; the hits are the --format jsonl rows)
BEFORE = [
    (["widget"], 0, {"offset": 0, "limit": None, "truncated": False, "count": 4,
                     "sessions_searched": 2, "sessions": {"s1": 3, "s2": 1}}),
    (["widget", "--include-hidden", "-C", "1"], 0,
     {"offset": 0, "limit": None, "truncated": False, "count": 7, "sessions_searched": 2,
      "sessions": {"s1": 5, "s2": 2}}),
    (["widget", "--limit", "2"], 0, {"offset": 0, "limit": 2, "truncated": True, "count": 2,
                                     "sessions_searched": 1, "sessions": {"s1": 2}}),
    (["widget", "--offset", "1", "--limit", "2"], 0,
     {"offset": 1, "limit": 2, "truncated": True, "count": 2, "sessions_searched": 2,
      "sessions": {"s1": 2}}),
    (["widget", "--limit", "4"], 0, {"offset": 0, "limit": 4, "truncated": False, "count": 4,
                                     "sessions_searched": 2, "sessions": {"s1": 3, "s2": 1}}),
    (["widget", "--limit", "3", "--include-hidden"], 0,
     {"offset": 0, "limit": 3, "truncated": True, "count": 3, "sessions_searched": 1,
      "sessions": {"s1": 3}}),
    (["widget", "-c"], 0, {"offset": 0, "limit": None, "truncated": False, "count": 4,
                           "sessions_searched": 2, "sessions": {"s1": 3, "s2": 1}}),
    (["widget", "-l", "--offset", "3"], 0,
     {"offset": 3, "limit": None, "truncated": False, "count": 1, "sessions_searched": 2,
      "sessions": {"s2": 1}}),
    (["nothing-here"], 1, {"offset": 0, "limit": None, "truncated": False, "count": 0,
                           "sessions_searched": 2, "sessions": {}}),
    (["widget", "--offset", "10"], 0, {"offset": 10, "limit": None, "truncated": False,
                                       "count": 0, "sessions_searched": 2, "sessions": {}}),
]


@pytest.mark.parametrize(("args", "code", "members"), BEFORE, ids=[" ".join(a) for a, _c, _m in BEFORE])
def test_json_document_is_the_one_printed_before_it_streamed(store, args, code, members):
    """Streaming moved members, it changed no value: --limit, --offset,
    truncated, count, sessions_searched, sessions and the exit status are
    what they were."""
    r = grep(store, *args, "--json")
    assert r.exit_code == code, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    by_session = "-c" in args or "-l" in args
    rows = [] if by_session else [
        orjson.loads(x) for x in grep(store, *args, "--format", "jsonl").stdout_bytes.splitlines()]
    sessions = [{"type": "match_count", "session_id": s, "count": n}
                for s, n in members["sessions"].items()]
    assert doc == {"type": "grep", "schema_version": 3, "pattern": args[0], **members,
                   "skipped": [], "damaged": [], "sessions": sessions, "hits": rows}


def _failing_session(monkeypatch, sid: str, make) -> None:  # noqa: ANN001
    from lecode_memctl.core import grep as core

    real = core.GrepRun._session

    def session(self, sessions, session_id):  # noqa: ANN001,ANN202
        if session_id == sid:
            raise make()
        yield from real(self, sessions, session_id)

    monkeypatch.setattr(core.GrepRun, "_session", session)


def _raw_sqlite_error() -> Exception:
    import sqlite3

    return sqlite3.OperationalError("no such table: exclusions")


def _store_corrupt() -> Exception:
    from lecode_memctl.core.errors import StoreCorrupt

    return StoreCorrupt("facts database: a page cannot be read (test)")


@pytest.mark.parametrize(("make", "code", "status", "message"), [
    (_store_corrupt, "store_corrupt", 5, "facts database: a page cannot be read (test)"),
    (_raw_sqlite_error, "store_corrupt", 5, "database error: no such table: exclusions"),
    (lambda: PermissionError(13, "Permission denied", "/x/sessions/s2.jsonl"), "store_corrupt", 5,
     "/x/sessions/s2.jsonl: Permission denied"),
    (lambda: RuntimeError("a bug (test)"), "internal", 70, "internal error: RuntimeError: a bug (test)"),
], ids=["memctl", "sqlite", "oserror", "internal"])
def test_an_error_after_the_first_hit_ends_the_json_document(store, monkeypatch, make, code,
                                                             status, message):
    """Once hits are written, an error ends the grep document as valid JSON
    with the error main reports (as facts --json does): the hits before it,
    null for what the end of the search would have said, and no second
    document."""
    _failing_session(monkeypatch, "s2", make)
    r = grep(store, "widget", "--json")
    assert r.exit_code == status, r.stderr
    doc = orjson.loads(r.stdout_bytes)    # exactly one document
    assert doc["type"] == "grep" and [h["session_id"] for h in doc["hits"]] == ["s1"] * 3
    assert {k: doc[k] for k in GREP_TAIL} == dict.fromkeys(GREP_TAIL)
    assert doc["error"] == {"code": code, "message": message, "exit_code": status}
    assert list(doc) == [*GREP_HEAD, "hits", *GREP_TAIL, "error"]
    assert r.stderr == f"memctl: error: {message}\n"


def test_an_interrupt_after_the_first_hit_ends_the_json_document(store, monkeypatch):
    _failing_session(monkeypatch, "s2", KeyboardInterrupt)
    r = grep(store, "widget", "--json")
    assert r.exit_code == 130, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["type"] == "grep" and len(doc["hits"]) == 3
    assert doc["error"] == {"code": "interrupted", "message": "interrupted", "exit_code": 130}
    assert r.stderr == "memctl: error: interrupted\n"


@pytest.mark.parametrize("opt", [(), ("-c",)])
def test_an_error_before_any_hit_is_the_usual_error_document(store, monkeypatch, opt):
    """Nothing of the grep document is written before the first hit: an error
    before it (the first session's, a usage error found by the search) is
    main's error document, as it was."""
    _failing_session(monkeypatch, "s1", _store_corrupt)
    r = grep(store, "widget", *opt, "--json")
    assert r.exit_code == 5, r.stderr
    assert orjson.loads(r.stdout_bytes) == {
        "type": "error", "error": {"code": "store_corrupt", "exit_code": 5,
                                   "message": "facts database: a page cannot be read (test)"}}
    r = grep(store, "widget", "--role", "robot", "--json")
    assert r.exit_code == 2 and orjson.loads(r.stdout_bytes)["type"] == "error"


def _big_store(root: Path, sessions: int, messages: int) -> Path:
    """A store whose every message holds 'needle' (written directly: fast)."""
    store = root / "bigstore"
    (store / "sessions").mkdir(parents=True, mode=0o700)
    store.chmod(0o700)
    for s in range(sessions):
        sid = f"s{s:05d}"
        lines = [orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                               "project": store.name, "created": "2026-01-01T00:00:00Z"})]
        lines += [orjson.dumps({"seq": i, "type": "message", "role": "user",
                                "content": f"message {i} with a needle in it"})
                  for i in range(1, messages + 1)]
        (store / "sessions" / f"{sid}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return store


def _peak_rss_kib(argv: list[str]) -> tuple[int, int]:
    """(exit status, peak RSS in KiB) of ``python -m lecode_memctl ARGV``,
    stdout to /dev/null, measured by a wrapper of its own."""
    import os
    import subprocess
    import sys

    from .conftest import REPO

    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "lecode_memctl", *argv],
                       capture_output=True, text=True, env=env, timeout=120)
    status, peak = p.stdout.split()
    return int(status), int(peak)


@pytest.mark.heavy
def test_json_memory_does_not_grow_with_the_hits(tmp_path):
    """30,000 hits: grep --json's peak RSS is that of grep -c --json (which
    keeps only the counts per session), not 40 MB more."""
    store = _big_store(tmp_path, 100, 300)
    status, counted = _peak_rss_kib(["--store", str(store), "grep", "needle", "-c", "--json"])
    assert status == 0
    status, listed = _peak_rss_kib(["--store", str(store), "grep", "needle", "--json"])
    assert status == 0
    assert listed < counted + 10 * 1024, (listed, counted)


def test_a_role_with_a_newline_cannot_forge_a_hit_line(store):
    """grep's text output printed a message's ``role`` (any string a
    transcript holds) raw: ``user<newline>s1:1 user $.content: FORGED``
    printed a second, forged hit.  It is escaped (``\\n``, ``\\t``) as the
    JSON path and the line already were."""
    forged = "user\ns1:1 user $.content: FORGED\tx"
    with open(store / "sessions" / "s2.jsonl", "ab") as fh:
        fh.write(orjson.dumps({"seq": 5, "type": "message", "role": forged,
                               "content": "zebra needle"}) + b"\n")
    r = grep(store, "zebra")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "s2:5 user\\ns1:1 user $.content: FORGED\\tx $.content: zebra needle"]
    doc = orjson.loads(grep(store, "zebra", "--json").stdout)
    assert [h["role"] for h in doc["hits"]] == [forged]


def _summary_store(tmp_path):  # noqa: ANN202
    """A new store, its writers, and a maker of a lineage chunk (session,
    first, last) with the digest of what the session holds there."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import canonical_digest

    st = store_at(tmp_path / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)

    def chunk(sid: str, lo: int, hi: int) -> dict:
        return {"session_id": sid, "seqs": list(range(lo, hi + 1)),
                "digest": canonical_digest(sessions.records(sid, lo, hi))}

    return st, facts, sessions, chunk


def test_a_summary_the_agent_does_not_use_is_hidden_as_validate_says(tmp_path):
    """A compaction summary is visible only where lecode would use it: one
    that ``validate --deep`` reports (``compact.*``: no lineage, a lineage
    chunk stale or hidden, a prior that does not match) is hidden,
    ``inert``, whatever made it so; grep reported all of them visible."""
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st, facts, sessions, chunk = _summary_store(tmp_path)

    with sessions.create("s1") as w:
        w.append_message("user", "u1")                                              # 1
        w.append_message("user", "u2")                                              # 2
        first = chunk("s1", 1, 2)
        w.append_event("compact", summary="GOOD summary", lineage=[first],
                       prior=None, model="m", usage=None)                           # 3
        w.append_event("compact", summary="LEGACY summary", model="m", usage=None)  # 4
        w.append_message("user", "u5")                                              # 5
        w.append_event("compact", summary="PRIOR summary",
                       lineage=[first, chunk("s1", 5, 5)],
                       prior={"seq": 3, "digest": "0" * 64}, model="m", usage=None)  # 6
    with sessions.create("s2") as w:
        w.append_message("user", "v1")                                              # 1
        w.append_event("compact", summary="STALE summary",
                       lineage=[{"session_id": "s2", "seqs": [1], "digest": "1" * 64}],
                       prior=None, model="m", usage=None)                           # 2
    with sessions.create("s3") as w:
        w.append_message("user", "x1")                                              # 1
        w.append_message("assistant", "x2", epoch=0)                                # 2
        w.append_event("compact", summary="EPOCH summary", lineage=[chunk("s3", 1, 2)],
                       prior=None, model="m", usage=None)                           # 3
        w.append_message("user", "keep me")                                         # 4
    ref = SourceRef("s3", (4,), canonical_digest(sessions.records("s3", 4, 4)))
    facts.add("unrelated", ref=SourceRef("s1", (5,), canonical_digest(sessions.records("s1", 5, 5))))
    facts.forget(facts.add("keep me", ref=ref).fact.fact_id)   # the generation goes to 1
    facts.close()
    before = tree_hash(st.path)

    r = run_cli("--store", str(st.path), "validate", "--deep", "--format", "jsonl")
    # (compact.boundary and compact.few_raw, a cutoff made against the
    # design's rule, do not make a summary unused: these leave no message raw)
    flagged = {(f["session_id"], f["seq"]) for f in map(orjson.loads, r.stdout.splitlines())
               if f.get("type") == "finding" and f["code"].startswith("compact.")
               and f["code"] not in ("compact.boundary", "compact.few_raw")}
    assert flagged == {("s1", 4), ("s1", 6), ("s2", 2), ("s3", 3)}
    assert {(f["session_id"], f["seq"]) for f in map(orjson.loads, r.stdout.splitlines())
            if f.get("code") == "compact.few_raw"} >= {("s1", 3)}

    r = grep(st.path, "summary", "--role", "summary", "--include-hidden", "--json")
    assert r.exit_code == 0, r.stderr
    hits = {(h["session_id"], h["seq"]): h["hidden_reason"]
            for h in orjson.loads(r.stdout_bytes)["hits"]}
    assert hits == {("s1", 3): None, ("s1", 4): "inert", ("s1", 6): "inert",
                    ("s2", 2): "inert", ("s3", 3): "inert"}
    r = grep(st.path, "summary", "--json")
    assert [(h["session_id"], h["seq"]) for h in orjson.loads(r.stdout_bytes)["hits"]] == [("s1", 3)]
    r = grep(st.path, "summary", "--purpose", "durable", "--json")
    assert [(h["session_id"], h["seq"]) for h in orjson.loads(r.stdout_bytes)["hits"]] == [("s1", 3)]
    assert tree_hash(st.path) == before


def test_a_summary_is_judged_for_the_purpose_searched(tmp_path):
    """For --purpose durable a clear hides nothing, in a summary's lineage as
    in a message: a summary inert only through a clear is visible there, and
    one whose lineage also holds a message hidden for another reason (an
    epoch) is not, whichever of its chunks comes first (the audit names
    the first hidden chunk's reason, cleared here)."""
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st, facts, sessions, chunk = _summary_store(tmp_path)

    with sessions.create("mixed") as w:
        w.append_message("user", "u1")                                              # 1
        w.append_event("clear")                                                     # 2
        w.append_message("assistant", "a3", epoch=0)                                # 3
        w.append_event("compact", summary="MIXED summary",
                       lineage=[chunk("mixed", 1, 1), chunk("mixed", 3, 3)],
                       prior=None, model="m", usage=None)                           # 4
    with sessions.create("cleared") as w:
        w.append_message("user", "v1")                                              # 1
        w.append_event("clear")                                                     # 2
        w.append_event("compact", summary="CLEARED summary",
                       lineage=[chunk("cleared", 1, 1)], prior=None, model="m", usage=None)  # 3
    with sessions.create("other") as w:
        w.append_message("user", "forget me")
    ref = SourceRef("other", (1,), canonical_digest(sessions.records("other", 1, 1)))
    facts.forget(facts.add("forget me", ref=ref).fact.fact_id)   # generation 1: a3 is stale
    facts.close()

    def hidden(purpose: str) -> dict:
        r = grep(st.path, "summary", "--purpose", purpose, "--include-hidden", "--json")
        return {h["session_id"]: h["hidden_reason"] for h in orjson.loads(r.stdout_bytes)["hits"]}

    assert hidden("working") == {"mixed": "inert", "cleared": "inert"}
    assert hidden("durable") == {"mixed": "inert", "cleared": None}


@pytest.fixture
def spans(store) -> Path:
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    with SessionStore(store_at(store)).create("t-span") as w:
        w.append_message("user", "ctx0\nctx1\n" + "q" * 1000 + "SPANA\nSPANB tail\nctx4\nctx5")
        w.append_message("user", "A1\nB1\nmid\nA2\nB2")
    return store


def _span_hits(store: Path, *args: str) -> list[dict]:
    r = grep(store, *args, "--session", "t-span", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [orjson.loads(x) for x in r.stdout.splitlines()]


def test_a_match_spanning_lines_is_found_beside_others_and_shown_as_any_hit(spans):
    """FORMAT.md: a hit is one line of a field holding a match, a match
    spanning lines reported at its first line.  Each line was searched
    alone and the field only when no line matched: a spanning match beside
    another hit was lost, only the first spanning one was found, and it had
    no context and no cut, its end the line's."""
    hits = _span_hits(spans, "A1\\nB1|mid")
    assert [(h["seq"], h["line_no"]) for h in hits] == [(2, 1), (2, 3)], hits
    hits = _span_hits(spans, "A\\d\\nB\\d")
    assert [(h["line_no"], h["match"]) for h in hits] == [(1, "A1"), (4, "A2")], hits
    (h,) = _span_hits(spans, "SPANA\\nSPANB", "-C", "2")
    assert h["line_no"] == 3 and h["before"] == ["ctx0", "ctx1"]
    assert h["after"] == ["SPANB tail", "ctx4"] and h["match"] == "SPANA"
    assert len(h["line"]) <= 410 and h["line"][h["start"]:h["end"]] == "SPANA"
    # ^ and $ still hold at each line of a field
    assert [x["line_no"] for x in _span_hits(spans, "^B\\d$")] == [2, 5]
