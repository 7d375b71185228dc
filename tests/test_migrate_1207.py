"""migrate-legacy review fixes (2026-12-07): discovery outside Git, the
first store's unreadable files, the dry run's exit 7, sessions/, skipped
user Markdown as conflicts, ``blocked``, destination states, interrupts,
newlines in paths, the hint's wording."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.identity import slug
from lecode_memctl.core.migrate import classify_stores, discover_legacy_stores, plan_migration

from .conftest import make_repo, run_cli


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


# ---------------------------------------------------------------- 1. outside Git

def test_outside_git_other_directories_stores_are_not_migrated(tmp_path, config_dir):
    """Outside Git every directory is its own project (the contract: the
    project root is the working directory itself), so the stores of the
    directories under it are their projects' stores, not legacy ones."""
    home = Path(os.path.realpath(tmp_path)) / "h"
    proj_b = home / "projB"
    proj_b.mkdir(parents=True)
    b = legacy_path(config_dir, proj_b)
    put(b / "MEMORY.md", "B\n")
    put(b / "notes" / "b.md", "secret\n")
    d = discover_legacy_stores(config_dir, home)
    assert d.project.kind == "not a git checkout"
    assert d.legacy == [] and d.dirs_scanned == 0
    r = run_cli("--project", str(home), "migrate-legacy", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["legacy_stores"] == [] and doc["items"] == []
    # --from still applies there
    p = plan_migration(config_dir, home, extra=[b])
    assert [(i.name, i.action) for i in p.items] == [("MEMORY.md", "copy"), ("notes/b.md", "copy")]
    # and projB's store is nobody's legacy store: home, a known root, does not claim it
    classes, _ = classify_stores(config_dir, [home])
    assert {c.path: c.kind for c in classes}[b] == "unclaimed"
    classes, _ = classify_stores(config_dir, [home, proj_b])
    assert {c.path: c.kind for c in classes}[b] == "project"



# ---------------------------------------------------------------- permissions

REPO_ROOT = Path(__file__).resolve().parents[1]
_NP: list[str] | None = None


def _np_prefix(tmp: Path) -> list[str] | None:
    """The argv prefix that runs a command without the permission-override
    capabilities (root: setpriv dropping CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH; another user: nothing), or None when a chmod-000
    file stays readable that way."""
    global _NP
    if _NP is not None:
        return _NP or None
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            _NP = []
            return None
        prefix = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                  "--bounding-set=-dac_override,-dac_read_search"]
    probe = tmp / "np-probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        r = subprocess.run([*prefix, sys.executable, "-c", f"open({str(probe)!r}).read()"],
                           capture_output=True)
    finally:
        probe.chmod(0o600)
        probe.unlink()
    _NP = prefix if r.returncode != 0 else []
    return prefix if r.returncode != 0 else None


def np_run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """``memctl ARGS`` in a subprocess that chmod 000 stops (skip where none does)."""
    prefix = _np_prefix(tmp)
    if prefix is None:
        pytest.skip("this process reads chmod-000 files and cannot drop the capability")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([*prefix, sys.executable, "-m", "lecode_memctl", *args],
                           capture_output=True, env=env, timeout=60)


@pytest.fixture
def two(tmp_path, config_dir):
    """A repository whose working directory a/b and its parent a/ both have a
    legacy store: #1 is a/b's (cwd), #2 a/'s (ancestor)."""
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    (repo / "a" / "b").mkdir(parents=True)
    first = legacy_path(config_dir, repo / "a" / "b")
    second = legacy_path(config_dir, repo / "a")
    store = config_dir / "memory" / slug(str(repo))
    return repo / "a" / "b", first, second, store


def np_json(tmp: Path, cwd: Path, *args: str) -> tuple[int, dict, str]:
    r = np_run(tmp, "--project", str(cwd), "migrate-legacy", "--json", *args)
    return r.returncode, orjson.loads(r.stdout), r.stderr.decode()


# ---------------------------------------------------------------- 2. the first store unreadable

