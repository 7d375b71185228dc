"""Rendering shared by every command: JSON, listings, safe text.

Stored text is untrusted: it is never interpreted as rich markup, and
control characters are escaped in human output.  ``--json`` round-trips the
exact text.  rich and tabulate are imported only when a table is rendered.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from lecode_memctl.core._lazy import lazy_compile
from lecode_memctl.core.held import held_values, hold_bytes, hold_value  # noqa: F401 - (their home)

# memctl's signals, offered here as before: their home is .signals, which
# main imports (and installs) before this module
from .signals import (  # noqa: F401
    _SIG,
    REPEAT_ENDS_AFTER,
    _interrupted,
    _Signals,
    _terminated,
    catch_termination,
    command_running,
    deferred_termination,
    end_as_terminated,
    interrupt_lost,
    interrupted_after,
    interrupted_once,
    interruption,
    sigint_as_before,
    uncut,
    uncut_from,
    with_written,
)
from .state import STATE

if TYPE_CHECKING:
    from lecode_memctl.core.held import HeldRows, Spill

LISTING_FORMATS = ("table", "json", "jsonl", "csv", "tsv")

# stdout's buffer under PYTHONUNBUFFERED=1 (setup_streams): what a listing
# writes at a time in a pipe or a file (Stream)
STREAM_CHUNK = 1 << 16

# C0 except tab and newline, DEL, C1, and the bidi controls (embeddings,
# overrides, isolates, marks) that can reorder what a terminal shows.
# Also the lone surrogates U+DC80..U+DCFF: bytes that are not UTF-8 in a file
# name (os.listdir's surrogateescape), shown as the byte they stand for.
_UNSAFE_CHARS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
                 "\u061c\udc80-\udcff")
_UNSAFE = lazy_compile(f"[{_UNSAFE_CHARS}]")
# What :func:`safe` escapes: those, and the line and paragraph separators
# U+2028 and U+2029, the line breaks of str.splitlines (and of some
# viewers) C0 and C1 do not hold, so that a text's lines are its newlines'
# alone (before 2026-12-07 "a\u2028b" and "a\nb" printed alike in
# ``history``).  JSON on a terminal (:func:`terminal_json`) keeps them.
_UNSAFE_TEXT = lazy_compile(f"[{_UNSAFE_CHARS}\u2028\u2029]")


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def safe(text: str, *, keep_newlines: bool = False) -> str:
    """Escape every control character a terminal could act on, newline and
    tab included: the text is one token on its line (a name, a path, a
    session id, a cell).  ``keep_newlines``: a newline and a tab are left as
    they are, for a text printed as lines of its own (a note, a message):
    the newline is then the one line break left (U+2028 and U+2029 are
    escaped, ``\\u2028``), so split such a text on ``"\\n"``."""
    out = _UNSAFE_TEXT.sub(_escape_char, text)
    if not keep_newlines:
        out = out.replace("\n", "\\n").replace("\t", "\\t")
    return out


def _default(obj: Any) -> Any:
    import dataclasses
    from pathlib import PurePath

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        # a stored BLOB where a value was expected (a damaged row) that a
        # reader passed on: its bytes as text, as row_text shows a BLOB id,
        # never an internal error
        return obj.decode("utf-8", "replace")
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _no_surrogates(obj: Any) -> Any:
    """``core.rowmodel.no_surrogates`` (imported only for an object orjson
    refused)."""
    from lecode_memctl.core.rowmodel import no_surrogates

    return no_surrogates(obj)


def dumps(obj: Any, *, pretty: bool = False) -> bytes:
    opt = orjson.OPT_NON_STR_KEYS
    if pretty:
        opt |= orjson.OPT_INDENT_2
    try:
        return orjson.dumps(obj, default=_default, option=opt)
    except TypeError as exc:
        if "surrogates" not in str(exc):
            raise
        return orjson.dumps(_no_surrogates(obj), default=_default, option=opt)


def setup_streams() -> None:
    """Any locale works: text the output encoding cannot carry is written as
    backslash escapes (\\xe9, \\u2192), never a UnicodeEncodeError.  And no
    output is lost to a short write (:func:`_buffered_stdout`)."""
    _buffered_stdout()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass


def _buffered_stdout() -> None:
    """Under ``PYTHONUNBUFFERED=1`` (or ``python -u``) stdout's text layer
    writes straight to the raw file, which may take fewer bytes than it was
    given (a signal during a long pipe write; a file size limit or a full disk
    reached by the last write), and the text layer drops the rest without a
    word: a truncated output, exit 0.  stdout is then put over a buffered
    layer, which writes the rest or raises, flushed at each line as ``-u``
    flushes."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if not isinstance(raw, io.RawIOBase) or not isinstance(out, io.TextIOWrapper):
        return
    try:
        out.flush()
        try:
            # a file object of its own on the same descriptor, so that
            # closing this one never closes the interpreter's
            raw = io.FileIO(raw.fileno(), "wb", closefd=False)
        except (OSError, ValueError):
            pass
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw, buffer_size=STREAM_CHUNK),
                                      encoding=out.encoding, errors=out.errors, newline="\n",
                                      line_buffering=True)
        # the text layer replaced stays open (collected, it would close a raw
        # file shared with the new one)
        _REPLACED.append(out)
    except (OSError, ValueError):
        pass


_REPLACED: list[Any] = []


def stdout_gone() -> bool:
    """Whether click/typer saw a broken pipe (it wraps stdout when it does)."""
    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def broken_pipe_exit() -> int:
    """Exit status 141 (128 + SIGPIPE) for a reader that went away; stdout is
    pointed at /dev/null so that the interpreter's last flush stays quiet."""
    _stdout_to_devnull()
    from lecode_memctl.core.errors import EXIT_BROKEN_PIPE

    return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """fd 1 onto /dev/null: what stdout still holds goes nowhere, quietly."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def settle_stdout() -> None:
    """At the end of a command: what stdout still holds is written now.  When
    stdout cannot take it (a full disk, a file size limit; the error was
    reported, or is about to be), stdout is pointed at /dev/null, as after a
    broken pipe, so that the interpreter's last flush does not print a
    second, Python-shaped, error."""
    if sys.stdout is None:
        return      # (closed from the start: fd 1 may now be a file memctl opened)
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _stdout_to_devnull()


def stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


STDOUT_NAME = "standard output"


def stdout_error(exc: OSError) -> None:
    """Name stdout in an error writing to it, so that its one line says
    ``standard output: No space left on device``, not a bare reason that
    reads as the store's (a broken pipe is no error: it stays as it is)."""
    if exc.filename is not None or isinstance(exc, BrokenPipeError):
        return
    try:
        if sys.stdout.fileno() != 1:    # (validate --output's file, say)
            return
    except (AttributeError, OSError, ValueError):
        return
    exc.filename = STDOUT_NAME


def stdout_binary() -> Any:
    """stdout's binary layer, for a command that writes bytes (export's tar
    archive).  stdout closed (``memctl ... >&-``, where it has none) raises
    the error a write to it raises: one line, ``standard output: closed``,
    exit 7, as every command (an internal error, exit 70, before)."""
    buf = getattr(sys.stdout, "buffer", None)
    if buf is None:
        import errno

        raise OSError(errno.EBADF, "closed", STDOUT_NAME)
    return buf


