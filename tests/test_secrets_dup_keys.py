"""A transcript record that gives a key twice in one object: a JSON parser
keeps one of the two values (orjson the last), so a credential in the other
was neither found by ``secrets`` (exit 0, "0 findings") nor erased by
``redact``, while its bytes stayed on disk.  Such a line is now read as text
by both, as a line that does not parse is: found, and its bytes replaced,
the rest of the line kept byte for byte."""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.secrets import parsed_record

from .conftest import run_cli
from .secretstore import build


def json_object(line: bytes):
    """The record as the scan reads it by path: None for a line that is no
    JSON object, or whose objects give a key twice."""
    rec, twice = parsed_record(line)
    return None if twice else rec


@pytest.fixture
def planted(tmp_path):
    return build(tmp_path / "p", seed=7)


KEY = "AKIAQWERTYUIOPASDFGH"


@pytest.mark.parametrize("line", [
    '{"seq":1,"type":"message","role":"user","note":"%s","content":"hello","note":"plain"}',
    '{"seq":1, "type":"message", "role":"user", "content":"hello", '
    '"meta":{"k":"%s","x":1,"k":"plain"}}',
], ids=["top level, orjson's form", "nested, another writer's spacing"])
def test_a_value_under_a_key_given_twice_is_found_and_erased(planted, line):
    store, slug = planted.store, planted.slug
    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "dup",
                           "project": slug, "created": "2026-12-01T09:00:00.000Z"})
    record = (line % KEY).encode()
    path = store / "sessions" / "dup.jsonl"
    path.write_bytes(header + b"\n" + record + b"\n")
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1")
    found = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert any(f.get("type") == "secret" and f.get("file") == "sessions/dup.jsonl"
               for f in found), r.stdout
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes",
                "--session", "dup")
    assert r.exit_code == 0, r.stderr
    data = path.read_bytes()
    assert KEY.encode() not in data
    # only the value replaced: the rest of the line as it was
    after = data.split(b"\n")[1]
    marker = after[after.index(b"[REDACTED:"):after.index(b"]") + 1]
    assert after == record.replace(KEY.encode(), marker)


def test_json_object_tells_a_key_given_twice():
    assert json_object(b'{"a":1,"b":{"c":2}}') == {"a": 1, "b": {"c": 2}}
    assert json_object(b'{"a": 1, "b": {"c": 2}}') == {"a": 1, "b": {"c": 2}}
    assert json_object(b'{"a":1,"a":2}') is None
    assert json_object(b'{"a": [ {"b":1, "b":1} ]}') is None
    assert json_object(b'[1]') is None and json_object(b'{') is None


def test_a_file_removed_between_the_listing_and_its_read_is_not_unreadable(planted,
                                                                            monkeypatch):
    """Another writer's temporary file (``notes/.x.md.tmp-...``), renamed into
    place after ``secrets`` listed the store and before it read the file:
    the scan said it could not read it (exit 1, 'unreadable') and ``redact``
    refused the whole store (exit 5, 'cannot read ... and so cannot tell
    what it holds').  It is skipped, not unreadable: nothing is there."""
    from lecode_memctl.core import secrets

    gone = "notes/.keys.md.tmp-0123456789ab"
    listed = secrets.store_files

    def with_a_gone_file(store, report):
        return [*listed(store, report), gone]

    monkeypatch.setattr(secrets, "store_files", with_a_gone_file)
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--json", "--jobs", "1")
    doc = orjson.loads(r.stdout)
    assert r.exit_code == 1 and doc["findings"], r.stderr     # (the planted values)
    (scan,) = doc["projects"]
    (skip,) = [s for s in scan["skipped"] if s["file"] == gone]
    assert skip["reason"] == "removed before it was read" and scan["unreadable"] == 0, scan
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--dry-run", "--jobs", "1")
    assert r.exit_code == 0, r.stderr


