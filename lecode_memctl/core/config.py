"""Config directory resolution and the ``[memory]`` section of config.toml."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import StoreCorrupt, UsageError


@dataclass(frozen=True)
class ConfigDir:
    path: Path
    source: str  # "option", "LECODE_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME"


def resolve_config_dir(option: str | os.PathLike[str] | None = None,
                       environ: dict[str, str] | None = None) -> ConfigDir:
    """``--config-dir``, else ``$LECODE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/lecode``,
    else ``~/.config/lecode`` (store contract, "Where a project's store is")."""
    env = os.environ if environ is None else environ
    if option:
        return ConfigDir(Path(os.path.abspath(os.fspath(option))), "option")
    if env.get("LECODE_CONFIG_DIR"):
        return ConfigDir(Path(os.path.abspath(env["LECODE_CONFIG_DIR"])), "LECODE_CONFIG_DIR")
    if env.get("XDG_CONFIG_HOME"):
        return ConfigDir(Path(os.path.abspath(env["XDG_CONFIG_HOME"])) / "lecode", "XDG_CONFIG_HOME")
    home = env.get("HOME") or os.path.expanduser("~")
    return ConfigDir(Path(os.path.abspath(home)) / ".config" / "lecode", "HOME")


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    default: Any
    source: str  # "default" or the config file path


@dataclass(frozen=True)
class MemoryConfig:
    enabled: bool = True
    max_bytes: int = 32768
    auto_learn: bool = False
    facts_max_bytes: int = 8192
    settings: tuple[Setting, ...] = field(default=(), compare=False)
    path: Path | None = None


# key -> (type, default, (min, max) or None)
MEMORY_KEYS: dict[str, tuple[type, Any, tuple[int, int] | None]] = {
    "enabled": (bool, True, None),
    "max_bytes": (int, 32768, (0, 2**31 - 1)),
    "auto_learn": (bool, False, None),
    "facts_max_bytes": (int, 8192, (0, 65536)),
}


@dataclass(frozen=True)
class ConfigProblem:
    key: str
    message: str


def check_memory_values(section: dict[str, Any]) -> list[ConfigProblem]:
    """Every out-of-range or mistyped known key in a ``[memory]`` table."""
    problems: list[ConfigProblem] = []
    for key, (typ, _default, bounds) in MEMORY_KEYS.items():
        if key not in section:
            continue
        value = section[key]
        if typ is bool:
            if not isinstance(value, bool):
                problems.append(ConfigProblem(key, f"memory.{key} must be true or false, not {value!r}"))
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(ConfigProblem(key, f"memory.{key} must be an integer, not {value!r}"))
            continue
        if bounds and not bounds[0] <= value <= bounds[1]:
            problems.append(ConfigProblem(
                key, f"memory.{key} = {value} is out of range {bounds[0]}..{bounds[1]}"))
    return problems


def read_config_file(config_dir: Path) -> tuple[Path, dict[str, Any] | None]:
    """Parse ``config.toml``; ``None`` when the file does not exist."""
    from .atomic import read_regular

    path = config_dir / "config.toml"
    try:
        raw = read_regular(path, follow=True)
    except FileNotFoundError:
        return path, None
    except IsADirectoryError:
        raise StoreCorrupt(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    import tomllib  # only for a file that is there

    try:
        return path, tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise StoreCorrupt(f"{path}: not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None


def load_memory_config(config_dir: Path) -> MemoryConfig:
    """The effective ``[memory]`` settings; a bad value is a ``UsageError`` naming the key."""
    path, data = read_config_file(config_dir)
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
    return MemoryConfig(**values, settings=tuple(settings), path=path if data is not None else None)
