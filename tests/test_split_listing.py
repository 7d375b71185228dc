"""A whole-store listing made by two processes (``core.split.SPLIT_LEAST``):
``memctl facts`` forks a child that makes the rows of the second half of
the fact ids while this process makes the first; the output is the one
process's, byte for byte, in every format, on damaged stores too (ids that
are NULL, numbers, BLOBs, not UTF-8, stored twice).  The child is only a
help: when it fails, its part is made by the parent; when the listing is
left early, the child is killed and reaped; with another thread running
(a program that imports the core), nothing is forked."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import factview, split as split_mod
from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.factview import iter_fact_lines, iter_fact_records
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.rowmodel import flat
from lecode_memctl.core.sessions import SessionStore

from .builders import copy_demo, store_sql
from .conftest import run_cli, tree_hash

PREF = "80fa60fdfe856452"      # demo 'preference' fact: revision 2 (corrected)
NOW = "2026-12-05T01:26:22.090Z"


def counting(monkeypatch) -> list[int]:
    """The pids of the children FactStore.fork forks from now on."""
    pids: list[int] = []
    fork = FactStore.fork

    def counted(self: FactStore, child) -> int:  # noqa: ANN001
        pid = fork(self, child)
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(FactStore, "fork", counted)
    return pids


@pytest.fixture
def forks(monkeypatch) -> list[int]:
    """Split every listing (SPLIT_LEAST 1); the pids of the children forked."""
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    return counting(monkeypatch)


def _many(store: Path, n: int = 30) -> None:
    """``n`` more facts: copies of the demo's, under new ids on both sides
    of the demo's own (sources and all)."""
    db = sqlite3.connect(store / "facts.sqlite3")
    try:
        cols = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
                for t in ("facts", "revisions", "source_refs", "provenance")}
    finally:
        db.close()
    stmts = ["PRAGMA foreign_keys = OFF"]
    for i in range(n):
        new = f"{(i * 0x0842108421084210) & 0xFFFFFFFFFFFFFFFF:016x}"
        for table, names in cols.items():
            rest = ", ".join(c for c in names if c != "fact_id")
            stmts.append(f"INSERT OR IGNORE INTO {table} (fact_id, {rest}) "
                         f"SELECT '{new}', {rest} FROM {table} WHERE fact_id = '{PREF}'")
    store_sql(store, *stmts)


DAMAGE = (
    "PRAGMA foreign_keys = OFF",
    # facts without its key: an id stored twice, NULL, a number, BLOBs, not UTF-8
    "CREATE TABLE x2 (fact_id, revision, created, updated)",
    "INSERT INTO x2 SELECT * FROM facts", "DROP TABLE facts", "ALTER TABLE x2 RENAME TO facts",
    f"INSERT INTO facts VALUES ('{PREF}', 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (NULL, 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (5, 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (CAST(x'3061ff' AS TEXT), 1, '{NOW}', '{NOW}')",
    f"INSERT INTO facts VALUES (CAST('0b' AS BLOB), 1, '{NOW}', '{NOW}')",
    f"INSERT INTO revisions VALUES (CAST('0b' AS BLOB), 1, 'a blob id', '{NOW}')",
    # a stale source, and a source with no fact
    "UPDATE source_refs SET digest = '" + "a" * 64 + "' WHERE rowid = (SELECT max(rowid) "
    "FROM source_refs)",
    f"INSERT INTO source_refs VALUES ('ffffffffffffffff', 1, 'demo-alpha', '[3]', '{'b' * 64}')",
)


@pytest.fixture(scope="module")
def many_template(demo_template, tmp_path_factory) -> tuple[Path, Path]:
    """The demo with :func:`_many`'s facts, built once per module: (its
    tree, its store).  Never changed: each test works on a copy."""
    base = tmp_path_factory.mktemp("many") / "demo"
    s = copy_demo(demo_template, base)
    _many(s)
    return base, s


