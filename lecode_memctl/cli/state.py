"""Global options shared by every command (set by the app callback)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from lecode_memctl.core.config import ConfigDir
    from lecode_memctl.core.layout import Store


@dataclass
class State:
    config_dir_option: str | None = None
    project: str | None = None
    store_option: str | None = None
    no_color: bool = False
    color_mode: str = "auto"        # --color auto|always|never
    json_errors: bool = False

    def config_dir(self) -> "ConfigDir":
        from lecode_memctl.core.config import resolve_config_dir

        return resolve_config_dir(self.config_dir_option)

    def project_dir(self) -> Path:
        return Path(self.project or os.getcwd())

    def store(self) -> "Store":
        """The store the command works on: ``--store`` or the project's."""
        from lecode_memctl.core.layout import store_at, store_for_project

        if self.store_option:
            return store_at(self.store_option)
        return store_for_project(self.config_dir().path, self.project_dir())

    def color(self, *, stderr: bool = False) -> bool:
        """--color never / --no-color / NO_COLOR: no colour; --color always or
        FORCE_COLOR: colour even in a pipe; auto: colour on a terminal."""
        import sys

        if self.no_color or self.color_mode == "never":
            return False
        if self.color_mode == "always":
            return True
        if os.environ.get("NO_COLOR"):
            return False
        if os.environ.get("FORCE_COLOR"):
            return True
        stream = sys.stderr if stderr else sys.stdout
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False


STATE = State()


def reset() -> None:
    """Fresh global state (each in-process invocation, e.g. in tests)."""
    global STATE
    STATE.__dict__.update(State().__dict__)
