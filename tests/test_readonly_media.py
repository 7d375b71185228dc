"""A store on read-only media: read commands work, write commands fail
clearly (exit 7) and change nothing.

The tests run as root, and root ignores permission bits, so a chmod 0555/0444
store proves nothing.  The medium is emulated properly instead:

1. preferred: a real read-only file system, a private tmpfs mounted and then
   remounted ``ro`` (unmounted in a finalizer);
2. else: the store at 0555 (directories) / 0444 (files) and every command run
   as an unprivileged user (``setpriv --reuid=65534 --regid=65534
   --clear-groups``, or ``runuser -u nobody``);
3. else: skipped, with the reason.

Three copies of the demo store are put on the medium: one whose facts
database has no ``-wal``, one in WAL mode whose ``-wal`` holds a committed
change the main file does not have yet (the change must be visible), and a
third that also keeps the ``-shm`` a live writer leaves (a store copied from
a running system).  Each is read through a private snapshot copy (in
``$TMPDIR``, off the medium), the plain one too: no read opens the file in
place as immutable media (``immutable=1``), as memctl once did.
``MEMCTL_TEST_RO_MODE=setpriv`` forces the second emulation.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.demo import build_demo

from .builders import diagonal, sweep_unless
from .conftest import REPO, run_cli, tree_hash

PREF = "80fa60fdfe856452"
VERIFIED = "c283ab7d8ed884e4"
WAL_MARK = " (only in the -wal)"
NOBODY = 65534


def _try_mount(mnt: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0755", "memctl-ro-test",
                        str(mnt)], capture_output=True)
    return r.returncode == 0


def _unpriv_prefix() -> list[str] | None:
    if shutil.which("setpriv"):
        r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                            "true"], capture_output=True)
        if r.returncode == 0:
            return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if shutil.which("runuser"):
        r = subprocess.run(["runuser", "-u", "nobody", "--", "true"], capture_output=True)
        if r.returncode == 0:
            return ["runuser", "-u", "nobody", "--"]
    return None


def _wal_mode_db(store: Path, *, keep_shm: bool = False) -> None:
    """Leave facts.sqlite3 in WAL mode with a committed change only in its -wal
    (and, with ``keep_shm``, the -shm a live writer has beside it)."""
    db_path = store / "facts.sqlite3"
    wal = store / "facts.sqlite3-wal"
    shm = store / "facts.sqlite3-shm"
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA wal_autocheckpoint = 0")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute("UPDATE revisions SET text = text || ? WHERE fact_id = ? AND revision = 1",
               (WAL_MARK, VERIFIED))
    main_bytes, wal_bytes, shm_bytes = db_path.read_bytes(), wal.read_bytes(), shm.read_bytes()
    db.close()  # checkpoints and removes the -wal and -shm ...
    db_path.write_bytes(main_bytes)  # ... so put back the state a live writer leaves
    wal.write_bytes(wal_bytes)
    if keep_shm:
        shm.write_bytes(shm_bytes)
    for p in (db_path, wal, shm):
        if p.exists():
            os.chmod(p, 0o600)
    assert wal_bytes and shm.exists() == keep_shm


class Medium:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memctl-ro-"))
        os.chmod(self.root, 0o755)
        self.mnt = self.root / "media"
        self.mnt.mkdir()
        self.tmp = self.root / "tmp"  # TMPDIR: where edit keeps a copy it could not write
        self.tmp.mkdir()
        os.chmod(self.tmp, 0o1777)
        self.mounted = False
        self.prefix: list[str] = []
        self.mode = ""

    def setup(self) -> None:
        forced = os.environ.get("MEMCTL_TEST_RO_MODE", "")
        self.demo = build_demo(self.root / "tpl")
        self.project = self.demo.project
        if forced != "setpriv" and _try_mount(self.mnt):
            self.mounted = True
            self.mode = "read-only tmpfs (mount -o remount,ro)"
        else:
            prefix = _unpriv_prefix()
            if prefix is None:
                pytest.skip("no read-only medium: cannot mount a tmpfs (not root, or no "
                            "mount permission) and cannot run as an unprivileged user "
                            "(no setpriv/runuser)")
            self.prefix = prefix
            self.mode = f"0555/0444 store, commands run as uid {NOBODY} ({prefix[0]})"
        self.plain = self.mnt / "plain" / "config"
        self.wal = self.mnt / "wal" / "config"
        self.walshm = self.mnt / "walshm" / "config"
        for cfg in (self.plain, self.wal, self.walshm):
            shutil.copytree(self.demo.config_dir, cfg, symlinks=True)
        _wal_mode_db(self.wal / "memory" / self.demo.store.slug)
        _wal_mode_db(self.walshm / "memory" / self.demo.store.slug, keep_shm=True)
        assert not (self.plain / "memory" / self.demo.store.slug / "facts.sqlite3-wal").exists()
        if self.mounted:
            r = subprocess.run(["mount", "-o", "remount,ro", str(self.mnt)], capture_output=True)
            if r.returncode != 0:
                pytest.skip(f"cannot remount the tmpfs read-only: {r.stderr.decode()!r}")
        else:
            # Everything the unprivileged user needs to reach is traversable; the
            # store itself is read-only to it.
            for d in (self.root / "tpl", self.project.parent):
                os.chmod(d, 0o755)
            for dirpath, _dirnames, filenames in os.walk(self.project):
                os.chmod(dirpath, 0o755)
                for f in filenames:
                    os.chmod(os.path.join(dirpath, f), 0o644)
            for top in (self.mnt,):
                for dirpath, _dirnames, filenames in os.walk(top):
                    os.chmod(dirpath, 0o555)
                    for f in filenames:
                        os.chmod(os.path.join(dirpath, f), 0o444)
        self.hashes = {cfg: tree_hash(cfg) for cfg in (self.plain, self.wal, self.walshm)}

    def run(self, cfg: Path, *args: str, env: dict | None = None,
            real: bool = False) -> subprocess.CompletedProcess:
        """Run memctl on ``cfg``: in-process on a read-only mount (fast; root
        cannot write there either), else, or with ``real``, as a real process
        (as the unprivileged user in the fallback)."""
        if self.mounted and not real:
            r = run_cli("--config-dir", str(cfg), "-C", str(self.project), *args,
                        env={"EDITOR": "true", "VISUAL": "", "TMPDIR": str(self.tmp),
                             **(env or {})})
            return subprocess.CompletedProcess(args, r.exit_code, r.stdout_bytes,
                                               r.stderr.encode())
        e = {k: v for k, v in os.environ.items() if k != "MEMCTL_DEBUG"}
        e.update(PYTHONPATH=str(REPO), HOME=str(self.root), TMPDIR=str(self.tmp), EDITOR="true",
                 VISUAL="", PYTHONDONTWRITEBYTECODE="1")
        if env:
            e.update(env)
        return subprocess.run([*self.prefix, sys.executable, "-m", "lecode_memctl",
                               "--config-dir", str(cfg), "-C", str(self.project), *args],
                              capture_output=True, env=e, timeout=60, cwd=str(self.root))

    def cleanup(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        for dirpath, _dirnames, _files in os.walk(self.root):
            try:
                os.chmod(dirpath, 0o755)
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def medium(request):
    m = Medium()
    request.addfinalizer(m.cleanup)
    m.setup()
    return m


READS = {
    "where": (("where",), 0),
    "config": (("config",), 0),
    "show": (("show",), 0),
    "log": (("log", "2026-12-01"), 0),
    "notes": (("notes",), 0),
    "notes NAME": (("notes", "release"), 0),
    "search": (("search", "tabs|CHANGES"), 0),
    "edit (no change)": (("edit",), 0),
    "sessions": (("sessions",), 0),
    "read": (("read", "demo-alpha", "0", "8"), 0),
    "facts": (("facts", "--json"), 0),
    "facts --session": (("facts", "--session", "demo-alpha"), 0),
    "recall": (("recall", VERIFIED), 0),
    "history": (("history", VERIFIED, "--json"), 0),
    "forget --dry-run": (("forget", VERIFIED, "--dry-run"), 0),
    "context": (("context", "--explain"), 0),
    "validate": (("validate",), 1),            # the demo's planted problem
    "validate --deep": (("validate", "--deep"), 1),
    "usage": (("usage",), 0),
    "projects": (("projects",), 0),
    # it exits as the copy would: 7, the store's directories not writable
    # (0 before 2026-12-07); it changes nothing all the same
    "migrate-legacy --dry-run": (("migrate-legacy", "--dry-run"), 7),
}

EDITOR_THAT_WRITES = "sh -c 'printf \"added on read-only media\\n\" >> \"$1\"' sh"

WRITES = {
    "edit": (("edit",), {"EDITOR": EDITOR_THAT_WRITES}),
    "edit note (new)": (("edit", "note", "brand-new"), {"EDITOR": EDITOR_THAT_WRITES}),
    "correct": (("correct", PREF, "2", "demo-alpha", "14", "14", "We indent with 4 spaces."), {}),
    "forget --yes": (("forget", VERIFIED, "--yes"), {}),
    "migrate-legacy --yes": (("migrate-legacy", "--yes"), {}),
}


def _check_one_error(p: subprocess.CompletedProcess, what: object) -> str:
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and p.returncode != 70, (what, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("memctl: error: ")]
    assert len(lines) == 1 and err.count("memctl: error: ") == 1, (what, err)
    return lines[0]


MEDIA = ["plain", "wal", "walshm"]


def media_cells(commands: list[str]) -> list:
    """(command, medium) for every pair; the inner loop (-m "not sweep and not heavy") keeps a
    diagonal: every command and every medium at least once."""
    fast = diagonal(commands, MEDIA)
    return [pytest.param(c, m, id=f"{c}-{m}", marks=sweep_unless((c, m) in fast))
            for c in commands for m in MEDIA]


@pytest.mark.parametrize("command,which", media_cells(list(READS)))
def test_reads_work(medium, which, command):
    cfg = getattr(medium, which)
    argv, expected = READS[command]
    p = medium.run(cfg, *argv)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, (medium.mode, err)
    assert p.returncode == expected, (medium.mode, which, command, p.returncode, err)
    if command == "migrate-legacy --dry-run":
        line = _check_one_error(p, (medium.mode, command))
        assert line.startswith("memctl: error: the copy would fail: "), line
        assert ": not writable (" in line and line.endswith("; nothing was copied"), line
    else:
        assert "memctl: error: " not in err, (medium.mode, err)
    assert tree_hash(cfg) == medium.hashes[cfg]


@pytest.mark.sweep
def test_reads_real_process(medium):
    """A few reads as real processes, whatever the emulation."""
    for which in ("plain", "wal"):
        cfg = getattr(medium, which)
        for command in ("facts", "read", "validate --deep", "show"):
            argv, expected = READS[command]
            p = medium.run(cfg, *argv, real=True)
            err = p.stderr.decode("utf-8", "replace")
            assert p.returncode == expected and "Traceback" not in err, (which, command, err)
        assert tree_hash(cfg) == medium.hashes[cfg]


def test_wal_rows_visible_on_readonly_media(medium):
    """The WAL copy's facts show the change that is only in the -wal (read
    through a private snapshot); the plain copy reads the main file alone."""
    texts = {}
    for which in ("plain", "wal", "walshm"):
        cfg = getattr(medium, which)
        p = medium.run(cfg, "history", VERIFIED, "--json")
        assert p.returncode == 0, p.stderr
        doc = orjson.loads(p.stdout)
        texts[which] = doc["revisions"][0]["text"]
        assert tree_hash(cfg) == medium.hashes[cfg]
    assert texts["wal"] == texts["walshm"] == texts["plain"] + WAL_MARK
    assert not texts["plain"].endswith(WAL_MARK)


@pytest.mark.parametrize("command,which", media_cells(list(WRITES)))
def test_writes_fail_clearly(medium, which, command):
    cfg = getattr(medium, which)
    argv, env = WRITES[command]
    p = medium.run(cfg, *argv, env=env, real=True)
    line = _check_one_error(p, (medium.mode, which, command))
    assert p.returncode == 7, (medium.mode, which, command, p.returncode, line)
    assert tree_hash(cfg) == medium.hashes[cfg]
    if argv[0] == "edit":
        # The edited text is not lost: its private copy is kept and named.
        kept = line.rsplit("your edited copy is kept at ", 1)[-1].strip()
        assert Path(kept).parent == medium.tmp, line
        assert Path(kept).read_text().endswith("added on read-only media\n")