def test_an_unreadable_file_of_the_first_store_still_wins_its_destination(two, tmp_path):
    cwd, first, root_store, store = two
    put(first / "MEMORY.md", "first\n")
    put(root_store / "MEMORY.md", "second\n")
    put(root_store / "scratchpad.md", "pad\n")
    (first / "MEMORY.md").chmod(0)
    try:
        code, doc, err = np_json(tmp_path, cwd, "--dry-run")
        assert code == 4, err
        items = {(i["store"], i["name"]): i for i in doc["items"]}
        assert items[(1, "MEMORY.md")]["reason"] == "unreadable"
        later = items[(2, "MEMORY.md")]
        assert later["action"] == "skip" and later["conflict"]
        assert later["provided_by"] == str(first / "MEMORY.md")
        assert "could not be read" in later["detail"]
        assert items[(2, "scratchpad.md")]["action"] == "copy"
        code, doc, err = np_json(tmp_path, cwd, "--yes")
        assert code == 4, err
        assert not (store / "MEMORY.md").exists()
    finally:
        (first / "MEMORY.md").chmod(0o600)
    # once readable, the first store's file is the one copied
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert (store / "MEMORY.md").read_text() == "first\n"


@pytest.mark.parametrize("sub", ["notes", "daily"])
def test_an_unlistable_directory_of_the_first_store_still_wins(two, tmp_path, sub):
    cwd, first, second, store = two
    name = "n.md" if sub == "notes" else "2024-01-05.md"
    put(first / sub / name, "first\n")
    put(second / sub / name, "second\n")
    (first / sub).chmod(0)
    try:
        code, doc, err = np_json(tmp_path, cwd, "--dry-run")
        assert code == 4, err
        items = {(i["store"], i["name"]): i for i in doc["items"]}
        assert items[(1, f"{sub}/")]["reason"] == "unreadable"
        later = items[(2, f"{sub}/{name}")]
        assert later["action"] == "skip" and later["conflict"], later
        assert "could not be" in later["detail"]
    finally:
        (first / sub).chmod(0o700)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert (store / sub / name).read_text() == "first\n"


# ---------------------------------------------------------------- 3. the dry run's exit 7

def test_dry_run_exits_7_as_the_copy_would_when_the_store_is_not_writable(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "m\n")
    put(store / "scratchpad.md", "existing\n")
    store.chmod(0o500)
    try:
        r = np_run(tmp_path, "--project", str(cwd), "migrate-legacy", "--yes")
        assert r.returncode == 7, r.stderr
        copy_msg = f"{store}: not writable (permission denied); nothing was copied"
        assert r.stderr.decode() == f"memctl: error: {copy_msg}\n"
        r = np_run(tmp_path, "--project", str(cwd), "migrate-legacy", "--dry-run")
        assert r.returncode == 7, r.stderr
        assert "summary: 1 to copy" in r.stdout.decode()
        assert r.stderr.decode() == f"memctl: error: the copy would fail: {copy_msg}\n"
        code, doc, err = np_json(tmp_path, cwd, "--dry-run")
        assert code == 7 and doc["exit_code"] == 7
        assert doc["would_fail"] == copy_msg
        assert err == f"memctl: error: the copy would fail: {copy_msg}\n"
    finally:
        store.chmod(0o700)
    code, doc, _err = np_json(tmp_path, cwd, "--dry-run")
    assert code == 0 and doc["would_fail"] is None


# ---------------------------------------------------------------- 4. sessions/ is not entered

def test_sessions_is_one_not_markdown_item_and_not_read(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "m\n")
    put(first / "sessions" / "s1.jsonl", '{"seq":0}\n')
    put(first / "sessions" / "s2.jsonl", '{"seq":0}\n')
    p = plan_migration(Path(os.environ["LECODE_CONFIG_DIR"]), cwd)
    assert [(i.name, i.action, i.reason, i.conflict, i.destination) for i in p.items] == [
        ("MEMORY.md", "copy", None, False, store / "MEMORY.md"),
        ("sessions/", "skip", "not_markdown", False, None)]
    (first / "sessions").chmod(0)
    try:
        code, doc, err = np_json(tmp_path, cwd, "--dry-run")
        assert code == 0, err
        assert [(i["name"], i["reason"], i["conflict"]) for i in doc["items"]] == [
            ("MEMORY.md", None, False), ("sessions/", "not_markdown", False)]
    finally:
        (first / "sessions").chmod(0o700)


# ---------------------------------------------------------------- 5. skipped user Markdown is a conflict

