"""atomic_write under injected failures at each step.

The failures are injected by replacing the ``os`` module that
``lecode_memctl.core.atomic`` sees with a proxy whose one function fails
under a condition; everything else is the real ``os``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from lecode_memctl.core import atomic
from lecode_memctl.core.atomic import atomic_write, is_temp_name, temp_name
from lecode_memctl.core.errors import StoreWriteError

OLD = b"old content\n"
OLD_BAK = b"older content\n"
NEW = b"new content, longer than the old one\n" * 50


class FaultyOS:
    """The real ``os``, except ``name`` which runs ``hook(real, *args)``."""

    def __init__(self, name, hook):
        self._name = name
        self._hook = hook
        self.calls = 0

    def __getattr__(self, attr):
        real = getattr(os, attr)
        if attr != self._name:
            return real

        def wrapper(*args, **kwargs):
            self.calls += 1
            return self._hook(real, self.calls, *args, **kwargs)
        return wrapper


def _is_dir_fd(fd):
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def _temp_left(d: Path) -> list[str]:
    return [n for n in os.listdir(d) if is_temp_name(n)]


# Each case: (id, os function, hook, failure happens before the final replace?)
def _open_temp(real, n, path, flags, *a, **k):
    name = os.path.basename(os.fspath(path))
    if is_temp_name(name) and ".bak" not in name:
        raise OSError(errno.EACCES, "Permission denied", os.fspath(path))
    return real(path, flags, *a, **k)


def _open_bak_temp(real, n, path, flags, *a, **k):
    name = os.path.basename(os.fspath(path))
    if is_temp_name(name) and ".bak" in name:
        raise OSError(errno.EACCES, "Permission denied", os.fspath(path))
    return real(path, flags, *a, **k)


def _write_zero(real, n, fd, data):
    return 0


def _write_short_then_zero(real, n, fd, data):
    if n == 1:
        return real(fd, bytes(data[: max(1, len(data) // 3)]))
    return 0


def _write_enospc(real, n, fd, data):
    raise OSError(errno.ENOSPC, "No space left on device")


def _write_bak_enospc(real, n, fd, data):
    if n >= 2:  # the first write is the new content, the next the .bak copy
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(fd, data)


def _fsync_temp(real, n, fd):
    if n == 1:
        raise OSError(errno.EIO, "Input/output error")
    return real(fd)


def _fsync_bak_temp(real, n, fd):
    if n == 2:
        raise OSError(errno.EIO, "Input/output error")
    return real(fd)


def _replace_bak(real, n, src, dst):
    if os.fspath(dst).endswith(".bak"):
        raise OSError(errno.EIO, "Input/output error")
    return real(src, dst)


def _replace_target(real, n, src, dst):
    if not os.fspath(dst).endswith(".bak"):
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    return real(src, dst)


def _fsync_dir(real, n, fd):
    if _is_dir_fd(fd):
        raise OSError(errno.EIO, "Input/output error")
    return real(fd)


BEFORE_REPLACE = [
    ("open-temp", "open", _open_temp),
    ("write-returns-0", "write", _write_zero),
    ("short-write", "write", _write_short_then_zero),
    ("write-ENOSPC", "write", _write_enospc),
    ("fsync-temp", "fsync", _fsync_temp),
    ("open-bak-temp", "open", _open_bak_temp),
    ("write-bak-ENOSPC", "write", _write_bak_enospc),
    ("fsync-bak-temp", "fsync", _fsync_bak_temp),
    ("replace-bak", "replace", _replace_bak),
    ("replace-target", "replace", _replace_target),
]


@pytest.fixture
def target(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    t = d / "MEMORY.md"
    t.write_bytes(OLD)
    (d / "MEMORY.md.bak").write_bytes(OLD_BAK)
    return t


@pytest.mark.parametrize("func,hook", [(f, h) for _, f, h in BEFORE_REPLACE],
                         ids=[i for i, _, _ in BEFORE_REPLACE])
def test_failure_before_replace_keeps_old_bytes(target, monkeypatch, func, hook):
    fake = FaultyOS(func, hook)
    monkeypatch.setattr(atomic, "os", fake)
    with pytest.raises(StoreWriteError) as info:
        atomic_write(target, NEW)
    monkeypatch.undo()
    assert fake.calls >= 1
    assert target.read_bytes() == OLD
    # the .bak is either untouched or holds exactly the (unchanged) target content
    assert (target.parent / "MEMORY.md.bak").read_bytes() in (OLD_BAK, OLD)
    assert _temp_left(target.parent) == []
    assert "not changed" in info.value.message
    assert str(target) in info.value.message
    assert info.value.exit_code == 7


def test_failure_before_replace_of_new_file_creates_nothing(tmp_path, monkeypatch):
    t = tmp_path / "notes" / "x.md"
    monkeypatch.setattr(atomic, "os", FaultyOS("write", _write_enospc))
    with pytest.raises(StoreWriteError, match="No space left"):
        atomic_write(t, NEW)
    monkeypatch.undo()
    assert not t.exists()
    assert sorted(os.listdir(t.parent)) == []


@pytest.mark.parametrize("raised", [KeyboardInterrupt, OSError])
def test_an_interrupt_inside_the_temporary_files_open_leaves_no_file(tmp_path, monkeypatch,
                                                                    raised):
    """A SIGTERM that lands after ``os.open`` made the temporary file (O_EXCL)
    and before ``open_nofollow`` returned (in its check of what it opened)
    left an empty ``.NAME.tmp-HEX`` in the store (``migrate-legacy`` killed
    in a copy: ``validate`` then warned ``layout.temp_file``)."""
    def interrupted(fd: int, flags: int) -> None:
        raise raised()

    d = tmp_path / "notes"
    d.mkdir()
    monkeypatch.setattr(atomic, "_check_opened", interrupted)
    with pytest.raises((KeyboardInterrupt, OSError, StoreWriteError)):
        atomic_write(d / "x.md", b"hi", backup=False, overwrite=False)
    assert os.listdir(d) == []


@pytest.mark.parametrize("writer", ["export", "--output"])
def test_an_interrupt_inside_the_open_of_an_exports_or_a_reports_file_leaves_none(
        tmp_path, monkeypatch, demo_template, writer):
    """The same stop inside the open of ``export``'s temporary file, and of
    ``validate --output``'s and ``secrets --output``'s (``atomic_output``),
    left an empty ``.NAME.tmp-HEX`` beside the user's file."""
    from lecode_memctl.cli import output
    from lecode_memctl.core import bundle

    out = tmp_path / "out"
    out.mkdir()

    def interrupted(fd: int, flags: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_check_opened", interrupted)
    with pytest.raises(KeyboardInterrupt):
        if writer == "export":
            bundle.export_to_file(demo_template.store, out / "b.tar.gz")
        else:
            with output.atomic_output(str(out / "report.json")):
                pass
    assert os.listdir(out) == []


def test_directory_fsync_failure_after_replace_says_so(target, monkeypatch):
    monkeypatch.setattr(atomic, "os", FaultyOS("fsync", _fsync_dir))
    with pytest.raises(StoreWriteError) as info:
        atomic_write(target, NEW)
    monkeypatch.undo()
    # The replace happened: the message must not claim otherwise.
    assert target.read_bytes() == NEW
    assert (target.parent / "MEMORY.md.bak").read_bytes() == OLD
    assert "not changed" not in info.value.message
    assert "in place" in info.value.message
    assert _temp_left(target.parent) == []


def test_success_writes_bak_and_modes(target):
    atomic_write(target, NEW)
    assert target.read_bytes() == NEW
    assert (target.parent / "MEMORY.md.bak").read_bytes() == OLD
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(target.parent / "MEMORY.md.bak").st_mode) == 0o600
    assert _temp_left(target.parent) == []


