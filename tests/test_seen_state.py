"""A forget cannot be rolled back silently (issue 16.7).

memctl keeps, outside the store (under the user's XDG state directory), the
highest exclusion generation and exclusion count it has seen for each store.
A facts database restored from an older copy, or deleted before any generated
message was written (so no transcript carries the newer epoch), makes
forgotten evidence valid again; ``validate`` reports it as ``db.rolled_back``
(error).  ``--no-state`` writes nothing anywhere (the marks are still read).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.layout import store_at

from .builders import copy_demo
from .conftest import run_cli, tree_hash

VERIFIED = "c283ab7d8ed884e4"
PREFERENCE = "80fa60fdfe856452"


@pytest.fixture
def demo(demo_template, tmp_path):
    return copy_demo(demo_template, tmp_path / "demo")


def state_root() -> Path:
    return Path(os.environ["HOME"]) / ".local" / "state" / "lecode-memctl"


def marks() -> list[dict]:
    d = state_root() / "stores"
    if not d.is_dir():
        return []
    return [orjson.loads(p.read_bytes()) for p in sorted(d.glob("*.json"))]


def validate_json(store: Path, *extra: str) -> tuple[int, list[dict]]:
    r = run_cli(*extra, "--store", str(store), "validate", "--json")
    assert r.exit_code in (0, 1), r.stderr
    return r.exit_code, orjson.loads(r.stdout)["findings"]


def rolled_back(findings: list[dict]) -> list[dict]:
    return [f for f in findings if f["code"] == "db.rolled_back"]


# ---------------------------------------------------------------- where the state lives

def test_state_dir_resolution(tmp_path):
    from lecode_memctl.core.seen import state_dir

    home = str(tmp_path / "h")
    assert state_dir({"HOME": home}) == Path(home) / ".local" / "state" / "lecode-memctl"
    assert state_dir({"HOME": home, "XDG_STATE_HOME": str(tmp_path / "x")}) == \
        tmp_path / "x" / "lecode-memctl"
    # the XDG base directory spec: an empty or relative value is ignored
    for bad in ("", "relative/dir"):
        assert state_dir({"HOME": home, "XDG_STATE_HOME": bad}) == \
            Path(home) / ".local" / "state" / "lecode-memctl"


def test_validate_records_the_generation_outside_the_store(demo):
    before = tree_hash(demo)
    code, findings = validate_json(demo)
    assert rolled_back(findings) == []
    assert tree_hash(demo) == before          # nothing written inside the store
    (mark,) = marks()
    assert mark["store"] == os.path.realpath(demo)
    assert (mark["generation"], mark["exclusions"]) == (1, 1)
    mode = os.stat(state_root() / "stores").st_mode & 0o777
    assert mode == 0o700
    assert not [p for p in (state_root() / "stores").iterdir() if ".tmp-" in p.name]


def test_xdg_state_home_is_used(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    validate_json(demo)
    assert len(list((tmp_path / "xdg-state" / "lecode-memctl" / "stores").glob("*.json"))) == 1
    assert not state_root().exists()


# ---------------------------------------------------------------- the regression

def _forget_then_restore(demo: Path, *extra: str) -> None:
    """Validate (memctl sees generation 1), keep a copy of the database, forget
    the verified fact (generation 2), put the old copy back."""
    validate_json(demo, *extra)
    shutil.copy2(demo / "facts.sqlite3", demo.parent / "old.sqlite3")
    r = run_cli(*extra, "--store", str(demo), "forget", VERIFIED, "--yes")
    assert r.exit_code == 0, r.stderr
    os.replace(demo.parent / "old.sqlite3", demo / "facts.sqlite3")


@pytest.mark.parametrize("deep", [False, True])
def test_an_older_database_put_back_is_an_error(demo, deep):
    _forget_then_restore(demo)
    # the forgotten fact is valid again: nothing in the store says otherwise
    r = run_cli("--store", str(demo), "facts", "--json")
    assert VERIFIED in r.stdout
    extra = ("--deep",) if deep else ()
    r = run_cli("--store", str(demo), "validate", "--json", *extra)
    assert r.exit_code == 1
    doc = orjson.loads(r.stdout)
    (f,) = rolled_back(doc["findings"])
    assert f["severity"] == "error" and f["file"] == "facts.sqlite3"
    assert "generation 1" in f["message"] and "generation 2" in f["message"]
    assert [x for x in doc["findings"] if x["code"] == "session.epoch_ahead"] == []
    # human output too
    r = run_cli("--store", str(demo), "validate")
    assert r.exit_code == 1 and "db.rolled_back" in r.stdout


def test_the_mark_only_rises(demo):
    _forget_then_restore(demo)
    for _ in range(2):  # validating the rolled-back store does not lower the mark
        _code, findings = validate_json(demo)
        assert len(rolled_back(findings)) == 1
    (mark,) = marks()
    assert (mark["generation"], mark["exclusions"]) == (2, mark["exclusions"])
    assert mark["exclusions"] >= 2


def test_a_deleted_database_before_any_generated_message(tmp_path):
    """A fresh store: one fact, forgotten by memctl, then facts.sqlite3 deleted.  No
    generated message carries the new epoch, so only the mark can tell."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(tmp_path / "memory" / "p-000000000000")
    store.path.mkdir(parents=True, mode=0o700)
    ss = SessionStore(store)
    with ss.create("s1") as w:
        w.append_message("user", "we deploy with make")
    ref = ss.source_snapshot("s1", 1, 1).ref
    fs = FactStore(store.facts_db)
    try:
        fid = fs.remember("deploy with make", ref, sessions=ss).fact.fact_id
    finally:
        fs.close()
    r = run_cli("--store", str(store.path), "forget", fid, "--yes")
    assert r.exit_code == 0, r.stderr
    (mark,) = marks()
    assert (mark["generation"], mark["exclusions"]) == (1, 1)   # forget records it
    assert mark["slug"] == store.slug and isinstance(mark["database"], str)  # and whose
    store.facts_db.unlink()
    code, findings = validate_json(store.path)
    assert code == 1
    (f,) = rolled_back(findings)
    assert "generation 0" in f["message"] and "no facts database" in f["message"]


