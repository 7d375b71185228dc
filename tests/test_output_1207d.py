"""The output contract (review of 2026-12-07, rv43): a found value in the
name of the store itself is masked in every output of ``secrets`` and
``redact``; ``facts``' refusals of --limit/--offset said as they are;
completion of the global options after a command name; no far-fetched
"Possible options" guess."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli
from .promparse import parse_exposition

# a GitHub token's shape (no real one): the name of a store and a line of it
TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
TOKEN_MARK = f"[REDACTED:github-token:{hashlib.sha256(TOKEN.encode()).hexdigest()[:6]}]"
FORMATS = ("table", "json", "jsonl", "csv", "tsv", "prometheus")


def _token_store(config_dir: Path, name: str = TOKEN, text: str | None = f"token {TOKEN}\n"
                 ) -> Path:
    store = config_dir / "memory" / name
    store.mkdir(parents=True)
    if text is not None:
        (store / "MEMORY.md").write_text(text, encoding="utf-8")
    return store


@pytest.mark.parametrize("fmt", FORMATS)
def test_secrets_all_projects_masks_a_found_value_in_the_store_name(config_dir, fmt):
    _token_store(config_dir)
    res = run_cli("secrets", "--all-projects", "--format", fmt)
    assert res.exit_code == 1, res.stderr
    assert TOKEN not in res.stdout + res.stderr
    if fmt in ("json", "jsonl", "table", "prometheus"):
        assert TOKEN_MARK in res.stdout


def test_secrets_one_store_masks_project_and_store(config_dir):
    store = _token_store(config_dir)
    res = run_cli("--store", str(store), "secrets", "--json")
    assert res.exit_code == 1, res.stderr
    assert TOKEN not in res.stdout + res.stderr
    doc = orjson.loads(res.stdout)
    assert doc["projects"][0]["project"] == TOKEN_MARK
    assert doc["projects"][0]["store"].endswith("/memory/" + TOKEN_MARK)
    assert {f["project"] for f in doc["findings"]} == {TOKEN_MARK}


def test_a_value_found_in_one_store_is_masked_in_another_stores_name(config_dir):
    # the store named by the token holds nothing; another store holds it
    _token_store(config_dir, text=None)
    _token_store(config_dir, name="plain")
    (config_dir / "memory" / "plain" / "MEMORY.md").write_text(f"token {TOKEN}\n")
    res = run_cli("secrets", "--all-projects", "--format", "jsonl")
    assert res.exit_code == 1, res.stderr
    assert TOKEN not in res.stdout + res.stderr
    projects = [r["project"] for r in map(orjson.loads, res.stdout.splitlines())
                if r["type"] == "scan"]
    assert sorted(projects) == sorted(["plain", TOKEN_MARK])


def test_masked_store_names_spelt_alike_stay_distinct_series(config_dir):
    # a store literally named as the marker, and the store named by the token
    _token_store(config_dir)
    _token_store(config_dir, name=TOKEN_MARK, text="nothing here\n")
    res = run_cli("secrets", "--all-projects", "--format", "prometheus")
    assert res.exit_code == 1, res.stderr
    assert TOKEN not in res.stdout
    fams = parse_exposition(res.stdout)      # (no duplicate label sets)
    oks = fams["memctl_secrets_ok"].samples
    assert len(oks) == 2
    assert {s.labels["project"] for s in oks} == {TOKEN_MARK}
    assert sorted(s.labels.get("spelt_same", "") for s in oks) == ["", "2"]


def test_secrets_output_refused_inside_the_store_masks_its_name(config_dir):
    # refused before any scan: the value is the detector's find in the message
    store = _token_store(config_dir)
    res = run_cli("--store", str(store), "secrets", "--output", str(store / "out.txt"))
    assert res.exit_code == 2, res.stderr
    assert TOKEN not in res.stderr and TOKEN_MARK in res.stderr


def test_an_error_after_the_scan_masks_every_found_value(config_dir, monkeypatch, tmp_path):
    from lecode_memctl.cli import cmd_forensics
    from lecode_memctl.core.errors import StoreWriteError

    store = _token_store(config_dir)

    def failed(output, data):
        raise StoreWriteError(f"{store}/../report: cannot write")

    monkeypatch.setattr(cmd_forensics, "_write_output", failed)
    res = run_cli("--store", str(store), "secrets", "--json", "--output",
                  str(tmp_path / "out.json"))
    assert res.exit_code == 7, res.stderr
    assert TOKEN not in res.stdout + res.stderr
    assert TOKEN_MARK in res.stderr


def test_redact_masks_a_found_value_in_the_store_name(config_dir):
    store = _token_store(config_dir)
    res = run_cli("--store", str(store), "redact", "--dry-run", "--json")
    assert res.exit_code == 0, res.stderr
    assert TOKEN not in res.stdout + res.stderr
    plan = orjson.loads(res.stdout)["plan"]
    assert plan["project"] == TOKEN_MARK
    assert plan["store"].endswith("/memory/" + TOKEN_MARK)
    res = run_cli("--store", str(store), "redact", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert TOKEN not in res.stdout + res.stderr and TOKEN_MARK in res.stdout


# ---------------------------------------------------------------- facts' refusals

def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("args", [("--limit", "25"), ("--limit", "25", "--format", "github"),
                                  ("--limit", "21", "--format", "html"),
                                  ("--all", "--limit", "5", "--format", "jsonl"),
                                  ("--all", "--offset", "3", "--json")])
def test_facts_refusals_are_exit_2(store, args):
    res = run_cli("--store", str(store.path), "facts", *args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_facts_help_says_what_is_refused():
    res = run_cli("facts", "--help")
    assert res.exit_code == 0
    text = _flat(res.stdout)
    assert "an N over 20 is refused in a table format" in text
    assert "with --all: exit 2" in text          # --limit and --offset alike
    assert "exit 2 with --limit or an --offset over 0" in text


def test_output_md_says_facts_refuses_a_limit_over_a_page():
    from .conftest import REPO

    text = _flat((REPO / "docs" / "OUTPUT.md").read_text(encoding="utf-8"))
    assert "`--limit`/`--offset` work in every format." not in text
    assert "`facts --limit N` over 20 in a table format" in text
