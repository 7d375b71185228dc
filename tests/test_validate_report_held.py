"""``validate``'s report for people holds each finding's line, one part per
project, check and severity; past ``cmd_audit.HELD_IN_MEMORY`` bytes held
by all the parts together, in one unnamed temporary file they share: the
same bytes as the report made from every finding held as an object (issue
13: 100,000 findings, 115 -> 39 MiB)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from lecode_memctl.cli import cmd_audit

from .conftest import isolate, run_cli
from .test_audit import build_clean, build_db_stores, build_planted
from .test_validate_json_held import (
    _legacy_facts,
    audit_fails_at,
    filling_temporary_files,
    peaks_at_findings,
)


def _report(monkeypatch, bound, *args: str) -> tuple[int, str, str]:  # noqa: ANN001
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", bound)
    r = run_cli("--no-state", "validate", *args)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("bound", [0, 1, 700, 1 << 20])
def test_the_report_is_the_one_made_whole(config_dir, monkeypatch, bound):
    planted = build_planted(config_dir)
    _legacy_facts(planted, 120)
    for args in (("--store", str(planted)), ("--store", str(planted), "--deep")):
        want = _report(monkeypatch, None, *args)
        assert want[0] == 1 and want[1].count("\n") > 120
        assert _report(monkeypatch, bound, *args) == want


@pytest.mark.parametrize("bound", [0, 1 << 20])
def test_every_project_of_all_projects(config_dir, monkeypatch, bound):
    build_planted(config_dir)
    build_db_stores(config_dir)
    build_clean(config_dir, "other-0123456789ab")
    want = _report(monkeypatch, None, "--all-projects")
    assert want[1].count(": PROBLEMS") >= 4
    assert _report(monkeypatch, bound, "--all-projects") == want


def test_without_a_temporary_file_the_lines_stay_in_memory(config_dir, monkeypatch):
    planted = build_planted(config_dir)
    _legacy_facts(planted, 300)
    want = _report(monkeypatch, None, "--store", str(planted))
    calls = []

    def no_room(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    assert _report(monkeypatch, 0, "--store", str(planted)) == want
    assert calls


def test_an_error_in_the_audit_prints_no_part_of_the_report(config_dir, monkeypatch):
    planted = build_planted(config_dir)
    _legacy_facts(planted, 300)
    audit_fails_at(monkeypatch, 150)
    want = _report(monkeypatch, None, "--store", str(planted))
    assert want[0] == 5 and want[1] == "" and "damaged (test)" in want[2]
    assert _report(monkeypatch, 0, "--store", str(planted)) == want


@pytest.mark.heavy
def test_the_peak_does_not_follow_the_findings(demo_template, tmp_path):
    """At 8,000 and 32,000 findings (before: 23 MiB apart; 6.5 now)."""
    peaks = peaks_at_findings(demo_template, tmp_path, "validate")
    assert peaks[1] - peaks[0] < 12 << 10, peaks


def _temporary_files(monkeypatch) -> list[int]:  # noqa: ANN001
    """Count the temporary files made from now on."""
    real = tempfile.TemporaryFile
    made: list[int] = []

    def counted(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        made.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(tempfile, "TemporaryFile", counted)
    return made


def _stores_with_findings(config_dir: Path, n: int) -> None:
    """``n`` stores, each with legacy facts (warnings) and a planted problem of
    another check, so that every store has several parts."""
    build_planted(config_dir)
    for i in range(n):
        store = build_clean(config_dir, f"s{i:02d}-0123456789ab")
        _legacy_facts(store, 40)
        (store / "stray.txt").write_text("not part of the layout\n")


# (10 stores, not 40 as it was: a file per part gives 20 files or more
# either way, and every part still fits in the bound)
MANY_STORES = 10


@pytest.fixture(scope="module")
def many_stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config dir of ``_stores_with_findings(..., MANY_STORES)``, built
    once for the tests below (each works on a copy: ``_copy_of``)."""
    top = tmp_path_factory.mktemp("many")
    with pytest.MonkeyPatch.context() as mp:
        cfg = isolate(mp, top)
        _stores_with_findings(cfg, MANY_STORES)
    return cfg


def _copy_of(template: Path, config_dir: Path) -> None:
    """``template``'s stores and config.toml in ``config_dir`` (modes, times
    and the planted symbolic link kept)."""
    shutil.copytree(template, config_dir, symlinks=True, dirs_exist_ok=True)


@pytest.mark.heavy
def test_every_part_shares_one_temporary_file(config_dir, monkeypatch, many_stores):
    """Many stores of several parts each, every part spilled (a bound of
    0): one temporary file, not one per part (which held a descriptor each
    to the end: with ``ulimit -n 32``, the 18th store's transcripts could
    not be opened, and validate reported them unreadable)."""
    _copy_of(many_stores, config_dir)
    want = _report(monkeypatch, None, "--all-projects")
    made = _temporary_files(monkeypatch)
    assert _report(monkeypatch, 0, "--all-projects") == want
    assert len(made) == 1, len(made)


@pytest.mark.heavy
def test_below_the_bound_nothing_goes_to_a_file(config_dir, monkeypatch, many_stores):
    """All the parts together under HELD_IN_MEMORY: no temporary file (a
    64 KiB bound per part put a report of many stores in $TMPDIR, where a
    later store's snapshot copy then found no room)."""
    _copy_of(many_stores, config_dir)
    _legacy_facts(build_clean(config_dir, "big-0123456789ab"), 900)   # (a part of 90 KB)
    want = _report(monkeypatch, None, "--all-projects")
    made = _temporary_files(monkeypatch)
    assert _report(monkeypatch, 1 << 20, "--all-projects") == want
    assert made == []


def test_a_shared_file_that_fills_up_gives_every_part_back(config_dir, monkeypatch):
    """The shared file takes 5,000 bytes, then is full: every part takes its
    lines back into memory, and the file is closed (its space freed)."""
    _stores_with_findings(config_dir, 6)
    want = _report(monkeypatch, None, "--all-projects")
    closed = filling_temporary_files(monkeypatch)
    assert _report(monkeypatch, 0, "--all-projects") == want
    assert closed == [True]
