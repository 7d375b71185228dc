"""memctl migrate-legacy: discovery, plan, apply, idempotence, kills and faults.

The fixture is a real git project with a linked worktree (``git worktree
add``), nested working directories with their own legacy stores, a
conflicting MEMORY.md, daily logs and notes, a real legacy facts.sqlite3
and .bak files.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import migrate
from lecode_memctl.core.identity import slug
from lecode_memctl.core.migrate import (
    apply_migration,
    classify_stores,
    discover_legacy_stores,
    plan_migration,
)

from . import faultkit
from .builders import STEPS, sample_steps
from .conftest import git, make_repo, run_cli, run_proc, tree_hash


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def make_sqlite(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("create table facts (id integer primary key, text text)")
    con.execute("insert into facts (text) values ('legacy fact')")
    con.commit()
    con.close()


@dataclass
class World:
    tmp: Path
    cfg: Path
    repo: Path
    wt: Path
    deep: Path       # repo/src/deep
    src: Path        # repo/src
    sub: Path        # wt/pkg/sub
    store: Path      # the project store
    legacy: dict     # label -> legacy store path

    def legacy_hashes(self) -> dict:
        return {k: tree_hash(v) for k, v in self.legacy.items()}

    def norm(self, text: str) -> str:
        """Placeholders for the paths and slugs that change from run to run."""
        for label, p in sorted(self.legacy.items()):
            text = text.replace(p.name, f"<{label}>")
        text = text.replace(self.store.name, "<project>")
        text = text.replace(str(self.cfg), "<CFG>")
        return text.replace(str(self.tmp), "<TMP>")


@pytest.fixture
def world(tmp_path, config_dir) -> World:
    tmp = Path(os.path.realpath(tmp_path))
    repo = make_repo(tmp / "app")
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "docs").mkdir()
    wt = tmp / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    (wt / "pkg" / "sub").mkdir(parents=True)
    cfg = config_dir
    w = World(tmp, cfg, repo, wt, repo / "src" / "deep", repo / "src", wt / "pkg" / "sub",
              cfg / "memory" / slug(str(repo)), {})

    # The project store already has a note: the legacy one conflicts with it.
    put(w.store / "notes" / "design.md", "project design\n")
    os.chmod(w.store, 0o700)

    deep = w.legacy["deep"] = legacy_path(cfg, w.deep)
    put(deep / "MEMORY.md", "wt memory\n")            # same bytes as wt's: identical
    put(deep / "daily" / "2024-03-01.md", "log one\n")
    put(deep / "notes" / "design.md", "legacy design\n")  # destination exists

    src = w.legacy["src"] = legacy_path(cfg, w.src)
    put(src / "MEMORY.md", "src memory\n")            # differs: duplicate
    put(src / "MEMORY.md.bak", "older src memory\n")
    put(src / "daily" / "2024-03-02.md", "log two\n")
    make_sqlite(src / "facts.sqlite3")
    put(src / "facts.sqlite3-wal", b"\x37\x7f\x06\x82wal")
    put(src / "sessions" / "s1.jsonl", '{"seq":0}\n')

    wtl = w.legacy["wt"] = legacy_path(cfg, wt)
    put(wtl / "MEMORY.md", "wt memory\n")
    put(wtl / "scratchpad.md", "- [ ] migrate\n")
    put(wtl / "daily" / "2024-03-03.md.bak", "old log\n")

    subl = w.legacy["sub"] = legacy_path(cfg, w.sub)
    put(subl / "notes" / "todo.md", "todo \u00e9\n")
    put(subl / "notes" / "cache.md", b"SQLite format 3\x00rest")
    put(subl / "daily" / "2024-03-04.md", "log four\n")
    put(subl / "daily" / "2024-02-30.md", "no such day\n")
    put(subl / ".scratchpad.md.tmp-0123456789ab", "half")
    put(subl / "notes.txt", "stray\n")
    return w


DONE_WHEN_PLAN = """\
project:  <TMP>/app
from:     <TMP>/wt/pkg/sub (worktree of <TMP>/app)
store:    <CFG>/memory/<project>
legacy stores, in migration order (for each file the first store wins):
  #1   cwd      <CFG>/memory/<sub>  (of <TMP>/wt/pkg/sub)
  #2   ancestor <CFG>/memory/<wt>  (of <TMP>/wt)
  #3   tree     <CFG>/memory/<src>  (of <TMP>/app/src)
  #4   tree     <CFG>/memory/<deep>  (of <TMP>/app/src/deep)
