"""``memctl show``, ``log``, ``notes``, ``search`` and ``edit``: the Markdown memory."""


from typing import TYPE_CHECKING, Annotated

import typer

from .completion import (
    EDIT_KINDS,
    complete_edit_kind,
    complete_log_date,
    complete_note_name,
    complete_search_format,
)
from .options import FormatOpt, JsonOpt, LimitOpt, OffsetOpt, count_type, sort_option
from .registry import command
from .state import STATE

if TYPE_CHECKING:
    from pathlib import Path

    from lecode_memctl.core.markdown_search import SkippedFile

_STREAM_ABOVE = 1 << 20   # characters: larger texts are JSON-encoded piece by piece


def _print_file(store, target, json_: bool) -> None:  # core.layout.Store, core.markdown.Target
    """Exact text under --json, escaped text otherwise.  The file is read
    as pieces (``markdown.read_pieces``): every error it can have is raised
    before anything is printed, but one that only a second read of a large
    file finds (it was written to in place meanwhile), which ends the
    output where it is: under --json, the document's ``text`` ends there
    and an ``error`` member follows it, as a streamed listing ends."""
    import sys

    from lecode_memctl.core import markdown

    from .output import (
        dumps,
        emit_json,
        ends_with_error,
        safe,
        stdout_is_tty,
        terminal_json,
        write_bytes,
    )

    path, pieces = markdown.read_pieces(store, target)
    first = next(pieces, "")
    second = next(pieces, None)
    if json_:
        from lecode_memctl.core.rowmodel import doc_head  # not for the text (show, log)

        if second is None and len(first) <= _STREAM_ABOVE:
            emit_json({**doc_head("markdown"), "path": str(path), "text": first})
            return
        # A large file is written as the same compact JSON, its text encoded a
        # piece at a time: one orjson call on 100 MB died (SIGSEGV) under a
        # 1 GiB address-space limit (issue 16.5).
        tty = stdout_is_tty()
        write_bytes(dumps(doc_head("markdown"))[:-1] + b',"path":' + dumps(str(path))
                    + b',"text":"')

        def end_with_error(code: str, message: str, exit_code: int) -> None:
            # (as a streamed listing ends: valid JSON, the error in it)
            write_bytes(b'","error":' + dumps({"code": code, "message": message,
                                                "exit_code": exit_code}) + b"}\n")

        with ends_with_error(end_with_error):
            for text in _texts(first, second, pieces):
                for i in range(0, len(text), _STREAM_ABOVE):
                    piece = dumps(text[i:i + _STREAM_ABOVE])[1:-1]
                    write_bytes(terminal_json(piece) if tty else piece)
        write_bytes(b'"}\n')
        return
    # (through the text layer: the locale's encoding, escapes for the rest)
    last = ""
    for text in _texts(first, second, pieces):
        if text:
            sys.stdout.write(safe(text, keep_newlines=True))
            last = text
    if last and not last.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def _texts(first: str, second: str | None, rest):  # -> Iterator[str]
    yield first
    if second is not None:
        yield second
        yield from rest


@command(epilog="""\
\b
Examples:
  memctl show                        print the current project's MEMORY.md
  memctl --project ~/src/app show
  memctl show --json | jq -r .text   the exact text, for scripts
""")
def show(json_: JsonOpt = False) -> None:
    """Print MEMORY.md, the project's long-term memory.

    MEMORY.md is the Markdown file lecode puts into the agent's system prompt
    at every request.  Control characters and terminal escape sequences in it
    are shown escaped (\\x1b, \\u202e, ...); --json gives the exact text.
    Exit 3 when the project has no MEMORY.md (the message says where memctl
    looked).  Changes nothing.
    """
    from lecode_memctl.core import markdown

    _print_file(STATE.existing_store(), markdown.memory_target(), json_)