def write_bytes(data: bytes) -> None:
    STATE.output_started = True
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    try:
        out.flush()
        if buf is not None:
            _write_all(buf, data)
            buf.flush()
        else:
            out.write(data.decode("utf-8"))
    except OSError as exc:
        stdout_error(exc)
        raise


def _json_escape_char(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def terminal_json(data: bytes) -> bytes:
    """JSON for a terminal: the C1 and bidi characters orjson leaves raw
    (U+009B is a CSI, U+202E reverses what follows) written as ``\\uXXXX``
    escapes -- the same JSON value, nothing for the terminal to act on.  They
    can only occur inside strings, so the document stays valid (issue 16.6)."""
    text = data.decode("utf-8")
    if not _UNSAFE.search(text):
        return data
    return _UNSAFE.sub(_json_escape_char, text).encode("utf-8")


def json_bytes(obj: Any, *, pretty: bool | None = None) -> bytes:
    """The bytes :func:`emit_json` writes for ``obj``: pretty on a terminal,
    compact in a pipe (or as ``pretty`` says), with its final newline; on a
    terminal, control and bidi characters escaped (:func:`terminal_json`)."""
    tty = stdout_is_tty()
    if pretty is None:
        pretty = tty
    data = dumps(obj, pretty=pretty) + b"\n"
    return terminal_json(data) if tty else data


def page_bytes(obj: Any) -> bytes:
    """What a page of ``read`` or ``recall`` is measured by (``render`` of
    ``core.paging``): the document pretty, as :func:`json_bytes` writes it to
    this stdout -- the most bytes it takes printed here: on a terminal
    exactly what is printed, escapes included; in a pipe more than the
    compact document printed, and the same measure as ``core.paging``'s own
    (a page in a pipe is cut as before).  A ``--all`` line (compact, escaped
    on a terminal) is never larger."""
    return json_bytes(obj, pretty=True)


def emit_json(obj: Any, *, pretty: bool | None = None) -> None:
    """One JSON document on stdout (pretty on a terminal, compact in a pipe).
    On a terminal, control and bidi characters are escaped
    (:func:`terminal_json`); in a pipe the exact text is kept."""
    write_bytes(json_bytes(obj, pretty=pretty))


@contextlib.contextmanager
def ends_with_error(end: Callable[[str, str, int], None]) -> Iterator[None]:
    """The body of a JSON document being streamed: an error that main
    reports (the core's, SQLite's own, a file's, a bug) or an interrupt
    coming from it is first given to ``end(code, message, exit_code)``,
    which ends the document as valid JSON with it, then raised (main then
    prints no second document).  An error writing stdout itself is raised
    as it is: nothing more can go there."""
    try:
        yield
    except Exception as exc:
        from .main import error_report

        found = error_report(exc)
        if found is None or getattr(exc, "filename", None) == STDOUT_NAME:
            raise
        end(*found)
        exc.json_reported = True  # type: ignore[attr-defined]
        raise
    except KeyboardInterrupt:
        # (main says "interrupted", or "terminated by SIGTERM", on stderr,
        # and prints no second document: STATE.output_started)
        interrupted_once()
        end(*interruption())
        raise


#: What ends each element of an encoded array of :func:`emit_json_document`.
ELEMENT_END = b",\n"


def emit_json_document(head: Mapping[str, Any], key: str, rows: Iterable[Any],
                       tail: Callable[[], Mapping[str, Any]],
                       unknown: Mapping[str, Any],
                       more: Sequence[tuple[str, Iterable[Any]]] = (), *,
                       encoded: bool = False) -> None:
    """One JSON document streamed in constant memory (``facts --json``,
    ``grep --json``): the members of ``head``, then ``key``: the array of
    ``rows``, one element per line as they come, then the members that
    ``tail()`` gives once the rows are done (what only their end knows).
    Written as :class:`Stream` says.

    The document is already half written when an error comes while the rows
    are made: it ends as valid JSON all the same, with the members of
    ``unknown`` (the tail's, null) and ``"error": {"code", "message",
    "exit_code"}`` -- for any error main reports (the core's, SQLite's own, a
    file's, a bug), as main reports it, which then prints no second
    document, and for an interrupt.  An error writing stdout itself is raised
    as it is: nothing more can go there.  ``more``: further arrays, each
    (its key, its rows), streamed the same way after the first one
    (``verify --json``'s findings, then its facts).  ``encoded``: ``rows``
    are already encoded, in pieces of one or more elements, each element
    followed by ``,\\n`` (:data:`ELEMENT_END`; the pieces
    ``factview.iter_fact_lines`` gives of such an encoding)."""
    with Stream() as write:
        write(dumps(head)[:-1] + b"," + dumps(key) + b":[")

        def end_with_error(code: str, message: str, exit_code: int) -> None:
            err = {**unknown, "error": {"code": code, "message": message,
                                        "exit_code": exit_code}}
            write(b"\n]," + dumps(err)[1:] + b"\n")

        with ends_with_error(end_with_error):
            for i, (_, array) in enumerate([(key, rows), *more]):
                if i:
                    write(b"\n]," + dumps(more[i - 1][0]) + b":[")
                first = True
                if encoded and not i:
                    # (each piece's last ",\n" is written before the next one)
                    for piece in array:
                        write((b"\n" if first else b",\n") + piece[:-2])
                        first = False
                    continue
                for row in array:
                    write((b"\n" if first else b",\n") + dumps(row))
                    first = False
        members = dumps(tail())
        with uncut():
            write(b"\n]}\n" if members == b"{}" else b"\n]," + members[1:] + b"\n")


def emit_jsonl(rows: Iterable[Any]) -> None:
    """JSON Lines, streamed row by row (written as :class:`Stream` says)."""
    with Stream() as write:
        for row in rows:
            write(dumps(row) + b"\n")


class Stream:
    """How a streamed listing writes its pieces.  On a terminal each piece is
    written and flushed at once, so a person sees the rows as they come.
    Elsewhere (a pipe, a file) the pieces go into stdout's buffer, which
    writes a chunk at a time (64 KiB under ``PYTHONUNBUFFERED=1`` or ``-u``,
    where :func:`setup_streams` gives stdout a buffer of that size; 8 KiB
    otherwise) and keeps what an interrupted write did not take, for the
    next flush: a row is never cut.  A text layer that flushes at each line
    (``-u``) does not during the listing.  The pieces are bytes of UTF-8
    text (JSON, CSV) for the byte layer, whatever the locale; escaped on a
    terminal as :func:`emit_json` escapes.  A raw byte layer
    (no buffer: only where setup_streams did not run) gets each piece whole
    (:func:`_write_all`).

    Used as a context manager, the call writes a piece; stdout is flushed
    when the block ends, also when it ends with an error or an interrupt
    (the rows before it are output), but not after a broken pipe."""

    __slots__ = ("_direct", "_out", "_buf", "_put")

    def __init__(self) -> None:
        STATE.output_started = True     # (here, not per piece: a listing's hot path)
        out = sys.stdout
        self._out = out
        self._direct = stdout_is_tty()
        buf = self._buf = getattr(out, "buffer", None)
        # (a buffer takes a piece whole; a raw file may not)
        self._put: Callable[[bytes], Any] = (
            buf.write if isinstance(buf, io.BufferedIOBase)
            else (lambda piece: _write_all(buf, piece)))
        if self._direct:
            return
        if self._buf is not None:
            out.flush()     # (what the text layer holds comes first)

    def __call__(self, piece: bytes) -> None:
        try:
            if self._direct:
                write_bytes(terminal_json(piece))
            elif self._buf is None:     # a stdout without a byte layer
                self._out.write(piece.decode("utf-8"))
            else:
                self._put(piece)
        except OSError as exc:
            stdout_error(exc)
            raise

    @property
    def direct(self) -> bool:
        """Whether each piece is written at once (a terminal)."""
        return self._direct

    def close(self) -> None:
        """Flush stdout."""
        try:
            (self._buf if self._buf is not None else self._out).flush()
        except OSError as exc:
            stdout_error(exc)
            raise

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None and isinstance(exc, BrokenPipeError):
            return
        if isinstance(exc, KeyboardInterrupt):
            interrupted_once()
        self.close()


class _Utf8:
    """The file :func:`csv_writer` writes a :class:`Stream`'s rows to
    (``with``): the text as UTF-8 bytes, whatever the locale
    (docs/OUTPUT.md, "Encoding"); a lone surrogate (none left by
    :func:`safe` but those outside U+DC80..U+DCFF) as its backslash
    escape, so that the bytes stay UTF-8.  On a terminal each row is
    written at once; elsewhere the rows are gathered and encoded some
    :data:`STREAM_CHUNK` characters at a time (a row at a time cost a
    quarter more than the text layer did), and what is gathered is
    written when the block ends, also with an error or an interrupt."""

    __slots__ = ("_write", "_at_once", "_parts", "_size")

    def __init__(self, stream: Stream) -> None:
        self._write: Callable[[bytes], None] = stream
        self._at_once = stream.direct
        self._parts: list[str] = []
        self._size = 0

    def write(self, text: str) -> None:
        if self._at_once:
            self._write(text.encode("utf-8", "backslashreplace"))
            return
        self._parts.append(text)
        self._size += len(text)
        if self._size >= STREAM_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            data = "".join(self._parts).encode("utf-8", "backslashreplace")
            self._parts.clear()     # (before the write: a failed one is not tried again)
            self._size = 0
            self._write(data)

    def __enter__(self) -> _Utf8:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.flush()


def _write_all(buf: Any, data: bytes) -> None:
    """``data`` to a byte layer, whole: a raw file (stdout without a buffer)
    may take fewer bytes than it was given."""
    view = memoryview(data)
    while view:
        n = buf.write(view)
        if n is None:  # a non-blocking stdout that is full
            import errno

            raise BlockingIOError(errno.EAGAIN, "stdout is full (non-blocking)")
        view = view[n:]


def echo(text: str = "", *, err: bool = False) -> None:
    """Print already-safe text (callers escape stored text with :func:`safe`).
    Once a table in a markup format is on stdout (:data:`MARKUP_FORMATS`),
    the lines after it go to stderr: stdout holds the table alone, so that
    no line of the store's text (a learning proposal's, say) follows it
    unescaped, where a Markdown table would take it for a row and HTML
    would make it live."""
    if not err and STATE.markup_table:
        err = True
    stream = sys.stderr if err else sys.stdout
    try:
        stream.write(text + "\n")
    except OSError as exc:
        if err:
            stderr_lost()
            return
        stdout_error(exc)
        raise


def stderr_lost() -> None:
    """stderr failed a write (a full disk: ``2>/dev/full``): from here on it
    is as a closed stderr (``2>&-``), what is written there dropped, and the
    command ends with the status it would have had.  Before 2026-12-07 a
    hint or a warning that could not be written made any command exit 7,
    which the exit table gives to stdout alone (``export -o -`` said so of
    a complete bundle, ``grep`` lost its "no match", 1)."""
    from .main import _ClosedStderr

    sys.stderr = _ClosedStderr()


def warn_line(text: str) -> None:
    """One ``memctl: warning: TEXT`` line on stderr, TEXT escaped (a
    newline in it cannot make a second line): e.g. what Python's ``re``
    warns of in a user's pattern (``core.userregex``)."""
    echo(f"memctl: warning: {safe(text)}", err=True)


def confirm(question: str) -> bool:
    """A yes-or-no question on stderr, no by default (every confirmation
    prompt of memctl's: ``forget``, ``correct``, ``redact``,
    ``migrate-legacy``): True for yes.  An end of input (Ctrl-D, or a
    terminal gone) answers no, as an 'n' does: the prompt declined, exit 1
    with nothing changed.  Before, click's ``Abort`` for it was taken for a
    Ctrl-C (``interrupted``, 130); a Ctrl-C stays one."""
    import typer

    from .main import _ClosedStderr

    if isinstance(sys.stderr, _ClosedStderr):
        # (stderr closed, or lost to a failed write: nobody sees the plan or
        # the question, so nothing is agreed to; a code review of
        # 2026-12-07 saw a forget go ahead on a 'y' typed to a question
        # never shown)
        return False
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort as exc:
        if not isinstance(exc.__context__, EOFError):
            raise
        # (a terminal echoes no newline for a Ctrl-D: the question's line
        # is ended here, before the command says nothing was done)
        echo("", err=True)
        return False


def echo_untrusted(text: str, *, err: bool = False) -> None:
    echo(safe(text, keep_newlines=True), err=err)


def console(stderr: bool = False, width: int | None = None):  # -> rich.console.Console
    from rich.console import Console

    color = STATE.emit_color(stderr=stderr)
    return Console(stderr=stderr, markup=False, highlight=False, emoji=False,
                   no_color=not color, color_system="auto" if color else None,
                   force_terminal=True if color else None, soft_wrap=True, width=width)


#: tabulate's formats that write each cell as it is into a markup language
#: (HTML, LaTeX, a wiki's, org-mode's, reStructuredText, AsciiDoc) and that
#: memctl does not escape either, with the format to use instead: a store's
#: text (a transcript's, a note's, a fact's) is never written as live markup,
#: nor split into cells by a separator it holds
UNESCAPED_FORMATS = {"unsafehtml": "html", "latex_raw": "latex",
                     **dict.fromkeys(("orgtbl", "rst", "asciidoc", "jira", "moinmoin",
                                      "textile", "youtrack"), "github")}

# GitHub-flavoured Markdown: a backslash before each character that starts
# Markdown markup (emphasis, code, links, raw HTML, entities, strikethrough,
# GitHub's math) or ends a table cell (GFM's own escape of "|")
_MARKDOWN = lazy_compile(r"([\\`*_\[\]<&|~$])")
# MediaWiki: each character of wiki markup (cells, links, templates, tags,
# entities, bold and italic, signatures, magic words) as a character
# reference, which MediaWiki shows as the character and never reads as markup
_WIKI = lazy_compile(r"[|!\[\]{}<>&'~_]")


def _wiki_ref(m: re.Match[str]) -> str:
    return f"&#{ord(m.group(0))};"


#: tabulate's markup formats whose cells memctl escapes (:func:`_table_text`)
CELL_ESCAPES: dict[str, Callable[[str], str]] = {
    "github": lambda c: _MARKDOWN.sub(r"\\\1", c),
    "pipe": lambda c: _MARKDOWN.sub(r"\\\1", c),
    "mediawiki": lambda c: _WIKI.sub(_wiki_ref, c),
}

#: tabulate's formats that write a markup language, escaped by memctl
#: (:data:`CELL_ESCAPES`) or by tabulate itself: after such a table, the
#: lines a command writes around it go to stderr (:func:`echo`)
MARKUP_FORMATS = frozenset(CELL_ESCAPES) | {"html", "latex", "latex_booktabs", "latex_longtable"}


def check_format(fmt: str | None, *, json_flag: bool = False,
                 extra: Sequence[str] = ()) -> str:
    """Normalise ``--format``/``--json`` into one name; bad names are usage errors."""
    from lecode_memctl.core.errors import UsageError

    _not_empty(fmt)
    if json_flag:
        if fmt and fmt != "json":
            raise UsageError(f"--json conflicts with --format {fmt}")
        return "json"
    if not fmt:
        return "table"
    if fmt in LISTING_FORMATS or fmt in extra:
        return fmt
    if fmt in UNESCAPED_FORMATS:
        raise UsageError(f"--format {fmt} writes the store's text unescaped (markup in a transcript "
                         f"or a note would be live, or split its cells, where the table is "
                         f"shown); use --format {UNESCAPED_FORMATS[fmt]}")
    import tabulate

    if fmt in tabulate.tabulate_formats:
        return fmt
    raise UsageError(
        f"unknown format {fmt!r}; use one of {', '.join(LISTING_FORMATS + tuple(extra))} "
        "or a tabulate format name (plain, github, grid, ...)")


def _not_empty(fmt: str | None) -> None:
    """An empty ``--format`` (``--format=``) is a usage error, as an empty
    ``--since`` or path is; not given (None) is the command's default."""
    if fmt == "":
        from lecode_memctl.core.errors import UsageError

        raise UsageError("--format needs a format name; it was given an empty one")


def fixed_format(fmt: str | None, *, json_flag: bool, choices: Sequence[str] | None,
                 default: str = "human", aliases: dict[str, str] | None = None) -> str:
    """``--format``/``--json`` of a command with a fixed set of formats (no
    tabulate names): ``--json`` is ``json``, none is ``default``, ``aliases``
    map a name to another; a name outside ``choices`` (when given) is a usage
    error.  (Listings use :func:`check_format`.)"""
    from lecode_memctl.core.errors import UsageError

    _not_empty(fmt)
    if json_flag:
        if fmt and fmt != "json":
            raise UsageError(f"--json conflicts with --format {fmt}")
        return "json"
    name = fmt or default
    name = (aliases or {}).get(name, name)
    if choices is not None and name not in choices:
        raise UsageError(f"unknown format {name!r}; use one of {', '.join(choices)}")
    return name


MACHINE_FORMATS = ("json", "jsonl", "csv", "tsv")

#: The commands whose people's output is a text report rather than a table
#: of rows (validate, grep, secrets) take ``--format table`` for it, as every
#: listing does (README), and keep the name ``human`` they documented first.
REPORT_ALIASES = {"table": "human"}


def emit_json_array(rows: Iterable[Any]) -> None:
    """One JSON array, streamed: one element per line, constant memory
    (written as :class:`Stream` says)."""
    with Stream() as write:
        write(b"[")
        first = True
        for row in rows:
            write((b"\n" if first else b",\n") + dumps(row))
            first = False
        write(b"\n]\n")


def emit_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], fmt: str) -> None:
    """CSV with RFC 4180 quoting and LF line ends (or the same with tabs),
    with a header row, streamed (the header once the first row is made, or
    the rows are known to be none).  Cells use the flat encoding of
    core.rowmodel; text keeps its newlines and tabs (quoted), other control
    characters are escaped as in tables; in UTF-8 whatever the locale,
    written as :class:`Stream` says."""
    cells = csv_cells(columns)
    # the first row is made before the header is written: an error before it
    # (an unknown session, say) leaves stdout empty, as in every format
    it = iter(rows)
    first = next(it, None)
    with Stream() as out, _Utf8(out) as sink:
        writer = csv_writer(sink, fmt)
        writer.writerow(columns)
        if first is None:
            return
        writer.writerow(cells(first))
        for row in it:
            writer.writerow(cells(row))


