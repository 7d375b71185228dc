"""The bad-input corpus: every command against every kind of broken input.

A realistic store, ``core.demo.build_demo``'s, is built once per run
(conftest's ``demo_template``, the template); each corruption is applied to a
fresh copy of its config dir, and the commands run with ``--config-dir COPY
-C TEMPLATE_PROJECT`` (the project, and so the slug and the session headers,
stay those of the template).

For every (corruption, command) cell the expected exit status is written down
in ``EXPECTED`` below: the documented error (2 usage, 3 not found, 4 conflict,
5 store unreadable, 7 write failed) when the input concerns the command, or
the command's ordinary result on the demo store (``BASE``) when it does not.
Every cell also checks: no traceback and never exit 70; an error is exactly
one line on stderr starting ``memctl: error: ``; and the whole config dir is
byte-identical afterwards (write commands run with flags that do not write:
``--dry-run``, a stale ``REVISION`` for ``correct``, an unknown id for
``forget --yes``, an ``EDITOR`` that changes nothing for ``edit``).

The bulk runs in-process (``run_cli``); a representative subset runs as real
processes under ``RLIMIT_AS`` = 1 GiB (bounded memory, real exit statuses).
The corpus is marked ``sweep`` except a diagonal of the table (every corruption
and every command at least once) and one corruption as real processes: the
inner loop ``pytest -m "not sweep and not heavy"`` runs those, the full command every cell.
Session ids that no store can hold (``..``, ``/abs``, ``a/b``, NUL, 300
characters, look-alike Unicode) are checked against the core's
``check_session_id`` and every command that takes a session id.

Cells listed in ``KNOWN_BUGS`` run as strict xfails: a defect found by the
corpus that cannot be fixed at once is recorded there with its reason (it
turns into a failure the moment it is fixed, so the entry goes with the fix).
Every defect found so far is fixed (docs/RELIABILITY.md, "Bad input").
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lecode_memctl.core.errors import EXIT_CODES, UsageError
from lecode_memctl.core.sourceref import check_session_id

from .builders import SCHEMA_DAMAGE, damage_schema, diagonal, sweep_unless
from .conftest import REPO, run_cli, tree_hash

MEMORY_LIMIT = 1 << 30  # RLIMIT_AS for the subprocess runs: 1 GiB
DOCUMENTED = {code for code, _ in EXIT_CODES}

# ----------------------------------------------------------------- the template


class Template:
    def __init__(self, root: Path, demo) -> None:
        self.root = root
        self.demo = demo   # conftest's demo_template: shared, only ever copied
        self.project = self.demo.project
        self.slug = self.demo.store.slug
        self.facts = dict(self.demo.facts)
        self.variants = root / "variants"
        self.variants.mkdir()
        self._n = 0

    def copy(self, corruption: str) -> tuple[Path, Path]:
        """A fresh copy of the template's config dir with ``corruption`` applied:
        (config dir, store dir)."""
        self._n += 1
        base = self.variants / f"{self._n:04d}-{corruption}"
        shutil.copytree(self.demo.config_dir, base / "config", symlinks=True)
        store = base / "config" / "memory" / self.slug
        CORRUPTIONS[corruption](store)
        return base / "config", store


@pytest.fixture(scope="module")
def template(tmp_path_factory, demo_template) -> Template:
    return Template(tmp_path_factory.mktemp("bad-input"), demo_template)


@pytest.fixture(scope="module")
def variant_cache(template):
    """One corrupted copy per corruption, shared by the module's read cells; a
    cell that finds its copy changed drops it so the next cell gets a new one."""
    cache: dict[str, tuple[Path, Path]] = {}

    def get(corruption: str) -> tuple[Path, Path]:
        if corruption not in cache:
            cache[corruption] = template.copy(corruption)
        return cache[corruption]

    get.drop = cache.pop  # type: ignore[attr-defined]
    return get


# ----------------------------------------------------------------- corruptions


def _foreign_wal(dst: Path) -> None:
    """The -wal of another database (same page size), copied while its writer
    still had it open, so its frames are valid SQLite frames."""
    tmp = dst.parent.parent.parent / "foreign-db"
    tmp.mkdir()
    db = sqlite3.connect(tmp / "other.db", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (randomblob(3000))")
        shutil.copyfile(tmp / "other.db-wal", dst)
    finally:
        db.close()
    shutil.rmtree(tmp)


def _truncated_db(store: Path) -> None:
    p = store / "facts.sqlite3"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _not_a_db(store: Path) -> None:
    (store / "facts.sqlite3").write_bytes(b"this is not a database\n" * 200)


def _zero_db(store: Path) -> None:
    (store / "facts.sqlite3").write_bytes(b"")


def _foreign_db(store: Path) -> None:
    """Another application's SQLite database under the name facts.sqlite3."""
    p = store / "facts.sqlite3"
    p.unlink()
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES ('not lecode')")
    db.commit()
    db.close()


def _future_schema(store: Path) -> None:
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()


def _utf8_jsonl(store: Path) -> None:
    p = store / "sessions" / "demo-alpha.jsonl"
    p.write_bytes(p.read_bytes().replace(b"tabs for", b"tabs\xff\xfe for", 1))


def _utf8_md(store: Path) -> None:
    for rel in ("MEMORY.md", "scratchpad.md", "notes/release.md", "daily/2026-12-01.md"):
        p = store / rel
        p.write_bytes(p.read_bytes() + b"bad \xc3\x28 bytes \xff\n")


def _symlink_session(store: Path) -> None:
    p = store / "sessions" / "demo-alpha.jsonl"
    outside = store.parent.parent.parent / "outside-demo-alpha.jsonl"
    shutil.move(p, outside)
    os.symlink(outside, p)


def _symlink_store(store: Path) -> None:
    real = store.parent.parent.parent / "real-store"
    shutil.move(store, real)
    os.symlink(real, store)


def _symlink_wal(store: Path) -> None:
    """facts.sqlite3-wal is a symbolic link (to an empty file outside the store)."""
    outside = store.parent.parent.parent / "outside-wal"
    outside.write_bytes(b"")
    os.symlink(outside, store / "facts.sqlite3-wal")


def _symlink_memory(store: Path) -> None:
    """MEMORY.md is a symbolic link to a file outside the store."""
    p = store / "MEMORY.md"
    outside = store.parent.parent.parent / "outside-MEMORY.md"
    shutil.move(p, outside)
    os.symlink(outside, p)


def _odd_session_names(store: Path) -> None:
    """Files in sessions/ whose names are not session ids: look-alike Unicode
    (Cyrillic a, full-width digit), 200 characters, a subdirectory a/b."""
    src = (store / "sessions" / "demo-alpha.jsonl").read_bytes()
    for name in ("demo-\u0430lpha", "demo-alpha\uff11", "x" * 200):
        (store / "sessions" / f"{name}.jsonl").write_bytes(src)
    (store / "sessions" / "a").mkdir()
    (store / "sessions" / "a" / "b.jsonl").write_bytes(src)


def _db_values(store: Path, *statements: tuple[str, tuple]) -> None:
    db = sqlite3.connect(store / "facts.sqlite3")
    db.execute("PRAGMA foreign_keys = OFF")
    for sql, args in statements:
        db.execute(sql, args)
    db.commit()
    db.close()


VERIFIED_ID = "c283ab7d8ed884e4"   # the demo's 'verified' fact (VERIFIED below)
INJECTED_ID = "c283\n## Injected heading\nx"


def _blob_text(store: Path) -> None:
    """A revision text stored as a BLOB (valid UTF-8 inside) and another as
    invalid bytes: SQLite's TEXT affinity does not stop a writer from doing it."""
    _db_values(store, ("UPDATE revisions SET text = CAST(text AS BLOB) WHERE fact_id = ?",
                       (VERIFIED_ID,)),
               ("UPDATE revisions SET text = x'ff00fe' WHERE fact_id = ? AND revision = 1",
                ("80fa60fdfe856452",)))


def _bad_generation(store: Path) -> None:
    _db_values(store, ("UPDATE meta SET value = 'abc' WHERE key = 'generation'", ()))


def _injected_fact_id(store: Path) -> None:
    """A fact id that is not hex and holds newlines and a Markdown heading."""
    _db_values(store, *[(f"UPDATE {t} SET fact_id = ? WHERE fact_id = ?", (INJECTED_ID, VERIFIED_ID))
                        for t in ("facts", "revisions", "source_refs", "provenance")])


def _damaged_schema(name: str) -> Callable[[Path], None]:
    """A table or column missing (builders.SCHEMA_DAMAGE)."""
    def damage(store: Path) -> None:
        damage_schema(store / "facts.sqlite3", name)
    return damage


CORRUPTIONS = {
    "intact": lambda store: None,
    "truncated_db": _truncated_db,
    "not_a_db": _not_a_db,
    "zero_db": _zero_db,
    "foreign_wal": lambda store: _foreign_wal(store / "facts.sqlite3-wal"),
    "foreign_db": _foreign_db,
    "future_schema": _future_schema,
    "utf8_jsonl": _utf8_jsonl,
    "utf8_md": _utf8_md,
    "symlink_session": _symlink_session,
    "symlink_store": _symlink_store,
    "symlink_wal": _symlink_wal,
    "symlink_memory": _symlink_memory,
    "odd_session_names": _odd_session_names,
    "blob_text": _blob_text,
    "bad_generation": _bad_generation,
    "injected_fact_id": _injected_fact_id,
    # a database of the current schema without one table or column memctl reads
    **{name: _damaged_schema(name) for name in SCHEMA_DAMAGE},
}

# ----------------------------------------------------------------- commands

PREF = "80fa60fdfe856452"      # demo 'preference' fact: revision 2 (corrected)
VERIFIED = "c283ab7d8ed884e4"  # demo 'verified' fact
UNKNOWN = "0000000000000000"

# key -> argv.  Write commands use flags that do not write on the demo store.
COMMANDS: dict[str, tuple[str, ...]] = {
    "where": ("where",),
    "config": ("config",),
    "show": ("show",),
    "log": ("log", "2026-12-01"),
    "notes": ("notes",),
    "notes NAME": ("notes", "release"),
    "search": ("search", "tabs|CHANGES"),
    "edit": ("edit",),
    "edit note": ("edit", "note", "release"),
    "sessions": ("sessions",),
    "read": ("read", "demo-alpha", "0", "8"),
    "facts": ("facts",),
    "facts --session": ("facts", "--session", "demo-alpha"),
    "recall": ("recall", PREF),
    "history": ("history", PREF),
    "correct (stale rev)": ("correct", PREF, "1", "demo-alpha", "14", "14", "x"),
    "forget --dry-run": ("forget", VERIFIED, "--dry-run"),
    "forget --yes (unknown)": ("forget", UNKNOWN, "--yes"),
    "context": ("context", "--explain"),
    "validate": ("validate",),
    "validate --deep": ("validate", "--deep"),
    "usage": ("usage",),
    "usage --session": ("usage", "--session", "demo-alpha"),
    "projects": ("projects",),
    "migrate-legacy --dry-run": ("migrate-legacy", "--dry-run"),
}

