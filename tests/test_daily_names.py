"""Daily log names (a review of 2026-12-05): ``validate``'s layout check and
the bundle's export took any ``\\d{4}-\\d{2}-\\d{2}.md`` for a daily log --
Unicode digits, an impossible date, a name ending in a newline -- where
docs/FORMAT.md asks for ASCII digits and a real calendar day, as ``log`` and
``migrate-legacy`` do.  One rule, ``mdnames.is_daily_file``, for all."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.mdnames import is_daily_file

from .builders import copy_demo
from .conftest import run_cli

BAD = ["2026-13-01.md", "2026-02-30.md", "\uff12\uff10\uff12\uff16-\uff11\uff12-\uff10\uff11.md",
       "2026-12-02.md\n", "2026-12-02\n.md", "\u0662026-12-02.md", "2026-1-01.md"]
GOOD = ["2026-12-01.md", "2024-02-29.md", "0001-01-01.md"]


@pytest.mark.parametrize("name", BAD)
def test_the_rule_refuses(name):
    assert not is_daily_file(name)


@pytest.mark.parametrize("name", GOOD)
def test_the_rule_accepts(name):
    assert is_daily_file(name)


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _plant(store: Path, names: list[str]) -> None:
    for n in names:
        p = store / "daily" / n
        p.write_bytes(b"x\n")
        os.chmod(p, 0o600)


def test_validate_reports_impossible_daily_names(demo):
    _plant(demo, BAD + ["2026-12-01.md"])
    for n in BAD:                     # a backup of a bad name is no daily log either
        if "\n" not in n:
            _plant(demo, [n + ".bak"])
    r = run_cli("--store", str(demo), "--no-state", "validate", "--strict", "--json")
    doc = orjson.loads(r.stdout)
    flagged = {f["file"] for f in doc["findings"] if f["code"] == "layout.unexpected_file"}
    want = {f"daily/{n}" for n in BAD} | {f"daily/{n}.bak" for n in BAD if "\n" not in n}
    assert flagged == want
    assert r.exit_code == 1


def test_export_leaves_out_impossible_daily_names(demo, tmp_path):
    _plant(demo, BAD + ["2026-12-01.md"])
    out = tmp_path / "b.tar"
    r = run_cli("--store", str(demo), "--no-state", "export", "-o", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    skipped = {s["path"]: s["reason"] for s in orjson.loads(r.stdout)["skipped"]}
    for n in BAD:
        assert skipped.get(f"daily/{n}") == "not_in_layout", (n, skipped)
    assert "daily/2026-12-01.md" not in skipped


@pytest.mark.parametrize("name", BAD)
def test_migrate_legacy_does_not_copy_it(name):
    from lecode_memctl.core.migrate import _classify_name

    kind, reason, _detail = _classify_name("daily/" + name, ["daily", name])
    assert (kind, reason) == ("skip", "unexpected")


def test_completion_offers_only_daily_logs(demo, monkeypatch):
    from lecode_memctl.cli import completion

    _plant(demo, ["2026-02-30.md", "2026-12-02.md\n", "2026-12-01.md"])
    monkeypatch.setattr(completion, "store_from_context", lambda ctx: type("S", (), {"path": demo})())
    got = completion.complete_log_date(None, [], "2026-")
    assert "2026-12-01" in got
    assert "2026-02-30" not in got
    assert all(is_daily_file(d + ".md") for d in got)
