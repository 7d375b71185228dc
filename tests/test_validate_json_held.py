"""``validate --json`` holds its findings encoded, and past a bound in an
unnamed temporary file, until its document is written at its end.

It held every finding as an object, then every row as a dict, then the
whole document: 100,000 unverified legacy facts (one finding each) peaked
at 218 MiB (25,000: 81 MiB), where ``--format jsonl`` stays at 40 MiB.  The
document is the same bytes; nothing is written before the audit ends, as
before; and with no temporary file to be had the findings stay in memory."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from lecode_memctl.cli import cmd_audit

from .builders import copy_demo
from .conftest import REPO, run_cli


def _legacy_facts(store: Path, n: int) -> None:
    """``n`` more facts, each with a revision and no source: one finding each."""
    db = sqlite3.connect(store / "facts.sqlite3")
    now = "2026-01-01T00:00:00.000Z"
    db.executemany("INSERT INTO facts VALUES (?, 1, ?, ?)",
                   ((f"{i:016x}", now, now) for i in range(n)))
    db.executemany("INSERT INTO revisions VALUES (?, 1, ?, ?)",
                   ((f"{i:016x}", f"legacy fact {i}", now) for i in range(n)))
    db.commit()
    db.close()


def _validate(store: Path, *args: str, env: dict | None = None) -> tuple[int, bytes, str]:
    r = run_cli("--store", str(store), "--no-state", "validate", *args, env=env)
    return r.exit_code, r.stdout_bytes, r.stderr


def _reference(store: Path, monkeypatch) -> tuple[int, bytes, str]:
    """The document as it was made: every finding held, one emit_json."""
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", None)
    try:
        return _validate(store, "--json")
    finally:
        monkeypatch.undo()


_TIMES = ("generated", "started", "finished", "duration_seconds")


def _untimed(doc):  # noqa: ANN001, ANN202
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if k not in _TIMES}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def _same_but_generated(a: bytes, b: bytes) -> None:
    """The same document but its times, and each the compact bytes orjson
    makes of it, members in order (what emit_json writes in a pipe)."""
    da, db = orjson.loads(a), orjson.loads(b)
    assert _untimed(da) == _untimed(db)
    assert list(da) == list(db)
    assert a == orjson.dumps(da) + b"\n" and b == orjson.dumps(db) + b"\n"


def _held_against_whole(demo_template, tmp_path: Path, monkeypatch, facts: int,  # noqa: ANN001
                        bound: int) -> tuple[Path, tuple[int, bytes, str]]:
    """A demo copy with ``facts`` legacy facts, its document made whole (the
    reference), then HELD_IN_MEMORY set to ``bound``."""
    store = copy_demo(demo_template, tmp_path / "demo")
    _legacy_facts(store, facts)
    want = _reference(store, monkeypatch)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", bound)
    return store, want


def _as_made_whole(store: Path, want: tuple[int, bytes, str]) -> tuple[int, bytes, str]:
    """``validate --json`` of ``store``, checked against the reference's."""
    got = _validate(store, "--json")
    assert (got[0], got[2]) == (want[0], want[2])
    _same_but_generated(got[1], want[1])
    return got


@pytest.mark.parametrize("bound", [0, 1, 700, 1 << 20])
def test_the_document_is_the_one_made_whole(demo_template, tmp_path, monkeypatch, bound):
    store, want = _held_against_whole(demo_template, tmp_path, monkeypatch, 300, bound)
    got = _as_made_whole(store, want)
    assert len(orjson.loads(got[1])["findings"]) >= 300


def test_no_finding_and_several_stores(demo_template, tmp_path, monkeypatch):
    store, want = _held_against_whole(demo_template, tmp_path, monkeypatch, 0, 0)
    _as_made_whole(store, want)


