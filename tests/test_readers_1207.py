"""Defects in grep, usage, sessions and read found by a review on
2026-12-07, each tested on a bare store (a directory with ``sessions/``)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

SLUG = "rep-0123456789ab"


def header(sid: str) -> str:
    return orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                         "project": SLUG, "created": "2026-12-01T09:00:00Z"}).decode()


def write(store: Path, sid: str, *lines: str) -> Path:
    (store / "sessions").mkdir(parents=True, exist_ok=True)
    p = store / "sessions" / f"{sid}.jsonl"
    p.write_text("".join(line + "\n" for line in (header(sid), *lines)), encoding="utf-8")
    return p


def msg(seq: int, content: str, role: str = "user") -> str:
    return orjson.dumps({"seq": seq, "type": "message", "role": role, "content": content}).decode()


def cli(store: Path, *args: str):
    return run_cli("--store", str(store), "--no-state", *args)


# -- 1. grep -i and the letters IGNORECASE folds that bytes.lower() does not

@pytest.mark.parametrize(("text", "pattern"), [
    ("deploy to İstanbul region", "istanbul"),
    ("deploy to ıstanbul region", "ISTANBUL"),
    ("a 5 \u212aelvin probe", "kelvin"),
    ("the ſecret place", "secret"),
    ("the ſecret place", "SECRET"),
])
def test_grep_ignore_case_finds_unicode_case_matches(tmp_path, text, pattern):
    assert re.search(pattern, text, re.IGNORECASE)
    write(tmp_path, "k", msg(1, text))
    for fixed in ((), ("-F",)):
        r = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k")
        assert r.exit_code == 0 and text in r.stdout, (r.exit_code, r.stdout, r.stderr)
        c = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k", "-c")
        assert c.exit_code == 0 and c.stdout.strip().endswith("1"), c.stdout
        l_ = cli(tmp_path, "grep", "-i", *fixed, pattern, "--session", "k", "-l")
        assert l_.exit_code == 0 and l_.stdout.strip() == "k", l_.stdout
    # and what does not match still does not
    assert cli(tmp_path, "grep", "-i", "zzz" + pattern, "--session", "k").exit_code == 1


def test_grep_fold_table_is_the_secrets_gates():
    from lecode_memctl.core import grep, secrets
    assert grep._FOLD == secrets._FOLD
