"""config, context, validate and history: a review of 2026-12-07 (rv71).

Each test failed before its fix: a config.toml of gigabytes read whole
(exit 70, MemoryError, under a memory limit); ``history --format plain``
without the revisions' reasons; U+2028 in ``history``'s text view taken
for a line break; ``config`` with a ``--config-dir`` that does not exist
(or is a file) showing the defaults, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from .conftest import run_cli

#: the bound of docs/FORMAT.md (core.config.MAX_CONFIG_BYTES)
MAX_CONFIG_BYTES = 1 << 20


def _rchar() -> int:
    """The bytes this process has read by read(2) so far (Linux)."""
    with open("/proc/self/io", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _config_with_store(tmp_path: Path) -> tuple[Path, Path]:
    from lecode_memctl.core.layout import store_for_project

    cfg, proj = tmp_path / "cfg", tmp_path / "proj"
    cfg.mkdir()
    proj.mkdir()
    store_for_project(cfg, proj).path.mkdir(parents=True)
    return cfg, proj


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads in /proc/self/io")
def test_a_config_larger_than_the_bound_is_refused_after_bound_plus_one_bytes(tmp_path):
    """A config.toml of 64 MiB of comments and one valid key was read
    whole and taken (exit 0); now it is refused, exit 2 as invalid TOML
    is, one line, and no more than MAX_CONFIG_BYTES + 1 of it read;
    validate reports it as config.invalid (exit 1)."""
    cfg, proj = _config_with_store(tmp_path)
    line = b"# " + b"x" * 77 + b"\n"
    (cfg / "config.toml").write_bytes(line * ((64 << 20) // len(line))
                                      + b"[memory]\nmax_bytes = 100\n")
    for args in (("config",), ("config", "--json"), ("context",)):
        before = _rchar()
        r = run_cli("--config-dir", str(cfg), "-C", str(proj), *args)
        read = _rchar() - before
        assert r.exit_code == 2, (args, r.stdout, r.stderr)
        if "--json" in args:
            err = orjson.loads(r.stdout_bytes)["error"]
            assert err["code"] == "usage" and "larger than 1 MiB" in err["message"]
        else:
            assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
            assert "config.toml: larger than 1 MiB" in r.stderr, r.stderr
        # (what else the command reads -- its modules, the store -- is far less)
        assert read < MAX_CONFIG_BYTES + (8 << 20), (args, read)
    before = _rchar()
    r = run_cli("--config-dir", str(cfg), "-C", str(proj), "--no-state", "validate", "--json")
    assert _rchar() - before < MAX_CONFIG_BYTES + (8 << 20)
    assert r.exit_code == 1, r.stderr
    (finding,) = [f for f in orjson.loads(r.stdout_bytes)["findings"]
                  if f["code"] == "config.invalid"]
    assert "larger than 1 MiB" in finding["message"]


def test_a_config_of_the_bound_exactly_is_read(tmp_path):
    from lecode_memctl.core.config import MAX_CONFIG_BYTES as bound

    assert bound == MAX_CONFIG_BYTES
    assert "larger than 1 MiB" in " ".join(run_cli("config", "--help").stdout.split())
    cfg, proj = _config_with_store(tmp_path)
    tail = b"[memory]\nmax_bytes = 100\n"
    (cfg / "config.toml").write_bytes(b"#" * (MAX_CONFIG_BYTES - len(tail) - 1) + b"\n" + tail)
    assert (cfg / "config.toml").stat().st_size == MAX_CONFIG_BYTES
    r = run_cli("--config-dir", str(cfg), "-C", str(proj), "config", "--json")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout_bytes)["max_bytes"]["value"] == 100


def test_a_3g_config_under_a_memory_limit_is_a_usage_error_not_memory_error(tmp_path):
    """``truncate -s 3G config.toml`` then ``memctl config`` (``context``,
    ``validate``) under ``ulimit -v``: exit 70, "internal error:
    MemoryError", before."""
    import resource

    cfg, proj = _config_with_store(tmp_path)
    with open(cfg / "config.toml", "wb") as fh:
        fh.truncate(3 << 30)            # sparse: no room taken

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = dict(os.environ)
    for args, code in ((("config",), 2), (("context",), 2), (("--no-state", "validate"), 1)):
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--config-dir", str(cfg),
                            "-C", str(proj), *args], capture_output=True, env=env,
                           preexec_fn=limit, timeout=120)
        err = p.stderr.decode("utf-8", "replace")
        out = p.stdout.decode("utf-8", "replace")
        assert p.returncode == code, (args, p.returncode, err)
        assert "MemoryError" not in err and "internal error" not in err
        assert "larger than 1 MiB" in (err if code == 2 else out), (args, err, out)


