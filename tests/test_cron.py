"""The documented cron recipe (issue 12, point 5): one crontab line that
publishes the Prometheus report atomically whatever the findings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lecode_memctl.cli.cmd_audit import CRON_LINE
from lecode_memctl.cli.cmd_forensics import SECRETS_CRON_LINE

from . import outkit, secretstore
from .conftest import REPO, run_cli
from .promparse import parse_exposition

FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")
DOC_PATH = "/var/lib/node_exporter/textfile_collector/memctl.prom"


def parse_crontab_line(line: str) -> tuple[list[str], str]:
    """(five time fields, command) of a user crontab entry, or AssertionError."""
    assert "\n" not in line.strip() and not line.rstrip().endswith("\\"), "one line"
    assert "%" not in line, "cron turns % into a newline"
    parts = line.split(None, 5)
    assert len(parts) == 6, line
    fields, command = parts[:5], parts[5]
    ranges = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
    for f, (lo, hi) in zip(fields, ranges, strict=True):
        assert FIELD.match(f), f
        for n in re.findall(r"\d+", f.split("/")[0]):
            assert lo <= int(n) <= hi, f
    return fields, command


def documented_lines() -> list[str]:
    readme = (REPO / "README.md").read_text()
    found = [ln.strip() for ln in readme.splitlines() if "memctl validate" in ln
             and re.match(r"^\s*[\d*/,-]+\s+[\d*/,-]+\s+[\d*/,-]+\s+[\d*/,-]+\s+[\d*/,-]+\s", ln)]
    helptext = run_cli("validate", "--help").stdout
    found += [ln.strip() for ln in helptext.splitlines() if ln.strip().startswith("*/")]
    man = (REPO / "man" / "memctl.1").read_text()
    found += [ln.replace("\\-", "-").replace("\\(rs", "\\").strip()
              for ln in man.splitlines() if ln.strip().startswith("*/") and "memctl validate" in ln]
    return found


def test_recipe_is_one_crontab_line_everywhere():
    lines = documented_lines()
    assert len(lines) >= 3, lines        # README, validate --help, the man page
    for line in lines:
        assert line == CRON_LINE, line
    fields, command = parse_crontab_line(CRON_LINE)
    assert fields[0] == "*/15" and command.startswith("memctl validate")


@pytest.fixture
def problem_store(config_dir, tmp_path):
    store, _ids = outkit.build(config_dir, tmp_path / "proj", facts=3)
    # a problem: a transcript edited after a fact cited it (fact.stale), and a temp file
    p = store.sessions_dir / "2026-03-01-alpha.jsonl"
    p.write_bytes(p.read_bytes().replace(b"Deploys happen", b"Deploys HAPPEN"))
    return store


def _run_cron_command(command: str, config_dir: Path) -> subprocess.CompletedProcess:
    bindir = Path(sys.executable).parent
    assert (bindir / "memctl").exists(), "the console script is installed beside python"
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               LECODE_CONFIG_DIR=str(config_dir))
    # cron runs the command with sh -c, in $HOME, with a minimal environment
    return subprocess.run(["sh", "-c", command], env=env, cwd=env["HOME"], capture_output=True,
                          timeout=300)


def test_recipe_publishes_a_failing_audit(problem_store, config_dir, tmp_path):
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    target = out_dir / "memctl.prom"
    target.write_text("# the previous report\n")
    _fields, command = parse_crontab_line(CRON_LINE)
    assert DOC_PATH in command
    p = _run_cron_command(command.replace(DOC_PATH, str(target)), config_dir)
    assert p.returncode == 1, p.stderr          # exit as today: problems found
    assert p.stdout == b""                       # the report went to the file
    fams = parse_exposition(target.read_text())
    assert [s.value for s in fams["memctl_validate_ok"].samples] == [0]
    assert fams["memctl_validate_exit_status"].samples[0].value == 1
    assert fams["memctl_validate_stores"].samples[0].value == 1
    assert sorted(os.listdir(out_dir)) == ["memctl.prom"]      # no temporary file left
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("fmt", ["json", "jsonl", "human", "csv"])
def test_output_file_in_every_format(problem_store, config_dir, tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    r = run_cli("validate", "--format", fmt, "--output", str(target), "--all-projects")
    assert r.exit_code == 1 and r.stdout == ""
    assert "fact.stale" in target.read_text()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".report")] == []
    # -q only silences stdout: the file is still written
    target.unlink()
    r = run_cli("validate", "-q", "--format", fmt, "--output", str(target), "--all-projects")
    assert r.exit_code == 1 and r.stdout == "" and target.exists()


def test_failed_run_leaves_the_old_file(config_dir, tmp_path):
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "memctl.prom"
    target.write_text("old\n")
    r = run_cli("validate", "--store", str(tmp_path / "no-such-store"), "--format",
                "prometheus", "--output", str(target))
    assert r.exit_code == 3
    assert target.read_text() == "old\n" and sorted(os.listdir(tmp_path / "out")) == ["memctl.prom"]
    r = run_cli("validate", "--format", "prometheus", "--output",
                str(tmp_path / "missing-dir" / "x.prom"), "--all-projects")
    assert r.exit_code == 7 and "memctl: error:" in r.stderr


SECRETS_DOC_PATH = "/var/lib/node_exporter/textfile_collector/memctl_secrets.prom"


def documented_secrets_lines() -> list[str]:
    """Every cron line of ``secrets --help`` and the man page, each with the
    line that follows it when it ends in a backslash (which a crontab rejects)."""
    found = []
    helptext = run_cli("secrets", "--help").stdout.splitlines()
    man = [ln.replace("\\-", "-").replace("\\(rs", "\\").replace("\\e", "\\")
           for ln in (REPO / "man" / "memctl.1").read_text().splitlines()]
    for lines in (helptext, man):
        for i, ln in enumerate(lines):
            if re.match(r"^\s*[\d*/,-]+(\s+[\d*/,-]+){4}\s+memctl secrets", ln):
                found.append(ln.strip() + ("\n" + lines[i + 1].strip()
                                           if ln.rstrip().endswith("\\") else ""))
    return found


def test_secrets_recipe_is_one_crontab_line_everywhere():
    lines = documented_secrets_lines()
    assert len(lines) >= 2, lines        # secrets --help, the man page
    for line in lines:
        assert line == SECRETS_CRON_LINE, line
    fields, command = parse_crontab_line(SECRETS_CRON_LINE)
    assert command.startswith("memctl secrets") and SECRETS_DOC_PATH in command


def test_secrets_recipe_publishes_a_store_with_a_secret(config_dir, tmp_path):
    mem = config_dir / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    p = secretstore.build(tmp_path / "b", seed=5)
    os.rename(p.store, mem / "app-0123456789ab")
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    target = out_dir / "memctl_secrets.prom"
    target.write_text("# the previous report\n")
    _fields, command = parse_crontab_line(SECRETS_CRON_LINE)
    p_run = _run_cron_command(command.replace(SECRETS_DOC_PATH, str(target)), config_dir)
    assert p_run.returncode == 1, p_run.stderr      # a secret was found
    assert p_run.stdout == b""                       # the report went to the file
    text = target.read_text()
    fams = parse_exposition(text)
    assert [s.value for s in fams["memctl_secrets_ok"].samples] == [0]
    assert 'memctl_secrets_findings{project="app-0123456789ab",detector="aws-access-key"' in text
    assert not any(v in text for v in p.values.values())
    assert sorted(os.listdir(out_dir)) == ["memctl_secrets.prom"]   # no temporary file left


@pytest.mark.parametrize("command", ["validate", "secrets"])
@pytest.mark.parametrize("to_file", [False, True], ids=["stdout", "output"])
def test_prometheus_label_of_a_store_name_that_is_not_utf8(config_dir, tmp_path, command, to_file):
    """A store directory named with a byte that is not UTF-8 (x\\xff): the
    project label is valid UTF-8, the name spelt as the JSON output spells it
    (x\\xff, four characters), escaped as the exposition format wants
    (backslash doubled).  secrets ended in exit 70 (UnicodeEncodeError);
    validate wrote the label as x\\udcff, which is no escape of the format."""
    name = os.fsdecode(b"x\xff")
    store_dir = config_dir / "memory" / name
    store_dir.mkdir(parents=True)
    (store_dir / "MEMORY.md").write_text("hi\n")
    doc = orjson.loads(run_cli(command, "--all-projects", "--json").stdout_bytes)
    [spelt] = [p["project"] for p in doc["projects"]]
    assert spelt == "x\\xff"
    target = tmp_path / "out.prom"
    r = run_cli(command, "--all-projects", "--format", "prometheus",
                *(["--output", str(target)] if to_file else []))
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    data = target.read_bytes() if to_file else r.stdout_bytes
    text = data.decode("utf-8")                    # valid UTF-8, strictly
    assert '{project="x\\\\xff"' in text, text
    fams = parse_exposition(text)
    ok = fams[f"memctl_{command}_ok"].samples
    assert [s.labels["project"] for s in ok] == [spelt]


@pytest.mark.parametrize("argv", [["validate", "--all-projects", "--format", "prometheus"],
                                  ["secrets", "--all-projects"], ["projects"]])
def test_a_misspelt_config_dir_is_not_found_not_no_stores(tmp_path, argv):
    """A fresh-eyes review: a crontab's misspelt --config-dir exited 0, ok,
    with no store audited.  Named on the command line and missing: exit 3.
    Chosen by the environment and missing: a machine where lecode never
    ran, no stores, exit 0, as before."""
    missing = tmp_path / "no-such-config"
    r = run_cli("--config-dir", str(missing), *argv)
    assert r.exit_code == 3 and f"--config-dir {missing}: no such directory" in r.stderr, \
        (r.exit_code, r.stderr)
    assert not missing.exists()
    r = run_cli(*argv, env={"LECODE_CONFIG_DIR": str(missing)})
    assert r.exit_code == 0, (r.exit_code, r.stderr)
