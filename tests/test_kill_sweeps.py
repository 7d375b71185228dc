"""SIGKILL sweeps over memctl's write paths, on a realistic store (``memctl demo``'s).

A real ``memctl`` process (``tests/faultkit.py``, forked so that each run
costs milliseconds) is killed at step N, for N = 1, 2, ... until it runs to
the end.  A *step* is one of:

* an ``os``-level call that changes a file under the config dir (open for
  writing, write, fsync, ftruncate, replace, rename, link, unlink, mkdir,
  chmod, ...; the list is in faultkit's docstring): the process dies just
  before the call;
* one SQL statement that SQLite starts on any connection of the process
  (``sqlite3.connect`` is patched in the child to install
  ``Connection.set_trace_callback``): the process dies just before SQLite
  runs it.  SQLite's own file I/O is C code that the ``os`` wrappers never
  see; killing before each statement (``BEGIN IMMEDIATE``, each ``INSERT``/
  ``UPDATE``/``DELETE``, ``COMMIT``, the reads after it) reaches every state
  the process can leave between two statements.  Closing a connection
  (where SQLite checkpoints and removes the ``-wal``) is one more such step.
  Inside one statement (the WAL append and fsync of ``COMMIT``) atomicity is
  SQLite's own journal's.

The two kinds are swept one after the other (all ``os`` steps, then all SQL
statements).  After every kill:

* every file of the store has its old bytes or its new bytes (hash sets
  taken from a clean run), except the facts database, whose *logical*
  content (a dump of every table, times masked) must be the old or the new
  one, and temporary files of an interrupted atomic write (``.NAME.tmp-HEX``);
* ``PRAGMA integrity_check`` is ``ok`` and ``foreign_key_check`` is empty;
* ``memctl validate`` finds nothing beyond the demo's one planted problem,
  except the codes the path may leave behind (``layout.temp_file``);
* a rerun of the same command completes, with the result that says whether
  the killed attempt had committed (``forget``: "already forgotten" exactly
  then; ``correct``: a revision conflict, exit 4, exactly then).

``tests/test_facts_race.py::test_sigkill_sweep_over_forget`` sweeps the core
``FactStore.forget`` statement by statement; ``tests/test_migrate.py`` sweeps
``migrate-legacy`` over a fresh destination.  Here the same paths run through
the CLI, on a store with sessions, facts, a backup and a conflict.

The sweeps are marked ``sweep``; the session-append sweep (the shortest, the
same harness) stays in the inner loop ``pytest -m "not sweep and not heavy"``.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from . import faultkit
from .builders import DemoWorld
from .conftest import run_cli, tree_hash

TEMP_RE = re.compile(r"^\..+\.tmp-[0-9a-f]+$")
DB_FILES = ("facts.sqlite3", "facts.sqlite3-wal", "facts.sqlite3-shm", "facts.sqlite3-journal")
TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")

# Runs in the child before memctl: SQL statements become steps too.
SQL_HOOK = r'''
import os, signal, sqlite3
_SQL_AT = int(os.environ.get("SQLSTEP_AT") or 0)
_SQL_COUNT = os.environ.get("SQLSTEP_COUNT")
_SQL_MAXPAGES = int(os.environ.get("SQLSTEP_MAX_PAGES") or 0)
_sql_n = 0
_sql_connect = sqlite3.connect

def _sql_trace(sql):
    global _sql_n
    _sql_n += 1
    if _SQL_COUNT:
        fd = os.open(_SQL_COUNT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, str(_sql_n).encode())
        os.close(fd)
    if _sql_n == _SQL_AT:
        os.kill(os.getpid(), signal.SIGKILL)

def _traced(base):
    class _SqlTracedConnection(base):
        def close(self):
            _sql_trace("-- close")    # closing (checkpoint, -wal removal) is a step too
            super().close()
    return _SqlTracedConnection

def _sql_connect_traced(*args, **kwargs):
    # (memctl's own connection class, when it gives one, traced too)
    kwargs["factory"] = _traced(kwargs.get("factory", sqlite3.Connection))
    db = _sql_connect(*args, **kwargs)
    if _SQL_MAXPAGES:
        # SQLITE_FULL without filling a disk: the database may not grow.
        n = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {max(n, _SQL_MAXPAGES)}")
    db.set_trace_callback(_sql_trace)
    return db

sqlite3.connect = _sql_connect_traced
'''
RUN_MAIN = "from lecode_memctl.cli.main import main\nrc = main(argv)\n"
CODE = SQL_HOOK + RUN_MAIN

EXPECTED_AFTER_KILL = {"layout.temp_file"}   # validate codes a kill may leave behind

# the demo store is conftest's ``world`` (built once per run); the command tree
# is built once per run too (conftest's built_command_tree)


def store_findings(cfg: Path, project: Path) -> list[tuple[str, str]]:
    """(code, severity) of every finding of the core validator (what
    ``memctl validate`` reports), without the CLI around it."""
    from lecode_memctl.core.audit import validate_store
    from lecode_memctl.core.layout import store_for_project

    findings, _summary = validate_store(store_for_project(cfg, project))
    return [(f.code, f.severity) for f in findings]


# ---------------------------------------------------------------- observing a store

def file_hashes(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of the bytes, for every regular file (no mtimes:
    'old or new bytes' is about content)."""
    out: dict[str, str] = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_symlink() or not p.is_file():
                out[p.relative_to(root).as_posix()] = "special"
                continue
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def db_state(db_path: Path) -> tuple[str, ...] | None:
    """Integrity-checked logical content of the facts database (every table's
    rows, ISO times masked), or None when there is no database."""
    if not db_path.exists():
        return None
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        lines = [TIME_RE.sub("<T>", line) for line in db.iterdump()]
    finally:
        db.close()
    return tuple(sorted(lines))