plan:
  skip  #1   .scratchpad.md.tmp-0123456789ab  temp_file: temporary file of an interrupted write; never copied
  skip  #1   daily/2024-02-30.md              unexpected: not a daily log name: no such calendar day
  copy  #1   daily/2024-03-04.md
  skip  #1   notes/cache.md                   sqlite: starts with the SQLite header; never copied
  copy  #1   notes/todo.md
  skip  #1   notes.txt                        unexpected: not part of a memory store's layout
  copy  #2   MEMORY.md
  skip  #2   daily/2024-03-03.md.bak          backup: backups are never copied
  copy  #2   scratchpad.md
  skip  #3   MEMORY.md                        duplicate: #2 comes first and provides MEMORY.md; never merged
  skip  #3   MEMORY.md.bak                    backup: backups are never copied
  copy  #3   daily/2024-03-02.md
  skip  #3   facts.sqlite3                    sqlite: SQLite databases are never copied
  skip  #3   facts.sqlite3-wal                sqlite: SQLite databases are never copied
  skip  #3   sessions/                        not_markdown: session transcripts are not Markdown; only Markdown is migrated (the directory is not read)
  skip  #4   MEMORY.md                        identical: same bytes as #2 MEMORY.md, which the destination has or receives
  copy  #4   daily/2024-03-01.md
  skip  #4   notes/design.md                  destination_exists: the destination exists with other content: <CFG>/memory/<project>/notes/design.md
summary: 6 to copy, 12 skipped, 3 conflicts
"""  # noqa: E501 - the expected output, line for line

HINT = """\
1 legacy Markdown file skipped (a symbolic link, not a regular file, or a name the store does not accept): not migrated; copy its content by hand if it matters.
1 file already in the project store with other content: never merged or overwritten; the legacy files are kept.
1 file provided by an earlier legacy store with other content: the first store's wins, never merged; the legacy files are kept.
To merge by hand, 'memctl migrate-legacy --dry-run --diff' shows each legacy file against the project's; then, in the project:
  memctl edit memory
  memctl edit note design
