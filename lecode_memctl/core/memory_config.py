"""The effective ``[memory]`` settings of ``config.toml``.

Part of :mod:`lecode_memctl.core.config`, which still offers every name here;
a module of its own so that the commands that only resolve the config
directory do not load it at start-up.
"""

from __future__ import annotations

import os
from dataclasses import field
from pathlib import Path
from typing import Any

from ._record import record
from .config import MEMORY_KEYS, check_memory_values, read_config_file
from .errors import UsageError


@record(frozen=True)
class Setting:
    key: str
    value: Any
    default: Any
    source: str  # "default" or the config file path


@record(frozen=True)
class MemoryConfig:
    enabled: bool = True
    max_bytes: int = 32768
    auto_learn: bool = False
    facts_max_bytes: int = 8192
    settings: tuple[Setting, ...] = field(default=(), compare=False)
    path: Path | None = None
    # What config.toml holds that looks meant for these settings but is not
    # one: "memory.<key>" for a key of [memory] memctl does not know
    # (max_byte), "[<name>]" for a table spelled like memory in another case
    # ([Memory]), "<name>" for a top-level value so spelled (Memory = 5).  All
    # are ignored; ``memctl config`` notes them.
    unknown: tuple[str, ...] = field(default=(), compare=False)


@record(frozen=True)
class ConfigProblem:
    key: str
    message: str


def load_memory_config(config_dir: str | os.PathLike[str]) -> MemoryConfig:
    """The effective ``[memory]`` settings; a bad value is a ``UsageError`` naming the key
    (and so is a ``config_dir`` that is not a path as text, or holds a NUL)."""
    from .config import path_text

    path, data = read_config_file(path_text(config_dir, "load_memory_config: config_dir"))
    section: dict[str, Any] = {}
    if data is not None:
        raw_section = data.get("memory", {})
        if not isinstance(raw_section, dict):
            raise UsageError(f"{path}: [memory] must be a table")
        section = raw_section
    problems = check_memory_values(section)
    if problems:
        raise UsageError(f"{path}: {problems[0].message}")
    values: dict[str, Any] = {}
    settings = []
    for key, (_typ, default, _bounds) in MEMORY_KEYS.items():
        if key in section:
            values[key] = section[key]
            settings.append(Setting(key, section[key], default, str(path)))
        else:
            values[key] = default
            settings.append(Setting(key, default, default, "default"))
    # (a value that is no table, "Memory = 5", is a key, named without the
    # brackets: before 2026-12-07 it too was called "table [Memory]")
    unknown = [f"[{name}]" if isinstance(value, dict) else name
               for name, value in (data or {}).items()
               if name != "memory" and name.lower() == "memory"]
    unknown += [f"memory.{key}" for key in section if key not in MEMORY_KEYS]
    return MemoryConfig(**values, settings=tuple(settings), path=path if data is not None else None,
                        unknown=tuple(unknown))
