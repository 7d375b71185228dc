"""The kill/fault harness itself: step counting, kills, injected errors, filters."""

from __future__ import annotations

import errno
import os

import pytest

from . import faultkit

# Six steps under argv[0]: mkdir, open(O_CREAT), write, fsync, replace, unlink;
# plus one write outside it (argv[1]) that `under` must not count.
SNIPPET = """
import os
d = argv[0]
os.mkdir(os.path.join(d, "sub"))
fd = os.open(os.path.join(d, "sub", "tmp"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"hello")
os.fsync(fd)
os.close(fd)
os.replace(os.path.join(d, "sub", "tmp"), os.path.join(d, "sub", "final"))
with open(os.path.join(argv[1], "outside"), "w") as fh:
    fh.write("x")
fd = os.open(os.path.join(d, "sub", "final"), os.O_RDONLY)  # a read: not a step
os.close(fd)
os.unlink(os.path.join(d, "sub", "final"))
rc = 3
"""


@pytest.fixture
def dirs(tmp_path):
    inside = tmp_path / "inside"
    outside = tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    return inside, outside


@pytest.mark.parametrize("fork", [False, True])
def test_count_and_log(dirs, fork):
    inside, outside = dirs
    run = faultkit.run_counted([str(inside), str(outside)], code=SNIPPET, under=inside,
                               log=True, fork=fork)
    assert run.returncode == 3 and not run.killed
    assert run.steps == 6
    assert [line.split(" ", 2)[1] for line in run.log] == [
        "mkdir", "open", "write", "fsync", "replace", "unlink"]
    assert not (inside / "sub" / "final").exists()
    # without `under`, the outside write (builtin open) counts too
    os.rmdir(inside / "sub")
    everything = faultkit.count_steps([str(inside), str(outside)], code=SNIPPET, fork=fork)
    assert everything == 7


@pytest.mark.parametrize("fork", [False, True])
def test_kill_before_step_n(dirs, fork):
    inside, outside = dirs
    rc, killed = faultkit.run_killed_at(4, [str(inside), str(outside)], code=SNIPPET,
                                        under=inside, fork=fork)
    assert killed and rc == -9
    # steps 1-3 happened (mkdir, open, write), step 4 (fsync) and later did not
    assert (inside / "sub" / "tmp").read_bytes() == b"hello"
    assert not (inside / "sub" / "final").exists()
    run = faultkit.run_killed_at(99, [str(inside / "sub"), str(outside)], code=SNIPPET.replace(
        'os.mkdir(os.path.join(d, "sub"))', "d = os.path.dirname(d)").replace(
        "os.O_EXCL", "os.O_TRUNC"), under=inside, fork=fork)
    assert not run.killed and run.returncode == 3


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EACCES])
def test_fault_at_step_n(dirs, err):
    inside, outside = dirs
    p = faultkit.run_fault_at(5, err, [str(inside), str(outside)], code=SNIPPET, under=inside)
    assert p.returncode == 1
    assert f"Error: [Errno {err}] {os.strerror(err)}" in p.stderr.decode()
    assert (inside / "sub" / "tmp").exists() and not (inside / "sub" / "final").exists()


def test_sticky_fault_and_sweep(dirs):
    inside, outside = dirs
    code = ("import os\nfor i in range(5):\n    try:\n        os.mkdir(os.path.join(argv[0], "
            "str(i)))\n    except OSError:\n        pass\n")
    p = faultkit.run_fault_at(2, errno.ENOSPC, [str(inside)], code=code, under=inside,
                              sticky=True, fork=True)
    assert p.returncode == 0
    assert sorted(os.listdir(inside)) == ["0"]
    for n in range(5):
        os.rmdir(inside / str(n)) if (inside / str(n)).exists() else None

    seen = []

    def reset(_n):
        for name in os.listdir(inside):
            os.rmdir(inside / name)

    def check(n, run):
        seen.append((n, sorted(os.listdir(inside))))

    killed = faultkit.sweep_kills([str(inside)], code=code, under=inside, before=reset,
                                  check=check, fork=True)
    assert killed == 5
    assert seen == [(n, [str(i) for i in range(n - 1)]) for n in range(1, 6)]
