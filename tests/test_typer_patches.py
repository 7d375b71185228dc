"""The patches of typer's private internals (cli/typer_patches.py) still fit the
installed typer.  A typer release that renames, removes or reshapes what they
patch fails here, naming the typer version, instead of silently breaking TAB
completion or making it slow."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import pytest
import typer

from lecode_memctl.cli.typer_patches import PATCHED

VERSION = f"typer {typer.__version__}"


def _resolve(module: str, path: str):  # noqa: ANN202
    obj = importlib.import_module(module)
    for part in path.split("."):
        if not hasattr(obj, part):
            pytest.fail(f"{VERSION}: {module}.{path} no longer exists ({part!r} is missing); "
                        "lecode_memctl/cli/typer_patches.py patches it and must be updated "
                        "for this typer release")
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(("module", "path", "params"), PATCHED,
                         ids=[f"{m}.{p}" for m, p, _ in PATCHED])
def test_patched_attribute_exists_with_the_expected_signature(module, path, params):
    obj = _resolve(module, path)
    assert callable(obj), f"{VERSION}: {module}.{path} is no longer callable"
    names = tuple(inspect.signature(obj).parameters)
    assert names == params, (
        f"{VERSION}: {module}.{path} now takes {names}, typer_patches.py expects {params}; "
        "update lecode_memctl/cli/typer_patches.py for this typer release")


def test_typer_parameters_inherit_the_patched_process_value():
    """The wrap is set on click's Parameter (or typer's _TyperParameter): an
    override in TyperArgument or TyperOption would bypass it."""
    from typer import _click, core as typer_core

    patched = {_click.core.Parameter}
    if getattr(typer_core, "_TyperParameter", None) is not None:
        patched.add(typer_core._TyperParameter)
    for cls in (typer_core.TyperArgument, typer_core.TyperOption):
        owner = next(b for b in cls.__mro__ if "process_value" in vars(b))
        assert owner in patched, (
            f"{VERSION}: {cls.__name__}.process_value now comes from {owner.__qualname__}, "
            "which lecode_memctl/cli/typer_patches.py does not patch")


def test_sanitize_help_text_is_looked_up_at_call_time():
    """The replacement of _sanitize_help_text only takes effect if the zsh and
    fish classes call the module global (not a reference bound at import)."""
    from typer import _completion_classes as cc

    for cls in (cc.ZshComplete, cc.FishComplete):
        src = inspect.getsource(cls.format_completion)
        assert "_sanitize_help_text(" in src, (
            f"{VERSION}: {cls.__name__}.format_completion no longer calls the module's "
            "_sanitize_help_text; update lecode_memctl/cli/typer_patches.py")


PROBE = r"""
import sys
from lecode_memctl.cli.typer_patches import patch_for_completion
from typer import _click, _completion_classes
patch_for_completion()
assert _completion_classes._sanitize_help_text("[b]x[/b]") == "[b]x[/b]"
assert "rich" not in sys.modules, "completion help imported rich"
assert "bash" in _click.shell_completion._available_shells, "bash class not registered"

class Ctx:
    resilient_parsing = True
sentinel = object()
# while completing, the value is passed through: no conversion, no callback
assert _click.core.Parameter.process_value(object(), Ctx(), sentinel) is sentinel
print("ok")
"""


def test_patches_apply_and_do_what_they_say():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_MEMCTL", "_TYPER"))}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", f"{VERSION}: {r.stderr}"
