"""Start-up stays light: what ``--version``, each TAB of completion and the plain
read commands import (checked in a fresh subprocess through ``sys.modules``).

Every TAB of shell completion and every cron call runs memctl from scratch, so
``--version`` and completion must import neither rich nor tabulate nor sqlite3,
and the Markdown read commands never import sqlite3 (nor tabulate when they print
no table).  ``--help`` may use rich.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("rich", "tabulate", "sqlite3", "_sqlite3", "detect_secrets", "requests")

PROBE = r"""
import json, sys
from lecode_memctl.cli.main import main
args = json.loads(sys.argv[1])
try:
    rc = main(args)
except SystemExit as exc:   # completion ends with sys.exit()
    rc = exc.code
sys.stdout.flush()
with open(sys.argv[2], "w") as f:
    json.dump({"rc": rc, "modules": sorted(sys.modules)}, f)
"""


def probe(tmp_path: Path, args: list[str], env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[int, set[str], str]:
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("_MEMCTL", "_TYPER", "COMP_")):
            del e[k]
    e.update(env or {})
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), str(out)],
                          capture_output=True, text=True, env=e, timeout=60,
                          cwd=cwd or tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    return doc["rc"], set(doc["modules"]), proc.stdout


def loaded(modules: set[str], names) -> list[str]:
    return sorted(m for m in modules for n in names if m == n or m.startswith(n + "."))


def test_version_imports_nothing_heavy(tmp_path):
    rc, mods, out = probe(tmp_path, ["--version"])
    assert rc == 0
    assert out.startswith("memctl ")
    assert loaded(mods, HEAVY) == []
    # the fast path does not even build the command tree
    assert loaded(mods, ["typer"]) == []


COMPLETIONS = {
    "bash": {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl s", "COMP_CWORD": "1"},
    "zsh": {"_MEMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "memctl s"},
    "fish": {"_MEMCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "memctl s",
             "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
    # completing an option of a command loads that command's parameters too
    "bash-option": {"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl where --",
                    "COMP_CWORD": "2"},
}


@pytest.mark.parametrize("shell", sorted(COMPLETIONS))
def test_completion_imports_nothing_heavy(tmp_path, shell):
    rc, mods, out = probe(tmp_path, [], env=COMPLETIONS[shell])
    assert rc == 0
    assert out.strip(), "the completion request answered nothing"
    if shell != "bash-option":
        assert "show" in out or "search" in out
    assert loaded(mods, HEAVY) == []
    # cli/main.py skips typer's value coercion while completing (nothing runs),
    # which would otherwise import pydantic on every TAB
    assert loaded(mods, ["pydantic", "pydantic_core"]) == []


@pytest.fixture
def store(tmp_path) -> Path:
    s = tmp_path / "store"
    s.mkdir(mode=0o700)
    (s / "MEMORY.md").write_text("# Memory\n\n- the build uses make\n")
    (s / "notes").mkdir(mode=0o700)
    (s / "notes" / "deploy.md").write_text("ssh then make deploy\n")
    (s / "daily").mkdir(mode=0o700)
    (s / "daily" / "2026-01-02.md").write_text("deployed v2\n")
    return s


def test_where_is_plain_text_and_light(tmp_path):
    rc, mods, out = probe(tmp_path, ["where"])
    assert rc == 0
    assert "store:" in out
    assert "\x1b" not in out
    assert loaded(mods, ["sqlite3", "_sqlite3", "tabulate", "rich"]) == []


def test_show_is_light(tmp_path, store):
    rc, mods, out = probe(tmp_path, ["--store", str(store), "show"])
    assert rc == 0
    assert "the build uses make" in out
    assert loaded(mods, ["sqlite3", "_sqlite3", "tabulate"]) == []


# argv -> a line of what the command prints on the store above
MARKDOWN_AND_CONFIG = {
    ("config",): "memory.max_bytes",
    ("log", "2026-01-02"): "deployed v2",
    ("notes", "deploy"): "ssh then make deploy",
    ("search", "make"): "notes/deploy.md:1: ssh then make deploy",
    ("notes",): "deploy",
}


@pytest.mark.parametrize("args", list(MARKDOWN_AND_CONFIG), ids=" ".join)
def test_markdown_and_config_commands_do_not_import_sqlite(tmp_path, store, args):
    """Each command must exist and do its work (a missing command or a failing
    one is a failure, not a skip) without importing sqlite3."""
    rc, mods, out = probe(tmp_path, ["--store", str(store), *args])
    assert rc == 0, (args, rc, out)
    assert MARKDOWN_AND_CONFIG[args] in out, (args, out)
    assert loaded(mods, ["sqlite3", "_sqlite3"]) == []


def test_console_script_version_is_light(tmp_path):
    """The real console script, under -X importtime: no heavy module at all."""
    script = Path(sys.executable).with_name("memctl")
    # the suite runs from an install (pip install -e '.[test]'), which puts the
    # console script next to the interpreter: its absence is a packaging bug
    assert script.exists(), f"no console script {script}: is [project.scripts] memctl declared?"
    proc = subprocess.run([sys.executable, "-X", "importtime", str(script), "--version"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("memctl ")
    imported = {ln.split("|")[-1].strip() for ln in proc.stderr.splitlines() if "|" in ln}
    assert loaded(imported, [*HEAVY, "typer"]) == []



def test_grep_does_not_import_the_secret_detectors(tmp_path, store):
    """detect-secrets (and the requests it pulls in) loads only in secrets/redact."""
    rc, mods, _out = probe(tmp_path, ["--store", str(store), "grep", "make"])
    assert rc in (0, 1)
    assert loaded(mods, ["detect_secrets", "requests"]) == []


def test_the_collector_threshold_is_memctls_only_in_its_own_process(monkeypatch):
    """main() run as the process (the console script: no argv) raises the
    cyclic collector's first threshold (a collection every few hundred facts
    found next to nothing); main(ARGS), in another program's process, leaves
    that program's collector as it was."""
    import gc

    from lecode_memctl.cli.main import GC_THRESHOLD, main

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        assert main(["--version"]) == 0
        assert gc.get_threshold() == (700, *before[1:])
        monkeypatch.setattr(sys, "argv", ["memctl", "--version"])
        assert main() == 0
        assert gc.get_threshold() == (GC_THRESHOLD, *before[1:])
    finally:
        gc.set_threshold(*before)


