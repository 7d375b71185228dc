"""Every shell completer of memctl, and the one way they find the store.

Completion parses the words typed so far and runs nothing: the app callback
has not set the global state, so the store comes from the options parsed on
the (half-typed) command line -- ``--store``, ``--config-dir``, ``--project``
-- and the environment, through :func:`store_from_context`.

A completer never fails loudly (an exception is an empty list), never
writes, and never imports rich, tabulate or sqlite3 at module level: each TAB
runs a fresh process (tests/test_completion.py checks what it imports).
"""

from __future__ import annotations

import os
from typing import Any

#: The first word of ``memctl edit``.
EDIT_KINDS: tuple[str, ...] = ("memory", "scratchpad", "log", "note")

# The root options that locate the store (typer parameter names).
_STORE_PARAMS = ("config_dir", "project", "store")


def store_from_context(ctx: Any) -> Any:
    """The store named by a (possibly partial) command line.

    Reads the parsed values of the options that locate the store from ``ctx``
    and every parent context up to the root; a value given nearer the command
    wins over one given nearer the root; a leading ``~`` and the ``$VAR``
    and ``${VAR}`` of the environment are expanded, as the shell would have.  Then resolves them the way every
    command does (:meth:`State.store`)."""
    from .state import State

    chain = []
    c = ctx
    while c is not None:
        chain.append(c)
        c = getattr(c, "parent", None)
    values: dict[str, str] = {}
    for c in reversed(chain):  # root first, so the innermost value wins
        params = getattr(c, "params", None) or {}
        for name in _STORE_PARAMS:
            v = params.get(name)
            if v:
                # the shell expands a leading ~ and $VAR / ${VAR} when the
                # command runs, but the words completion reads are as typed
                values[name] = _expand_vars(os.path.expanduser(os.fspath(v)))
    if values.get("store"):
        # Completion needs the directory only: not the slug that the command
        # would take from the transcript headers (store_given reads them).
        from lecode_memctl.core.layout import store_at

        return store_at(values["store"])
    return State(config_dir_option=values.get("config_dir"), project=values.get("project")).store()


def _expand_vars(text: str) -> str:
    """``$NAME`` and ``${NAME}`` as an unquoted shell word has them: the
    variable's value, or nothing when it is unset (``os.path.expandvars``
    left an unset one as it was: the completion read ``$NOPE/x`` where the
    command reads ``/x``).  Only a name: nothing runs (``$(...)`` and
    backquotes stay text).  The words come unquoted (the shell's split), so
    a ``$`` the user quoted (``'$HOME/st'``) is expanded too: completion may
    then read another store than the command; such a name is rare, and
    this is the one place it differs."""
    import re

    def value(m: re.Match[str]) -> str:
        return os.environ.get(m.group(1) or m.group(2), "")

    return re.sub(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})", value, text)


#: Set by a completer whose empty answer is final: the shell must not fall
#: back to file names (bash's ``-o default``, fish's files, zsh's _files).
NO_FILES: list[bool] = [False]


def no_file_fallback() -> None:
    NO_FILES[0] = True


#: The words before the one completed, as the shell sent them (set by the
#: patched get_completions, typer_patches): typer hands its completers an
#: empty ``args``.
LINE_ARGS: list[str] = []


