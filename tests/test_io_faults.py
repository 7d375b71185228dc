"""I/O faults (ENOSPC, EIO, EACCES) at each file operation of the write paths.

``tests/faultkit.py`` makes the N-th ``os``-level step of a real, forked
memctl process fail with ``OSError(errno)`` (for N = 1 .. the step count of
a clean run).  SQLite's own I/O is C code that those wrappers never see, so
the facts database gets its faults from SQLite itself:

* ``SQLITE_FULL``: ``PRAGMA max_page_count`` set to the database's current
  size on every connection of the child (it cannot grow);
* a failing write (``EFBIG`` from ``RLIMIT_FSIZE`` set when the write
  transaction begins, with ``SIGXFSZ`` ignored): SQLite reports
  ``SQLITE_IOERR`` ("disk I/O error") or ``SQLITE_FULL`` at ``COMMIT``;
* a database that may not be written (``PRAGMA query_only``, what SQLite
  reports for a read-only file or medium: ``SQLITE_READONLY``).

Each fault must give one line ``memctl: error: ...`` on stderr, exit status 7
("write failed ... nothing was changed"), no traceback, and leave the store
as it was: the same bytes in every file, the same logical database content,
no temporary file.  Documented exceptions, asserted as such: a fault after
an atomic write's final ``replace`` (the directory ``fsync``) leaves the new
content in place and says so; ``migrate-legacy`` keeps the files it finished
copying before the fault and says "run again to finish".

Markdown faults through the CLI are also covered in-process in
``tests/test_markdown.py`` (``test_edit_write_failure_exit_7_keeps_old_bytes``),
``migrate-legacy`` faults on a fresh destination in ``tests/test_migrate.py``.

The every-step sweeps are marked ``sweep``; the session-append sweep, the
SQLite-level faults and the full file system stay in the inner loop
``pytest -m "not sweep and not heavy"``.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from . import faultkit
from .conftest import run_cli
from .test_kill_sweeps import CODE, SQL_HOOK, TEMP_RE, file_hashes, snapshot, store_findings

# the demo store is conftest's ``world`` (built once per run); the command tree
# is built once per run too (conftest's built_command_tree)

ERRNOS = [errno.ENOSPC, errno.EIO, errno.EACCES]
FIGURES: dict[str, int] = {}


def one_line(stderr: bytes, what: str) -> str:
    text = stderr.decode("utf-8", "replace")
    assert b"Traceback" not in stderr, (what, text)
    assert text.startswith("memctl: error: ") and text.count("\n") == 1, (what, text)
    return text


def no_temps(root: Path) -> list[str]:
    return [n for *_x, names in os.walk(root) for n in names if TEMP_RE.match(n)]


# ---------------------------------------------------------------- Markdown

@pytest.mark.sweep
def test_markdown_edit_fault_at_every_step(world, tmp_path):
    cfg = tmp_path / "cfg"
    new_text = tmp_path / "new.md"
    new_text.write_bytes(b"# edited\n")
    env = {"EDITOR": f"cp {new_text}", "VISUAL": ""}
    argv = ["edit", "memory"]
    store = world.store(world.fresh(cfg))
    e = {"LECODE_CONFIG_DIR": str(cfg), **env}
    counted = faultkit.run_counted(argv, code=CODE, cwd=world.project, under=cfg, env=e,
                                   fork=True, log=True)
    assert counted.returncode == 0
    total = counted.steps
    assert total and total >= 8
    last = counted.log[-1]
    assert " fsync " in last and last.endswith(str(store))   # the directory fsync
    injected = 0
    for err in ERRNOS:
        for n in range(1, total + 1):
            world.fresh(cfg)
            before = file_hashes(store)
            p = faultkit.run_fault_at(n, err, argv, code=CODE, cwd=world.project, under=cfg,
                                      env=e, fork=True)
            injected += 1
            after = file_hashes(store)
            assert not no_temps(store), (n, err)
            if " mkdir " in counted.log[n - 1]:
                # os.makedirs(exist_ok=True) of the existing store directory: a
                # failing mkdir there is ignored, and the write goes ahead
                assert p.returncode == 0 and p.stderr.startswith(b"memctl: wrote "), p.stderr
                assert after["MEMORY.md"] == hashlib.sha256(new_text.read_bytes()).hexdigest()
                continue
            line = one_line(p.stderr, (n, err))
            assert p.returncode == 7, (n, err, line)
            assert os.strerror(err) in line, line
            if n < total:
                assert "the file was not changed" in line, line
                # documented: the .bak (a copy of the current bytes) is written
                # before the replace; the file itself keeps its old bytes
                if after.get("MEMORY.md.bak") == before["MEMORY.md"]:
                    after["MEMORY.md.bak"] = before.get("MEMORY.md.bak")
                    after = {k: v for k, v in after.items() if v is not None}
                assert after == before, (n, err)
            else:   # after the replace: the new bytes are in place, and it says so
                assert "the new content is in place" in line, line
                assert after["MEMORY.md"] != before["MEMORY.md"]
                assert after["MEMORY.md.bak"] == before["MEMORY.md"]
    FIGURES["edit"] = injected


# ---------------------------------------------------------------- sessions

APPEND = SQL_HOOK + r'''
from lecode_memctl.core.errors import MemctlError
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.sessions import SessionStore
import os, sys
from pathlib import Path
store = store_for_project(Path(os.environ["LECODE_CONFIG_DIR"]), Path(os.getcwd()))
ss = SessionStore(store)
try:
    if argv[0] == "append":
        with ss.writer("demo-alpha") as w:
            w.append_message("user", "one more message from the fault test")
    else:
        with ss.create("fault-new", created="2026-12-02T00:00:00+00:00") as w:
            w.append_message("user", "first message")
    rc = 0
except MemctlError as exc:
    sys.stderr.write(f"memctl: error: {exc}\n")
    rc = exc.exit_code
'''


@pytest.mark.parametrize("action", ["append", pytest.param("create", marks=pytest.mark.sweep)])
def test_session_writer_fault_at_every_step(world, tmp_path, action):
    """The core's session writer: append to an existing transcript, or create
    a new one (header, first message)."""
    cfg = tmp_path / "cfg"
    store = world.store(world.fresh(cfg))
    e = {"LECODE_CONFIG_DIR": str(cfg)}
    counted = faultkit.run_counted([action], code=APPEND, cwd=world.project, under=cfg, env=e,
                                   fork=True, log=True)
    assert counted.returncode == 0, counted.stderr
    total = counted.steps
    assert total and total >= 3
    created_at = next((i for i, x in enumerate(counted.log, 1)
                       if x.split()[1] == "fsync" and x.endswith("/sessions")), 0)
    assert action == "append" or created_at
    injected = 0
    for err in ERRNOS:
        for n in range(1, total + 1):
            world.fresh(cfg)
            before = file_hashes(store)
            p = faultkit.run_fault_at(n, err, [action], code=APPEND, cwd=world.project,
                                      under=cfg, env=e, fork=True)
            injected += 1
            line = one_line(p.stderr, (action, n, err, counted.log))
            assert p.returncode == 7, (action, n, err, line, counted.log)
            after = file_hashes(store)
            # a lock file (empty, no content) may be the only new thing; once
            # create() has returned (after the directory fsync), the new session
            # exists with its header alone when appending the first message fails
            new = {k for k in set(after) - set(before) if not k.endswith(".lock")}
            if action == "create" and n > created_at:
                assert new == {"sessions/fault-new.jsonl"}
                lines = (store / "sessions/fault-new.jsonl").read_bytes().splitlines()
                assert len(lines) == 1 and b'"type":"session"' in lines[0]
                new = set()
            assert not new, (action, n, err, new, counted.log)
            assert {k: v for k, v in after.items() if k in before} == before, (action, n, err)
            assert not no_temps(store)
            extra = [f for f in store_findings(cfg, world.project) if f != ("fact.stale", "error")]
            assert extra == [], (action, n, err, extra)
    FIGURES[f"session {action}"] = injected


# ---------------------------------------------------------------- migrate-legacy

@pytest.mark.sweep
@pytest.mark.parametrize("err", ERRNOS)
def test_migrate_legacy_fault_at_every_step_into_a_live_store(world, tmp_path, err):
    cfg = tmp_path / "cfg"
    # --fail-on-conflict: the existing MEMORY.md makes exit 4, told apart from 7
    argv = ["migrate-legacy", "--yes", "--fail-on-conflict"]
    world.fresh(cfg)
    store, legacy = world.store(cfg), world.legacy(cfg)
    e = {"LECODE_CONFIG_DIR": str(cfg)}
    counted = faultkit.run_counted(argv, code=CODE, cwd=world.project, under=cfg, env=e, fork=True)
    assert counted.returncode == 4    # MEMORY.md conflicts; the other two are copied
    complete = file_hashes(store)
    total = counted.steps
    injected = 0
    for n in range(1, total + 1):
        world.fresh(cfg)
        before, legacy_before = file_hashes(store), file_hashes(legacy)
        p = faultkit.run_fault_at(n, err, argv, code=CODE, cwd=world.project, under=cfg,
                                  env=e, fork=True)
        injected += 1
        if p.returncode == 4:    # a fault in a redundant step (mkdir of an existing dir)
            assert b"memctl: error" not in p.stderr
        else:
            line = one_line(p.stderr, (n, err))
            assert p.returncode == 7, (n, err, line)
            assert os.strerror(err) in line and "run again to finish" in line, line
        after = file_hashes(store)
        for rel, h in after.items():
            assert h in (before.get(rel), complete.get(rel)), (n, err, rel)  # absent or whole
        assert not no_temps(store), (n, err)
        assert file_hashes(legacy) == legacy_before
        extra = [f for f in store_findings(cfg, world.project) if f != ("fact.stale", "error")]
        assert extra == [], (n, err, extra)
    FIGURES[f"migrate-legacy {errno.errorcode[err]}"] = injected


# ---------------------------------------------------------------- facts (SQLite)

FSIZE_HOOK = r'''
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_fsize_trace = _sql_trace
def _sql_trace(sql):
    if sql.lstrip().upper().startswith("BEGIN"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    _fsize_trace(sql)
'''
READONLY_HOOK = r'''
_ro_connect = sqlite3.connect
def _ro_connect_query_only(*a, **k):
    db = _ro_connect(*a, **k)
    db.execute("PRAGMA query_only = 1")
    return db
sqlite3.connect = _ro_connect_query_only
'''
RUN_MAIN = "from lecode_memctl.cli.main import main\nrc = main(argv)\n"


BULK = 150
BULK_ID = "bulk-" + "x" * 95    # long ids: ~100 bytes per exclusion row


def add_bulk_fact(world, cfg: Path) -> str:
    """A session of BULK user messages and a fact citing all of them:
    forgetting it inserts BULK exclusions (~15 kB), and after a VACUUM there
    is no free page to put them in, so the database must grow."""
    import sqlite3

    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_for_project
    from lecode_memctl.core.sessions import SessionStore

    store = store_for_project(cfg, world.project)
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        with ss.create(BULK_ID, created="2026-12-02T00:00:00+00:00") as w:
            for i in range(BULK):
                w.append_message("user", f"bulk evidence line {i}")
        ref = ss.source_snapshot(BULK_ID, 1, BULK).ref
        fid = fs.remember("The bulk session lists every line of evidence.", ref,
                          sessions=ss).fact.fact_id
    db = sqlite3.connect(store.facts_db)
    db.execute("VACUUM")
    db.close()
    return fid


@pytest.fixture(scope="module")
def bulk_world(world, tmp_path_factory):
    """The demo store plus the bulk session and its fact (built once)."""
    import dataclasses
    import shutil

    template = tmp_path_factory.mktemp("bulk") / "config"
    shutil.copytree(world.template, template, symlinks=True)
    fid = add_bulk_fact(world, template)
    big = template.parent / "big-text"
    big.write_text("x" * 200_000)    # 200 kB: new pages for the revision
    return dataclasses.replace(world, template=template,
                               facts={**world.facts, "bulk": fid, "big_text_file": str(big)})


def fact_command(world, command: str) -> list[str]:
    if command == "correct":
        return ["correct", world.facts["verified"], "1", "demo-alpha", "2", "4",
                "--text-file", world.facts["big_text_file"]]
    return ["forget", world.facts["bulk"], "--yes"]


FAULTS = {
    "SQLITE_FULL (max_page_count)": (SQL_HOOK + RUN_MAIN, {"SQLSTEP_MAX_PAGES": "1"}),
    "write error (RLIMIT_FSIZE)": (SQL_HOOK + FSIZE_HOOK + RUN_MAIN, {}),
    "read-only database (query_only)": (SQL_HOOK + READONLY_HOOK + RUN_MAIN, {}),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("command", ["correct", "forget"])
def test_facts_write_faults_exit_7_and_change_nothing(bulk_world, tmp_path, fault, command):
    world = bulk_world
    cfg = tmp_path / "cfg"
    store = world.store(world.fresh(cfg))
    argv = fact_command(world, command)
    code, env = FAULTS[fault]
    before = snapshot(store)
    tree_before = file_hashes(store)
    p = faultkit.run_counted(argv, code=code, cwd=world.project, under=cfg,
                             env={"LECODE_CONFIG_DIR": str(cfg), **env}, fork=True)
    line = one_line(p.stderr, (command, fault))
    assert p.returncode == 7, (command, fault, line)
    assert "nothing was changed" in line, line
    after = snapshot(store)
    assert after.db == before.db
    assert after.files == before.files
    # only SQLite's own -wal/-shm may have appeared beside the database
    changed = {k for k in set(file_hashes(store)) ^ set(tree_before)}
    assert changed <= {"facts.sqlite3-wal", "facts.sqlite3-shm"}, changed
    assert [f for f in store_findings(cfg, world.project) if f != ("fact.stale", "error")] == []
    FIGURES[f"{command}: {fault}"] = 1
    # and once the fault is gone the same command goes through
    r = run_cli("--project", str(world.project), *argv, env={"LECODE_CONFIG_DIR": str(cfg)})
    assert r.exit_code == 0, r.stderr




@pytest.mark.heavy
@pytest.mark.parametrize("command", ["facts", "forget", "redact", "validate", "secrets"])
def test_a_failing_write_to_tmpdir_is_exit_7_not_a_corrupt_store(world, tmp_path, command):
    """Reads open the facts database through a private copy under $TMPDIR.
    A real failing write there (EFBIG under a 2 KiB file-size limit, as
    ``ulimit -f 2`` gives; a full $TMPDIR gives ENOSPC the same way, see
    ``tests/test_facts.py``) is exit 7 with one line that names the
    temporary copy and $TMPDIR, not exit 5 "cannot open" for a store that is
    fine; the store is unchanged and nothing is left in $TMPDIR."""
    import resource
    import signal
    import subprocess
    import sys

    cfg = world.fresh(tmp_path / "cfg")
    store = world.store(cfg)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    argv = {"facts": ["facts", "--all"], "forget": ["forget", world.facts["verified"], "--yes"],
            "redact": ["redact", "--dry-run"],
            # (the audits: before 2026-12-07 the store's db.unreadable, or
            # "UNREADABLE", exit 1, as if the store were at fault)
            "validate": ["validate", "-q"], "secrets": ["secrets"]}[command]
    before = file_hashes(store)

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--no-state", "--store", str(store),
                        *argv],
                       env=env, capture_output=True, timeout=60, preexec_fn=small_files)
    line = one_line(p.stderr, command)
    assert p.returncode == 7, line
    assert "temporary copy" in line and str(tmpdir) in line and "TMPDIR" in line, line
    assert "File too large" in line, line
    assert file_hashes(store) == before
    assert os.listdir(tmpdir) == []
    if command == "validate":
        # with --all-projects the store's database is not audited, named as
        # this machine's failure, and the others' audits go on
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--no-state", "--config-dir",
                            str(cfg), "validate", "--all-projects", "--json"],
                           env=env, capture_output=True, timeout=60, preexec_fn=small_files)
        import orjson

        doc = orjson.loads(p.stdout)
        (f,) = [f for f in doc["findings"] if f["code"] == "db.unreadable"]
        assert "not audited (this machine's temporary space failed" in f["message"], f
        assert file_hashes(store) == before


# ---------------------------------------------------------------- a real full file system

def _mount_tmpfs(mnt: Path, size: str) -> bool:
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "memctl-full-test",
                        str(mnt)], capture_output=True)
    return r.returncode == 0


def _fill(path: Path) -> int:
    """Fill the file system holding ``path`` to the last byte; returns bytes written."""
    n = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * size
            while True:
                try:
                    n += os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return n


FULL_APPEND = r'''
import os, sys
from pathlib import Path
from lecode_memctl.core.errors import MemctlError
from lecode_memctl.core.layout import store_for_project
from lecode_memctl.core.sessions import SessionStore
store = store_for_project(Path(os.environ["LECODE_CONFIG_DIR"]), Path(os.getcwd()))
try:
    with SessionStore(store).writer("demo-alpha") as w:
        w.append_message("user", "more text than the full disk has room for " * 200)
except MemctlError as exc:
    sys.stderr.write(f"memctl: error: {exc}\n")
    sys.exit(exc.exit_code)
'''


def test_full_file_system_every_write_path_exits_7(bulk_world, tmp_path):
    """A real ENOSPC: the store on a small tmpfs filled to the last byte.
    Every write path fails with one line and exit 7, and changes nothing."""
    import subprocess
    import sys

    from .conftest import run_proc

    world = bulk_world
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "16m"):
        pytest.skip("needs root and mount(8) for a private tmpfs")
    try:
        cfg = world.fresh(mnt / "cfg")
        store = world.store(cfg)
        new_md = tmp_path / "new.md"
        new_md.write_bytes(b"# edited on a full disk\n" * 400)
        before = snapshot(store)
        filled = _fill(mnt / "filler")
        assert filled > 0
        env = {"LECODE_CONFIG_DIR": str(cfg), "EDITOR": f"cp {new_md}", "VISUAL": ""}
        runs = {
            "edit": run_proc("edit", "memory", env=env, cwd=world.project),
            "correct": run_proc(*fact_command(world, "correct"), env=env, cwd=world.project),
            "forget": run_proc(*fact_command(world, "forget"), env=env, cwd=world.project),
            "migrate-legacy": run_proc("migrate-legacy", "--yes", env=env, cwd=world.project),
            "session append": subprocess.run([sys.executable, "-c", FULL_APPEND], env={**os.environ, **env},
                                             cwd=world.project, capture_output=True, timeout=60),
        }
        for name, p in runs.items():
            line = one_line(p.stderr, name)
            assert p.returncode == 7, (name, line)
            assert "No space left on device" in line or "disk is full" in line \
                or "disk I/O error" in line, (name, line)
            FIGURES[f"full file system: {name}"] = 1
        # compare with room to read again (SQLite needs a -shm to open a WAL database)
        os.unlink(mnt / "filler")
        after = snapshot(store)
        assert after.db == before.db
        assert after.files == before.files
        assert not no_temps(store)
        assert [f for f in store_findings(cfg, world.project) if f != ("fact.stale", "error")] == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_zz_report_figures():
    import sys

    for name, n in FIGURES.items():
        sys.__stdout__.write(f"\n[io faults] {name}: {n} faults injected")


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["forget", "export", "validate", "secrets"])
def test_too_few_file_descriptors_is_this_machine_s_limit_never_an_unreadable_store(
        world, tmp_path, command):
    """``ulimit -n`` too low for a command: SQLite says "unable to open
    database file", which says nothing of why.  Before 2026-12-07 that was
    "database error", exit 5 (the store unreadable) for ``export`` and
    ``forget --dry-run`` at 9 to 12 descriptors, and a raw EMFILE in the
    secrets pool was exit 5 too.  Now, at every limit, the command either
    goes through or exits 7 naming the open-files limit; the store is
    unchanged."""
    import resource
    import subprocess
    import sys

    cfg = world.fresh(tmp_path / "cfg")
    store = world.store(cfg)
    argv = {"forget": ["forget", world.facts["verified"], "--dry-run"],
            "export": ["export", "-o", "{out}"], "validate": ["validate", "--deep", "-q"],
            "secrets": ["secrets"]}[command]
    before = file_hashes(store)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    seen = set()
    for n in range(7, 17):
        def few_fds(n: int = n) -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        out = tmp_path / f"b{n}.tgz"
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--no-state", "--store",
                            str(store), *(a.format(out=out) for a in argv)],
                           env=env, capture_output=True, timeout=60, preexec_fn=few_fds)
        err = p.stderr.decode("utf-8", "replace")
        assert "Traceback" not in err, (n, err)
        assert p.returncode in (0, 1, 7), (n, p.returncode, err)
        if p.returncode == 7:
            assert "too many open files" in err.lower(), (n, err)
        seen.add(p.returncode)
    assert file_hashes(store) == before
    assert 7 in seen, seen       # the limit was met at least once
