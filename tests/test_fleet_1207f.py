"""Fleet commands (review rv6, 2026-12-07): secrets --all-projects gives
every entry of memory/ a row; validate --all-projects' fence checks grow
with the store count, not its square; one unreadable facts database is one
unreadable file; an unlistable sessions/ is a count not known; a store
name's non-UTF-8 bytes spelt \\xNN in a finding's message."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli
from .promparse import parse_exposition


def _clean_store(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "MEMORY.md").write_text("# nothing here\n")


# -- 1. secrets --all-projects: every entry of memory/ a row


def _rows(fmt: str) -> tuple[int, dict[str, dict], str]:
    """secrets --all-projects in ``fmt``: (exit, the scan rows by project, stdout)."""
    args = {"text": [], "json": ["--json"], "jsonl": ["--format", "jsonl"],
            "prometheus": ["--format", "prometheus"]}[fmt]
    r = run_cli("secrets", "--all-projects", *args)
    assert "Traceback" not in r.stderr
    rows: dict[str, dict] = {}
    if fmt == "json":
        rows = {s["project"]: s for s in orjson.loads(r.stdout_bytes)["projects"]}
    elif fmt == "jsonl":
        for line in r.stdout.splitlines():
            row = orjson.loads(line)
            if row["type"] == "scan":
                rows[row["project"]] = row
    return r.exit_code, rows, r.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "prometheus"])
def test_secrets_all_projects_reports_a_file_in_a_stores_place(config_dir, fmt):
    """A regular file in a store's place (holding a credential here) is not
    read: a row saying so, counted unreadable, exit 1, in every format.
    It was left out of every format, exit 0."""
    mem = config_dir / "memory"
    _clean_store(mem / "good-aaaaaaaaaaaa")
    (mem / "proj-bbbbbbbbbbbb").write_text("AKIAIOSFODNN7EXAMPLQ\n")
    code, rows, out = _rows(fmt)
    assert code == 1, out
    assert "AKIAIOSFODNN7EXAMPLQ" not in out
    if fmt in ("json", "jsonl"):
        assert sorted(rows) == ["good-aaaaaaaaaaaa", "proj-bbbbbbbbbbbb"]
        assert rows["good-aaaaaaaaaaaa"]["ok"] is True
        bad = rows["proj-bbbbbbbbbbbb"]
        assert bad["ok"] is False and bad["unreadable"] == 1
        assert [(s["file"], s["unreadable"]) for s in bad["skipped"]] == [(".", True)]
        assert "a regular file, not a directory" in bad["skipped"][0]["reason"]
    elif fmt == "text":
        assert "good-aaaaaaaaaaaa: OK" in out
        assert "proj-bbbbbbbbbbbb" in out and "a regular file, not a directory" in out
    else:
        fams = parse_exposition(out)
        ok = {s.labels["project"]: s.value for s in fams["memctl_secrets_ok"].samples}
        assert ok == {"good-aaaaaaaaaaaa": 1, "proj-bbbbbbbbbbbb": 0}
        unread = {s.labels["project"]: s.value
                  for s in fams["memctl_secrets_unreadable_files"].samples}
        assert unread["proj-bbbbbbbbbbbb"] == 1
        assert fams["memctl_secrets_stores"].samples[0].value == 1


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "prometheus"])
def test_secrets_all_projects_reports_entries_that_cannot_be_looked_up(
        config_dir, monkeypatch, fmt):
    """memory/ listable but not searchable (a non-root user, mode 0444;
    simulated: the tests run as root): each entry a row saying it cannot be
    looked up, exit 1.  It was "no stores", exit 0."""
    mem = config_dir / "memory"
    _clean_store(mem / "proj-cccccccccccc")
    real = os.lstat

    def lstat(path, *a, **k):
        if Path(os.fspath(path)).parent == mem:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "lstat", lstat)
    code, rows, out = _rows(fmt)
    assert code == 1, out
    if fmt in ("json", "jsonl"):
        row = rows["proj-cccccccccccc"]
        assert row["ok"] is False and row["unreadable"] == 1
        assert "cannot be looked up" in row["skipped"][0]["reason"]
    elif fmt == "text":
        assert "proj-cccccccccccc" in out and "cannot be looked up" in out
    else:
        fams = parse_exposition(out)
        assert [(s.labels["project"], s.value) for s in fams["memctl_secrets_ok"].samples] == [
            ("proj-cccccccccccc", 0)]
        assert fams["memctl_secrets_stores"].samples[0].value == 0


# -- 2. validate --all-projects: fence checks linear in the store count


def _fleet(config_dir: Path, demo_template, n: int) -> None:
    import shutil

    mem = config_dir / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        shutil.copytree(demo_template.store.path, mem / f"proj{i:03d}-{i:012x}", symlinks=True)


def _realpaths_of_validate(monkeypatch) -> int:
    calls = [0]
    real = os.path.realpath

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(os.path, "realpath", counted)
        r = run_cli("--no-state", "validate", "--all-projects", "-q")
    assert r.exit_code in (0, 1), r.stderr
    return calls[0]


def test_validate_all_projects_resolves_paths_linearly(tmp_path, monkeypatch, demo_template):
    """Each store's snapshot checked its temporary directory's candidates
    against every store fenced, each resolved again: N x (N+1) realpath
    calls (10,100 for 100 stores, 1,001,000 for 1,000: 16 s).  Now each
    fence is resolved once: 4x the stores, about 4x the calls."""
    small = tmp_path / "small"
    big = tmp_path / "big"
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(small))
    _fleet(small, demo_template, 8)
    few = _realpaths_of_validate(monkeypatch)
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(big))
    _fleet(big, demo_template, 32)
    many = _realpaths_of_validate(monkeypatch)
    assert many <= 5 * few, (few, many)


def test_inside_fences_answers_as_resolves_inside(tmp_path):
    """The one-lookup check gives what a resolves_inside per fence gave:
    the fence itself, under it, through a symbolic link, not a sibling
    whose name starts alike, and nothing once the fence is lifted."""
    from lecode_memctl.core import atomic

    store = tmp_path / "mem" / "s-0123456789ab"
    (store / "sub").mkdir(parents=True)
    (tmp_path / "mem" / "s-0123456789abc").mkdir()
    os.symlink(store / "sub", tmp_path / "link")
    paths = [store, store / "sub", store / "sub" / "not-yet", tmp_path / "link",
             tmp_path / "link" / "x", tmp_path / "mem" / "s-0123456789abc", tmp_path / "mem",
             tmp_path / "mem" / "s-0123456789ab" / ".." / "s-0123456789abc"]
    fences = (tmp_path / "elsewhere", store)
    with atomic.fenced(*fences):
        got = [atomic.inside_fences(p) for p in paths]
        want = [any(atomic.resolves_inside(p, f) for f in fences) for p in paths]
        with atomic.fenced(store):
            assert [atomic.inside_fences(p) for p in paths] == want
        assert [atomic.inside_fences(p) for p in paths] == want
    assert got == want == [True, True, True, True, True, False, False, False]
    assert not any(atomic.inside_fences(p) for p in paths)
    assert atomic._FENCE_TOPS == {}


# -- 3. secrets: one unreadable facts database, one unreadable file


def test_an_unreadable_facts_database_is_one_unreadable_file(tmp_path, demo_template):
    """A facts.sqlite3 of mode 000, read by a process without
    CAP_DAC_OVERRIDE (setpriv drops it: the tests run as root): the facts'
    read and the raw pages' scan each listed it, ``unreadable`` 2 for one
    file.  Now one entry, counted once."""
    import shutil
    import subprocess
    import sys

    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv")
    store = tmp_path / "memory" / demo_template.store.path.name
    shutil.copytree(demo_template.store.path, store, symlinks=True)
    os.chmod(store / "facts.sqlite3", 0)
    argv = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", sys.executable, "-m",
            "lecode_memctl", "--no-state", "--store", str(store), "secrets"]
    probe = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all", "cat",
                            str(store / "facts.sqlite3")], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("setpriv cannot drop CAP_DAC_OVERRIDE here")
    r = subprocess.run([*argv, "--json"], capture_output=True)
    assert r.returncode == 1, r.stderr
    row = orjson.loads(r.stdout)["projects"][0]
    assert row["unreadable"] == 1, row["skipped"]
    facts = [s for s in row["skipped"] if s["file"] == "facts.sqlite3"]
    assert len(facts) == 1 and "Permission denied" in facts[0]["reason"]
    prom = subprocess.run([*argv, "--format", "prometheus"], capture_output=True)
    fams = parse_exposition(prom.stdout.decode())
    assert [s.value for s in fams["memctl_secrets_unreadable_files"].samples] == [1]


# -- 4a. validate: sessions/ that cannot be listed, a count not known


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "prometheus"])
def test_validate_sessions_unknown_when_sessions_cannot_be_listed(
        config_dir, monkeypatch, demo_template, fmt):
    """A store whose sessions/ cannot be listed (simulated EACCES: the tests
    run as root) holding 3 transcripts, 2 of them cited by facts: the
    summary said ``sessions`` 2 (the cited ones).  Now the count is not
    known: null in JSON and JSONL, "sessions unknown" in the text, no
    memctl_validate_sessions sample for that store."""
    import shutil

    from .test_unlistable_dirs import unlistable

    store = config_dir / "memory" / demo_template.store.path.name
    shutil.copytree(demo_template.store.path, store, symlinks=True)
    assert len(list((store / "sessions").glob("*.jsonl"))) == 3
    unlistable(monkeypatch, store / "sessions")
    args = {"text": [], "json": ["--json"], "jsonl": ["--format", "jsonl"],
            "prometheus": ["--format", "prometheus"]}[fmt]
    r = run_cli("--no-state", "validate", "--all-projects", *args)
    assert r.exit_code == 1, r.stdout + r.stderr       # (layout.unreadable)
    assert "Traceback" not in r.stderr
    if fmt == "json":
        doc = orjson.loads(r.stdout_bytes)
        assert [s["sessions"] for s in doc["projects"]] == [None]
    elif fmt == "jsonl":
        rows = [orjson.loads(line) for line in r.stdout.splitlines()]
        assert [s["sessions"] for s in rows if s["type"] == "summary"] == [None]
    elif fmt == "text":
        assert "sessions unknown;" in r.stdout and "2 sessions" not in r.stdout
    else:
        fams = parse_exposition(r.stdout)
        assert "memctl_validate_sessions" not in fams or \
            fams["memctl_validate_sessions"].samples == []
        assert [s.value for s in fams["memctl_validate_ok"].samples] == [0]


# -- 4b. a store name's bytes that are not UTF-8, in a finding's message


def test_session_refused_message_spells_a_non_utf8_store_name_as_project(
        config_dir, demo_template):
    """A store named with a 0xFF byte whose transcripts name another
    project: the session.refused message quoted the name as
    'odd\\udcff-333333333333' while ``project`` spelt it odd\\xff-...; both
    now spell the byte \\xNN, as FORMAT.md says."""
    import shutil

    mem = config_dir / "memory"
    mem.mkdir(parents=True)
    name = os.fsdecode(b"odd\xff-333333333333")
    shutil.copytree(demo_template.store.path, mem / name, symlinks=True)
    r = run_cli("--no-state", "validate", "--all-projects", "--json")
    assert "Traceback" not in r.stderr
    doc = orjson.loads(r.stdout_bytes)
    refused = [f for f in doc["findings"] if f["code"] == "session.refused"]
    assert refused, doc["findings"]
    for f in refused:
        assert f["project"] == "odd\\xff-333333333333"
        assert "'odd\\xff-333333333333'" in f["message"], f["message"]
        assert "udc" not in f["message"]
    text = run_cli("--no-state", "validate", "--all-projects").stdout
    assert "'odd\\xff-333333333333'; refused" in text and "udcff" not in text
