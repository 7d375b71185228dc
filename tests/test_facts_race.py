"""Real processes against one facts database: races and a SIGKILL sweep."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

RACER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from lecode_memctl.core.errors import MemctlError
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    store = store_at(sys.argv[1])
    action, fid, go = sys.argv[2], sys.argv[3], Path(sys.argv[4])
    fs = FactStore(store.facts_db, busy_timeout=20)
    ss = SessionStore(store, exclusions=fs)
    gen = fs.generation()
    if action == "correct":
        ref = ss.source_snapshot("s1", int(sys.argv[5]), int(sys.argv[5])).ref
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.0005)
    try:
        if action == "correct":
            fs.correct(fid, sys.argv[6], expected_revision=1, ref=ref, sessions=ss,
                       expected_generation=gen)
            out = {"ok": True}
        else:
            out = {"ok": fs.forget(fid)}
    except MemctlError as exc:
        out = {"ok": False, "exit": exc.exit_code, "error": type(exc).__name__, "msg": str(exc)}
    fs.close()
    print(json.dumps(out), flush=True)
""")

# The sweep's processes, forked from one process that has imported the store's
# code (an interpreter's start and that import took 0.1 s, a dozen times, when
# each was started anew): each request on stdin (a JSON [db path, fact id, n])
# is a forked child that forgets the fact and SIGKILLs itself at its n-th
# BEGIN, INSERT, UPDATE, DELETE or COMMIT (or ends by the interpreter's own
# exit after printing forget's result), then a line "exit CODE".
FORKER = textwrap.dedent("""
    import json, os, signal, sys
    from lecode_memctl.core.facts import FactStore

    for request in sys.stdin:
        db_path, fid, n = json.loads(request)
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)            # a child that hangs ends (exit -14: no -9)
            steps = [0]

            def trace(sql):
                if sql.lstrip().split(None, 1)[0].upper() in ("BEGIN", "INSERT", "UPDATE",
                                                              "DELETE", "COMMIT"):
                    steps[0] += 1
                    if steps[0] == n:
                        os.kill(os.getpid(), signal.SIGKILL)

            fs = FactStore(db_path, on_connect=lambda db: db.set_trace_callback(trace))
            print(fs.forget(fid), flush=True)
            sys.exit(0)                 # (the interpreter's own exit)
        _, status = os.waitpid(pid, 0)
        print("exit", os.waitstatus_to_exitcode(status), flush=True)
""")


def build(root: Path) -> tuple[Path, str, str]:
    """A store: session s1 (user messages 1..4), fact A remembered from 1 and
    corrected from 2, fact B remembered from 2 (overlapping A's evidence)."""
    store = store_at(root / "store")
    ss = SessionStore(store)
    with ss.create("s1") as w:
        for i in range(1, 5):
            w.append_message("user", f"message {i}")
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        ref = lambda s: ss.source_snapshot("s1", s, s).ref  # noqa: E731
        a = fs.remember("fact A", ref(1), sessions=ss).fact.fact_id
        fs.correct(a, "fact A v2", expected_revision=1, ref=ref(2), sessions=ss)
        b = fs.remember("fact B", ref(2), sessions=ss).fact.fact_id
    return store.path, a, b


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return build(tmp_path_factory.mktemp("facts-race"))


def fresh(template, dest: Path) -> Path:
    src, _a, _b = template
    dest = dest / "store"   # --store semantics: the slug is the directory name
    shutil.copytree(src, dest)
    return dest


def race(store: Path, tmp: Path, *jobs: list[str]) -> list[dict]:
    go = tmp / "go"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(store), *job[:1], job[1], str(go),
                               *job[2:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for job in jobs]
    for p in procs:
        assert p.stdout is not None and p.stderr is not None
        assert p.stdout.readline() == b"ready\n", p.stderr.read()
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    go.unlink()
    return outs


def check_integrity(db_path: Path) -> None:
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        db.close()
    with FactStore(db_path) as fs:
        assert fs.integrity() == []


@pytest.mark.parametrize("round_", range(3))
def test_two_corrects_with_the_same_expected_revision(template, tmp_path, round_):
    store = fresh(template, tmp_path / "s")
    _src, _a, b = template
    outs = race(store, tmp_path, ["correct", b, "3", "from three"], ["correct", b, "4", "from four"])
    assert sorted(o["ok"] for o in outs) == [False, True]
    loser = next(o for o in outs if not o["ok"])
    assert loser["exit"] == 4 and loser["error"] == "Conflict" and "stale revision" in loser["msg"]
    check_integrity(store / "facts.sqlite3")
    with FactStore(store / "facts.sqlite3") as fs:
        revs = fs.revisions(b)
        assert [r.revision for r in revs] == [1, 2]
        winner_text = "from three" if outs[0]["ok"] else "from four"
        assert revs[1].text == winner_text