@dataclass
class Snapshot:
    files: dict[str, str]
    db: tuple[str, ...] | None


def snapshot(store: Path) -> Snapshot:
    files = {k: v for k, v in file_hashes(store).items() if Path(k).name not in DB_FILES}
    return Snapshot(files, db_state(store / "facts.sqlite3"))


def validate_codes(cfg: Path, project: Path) -> list[tuple[str, str]]:
    """(code, severity) of every finding of ``memctl validate --json``."""
    r = run_cli("--project", str(project), "validate", "--json", env={"LECODE_CONFIG_DIR": str(cfg)})
    assert r.exit_code in (0, 1), r.stderr
    doc = orjson.loads(r.stdout_bytes)
    return [(f["code"], f["severity"]) for f in doc["findings"]]


@dataclass
class Outcome:
    """What one sweep did (for the figures in docs/RELIABILITY.md)."""

    os_kills: int = 0
    sql_kills: int = 0
    committed_at: list[str] = field(default_factory=list)   # kill points after which it had committed
    leftovers: set[str] = field(default_factory=set)        # validate codes seen beyond the baseline


def check_killed(store: Path, old: Snapshot, new: Snapshot, what: str) -> tuple[bool, list[str]]:
    """Every file old or new; the database old or new.  Returns (committed?, temp files)."""
    now = snapshot(store)
    temps = []
    for rel in sorted(set(old.files) | set(new.files) | set(now.files)):
        if TEMP_RE.match(Path(rel).name):
            temps.append(rel)
            continue
        assert now.files.get(rel) in (old.files.get(rel), new.files.get(rel)), (what, rel)
    assert now.db in (old.db, new.db), what
    committed = now.db == new.db and now.db != old.db
    return committed, temps


def sweep(argv: Sequence[str], *, cfg: Path, cwd: Path, reset: Callable[[], None],
          check: Callable[[str, faultkit.Run], None], env: dict[str, str] | None = None,
          limit: int = 400, code: str = CODE) -> Outcome:
    """Kill at every ``os`` step, then before every SQL statement, until the
    command completes; ``check(label, run)`` after each kill."""
    out = Outcome()
    e = {"LECODE_CONFIG_DIR": str(cfg), **(env or {})}
    for n in range(1, limit + 1):
        reset()
        # (no_sync: an fsync is still a step, killed at like any other, but
        # not flushed: a killed process leaves the page cache as it was)
        run = faultkit.run_killed_at(n, list(argv), code=code, cwd=cwd, under=cfg, env=e,
                                     fork=True, no_sync=True)
        if not run.killed:
            break
        out.os_kills += 1
        check(f"os step {n}", run)
    else:
        pytest.fail(f"{argv}: still killed after {limit} os steps")
    for n in range(1, limit + 1):
        reset()
        run = faultkit.run_counted(list(argv), code=code, cwd=cwd, under=cfg,
                                   env={**e, "SQLSTEP_AT": str(n)}, fork=True, no_sync=True)
        if run.returncode != -signal.SIGKILL:
            break
        out.sql_kills += 1
        check(f"sql statement {n}", run)
    else:
        pytest.fail(f"{argv}: still killed after {limit} SQL statements")
    return out