# What each command gives on the intact demo store: validate finds the planted
# problem (1); correct with the superseded revision 1 is a conflict (4);
# forget of an id that never existed is not found (3); migrate-legacy reports
# the legacy MEMORY.md conflicting with the project's, the design's normal
# case (0; issue 11, point 8).
BASE = {key: 0 for key in COMMANDS} | {
    "correct (stale rev)": 4,
    "forget --yes (unknown)": 3,
    "validate": 1,
    "validate --deep": 1,
}

FACTS_DB_READERS = ["read", "facts", "facts --session", "recall", "history", "correct (stale rev)",
                    "forget --dry-run", "forget --yes (unknown)", "context"]
MARKDOWN_READERS = ["show", "log", "notes NAME", "edit", "edit note"]

# (corruption, command) -> exit status, where it differs from BASE.
OVERRIDES: dict[str, dict[str, int]] = {
    "intact": {},
    # A broken facts database: every command that opens it says "store
    # unreadable"; validate reports it as findings (1); the rest ignore it.
    "truncated_db": {k: 5 for k in FACTS_DB_READERS},
    "not_a_db": {k: 5 for k in FACTS_DB_READERS},
    "future_schema": {k: 5 for k in FACTS_DB_READERS},
    "foreign_wal": {k: 5 for k in FACTS_DB_READERS},
    "foreign_db": {k: 5 for k in FACTS_DB_READERS},
    # A zero-length file is an empty SQLite database (a writer that crashed
    # between creating the file and its schema leaves one): readers see no
    # database yet (no "needs migration" note since 2026-12-07), so no facts: the fact
    # commands say not found; validate finds the lost exclusions (transcripts
    # carry epoch 1, the empty database is at generation 0: session.epoch_ahead)
    # and exits 1.
    "zero_db": {"recall": 3, "history": 3, "correct (stale rev)": 3, "forget --dry-run": 3,
                "validate": 1, "validate --deep": 1},
    # Invalid UTF-8 inside the span read: the read is refused as corrupt (5);
    # facts citing other spans still work; validate reports it.
    "utf8_jsonl": {"read": 5},
    # Invalid UTF-8 in Markdown: printing or editing the file is refused (5);
    # search skips the file with a warning (0); listings are unaffected.
    "utf8_md": {k: 5 for k in MARKDOWN_READERS},
    # A symlinked session file is refused (4) wherever it is opened by id; the
    # facts citing it show a non-valid status (exit 0); validate reports it.
    "symlink_session": {"read": 4, "facts --session": 4, "correct (stale rev)": 4},
    # A symlinked store directory is an unreadable store (5), never followed.
    # where and projects describe it (0); migrate-legacy refuses every copy
    # into it as a blocked destination (4).
    "symlink_store": {k: 5 for k in COMMANDS if k not in ("where", "config", "projects",
                                                            "migrate-legacy --dry-run")}
    | {"migrate-legacy --dry-run": 4},
    # A symlinked -wal or Markdown file is refused (5) by whatever opens it;
    # search skips a symlinked file with a warning; validate reports both.
    "symlink_wal": {k: 5 for k in FACTS_DB_READERS},
    # migrate-legacy cannot copy the legacy MEMORY.md onto the link: a
    # blocked destination (4).
    "symlink_memory": {"show": 5, "edit": 5, "context": 5, "migrate-legacy --dry-run": 4},
    # Files in sessions/ whose names are not ids are never opened as sessions.
    "odd_session_names": {},
    # Database values are data (issue 16.4): a malformed row is a hidden fact
    # (invalid_ref) and a validate finding; a generation that is no integer
    # makes the exclusions unknowable, so whatever needs them says unreadable.
    "blob_text": {},
    # (forget of an id that does not exist says so before it needs them)
    "bad_generation": {k: 5 for k in FACTS_DB_READERS} | {"forget --yes (unknown)": 3},
    # the verified fact's id now holds newlines: forget VERIFIED finds no such fact
    "injected_fact_id": {"forget --dry-run": 3},
    # A table or column memctl reads is missing: the database is not one
    # memctl can read (5) wherever it is opened, as one that lost its
    # revisions table; validate reports it (db.unreadable) and audits the
    # rest of the store.
    **{name: {k: 5 for k in FACTS_DB_READERS} for name in SCHEMA_DAMAGE},
}

EXPECTED = {(c, k): OVERRIDES[c].get(k, BASE[k]) for c in CORRUPTIONS for k in COMMANDS}

# Defects found by this corpus and not fixed yet: (corruption, command) ->
# reason.  Strict: a fix turns the cell into an XPASS failure.  Empty: every
# defect found so far is fixed (docs/RELIABILITY.md, "Bad input").
KNOWN_BUGS: dict[tuple[str, str], str] = {}

# The inner loop (-m "not sweep and not heavy") runs a diagonal of the table: every corruption
# and every command at least once; the full command runs every cell.
FAST_CELLS = diagonal(list(CORRUPTIONS), list(COMMANDS))

CELLS = [pytest.param(c, k, id=f"{c}|{k}",
                      marks=([pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[(c, k)])]
                             if (c, k) in KNOWN_BUGS else []) + sweep_unless((c, k) in FAST_CELLS))
         for c in CORRUPTIONS for k in COMMANDS]


# (migrate-legacy --dry-run's exit 4, its plan on stdout, was taken for a
# report with no error line, as validate's 1 is; since 2026-12-07 every exit
# 4 of migrate-legacy also says why in its one stderr line, as every error
# does: tests/test_exit_after_write.py.)
REPORTS: set[tuple[str, int]] = set()


def assert_outcome(code: int, stderr: str, expected: int, what: object,
                   argv: tuple[str, ...] = ()) -> None:
    assert "Traceback" not in stderr, (what, stderr)
    assert code != 70, (what, stderr)
    assert code in DOCUMENTED, (what, code, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("memctl: error: ")]
    if argv and (argv[0], code) in REPORTS:
        assert not errors, (what, stderr)
    elif code in (2, 3, 4, 5, 6, 7):
        assert len(errors) == 1, (what, stderr)
        assert stderr.endswith("\n") and stderr.count("memctl: error: ") == 1, (what, stderr)
        assert errors[0] == stderr.splitlines()[-1], (what, stderr)
    else:
        assert not errors, (what, stderr)
    assert code == expected, (what, code, expected, stderr)


# ----------------------------------------------------------------- the corpus


def test_table_is_complete():
    assert set(EXPECTED) == {(c, k) for c in CORRUPTIONS for k in COMMANDS}
    assert set(KNOWN_BUGS) <= set(EXPECTED)
    assert all(v in DOCUMENTED for v in EXPECTED.values())


_CELL_HASHES: dict[Path, dict[str, str]] = {}   # test_corpus_in_process: copy -> tree_hash


@pytest.mark.parametrize("corruption,command", CELLS)
def test_corpus_in_process(template, variant_cache, corruption, command):
    cfg, _store = variant_cache(corruption)
    root = cfg.parent
    # the copy's hash, taken once per copy: a cell that changes the copy drops
    # it (a new copy has a new path), so a kept copy is still what it hashed to
    before = _CELL_HASHES.get(root)
    if before is None:
        before = _CELL_HASHES[root] = tree_hash(root)
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *COMMANDS[command],
                env={"EDITOR": "true", "VISUAL": ""})
    after = tree_hash(root)
    if after != before:
        variant_cache.drop(corruption)
    assert_outcome(r.exit_code, r.stderr, EXPECTED[(corruption, command)], (corruption, command),
                   COMMANDS[command])
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, (corruption, command, changed)


def test_demo_ignores_a_broken_config_dir(template, monkeypatch):
    """demo builds in its own temporary config dir: a broken one around it is
    neither read nor changed."""
    cfg, _store = template.copy("foreign_wal")
    before = tree_hash(cfg.parent)
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(cfg))
    r = run_cli("demo")
    assert_outcome(r.exit_code, r.stderr, 0, "demo")
    assert tree_hash(cfg.parent) == before


# ----------------------------------------------------------------- real processes

SUBPROCESS_COMMANDS = ["validate --deep", "facts", "read", "correct (stale rev)", "show"]
SUBPROCESS_CELLS = [pytest.param(c, id=c, marks=sweep_unless(c == "truncated_db"))
                    for c in CORRUPTIONS]