def test_user_markdown_skipped_by_its_kind_or_name_is_a_conflict(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "scratchpad.md", "pad\n")
    put(tmp_path / "elsewhere.md", "linked\n")
    os.symlink(tmp_path / "elsewhere.md", first / "MEMORY.md")
    put(first / "notes" / ("n" * 101 + ".md"), "long name\n")
    put(first / "notes" / "ok.md", "ok\n")
    put(first / "notes" / "readme.txt", "not markdown\n")
    put(first / "daily" / "2024-1-5.md", "bad date\n")
    os.mkfifo(first / "daily" / "2024-01-06.md")
    os.symlink(tmp_path / "elsewhere.md", first / "notes" / "link.md")
    cfg = Path(os.environ["LECODE_CONFIG_DIR"])
    p = plan_migration(cfg, cwd)
    got = {i.name: (i.action, i.reason, i.conflict) for i in p.items}
    assert got == {
        "MEMORY.md": ("skip", "symlink", True),
        "daily/2024-01-06.md": ("skip", "unexpected", True),
        "daily/2024-1-5.md": ("skip", "unexpected", True),
        "notes/" + "n" * 101 + ".md": ("skip", "unexpected", True),
        "notes/link.md": ("skip", "symlink", True),
        "notes/ok.md": ("copy", None, False),
        "notes/readme.txt": ("skip", "unexpected", False),
        "scratchpad.md": ("copy", None, False),
    }
    assert p.exit_code == 0     # the default exit is unchanged
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--fail-on-conflict")
    assert r.exit_code == 4, r.stdout
    assert r.stderr.startswith("memctl: error: 5 legacy files not copied: #1 MEMORY.md: "
                               "symbolic link"), r.stderr
    assert "5 legacy Markdown files skipped" in r.stdout
    assert "already in the project store" not in r.stdout
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert sorted(os.listdir(store / "notes")) == ["ok.md"]


# ---------------------------------------------------------------- 6. blocked, in every item

def test_every_item_says_whether_its_destination_is_blocked(two):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "legacy\n")
    put(first / "notes" / "n.md", "legacy note\n")
    put(first / "scratchpad.md", "pad\n")
    put(store / "MEMORY.md", "project\n")
    put(store / "notes", "a regular file where notes/ should be\n")
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--json")
    assert r.exit_code == 4, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    got = {i["name"]: (i["reason"], i["conflict"], i["blocked"]) for i in doc["items"]}
    assert got == {"MEMORY.md": ("destination_exists", True, False),
                   "notes/n.md": ("destination_exists", True, True),
                   "scratchpad.md": (None, False, False)}
    rows = [orjson.loads(x) for x in run_cli(
        "--project", str(cwd), "migrate-legacy", "--dry-run", "--format", "jsonl").stdout_bytes
        .splitlines()]
    assert [x["blocked"] for x in rows] == [False, True, False]
    head, *lines = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run",
                           "--format", "csv").stdout.splitlines()
    assert "blocked" in head.split(",")
    text = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run").stdout
    assert "notes/n.md     destination_exists (blocked): " in text
    assert "MEMORY.md      destination_exists: " in text


# ---------------------------------------------------------------- 7. what is in the way, said

def test_what_blocks_a_destination_is_named(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "legacy\n")
    put(first / "scratchpad.md", "pad\n")
    put(first / "notes" / "n.md", "legacy note\n")
    (store / "MEMORY.md").mkdir(parents=True)
    put(store / "notes", "a file\n")
    p = plan_migration(Path(os.environ["LECODE_CONFIG_DIR"]), cwd)
    got = {i.name: (i.blocked, i.detail) for i in p.items}
    assert got["MEMORY.md"] == (True, f"something that is not a regular file is in the way: "
                                      f"{store / 'MEMORY.md'} is a directory")
    assert got["notes/n.md"] == (True, f"something that is not a regular file is in the way: "
                                       f"{store / 'notes'} is a regular file, not a directory")
    assert got["scratchpad.md"][0] is False


def test_a_project_store_that_is_a_symbolic_link_is_named_not_each_file(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "legacy\n")
    put(first / "notes" / "n.md", "legacy note\n")
    (tmp_path / "real").mkdir()
    store.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(tmp_path / "real", store)
    p = plan_migration(Path(os.environ["LECODE_CONFIG_DIR"]), cwd)
    for i in p.items:
        assert i.blocked and i.reason == "destination_exists"
        assert i.detail == ("something that is not a regular file is in the way: "
                            f"{store} is a symbolic link, not a directory"), i.detail


def test_an_unreadable_destination_is_said_to_be_unreadable(two, tmp_path):
    cwd, first, _second, store = two
    put(first / "MEMORY.md", "legacy\n")
    put(store / "MEMORY.md", "project\n")
    (store / "MEMORY.md").chmod(0)
    try:
        code, doc, err = np_json(tmp_path, cwd, "--dry-run")
    finally:
        (store / "MEMORY.md").chmod(0o600)
    assert code == 4, err
    [item] = doc["items"]
    assert item["reason"] == "destination_exists" and item["blocked"]
    assert item["detail"] == (f"the destination exists but cannot be read (Permission denied): "
                              f"{store / 'MEMORY.md'}; not compared, never overwritten")