"""  # noqa: E501 - the expected output, line for line

COPIED = {"daily/2024-03-04.md": "log four\n", "notes/todo.md": "todo \u00e9\n",
          "MEMORY.md": "wt memory\n", "scratchpad.md": "- [ ] migrate\n",
          "daily/2024-03-02.md": "log two\n", "daily/2024-03-01.md": "log one\n",
          "notes/design.md": "project design\n"}


def store_files(store: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(store):
        for f in files:
            p = Path(dirpath) / f
            out[p.relative_to(store).as_posix()] = p.read_text()
    return out


# ---------------------------------------------------------------- discovery

def test_discovery_order_from_nested_main_checkout_dir(world):
    d = discover_legacy_stores(world.cfg, world.deep)
    assert [(s.index, s.path, s.directory, s.origin) for s in d.legacy] == [
        (1, world.legacy["deep"], world.deep, "cwd"),
        (2, world.legacy["src"], world.src, "ancestor"),
        (3, world.legacy["wt"], world.wt, "worktree"),
        (4, world.legacy["sub"], world.sub, "worktree"),
    ]
    assert d.store.path == world.store
    assert d.worktrees == [world.wt]
    assert not d.truncated and d.notes == []


def test_discovery_from_project_root_and_the_project_store_is_never_legacy(world, config_dir):
    put(legacy_path(config_dir, world.repo) / "MEMORY.md", "x")  # == the project store
    d = discover_legacy_stores(world.cfg, world.repo)
    assert [s.path for s in d.legacy] == [world.legacy[k] for k in ("src", "deep", "wt", "sub")]
    assert world.store not in [s.path for s in d.legacy]
    assert [s.origin for s in d.legacy] == ["tree", "tree", "worktree", "worktree"]


def test_discovery_skips_symlinks_git_and_nested_checkouts(world, tmp_path):
    outside = tmp_path / "outside" / "dir"
    outside.mkdir(parents=True)
    os.symlink(outside, world.repo / "docs" / "link")
    put(legacy_path(world.cfg, outside) / "MEMORY.md", "outside\n")
    put(legacy_path(world.cfg, world.repo / "docs" / "link") / "MEMORY.md", "via link\n")
    nested = make_repo(world.repo / "vendor" / "lib")
    (nested / "inner").mkdir()
    put(legacy_path(world.cfg, nested / "inner") / "MEMORY.md", "other project\n")
    put(legacy_path(world.cfg, world.repo / ".git" / "refs") / "MEMORY.md", "in .git\n")
    d = discover_legacy_stores(world.cfg, world.repo)
    assert [s.path for s in d.legacy] == [world.legacy[k] for k in ("src", "deep", "wt", "sub")]


def test_discovery_symlinked_legacy_store_is_noted_not_followed(world, tmp_path):
    real = tmp_path / "elsewhere"
    put(real / "MEMORY.md", "x\n")
    os.symlink(real, legacy_path(world.cfg, world.repo / "docs"))
    d = discover_legacy_stores(world.cfg, world.repo)
    assert str(legacy_path(world.cfg, world.repo / "docs")) in " ".join(d.notes)
    assert all(s.directory != world.repo / "docs" for s in d.legacy)


def test_discovery_is_bounded_and_does_not_stat_each_directory(world):
    for i in range(30):
        for j in range(20):
            (world.repo / f"d{i:02}" / f"e{j:02}").mkdir(parents=True)
    target = world.repo / "d29" / "e19"
    put(legacy_path(world.cfg, target) / "MEMORY.md", "deep in the tree\n")

    calls = {"stat": 0}
    real_lstat, real_stat = os.lstat, os.stat

    def counting(real):
        def f(*a, **kw):
            calls["stat"] += 1
            return real(*a, **kw)
        return f

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "lstat", counting(real_lstat))
        mp.setattr(os, "stat", counting(real_stat))
        d = discover_legacy_stores(world.cfg, world.repo)
    assert d.legacy[0].directory == target  # "d29" sorts before "docs" and "src"
    # a few per found store and per ancestor of the project, not one per directory
    assert calls["stat"] < 100 < 600 < d.dirs_scanned, calls

    small = discover_legacy_stores(world.cfg, world.repo, max_dirs=50)
    assert small.truncated and small.dirs_scanned == 50
    assert any("--max-dirs" in n for n in small.notes)
    assert target not in [s.directory for s in small.legacy]
    r = run_cli("--project", str(world.repo), "migrate-legacy", "--dry-run", "--max-dirs", "50")
    assert "memctl: note: stopped walking after 50 directories" in r.stderr


def test_discovery_with_nothing_to_find(tmp_path, config_dir):
    repo = make_repo(tmp_path / "solo")
    d = discover_legacy_stores(config_dir, repo)
    assert d.legacy == [] and d.dirs_scanned == 0  # no candidate store: no walk at all
    before = tree_hash(config_dir)
    r = run_cli("--project", str(repo), "migrate-legacy")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.endswith("legacy stores: none found\nplan: nothing to migrate\n"
                             "summary: 0 to copy, 0 skipped, 0 conflicts\n")
    assert tree_hash(config_dir) == before


def test_classify_stores(world, tmp_path):
    gone = tmp_path / "deleted-dir"
    put(legacy_path(world.cfg, gone) / "MEMORY.md", "orphan\n")
    other = make_repo(tmp_path / "other")
    put(world.cfg / "memory" / slug(str(other)) / "MEMORY.md", "other project\n")
    os.symlink(tmp_path, world.cfg / "memory" / "link-0123456789ab")
    classes, _notes = classify_stores(world.cfg, [world.repo])
    kinds = {c.path: (c.kind, c.root, c.directory) for c in classes}
    assert kinds[world.store] == ("project", world.repo, None)
    for label, d in (("deep", world.deep), ("src", world.src), ("wt", world.wt), ("sub", world.sub)):
        assert kinds[world.legacy[label]] == ("legacy", world.repo, d)
    assert kinds[legacy_path(world.cfg, gone)] == ("unclaimed", None, None)
    assert kinds[world.cfg / "memory" / slug(str(other))][0] == "unclaimed"
    assert kinds[world.cfg / "memory" / "link-0123456789ab"][0] == "symlink"
    classes2, _ = classify_stores(world.cfg, [world.repo, other])
    assert {c.path: c.kind for c in classes2}[world.cfg / "memory" / slug(str(other))] == "project"


# ---------------------------------------------------------------- plan

def test_done_when_dry_run_in_nested_dir_of_linked_worktree(world):
    """The issue's 'done when': run in a nested directory of a linked worktree,
    a real process, exactly the files a reader of the reference design expects."""
    before = tree_hash(world.cfg)
    p = run_proc("migrate-legacy", "--dry-run", cwd=world.sub)
    # existing destinations are the design's normal case: reported, exit 0
    # (issue 11, point 8); --fail-on-conflict keeps exit 4
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    assert world.norm(p.stdout.decode()) == DONE_WHEN_PLAN + HINT
    assert run_proc("migrate-legacy", "--dry-run", "--fail-on-conflict",
                    cwd=world.sub).returncode == 4
    assert tree_hash(world.cfg) == before


def test_plan_json_fields(world):
    r = run_cli("--project", str(world.sub), "migrate-legacy", "--dry-run", "--json")
    assert r.exit_code == 0
    doc = orjson.loads(r.stdout_bytes)
    assert doc["dry_run"] is True and doc["applied"] is False and doc["exit_code"] == 0
    assert doc["project"]["store"] == str(world.store)
    assert [s["origin"] for s in doc["legacy_stores"]] == ["cwd", "ancestor", "tree", "tree"]
    rows = [(world.norm(i["source"]), i["destination"] and world.norm(i["destination"]),
             i["action"], i["reason"]) for i in doc["items"]]
    S = "<CFG>/memory/"
    D = S + "<project>/"
    assert rows == [
        (S + "<sub>/.scratchpad.md.tmp-0123456789ab", None, "skip", "temp_file"),
        (S + "<sub>/daily/2024-02-30.md", None, "skip", "unexpected"),
        (S + "<sub>/daily/2024-03-04.md", D + "daily/2024-03-04.md", "copy", None),
        (S + "<sub>/notes/cache.md", None, "skip", "sqlite"),
        (S + "<sub>/notes/todo.md", D + "notes/todo.md", "copy", None),
        (S + "<sub>/notes.txt", None, "skip", "unexpected"),
        (S + "<wt>/MEMORY.md", D + "MEMORY.md", "copy", None),
        (S + "<wt>/daily/2024-03-03.md.bak", None, "skip", "backup"),
        (S + "<wt>/scratchpad.md", D + "scratchpad.md", "copy", None),
        (S + "<src>/MEMORY.md", D + "MEMORY.md", "skip", "duplicate"),
        (S + "<src>/MEMORY.md.bak", None, "skip", "backup"),
        (S + "<src>/daily/2024-03-02.md", D + "daily/2024-03-02.md", "copy", None),
        (S + "<src>/facts.sqlite3", None, "skip", "sqlite"),
        (S + "<src>/facts.sqlite3-wal", None, "skip", "sqlite"),
        (S + "<src>/sessions", None, "skip", "not_markdown"),
        (S + "<deep>/MEMORY.md", D + "MEMORY.md", "skip", "identical"),
        (S + "<deep>/daily/2024-03-01.md", D + "daily/2024-03-01.md", "copy", None),
        (S + "<deep>/notes/design.md", D + "notes/design.md", "skip", "destination_exists"),
    ]
    dup = doc["items"][9]
    assert dup["provided_by"] == str(world.legacy["wt"] / "MEMORY.md") and dup["conflict"]
    assert doc["items"][2]["sha256"] == hashlib.sha256(b"log four\n").hexdigest()
    assert doc["summary"] == {"copy": 6, "skip": 12, "conflicts": 3, "copied": 0}


def test_order_depends_on_where_you_stand_and_the_first_wins(world):
    # From the main checkout's nested dir, deep's store comes first: its
    # MEMORY.md wins, and wt's identical one is "identical", src's a duplicate.
    plan = plan_migration(world.cfg, world.deep)
    mem = [(i.store, i.action, i.reason) for i in plan.items if i.name == "MEMORY.md"]
    assert mem == [(1, "copy", None), (2, "skip", "duplicate"), (3, "skip", "identical")]


# ---------------------------------------------------------------- apply

def test_apply_second_run_and_legacy_untouched(world):
    legacy_before = world.legacy_hashes()
    r = run_cli("--project", str(world.sub), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert world.norm(r.stdout) == DONE_WHEN_PLAN + (
        "copied 6 of 6 files into <CFG>/memory/<project>, each verified by sha256\n") + HINT
    assert store_files(world.store) == COPIED
    # modes: the directory migration created 0700, copied files 0600
    assert os.stat(world.store / "daily").st_mode & 0o777 == 0o700
    for dirpath, _dirs, files in os.walk(world.store):
        for f in files:
            if f != "design.md":
                assert os.stat(Path(dirpath) / f).st_mode & 0o777 == 0o600
    assert world.legacy_hashes() == legacy_before
    assert not any(n.endswith((".sqlite3", ".bak", "-wal")) for n in store_files(world.store))

    # Second run: nothing to copy, same conflicts, nothing changes.
    store_before = tree_hash(world.store)
    r2 = run_cli("--project", str(world.sub), "migrate-legacy", "--json")
    assert r2.exit_code == 0
    doc = orjson.loads(r2.stdout_bytes)
    assert doc["summary"] == {"copy": 0, "skip": 18, "conflicts": 3, "copied": 0}
    assert {i["reason"] for i in doc["items"] if i["destination"]} == {
        "identical", "duplicate", "destination_exists"}
    assert tree_hash(world.store) == store_before
    assert world.legacy_hashes() == legacy_before


def test_apply_without_conflicts_exits_0_and_again_0(tmp_path, config_dir):
    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    leg = legacy_path(config_dir, repo / "a")
    put(leg / "MEMORY.md", "m\n")
    put(leg / "notes" / "x.md", "x\n")
    r = run_cli("--project", str(repo / "a"), "migrate-legacy", "-y", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert [(i["name"], i["result"]) for i in doc["items"]] == [
        ("MEMORY.md", "copied"), ("notes/x.md", "copied")]
    store = config_dir / "memory" / slug(str(repo))
    assert store_files(store) == {"MEMORY.md": "m\n", "notes/x.md": "x\n"}
    assert os.stat(store).st_mode & 0o777 == 0o700
    r2 = run_cli("--project", str(repo / "a"), "migrate-legacy")
    assert r2.exit_code == 0
    assert "summary: 0 to copy, 2 skipped, 0 conflicts" in r2.stdout
    assert migrate.migrate(config_dir, repo / "a").copied == 0


def test_refuses_without_yes_when_stdin_is_not_a_terminal(world):
    before = tree_hash(world.cfg)
    r = run_cli("--project", str(world.sub), "migrate-legacy")
    assert r.exit_code == 2
    assert r.stderr == ("memctl: error: stdin is not a terminal: pass --yes to copy 6 files, "
                        "or --dry-run to only plan\n")
    r = run_cli("--project", str(world.sub), "migrate-legacy", "--json")
    assert r.exit_code == 2 and orjson.loads(r.stdout_bytes)["error"]["code"] == "usage"
    assert tree_hash(world.cfg) == before


def test_destination_created_between_plan_and_apply_is_not_clobbered(world):
    plan = plan_migration(world.cfg, world.sub)
    put(world.store / "MEMORY.md", "written by the agent meanwhile\n")
    put(world.store / "scratchpad.md", "- [ ] migrate\n")  # same bytes: fine
    done = apply_migration(plan)
    res = {i.name: i.result for i in done.items if i.action == "copy" and i.store == 2}
    assert res == {"MEMORY.md": "conflict", "scratchpad.md": "identical"}
    assert (world.store / "MEMORY.md").read_text() == "written by the agent meanwhile\n"
    assert done.exit_code == 0 and done.copied == 4
    assert replace(done, fail_on_conflict=True).exit_code == 4


def test_from_adds_a_store_after_the_discovered_ones(world, tmp_path):
    extra = tmp_path / "evidence" / "old-store"
    put(extra / "notes" / "extra.md", "from elsewhere\n")
    put(extra / "MEMORY.md", "another\n")
    r = run_cli("--project", str(world.sub), "migrate-legacy", "--dry-run", "--json",
                "--from", str(extra), "--from", str(world.legacy["wt"]))
    doc = orjson.loads(r.stdout_bytes)
    assert doc["legacy_stores"][-1] == {"index": 5, "path": str(extra), "slug": "old-store",
                                        "directory": None, "origin": "from"}
    items = [(i["name"], i["action"], i["reason"]) for i in doc["items"] if i["store"] == 5]
    assert items == [("MEMORY.md", "skip", "duplicate"), ("notes/extra.md", "copy", None)]
    for bad, code in ((tmp_path / "nope", 3), (world.store, 2)):
        r = run_cli("--project", str(world.sub), "migrate-legacy", "-n", "--from", str(bad))
        assert r.exit_code == code, r.stderr
        assert r.stderr.startswith("memctl: error: --from ") and r.stderr.count("\n") == 1
    os.symlink(extra, tmp_path / "link")
    r = run_cli("--project", str(world.sub), "migrate-legacy", "-n", "--from", str(tmp_path / "link"))
    assert r.exit_code == 2 and "symbolic link" in r.stderr


def test_symlinks_inside_a_legacy_store_are_reported_not_followed(tmp_path, config_dir):
    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    leg = legacy_path(config_dir, repo / "a")
    secret = tmp_path / "secret.md"
    secret.write_text("secret\n")
    leg.mkdir(parents=True)
    os.symlink(secret, leg / "MEMORY.md")
    (leg / "notes").mkdir()
    os.symlink(secret, leg / "notes" / "n.md")
    (leg / "weird").mkdir()
    plan = plan_migration(config_dir, repo / "a")
    assert [(i.name, i.action, i.reason) for i in plan.items] == [
        ("MEMORY.md", "skip", "symlink"), ("notes/n.md", "skip", "symlink"),
        ("weird/", "skip", "unexpected")]


def test_store_option_is_refused(world):
    r = run_cli("--store", str(world.store), "migrate-legacy", "-n")
    assert r.exit_code == 2 and "not on --store" in r.stderr


# ---------------------------------------------------------------- kills and faults

@pytest.fixture
def small(tmp_path, config_dir):
    """One legacy store with three Markdown files, for the step sweeps."""
    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    leg = legacy_path(config_dir, repo / "a")
    files = {"MEMORY.md": b"memory\n" * 50, "daily/2024-05-06.md": b"log\n",
             "notes/n.md": "n\u00e9\n".encode()}
    for rel, data in files.items():
        put(leg / rel, data)
    put(leg / "facts.sqlite3", b"SQLite format 3\x00")
    store = config_dir / "memory" / slug(str(os.path.realpath(repo)))
    return repo / "a", leg, store, files


def assert_complete_or_absent(store: Path, files: dict) -> None:
    """No partial destination: each is absent or has exactly the legacy bytes;
    the only other entries are temporary files and directories."""
    if not store.exists():
        return
    for dirpath, _dirs, names in os.walk(store):
        for n in names:
            p = Path(dirpath) / n
            rel = p.relative_to(store).as_posix()
            if rel in files:
                assert p.read_bytes() == files[rel], rel
            else:
                assert n.startswith(".") and ".tmp-" in n, rel


@pytest.fixture
def no_fsync(monkeypatch):
    """Sweeps simulate process death, not power loss: the page cache survives a
    SIGKILL, so the in-process reruns skip the real flush (faultkit's children
    do too, with no_sync=True; the fsync calls still happen and are counted)."""
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (os.fstat(fd), None)[1])
    return real


@pytest.mark.parametrize("steps", STEPS)
def test_kill_at_every_step_leaves_nothing_partial_and_a_rerun_completes(small, config_dir,
                                                                         no_fsync, steps):
    cwd, leg, store, files = small
    argv = ["migrate-legacy", "--yes"]
    legacy_before = tree_hash(leg)
    total = faultkit.count_steps(argv, cwd=cwd, under=config_dir)
    shutil.rmtree(store)
    assert total >= 3 * 6  # temp open, write, fsync, link, unlink, dir fsync per file

    def reset(_n):
        shutil.rmtree(store, ignore_errors=True)

    def check(n, run):
        assert run.stderr == b"", (n, run.stderr)
        assert_complete_or_absent(store, files)
        rerun = migrate.migrate(config_dir, cwd)  # the core, as the agent calls it
        assert rerun.exit_code == 0, n
        assert_complete_or_absent(store, files)
        assert {k: (store / k).read_bytes() for k in files} == files
        assert tree_hash(leg) == legacy_before

    if steps == "every":
        killed = faultkit.sweep_kills(argv, before=reset, check=check, cwd=cwd,
                                      under=config_dir, fork=True, no_sync=True)
        assert killed == total
        return
    for n in sample_steps(total):
        reset(n)
        run = faultkit.run_killed_at(n, argv, cwd=cwd, under=config_dir, fork=True, no_sync=True)
        assert run.killed, n
        check(n, run)


@pytest.mark.parametrize("err,steps", [
    pytest.param(errno.ENOSPC, "every", marks=pytest.mark.sweep),
    pytest.param(errno.EIO, "every", marks=pytest.mark.sweep),
    pytest.param(errno.ENOSPC, "first-middle-last"),
])
def test_io_fault_at_every_step_is_one_clean_line(small, config_dir, err, no_fsync, steps):
    cwd, leg, store, files = small
    argv = ["migrate-legacy", "--yes"]
    legacy_before = tree_hash(leg)
    total = faultkit.count_steps(argv, cwd=cwd, under=config_dir)
    ns = range(1, total + 1) if steps == "every" else sample_steps(total)
    failed = 0
    for n in ns:
        shutil.rmtree(store, ignore_errors=True)
        p = faultkit.run_fault_at(n, err, argv, cwd=cwd, under=config_dir, fork=True,
                                  no_sync=True)
        assert b"Traceback" not in p.stderr
        if p.returncode != 0:  # a fault in a redundant mkdir of an existing dir is harmless
            failed += 1
            assert p.returncode == 7, (n, p.stderr)
            line = p.stderr.decode()
            assert line.startswith("memctl: error: ") and line.count("\n") == 1, line
            assert os.strerror(err) in line
            assert "run again to finish" in line
        assert_complete_or_absent(store, files)
        # nothing left behind: no temporary file survives a failed write
        assert not [n for *_x, ns in os.walk(store) for n in ns if ".tmp-" in n]
        assert migrate.migrate(config_dir, cwd).exit_code == 0
        assert {k: (store / k).read_bytes() for k in files} == files
    if steps == "every":
        assert failed >= total - 3
    else:
        assert failed == len(ns), (failed, list(ns))
    assert tree_hash(leg) == legacy_before


@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS])
def test_unwritable_destination_by_fault_injection_changes_nothing(small, config_dir, err):
    """Tests run as root, for whom chmod does not stop a write: the first
    file-changing step is made to fail (and every later one, as a read-only
    directory would), which must leave the config dir exactly as it was."""
    cwd, _leg, store, _files = small
    before = tree_hash(config_dir)
    p = faultkit.run_fault_at(1, err, ["migrate-legacy", "--yes"], sticky=True, cwd=cwd,
                              under=config_dir)
    assert p.returncode == 7
    line = p.stderr.decode()
    assert line.startswith("memctl: error: ") and line.count("\n") == 1
    assert os.strerror(err) in line and "0 of 3 files copied" in line
    assert tree_hash(config_dir) == before


def _can_bind_mount_readonly(path: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    p = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if p.returncode != 0:
        return False
    p = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True)
    if p.returncode != 0:
        subprocess.run(["umount", str(path)], capture_output=True)
        return False
    return True


def test_read_only_destination_directory_is_a_clear_error(small, config_dir):
    """A real read-only directory: as root, a read-only bind mount of the
    project store (chmod would not stop root); as another user, chmod 0500."""
    cwd, _leg, store, _files = small
    put(store / "scratchpad.md", "existing\n")
    os.chmod(store, 0o700)
    before = tree_hash(config_dir)
    mounted = _can_bind_mount_readonly(store)
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("running as root without permission to mount a read-only bind mount")
        os.chmod(store, 0o500)
    try:
        r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
        assert r.exit_code == 7, r.stderr
        why = "read-only file system" if mounted else "permission denied"
        assert r.stderr == (f"memctl: error: {store}: not writable ({why}); "
                            "nothing was copied\n")
        assert tree_hash(config_dir) == before
        # the dry run exits as the copy would (exit 0 before 2026-12-07)
        d = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run")
        assert d.exit_code == 7 and "summary: 3 to copy" in d.stdout
        assert d.stderr == (f"memctl: error: the copy would fail: {store}: not writable "
                            f"({why}); nothing was copied\n")
    finally:
        if mounted:
            subprocess.run(["umount", str(store)], check=True)
        else:
            os.chmod(store, 0o700)
    assert tree_hash(config_dir) == before


def test_command_module_imports_nothing_heavy_at_top_level():
    import ast

    src = Path(migrate.__file__).parent.parent / "cli" / "cmd_migrate.py"
    tree = ast.parse(src.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {(n.module if isinstance(n, ast.ImportFrom) else n.names[0].name) for n in top}
    # (completion: the completers every command module takes, itself importing
    # only os and typing)
    assert names <= {"__future__", "pathlib", "typing", "typer", "registry", "options", "state",
                     "completion"}
    core = ast.parse(Path(migrate.__file__).read_text())
    mods = {(n.module or "") for n in ast.walk(core) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(core) if isinstance(n, ast.Import) for a in n.names}
    assert not mods & {"typer", "rich", "tabulate", "sqlite3"}


@pytest.mark.parametrize("answer,code", [(b"n\n", 1), (b"y\n", 0)])
def test_asks_on_a_terminal(tmp_path, config_dir, answer, code):
    import pty
    import sys

    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    put(legacy_path(config_dir, repo / "a") / "MEMORY.md", "m\n")
    store = config_dir / "memory" / slug(str(os.path.realpath(repo)))
    master, slave = pty.openpty()
    try:
        os.write(master, answer)
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "migrate-legacy"],
                           stdin=slave, capture_output=True, cwd=repo / "a", timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == code, p.stderr
    assert b"Copy 1 file into " + str(store).encode() + b"? [y/N]" in p.stderr
    assert b"copy  #1   MEMORY.md" in p.stdout
    if code == 1:
        assert p.stderr.endswith(b"nothing was copied\n") and not store.exists()
    else:
        assert (store / "MEMORY.md").read_text() == "m\n"
        assert b"copied 1 of 1 file into " in p.stdout


def test_worktrees_of_a_bare_repository(tmp_path, config_dir):
    repo = make_repo(tmp_path / "src")
    git("clone", "-q", "--bare", str(repo), str(tmp_path / "app.git"), cwd=tmp_path)
    bare = Path(os.path.realpath(tmp_path / "app.git"))
    git("worktree", "add", "-q", str(tmp_path / "w1"), cwd=bare)
    git("worktree", "add", "-q", str(tmp_path / "w2"), "-b", "two", cwd=bare)
    w1, w2 = (Path(os.path.realpath(tmp_path / n)) for n in ("w1", "w2"))
    (w1 / "x").mkdir()
    (w2 / "y").mkdir()
    for d in (w1 / "x", w2, w2 / "y"):
        put(legacy_path(config_dir, d) / "notes" / f"{d.name}.md", d.name + "\n")
    d = discover_legacy_stores(config_dir, w1 / "x")
    assert d.project.root == bare and d.worktrees == [w1, w2]
    assert [(s.directory, s.origin) for s in d.legacy] == [
        (w1 / "x", "cwd"), (w2, "worktree"), (w2 / "y", "worktree")]


def test_identical_to_the_destination_not_to_an_earlier_store_says_so(tmp_path, config_dir):
    """Two legacy stores with MEMORY.md, the second holding the bytes the
    project store already has, the first other ones: the second was
    'identical: same bytes as #1 MEMORY.md', naming #1 as its provider
    although #1's bytes differ.  It is identical to the destination."""
    repo = make_repo(tmp_path / "p")
    (repo / "a").mkdir()
    (repo / "b").mkdir()
    put(legacy_path(config_dir, repo / "a") / "MEMORY.md", "L1 memory\n")
    put(legacy_path(config_dir, repo / "b") / "MEMORY.md", "L2 memory\n")
    project = config_dir / "memory" / slug(str(repo))
    put(project / "MEMORY.md", "L2 memory\n")
    os.chmod(project, 0o700)
    plan = plan_migration(config_dir, repo / "a", extra=[repo / "b"])
    mem = [i for i in plan.items if i.name == "MEMORY.md"]
    assert [(i.action, i.reason) for i in mem] == [("skip", "destination_exists"),
                                                  ("skip", "identical")]
    assert mem[1].provided_by is None
    assert "#1" not in mem[1].detail and "destination already has" in mem[1].detail


