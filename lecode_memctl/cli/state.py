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
    slug_option: str | None = None
    no_color: bool = False
    json_errors: bool = False

    def config_dir(self) -> "ConfigDir":
        from lecode_memctl.core.config import resolve_config_dir

        return resolve_config_dir(self.config_dir_option)

    def project_dir(self) -> Path:
        return Path(self.project or os.getcwd())

    def store(self) -> "Store":
        """The store the command works on: ``--store`` or the project's."""
        from lecode_memctl.core.layout import store_for_project, store_given

        if self.store_option:
            return store_given(self.store_option, self.slug_option)
        self.check_slug_option()
        return store_for_project(self.config_dir().path, self.project_dir())

    def check_slug_option(self) -> None:
        """``--slug`` names the slug of a ``--store`` directory; alone it means nothing."""
        if self.slug_option is not None and not self.store_option:
            from lecode_memctl.core.errors import UsageError

            raise UsageError("--slug needs --store DIR (a project's own store takes its slug "
                             "from the project root)")

    def color(self) -> bool:
        return not self.no_color and not os.environ.get("NO_COLOR")


STATE = State()


def reset() -> None:
    """Fresh global state (each in-process invocation, e.g. in tests)."""
    global STATE
    STATE.__dict__.update(State().__dict__)
