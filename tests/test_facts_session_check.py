"""memctl facts --session ID: one decision, before any output, in every format
(an unknown session, a refused session file, a deleted session that facts
still cite), a --json document that stays valid whatever fails, and the
next-page hint that repeats the options shaping the page."""

from __future__ import annotations

import os
import shlex
import shutil

import orjson
import pytest

from lecode_memctl.core.layout import store_for_project

from .conftest import run_cli
from .test_facts_cli import cli, remember, write_session

FORMATS = [("--json",), ("--format", "json"), ("--format", "jsonl"), ("--format", "csv"),
           ("--format", "tsv"), ("--format", "table")]


@pytest.fixture
def store(config_dir, project):
    return store_for_project(config_dir, project)


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("memctl: error:")]


def _check_error(r, fmt, exit_code: int, code: str) -> None:
    """Exit ``exit_code``, one error line on stderr, and on stdout the error
    document (json), the error record (jsonl) or nothing."""
    assert r.exit_code == exit_code, (fmt, r.exit_code, r.stdout, r.stderr)
    assert len(_error_lines(r.stderr)) == 1, (fmt, r.stderr)
    if fmt[-1] in ("--json", "json", "jsonl"):
        doc = orjson.loads(r.stdout_bytes)   # one valid JSON document / record
        assert doc["type"] == "error" and doc["error"]["code"] == code, (fmt, doc)
        assert doc["error"]["exit_code"] == exit_code
    else:
        assert r.stdout == "", (fmt, r.stdout)


def test_unknown_session_is_not_found_in_every_format(config_dir, project, store):
    write_session(store, "s1")
    remember(store, 1, sid="s1")
    for fmt in FORMATS:
        r = cli(project, "facts", "--session", "nosuch", *fmt)
        _check_error(r, fmt, 3, "not_found")
        assert "no session nosuch" in r.stderr
    # so with the other options that pick the code path: a filter, a page, --all
    for extra in (("--status", "valid"), ("--limit", "1"), ("--all",), ("--offset", "1")):
        for fmt in (("--json",), ("--format", "table"), ("--format", "csv")):
            r = cli(project, "facts", "--session", "nosuch", *extra, *fmt)
            _check_error(r, fmt, 3, "not_found")


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink"])
def test_refused_session_file_exits_as_read_does(config_dir, project, store, kind):
    ss = write_session(store, "s1")
    remember(store, 1, sid="s1")
    path = ss.path("odd")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        os.symlink(ss.path("s1"), path)
    read = cli(project, "read", "odd", "1", "1", "--json")
    assert read.exit_code in (4, 5), read.stderr
    code = orjson.loads(read.stdout_bytes)["error"]["code"]
    for fmt in FORMATS:
        r = cli(project, "facts", "--session", "odd", *fmt)
        _check_error(r, fmt, read.exit_code, code)


def test_deleted_session_cited_by_facts_is_listed_missing(config_dir, project, store):
    """--session filters the facts database: the facts whose evidence is in a
    session whose transcript is gone are listed (missing), with no learning
    status, in every format, exit 0."""
    write_session(store, "s1")
    ss = write_session(store, "gone")
    fact = remember(store, 1, sid="gone")
    remember(store, 3, "Another fact.", sid="s1")
    os.unlink(ss.path("gone"))
    for fmt in FORMATS:
        r = cli(project, "facts", "--session", "gone", *fmt)
        assert r.exit_code == 0, (fmt, r.stdout, r.stderr)
        assert not _error_lines(r.stderr), (fmt, r.stderr)
        assert fact.fact_id in r.stdout and "missing" in r.stdout, (fmt, r.stdout)
    doc = orjson.loads(cli(project, "facts", "--session", "gone", "--json").stdout_bytes)
    assert [f["fact_id"] for f in doc["facts"]] == [fact.fact_id]
    assert doc["facts"][0]["reason"] == "session_missing" and doc["learning"] is None
    assert doc["total"] == 1
    r = cli(project, "facts", "--session", "gone", "--status", "missing", "--json")
    assert r.exit_code == 0 and orjson.loads(r.stdout_bytes)["learning"] is None
    r = cli(project, "facts", "--session", "gone")
    assert "learning: " in r.stdout and "no transcript" in r.stdout


def test_error_computing_learning_is_one_valid_json_document(config_dir, project, store,
                                                             monkeypatch):
    """Whatever fails for the learning status, --json is one valid document
    (the error document before any row, or the document ended with its error
    member) and the exit status is the error's."""
    from lecode_memctl.core import factview
    from lecode_memctl.core.errors import StoreCorrupt

    write_session(store, "s1")
    remember(store, 1, sid="s1")

    def broken(*_a, **_k):
        raise StoreCorrupt("learning status exploded")

    monkeypatch.setattr(factview, "learning_status", broken)
    for args in (("--session", "s1"), (), ("--status", "valid"), ("--limit", "1")):
        r = cli(project, "facts", *args, "--json")
        assert r.exit_code == 5, (args, r.stdout, r.stderr)
        doc = orjson.loads(r.stdout_bytes)
        err = doc["error"]
        assert err["code"] == "store_corrupt" and err["exit_code"] == 5, doc
        assert "learning status exploded" in err["message"]
        assert len(_error_lines(r.stderr)) == 1, r.stderr


def _hint(stderr: str) -> list[str]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("memctl: more facts: ")]
    assert len(lines) == 1, stderr
    return shlex.split(lines[0].removeprefix("memctl: more facts: memctl "))


def _ids(stdout: str, ids) -> list[str]:
    return [ln[:16] for ln in stdout.splitlines() if ln[:16] in ids]


