"""validate --all-projects, whose report a cron job publishes (review of
2026-12-07): one entry of memory/ never stops the others' report."""

from __future__ import annotations

import os

import pytest

from . import outkit
from .conftest import run_cli, tree_hash
from .promparse import parse_exposition


@pytest.fixture
def good(config_dir, tmp_path):
    store, _ids = outkit.build(config_dir, tmp_path / "proj", facts=3)
    return store


def _prom(target) -> dict:
    fams = parse_exposition(target.read_text())
    return {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_ignoring_the_finding_of_a_refused_entry_does_not_stop_the_run(config_dir, good, tmp_path,
                                                                        kind):
    """--ignore of the code an entry of memory/ that is not a store gives
    (layout.unexpected_file, layout.symlink) made the run exit 5 ("not a
    directory") with no --output file: the refusal, its finding ignored,
    was taken for "not refused" and the entry read as a store."""
    memory = config_dir / "memory"
    if kind == "file":
        (memory / "README.txt").write_text("notes\n")
        code = "layout.*"
    else:
        os.symlink(good.path, memory / "linked-0123456789ab")
        code = "layout.symlink"
    before = tree_hash(config_dir)
    target = tmp_path / "out" / "m.prom"
    target.parent.mkdir()
    r = run_cli("--no-state", "validate", "--all-projects", "--ignore", code, "--format",
                "prometheus", "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    ok = _prom(target)
    assert ok[good.slug] == 1 and len(ok) == 2, ok
    r = run_cli("--no-state", "validate", "--all-projects", "--ignore", code, "--json")
    assert r.exit_code == 0, r.stderr
    assert tree_hash(config_dir) == before