FROZEN = r"""
import gc, json, sys
from lecode_memctl.cli.main import main
from lecode_memctl.core.facts import FactStore
sys.argv = ["memctl", *json.loads(sys.argv[1])]
before = gc.get_freeze_count()
during = []
opened = FactStore.__dict__["open_readonly"].__func__

def open_readonly(cls, *a, **k):   # the command at work: what is frozen by then
    during.append(gc.get_freeze_count())
    return opened(cls, *a, **k)

FactStore.open_readonly = classmethod(open_readonly)
rc = main()
sys.stdout.flush()
print(json.dumps({"rc": rc, "before": before, "during": during,
                  "after": gc.get_freeze_count(),
                  "threshold": gc.get_threshold()[0]}), file=sys.stderr)
"""


def test_memctls_own_process_freezes_its_imports_and_tree(tmp_path, store):
    """Run as the process, main() freezes what exists once the command tree
    is built (the imports, the tree: alive until the exit), so neither a
    collection during the command nor the interpreter's at its exit walks
    them; the command's own objects are made after it, and stay collectable."""
    proc = subprocess.run([sys.executable, "-c", FROZEN,
                           json.dumps(["--store", str(store), "facts"])],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    doc = json.loads(proc.stderr.strip().splitlines()[-1])
    assert doc["rc"] == 0, proc.stderr
    assert doc["before"] == 0
    # typer, click and memctl's modules frozen before the command was at
    # work, and nothing frozen since (the command's objects stay collectable)
    assert doc["during"] and all(n > 1000 for n in doc["during"])
    assert doc["after"] <= min(doc["during"])
    from lecode_memctl.cli.main import GC_THRESHOLD

    assert doc["threshold"] == GC_THRESHOLD


def test_main_with_args_freezes_nothing(store):
    """main(ARGS), in another program's process (the tests), freezes none of
    that program's objects."""
    import gc

    from lecode_memctl.cli.main import main

    before = gc.get_freeze_count()
    assert main(["--store", str(store), "facts"]) == 0
    assert gc.get_freeze_count() == before


@pytest.mark.parametrize("args", [["facts"], ["validate", "-q"], ["facts", "--all", "--format",
                                                                 "jsonl"]], ids=" ".join)
def test_a_small_store_loads_no_pickle(tmp_path, demo_template, args):
    """pickle carries a split listing's rows (and validate's statuses) to
    and from its child, which only a store of split.SPLIT_LEAST facts or
    more gets: on the demo store those commands do not import it (2-3 ms
    of a 0.1 s command)."""
    from .builders import copy_demo

    demo = copy_demo(demo_template, tmp_path / "demo")
    rc, mods, _out = probe(tmp_path, ["--store", str(demo), *args])
    assert rc in (0, 1)
    assert loaded(mods, ["pickle", "_pickle"]) == []


def test_validate_does_not_load_the_listings_module(tmp_path, demo_template):
    """validate's fact pass needs the evaluated statuses (sourceref), not
    the listing, pages and reports of factview (about 3 ms of imports)."""
    from .builders import copy_demo

    demo = copy_demo(demo_template, tmp_path / "demo")
    rc, mods, _out = probe(tmp_path, ["--store", str(demo), "validate", "-q"])
    assert rc in (0, 1)
    assert loaded(mods, ["lecode_memctl.core.factview"]) == []