def emit_csv_lines(pieces: Iterable[bytes], columns: Sequence[str], fmt: str) -> None:
    """What :func:`emit_csv` writes, from rows already encoded as its lines
    (:func:`csv_line`) and given in pieces of any length: the header once
    the first piece is made, or the pieces are known to be none, then the
    pieces as they are."""
    it = _whole_characters(pieces)
    first = next(it, None)
    with Stream() as out:
        with _Utf8(out) as sink:
            csv_writer(sink, fmt).writerow(columns)
        if first is None:
            return
        out(first)
        for piece in it:
            out(piece)


def _whole_characters(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """UTF-8 ``pieces`` again, each cut after a whole character: the bytes
    of one a piece ends inside (a spill file read back 1 MiB at a time) go
    with the next piece.  A terminal's stream decodes each piece it is given
    (:func:`terminal_json`), as a stdout without a byte layer does: a
    character cut in two was an internal error (exit 70) there."""
    from lecode_memctl.core.utf8 import whole_end

    carry = b""
    for piece in pieces:
        if carry:
            piece, carry = carry + piece, b""
        cut = whole_end(piece)
        if cut < len(piece):
            piece, carry = piece[:cut], piece[cut:]
        if piece:
            yield piece
    if carry:
        yield carry     # (cut short for good: as it is; the decoder says so)


def csv_line(columns: Sequence[str], fmt: str) -> Callable[[Mapping[str, Any]], bytes]:
    """A row as the line :func:`emit_csv` writes of it (``fmt`` csv or
    tsv), in UTF-8 as :func:`emit_csv` writes it (:class:`_Utf8`), for
    :func:`emit_csv_lines`."""
    buf = io.StringIO()
    writer = csv_writer(buf, fmt)
    cells = csv_cells(columns)

    def line(row: Mapping[str, Any]) -> bytes:
        writer.writerow(cells(row))
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text.encode("utf-8", "backslashreplace")

    return line


def csv_writer(out: Any, fmt: str) -> Any:
    """The ``csv.writer`` of :func:`emit_csv` (``fmt`` csv or tsv) over ``out``."""
    import csv

    return csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")


def csv_cells(columns: Sequence[str]) -> Callable[[Mapping[str, Any]], list[str]]:
    """A row's cells as :func:`emit_csv` writes them: ``columns``' values in
    the flat encoding of core.rowmodel, control characters escaped."""
    # (bound once: a name imported from rowmodel, a module offering moved
    # names, costs a __path__ lookup through its __getattr__ per import)
    from lecode_memctl.core.rowmodel import flat

    def cells(row: Mapping[str, Any]) -> list[str]:
        return [_csv_cell(row.get(c), flat) for c in columns]

    return cells


def _csv_cell(value: Any, flat: Callable[[Any], str]) -> str:
    """``safe(flat(value))``: a CSV or TSV cell.  Printable ASCII text and
    integers are their own cell, none and booleans their flat text, without the regular
    expression (as :func:`_table_cell`: at 100,000 facts the cells took a
    third of ``facts --all --format csv``)."""
    if type(value) is str:
        if value.isascii() and value.isprintable():
            return value
    elif type(value) is int:
        return str(value)
    elif value is None:
        return ""
    elif type(value) is bool:
        return "true" if value else "false"
    return safe(flat(value), keep_newlines=True)


def spill() -> Spill:
    """The unnamed temporary file a command's held rows share
    (:class:`~lecode_memctl.core.held.Spill`), made in the first temporary
    directory outside the stores (``atomic.temp_parent``); where none can
    be had or written, the rows stay in memory."""
    from lecode_memctl.core.held import Spill

    return Spill(_temp_outside_stores)


def _temp_outside_stores() -> str | None:
    from lecode_memctl.core.atomic import temp_parent

    return temp_parent(STATE.temp_outside())      # (never in a store)


def held_rows(limit: int, sep: bytes) -> HeldRows:
    """Rows held in memory up to ``limit`` bytes, then in a :func:`spill`
    of their own, closed with them (``with``)."""
    from lecode_memctl.core.held import HeldRows

    return HeldRows(limit, sep, spill(), own=True)


def render_records(model: Any, rows: Iterable[Mapping[str, Any]], fmt: str, *,
                   columns: Sequence[str] | None = None,
                   labels: Mapping[str, str] | None = None,
                   display: Any = None, title: str | None = None) -> None:
    """Render the rows of a core.rowmodel.RowModel.  Machine formats give every
    field of every row (streamed); a table shows ``columns`` (default: every
    field but ``type``) under ``labels``, each row passed through ``display``
    first (which may shorten a label, never a value)."""
    if fmt == "json":
        emit_json_array(rows)
        return
    if fmt == "jsonl":
        emit_jsonl(rows)
        return
    if fmt in ("csv", "tsv"):
        emit_csv(rows, model.names, fmt)
        return
    cols = list(columns or [n for n in model.names if n != "type"])
    shown = (display(r) for r in rows) if display else rows
    render_rows(shown, cols, fmt, headers=labels, title=title, ids=model.ids)


def render_rows(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], fmt: str, *,
                headers: Mapping[str, str] | None = None,
                title: str | None = None, ids: Sequence[str] = ()) -> None:
    """Render a listing.  ``json`` is one array, ``jsonl`` streams, ``csv``/``tsv``
    are RFC 4180 quoting and LF line ends with a header row, ``table`` is rich on a terminal and plain
    aligned text in a pipe, any other name is a tabulate format.  Columns in
    ``ids`` are never cut or wrapped, whatever the terminal width."""
    if fmt == "json":
        emit_json_array(rows)
        return
    if fmt == "jsonl":
        emit_jsonl(rows)
        return
    heads = [(headers or {}).get(c, c) for c in columns]
    if fmt in ("csv", "tsv"):
        emit_csv(rows, columns, fmt)
        return
    cells = map(table_cells(columns), rows)
    if fmt == "table" and (stdout_is_tty() or STATE.emit_color()):
        _rich_table(cells, columns, heads, title=title, ids=ids)
        return
    if fmt == "table" and TABLE_HELD_IN_MEMORY is not None and heads:
        stats = PlainStats(heads)
        emit_held_table(map(stats.held, cells), heads, stats, title=title)
        return
    _table_text(list(cells), heads, fmt, title)


