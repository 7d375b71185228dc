"""``validate``'s report for people holds each finding's line, one part per
project, check and severity, past ``cmd_audit.REPORT_BUCKET_BYTES`` (or
``HELD_IN_MEMORY``, the smaller) in an unnamed temporary file: the same
bytes as the report made from every finding held as an object (issue 13:
100,000 findings, 115 -> 39 MiB)."""

from __future__ import annotations

import tempfile

import pytest

from lecode_memctl.cli import cmd_audit

from .conftest import run_cli
from .test_audit import build_clean, build_db_stores, build_planted
from .test_validate_json_held import _legacy_facts, audit_fails_at, peaks_at_findings


def _report(monkeypatch, bound, *args: str) -> tuple[int, str, str]:  # noqa: ANN001
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", bound)
    r = run_cli("--no-state", "validate", *args)
    return r.exit_code, r.stdout, r.stderr


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


def test_the_peak_does_not_follow_the_findings(demo_template, tmp_path):
    """At 8,000 and 32,000 findings (before: 23 MiB apart; 6.5 now)."""
    peaks = peaks_at_findings(demo_template, tmp_path, "validate")
    assert peaks[1] - peaks[0] < 12 << 10, peaks
