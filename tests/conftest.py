"""Shared fixtures: every test gets its own HOME and lecode config dir; the
stores several files build (an empty store at <tmp>/memory/SLUG and its
SessionStore; the demo store, built once per run) come from here.  A file that
needs a different ``store`` defines its own, which overrides this one there.
Plain builders (no fixtures) are in ``tests/builders.py``."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lecode_memctl.core.layout import Store, store_at
from lecode_memctl.core.sessions import SessionStore

from .builders import SLUG, DemoWorld, copy_demo, world_of

REPO = Path(__file__).resolve().parent.parent


# The suite's files on a RAM file system where the machine has one with room:
# on the 2-core VMs this suite runs on, a test's writes, fsyncs, mkdirs and
# rmdirs on the disk cost more than the test's own work (the whole suite
# 335 -> 300 s, five files' system time 10-13 -> 6 s, 2026-12-06).
SHM = "/dev/shm"
SHM_NEEDS = 4 << 30     # free bytes asked of it (the largest tests write a few hundred MiB)


def _tmpfs_with_room(path: str) -> bool:
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            mounted = any(f[1] == path and f[2] == "tmpfs"
                          for f in (line.split() for line in fh) if len(f) > 2)
        st = os.statvfs(path)
    except OSError:
        return False
    return mounted and st.f_bavail * st.f_frsize >= SHM_NEEDS and os.access(path, os.W_OK)


_SHM_BASE = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """SIGINT as Python sets it, whatever the run inherited (below); where
    no ``--basetemp`` is given, the run's temporary directory (every
    ``tmp_path``, and TMPDIR: ``scratch_tmpdir``) is a new directory on
    ``/dev/shm`` when that is a tmpfs with ``SHM_NEEDS`` free, removed when
    the run ends (pytest-xdist's workers each use a part of it); elsewhere,
    pytest's own under the system's temporary directory.  ``--basetemp
    DIR`` keeps the files of a failed test where you want them."""
    # A run started as a background job of a shell inherits SIGINT ignored
    # (bash ignores it there), and so would every memctl the tests start:
    # Python then never raises KeyboardInterrupt, and the tests of a Ctrl-C
    # fail (ten of them did).  The tests that are about an ignored SIGINT
    # ignore it in their own child.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.option.basetemp is not None or hasattr(config, "workerinput"):
        return
    if not _tmpfs_with_room(SHM):
        return
    import tempfile

    base = tempfile.mkdtemp(prefix="memctl-tests-", dir=SHM)
    config.option.basetemp = base
    config.stash[_SHM_BASE] = base


def pytest_unconfigure(config):
    base = config.stash.get(_SHM_BASE, None)
    if base is None:
        return
    import shutil

    # (what a test left unreadable or unwritable, removed all the same: the
    # directory is held in memory until it is)
    for dirpath, dirnames, _files in os.walk(base):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            try:
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
            except OSError:
                pass
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def scratch_tmpdir(tmp_path_factory):
    """TMPDIR for the whole run under pytest's own temporary directory: what
    a killed memctl leaves by design (its snapshot of the facts database, an
    editor's copy) stays with the run, which pytest removes in time, and
    never piles up in the machine's /tmp.  A test that needs another TMPDIR
    sets its own."""
    import tempfile

    scratch = tmp_path_factory.mktemp("TMPDIR")
    before = (os.environ.get("TMPDIR"), tempfile.tempdir)
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None      # read again from TMPDIR
    yield scratch
    if before[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before[0]
    tempfile.tempdir = before[1]


def _runner_threads() -> int:
    """The threads of this process that the test runner started outside
    :mod:`threading` (pytest-xdist's worker: execnet's, started with
    ``_thread``), counted as the suite begins."""
    import threading

    from lecode_memctl.core.pools import kernel_threads

    n = kernel_threads()
    return max(0, n - threading.active_count()) if n is not None else 0


_RUNNER_THREADS = _runner_threads()


@pytest.fixture(autouse=True)
def runner_threads_not_counted(monkeypatch):
    """``pools.alone`` counts the process's threads as the kernel does
    (docs/API.md, "Forks"): in a pytest-xdist worker, execnet's own thread
    would make every in-process fork of the suite (pools, split listings)
    run as one process instead.  The runner's threads, counted as the
    suite began, are left out of the count here, so that the suite forks
    as memctl does (a fresh process: one thread); a thread a test starts,
    with ``_thread`` too, is still counted (test_api_hardening_1207.py
    checks the rule itself in a fresh interpreter)."""
    if not _RUNNER_THREADS:
        return
    from lecode_memctl.core import pools

    real = pools.kernel_threads

    def counted() -> int | None:
        n = real()
        return None if n is None else n - _RUNNER_THREADS

    monkeypatch.setattr(pools, "kernel_threads", counted)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """Point LECODE_CONFIG_DIR and HOME at tmp_path; no colour, a fixed width."""
    return isolate(monkeypatch, tmp_path)


def isolate(mp: pytest.MonkeyPatch, top: Path) -> Path:
    """:func:`isolated_env` at ``top`` through ``mp``: HOME ``top/home`` (made)
    and LECODE_CONFIG_DIR ``top/config`` (returned), and the rest of the
    environment it fixes.  A fixture of wider scope that builds a store
    before any test's own environment calls it in a ``MonkeyPatch.context()``."""
    home = top / "home"
    home.mkdir()
    cfg = top / "config"
    mp.setenv("HOME", str(home))
    mp.setenv("LECODE_CONFIG_DIR", str(cfg))
    mp.delenv("XDG_CONFIG_HOME", raising=False)
    mp.delenv("XDG_STATE_HOME", raising=False)  # memctl's marks (core.seen) under HOME
    mp.delenv("NO_COLOR", raising=False)
    mp.delenv("MEMCTL_DEBUG", raising=False)
    mp.setenv("COLUMNS", "120")
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    mp.setenv("GIT_AUTHOR_NAME", "t")
    mp.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    mp.setenv("GIT_COMMITTER_NAME", "t")
    mp.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    return cfg


@pytest.fixture(autouse=True)
def checks_in_a_thread(monkeypatch):
    """The audit checks a database smaller than ``AT_ONCE_BYTES`` on its own
    connection as it reaches it, with no thread; the suite's stores are that
    small, and a store of any size past it takes the thread: every audit in
    this process takes the thread here, as a real store's does.  (Real
    processes, ``run_proc`` and subprocesses, keep the rule; its own tests
    set it back: test_audit_deferred.py.)"""
    from lecode_memctl.core.audit import facts as audit_facts

    monkeypatch.setattr(audit_facts, "AT_ONCE_BYTES", 0)


@pytest.fixture
def config_dir(isolated_env) -> Path:
    return isolated_env


# ---------------------------------------------------------------- stores

@pytest.fixture
def store(tmp_path) -> Store:
    """A store at <tmp>/memory/SLUG, nothing on disk until something is written."""
    return store_at(tmp_path / "memory" / SLUG)


@pytest.fixture
def ss(store) -> SessionStore:
    """The ``SessionStore`` of ``store`` (its exclusions: none until a forget)."""
    return SessionStore(store)


@pytest.fixture
def project(tmp_path) -> Path:
    """A plain project directory, <tmp>/proj (not a git checkout)."""
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture
def project_cwd(tmp_path, monkeypatch) -> Path:
    """<tmp>/proj, a plain project directory, made the working directory
    (``open_project()`` finds its store from there)."""
    p = tmp_path / "proj"
    p.mkdir()
    monkeypatch.chdir(p)
    return p


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory):
    """The store ``memctl demo`` builds (``core.demo.build_demo``), built once per
    run and shared: never change it; work on a copy (``builders.copy_demo``,
    or ``world.fresh(DIR)`` for its config dir)."""
    from lecode_memctl.core.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo") / "demo")


@pytest.fixture
def demo_pair(demo_template, tmp_path):
    """Two copies of the demo store, (x, y): one damaged and one intact, or
    each damaged its own way, to compare what the commands answer."""
    return (copy_demo(demo_template, tmp_path / "x"), copy_demo(demo_template, tmp_path / "y"))


def generation_mismatch(store: Path) -> list[str]:
    """The messages of ``validate``'s ``db.generation_mismatch`` findings for
    the store (no mark read or written)."""
    import orjson

    audit = run_cli("--store", str(store), "--no-state", "validate", "--json")
    return [f["message"] for f in orjson.loads(audit.stdout)["findings"]
            if f["code"] == "db.generation_mismatch"]


@pytest.fixture(scope="session")
def world(demo_template) -> DemoWorld:
    """The demo's config dir as a template for ``LECODE_CONFIG_DIR`` copies."""
    return world_of(demo_template)


_COMMAND_TREES: dict[str | None, tuple[object, object]] = {}


@pytest.fixture(autouse=True)
def built_command_tree(monkeypatch):
    """Build each of typer's command trees once per run and reuse it: the
    whole tree (``app``) and each one-command tree that ``main()`` builds
    for the command it runs (``build_app(only)``).  Every in-process
    ``run_cli`` call and every forked faultkit child (which inherits them)
    skips what ``main()`` spends importing the command's module, building
    its typer app and its click command (hundreds of calls in the suite;
    with only the whole tree kept, every call rebuilt its one-command tree).
    Each tree is the object ``main()`` would build from the same arguments;
    click commands are reusable, each call parses into a new context.  A
    test that replaces a command's function must build its own tree.  Real
    processes (``run_proc``, subprocesses) still build their own."""
    import typer.main

    from lecode_memctl.cli import app as app_module

    original_build = app_module.build_app
    original_get = typer.main.get_command

    def tree(only: str | None) -> tuple[object, object]:
        if only not in _COMMAND_TREES:
            built = app_module.app if only is None else original_build(only)
            _COMMAND_TREES[only] = (built, original_get(built))
        return _COMMAND_TREES[only]

    def get_command(a):
        for built, command in _COMMAND_TREES.values():
            if a is built:
                return command
        return original_get(a)

    tree(None)
    monkeypatch.setattr(app_module, "build_app", lambda only=None: tree(only)[0])
    monkeypatch.setattr(typer.main, "get_command", get_command)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


def run_cli(*args: str, input: str | bytes | None = None, env: dict | None = None) -> Result:
    """Run ``memctl ARGS`` in this process, as the console script would."""
    import tempfile

    from typer.testing import CliRunner

    from lecode_memctl.cli.main import main

    runner = CliRunner()
    # a TMPDIR given here is this run's, as for a fresh process: tempfile
    # reads it now, and the next test does not inherit what it cached
    cached = tempfile.tempdir
    if env and "TMPDIR" in env:
        tempfile.tempdir = None
    try:
        with runner.isolation(input=input, env=env) as (out, err, _mixed):
            code = main(list(args))
            sys.stdout.flush()
            sys.stderr.flush()
            so, se = out.getvalue(), err.getvalue()
    finally:
        if env and "TMPDIR" in env:
            tempfile.tempdir = cached
    return Result(code, so.decode("utf-8", "replace"), se.decode("utf-8", "replace"), so)


def run_proc(*args: str, input: bytes | None = None, env: dict | None = None,
             cwd: str | os.PathLike | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m lecode_memctl ARGS`` in a real subprocess."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "lecode_memctl", *args], input=input,
                          capture_output=True, env=e, cwd=cwd, timeout=timeout)


def tree_hash(root: Path, untimed: Callable[[str], bool] | None = None) -> dict[str, str]:
    """Every path under ``root`` with its type, mode and content hash (for
    'changed nothing'), and each file's mtime, but of the files whose name
    ``untimed`` holds for (what a reader never looks at the time of: for
    a key of the input two runs read)."""
    out: dict[str, str] = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = f"dir:{st.st_mode:o}"
            else:
                with open(p, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                    when = "" if untimed is not None and untimed(name) else st.st_mtime_ns
                    out[rel] = f"file:{st.st_mode:o}:{when}:" + digest
    return out


def git(*args: str, cwd: str | os.PathLike) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always",
                           *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path) -> Path:
    """A git repository with one commit at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    (path / "README").write_text("x\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "init", cwd=path)
    return path


def memmem_or_not(monkeypatch, memmem: bool) -> None:
    """Every MarkFinder given its buffer searches by the C library's memmem
    (skipped where there is none), or none does."""
    from lecode_memctl.core import sessions as sessions_mod

    if memmem:
        if sessions_mod._libc_memmem() is None:
            pytest.skip("no memmem in this C library")
        monkeypatch.setattr(sessions_mod, "_MEMMEM_FROM", 0)
    else:
        monkeypatch.setattr(sessions_mod, "_MEMMEM", [None])


@dataclass
class BuiltWheel:
    """One wheel of the current sources, built as ``pip wheel`` builds it
    (build isolation: the build-system requirements; where that fails, with
    the setuptools installed here, when it can) from a copy of the
    repository, so nothing (build/, *.egg-info) is written into it:
    ``returncode`` and ``stderr`` are pip's, ``path`` the wheel (None
    when pip failed)."""

    returncode: int
    stderr: str
    path: Path | None


def _can_build_offline() -> bool:
    """Whether pip can build the wheel with what is installed here, without
    build isolation (setuptools 70.1 and later carry bdist_wheel; older ones
    need the wheel package)."""
    import importlib.util

    try:
        import setuptools
    except ImportError:
        return False
    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _build_wheel(into: Path) -> BuiltWheel:
    import shutil

    src = into / "src"
    # (what .gitignore names is left out: CI's .ci-venv, a few hundred MB,
    # was copied on every run, and the caches)
    shutil.copytree(REPO, src / "repo", ignore=shutil.ignore_patterns(
        ".venv*", ".ci-venv*", ".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
        ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "out"))
    out = into / "wheel"
    out.mkdir()
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
           str(src / "repo")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 and _can_build_offline():
        # (no network for the isolated build's requirements: the setuptools
        # installed here builds it)
        p = subprocess.run([*cmd[:4], "--no-build-isolation", *cmd[4:]], capture_output=True,
                           text=True, timeout=600)
    shutil.rmtree(src, ignore_errors=True)
    wheels = sorted(out.glob("lecode_memctl-*.whl"))
    return BuiltWheel(p.returncode, p.stderr, wheels[0] if p.returncode == 0 and len(wheels) == 1
                      else None)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> BuiltWheel:
    """The wheel ``test_wheel.py`` and ``test_core_imports.py`` look into,
    built once per run (4-5 s each): under pytest-xdist the first worker
    to ask builds it in the run's shared temporary root, under a lock, and
    the other reads what it left (the wheel, or pip's failure)."""
    import fcntl
    import json

    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _build_wheel(tmp_path_factory.mktemp("built-wheel"))
    root = tmp_path_factory.getbasetemp().parent / "built-wheel"
    root.mkdir(exist_ok=True)
    status = root / "status.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not status.exists():
            built = _build_wheel(root)
            status.write_text(json.dumps({"returncode": built.returncode, "stderr": built.stderr,
                                          "path": None if built.path is None else str(built.path)}))
        doc = json.loads(status.read_text())
    return BuiltWheel(doc["returncode"], doc["stderr"],
                      None if doc["path"] is None else Path(doc["path"]))