def test_a_marker_that_is_already_a_key_keeps_both_members(planted):
    """``redact`` replaces a key that holds a value with its marker; an
    object that already has a key equal to that marker lost one of the two
    members (a dict keeps one), silently.  Such a record's line is now
    rewritten byte for byte: every member kept, only the value replaced."""
    from lecode_memctl.core.secrets import marker

    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    mark = marker("github-token", token)
    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "k",
                           "project": planted.slug, "created": "2026-12-01T09:00:00.000Z"})
    record = orjson.dumps({"seq": 1, "type": "message", "role": "user", "content": "env",
                           "env": {mark: "KEEP-ME-1", token: "KEEP-ME-2"}})
    path = planted.store / "sessions" / "k.jsonl"
    path.write_bytes(header + b"\n" + record + b"\n")
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", "k")
    assert r.exit_code == 0, r.stderr
    after = path.read_bytes().split(b"\n")[1]
    assert token.encode() not in after
    assert b"KEEP-ME-1" in after and b"KEEP-ME-2" in after
    assert after == record.replace(token.encode(), mark.encode())


def test_a_key_given_twice_is_told_at_any_depth_and_in_any_spelling():
    deep = b'{"a":' * 1000 + b'["x"]' + b"}" * 1000
    assert json_object(deep) is not None                     # (orjson writes 255 levels)
    twice = b'{"a":' * 999 + b'{"b":1,"b":2}' + b"}" * 999
    assert json_object(twice) is None
    assert json_object(b'{"a":1,"\\u0061":2}') is None      # one key, two spellings
    assert json_object(b'{"x":"a,b{\\"","y":[1,{"z":1}],"z":2}') is not None
    assert json_object(b'{"a":[{"a":1},{"a":2}],"b":{"a":1}}') is not None


def test_a_header_that_gives_a_key_twice_keeps_its_identifying_fields(planted):
    """A line that gives a key twice is rewritten byte for byte, but its
    identifying fields are kept as the record read gives them: a session id
    that is a credential stays in the header (listed as kept), where the
    rewrite of such a line replaced it and left the session refused."""
    sid = "AKIAIOSFODNN7EXAMPLQ"
    header = (f'{{"seq":0,"type":"session","format":1,"session_id":"{sid}",'
              f'"project":"{planted.slug}","created":"2026-12-01T09:00:00.000Z",'
              '"created":"2026-12-01T09:00:00.000Z"}').encode()
    msg = b'{"seq":1,"type":"message","role":"user","content":"hello"}'
    path = planted.store / "sessions" / f"{sid}.jsonl"
    path.write_bytes(header + b"\n" + msg + b"\n")
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", sid)
    assert r.exit_code in (0, 1), r.stderr
    assert path.read_bytes().split(b"\n")[0] == header
    r = run_cli("--store", str(planted.store), "--no-state", "read", f"{sid}:1-1")
    assert r.exit_code == 0, r.stderr


