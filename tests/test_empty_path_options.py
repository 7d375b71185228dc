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


def test_migrate_legacy_from_an_empty_path_is_refused(tmp_path, monkeypatch):
    """``migrate-legacy --from ""`` took the current directory (Path("") is
    ".") as a legacy store, and copied a project's notes/ into the memory
    store.  An empty --from is a usage error, nothing copied."""
    from .conftest import run_cli

    proj = tmp_path / "proj"
    (proj / "notes").mkdir(parents=True)
    (proj / "notes" / "todo.md").write_text("project file\n")
    monkeypatch.chdir(proj)
    r = run_cli("--config-dir", str(tmp_path / "cfg"), "migrate-legacy", "--yes", "--from", "",
                "--json")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "--from needs a path" in r.stderr
    assert not (tmp_path / "cfg" / "memory").exists()
