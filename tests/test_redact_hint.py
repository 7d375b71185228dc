"""FORMAT.md, "Redaction": every output of redact shows a session id that
is a credential masked.  The "did you mean" of ``redact --session`` named
such an id in the clear (its close matches are the store's session ids)."""

from __future__ import annotations

import orjson

from .conftest import run_cli
from .secretstore import build

SID = "AKIAIOSFODNN7EXAMPLQ"      # an AWS access key id, as a session id


def test_the_did_you_mean_of_redact_masks_a_credential_session_id(tmp_path):
    p = build(tmp_path / "p", seed=11)
    header = orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": SID,
                           "project": p.slug, "created": "2026-12-01T09:00:00.000Z"})
    msg = orjson.dumps({"seq": 1, "type": "message", "role": "user", "content": "hello"})
    (p.store / "sessions" / f"{SID}.jsonl").write_bytes(header + b"\n" + msg + b"\n")
    typo = SID[:-1] + "R"
    for args in ((), ("--json",)):
        r = run_cli("--store", str(p.store), "--no-state", "redact", "--session", typo,
                    "--dry-run", *args)
        assert r.exit_code == 3, r.stderr
        assert SID not in r.stdout + r.stderr and "did you mean [REDACTED:" in r.stderr
    # an ordinary id is still offered as it is
    r = run_cli("--store", str(p.store), "--no-state", "redact", "--session", "s-mai",
                "--dry-run")
    assert r.exit_code == 3 and "did you mean s-main" in r.stderr, r.stderr
