"""A store directory that cannot be listed is a reported problem, never an
empty listing: ``secrets`` fails the audit and names it, ``grep`` lists it as
skipped, ``usage`` exits 5 as ``sessions`` does.

Simulated by making ``os.scandir``/``os.listdir`` raise EACCES for that
directory: the suite may run as root, which lists any directory whatever its
mode (``chmod 000`` stops nothing there)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli


@pytest.fixture
def demo_store(tmp_path) -> Path:
    from lecode_memctl.core.demo import build_demo

    return build_demo(tmp_path / "d").store.path


def unlistable(monkeypatch, *dirs: Path) -> None:
    """Listing any of ``dirs`` (by path) fails with EACCES; everything else,
    and opening a file by its path inside them, still works."""
    bad = {os.path.realpath(d) for d in dirs}

    def check(p: object) -> None:
        if isinstance(p, (str, os.PathLike)) and os.path.realpath(os.fspath(p)) in bad:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))

    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(p=".", *a):   # type: ignore[no-untyped-def]
        check(p)
        return real_scandir(p, *a)

    def listdir(p=".", *a):   # type: ignore[no-untyped-def]
        check(p)
        return real_listdir(p, *a)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)


def test_the_demo_store_is_clean_when_listable(demo_store):
    """The baseline the tests below change one directory of."""
    r = run_cli("--store", str(demo_store), "secrets", "--json", "--jobs", "1")
    assert r.exit_code == 0, r.stdout
    assert run_cli("--store", str(demo_store), "grep", "tabs").exit_code == 0


@pytest.mark.parametrize("sub", ["sessions", "daily", "notes", "."])
def test_secrets_fails_on_an_unlistable_directory(demo_store, monkeypatch, sub):
    rel = "." if sub == "." else sub
    unlistable(monkeypatch, demo_store / sub)
    args = ("--store", str(demo_store), "secrets", "--jobs", "1")
    r = run_cli(*args, "--json")
    assert r.exit_code == 1, r.stdout
    doc = orjson.loads(r.stdout_bytes)
    assert doc["ok"] is False and doc["exit_code"] == 1
    scan = doc["projects"][0]
    assert scan["ok"] is False and scan["unreadable"] == 1
    assert [(s["file"], s["unreadable"]) for s in scan["skipped"]] == [(rel, True)]
    assert "Permission denied" in scan["skipped"][0]["reason"]
    # every format says so
    human = run_cli(*args)
    first = human.stdout.split("\n")[0]
    # not "OK", and not "SECRETS FOUND" either: nothing was found, something not read
    assert human.exit_code == 1 and ": UNREADABLE  0 findings" in first, first
    assert "1 unreadable" in first
    assert f"skipped {rel}: " in human.stdout
    jsonl = run_cli(*args, "--format", "jsonl")
    assert jsonl.exit_code == 1
    last = orjson.loads(jsonl.stdout_bytes.splitlines()[-1])
    assert last["type"] == "scan" and last["unreadable"] == 1
    prom = run_cli(*args, "--format", "prometheus")
    assert prom.exit_code == 1
    assert "memctl_secrets_ok{" in prom.stdout and "} 0\n" in prom.stdout
    assert "memctl_secrets_unreadable_files{" in prom.stdout
    for fmt in ("csv", "tsv"):
        assert run_cli(*args, "--format", fmt).exit_code == 1


def test_grep_names_an_unlistable_sessions_directory(demo_store, monkeypatch):
    unlistable(monkeypatch, demo_store / "sessions")
    r = run_cli("--store", str(demo_store), "grep", "-i", "tabs", "--json")
    assert r.exit_code == 1
    doc = orjson.loads(r.stdout_bytes)
    assert doc["sessions_searched"] == 0 and doc["hits"] == []
    assert len(doc["skipped"]) == 1
    skip = doc["skipped"][0]
    assert skip["session_id"] is None
    assert "sessions" in skip["reason"] and "cannot list" in skip["reason"]
    assert "Permission denied" in skip["reason"]
    assert "cannot list" in r.stderr and r.stderr.startswith("memctl: warning: ")
    # the text output warns on stderr too
    t = run_cli("--store", str(demo_store), "grep", "tabs")
    assert t.exit_code == 1 and t.stdout == "" and "cannot list" in t.stderr


def test_usage_refuses_an_unlistable_sessions_directory(demo_store, monkeypatch):
    """As ``sessions`` does: exit 5 naming it, not "0 session(s) counted"."""
    unlistable(monkeypatch, demo_store / "sessions")
    for args in ((), ("--json",), ("--format", "csv")):
        r = run_cli("--store", str(demo_store), "usage", *args)
        assert r.exit_code == 5, (args, r.stdout)
        assert "cannot list" in (r.stderr + r.stdout) and "Permission denied" in (r.stderr + r.stdout)
        assert "counted" not in r.stdout
    s = run_cli("--store", str(demo_store), "sessions")
    assert s.exit_code == 5 and "cannot list" in s.stderr


def test_session_ids_reports_an_unlistable_directory(tmp_path, monkeypatch):
    """The layout's one listing of sessions/: missing is empty, unlistable raises."""
    from lecode_memctl.core.errors import StoreCorrupt
    from lecode_memctl.core.layout import session_ids

    d = tmp_path / "sessions"
    assert session_ids(d) == []
    d.mkdir()
    (d / "a.jsonl").write_text("")
    assert session_ids(d) == ["a"]
    unlistable(monkeypatch, d)
    with pytest.raises(StoreCorrupt, match="cannot list: Permission denied"):
        session_ids(d)
    assert session_ids(d, unlistable_ok=True) == []


