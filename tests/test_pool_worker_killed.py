"""A pool worker killed while the command runs (the out-of-memory killer,
a ``kill -9`` of that process alone) broke the pool: ``memctl validate
--deep`` and ``memctl secrets`` ended with "internal error:
BrokenProcessPool" (exit 70, "a bug in memctl"); killed while it wrote a
result, the command waited for ever.  ``pools.in_order`` now ends the
pool and runs the work it did not give again, in new workers: the same
output, the same exit status, only later; a task that kills its worker
each time is an error (exit 70), never memctl's own death."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import orjson
import pytest

from .test_pool_torn_result import TORN

# in a worker only (the parent is PARENT): the ways a worker dies
CHILD = TORN + textwrap.dedent("""
    import multiprocessing, os, signal, sys, time
    from lecode_memctl.core.pools import in_order

    PARENT = os.getpid()

    def square(x):
        if os.getpid() != PARENT and (x == 3 or x == 5 and "two" in sys.argv[1]):
            # a worker dies at item 3 (and 5): once (a kill from outside), or
            # each time it runs it ("poison": the item is the cause)
            first = not os.path.exists(f"{sys.argv[2]}.{x}")
            open(f"{sys.argv[2]}.{x}", "a").close()
            if first or "poison" in sys.argv[1]:
                if "killed" in sys.argv[1]:
                    os.kill(os.getpid(), signal.SIGKILL)
                elif "torn" in sys.argv[1]:
                    torn()
        if "two" in sys.argv[1]:
            time.sleep(0.05)            # (item 5 not begun when 3's worker dies)
        if x == 7 and sys.argv[1] == "error":
            raise ValueError("seven")
        if x == 7 and sys.argv[1] == "timeout":
            raise TimeoutError("the task's own")
        return x * x

    ctx = multiprocessing.get_context("fork")
    try:
        got = list(in_order(square, range(12), 2, ctx, ahead=4))
    except Exception as exc:
        print("error", type(exc).__name__, exc, flush=True)
        sys.exit(0)
    print(got == [x * x for x in range(12)], got, flush=True)
""")


def _child(tmp_path, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, how, str(tmp_path / "died")],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("how", ["killed", "torn", "none", "killed-two", "torn-two"])
def test_in_order_does_the_work_of_a_dead_worker(tmp_path, how):
    """Two items each killed once (the second in the pool that runs the
    first pool's lost items again: a review of the second in_order, which
    ran them one at a time and took a task killed once there for the cause)."""
    r = _child(tmp_path, how)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("True "), (r.stdout, r.stderr)
    assert r.stderr == ""
    assert (tmp_path / "died.3").exists()
    assert (tmp_path / "died.5").exists() == ("two" in how)


@pytest.mark.parametrize("how", ["poison-killed", "poison-torn"])
def test_a_task_that_kills_its_worker_each_time_is_an_error_not_a_death(tmp_path, how):
    """(review of the first in_order: it ran the lost items in this process,
    and a task that crashes its worker -- a fault in C code, more memory than
    the machine has -- killed the command, exit 139 and no word)"""
    r = _child(tmp_path, how)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("error BrokenProcessPool a worker process ended abruptly each"), \
        (r.stdout, r.stderr)


@pytest.mark.parametrize("how, said", [("error", "ValueError seven"),
                                       ("timeout", "TimeoutError the task's own")])
def test_in_order_raises_the_error_of_a_task(tmp_path, how, said):
    """(a TimeoutError of the task's own was taken for the wait's: in_order
    waited again at once, for ever, at 100% CPU; review of the first in_order)"""
    r = _child(tmp_path, how)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"error {said}\n", "")


# memctl itself, a worker of its pool killed by a signal (as the OOM killer
# does) on its first task, or while it writes its first result
WRAP = TORN + textwrap.dedent("""
    import os, signal, sys
    from lecode_memctl.core import secrets
    from lecode_memctl.core.audit import transcripts

    PARENT = os.getpid()
    HOW = os.environ["MEMCTL_TEST_DEATH"]      # killed, torn, or none (the undisturbed run)
    if os.environ.get("MEMCTL_TEST_POOL_BYTES"):
        # (a store smaller than the 1 MiB a pool is forked for, scanned by one all the same)
        secrets.POOL_BYTES = int(os.environ["MEMCTL_TEST_POOL_BYTES"])

    def die():
        if HOW == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        torn()

    def dies_once():
        # in a worker, at its first task of all (a file says it is done)
        if HOW == "none":
            return
        if os.getpid() != PARENT and not os.path.exists(os.environ["MEMCTL_TEST_MARK"]):
            open(os.environ["MEMCTL_TEST_MARK"], "w").close()
            die()

    real_batch, real_files = transcripts._batch_job, secrets._scan_files_job

    def _batch_job(batch):          # (a module-level function: pickled by its name)
        out = real_batch(batch)
        dies_once()
        return out

    def _scan_files_job(files):
        out = real_files(files)
        dies_once()
        return out

    transcripts._batch_job, secrets._scan_files_job = _batch_job, _scan_files_job
    sys.argv = ["memctl", *sys.argv[1:]]
    from lecode_memctl.cli.main import main
    sys.exit(main())