def test_the_plan_counts_a_record_that_gives_a_key_twice(planted):
    """The record's seq is the plan's as for any record it rewrites: a fact
    citing it is listed among those made stale (the plan said 0, and the
    fact was stale after)."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": "s-dup",
                           "project": planted.slug, "created": "2026-12-01T09:00:00.000Z"})
    rec = (b'{"seq":1,"type":"message","role":"user","content":"the deploy uses make ship",'
           b'"note":"plain","note":"key ' + KEY.encode() + b'"}')
    (planted.store / "sessions" / "s-dup.jsonl").write_bytes(header + b"\n" + rec + b"\n")
    store = store_at(planted.store)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        fact = fs.remember("The deploy uses make ship.", ss.source_snapshot("s-dup", 1, 1).ref,
                           sessions=ss).fact
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--dry-run", "--json",
                "--session", "s-dup")
    assert r.exit_code == 0, r.stderr
    plan = orjson.loads(r.stdout)["plan"]
    assert [f["records"] for f in plan["files"] if f["file"] == "sessions/s-dup.jsonl"] == [[1]]
    assert fact.fact_id in {s["fact_id"] for s in plan["stale_facts"]}, plan["stale_facts"]


def test_a_wal_removed_before_it_was_read_is_skipped_and_the_database_read_again(
        planted, monkeypatch):
    """SQLite removes ``facts.sqlite3-wal`` when the agent's last connection
    closes, after checkpointing it into the database: a ``-wal`` listed and
    gone when read was unreadable (secrets exit 1 on a clean store, redact
    refusing it, exit 5); it is skipped, and the database read again.  The
    same for a file gone between the listing and its ``lstat``."""
    import os

    from lecode_memctl.core import secrets

    listed = secrets.store_files

    def with_a_gone_wal(store, report):
        return [*listed(store, report), "facts.sqlite3-wal"]

    monkeypatch.setattr(secrets, "store_files", with_a_gone_wal)
    reads: list[str] = []
    database = secrets.Scanner._database

    def counted(self, rel, path, live):
        reads.append(rel)
        return database(self, rel, path, live)

    monkeypatch.setattr(secrets.Scanner, "_database", counted)
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--json", "--jobs", "1")
    (scan,) = orjson.loads(r.stdout)["projects"]
    (skip,) = [s for s in scan["skipped"] if s["file"] == "facts.sqlite3-wal"]
    assert skip == {"file": "facts.sqlite3-wal", "reason": secrets.GONE, "unreadable": False}
    assert scan["unreadable"] == 0 and reads == ["facts.sqlite3", "facts.sqlite3-wal",
                                                 "facts.sqlite3"], reads
    files = len([p for p in planted.store.rglob("*") if p.is_file() and not p.is_symlink()
                 and not p.name.endswith((".lock", "-shm"))])
    assert scan["files_scanned"] == files, (scan["files_scanned"], files)
    monkeypatch.setattr(secrets, "store_files", listed)
    real_lstat = os.lstat
    note = str(planted.store / "notes" / "keys.md")

    def gone_lstat(p, *a, **k):
        if os.fspath(p) == note:
            raise FileNotFoundError(2, "No such file or directory", p)
        return real_lstat(p, *a, **k)

    monkeypatch.setattr(os, "lstat", gone_lstat)
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--json", "--jobs", "1")
    (scan,) = orjson.loads(r.stdout)["projects"]
    assert {"file": "notes/keys.md", "reason": secrets.GONE, "unreadable": False} \
        in scan["skipped"] and scan["unreadable"] == 0, scan


ESCAPED = "\\u0041KIAQ3EGRTYUIOPLKJHX"      # AKIAQ3EGRTYUIOPLKJHX, its A escaped


def _dup_session(planted, sid: str, record: bytes) -> None:
    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                           "project": planted.slug, "created": "2026-12-01T09:00:00.000Z"})
    (planted.store / "sessions" / f"{sid}.jsonl").write_bytes(header + b"\n" + record + b"\n")


def test_an_escaped_value_in_a_line_that_gives_a_key_twice_is_found_and_erased(planted):
    """Such a line was read as raw text, where a value spelled with a JSON
    escape is not: every string of it is now decoded and scanned (with the
    record's seq, so ``--seq`` picks it), and redact rewrites each string
    that holds a value, decoded and written again."""
    rec = ('{"seq":4,"type":"message","role":"user","content":"key ' + ESCAPED
           + ' here","x":1,"x":2}').encode()
    _dup_session(planted, "s-esc", rec)
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--json", "--jobs", "1")
    found = [f for f in orjson.loads(r.stdout)["findings"] if f.get("session_id") == "s-esc"]
    assert [(f["seq"], f["detector"]) for f in found] == [(4, "aws-access-key")], found
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", "s-esc", "--seq", "4")
    assert r.exit_code == 0 and "1 file rewritten" in r.stdout, (r.stdout, r.stderr)
    after = (planted.store / "sessions" / "s-esc.jsonl").read_bytes().split(b"\n")[1]
    rec2, twice = parsed_record(after)
    assert twice and "KIAQ3EGRTYUIOPLKJHX" not in rec2["content"] and b"KIAQ3EG" not in after
    assert rec2["content"].startswith("key [REDACTED:aws-access-key:")
    assert after.endswith(b'","x":1,"x":2}')          # the rest of the line as it was


def test_a_long_line_is_walked_in_memory_that_follows_it(tmp_path):
    """The string pattern kept state per character (2 GB for a 16 MiB
    string); unrolled, a 16 MiB line costs about its own size."""
    grew_kib = _peak_growth_kib(
        "from lecode_memctl.core.secrets import _gives_a_key_twice, json_strings\n"
        "line = b'{\"seq\": 4, \"content\": \"' + b'x' * (16 << 20) + b'\", \"n\": 1}'\n",
        "assert not _gives_a_key_twice(line)\n"
        "assert len(list(json_strings(line))) == 4\n")
    assert grew_kib < 200 * 1024, grew_kib          # (2 GB before; about 50 MB now)


def _peak_growth_kib(setup: str, measured: str) -> int:
    """How much the peak RSS of a fresh interpreter grows (KiB) while it
    runs ``measured``, after ``setup``."""
    import subprocess
    import sys

    code = (setup + "import resource\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n" + measured
            + "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


S = "AKIAQ3EGRTYUIOPLKJHX"


@pytest.mark.parametrize("line, kept", [
    # a lineage outside a compaction is no lineage: its session_id is redacted
    (b'{"seq":1,"type":"message","a":1,"a":2,"lineage":[{"session_id":"%s"}]}', False),
    # the part's type as parsed (the last): not binary, so its data is redacted
    (b'{"seq":1,"type":"message","a":1,"a":2,"parts":[{"type":"binary","data":"%s",'
     b'"type":"text"}]}', False),
    # binary whatever the order of its members: its data kept, whole
    (b'{"seq":1,"type":"message","a":1,"a":2,"parts":[{"data":"%s","type":"binary"}]}', True),
    (b'{"seq":1,"type":"message","a":1,"a":2,"parts":[{"type":"binary","data":["%s"]}]}', True),
    # an identifying field's value is kept whole, a container too
    (b'{"seq":{"k":"%s"},"type":"message","a":1,"a":2}', True),
    # a compaction's lineage ref's session_id is kept
    (b'{"seq":1,"type":"event","event":"compact","a":1,"a":2,'
     b'"lineage":[{"session_id":"%s","seqs":[1],"digest":"00"}]}', True),
])
def test_a_record_rewritten_string_by_string_keeps_what_the_whole_rewrite_keeps(line, kept):
    """The string-by-string rewrite of a record that cannot be written back
    whole keeps what the whole rewrite keeps (identifying fields, a
    compaction's lineage, a binary part's data as parsed), and nothing
    more: a value it was given elsewhere is erased."""
    from lecode_memctl.core.redact import rewrite_transcript

    piece = line % S.encode()
    new, _seqs, n, _raw = rewrite_transcript(piece, {S: "[R]"})
    assert (S.encode() in new) is kept and (n == 0) is kept, new
    orjson.loads(new)


def test_a_value_escaped_with_a_slash_is_erased():
    """``\\/`` is a JSON escape json.dumps never writes but a writer may: the
    scan decodes it, and redact skipped such a line unparsed (its bytes
    hold the value in neither form it looked for)."""
    from lecode_memctl.core.redact import rewrite_transcript

    url = "https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/abcdefghijklmnopqrstuvwx"
    piece = orjson.dumps({"seq": 1, "type": "message", "role": "user",
                          "content": url}).replace(b"/", b"\\/")
    new, seqs, n, _raw = rewrite_transcript(piece, {url: "[R]"})
    assert n == 1 and seqs == [1] and orjson.loads(new)["content"] == "[R]"


def test_many_rewritten_strings_hold_no_buffer_each(tmp_path):
    """orjson's bytes keep a 4 KiB buffer: 500,000 rewritten strings held
    took 2 GB; the rewrite builds one buffer."""
    grew_kib = _peak_growth_kib(
        "import orjson\n"
        "from lecode_memctl.core.redact import _rewrite_strings\n"
        "line = b'{\"seq\":1,\"type\":\"message\",\"a\":1,\"a\":2,\"z\":[' + "
        "b','.join([b'\"x\"'] * 500000) + b']}'\n"
        "rec = orjson.loads(line)\n",
        "new, n = _rewrite_strings(line, rec, {'x': '[R]'})\n"
        "assert n == 500000\n")
    assert grew_kib < 200 * 1024, grew_kib     # KiB (2 GB before)


@pytest.mark.parametrize("values", [{"line": "[R]"}, {"sess": "[R]"}, {"AKIA1": "[R]"}])
@pytest.mark.parametrize("sid", ["s1", ["AKIA1"]])
def test_a_compaction_rewritten_string_by_string_is_the_whole_rewrite(values, sid):
    """For a record with no key given twice the two rewrites agree: the
    ``lineage`` key, a ref's ``session_id`` key and its whole value (a
    container too) are kept by both (the string rewrite changed them)."""
    import copy

    from lecode_memctl.core.redact import _redact_record, _rewrite_strings

    rec = {"seq": 1, "type": "event", "event": "compact", "summary": "AKIA1 line",
           "lineage": [{"session_id": sid, "seqs": [1], "digest": "d"}]}
    got, n = _rewrite_strings(orjson.dumps(rec), rec, values)
    want, m = _redact_record(copy.deepcopy(rec), values)
    assert (orjson.loads(got), n) == (want, m)


@pytest.mark.parametrize("later", [b"1", b"null", b'{"a":1}', b'"text"'])
def test_a_type_given_again_decides_as_parsed(later):
    """A part whose last ``type`` is not the string "binary" (a number, null,
    an object) is no binary part: its data is redacted, as the scan, which
    reads the parse, reports it."""
    from lecode_memctl.core.redact import rewrite_transcript

    line = (b'{"seq":1,"type":"message","content":[{"type":"binary","data":"AKIA1","type":'
            + later + b"}]}")
    _new, _seqs, n, _raw = rewrite_transcript(line, {"AKIA1": "[R]"})
    assert n == 1


@pytest.mark.parametrize("line", [
    b'{"seq":1,"type":"event","event":"compact","lineage":[{"session_id":"AKIA1"}],'
    b'"lineage":[{"session_id":"s2"}]}',
    b'{"seq":1,"type":"event","event":"compact","lineage":[{"session_id":"AKIA1",'
    b'"session_id":"s2"}]}',
    b'{"seq":0,"type":"session","session_id":"AKIA1","session_id":"s2","project":"p",'
    b'"format":1}',
])
def test_an_identifying_value_a_parse_drops_is_redacted(line):
    """An identifying field given twice: the parse keeps the last, which is
    kept; the other is read by no one but is on disk, and the scan reports
    it: it is erased (it was kept, found again by the next scan)."""
    from lecode_memctl.core.redact import rewrite_transcript

    new, _seqs, n, _raw = rewrite_transcript(line, {"AKIA1": "[R]"})
    assert n == 1 and b"AKIA1" not in new and b'"s2"' in new
    assert orjson.loads(new) == orjson.loads(line)      # (what a parse reads: unchanged)


GH = "ghp_W4AcqGFz6Y1t9EwL56nGisiWgNZq6ITZM5jq"


@pytest.mark.parametrize("record", [
    # a compaction whose lineage key is spelled with an escape
    '{"seq":1,"type":"event","event":"compact","summary":"x","l\\u0069neage":'
    '[{"session_id":"%s","seqs":[1],"digest":"ab"}]}',
    # a lineage ref's session_id that is no string
    '{"seq":1,"type":"event","event":"compact","summary":"x","lineage":'
    '[{"session_id":["%s"],"seqs":[1],"digest":"ab"}]}',
    # a record's type given twice, the last holding the value
    '{"seq":1,"type":"message","role":"user","content":"hi","type":"%s"}',
    # a later record of type session, its project holding the value
    '{"seq":1,"type":"session","content":"hi","project":"%s"}',
])
def test_a_value_an_identifying_field_keeps_is_listed_as_kept(planted, record):
    """A value in a field redact never rewrites (an identifying one, as the
    parse reads the record) stays: it is listed under ``kept`` and the exit
    status is 1, as for a session id; it was left without a word (exit 0,
    and ``secrets`` found it again)."""
    _dup_session(planted, "s-gen", (record % GH).encode())
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--json", "--jobs", "1")
    found = [f for f in orjson.loads(r.stdout)["findings"] if f.get("session_id") == "s-gen"]
    assert found, r.stdout
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes", "--json",
                "--jobs", "1", "--session", "s-gen")
    doc = orjson.loads(r.stdout)
    assert r.exit_code == 1, r.stderr
    assert {k["hash"] for k in doc["plan"]["kept"]} >= {f["hash"] for f in found}, doc["plan"]
    assert "cannot erase" in r.stderr