def unsearchable(monkeypatch, d: Path) -> None:
    """``d`` as with mode 000 for a user who is not root: it cannot be listed,
    and nothing inside it can be looked up (``lstat`` of an entry: EACCES)."""
    unlistable(monkeypatch, d)
    inside = os.path.realpath(d) + os.sep
    real_lstat = os.lstat

    def lstat(p, *a, **k):   # type: ignore[no-untyped-def]
        if isinstance(p, (str, os.PathLike)) and \
                os.path.realpath(os.path.dirname(os.fspath(p))) + os.sep == inside:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
        return real_lstat(p, *a, **k)

    monkeypatch.setattr(os, "lstat", lstat)


@pytest.mark.parametrize("argv", [["grep", "tabs"], ["usage"]], ids=" ".join)
def test_a_named_session_behind_an_unsearchable_directory_is_not_missing(
        demo_store, monkeypatch, argv):
    """--session ID when sessions/ cannot be searched: exit 5 naming the
    reason, not "no session ID" (exit 3): the session may well be there."""
    unsearchable(monkeypatch, demo_store / "sessions")
    r = run_cli("--store", str(demo_store), *argv, "--session", "demo-alpha")
    assert r.exit_code == 5, (r.exit_code, r.stderr)
    assert "Permission denied" in r.stderr and "no session" not in r.stderr


def test_forget_preview_refuses_an_unlistable_sessions_directory(demo_store, monkeypatch):
    """``forget --dry-run`` counts the generated messages the new generation
    invalidates and the summaries it makes inert by reading every session:
    with ``sessions/`` unlistable it said 0 and 0, exit 0, the preview a
    forget is confirmed on.  It stops with exit 5 as ``sessions`` does; the
    store is unchanged."""
    from .conftest import tree_hash

    fid = "80fa60fdfe856452"     # the demo's fact whose forget invalidates generated output
    base = ("--store", str(demo_store), "--no-state", "forget", fid, "--dry-run")
    listable = run_cli(*base, "--json")
    assert listable.exit_code == 0, listable.stderr
    assert orjson.loads(listable.stdout_bytes)["generated_messages_invalidated"] > 0
    before = tree_hash(demo_store)
    with monkeypatch.context() as mp:
        unlistable(mp, demo_store / "sessions")
        for fmt in ((), ("--json",)):
            r = run_cli(*base, *fmt)
            assert r.exit_code == 5, r.stdout
            assert "cannot list" in r.stderr and "Permission denied" in r.stderr, r.stderr
    assert tree_hash(demo_store) == before