# ---------------------------------------------------------------- history

@pytest.fixture
def hstore(store) -> tuple[Path, dict[str, str]]:
    """A store of one transcript (s1, nine messages) and three facts: ``ls``
    whose text holds U+2028, ``nl`` whose text holds a newline, and ``two``
    corrected once, its revision 1's evidence (message 3) undone since."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.sessions import SessionStore

    fs = FactStore(store.facts_db)
    ss = SessionStore(store, exclusions=fs)
    with ss.create("s1") as w:
        for i in range(1, 10):
            w.append_message("user", f"message {i}")
    ids = {}
    for key, seq, text in (("ls", 1, "first\u2028second"), ("nl", 2, "first\nsecond"),
                           ("ps", 5, "first\u2029second"), ("nel", 6, "first\x85second")):
        ids[key] = fs.remember(text, ss.source_snapshot("s1", seq, seq).ref,
                               sessions=ss).fact.fact_id
    f = fs.remember("v1", ss.source_snapshot("s1", 3, 3).ref, sessions=ss).fact
    fs.correct(f.fact_id, "v2", expected_revision=1, ref=ss.source_snapshot("s1", 4, 4).ref,
               sessions=ss)
    ids["two"] = f.fact_id
    fs.close()
    with open(store.path / "sessions" / "s1.jsonl", "a") as fh:   # undo message 3
        fh.write('{"seq":10,"type":"event","event":"undo","target":[3,3]}\n')
    return store.path, ids


@pytest.mark.parametrize("fmt", ["plain", "github", "grid", "simple", "pipe"])
def test_history_tables_join_each_revisions_reason_to_its_status(hstore, fmt):
    """``history ID --format plain`` (any tabulate name) showed revision 1
    as ``hidden``, its reason dropped; the text view and ``facts`` tables
    show ``hidden (undone)``."""
    path, ids = hstore
    text = run_cli("--store", str(path), "--no-state", "history", ids["two"])
    assert text.exit_code == 0, text.stderr
    assert "hidden (undone)" in text.stdout.splitlines()[1], text.stdout
    r = run_cli("--store", str(path), "--no-state", "history", ids["two"], "--format", fmt)
    assert r.exit_code == 0, r.stderr
    (first,) = [line for line in r.stdout.splitlines() if " v1 " in f" {line} "]
    assert "hidden (undone)" in first, r.stdout
    (second,) = [line for line in r.stdout.splitlines() if " v2 " in f" {line} "]
    assert " valid " in second and "(" not in second, r.stdout
    # (the machine formats keep the two fields apart, as before)
    rows = [orjson.loads(line) for line in run_cli(
        "--store", str(path), "--no-state", "history", ids["two"], "--format", "jsonl"
    ).stdout_bytes.splitlines()]
    assert [(x["status"], x["reason"]) for x in rows] == [("hidden", "undone"), ("valid", None)]


def test_history_text_view_escapes_line_and_paragraph_separators(hstore):
    """``first\\u2028second`` and ``first\\nsecond`` printed the same two
    lines (str.splitlines breaks on U+2028, U+2029, and safe() left them
    raw); ``history --help``: "Texts are shown whole, escaped"."""
    path, ids = hstore

    def body(key: str) -> list[str]:
        r = run_cli("--store", str(path), "--no-state", "history", ids[key])
        assert r.exit_code == 0, r.stderr
        return r.stdout.splitlines()[2:]

    assert body("nl") == ["    first", "    second"]
    assert body("ls") == ["    first\\u2028second"]
    assert body("ps") == ["    first\\u2029second"]
    assert body("nel") == ["    first\\x85second"]
    # (a table cell escapes them as every control character)
    r = run_cli("--store", str(path), "--no-state", "history", ids["ls"], "--format", "plain")
    assert "first\\u2028second" in r.stdout and "\u2028" not in r.stdout


def test_safe_escapes_the_unicode_line_breaks():
    from lecode_memctl.cli.output import safe

    assert safe("a\u2028b\u2029c") == "a\\u2028b\\u2029c"
    assert safe("a\u2028b\nc", keep_newlines=True) == "a\\u2028b\nc"
    # every line break str.splitlines knows is escaped but the newline kept
    odd = "a\rb\x0bc\x0cd\x1ce\x1df\x1eg\x85h\u2028i\u2029j"
    assert safe(odd, keep_newlines=True).splitlines() == [safe(odd)]


def test_migrate_diff_keeps_a_line_separator_on_its_line(tmp_path, config_dir):
    """A legacy MEMORY.md line holding U+2028 was two diff lines, the first
    marked "No newline at end of file" mid-file (core: splitlines), and the
    text view split it again."""
    from .conftest import make_repo
    from .test_spec_migrate import legacy_path, put

    repo = make_repo(Path(os.path.realpath(tmp_path)) / "app")
    (repo / "a").mkdir()
    from lecode_memctl.core.identity import slug

    put(config_dir / "memory" / slug(str(repo)) / "MEMORY.md", "# Project\n- other\n")
    put(legacy_path(config_dir, repo / "a") / "MEMORY.md", "# Project\n- first\u2028second\n")
    args = ("--project", str(repo / "a"), "migrate-legacy", "--dry-run", "--diff")
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    assert "No newline" not in r.stdout, r.stdout
    assert "+- first\\u2028second\n" in r.stdout and "\u2028" not in r.stdout, r.stdout
    doc = orjson.loads(run_cli(*args, "--json").stdout_bytes)
    (diff,) = [i["diff"] for i in doc["items"] if i["diff"] is not None]
    assert "+- first\u2028second\n" in diff and "No newline" not in diff, diff


# ---------------------------------------------------------------- config --config-dir

def test_config_with_a_config_dir_option_that_does_not_exist_is_exit_3(tmp_path):
    """``memctl --config-dir /tmp/typo config`` showed every default, exit
    0 (only --json's config_file_exists said false); README ("Cron"): a
    --config-dir given on the command line that does not exist is exit 3."""
    typo = tmp_path / "typo"
    r = run_cli("--config-dir", str(typo), "config")
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr == f"memctl: error: --config-dir {typo}: no such directory\n", r.stderr
    j = run_cli("--config-dir", str(typo), "config", "--json")
    assert j.exit_code == 3
    assert orjson.loads(j.stdout_bytes)["error"]["code"] == "not_found"
    # (projects says the same words)
    assert run_cli("--config-dir", str(typo), "projects").stderr == r.stderr


def test_config_with_a_config_dir_option_that_is_a_file_is_exit_2(tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    r = run_cli("--config-dir", str(f), "config")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr == f"memctl: error: --config-dir {f}: not a directory\n", r.stderr
    assert run_cli("--config-dir", str(f), "projects").stderr == r.stderr


def test_config_dirs_of_the_environment_that_do_not_exist_are_still_no_file(tmp_path, config_dir):
    """A config directory the environment or the default names that does
    not exist is a machine where lecode never ran: the defaults, exit 0;
    so is an existing --config-dir with no config.toml."""
    assert not config_dir.exists()
    r = run_cli("config", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["config_file_exists"] is False and doc["config_dir_source"] == "LECODE_CONFIG_DIR"
    f = tmp_path / "file"
    f.write_text("")
    assert run_cli("config", env={"LECODE_CONFIG_DIR": str(f)}).exit_code == 0
    (tmp_path / "empty").mkdir()
    r = run_cli("--config-dir", str(tmp_path / "empty"), "config", "--json")
    assert r.exit_code == 0 and orjson.loads(r.stdout_bytes)["config_file_exists"] is False