def plain_table_out() -> bool:
    """Whether ``--format table`` is plain text here (no terminal, no
    colour) held compactly (:func:`emit_held_table`), not a rich table."""
    return TABLE_HELD_IN_MEMORY is not None and not (stdout_is_tty() or STATE.emit_color())


def table_cells(columns: Sequence[str]) -> Callable[[Mapping[str, Any]], list[str]]:
    """A row's cells in a table: its ``columns``' values, each made a cell
    (:func:`_table_cell`)."""
    from lecode_memctl.core.rowmodel import flat  # (once, as in emit_csv)

    return lambda row: [_table_cell(row.get(c), flat) for c in columns]


def emit_held_table(pieces: Iterable[bytes], heads: Sequence[str], stats: PlainStats, *,
                    title: str | None = None, held_all: Callable[[], None] | None = None,
                    none_if_empty: bool = False) -> int:
    """A plain table (``--format table`` in a pipe) of rows held compactly:
    ``pieces``, the rows' cells as :func:`hold_bytes` encodes them, with
    their :class:`PlainStats` (gathered as they were made, in one process
    or two); ``held_all`` is called once every piece is held, before
    anything is written.  Written as :func:`plain_table` would make it, or
    by tabulate where that declines (the headers alone for no row, or
    nothing with ``none_if_empty``).  Returns the number of rows."""
    with held_rows(TABLE_HELD_IN_MEMORY or 0, b"") as held:
        for piece in pieces:
            held.add(piece)
        if held_all is not None:
            held_all()
        if not stats.rows and none_if_empty:
            return 0
        widths = stats.widths()
        if widths is not None:
            if title:
                echo(safe(title, keep_newlines=True))
            _echo_plain(held_values(held.pieces()), heads, widths)
            return stats.rows
        table_rows = list(held_values(held.pieces()))
    _table_text(table_rows, heads, "table", title)
    return stats.rows


