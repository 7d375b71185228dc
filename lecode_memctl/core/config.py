"""Config directory resolution and the ``[memory]`` section of config.toml."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._record import record
from .errors import StoreCorrupt, UsageError, raise_if_out_of_fds

if TYPE_CHECKING:
    from .memory_config import (
        ConfigProblem as ConfigProblem,
        MemoryConfig as MemoryConfig,
        Setting as Setting,
        load_memory_config as load_memory_config,
    )
else:
    from ._lazy import lazy_getattr

    # The [memory] settings, loaded on first use (see core/_lazy.py): most
    # commands only resolve the config directory.
    _MOVED = dict.fromkeys(("ConfigProblem", "MemoryConfig", "Setting", "load_memory_config"),
                           ".memory_config")
    __getattr__ = lazy_getattr(__name__, _MOVED)


@record(frozen=True)
class ConfigDir:
    path: Path
    source: str  # "option", "LECODE_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME"


def shown_path(text: str) -> str:
    """A path in a message, one line: bytes that are not UTF-8 (surrogate
    escapes) as ``\\xNN``, as the reports write them, and any character that
    does not print (a NUL, a newline, an escape) as Python writes it
    (``\\x00``, ``\\n``, ``\\x1b``)."""
    from .rowmodel import no_surrogates  # (the one spelling of such bytes)

    text = no_surrogates(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def path_text(value: object, what: str) -> str:
    """``os.fspath(value)`` for a path the API is given (``open_project``'s
    ``path``, ``store`` and ``config_dir``, :func:`resolve_config_dir`'s):
    text, or an ``os.PathLike`` that gives text, with no NUL (no file name
    holds one: the system calls refuse it) and nothing ``os.fsencode``
    cannot encode (a lone surrogate).  Anything else is a UsageError
    naming ``what`` (before 2026-12-07: a raw TypeError or ValueError, some
    only at a later use)."""
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{what} is a path (str or os.PathLike), not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise UsageError(f"{what} is a path as text, not {type(text).__name__} "
                         "(os.fsdecode makes text of bytes)")
    if "\0" in text:
        raise UsageError(f"{what} holds a NUL byte, which no file name holds: {shown_path(text)}")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        # (a lone surrogate: no file name is made of it; before 2026-12-07
        # a raw UnicodeEncodeError at the first system call)
        raise UsageError(f"{what} cannot be encoded as a file name (a lone surrogate): "
                         f"{shown_path(text)}") from None
    return text


def resolve_config_dir(option: str | os.PathLike[str] | None = None,
                       environ: dict[str, str] | None = None) -> ConfigDir:
    """``--config-dir``, else ``$LECODE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/lecode``,
    else ``~/.config/lecode`` (store contract, "Where a project's store is").
    A relative one is taken relative to the current directory, a relative
    ``$XDG_CONFIG_HOME`` too (the contract's rule, which the agent follows;
    the XDG spec would ignore it: docs/FORMAT.md, "Locating a store").
    A path that is not text or holds a NUL is a UsageError (:func:`path_text`)."""
    env = os.environ if environ is None else environ
    if option is not None and option != "":
        return ConfigDir(Path(os.path.abspath(path_text(option, "config_dir"))), "option")
    if env.get("LECODE_CONFIG_DIR"):
        where = path_text(env["LECODE_CONFIG_DIR"], "LECODE_CONFIG_DIR")
        return ConfigDir(Path(os.path.abspath(where)), "LECODE_CONFIG_DIR")
    if env.get("XDG_CONFIG_HOME"):
        where = path_text(env["XDG_CONFIG_HOME"], "XDG_CONFIG_HOME")
        return ConfigDir(Path(os.path.abspath(where)) / "lecode", "XDG_CONFIG_HOME")
    home = env.get("HOME") or os.path.expanduser("~")
    return ConfigDir(Path(os.path.abspath(home)) / ".config" / "lecode", "HOME")


# key -> (type, default, (min, max) or None)
MEMORY_KEYS: dict[str, tuple[type, Any, tuple[int, int] | None]] = {
    "enabled": (bool, True, None),
    "max_bytes": (int, 32768, (0, 2**31 - 1)),
    "auto_learn": (bool, False, None),
    "facts_max_bytes": (int, 8192, (0, 65536)),
}


def _problem(key: str, message: str) -> ConfigProblem:
    from .memory_config import ConfigProblem  # only when there is a problem

    return ConfigProblem(key, message)


def _shown(value: Any) -> str:
    """A config value in a message, one line and short: an integer too long
    to print as digits (a hexadecimal of 5,000 digits is TOML, and its
    decimal text past Python's 4,300-digit limit) by its size, any other
    value's ``repr`` cut at 80 characters."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    try:
        shown = repr(value)
    except ValueError:      # (an integer past 4,300 digits inside a list or table)
        return f"a {type(value).__name__} holding an integer too long to print"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def check_memory_values(section: dict[str, Any]) -> list[ConfigProblem]:
    """Every out-of-range or mistyped known key in a ``[memory]`` table."""
    problems: list[ConfigProblem] = []
    for key, (typ, _default, bounds) in MEMORY_KEYS.items():
        if key not in section:
            continue
        value = section[key]
        if typ is bool:
            if not isinstance(value, bool):
                problems.append(_problem(key, f"memory.{key} must be true or false, "
                                              f"not {_shown(value)}"))
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(_problem(key, f"memory.{key} must be an integer, not {_shown(value)}"))
            continue
        if bounds and not bounds[0] <= value <= bounds[1]:
            problems.append(_problem(
                key, f"memory.{key} = {value if value.bit_length() <= 64 else _shown(value)} "
                f"is out of range {bounds[0]}..{bounds[1]}"))
    return problems


class ConfigSyntax(ValueError):
    """config.toml's text is no TOML (:func:`parse_config`): why, as tomllib says."""


#: The largest config.toml read (docs/FORMAT.md, "The memory section"):
#: lecode's is a few hundred bytes.  One larger is refused, and no more
#: than this + 1 bytes of it are read (before 2026-12-07 a config.toml of
#: 3 GB was read whole: exit 70, MemoryError, under a memory limit).
MAX_CONFIG_BYTES = 1 << 20


class ConfigTooLarge(ValueError):
    """config.toml holds more than :data:`MAX_CONFIG_BYTES` (:func:`parse_config`)."""

    def __init__(self) -> None:
        super().__init__(f"larger than 1 MiB ({MAX_CONFIG_BYTES} bytes, the most a "
                         "config file may hold): not read")


def read_config_bytes(path: str | os.PathLike[str], *, follow: bool) -> bytes:
    """At most :data:`MAX_CONFIG_BYTES` + 1 bytes of the regular file
    ``path`` (``atomic.read_regular``, its errors): more than the bound is
    :func:`parse_config`'s to refuse.  The one read of config.toml, the
    config's readers' and the audit's."""
    from .atomic import read_regular

    return read_regular(path, MAX_CONFIG_BYTES + 1, follow=follow)


def parse_config(raw: bytes) -> dict[str, Any]:
    """The table of config.toml's bytes: :class:`ConfigTooLarge` when there
    are more than :data:`MAX_CONFIG_BYTES`, ``UnicodeDecodeError`` when they
    are not UTF-8, :class:`ConfigSyntax` when the text is no TOML (nested
    thousands deep too: tomllib parses by recursion).  The one parse of the
    config's readers and of the audit (``audit.run``)."""
    import tomllib  # only for a file that is there

    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigTooLarge
    text = raw.decode("utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigSyntax(str(exc)) from None
    except RecursionError:
        raise ConfigSyntax("nested too deeply") from None
    except ValueError as exc:
        # not a TOMLDecodeError: a decimal integer past Python's 4,300
        # digits, which tomllib cannot make an int of (an internal error,
        # exit 70, before 2026-12-07)
        raise ConfigSyntax(f"a value tomllib cannot read ({str(exc).split(';')[0]})") from None


def read_config_file(config_dir: str | os.PathLike[str]) -> tuple[Path, dict[str, Any] | None]:
    """Parse ``config.toml``; ``None`` when the file does not exist."""
    path = Path(config_dir) / "config.toml"
    try:
        raw = read_config_bytes(path, follow=True)
    except (FileNotFoundError, NotADirectoryError):
        # (NotADirectoryError: the config dir is a file, so no config.toml is
        # under it; the commands that look for a store there find none either)
        return path, None
    except IsADirectoryError:
        raise StoreCorrupt(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise_if_out_of_fds(exc, path)
        raise StoreCorrupt(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return path, parse_config(raw)
    except UnicodeDecodeError:
        raise StoreCorrupt(f"{path}: not valid UTF-8") from None
    except ConfigSyntax as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    except ConfigTooLarge as exc:
        # (exit 2, as a file that is no TOML)
        raise UsageError(f"{path}: {exc}") from None
