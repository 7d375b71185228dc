"""Kill and fault injection at the N-th file-mutating step of a real process.

Runs ``memctl ARGS`` (through ``lecode_memctl.cli.main.main``) or an arbitrary
Python snippet in a fresh ``python`` subprocess that first wraps the ``os``
functions that change files:

    os.open (with O_WRONLY, O_RDWR, O_CREAT, O_TRUNC or O_APPEND), os.write,
    os.fsync, os.fdatasync, os.ftruncate, os.truncate, os.replace,
    os.rename, os.link, os.symlink, os.unlink, os.remove, os.rmdir,
    os.mkdir (so os.makedirs too, one step per directory it creates),
    os.chmod, os.fchmod

Every call of one of these is a *step*, numbered from 1.  Modes:

* ``count``: run to the end and report how many steps there were;
* ``kill``: at step N, before performing it, ``SIGKILL`` the process
  (steps 1..N-1 happened, step N did not: what ``kill -9`` or the OOM
  killer between two system calls leaves behind; not a power cut, since the
  page cache survives the process);
* ``fault``: at step N, instead of performing it, raise ``OSError(errno)``
  (ENOSPC, EIO, EACCES, EROFS, ...); with ``sticky`` every later step fails
  too (a full disk stays full).

Steps can be restricted to paths under one directory (``under=``), so that
writes the interpreter or a library makes elsewhere do not shift the
numbering.  File-descriptor steps (write, fsync, ftruncate, fchmod) are
attributed to the path the descriptor was opened with through ``os.open``;
with ``under=`` set, steps on descriptors of unknown origin are not counted.

``fork=True`` forks the child from the calling process (which imports the
product once) instead of starting a fresh interpreter: the same wrappers, a
real separate process and a real ``SIGKILL``, without the interpreter's
start-up; use it for long sweeps, and keep the default (a fresh
interpreter) for anything that depends on start-up or on import order.

``no_sync=True`` keeps ``fsync``/``fdatasync`` as counted steps (a kill or
a fault can still land on them) but skips the real flush: a killed process
does not lose the page cache, so kill sweeps need no disk flush, and on a
busy disk each real ``fsync`` can cost tens of milliseconds.

Not covered (and so never counted): writes through Python file objects
after ``open()`` (the builtin ``open`` in a writing mode is counted once, as
an open step), and I/O that C libraries do themselves (SQLite's own writes:
use SQLite-level faults such as ``PRAGMA max_page_count`` for those).

The harness contains no product code.  A fresh child imports
``lecode_memctl.cli.main`` only after the wrappers are installed; with
``fork=True`` the parent imports the package once before forking (the
wrappers look ``os.open`` and the rest up at call time, so they still apply).

    from tests.faultkit import count_steps, run_killed_at, run_fault_at, sweep_kills

    n = count_steps(["migrate-legacy", "--yes"], cwd=repo, under=config_dir)
    for k in range(1, n + 1):
        rc, killed = run_killed_at(k, ["migrate-legacy", "--yes"], cwd=repo, under=config_dir)
        ...
"""

from __future__ import annotations

import errno as errno_mod
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

ENV_MODE = "FAULTKIT_MODE"        # count | kill | fault
ENV_AT = "FAULTKIT_AT"            # N (1-based)
ENV_ERRNO = "FAULTKIT_ERRNO"      # errno number for fault mode
ENV_STICKY = "FAULTKIT_STICKY"    # "1": every step >= N fails
ENV_UNDER = "FAULTKIT_UNDER"      # count only steps on paths under this directory
ENV_LOG = "FAULTKIT_LOG"          # append one line per step: "N op path"
ENV_COUNT = "FAULTKIT_COUNT_FILE"  # the final step count is written here
ENV_CODE = "FAULTKIT_CODE"        # run this Python code instead of memctl
ENV_NO_SYNC = "FAULTKIT_NO_SYNC"  # "1": fsync/fdatasync count as steps but do not sync

# Where the harness keeps its own small files (counts, logs, captured output):
# a tmpfs when there is one, so that the harness adds no disk traffic.
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

_MUTATING_FLAGS = (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)

# The bootstrap: no sitecustomize, no PYTHONSTARTUP; the child imports this
# module by path, installs the wrappers, then runs the target.
_BOOT = (
    "import sys; sys.path.insert(0, {repo!r}); "
    "import tests.faultkit as _fk; sys.exit(_fk._child_main(sys.argv[1:]))"
)

