"""``validate`` does not count the facts of a database it could not read
(2026-12-07).

A store whose facts.sqlite3 cannot be read (not a database, a newer
schema, busy with --all-projects) was summarised as ``facts: 0 (none)``
and ``facts_total`` 0, ``facts`` all zeros (``--format prometheus``:
``memctl_validate_facts ... 0``): a cron job graphing the count saw every
fact gone.  Now the count is not known: ``facts_total`` and ``facts`` are
null, the text says ``facts unknown``, and the facts metric is left out,
as the sessions count is for a ``sessions/`` that cannot be listed.  A
store with no database, or an empty one, still has 0 facts.
"""

from __future__ import annotations

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli


def _summary(store, *extra):
    r = run_cli("--store", str(store), "--no-state", "validate", "--json", *extra)
    assert r.exit_code in (0, 1), (r.exit_code, r.stderr)
    return orjson.loads(r.stdout)["projects"][0]


@pytest.mark.parametrize("damage", ["garbage", "no_tables", "newer"])
def test_an_unreadable_database_has_no_fact_count(demo_template, tmp_path, damage):
    store = copy_demo(demo_template, tmp_path / "d")
    db = store / "facts.sqlite3"
    if damage == "garbage":
        db.write_bytes(b"garbage!" * 1000)
    elif damage == "no_tables":
        import sqlite3

        db.unlink()
        c = sqlite3.connect(db)
        c.execute("CREATE TABLE other (x)")
        c.commit()
        c.close()
    else:
        import sqlite3

        c = sqlite3.connect(db)
        c.execute("PRAGMA user_version = 99")
        c.commit()
        c.close()
    s = _summary(store)
    assert s["facts_total"] is None and s["facts"] is None, s
    text = run_cli("--store", str(store), "--no-state", "validate")
    assert "facts unknown" in text.stdout and "facts: 0" not in text.stdout, text.stdout
    prom = run_cli("--store", str(store), "--no-state", "validate", "--format", "prometheus")
    assert "memctl_validate_facts{" not in prom.stdout, prom.stdout
    assert "# TYPE memctl_validate_facts gauge" in prom.stdout


@pytest.mark.parametrize("shape", ["absent", "empty"])
def test_no_database_is_still_no_fact(demo_template, tmp_path, shape):
    store = copy_demo(demo_template, tmp_path / "d")
    db = store / "facts.sqlite3"
    db.unlink()
    if shape == "empty":
        db.write_bytes(b"")
    s = _summary(store)
    assert s["facts_total"] == 0 and s["facts"] == {
        "valid": 0, "missing": 0, "stale": 0, "hidden": 0, "unverified": 0}, s
    text = run_cli("--store", str(store), "--no-state", "validate")
    assert "facts: 0 (none)" in text.stdout, text.stdout


def test_a_readable_database_is_counted(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    s = _summary(store)
    assert s["facts_total"] == sum(s["facts"].values()) > 0, s


def test_all_projects_one_unreadable_database(world, tmp_path):
    cfg = world.fresh(tmp_path / "w")
    stores = sorted(p for p in (cfg / "memory").iterdir() if (p / "facts.sqlite3").exists())
    (stores[0] / "facts.sqlite3").write_bytes(b"garbage!" * 1000)
    r = run_cli("--config-dir", str(cfg), "--no-state", "validate", "--all-projects", "--json")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    by = {p["store"]: p for p in orjson.loads(r.stdout)["projects"]}
    assert by[str(stores[0])]["facts_total"] is None


def test_a_bundle_exported_before_verifies_as_before(demo_template, tmp_path):
    """A bundle exported before the change recorded 0 facts for a database
    it could not read; verify, which now counts none (null), takes that
    old form for the same answer, not for a changed summary."""
    from .test_bundle_1207d import _redigest

    store = copy_demo(demo_template, tmp_path / "d")
    (store / "facts.sqlite3").write_bytes(b"garbage!" * 1000)
    out = tmp_path / "b.tar"
    r = run_cli("--store", str(store), "--no-state", "export", "-o", str(out))
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert "facts: unknown" in r.stdout, r.stdout

    def old_form(m: dict) -> None:
        v = m["validate"]
        assert v["facts_total"] is None and v["facts"] is None, v
        v["facts_total"] = 0
        v["facts"] = {"valid": 0, "missing": 0, "stale": 0, "hidden": 0, "unverified": 0}

    old = tmp_path / "old.tar"
    _redigest(out, old, old_form)
    ok = run_cli("verify", str(old))
    assert ok.exit_code == 0, (ok.exit_code, ok.stdout, ok.stderr)

    def tampered(m: dict) -> None:
        m["validate"]["facts_total"] = 3

    bad = tmp_path / "bad.tar"
    _redigest(out, bad, tampered)
    assert run_cli("verify", str(bad)).exit_code == 1


def test_an_entry_that_is_no_store_still_has_no_fact(world, tmp_path):
    """A code review: a file or a symlink in ``memory/`` (refused, not a
    store) lost its 0 facts with the change; it has no database: 0, as its
    0 sessions."""
    cfg = world.fresh(tmp_path / "w")
    (cfg / "memory" / ".DS_Store").write_bytes(b"x")
    (cfg / "memory" / "linky").symlink_to(tmp_path)
    r = run_cli("--config-dir", str(cfg), "--no-state", "validate", "--all-projects", "--json")
    by = {p["project"]: p for p in orjson.loads(r.stdout)["projects"]}
    for name in (".DS_Store", "linky"):
        assert by[name]["facts_total"] == 0 and by[name]["sessions"] == 0, by[name]
    prom = run_cli("--config-dir", str(cfg), "--no-state", "validate", "--all-projects",
                   "--format", "prometheus").stdout
    assert 'memctl_validate_facts{project=".DS_Store",status="valid"} 0' in prom, prom


def test_the_library_summary_says_none_when_not_known(demo_template, tmp_path):
    """A code review: the library's Summary kept ``facts_total`` 0 where
    ``validate`` said null."""
    from lecode_memctl.core import validate_store
    from lecode_memctl.core.layout import store_at

    store = copy_demo(demo_template, tmp_path / "d")
    (store / "facts.sqlite3").write_bytes(b"garbage!" * 1000)
    _, summary = validate_store(store_at(store))
    assert summary.facts_total is None and not summary.facts, summary
