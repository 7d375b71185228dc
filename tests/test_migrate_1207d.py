"""migrate-legacy and where review fixes (2026-12-07, fourth pass): a
--config-dir that does not exist or is a file, the count an interrupted
copy gives, the legacy store in ``where``, the hint for held-back
duplicates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lecode_memctl.core.identity import slug

from .conftest import make_repo, run_cli


def legacy_path(config_dir: Path, d: Path) -> Path:
    return config_dir / "memory" / slug(os.path.realpath(d))


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def error_doc(code: str, message: str, exit_code: int) -> str:
    import orjson

    return orjson.dumps({"type": "error", "error": {"code": code, "message": message,
                                                     "exit_code": exit_code}}).decode() + "\n"


# ---------------------------------------------------------------- 1. --config-dir

@pytest.mark.parametrize("args", [("projects",), ("projects", "--json"),
                                  ("migrate-legacy", "--dry-run"),
                                  ("migrate-legacy", "--dry-run", "--json"),
                                  ("migrate-legacy", "--yes")])
def test_a_config_dir_option_that_does_not_exist_is_exit_3(tmp_path, project_cwd, args):
    """A misspelt --config-dir is a typo, not "no legacy stores" (exit 0
    before): migrate-legacy says so as projects does."""
    missing = tmp_path / "no-such-config"
    r = run_cli("--config-dir", str(missing), *args)
    message = f"--config-dir {missing}: no such directory"
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: {message}\n"
    assert r.stdout == (error_doc("not_found", message, 3) if "--json" in args else "")
    assert not missing.exists()


@pytest.mark.parametrize("args", [("projects",), ("projects", "--json"),
                                  ("migrate-legacy", "--dry-run"),
                                  ("migrate-legacy", "--yes", "--json")])
def test_a_config_dir_option_that_is_a_file_is_a_usage_error(tmp_path, project_cwd, args):
    """A regular file given as --config-dir is exit 2, "not a directory", as
    for projects (it was exit 5, "DIR/memory: cannot list: Not a directory")."""
    f = tmp_path / "cfg-file"
    f.write_text("x\n")
    r = run_cli("--config-dir", str(f), *args)
    message = f"--config-dir {f}: not a directory"
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: {message}\n"
    assert r.stdout == (error_doc("usage", message, 2) if "--json" in args else "")


def test_a_config_dir_from_the_environment_that_does_not_exist_is_no_legacy_store(
        tmp_path, project_cwd, monkeypatch):
    """Not given on the command line (the environment's, the default's): a
    machine where lecode never ran, no legacy stores, exit 0, as before."""
    monkeypatch.setenv("LECODE_CONFIG_DIR", str(tmp_path / "never-ran"))
    r = run_cli("migrate-legacy", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "legacy stores: none found" in r.stdout


def test_a_config_dir_option_that_exists_migrates_as_before(tmp_path, config_dir):
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    (repo / "sub").mkdir()
    other = tmp_path / "other-config"
    put(legacy_path(other, repo / "sub") / "MEMORY.md", "m\n")
    r = run_cli("--config-dir", str(other), "--project", str(repo / "sub"), "migrate-legacy",
                "--yes")
    assert r.exit_code == 0, r.stderr
    assert (other / "memory" / slug(str(repo)) / "MEMORY.md").read_text() == "m\n"


def test_an_empty_from_is_refused_before_the_config_dir_is_looked_at(tmp_path, project_cwd):
    """A usage error of the command's own options comes first: an empty
    --from is exit 2 whatever the --config-dir."""
    r = run_cli("--config-dir", str(tmp_path / "no-such-config"), "migrate-legacy", "--yes",
                "--from", "")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "--from needs a path" in r.stderr


# ---------------------------------------------------------------- 2. an interrupt's count

@pytest.fixture
def three(tmp_path, config_dir):
    """A repository whose working directory sub/ has a legacy store of three
    files, copied in this order: MEMORY.md, notes/a.md, scratchpad.md."""
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    cwd = repo / "sub"
    cwd.mkdir()
    legacy = legacy_path(config_dir, cwd)
    for name in ("MEMORY.md", "notes/a.md", "scratchpad.md"):
        put(legacy / name, f"{name}\n")
    return cwd, config_dir / "memory" / slug(str(repo))


def _interrupted_count(cwd: Path, after_plan=None) -> str:
    from lecode_memctl.core.migrate import apply_migration, plan_migration

    plan = plan_migration(Path(os.environ["LECODE_CONFIG_DIR"]), cwd)
    if after_plan is not None:
        after_plan()
    with pytest.raises(KeyboardInterrupt) as exc:
        apply_migration(plan)
    return exc.value.args[0]


def _said(n: int) -> str:
    return (f"{n} of 3 files copied before this; every destination is complete or absent; "
            "run again to finish")


def test_an_interrupt_in_the_directory_sync_after_the_link_counts_the_file(three, monkeypatch):
    """The interrupt lands in atomic_write's directory fsync, after the hard
    link: notes/a.md is complete at its destination, and is counted (it was
    not: "1 of 3")."""
    from lecode_memctl.core import atomic

    cwd, store = three
    real = atomic.fsync_dir

    def sync(path):
        if (store / "notes" / "a.md").exists():
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(atomic, "fsync_dir", sync)
    assert _interrupted_count(cwd) == _said(2)
    assert (store / "notes" / "a.md").read_text() == "notes/a.md\n"
    assert not (store / "scratchpad.md").exists()


def test_an_interrupt_in_the_read_back_counts_the_file(three, monkeypatch):
    """The interrupt lands as the copy is read back (its sha256 not yet
    compared): the file is complete at its destination, and is counted."""
    from lecode_memctl.core import migrate

    cwd, store = three
    real = migrate.read_regular
    fired = []

    def read(path, *a, **kw):
        if Path(path) == store / "notes" / "a.md" and not fired:   # (one signal)
            fired.append(path)
            raise KeyboardInterrupt
        return real(path, *a, **kw)

    monkeypatch.setattr(migrate, "read_regular", read)
    assert _interrupted_count(cwd) == _said(2)


def test_an_interrupt_as_the_writers_turn_ends_counts_the_file(three, monkeypatch):
    """The interrupt lands after the read-back, as the Markdown writers' turn
    is given back: the file is copied and verified, and is counted."""
    import contextlib

    from lecode_memctl.core import markdown

    cwd, store = three
    real = markdown.writing

    @contextlib.contextmanager
    def writing(st, *a, **kw):
        with real(st, *a, **kw):
            yield
        if (store / "notes" / "a.md").exists():
            raise KeyboardInterrupt

    monkeypatch.setattr(markdown, "writing", writing)
    assert _interrupted_count(cwd) == _said(2)


def test_an_interrupt_before_the_link_does_not_count_the_file(three, monkeypatch):
    """The interrupt lands while the temporary file is written: nothing is at
    notes/a.md's destination, and it is not counted."""
    from lecode_memctl.core import atomic

    cwd, store = three
    real = atomic._write_temp

    def write_temp(target, *a, **kw):
        if Path(target) == store / "notes" / "a.md":
            raise KeyboardInterrupt
        return real(target, *a, **kw)

    monkeypatch.setattr(atomic, "_write_temp", write_temp)
    assert _interrupted_count(cwd) == _said(1)
    assert not (store / "notes" / "a.md").exists()
    assert not [e for e in os.listdir(store / "notes")]


