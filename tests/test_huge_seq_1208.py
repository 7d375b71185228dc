"""A huge line whose seq is beyond 64 bits is placed nowhere (2026-12-08).

Every reader parses ``{"seq":18446744073709551616,...`` as a float: no
seq, a corrupt line (``no_seq``), and a short such line is judged so.  A
huge one (over 1 MiB, placed from its first bytes without a parse) was
placed at 2^64: ``validate --deep`` said ``seq_gap`` and then a false
``seq_regression`` for the next record.  A code review of 2026-12-07
found it; ``huge_seq`` now places no line whose seq is beyond 64 bits.
(``read`` of the record after such a huge line still exits 5, naming the
line, as it did before: the search cannot place it without a parse.)
"""

from __future__ import annotations

import orjson
import pytest

from .conftest import run_cli

SLUG = "case-0123456789ab"


def _store(root, pad: int):  # noqa: ANN001, ANN202
    store = root / "store"
    (store / "sessions").mkdir(parents=True)
    lines = [
        {"seq": 0, "type": "session", "format": 1, "session_id": "s1", "project": SLUG,
         "created": "2026-12-01T09:00:00+00:00"},
        {"seq": 1, "type": "message", "role": "user", "content": "one"},
    ]
    body = b"\n".join(orjson.dumps(x) for x in lines) + b"\n"
    body += (b'{"seq":18446744073709551616,"type":"message","role":"user","content":"'
             + b"x" * pad + b'"}\n')
    body += orjson.dumps({"seq": 2, "type": "message", "role": "user", "content": "two"}) + b"\n"
    (store / "sessions" / "s1.jsonl").write_bytes(body)
    return store


@pytest.mark.parametrize("pad", [10, 2 << 20], ids=["short", "huge"])
def test_a_line_whose_seq_is_beyond_64_bits_is_one_corrupt_line(tmp_path, pad):
    store = _store(tmp_path, pad)
    base = ("--store", str(store), "--slug", SLUG, "--no-state")
    r = run_cli(*base, "validate", "--deep", "--json")
    found = sorted((f["code"], f["reason"]) for f in orjson.loads(r.stdout)["findings"]
                   if f["code"].startswith("session."))
    assert found == [("session.corrupt_line", "no_seq")], found