@pytest.mark.parametrize("round_", range(3))
def test_correct_against_forget(template, tmp_path, round_):
    store = fresh(template, tmp_path / "s")
    _src, _a, b = template
    outs = race(store, tmp_path, ["correct", b, "3", "corrected"], ["forget", b])
    corrected, forgot = outs
    # forget always wins; the correction either committed before it (and its
    # evidence is then excluded too) or fails with the documented error:
    # NotFound (the fact was forgotten) or Conflict (stale generation).
    assert forgot == {"ok": True}
    if not corrected["ok"]:
        assert (corrected["exit"], corrected["error"]) in ((3, "NotFound"), (4, "Conflict")), corrected
    check_integrity(store / "facts.sqlite3")
    with FactStore(store / "facts.sqlite3") as fs:
        assert fs.get(b) is None and fs.generation() == 1
        expected = {2, 3} if corrected["ok"] else {2}
        assert fs.excluded_seqs("s1") == expected


def snapshot_state(db_path: Path, fid: str) -> dict:
    db = sqlite3.connect(db_path)
    try:
        q = lambda sql, *a: db.execute(sql, a).fetchall()  # noqa: E731
        return {
            "fact": q("SELECT count(*) FROM facts WHERE fact_id = ?", fid)[0][0],
            "revisions": q("SELECT count(*) FROM revisions WHERE fact_id = ?", fid)[0][0],
            "refs": q("SELECT count(*) FROM source_refs WHERE fact_id = ?", fid)[0][0],
            "marker": q("SELECT count(*) FROM forgotten WHERE fact_id = ?", fid)[0][0],
            "generation": q("SELECT value FROM meta WHERE key = 'generation'")[0][0],
            "exclusions": sorted(q("SELECT session_id, seq FROM exclusions")),
            "others": q("SELECT count(*) FROM facts WHERE fact_id != ?", fid)[0][0],
        }
    finally:
        db.close()


@pytest.mark.heavy
def test_sigkill_sweep_over_forget(template, tmp_path):
    _src, a, _b = template
    before = {"fact": 1, "revisions": 2, "refs": 2, "marker": 0, "generation": 0,
              "exclusions": [], "others": 1}
    after = {"fact": 0, "revisions": 0, "refs": 0, "marker": 1, "generation": 1,
             "exclusions": [("s1", 1), ("s1", 2)], "others": 1}
    outcomes = []
    errors = tmp_path / "forker.err"
    with open(errors, "wb") as err:
        forker = subprocess.Popen([sys.executable, "-c", FORKER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=err)
    try:
        _sweep(template, tmp_path, forker, errors, a, before, after, outcomes)
    finally:
        assert forker.stdin is not None
        forker.stdin.close()
        forker.wait(timeout=60)
    # the sweep killed it at every step before completing (BEGIN, the inserts,
    # the updates, the deletes, COMMIT): nothing was committed before the end
    assert len(outcomes) >= 8 and not any(outcomes[:-1]) and outcomes[-1]


def _killed_at(forker: subprocess.Popen, errors: Path, db_path: Path, fid: str,
               n: int) -> tuple[int, bytes]:
    """The (exit code, stdout) of the child of FORKER killed at step ``n``."""
    assert forker.stdin is not None and forker.stdout is not None
    forker.stdin.write(json.dumps([str(db_path), fid, n]).encode() + b"\n")
    forker.stdin.flush()
    out = b""
    while not (line := forker.stdout.readline()).startswith(b"exit "):
        assert line, errors.read_bytes()           # the forker died
        out += line
    return int(line.split()[1]), out


def _sweep(template, tmp_path: Path, forker: subprocess.Popen, errors: Path, a: str,
           before: dict, after: dict, outcomes: list[bool]) -> None:
    for n in range(1, 60):
        store = fresh(template, tmp_path / f"s{n}")
        db_path = store / "facts.sqlite3"
        returncode, stdout = _killed_at(forker, errors, db_path, a, n)
        completed = returncode == 0
        if not completed:
            assert returncode == -9, errors.read_bytes()
        state = snapshot_state(db_path, a)
        committed = state == after
        assert committed or state == before, (n, state)  # all or nothing
        check_integrity(db_path)
        with FactStore(db_path) as fs:
            assert fs.forget(a) is (not committed)   # a retry returns False exactly when committed
            assert fs.forget(a) is False
        assert snapshot_state(db_path, a) == after
        outcomes.append(committed)
        if completed:
            assert stdout == b"True\n"
            break
    else:
        pytest.fail("forget never completed")
