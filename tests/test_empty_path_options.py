"""An empty path given to --store, --project or --output is a usage error,
not the working directory (Path("") is "."): `memctl --store "" secrets -o
out.csv` audited the working directory as a store and exited 0."""

from __future__ import annotations

import pytest

from .conftest import run_cli


@pytest.mark.parametrize("args", [
    ["--store", "", "facts"],
    ["facts", "--store", ""],
    ["--store", "", "grep", "x"],
    ["validate", "--store", ""],
    ["--project", "", "where"],
    ["-C", "", "facts"],
    ["show", "-C", ""],
    # --output: secrets wrote its report to "." ('internal error: ValueError:
    # PosixPath('.') has an empty name', exit 70); validate said "--output .:
    # is a directory", export "already exists" (exit 4)
    ["secrets", "--output", ""],
    ["secrets", "-o", ""],
    ["secrets", "--all-projects", "--output", ""],
    ["validate", "--output", ""],
    ["validate", "--all-projects", "-o", ""],
    ["export", "-o", ""],
])
def test_empty_path_option_is_a_usage_error(args, tmp_path, monkeypatch, config_dir):
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    r = run_cli(*args)
    assert r.exit_code == 2, (args, r.exit_code, r.stdout, r.stderr)
    assert "empty" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert sorted(tmp_path.rglob("*")) == before