def clean_run(argv: Sequence[str], *, cfg: Path, cwd: Path, env: dict[str, str] | None = None
              ) -> faultkit.Run:
    e = {"LECODE_CONFIG_DIR": str(cfg), **(env or {})}
    return faultkit.run_counted(list(argv), code=CODE, cwd=cwd, under=cfg, env=e, fork=True)


def baseline(world: DemoWorld, cfg: Path) -> list[tuple[str, str]]:
    codes = validate_codes(cfg, world.project)
    assert codes == [("fact.stale", "error")]    # the demo's one planted problem
    return codes


def assert_validates(world: DemoWorld, cfg: Path, base: list[tuple[str, str]], what: str,
                     allowed: set[str] = EXPECTED_AFTER_KILL) -> set[str]:
    codes = store_findings(cfg, world.project)
    extra = [c for c in codes if c not in base]
    assert all(code in allowed for code, _sev in extra), (what, extra)
    return {code for code, _sev in extra}


# ---------------------------------------------------------------- the sweeps

FIGURES: dict[str, Outcome] = {}


@pytest.mark.sweep
def test_kill_sweep_markdown_edit(world, tmp_path):
    """``memctl edit memory`` (the editor is ``cp NEW``): an atomic write with a
    ``.bak`` of the previous content."""
    cfg = tmp_path / "cfg"
    new_text = tmp_path / "new.md"
    new_text.write_bytes(b"# demo-app memory\n\n- edited by the kill sweep\n" * 20)
    # a kill after the editor's copy is made leaves it behind, as it must
    # (nothing typed is lost): here, not in the machine's /tmp
    kept = tmp_path / "tmp"
    kept.mkdir()
    env = {"EDITOR": f"cp {new_text}", "VISUAL": "", "TMPDIR": str(kept)}
    argv = ["edit", "memory"]
    store = world.store(world.fresh(cfg))
    base = baseline(world, cfg)
    old = snapshot(store)
    r = clean_run(argv, cfg=cfg, cwd=world.project, env=env)
    assert r.returncode == 0, r.stderr
    new = snapshot(store)
    assert new.files["MEMORY.md"] == hashlib.sha256(new_text.read_bytes()).hexdigest()
    assert new.files["MEMORY.md.bak"] == old.files["MEMORY.md"]
    assert r.steps and r.steps >= 8

    out = Outcome()

    def check(label: str, run: faultkit.Run) -> None:
        committed, temps = check_killed(store, old, new, label)
        assert not committed  # the edit never touches the database
        if snapshot(store).files.get("MEMORY.md") == new.files["MEMORY.md"]:
            out.committed_at.append(label)
        out.leftovers |= assert_validates(world, cfg, base, label)
        rr = run_cli("--project", str(world.project), "edit", "memory",
                     env={"LECODE_CONFIG_DIR": str(cfg), **env})
        assert rr.exit_code == 0, (label, rr.stderr)
        after = snapshot(store)
        assert after.files["MEMORY.md"] == new.files["MEMORY.md"], label
        assert after.files["MEMORY.md.bak"] == old.files["MEMORY.md"], label
        assert {k: v for k, v in after.files.items() if not TEMP_RE.match(Path(k).name)} \
            == new.files, label

    res = sweep(argv, cfg=cfg, cwd=world.project, reset=lambda: world.fresh(cfg), check=check,
                env=env)
    res.committed_at, res.leftovers = out.committed_at, out.leftovers
    FIGURES["edit"] = res
    assert res.os_kills == r.steps   # every step was a kill point
    assert res.sql_kills == 0        # the edit runs no SQL
    # killed after the replace (directory fsync): new bytes, and the rerun wrote nothing more
    assert out.committed_at == [f"os step {r.steps}"]
    # the copies the killed runs left are the editor's text, in TMPDIR
    left = list(kept.glob("memctl-edit-*"))
    assert left and all(p.read_bytes() in (b"", new_text.read_bytes()) for p in left)