def _limit_memory() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """``python -m lecode_memctl ARGS`` under RLIMIT_AS = 1 GiB: (result, peak RSS in KiB)."""
    e = dict(os.environ, EDITOR="true", VISUAL="", PYTHONPATH=str(REPO))
    e.pop("MEMCTL_DEBUG", None)
    if env:
        e.update(env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = subprocess.run([sys.executable, "-m", "lecode_memctl", *args], capture_output=True,
                       env=e, timeout=60, preexec_fn=_limit_memory)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return p, max(peak, before)


# One interpreter imports memctl's modules once (faultkit._warm_up), then forks a process per
# command, each ``python -m lecode_memctl ARGS`` from there on (its own pipes,
# no other descriptor, RLIMIT_AS = 1 GiB, main() as the console script runs
# it, the interpreter's own exit): a real process each, with its own exit
# status and stderr, without an interpreter started and memctl imported per
# command (5 per corruption, 12 per FIFO case).  A child still running at the deadline is
# killed and reported as blocked (None).
# The interpreter is a server started once per module (_fork_server): it reads one
# batch a line from the descriptor _REQ (the environment and working directory
# the batch's processes get, as a fresh interpreter would have inherited them)
# and answers each on its stdout; it never runs a command itself, so each batch
# forks from the same warm, untouched parent (before, an interpreter was
# started and warmed up per batch: some 0.4 s of the 1.4 s a corruption took).
_FORKED = """
import json, os, resource, runpy, selectors, signal, sys, time
import tests.faultkit
tests.faultkit._warm_up()      # (every module imported, as faultkit's forked runs start)
_req = os.fdopen(int(sys.argv[1]), "rb")
sys.stdout.write("ready\\n")
sys.stdout.flush()
for _line in _req:
    _runs, _timeout, _limit, _env, _cwd = json.loads(_line)
    _children = {}
    for _key, _argv in _runs.items():
        _out, _err = os.pipe(), os.pipe()
        _pid = os.fork()
        if _pid == 0:
            os.dup2(_out[1], 1)
            os.dup2(_err[1], 2)
            try:
                _fds = [int(_fd) for _fd in os.listdir("/proc/self/fd")]
            except OSError:
                _fds = list(range(3, min(os.sysconf("SC_OPEN_MAX"), 1 << 16)))
            for _fd in _fds:
                if _fd > 2:
                    try:
                        os.close(_fd)
                    except OSError:
                        pass
            os.environ.clear()
            os.environ.update(_env)
            time.tzset()
            os.chdir(_cwd)
            resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))
            sys.argv = [sys.argv[0], *_argv]     # (argv[0]: __main__.py's path, as -m gives it)
            runpy.run_module("lecode_memctl", run_name="__main__", alter_sys=True)
            os._exit(99)
        os.close(_out[1])
        os.close(_err[1])
        _children[_key] = (_pid, _out[0], _err[0])
    _sel = selectors.DefaultSelector()
    _got = {_key: [b"", b""] for _key in _runs}
    for _key, (_pid, _o, _e) in _children.items():
        _sel.register(_o, selectors.EVENT_READ, (_key, 0))
        _sel.register(_e, selectors.EVENT_READ, (_key, 1))
    _deadline = time.monotonic() + _timeout
    while _sel.get_map() and time.monotonic() < _deadline:
        for _k, _ev in _sel.select(max(0.0, _deadline - time.monotonic())):
            _data = os.read(_k.fd, 1 << 16)
            if _data:
                _got[_k.data[0]][_k.data[1]] += _data
            else:
                _sel.unregister(_k.fd)
                os.close(_k.fd)
    for _k in list(_sel.get_map().values()):     # (a blocked child's pipes)
        _sel.unregister(_k.fd)
        os.close(_k.fd)
    _sel.close()
    _report = {}
    for _key, (_pid, _o, _e) in _children.items():
        _pid2, _status, _usage = os.wait4(_pid, os.WNOHANG)
        while _pid2 == 0 and time.monotonic() < _deadline:
            time.sleep(0.01)
            _pid2, _status, _usage = os.wait4(_pid, os.WNOHANG)
        if _pid2 == 0:
            os.kill(_pid, signal.SIGKILL)
            _pid2, _status, _usage = os.wait4(_pid, 0)
            _code = None
        else:
            _code = os.waitstatus_to_exitcode(_status)
        _report[_key] = [_code, _got[_key][1].decode("utf-8", "replace"), _usage.ru_maxrss]
    sys.stdout.write(json.dumps(_report) + "\\n")
    sys.stdout.flush()
"""


class _ForkServer:
    """The ``_FORKED`` interpreter: started on the first batch, stopped at the
    module's end (``_fork_server``) or when a batch goes wrong."""

    proc: subprocess.Popen | None = None
    req: int = -1
    log = None

    def start(self) -> None:
        import tempfile

        e = dict(os.environ, PYTHONPATH=str(REPO))
        e.pop("MEMCTL_DEBUG", None)
        r, self.req = os.pipe()
        if self.log is None:   # (kept across a restart; closed by _fork_server)
            self.log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _FORKED, str(r)], pass_fds=(r,),
                                         stdout=subprocess.PIPE, stderr=self.log, env=e)
        finally:
            os.close(r)
        assert self._line(120) == b"ready\n", self._stderr()

    def _line(self, timeout: float) -> bytes:
        import select

        assert self.proc is not None and self.proc.stdout is not None
        ready, _w, _x = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else b""

    def _stderr(self) -> str:
        self.stop()
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read()[-2000:].decode("utf-8", "replace")

    def batch(self, request: list, timeout: float) -> dict:
        import json

        if self.proc is not None and self.proc.poll() is not None:
            self.stop()     # (gone since the last batch: a new one)
        if self.proc is None:
            self.start()
        try:
            os.write(self.req, json.dumps(request).encode() + b"\n")
        except BrokenPipeError:
            raise AssertionError(("the fork server is gone", self._stderr())) from None
        line = self._line(timeout)
        assert line.endswith(b"\n"), (self.proc and self.proc.poll(), self._stderr())
        return json.loads(line)

    def stop(self) -> None:
        if self.proc is not None:
            os.close(self.req)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None


_SERVER = _ForkServer()


@pytest.fixture(scope="module", autouse=True)
def _fork_server():
    yield _SERVER
    _SERVER.stop()
    if _SERVER.log is not None:
        _SERVER.log.close()
        _SERVER.log = None


def run_forked(runs: dict[str, tuple[str, ...]], timeout: float
               ) -> dict[str, tuple[int | None, str, int]]:
    """Each of ``runs`` as ``python -m lecode_memctl ARGV``, forked from one
    interpreter that imported memctl (``_FORKED``), side by side under
    RLIMIT_AS = 1 GiB, in this process's environment and working directory:
    {key: (exit status, or None if it was still running
    after ``timeout`` seconds, stderr, its peak RSS in KiB)}.  (A forked
    child's RSS counts the pages of every module imported before the fork:
    more than a fresh process that imports what its command needs.)"""
    e = dict(os.environ, EDITOR="true", VISUAL="", PYTHONPATH=str(REPO))
    e.pop("MEMCTL_DEBUG", None)
    report = _SERVER.batch([runs, timeout, MEMORY_LIMIT, e, os.getcwd()], timeout + 60)
    return {key: (status, err, peak) for key, (status, err, peak) in report.items()}


@pytest.mark.parametrize("corruption", SUBPROCESS_CELLS)
def test_corpus_real_processes(template, corruption):
    """Each corruption, as real processes with a 1 GiB address-space limit, on a
    private copy: exit statuses as a shell sees them, one error line, nothing
    changed, peak RSS bounded.  The commands of one corruption run side by side
    (none of them may change anything, so they cannot disturb each other)."""
    cfg, _store = template.copy(corruption)
    root = cfg.parent
    before = tree_hash(root)
    ran = run_forked({command: ("--config-dir", str(cfg), "-C", str(template.project),
                                *COMMANDS[command]) for command in SUBPROCESS_COMMANDS}, timeout=60)
    for command, (status, err, _peak) in ran.items():
        assert status is not None, (corruption, command, "still running after 60 s")
        assert_outcome(status, err, EXPECTED[(corruption, command)], (corruption, command),
                       COMMANDS[command])
    peak_kib = max(peak for _status, _err, peak in ran.values())
    print(f"[bad input] {corruption}: {len(ran)} processes, largest child peak RSS "
          f"{peak_kib // 1024} MiB (limit: address space {MEMORY_LIMIT >> 20} MiB)")
    assert peak_kib < 512 * 1024, (corruption, peak_kib)
    assert tree_hash(root) == before, corruption


# ----------------------------------------------------------------- session ids

BAD_SESSION_IDS = [
    pytest.param("..", id="dotdot"),
    pytest.param(".", id="dot"),
    pytest.param("", id="empty"),
    pytest.param("/abs", id="abs"),
    pytest.param("/etc/passwd", id="abs-file"),
    pytest.param("a/b", id="slash"),
    pytest.param("a\\b", id="backslash"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("x" * 300, id="300-chars"),
    pytest.param("x" * 129, id="129-chars"),
    pytest.param("demo-\u0430lpha", id="cyrillic-a"),
    pytest.param("demo-alpha\uff11", id="fullwidth-digit"),
    pytest.param("\uff11\uff12", id="fullwidth-only"),
    pytest.param("demo-alpha\n", id="trailing-newline"),
    pytest.param("demo-alpha ", id="trailing-space"),
    pytest.param("_x", id="leading-underscore"),
]

SESSION_ID_COMMANDS = {
    "read": lambda sid: ("read", sid, "0", "3"),
    "correct": lambda sid: ("correct", PREF, "2", sid, "1", "1", "x"),
    "facts --session": lambda sid: ("facts", "--session", sid),
    "usage --session": lambda sid: ("usage", "--session", sid),
}


@pytest.mark.parametrize("sid", BAD_SESSION_IDS)
def test_check_session_id_refuses(sid):
    with pytest.raises(UsageError) as exc:
        check_session_id(sid)
    assert "invalid session id" in exc.value.message
    assert "\n" not in exc.value.message and "\x00" not in exc.value.message


@pytest.mark.parametrize("sid", BAD_SESSION_IDS)
def test_bad_session_ids_every_command(template, variant_cache, sid):
    cfg, _store = variant_cache("odd_session_names")
    before = tree_hash(cfg.parent)
    for name, argv in SESSION_ID_COMMANDS.items():
        r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv(sid))
        assert_outcome(r.exit_code, r.stderr, 2, (name, sid))
        assert "invalid session id" in r.stderr, (name, sid, r.stderr)
    assert tree_hash(cfg.parent) == before


@pytest.mark.heavy
@pytest.mark.parametrize("sid", ["..", "/abs", "a/b", "x" * 300, "demo-\u0430lpha", "\uff11\uff12"])
def test_bad_session_ids_real_process(template, sid):
    """A real process (NUL cannot be an argv element; the in-process test covers it)."""
    cfg, _store = template.copy("odd_session_names")
    before = tree_hash(cfg.parent)
    p, _peak = run_limited("--config-dir", str(cfg), "-C", str(template.project),
                           "read", sid, "0", "3")
    assert_outcome(p.returncode, p.stderr.decode("utf-8", "replace"), 2, sid)
    assert tree_hash(cfg.parent) == before


BAD_NOTE_NAMES = ["..", "/abs", "a/b", "a\x00b", "x" * 300, ".hidden", " x"]


@pytest.mark.parametrize("name", BAD_NOTE_NAMES)
def test_bad_note_names(template, variant_cache, name):
    cfg, _store = variant_cache("intact")
    before = tree_hash(cfg.parent)
    for argv in (("notes", name), ("edit", "note", name)):
        r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv,
                    env={"EDITOR": "true", "VISUAL": ""})
        assert_outcome(r.exit_code, r.stderr, 2, argv)
    assert tree_hash(cfg.parent) == before


@pytest.mark.parametrize("name", ["demo-\u0430lpha", "\uff11\uff12"])
def test_lookalike_note_names_are_just_absent(template, variant_cache, name):
    """Look-alike Unicode is a legal note name: no such note is 'not found' (3),
    and editing it with an editor that writes nothing creates nothing."""
    cfg, _store = variant_cache("intact")
    before = tree_hash(cfg.parent)
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "notes", name)
    assert_outcome(r.exit_code, r.stderr, 3, name)
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "edit", "note", name,
                env={"EDITOR": "true", "VISUAL": ""})
    assert_outcome(r.exit_code, r.stderr, 0, name)
    assert tree_hash(cfg.parent) == before


# ----------------------------------------------------------------- fact ids

BAD_FACT_IDS = [PREF + "\n", PREF.upper(), PREF[:15], PREF + "0", "../" + PREF[:13], "",
                "\uff10" * 16, PREF[:15] + "\u0430", "a\x00" + PREF[:14]]
