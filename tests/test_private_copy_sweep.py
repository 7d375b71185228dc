"""A private copy of the facts database left by a killed reader is removed.

Every read of ``facts.sqlite3`` goes through a private copy in
``$TMPDIR/memctl-facts-*/`` (core/snapshot.py), removed when the reader
closes.  A reader killed with SIGKILL (``secrets``, ``redact``, any
command) left it there, the text of every fact (a credential included)
with it, and nothing removed or reported it (before 2026-12-07).  The
directory's name now says which process made it (its pid and start time,
with the boot and pid namespace); the next reader removes each such
directory of the current user whose process is gone, and never one whose
process is alive, one of another boot or namespace, one of another user,
or a symbolic link.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lecode_memctl.core import snapshot

from .conftest import run_proc

pytestmark = pytest.mark.skipif(snapshot._owner() is None,
                                reason="no /proc: copies are never swept")

HOLD = """
import sys, time
from lecode_memctl.core.facts import FactStore
fs = FactStore.open_readonly(sys.argv[1])
print(fs.private_dir, flush=True)
time.sleep(120)
"""


def _store(tmp_path: Path) -> Path:
    from lecode_memctl.core.facts import FactStore

    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    fs = FactStore(store / "facts.sqlite3")
    fs.add("the deploy key is in the vault")
    fs.close()
    return store


def _env(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}


def _reader(store: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(store / "facts.sqlite3")],
                             stdout=subprocess.PIPE, env={**os.environ, **env})
    assert child.stdout is not None
    where = Path(child.stdout.readline().decode().strip())
    assert where.is_dir() and where.parent == Path(env["TMPDIR"]).resolve(), where
    assert (where / "facts.sqlite3").exists()
    return child, where


def _secrets(store: Path, env: dict[str, str]) -> None:
    r = run_proc("--store", str(store), "--no-state", "secrets", env=env)
    assert r.returncode == 0, r.stderr


def test_a_killed_readers_copy_is_removed_by_the_next_run(tmp_path):
    store = _store(tmp_path)
    env = _env(tmp_path)
    child, where = _reader(store, env)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert where.is_dir()           # what the kill leaves
    _secrets(store, env)
    assert not os.path.lexists(where)
    assert os.listdir(env["TMPDIR"]) == []


def test_a_live_readers_copy_is_kept(tmp_path):
    store = _store(tmp_path)
    env = _env(tmp_path)
    child, where = _reader(store, env)
    try:
        _secrets(store, env)
        assert (where / "facts.sqlite3").exists()
    finally:
        child.kill()
        child.wait()


def test_only_a_gone_process_of_this_boot_and_namespace_is_swept(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    owner = snapshot._owner()
    assert owner is not None
    ns, pid, start = owner.split(".")
    # this process, as its name says it: alive
    mine = tmp / f"memctl-facts-{owner}-00aa"
    # this pid but another start time: a process gone, its pid reused
    reused = tmp / f"memctl-facts-{ns}.{pid}.{int(start) + 1}-00bb"
    # another boot or pid namespace: nothing known of its process
    other = tmp / f"memctl-facts-{'0' * 8 if ns != '0' * 8 else '1' * 8}.{pid}.1-00cc"
    # no owner in the name (an older memctl's): nothing known either
    plain = tmp / "memctl-facts-00dd"
    for d in (mine, reused, other, plain):
        d.mkdir()
        (d / "facts.sqlite3").write_bytes(b"x")
    # a symbolic link with a stale name, to a directory: never followed
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_bytes(b"x")
    link = tmp / f"memctl-facts-{ns}.{pid}.{int(start) + 2}-00ee"
    link.symlink_to(target)
    # a file with a stale name: not a directory, not ours to remove
    odd = tmp / f"memctl-facts-{ns}.{pid}.{int(start) + 3}-00ff"
    odd.write_bytes(b"x")
    snapshot._sweep(str(tmp))
    assert sorted(os.listdir(tmp)) == sorted(p.name for p in (mine, other, plain, link, odd))
    assert (target / "keep").exists()