@pytest.mark.sweep
def test_kill_sweep_correct(world, tmp_path):
    cfg = tmp_path / "cfg"
    fid = world.facts["verified"]
    text = 'pyproject.toml requires Python ">=3.11" (corrected by the kill sweep)'
    argv = ["correct", fid, "1", "demo-alpha", "2", "4", text]
    store = world.store(world.fresh(cfg))
    base = baseline(world, cfg)
    old = snapshot(store)
    r = clean_run(argv, cfg=cfg, cwd=world.project)
    assert r.returncode == 0, r.stderr
    new = snapshot(store)
    assert new.files == old.files and new.db != old.db

    out = Outcome()
    checked: set[frozenset] = set()   # the killed states validated and rerun

    def check(label: str, run: faultkit.Run) -> None:
        assert b"Traceback" not in run.stderr
        committed, _temps = check_killed(store, old, new, label)
        if committed:
            out.committed_at.append(label)
        # (the audit reads a transcript's mtime, never the database's)
        key = frozenset(tree_hash(cfg, untimed=DB_FILES.__contains__).items())
        if key in checked:      # (validate and the rerun: the same input, the same answer)
            return
        checked.add(key)
        out.leftovers |= assert_validates(world, cfg, base, label)
        rr = run_cli("--project", str(world.project), *argv, env={"LECODE_CONFIG_DIR": str(cfg)})
        # the rerun conflicts (revision 1 is no longer current) exactly when the
        # killed attempt had committed
        assert rr.exit_code == (4 if committed else 0), (label, committed, rr.stderr)
        assert snapshot(store).db == new.db, label

    res = sweep(argv, cfg=cfg, cwd=world.project, reset=lambda: world.fresh(cfg), check=check)
    res.committed_at, res.leftovers = out.committed_at, out.leftovers
    FIGURES["correct"] = res
    assert res.sql_kills >= 5
    # statements after COMMIT are kill points too: some, but never all, were committed
    assert 0 < len(out.committed_at) < res.os_kills + res.sql_kills


@pytest.mark.sweep
def test_kill_sweep_forget(world, tmp_path):
    cfg = tmp_path / "cfg"
    fid = world.facts["preference"]   # two revisions, a correction: the widest forget
    argv = ["forget", fid, "--yes"]
    store = world.store(world.fresh(cfg))
    base = baseline(world, cfg)
    old = snapshot(store)
    r = clean_run(argv, cfg=cfg, cwd=world.project)
    assert r.returncode == 0, r.stderr
    assert b"forgot fact" in r.stdout
    new = snapshot(store)
    assert new.files == old.files and new.db != old.db
    after_base = validate_codes(cfg, world.project)   # forgetting may hide/suppress: warnings

    out = Outcome()
    checked: set[frozenset] = set()   # the killed states validated and rerun

    def check(label: str, run: faultkit.Run) -> None:
        assert b"Traceback" not in run.stderr
        committed, _temps = check_killed(store, old, new, label)
        if committed:
            out.committed_at.append(label)
        # (the audit reads a transcript's mtime, never the database's)
        key = frozenset(tree_hash(cfg, untimed=DB_FILES.__contains__).items())
        if key in checked:      # (validate and the rerun: the same input, the same answer)
            return
        checked.add(key)
        out.leftovers |= assert_validates(world, cfg, after_base if committed else base, label)
        rr = run_cli("--project", str(world.project), *argv, env={"LECODE_CONFIG_DIR": str(cfg)})
        assert rr.exit_code == 0, (label, rr.stderr)
        assert ("already forgotten" in rr.stdout) is committed, (label, committed, rr.stdout)
        assert snapshot(store).db == new.db, label

    res = sweep(argv, cfg=cfg, cwd=world.project, reset=lambda: world.fresh(cfg), check=check)
    res.committed_at, res.leftovers = out.committed_at, out.leftovers
    FIGURES["forget"] = res
    assert res.sql_kills >= 8
    assert 0 < len(out.committed_at) < res.os_kills + res.sql_kills


