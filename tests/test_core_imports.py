"""The core is a library the agent imports: no CLI toolkit in it, and it ships type hints."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from .conftest import REPO

FORBIDDEN = ("typer", "rich", "tabulate", "click")

WALK = r"""
import json, pkgutil, sys
import lecode_memctl.core as core
forbidden = tuple(json.loads(sys.argv[1]))
def heavy():
    return sorted(m for m in sys.modules for f in forbidden if m == f or m.startswith(f + "."))
report = {"modules": [], "culprits": {}}
before = heavy()
for info in sorted(pkgutil.walk_packages(core.__path__, core.__name__ + "."), key=lambda i: i.name):
    __import__(info.name)
    report["modules"].append(info.name)
    now = heavy()
    if now != before:
        report["culprits"][info.name] = sorted(set(now) - set(before))
        before = now
report["heavy"] = heavy()
print(json.dumps(report))
"""


def test_importing_every_core_module_loads_no_cli_toolkit(tmp_path):
    proc = subprocess.run([sys.executable, "-c", WALK, json.dumps(FORBIDDEN)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    on_disk = sorted(f"lecode_memctl.core.{p.stem}"
                     for p in (REPO / "lecode_memctl" / "core").glob("*.py") if p.stem != "__init__")
    assert set(on_disk) <= set(report["modules"]), "walk_packages missed a core module"
    assert report["culprits"] == {}
    assert report["heavy"] == []


def test_importing_the_core_loads_no_secret_detector(tmp_path):
    """detect-secrets (and the requests it pulls in) loads only when a
    secrets.Detector is built: importing any core module, the secrets and
    redact modules included, loads neither."""
    proc = subprocess.run([sys.executable, "-c", WALK, json.dumps(["detect_secrets", "requests"])],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "lecode_memctl.core.secrets" in report["modules"]
    assert report["culprits"] == {} and report["heavy"] == []


def test_core_source_names_no_cli_toolkit():
    """A second, static look: no import line of the core mentions them, even lazily."""
    bad = []
    for path in sorted((REPO / "lecode_memctl" / "core").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            words = line.strip().replace(",", " ").split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1:
                top = words[1].split(".")[0]
                if top in FORBIDDEN:
                    bad.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert bad == []


def test_py_typed_in_the_package():
    assert (REPO / "lecode_memctl" / "py.typed").is_file()
    assert (REPO / "lecode_memctl" / "core" / "py.typed").is_file()


@pytest.mark.heavy
def test_py_typed_in_the_built_wheel(built_wheel):
    """The wheel built from a copy of the sources (conftest.built_wheel:
    with build isolation, else offline with the setuptools installed) and
    its file list."""
    whl = built_wheel.path
    assert whl is not None, built_wheel.stderr[-2000:]
    names = set(zipfile.ZipFile(whl).namelist())
    assert "lecode_memctl/py.typed" in names
    assert "lecode_memctl/core/py.typed" in names
    assert "lecode_memctl/core/errors.py" in names
