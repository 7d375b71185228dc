"""Edges of the core's public API that a review found off its documentation
(docs/API.md): a pickled SourceRef's hash, a config nested too deeply, the
writer's reserved field names given as keywords, and empty paths given to
``open_project``.  Each is a typed error or a value that behaves as
documented, never a raw Python error."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lecode_memctl.core import SourceRef, open_project
from lecode_memctl.core.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
DIGEST = "0" * 64


def test_a_pickled_source_ref_hashes_as_one_made_where_it_is_read():
    """The hash was cached at construction and pickled with the object: in
    another process (another PYTHONHASHSEED) the ref was equal to its twin
    but hashed differently, and not found in a set of them."""
    blob = pickle.dumps(SourceRef("s1", (1, 2), DIGEST))
    code = ("import pickle, sys; from lecode_memctl.core import SourceRef as R; "
            "a = pickle.loads(sys.stdin.buffer.read()); b = R('s1', (1, 2), '0' * 64); "
            "print(a == b, hash(a) == hash(b), a in {b}, a.seqs, a.label())")
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().split() == ["True", "True", "True", "(1,", "2)", "s1:1-2"]


def test_a_source_ref_copied_or_pickled_here_is_itself():
    import copy

    ref = SourceRef("s1", (3,), DIGEST)
    for other in (pickle.loads(pickle.dumps(ref)), copy.copy(ref), copy.deepcopy(ref)):
        assert other == ref and hash(other) == hash(ref) and other in {ref}


def _project(tmp_path: Path):
    (tmp_path / "proj").mkdir(exist_ok=True)
    return open_project(tmp_path / "proj", config_dir=tmp_path / "cfg")


def test_a_config_nested_too_deeply_is_a_usage_error(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text("[ui]\nx = " + "[" * 3000 + "]" * 3000 + "\n")
    p = _project(tmp_path)
    with pytest.raises(UsageError, match="nested too deeply"):
        p.memory_section()
    p.close()


@pytest.mark.parametrize("kind, extra", [
    ("message", {"role": "system"}),
    ("message", {"content": "y"}),
    ("event", {"event": "undo"}),
])
def test_a_reserved_field_given_as_a_keyword_is_refused_as_usage(tmp_path, kind, extra):
    """``append_message("user", "x", role="system")`` raised TypeError (a
    keyword given twice) before the writer's own check could refuse it."""
    p = _project(tmp_path)
    with p.sessions.create("s1") as w:
        before = w.next_seq
        with pytest.raises(UsageError, match="reserved"):
            if kind == "message":
                w.append_message("user", "x", **extra)
            else:
                w.append_event("clear", **extra)
        assert w.next_seq == before
    assert len(p.sessions.records("s1", 0, 10)) == 1      # the header alone
    p.close()