def test_next_page_hint_repeats_the_page_options(config_dir, project, store):
    write_session(store, "s1")
    ids = sorted(remember(store, seq, f"Fact number {seq}.", sid="s1").fact_id
                 for seq in (1, 2, 3))
    r = cli(project, "facts", "--limit", "1")
    assert _ids(r.stdout, ids) == ids[:1]
    hint = _hint(r.stderr)
    # the global options that chose the store too (-C here, and the config
    # directory LECODE_CONFIG_DIR chose): the hint run from another
    # directory lists the same store
    assert hint == ["--config-dir", str(config_dir), "--project", str(project), "facts",
                    "--limit", "1", "--offset", "1"], hint
    nxt = run_cli(*hint)
    assert nxt.exit_code == 0 and _ids(nxt.stdout, ids) == ids[1:2]
    assert _hint(nxt.stderr)[-2:] == ["--offset", "2"]
    # with filters: every option that shapes the page is repeated
    r = cli(project, "facts", "--session", "s1", "--status", "valid", "--limit", "2")
    hint = _hint(r.stderr)
    assert hint == ["--config-dir", str(config_dir), "--project", str(project), "facts",
                    "--session", "s1", "--status", "valid", "--limit", "2", "--offset", "2"], hint
    nxt = run_cli(*hint)
    assert nxt.exit_code == 0 and _ids(nxt.stdout, ids) == ids[2:]


def test_next_page_hint_names_the_store_it_listed(config_dir, project, store, tmp_path,
                                                  monkeypatch):
    """``--store`` (with ``--slug``), ``--config-dir`` and ``-C`` are repeated,
    their paths absolute, quoted for the shell: the hint lists the same store wherever it is run
    (it said ``memctl facts --limit 1 --offset 1``, which from another
    directory found no store, exit 3, or listed another one)."""
    write_session(store, "s1")
    ids = sorted(remember(store, seq, f"Fact number {seq}.", sid="s1").fact_id
                 for seq in (1, 2))
    odd = tmp_path / "an evidence copy"
    shutil.copytree(store.path, odd)
    r = run_cli("--store", str(odd), "--slug", store.slug, "facts", "--limit", "1")
    hint = _hint(r.stderr)
    assert hint == ["--store", str(odd), "--slug", store.slug, "facts", "--limit", "1",
                    "--offset", "1"], hint
    nxt = run_cli(*hint)
    assert nxt.exit_code == 0 and _ids(nxt.stdout, ids) == ids[1:], nxt.stderr
    r = run_cli("--config-dir", str(config_dir), "-C", str(project), "facts", "--limit", "1")
    assert _hint(r.stderr)[:4] == ["--config-dir", str(config_dir), "--project", str(project)]
    # a relative path is made absolute: the hint works from any directory
    monkeypatch.chdir(odd.parent)
    r = run_cli("--store", odd.name, "--slug", store.slug, "facts", "--limit", "1")
    assert _hint(r.stderr)[:2] == ["--store", str(odd)], r.stderr


def test_next_page_hint_names_the_directory_that_chose_the_project(config_dir, project, store,
                                                                   tmp_path, monkeypatch):
    """With neither -C nor --store, the working directory chose the project:
    the hint names it with --project (absolute), so that it lists the same
    store from another directory (it said ``memctl facts --limit 1 --offset
    1``, which from /tmp found no store, exit 3)."""
    write_session(store, "s1")
    ids = sorted(remember(store, seq, f"Fact number {seq}.", sid="s1").fact_id
                 for seq in (1, 2))
    monkeypatch.chdir(project)
    r = run_cli("facts", "--limit", "1")
    hint = _hint(r.stderr)
    assert hint == ["--config-dir", str(config_dir), "--project", str(project), "facts",
                    "--limit", "1", "--offset", "1"], hint
    monkeypatch.chdir(tmp_path)
    nxt = run_cli(*hint)
    assert nxt.exit_code == 0 and _ids(nxt.stdout, ids) == ids[1:], nxt.stderr


@pytest.mark.parametrize("fmt", ["plain", "github", "grid"])
def test_every_table_format_says_it_is_a_page(config_dir, project, store, fmt):
    """docs/OUTPUT.md: any tabulate format name also works as the table: a
    page of it ends as the table's does (the range, the learning status)
    and its next page's command is on stderr; ``--format plain`` and the
    others printed the page's rows alone, so a listing cut to 20 facts
    said nothing of the rest."""
    write_session(store, "s1")
    for seq in (1, 2, 3):
        remember(store, seq, f"Fact number {seq}.", sid="s1")
    table = cli(project, "facts", "--limit", "1")
    other = cli(project, "facts", "--limit", "1", "--format", fmt)
    assert other.exit_code == table.exit_code == 0, other.stderr
    assert _hint(other.stderr)[-2:] == ["--offset", "1"]
    tail = table.stdout[table.stdout.index("facts 1-1 of 3"):]
    assert "learning: " in tail
    # (a markup format's table is stdout alone: the lines after it are on
    # stderr, before the hint, since 2026-12-07; docs/OUTPUT.md, "Formats")
    markup = fmt == "github"
    if markup:
        said = other.stderr.splitlines()
        assert sorted(said) == sorted(tail.splitlines() + table.stderr.splitlines()), said
        assert "facts 1-1" not in other.stdout and "learning" not in other.stdout
    else:
        assert other.stderr == table.stderr and other.stdout.endswith(tail), other.stdout
    whole = cli(project, "facts", "--all", "--format", fmt)
    said = whole.stderr if markup else whole.stdout
    assert whole.stdout.count("Fact number") == 3 and "facts 1-3 of 3" in said
