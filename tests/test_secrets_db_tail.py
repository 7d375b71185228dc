"""A fact whose text ends in a credential of open-ended shape is reported once.

The raw scan of ``facts.sqlite3`` reads printable runs of the pages, where
a fact's text is followed by the next column's bytes (its ``created``
timestamp, ``2026-12-07T09:29:49.818Z``).  A Slack token's pattern has an
open-ended tail, so the run's value went on into the timestamp's digits:
a value longer than the fact's, with another hash, which the check "a
value that begins a live fact's value is that fact's" did not catch.
Before 2026-12-07 ``secrets`` reported it twice (``fact``, 56 chars, and
``database``, 60 chars), and allowlisting the fact's hash left the
database finding: exit 1 for ever.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.secrets import _Prefixes

from .conftest import run_cli

SLACK = "xoxb-205755947090-0547499525255-2MqtYygX0bKRVitGoPZrpulR"


def _store(base: Path, text: str) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T09:00:00Z") as w:
        w.append_message("user", "hi")
    ref = SourceRef("s1", (1,), canonical_digest(sessions.records("s1", 1, 1)))
    facts.add(text, ref=ref)
    facts.close()
    return st.path


def _findings(store: Path, *args: str) -> tuple[int, list[dict]]:
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1", *args)
    assert r.exit_code in (0, 1), r.stderr
    return r.exit_code, [f for f in map(orjson.loads, r.stdout.splitlines())
                         if f.get("type") == "secret"]


@pytest.mark.parametrize("text", [f"slack bot is {SLACK}", SLACK],
                         ids=["after-words", "alone"])
def test_a_token_at_the_end_of_a_fact_is_reported_once_as_the_fact(tmp_path, text):
    store = _store(tmp_path, text)
    code, found = _findings(store)
    assert code == 1
    assert [(f["kind"], f["length"]) for f in found] == [("fact", len(SLACK))], found
    allow = tmp_path / "allow"
    allow.write_text(found[0]["hash"] + "\n")
    code, found = _findings(store, "--allowlist", str(allow))
    assert (code, found) == (0, [])


def test_prefixes_tell_a_value_that_begins_with_a_live_one():
    p = _Prefixes(["ab", "abc-x", "xoxb-1"])
    assert p.any_starts_with("a") and p.any_starts_with("abc")     # begins a live value
    assert p.begins_with_one("abd") and p.begins_with_one("xoxb-12026")   # one begins it
    assert not p.begins_with_one("a") and not p.begins_with_one("xoxa-1")
