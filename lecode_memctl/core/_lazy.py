"""Names a module still offers after they moved to a module of their own.

A frozen dataclass costs about a millisecond to create at import time, and
every command pays for the classes of every module it imports.  Rarely used
classes (and the functions that build them) therefore live in modules the
common commands never import; the module they came from keeps offering them
through a module ``__getattr__`` (PEP 562, made by :func:`lazy_getattr`)
that imports the new home on first use, so ``from
lecode_memctl.core.markdown import SearchResult`` keeps working.  Each such
module also imports the names under ``TYPE_CHECKING``, which is how mypy
sees them (the ``__getattr__`` is hidden from it, so a misspelt name is
still an error).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_getattr(module: str, moved: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``module``: a name of ``moved`` is
    imported from its new home (a module name relative to ``module``'s
    package) and kept in ``module`` for later lookups; any other name is an
    AttributeError.  (Every ``from module import x`` inside a function asks
    for ``__path__`` and lands here: that miss is kept to one dict lookup.)"""
    package = module.rpartition(".")[0]

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(import_module(home, package), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