def complete_session_id(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Session ids of the store that start with what was typed.

    The layout's listing of ``sessions/*.jsonl`` (symbolic links left out);
    opens nothing, writes nothing.  After ``SESSION:`` (a range follows, as
    in ``read SESSION:10-40``) there is nothing to offer, and no file name
    either."""
    if ":" in (incomplete or ""):
        no_file_fallback()
        return []
    try:
        from lecode_memctl.core.layout import session_ids

        store = store_from_context(ctx)
        if os.path.islink(store.sessions_dir):
            return []
        prefix = incomplete or ""
        return [sid for sid in session_ids(store.sessions_dir, unlistable_ok=True)
                if sid.startswith(prefix)
                and not os.path.islink(os.path.join(store.sessions_dir, sid + ".jsonl"))]
    except Exception:  # noqa: BLE001 - completion must never fail loudly
        return []


def complete_fact_id(ctx, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Fact ids of the store that start with what was typed.  Read-only: the
    database is opened the way every read command opens it, so a TAB writes
    nothing."""
    try:
        from lecode_memctl.core.facts import FactStore

        fs = FactStore.open_readonly(store_from_context(ctx).facts_db)
        try:
            return fs.fact_ids(incomplete or "", limit=200)
        finally:
            fs.close()
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


def complete_edit_kind(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """The words of ``memctl edit``: the kind first; after ``note`` the
    store's note names, after ``log`` its log dates; nothing after those."""
    try:
        typed = list((getattr(ctx, "params", None) or {}).get("target_words") or ())
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []
    if not typed:
        return [k for k in EDIT_KINDS if k.startswith(incomplete or "")]
    if typed == ["note"]:
        return complete_note_name(ctx, args, incomplete)
    if typed == ["log"]:
        return complete_log_date(ctx, args, incomplete)
    return []


def complete_note_name(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Note names of the store (notes/*.md, symbolic links left out, and a
    file such as a.md.md, whose name without .md names another file:
    mdnames.listed_note_name); only names the commands accept
    (mdnames.is_note_file: a file named with a newline, a byte that is not
    UTF-8, a control character or a backslash was offered, mangled by the
    shells, and refused by every command), and a name starting with ``-``
    only after ``--`` (before it the name is taken for an option: 'No such
    option'); reads a directory only."""
    try:
        from lecode_memctl.core.mdnames import is_note_file, listed_note_name

        notes_dir = os.path.join(os.fspath(store_from_context(ctx).path), "notes")
        if os.path.islink(notes_dir):
            return []
        with os.scandir(notes_dir) as it:
            names = [e.name[:-3] for e in it if is_note_file(e.name) and not e.is_symlink()
                     and listed_note_name(e.name) == e.name[:-3]]
        dashes_ok = "--" in (*(args or ()), *LINE_ARGS)
        return sorted(n for n in names if n.startswith(incomplete or "")
                      and (dashes_ok or not n.startswith("-")))
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


def complete_log_date(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Dates of the store's daily logs (daily/YYYY-MM-DD.md); reads a directory only."""
    try:
        from lecode_memctl.core.mdnames import is_daily_file

        daily = os.path.join(os.fspath(store_from_context(ctx).path), "daily")
        if os.path.islink(daily):
            return []
        with os.scandir(daily) as it:
            dates = [e.name[:-3] for e in it if is_daily_file(e.name) and not e.is_symlink()]
        return sorted(d for d in dates if d.startswith(incomplete or ""))
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


#: --format values of the listings: the machine formats, then tabulate names.
LISTING_FORMAT_NAMES: tuple[str, ...] = (
    "table", "json", "jsonl", "csv", "tsv", "plain", "simple", "github", "grid", "pipe",
    "html", "latex", "mediawiki", "psql")

#: grep --format values: ``table`` is the text report, also named ``human``
#: (output.REPORT_ALIASES), as for validate and secrets.
GREP_FORMAT_NAMES: tuple[str, ...] = ("table", "human", "json", "jsonl", "csv", "tsv")

#: validate and secrets --format values.
VALIDATE_FORMAT_NAMES: tuple[str, ...] = (*GREP_FORMAT_NAMES, "prometheus")
SECRETS_FORMAT_NAMES: tuple[str, ...] = VALIDATE_FORMAT_NAMES


def complete_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in LISTING_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_validate_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in VALIDATE_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_grep_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in GREP_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_secrets_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in SECRETS_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_finding_code(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Finding codes for validate --ignore, then 'PREFIX.*' and 'GROUP.*' for
    whole checks (a code's prefix, compact.*, and its group, compaction.*)."""
    try:
        from lecode_memctl.core.audit import CODES

        groups = sorted({c.split(".")[0] + ".*" for c in CODES}
                        | {i.check + ".*" for i in CODES.values()})
        return [c for c in [*sorted(CODES), *groups] if c.startswith(incomplete or "")]
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


#: search --format values: its text report, then the listings'.
SEARCH_FORMAT_NAMES: tuple[str, ...] = ("text", *LISTING_FORMAT_NAMES)

#: migrate-legacy --format values (cmd_migrate checks the same names).
MIGRATE_FORMAT_NAMES: tuple[str, ...] = ("text", "table", "json", "jsonl", "csv", "tsv")


def complete_search_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in SEARCH_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_migrate_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in MIGRATE_FORMAT_NAMES if n.startswith(incomplete or "")]


#: grep --purpose values.
GREP_PURPOSES: tuple[str, ...] = ("working", "durable")


def complete_grep_purpose(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [p for p in GREP_PURPOSES if p.startswith(incomplete or "")]


def complete_detector(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """redact --detector: the names of the detectors (as redact checks them)."""
    try:
        from lecode_memctl.core.secrets import Detector, detector_slug

        names = sorted({detector_slug(p.secret_type) for p in Detector().plugins})
        return [n for n in names if n.startswith(incomplete or "")]
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


#: facts --status values.
FACT_STATUSES: tuple[str, ...] = ("valid", "stale", "missing", "hidden", "unverified")


def complete_fact_status(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [s for s in FACT_STATUSES if s.startswith(incomplete or "")]


#: memctl completion SHELL.
SHELLS: tuple[str, ...] = ("bash", "zsh", "fish")


def complete_shell(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [s for s in SHELLS if s.startswith(incomplete or "")]


def complete_record_type(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Record types of memctl schema TYPE."""
    try:
        from lecode_memctl.core.rowmodel import MODELS

        return [m.type for m in MODELS if m.type.startswith(incomplete or "")]
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


GREP_ROLES = ("user", "assistant", "tool", "system", "summary")   # core.grep.GREP_ROLES


def complete_grep_role(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """The roles ``grep --role`` takes; imports nothing of the core (each TAB stays light)."""
    return [r for r in GREP_ROLES if r.startswith(incomplete or "")]


# --------------------------------------------------------------------------
# A TAB on a command name, without typer
# --------------------------------------------------------------------------

_FAST_SHELLS = ("bash", "zsh", "fish")


def _split_words(text: str) -> list[str]:
    """click's ``shell_completion.split_arg_string``: shlex, tolerant of an
    unfinished quote or escape."""
    import shlex

    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out = []
    try:
        for token in lex:
            out.append(token)
    except ValueError:
        out.append(lex.token)
    return out


def _option_like(word: str, prefixes: str) -> bool:
    """click's ``_start_of_option``."""
    return bool(word) and word[0] in prefixes


def _parse_options(args: list[str], start: int, params: dict[str, tuple[str, bool]],
                   prefixes: str, *, stop_at_word: bool = False,
                   positional: bool = False) -> tuple[int | None, set[str]]:
    """Walk ``args[start:]`` as click's parser would, for the words this module
    is sure of: options named exactly (``params``: name -> (parameter, takes
    a value)), each value the next word and not option-like; with
    ``positional``, words that are not option-like are arguments.  Returns
    (the index of the first word that is not an option when ``stop_at_word``,
    else len(args); the parameters given), or (None, ...) for any other word."""
    given: set[str] = set()
    i = start
    while i < len(args):
        word = args[i]
        param = params.get(word)
        if param is None:
            if stop_at_word and not _option_like(word, prefixes):
                return i, given
            if positional and not _option_like(word, prefixes):
                i += 1
                continue
            return None, given
        if param[1]:
            if i + 1 >= len(args) or _option_like(args[i + 1], prefixes):
                return None, given   # the value is being completed, or click decides
            i += 2
        else:
            i += 1
        given.add(param[0])
    return i, given


def bash_words(comp_words: str, comp_cword: int) -> tuple[list[str], str]:
    """(the words before the one completed, that word) of a bash request, as
    typer's ``BashComplete.get_completion_args`` reads them, with the
    ``--opt=value`` words rejoined: bash splits a word at ``=``
    (COMP_WORDBREAKS), so ``--color=al`` arrives as ``--color``, ``=``,
    ``al``.  An ``=`` right after an option-like word (one with no ``=``)
    glues that option to the next word, unless the next word is the empty one
    under the cursor (``--color= <TAB>``).  The word completed stays what bash
    replaces: ``al`` of ``--color=al`` comes back as ``--color=al``, which
    click completes as the value ``al`` of ``--color``."""
    cwords = _split_words(comp_words)
    out: list[str] = []
    cword = None
    i = 0
    while i < len(cwords):
        word = cwords[i]
        if (word == "=" and i >= 2 and len(out) >= 2 and _option_like(out[-1], "-")
                and "=" not in out[-1]):
            if i == comp_cword:   # the cursor right after '='
                out[-1] += "="
                cword = len(out) - 1
                i += 1
                continue
            if i + 1 < len(cwords) and i + 1 <= comp_cword:
                if i + 1 == comp_cword and cwords[i + 1] == "":
                    out[-1] += "="
                    i += 1
                    continue
                out[-1] += "=" + cwords[i + 1]
                if i + 1 == comp_cword:
                    cword = len(out) - 1
                i += 2
                continue
        if i == comp_cword:
            cword = len(out)
        out.append(word)
        i += 1
    if cword is None:
        cword = len(out) + max(0, comp_cword - len(cwords))
    args = out[1:cword]
    incomplete = out[cword] if cword < len(out) else ""
    return args, incomplete


def _ends_in_word(text: str) -> bool:
    """Whether the cursor at the end of TEXT is inside a shell word (one more
    character would extend the last word) rather than between words."""
    words, more = _split_words(text), _split_words(text + "x")
    return bool(words) and len(more) == len(words) and more[-1] == words[-1] + "x"


def bash_line_words(line: str) -> tuple[list[str], str]:
    """(the words before the one completed, that word) of a bash request from
    its command line up to the cursor (the script sends
    ``${COMP_LINE:0:COMP_POINT}``), split as the shell will split it when the
    command runs (:func:`_split_words`: shlex, tolerant of an unfinished
    quote).  COMP_WORDS is no help here: bash splits it at every character
    of COMP_WORDBREAKS, ``=`` and ``:`` included, so a path such as
    ``/tmp/e=q`` or ``/tmp/c:l`` arrived in pieces."""
    words = _split_words(line)
    if _ends_in_word(line):
        return words[1:-1], words[-1]
    return words[1:], ""


def bash_request_words(environ: Any) -> tuple[list[str], str]:
    """The words of a bash request: from COMP_LINE (the shipped script sends
    it, cut at the cursor) or, when it is empty or missing (a script of an
    earlier memctl; the function called outside readline), from COMP_WORDS
    and COMP_CWORD (:func:`bash_words`)."""
    line = environ.get("COMP_LINE")
    if line:
        return bash_line_words(line)
    return bash_words(environ["COMP_WORDS"], int(environ["COMP_CWORD"]))


#: The environment variable the bash script sets to the line before the
#: word readline replaces (``${COMP_LINE:0:COMP_POINT}`` without ``$2``).
BASH_HEAD_VAR = "_MEMCTL_BASH_HEAD"


def bash_answer(values: list[str], environ: Any) -> str:
    """The text of a bash answer.  For the shipped script (it sets
    :data:`BASH_HEAD_VAR`): a first line ``nofiles`` (when a completer said
    so: :func:`no_file_fallback`) or ``default``, then each candidate trimmed
    of the part of its shell word that precedes readline's word.  readline
    splits a word at ``:`` and ``=`` (COMP_WORDBREAKS) and replaces only
    what follows, so the candidate ``a:b`` for ``a:`` is sent as ``b``
    (bash-completion's __ltrim_colon_completions); a candidate that does not
    start with that part is dropped.  For an older script: the values, one
    a line."""
    head = environ.get(BASH_HEAD_VAR)
    if head is None:
        return "\n".join(values)
    before = _split_words(head)[-1] if _ends_in_word(head) else ""
    trimmed = [v[len(before):] for v in values if v.startswith(before)]
    return "\n".join(["nofiles" if NO_FILES[0] else "default", *trimmed])


def zsh_escape(s: str) -> str:
    """A value or help text as typer's zsh completion writes it into
    ``_arguments '*: :(("value":"help" ...))'``: double-quoted inside a
    single-quoted word.  typer doubles a ``'`` (``''``), which zsh reads as the
    end and restart of the single-quoted word (the quote is lost); close the
    quote, add an escaped one and reopen (``'\\''``) instead.  typer also
    doubles a ``"`` (``""``), which the double-quoted word _arguments evals
    reads as nothing (``dq"x`` became ``dqx``), and leaves a ``\\`` as it
    is (one at the end ate the closing quote): each is escaped with a
    backslash, the backslash first.  A ``\\`` is unescaped twice, as a
    ``:`` is: by that eval, then by _arguments, which reads ``\\x`` as ``x``
    (it was doubled only once and dropped): it becomes four."""
    return (s.replace("\\", "\\\\\\\\").replace('"', '\\"').replace("'", "'\\''")
            .replace("$", "\\$").replace("`", "\\`").replace(":", r"\\:"))


def bad_bash_request(environ: Any) -> str | None:
    """What makes a bash completion request (``complete_bash``) one that
    neither :func:`fast_complete` nor typer can read (typer's would crash:
    ``int(COMP_CWORD)``, ``environ["COMP_WORDS"]``); None when it is fine
    or not bash's.  Only a hand-made request is malformed: the script sets both."""
    if environ.get("_MEMCTL_COMPLETE") != "complete_bash":
        return None
    missing = [v for v in ("COMP_WORDS", "COMP_CWORD") if v not in environ]
    if missing:
        return f"a bash completion request needs {' and '.join(missing)} in the environment"
    try:
        int(environ["COMP_CWORD"])
    except ValueError:
        return f"COMP_CWORD {environ['COMP_CWORD']!r} is not an integer (a bash completion request)"
    return None


def fast_complete(environ: Any) -> tuple[str | None, int] | None:
    """Answer a completion request (``_MEMCTL_COMPLETE=complete_SHELL``) the
    way typer's completion classes do, without importing typer, when it
    completes a command name or an option name (of the root or of a command),
    or a word after a command that takes no argument.  Returns (text to
    print with a newline, or None to print nothing; exit status), or None
    when the request is anything else (an option's value or an argument,
    which have completers of their own, ``--``, an eager option, an option
    glued to its value, an unknown word, another shell): typer then answers
    it, as before.

    Reads ``completion_table`` (generated from the command tree by
    scripts/gen_docs.py); tests/test_completion_fast.py compares the answers
    with typer's for every shell over generated command lines."""
    NO_FILES[0] = False     # (this request's own: never a previous one's in this process)
    instruction = environ.get("_MEMCTL_COMPLETE", "")
    kind, _, shell = instruction.partition("_")
    if kind != "complete" or shell not in _FAST_SHELLS:
        return None
    from . import completion_table as table

    if shell == "bash":
        try:
            args, incomplete = bash_request_words(environ)
        except (KeyError, ValueError):
            return None
    else:
        completion_args = environ.get("_TYPER_COMPLETE_ARGS", "")
        args = _split_words(completion_args)[1:]
        incomplete = args.pop() if args and not completion_args.endswith(" ") else ""

    # The words before the one completed: the root options, then (if there is
    # one) a command name and that command's options and arguments, each
    # option's value in its own word.  Anything else (--, an option glued to
    # its value, an unknown word, an eager option such as --help) is typer's.
    prefixes = table.OPT_PREFIXES
    command, given = _parse_options(args, 0, table.ROOT_PARAMS, prefixes, stop_at_word=True)
    if command is None:
        return None
    options: tuple[tuple[str, str | None, str, bool], ...] = table.ROOT_OPTIONS
    has_arguments = False
    if command < len(args):
        entry = table.COMMAND_OPTIONS.get(args[command])
        if entry is None:
            return None
        interspersed, has_arguments, options, params = entry
        end, given = _parse_options(args, command + 1, params, prefixes,
                                    positional=has_arguments and interspersed)
        if end is None:
            return None

    # click's _resolve_incomplete, then the shell_complete of the group (the
    # root: its commands, then its options) or of the command (its options)
    if incomplete == "=":
        incomplete = ""
    elif "=" in incomplete and _option_like(incomplete, prefixes):
        return None
    items: list[tuple[str, str | None]] = []
    if command == len(args):
        items += [(name, short) for name, short in table.COMMANDS if name.startswith(incomplete)]
    elif has_arguments and not _option_like(incomplete, prefixes):
        return None   # an argument's value: its completer (typer) answers
    if incomplete and not incomplete[0].isalnum():
        listed = [(name, text, param) for name, text, param, multiple in options
                  if (multiple or param not in given) and name.startswith(incomplete)]
        for name in table.UNORDERED:
            if sum(p == name for _n, _t, p in listed) > 1:
                return None
        items += [(name, text) for name, text, _p in listed]

    if shell == "bash":
        text = bash_answer([value for value, _help in items], environ)
    elif shell == "zsh":
        escape = zsh_escape
        lines = [f'"{escape(v)}":"{escape(h)}"' if h else f'"{escape(v)}"' for v, h in items]
        text = "_arguments '*: :((" + "\n".join(lines) + "))'" if lines else "_files"
    else:
        import re

        shown = [v + "\t" + re.sub(r"\s", " ", h) if h else v for v, h in items]
        action = environ.get("_TYPER_COMPLETE_FISH_ACTION", "")
        if action == "is-args":
            return None, (0 if shown else 1)
        text = "\n".join(shown) if action == "get-args" and shown else ""
    if not text.isascii():
        return None   # typer's echo decides how the terminal's encoding takes it
    return text, 0