def test_a_destination_that_appeared_with_other_bytes_is_not_counted(three, monkeypatch):
    """The interrupt lands while a destination that appeared meanwhile (not
    memctl's copy: other bytes) is looked at: it is not counted."""
    from lecode_memctl.core import atomic, migrate

    cwd, store = three
    real_temp = atomic._write_temp
    real_state = migrate._dest_state

    def write_temp(target, *a, **kw):
        if Path(target) == store / "notes" / "a.md" and not Path(target).exists():
            put(Path(target), "the agent's\n")
        return real_temp(target, *a, **kw)

    fired = []

    def dest_state(dest, *a, **kw):
        if Path(dest) == store / "notes" / "a.md" and not fired:   # (one signal)
            fired.append(dest)
            raise KeyboardInterrupt
        return real_state(dest, *a, **kw)

    monkeypatch.setattr(atomic, "_write_temp", write_temp)
    # (after the plan, which looks at every destination too)
    assert _interrupted_count(
        cwd, lambda: monkeypatch.setattr(migrate, "_dest_state", dest_state)) == _said(1)
    assert (store / "notes" / "a.md").read_text() == "the agent's\n"


def test_a_destination_that_appeared_with_the_same_bytes_is_not_counted(three, monkeypatch):
    """The interrupt lands while a destination that appeared meanwhile with
    the planned bytes (another writer's, the link refused) is looked at: it
    is not this copy's, and is not counted."""
    from lecode_memctl.core import atomic, migrate

    cwd, store = three
    real_temp = atomic._write_temp
    real_state = migrate._dest_state
    fired = []

    def write_temp(target, *a, **kw):
        if Path(target) == store / "notes" / "a.md" and not Path(target).exists():
            put(Path(target), "notes/a.md\n")
        return real_temp(target, *a, **kw)

    def dest_state(dest, *a, **kw):
        if Path(dest) == store / "notes" / "a.md" and not fired:   # (one signal)
            fired.append(dest)
            raise KeyboardInterrupt
        return real_state(dest, *a, **kw)

    monkeypatch.setattr(atomic, "_write_temp", write_temp)
    assert _interrupted_count(
        cwd, lambda: monkeypatch.setattr(migrate, "_dest_state", dest_state)) == _said(1)


