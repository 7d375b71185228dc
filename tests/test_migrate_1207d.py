"""migrate-legacy and where review fixes (2026-12-07, fourth pass): a
--config-dir that does not exist or is a file, the count an interrupted
copy gives, the legacy store in ``where``, the hint for held-back
duplicates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lecode_memctl.core.identity import slug

from .conftest import make_repo, run_cli


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def error_doc(code: str, message: str, exit_code: int) -> str:
    import orjson

    return orjson.dumps({"type": "error", "error": {"code": code, "message": message,
                                                     "exit_code": exit_code}}).decode() + "\n"


# ---------------------------------------------------------------- 1. --config-dir

@pytest.mark.parametrize("args", [("projects",), ("projects", "--json"),
                                  ("migrate-legacy", "--dry-run"),
                                  ("migrate-legacy", "--dry-run", "--json"),
                                  ("migrate-legacy", "--yes")])
def test_a_config_dir_option_that_does_not_exist_is_exit_3(tmp_path, project_cwd, args):
    """A misspelt --config-dir is a typo, not "no legacy stores" (exit 0
    before): migrate-legacy says so as projects does."""
    missing = tmp_path / "no-such-config"
    r = run_cli("--config-dir", str(missing), *args)
    message = f"--config-dir {missing}: no such directory"
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: {message}\n"
    assert r.stdout == (error_doc("not_found", message, 3) if "--json" in args else "")
    assert not missing.exists()


@pytest.mark.parametrize("args", [("projects",), ("projects", "--json"),
                                  ("migrate-legacy", "--dry-run"),
                                  ("migrate-legacy", "--yes", "--json")])
def test_a_config_dir_option_that_is_a_file_is_a_usage_error(tmp_path, project_cwd, args):
    """A regular file given as --config-dir is exit 2, "not a directory", as
    for projects (it was exit 5, "DIR/memory: cannot list: Not a directory")."""
    f = tmp_path / "cfg-file"
    f.write_text("x\n")
    r = run_cli("--config-dir", str(f), *args)
    message = f"--config-dir {f}: not a directory"
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: {message}\n"
    assert r.stdout == (error_doc("usage", message, 2) if "--json" in args else "")


def test_a_config_dir_from_the_environment_that_does_not_exist_is_no_legacy_store(
        tmp_path, project_cwd, monkeypatch):
    """Not given on the command line (the environment's, the default's): a
    machine where lecode never ran, no legacy stores, exit 0, as before."""
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(tmp_path / "never-ran"))
    r = run_cli("migrate-legacy", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "legacy stores: none found" in r.stdout


def test_a_config_dir_option_that_exists_migrates_as_before(tmp_path, config_dir):
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    (repo / "sub").mkdir()
    other = tmp_path / "other-config"
    put(legacy_path(other, repo / "sub") / "MEMORY.md", "m\n")
    r = run_cli("--config-dir", str(other), "--project", str(repo / "sub"), "migrate-legacy",
                "--yes")
    assert r.exit_code == 0, r.stderr
    assert (other / "memory" / slug(str(repo)) / "MEMORY.md").read_text() == "m\n"


def test_an_empty_from_is_refused_before_the_config_dir_is_looked_at(tmp_path, project_cwd):
    """A usage error of the command's own options comes first: an empty
    --from is exit 2 whatever the --config-dir."""
    r = run_cli("--config-dir", str(tmp_path / "no-such-config"), "migrate-legacy", "--yes",
                "--from", "")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "--from needs a path" in r.stderr
