"""memctl commands: facts (see the module's commands below)."""

from __future__ import annotations

from .app import app  # noqa: F401
