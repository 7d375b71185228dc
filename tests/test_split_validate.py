"""``validate`` checks the facts of a large store in two processes
(``core.split``, ``audit.facts.fact_findings``): a forked child checks the
second half of the fact ids.  Its findings, their order, the counts and the
exit status are those of one process, on damaged stores too; when the child
fails, the parent checks its part; nothing is left behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import split as split_mod
from lecode_memctl.core.audit import facts as audit_facts
from lecode_memctl.core.facts import FactStore

from .builders import copy_demo
from .conftest import run_cli, tree_hash
from .test_split_listing import DAMAGE, _many, _sql

_TIMES = re.compile(rb'"(generated|started|finished|duration_seconds)":("[^"]*"|[0-9.e-]+)')


@pytest.fixture
def store(demo_template, tmp_path) -> Path:
    s = copy_demo(demo_template, tmp_path / "demo")
    _many(s)
    return s


def _validate(store: Path, *argv: str) -> list[tuple[int, bytes]]:
    out = []
    for fmt in (("--json",), ("--format", "jsonl"), ()):
        r = run_cli("--store", str(store), "--no-state", "validate", "--no-progress", *fmt, *argv)
        text = _TIMES.sub(rb'"\1":0', r.stdout_bytes)
        text = re.sub(rb"in [0-9.]+ ?m?s\b", b"in T", text)
        out.append((r.exit_code, text + r.stderr.encode()))
    return out


def _counting(monkeypatch) -> list[int]:
    pids: list[int] = []
    fork = FactStore.fork

    def counted(self: FactStore, child) -> int:  # noqa: ANN001
        pid = fork(self, child)
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(FactStore, "fork", counted)
    return pids


@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("argv", [(), ("--ignore", "fact.stale"), ("--deep",), ("--strict",)])
def test_validate_in_two_processes_says_what_one_process_says(store, monkeypatch, damaged, argv):
    if damaged:
        _sql(store, *DAMAGE)
    before = tree_hash(store)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _validate(store, *argv)
    pids = _counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    two = _validate(store, *argv)
    assert two == one
    assert len(pids) == 3, pids
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    summary = orjson.loads(one[0][1].split(b"\n", 1)[0])["projects"][0]
    assert summary["facts_total"] > 30, summary
    if damaged:
        assert one[0][0] != 0 and summary["facts"]["hidden"] > 0, summary
    assert tree_hash(store) == before


def test_a_child_that_fails_leaves_its_facts_to_the_parent(store, monkeypatch):
    _sql(store, *DAMAGE)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 10 ** 9)
    one = _validate(store)
    pids = _counting(monkeypatch)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    parent = os.getpid()
    part = audit_facts._fact_part

    def failing(*args, **kwargs):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return part(*args, **kwargs)

    monkeypatch.setattr(audit_facts, "_fact_part", failing)
    assert _validate(store) == one
    assert len(pids) == 3


def test_the_help_names_the_size_that_is_split():
    r = run_cli("validate", "--help")
    assert r.exit_code == 0
    assert f"{split_mod.SPLIT_LEAST:,} or more" in " ".join(r.stdout.split())