@pytest.mark.parametrize("option", ["store", "config_dir"])
def test_an_empty_path_given_to_open_project_is_a_usage_error(tmp_path, monkeypatch, option):
    """``store=""`` was the current directory (a store made there by the
    first write); ``config_dir=""`` the default one.  memctl's --store ''
    and --config-dir '' are usage errors."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with pytest.raises(UsageError, match=f"{option} is an empty path"):
        open_project(**{option: ""})
    assert list(cwd.iterdir()) == []


def test_a_writer_of_no_session_leaves_no_lock_file(tmp_path):
    """``sessions.writer("nope")`` raised SessionNotFound but left
    ``sessions/nope.lock`` behind (a lock file is never removed)."""
    from lecode_memctl.core.sessions import SessionNotFound

    p = _project(tmp_path)
    with p.sessions.create("s1") as w:
        w.append_message("user", "x")
    before = sorted(os.listdir(p.store.sessions_dir))
    with pytest.raises(SessionNotFound):
        p.sessions.writer("nope")
    assert sorted(os.listdir(p.store.sessions_dir)) == before
    p.close()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, {"x": -float("inf")}]])
def test_a_number_json_cannot_hold_is_refused_not_written_as_null(tmp_path, value):
    """orjson writes NaN and the infinities as null: the record read back was
    not the one given.  The writer refuses it (UsageError), writing nothing."""
    p = _project(tmp_path)
    with p.sessions.create("s1") as w:
        size = os.path.getsize(p.store.sessions_dir / "s1.jsonl")
        with pytest.raises(UsageError, match="NaN or infinite"):
            w.append_message("user", "x", score=value)
        assert os.path.getsize(p.store.sessions_dir / "s1.jsonl") == size
        w.append_message("user", "y", score=None, other=[1.5])    # null given is null
    p.close()


def test_a_number_json_cannot_hold_inside_a_dataclass_or_enum_is_refused(tmp_path):
    """orjson writes dataclasses and enum members itself: a NaN inside one
    was written as null too."""
    import dataclasses
    import enum

    @dataclasses.dataclass
    class Measure:
        v: float

    class Odd(enum.Enum):
        NAN = float("nan")

    p = _project(tmp_path)
    with p.sessions.create("s1") as w:
        for value in (Measure(float("nan")), [Measure(1.0), {"x": Odd.NAN}]):
            with pytest.raises(UsageError, match="NaN or infinite"):
                w.append_message("user", "x", m=value)
        w.append_message("user", "y", m=Measure(1.5))
    assert len(p.sessions.records("s1", 0, 10)) == 2
    p.close()


def test_validate_of_a_config_nested_too_deeply_is_a_finding(tmp_path):
    """The audit parses config.toml itself: a table nested thousands deep
    ended validate with exit 70 (RecursionError); it is config.invalid."""
    from lecode_memctl.core.audit import validate_store

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    p = _project(tmp_path)
    with p.sessions.create("s1") as w:
        w.append_message("user", "x")
    findings, _summary = validate_store(p.store, config_dir=tmp_path / "cfg")
    bad = [f for f in findings if f.code == "config.invalid"]
    assert len(bad) == 1 and "nested too deeply" in bad[0].message
    p.close()


def test_project_config_after_close_is_a_usage_error(tmp_path):
    """API.md: any use after ``close()`` raises UsageError; ``config`` read
    ``config.toml`` from the disk again."""
    from lecode_memctl.core import open_project
    from lecode_memctl.core.errors import UsageError

    p = open_project(store=tmp_path / "s", config_dir=tmp_path)
    p.close()
    (tmp_path / "config.toml").write_text("[memory]\nmax_bytes = 123\n")
    with pytest.raises(UsageError, match="closed"):
        p.config  # noqa: B018


def test_a_config_dir_given_as_text_is_a_path(tmp_path):
    """``load_memory_config`` and ``store_for_project`` took only a Path (a
    ``str`` ended in TypeError: "unsupported operand type(s) for /"), where
    ``open_project(config_dir=...)`` takes either."""
    from lecode_memctl.core import load_memory_config
    from lecode_memctl.core.layout import store_for_project

    (tmp_path / "config.toml").write_text("[memory]\nmax_bytes = 1234\n")
    assert load_memory_config(str(tmp_path)).max_bytes == 1234
    assert load_memory_config(tmp_path) == load_memory_config(str(tmp_path))
    project = tmp_path / "proj"
    project.mkdir()
    assert store_for_project(str(tmp_path), str(project)) == store_for_project(tmp_path, project)


def test_the_session_errors_import_from_the_errors_module():
    """API.md lists them under ``lecode_memctl.core.errors`` (an ImportError
    before 2026-12-07; they live in ``core.sessions``)."""
    import lecode_memctl.core as core
    from lecode_memctl.core import errors

    for name, base in (("SessionNotFound", errors.NotFound), ("SessionRefused", errors.Conflict),
                       ("SpanHidden", errors.Conflict), ("SessionCorrupt", errors.StoreCorrupt),
                       ("SessionUnreadable", errors.StoreCorrupt)):
        cls = getattr(errors, name)
        assert cls is getattr(core, name) and issubclass(cls, base), name
    with pytest.raises(AttributeError):
        errors.NoSuchError  # noqa: B018