@pytest.mark.sweep
def test_kill_sweep_migrate_legacy_into_a_live_store(world, tmp_path):
    """``migrate-legacy --yes`` into the demo's store (which already has a
    MEMORY.md: a conflict, exit 4, skipped) -- tests/test_migrate.py sweeps a
    fresh destination; this adds an existing store and validates it after
    every kill."""
    cfg = tmp_path / "cfg"
    # --fail-on-conflict: the existing MEMORY.md makes exit 4, told apart from 7
    argv = ["migrate-legacy", "--yes", "--fail-on-conflict"]
    world.fresh(cfg)
    store, legacy = world.store(cfg), world.legacy(cfg)
    base = baseline(world, cfg)
    old, legacy_before = snapshot(store), file_hashes(legacy)
    r = clean_run(argv, cfg=cfg, cwd=world.project)
    assert r.returncode == 4, r.stderr          # MEMORY.md exists with other content
    new = snapshot(store)
    added = set(new.files) - set(old.files)
    assert added == {"daily/2026-11-30.md", "notes/build.md"}
    assert new.files["MEMORY.md"] == old.files["MEMORY.md"]

    out = Outcome()

    def check(label: str, run: faultkit.Run) -> None:
        assert b"Traceback" not in run.stderr
        check_killed(store, old, new, label)
        assert file_hashes(legacy) == legacy_before, label
        if set(snapshot(store).files) >= added:
            out.committed_at.append(label)
        out.leftovers |= assert_validates(world, cfg, base, label)
        rr = run_cli("--project", str(world.project), *argv, env={"LECODE_CONFIG_DIR": str(cfg)})
        assert rr.exit_code == 4, (label, rr.stderr)
        now = snapshot(store)
        assert {k: v for k, v in now.files.items() if not TEMP_RE.match(Path(k).name)} \
            == new.files, label
        assert file_hashes(legacy) == legacy_before, label

    res = sweep(argv, cfg=cfg, cwd=world.project, reset=lambda: world.fresh(cfg), check=check)
    res.committed_at, res.leftovers = out.committed_at, out.leftovers
    FIGURES["migrate-legacy"] = res
    assert res.os_kills == r.steps and res.os_kills >= 2 * 5


APPEND = SQL_HOOK + r'''
import os
from pathlib import Path
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.sessions import SessionStore
store = store_for_project(Path(os.environ["LECODE_CONFIG_DIR"]), Path(os.getcwd()))
with SessionStore(store).writer("demo-alpha") as w:
    w.append_message("user", "appended by the kill sweep " * 40)
rc = 0
'''


def test_kill_sweep_session_append(world, tmp_path):
    """The core's session writer (what the agent appends with): one ``write``
    of a whole line, then ``fsync``.  A kill leaves the transcript with its old
    bytes or with the whole new line, never a torn tail; the next writer
    continues the seq."""
    cfg = tmp_path / "cfg"
    store = world.store(world.fresh(cfg))
    base = baseline(world, cfg)
    old = snapshot(store)
    e = {"LECODE_CONFIG_DIR": str(cfg)}
    transcript = store / "sessions" / "demo-alpha.jsonl"
    old_lines = len(transcript.read_bytes().splitlines())
    r = faultkit.run_counted([], code=APPEND, cwd=world.project, under=cfg, env=e, fork=True)
    assert r.returncode == 0, r.stderr
    new = snapshot(store)

    out = Outcome()

    def check(label: str, run: faultkit.Run) -> None:
        committed, _temps = check_killed(store, old, new, label)
        if snapshot(store).files != old.files:
            out.committed_at.append(label)
        out.leftovers |= assert_validates(world, cfg, base, label)
        rr = faultkit.run_counted([], code=APPEND, cwd=world.project, under=cfg, env=e, fork=True)
        assert rr.returncode == 0, (label, rr.stderr)
        lines = transcript.read_bytes().splitlines()
        seqs = [orjson.loads(x)["seq"] for x in lines]
        assert seqs == list(range(len(lines))), label      # no gap, no duplicate
        assert len(lines) == old_lines + (2 if label in out.committed_at else 1), label

    res = sweep([], cfg=cfg, cwd=world.project, reset=lambda: world.fresh(cfg), check=check,
                env=e, code=APPEND)
    res.committed_at, res.leftovers = out.committed_at, out.leftovers
    FIGURES["session append"] = res
    assert res.os_kills == r.steps and res.sql_kills == 0
    assert out.committed_at == [f"os step {r.steps}"]   # killed before the final fsync


def test_zz_report_figures(capsys):
    """Print the sweep figures (``pytest -s``) for docs/RELIABILITY.md."""
    with capsys.disabled():
        for name, o in FIGURES.items():
            print(f"\n[kill sweep] {name}: {o.os_kills} os-step kills, {o.sql_kills} SQL-statement "
                  f"kills, committed after {len(o.committed_at)}, validate beyond baseline: "
                  f"{sorted(o.leftovers) or 'nothing'}")