FACT_ID_COMMANDS = {
    "recall": lambda fid: ("recall", fid),
    "history": lambda fid: ("history", fid),
    "correct": lambda fid: ("correct", fid, "2", "demo-alpha", "14", "14", "x"),
    "forget --dry-run": lambda fid: ("forget", fid, "--dry-run"),
    "forget --yes": lambda fid: ("forget", fid, "--yes"),
}


@pytest.mark.parametrize("fid", BAD_FACT_IDS, ids=repr)
def test_bad_fact_ids_every_command(template, variant_cache, fid):
    """Fact ids are checked by syntax (16 lower-case hex digits, nothing after)
    before any database access: exit 2, nothing changed."""
    cfg, _store = variant_cache("intact")
    before = tree_hash(cfg.parent)
    for name, argv in FACT_ID_COMMANDS.items():
        r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv(fid))
        assert_outcome(r.exit_code, r.stderr, 2, (name, fid))
    assert tree_hash(cfg.parent) == before


def test_template_has_only_the_planted_problem(template, variant_cache):
    """The base fixture is what docs say: validate, --deep included, finds the
    demo's one planted problem (fact.stale) and nothing else."""
    import orjson

    cfg, _store = variant_cache("intact")
    for deep in ((), ("--deep",)):
        r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "validate", "--json",
                    *deep)
        found = sorted((f["code"], f["severity"]) for f in orjson.loads(r.stdout_bytes)["findings"])
        assert found == [("fact.stale", "error")], (deep, found)


# ----------------------------------------------------------------- nothing blocks (issue 16.3)

def _fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


FIFO_CASES = {
    # a FIFO named like a transcript (in place of one, and a new name)
    "fifo_session": lambda cfg, store, proj: (_fifo(store / "sessions" / "demo-alpha.jsonl"),
                                              _fifo(store / "sessions" / "zz-fifo.jsonl")),
    "fifo_config": lambda cfg, store, proj: _fifo(cfg / "config.toml"),
    "fifo_memory": lambda cfg, store, proj: (_fifo(store / "MEMORY.md"),
                                             _fifo(store / "notes" / "zz.md")),
    "fifo_wal": lambda cfg, store, proj: _fifo(store / "facts.sqlite3-wal"),
    # a project whose .git is a FIFO (identity resolution reads a .git file)
    "fifo_git": lambda cfg, store, proj: _fifo(proj / ".git"),
}
FIFO_COMMANDS = {
    "facts": ("facts",), "sessions": ("sessions",), "usage": ("usage",),
    "validate": ("validate",), "validate --all-projects": ("validate", "--all-projects"),
    "projects": ("projects",), "config": ("config",), "context": ("context",),
    "where": ("where",), "show": ("show",), "read": ("read", "demo-alpha", "0", "3"),
    "notes NAME": ("notes", "zz"),
}
# (case, command) -> exit status where it differs from the intact store's.
FIFO_BASE = {k: 0 for k in FIFO_COMMANDS} | {"validate": 1, "validate --all-projects": 1,
                                                 "notes NAME": 3}
FIFO_OVERRIDES = {
    # the FIFO transcript is unreadable: its facts are missing, read refuses it
    "fifo_session": {"read": 5},
    # the commands that read config.toml refuse it; validate reports it (config.invalid)
    "fifo_config": {"config": 5, "context": 5},
    "fifo_memory": {"show": 5, "context": 5, "notes NAME": 5},
    "fifo_wal": {"facts": 5, "context": 5, "read": 5},
    # a plain directory with a FIFO .git is no git project: no store there
    "fifo_git": {k: 3 for k in FIFO_COMMANDS if k not in ("where", "projects", "config",
                                                          "validate --all-projects")},
}


def _tree_state(root: Path) -> dict[str, str]:
    """conftest's ``tree_hash`` for a tree that holds FIFOs (which it would
    open and wait on): a FIFO is recorded by type, mode and mtime."""
    import stat as _stat

    fifos = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if _stat.S_ISFIFO(st.st_mode):
                fifos[str(p)] = f"fifo:{st.st_mode:o}:{st.st_mtime_ns}"
    hidden = root.parent / (root.name + "-fifos-hidden")
    hidden.mkdir()
    try:
        for i, name in enumerate(fifos):
            os.rename(name, hidden / str(i))
        out = tree_hash(root)
    finally:
        for i, name in enumerate(fifos):
            os.rename(hidden / str(i), name)
        hidden.rmdir()
    return out | {os.path.relpath(p, root): v for p, v in fifos.items()}


@pytest.mark.heavy
@pytest.mark.parametrize("case", list(FIFO_CASES))
def test_a_fifo_never_blocks(template, case):
    """A FIFO where a file is expected (transcript, config.toml, MEMORY.md, a
    note, the -wal, a project's .git) is refused or skipped as not a regular
    file; no command waits for a writer that never comes (issue 16.3).  Real
    processes with a timeout: a blocking open shows as a timeout, not a hung
    suite."""
    cfg, store = template.copy("intact")
    root = cfg.parent
    proj = template.project
    if case == "fifo_git":
        proj = root / "plain-project"
        proj.mkdir()
    FIFO_CASES[case](cfg, store, proj)
    before = _tree_state(root)
    ran = run_forked({command: ("--config-dir", str(cfg), "-C", str(proj), *argv)
                      for command, argv in FIFO_COMMANDS.items()}, timeout=120)
    blocked, got = [], {}
    for command, (status, err, _peak) in ran.items():
        if status is None:
            blocked.append(command)
            continue
        got[command] = status
        assert_outcome(status, err, status, (case, command), FIFO_COMMANDS[command])
    assert not blocked, (case, blocked)
    assert got == {k: FIFO_OVERRIDES[case].get(k, FIFO_BASE[k]) for k in FIFO_COMMANDS}, case
    assert _tree_state(root) == before, case


# ----------------------------------------------------------------- validate agrees (issue 16.2)

def _validate_json(cfg: Path, project: Path, *args: str) -> tuple[int, dict]:
    import orjson

    r = run_cli("--config-dir", str(cfg), "-C", str(project), "validate", "--json", *args)
    assert_outcome(r.exit_code, r.stderr, r.exit_code, ("validate", args))
    return r.exit_code, orjson.loads(r.stdout_bytes)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_validate_agrees_on_a_database_that_is_not_a_file(template, kind):
    """facts.sqlite3 replaced by a directory or a FIFO: every command that reads
    it exits 5, and validate reports it (db.unreadable), not OK."""
    cfg, store = template.copy("intact")
    db = store / "facts.sqlite3"
    db.unlink()
    db.mkdir() if kind == "directory" else os.mkfifo(db)
    before = _tree_state(cfg.parent)
    code, out = _validate_json(cfg, template.project, "--ignore", "fact.*")
    db_findings = [f for f in out["findings"] if f["code"] == "db.unreadable"]
    assert code == 1 and db_findings, out["findings"]
    assert "not a regular file" in db_findings[0]["message"]
    # the transcripts carry the demo forget's epoch 1: no database holds it
    assert "session.epoch_ahead" in {f["code"] for f in out["findings"]}, out["findings"]
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "facts")
    assert_outcome(r.exit_code, r.stderr, 5, "facts")
    assert _tree_state(cfg.parent) == before


def test_validate_all_projects_reports_every_entry(template):
    """A symbolic link in a store's place and a stray file under memory/ are
    findings of validate --all-projects (errors), where validate of that
    project alone exits 5; a name that is no slug is a warning."""
    cfg, store = template.copy("intact")
    mem = store.parent
    os.symlink(store, mem / "linked-000000000000")
    (mem / "stray-111111111111").write_bytes(b"x\n")
    (mem / "README").write_bytes(b"x\n")
    before = tree_hash(cfg.parent)
    code, out = _validate_json(cfg, template.project, "--all-projects", "--ignore", "fact.*")
    by_project = {}
    for f in out["findings"]:
        by_project.setdefault(f["project"], []).append((f["code"], f["severity"]))
    assert by_project.get("linked-000000000000") == [("layout.symlink", "error")], by_project
    assert by_project.get("stray-111111111111") == [("layout.unreadable", "error")], by_project
    assert by_project.get("README") == [("layout.unexpected_file", "warning")], by_project
    assert code == 1
    for name in ("linked-000000000000", "stray-111111111111"):
        r = run_cli("--config-dir", str(cfg), "validate", "--store", str(mem / name))
        assert_outcome(r.exit_code, r.stderr, 5, name)
    assert tree_hash(cfg.parent) == before



# ------------------------------------------- a table or column missing (schema damage)

# what each damage names in its error (the table, or the table and its column)
SCHEMA_DAMAGE_NAMES = {"no_exclusions": "exclusions", "no_provenance": "provenance",
                       "no_provenance_seq": "provenance lacks column(s) seq",
                       "no_source_refs_digest": "source_refs lacks column(s) digest",
                       "no_meta": "meta", "no_forgotten": "forgotten"}


@pytest.mark.parametrize("damage", list(SCHEMA_DAMAGE))
def test_a_missing_table_or_column_is_store_unreadable_before_any_row(template, damage):
    """A database of the current schema without a table or column memctl
    reads: facts --json (and --all --format json) printed its document's
    head, then SQLite's "no such table" inside the facts array, and never
    closed the document.  The open says so now (StoreCorrupt, exit 5): one
    valid JSON error document, one line on stderr naming the table, and the
    store untouched."""
    import orjson

    cfg, _store = template.copy(damage)
    before = tree_hash(cfg.parent)
    for argv in (("facts", "--json"), ("facts", "--all", "--format", "json"),
                 ("facts", "--format", "jsonl")):
        r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv)
        assert_outcome(r.exit_code, r.stderr, 5, (damage, argv))
        doc = orjson.loads(r.stdout_bytes)    # one document, whole
        assert doc["error"]["code"] == "store_corrupt", (damage, argv, doc)
        assert SCHEMA_DAMAGE_NAMES[damage] in doc["error"]["message"], (damage, doc)
    assert tree_hash(cfg.parent) == before


@pytest.mark.parametrize("damage", list(SCHEMA_DAMAGE))
def test_validate_reports_a_missing_table_or_column_and_audits_the_rest(template, damage):
    """validate said only "database error: no such column: f.digest" and
    exited 5, without a report.  Now it is a db.unreadable finding, as a
    dropped revisions table is, and the transcripts and Markdown are audited
    all the same (exit 1)."""
    cfg, _store = template.copy(damage)
    before = tree_hash(cfg.parent)
    code, out = _validate_json(cfg, template.project)
    assert code == 1, out
    unreadable = [f for f in out["findings"] if f["code"] == "db.unreadable"]
    assert len(unreadable) == 1, out["findings"]
    assert SCHEMA_DAMAGE_NAMES[damage] in unreadable[0]["message"], unreadable
    (summary,) = out["projects"]
    assert summary["sessions"] == 3 and summary["transcript_bytes_read"] > 0, summary
    assert tree_hash(cfg.parent) == before


