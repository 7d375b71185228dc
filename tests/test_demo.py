"""memctl demo: builds through the core's writers, tours the commands, finds the planted problem."""

from __future__ import annotations

import os

from lecode_memctl.core.audit import validate_store
from lecode_memctl.core.demo import build_demo

from .conftest import run_cli, tree_hash


def test_demo_tour_in_order_and_leaves_real_config_alone(tmp_path, config_dir):
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text("[memory]\nmax_bytes = 4096\n")
    before = tree_hash(config_dir)
    cwd = os.getcwd()
    into = tmp_path / "demo"
    r = run_cli("demo", "--into", str(into))
    assert r.exit_code == 0, r.stdout + r.stderr
    assert os.getcwd() == cwd
    assert os.environ["LECODE_CONFIG_DIR"] == str(config_dir)
    assert tree_hash(config_dir) == before
    commands = [line for line in r.stdout.splitlines() if line.startswith("$ memctl ")]
    assert [c.split()[2] for c in commands] == [
        "where", "facts", "recall", "validate", "migrate-legacy", "context"]
    assert "$ memctl migrate-legacy --dry-run" in commands
    assert "$ memctl context --explain" in commands
    assert "[exit status 1 (the planted problem, as expected)]" in r.stdout
    assert "fact.stale" in r.stdout
    assert "UNEXPECTED" not in r.stdout
    assert (into / "config").is_dir()  # --into keeps it


def test_demo_store_has_exactly_the_planted_problem(tmp_path):
    d = build_demo(tmp_path / "d")
    findings, summary = validate_store(d.store)
    serious = [f for f in findings if f.severity != "info"]
    assert [(f.code, f.fact_id, f.session_id) for f in serious] == [
        ("fact.stale", d.planted, "demo-beta")]
    sessions = sorted(p.name for p in (d.store.path / "sessions").glob("*.jsonl"))
    assert sessions == ["demo-alpha.jsonl", "demo-beta.jsonl", "demo-gamma.jsonl"]
    text = (d.store.path / "sessions" / "demo-alpha.jsonl").read_text()
    for needle in ('"event":"undo"', '"event":"redo"', '"event":"compact"', '"event":"learning"',
                   '"event":"memory_usage"', '"type":"binary"', '"role":"tool"'):
        assert needle in text
    assert '"event":"clear"' in (d.store.path / "sessions" / "demo-beta.jsonl").read_text()
    assert d.worktree.joinpath(".git").is_file()


def test_demo_into_nonempty_directory_is_a_conflict(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    r = run_cli("demo", "--into", str(target))
    assert r.exit_code == 4
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1
    assert (target / "keep.txt").read_text() == "mine"
    assert sorted(os.listdir(target)) == ["keep.txt"]


def test_demo_temporary_directory_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    r = run_cli("demo")
    assert r.exit_code == 0, r.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("memctl-demo-")]
    assert "was removed" in r.stdout


def test_a_git_that_fails_is_named_not_called_missing(tmp_path, monkeypatch):
    """A git on PATH whose commands fail (a broken config, say) made the demo
    say "git not found"; it now says which command failed and what it said,
    and the demo still builds its layout by hand and passes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\necho 'fatal: bad config line 1 in file /dev/null' >&2\nexit 128\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    r = run_cli("demo", "--into", str(tmp_path / "demo"))
    assert r.exit_code == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.endswith("(git layout written by hand: git failed: 'git init' exited 128: "
                          "fatal: bad config line 1 in file /dev/null).")
    assert "git not found" not in r.stdout


def test_no_git_on_path_is_git_not_found(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None)
    d = build_demo(tmp_path / "d")
    assert (d.used_git, d.git_problem) == (False, "git not found")


def test_demo_compactions_cover_every_visible_message_below_their_end(demo_template):
    """The reference design: a summary covers only complete exchanges, so a
    lineage leaves no visible message out below the last one it covers
    (before 2026-12-07 the demo's second chunk left out the redone user
    message of its exchange)."""
    import orjson

    path = demo_template.store.path / "sessions" / "demo-alpha.jsonl"
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    messages = {r["seq"] for r in records if r.get("type") == "message"}
    undone: set[int] = set()
    for r in records:
        if r.get("type") == "event" and r.get("event") in ("undo", "redo"):
            (undone.update if r["event"] == "undo" else undone.difference_update)(r["target"])
    compacts = [r for r in records if r.get("type") == "event" and r.get("event") == "compact"]
    assert len(compacts) == 2
    for c in compacts:
        covered = {s for chunk in c["lineage"] for s in chunk["seqs"]}
        assert covered == {s for s in messages - undone if s <= max(covered)}, c["lineage"]


def test_the_demo_leaves_the_users_state_directory_alone(tmp_path, monkeypatch):
    """A fresh-eyes review: 'memctl demo' (removed afterwards) left a mark
    of its validate in ~/.local/state/lecode-memctl, pointing at the
    deleted demo.  Its state now lives in the demo directory."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    r = run_cli("demo")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert not state.exists() or not any(state.rglob("*.json")), list(state.rglob("*"))
    assert os.environ["XDG_STATE_HOME"] == str(state)
    r = run_cli("demo", "--into", str(tmp_path / "d"))
    assert r.exit_code == 0
    assert not state.exists() or not any(state.rglob("*.json"))
    assert any((tmp_path / "d" / "state").rglob("*.json"))
