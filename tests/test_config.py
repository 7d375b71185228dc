"""Config dir resolution and the [memory] section of config.toml."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.config import MEMORY_KEYS, load_memory_config, resolve_config_dir
from lecode_memctl.core.errors import StoreCorrupt, UsageError

from .conftest import run_cli

# ---------------------------------------------------------------- resolution order

def test_resolution_order(tmp_path):
    env = {"LECODE_CONFIG_DIR": str(tmp_path / "lecode-env"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "HOME": str(tmp_path / "home")}
    c = resolve_config_dir(tmp_path / "opt", env)
    assert (c.path, c.source) == (tmp_path / "opt", "option")
    c = resolve_config_dir(None, env)
    assert (c.path, c.source) == (tmp_path / "lecode-env", "LECODE_CONFIG_DIR")
    del env["LECODE_CONFIG_DIR"]
    c = resolve_config_dir(None, env)
    assert (c.path, c.source) == (tmp_path / "xdg" / "lecode", "XDG_CONFIG_HOME")
    del env["XDG_CONFIG_HOME"]
    c = resolve_config_dir(None, env)
    assert (c.path, c.source) == (tmp_path / "home" / ".config" / "lecode", "HOME")


def test_empty_variables_are_unset(tmp_path):
    env = {"LECODE_CONFIG_DIR": "", "XDG_CONFIG_HOME": "", "HOME": str(tmp_path)}
    c = resolve_config_dir(None, env)
    assert (c.path, c.source) == (tmp_path / ".config" / "lecode", "HOME")
    assert resolve_config_dir("", env).source == "HOME"


def test_relative_paths_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config_dir("rel").path == tmp_path / "rel"
    assert resolve_config_dir(None, {"LECODE_CONFIG_DIR": "cfg"}).path == tmp_path / "cfg"


def _config_json(*args, env=None):
    r = run_cli(*args, "config", "--json", env=env)
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout_bytes)


def test_cli_resolution_order(tmp_path, monkeypatch, config_dir):
    home = Path(os.environ["HOME"])
    doc = _config_json()
    assert (doc["config_dir"], doc["config_dir_source"]) == (str(config_dir), "LECODE_CONFIG_DIR")
    (tmp_path / "opt").mkdir()     # (one that does not exist is exit 3 since 2026-12-07)
    doc = _config_json("--config-dir", str(tmp_path / "opt"))
    assert (doc["config_dir"], doc["config_dir_source"]) == (str(tmp_path / "opt"), "option")
    monkeypatch.delenv("LECODE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    doc = _config_json()
    assert (doc["config_dir"], doc["config_dir_source"]) == (str(tmp_path / "xdg" / "lecode"),
                                                              "XDG_CONFIG_HOME")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    doc = _config_json()
    assert (doc["config_dir"], doc["config_dir_source"]) == (str(home / ".config" / "lecode"), "HOME")


# ---------------------------------------------------------------- values and sources

def test_defaults_without_file(config_dir):
    mc = load_memory_config(config_dir)
    assert (mc.enabled, mc.max_bytes, mc.auto_learn, mc.facts_max_bytes) == (True, 32768, False, 8192)
    assert mc.path is None
    doc = _config_json()
    assert doc["config_file_exists"] is False
    assert doc["facts_max_bytes"] == {"value": 8192, "default": 8192, "source": "default"}
    assert doc["enabled"] == {"value": True, "default": True, "source": "default"}


def test_values_and_sources_from_file(config_dir):
    config_dir.mkdir(parents=True)
    f = config_dir / "config.toml"
    f.write_text("[memory]\nauto_learn = true\nfacts_max_bytes = 65536\n[other]\nx = 1\n")
    doc = _config_json()
    assert doc["config_file_exists"] is True
    assert doc["auto_learn"] == {"value": True, "default": False, "source": str(f)}
    assert doc["facts_max_bytes"] == {"value": 65536, "default": 8192, "source": str(f)}
    assert doc["max_bytes"]["source"] == "default"
    r = run_cli("config")
    assert r.exit_code == 0
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()[1:] if ln.strip()}
    assert lines["memory.auto_learn"] == ["yes", "no", str(f)]
    assert lines["memory.facts_max_bytes"] == ["65536", "8192", str(f)]
    assert lines["memory.enabled"] == ["yes", "yes", "default"]
    assert run_cli("config", "--format", "csv").stdout.splitlines()[0] == "type,key,value,default,source"


@pytest.mark.parametrize("value", ["0", "65536", "8192"])
def test_facts_max_bytes_bounds_accepted(config_dir, value):
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text(f"[memory]\nfacts_max_bytes = {value}\n")
    assert load_memory_config(config_dir).facts_max_bytes == int(value)


@pytest.mark.parametrize("line,key", [
    ("facts_max_bytes = 65537", "facts_max_bytes"),
    ("facts_max_bytes = -1", "facts_max_bytes"),
    ("facts_max_bytes = 1.5", "facts_max_bytes"),
    ("facts_max_bytes = true", "facts_max_bytes"),
    ('facts_max_bytes = "8192"', "facts_max_bytes"),
    ("max_bytes = -5", "max_bytes"),
    ("max_bytes = 99999999999", "max_bytes"),
    ('enabled = "yes"', "enabled"),
    ("enabled = 1", "enabled"),
    ("auto_learn = 0", "auto_learn"),
    ("auto_learn = [true]", "auto_learn"),
])
def test_bad_values_name_the_key(config_dir, line, key):
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text(f"[memory]\n{line}\n")
    with pytest.raises(UsageError, match=f"memory.{key}"):
        load_memory_config(config_dir)
    r = run_cli("config")
    assert r.exit_code == 2
    assert f"memory.{key}" in r.stderr and r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr
    j = run_cli("config", "--json")
    assert j.exit_code == 2
    err = orjson.loads(j.stdout_bytes)["error"]
    assert err["code"] == "usage" and f"memory.{key}" in err["message"]


def test_broken_files(config_dir):
    config_dir.mkdir(parents=True)
    f = config_dir / "config.toml"
    f.write_text("[memory\nenabled = true\n")
    r = run_cli("config")
    assert r.exit_code == 2 and "invalid TOML" in r.stderr
    f.write_text("memory = 3\n")
    r = run_cli("config")
    assert r.exit_code == 2 and "[memory] must be a table" in r.stderr
    f.write_bytes(b"[memory]\nenabled = true # \xff\n")
    r = run_cli("config")
    assert r.exit_code == 5 and "not valid UTF-8" in r.stderr
    f.unlink()
    f.mkdir()
    with pytest.raises(StoreCorrupt):
        load_memory_config(config_dir)
    assert run_cli("config").exit_code == 5


def test_every_key_documented_in_help():
    r = run_cli("config", "--help")
    for key in MEMORY_KEYS:
        assert key in r.stdout
    assert "0..65536" in r.stdout


@pytest.mark.parametrize("text, says", [
    # a decimal integer past Python's 4,300 digits: tomllib raises a plain
    # ValueError, in any section, memctl's or not
    ("[model]\nseed = " + "1" * 4301 + "\n", "invalid TOML: a value tomllib cannot read"),
    # a hexadecimal integer is TOML at any length; its decimal text is not
    ("[memory]\nenabled = 0x" + "f" * 5000 + "\n",
     "memory.enabled must be true or false, not an integer of 20000 bits"),
    ("[memory]\nmax_bytes = 0x" + "f" * 5000 + "\n",
     "memory.max_bytes = an integer of 20000 bits is out of range"),
    # inside a list or an inline table
    ("[memory]\nmax_bytes = [0x" + "f" * 5000 + "]\n",
     "memory.max_bytes must be an integer, not a list holding an integer too long to print"),
    ("[memory]\nenabled = {a = 0x" + "f" * 5000 + "}\n",
     "memory.enabled must be true or false, not a dict holding an integer too long to print"),
])
def test_huge_integers_in_config_are_config_errors_not_internal(tmp_path, text, says):
    """Each was 'internal error: ValueError: Exceeds the limit (4300 digits)
    for integer string conversion' (exit 70) in config, context and
    validate."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text(text)
    for args in (("config",), ("context",)):
        r = run_cli("--config-dir", str(cfg), "-C", str(tmp_path), *args)
        assert r.exit_code == 2, (args, r.stderr)
        assert says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    from lecode_memctl.core.layout import store_for_project

    store_for_project(cfg, tmp_path).path.mkdir(parents=True)
    r = run_cli("--config-dir", str(cfg), "-C", str(tmp_path), "validate", "--json")
    assert r.exit_code == 1, r.stderr
    assert says.split(": ")[-1] in r.stdout
