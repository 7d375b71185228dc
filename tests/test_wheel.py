"""Installed, not only cloned (issue 12, point 6): the wheel carries the man
page and the three completion scripts, and memctl prints them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import orjson
import pytest

from .conftest import REPO, run_cli

SHARE = {"memctl.1": "man/memctl.1", "memctl.bash": "completions/memctl.bash",
         "_memctl": "completions/_memctl", "memctl.fish": "completions/memctl.fish"}


@pytest.fixture(scope="module")
def wheel(built_wheel):
    # pip builds in an isolated environment with the build-system requirements
    # (conftest.built_wheel: once per run, shared with test_core_imports.py)
    if built_wheel.returncode != 0 and "No module named pip" in built_wheel.stderr:
        pytest.skip("pip is not available in this interpreter")
    assert built_wheel.returncode == 0, built_wheel.stderr
    assert built_wheel.path is not None
    return built_wheel.path


@pytest.mark.heavy
def test_wheel_carries_man_page_and_completions(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for name, repo_path in SHARE.items():
            member = f"lecode_memctl/share/{name}"
            assert member in names, sorted(names)
            assert z.read(member) == (REPO / repo_path).read_bytes(), name
        z.extractall(tmp_path / "site")
    # the installed layout works on its own: memctl man / completion from the unpacked wheel
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    for argv, expected in ((["man"], "man/memctl.1"),
                           (["completion", "bash"], "completions/memctl.bash"),
                           (["completion", "zsh"], "completions/_memctl"),
                           (["completion", "fish"], "completions/memctl.fish")):
        p = subprocess.run([sys.executable, "-c", "import sys; import lecode_memctl, "
                            "lecode_memctl.cli.main as m; assert lecode_memctl.__file__.startswith("
                            f"{str(tmp_path / 'site')!r}), lecode_memctl.__file__; "
                            "sys.exit(m.main(sys.argv[1:]))", *argv],
                           capture_output=True, env=env, cwd=tmp_path, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stdout == (REPO / expected).read_bytes(), argv


def test_package_copies_match_the_repository_files():
    for name, repo_path in SHARE.items():
        assert (REPO / "lecode_memctl" / "share" / name).read_bytes() == \
            (REPO / repo_path).read_bytes(), f"run python scripts/gen_docs.py ({name})"


def test_completion_and_man_commands():
    assert run_cli("completion", "bash").stdout_bytes == (REPO / SHARE["memctl.bash"]).read_bytes()
    assert run_cli("man").stdout.startswith(".TH")
    assert run_cli("completion", "tcsh").exit_code == 2


def test_list_codes_text_and_json():
    from lecode_memctl.core.audit import CODES

    r = run_cli("validate", "--list-codes")
    assert r.exit_code == 0
    for code, info in CODES.items():
        line = next(ln for ln in r.stdout.splitlines() if ln.split()[:1] == [code])
        assert info.check in line.split()
    rows = orjson.loads(run_cli("validate", "--list-codes", "--json").stdout_bytes)
    assert {r["code"] for r in rows} == set(CODES)
    assert all(set(r) == {"type", "code", "severity", "group", "deep", "meaning"} for r in rows)
    assert {r["severity"] for r in rows} <= {"error", "warning", "info", "warning or error",
                                             "warning or info"}


def _complete(env_extra: dict, words: str, cword: int) -> list[str]:
    env = dict(os.environ, _MEMCTL_COMPLETE="complete_bash", COMP_WORDS=words,
               COMP_CWORD=str(cword), **env_extra)
    p = subprocess.run([sys.executable, "-m", "lecode_memctl"], capture_output=True, env=env,
                       timeout=60)
    return [ln.split(",", 1)[-1] for ln in p.stdout.decode().splitlines()]


def test_completion_offers_formats_notes_dates_and_codes(config_dir, tmp_path):
    from . import outkit

    project = tmp_path / "proj"
    outkit.build(config_dir, project, facts=2)
    env = {"LECODE_CONFIG_DIR": str(config_dir)}
    c = _complete(env, f"memctl -C {project} facts --format ", 5)
    assert {"json", "jsonl", "csv", "tsv", "table"} <= set(c), c
    assert "wide" in _complete(env, f"memctl -C {project} notes w", 4)
    assert outkit.DATE in _complete(env, f"memctl -C {project} log 2026", 4)
    codes = _complete(env, "memctl validate --ignore fact.", 3)
    assert "fact.stale" in codes and "fact.unverified" in codes
    assert "fact.*" in _complete(env, "memctl validate --ignore fa", 3)
