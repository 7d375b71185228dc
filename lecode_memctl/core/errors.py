"""The error hierarchy shared by the core and the CLI.

Each error carries the process exit status the CLI uses for it and a short,
stable ``code`` string that appears in ``--json`` error documents.  The table
is the one in the README and the man page; keep them in step.
"""

from __future__ import annotations


class MemctlError(Exception):
    """Base of every error the core raises on purpose."""

    exit_code: int = 1
    code: str = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(MemctlError):
    """Bad option, bad id syntax, bad regex, bad date, bad config value."""

    exit_code = 2
    code = "usage"


class NotFound(MemctlError):
    """No such fact, session, note, or store."""

    exit_code = 3
    code = "not_found"


class Conflict(MemctlError):
    """Stale expected revision or generation, excluded evidence, destination exists."""

    exit_code = 4
    code = "conflict"


class StoreCorrupt(MemctlError):
    """Store unreadable: corrupt database, unknown schema version, undecodable file."""

    exit_code = 5
    code = "store_corrupt"


class StoreBusy(MemctlError):
    """A lock was not obtained within the timeout."""

    exit_code = 6
    code = "store_busy"


class StoreWriteError(MemctlError):
    """A write failed (disk full, I/O error, permission denied); nothing was changed."""

    exit_code = 7
    code = "write_failed"


EXIT_CODES: list[tuple[int, str]] = [
    (0, "success; validate found nothing at error severity"),
    (1, "validate found problems (with --strict, warnings count too); verify found a bundle that differs from its manifest; or a confirmation prompt was declined (nothing was changed)"),
    (2, "usage: bad option, bad id syntax, bad regex, bad date, bad config value"),
    (3, "not found: no such fact, session, note, or store"),
    (4, "conflict: stale expected revision or generation, excluded evidence, destination exists, file changed meanwhile"),
    (5, "store unreadable: corrupt database, unknown schema version, undecodable file"),
    (6, "store busy: lock not obtained within the timeout"),
    (7, "write failed: disk full, I/O error or permission denied; nothing was changed"),
]
