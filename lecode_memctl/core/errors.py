"""The error hierarchy shared by the core and the CLI.

Each error carries the process exit status the CLI uses for it, a short,
stable ``code`` string that appears in ``--json`` error documents, and the
``label``/``meaning`` of its exit status.  :data:`EXIT_CODES` -- the exit-status
table of the man page, the README and ``memctl --help`` -- is generated from
these classes plus the statuses no error class carries (0, 1, 70, 129, 130,
141, 143); it is the one place an exit status is described.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R")


class MemctlError(Exception):
    """Base of every error the core raises on purpose."""

    exit_code: int = 1
    code: str = "error"
    #: Short name of the exit status (the summary in ``memctl --help``).
    label: str = "error"
    #: What the status means, after the label, in the man page and README table.
    meaning: str = ""
    #: What the error document's ``code`` means (docs/OUTPUT.md's table of
    #: the codes, :data:`ERROR_DOCUMENT_CODES`); the class's ``meaning``
    #: when empty.
    code_meaning: str = ("a command's own failure that no other code names: edit's editor "
                         "exited non-zero or removed the file it was given, or its copy "
                         "could not be read back (nothing written)")

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
    label = "usage"
    meaning = ("bad option, bad id syntax, bad regex, bad date, bad config value, an "
               "--output FILE that may not be written (inside a store, a symbolic link), text "
               "from edit's editor that is not valid UTF-8 (nothing written, the copy kept), an "
               "editor edit cannot run ($VISUAL or $EDITOR naming no program, or not parsable)")


class NotFound(MemctlError):
    """No such fact, session, note, or store."""

    exit_code = 3
    code = "not_found"
    label = "not found"
    meaning = "no such fact, session, note, or store"


class Conflict(MemctlError):
    """Stale expected revision or generation, excluded evidence, destination exists."""

    exit_code = 4
    code = "conflict"
    label = "conflict"
    meaning = ("stale expected revision or generation, excluded evidence, destination exists, "
               "file changed meanwhile")


class StoreCorrupt(MemctlError):
    """Store unreadable: corrupt database, unknown schema version, undecodable file."""

    exit_code = 5
    code = "store_corrupt"
    label = "store unreadable"
    meaning = "corrupt database, unknown schema version, undecodable file"


class StoreBusy(MemctlError):
    """A lock was not obtained within the timeout."""

    exit_code = 6
    code = "store_busy"
    label = "store busy"
    meaning = "lock not obtained within the timeout"


class StoreWriteError(MemctlError):
    """A write failed (disk full, I/O error, permission denied); nothing was
    changed, unless the message says what was (a command of several writes
    that stopped midway: ``migrate-legacy``, ``redact``).
    Also a read's private copy of the facts database that could not be
    written under $TMPDIR: the store is fine, the temporary copy is not."""

    exit_code = 7
    code = "write_failed"
    label = "write failed"
    meaning = ("disk full, I/O error or permission denied (in the store, in $TMPDIR for "
               "the temporary copy a read makes (this machine's, never the store's fault, as "
               "too many open files is), for the --output FILE of validate and "
               "secrets or export's FILE, whose directory must exist, or on standard "
               "output, full or closed); nothing was changed, unless the message says what "
               "was: a change it names as written is made and only its report was lost "
               "(correct, forget, redact, export -o: do not run the command again), and a "
               "command stopped midway names what is left (run the command again to finish)")


class LocalResourceError(StoreWriteError):
    """This machine's resources failed, not the store: a private temporary
    copy a read makes (of the facts database, in $TMPDIR) could not be made
    or written, or the process ran out of file descriptors (``ulimit -n``).
    An audit never reports it as the store's problem (``validate`` and
    ``secrets`` of one store exit 7 with it; with ``--all-projects`` the
    store's database is reported not audited), and no command calls the
    store unreadable for it (exit 5)."""


def fds_exhausted() -> bool:
    """Whether this process can open no more files (EMFILE, ENFILE): SQLite's
    "unable to open database file" says nothing of why, so the one place
    that classifies its errors asks (before 2026-12-07 ``ulimit -n 12`` made
    ``export`` and ``forget --dry-run`` say the store was unreadable, exit 5)."""
    import errno

    try:
        fd = os.open(os.devnull, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return exc.errno in (errno.EMFILE, errno.ENFILE)
    os.close(fd)
    return False


def out_of_fds(what: str) -> LocalResourceError:
    return LocalResourceError(f"{what}: too many open files (this process's limit, ulimit -n, "
                              "or the system's); raise the limit and run again; nothing was "
                              "changed")


def raise_if_out_of_fds(exc: OSError, what: object) -> None:
    """``out_of_fds(what)`` (LocalResourceError, exit 7) when ``exc`` is the
    process or the system out of file descriptors (EMFILE, ENFILE); else
    nothing.  Every ``except OSError`` of an open or a listing in the store
    that would call the store unreadable or corrupt (exit 5) asks it first:
    running out of descriptors is this machine's limit, never the store's
    fault (before 2026-12-07 the Markdown, session, config and read-only
    facts opens said exit 5)."""
    import errno

    if exc.errno in (errno.EMFILE, errno.ENFILE):
        raise out_of_fds(str(what)) from None


def sqlite_error(exc: BaseException) -> MemctlError | None:
    """The memctl error of an error of SQLite's (the ``sqlite3`` module)
    that the core did not classify where it arose: StoreBusy when the
    database is locked or busy, else StoreCorrupt; None for any other
    exception.  The one place that says it: the API's boundary
    (:func:`typed_errors`) and memctl's last resort (``cli.main``) give
    the same error, message and exit status for the same store."""
    if type(exc).__module__ != "sqlite3" or not isinstance(exc, Exception):
        return None
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreBusy(f"database busy: {text}")
    if "unable to open" in text and fds_exhausted():
        return out_of_fds(f"database error: {text}")
    return StoreCorrupt(f"database error: {text}")


class typed_errors:  # noqa: N801 - used as a context manager, named as one
    """``with typed_errors():`` -- an error of SQLite's leaving the block is
    raised as its memctl error (:func:`sqlite_error`, the original as its
    cause).  (A class, not ``contextlib``: this module stays light.)"""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        typed = sqlite_error(exc)
        if typed is not None:
            raise typed from exc


def raises_typed(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """A public function of the core whose errors of SQLite's reach its
    caller as memctl errors (:class:`typed_errors`)."""
    import functools

    @functools.wraps(fn)
    def typed(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with typed_errors():
            return fn(*args, **kwargs)

    return typed


EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_INTERNAL = 70
EXIT_HANGUP = 129          # 128 + SIGHUP
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143      # 128 + SIGTERM

#: The error classes whose exit status is their own (subclasses share their base's).
ERROR_CLASSES: tuple[type[MemctlError], ...] = (
    UsageError, NotFound, Conflict, StoreCorrupt, StoreBusy, StoreWriteError)


class ExitStatus:
    """One row of the exit-status table.  (A plain class, not a dataclass: this
    module is imported on the ``--version`` path, which must stay light.)"""

    __slots__ = ("code", "label", "meaning", "in_summary")

    def __init__(self, code: int, label: str, meaning: str, in_summary: bool) -> None:
        self.code = code                # 3
        self.label = label              # short: "not found"
        self.meaning = meaning          # whole: "not found: no such fact, session, note, or store"
        self.in_summary = in_summary    # listed in the summary of ``memctl --help``

    def __repr__(self) -> str:
        return f"ExitStatus({self.code!r}, {self.label!r})"


def _exit_statuses() -> tuple[ExitStatus, ...]:
    rows = [
        ExitStatus(EXIT_OK, "ok", "success; validate found nothing at error severity", True),
        ExitStatus(EXIT_PROBLEMS,
                   "problems found (validate, secrets, verify), a value redact left, no grep match, "
                   "a failed editor (edit) or demo step, or a prompt declined",
                   "validate found problems (with --strict, warnings count too); secrets found a "
                   "credential or could not read a file; verify found a bundle that differs from "
                   "its manifest; grep matched nothing; redact left a value it cannot erase "
                   "(a session id, a file name, a live row of the facts database, a role or key "
                   "of a transcript's structure); edit's editor exited non-zero or removed the "
                   "file it was given (nothing was written); a step of demo did not behave as "
                   "described; or a confirmation prompt was declined (answered no, or its input "
                   "ended: Ctrl-D; nothing was changed)", True),
        *(ExitStatus(c.exit_code, c.label, f"{c.label}: {c.meaning}", True) for c in ERROR_CLASSES),
        ExitStatus(EXIT_INTERNAL, "internal error",
                   "internal error: a bug in memctl (set MEMCTL_DEBUG=1 to see the traceback)", True),
        ExitStatus(EXIT_INTERRUPTED, "interrupted", "interrupted (Ctrl-C)", False),
        ExitStatus(EXIT_BROKEN_PIPE, "broken pipe",
                   "broken pipe: the reader of the output went away (memctl ... | head); "
                   "nothing on stderr, and a change the command had made before (correct, "
                   "forget, redact, export -o) is kept", False),
        ExitStatus(EXIT_HANGUP, "hung up",
                   "hung up (SIGHUP): stopped as by Ctrl-C, then ended by the signal itself, "
                   "which a shell shows as this status", False),
        ExitStatus(EXIT_TERMINATED, "terminated",
                   "terminated (SIGTERM, as timeout sends): stopped as by Ctrl-C (the store "
                   "closed, its temporary copy removed), then ended by the signal itself, "
                   "which a shell shows as this status", False),
    ]
    return tuple(sorted(rows, key=lambda r: r.code))


EXIT_STATUSES: tuple[ExitStatus, ...] = _exit_statuses()

#: The ``code`` of the errors main reports that no error class carries.
CODE_INTERNAL = "internal"
CODE_INTERRUPTED = "interrupted"
CODE_TERMINATED = "terminated"

#: (code, exit status(es), meaning) of every ``code`` an error document
#: (``{"type": "error", "error": {"code", "message", "exit_code"}}``) can
#: carry, in exit-status order: docs/OUTPUT.md's table ("The error
#: document", generated by scripts/gen_docs.py).  A subclass shares its
#: base's code (``LocalResourceError``: ``write_failed``; the session
#: errors: ``not_found``, ``conflict``, ``store_corrupt``).
ERROR_DOCUMENT_CODES: tuple[tuple[str, str, str], ...] = (
    (MemctlError.code, str(MemctlError.exit_code), MemctlError.code_meaning),
    *((c.code, str(c.exit_code), f"{c.label}: {c.meaning}") for c in ERROR_CLASSES),
    (CODE_INTERNAL, str(EXIT_INTERNAL), "internal error: a bug in memctl (set MEMCTL_DEBUG=1 "
     "to see the traceback), an error of no other kind, or memory exhausted"),
    (CODE_INTERRUPTED, str(EXIT_INTERRUPTED), "interrupted (Ctrl-C)"),
    (CODE_TERMINATED, f"{EXIT_HANGUP}, {EXIT_TERMINATED}", "terminated by a signal: SIGHUP "
     f"({EXIT_HANGUP}) or SIGTERM ({EXIT_TERMINATED}), stopped as by Ctrl-C"),
)

#: (status, meaning) for every exit status memctl uses, in status order.
EXIT_CODES: list[tuple[int, str]] = [(s.code, s.meaning) for s in EXIT_STATUSES]


def exit_summary() -> str:
    """The one-paragraph exit-status summary of ``memctl --help``."""
    parts = [f"{s.code} {s.label}" for s in EXIT_STATUSES if s.in_summary]
    return "Exit status: " + ", ".join(parts) + "."


#: The session errors, subclasses of the classes above, live beside the
#: reader that raises them (``core.sessions``); they are named here too, as
#: docs/API.md lists them under this module (``from
#: lecode_memctl.core.errors import SpanHidden`` was an ImportError before
#: 2026-12-07).  Looked up when asked for: ``sessions`` imports this module.
_SESSION_ERRORS = ("SessionNotFound", "SessionRefused", "SpanHidden", "SessionCorrupt",
                   "SessionUnreadable", "PositionMissing")


def __getattr__(name: str) -> type[MemctlError]:
    if name in _SESSION_ERRORS:
        from . import sessions

        cls: type[MemctlError] = getattr(sessions, name)
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