@command(epilog="""\
\b
Examples:
  memctl log                  today's daily log (local date)
  memctl log 2026-03-01
  memctl log 2026-03-01 --json
""")
def log(
    date: Annotated[str | None, typer.Argument(
        metavar="DATE", help="A calendar date YYYY-MM-DD (default: today, local time).",
        autocompletion=complete_log_date, show_default=False)] = None,
    json_: JsonOpt = False,
) -> None:
    """Print a daily log, daily/YYYY-MM-DD.md (today's by default).

    lecode appends to one log per local calendar day.  DATE must be a real
    day in YYYY-MM-DD form (2026-02-30 is refused, exit 2); a day without a
    log exits 3.  Changes nothing.
    """
    from lecode_memctl.core import markdown

    target = markdown.log_target(date)
    _print_file(STATE.existing_store(), target, json_)


NOTE_SORTS = ("name", "size", "modified")


@command(epilog="""\
\b
Examples:
  memctl notes                       list the named notes
  memctl notes --format csv          the listing as CSV (also json, jsonl, tsv, github, ...)
  memctl notes deploy-checklist      print notes/deploy-checklist.md
  memctl notes deploy-checklist --json | jq -r .text
""")
def notes(
    name: Annotated[str | None, typer.Argument(
        metavar="NAME", help="Print this note instead of listing them (a trailing .md is accepted).",
        autocompletion=complete_note_name, show_default=False)] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    sort: Annotated[str | None, sort_option(NOTE_SORTS, "name")] = None,
    offset: OffsetOpt = None,
    limit: LimitOpt = None,
) -> None:
    """List the named notes (name, size, modified), or print one note.

    Named notes are notes/<name>.md in the store.  Without NAME, lists every
    note (--json: an array of note rows {type, name, path, size, modified},
    the same fields in every format); with NAME, prints it (exit 3 if there
    is no such note; --json: {"type": "markdown", "schema_version", path,
    text}).  A note name is 1-100
    characters without '/', '\\', '..', a leading dot or control
    characters; anything else is refused before any file is touched (exit
    2).  Changes nothing.
    """
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.markdown_notes import list_notes
    from lecode_memctl.core.rowmodel import NOTE

    from .output import check_format, echo, render_records, safe, sort_rows, window

    if name is not None:
        from lecode_memctl.core import markdown  # not for the listing

        target = markdown.note_target(name, reading=True)   # (no .bak: up to 252 bytes)
        if fmt not in (None, "json"):
            raise UsageError("--format applies to the listing; use --json to print one note as JSON")
        for option, value in (("--sort", sort), ("--offset", offset), ("--limit", limit)):
            if value is not None:
                raise UsageError(f"{option} applies to the listing, not to one note (NAME)")
        _print_file(STATE.existing_store(), target, json_ or fmt == "json")
        return
    fmt_name = check_format(fmt, json_flag=json_)
    store = STATE.existing_store()
    infos = list_notes(store)
    rows = [NOTE.row(name=i.name, path=str(i.path), size=i.size, modified=i.modified)
            for i in infos]
    rows = sort_rows(rows, sort, NOTE_SORTS, "name")
    if not rows and fmt_name == "table":
        echo(f"no notes in {safe(str(store.notes_dir))}", err=True)
        return
    render_records(NOTE, window(rows, offset, limit), fmt_name, columns=["name", "size", "modified"])