def test_fewer_exclusions_at_the_same_generation(demo):
    """A second forget of evidence already excluded keeps the count; an exclusion
    deleted by hand lowers it: also a roll-back."""
    import sqlite3

    validate_json(demo)
    db = sqlite3.connect(demo / "facts.sqlite3")
    with db:
        db.execute("DELETE FROM exclusions")
    db.close()
    _code, findings = validate_json(demo)
    (f,) = rolled_back(findings)
    assert "0 exclusion" in f["message"] and "1 exclusion" in f["message"]


def test_a_forget_racing_the_audit_is_not_a_false_alarm(demo, monkeypatch):
    """The mark is read before the database: a memctl forget that lands (and records
    its higher generation) while the audit runs is not a roll-back."""
    from lecode_memctl.core import seen
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.facts import FactStore

    store = store_at(demo)
    sd = seen.state_dir()
    audit = Audit(store, parallel=False, state=sd)
    real_open = FactStore.open_readonly
    raced = []

    def forget_first(path):
        if not raced:
            raced.append(1)
            fs = FactStore(store.facts_db)
            try:
                assert fs.forget(VERIFIED)
                seen.record(sd, store.path, fs.generation(), fs.exclusion_count(),
                            slug=store.slug, database=fs.database_id())
            finally:
                fs.close()
        return real_open(path)

    monkeypatch.setattr(FactStore, "open_readonly", staticmethod(forget_first))
    findings = [f for f in audit.run() if f is not None]
    assert raced and [f for f in findings if f.code == "db.rolled_back"] == []


# ---------------------------------------------------------------- --no-state

def test_no_state_writes_nothing_anywhere(demo, tmp_path):
    home = Path(os.environ["HOME"])
    before = tree_hash(home)
    code, _ = validate_json(demo, "--no-state")
    r = run_cli("--store", str(demo), "forget", VERIFIED, "--yes", "--no-state")  # after the command
    assert r.exit_code == 0, r.stderr
    assert tree_hash(home) == before
    assert marks() == []


def test_no_state_still_reads_the_marks(demo):
    _forget_then_restore(demo)
    before = marks()
    _code, findings = validate_json(demo, "--no-state")
    assert len(rolled_back(findings)) == 1
    assert marks() == before


def test_no_state_in_help():
    r = run_cli("--help")
    assert "--no-state" in r.stdout


# ---------------------------------------------------------------- a bad state dir

