"""``--store DIR`` without ``--slug`` when ``DIR/sessions/`` exists but cannot
be listed: the slug its transcripts must name comes from their headers, and
none of them can be read, so the slug is unknown.  Every command that needs
it, to check a transcript's header, is an unreadable store (exit 5, "cannot
list", naming ``--slug``), not a store whose slug is the directory name:
before 2026-12-07 ``read`` refused the session as another project's (exit
4), ``facts`` listed every fact ``hidden (refused_project)`` and ``where``
said "no transcript header names a project".  ``where`` still answers, with
the slug unknown, and what needs no slug (the Markdown files, ``secrets``,
``grep`` naming the directory it skipped, ``validate`` reporting it) works as
before.

Most tests make listing ``sessions/`` fail in this process (the helper of
``test_unlistable_dirs.py``: the suite may run as root, which lists any
directory whatever its mode), as a directory of mode 100 does: a transcript
is still opened by its name.  One test runs the real thing, a directory of
mode 100 read by a process without the capabilities that bypass it, and is
skipped where they cannot be dropped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli, tree_hash
from .test_unlistable_dirs import unlistable


@pytest.fixture
def copy(demo_template, tmp_path) -> tuple[Path, str]:
    """An evidence copy of the demo store under another name, and the slug
    its transcript headers name."""
    dst = tmp_path / "sx"
    shutil.copytree(demo_template.store.path, dst, symlinks=True)
    return dst, demo_template.store.slug


def _one_line_cannot_list(r, store: Path, args: tuple[str, ...] = ()) -> None:
    assert r.exit_code == 5, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert f"{store / 'sessions'}: cannot list: Permission denied" in line, line
    assert "--slug SLUG" in line, line
    assert "another project" not in line and "refused" not in line, line
    if "--json" in args:    # the error document, with the same message
        doc = orjson.loads(r.stdout_bytes)
        assert doc["error"]["code"] == "store_corrupt" and doc["error"]["message"] in line
    else:
        assert r.stdout == "", r.stdout


@pytest.mark.parametrize("args", [
    ("read", "demo-alpha:1-5"),
    ("read", "demo-alpha:1-5", "--json"),
    ("facts",),
    ("facts", "--json"),
    ("facts", "--session", "demo-alpha"),
    ("recall", "80fa60fdfe856452"),
    ("forget", "80fa60fdfe856452", "--dry-run"),
    ("usage", "--session", "demo-alpha"),
], ids=lambda a: " ".join(a))
def test_a_command_that_needs_the_slug_is_an_unreadable_store(copy, args):
    store, _slug = copy
    before = tree_hash(store)
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        r = run_cli("--store", str(store), "--no-state", *args)
    _one_line_cannot_list(r, store, args)
    assert tree_hash(store) == before


def test_where_says_the_slug_is_unknown(copy):
    store, _slug = copy
    before = tree_hash(store)
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        r = run_cli("--store", str(store), "--no-state", "where")
        j = run_cli("--store", str(store), "--no-state", "where", "--json")
    assert r.exit_code == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("slug:"))
    assert line.split()[1] == "unknown", line
    assert "no transcript header names a project" not in r.stdout
    assert f"{store / 'sessions'}: cannot list: Permission denied" in line, line
    assert "--slug SLUG" in line, line
    assert j.exit_code == 0, j.stderr
    doc = orjson.loads(j.stdout_bytes)
    assert doc["slug"] is None
    assert doc["slug_source"] == "unreadable"
    assert "cannot list" in doc["slug_detail"] and "--slug SLUG" in doc["slug_detail"]
    assert "no transcript header names a project" not in doc["slug_detail"]
    assert doc["store"] == str(store) and doc["store_exists"] is True
    assert tree_hash(store) == before


def test_the_new_slug_source_is_documented():
    from .test_probe_contract import _documented_meaning

    assert "`unreadable`" in _documented_meaning("where", "slug_source")


def test_what_needs_no_slug_works_as_before(copy):
    """The Markdown files, secrets and grep (which name the directory they
    could not list) and validate (which reports it) need no slug."""
    store, _slug = copy
    before = tree_hash(store)
    base = ("--store", str(store), "--no-state")
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        show = run_cli(*base, "show")
        notes = run_cli(*base, "notes")
        secrets = run_cli(*base, "secrets", "--json", "--jobs", "1")
        grep = run_cli(*base, "grep", "tabs", "--json")
        sessions = run_cli(*base, "sessions")
        validate = run_cli(*base, "validate", "--json")
    assert show.exit_code == 0 and "demo-app memory" in show.stdout, show.stderr
    assert notes.exit_code == 0 and "release" in notes.stdout, notes.stderr
    assert secrets.exit_code == 1, secrets.stdout
    scan = orjson.loads(secrets.stdout_bytes)["projects"][0]
    assert [s["file"] for s in scan["skipped"]] == ["sessions"]
    assert grep.exit_code == 1
    assert [s["session_id"] for s in orjson.loads(grep.stdout_bytes)["skipped"]] == [None]
    # (as before: the listing itself is the unreadable store, without --slug)
    assert sessions.exit_code == 5 and sessions.stderr.strip().endswith(
        "sessions: cannot list: Permission denied"), sessions.stderr
    # validate reports the directory it cannot list, and the facts whose
    # evidence it therefore cannot find; no session is "another project's"
    assert validate.exit_code == 1, validate.stderr
    found = orjson.loads(validate.stdout_bytes)["findings"]
    codes = {f["code"] for f in found}
    assert "layout.unreadable" in codes and "session.refused" not in codes, codes
    assert "refused_project" not in validate.stdout
    assert tree_hash(store) == before


def _fact_counts(facts_json: bytes) -> dict[str, int]:
    doc = orjson.loads(facts_json)
    counts = dict.fromkeys(("valid", "missing", "stale", "hidden", "unverified"), 0)
    for row in doc["facts"]:
        counts[row["status"]] += 1
    return counts


def test_validate_checks_the_cited_transcripts_by_name(copy):
    """With ``--slug``, ``validate`` of a store whose ``sessions/`` cannot be
    listed opens each transcript the facts cite by its name, as ``facts``
    opens it, and the two agree on every fact (the demo's planted stale one
    included); before 2026-12-07 it said every reference was missing, "no
    session X", for sessions that were there.  A cited session that is
    really absent is still missing."""
    store, slug = copy
    before = tree_hash(store)
    base = ("--store", str(store), "--slug", slug, "--no-state")
    listed = run_cli(*base, "facts", "--json")
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        facts = run_cli(*base, "facts", "--json")
        v = run_cli(*base, "validate", "--json")
    assert facts.exit_code == 0, facts.stderr
    assert _fact_counts(facts.stdout_bytes) == _fact_counts(listed.stdout_bytes)
    assert v.exit_code == 1, v.stderr
    doc = orjson.loads(v.stdout_bytes)
    summary = doc["projects"][0]
    assert summary["facts"] == _fact_counts(facts.stdout_bytes), summary
    assert summary["facts"]["stale"] == 1 and summary["facts"]["missing"] == 0, summary
    # (the cited ones are checked, found by name; how many transcripts the
    # store holds is not known: null, not the 2 cited, since 2026-12-07)
    assert summary["sessions"] is None
    codes = [f["code"] for f in doc["findings"]]
    assert "layout.unreadable" in codes and "fact.stale" in codes and "fact.missing" not in codes
    assert "no session" not in v.stdout
    assert tree_hash(store) == before
    # a cited transcript that is not there is missing, as before
    (store / "sessions" / "demo-beta.jsonl").unlink()
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        v = run_cli(*base, "validate", "--json")
    found = [f for f in orjson.loads(v.stdout_bytes)["findings"] if f["code"] == "fact.missing"]
    assert [(f["session_id"], f["reason"]) for f in found] == [("demo-beta", "session_missing")]
    assert "no session demo-beta" in found[0]["message"]


def test_validate_without_the_slug_says_the_evidence_cannot_be_read(copy):
    """Without ``--slug`` the slug is unknown, so no transcript can be checked:
    each reference is unreadable (``session_unreadable``, naming ``--slug``),
    not "no session X" as before 2026-12-07."""
    store, _slug = copy
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        v = run_cli("--store", str(store), "--no-state", "validate", "--json")
    assert v.exit_code == 1, v.stderr
    doc = orjson.loads(v.stdout_bytes)
    found = [f for f in doc["findings"] if f["code"].startswith("fact.")]
    assert len(found) == 4 and doc["projects"][0]["facts"]["missing"] == 3, found
    for f in found:
        assert (f["code"], f["reason"]) == ("fact.missing", "session_unreadable"), f
        assert "cannot list: Permission denied" in f["message"], f
        assert "--slug SLUG" in f["message"] and "no session" not in f["message"], f


def test_the_store_object(copy, monkeypatch):
    """``store_given`` says the slug is unknown; every header check refuses
    it; the Store crosses to a worker process intact."""
    import pickle

    from lecode_memctl.core.errors import StoreCorrupt
    from lecode_memctl.core.layout import store_given
    from lecode_memctl.core.sessions import SessionStore, header_problem

    store, slug = copy
    unlistable(monkeypatch, store / "sessions")
    st = store_given(store)
    assert st.slug_source == "unreadable" and st.slug == "sx"    # a label only
    assert "cannot list" in st.slug_detail and "--slug SLUG" in st.slug_detail
    with pytest.raises(StoreCorrupt, match="cannot list"):
        st.known_slug()
    with pytest.raises(StoreCorrupt, match="cannot list"):
        SessionStore(st).header("demo-alpha")
    with pytest.raises(StoreCorrupt, match="cannot list"):
        header_problem({"seq": 0, "type": "session", "format": 1, "session_id": "s",
                        "project": slug}, "s", st.slug)
    back = pickle.loads(pickle.dumps(st))
    assert back == st and back.slug.why == st.slug.why       # type: ignore[attr-defined]
    with pytest.raises(StoreCorrupt):
        back.known_slug()
    # --slug: nothing is read for the slug
    given = store_given(store, slug)
    assert (given.slug_source, given.known_slug()) == ("option", slug)


def test_slug_option_names_it_without_reading_the_headers(copy):
    store, slug = copy
    before = tree_hash(store)
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        _with_the_slug(store, slug)
    assert tree_hash(store) == before


def _with_the_slug(store: Path, slug: str) -> None:
    base = ("--store", str(store), "--slug", slug, "--no-state")
    r = run_cli(*base, "read", "demo-alpha:1-5")
    assert r.exit_code == 0, r.stderr
    facts = run_cli(*base, "facts", "--json")
    assert facts.exit_code == 0, facts.stderr
    assert "refused_project" not in facts.stdout
    by_session = run_cli(*base, "facts", "--session", "demo-alpha")
    assert by_session.exit_code == 0, by_session.stderr
    assert "refused_project" not in by_session.stdout
    doc = orjson.loads(run_cli(*base, "where", "--json").stdout_bytes)
    assert (doc["slug"], doc["slug_source"]) == (slug, "option")
    # validate reads the store as today: the directory it cannot list is a
    # finding (exit 1), not a refusal of the whole store
    v = run_cli(*base, "validate", "--json")
    assert v.exit_code == 1, v.stderr
    codes = {f["code"] for f in orjson.loads(v.stdout_bytes)["findings"]}
    assert "layout.unreadable" in codes and "session.refused" not in codes
    # sessions lists: it needs sessions/ whatever the slug
    assert run_cli(*base, "sessions").exit_code == 5


def test_a_store_without_sessions_keeps_the_directory_name(copy):
    store, _slug = copy
    shutil.rmtree(store / "sessions")
    doc = orjson.loads(run_cli("--store", str(store), "--no-state", "where", "--json").stdout_bytes)
    assert (doc["slug"], doc["slug_source"]) == ("sx", "directory")
    assert "no transcript header names a project" in doc["slug_detail"]
    # a file in its place is not a directory of transcripts either: nothing
    # could be opened by name, the directory name is still the guess
    (store / "sessions").write_bytes(b"a file")
    doc = orjson.loads(run_cli("--store", str(store), "--no-state", "where", "--json").stdout_bytes)
    assert (doc["slug"], doc["slug_source"]) == ("sx", "directory")


def test_a_listable_copy_still_takes_the_slug_from_its_headers(copy):
    store, slug = copy
    doc = orjson.loads(run_cli("--store", str(store), "--no-state", "where", "--json").stdout_bytes)
    assert (doc["slug"], doc["slug_source"]) == (slug, "headers")
    assert run_cli("--store", str(store), "--no-state", "read", "demo-alpha:1-5").exit_code == 0


# ---------------------------------------------------------------- the real thing

_DROP = "--drop=cap_dac_override,cap_dac_read_search"


def _capsh_works(probe: Path) -> bool:
    """Whether a shell under ``capsh`` without the DAC capabilities is refused
    the listing of ``probe`` (mode 100), as any user but root is."""
    capsh = shutil.which("capsh")
    if capsh is None:
        return False
    try:
        r = subprocess.run([capsh, _DROP, "--", "-c", f"ls {probe}"], capture_output=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode != 0 and b"Permission denied" in r.stderr


def require_dropped_caps(tmp_path: Path) -> None:
    """Skip unless a shell under ``capsh`` without the DAC capabilities is
    refused a directory of mode 100, as any user but root is."""
    probe = tmp_path / "probe"
    probe.mkdir()
    probe.chmod(0o100)
    try:
        if not _capsh_works(probe):
            pytest.skip("cannot drop cap_dac_override/cap_dac_read_search with capsh")
    finally:
        probe.chmod(0o700)


def memctl_without_dac(store: Path, *args: str) -> subprocess.CompletedProcess:
    """``memctl --store STORE --no-state ARGS`` in a process without the DAC
    capabilities (:func:`require_dropped_caps` first)."""
    cmd = " ".join(["exec", sys.executable, "-m", "lecode_memctl", "--store", str(store),
                    "--no-state", *args])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run(["capsh", _DROP, "--", "-c", cmd], capture_output=True,
                          env=env, timeout=60)


def test_a_sessions_directory_of_mode_100(copy, tmp_path):
    store, slug = copy
    require_dropped_caps(tmp_path)
    sessions = store / "sessions"
    sessions.chmod(0o100)
    try:
        before = tree_hash(store)

        def memctl(*args: str) -> subprocess.CompletedProcess:
            return memctl_without_dac(store, *args)

        r = memctl("read", "demo-alpha:1-5")
        assert r.returncode == 5, r.stderr
        assert b"cannot list: Permission denied" in r.stderr and b"--slug SLUG" in r.stderr
        r = memctl("facts")
        assert r.returncode == 5 and r.stdout == b"", r.stdout
        r = memctl("show")
        assert r.returncode == 0 and b"demo-app memory" in r.stdout, r.stderr
        w = memctl("where", "--json")
        assert w.returncode == 0, w.stderr
        doc = orjson.loads(w.stdout)
        assert (doc["slug"], doc["slug_source"]) == (None, "unreadable")
        r = memctl("--slug", slug, "read", "demo-alpha:1-5")
        assert r.returncode == 0, r.stderr
        # validate finds the cited transcripts by name, as facts does
        r = memctl("--slug", slug, "validate", "--json")
        assert r.returncode == 1, r.stderr
        summary = orjson.loads(r.stdout)["projects"][0]
        assert summary["facts"]["valid"] == 2 and summary["facts"]["stale"] == 1, summary
        # usage opens a transcript through its directory's descriptor: one
        # of a directory that may be searched, not listed (O_PATH), so the
        # session is counted, where it was 'refused' with exit 0
        r = memctl("--slug", slug, "usage", "--session", "demo-alpha", "--json")
        assert r.returncode == 0, r.stderr
        doc = orjson.loads(r.stdout)
        assert doc["refused_sessions"] == [] and doc["sessions_counted"] == 1, doc
        assert tree_hash(store) == before
    finally:
        sessions.chmod(0o700)


def test_where_says_a_directory_it_cannot_list_is_not_known(copy):
    """``where``'s layout line of a directory that exists but cannot be
    listed said ``sessions/  0 files, 0 bytes``; it now says why it is not
    known, and ``--json``'s item has ``size`` and ``count`` null and the
    ``error``.  A listable one keeps its counts and a null ``error``."""
    store, _slug = copy
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        r = run_cli("--store", str(store), "--no-state", "where")
        j = run_cli("--store", str(store), "--no-state", "where", "--json")
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("sessions/"))
    assert line.split(None, 1)[1] == "cannot list: Permission denied", line
    items = {i["name"]: i for i in orjson.loads(j.stdout_bytes)["items"]}
    assert items["sessions/"] == {"name": "sessions/", "kind": "dir", "exists": True,
                                  "size": None, "count": None,
                                  "error": "cannot list: Permission denied"}
    assert items["notes/"]["error"] is None and items["notes/"]["count"] == 1


def test_validate_of_an_unknown_slug_keeps_the_marks_slug(copy):
    """``validate`` records memctl's mark; with the slug unknown it recorded
    the directory's name as the store's slug, so the mark no longer matched
    the store once its ``sessions/`` could be listed again, and a database
    put back from before a forget was not reported (``db.rolled_back``)."""
    store, slug = copy
    backup = store.parent / "before-forget.sqlite3"
    shutil.copy2(store / "facts.sqlite3", backup)
    r = run_cli("--store", str(store), "forget", "80fa60fdfe856452", "--yes")
    assert r.exit_code == 0, r.stderr
    state = Path(os.environ["HOME"]) / ".local" / "state" / "lecode-memctl" / "stores"
    with pytest.MonkeyPatch.context() as mp:
        unlistable(mp, store / "sessions")
        run_cli("--store", str(store), "validate", "--json")
    (mark,) = [orjson.loads(p.read_bytes()) for p in state.glob("*.json")]
    assert mark["slug"] == slug and mark["generation"] == 2, mark
    for extra in ("-wal", "-shm"):
        (store / f"facts.sqlite3{extra}").unlink(missing_ok=True)
    shutil.copy2(backup, store / "facts.sqlite3")
    r = run_cli("--store", str(store), "validate", "--json")
    assert any(f["code"] == "db.rolled_back" for f in orjson.loads(r.stdout)["findings"]), r.stdout