@pytest.mark.parametrize("damage", list(SCHEMA_DAMAGE))
def test_validate_all_projects_goes_on_past_a_missing_table(template, tmp_path, damage):
    """validate --all-projects stopped at such a store (exit 5) and wrote no
    Prometheus file; the other stores are audited and the file written."""
    from .promparse import parse_exposition

    cfg, store = template.copy("intact")
    broken = store.parent / "broken-0123456789ab"
    shutil.copytree(store, broken, symlinks=True)
    damage_schema(broken / "facts.sqlite3", damage)
    before = tree_hash(cfg.parent)
    target = tmp_path / "m.prom"
    r = run_cli("--config-dir", str(cfg), "validate", "--all-projects", "--format", "prometheus",
                "--output", str(target))
    assert_outcome(r.exit_code, r.stderr, 1, damage)
    fams = parse_exposition(target.read_text())
    ok = {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}
    assert {template.slug, "broken-0123456789ab"} <= set(ok), ok
    assert fams["memctl_validate_stores"].samples[0].value == len(ok)
    found = {(s.labels["project"], s.labels["code"]) for s in
             fams["memctl_validate_findings"].samples}
    assert ("broken-0123456789ab", "db.unreadable") in found, found
    assert tree_hash(cfg.parent) == before

def test_validate_all_projects_goes_on_past_a_busy_store(template, tmp_path, monkeypatch):
    """A store whose facts database kept changing past --lock-wait (no
    stable private snapshot: StoreBusy) stopped validate --all-projects with
    exit 6: no other store audited, no Prometheus file, the cron job silent.
    That store is now a db.unreadable finding, not audited; the others are,
    the file is written, exit 1.  validate of that store alone is still
    exit 6."""
    from lecode_memctl.core import facts as facts_mod
    from lecode_memctl.core.errors import StoreBusy

    from .promparse import parse_exposition

    cfg, store = template.copy("intact")
    busy = store.parent / "busy-0123456789ab"
    shutil.copytree(store, busy, symlinks=True)
    real = facts_mod.private_snapshot

    def snapshot(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if Path(path).parent.name == busy.name:
            raise StoreBusy(f"{path}: kept changing (test)")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(facts_mod, "private_snapshot", snapshot)
    before = tree_hash(cfg.parent)
    target = tmp_path / "m.prom"
    r = run_cli("--config-dir", str(cfg), "--no-state", "validate", "--all-projects",
                "--format", "prometheus", "--output", str(target), "--lock-wait", "0.1")
    assert r.exit_code == 1, r.stderr
    fams = parse_exposition(target.read_text())
    ok = {s.labels["project"]: s.value for s in fams["memctl_validate_ok"].samples}
    assert {template.slug, "busy-0123456789ab"} <= set(ok) and ok["busy-0123456789ab"] == 0, ok
    assert fams["memctl_validate_stores"].samples[0].value == len(ok)
    found = {(s.labels["project"], s.labels["code"]) for s in
             fams["memctl_validate_findings"].samples}
    assert ("busy-0123456789ab", "db.unreadable") in found, found
    # the demo store was audited whole: its planted stale fact is found
    assert (template.slug, "fact.stale") in found, found
    alone = run_cli("--store", str(busy), "--no-state", "validate", "--lock-wait", "0.1")
    assert alone.exit_code == 6, alone.stderr
    assert tree_hash(cfg.parent) == before


def test_a_symlinked_sessions_directory_is_refused_everywhere(template):
    """sessions/ replaced by a link to a copy elsewhere: read and facts refuse
    the transcripts behind it; validate and usage did read through it (only
    the last component was guarded).  Now every reader refuses them."""
    import orjson

    cfg, store = template.copy("intact")
    outside = cfg.parent / "outside-sessions"
    shutil.move(store / "sessions", outside)
    os.symlink(outside, store / "sessions")
    before = tree_hash(cfg.parent)
    base = ("--config-dir", str(cfg), "-C", str(template.project))
    code, out = _validate_json(cfg, template.project)
    assert out["projects"][0]["facts"]["valid"] == 0, out["projects"]
    refused = {f["session_id"] for f in out["findings"] if f["code"] == "session.refused"}
    assert refused == {"demo-alpha", "demo-beta", "demo-gamma"}, out["findings"]
    r = run_cli(*base, "usage", "--json")
    assert_outcome(r.exit_code, r.stderr, 0, "usage")
    rep = orjson.loads(r.stdout_bytes)
    assert rep["sessions_counted"] == 0 and len(rep["refused_sessions"]) == 3, rep
    r = run_cli(*base, "facts", "--json")
    assert_outcome(r.exit_code, r.stderr, 0, "facts")
    assert "valid" not in {f["status"] for f in orjson.loads(r.stdout_bytes)["facts"]}
    assert tree_hash(cfg.parent) == before


def test_validate_ignores_a_wal_that_vanishes_after_the_listing(template, monkeypatch):
    """A writer that closes after each write (correct, forget) removes its -wal
    and -shm: an entry listed and gone before its stat is no layout.unreadable."""
    from lecode_memctl.core.audit import run as audit_run

    cfg, store = template.copy("intact")
    real_scandir = os.scandir

    class Gone:
        def __init__(self, d, name):
            self.name, self.path = name, os.path.join(d, name)

        def stat(self, follow_symlinks=True):
            raise FileNotFoundError(2, "No such file or directory", self.path)

        def is_dir(self, follow_symlinks=True):
            return False

    class Listing:
        def __init__(self, d):
            self.d, self.it = d, real_scandir(d)

        def __enter__(self):
            entries = list(self.it)
            if Path(self.d) == store:
                entries += [Gone(self.d, "facts.sqlite3-wal"), Gone(self.d, "facts.sqlite3-shm")]
            return iter(entries)

        def __exit__(self, *exc):
            self.it.close()

    def scandir(d="."):
        # only the store's listing is faked (shutil.rmtree of the private
        # snapshot lists directories by fd)
        return Listing(d) if isinstance(d, (str, os.PathLike)) else real_scandir(d)

    monkeypatch.setattr(audit_run.os, "scandir", scandir)
    code, out = _validate_json(cfg, template.project)
    assert [f["code"] for f in out["findings"]] == ["fact.stale"], out["findings"]


# ----------------------------------------------------------------- database values (issue 16.4)

def test_malformed_rows_are_findings_and_statuses(template, variant_cache):
    """A BLOB text and an injected fact id: each is a hidden fact (invalid_ref)
    in facts and a fact.hidden finding in validate; a non-integer generation is
    a db finding.  Never exit 70."""
    import orjson

    base = lambda cfg: ("--config-dir", str(cfg), "-C", str(template.project))  # noqa: E731
    cfg, _store = variant_cache("blob_text")
    r = run_cli(*base(cfg), "facts", "--json")
    assert_outcome(r.exit_code, r.stderr, 0, "facts")
    status = {f["fact_id"]: (f["status"], f["reason"]) for f in orjson.loads(r.stdout_bytes)["facts"]}
    assert status[VERIFIED_ID] == ("hidden", "invalid_ref"), status
    assert status["80fa60fdfe856452"] == ("hidden", "invalid_ref"), status
    code, out = _validate_json(cfg, template.project)
    hidden = {(f["fact_id"], f["revision"]) for f in out["findings"] if f["code"] == "fact.hidden"
              and "malformed row" in f["message"]}
    assert hidden == {(VERIFIED_ID, 1), ("80fa60fdfe856452", 1)}, out["findings"]

    cfg, _store = variant_cache("bad_generation")
    code, out = _validate_json(cfg, template.project)
    assert any(f["code"] == "db.generation_mismatch" and "'abc'" in f["message"]
               for f in out["findings"]), out["findings"]


def test_an_injected_fact_id_never_reaches_the_section(template, variant_cache):
    """A fact id holding a newline and '## ...' cannot start a heading in
    context's section or in its --explain lines: the fact is hidden, and its id
    is printed escaped."""
    cfg, _store = variant_cache("injected_fact_id")
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "context", "--explain")
    assert_outcome(r.exit_code, r.stderr, 0, "context")
    lines = (r.stdout + r.stderr).splitlines()
    assert not [line for line in lines if line.startswith("## Injected")], r.stdout + r.stderr
    assert "c283\\n## Injected heading\\nx" in r.stdout + r.stderr


# ----------------------------------------------------------------- names, numbers, sizes (issue 16.5)

def test_names_with_invalid_utf8(template):
    """A note and a store whose names hold a 0x9b byte (a C1 CSI in Latin-1
    terminals): --json says \\x9b instead of exit 70; human output never
    writes the raw byte."""
    import orjson

    cfg, store = template.copy("intact")
    mem = os.fsencode(store.parent)
    src = (store / "notes" / "release.md").read_bytes()
    with open(os.path.join(os.fsencode(store / "notes"), b"bad\x9bname.md"), "wb") as fh:
        fh.write(src)
    odd = os.path.join(mem, b"odd\x9bstore-000000000000")
    os.mkdir(odd, 0o700)
    for sub in (b"sessions", b"notes"):   # a real database and transcript in the odd store
        os.mkdir(os.path.join(odd, sub), 0o700)
    shutil.copyfile(store / "facts.sqlite3", os.path.join(odd, b"facts.sqlite3"))
    shutil.copyfile(store / "sessions" / "demo-alpha.jsonl",
                    os.path.join(odd, b"sessions", b"demo-alpha.jsonl"))
    before = tree_hash(cfg.parent)
    base = ("--config-dir", str(cfg), "-C", str(template.project))
    odd_store = ("--store", os.fsdecode(odd))
    for argv in (("notes",), ("validate", "--all-projects"), ("projects",), ("search", "release"),
                 ("secrets", "--all-projects"), (*odd_store, "facts"), (*odd_store, "sessions"),
                 (*odd_store, "validate")):
        for fmt in ((), ("--json",)):
            if argv[0] == "search" and fmt:
                continue
            r = run_cli(*base, *argv, *fmt)
            assert_outcome(r.exit_code, r.stderr, r.exit_code, (argv, fmt))
            assert r.exit_code in (0, 1), (argv, fmt, r.stderr)
            assert b"\x9b" not in r.stdout_bytes.replace("\u009b".encode(), b""), (argv, fmt)
            assert "\u009b" not in r.stdout and "\udc9b" not in r.stdout, (argv, fmt)
            if fmt:
                orjson.loads(r.stdout_bytes)
    for fmt in ("jsonl", "csv", "tsv", "prometheus"):
        r = run_cli(*base, "validate", "--all-projects", "--format", fmt)
        assert_outcome(r.exit_code, r.stderr, r.exit_code, fmt)
        assert r.exit_code in (0, 1), (fmt, r.stderr)
        assert b"\x9b" not in r.stdout_bytes, fmt
    r = run_cli(*base, *odd_store, "facts", "--json")
    assert orjson.loads(r.stdout_bytes), "the odd store's facts are listed"
    r = run_cli(*base, "notes", "--json")
    assert "bad\\x9bname" in [n["name"] for n in orjson.loads(r.stdout_bytes)]
    assert tree_hash(cfg.parent) == before


