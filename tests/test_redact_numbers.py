"""Transcript lines whose numbers orjson cannot hold as written.

- A number beyond a double (``1e400``) is valid JSON every session reader
  takes (``sessions.load_record``, the standard library's parser where
  orjson refuses it), but the secrets scan parsed lines with orjson alone:
  such a line was scanned as raw bytes, so a credential spelled with a JSON
  escape (``\\u0041KIA...``, ``postgres:\\/\\/...``) was neither found by
  ``secrets`` (exit 0, "0 findings") nor erased by ``redact``, while ``grep``
  and ``read`` served it decoded.
- An integer beyond 64 bits is read by orjson as a float: ``redact``,
  writing the record back whole, turned ``18446744073709551617`` into
  ``1.8446744073709552e+19`` (and ``1e400`` would have become ``null``).
  Such a record now keeps its bytes but for the strings that held a value.
"""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.core.secrets import parsed_record

from .conftest import run_cli
from .secretstore import build

KEY = "AKIAZQ3DRTX7PLMN4V2B"


@pytest.fixture
def planted(tmp_path):
    return build(tmp_path / "p", seed=11)


def _session(planted, sid: str, *records: bytes):
    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                           "project": planted.slug, "created": "2026-12-01T09:00:00.000Z"})
    path = planted.store / "sessions" / f"{sid}.jsonl"
    path.write_bytes(b"\n".join([header, *records]) + b"\n")
    return path


def _found(planted, sid: str) -> list[dict]:
    r = run_cli("--store", str(planted.store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1")
    assert r.exit_code in (0, 1), r.stderr
    return [f for f in map(orjson.loads, r.stdout.splitlines())
            if f.get("type") == "secret" and f.get("file") == f"sessions/{sid}.jsonl"]


def test_parsed_record_reads_a_number_beyond_a_double_as_the_readers_do():
    rec, twice = parsed_record(b'{"seq":1,"type":"message","content":"x","n":1e400}')
    assert rec is not None and rec["content"] == "x" and not twice


@pytest.mark.parametrize("content", [
    "key \\u0041KIAZQ3DRTX7PLMN4V2B",
    "key AKIAZQ3DRTX7PLMN4V2B",
], ids=["escaped", "plain"])
def test_a_credential_beside_a_number_beyond_a_double_is_found_and_erased(planted, content):
    record = ('{"seq":1,"type":"message","role":"user","content":"@","n":1e400}'
              .replace("@", content)).encode()
    path = _session(planted, "huge", record)
    found = _found(planted, "huge")
    assert len(found) == 1, found
    # found in its record, by its path, as every other record's strings are
    assert found[0].get("seq") == 1 and found[0].get("path") == "$.content", found
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", "huge")
    assert r.exit_code == 0, r.stderr
    after = path.read_bytes().split(b"\n")[1]
    assert KEY.encode() not in after and b"\\u0041KIA" not in after, after
    # the number kept as written, the rest of the line too
    assert after.endswith(b'"n":1e400}'), after
    assert not _found(planted, "huge")


def test_redact_keeps_integers_beyond_64_bits_as_written(planted):
    record = ('{"seq":1,"type":"message","role":"user","content":"key @",'
              '"n":18446744073709551617,"m":-9223372036854775809,"k":18446744073709551615,'
              '"f":1.5}').replace("@", KEY).encode()
    path = _session(planted, "bigint", record)
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", "bigint")
    assert r.exit_code == 0, r.stderr
    after = path.read_bytes().split(b"\n")[1]
    marker = after[after.index(b"[REDACTED:"):after.index(b"]") + 1]
    assert after == record.replace(KEY.encode(), marker)


def test_a_record_orjson_holds_exactly_is_still_written_back_whole(planted):
    """(The documented rewrite of a record another writer spaced: compact.)"""
    record = ('{"seq": 1, "type": "message", "role": "user", "content": "key @", '
              '"n": 12, "f": 0.25}').replace("@", KEY).encode()
    path = _session(planted, "spaced", record)
    r = run_cli("--store", str(planted.store), "--no-state", "redact", "--yes",
                "--session", "spaced")
    assert r.exit_code == 0, r.stderr
    after = path.read_bytes().split(b"\n")[1]
    assert after.startswith(b'{"seq":1,"type":"message","role":"user","content":"key [REDACTED:')
    assert after.endswith(b'","n":12,"f":0.25}')