STEP_OPS = ("open", "write", "fsync", "fdatasync", "ftruncate", "truncate", "replace",
            "rename", "link", "symlink", "unlink", "remove", "rmdir", "mkdir", "chmod",
            "fchmod", "builtin_open")


# ---------------------------------------------------------------- the child side

class _Injector:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.mode = env.get(ENV_MODE, "count")
        self.at = int(env.get(ENV_AT, "0") or 0)
        self.err = int(env.get(ENV_ERRNO, str(errno_mod.EIO)))
        self.sticky = env.get(ENV_STICKY) == "1"
        self.no_sync = env.get(ENV_NO_SYNC) == "1"
        under = env.get(ENV_UNDER)
        self.under = os.path.realpath(under) if under else None
        self.count = 0
        self.fd_paths: dict[int, str] = {}
        self.log_fd = -1
        self.count_path = env.get(ENV_COUNT)
        self._orig: dict[str, Callable] = {}
        log = env.get(ENV_LOG)
        if log:
            self.log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    # -- bookkeeping through the original functions only
    def _raw_write(self, fd: int, data: bytes) -> None:
        self._orig.get("write", os.write)(fd, data)

    def _relevant(self, path: str | None) -> bool:
        if self.under is None:
            return True
        if path is None or path.startswith("<"):
            return False
        p = os.path.realpath(os.path.abspath(path))
        return p == self.under or p.startswith(self.under + os.sep)

    def step(self, op: str, *paths: str | None) -> None:
        """One step on ``paths`` (relevant when any of them is): count it, log it,
        and kill or fail when it is the chosen one."""
        if not any(self._relevant(x) for x in paths):
            return
        self.count += 1
        n = self.count
        shown = " -> ".join(str(x) for x in paths)
        if self.log_fd >= 0:
            self._raw_write(self.log_fd, f"{n} {op} {shown}\n".encode("utf-8", "surrogateescape"))
        if self.mode == "kill" and n == self.at:
            if self.count_path:
                self._write_count()
            os.kill(os.getpid(), signal.SIGKILL)
        if self.mode == "fault" and (n == self.at or (self.sticky and n > self.at > 0)):
            raise OSError(self.err, os.strerror(self.err), paths[0])

    def _write_count(self) -> None:
        o = self._orig
        fd = o["open"](self.count_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            o["write"](fd, str(self.count).encode())
        finally:
            o["close"](fd)

    # -- the wrappers
    def install(self) -> None:
        import builtins
        import io

        o = self._orig
        for name in ("open", "write", "fsync", "fdatasync", "ftruncate", "truncate", "replace",
                     "rename", "link", "symlink", "unlink", "remove", "rmdir", "mkdir", "chmod",
                     "fchmod", "close"):
            if hasattr(os, name):
                o[name] = getattr(os, name)
        o["builtin_open"] = builtins.open
        inj = self

        def p(x) -> str | None:
            if isinstance(x, int):
                return inj.fd_paths.get(x)
            try:
                return os.fsdecode(os.fspath(x))
            except TypeError:
                return None

        def w_open(path, flags, mode=0o777, *, dir_fd=None):
            if flags & _MUTATING_FLAGS:
                inj.step("open", p(path))
            fd = o["open"](path, flags, mode, dir_fd=dir_fd)
            inj.fd_paths[fd] = p(path) or f"<fd {fd}>"
            return fd

        def w_close(fd):
            inj.fd_paths.pop(fd, None)
            return o["close"](fd)

        def fd_op(name):
            def wrapper(fd, *args, **kw):
                inj.step(name, inj.fd_paths.get(fd))
                if inj.no_sync and name in ("fsync", "fdatasync"):
                    os.fstat(fd)  # still EBADF on a bad descriptor
                    return None
                return o[name](fd, *args, **kw)
            wrapper.__name__ = name
            return wrapper

        def path_op(name, nargs=1):
            def wrapper(*args, **kw):
                inj.step(name, *(p(a) for a in args[:nargs]))
                return o[name](*args, **kw)
            wrapper.__name__ = name
            return wrapper

        def w_builtin_open(file, mode="r", *args, **kw):
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                inj.step("builtin_open", p(file) if not isinstance(file, int) else None)
            return o["builtin_open"](file, mode, *args, **kw)

        os.open = w_open
        os.close = w_close
        for name in ("write", "fsync", "fdatasync", "ftruncate", "fchmod"):
            if name in o:
                setattr(os, name, fd_op(name))
        for name in ("truncate", "unlink", "remove", "rmdir", "mkdir", "chmod"):
            if name in o:
                setattr(os, name, path_op(name))
        for name in ("replace", "rename", "link", "symlink"):
            if name in o:
                setattr(os, name, path_op(name, 2))
        builtins.open = w_builtin_open
        io.open = w_builtin_open


def _child_main(argv: list[str]) -> int:
    inj = _Injector(os.environ)
    inj.install()
    try:
        code = os.environ.get(ENV_CODE)
        if code is not None:
            ns: dict = {"__name__": "__faultkit__", "argv": argv}
            exec(compile(code, "<faultkit code>", "exec"), ns)
            rv = ns.get("rc", 0)
            return rv if isinstance(rv, int) else 0
        from lecode_memctl.cli.main import main

        return main(argv)
    finally:
        if inj.count_path:
            inj._write_count()


# ---------------------------------------------------------------- the harness side

@dataclass
class Run:
    """One child process: its exit status, whether it was killed, its output.
    Unpacks as ``(returncode, killed)``."""

    returncode: int
    killed: bool
    stdout: bytes
    stderr: bytes
    steps: int | None = None           # steps counted (when known)
    log: list[str] = field(default_factory=list)  # "N op path" lines, when log=True

    def __iter__(self) -> Iterator:
        return iter((self.returncode, self.killed))


def _run(mode: str, argv: Sequence[str], *, at: int = 0, err: int | None = None,
         sticky: bool = False, env: Mapping[str, str] | None = None,
         cwd: str | os.PathLike[str] | None = None, under: str | os.PathLike[str] | None = None,
         code: str | None = None, input: bytes | None = None, log: bool = False,
         fork: bool = False, no_sync: bool = False, timeout: float = 60
         ) -> tuple[subprocess.CompletedProcess, int | None, list[str]]:
    e = dict(os.environ)
    if env:
        e.update(env)
    for k in (ENV_MODE, ENV_AT, ENV_ERRNO, ENV_STICKY, ENV_UNDER, ENV_LOG, ENV_COUNT, ENV_CODE,
              ENV_NO_SYNC):
        e.pop(k, None)
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e[ENV_MODE] = mode
    e[ENV_AT] = str(at)
    if err is not None:
        e[ENV_ERRNO] = str(err)
    if sticky:
        e[ENV_STICKY] = "1"
    if under is not None:
        e[ENV_UNDER] = os.fspath(under)
    if code is not None:
        e[ENV_CODE] = code
    if no_sync:
        e[ENV_NO_SYNC] = "1"
    with tempfile.TemporaryDirectory(prefix="faultkit-", dir=_SCRATCH) as tmp:
        count_file = os.path.join(tmp, "count")
        log_file = os.path.join(tmp, "log")
        e[ENV_COUNT] = count_file
        if log:
            e[ENV_LOG] = log_file
        if fork:
            proc = _run_forked(argv, e, cwd, input, tmp, timeout)
        else:
            proc = subprocess.run(
                [sys.executable, "-c", _BOOT.format(repo=str(REPO)), *argv],
                input=input, capture_output=True, env=e, cwd=cwd, timeout=timeout)
        steps = None
        try:
            with open(count_file, "rb") as fh:
                steps = int(fh.read() or b"0")
        except (OSError, ValueError):
            pass
        lines: list[str] = []
        if log:
            try:
                with open(log_file, "rb") as fh:
                    lines = fh.read().decode("utf-8", "replace").splitlines()
            except OSError:
                pass
    return proc, steps, lines


_WARM = False


def _warm_up() -> None:
    """Import every module of the package, the command tree and what typer
    loads when it runs a command, once, in the parent, so that forked children
    start warm (a cold child spends most of its time importing)."""
    global _WARM
    if _WARM:
        return
    import importlib
    import pkgutil

    import typer

    import lecode_memctl
    from lecode_memctl.cli.app import app

    for info in pkgutil.walk_packages(lecode_memctl.__path__, "lecode_memctl."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    for name in ("typer._adapters", "pydantic", "orjson", "hashlib", "secrets", "sqlite3"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    typer.main.get_command(app)
    _WARM = True


def _run_forked(argv: Sequence[str], env: dict[str, str], cwd, input: bytes | None,
                tmp: str, timeout: float) -> subprocess.CompletedProcess:
    """``fork=True``: the same child, forked from this process with the product
    already imported (tens of milliseconds instead of a fresh interpreter).
    The child gets its own stdin/stdout/stderr files, environment and
    working directory, installs the wrappers and never returns here."""
    import gc
    import io
    import time

    if env.get(ENV_CODE) is None:
        _warm_up()
    paths = {n: os.path.join(tmp, n) for n in ("stdin", "stdout", "stderr")}
    with open(paths["stdin"], "wb") as fh:
        fh.write(input or b"")
    sys.stdout.flush()
    sys.stderr.flush()
    # the child's collector leaves the parent's objects (and pages) alone; no
    # gc.collect() first (30 ms a run in a pytest process): what garbage is
    # frozen with them is collected here after gc.unfreeze(), as before
    gc.freeze()
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            gc.unfreeze()
    if pid == 0:  # the child: never return into the caller
        rc = 70
        try:
            for fd, name, flags in ((0, "stdin", os.O_RDONLY),
                                    (1, "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                new = os.open(paths[name], flags, 0o600)
                os.dup2(new, fd)
                os.close(new)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                          encoding="utf-8")
            sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                          encoding="utf-8", errors="backslashreplace")
            if cwd is not None:
                os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            # as a fresh interpreter would: the temporary directory from this
            # environment's TMPDIR, not the one this process found first
            tempfile.tempdir = None
            try:
                rv = _child_main(list(argv))
                rc = rv if isinstance(rv, int) else 0
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
                rc = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(["<fork>", *argv], timeout)
        time.sleep(0.002)
    returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    with open(paths["stdout"], "rb") as fh:
        out = fh.read()
    with open(paths["stderr"], "rb") as fh:
        err = fh.read()
    return subprocess.CompletedProcess(["<fork>", *argv], returncode, out, err)


def count_steps(argv: Sequence[str], **kw) -> int:
    """How many steps the command makes when nothing goes wrong."""
    proc, steps, _ = _run("count", argv, **kw)
    if proc.returncode < 0:
        raise RuntimeError(f"child died with signal {-proc.returncode}: {proc.stderr!r}")
    return steps or 0


def run_counted(argv: Sequence[str], **kw) -> Run:
    """Run once without faults; the result carries the step count (and the log)."""
    proc, steps, lines = _run("count", argv, **kw)
    return Run(proc.returncode, proc.returncode == -signal.SIGKILL, proc.stdout, proc.stderr,
               steps, lines)


def run_killed_at(n: int, argv: Sequence[str], **kw) -> Run:
    """SIGKILL the child just before its step ``n``.  ``killed`` is False when the
    command finished in fewer than ``n`` steps."""
    if n < 1:
        raise ValueError("steps are numbered from 1")
    proc, steps, lines = _run("kill", argv, at=n, **kw)
    return Run(proc.returncode, proc.returncode == -signal.SIGKILL, proc.stdout, proc.stderr,
               steps, lines)


def run_fault_at(n: int, err: int, argv: Sequence[str], *, sticky: bool = False,
                 **kw) -> subprocess.CompletedProcess:
    """Make step ``n`` fail with ``OSError(err)`` (and every later one with ``sticky``)."""
    if n < 1:
        raise ValueError("steps are numbered from 1")
    proc, _steps, _ = _run("fault", argv, at=n, err=err, sticky=sticky, **kw)
    return proc


def sweep_kills(argv: Sequence[str], *, check: Callable[[int, Run], None] | None = None,
                before: Callable[[int], None] | None = None, limit: int = 1000, **kw) -> int:
    """Kill at step 1, 2, ... until the command completes.  ``before(n)`` runs
    before each attempt (restore the fixture there, so that every kill point
    of the same run is reached); ``check(n, run)`` after each killed run
    (inspect what the kill left; a rerun to completion belongs there too).
    Returns the number of killed runs."""
    for n in range(1, limit + 1):
        if before is not None:
            before(n)
        run = run_killed_at(n, argv, **kw)
        if not run.killed:
            return n - 1
        if check is not None:
            check(n, run)
    raise AssertionError(f"still being killed after {limit} steps")