# ---------------------------------------------------------------- 8. an interrupted copy says what it copied

@pytest.mark.parametrize("sig,status", [("SIGTERM", 143), ("SIGINT", 130)])
def test_an_interrupted_copy_says_how_many_files_it_copied(two, sig, status):
    import signal
    import time

    cwd, first, _second, store = two
    n = 3000
    for k in range(n):
        put(first / "notes" / f"n{k:04d}.md", f"note {k}\n" * 20)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "lecode_memctl", "--project", str(cwd),
                             "migrate-legacy", "--yes"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 60
        notes = store / "notes"
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if any(e.name.endswith(".md") for e in os.scandir(notes)):
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.001)
        if proc.poll() is not None:
            pytest.skip(f"the copy ended ({proc.returncode}) before the first file was seen")
        proc.send_signal(getattr(signal, sig))
        _out, err_b = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = err_b.decode()
    if proc.returncode == 0:
        pytest.skip("the copy finished before the signal")
    assert proc.returncode in (status, -getattr(signal, sig)), err
    copied = sum(1 for e in os.scandir(store / "notes") if e.name.endswith(".md"))
    what = "terminated by SIGTERM" if sig == "SIGTERM" else "interrupted"
    prefix = f"memctl: error: {what}; "
    assert err.startswith(prefix), err
    said = int(err[len(prefix):].split(" ", 1)[0])
    # (exact: a file whole at its destination counts, wherever after its
    # link the signal lands; before 2026-12-07 often one too low)
    assert said == copied, (said, copied, err)
    assert err == (f"{prefix}{said} of {n} files copied before this; every destination is "
                   "complete or absent; run again to finish\n")
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert sum(1 for _ in os.scandir(store / "notes")) == n


def test_a_legacy_file_gone_during_the_copy_says_how_many_were_copied(two):
    from lecode_memctl.core.errors import StoreCorrupt
    from lecode_memctl.core.migrate import apply_migration

    cwd, first, _second, store = two
    for name in ("MEMORY.md", "notes/a.md", "scratchpad.md"):
        put(first / name, name)
    plan = plan_migration(Path(os.environ["LECODE_CONFIG_DIR"]), cwd)
    (first / "notes" / "a.md").unlink()
    with pytest.raises(StoreCorrupt) as exc:
        apply_migration(plan)
    assert exc.value.message.endswith(
        "(1 of 3 files copied before this; every destination is complete or absent; "
        "run again to finish)")


# ---------------------------------------------------------------- 9. newlines in paths

def test_a_newline_in_a_directory_name_cannot_fake_plan_lines(tmp_path, config_dir):
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "pro\nj")
    odd = repo / "new\n  copy  #9   forged.md"
    odd.mkdir()
    put(legacy_path(config_dir, odd) / "MEMORY.md", "m\n")
    for args in (("--dry-run",), ("--yes",)):
        r = run_cli("--project", str(odd), "migrate-legacy", *args)
        assert r.exit_code == 0, r.stderr
        assert "\n  copy  #9" not in r.stdout and "pro\nj" not in r.stdout, r.stdout
        lines = r.stdout.splitlines()
        assert not any(ln.startswith(("j", "  copy  #9")) for ln in lines), r.stdout


# ---------------------------------------------------------------- 10. the hint's wording

def test_a_duplicate_is_not_said_to_be_in_the_project_store(two):
    cwd, first, second, store = two
    put(first / "MEMORY.md", "first\n")
    put(second / "MEMORY.md", "second\n")
    put(first / "notes" / "n.md", "legacy\n")
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert not store.exists()
    assert "already in the project store" not in r.stdout
    assert ("1 file provided by an earlier legacy store with other content: the first store's "
            "wins, never merged; the legacy files are kept.\n") in r.stdout
    put(store / "notes" / "n.md", "project\n")
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run")
    assert ("1 file already in the project store with other content: never merged or "
            "overwritten; the legacy files are kept.\n") in r.stdout
    assert "1 file provided by an earlier legacy store" in r.stdout
    doc = orjson.loads(run_cli("--project", str(cwd), "migrate-legacy", "--dry-run",
                               "--json").stdout_bytes)
    dup = next(i for i in doc["items"] if i["reason"] == "duplicate")
    assert dup["provided_by"] == str(first / "MEMORY.md")   # the earlier legacy file
