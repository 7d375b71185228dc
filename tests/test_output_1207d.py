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


# ---------------------------------------------------------------- completion of the global options

GLOBALS_AFTER = ("--config-dir", "--project", "-C", "--store", "--slug", "--no-color", "--color",
                 "--no-state")


def _bash(line: str) -> dict[str, str]:
    return {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": line,
            "COMP_CWORD": str(len(line.split()) - (0 if line.endswith(" ") else 1)),
            "COMP_LINE": line}


def _answers(env: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the fast path's answer, typer's), each a list of lines."""
    from .test_completion_fast import by_fast_path, by_typer

    fast = by_fast_path(env)
    assert fast is not None, env                 # (option names: the fast path's)
    typer_text, typer_code = by_typer(env)
    assert fast == (typer_text, typer_code), env
    return fast[0].splitlines(), typer_text.splitlines()


@pytest.mark.parametrize(("line", "want"), [
    ("memctl facts --st", ["--status", "--store"]),
    ("memctl facts --no-", ["--no-color", "--no-state"]),
    ("memctl show --", ["--config-dir", "--project", "--store", "--slug", "--no-color",
                        "--color", "--no-state"]),
    ("memctl --store /s facts --json --co", ["--config-dir", "--color"]),
    ("memctl grep x --pro", ["--project"]),          # (grep's own -C: --project still)
    ("memctl validate --st", ["--store", "--strict"]),  # (validate's own --store, once)
])
def test_global_options_complete_after_a_command_name(line, want):
    fast, _typer = _answers(_bash(line))
    assert set(want) <= set(fast), (line, fast)
    names = [w for w in fast if w.startswith("-")]
    assert len(names) == len(set(names)), (line, fast)     # (each offered once)
    prefix = line.rsplit(" ", 1)[1]
    assert sorted(w for w in GLOBALS_AFTER if w.startswith(prefix) and w in names) == \
        sorted(w for w in want if w in GLOBALS_AFTER), (line, fast)


def test_global_options_after_a_command_in_zsh_and_fish():
    zsh = {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl facts --st"}
    fast, _ = _answers(zsh)
    assert any('"--store"' in line for line in fast), fast
    fish = {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl facts --st",
            "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    fast, _ = _answers(fish)
    assert [line.split("\t")[0] for line in fast] == ["--status", "--store"], fast


def test_version_and_a_given_global_are_not_offered_after_the_command():
    fast, _ = _answers(_bash("memctl facts --"))
    assert "--version" not in fast
    assert set(GLOBALS_AFTER) - {"-C"} <= set(fast)
    fast, _ = _answers(_bash("memctl facts --store /s --st"))
    assert [w for w in fast if w.startswith("-")] == ["--status"]


def test_a_global_option_value_after_a_command_completes_as_before_it():
    from .test_completion_fast import by_typer

    before = by_typer(_bash("memctl --color a"))
    after = by_typer(_bash("memctl facts --color a"))
    assert before == after and "auto" in after[0] and "always" in after[0]
    # --store takes a directory: no candidates of memctl's, the shell's own file names
    before = by_typer(_bash("memctl --store /"))
    after = by_typer(_bash("memctl facts --store /"))
    assert before == after


def test_the_global_options_stay_out_of_a_commands_help():
    res = run_cli("facts", "--help")
    assert "--store" not in res.stdout and "--config-dir" not in res.stdout


# ---------------------------------------------------------------- no far-fetched guess

@pytest.mark.parametrize("cmd", [("schema",), ("man",), ("demo",), ("edit",),
                                 ("completion", "bash")])
def test_no_such_option_suggests_no_option_whose_name_is_not_close(cmd):
    res = run_cli(*cmd, "--json")
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert "No such option: --json" in res.stderr
    assert "Possible options" not in res.stderr and "Did you mean" not in res.stderr
    assert "--store" not in res.stderr


@pytest.mark.parametrize(("cmd", "typo", "meant"), [
    ("facts", "--jsno", "--json"), ("facts", "--stauts", "--status"),
    ("schema", "--stor", "--store"), ("notes", "--limt", "--limit"),
])
def test_a_close_option_name_is_still_suggested(cmd, typo, meant):
    res = run_cli(cmd, typo)
    assert res.exit_code == 2
    assert meant in res.stderr.split("No such option", 1)[1], res.stderr