def _table_text(table_rows: list[list[str]], heads: Sequence[str], fmt: str,
                title: str | None) -> None:
    """The text of a table whole: :func:`plain_table`, or tabulate's (the
    cells of a markup format escaped for it: :data:`CELL_ESCAPES`)."""
    text = plain_table(table_rows, heads) if fmt == "table" else None
    if text is None:
        import tabulate

        escape = CELL_ESCAPES.get(fmt)
        if escape is not None:
            table_rows = [[escape(c) for c in r] for r in table_rows]
        tabulate.PRESERVE_WHITESPACE = False
        text = tabulate.tabulate(table_rows, headers=heads,
                                 tablefmt="plain" if fmt == "table" else fmt,
                                 disable_numparse=True)
    if title and fmt == "table":
        echo(safe(title, keep_newlines=True))
    echo(text)
    if fmt in MARKUP_FORMATS:
        STATE.markup_table = True


_C0 = lazy_compile("[\x00-\x1f]")


def plain_table(rows: Sequence[Sequence[str]], heads: Sequence[str]) -> str | None:
    """``tabulate.tabulate(rows, headers=heads, tablefmt="plain",
    disable_numparse=True)`` with ``PRESERVE_WHITESPACE`` off, byte for byte,
    without importing tabulate (whose import alone is a tenth of a command's
    start-up: it calls ``importlib.metadata.version``).  None when tabulate
    could render the cells otherwise than this: a cell or header that is not a
    str, holds a control character (line breaks make multi-line rows, ESC a
    colour code whose width is not counted, \\x01 a separating line), a
    row whose length is not the headers', or text outside ASCII when the
    ``wcwidth`` package is installed (tabulate then measures East Asian wide
    and combining characters by their columns, this by ``len``).

    Every cell is stripped; every column is as wide as its widest cell, and
    at least its header plus 2; cells are left-aligned, joined by two
    spaces, and each line loses its trailing white space."""
    n = len(heads)
    texts = list(heads)
    for r in rows:
        if len(r) != n:
            return None
        texts.extend(r)
    if not all(type(t) is str for t in texts):
        return None
    joined = "".join(texts)
    if joined.isascii():
        if not joined.isprintable():
            return None
    else:
        if _C0.search(joined):
            return None
        from importlib.util import find_spec

        if find_spec("wcwidth") is not None:
            return None
    cols = [[c.strip() for c in col] for col in zip(*rows, strict=True)] if rows else [[] for _ in heads]
    widths = [max([len(h) + 2, *map(len, col)]) for h, col in zip(heads, cols, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    for row in zip(*cols, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


#: Bytes of a plain table's cells held in memory before they are held in an
#: unnamed temporary file (:func:`held_rows`); None: every cell held as a
#: str and the table made whole (``plain_table``), as before 2026-12-06.
TABLE_HELD_IN_MEMORY: int | None = 1 << 20


class PlainStats:
    """What :func:`plain_table`'s tests and widths need of a table's cells,
    taken a row at a time (:meth:`add`), so that the cells need not be
    held as strings: whether every row has a str in each column, whether
    every cell is ASCII, printable, or holds a C0 control character, each
    column's width, and the number of rows.  Those of two processes'
    rows merge (:meth:`state`, :meth:`merge`): a split listing's child
    makes its own rows' cells."""

    def __init__(self, heads: Sequence[str]) -> None:
        self.n = len(heads)
        self.rows = 0
        self.fits = all(type(h) is str for h in heads)
        self.width = [len(h) + 2 for h in heads] if self.fits else []
        self.ascii = self.fits and all(h.isascii() for h in heads)
        self.printable = self.fits and all(h.isprintable() for h in heads)
        self.c0 = self.fits and any(not h.isprintable() and _C0.search(h) for h in heads)

    def add(self, row: list[str]) -> None:
        self.rows += 1
        if not self.fits:
            return
        if len(row) != self.n:
            self.fits = False
            return
        widths = self.width
        for i, c in enumerate(row):
            if type(c) is not str:
                self.fits = False
                return
            if not c.isprintable():
                self.printable = False
                if not self.c0 and _C0.search(c):
                    self.c0 = True
            if self.ascii and not c.isascii():
                self.ascii = False
            w = len(c.strip())
            if w > widths[i]:
                widths[i] = w

    def held(self, row: list[str]) -> bytes:
        """The row's cells taken in (:meth:`add`), as :func:`hold_bytes`
        encodes them for :func:`emit_held_table`."""
        self.add(row)
        return hold_bytes(row)

    def state(self) -> bytes:
        """What :meth:`merge` takes."""
        import marshal

        return marshal.dumps((self.rows, self.fits, self.width, self.ascii, self.printable,
                              self.c0))

    def merge(self, state: bytes) -> None:
        """Another's :meth:`state` (of rows with the same headers) taken in;
        ValueError, and nothing changed, for anything else."""
        import marshal

        try:
            rows, fits, width, ascii_, printable, c0 = marshal.loads(state)
        except (EOFError, ValueError, TypeError):
            raise ValueError("not the state of a plain table") from None
        if (type(rows) is not int or rows < 0 or type(width) is not list
                or any(type(f) is not bool for f in (fits, ascii_, printable, c0))
                or any(type(w) is not int or w < 0 for w in width)
                or (fits and len(width) != len(self.width))):
            raise ValueError("not the state of a plain table")
        self.rows += rows
        self.fits = bool(self.fits and fits)
        if self.fits:
            self.width = [max(a, b) for a, b in zip(self.width, width, strict=True)]
        self.ascii = bool(self.ascii and ascii_)
        self.printable = bool(self.printable and printable)
        self.c0 = bool(self.c0 or c0)

    def widths(self) -> list[int] | None:
        """The columns' widths when :func:`plain_table` would render these
        cells; None when it would decline."""
        if not self.fits:
            return None
        if self.ascii:
            return self.width if self.printable else None
        if self.c0:
            return None
        from importlib.util import find_spec

        return None if find_spec("wcwidth") is not None else self.width


def _echo_plain(rows: Iterable[list[str]], heads: Sequence[str], widths: list[int]) -> None:
    """:func:`plain_table`'s text of ``rows`` (columns ``widths`` wide),
    written some 64 KiB at a time: the same bytes as ``echo`` of it whole."""
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    # each cell stripped and left-aligned in its width, by one format of
    # the row (str.format pads as ljust does: 0.65 us a row against 1.1)
    line_of = "  ".join(f"{{:<{w}}}" for w in widths).format
    strip = str.strip
    size = 0
    for row in rows:
        if len(row) != len(widths):
            raise ValueError("a row of another length than the headers")
        line = line_of(*map(strip, row)).rstrip()
        lines.append(line)
        size += len(line)
        if size > 1 << 16:
            echo("\n".join(lines))
            lines, size = [], 0
    if lines:
        echo("\n".join(lines))


def _display_cell(value: Any, flat: Callable[[Any], str]) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return flat(value)


def _table_cell(value: Any, flat: Callable[[Any], str]) -> str:
    """``safe(_display_cell(value, flat))``: a table's
    cell.  Printable ASCII text and integers are their own cell (nothing in
    them to escape), without the regular expression (at 100,000 facts a
    plain table's cells took half of ``facts --all`` in a pipe)."""
    if type(value) is str:
        if value.isascii() and value.isprintable():
            return value
    elif type(value) is int:
        return str(value)
    return safe(_display_cell(value, flat))


#: Rows of a rich table past which it is drawn a chunk of this many rows
#: at a time (:func:`_rich_table`); None: always whole, every row held as
#: rich objects, as before 2026-12-06.
RICH_CHUNK: int | None = 1000


def _rich_table(rows: Iterable[list[str]], columns: Sequence[str], heads: Sequence[str], *,
                title: str | None, ids: Sequence[str]) -> None:
    """A rich table that fits the terminal by folding text columns; id columns
    keep their whole width (when even that does not fit, the table is drawn
    wider than the terminal rather than cut an id).

    Past :data:`RICH_CHUNK` rows the cells are held compactly (:func:`hold_value`:
    in memory, then in an unnamed temporary file) while each column's
    measurement is taken as rich takes it, and the table is drawn a chunk of
    rows at a time, every chunk with the column widths of the whole table:
    the same text, without every row held as rich objects (at 100,000 facts,
    704 MiB and 38 s).  Where rich does not give those widths, the table is
    drawn whole from the held cells."""
    import itertools

    it = iter(rows)
    if RICH_CHUNK is None:
        _rich_whole(list(it), columns, heads, title=title, ids=ids)
        return
    first = list(itertools.islice(it, RICH_CHUNK + 1))
    if len(first) <= RICH_CHUNK:
        _rich_whole(first, columns, heads, title=title, ids=ids)
        return
    from rich.cells import cell_len

    n = len(heads)
    lens = [len(h) for h in heads]
    low = [0] * n                   # (rich's Text measurement: the longest word,
    high = [0] * n                  # the widest line: Text.__rich_measure__)
    with held_rows(TABLE_HELD_IN_MEMORY or 0, b"") as held:
        for row in itertools.chain(first, it):
            hold_value(held, row)
            for i, c in enumerate(row):
                if len(c) > lens[i]:
                    lens[i] = len(c)
                if c.isascii() and c.isprintable():
                    # (one line, a cell a character: rich's measure, without
                    # its calls; a word no wider than the column's is not sought)
                    wide = len(c)
                    words = c.split() if wide > low[i] else []
                    least = max(map(len, words)) if words else wide
                else:
                    lines = c.splitlines()
                    wide = max(map(cell_len, lines)) if lines else 0
                    words = c.split()
                    least = max(map(cell_len, words)) if words else wide
                if wide > high[i]:
                    high[i] = wide
                if least > low[i]:
                    low[i] = least
        del first
        drawn = _rich_chunks(held, columns, heads, title=title, ids=ids, lens=lens,
                             low=low, high=high)
        if not drawn:
            _rich_whole(list(held_values(held.pieces())), columns, heads, title=title, ids=ids)


def _rich_whole(table_rows: list[list[str]], columns: Sequence[str], heads: Sequence[str], *,
                title: str | None, ids: Sequence[str]) -> None:
    """:func:`_rich_table` of rows held as a list: one table."""
    widths = [max([len(h), *(len(r[i]) for r in table_rows)]) for i, h in enumerate(heads)]
    table = _rich_frame(columns, heads, title=title, ids=ids, widths=widths, rows=table_rows)
    _rich_console(columns, ids, widths).print(table)


def _rich_console(columns: Sequence[str], ids: Sequence[str], widths: Sequence[int]) -> Any:
    """The console of :func:`_rich_table`: the terminal's, or wider where
    the id columns (``widths``: each column's longest cell, header
    included, in characters) need it."""
    con = console()
    need = sum(w if c in ids else min(w, 3) for c, w in zip(columns, widths, strict=True))
    need += 3 * len(columns)
    return console(width=need) if need > con.width else con


def _rich_frame(columns: Sequence[str], heads: Sequence[str], *, title: str | None,
                ids: Sequence[str], widths: Sequence[int], fixed: Sequence[int] | None = None,
                header: bool = True, rows: Iterable[list[str]] = ()) -> Any:
    """A table of :func:`_rich_table`'s columns (``widths`` as for
    :func:`_rich_console`) holding ``rows``, each cell a ``Text``;
    ``fixed``: each column's width, as a chunk of a table is drawn."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, title=title, show_edge=False, show_header=header)
    for i, (c, h) in enumerate(zip(columns, heads, strict=True)):
        width = None if fixed is None else fixed[i]
        if c in ids:
            table.add_column(h, no_wrap=True, overflow="ignore", min_width=widths[i], width=width)
        else:
            table.add_column(h, overflow="fold", width=width)
    for r in rows:
        table.add_row(*(Text(c) for c in r))
    return table


def _rich_chunks(held: HeldRows, columns: Sequence[str], heads: Sequence[str], *,
                 title: str | None, ids: Sequence[str], lens: list[int], low: list[int],
                 high: list[int]) -> bool:
    """The held rows drawn :data:`RICH_CHUNK` at a time, each chunk a table
    whose columns have the widths rich gives the whole table: those it
    gives a table of the same columns holding one row whose cells measure
    what the columns' cells measure at most (``low``: the longest word,
    ``high``: the widest line; a column's measurement is the largest of its
    cells').  False, with nothing drawn, where rich's table does not say
    its widths as this rich did (``Table._calculate_column_widths``), or
    where a width cannot be given to a chunk (a column squeezed to 0)."""
    import itertools

    con = _rich_console(columns, ids, lens)
    # a cell measuring (low, high): its longest word, then spaces to the width
    probe = _rich_frame(columns, heads, title=title, ids=ids, widths=lens,
                        rows=[["a" * lo + " " * (hi - lo) for lo, hi in zip(low, high, strict=True)]])
    try:
        options = con.options
        width = options.max_width if probe.width is None else probe.width
        widths = probe._calculate_column_widths(
            con, options.update_width(width - probe._extra_width))
        fixed = [w - probe._get_padding_width(i) for i, w in enumerate(widths)]
        drawn = sum(widths) + probe._extra_width
    except (AttributeError, TypeError):   # (another rich: drawn whole)
        return False
    if min(fixed, default=0) < 0:
        # a column squeezed narrower than its padding (a terminal too narrow
        # for the columns): rich draws it 0 wide, which no fixed width gives
        return False
    # (a chunk drawn on a console as wide as the table: widths given that
    # fit are taken as they are, where rich reduces widths that do not fit
    # again; the whole table may be wider than the console, and is drawn so)
    out = console(width=max(con.width, drawn))
    values = held_values(held.pieces())
    header = True
    lines = _RowLines(columns, ids, fixed)
    while True:
        chunk = list(itertools.islice(values, RICH_CHUNK))
        if not chunk and not header:
            return True
        if header or not lines.trusted(chunk, out, heads, lens):
            runs: Iterable[tuple[bool, list[list[str]]]] = [(False, chunk)]
        else:
            runs = lines.runs(chunk)
        for plain, run in runs:
            if plain:
                out.file.write(lines.text(run))
                out.file.flush()        # (as rich's print does after each table)
                continue
            out.print(_rich_frame(columns, heads, title=title if header else None, ids=ids,
                                  widths=lens, fixed=fixed, header=header, rows=run))
        header = False


class _RowLines:
    """The lines rich draws for rows of a chunk after the first (no header,
    no edge, each column ``fixed`` wide, ``box.SIMPLE_HEAD``), made here for
    a row whose every cell is printable ASCII and whose id cells fit their
    columns: a cell that fits is padded to its width, a longer text folded
    as rich folds it (:func:`_ascii_breaks`, then as ``Text.wrap`` crops
    and pads each line), the cells' lines side by side, each with a space
    either side, a space between.  About 15 us a row against rich's 260
    us.  Any other row is drawn by rich, a run of them a table of its
    own (a chunk's rows are drawn one table or several alike: no edge, no
    header).  The first time, a few plain rows are drawn both ways: where
    this rich draws them otherwise (another version), rich draws every
    chunk, as before; the sample holds rows of the data and rows made to
    fold each text column (:meth:`folds`), so that a row of the data that
    fits its columns does not leave the folding unchecked."""

    SAMPLE = 16

    def __init__(self, columns: Sequence[str], ids: Sequence[str], fixed: Sequence[int]) -> None:
        self._columns, self._ids = columns, ids
        self._fixed = list(fixed)
        self._id = [c in ids for c in columns]
        # (a column rich draws 0 wide has no line to fold a text into: rich's)
        self._checked: bool | None = None if min(fixed, default=0) > 0 else False

    def plain(self, row: list[str]) -> bool:
        """Whether ``row`` is drawn here (once :meth:`trusted`)."""
        for c, w, is_id in zip(row, self._fixed, self._id, strict=True):
            if not (c.isascii() and c.isprintable()) or is_id and len(c) > w:
                return False
        return True

    def runs(self, rows: list[list[str]]) -> Iterator[tuple[bool, list[list[str]]]]:
        """``rows`` as runs of plain rows and others, in order."""
        import itertools

        for plain, run in itertools.groupby(rows, self.plain):
            yield plain, list(run)

    def trusted(self, chunk: list[list[str]], out: Any, heads: Sequence[str],
                lens: Sequence[int]) -> bool:
        """Whether the rows may be drawn here: decided once, from a few plain
        rows of ``chunk`` (none: not yet) drawn both ways."""
        if self._checked is not None:
            return self._checked
        sample = [r for r in chunk if self.plain(r)][:self.SAMPLE]
        if not sample:
            return False
        sample += self.folds()
        from rich.console import Console

        buf = io.StringIO()
        twin = Console(file=buf, width=out.width, markup=False, highlight=False, emoji=False,
                       no_color=out.no_color, color_system=out.color_system,
                       force_terminal=out.is_terminal, soft_wrap=True)
        twin.print(_rich_frame(self._columns, heads, title=None, ids=self._ids, widths=lens,
                               fixed=self._fixed, header=False, rows=sample))
        self._checked = buf.getvalue() == self.text(sample)
        return self._checked

    def folds(self) -> list[list[str]]:
        """Plain rows each of which folds one text column in one of the ways
        rich folds a text: words past the width, a word longer than it, one
        exactly as wide, spaces alone, leading and trailing spaces."""
        rows = []
        n = len(self._fixed)
        for i, (w, is_id) in enumerate(zip(self._fixed, self._id, strict=True)):
            if is_id:
                continue
            for cell in ("word " * (w // 2 + 3), "a" * (2 * w + 1), " " * (w + 2),
                         "x" * w + " y  z", "  a" + " b" * w, "ab " * w + "   "):
                row = [""] * n
                row[i] = cell
                rows.append(row)
        return rows

    def text(self, rows: list[list[str]]) -> str:
        """The lines of plain ``rows``, each ending with a newline."""
        out: list[str] = []
        fixed = self._fixed
        for row in rows:
            cells: list[list[str]] = []
            for c, w in zip(row, fixed, strict=True):
                n = len(c)
                # (a plain row's id fits its column: only a text is folded)
                cells.append([c + " " * (w - n)] if n <= w else self._folded(c, w))
            if all(len(cl) == 1 for cl in cells):
                out.append(" " + "   ".join(cl[0] for cl in cells) + " \n")
                continue
            for k in range(max(map(len, cells))):
                out.append(" ".join(" " + (cl[k] if k < len(cl) else " " * w) + " "
                                    for cl, w in zip(cells, fixed, strict=True)) + "\n")
        return "".join(out)

    def _folded(self, text: str, width: int) -> list[str]:
        """``Text(text).wrap(width, justify="left", overflow="fold")``'s lines
        of a printable ASCII text, each padded to ``width``."""
        offsets = _ascii_breaks(text, width)
        lines = []
        for a, b in zip([0, *offsets], [*offsets, len(text)], strict=True):
            line = text[a:b]
            n = len(line)
            if n > width:
                # Text.rstrip_end: the trailing spaces past the width go
                excess = n - width
                kept = line.rstrip()
                line = line[:n - min(n - len(kept), excess)]
                n = len(line)
                if n > width:
                    line, n = line[:width], width   # (Text.truncate: cropped)
            lines.append(line + " " * (width - n))
        return lines


def _ascii_breaks(text: str, width: int) -> list[int]:
    """Where rich breaks the lines of a printable ASCII ``text`` folded to
    ``width`` (> 0) columns: ``rich._wrap.divide_line(text, width,
    fold=True)``, each character one cell.  A word (its spaces before and
    after it) goes on the line while the line holds it without its
    trailing spaces, else starts the next line; a word wider than a line
    is cut every ``width`` characters, its last piece starting a line that
    the next words go on.  (rich 13.0 to 15.0 break so; the first sample
    of :class:`_RowLines` is drawn by rich as well, and a rich that breaks
    otherwise draws every row.)"""
    out: list[int] = []
    at = 0      # (the columns the current line holds)
    for m in _WORD.finditer(text):
        start = m.start()
        word = m.group()
        n = len(word.rstrip())
        if width - at >= n:
            at += len(word)
        elif n > width:
            for k in range(0, len(word), width):
                if start + k:
                    out.append(start + k)
            at = (len(word) - 1) % width + 1
        elif at and start:
            out.append(start)
            at = len(word)
    return out


_WORD = lazy_compile(r"\s*\S+\s*")     # (rich's words: a word and the spaces about it)


def window(rows: Iterable[Any], offset: int | None, limit: int | None) -> Iterable[Any]:
    """--offset/--limit over any row stream (lazy)."""
    import itertools

    start = offset or 0
    if not start and limit is None:
        return rows
    return itertools.islice(rows, start, stop_after(start, limit))


def stop_after(start: int, limit: int | None) -> int | None:
    """Where a window of ``limit`` rows from ``start`` stops, for
    ``itertools.islice`` (which takes at most ``sys.maxsize``: no stream is
    longer, so a larger sum of two valid counts stops there)."""
    return None if limit is None else min(start + limit, sys.maxsize)


def sort_rows(rows: Iterable[dict[str, Any]], key: str | None, choices: Sequence[str],
              default: str) -> list[dict[str, Any]]:
    """--sort KEY or -KEY; nulls sort last.  Unknown keys are usage errors,
    and so is an empty one (``--sort=``; before 2026-12-07 the default):
    only a --sort not given (None) is the default."""
    from lecode_memctl.core.errors import UsageError

    if key == "":
        raise UsageError("--sort needs a key; it was given an empty one")
    spec = default if key is None else key
    desc = spec.startswith("-")
    name = spec[1:] if desc else spec   # one dash: "--size" is not a key
    if name not in choices:
        raise UsageError(f"--sort {spec!r}: use one of {', '.join(choices)} (prefix - for "
                         "descending)")
    rows = list(rows)
    present = [r for r in rows if r.get(name) is not None]
    missing = [r for r in rows if r.get(name) is None]
    present.sort(key=lambda r: r[name], reverse=desc)
    return present + missing


class atomic_output:
    """``with atomic_output(FILE):`` sends stdout to a temporary file beside
    FILE; on a normal exit the file is flushed, fsync'ed and renamed over FILE
    (then the directory is fsync'ed), so a reader sees the old report or the
    new one, never a part.  On an exception the temporary file is removed and
    FILE is left as it was.  The file gets mode 0666 & ~umask (a collector
    running as another user can read it)."""

    def __init__(self, path: str) -> None:
        from pathlib import Path

        self.target = Path(path)
        self.tmp: Any = None
        self.stream: Any = None
        self.saved: Any = None

    def __enter__(self) -> atomic_output:

        from lecode_memctl.core.atomic import open_new_temp, temp_name
        from lecode_memctl.core.errors import StoreWriteError, UsageError

        if self.target.is_dir():
            raise UsageError(f"--output {self.target}: is a directory")
        self.tmp = temp_name(self.target)
        umask = os.umask(0)
        os.umask(umask)
        try:
            fd = open_new_temp(self.tmp, 0o666 & ~umask)
        except OSError as exc:
            raise StoreWriteError(f"--output {self.target}: cannot create a temporary file "
                                  f"in {self.target.parent}: {exc.strerror}") from None
        # (stopped before the stream owns the file, __exit__ would not run:
        # the file is closed and removed here)
        try:
            raw = io.FileIO(fd, "wb", closefd=True)
        except BaseException:
            os.close(fd)
            self._drop_tmp()
            raise
        try:
            # (buffered: a raw file may take fewer bytes than it is given, and
            # a text layer straight over it would drop the rest)
            self.stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8",
                                           errors="backslashreplace", newline="\n")
        except BaseException:
            raw.close()
            self._drop_tmp()
            raise
        self.saved = sys.stdout
        sys.stdout = self.stream
        return self

    def _drop_tmp(self) -> None:

        try:
            os.unlink(self.tmp)
        except OSError:
            pass

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:

        from lecode_memctl.core.atomic import fsync_dir
        from lecode_memctl.core.errors import StoreWriteError

        sys.stdout = self.saved
        published = False
        try:
            if exc_type is None:
                self.stream.flush()
                os.fsync(self.stream.fileno())
            self.stream.close()
            if exc_type is None:
                os.replace(self.tmp, self.target)
                published = True
                fsync_dir(self.target.parent if str(self.target.parent) else ".")
        except OSError as e:
            if exc_type is None:
                raise StoreWriteError(f"--output {self.target}: {e.strerror or e}") from None
        finally:
            if not published:
                self._drop_tmp()
        if isinstance(exc, OSError) and exc.filename is None:
            # a write of the output itself failed (a full disk, a size limit)
            raise StoreWriteError(f"--output {self.target}: {exc.strerror or exc}") from None