def test_the_cli_says_the_exact_count_after_an_interrupt(three, monkeypatch):
    from lecode_memctl.core import atomic

    cwd, store = three
    real = atomic.fsync_dir

    def sync(path):
        if (store / "notes" / "a.md").exists():
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(atomic, "fsync_dir", sync)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert r.stderr == f"memctl: error: interrupted; {_said(2)}\n"
    monkeypatch.setattr(atomic, "fsync_dir", real)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--yes")
    assert r.exit_code == 0, r.stderr
    assert "copied 1 of 1 file" in r.stdout


# ---------------------------------------------------------------- 3. where names the legacy store

@pytest.fixture
def nested(tmp_path, config_dir):
    """A repository app/ whose directory app/sub has a legacy store."""
    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    sub = repo / "sub"
    sub.mkdir()
    legacy = legacy_path(config_dir, sub)
    put(legacy / "MEMORY.md", "old memory\n")
    return repo, sub, legacy


def _where_json(*args: str) -> dict:
    import orjson

    r = run_cli(*args, "where", "--json")
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout_bytes)


def test_where_names_the_legacy_store_of_the_working_directory(nested, config_dir):
    """FORMAT.md lists the legacy (cwd-scoped) store among what 'memctl
    where prints'; neither the text nor --json showed it."""
    from .conftest import tree_hash

    repo, sub, legacy = nested
    before = tree_hash(config_dir)
    doc = _where_json("--project", str(sub))
    assert doc["legacy_store"] == str(legacy)
    assert doc["store"] == str(config_dir / "memory" / slug(str(repo)))
    r = run_cli("--project", str(sub), "where")
    assert r.exit_code == 0, r.stderr
    assert f"\nlegacy store:  {legacy}  (memory older lecode kept for this directory; " \
           "'memctl migrate-legacy' copies it)\n" in r.stdout, r.stdout
    # PATH, a file in it, stands for its directory
    doc = _where_path_json(sub / "f.txt")
    assert doc["legacy_store"] == str(legacy)
    assert tree_hash(config_dir) == before        # reads only


def _where_path_json(path: Path) -> dict:
    import orjson

    path.write_text("x\n")
    r = run_cli("where", "--json", str(path))
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout_bytes)


def test_where_has_no_legacy_store_where_there_is_none(nested, config_dir, tmp_path):
    repo, sub, legacy = nested
    # the project root's legacy slug is the project's own: its store, no legacy one
    doc = _where_json("--project", str(repo))
    assert doc["legacy_store"] is None
    assert "legacy store" not in run_cli("--project", str(repo), "where").stdout
    other = repo / "other"
    other.mkdir()
    assert _where_json("--project", str(other))["legacy_store"] is None
    # a symbolic link in its place is no store (never followed, never migrated)
    link = legacy_path(config_dir, other)
    link.symlink_to(legacy)
    assert _where_json("--project", str(other))["legacy_store"] is None
    # --store names no working directory
    assert _where_json("--store", str(legacy))["legacy_store"] is None