""")


def _store(tmp_path, messages: int = 500):
    """A store of 12 transcripts of ``messages`` lines (100 KB for 500),
    each with a credential: enough for a pool (audit.run.worth_a_pool: 8
    transcripts with --deep; secrets._worth_a_pool: 1 MiB, or the
    ``POOL_BYTES`` the test sets)."""
    from lecode_memctl.core.layout import store_at

    store = store_at(tmp_path / "store")
    store.sessions_dir.mkdir(parents=True)
    pad = "x" * 200
    for s in range(12):
        sid = f"s{s:02d}"
        lines = [{"seq": 0, "type": "session", "format": 1, "session_id": sid,
                  "project": store.slug, "created": "2026-01-01T00:00:00Z"}]
        lines += [{"seq": i, "type": "message", "role": "user", "content": f"{pad} {i}"}
                  for i in range(1, messages)]
        lines.append({"seq": messages, "type": "message", "role": "user",
                      "content": f"aws_access_key_id = AKIA{s:02d}ABCDEFGHIJKLMN"})
        (store.sessions_dir / f"{sid}.jsonl").write_bytes(
            b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return store.path


# secrets scans 12 transcripts of 50 lines (12 KB each; 1 MiB of them took
# 1.3 s of CPU a run, three runs a command) in a pool all the same: its
# POOL_BYTES lowered in both the disturbed and the undisturbed run (each
# file is a task of its own whatever its size: the pool's work and a
# worker's death are the same)
SMALL_MESSAGES, SMALL_POOL_BYTES = 50, 64 << 10


@pytest.fixture(scope="module")
def pool_store(tmp_path_factory):
    """(the stores of :func:`_store`, built once: for validate --deep, of
    100 KB transcripts, and for secrets, of small ones; where each case
    copies its own; the undisturbed run of each command on it, made once)."""
    base = tmp_path_factory.mktemp("pool")
    return ({"validate": _store(base / "big"), "secrets": _store(base / "small", SMALL_MESSAGES)},
            base / "case" / "store", {})


def _same(out: bytes) -> object:
    """A JSON report without its times."""
    doc = orjson.loads(out)
    for o in [doc, *doc.get("projects", [])]:
        for key in ("generated", "started", "finished", "duration_seconds"):
            o.pop(key, None)
    return doc


@pytest.mark.heavy
@pytest.mark.parametrize("how", ["killed", "torn"])
@pytest.mark.parametrize("command", [["validate", "--deep", "--json"],
                                     ["secrets", "--json", "--jobs", "2"]])
def test_memctl_survives_a_killed_worker(tmp_path, pool_store, how, command):
    template, store, undisturbed_of = pool_store
    # (each case on a fresh copy of the same store at the same path: its
    # report names the path, and the undisturbed run's is that of the first
    # case of the command, made on the same bytes after its disturbed run)
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(template[command[0]], store, symlinks=True)
    args = ["--store", str(store), *command]
    mark = tmp_path / "died"
    env = {**os.environ, "MEMCTL_TEST_MARK": str(mark)}
    if command[0] == "secrets":
        env["MEMCTL_TEST_POOL_BYTES"] = str(SMALL_POOL_BYTES)   # (a worker marks it: below)
    got = subprocess.run([sys.executable, "-c", WRAP, *args], capture_output=True, timeout=120,
                         env={**env, "MEMCTL_TEST_DEATH": how})
    assert mark.exists(), "no worker of a pool ran"
    undisturbed = undisturbed_of.get(tuple(command))
    if undisturbed is None:
        # (memctl itself; for secrets, WRAP with nobody killed: the same POOL_BYTES)
        argv = ["-m", "lecode_memctl"] if command[0] == "validate" else ["-c", WRAP]
        undisturbed = undisturbed_of[tuple(command)] = subprocess.run(
            [sys.executable, *argv, *args], capture_output=True, timeout=120,
            env={**env, "MEMCTL_TEST_DEATH": "none"})
    assert got.stderr == b"", got.stderr
    assert got.returncode == undisturbed.returncode == (0 if command[0] == "validate" else 1)
    assert _same(got.stdout) == _same(undisturbed.stdout)
    assert len(_same(got.stdout)["findings"]) == 12 + 2 * (command[0] == "validate")


RERUN_BROKEN_WHILE_SUBMITTED = textwrap.dedent("""
    import concurrent.futures.process as process, multiprocessing, os, signal, sys, time
    from lecode_memctl.core.pools import in_order

    PARENT, LOG = os.getpid(), sys.argv[1]
    real = process.ProcessPoolExecutor.submit

    def submit(self, fn, x):
        out = real(self, fn, x)
        time.sleep(0.02)            # (this process descheduled after each submit)
        return out

    process.ProcessPoolExecutor.submit = submit

    def task(x):
        if os.getpid() != PARENT:
            with open(LOG, "a") as fh:
                fh.write(f"{x} ")
            runs = open(LOG).read().split().count(str(x))
            if x == 0 and runs == 1:
                time.sleep(0.3)                     # the first pool: late
                os.kill(os.getpid(), signal.SIGKILL)
            if x == 0 and runs == 2:
                os.kill(os.getpid(), signal.SIGKILL)    # the second: at once
        time.sleep(0.4)             # (1 to 5 not made when 0's worker dies)
        return x

    got = list(in_order(task, range(8), 2, multiprocessing.get_context("fork"), ahead=6))
    print(got == list(range(8)), got, flush=True)
