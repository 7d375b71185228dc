"""Console entry point: runs the command tree and turns every error into one line.

No traceback reaches a user for any input: ``MemctlError`` subclasses carry
their exit status; click usage errors exit 2; anything unexpected is reported
as an internal error with exit status 70 (set ``MEMCTL_DEBUG=1`` to see the
traceback).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from lecode_memctl.core.errors import (
    CODE_INTERNAL,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    NotFound,
    StoreCorrupt,
    StoreWriteError,
    UsageError,
    sqlite_error,
)


def _json_format(args: Sequence[str]) -> str | None:
    """``json`` or ``jsonl`` when the command line asks for one, else None."""
    for i, a in enumerate(args):
        if a == "--json":
            return "json"
        if a in ("--format=json", "--format=jsonl", "-fjson", "-fjsonl"):
            return a.split("=", 1)[-1] if "=" in a else a.removeprefix("-f")
        if a in ("--format", "-f") and i + 1 < len(args) and args[i + 1] in ("json", "jsonl"):
            return args[i + 1]
    return None


def _wants_json(args: Sequence[str]) -> bool:
    return _json_format(args) is not None


def report_error(code: str, message: str, exit_code: int, *, json_doc: bool) -> int:
    from .output import dumps, safe

    state = sys.modules.get("lecode_memctl.cli.state")
    hidden = getattr(getattr(state, "STATE", None), "hidden_values", None)
    if hidden:
        # a value secrets or redact found is never shown, not even in a
        # path an error names (a store's directory named by a token)
        from lecode_memctl.core.secrets import hide_values

        message = hide_values(message, hidden)
    line = " ".join(safe(message, keep_newlines=True).splitlines()) or code
    if json_doc:
        try:
            # "type" as every JSONL record has (an error can end a --format jsonl stream)
            sys.stdout.buffer.write(dumps({"type": "error",
                                           "error": {"code": code, "message": message,
                                                     "exit_code": exit_code}}) + b"\n")
            sys.stdout.flush()
        except Exception:
            pass
    try:
        sys.stderr.write(f"memctl: error: {line}\n")
        sys.stderr.flush()
    except Exception:
        pass
    return exit_code


def _classify_os_error(exc: OSError) -> tuple[str, int, str]:
    import errno

    # A file name, never a descriptor: Python's open(fd) names the number it
    # was given (``4: Is a directory``), which says nothing of which file.
    name = exc.filename
    name_text = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) and name else ""
    what = f"{name_text}: " if name_text else ""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        # this machine's limit, not the store (before 2026-12-07: exit 5)
        from lecode_memctl.core.errors import out_of_fds

        err = out_of_fds(name_text or "memctl")
        return err.code, err.exit_code, err.message
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EBADF):
        return StoreWriteError.code, StoreWriteError.exit_code, f"{what}{reason}"
    if exc.errno in (errno.ENOENT,):
        return NotFound.code, NotFound.exit_code, f"{what}{reason}"
    return StoreCorrupt.code, StoreCorrupt.exit_code, f"{what}{reason}"


def error_report(exc: BaseException) -> tuple[str, str, int] | None:
    """(code, message, exit status) of an error a command raised, as main
    reports it (its one line, its JSON error); None for what main answers
    otherwise (an interrupt, a broken pipe, an exit).  Also what a streamed
    JSON document that the error cut short ends with (``facts --json``), so
    that the document says what main says."""
    from lecode_memctl.core.errors import MemctlError

    if isinstance(exc, MemctlError):
        return exc.code, exc.message + (f" ({exc.hint})" if exc.hint else ""), exc.exit_code
    if not isinstance(exc, Exception) or isinstance(exc, BrokenPipeError):
        return None
    if isinstance(exc, OSError):
        code, status, message = _classify_os_error(exc)
        return code, message, status
    typed = sqlite_error(exc)       # an error of SQLite's that the core did not classify
    if typed is not None:
        return typed.code, typed.message, typed.exit_code
    if isinstance(exc, MemoryError):
        return CODE_INTERNAL, f"internal error: MemoryError: {str(exc) or 'out of memory'}", EXIT_INTERNAL
    return CODE_INTERNAL, f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL


_OUT_OF_MEMORY = b"memctl: error: internal error: MemoryError: out of memory\n"


def _out_of_memory(exc: MemoryError, *, json_doc: bool) -> int:
    """A command that ran out of memory: one line and exit 70, as any other
    internal error, once what its frames held is let go (the traceback keeps
    their locals: a transcript's records, say), so that the line can be
    made; should even that fail, a line made in advance, never a traceback
    or Python's own exit 1 (which would read as "validate found problems")."""
    import traceback

    try:
        if os.environ.get("MEMCTL_DEBUG"):
            traceback.print_exception(exc)
    except MemoryError:
        pass
    traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None
    try:
        return report_error(*_must(error_report(exc)), json_doc=json_doc and not _reported(exc))
    except MemoryError:
        try:
            os.write(sys.__stderr__.fileno(), _OUT_OF_MEMORY)  # type: ignore[union-attr]
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_INTERNAL


def _must(found: tuple[str, str, int] | None) -> tuple[str, str, int]:
    assert found is not None
    return found


def _after_change(found: tuple[str, str, int] | None) -> tuple[str, str, int]:
    """The error of a command, its message followed by what the command had
    already written (``output.with_written``): a correction committed
    whose report a full disk or a closed stdout then lost says so, as an
    interrupt there does, rather than a bare ``standard output: ...`` (exit
    7, "nothing was changed": rerun, the correction is refused as stale)."""
    from .output import with_written

    code, message, status = _must(found)
    return code, with_written(message), status


def _reported(exc: BaseException) -> bool:
    """Whether a streamed JSON document already ends with ``exc`` (it then
    gets no second error document)."""
    return bool(getattr(exc, "json_reported", False))


# The cyclic garbage collector's first threshold in a memctl process (CPython's
# default is 700); see main.
GC_THRESHOLD = 100_000


class _ClosedStdout:
    """``sys.stdout`` of a process started with its stdout closed (``memctl
    ... >&-``), where Python leaves None: a write to it is a failed write
    (one line, exit 7), a flush does nothing (nothing is held), and a
    command that writes nothing to stdout runs as usual."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        import errno

        raise OSError(errno.EBADF, "closed", "standard output")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _ClosedStderr(_ClosedStdout):
    """``sys.stderr`` of a process started with its stderr closed (``memctl
    ... 2>&-``), where Python leaves None: what is written to it is dropped,
    as ``click.echo`` drops it (nobody is there to read a diagnostic), and
    the command ends with the status it would have had."""

    def write(self, text: str) -> int:
        return len(text)


def _write_early(text: str) -> int | None:
    """``text`` on stdout for the answers given before the command tree is
    built (``--version``, a TAB); None once written, else the exit status:
    141 for a reader that went away, one line and the write's status for a
    failed write (a full disk: 7), as every command."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        from .output import broken_pipe_exit

        return broken_pipe_exit()
    except OSError as exc:
        from .output import settle_stdout, stdout_error

        stdout_error(exc)
        code, status, message = _classify_os_error(exc)
        report_error(code, message, status, json_doc=False)
        settle_stdout()
        return status
    return None


def _import_orjson_whole() -> None:
    """Import orjson with SIGINT, SIGTERM and SIGHUP held back: a
    KeyboardInterrupt raised inside its native module's initialisation
    (a Ctrl-C in memctl's first 100 ms) crashed the process with SIGSEGV
    (orjson 3.13; before 2026-12-07 about one Ctrl-C in three at that
    moment).  A signal that came meanwhile is delivered as the import ends,
    where the command's handling of it begins."""
    import sys

    if "orjson" in sys.modules:
        return
    import signal

    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):   # (no such call here, or not the main thread)
        import orjson  # noqa: F401
        return
    try:
        import orjson  # noqa: F401,F811
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _wraps_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised because of a Ctrl-C or a termination
    signal (a KeyboardInterrupt in its chain): Python wraps one raised in
    some hooks of its own (a ``__set_name__`` as a class is made, during a
    lazy import) in a RuntimeError, which was reported as an internal error
    (exit_code 70 in the JSON error while the process exited 143)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _interrupted(args: Sequence[str]) -> int:
    """Ctrl-C: one line on stderr, exit 130, and a next Ctrl-C ends the
    process at once.  The JSONL error line ends a JSONL stream, after its
    last whole row.  Under --json it is the document when the command had
    written nothing yet (one that prints its document at its end, or any
    command while it starts); a document begun is not followed by it (an
    interrupted ``facts --json`` ends its document with the error itself)."""
    from .output import interrupted_once, interruption
    from .state import STATE

    interrupted_once()
    code, message, status = interruption()
    fmt = _json_format(args)
    return report_error(code, message, status,
                        json_doc=fmt == "jsonl" or (fmt == "json" and not STATE.output_started))