@command(epilog="""\
\b
Examples:
  memctl search deploy                 lines mentioning deploy
  memctl search -i 'todo|fixme' --limit 200
  memctl search '^## ' --json | jq -r '.hits[].file'
  memctl search deploy --format csv    every hit, one row each
""")
def search(
    pattern: Annotated[str, typer.Argument(
        metavar="PATTERN", help="A Python regular expression, matched against each line.")],
    limit: Annotated[int | None, typer.Option(
        "--limit", "-n", metavar="N", click_type=count_type(1),
        help="Stop after N hits (default: 50 in the text listing, every hit in json, jsonl, "
             "csv and tsv).")] = None,
    offset: OffsetOpt = None,
    ignore_case: Annotated[bool, typer.Option(
        "--ignore-case", "-i", help="Match without regard to case.")] = False,
    json_: JsonOpt = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_search_format,
        help="text (default: file:line: text), json, jsonl, csv, tsv, or a table format "
             "(table, plain, github, ...).")] = None,
) -> None:
    """Search the Markdown memory with a Python regular expression.

    Searches MEMORY.md, scratchpad.md, daily/*.md and notes/*.md, in that
    order, line by line (never .bak files, temporary files or session
    transcripts), and prints each hit as file:line: text, with the file
    relative to the store (a newline or tab in its name written \\n, \\t,
    as in tables).  The text listing stops at 50 hits unless --limit
    says otherwise, and a note on stderr says when more exist; the machine
    formats give every hit unless --limit is given.  --offset N skips the
    first N hits, in every format.  An invalid regular
    expression is a usage error (exit 2).  A file that is not valid UTF-8,
    is a symbolic link or is not a regular file (a FIFO, a directory named
    *.md) is skipped with a warning on stderr, in every format (listed under
    "skipped" with --json).  No hits is not an error.  Changes nothing.  Every
    format but the tables is streamed: each hit is written as it is found,
    each warning when its file is.  --json prints {"type": "search",
    "schema_version", "pattern", "offset", "limit", "hits": [hit rows {type,
    file, line, text}], "truncated", "files_searched", "skipped": [{file,
    reason}]} (the members after "hits" are known at the end of the search);
    jsonl, csv and tsv give the hit rows.
    """
    from lecode_memctl.core import markdown
    from lecode_memctl.core.rowmodel import HIT, SCHEMA_VERSION

    from .output import check_format, echo, emit_json_document, render_records, safe

    fmt_name = "text" if fmt in (None, "text") and not json_ else check_format(fmt, json_flag=json_)
    machine = fmt_name in ("json", "jsonl", "csv", "tsv")
    cap = limit if limit is not None else (2**62 if machine else markdown.DEFAULT_SEARCH_LIMIT)

    def warn(s: "SkippedFile") -> None:
        # (a name made by another tool may hold a newline or a tab: escaped
        # as a table cell escapes it, so that one warning stays one line)
        echo(f"memctl: warning: {safe(s.file)}: "
             f"{safe(s.reason)}; skipped", err=True)

    # Streamed in every format: each hit is written as it is found (a file
    # is checked UTF-8 before its first hit), each skipped file warned of
    # when it is found; what only the end knows comes after the hits.
    # (a bad pattern is exit 2 before the store is looked for: not 3 or 5)
    from lecode_memctl.core.markdown_search import compile_pattern

    from .output import warn_line

    # (what Python's re warns of, [[:alpha:]], is one warning line, here only)
    compile_pattern(pattern, ignore_case=ignore_case, warn=warn_line)
    run = markdown.stream_search(STATE.existing_store(), pattern, limit=cap,
                                 ignore_case=ignore_case, offset=offset or 0, on_skip=warn)
    rows = (HIT.row(file=h.file, line=h.line, text=h.text) for h in run.hits())
    if fmt_name == "json":
        emit_json_document(
            {"type": "search", "schema_version": SCHEMA_VERSION, "pattern": run.pattern,
             "offset": offset or 0, "limit": limit},
            "hits", rows,
            lambda: {"truncated": run.truncated, "files_searched": run.files_searched,
                     "skipped": [{"file": s.file, "reason": s.reason} for s in run.skipped]},
            dict.fromkeys(("truncated", "files_searched", "skipped")))
        return
    if fmt_name == "text":
        for h in run.hits():
            # the file name escaped (\n, \t) as in --format table: a newline
            # in it would forge a hit line; the text is one line already
            echo(f"{safe(h.file)}:{h.line}: {safe(h.text, keep_newlines=True)}")
    else:
        render_records(HIT, rows, fmt_name)
    if run.truncated:
        echo(f"memctl: stopped after {run.limit} hits; more exist (use --limit N, or "
             f"--offset {(offset or 0) + run.limit} for the next hits)", err=True)
    elif not run.given:
        # (past --offset there may have been hits: not "no matches" then)
        what = f"no hits past --offset {offset}" if offset else "no matches"
        echo(f"memctl: {what} in {run.files_searched} Markdown files", err=True)


