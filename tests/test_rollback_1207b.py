"""A rolled-back facts database stays reported after a later forget, and a
live fact whose id is forgotten is a finding (a review of ``validate`` as a
cron audit, 2026-12-07).

- memctl's mark (``core.seen``) kept only the highest generation and
  exclusion count: one later forget on the rolled-back database (memctl's or
  the agent's) raised them again, ``validate`` said OK and the forgotten fact
  was valid again.  The mark now keeps the forgotten ids it saw.  (A first
  version also made ``forget``/``redact`` refuse a store below the mark; a
  code review found that refused the very forget that repairs it: gone.)
- a live fact whose id is in ``forgotten`` (its rows put back by hand) passed
  ``validate`` with two ``fact.suppressed`` warnings; it is now
  ``db.forgotten_fact_present``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli

VERIFIED = "c283ab7d8ed884e4"
PREFERENCE = "80fa60fdfe856452"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def _marks() -> list[Path]:
    d = Path(os.environ["HOME"]) / ".local" / "state" / "lecode-memctl" / "stores"
    return sorted(d.glob("*.json")) if d.is_dir() else []


def _findings(store: Path, code: str) -> list[dict]:
    r = run_cli("--store", str(store), "validate", "--json")
    assert r.exit_code in (0, 1), r.stderr
    return [f for f in orjson.loads(r.stdout)["findings"] if f["code"] == code]


def _forget_then_restore(demo: Path, tmp_path: Path) -> Path:
    """Back the database up, forget PREFERENCE (the mark recorded), put the
    backup back; returns the backup."""
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(demo / "facts.sqlite3", backup)
    r = run_cli("--store", str(demo), "forget", PREFERENCE, "--yes")
    assert r.exit_code == 0, r.stderr
    shutil.copy(backup, demo / "facts.sqlite3")
    return backup


# ---------------------------------------------------------------- 1: the mark keeps ids

def test_a_later_forget_does_not_hide_the_roll_back_and_forgetting_the_lost_id_repairs(
        demo, tmp_path):
    """memctl forget of another fact on the restored database raised the
    numbers over the mark's: validate said OK, the forgotten fact valid."""
    _forget_then_restore(demo, tmp_path)
    r = run_cli("--store", str(demo), "forget", VERIFIED, "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    (found,) = _findings(demo, "db.rolled_back")
    assert PREFERENCE in found["message"]
    r = run_cli("--store", str(demo), "forget", PREFERENCE, "--yes")   # the repair
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert _findings(demo, "db.rolled_back") == []


def test_a_later_forget_by_the_agent_does_not_hide_the_roll_back(demo, tmp_path):
    from lecode_memctl.core import open_project

    _forget_then_restore(demo, tmp_path)
    assert len(_findings(demo, "db.rolled_back")) == 1
    with open_project(store=demo) as p:         # the agent forgets another fact
        p.forget(VERIFIED)
    (found,) = _findings(demo, "db.rolled_back")
    assert PREFERENCE in found["message"]
    assert "1 fact(s) it saw forgotten" in found["message"]
    # and it stays reported (the next validate does not lower the mark)
    assert len(_findings(demo, "db.rolled_back")) == 1


def test_a_mark_without_ids_is_read_and_then_keeps_them(demo, tmp_path):
    from lecode_memctl.core import seen

    assert run_cli("--store", str(demo), "forget", PREFERENCE, "--yes").exit_code == 0
    (path,) = _marks()
    doc = orjson.loads(path.read_bytes())
    ids = doc["forgotten"]
    assert ids[PREFERENCE] == 2
    del doc["forgotten"]                        # as written before 2026-12-07
    path.write_bytes(orjson.dumps(doc))
    mark = seen.load(seen.state_dir(), demo)
    assert mark is not None and mark.forgotten == () and mark.generation == 2
    assert _findings(demo, "db.rolled_back") == []
    assert orjson.loads(path.read_bytes())["forgotten"] == ids


def test_the_ids_kept_are_capped_latest_first(tmp_path):
    from lecode_memctl.core import seen

    state, store = tmp_path / "state", tmp_path / "store"
    store.mkdir()
    ids = {f"{i:016x}": i + 1 for i in range(seen.MAX_FORGOTTEN + 10)}
    mark = seen.record(state, store, len(ids), len(ids), slug="s", forgotten=ids)
    assert mark is not None and len(mark.forgotten) == seen.MAX_FORGOTTEN
    assert mark.forgotten[0] == (f"{len(ids) - 1:016x}", len(ids))
    assert f"{0:016x}" not in dict(mark.forgotten)
    again = seen.load(state, store)
    assert again == mark                         # within the file's size limit
    # an id seen, no longer forgotten: a roll-back, the numbers as high
    assert seen.regression(again, len(ids), len(ids), slug="s",
                           forgotten=set(ids) - {mark.forgotten[5][0]})
    assert not seen.regression(again, len(ids), len(ids), slug="s", forgotten=set(ids))
    assert not seen.regression(again, len(ids), len(ids), slug="s", forgotten=None)


def test_redact_that_forgets_runs_on_a_store_below_its_mark(tmp_path):
    """A redaction must not wait for a roll-back to be settled (a first
    version refused it, exit 4): it erases, and the roll-back stays
    reported."""
    from . import secretstore

    planted = secretstore.build(tmp_path / "p", seed=11)
    store, fact = planted.store, planted.facts["password"]
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(store / "facts.sqlite3", backup)
    assert run_cli("--store", str(store), "forget", fact, "--yes").exit_code == 0
    shutil.copy(backup, store / "facts.sqlite3")
    plan = run_cli("--store", str(store), "redact", "--dry-run", "--json")
    assert orjson.loads(plan.stdout)["plan"]["forget_facts"] == [fact]
    r = run_cli("--store", str(store), "redact", "--yes")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert run_cli("--store", str(store), "secrets", "-q").exit_code == 0
    # (its plan forgot the lost fact again: the roll-back is repaired)
    assert _findings(store, "db.rolled_back") == []


# ---------------------------------------------------------------- 2: a forgotten id stored again

def test_a_live_fact_whose_id_is_forgotten_is_an_error(demo, tmp_path):
    """/tmp/rv9-scratch/repro2.sh: the forgotten fact's rows put back by hand
    from a backup; validate said only fact.suppressed (warnings)."""
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(demo / "facts.sqlite3", backup)
    assert run_cli("--store", str(demo), "forget", PREFERENCE, "--yes").exit_code == 0
    db = sqlite3.connect(demo / "facts.sqlite3")
    with db:
        db.execute("ATTACH ? AS b", (str(backup),))
        for table in ("facts", "revisions", "source_refs"):
            db.execute(f"INSERT INTO {table} SELECT * FROM b.{table} WHERE fact_id = ?",
                       (PREFERENCE,))
    db.close()
    r = run_cli("--store", str(demo), "validate", "--json")
    assert r.exit_code == 1, r.stderr
    found = orjson.loads(r.stdout)["findings"]
    (present,) = [f for f in found if f["code"] == "db.forgotten_fact_present"]
    assert present["severity"] == "error" and present["fact_id"] == PREFERENCE
    assert "forgotten" in present["message"]
    # (the rows put back are the store's own: no roll-back of the numbers)
    assert [f for f in found if f["code"] == "db.rolled_back"] == []
    # forgetting it again deletes the rows: nothing reported
    r = run_cli("--store", str(demo), "forget", PREFERENCE, "--yes")
    assert r.exit_code == 0, r.stderr
    assert _findings(demo, "db.forgotten_fact_present") == []
    assert _findings(demo, "db.rolled_back") == []


# ---------------------------------------------------------------- 3: the epoch check's limit

def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_default_modes_epoch_limit_is_stated():
    """Without --deep the epoch check trusts a transcript's last generated
    message; after a roll-back epochs decrease, so a session that went on
    hides session.epoch_ahead (test below): FORMAT.md and validate --help
    say so, and what a cron job that must catch rollbacks runs."""
    from .conftest import REPO

    fmt = _words((REPO / "docs" / "FORMAT.md").read_text())
    assert "**A limit of the default mode:**" in fmt
    assert "A cron job that must catch a rollback runs `validate --deep`" in fmt
    assert "a cron job that must catch rollbacks runs `validate --deep`" in fmt
    r = run_cli("validate", "--help")
    assert r.exit_code == 0
    assert "a cron job that must catch rollbacks runs --deep" in _words(r.stdout)


def test_a_session_gone_on_after_a_restore_hides_the_epoch_from_the_default_mode(tmp_path):
    """/tmp/rv9-scratch/repro4b.py: the limit, as it is (--deep finds it)."""
    from lecode_memctl.core import open_project

    store = tmp_path / "cfg" / "memory" / "proj"
    store.mkdir(parents=True, mode=0o700)
    with open_project(store=store) as p:
        with p.sessions.create("old") as w:
            u = w.append_message("user", "My token is hunter2.")
        fact = p.remember("The user's token is hunter2.",
                          p.sessions.source_snapshot("old", u, u).ref).fact
    shutil.copy(store / "facts.sqlite3", tmp_path / "backup.sqlite3")
    with open_project(store=store) as p, p.sessions.create("main") as w:
        w.append_message("user", "Forget my token.")
        p.forget(fact.fact_id)
        w.append_message("assistant", "Done.", epoch=p.generation())
    shutil.copy(tmp_path / "backup.sqlite3", store / "facts.sqlite3")
    with open_project(store=store) as p, p.sessions.writer("main") as w:
        w.append_message("user", "Next task: " + "y" * 70000)
        w.append_message("assistant", "Sure.", epoch=p.generation())

    def codes(*extra: str) -> list[str]:
        r = run_cli("--no-state", "--store", str(store), "validate", "--json", *extra)
        return [f["code"] for f in orjson.loads(r.stdout)["findings"]]

    assert "session.epoch_ahead" not in codes()
    assert "session.epoch_ahead" in codes("--deep")


def test_a_mark_with_more_ids_than_kept_is_read_not_dropped(tmp_path):
    """A later memctl keeping more ids: the mark was refused whole, and the
    next record replaced it, its numbers with it."""
    from lecode_memctl.core import seen

    state, store = tmp_path / "state", tmp_path / "store"
    store.mkdir()
    mark = seen.record(state, store, 7, 9, slug="s", forgotten={"0" * 16: 1})
    assert mark is not None
    path = seen.mark_path(state, store)
    doc = orjson.loads(path.read_bytes())
    doc["forgotten"] = {f"{i:016x}": i + 1 for i in range(seen.MAX_FORGOTTEN + 5)}
    path.write_bytes(orjson.dumps(doc))
    again = seen.load(state, store)
    assert again is not None and again.generation == 7
    assert len(again.forgotten) == seen.MAX_FORGOTTEN


def test_another_database_below_the_mark_stays_named_another_database(tmp_path):
    """The first validate said 'another database'; its record took the new
    database's identity, and every later one said 'replaced by an older
    copy', which it was not."""
    from lecode_memctl.core import seen

    state, store = tmp_path / "state", tmp_path / "store"
    store.mkdir()
    seen.record(state, store, 3, 5, slug="s", database="db-A", forgotten={"a" * 16: 3})
    mark = seen.record(state, store, 1, 1, slug="s", database="db-B", forgotten={})
    assert mark is not None and mark.database == "db-A"
    assert seen.other_database(seen.load(state, store), "db-B")
    # a store not below the mark takes the new identity, as before
    mark = seen.record(state, store, 9, 9, slug="s", database="db-B", forgotten={"a" * 16: 3})
    assert mark is not None and mark.database == "db-B"


def test_a_bad_entry_among_the_ids_does_not_drop_the_mark(tmp_path):
    from lecode_memctl.core import seen

    state, store = tmp_path / "state", tmp_path / "store"
    store.mkdir()
    seen.record(state, store, 5, 9, slug="s", forgotten={"b" * 16: 5})
    path = seen.mark_path(state, store)
    doc = orjson.loads(path.read_bytes())
    doc["forgotten"]["\u00e9" * 3] = 2
    doc["forgotten"]["c" * 16] = -1
    path.write_bytes(orjson.dumps(doc))
    mark = seen.load(state, store)
    assert mark is not None and (mark.generation, mark.exclusions) == (5, 9)
    assert dict(mark.forgotten) == {"b" * 16: 5}