def _ended(*, own: bool) -> None:
    """What main undoes as it returns: stdout written out, the Ctrl-C handler
    as it was, and in memctl's own process (``own``) the termination
    handlers back to their default, the process ended by a termination
    signal that stopped the command."""
    from .output import end_as_terminated, interrupted_after, settle_stdout, sigint_as_before
    from .state import STATE

    settle_stdout()
    sigint_as_before()
    # what the command set beyond itself: the core's note hook (a library
    # caller that ran main in its process is not left with memctl's notes on
    # its stderr), --quiet, and what it wrote (a next main() interrupted as
    # it starts said "interrupted; the forget of X was written")
    interrupted_after(None)
    seen = sys.modules.get("lecode_memctl.core.seen")
    if seen is not None:
        seen.busy_note = None   # type: ignore[attr-defined]
    STATE.quiet = False
    if own:
        end_as_terminated()


def _stdout_flushes() -> bool:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return False
    return True


def _raised_writing_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a write or flush of stdout in the
    innermost Python frame it went through (click's ``echo``: ``file``).  A
    failed flush of more than 4 KiB leaves the buffer empty (the write went
    to the file directly), so stdout flushes again fine: a full disk under
    ``memctl facts --help > FILE`` said a bare "No space left on device"
    once the help was over 4 KiB."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    out = sys.stdout
    for value in tb.tb_frame.f_locals.values():
        if value is out or value is getattr(out, "buffer", None) or value is sys.__stdout__:
            return True
    return False


def _freeze_imports() -> None:
    """Move every object made so far (the modules imported, the command
    tree) out of the collector's reach: they live until the exit, so no
    collection during the command walks them, and neither does the full one
    the interpreter runs at its exit (5 to 10 ms of a 100 ms command before;
    about 1 ms after, for the objects the command itself made, which are
    collected and finalized at the exit as before: a store not closed is
    still closed by its ``__del__``)."""
    import gc

    gc.freeze()


def _answer_early(args: Sequence[str]) -> int | None:
    """The answers given before the command tree is built (``--version``,
    the completion scripts, a TAB on a command name): their exit status, or
    None for a command line that needs the tree."""
    if args == ["--version"]:
        # The common cron/health-check call: answer without building the command tree.
        from lecode_memctl import __version__

        failed = _write_early(f"memctl {__version__}\n")
        return 0 if failed is None else failed

    if os.environ.get("_MEMCTL_COMPLETE") in ("source_bash", "source_zsh", "source_fish"):
        # typer would print its own templates, not memctl's scripts (which
        # quote the candidates, read COMP_LINE...): the packaged script, as
        # 'memctl completion SHELL' prints it
        from importlib import resources

        shell = os.environ["_MEMCTL_COMPLETE"].removeprefix("source_")
        name = {"bash": "memctl.bash", "zsh": "_memctl", "fish": "memctl.fish"}[shell]
        try:
            script = resources.files("lecode_memctl").joinpath("share", name).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            from lecode_memctl.core.errors import NotFound

            return report_error(NotFound.code, f"{name} is not installed with this memctl",
                                NotFound.exit_code, json_doc=False)
        failed = _write_early(script)
        return 0 if failed is None else failed

    if os.environ.get("_MEMCTL_COMPLETE"):
        # A TAB on a command name is answered from the generated table, without
        # typer (each TAB is a fresh process); anything else goes to typer below.
        from .completion import bad_bash_request, fast_complete

        problem = bad_bash_request(os.environ)
        if problem is not None:
            return report_error(UsageError.code, problem, UsageError.exit_code, json_doc=False)
        done = fast_complete(os.environ)
        if done is not None:
            text, status = done
            if text is not None:
                failed = _write_early(text + "\n")
                if failed is not None:
                    return failed
            return status
    return None


def main(argv: Sequence[str] | None = None) -> int:
    own = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:      # started with stdout closed (memctl ... >&-)
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:      # started with stderr closed (memctl ... 2>&-)
        sys.stderr = _ClosedStderr()
    try:
        if own:
            # First of all, before any import of the start-up: SIGTERM and
            # SIGHUP stop memctl from here on as Ctrl-C does, one line (the
            # error document under --json) and the signal itself; before
            # 2026-12-07 one in its first 100 ms or so (the imports, the
            # command tree; more under load) ended it without a word, and
            # until a review of the same day one that landed in the
            # collector's set-up (below, then first) did.  A signal from
            # the handlers' install on is kept until the start-up is done,
            # then raised here: never inside an import's callback, where
            # Python prints it.
            from .signals import catch_termination, end_as_terminated, start_up_done, start_up_held

            start_up_held()
            catch_termination()
            # The process is memctl's own (the console script, python -m).  A
            # command makes and drops small objects in batches (SQLite rows
            # 2,000 at a time, a group of references) and makes few reference
            # cycles: at the default threshold the collector ran every few
            # hundred facts (549 collections in facts --all of 100,000 facts,
            # 0.14 s, about 7% of its time) and found next to nothing.  What
            # grows is the imports' objects, which live until the exit: at
            # 10,000 a collection still ran inside typer's import (3 ms of a
            # 100 ms command, nothing found); at 100,000 none runs before the
            # command tree is frozen (below).  A cycle left by an exception is
            # still collected, after at most 100,000 more objects.
            # main(ARGS), called in another program's process (the tests),
            # leaves that program's collector alone.
            import gc

            gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        answered = _answer_early(args)
        if answered is not None:
            if own:
                start_up_done()
                end_as_terminated()
            return answered
        _import_orjson_whole()
        from lecode_memctl.core.errors import MemctlError

        from . import state

        if os.environ.get("_MEMCTL_COMPLETE"):
            from .app import app
            from .typer_patches import patch_for_completion

            patch_for_completion()
        else:
            from .registry import invoked_command

            only = invoked_command(args)
            if only is None:
                from .app import app
            else:
                from .app import build_app

                app = build_app(only)

        import typer
        from typer import _click

        state.reset()
        from .output import (
            broken_pipe_exit,
            command_running,
            interrupt_lost,
            setup_streams,
            stdout_gone,
        )

        setup_streams()
        json_doc = _wants_json(args)
        command = typer.main.get_command(app)
        if own:
            _freeze_imports()
            start_up_done()
    except (KeyboardInterrupt, Exception) as exc:
        # Ctrl-C, SIGTERM or SIGHUP while the command tree is imported and
        # built (the first 100 ms or so; one Python wrapped in a
        # RuntimeError too): the line and status of an interrupted command,
        # not a traceback or a silent end (what happens before this function
        # runs is Python's), and the same ending (a Ctrl-C inside
        # catch_termination leaves the handlers it had installed)
        if not _wraps_interrupt(exc):
            raise
        try:
            return _interrupted(args)
        finally:
            _ended(own=own)
    try:
        try:
            with command_running():
                rv = command.main(args=args, prog_name="memctl", standalone_mode=False)
            try:
                sys.stdout.flush()  # a reader that went away shows here, not at exit
            except OSError as exc:
                from .output import stdout_error

                stdout_error(exc)
                raise
            if rv == EXIT_INTERRUPTED or interrupt_lost():
                # typer answers a KeyboardInterrupt with Exit(130), without a
                # word; one Python could only print ("Exception ignored in" a
                # weakref callback) let the command run on: interrupted all
                # the same, not 0
                return _interrupted(args)
            return rv if isinstance(rv, int) else 0
        except MemctlError as exc:
            # a streamed JSON document that already carries the error gets no second one
            return report_error(*_after_change(error_report(exc)), json_doc=json_doc and not _reported(exc))
        except _click.exceptions.NoArgsIsHelpError as exc:
            # 'memctl' alone: the help as --help prints it (not squeezed into an
            # error line), on stderr with the usage status, as click would
            try:
                sys.stderr.write(exc.format_message() + "\n")
                sys.stderr.flush()
            except Exception:
                pass
            return UsageError.exit_code
        except _click.exceptions.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            from .options import belongs_after, close_guesses_only

            after = belongs_after(exc, args)     # (first: it drops click's root suggestions)
            close_guesses_only(exc)
            return report_error(UsageError.code, exc.format_message() + after + where,
                                UsageError.exit_code, json_doc=json_doc)
        except _click.exceptions.ClickException as exc:
            return report_error(UsageError.code, exc.format_message(), exc.exit_code,
                                json_doc=json_doc)
        except (typer.Abort, KeyboardInterrupt):
            return _interrupted(args)
        except BrokenPipeError:
            # The reader went away (memctl ... | head): not an error of ours.
            return broken_pipe_exit()
        except SystemExit:
            # click/typer answer EPIPE with sys.exit(1) after wrapping stdout; that
            # is the broken pipe too (141), not "validate found problems".
            if stdout_gone():
                return broken_pipe_exit()
            raise
        except OSError as exc:
            if exc.filename is None and (not _stdout_flushes() or _raised_writing_stdout(exc)):
                # (a write of click's or rich's own, such as --help: stdout
                # still holds what it could not take)
                from .output import stdout_error

                stdout_error(exc)
            return report_error(*_after_change(error_report(exc)), json_doc=json_doc and not _reported(exc))
        except typer.Exit as exc:  # pragma: no cover - standalone_mode=False returns it
            return exc.exit_code
        except MemoryError as exc:
            return _out_of_memory(exc, json_doc=json_doc)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if _wraps_interrupt(exc):
                return _interrupted(args)
            code, message, status = _after_change(error_report(exc))
            if status == EXIT_INTERNAL and os.environ.get("MEMCTL_DEBUG"):
                import traceback

                traceback.print_exc()
            return report_error(code, message, status, json_doc=json_doc and not _reported(exc))
    finally:
        _ended(own=own)