#: The editor when neither $VISUAL nor $EDITOR is set (git's fallback too).
DEFAULT_EDITOR = "vi"


def _editor_failure(status: int) -> str:
    """How the editor ended, when not with status 0: ``exited with status
    N``, or ``was killed by SIGNAME`` (``Popen.wait`` gives -N for a signal:
    "status -2" read as a status no editor exits with)."""
    if status == 0:
        return ""
    if status < 0:
        import signal

        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the editor was killed by {name}"
    return f"the editor exited with status {status}"


def _editor_command() -> list[str]:
    import os
    import shlex

    from lecode_memctl.core.errors import UsageError

    for var in ("VISUAL", "EDITOR"):
        value = os.environ.get(var, "").strip()
        if not value:
            continue
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"cannot parse ${var} ({value!r}): {exc}") from None
        if argv:
            return argv
    return [DEFAULT_EDITOR]  # neither is set: vi, as git does


def _private_copy(store_root: "Path", name: str, data: bytes) -> str:
    """The editor's copy of ``data``: a new private file (mode 0600) in the
    first temporary directory that does not lie inside the store
    (``atomic.temp_parent``: a ``$TMPDIR`` in the store is passed over, so
    no copy is ever listed, searched or exported as one of its files), as
    its path.  A copy that cannot be made or
    written is this machine's failure, exit 7, naming the directory; nothing
    was written to the store."""
    import contextlib
    import errno
    import os
    import tempfile

    from lecode_memctl.core.atomic import temp_parent
    from lecode_memctl.core.errors import LocalResourceError

    parent = temp_parent([store_root])
    if parent is None:
        raise LocalResourceError(f"no temporary directory outside {store_root} for the edited "
                                 "copy; set TMPDIR (nothing was written)")
    suffix = f"-{name}" if name.isascii() and name.isprintable() else ".md"
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="memctl-edit-", suffix=suffix, dir=parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        hint = "free space there or set TMPDIR" if full else "set TMPDIR"
        raise LocalResourceError(f"cannot write the edited copy in {parent}: "
                                 f"{exc.strerror or exc}; {hint} to another directory "
                                 "(nothing was written)") from None
    return tmp


def _read_copy(tmp: str) -> "bytes | str | None":
    """What the editor left at ``tmp``: its bytes when it is a regular file,
    None when nothing is there, else what is there instead ("a directory",
    "a symbolic link", "a FIFO", ...).  Opened without following a link
    and without blocking on a FIFO, as memctl opens a store's files (before
    2026-12-07 a link's target was read, and written into the store, and a
    FIFO hung ``edit``).  ``MemctlError`` (exit 1) when it cannot be read."""
    import errno
    import os
    import stat

    from lecode_memctl.core.atomic import O_CLOEXEC, O_NONBLOCK, file_kind, read_all
    from lecode_memctl.core.errors import MemctlError

    from .output import safe

    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        try:
            return file_kind(os.lstat(tmp).st_mode)
        except OSError:
            if exc.errno == errno.ELOOP:
                return "a symbolic link"
        raise MemctlError(f"cannot read the edited copy {safe(tmp)}: {exc.strerror}; "
                          "nothing was written") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return file_kind(mode)
        return read_all(fd)
    except OSError as exc:
        raise MemctlError(f"cannot read the edited copy {safe(tmp)}: {exc.strerror}; "
                          "nothing was written") from None
    finally:
        os.close(fd)