""")


def test_a_second_pool_broken_while_its_tasks_are_submitted_loses_none(tmp_path):
    """(a review of the third in_order: the pool that runs a broken pool's
    lost tasks again broke while it was still being given them, and those
    not yet given were lost, without a word: 8 runs in 20 lost results)"""
    r = subprocess.run([sys.executable, "-c", RERUN_BROKEN_WHILE_SUBMITTED,
                        str(tmp_path / "runs")], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("True "), r.stdout


KILLED_AT = textwrap.dedent("""
    import json, multiprocessing, os, signal, sys, time
    from lecode_memctl.core.pools import in_order

    PARENT, LOG = os.getpid(), sys.argv[1]
    KILLS = {tuple(k) for k in json.loads(sys.argv[2])}    # (task, its run) killed
    # (the sleeps were 0.1, 0.3 and task 0's 1.0: halved, the in_order of
    # before c74d5f6 and of before 35d511a still fail, with two busy loops
    # on two cores too)
    SLOW = {int(k): v for k, v in json.loads(sys.argv[3]).items()}

    def task(x):
        if os.getpid() != PARENT:
            with open(LOG, "a") as fh:
                fh.write(f"{x} ")
            runs = open(LOG).read().split().count(str(x))
            if (x, runs) in KILLS:
                time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(SLOW.get(x, 0.15))
        return x

    got = list(in_order(task, range(10), 2, multiprocessing.get_context("fork"), ahead=6))
    print(got == list(range(10)), got, flush=True)
""")


@pytest.mark.heavy
@pytest.mark.parametrize("kills, slow", [
    # (a review of the third in_order: every task the second pool lost ran
    # alone, those only queued too, and task 5, killed once there, was taken
    # for the cause; now only those the pool may have given a worker run alone)
    ([[0, 1], [1, 2], [5, 1]], {}),
    # (a review of the fourth: task 0, slow, was lost with the workers killed
    # at tasks 1 and 2, then killed once in its run alone, and taken for the
    # cause; a task is the cause once it dies alone twice)
    ([[1, 1], [2, 1], [0, 3]], {"0": 0.5}),
])
def test_three_kills_of_three_tasks_blame_none(tmp_path, kills, slow):
    r = subprocess.run([sys.executable, "-c", KILLED_AT, str(tmp_path / "runs"),
                        json.dumps(kills), json.dumps(slow)],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("True "), (r.stdout, (tmp_path / "runs").read_text())


ITEMS_FAIL = textwrap.dedent("""
    import multiprocessing
    from lecode_memctl.core.pools import in_order

    def items():
        yield from range(5)
        raise OSError("the sixth item cannot be made")

    got = []
    try:
        for r in in_order(abs, items(), 2, multiprocessing.get_context("fork"), ahead=8):
            got.append(r)
    except OSError as exc:
        print(got, exc, flush=True)
""")


def test_an_error_of_the_items_comes_after_the_results_before_it():
    """(a review: an error raised while the items were taken came before
    the results of those taken before it; a loop over them gives those
    results first, as run_jobs' one-process path does)"""
    r = subprocess.run([sys.executable, "-c", ITEMS_FAIL], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (
        0, "[0, 1, 2, 3, 4] the sixth item cannot be made\n", "")
