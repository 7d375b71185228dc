"""export and verify in parallel (2026-12-06): the command line asks the
core for ``parallel=True`` (``validate``'s deep audit reads the
transcripts in a pool of forked workers, and a store of 20,000 facts or
more is audited and listed by two processes); the library's default stays
one process, as ``validate_store``'s, for a caller with threads.  The
bundle is the one process's, byte for byte, and so is verify's report, on
a sound store and on a damaged one."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core import bundle, split as split_mod
from lecode_memctl.core.layout import store_at

from .builders import copy_demo, store_sql
from .conftest import run_cli, tree_hash
from .test_bundle_held import sourced_facts
from .test_split_listing import DAMAGE, counting

NOW = 1_796_000_000.0


def _store(demo_template, tmp_path: Path, damaged: bool) -> Path:  # noqa: ANN001
    s = copy_demo(demo_template, tmp_path / "demo")
    sourced_facts(s, 40)
    sessions = s / "sessions"
    first = sorted(sessions.iterdir())[0]
    for i in range(9):                      # (a deep audit of 8 or more: a pool)
        shutil.copy(first, sessions / f"copy-{i}.jsonl")
    if damaged:
        store_sql(s, *DAMAGE)
    return s


def _export(s: Path, parallel: bool) -> bytes:
    out = io.BytesIO()
    res = bundle.export_bundle(store_at(s), out, now=NOW, parallel=parallel)
    res.manifest["facts"]["rows"].close()
    return out.getvalue()


@pytest.mark.heavy
@pytest.mark.parametrize("damaged", [False, True])
def test_a_parallel_bundle_is_the_one_process_bundle(demo_template, tmp_path, monkeypatch,
                                                      damaged):
    s = _store(demo_template, tmp_path, damaged)
    before = tree_hash(s)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    pids = counting(monkeypatch)
    one = _export(s, parallel=False)
    assert not pids
    two = _export(s, parallel=True)
    assert pids                             # (the facts listed by two processes)
    assert two == one
    path = tmp_path / "b.tar"
    path.write_bytes(one)
    del pids[:]
    want = bundle.verify_bundle(path)
    assert not pids
    try:
        got = bundle.verify_bundle(path, parallel=True)
        assert pids
        try:
            assert orjson.dumps(got.to_json(), default=list) == orjson.dumps(
                want.to_json(), default=list)
            assert [r for r in got.facts] == [r for r in want.facts]
            assert got.ok == want.ok
        finally:
            got.close()
    finally:
        want.close()
    assert tree_hash(s) == before


@pytest.mark.heavy
def test_the_command_line_exports_and_verifies_in_parallel(demo_template, tmp_path,
                                                           monkeypatch):
    s = _store(demo_template, tmp_path, False)
    monkeypatch.setattr(split_mod, "SPLIT_LEAST", 1)
    pids = counting(monkeypatch)
    out = tmp_path / "b.tar"
    r = run_cli("--store", str(s), "--no-state", "export", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert pids
    del pids[:]
    r = run_cli("verify", str(out), "--json")
    assert r.exit_code == 0, r.stdout
    assert orjson.loads(r.stdout_bytes)["ok"] is True
    assert pids
