"""No store for this directory: every command that needs one exits 3 with the
same one-line message, and creates nothing (issue 12.7: 'memctl facts' used to
print 'no facts' with exit 0 and 'context' printed nothing, where sessions,
validate and show exit 3, each with its own wording)."""

from __future__ import annotations

import pytest

from lecode_memctl.cli.registry import COMMANDS

from .conftest import run_cli

FID = "0123456789abcdef"
SID = "s1"

# The arguments each command needs to get as far as opening the store.
NEEDS_STORE: dict[str, list[str]] = {
    "show": [], "log": [], "notes": [], "search": ["x"],
    "sessions": [], "read": [SID, "1", "2"],
    "facts": [], "recall": [FID], "history": [FID],
    "correct": [FID, "1", SID, "1", "2", "new text"], "forget": [FID, "--yes"],
    "context": [], "validate": [], "usage": [], "export": ["--output", "bundle.tar"],
    "grep": ["x"], "secrets": [], "redact": ["--dry-run"],
}
# Commands that work without a store: they report on it, list stores, or create one.
NO_STORE_NEEDED = {"where", "config", "projects", "edit", "migrate-legacy", "demo", "verify",
                   "schema", "completion", "man"}


def test_every_command_is_classified():
    names = {name for name, _, _ in COMMANDS}
    assert names == set(NEEDS_STORE) | NO_STORE_NEEDED


@pytest.mark.parametrize("command", sorted(NEEDS_STORE))
def test_missing_project_store_is_exit_3_with_one_message(command, tmp_path, config_dir):
    proj = tmp_path / "proj"
    proj.mkdir()
    r = run_cli("--project", str(proj), command, *NEEDS_STORE[command])
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stdout == ""
    expected = f"memctl: error: no memory store for {proj} (expected at {config_dir / 'memory'}"
    assert r.stderr.startswith(expected), r.stderr
    assert r.stderr.endswith("('memctl where' explains the lookup)\n"), r.stderr
    assert r.stderr.count("\n") == 1
    assert not config_dir.exists() or not any(config_dir.rglob("*")), list(config_dir.rglob("*"))


@pytest.mark.parametrize("command", sorted(NEEDS_STORE))
def test_missing_store_option_directory_is_exit_3_with_one_message(command, tmp_path):
    missing = tmp_path / "no-such-store"
    r = run_cli("--store", str(missing), command, *NEEDS_STORE[command])
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: no memory store (expected at {missing})\n"
    assert not missing.exists()


@pytest.mark.parametrize("command", ["facts", "context", "sessions"])
def test_missing_store_json_error_document(command, tmp_path, config_dir):
    import orjson

    proj = tmp_path / "proj"
    proj.mkdir()
    r = run_cli("--project", str(proj), command, "--json")
    assert r.exit_code == 3
    doc = orjson.loads(r.stdout_bytes)
    assert doc["error"]["code"] == "not_found" and doc["error"]["exit_code"] == 3


def test_store_directory_symlink_is_refused_the_same_way(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    for command in ("facts", "show", "sessions", "validate"):
        r = run_cli("--store", str(link), command, *NEEDS_STORE[command])
        assert r.exit_code == 5, (command, r.stderr)
        assert "symbolic link" in r.stderr


def test_no_store_names_a_store_of_the_same_project_name(tmp_path):
    """A fresh-eyes review: a checkout moved elsewhere had 'no memory store',
    and nothing pointed at its old store (the same name, another hash)."""
    from .conftest import run_cli

    cfg = tmp_path / "cfg"
    old = cfg / "memory" / "demo-app-0123456789ab"
    (old / "sessions").mkdir(parents=True)
    (cfg / "memory" / "other-0123456789ab").mkdir()
    moved = tmp_path / "moved" / "demo-app"
    moved.mkdir(parents=True)
    r = run_cli("--config-dir", str(cfg), "--project", str(moved), "facts")
    assert r.exit_code == 3, r.stderr
    assert str(old) in r.stderr and "--store DIR" in r.stderr, r.stderr
    assert "other-0123456789ab" not in r.stderr
    r = run_cli("--config-dir", str(cfg), "--project", str(tmp_path / "moved"), "facts")
    assert r.exit_code == 3 and "same name" not in r.stderr, r.stderr