# ---------------------------------------------------------------- 4. the hint for held-back files

@pytest.fixture
def first_unreadable(tmp_path, config_dir, monkeypatch):
    """A repository whose working directory a/b has a legacy store (#1) and
    a/ another (#2); #1's MEMORY.md cannot be read (simulated: reading it is
    EACCES, as for a mode-000 file read by a user who is not root), and #2
    provides MEMORY.md and scratchpad.md."""
    import errno

    from lecode_memctl.core import migrate

    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    cwd = repo / "a" / "b"
    cwd.mkdir(parents=True)
    first = legacy_path(config_dir, cwd)
    second = legacy_path(config_dir, repo / "a")
    put(first / "MEMORY.md", "first\n")
    put(second / "MEMORY.md", "second\n")
    put(second / "scratchpad.md", "pad\n")
    real = migrate.read_regular

    def read(path, *a, **kw):
        if Path(path) == first / "MEMORY.md":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(migrate, "read_regular", read)
    return cwd, first, second, config_dir / "memory" / slug(str(repo))


HELD_1 = ("1 file held back for an earlier legacy store whose file could not be read (or "
          "its directory listed): nothing was compared; make that store's files readable and "
          "run again.\n")


@pytest.mark.parametrize("args", [("--dry-run",), ("--yes",)])
def test_a_file_held_back_for_an_unreadable_earlier_store_is_not_called_other_content(
        first_unreadable, args):
    """The hint said "1 file provided by an earlier legacy store with other
    content: the first store's wins, never merged" and offered 'memctl edit
    memory' to merge, when nothing was compared: the first store's file
    could not be read."""
    cwd, first, second, store = first_unreadable
    r = run_cli("--project", str(cwd), "migrate-legacy", *args)
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert "with other content" not in r.stdout, r.stdout
    assert "memctl edit" not in r.stdout and "To merge by hand" not in r.stdout, r.stdout
    assert HELD_1 in r.stdout, r.stdout
    assert "not copied: #1 MEMORY.md: cannot read: Permission denied\n" in r.stdout
    assert not (store / "MEMORY.md").exists()


def test_held_back_files_and_real_duplicates_are_counted_apart(first_unreadable):
    cwd, first, second, store = first_unreadable
    put(first / "notes" / "n.md", "first note\n")
    put(second / "notes" / "n.md", "second note\n")
    put(first / "scratchpad.md", "first pad\n")
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run")
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert HELD_1 in r.stdout, r.stdout
    assert ("2 files provided by an earlier legacy store with other content: the first "
            "store's wins, never merged; the legacy files are kept.\n") in r.stdout, r.stdout
    assert "  memctl edit note n\n" in r.stdout and "  memctl edit scratchpad\n" in r.stdout
    assert "memctl edit memory" not in r.stdout


def test_files_held_back_for_an_unlistable_directory_are_counted_apart(
        tmp_path, config_dir, monkeypatch):
    import errno

    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    cwd = repo / "a"
    cwd.mkdir()
    first = legacy_path(config_dir, cwd)
    put(first / "notes" / "x.md", "first\n")
    later = tmp_path / "later"
    for name in ("x.md", "y.md"):
        put(later / "notes" / name, "later\n")
    real = os.scandir

    def scandir(path=".", *a, **kw):
        if os.fspath(path) == os.fspath(first / "notes"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(os, "scandir", scandir)
    r = run_cli("--project", str(cwd), "migrate-legacy", "--dry-run", "--from", str(later))
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert ("2 files held back for an earlier legacy store whose files could not be read (or "
            "its directory listed): nothing was compared; make that store's files readable and "
            "run again.\n") in r.stdout, r.stdout
    assert "with other content" not in r.stdout and "memctl edit" not in r.stdout