@pytest.mark.parametrize("damage", ["file", "garbage", "symlink"])
def test_an_unusable_state_dir_never_fails_a_command(demo, damage, tmp_path):
    root = state_root()
    if damage == "file":
        root.parent.mkdir(parents=True)
        root.write_text("not a directory")
    elif damage == "garbage":
        validate_json(demo)
        for p in (root / "stores").glob("*.json"):
            p.write_bytes(b"\x00{not json")
    else:
        (root / "stores").mkdir(parents=True)
        validate_json(demo)
        (mark_file,) = (root / "stores").glob("*.json")
        target = tmp_path / "elsewhere.json"
        target.write_bytes(mark_file.read_bytes())
        mark_file.unlink()
        mark_file.symlink_to(target)
    if damage == "symlink":
        kept = (tmp_path / "elsewhere.json").read_bytes()
    r = run_cli("--store", str(demo), "validate")
    assert r.exit_code == 1, r.stderr          # the demo's planted stale fact
    assert r.stderr == "" and "db.rolled_back" not in r.stdout
    if damage == "symlink":
        assert (tmp_path / "elsewhere.json").read_bytes() == kept  # never written through


# ---------------------------------------------------------------- whose mark it is

def _other_store(demo: Path) -> Path:
    """The demo's other project's store (another slug, no facts database)."""
    (other,) = [p for p in demo.parent.iterdir() if p.name.startswith("src-")]
    assert not (other / "facts.sqlite3").exists()
    return other


def _database_of(path: Path) -> str:
    import sqlite3

    db = sqlite3.connect(path / "facts.sqlite3")
    try:
        return db.execute("SELECT applied FROM schema_migrations "
                          "WHERE name = 'm001_initial'").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("no_state", [False, True])
def test_another_store_unpacked_at_the_same_path_is_not_a_rollback(demo, tmp_path, no_state):
    """Store A (generation 1) validated at a path; then another project's store
    (no database) copied to the same path: not a roll-back of A."""
    evidence = tmp_path / "evidence"
    shutil.copytree(demo, evidence)
    validate_json(evidence)
    (mark,) = marks()
    assert mark["slug"] == demo.name and mark["database"] == _database_of(demo)
    shutil.rmtree(evidence)
    other = _other_store(demo)
    shutil.copytree(other, evidence)
    extra = ("--no-state",) if no_state else ()
    r = run_cli(*extra, "--store", str(evidence), "--slug", other.name, "validate", "--json")
    assert r.exit_code in (0, 1), r.stderr
    assert rolled_back(orjson.loads(r.stdout)["findings"]) == []
    (after,) = marks()
    if no_state:
        assert after == mark                    # read, never written
    else:                                       # replaced by the store now there
        assert (after["slug"], after["database"]) == (other.name, None)
        assert (after["generation"], after["exclusions"]) == (0, 0)


def test_a_database_made_again_is_compared_and_named(demo, tmp_path):
    """The store's database deleted and made again (facts.sqlite3 removed to
    start afresh, a new one at the next write), or another machine's copy of
    the same project's store at the same path: a database created separately,
    whose forgets are not there.  Still a roll-back of what was seen here
    (the forgotten evidence is valid again), and the finding says it is
    another database, not an older copy of the one seen."""
    from lecode_memctl.core.facts import FactStore

    mount = tmp_path / "mnt" / demo.name
    shutil.copytree(demo, mount)
    validate_json(mount)
    (first,) = marks()
    assert (first["generation"], first["exclusions"]) == (1, 1)
    (mount / "facts.sqlite3").unlink()
    fs = FactStore(mount / "facts.sqlite3")
    try:
        fs.add("a fact of the new database")
    finally:
        fs.close()
    assert _database_of(mount) != first["database"]
    _code, findings = validate_json(mount)
    (found,) = rolled_back(findings)
    assert "another database than the one seen" in found["message"], found
    (mark,) = marks()
    assert (mark["slug"], mark["generation"], mark["exclusions"]) == (demo.name, 1, 1)


def test_an_older_copy_of_the_same_database_keeps_its_identity(demo, tmp_path):
    """A restored older copy of the SAME database keeps its identity (the time
    its first migration was applied): still compared, still reported."""
    _forget_then_restore(demo)
    (mark,) = marks()
    assert mark["database"] == _database_of(demo)
    _code, findings = validate_json(demo)
    assert len(rolled_back(findings)) == 1


def test_the_same_slug_without_a_database_is_a_rollback(demo):
    """A mark of this slug and a store with no database: the deletion the mark
    is kept for (memctl cannot tell another copy of the project's store that
    never had one); the message says both."""
    validate_json(demo)
    (demo / "facts.sqlite3").unlink()
    code, findings = validate_json(demo)
    (f,) = rolled_back(findings)
    assert code == 1 and "no facts database" in f["message"]
    assert "never had one" in f["message"]