@pytest.mark.parametrize("damage", ["fifo", "nul"])
def test_a_worktree_gitdir_that_is_a_fifo_or_names_no_path_is_skipped(tmp_path, config_dir,
                                                                       damage):
    """``<common dir>/worktrees/NAME/gitdir`` read as every other git file is:
    a FIFO there was waited on for ever (``migrate-legacy --dry-run`` never
    returned), and a path with a NUL byte ended in an internal error (exit
    70).  Each is now a note, the entry skipped, and the other worktrees
    found."""
    repo = make_repo(tmp_path / "app")
    git("worktree", "add", "-q", str(tmp_path / "w1"), "-b", "one", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "w2"), "-b", "two", cwd=repo)
    bad = repo / ".git" / "worktrees" / "w1" / "gitdir"
    bad.unlink()
    if damage == "fifo":
        os.mkfifo(bad)
    else:
        bad.write_bytes(str(tmp_path / "w\x001" / ".git").encode() + b"\n")
    d = discover_legacy_stores(config_dir, repo)
    assert d.worktrees == [Path(os.path.realpath(tmp_path / "w2"))]
    config_dir.mkdir()     # (a --config-dir given must exist)
    r = run_proc("--config-dir", str(config_dir), "-C", str(repo), "migrate-legacy", "--dry-run",
                 timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"worktree entry" in r.stderr + r.stdout and str(bad).encode() in r.stderr + r.stdout


def test_the_help_lists_every_exit_status_format_md_gives():
    """``migrate-legacy --help`` listed 0, 4, 1, 2 and 7, where FORMAT.md's
    table (and the command) also give 3 (no such --from) and 5."""
    import re

    from .conftest import REPO, run_cli

    text = (REPO / "docs" / "FORMAT.md").read_text()
    table = text.split("**Exit status** (the dry run exits as the copy would):", 1)[1]
    codes = re.findall(r"^\| (\d+) \|", table.split("\n\n", 2)[1], re.M)
    assert codes == ["0", "1", "2", "3", "4", "5", "6", "7"], codes
    help_text = " ".join(run_cli("migrate-legacy", "--help").stdout.split())
    status = help_text.split("Exit status:", 1)[1]
    # each code starts a clause: "0 ...; 4 ...; 1 ..."
    listed = re.findall(r"(?:^|; ) ?(\d+) ", " " + status.strip())
    assert sorted(listed) == codes, listed
    # and exit 2's clause names what FORMAT.md's row names
    two = status.split("; 2 ", 1)[1].split("; 3 ", 1)[0]
    for cause in ("--yes", "--json", "--store", "symbolic link", "own store"):
        assert cause in two, (cause, two)
