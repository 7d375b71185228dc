"""memctl's own process and its signals: Ctrl-C, SIGTERM and SIGHUP stop
the command (a KeyboardInterrupt where it stands), and the process then ends
by the termination signal that stopped it.

Kept apart from :mod:`.output` (which re-exports these names): ``main``
installs the handlers (:func:`catch_termination`) as the first thing it
does, before any import of its start-up, so this module imports nothing but
what Python has already loaded (``signal`` is built in).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

_SIGINT_BEFORE: list[Any] = []


def interrupted_once() -> None:
    """After one Ctrl-C, the next ends the process at once: what is left to
    write (the rows made, the error line) may block on a pipe that nobody
    reads, and a second KeyboardInterrupt there would end in a traceback.
    :func:`sigint_as_before` undoes it when main returns."""
    import signal

    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            return      # (ignored from the start, a background job: it stays so)
        before = signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:      # (not the main thread)
        return
    if not _SIGINT_BEFORE:
        _SIGINT_BEFORE.append(before)


class _Signals:
    """memctl's own process and its signals (:func:`catch_termination`)."""

    owner: int | None = None        # its pid (a forked child inherits the handlers, not this)
    caught: list[tuple[int, Any]]   # the handlers installed, with those they replaced
    terminated: int | None = None   # the termination signal that stopped the command
    since = 0.0                     # when it came (time.monotonic)
    interrupted = False             # a Ctrl-C came
    running = False                 # the command runs (its start-up too: catch_termination)
    # while a foreground child runs (deferred_termination): its pid, 0 before it is known
    deferred: int | None = None
    holding = False                 # a write that must not be cut runs (uncut)
    held = False                    # a signal came meanwhile: it stops the command after
    # what the command has already written, for the interrupt's message
    # (interrupted_after): "the forget of X was written"
    written: str | None = None

    def __init__(self) -> None:
        self.caught = []

    def in_owner(self) -> bool:
        """Whether this is the process that called :func:`catch_termination`."""
        return self.owner == os.getpid()


_SIG = _Signals()

# A further SIGTERM or SIGHUP this long after the first ends the process at
# once (its clean-up may wait on a pipe nobody reads, or the first was lost
# where Python could not raise it: a __del__, an at-fork hook); one sooner
# is taken for the same request (timeout sends SIGTERM to memctl, then at
# once to its process group) and ignored.
REPEAT_ENDS_AFTER = 0.5


def catch_termination() -> None:
    """In memctl's own process, SIGTERM and SIGHUP stop the command as Ctrl-C
    does (a KeyboardInterrupt): the store closed, its private snapshot
    removed, a forked child ended, the rows made written.  Before, the
    process ended where it stood, and each SIGTERM (``timeout`` in a cron
    job, a stopped service) left a copy of the facts database in $TMPDIR.

    - A signal ignored when memctl started (``nohup``) stays ignored.
    - Once one has stopped the command, a SIGTERM or SIGHUP within
      :data:`REPEAT_ENDS_AFTER` is ignored (``timeout`` sends SIGTERM
      twice, to memctl and to its process group; a service manager may
      send SIGHUP with it), so the clean-up is not cut short by the same
      request; a later one ends the process at once, as does a Ctrl-C, or
      a second Ctrl-C after a first.
    - A forked child (the pool's workers) ends by the signal, as with no
      handler.
    - :func:`end_as_terminated` ends the process by the signal itself at the
      end, as its sender expects.
    - main calls it first, before the imports of its start-up: from then on
      the start-up (the imports, the command tree) counts as the command
      (:func:`command_running` ends it), so that a signal there stops
      memctl as one during the command does (before 2026-12-07 it was
      installed once the command tree was built, and a SIGTERM or SIGHUP
      before that ended memctl without a word)."""
    import signal

    _SIG.owner, _SIG.terminated, _SIG.interrupted = os.getpid(), None, False
    _SIG.running = True
    for name, handler in (("SIGTERM", _terminated), ("SIGHUP", _terminated),
                          ("SIGINT", _interrupted)):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            before = signal.getsignal(sig)
            if before == (signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL):
                # recorded first: a Ctrl-C between the two leaves nothing
                # that end_as_terminated does not put back
                _SIG.caught.append((sig, before))
                try:
                    signal.signal(sig, handler)
                except (ValueError, OSError):
                    _SIG.caught.pop()
                    raise
        except (ValueError, OSError):      # (not the main thread)
            pass