_COUNTED = [  # every command with --offset or --limit, and the option
    (("read", "demo-alpha", "0", "3"), "--offset"), (("read", "demo-alpha", "0", "3"), "--limit"),
    (("recall", PREF), "--offset"), (("recall", PREF), "--limit"),
    (("facts",), "--offset"), (("facts", "--format", "jsonl"), "--offset"),
    (("facts", "--format", "jsonl"), "--limit"),
    (("sessions",), "--offset"), (("sessions",), "--limit"),
    (("notes",), "--offset"), (("notes",), "--limit"),
    (("projects",), "--offset"), (("projects",), "--limit"),
    (("search", "release"), "--limit"), (("grep", "x"), "--limit"),
]


@pytest.mark.parametrize(("argv", "option"), _COUNTED,
                         ids=[f"{' '.join(a[:1] + a[2:])} {o}" for a, o in _COUNTED])
@pytest.mark.parametrize("value", ["100000000000000000000", str(1 << 64), str(1 << 63),
                                   str((1 << 63) - 1)])
def test_huge_offsets_are_usage_errors(template, variant_cache, argv, option, value):
    """A count past 2^63-1 is a usage error (exit 2), never 70 (islice takes at
    most sys.maxsize); 2^63-1 itself is a count like any other."""
    cfg, _store = variant_cache("intact")
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv, option, value)
    if int(value) >= 1 << 63:
        assert_outcome(r.exit_code, r.stderr, 2, (argv, option, value))
        assert "9223372036854775807" in r.stderr, r.stderr
    else:   # read and recall refuse an offset past the text; the rest list nothing
        assert_outcome(r.exit_code, r.stderr, r.exit_code, (argv, option, value))
        assert r.exit_code in (0, 1, 2), (argv, option, r.exit_code, r.stderr)


_WINDOWED = [("facts", "--json"), ("facts", "--format", "jsonl"),
             ("sessions", "--json"), ("notes", "--json"), ("projects", "--json")]


@pytest.mark.parametrize("argv", _WINDOWED, ids=[" ".join(a) for a in _WINDOWED])
@pytest.mark.parametrize("offset", ["0", "1", "5"])
def test_the_largest_limit_after_an_offset_lists_the_rest(template, variant_cache, argv, offset):
    """--limit 2^63-1 with an --offset: their sum passed sys.maxsize, which
    itertools.islice refuses (exit 70).  It lists what is left after the
    offset, as no --limit does."""
    cfg, _store = variant_cache("intact")
    base = ("--config-dir", str(cfg), "-C", str(template.project), *argv, "--offset", offset)
    r = run_cli(*base, "--limit", str((1 << 63) - 1))
    assert_outcome(r.exit_code, r.stderr, 0, (argv, offset))
    whole = run_cli(*base)
    assert_outcome(whole.exit_code, whole.stderr, 0, (argv, offset))
    if "--json" in argv:
        import orjson

        a, b = orjson.loads(r.stdout_bytes), orjson.loads(whole.stdout_bytes)
        for doc in (a, b):
            if isinstance(doc, dict):
                doc.pop("limit", None)
        assert a == b
    elif "jsonl" in argv:
        assert r.stdout == whole.stdout


@pytest.mark.parametrize(("argv", "option", "value"), [
    (("facts",), "--until", "0001-01-01T00:00:00+14:00"),
    (("facts", "--format", "jsonl"), "--since", "9999-12-31T23:59:59-01:00"),
    (("sessions",), "--since", "0001-01-01T00:00:00+14:00"),
    (("usage",), "--since", "0001-01-01T00:00:00+14:00"),
    (("grep", "x"), "--since", "0001-01-01T00:00:00+14:00"),
])
def test_a_time_outside_the_calendar_in_utc_is_a_usage_error(template, variant_cache, argv,
                                                            option, value):
    """A valid RFC 3339 time whose UTC is before the year 1 or after 9999
    made the conversion overflow (exit 70): a usage error naming it."""
    cfg, _store = variant_cache("intact")
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv, option, value)
    assert_outcome(r.exit_code, r.stderr, 2, (argv, option, value))
    assert "outside the years 1 to 9999" in r.stderr, r.stderr


@pytest.mark.parametrize(("option", "value", "listed"), [
    ("--since", "999999999w", True), ("--until", "999999999w", False),
    ("--until", "9999-12-31", True), ("--since", "0001-01-01", True),
    # (ten digits and more were a usage error, where OUTPUT.md says the
    # calendar's first moment; 5,000 digits are past int()'s limit)
    ("--since", "9999999999w", True), ("--until", "9999999999w", False),
    ("--since", "0" * 20 + "999999999w", True), ("--until", "9" * 5000 + "s", False),
])
def test_times_at_the_calendars_ends_are_windows(template, variant_cache, option, value, listed):
    """An age older than the calendar is its first moment; --until the
    calendar's last day is its end (there is no next day to count from)."""
    import orjson

    cfg, _store = variant_cache("intact")
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "facts", "--format",
                "jsonl", option, value)
    assert_outcome(r.exit_code, r.stderr, 0, (option, value))
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert bool(rows) is listed, (option, value, rows)


def test_a_row_dated_before_the_year_1000_is_windowed(template):
    """A fact created in 0999: utc_time wrote it 999-..., which the window
    test could not read back (exit 70 for any --since/--until)."""
    import orjson

    cfg, store = template.copy("intact")
    with sqlite3.connect(store / "facts.sqlite3") as db:
        db.execute("UPDATE facts SET created = '0999-06-01T00:00:00.000Z', "
                   "updated = '0999-06-01T00:00:00.000Z' WHERE fact_id = ?", (PREF,))
    db.close()
    base = ("--config-dir", str(cfg), "-C", str(template.project), "facts")
    r = run_cli(*base, "--since", "2026-01-01", "--format", "jsonl")
    assert_outcome(r.exit_code, r.stderr, 0, "--since")
    assert PREF not in r.stdout
    r = run_cli(*base, "--until", "1000-01-01", "--json", "--since", "999999999w")
    assert_outcome(r.exit_code, r.stderr, 0, "--until")
    doc = orjson.loads(r.stdout_bytes)
    assert [f["fact_id"] for f in doc["facts"]] == [PREF]
    assert doc["facts"][0]["created"] == "0999-06-01T00:00:00.000Z"
    assert doc["filters"]["since"] == "0001-01-01T00:00:00.000Z"


@pytest.mark.parametrize("argv", [("facts",), ("validate",), ("recall", PREF)])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "2147484"])
def test_lock_wait_out_of_range_is_a_usage_error(template, variant_cache, argv, value):
    """--lock-wait inf / nan gave 70 (OverflowError / ValueError turning it into
    SQLite's milliseconds), and SQLite takes a busy timeout past 2^31-1 ms as
    none at all: each is a usage error."""
    cfg, _store = variant_cache("intact")
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), *argv,
                "--lock-wait", value)
    assert_outcome(r.exit_code, r.stderr, 2, (argv, value))
    assert "--lock-wait" in r.stderr, r.stderr


def test_token_counts_near_2_63_are_unknown_usage(template):
    """Token counts at and beyond 2^63 (and a cost that sums to inf) are
    malformed usage, counted as unknown: usage --json stays valid JSON, exit 0."""
    import orjson

    cfg, store = template.copy("intact")
    p = store / "sessions" / "demo-alpha.jsonl"
    huge = b'"usage":{"input_tokens":9223372036854775807,"output_tokens":18446744073709551615,' \
           b'"cost":1e308}'
    lines = p.read_bytes().splitlines(keepends=True)
    out = []
    for line in lines:
        if b'"event":"memory_usage"' in line:
            head, _sep, _rest = line.partition(b'"usage":')
            line = head + huge + b"}\n"
        out.append(line)
    p.write_bytes(b"".join(out))
    q = store / "sessions" / "demo-beta.jsonl"
    q.write_bytes(p.read_bytes().replace(b'"session_id":"demo-alpha"', b'"session_id":"demo-beta"'))
    base = ("--config-dir", str(cfg), "-C", str(template.project))
    r = run_cli(*base, "usage", "--json")
    assert_outcome(r.exit_code, r.stderr, 0, "usage --json")
    total = orjson.loads(r.stdout_bytes)["total"]
    assert total["input_tokens"] < 1 << 63 and total["unknown_usage_calls"] >= 1, total
    r = run_cli(*base, "usage")
    assert_outcome(r.exit_code, r.stderr, 0, "usage")
    assert "inf" not in r.stdout, r.stdout