def test_without_a_temporary_file_the_findings_stay_in_memory(demo_template, tmp_path,
                                                              monkeypatch):
    store, want = _held_against_whole(demo_template, tmp_path, monkeypatch, 200, 100)
    calls = []

    def no_room(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    _as_made_whole(store, want)
    assert calls


def test_a_temporary_file_that_fills_up_gives_its_findings_back(demo_template, tmp_path,
                                                                monkeypatch):
    store, want = _held_against_whole(demo_template, tmp_path, monkeypatch, 200, 100)
    closed = filling_temporary_files(monkeypatch)
    _as_made_whole(store, want)
    assert closed == [True]


def filling_temporary_files(monkeypatch, left: int = 5000) -> list[bool]:  # noqa: ANN001
    """Temporary files that take ``left`` bytes, then are full; the list
    returned gets a True as each is closed."""
    real = tempfile.TemporaryFile
    closed: list[bool] = []

    class Filling:
        def __init__(self, *a, **kw) -> None:  # noqa: ANN002, ANN003
            self.f = real(*a, **kw)
            self.left = left

        def write(self, data: bytes) -> int:
            if len(data) > self.left:
                self.f.write(data[:self.left])
                self.left = 0
                raise OSError(28, "No space left on device")
            self.left -= len(data)
            return self.f.write(data)

        def close(self) -> None:
            closed.append(True)
            self.f.close()

        def __getattr__(self, name):  # noqa: ANN001, ANN204
            return getattr(self.f, name)

    monkeypatch.setattr(tempfile, "TemporaryFile", Filling)
    return closed


def test_an_error_in_the_audit_prints_no_part_of_the_document(demo_template, tmp_path,
                                                              monkeypatch):
    store = copy_demo(demo_template, tmp_path / "demo")
    _legacy_facts(store, 300)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", 0)
    audit_fails_at(monkeypatch, 150)
    code, out, err = _validate(store, "--json")
    assert code == 5
    assert orjson.loads(out)["type"] == "error" and "damaged (test)" in err


def audit_fails_at(monkeypatch, n: int) -> None:  # noqa: ANN001
    """The audit's ``n``-th finding is a StoreCorrupt (a damaged database)."""
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.errors import StoreCorrupt

    real = Audit.run

    def failing(self):  # noqa: ANN001, ANN202
        for i, f in enumerate(real(self)):
            if i == n:
                raise StoreCorrupt("facts database: damaged (test)")
            yield f

    monkeypatch.setattr(Audit, "run", failing)


def child_peak_kib(store: Path, *args: str) -> tuple[int, bytes]:
    """The peak RSS of ``memctl --no-state --store STORE ARGS`` (KiB) and
    its output."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
            "sys.stdout.buffer.write(p.stdout)\n"
            "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "lecode_memctl",
                          "--no-state", "--store", str(store), *args],
                         capture_output=True, env=env, timeout=300, check=True)
    return int(out.stderr), out.stdout


def peaks_at_findings(demo_template, tmp_path: Path, *args: str,  # noqa: ANN001
                      sizes: tuple[int, int] = (8000, 32000)) -> list[int]:
    """``child_peak_kib`` of ARGS on demo copies with ``sizes`` legacy facts
    (8,000 and 32,000 unless told)."""
    peaks = []
    for n in sizes:
        store = copy_demo(demo_template, tmp_path / f"demo{n}")
        _legacy_facts(store, n)
        peaks.append(child_peak_kib(store, *args)[0])
    return peaks


@pytest.mark.heavy
def test_the_peak_does_not_follow_the_findings(demo_template, tmp_path):
    """At 4,000 and 16,000 findings (before: some 70 MiB apart at 8,000 and
    32,000; now 3 there, 5.6 here).  With every finding held as an object
    and the document made whole again (``HELD_IN_MEMORY = None``): 26 MiB
    apart here (52 at 8,000 and 32,000), failing the bound; the smaller
    sizes take half the time."""
    peaks = peaks_at_findings(demo_template, tmp_path, "validate", "--json",
                              sizes=(4000, 16000))
    assert peaks[1] - peaks[0] < 12 << 10, peaks


def _odd_names(store: Path) -> None:
    """Findings whose file names need quoting, escapes and non-ASCII."""
    (store / "notes" / "café, \"quoted\".md").write_bytes(b"\xff not utf-8\n")
    (store / "notes" / "tab\there.md").write_bytes(b"\xfe\n")
    (store / "daily" / "é.md").write_text("a stray daily file\n")


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("bound", [0, 1, 700, 1 << 20])
def test_csv_and_tsv_are_the_lines_made_whole(demo_template, tmp_path, monkeypatch, fmt, bound):
    store = copy_demo(demo_template, tmp_path / "demo")
    (store / "notes").mkdir(exist_ok=True)
    (store / "daily").mkdir(exist_ok=True)
    _odd_names(store)
    _legacy_facts(store, 120)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", None)
    want = _validate(store, "--format", fmt)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", bound)
    got = _validate(store, "--format", fmt)
    assert got == want
    assert got[1].count(b"\n") > 120 and "caf" in got[1].decode()


def test_csv_in_an_ascii_locale_is_escaped_as_before(demo_template, tmp_path):
    """Through the text layer, in its encoding (C locale: ASCII, escapes)."""
    store = copy_demo(demo_template, tmp_path / "demo")
    (store / "notes").mkdir(exist_ok=True)
    (store / "daily").mkdir(exist_ok=True)
    _odd_names(store)
    _legacy_facts(store, 50)
    outs = []
    for bound in ("None", "0"):
        code = ("import sys\nfrom lecode_memctl.cli import cmd_audit, main\n"
                f"cmd_audit.HELD_IN_MEMORY = {bound}\n"
                "sys.exit(main.main(sys.argv[1:]))\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO"))}
        env.update(LC_ALL="C", PYTHONPATH=str(REPO), PYTHONUTF8="0")
        p = subprocess.run([sys.executable, "-c", code, "--store", str(store), "--no-state",
                            "validate", "--format", "csv"], capture_output=True, env=env,
                           timeout=120)
        outs.append((p.returncode, p.stdout, p.stderr))
    assert outs[0] == outs[1]
    # (a name decoded in the C locale: its bytes shown as \\xNN, by safe)
    assert b"notes/caf\\xc3\\xa9" in outs[0][1]


@pytest.mark.parametrize("fmt", ["--json", "--format=csv", "--format=human"])
def test_an_error_in_the_audit_closes_the_held_findings_file(demo_template, tmp_path, monkeypatch,
                                                             fmt):
    """The audit stops after the findings went to their file: the file is
    closed then, not left to the garbage collector (a review of 93584f1)."""
    store = copy_demo(demo_template, tmp_path / "demo")
    _legacy_facts(store, 300)
    monkeypatch.setattr(cmd_audit, "HELD_IN_MEMORY", 0)
    audit_fails_at(monkeypatch, 150)
    real = tempfile.TemporaryFile
    made: list = []

    def recorded(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        f = real(*a, **kw)
        made.append(f)
        return f

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    code, _out, _err = _validate(store, fmt)
    assert code == 5
    assert made and all(f.closed for f in made)
