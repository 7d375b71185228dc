"""Atomic file replacement with a ``.bak`` of the previous content.

Temp file created with ``O_EXCL`` in the same directory, written, ``fsync``ed;
the previous content copied to ``<file>.bak`` the same way; ``os.replace``;
``fsync`` of the directory.  On any error the temp files are removed and the
target is untouched.  Model: dulwich ``GitFile``.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from .errors import StoreWriteError
from .layout import DIR_MODE, FILE_MODE

TMP_PREFIX = "."
TMP_MARK = ".tmp-"


def temp_name(target: Path) -> Path:
    """``.<name>.tmp-<random>`` beside the target (documented in docs/FORMAT.md)."""
    return target.with_name(f"{TMP_PREFIX}{target.name}{TMP_MARK}{secrets.token_hex(6)}")


def is_temp_name(name: str) -> bool:
    return name.startswith(TMP_PREFIX) and TMP_MARK in name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(target: Path, data: bytes, mode: int) -> Path:
    tmp = temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def ensure_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700 where missing."""
    try:
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise StoreWriteError(f"{path}: cannot create directory: {exc.strerror}") from None


def atomic_write(target: Path, data: bytes, *, backup: bool = True,
                 overwrite: bool = True) -> None:
    """Replace ``target`` with ``data`` atomically.

    ``backup``: copy the previous content (if any) to ``<target>.bak`` first.
    ``overwrite=False``: never replace an existing target (the final step
    is a hard link, which fails when the destination appeared meanwhile);
    raises ``FileExistsError`` then.
    """
    target = Path(target)
    ensure_dir(target.parent)
    tmp: Path | None = None
    bak_tmp: Path | None = None
    try:
        tmp = _write_temp(target, data, FILE_MODE)
        if backup and overwrite:
            try:
                fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            except FileNotFoundError:
                fd = -1
            if fd >= 0:
                try:
                    chunks = []
                    while True:
                        chunk = os.read(fd, 1 << 20)
                        if not chunk:
                            break
                        chunks.append(chunk)
                finally:
                    os.close(fd)
                bak = target.with_name(target.name + ".bak")
                bak_tmp = _write_temp(bak, b"".join(chunks), FILE_MODE)
                os.replace(bak_tmp, bak)
                bak_tmp = None
        if overwrite:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails with EEXIST instead of clobbering
            os.unlink(tmp)
        tmp = None
        fsync_dir(target.parent)
    except FileExistsError:
        raise
    except OSError as exc:
        raise StoreWriteError(
            f"{target}: write failed: {exc.strerror or exc}; the file was not changed") from None
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)
        if bak_tmp is not None:
            _unlink_quietly(bak_tmp)
