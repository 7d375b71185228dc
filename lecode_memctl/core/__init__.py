"""lecode_memctl.core: the memory library the lecode agent imports.

One import line, one call::

    from lecode_memctl.core import open_project, SourceRef

    with open_project() as project:          # the current directory's project
        ...

``docs/API.md`` walks through a whole agent session.  The names below are the
public face; every other name in the submodules is internal and may move.
They are loaded on first use (module ``__getattr__``), so ``import
lecode_memctl.core`` loads no submodule, no sqlite3 and no CLI toolkit.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Public name -> the submodule that defines it.  The one place to update
# when a name moves between modules.
_EXPORTS: dict[str, str] = {
    # the entry point
    "open_project": "project",
    "Project": "project",
    "read_range": "project",
    # stores and identity
    "Store": "layout",
    "store_for_project": "layout",
    "store_at": "layout",
    "resolve_project": "identity",
    "ProjectIdentity": "identity",
    # configuration
    "resolve_config_dir": "config",
    "ConfigDir": "config",
    "load_memory_config": "memory_config",
    "MemoryConfig": "memory_config",
    # facts
    "FactStore": "facts",
    "Fact": "facts",
    "Revision": "facts",
    "RememberResult": "factresults",
    "recall": "factview",
    "history": "factview",
    "facts_page": "factview",
    # sessions
    "SessionStore": "sessions",
    "SessionWriter": "sessions",
    "Snapshot": "sessiondata",
    "SessionInfo": "sessiondata",
    "NO_EXCLUSIONS": "sessions",
    # evidence
    "SourceRef": "sourceref",
    "SourceStatus": "sourceref",
    "ExclusionReader": "sourceref",
    "canonical_digest": "sourceref",
    "check_session_id": "sourceref",
    # the memory section
    "build_memory_section": "context",
    "MemorySection": "context",
    "section_to_json": "context",
    # checking and migrating a store
    "validate_store": "audit",
    "Finding": "audit",
    "Summary": "audit",
    "migrate_legacy": "migrate",
    "plan_migration": "migrate",
    "apply_migration": "migrate",
    "MigrationPlan": "migrate",
    # errors (each carries its exit code)
    "MemctlError": "errors",
    "UsageError": "errors",
    "NotFound": "errors",
    "Conflict": "errors",
    "StoreCorrupt": "errors",
    "StoreBusy": "errors",
    "StoreWriteError": "errors",
    "LocalResourceError": "errors",
    "SessionNotFound": "sessions",
    "SessionRefused": "sessions",
    "SessionUnreadable": "sessions",
    "SessionCorrupt": "sessions",
    "SpanHidden": "sessions",
    "PositionMissing": "sessions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