def _kept_after_interrupt(store, target, tmp: str, before: bytes | None) -> bool:
    """Whether ``edit``'s copy ``tmp`` (of ``target`` of ``store``: a
    core.layout.Store, a core.markdown.Target) is kept after a Ctrl-C or
    SIGTERM that came once the editor had returned, and said: kept, its
    path printed, unless it holds no change or the file on disk already
    holds it (the write was done: the interrupt's own message says so).
    A copy kept is kept even when its line cannot be written (stderr on
    a full disk): the interrupt stays the error, its exit status 130 or
    143."""
    from lecode_memctl.core import markdown
    from lecode_memctl.core.errors import MemctlError

    from .output import echo, interrupted_after, safe

    shown = safe(str(target.path(store)))
    at = safe(tmp)

    def kept(line: str) -> bool:
        try:
            echo(f"memctl: {line}", err=True)
        except OSError:
            pass        # (the copy is kept all the same; the interrupt is the error)
        return True

    try:
        left = _read_copy(tmp)
    except MemctlError:
        return kept(f"your edited copy is kept at {at}")    # (what cannot be read is not removed)
    if left is None or left == (before or b""):
        return False
    if isinstance(left, str):
        return kept(f"nothing was written; the editor left {left} at {at}")
    try:
        now = markdown.read_bytes(store, target)
    except (MemctlError, OSError):
        now = None
    if now == left:
        interrupted_after(f"{shown} was written")
        return False
    return kept(f"{shown} was not changed; your edited copy is kept at {at}")