@pytest.fixture
def store(many_template, tmp_path) -> Path:
    base, s = many_template
    shutil.copytree(base, tmp_path / "demo", symlinks=True)
    return tmp_path / "demo" / s.relative_to(base)


def _outputs(store: Path, *argv: str) -> list[tuple[int, str]]:
    out = []
    for fmt in ("jsonl", "json", "csv", "tsv", "table"):
        extra = () if fmt == "table" else ("--format", fmt)
        r = run_cli("--store", str(store), "--no-state", "facts", "--all", *extra, *argv)
        out.append((r.exit_code, r.stdout + r.stderr))
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("argv", [(), ("--status", "valid"), ("--status", "hidden")])
def test_the_split_listing_prints_what_one_process_prints(store, monkeypatch, damaged, argv):
    if damaged:
        store_sql(store, *DAMAGE)
    before = tree_hash(store)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _outputs(store, *argv)
    assert all(code == 0 for code, _ in one), one
    pids = counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    assert _outputs(store, *argv) == one
    # every format that lists the whole store was made in two processes
    assert len(pids) == 5, pids
    assert tree_hash(store) == before


def _open(store: Path) -> tuple[FactStore, SessionStore]:
    fs = FactStore.open_readonly(store / "facts.sqlite3")
    return fs, SessionStore(store_at(store), exclusions=fs)


def _records(store: Path, parallel: bool) -> list[dict]:
    fs, sessions = _open(store)
    with fs:
        return list(iter_fact_records(fs, sessions, parallel=parallel))


def test_the_lines_are_the_records_encoded(store, forks):
    store_sql(store, *DAMAGE)
    want = _records(store, parallel=False)
    assert not forks
    fs, sessions = _open(store)
    with fs:
        pieces = list(iter_fact_lines(fs, sessions, lambda r: orjson.dumps(r) + b"\n",
                                      keep=lambda r: r["status"] != "valid", parallel=True))
    assert len(forks) == 1
    assert b"".join(pieces) == b"".join(orjson.dumps(r) + b"\n" for r in want
                                        if r["status"] != "valid")
    assert _records(store, parallel=True) == want
    assert len(forks) == 2


def test_a_child_that_fails_leaves_its_part_to_the_parent(store, forks, monkeypatch):
    want = _records(store, parallel=False)
    parent = os.getpid()
    rows = factview._listing_rows

    def failing(*args, **kwargs):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return rows(*args, **kwargs)

    monkeypatch.setattr(factview, "_listing_rows", failing)
    assert _records(store, parallel=True) == want
    assert len(forks) == 1


def test_an_error_in_the_second_part_comes_after_the_same_rows(store, forks, monkeypatch):
    """A store error in the child's part: the parent makes that part itself
    and raises it where one process raises it, after the same rows."""
    fs, sessions = _open(store)
    with fs:
        ids = sorted(r["fact_id"] for r in iter_fact_records(fs, sessions))
    bad = ids[len(ids) * 3 // 4]
    rows = factview._listing_rows

    def failing(*args, **kwargs):
        for r in rows(*args, **kwargs):
            if r["fact_id"] == bad:
                raise StoreCorrupt(f"facts database: fact {bad} is damaged")
            yield r

    monkeypatch.setattr(factview, "_listing_rows", failing)

    def until_error(parallel: bool) -> tuple[list[str], str]:
        got: list[str] = []
        fs, sessions = _open(store)
        with fs, pytest.raises(StoreCorrupt) as exc:
            for r in iter_fact_records(fs, sessions, parallel=parallel):
                got.append(r["fact_id"])
        return got, str(exc.value)

    one = until_error(False)
    assert not forks
    assert until_error(True) == one
    assert len(forks) == 1
    assert one[0] == ids[:ids.index(bad)]


def test_a_listing_left_early_kills_and_reaps_its_child(store, forks):
    fs, sessions = _open(store)
    with fs:
        it = iter_fact_records(fs, sessions, parallel=True)
        first = next(it)
        it.close()
        assert first["fact_id"]
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)