def test_a_database_without_schema_migrations_is_compared_by_slug(demo):
    """A database that says nothing of its identity (the legacy schema has no
    schema_migrations): compared, as the same project's."""
    import sqlite3

    validate_json(demo)
    db = sqlite3.connect(demo / "facts.sqlite3")
    with db:
        db.execute("DROP TABLE schema_migrations")
        db.execute("DELETE FROM exclusions")
    db.close()
    _code, findings = validate_json(demo)
    assert len(rolled_back(findings)) == 1


@pytest.mark.parametrize("same", [True, False])
def test_a_mark_without_identity_is_still_read(demo, tmp_path, same):
    """A mark written before the identity was kept ({"store", "generation",
    "exclusions", "updated"}): compared with whatever store is at its path,
    as it was then; the next record gives it the identity of the store there."""
    from lecode_memctl.core import seen

    path = demo if same else tmp_path / "elsewhere"
    if not same:
        shutil.copytree(_other_store(demo), path)
    mark_file = seen.mark_path(seen.state_dir(), path)
    mark_file.parent.mkdir(parents=True, mode=0o700)
    mark_file.write_bytes(orjson.dumps({"store": os.path.realpath(path), "generation": 3,
                                        "exclusions": 4, "updated": 1.0}))
    _code, findings = validate_json(path)
    assert len(rolled_back(findings)) == 1
    (mark,) = marks()
    assert (mark["generation"], mark["exclusions"]) == (3, 4)   # only rises
    assert mark["slug"] == path.name if same else mark["slug"] is not None


def test_a_slug_that_is_not_utf8_is_kept_and_matched(tmp_path):
    """A store directory named with bytes that are not UTF-8 (its slug the
    directory name): its mark is written (the slug as \\xNN, as the path is)
    and is the same store's when read back."""
    from lecode_memctl.core import seen

    state = tmp_path / "state"
    path = tmp_path / os.fsdecode(b"p\x9b-000000000000")
    path.mkdir()
    slug = path.name
    mark = seen.record(state, path, 2, 2, slug=slug, database=None)
    assert mark is not None and mark.slug == "p\\x9b-000000000000"
    loaded = seen.load(state, path)
    assert seen.regression(loaded, 1, 1, slug=slug)
    assert not seen.regression(loaded, 1, 1, slug="other-000000000000")


def test_another_slug_for_the_same_database_keeps_the_mark(demo):
    """validate with another --slug (mistyped, or trying one) on a store whose
    database is the one the mark saw: the same store, compared and reported;
    its mark is not replaced by the rolled-back values (it was: the next run
    with the right slug then saw another store's mark, and the roll-back was
    never reported again)."""
    _forget_then_restore(demo)
    (before,) = marks()
    assert len(rolled_back(validate_json(demo)[1])) == 1
    assert len(rolled_back(validate_json(demo, "--slug", "other-0123456789ab")[1])) == 1
    (mark,) = marks()
    assert (mark["generation"], mark["exclusions"]) == (before["generation"], before["exclusions"])
    assert len(rolled_back(validate_json(demo)[1])) == 1


def test_a_database_put_back_from_before_a_redaction_is_an_error(demo):
    """``redact`` forgets a fact whose text holds a value, as ``forget``
    does, and now records the mark as ``forget`` does: the database put
    back from before the redaction (its fact and the value with it valid
    again) is ``db.rolled_back``; it was not reported."""
    key = "AKIAQWERTYUIOPASDFGH"
    r = run_cli("--store", str(demo), "correct", VERIFIED, "1", "demo-alpha:1",
                f"deploy key {key}", "--yes")
    assert r.exit_code == 0, r.stderr
    validate_json(demo)
    backup = demo.parent / "backup.sqlite3"
    shutil.copy2(demo / "facts.sqlite3", backup)
    r = run_cli("--store", str(demo), "redact", "--yes")
    assert r.exit_code == 0 and "forgotten" in r.stdout, (r.stdout, r.stderr)
    (mark,) = marks()
    assert mark["generation"] == 2, mark
    for extra in ("-wal", "-shm"):
        (demo / f"facts.sqlite3{extra}").unlink(missing_ok=True)
    shutil.copy2(backup, demo / "facts.sqlite3")
    _code, findings = validate_json(demo)
    (f,) = rolled_back(findings)
    assert "generation 1" in f["message"] and "generation 2" in f["message"]
