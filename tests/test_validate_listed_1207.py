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


@pytest.mark.parametrize("gone", ["000-0123456789ab", "zzz-0123456789ab"])
def test_a_store_gone_before_its_audit_is_left_out(config_dir, good, tmp_path, monkeypatch, gone):
    """A store removed after memory/ was listed, before its audit began,
    stopped the whole run with exit 3 ("no memory store") and no --output
    file.  It is left out, as if removed before the listing; config.toml's
    findings go with the first store audited."""
    from lecode_memctl.core import layout

    real = layout.memory_names
    monkeypatch.setattr(layout, "memory_names", lambda cfg: sorted([*real(cfg), gone]))
    target = tmp_path / "m.prom"
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "prometheus",
                "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert _prom(target) == {good.slug: 1}
    fams = parse_exposition(target.read_text())
    assert fams["memctl_validate_stores"].samples[0].value == 1
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert gone not in r.stdout
    (config_dir / "config.toml").write_text("[memory\n")
    r = run_cli("--no-state", "validate", "--all-projects", "--format", "jsonl")
    assert r.exit_code == 1, r.stderr
    assert gone not in r.stdout and '"config.invalid"' in r.stdout, r.stdout