def _peak_child_rss(argv: list[str], **kw) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``argv`` under RLIMIT_AS = 1 GiB; (result, the child's peak RSS in KiB),
    measured by a wrapper process of its own so that earlier children do not count."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=sys.stdout, stderr=sys.stderr, "
            f"preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT})))\n"
            "sys.stderr.write('\\nPEAK %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, timeout=300, **kw)
    err = p.stderr.decode("utf-8", "replace")
    peak = int(err.rsplit("PEAK ", 1)[1].split()[0])
    p.stderr = err.rsplit("\nPEAK ", 1)[0].encode()
    return p, peak


@pytest.mark.heavy
@pytest.mark.slow
def test_a_huge_memory_md_is_bounded_work(template):
    """A 100 MB MEMORY.md: show --json writes it whole as valid JSON (it died with
    SIGSEGV in the encoder under 1 GiB); a 300 MB one: context reads only what
    its 32 KiB section can show (it read the file whole: MemoryError)."""
    import orjson

    cfg, store = template.copy("intact")
    line = "- a long line of memory \u00e9\u00e9 " * 4 + "\n"
    chunk = (line * ((1 << 20) // len(line.encode()) + 1)).encode()[: 1 << 20]
    with open(store / "MEMORY.md", "wb") as fh:
        for _ in range(100):
            fh.write(chunk)
    e = dict(os.environ, PYTHONPATH=str(REPO))
    e.pop("MEMCTL_DEBUG", None)
    base = [sys.executable, "-m", "lecode_memctl", "--config-dir", str(cfg), "-C", str(template.project)]
    p, peak = _peak_child_rss(base + ["show", "--json"], env=e)
    assert p.returncode == 0, (p.returncode, p.stderr[-500:])
    text = orjson.loads(p.stdout)["text"]
    assert len(text.encode()) == 100 << 20 and text.startswith("- a long line")
    del text
    print(f"[bad input] show --json of a 100 MiB MEMORY.md: peak RSS {peak // 1024} MiB")
    with open(store / "MEMORY.md", "ab") as fh:
        for _ in range(200):
            fh.write(chunk)
    p, peak = _peak_child_rss(base + ["context", "--json"], env=e)
    assert p.returncode == 0, (p.returncode, p.stderr[-500:])
    parts = {x["name"]: x for x in orjson.loads(p.stdout)["parts"]}
    assert parts["MEMORY.md"]["truncated"] and parts["MEMORY.md"]["source_bytes"] == 300 << 20
    print(f"[bad input] context of a 300 MiB MEMORY.md: peak RSS {peak // 1024} MiB")
    assert peak < 200 * 1024, peak


@pytest.mark.slow
def test_validate_of_a_huge_note_is_bounded_memory(template):
    """validate checks a Markdown file's UTF-8 piece by piece: a 96 MiB note
    with a bad byte at its end costs about what an 8 MiB one costs (it read
    the file whole and decoded it: 2x the file, 430 MB for 200 MiB, and a
    bundle of such a note took verify past its memory), and the finding
    names the same line and byte."""
    import orjson

    cfg, store = template.copy("intact")
    line = b"- a note line \xc3\xa9\xc3\xa9 of memory, long enough to fill pieces\n"
    e = dict(os.environ, PYTHONPATH=str(REPO))
    e.pop("MEMCTL_DEBUG", None)
    base = [sys.executable, "-m", "lecode_memctl", "--config-dir", str(cfg), "-C",
            str(template.project), "validate", "--json", "--ignore", "fact.*"]
    peaks = {}
    for mib in (8, 96):
        n = (mib << 20) // len(line)
        with open(store / "notes" / "big.md", "wb") as fh:
            for _ in range(n // 4096):
                fh.write(line * 4096)
            fh.write(line * (n % 4096) + b"bad \xff\n")
        p, peaks[mib] = _peak_child_rss(base, env=e)
        found = [f for f in orjson.loads(p.stdout)["findings"] if f["code"] == "markdown.invalid_utf8"]
        assert [(f["file"], f["offset"]) for f in found] == [("notes/big.md", n * len(line) + 4)], found
        assert f"line {n + 1}," in found[0]["message"], found
    print(f"[bad input] validate of an 8 / 96 MiB note: peak RSS {peaks[8] // 1024} / "
          f"{peaks[96] // 1024} MiB")
    assert peaks[96] - peaks[8] < 32 * 1024, peaks


# ----------------------------------------------------------------- valid JSON orjson refuses (16.5, 16.8)

def test_valid_json_orjson_refuses_is_a_record_or_too_large(template):
    """A number beyond a double (1e400) in a valid record is a record (it was
    not_json); 5000 levels of nesting is too_large, not corrupt, in the
    session scan and in validate --deep (one loader, one classification)."""
    import orjson

    cfg, store = template.copy("intact")
    lines = (store / "sessions" / "demo-gamma.jsonl").read_bytes().splitlines(keepends=True)
    last = orjson.loads(lines[-1])["seq"]
    extra = (b'{"seq":%d,"type":"event","event":"note","x":1e400,"y":123456789012345678901234567890}\n'
             % (last + 1)
             + b'{"seq":%d,"type":"event","event":"note","x":' % (last + 2) + b"[" * 5000
             + b"]" * 5000 + b"}\n"
             + b'{"seq":%d,"type":"event","event":"note"}\n' % (last + 3))
    with open(store / "sessions" / "demo-gamma.jsonl", "ab") as fh:
        fh.write(extra)
    code, out = _validate_json(cfg, template.project, "--deep")
    # (the events' name, "note", is none the contract lists: since
    # 2026-12-07 --deep says so, session.unknown_event, info, beside)
    found = [(f["code"], f["line"], f["reason"]) for f in out["findings"]
             if f["code"].startswith("session.") and f.get("session_id") == "demo-gamma"
             and f["code"] != "session.unknown_event"]
    # the too_large line's seq is read from its prefix: no seq_gap after it
    assert found == [("session.corrupt_line", len(lines) + 2, "too_large")], out["findings"]
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    with SessionStore(store_at(store)) as ss:
        kinds = [item.kind for item in ss.scan("demo-gamma")]
    assert kinds[-3:] == ["record", "too_large", "record"], kinds


def _big_session(store: Path, slug: str, big: int) -> Path:
    """demo-big: a header, a user message, a ``big``-byte tool message, a user message."""
    p = store / "sessions" / "demo-big.jsonl"
    with open(p, "wb") as fh:
        fh.write(b'{"seq":0,"type":"session","format":1,"session_id":"demo-big","project":"'
                 + slug.encode() + b'","created":"2026-12-01T09:00:00+00:00"}\n')
        fh.write(b'{"seq":1,"type":"message","role":"user","content":"hi"}\n')
        fh.write(b'{"seq":2,"type":"message","role":"tool","content":"')
        piece, left = memoryview(b"x" * min(big, 4 << 20)), big   # (a piece at a time)
        while left:
            left -= fh.write(piece[:left])
        fh.write(b'"}\n')
        fh.write(b'{"seq":3,"type":"message","role":"user","content":"after"}\n')
    os.chmod(p, 0o600)
    return p


@pytest.mark.heavy
@pytest.mark.slow
def test_a_200_mib_tool_message_is_too_large_not_corrupt(template):
    """A valid 200 MiB tool message under a 1 GiB address-space limit:
    validate --deep reports too_large (not not_json, not exit 70) and no
    false seq gap; a read of a span holding it says the record is too large
    for the memory at hand (exit 5); reads before and after it succeed."""
    import orjson

    cfg, store = template.copy("intact")
    _big_session(store, template.slug, 200 << 20)
    e = dict(os.environ, PYTHONPATH=str(REPO))
    e.pop("MEMCTL_DEBUG", None)
    base = [sys.executable, "-m", "lecode_memctl", "--config-dir", str(cfg), "-C", str(template.project)]
    t0 = time.monotonic()
    r, peak = _peak_child_rss(base + ["validate", "--deep", "--json"], env=e)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stderr[-400:]
    found = [(f["code"], f["reason"]) for f in orjson.loads(r.stdout)["findings"]
             if f.get("session_id") == "demo-big"]
    assert found == [("session.corrupt_line", "too_large")], found
    print(f"[bad input] validate --deep with a 200 MiB tool message: peak RSS {peak // 1024} MiB, "
          f"{took:.1f} s")
    r, _peak = _peak_child_rss(base + ["read", "demo-big", "1", "3"], env=e)
    err = r.stderr.decode()
    assert_outcome(r.returncode, err, 5, "read")
    assert "too large for the memory at hand" in err, err
    for first, text in (("1", b"hi"), ("3", b"after")):
        t0 = time.monotonic()
        r, peak = _peak_child_rss(base + ["read", "demo-big", first, first], env=e)
        took = time.monotonic() - t0
        assert_outcome(r.returncode, r.stderr.decode(), 0, "read")
        assert text in r.stdout
        print(f"[bad input] read demo-big {first} {first} beside a 200 MiB record: "
              f"peak RSS {peak // 1024} MiB, {took:.1f} s")


def _count_transcript_reads(monkeypatch) -> dict[str, int]:
    """Count the bytes the session reader reads from transcripts (buffered
    reads and ``os.pread``)."""
    import io

    from lecode_memctl.core import sessions as sessions_mod

    counted = {"bytes": 0}

    class Counting(io.BufferedReader):
        def read(self, n=-1):
            data = super().read(n)
            counted["bytes"] += len(data)
            return data

        def readline(self, n=-1):
            data = super().readline(n)
            counted["bytes"] += len(data)
            return data

        def __next__(self):
            data = super().__next__()
            counted["bytes"] += len(data)
            return data

    def counting_open(fd, mode="r", buffering=-1, closefd=True):
        assert isinstance(fd, int) and mode == "rb", (fd, mode)
        return Counting(io.FileIO(fd, "rb", closefd=closefd), buffering)

    real_pread = os.pread

    def counting_pread(fd, n, off):
        data = real_pread(fd, n, off)
        counted["bytes"] += len(data)
        return data

    monkeypatch.setattr(sessions_mod, "open", counting_open, raising=False)
    monkeypatch.setattr(os, "pread", counting_pread)   # (the module uses os.pread)
    return counted


def test_a_range_read_does_not_reread_a_huge_record_on_every_probe(template, monkeypatch):
    """The binary search for a range after a 32 MiB record reads each probe's
    seq from the line's first bytes: the record is not read again for every
    probe (the review measured 21 s for a 200 MiB one).  Counted in bytes read
    from the transcript, not in seconds."""
    cfg, store = template.copy("intact")
    big = 32 << 20
    _big_session(store, template.slug, big)
    counted = _count_transcript_reads(monkeypatch)
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "read", "demo-big", "3", "3")
    assert_outcome(r.exit_code, r.stderr, 0, "read")
    assert "after" in r.stdout
    print(f"[bad input] read 3 3 after a 32 MiB record: {counted['bytes'] >> 20} MiB read")
    assert counted["bytes"] < 4 * big, counted


def test_a_range_read_before_a_huge_record_does_not_read_it(template, monkeypatch):
    """read demo-big 1 1 before a 32 MiB record: the line after the span is
    judged by its first bytes, and the event scan after the span neither
    parses nor joins a line that is not an event (the hostile branch measured
    825 MiB peak for a 200 MiB record under 1 GiB).  Counted in bytes read
    and in lines parsed."""
    from lecode_memctl.core import sessions as sessions_mod

    cfg, store = template.copy("intact")
    big = 32 << 20
    _big_session(store, template.slug, big)
    counted = _count_transcript_reads(monkeypatch)
    parsed: list[int] = []
    real = sessions_mod._classify

    def counting_classify(line):
        parsed.append(len(line))
        return real(line)

    monkeypatch.setattr(sessions_mod, "_classify", counting_classify)
    r = run_cli("--config-dir", str(cfg), "-C", str(template.project), "read", "demo-big", "1", "1")
    assert_outcome(r.exit_code, r.stderr, 0, "read")
    assert "hi" in r.stdout
    print(f"[bad input] read 1 1 before a 32 MiB record: {counted['bytes'] >> 20} MiB read")
    assert max(parsed) < 1000, parsed
    # read past twice, a block at a time: by the search (from its first probe
    # inside the record to its end) and by the event scan; never parsed
    assert counted["bytes"] < 3 * big, counted


def test_the_engine_parses_a_huge_record_between_spans_at_most_once(template, monkeypatch):
    """validate_many over refs before, across and after a 4 MiB record (the
    span sweep, then the one-ref reads of the spans it could not read): the
    record is parsed at most once however many refs reach it; a line too
    large to parse (here: deeper than the parsers take) is remembered."""
    from lecode_memctl.core import sessions as sessions_mod
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import NO_EXCLUSIONS, SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    cfg, store = template.copy("intact")
    p = _big_session(store, template.slug, 8)
    lines = p.read_bytes().splitlines(keepends=True)
    deep = b'{"seq":2,"type":"message","role":"tool","content":' + b"[" * 2000 + b"]" * 2000 + b"}\n"
    p.write_bytes(b"".join(lines[:2]) + deep + lines[3] + b"".join(
        b'{"seq":%d,"type":"message","role":"user","content":"m%d"}\n' % (s, s) for s in range(4, 9)))
    parsed: list[int] = []
    real = sessions_mod._classify

    def counting_classify(line):
        parsed.append(len(line))
        return real(line)

    monkeypatch.setattr(sessions_mod, "_classify", counting_classify)
    with SessionStore(store_at(store), exclusions=NO_EXCLUSIONS) as ss:
        recs = {s: ss.records("demo-big", s, s)[0] for s in (1, 3, 4, 5)}
        parsed.clear()
        refs = [SourceRef("demo-big", (1,), canonical_digest([recs[1]])),
                SourceRef("demo-big", (1, 2, 3), "0" * 64), SourceRef("demo-big", (2,), "0" * 64),
                SourceRef("demo-big", (2, 3), "0" * 64),
                SourceRef("demo-big", (3,), canonical_digest([recs[3]])),
                SourceRef("demo-big", (4, 5), canonical_digest([recs[4], recs[5]]))]
        got = ss.validate_many(refs)
    assert [(got[r].status, got[r].reason) for r in refs] == [("valid", None)] + [
        ("stale", "records_corrupt")] * 3 + [("valid", None)] * 2, got
    assert sum(1 for n in parsed if n > 4000) == 1, parsed


@pytest.mark.parametrize("memmem", [False, True])
@pytest.mark.parametrize("size", [0, 1, 6, 7, 8, 100])
def test_mark_finder_by_memmem_finds_what_bytes_find_finds(monkeypatch, memmem, size):
    """MarkFinder.find and finder_in on a bytes or bytearray buffer, in any
    window of it (ends before its start, past the buffer's end, negative:
    counted from the end), are ``bytes.find`` of the mark, or of any needle,
    in that window (the match wholly inside), also when the buffer ends
    with the start of a mark."""
    import random

    from lecode_memctl.core import sessions as sessions_mod

    from .conftest import memmem_or_not

    memmem_or_not(monkeypatch, memmem)
    rng = random.Random(size)
    mark = b'"event"'
    for _ in range(200):
        data = b"".join(rng.choice([b'"', b"e", b"v", b"n", b"t", b"x", mark, b"\\0"])
                        for _ in range(size))
        data = data[:max(size - 6, 0)] + mark[:rng.randint(0, 6)]   # (ends with a mark's start)
        for buf in (data, bytearray(data)):
            finder = sessions_mod.MarkFinder(mark, buf)
            find = sessions_mod.finder_in(buf)
            assert (find != buf.find) == (memmem and len(data) > 0)
            for _ in range(5):
                i = rng.randint(0, len(data) + 2)
                end = rng.randint(0, len(data) + 3)
                assert finder.find(buf, i, end) == data.find(mark, i, end), (data, i, end)
                i, end = i + rng.randint(-5, 0), end + rng.randint(-5, 0)   # negative too
                needle = data[i:i + rng.randint(0, 9)] if rng.random() < 0.5 else mark
                assert find(needle, i, end) == data.find(needle, i, end), (data, needle, i, end)


@pytest.mark.heavy
@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("memmem", [False, True])
@pytest.mark.parametrize("misses", [0, 1, 16])
@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
def test_the_event_scan_keeps_every_marked_line_across_blocks(tmp_path, monkeypatch, block, misses,
                                                             memmem, ahead):
    """marked_lines, which no longer joins a long line unless it is wanted,
    yields exactly the complete lines holding the mark (and, with the event
    prefix filter, not those that say they are another type), whatever the
    block size: a mark across blocks, a line across many blocks, a torn tail;
    and whichever search finds the marks (the rare byte ``v``, lines full of
    it that hand over to the search for the whole mark after ``misses``
    misses, and back; that search by the C library's ``memmem`` or by
    ``bytes.find``); and read by one thread or by two reading ahead
    (``ahead``: what a large transcript gets, with ``memmem``)."""
    import random

    from lecode_memctl.core import sessions as sessions_mod

    from .conftest import memmem_or_not

    memmem_or_not(monkeypatch, memmem)
    monkeypatch.setattr(sessions_mod, "_SCAN_BLOCK", block)
    monkeypatch.setattr(sessions_mod, "_RARE_MISSES", misses)
    monkeypatch.setattr(sessions_mod, "_RARE_PAUSE", 2)
    monkeypatch.setattr(sessions_mod, "_PARALLEL_SCAN", 0 if ahead else 1 << 62)
    monkeypatch.setattr(sessions_mod, "_AHEAD_BLOCK", block)
    if ahead and memmem and (os.cpu_count() or 1) >= 2:
        threads = []
        real = sessions_mod._searched_block
        monkeypatch.setattr(sessions_mod, "_searched_block",
                            lambda *a: threads.append(1) or real(*a))
    rng = random.Random(block * 100 + misses)
    pieces = [b'{"seq":1,"type":"message","x":"event"}', b'"event"', b'"ev', b'ent"', b"x" * 70,
              b'{"seq":2,"type":"event"}', b'{"seq":3,"type":"event","event":"undo"}', b"\n", b"\n",
              b"v", b"vv" * 40, b'"e', b'"vent"', b"event\"", b'"even"']
    for trial in range(100):      # (x 60 settings: 6,000 random transcripts)
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        p = tmp_path / f"t{trial}.jsonl"
        p.write_bytes(data)
        starts = [0] + [i + 1 for i, c in enumerate(data) if c == 10]
        pos = rng.choice(starts)
        complete = data[pos:data.rfind(b"\n") + 1].split(b"\n")[:-1]
        f = sessions_mod._File(os.open(p, os.O_RDONLY), "t", str(p))
        with f:
            for skip in (None, sessions_mod.not_an_event):
                want = [ln for ln in complete if b'"event"' in ln and not (skip and skip(ln[:64]))]
                assert list(f.marked_lines(pos, skip=skip)) == want, (data, pos, skip)
    if ahead and memmem and (os.cpu_count() or 1) >= 2:
        assert threads     # the blocks were read ahead, by the workers


@pytest.mark.parametrize("block", [1, 5, 64])
def test_a_transcript_that_shrinks_during_a_scan_ahead_ends_where_the_reads_end(
        tmp_path, monkeypatch, block):
    """The two threads reading ahead, when a read comes back short (the
    file shrank under the scan): the blocks read ahead of it, which hold
    what was there before, are dropped and the scan goes on from where that
    read ended (and ends there), with exactly the complete lines before that
    point, as one thread reading gives them."""
    import random

    from lecode_memctl.core import sessions as sessions_mod

    from .conftest import memmem_or_not

    memmem_or_not(monkeypatch, True)
    monkeypatch.setattr(sessions_mod, "_SCAN_BLOCK", block)
    monkeypatch.setattr(sessions_mod, "_AHEAD_BLOCK", block)
    monkeypatch.setattr(sessions_mod, "_PARALLEL_SCAN", 0)
    rng = random.Random(block)
    lines = [b'{"seq":%d,"type":"event","event":"undo"}' % i if i % 3 == 0 else
             b'{"seq":%d,"type":"message","text":"%s"}' % (i, b"x" * rng.randint(0, 9))
             for i in range(40)]
    data = b"\n".join(lines) + b"\n"
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    real = sessions_mod._preadinto
    for cut in sorted(rng.sample(range(len(data)), 12)) + [len(data)]:
        def shrunk(fd, into, offset, cut=cut):
            # the read of the block holding `cut` ends there, as does a read
            # from `cut` on; a block read ahead, past it, is what was there
            # before the file shrank
            if offset == cut:
                return 0
            if offset < cut < offset + len(into):
                return real(fd, into[:cut - offset], offset)
            return real(fd, into, offset)
        monkeypatch.setattr(sessions_mod, "_preadinto", shrunk)
        want = [ln for ln in data[:cut].split(b"\n")[:-1] if b'"event"' in ln]
        f = sessions_mod._File(os.open(p, os.O_RDONLY), "t", str(p))
        with f:
            assert list(f.marked_lines(0)) == want, cut


@pytest.mark.heavy
@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("block", [2, 7, 64])
def test_the_event_scan_keeps_every_marked_line_when_reads_come_back_short(
        tmp_path, monkeypatch, block, ahead):
    """A file system may return fewer bytes than asked without being at the
    end of the file: the scan goes on from where each read ended, whether
    one thread reads or two read ahead (which then stop reading ahead, once,
    and go on with one buffer), and the rest of a buffer, which holds an
    earlier block, never reaches a line's first bytes or its mark."""
    import random

    from lecode_memctl.core import sessions as sessions_mod

    from .conftest import memmem_or_not

    memmem_or_not(monkeypatch, True)
    monkeypatch.setattr(sessions_mod, "_SCAN_BLOCK", block)
    monkeypatch.setattr(sessions_mod, "_AHEAD_BLOCK", block)
    monkeypatch.setattr(sessions_mod, "_PARALLEL_SCAN", 0 if ahead else 1 << 62)
    real = sessions_mod._preadinto
    monkeypatch.setattr(sessions_mod, "_preadinto",
                        lambda fd, into, off: real(fd, into[:max(1, len(into) * 3 // 4)], off))
    entered = []
    real_ahead = sessions_mod._scan_blocks_ahead
    monkeypatch.setattr(sessions_mod, "_scan_blocks_ahead",
                        lambda *a: entered.append(1) or real_ahead(*a))
    rng = random.Random(block * 7 + ahead)
    pieces = [b'{"seq":1,"type":"message","x":"event"}', b'"event"', b'"ev', b'ent"', b"x" * 70,
              b'{"seq":2,"type":"event"}', b'{"seq":3,"type":"event","event":"undo"}', b"\n", b"\n",
              b'{"seq":4,"type":"message"', b"v" * 30]
    for trial in range(150):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        p = tmp_path / f"t{trial}.jsonl"
        p.write_bytes(data)
        complete = data[:data.rfind(b"\n") + 1].split(b"\n")[:-1]
        f = sessions_mod._File(os.open(p, os.O_RDONLY), "t", str(p))
        with f:
            for skip in (None, sessions_mod.not_an_event):
                entered.clear()
                want = [ln for ln in complete if b'"event"' in ln and not (skip and skip(ln[:64]))]
                assert list(f.marked_lines(0, skip=skip)) == want, (data, skip)
                assert len(entered) <= 1     # no second scan ahead after a short read
