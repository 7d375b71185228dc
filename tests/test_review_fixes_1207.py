"""Fixes of the review of 2026-12-07's commits (second pass)."""

from __future__ import annotations

import os

import pytest

from . import outkit
from .conftest import run_cli, tree_hash


@pytest.fixture
def good(config_dir, tmp_path):
    store, _ids = outkit.build(config_dir, tmp_path / "proj", facts=3)
    return store


@pytest.mark.parametrize("fmt", [(), ("--json",)])
def test_list_codes_output_is_refused_inside_a_store(config_dir, good, tmp_path, fmt):
    """validate --list-codes --output FILE wrote FILE inside the store named
    (and with --all-projects inside <config>/memory/, where the next
    validate found it as layout.unexpected_file): no store was fenced.  It
    is refused as the report is, exit 2, and nothing is written."""
    before = tree_hash(config_dir)
    r = run_cli("--store", str(good.path), "--no-state", "validate", "--list-codes", *fmt,
                "--output", str(good.path / "codes.txt"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert "inside the store" in r.stderr
    r = run_cli("--no-state", "validate", "--all-projects", "--list-codes", *fmt,
                "--output", str(config_dir / "memory" / "codes.txt"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    r = run_cli("-C", str(tmp_path / "proj"), "--no-state", "validate", "--list-codes", *fmt,
                "--output", str(good.path / "codes.txt"))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert tree_hash(config_dir) == before
    # outside every store: written as before
    target = tmp_path / "codes.txt"
    r = run_cli("--store", str(good.path), "--no-state", "validate", "--list-codes", *fmt,
                "--output", str(target))
    assert r.exit_code == 0, r.stderr
    assert target.read_text()


def test_a_store_removed_after_the_listed_check_is_left_out(config_dir, good, tmp_path,
                                                            monkeypatch):
    """A store removed between --all-projects' look at the entry and the
    audit's own look at it stopped the run with exit 3 and no --output file
    (the second look's NotFound was not taken for 'gone').  It is left out,
    as a store gone before its audit began."""
    import shutil

    from lecode_memctl.core import layout

    from .test_validate_listed_1207 import _prom, _small_store

    bad = config_dir / "memory" / "bad-0123456789ab"
    _small_store(bad)
    real = layout.Store.require
    calls: dict = {}

    def require(self):  # noqa: ANN001, ANN202
        n = calls[self.path] = calls.get(self.path, 0) + 1
        out = real(self)
        if self.path.name.startswith("bad-") and n == 1:
            shutil.rmtree(self.path)   # removed right after the listed check
        return out

    monkeypatch.setattr(layout.Store, "require", require)
    target = tmp_path / "m.prom"
    r = run_cli("--no-state", "validate", "--all-projects", "--no-progress", "--format",
                "prometheus", "--output", str(target))
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert _prom(target) == {good.slug: 1}


@pytest.mark.parametrize("toml,said,not_said", [
    ("Memory = 5\n", "key Memory ", "table"),
    ('Memory = "x"\n', "key Memory ", "table"),
    ("[Memory]\nmax_bytes = 1\n", "table [Memory] is not [memory]", "key"),
])
def test_a_top_level_value_spelled_like_memory_is_called_a_key(config_dir, toml, said, not_said):
    """'Memory = 5' at the top of config.toml was noted as "table [Memory]
    is not [memory]": it is no table; it is noted as key Memory."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(toml)
    r = run_cli("config")
    assert r.exit_code == 0, r.stderr
    (note,) = r.stderr.splitlines()
    assert said in note and not_said not in note and note.endswith("; ignored"), note


def test_a_blank_file_is_not_read_on_past_the_bound(tmp_path, monkeypatch):
    """context read a MEMORY.md blank to its end wholly, on every build (a
    500 MB file of newlines: 0.55 s a build).  Past the head it looks on at
    most markdown.LOOK_ON_AT_MOST bytes; a file blank that far that goes on
    is taken as going on: a part, cut with its marker, its omitted bytes
    counted from the file's size."""
    import os

    from lecode_memctl.core import markdown
    from lecode_memctl.core.context import READ_WHOLE

    from .test_context_1207 import _marker_n, _section

    assert markdown.LOOK_ON_AT_MOST == 8 << 20
    read = []
    real_read = os.read

    def counted(fd, n):  # noqa: ANN001, ANN202
        data = real_read(fd, n)
        read.append(len(data))
        return data

    size = READ_WHOLE + markdown.LOOK_ON_AT_MOST + (3 << 20)
    data = b"\n" * size
    store = tmp_path / "store"
    store.mkdir()
    (store / "MEMORY.md").write_bytes(data)
    monkeypatch.setattr(markdown.os, "read", counted)
    sec = _section(tmp_path, None, b"- [ ] task\n")
    monkeypatch.undo()
    assert sum(read) <= READ_WHOLE + markdown.LOOK_ON_AT_MOST + 1 + 64, sum(read)
    (part, _scratch) = sec.parts
    assert part.name == "MEMORY.md" and part.truncated and part.source_bytes == size
    assert part.omitted_bytes == _marker_n(sec.text)
    assert sec.text.endswith("- [ ] task\n") and sec.bytes <= sec.max_bytes
    # within the bound, a file blank to its end is still no part
    (store / "MEMORY.md").write_bytes(b"\n" * (READ_WHOLE + markdown.LOOK_ON_AT_MOST))
    sec = _section(tmp_path, None, b"- [ ] task\n")
    assert [p.name for p in sec.parts] == ["scratchpad.md"]


def test_no_owner_when_proc_is_not_this_processs(monkeypatch):
    """In a pid namespace whose /proc is another's (unshare -p without
    --mount-proc) /proc/<getpid()> is an unrelated process: its start time
    named the private directory, and when that process exited the next
    reader removed a live reader's copy.  The owner is known only when
    /proc/self is this process (its pid field and link are os.getpid());
    otherwise None: the directory is named without it, and nothing swept."""
    import os

    from lecode_memctl.core import snapshot

    if snapshot._owner() is None:
        pytest.skip("no /proc here")
    # getpid() as a namespace's would say it: the pid of another live process
    other = os.getppid()
    monkeypatch.setattr(snapshot, "_owners", {})
    monkeypatch.setattr(snapshot.os, "getpid", lambda: other)
    assert snapshot._owner() is None
    swept = []
    monkeypatch.setattr(snapshot.os, "scandir", lambda p: swept.append(p))
    snapshot._sweep("/nonexistent-dir-for-the-test")
    assert swept == []


def test_no_owner_in_an_unshared_pid_namespace_without_its_proc(tmp_path):
    """The same, in a real pid namespace (skipped where unshare -Urpf is
    not allowed); with its own /proc mounted the owner is known."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    code = ("from lecode_memctl.core import snapshot; import os; "
            "print(snapshot._owner() is None, os.getpid())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    runs = {}
    for mount in ([], ["--mount-proc"]):
        r = subprocess.run(["unshare", "-Urpf", *mount, sys.executable, "-c", code],
                           capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0:
            pytest.skip(f"unshare -Urpf not allowed here: {r.stderr.strip()}")
        runs[bool(mount)] = r.stdout.split()
    assert runs[False][0] == "True", runs
    assert runs[True] == ["False", "1"], runs


# ---------------------------------------------------------------- note names: 248 bytes to write, 252 to read

LONG = "中" * 83            # 249 bytes: <name>.md fits 255, <name>.md.bak does not


def _long_note_store(tmp_path):
    from lecode_memctl.core import open_project

    store = tmp_path / "s"
    with open_project(store=store) as p:   # a store with its layout
        p.sessions  # noqa: B018
    (store / "notes").mkdir(parents=True, exist_ok=True)
    (store / "notes" / f"{LONG}.md").write_text("kept\n")
    return store


def test_an_existing_note_of_249_bytes_is_read(tmp_path):
    """A note whose name is 249..252 bytes (made before the 248-byte rule,
    or by another tool) was listed but 'notes NAME' refused it, exit 2:
    reading makes no .bak.  It is read; writing it is refused, exit 2,
    naming the backup, and nothing is written."""
    store = _long_note_store(tmp_path)
    r = run_cli("--store", str(store), "notes", LONG)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "kept\n"
    from lecode_memctl.core import markdown

    assert markdown.read_note(store_at_path(store), LONG).text == "kept\n"
    before = tree_hash(store)
    r = run_cli("--store", str(store), "edit", "note", LONG, env={"EDITOR": "true"})
    assert r.exit_code == 2 and ".md.bak" in r.stderr, r.stderr
    with pytest.raises(Exception) as exc:
        markdown.write(store_at_path(store), markdown.note_target(LONG, reading=True), "x\n")
    assert ".md.bak" in str(exc.value)
    assert tree_hash(store) == before
    # 252 bytes ('日' * 84) is still readable; 253 never ('<name>.md' > 255)
    from lecode_memctl.core.errors import UsageError

    assert markdown.check_note_name("日" * 84) == "日" * 84
    with pytest.raises(UsageError):
        markdown.check_note_name("日" * 84 + "a")
    with pytest.raises(UsageError):
        markdown.check_note_name(LONG, writing=True)
    with pytest.raises(UsageError):
        markdown.note_target(LONG)    # (the writing rule unless told)


def store_at_path(path):
    from lecode_memctl.core.layout import store_at

    return store_at(path)


def test_an_existing_note_of_249_bytes_is_in_the_layout_exported_and_migrated(tmp_path,
                                                                              config_dir):
    """validate reported it as layout.unexpected_file, export left it out
    (not_in_layout) and migrate-legacy skipped it ('not a valid note
    name'): its content dropped out of bundles and migrations.  It is a
    note for all of them; migration copies it (no .bak: it never
    overwrites)."""
    import tarfile

    from lecode_memctl.core import migrate

    store = _long_note_store(tmp_path)
    r = run_cli("--store", str(store), "--no-state", "validate", "--json")
    assert "layout.unexpected_file" not in r.stdout, r.stdout
    out = tmp_path / "b.tar"
    r = run_cli("--store", str(store), "export", "--output", str(out))
    assert r.exit_code == 0, r.stderr
    with tarfile.open(out) as tf:
        assert any(m.name.endswith(f"notes/{LONG}.md") for m in tf.getmembers())
    kind, _reason, detail = migrate._classify_name(f"notes/{LONG}.md", ["notes", f"{LONG}.md"])
    assert kind == "markdown", detail