def _as_if_unhandled(signum: int) -> None:
    """The signal's default action, now (the process ends).  Blocked while
    its handler is changed: CPython raises "OSError: Signal N ignored due to
    race condition" for a signal that arrived under a Python handler and is
    taken once the handler is no longer one.  (So the handlers stay
    installed while the command runs; a signal to be ignored is ignored by
    them.)"""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})


def _terminated(signum: int, frame: Any) -> None:
    import time

    if not _SIG.in_owner():
        _as_if_unhandled(signum)
        return
    first = _SIG.terminated is None
    if first:
        _SIG.terminated, _SIG.since = signum, time.monotonic()
    elif time.monotonic() - _SIG.since >= REPEAT_ENDS_AFTER and _SIG.deferred is None:
        _as_if_unhandled(signum)
        return
    if _SIG.deferred is not None:
        # the editor on the terminal gets it, and ends as it chooses;
        # the command stops once it has (deferred_termination)
        if _SIG.deferred:
            with contextlib.suppress(OSError):
                os.kill(_SIG.deferred, signum)
        return
    if first and _SIG.holding and not _SIG.interrupted and _SIG.running:
        _SIG.held = True        # (the command stops once the write is done: uncut)
        return
    if first and not _SIG.interrupted and _SIG.running:
        raise KeyboardInterrupt
    # (a Ctrl-C is already stopping the command, or it is over: memctl ends
    # by this signal once it is done)


def _interrupted(signum: int, frame: Any) -> None:
    """SIGINT as Python's own handler takes it (a KeyboardInterrupt), except
    that one after a first, or after a termination signal, ends the
    process at once: what is left to do may wait on a pipe nobody reads,
    and a second KeyboardInterrupt in the clean-up would leave it half
    done."""
    if _SIG.in_owner():
        if _SIG.deferred is not None:
            return      # (the editor on the terminal takes its own Ctrl-C, as under git)
        if _SIG.interrupted or _SIG.terminated is not None or not _SIG.running:
            _as_if_unhandled(signum)
            return
        _SIG.interrupted = True
        if _SIG.holding:
            _SIG.held = True    # (the command stops once the write is done: uncut)
            return
    raise KeyboardInterrupt


def start_up_held() -> None:
    """The start-up's imports and command tree as an :func:`uncut` write: a
    Ctrl-C, SIGTERM or SIGHUP that comes meanwhile is kept, and stops memctl
    at :func:`start_up_done`.  Raised at once, its KeyboardInterrupt could
    land in a callback of the import system (``_get_module_lock``'s weakref
    callback runs at every import), where Python can only print it
    ("Exception ignored in ...", a traceback) and the command ran on to its
    end (a code review saw it in 3 of 1,000 signals sent while memctl
    started)."""
    _SIG.holding = True


def start_up_done() -> None:
    """The end of :func:`start_up_held`: a signal kept meanwhile stops
    memctl now (a KeyboardInterrupt in main's own frame)."""
    _release_hold()


def _release_hold() -> None:
    """The end of a hold (:func:`start_up_held`, :func:`uncut_from`): a
    signal kept meanwhile stops the command now (a KeyboardInterrupt)."""
    _SIG.holding = False
    if _SIG.held:
        _SIG.held = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def command_running() -> Iterator[None]:
    """The command itself: a signal caught by :func:`catch_termination`
    stops it (a KeyboardInterrupt) only in here.  Once it is over (its
    error being reported, stdout flushed), a termination signal is kept
    for :func:`end_as_terminated`, and a Ctrl-C ends the process at once:
    neither raises in main's own clean-up, which would end in a
    traceback."""
    _SIG.running, _SIG.written = True, None
    try:
        yield
    finally:
        _SIG.running = False


def interrupt_lost() -> bool:
    """Whether a Ctrl-C or a termination signal that memctl's handlers
    caught while the command ran did not stop it: its KeyboardInterrupt was
    raised where Python can only print it ("Exception ignored in ...": a
    weakref or garbage collector callback, a ``__del__``) and the command
    ran on to its end.  main then ends it as interrupted all the same (the
    user's Ctrl-C is not lost to a 0)."""
    return _SIG.in_owner() and (_SIG.interrupted or _SIG.terminated is not None)


def interrupted_after(written: str | None) -> None:
    """What the command has written so far (``None``: nothing), which an
    interrupt from here on names after its own message ("interrupted; the
    forget of X was written"): a Ctrl-C or SIGTERM caught once a change is
    committed does not leave the user to guess whether it was made."""
    _SIG.written = written