@command(epilog="""\
\b
Examples:
  memctl edit                      edit MEMORY.md
  memctl edit scratchpad
  memctl edit log                  today's daily log
  memctl edit log 2026-03-01
  memctl edit note deploy-checklist
  EDITOR='code --wait' memctl edit
""")
def edit(
    target_words: Annotated[list[str] | None, typer.Argument(
        metavar="memory|scratchpad|log [DATE]|note NAME",
        help="Which file: memory (MEMORY.md, the default), scratchpad, log [DATE] "
             "(a daily log, today by default) or note NAME.",
        autocompletion=complete_edit_kind, show_default=False)] = None,
) -> None:
    """Edit a Markdown memory file in $VISUAL or $EDITOR, safely.

    The current content (empty for a new file) is copied to a private
    temporary file outside the store (mode 0600; a $TMPDIR inside the store
    is passed over, as for every temporary file of memctl; one that cannot
    hold the copy is exit 7) and the editor is run on it.  When the editor
    exits 0 and the content changed, memctl writes it back atomically,
    keeping the previous content in <file>.bak; unchanged content writes
    nothing.  If the file on disk changed while you were
    editing, nothing is written, your edited copy is kept and its path
    printed (exit 4).  An editor that exits non-zero, or removes the file it
    was given or replaces it (with a directory, a symbolic link, a FIFO),
    writes nothing (exit 1); a copy it changed, or what it put in the
    copy's place, is kept and its path printed.  Edited text that is not
    valid UTF-8 writes nothing and keeps the copy (exit 2), as does an
    editor that cannot be run or a $VISUAL/$EDITOR that cannot be parsed
    (exit 2, nothing written).  The write takes the
    Markdown writers' turn (a lock on the store directory that the agent's
    writes take too); another writer holding it for 10 s writes nothing,
    keeps your copy and exits 6.
    A SIGTERM or SIGHUP to memctl while the editor runs is passed to the
    editor; memctl then writes nothing and keeps a changed copy.  A Ctrl-C
    or SIGTERM once the editor has returned (the wait for the writers' turn
    included) keeps a changed copy and prints its path, unless the file was
    already written, which the error then says.
    A missing store or notes/daily directory is created (mode 0700).  With
    neither $VISUAL nor $EDITOR set, the editor is vi, as for git.
    """
    import os
    import subprocess

    from lecode_memctl.core import markdown
    from lecode_memctl.core.errors import Conflict, MemctlError, UsageError

    from .output import deferred_termination, echo, safe

    words = list(target_words or [])
    kind = words[0] if words else markdown.MEMORY
    if kind not in EDIT_KINDS:
        raise UsageError(f"unknown file {kind!r}: use memory, scratchpad, log [DATE] or note NAME")
    if len(words) > 2:
        raise UsageError(f"too many arguments: {' '.join(words[2:])!r}")
    target = markdown.target_for(kind, words[1] if len(words) > 1 else None)
    editor = _editor_command()
    store = STATE.store()
    path = target.path(store)
    before = markdown.read_bytes(store, target)
    if before is not None:
        markdown.decode(before, path)
    before_hash = markdown.sha256(before)

    tmp = _private_copy(store.path, path.name, before or b"")
    keep = False
    edited = False      # the editor has returned
    try:
        try:
            # a SIGTERM or SIGHUP meanwhile goes to the editor, which ends as
            # it chooses (one killed under memctl left the terminal in raw
            # mode); memctl stops after it, keeping an edited copy
            with deferred_termination() as give:
                proc = subprocess.Popen([*editor, tmp])
                give(proc.pid)
                status = proc.wait()
        except OSError as exc:
            hint = ("neither $VISUAL nor $EDITOR is set; set one, for example "
                    "EDITOR=nano memctl edit") if editor == [DEFAULT_EDITOR] else None
            raise UsageError(f"cannot run the editor {editor[0]!r}: {exc.strerror or exc}",
                             hint=hint) from None
        except KeyboardInterrupt:
            try:
                left = _read_copy(tmp)
            except MemctlError:
                left = b""
            if left is not None and left != (before or b""):
                keep = True
                what = ("your edited copy is kept" if isinstance(left, bytes)
                        else f"the editor left {left}")
                try:
                    echo(f"memctl: nothing was written; {what} at "
                         f"{safe(tmp)}", err=True)
                except OSError:
                    pass    # (kept all the same; the interrupt is the error)
            raise
        edited = True
        try:
            after = _read_copy(tmp)
        except MemctlError:
            keep = True     # (what cannot be read is not removed either)
            raise
        failed = _editor_failure(status)
        if isinstance(after, str):
            # A directory, a link, a FIFO in its place: nothing is read
            # through it; what the editor made is left where it is, and said.
            keep = True
            raise MemctlError(f"{failed + ' and ' if failed else 'the editor '}replaced the file "
                              f"it was given with {after}; nothing was written; it is left "
                              f"at {safe(tmp)}")
        if status != 0:
            # (an editor that saved and then failed -- a plugin, a :cq --
            # leaves edits: kept, as a conflict keeps them; before
            # 2026-12-07 the copy was deleted with them)
            keep = after is not None and after != (before or b"")
            kept = f"; your edited copy is kept at {safe(tmp)}" if keep else ""
            raise MemctlError(f"{failed}; nothing was written{kept}")
        if after is None:
            # (the editor removed or renamed its file: as an editor that
            # failed, exit 1, not 3, which names a missing fact or note)
            raise MemctlError(f"the editor left no file at {safe(tmp)}; nothing was written")
        if after == (before or b""):
            try:
                echo(f"memctl: no changes; {safe(str(path))} left as it was", err=True)
            except OSError:
                pass    # (stderr full: the status is the command's, 0, as below)
            return
        try:
            markdown.decode(after, "the edited text")
        except MemctlError as exc:
            keep = True
            raise UsageError(f"{exc.message}; nothing was written; "
                             f"your edited copy is kept at {safe(tmp)}") from None
        try:
            markdown.write_if_unchanged(store, target, after, before_hash)
        except MemctlError as exc:
            keep = True
            hint = exc.hint
            if isinstance(exc, Conflict):
                hint = "compare it with the file, merge, and run 'memctl edit' again"
            raise type(exc)(f"{exc.message}; your edited copy is kept at {safe(tmp)}",
                            hint=hint) from None
        bak = "" if before is None else f"; previous content in {safe(str(path))}.bak"
        try:
            echo(f"memctl: wrote {safe(str(path))} ({len(after)} bytes{bak})", err=True)
        except OSError:
            # (stderr on a full disk: the file is written, only this line is
            # lost; exit 7 would say nothing was changed, and a script that
            # retries would apply the edit twice.  A closed stderr ends the
            # same way: with the status the command had, 0)
            pass
    except KeyboardInterrupt:
        # (a Ctrl-C or SIGTERM once the editor has returned: the copy read
        # back, the wait for the writers' turn, the write itself; before
        # 2026-12-07 the copy was deleted with the edits in it)
        if edited:
            keep = _kept_after_interrupt(store, target, tmp, before)
        raise
    finally:
        if not keep:
            try:
                os.unlink(tmp)
            except OSError:
                pass
