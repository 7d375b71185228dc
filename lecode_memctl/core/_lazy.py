"""Names a module still offers after they moved to a module of their own.

A module costs every command that imports it: its code, its classes, its
module-level patterns.  Rarely used classes (and the functions that build
them) therefore live in modules the
common commands never import; the module they came from keeps offering them
through a module ``__getattr__`` (PEP 562, made by :func:`lazy_getattr`)
that imports the new home on first use, so ``from
lecode_memctl.core.markdown import SearchResult`` keeps working.  Each such
module also imports the names under ``TYPE_CHECKING``, which is how mypy
sees them (the ``__getattr__`` is hidden from it, so a misspelt name is
still an error).  :func:`lazy_compile` does the same for a module-level
regular expression.  (The core's records, ``_record.record``, are cheap to
create; see that module.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any, AnyStr

if TYPE_CHECKING:
    import re


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


_PATTERN_METHODS = ("match", "fullmatch", "search", "sub", "subn", "split", "findall",
                    "finditer")


class _LazyPattern:
    """``re.compile(pattern, flags)`` made on first use.  The first call of
    a method compiles the pattern and puts the compiled pattern's own bound
    methods on this object, so later calls cost what they cost on the
    compiled pattern; ``pattern``, ``flags``, ``groups`` and ``groupindex``
    are the compiled pattern's.  (No ``__getattr__``: a class with one makes
    every attribute lookup on its instances take the slow way, 57 ns more
    for each ``match`` of a hot loop.)"""

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._args = (pattern, flags)

    def _compiled(self) -> Any:
        done = self.__dict__.get("_done")
        if done is not None:
            return done
        import re

        compiled = re.compile(*self._args)  # type: ignore[type-var]
        for name in _PATTERN_METHODS:
            setattr(self, name, getattr(compiled, name))
        self.__dict__["_done"] = compiled
        return compiled

    @property
    def pattern(self) -> Any:
        return self._args[0]

    @property
    def flags(self) -> int:
        return int(self._compiled().flags)

    @property
    def groups(self) -> int:
        return int(self._compiled().groups)

    @property
    def groupindex(self) -> Any:
        return self._compiled().groupindex

    def __repr__(self) -> str:
        return f"lazy_compile({self._args[0]!r}, {self._args[1]})"


def _forward(name: str) -> Callable[..., Any]:
    def method(self: _LazyPattern, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._compiled(), name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in _PATTERN_METHODS:
    setattr(_LazyPattern, _name, _forward(_name))


def lazy_compile(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(pattern, flags)``, compiled the first time it is used.
    A module-level pattern costs about 0.6M instructions to compile at
    import; a command pays only for the patterns it uses."""
    return _LazyPattern(pattern, flags)  # type: ignore[return-value]