def with_written(message: str) -> str:
    """``message`` followed by what the command had already written
    (:func:`interrupted_after`), as its one error line says it: an
    interrupt, or an error after the change was committed (its report lost
    to a full disk or a closed stdout: ``standard output: No space left on
    device; the forget of X was written``), does not read as "nothing was
    changed"."""
    return f"{message}; {_SIG.written}" if _SIG.written else message


@contextlib.contextmanager
def deferred_termination() -> Iterator[Callable[[int], None]]:
    """While a foreground child runs (``memctl edit``'s editor): a
    termination signal does not stop memctl under it, but is passed to the
    child (``give(pid)`` names it), which ends as it chooses -- a terminal
    editor killed under memctl left the terminal in raw mode and lost the
    edits.  A Ctrl-C is ignored meanwhile, as git does: the editor on the
    terminal gets its own.  Once the child is done, the command stops (a
    KeyboardInterrupt) if a termination signal came."""
    def give(pid: int) -> None:
        _SIG.deferred = pid
        if _SIG.terminated is not None:     # (came before the child was known)
            with contextlib.suppress(OSError):
                os.kill(pid, _SIG.terminated)

    _SIG.deferred = 0
    try:
        yield give
    finally:
        _SIG.deferred = None
    if _SIG.terminated is not None:
        raise KeyboardInterrupt


@contextlib.contextmanager
def uncut() -> Iterator[None]:
    """A write that must not be cut: the end of a streamed JSON document
    (its members after the rows, ``skipped`` of a search, say, may be more
    than a pipe holds).  A Ctrl-C or a termination signal that comes
    meanwhile stops the command once the write is done (a
    KeyboardInterrupt then), so the document ends whole; a second Ctrl-C,
    or a later termination signal, ends the process at once, as after any
    first one.  Only memctl's own process (:func:`catch_termination`) holds
    them; elsewhere a Ctrl-C interrupts as Python's handler does."""
    with uncut_from() as hold:
        hold()
        yield


@contextlib.contextmanager
def uncut_from() -> Iterator[Callable[[], None]]:
    """:func:`uncut` from a point inside the block on: the block gets a
    function to call there (a ``FactStore``'s ``before_commit``: the write's
    COMMIT), and a Ctrl-C or a termination signal that comes from then to
    the end of the block stops the command once the block is done -- after
    it has named what was written (:func:`interrupted_after`) and made
    what goes with the change (forget's mark).  Before that point a signal
    interrupts at once (the wait for a busy database).  Before, one landing
    as the COMMIT returned stopped ``forget`` before it said the forget was
    written: ``interrupted`` alone, and no mark."""
    def hold() -> None:
        _SIG.holding = True

    try:
        yield hold
    finally:
        _SIG.holding = False
    _release_hold()


def interruption() -> tuple[str, str, int]:
    """The error of the interrupt that stopped the command: ``(code,
    message, exit status)``: 130 for Ctrl-C, 143 for SIGTERM and 129 for
    SIGHUP (caught by :func:`catch_termination`: what a shell shows for a
    process that signal ended).  The message names what the command had
    already written (:func:`interrupted_after`)."""
    from lecode_memctl.core.errors import (
        CODE_INTERRUPTED,
        CODE_TERMINATED,
        EXIT_HANGUP,
        EXIT_INTERRUPTED,
        EXIT_TERMINATED,
    )

    if _SIG.terminated is not None:
        import signal

        sig = signal.Signals(_SIG.terminated)
        return (CODE_TERMINATED, with_written(f"terminated by {sig.name}"),
                EXIT_HANGUP if sig.name == "SIGHUP" else EXIT_TERMINATED)
    return CODE_INTERRUPTED, with_written("interrupted"), EXIT_INTERRUPTED


def end_as_terminated() -> None:
    """At the end of memctl's own process: the termination signals back to
    their default action, and, when one stopped the command, the process
    ended by it (its parent sees the signal, as with no handler)."""
    import signal

    ending = _SIG.terminated if _SIG.in_owner() else None
    if ending is not None:
        # (none of them taken by Python from here: see _as_if_unhandled)
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig for sig, _before in _SIG.caught})
    while _SIG.caught:
        sig, before = _SIG.caught.pop()
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, before)
    if ending is not None:
        _as_if_unhandled(ending)


def sigint_as_before() -> None:
    if _SIGINT_BEFORE:
        import signal

        try:
            signal.signal(signal.SIGINT, _SIGINT_BEFORE.pop())
        except ValueError:
            pass
