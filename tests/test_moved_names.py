"""Rarely used classes live in modules of their own (core/_lazy.py): a frozen
dataclass costs about a millisecond to create, at every start-up of every
command that imports its module.  The module each name came from still
offers it (module ``__getattr__``), and the read commands do not import the
new homes."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_startup import probe

C = "lecode_memctl.core."
# (old module, new home, the names the old module offers from there)
MOVED = [
    (C + "markdown", C + "markdown_search", (
        "SearchHit", "SearchResult", "SearchRun", "SkippedFile", "compile_pattern", "iter_search",
        "search", "stream_search")),
    (C + "markdown", C + "markdown_notes", ("NoteInfo", "list_notes")),
    (C + "layout", C + "inventory", (
        "LayoutItem", "StoreEntry", "inventory", "store_dirs", "store_entries")),
    (C + "facts", C + "factresults", ("ForgetPlan", "RememberResult")),
    (C + "config", C + "memory_config", (
        "ConfigProblem", "MemoryConfig", "Setting", "load_memory_config")),
    (C + "paging", C + "pagedata", ("Page",)),
    (C + "sessions", C + "sessiondata", ("SessionInfo", "Snapshot")),
    (C + "sessions", C + "scanitem", ("ScanItem",)),
    (C + "rowmodel", C + "rowtables", (
        "Field", "RowModel", "FACT", "SESSION", "NOTE", "HIT", "REVISION", "USAGE", "PROJECT",
        "FINDING", "SUMMARY", "CODE", "PLAN_ITEM", "SETTING", "MATCH", "MATCH_COUNT", "SECRET",
        "SECRETS_SCAN", "REWRITE", "FACT_CHECK", "PROBLEM", "MODELS", "schema_document",
        "check_rows")),
]


@pytest.mark.parametrize(("old", "home", "names"), MOVED, ids=lambda v: v if isinstance(v, str) else "")
def test_moved_names_are_offered_where_they_were(old, home, names):
    probe = (
        "import importlib, json, sys\n"
        f"old = importlib.import_module({old!r})\n"
        f"before = {home!r} in sys.modules\n"
        f"from {old} import {', '.join(names)}\n"
        f"home = sys.modules[{home!r}]\n"
        f"same = all(getattr(old, n) is getattr(home, n) for n in {names!r})\n"
        "print(json.dumps([before, same]))\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # importing the old module does not import the new home; a moved name does
    assert json.loads(r.stdout) == [False, True]


@pytest.mark.parametrize("old", sorted({m[0] for m in MOVED}))
def test_an_unknown_name_is_still_an_attribute_error(old):
    mod = importlib.import_module(old)
    with pytest.raises(AttributeError, match="no_such_name"):
        mod.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec(f"from {old} import no_such_name", {})


@pytest.mark.parametrize("old", ["lecode_memctl.core.facts", "lecode_memctl.core.sessions"])
def test_star_import_still_gives_every_name_of_all(old):
    ns: dict[str, object] = {}
    exec(f"from {old} import *", ns)
    assert {n for n in importlib.import_module(old).__all__ if n not in ns} == set()


@pytest.fixture
def store(tmp_path) -> Path:
    s = tmp_path / "store"
    s.mkdir(mode=0o700)
    (s / "MEMORY.md").write_text("# Memory\n\n- the build uses make\n")
    (s / "notes").mkdir(mode=0o700)
    (s / "notes" / "deploy.md").write_text("ssh then make deploy\n")
    return s


# argv -> the core modules that command must not import
NOT_IMPORTED = {
    ("show",): ["markdown_search", "inventory", "factresults", "sessiondata", "pagedata",
                "markdown_notes", "rowmodel", "scanitem"],
    ("notes",): ["markdown_search", "inventory", "factresults", "sessiondata", "pagedata",
                 "markdown", "scanitem"],
    ("facts",): ["markdown_search", "inventory", "factresults", "sessiondata", "pagedata", "markdown",
                 "scanitem"],
    ("context",): ["markdown_search", "inventory", "factresults", "sessiondata", "pagedata",
                   "markdown_notes", "rowtables", "scanitem"],
    ("validate", "-q"): ["markdown_search", "inventory", "factresults", "sessiondata", "pagedata", "markdown",
                          "memory_config", "rowtables", "scanitem"],
}


@pytest.mark.parametrize("args", list(NOT_IMPORTED), ids=" ".join)
def test_read_commands_do_not_import_the_moved_classes(tmp_path, store, args):
    rc, modules, out = probe(tmp_path, ["--store", str(store), *args])
    assert rc in (0, 1), (args, out)   # validate: 1 when it finds problems
    assert "lecode_memctl.core.layout" in modules   # the probe ran the command
    unwanted = {f"lecode_memctl.core.{m}" for m in NOT_IMPORTED[args]}
    assert sorted(unwanted & set(modules)) == []


def _lazy_lookups(tmp_path, monkeypatch, n: int) -> list[str]:
    """The names the moved-name modules' ``__getattr__`` was asked for by
    both audits (default and --deep) and a whole-store listing of a store of
    ``n`` facts, each of which the three find valid."""
    from lecode_memctl.core import config, facts, layout, markdown, paging, sessions
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.factview import iter_fact_rows
    from lecode_memctl.core.layout import store_at

    from .test_engine import build

    recs = [{"seq": s, "type": "message", "role": "user", "content": f"m{s}"} for s in range(1, 41)]
    spec = {"sessions": {"s0": recs, "s1": recs}, "damage": {"s0": None, "s1": None},
            "damage_at": {"s0": 1, "s1": 1},
            "facts": [(f"{i:016x}", [(f"s{i % 2}", [1 + i % 40], "right")])
                      for i in range(n)],
            "excluded": {}, "generation": 0}
    path = build(tmp_path / str(n), spec)
    calls: list[str] = []
    with monkeypatch.context() as mp:
        for mod in (config, facts, layout, markdown, paging, sessions):
            real = mod.__getattr__

            def counting(name, real=real):  # noqa: ANN001, ANN202
                calls.append(name)
                return real(name)
            mp.setattr(mod, "__getattr__", counting)
        for deep in (False, True):
            audit = Audit(store_at(path), deep=deep, parallel=False, now=1.9e9)
            found = [f for f in audit.run() if f.code.startswith("fact.")]
            assert found == [] and audit.summary.facts["valid"] == n
        with facts.FactStore.open_readonly(store_at(path).facts_db) as fs:
            rows = list(iter_fact_rows(fs, sessions.SessionStore(store_at(path), exclusions=fs)))
    assert [r["status"] for r in rows] == ["valid"] * n
    return calls


def test_a_whole_store_audit_does_not_look_names_up_through_the_lazy_getattr(tmp_path, monkeypatch):
    """A module that offers moved names has a module ``__getattr__``, which
    every ``from module import name`` inside a function calls (the import
    machinery asks the module for ``__path__``) and which raises an
    AttributeError each time: in a function run once per reference that was
    a microsecond per reference.  The audits and the engine behind
    ``facts`` stay off that path in their per-reference loops: twice the
    facts (and references) make not one lookup more (those once per run or
    per table, a few dozen, are no cost)."""
    small = _lazy_lookups(tmp_path, monkeypatch, 400)
    large = _lazy_lookups(tmp_path, monkeypatch, 800)
    assert len(small) < 100, sorted(set(small))
    assert len(large) == len(small), sorted(set(large))


def test_the_public_dataclasses_type_hints_resolve_in_a_fresh_interpreter():
    """``typing.get_type_hints`` of each dataclass of the core's face (what
    serializers and schema tools call) resolves every field's type: a type
    named in an annotation is a name of the defining module, not one
    offered on first use (a moved name is not there until something asks)."""
    script = (
        "import dataclasses, json, typing\n"
        "import lecode_memctl.core as core\n"
        "bad = {}\n"
        "for name in core.__all__:\n"
        "    obj = getattr(core, name)\n"
        "    if isinstance(obj, type) and dataclasses.is_dataclass(obj):\n"
        "        try:\n"
        "            typing.get_type_hints(obj)\n"
        "        except Exception as exc:\n"
        "            bad[name] = repr(exc)\n"
        "print(json.dumps(bad))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {}


@pytest.mark.parametrize("fmt", ["csv", "tsv", "table", "github"])
def test_a_listing_does_not_look_names_up_through_the_lazy_getattr_per_cell(fmt, monkeypatch, capsys):
    """The CSV and table writers turn every cell into text with
    ``rowmodel.flat``; importing it inside the per-cell function cost a
    ``__path__`` lookup through rowmodel's ``__getattr__`` per cell
    (1.33 us a cell against 0.22 us for ``flat`` itself)."""
    from lecode_memctl.cli.output import render_rows
    from lecode_memctl.core import rowmodel

    calls: list[str] = []
    real = rowmodel.__getattr__

    def counting(name):  # noqa: ANN001, ANN202
        calls.append(name)
        return real(name)
    monkeypatch.setattr(rowmodel, "__getattr__", counting)
    rows = [{"a": i, "b": f"t{i}", "c": i % 2 == 0, "d": None} for i in range(400)]
    render_rows(rows, ["a", "b", "c", "d"], fmt)
    out = capsys.readouterr().out
    assert "t399" in out and out.count("\n") >= 400
    assert len(calls) < 10, sorted(set(calls))