def test_no_backup_and_new_file(tmp_path):
    t = tmp_path / "a" / "b" / "f.md"
    atomic_write(t, b"x")
    assert t.read_bytes() == b"x"
    assert not (t.parent / "f.md.bak").exists()
    assert stat.S_IMODE(os.stat(t.parent).st_mode) == 0o700
    atomic_write(t, b"y", backup=False)
    assert t.read_bytes() == b"y"
    assert not (t.parent / "f.md.bak").exists()


def test_overwrite_false_never_clobbers(tmp_path):
    t = tmp_path / "f.md"
    atomic_write(t, b"first", overwrite=False)
    assert t.read_bytes() == b"first"
    with pytest.raises(FileExistsError):
        atomic_write(t, b"second", overwrite=False)
    assert t.read_bytes() == b"first"
    assert _temp_left(tmp_path) == []


def test_target_symlink_is_not_followed_for_backup(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret")
    d = tmp_path / "s"
    d.mkdir()
    (d / "MEMORY.md").symlink_to(outside)
    with pytest.raises(StoreWriteError):
        atomic_write(d / "MEMORY.md", b"new")
    assert outside.read_bytes() == b"secret"
    assert not (d / "MEMORY.md.bak").exists()
    assert _temp_left(d) == []


def test_ensure_dir_failure_is_a_write_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(StoreWriteError, match="cannot create directory"):
        atomic_write(blocker / "sub" / "x.md", b"x")


def test_temp_names():
    t = temp_name(Path("/s/MEMORY.md"))
    assert t.parent == Path("/s")
    assert is_temp_name(t.name) and t.name.startswith(".MEMORY.md.tmp-")
    assert not is_temp_name("MEMORY.md") and not is_temp_name("MEMORY.md.bak")


def test_ensure_dir_creates_every_missing_level_0700(tmp_path, monkeypatch):
    """os.makedirs gives intermediate directories the default mode; a new store must be 0700
    at every level memctl creates (regression: the store dir came out 0755)."""
    import os
    import stat

    from lecode_memctl.core.atomic import ensure_dir

    old = os.umask(0o022)
    try:
        ensure_dir(tmp_path / "cfg" / "memory" / "slug" / "notes")
    finally:
        os.umask(old)
    for rel in ("cfg", "cfg/memory", "cfg/memory/slug", "cfg/memory/slug/notes"):
        assert stat.S_IMODE(os.stat(tmp_path / rel).st_mode) == 0o700, rel


def test_markdown_write_into_new_store_makes_0700_dirs(tmp_path, config_dir):
    import os
    import stat

    from lecode_memctl.core.layout import store_for_project
    from lecode_memctl.core.markdown import note_target, write

    proj = tmp_path / "proj"
    proj.mkdir()
    store = store_for_project(config_dir, proj)
    old = os.umask(0o022)
    try:
        write(store, note_target("n"), "x\n")
    finally:
        os.umask(old)
    for p in (config_dir, config_dir / "memory", store.path, store.path / "notes"):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p


def test_private_tempdir_is_a_fresh_0700_directory_outside_the_store(tmp_path, monkeypatch):
    """Without importing tempfile: a new directory, mode 0700, under $TMPDIR
    unless $TMPDIR lies inside the store; a name already taken is tried again."""
    import stat as stat_mod

    from lecode_memctl.core import atomic

    store = tmp_path / "store"
    (store / "sessions").mkdir(parents=True)
    outside = tmp_path / "tmp"
    outside.mkdir()
    monkeypatch.setenv("TMPDIR", str(outside))
    a = atomic.private_tempdir("memctl-x-", store)
    b = atomic.private_tempdir("memctl-x-", store)
    assert a != b and os.path.dirname(a) == str(outside) and os.path.isabs(a)
    assert os.path.basename(a).startswith("memctl-x-")
    assert stat_mod.S_IMODE(os.stat(a).st_mode) == 0o700
    # $TMPDIR inside the store is passed over
    monkeypatch.setenv("TMPDIR", str(store / "sessions"))
    c = atomic.private_tempdir("memctl-x-", store)
    assert not os.path.realpath(c).startswith(os.path.realpath(store) + os.sep)
    os.rmdir(c)
    # a name taken: the next random name
    monkeypatch.setenv("TMPDIR", str(outside))
    names = iter([b"\0" * 6, b"\0" * 6, b"\1" * 6])
    monkeypatch.setattr(atomic.os, "urandom", lambda n: next(names))
    first = atomic.private_tempdir("memctl-y-", store)
    second = atomic.private_tempdir("memctl-y-", store)
    assert first.endswith("000000000000") and second.endswith("010101010101")


def test_private_tempdir_is_made_where_it_was_checked(tmp_path, monkeypatch):
    """TMPDIR=STORE/lnk/.. with lnk a symbolic link out of the store resolves
    outside it: the directory is made there (the kernel's resolution), never
    in the store (the text's: STORE/lnk/.. is STORE)."""
    from lecode_memctl.core import atomic

    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "outside" / "sub").mkdir(parents=True)
    (store / "lnk").symlink_to(tmp_path / "outside" / "sub")
    monkeypatch.setenv("TMPDIR", str(store / "lnk") + "/..")
    made = atomic.private_tempdir("memctl-x-", store)
    assert os.path.dirname(made) == os.path.realpath(tmp_path / "outside")
    assert sorted(os.listdir(store)) == ["lnk"]


def test_private_tempdir_passes_over_a_directory_it_cannot_write(tmp_path, monkeypatch):
    """A read-only or unwritable candidate (simulated: the suite may run as
    root) is passed over for the next; with none left, one clear error."""
    import errno

    from lecode_memctl.core import atomic
    from lecode_memctl.core.errors import StoreWriteError

    store = tmp_path / "store"
    store.mkdir()
    ro = tmp_path / "ro"
    ro.mkdir()
    real_mkdir = os.mkdir

    def mkdir(path, mode=0o777):
        if os.path.dirname(os.fspath(path)) in (str(ro), "/tmp", "/var/tmp", "/usr/tmp"):
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_mkdir(path, mode)

    monkeypatch.setattr(atomic.os, "mkdir", mkdir)
    monkeypatch.setenv("TMPDIR", str(ro))
    monkeypatch.setenv("TEMP", str(tmp_path))
    assert os.path.dirname(atomic.private_tempdir("memctl-x-", store)) == str(tmp_path)
    monkeypatch.delenv("TEMP")
    monkeypatch.delenv("TMP", raising=False)
    import tempfile

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(ro))
    with pytest.raises(StoreWriteError, match="Read-only file system"):
        atomic.private_tempdir("memctl-x-", store)
