"""Options and arguments given hostile values: each case pins a bug a probe of
every command's options found (empty strings, missing paths, odd bytes,
numbers out of range...), fixed since.  The rest of the probe found nothing:
tests/test_bad_input.py and tests/test_empty_path_options.py hold the corpus."""

from __future__ import annotations

import pytest

from .conftest import run_cli


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memctl: error: "), stderr
    return lines[0]


def test_where_an_empty_path_is_a_usage_error(tmp_path, monkeypatch, config_dir):
    """``memctl where ""`` described the working directory's project (typer
    made Path("") of it, which is "."), exit 0, where ``-C ""`` is exit 2."""
    monkeypatch.chdir(tmp_path)
    r = run_cli("where", "")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "empty" in _one_error_line(r.stderr)
    r = run_cli("where", "--json", "")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)


def test_where_a_missing_path_is_not_found(tmp_path, config_dir):
    """``memctl where /no/such`` printed a project root and a store for a
    directory that does not exist, exit 0, where ``-C /no/such where`` says
    "no such directory" (exit 3)."""
    missing = tmp_path / "no" / "such"
    r = run_cli("where", str(missing))
    assert r.exit_code == 3, (r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert str(missing) in line and "no such directory" in line, line
    assert not (config_dir / "memory").exists()
    r = run_cli("where", str(tmp_path))          # an existing one still works
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("args", [
    ["verify", ""],                      # verified the working directory as a bundle: exit 1
    ["demo", "--into", ""],              # built the demo in the working directory
    ["projects", "--root", ""],          # took the working directory as a project
    ["projects", "--root", "/", "--root", ""],
    ["secrets", "--allowlist", ""],      # ".: cannot read the allowlist: Is a directory"
    ["--store", "{store}", "redact", "--dry-run", "--allowlist", ""],
])
def test_an_empty_path_is_a_usage_error_not_the_working_directory(args, tmp_path, monkeypatch,
                                                                   config_dir):
    """typer makes Path("") of an empty PATH, which is "."; a path option or
    argument given "" is refused, as --project and --output are."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "store").mkdir()
    monkeypatch.chdir(work)
    r = run_cli(*(a.replace("{store}", str(tmp_path / "store")) for a in args))
    assert r.exit_code == 2, (args, r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert "empty" in line, line
    assert list(work.iterdir()) == []
