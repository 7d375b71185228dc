"""``memctl history``'s text view of a revision number stored as no
integer (a BLOB, a text; docs/FORMAT.md: shown as null): written as the
view writes a value it has not ("-", as for a missing source), never as
Python's ``None``."""

from __future__ import annotations

import pytest

from .builders import copy_demo, store_sql
from .conftest import run_cli

PREF = "80fa60fdfe856452"       # revision 2, corrected from revision 1
VERIFIED = "c283ab7d8ed884e4"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def test_a_revision_stored_as_no_integer_is_no_none_in_the_text_view(demo):
    store_sql(demo, "PRAGMA ignore_check_constraints = ON",
              f"UPDATE revisions SET revision = x'01' WHERE fact_id = '{PREF}' AND revision = 1",
              f"UPDATE facts SET revision = 'two' WHERE fact_id = '{VERIFIED}'")
    base = ("--store", str(demo), "--no-state", "history")
    r = run_cli(*base, PREF)
    assert r.exit_code == 0, r.stderr
    assert "None" not in r.stdout
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"fact {PREF}  revision 2  ")
    assert any(line.startswith("  revision -  ") for line in lines), r.stdout
    r = run_cli(*base, VERIFIED)
    assert r.exit_code == 0, r.stderr
    assert "None" not in r.stdout
    assert r.stdout.startswith(f"fact {VERIFIED}  revision -  "), r.stdout
