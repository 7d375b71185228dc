"""migrate-legacy review fixes (2026-12-07): discovery outside Git, the
first store's unreadable files, the dry run's exit 7, sessions/, skipped
user Markdown as conflicts, ``blocked``, destination states, interrupts,
newlines in paths, the hint's wording."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from lecode_memctl.core.identity import slug
from lecode_memctl.core.migrate import classify_stores, discover_legacy_stores, plan_migration

from .conftest import run_cli


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


# ---------------------------------------------------------------- 1. outside Git

def test_outside_git_other_directories_stores_are_not_migrated(tmp_path, config_dir):
    """Outside Git every directory is its own project (the contract: the
    project root is the working directory itself), so the stores of the
    directories under it are their projects' stores, not legacy ones."""
    home = Path(os.path.realpath(tmp_path)) / "h"
    proj_b = home / "projB"
    proj_b.mkdir(parents=True)
    b = legacy_path(config_dir, proj_b)
    put(b / "MEMORY.md", "B\n")
    put(b / "notes" / "b.md", "secret\n")
    d = discover_legacy_stores(config_dir, home)
    assert d.project.kind == "not a git checkout"
    assert d.legacy == [] and d.dirs_scanned == 0
    r = run_cli("--project", str(home), "migrate-legacy", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["legacy_stores"] == [] and doc["items"] == []
    # --from still applies there
    p = plan_migration(config_dir, home, extra=[b])
    assert [(i.name, i.action) for i in p.items] == [("MEMORY.md", "copy"), ("notes/b.md", "copy")]
    # and projB's store is nobody's legacy store: home, a known root, does not claim it
    classes, _ = classify_stores(config_dir, [home])
    assert {c.path: c.kind for c in classes}[b] == "unclaimed"
    classes, _ = classify_stores(config_dir, [home, proj_b])
    assert {c.path: c.kind for c in classes}[b] == "project"