@pytest.mark.parametrize("read", ["first part", "child's part"])
def test_closing_the_store_ends_a_split_listing(store, forks, read):
    """close() during a split listing: the child is ended, every descriptor
    in the private directory (the copy, the child's unlinked file) closed at
    once, and the next row is UsageError, in the parent's part as in the
    rows the child wrote, never a row of the closed store."""
    from lecode_memctl.core.errors import UsageError

    from .test_writer_snapshot import open_fds

    fs, sessions = _open(store)
    with fs:
        total = sum(1 for _ in iter_fact_records(fs, sessions))
    fs, sessions = _open(store)
    where = fs.private_dir
    it = iter_fact_records(fs, sessions, parallel=True)
    for _ in range(1 if read == "first part" else total - 1):
        next(it)
    assert len(forks) == 1
    fs.close()
    assert open_fds(where) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)
    with pytest.raises(UsageError, match="closed"):
        next(it)


def test_nothing_is_forked_beside_another_thread(store, forks):
    want = _records(store, parallel=False)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert _records(store, parallel=True) == want
    finally:
        stop.set()
        t.join()
    assert not forks


def test_a_command_line_listing_leaves_no_child(store, forks):
    r = run_cli("--store", str(store), "--no-state", "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)


def test_the_help_names_the_size_that_is_split():
    r = run_cli("facts", "--help")
    assert r.exit_code == 0
    assert f"{split_mod.SPLIT_LEAST:,} or more" in " ".join(r.stdout.split())


# ---------------------------------------------------------------------------
# Found by a review of the split (2026-12-05), each failing before its fix.

def _both(store: Path, monkeypatch, *argv: str,
          fmts: tuple[str, ...] = ("jsonl", "json", "csv", "tsv", "table")) -> tuple[list, list]:
    res = {}
    for least in (10 ** 9, 1):
        monkeypatch.setattr(split_mod, "SPLIT_LEAST", least)
        out = []
        for fmt in fmts:
            extra = () if fmt == "table" else ("--format", fmt)
            r = run_cli("--store", str(store), "--no-state", "facts", *argv, *extra)
            out.append((fmt, r.exit_code, r.stdout_bytes + r.stderr.encode()))
        res[least] = out
    return res[10 ** 9], res[1]


NUMERIC_IDS = ("PRAGMA foreign_keys = OFF",
               "CREATE TABLE x2 (fact_id, revision, created, updated)",
               "INSERT INTO x2 SELECT * FROM facts", "DROP TABLE facts",
               "ALTER TABLE x2 RENAME TO facts",
               *(f"INSERT INTO facts VALUES ({i}, 1, '{NOW}', '{NOW}')" for i in range(1, 61)))


@pytest.mark.parametrize("joined", [False, True])
def test_a_numeric_bound_parts_every_table_alike(store, monkeypatch, joined):
    """facts without a type holding many numbers: the bound is a number,
    which the TEXT columns of the other tables compared as text, so the
    revisions of some facts went to the other process (hidden there, and
    valid instead of stale on the joined query's path)."""
    store_sql(store, *NUMERIC_IDS, "UPDATE source_refs SET digest = '" + "c" * 64 + "' WHERE "
         "fact_id = (SELECT min(fact_id) FROM source_refs)")
    if joined:      # SQLite's temporary directory in the store: the joined query
        monkeypatch.setenv("SQLITE_TMPDIR", str(store))
    one, two = _both(store, monkeypatch, "--all", fmts=("jsonl",))
    assert two == one
    one, two = _both(store, monkeypatch, "--all", "--status", "stale", fmts=("jsonl",))
    assert two == one and one[0][2].count(b"\n") >= 1


EXTRA = {
    "plain": (),
    "blobs": tuple(f"INSERT INTO facts VALUES (CAST('{i:02d}zz' AS BLOB), 1, '{NOW}', '{NOW}')"
                   for i in range(60)),
    "invalid": tuple(f"INSERT INTO facts VALUES (CAST(x'{i:02x}ff' AS TEXT), 1, '{NOW}', '{NOW}')"
                     for i in range(0x30, 0x7a)),
    "nulls": tuple(f"INSERT INTO facts VALUES (NULL, 1, '{NOW}', '{NOW}')" for i in range(60)),
    "reals": tuple(f"INSERT INTO facts VALUES ({i}.5, 1, '{NOW}', '{NOW}')" for i in range(60)),
    "revs_typeless": ("CREATE TABLE r2 (fact_id, revision, text, created)",
                      "INSERT INTO r2 SELECT * FROM revisions", "DROP TABLE revisions",
                      "ALTER TABLE r2 RENAME TO revisions",
                      f"INSERT INTO revisions VALUES (5, 1, 'five', '{NOW}')",
                      f"INSERT INTO revisions SELECT * FROM revisions WHERE fact_id = '{PREF}'"),
    "refs_typeless": ("CREATE TABLE s2 (fact_id, revision, session_id, seqs, digest)",
                      "INSERT INTO s2 SELECT * FROM source_refs", "DROP TABLE source_refs",
                      "ALTER TABLE s2 RENAME TO source_refs",
                      "INSERT INTO source_refs SELECT 5, revision, session_id, seqs, digest "
                      "FROM source_refs LIMIT 1"),
    "prov": (f"INSERT INTO provenance VALUES ('{PREF}', 2, 'demo-alpha', 14)",
             "INSERT INTO provenance VALUES (5, 1, 'demo-alpha', 14)"),
    # a revision number of infinity (the schema's CHECK holds): about_revision
    # inf, which a JSON round trip of the child's rows made null in csv/tsv
    "infinity": (f"INSERT INTO revisions VALUES ('{PREF}', 1e999, 'x', '{NOW}')",),
}


@pytest.mark.heavy
@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.parametrize("extra", sorted(EXTRA))
def test_damaged_stores_list_alike_in_one_process_and_two(store, monkeypatch, extra, joined):
    store_sql(store, *DAMAGE, *EXTRA[extra])
    if joined:
        monkeypatch.setenv("SQLITE_TMPDIR", str(store))
    before = tree_hash(store)
    one, two = _both(store, monkeypatch, "--all")
    assert two == one
    assert tree_hash(store) == before


@pytest.mark.heavy
@pytest.mark.parametrize("argv", [("--offset", "3"), ("--limit", "5"),
                                  ("--offset", "20", "--limit", "30"),
                                  ("--status", "hidden", "--offset", "1"), ("--status", "valid"),
                                  ("--status", "stale", "--all")])
def test_pages_and_filters_list_alike_in_one_process_and_two(store, monkeypatch, argv):
    store_sql(store, *DAMAGE)
    one, two = _both(store, monkeypatch, *argv, fmts=("jsonl", "json", "csv", "tsv"))
    assert two == one


@pytest.mark.heavy
def test_jsonl_on_a_terminal_never_cuts_a_character(demo_template, tmp_path, monkeypatch):
    """The child's lines were written in 1 MiB pieces, decoded whole on a
    terminal: a character cut at a piece's end was an internal error."""
    from lecode_memctl.cli import output

    s = copy_demo(demo_template, tmp_path / "demo")
    # (the listing's text is cut at 512 characters, so a row is ~1.9 KB:
    # pieces of 32 KiB, not the 1 MiB of split.CHUNK, put several piece
    # ends in the child's part with 100 facts, not 1,600)
    monkeypatch.setattr(split_mod, "CHUNK", 1 << 15)
    _many(s, 100)
    store_sql(s, "UPDATE revisions SET text = '" + "\u20ac" * 500 + "'")
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    one, two = _both(s, monkeypatch, "--all", fmts=("jsonl",))
    assert one[0][1] == 0
    assert two == one


def test_the_parts_are_no_state_of_the_store(store, forks):
    """A read of the same store while a split listing is paused saw only
    the first part of the ids (the part was the store's state)."""
    whole = len(_records(store, parallel=False))
    fs, sessions = _open(store)
    with fs:
        it = iter_fact_records(fs, sessions, parallel=True)
        next(it)
        assert sum(1 for _ in fs.iter_fact_groups()) == whole
        assert sum(1 for _ in iter_fact_records(fs, sessions)) == whole
        it.close()
    assert len(forks) == 1


def test_a_child_whose_start_fails_does_nothing_else(store, monkeypatch):
    """An error in the child before its work (its connection not opened
    again: too many open files, say) ran the caller's code in the child:
    a second listing, a second error line, the snapshot removed."""
    want = _records(store, parallel=False)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    parent = os.getpid()
    opened = FactStore._snapshot_connection

    def failing(self):   # noqa: ANN001
        if os.getpid() != parent:
            raise sqlite3.OperationalError("unable to open database file")
        return opened(self)

    monkeypatch.setattr(FactStore, "_snapshot_connection", failing)
    r = run_cli("--store", str(store), "--no-state", "facts", "--all", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [orjson.loads(x) for x in r.stdout.splitlines()] == want
    assert r.stderr == ""


def test_an_ignored_sigchld_lists_in_one_process(store, tmp_path):
    """SIGCHLD ignored by the caller (inherited across exec): the child was
    reaped by the system, waitpid failed, and half the listing came out
    with exit 5."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "lecode_memctl", "--store", str(store), "--no-state",
            "facts", "--all", "--format", "jsonl"]
    env = dict(os.environ)
    want = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert want.returncode == 0
    run = ("import os, signal, sys\n"
           "import lecode_memctl.core.split as s\n"
           "s.SPLIT_LEAST = 1\n"
           "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
           "from lecode_memctl.cli.main import main\n"
           "sys.exit(main(sys.argv[1:]))\n")
    got = subprocess.run([sys.executable, "-c", run, *argv[3:]], capture_output=True, env=env,
                         timeout=60)
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, b"")



@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux: PR_SET_PDEATHSIG")
def test_the_child_ends_with_its_parent(store, tmp_path):
    """A parent killed (SIGKILL, the OOM killer) left its child running its
    half to the end, its file held in $TMPDIR: now it is killed too."""
    import signal
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "child.pid"
    run = ("import os, sys, time\n"
           "import lecode_memctl.core.split as s, lecode_memctl.core.factview as v\n"
           "s.SPLIT_LEAST = 1\n"
           "parent = os.getpid()\n"
           "rows = v._listing_rows\n"
           "def slow(*a, **k):\n"
           "    if os.getpid() != parent:\n"
           f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
           "        time.sleep(60)\n"
           "    else:\n"
           "        time.sleep(60)\n"
           "    return rows(*a, **k)\n"
           "v._listing_rows = slow\n"
           "from lecode_memctl.cli.main import main\n"
           "sys.exit(main(sys.argv[1:]))\n")
    p = subprocess.Popen([sys.executable, "-c", run, "--store", str(store), "--no-state",
                          "facts", "--all", "--format", "jsonl"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "no child"
            time.sleep(0.02)
        child = int(pidfile.read_text())
        p.send_signal(signal.SIGKILL)
        p.wait(10)

        def alive() -> bool:
            try:
                with open(f"/proc/{child}/status") as f:
                    return not any(line.startswith("State:") and "Z" in line.split()[1]
                                   for line in f)
            except OSError:
                return False

        deadline = time.monotonic() + 10
        while alive():
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


ODD_TEXTS = ("two\nlines", "a\ttab, a comma", 'say "so"', "esc \x1b[31m red", "line\u2028sep",
             "caf\u00e9 \U0001f600", "\u202eevil", "")


@pytest.mark.parametrize("tty", [False, True])
def test_csv_lines_made_by_each_process_print_what_one_process_prints(store, monkeypatch, tty):
    """``facts --all --format csv|tsv`` (2026-12-06): each process writes
    the lines of its own part (``output.csv_line``), as the jsonl listing
    does, where the child's rows came back pickled and the parent made
    every line.  The bytes are the one process's, and the lines those
    ``emit_csv`` writes of the records, with text that CSV quotes, control
    characters it escapes, and characters of 2 to 4 bytes, in both parts,
    in a pipe and on a terminal."""
    import csv
    import io

    from lecode_memctl.cli import output
    from lecode_memctl.core.rowmodel import FACT

    cases = " ".join(f"WHEN {i} THEN {_sql_text(t)}" for i, t in enumerate(ODD_TEXTS))
    store_sql(store, "UPDATE revisions SET text = CASE (instr('0123456789abcdef', "
              f"substr(fact_id, 3, 1)) + revision) % {len(ODD_TEXTS)} {cases} END")
    if tty:
        monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    one, two = _both(store, monkeypatch, "--all", fmts=("csv", "tsv"))
    assert two == one
    records = _records(store, parallel=False)
    assert {r["text"] for r in records} >= set(ODD_TEXTS)
    for (fmt, code, got) in one:
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(FACT.names)
        for r in records:
            writer.writerow([output.safe(flat(r.get(c)), keep_newlines=True) for c in FACT.names])
        assert code == 0
        assert got == buf.getvalue().encode()


def _sql_text(text: str) -> str:
    return "CAST(x'" + text.encode().hex() + "' AS TEXT)"


@pytest.mark.parametrize("tty", [False, True])
@pytest.mark.parametrize("argv", [(), ("--status", "stale"), ("--status", "unverified")])
def test_a_json_document_made_by_each_process_prints_what_one_process_prints(
        store, monkeypatch, tty, argv):
    """``facts --all --json`` (2026-12-06): each process encodes the rows of
    its own part, as for jsonl and CSV.  The bytes are the one process's,
    with a filter that keeps some rows, or none, and on a terminal; the
    rows are the records, in order."""
    from lecode_memctl.cli import output

    cases = " ".join(f"WHEN {i} THEN {_sql_text(t)}" for i, t in enumerate(ODD_TEXTS))
    store_sql(store, "UPDATE revisions SET text = CASE (instr('0123456789abcdef', "
              f"substr(fact_id, 3, 1)) + revision) % {len(ODD_TEXTS)} {cases} END",
              "UPDATE source_refs SET digest = '" + "a" * 64 + "' WHERE rowid % 3 = 0")
    if tty:
        monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    pids = counting(monkeypatch)
    one, two = _both(store, monkeypatch, "--all", *argv, fmts=("json",))
    assert len(pids) == 1
    assert two == one
    (_fmt, code, got), = one
    assert code == 0
    doc = orjson.loads(got)
    want = [r for r in _records(store, parallel=False)
            if not argv or r["status"] == argv[1]]
    assert doc["facts"] == want
    assert doc["total"] == (None if argv else len(want))
    assert (len(want) > 0) == (argv != ("--status", "unverified"))
    if not tty:
        assert got.startswith(b'{"type":"facts",')
        assert got.endswith(b"\n]," + orjson.dumps({"next_offset": None,
                                                   "learning": doc["learning"]})[1:] + b"\n")
        assert got.count(b"\n") == len(want) + 2


@pytest.mark.parametrize("odd", [False, True])
@pytest.mark.parametrize("wcwidth", [False, True])
def test_a_plain_table_made_by_each_process_prints_what_one_process_prints(
        store, monkeypatch, odd, wcwidth):
    """``facts --all`` in a pipe (2026-12-06): each process makes its own
    rows' cells and their widths (``output.PlainStats``, the child's brought
    back by ``split.Tail``), where the child's rows came back pickled and the
    parent made every cell.  The widest text is in the child's part only,
    and with ``odd`` texts that make the table tabulate's (a control
    character, or text outside ASCII where wcwidth is installed) sit in
    either part: the bytes are the one process's."""
    import importlib.util

    from lecode_memctl.cli import output

    top = max(r["fact_id"] for r in _records(store, parallel=False))
    store_sql(store, f"UPDATE revisions SET text = '{'w' * 90}' WHERE fact_id = '{top}'")
    if odd:
        cases = " ".join(f"WHEN {i} THEN {_sql_text(t)}" for i, t in enumerate(ODD_TEXTS))
        store_sql(store, "UPDATE revisions SET text = CASE (instr('0123456789abcdef', "
                  f"substr(fact_id, 3, 1)) + revision) % {len(ODD_TEXTS)} {cases} END "
                  f"WHERE fact_id != '{top}'")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "wcwidth" and wcwidth
                        else real(name, *a))
    calls: list[int] = []
    merge = output.PlainStats.merge
    monkeypatch.setattr(output.PlainStats, "merge",
                        lambda self, state: (calls.append(1), merge(self, state))[1])
    one, two = _both(store, monkeypatch, "--all", fmts=("table",))
    assert two == one and one[0][1] == 0
    assert b"w" * 90 in one[0][2]
    assert calls == [1]                 # (the child's widths, taken once)


