"""config: keys of [memory] memctl does not know are noted (2026-12-07, review rv7)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.memory_config import load_memory_config

from .conftest import run_cli


@pytest.mark.parametrize("toml,unknown", [
    ("[memory]\nmax_byte = 100\n", ["memory.max_byte"]),
    ("[Memory]\nmax_bytes = 100\n", ["[Memory]"]),
    ("[memory]\nenabled = true\nMax_Bytes = 1\nfacts = 2\n", ["memory.Max_Bytes", "memory.facts"]),
])
def test_unknown_memory_keys_are_noted(config_dir, toml, unknown):
    """A misspelled key was ignored without a word: every row 'default', exit 0."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(toml)
    r = run_cli("config")
    assert r.exit_code == 0, r.stderr
    notes = r.stderr.splitlines()
    assert len(notes) == len(unknown)
    for note, key in zip(notes, unknown, strict=True):
        assert note.startswith("memctl: note: ") and key in note and "ignored" in note
    # (the output itself is unchanged: stdout is the settings, each from its source)
    assert "memory.max_bytes" in r.stdout
    assert list(load_memory_config(config_dir).unknown) == unknown


def test_known_keys_and_other_tables_are_not_noted(config_dir):
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(
        "[agent]\ncontext_window = 1\n[memory]\nmax_bytes = 100\nauto_learn = true\n")
    assert load_memory_config(config_dir).unknown == ()
    r = run_cli("config")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