def test_a_plain_table_whose_child_cannot_say_its_widths_is_made_here(store, forks,
                                                                      monkeypatch):
    """The child's tail refused (its widths unreadable): its part is made
    again here, and the table is the one process's."""
    from lecode_memctl.cli import output

    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    want = run_cli("--store", str(store), "--no-state", "facts", "--all")
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)

    def refused(self, state):  # noqa: ANN001, ANN202
        raise ValueError("not the state of a plain table")

    monkeypatch.setattr(output.PlainStats, "merge", refused)
    got = run_cli("--store", str(store), "--no-state", "facts", "--all")
    assert (got.exit_code, got.stdout) == (want.exit_code, want.stdout) and got.exit_code == 0
    assert len(forks) == 1


def test_a_tail_comes_from_the_child_or_not_at_all(store, forks):
    """split.Tail: what the child's part gathered comes back once; where
    this process made the second part itself, the objects it changed are
    its own, and no tail is taken."""
    fs, sessions = _open(store)
    seen: list[str] = []
    taken: list[bytes] = []

    def encode(r: dict) -> bytes:
        seen.append(r["fact_id"])
        return orjson.dumps(r) + b"\n"

    with fs:
        out = b"".join(iter_fact_lines(fs, sessions, encode, parallel=True,
                                       tail=(lambda: orjson.dumps(seen), taken.append)))
    assert len(forks) == 1 and len(taken) == 1
    everyone = [orjson.loads(line)["fact_id"] for line in out.splitlines()]
    assert seen + orjson.loads(taken[0]) == everyone
    assert seen and orjson.loads(taken[0])


@pytest.mark.parametrize("argv", [("--query", "e"), ("--query", "NO SUCH TEXT"),
                                  ("--since", "2000-01-01", "--status", "hidden"),
                                  ("--until", "2000-01-01"),
                                  ("--query", "a", "--offset", "2", "--limit", "4"),
                                  ("--query", "a", "--all")])
def test_filtered_listings_are_made_by_two_processes_alike(store, monkeypatch, argv):
    """--query, --since and --until (2026-12-06): a filtered listing of a
    large store takes the listing's own path, split in two processes (it
    made every fact a Fact object, then its row, in one process: 2.8 s
    against 1.0 s for the whole store unfiltered at 100,000 facts), with
    the filter given the same Fact; every format prints what one process
    prints, on a damaged store too."""
    store_sql(store, *DAMAGE)
    pids = counting(monkeypatch)
    one, two = _both(store, monkeypatch, *argv)
    assert two == one
    assert all(code == 0 for _fmt, code, _out in one), one
    if "--offset" not in argv:
        assert len(pids) == 5, pids     # (every format, a child each)
