#!/usr/bin/env python3
"""Generate memctl's man page, shell completions and README tables from the command tree.

    python scripts/gen_docs.py            write man/memctl.1, completions/*, README.md blocks
    python scripts/gen_docs.py --check    write nothing; exit 1 and name the files that differ
    python scripts/gen_docs.py --out DIR  write under DIR instead of the repository root

The script walks typer's command tree (``typer.main.get_command``) as it is when
the script runs, so new commands appear by rerunning it.  typer vendors its own
click (``typer._click``), so click-only add-ons such as click-man do not apply.

Everything written is reproducible: no build date, commands and options in a
stable order, and nothing taken from the terminal or the environment.

- ``man/memctl.1``: roff with the ``man`` macros; ``groff -man -ww -z`` is silent.
- ``completions/memctl.bash``, ``completions/_memctl``, ``completions/memctl.fish``:
  the scripts typer's own completion classes emit for prog name ``memctl``
  (``ShellComplete.source()``); they drive the ``_MEMCTL_COMPLETE`` protocol.
- ``README.md``: the command table between ``<!-- commands:begin -->`` and
  ``<!-- commands:end -->``, the exit-status table between
  ``<!-- exit-codes:begin -->`` and ``<!-- exit-codes:end -->``; the rest of the
  README is left as it is.
- ``docs/OUTPUT.md``: the field table of every record type, from the row model
  (``lecode_memctl/core/rowmodel.py``), between ``<!-- fields:begin -->`` and
  ``<!-- fields:end -->``; the error document's codes, from
  ``lecode_memctl/core/errors.py`` (``ERROR_DOCUMENT_CODES``), between
  ``<!-- error-codes:begin -->`` and ``<!-- error-codes:end -->``.
- ``lecode_memctl/cli/completion_table.py``: the root of the command tree as
  completion sees it (each visible command and its short help, each root
  option, whether it takes a value), so that a TAB on a command name is
  answered without importing typer (``cli/completion.py``, ``fast_complete``).
- ``lecode_memctl/share/``: copies of the man page and the three completion
  scripts inside the package, so that the wheel carries them (``memctl man``,
  ``memctl completion SHELL``).
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

PROG = "memctl"
COMPLETE_VAR = "_MEMCTL_COMPLETE"

MAN_PATH = "man/memctl.1"
BASH_PATH = "completions/memctl.bash"
ZSH_PATH = "completions/_memctl"
FISH_PATH = "completions/memctl.fish"
COMPLETION_TABLE_PATH = "lecode_memctl/cli/completion_table.py"
README_PATH = "README.md"
OUTPUT_DOC_PATH = "docs/OUTPUT.md"
# Copies inside the package, so that a wheel carries them ('memctl man',
# 'memctl completion SHELL' print them).
PACKAGE_COPIES = {MAN_PATH: "lecode_memctl/share/memctl.1",
                  BASH_PATH: "lecode_memctl/share/memctl.bash",
                  ZSH_PATH: "lecode_memctl/share/_memctl",
                  FISH_PATH: "lecode_memctl/share/memctl.fish"}

ENVIRONMENT: list[tuple[str, str]] = [
    ("LECODE_CONFIG_DIR",
     "lecode's config directory, when --config-dir is not given."),
    ("XDG_CONFIG_HOME",
     "When LECODE_CONFIG_DIR is not set either, the config directory is "
     "$XDG_CONFIG_HOME/lecode.  A relative one (as a relative LECODE_CONFIG_DIR) is "
     "taken relative to the current directory, as the store contract's rule reads "
     "and the agent does, not ignored as the XDG spec advises (XDG_STATE_HOME is)."),
    ("HOME",
     "When neither is set, the config directory is ~/.config/lecode; and the state "
     "directory is ~/.local/state/lecode-memctl when XDG_STATE_HOME is not set."),
    ("XDG_STATE_HOME",
     "memctl's state directory is $XDG_STATE_HOME/lecode-memctl (an absolute path; "
     "else ~/.local/state/lecode-memctl): the marks validate, forget and redact "
     "record of each store (see FILES), unless --no-state."),
    ("TMPDIR",
     "Where memctl makes its private temporary files (a snapshot of a facts database "
     "a writer holds, edit's copy, a split listing's half), never inside a store; "
     "then /tmp, /var/tmp.  A full one is exit status 7, naming it."),
    ("VISUAL, EDITOR",
     "The editor that memctl edit opens ($VISUAL first, then $EDITOR; vi when "
     "neither is set)."),
    ("NO_COLOR",
     "When set and not empty (an empty value counts as unset, as no-color.org "
     "says), no colour in output; the same as --no-color.  --color always "
     "overrides it."),
    ("FORCE_COLOR",
     "When set and not empty, and NO_COLOR is not (an empty value counts as "
     "unset), colour even when standard output is not a terminal; the same as "
     "--color always."),
    ("COLUMNS",
     "The width of tables on a terminal; text columns fold to fit, id columns are "
     "never cut or wrapped."),
    ("MEMCTL_DEBUG",
     "When set, an internal error (exit status 70) also prints its Python traceback "
     "on standard error."),
    (COMPLETE_VAR,
     "Set by the shell completion scripts (complete_bash, complete_zsh, "
     "complete_fish) to ask memctl for completions of the words in COMP_WORDS "
     "(bash) or _TYPER_COMPLETE_ARGS (zsh, fish) instead of running a command."),
]


# --------------------------------------------------------------------------
# The command tree
# --------------------------------------------------------------------------

@dataclass
class Param:
    kind: str            # "option" or "argument"
    term: str            # "-f, --format FORMAT" or "PATH"
    help: str


@dataclass
class Cmd:
    path: list[str]      # ["where"], ["facts", "list"]
    usage: str           # "[OPTIONS] [PATH]"
    help: str
    short: str
    epilog: str
    params: list[Param]
    is_group: bool
    children: list[Cmd] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join([PROG, *self.path])


def _ctx(click, command, name, parent=None):
    return click.Context(command, info_name=name, parent=parent,
                         **(command.context_settings or {}))


def _params(ctx, command) -> list[Param]:
    out: list[Param] = []
    help_opt = command.get_help_option(ctx)
    for p in command.get_params(ctx):
        if getattr(p, "hidden", False) or p is help_opt or p.name == "help":
            continue
        if p.param_type_name == "argument":
            rec = p.get_help_record(ctx)
            text = rec[1] if rec else (getattr(p, "help", None) or "")
            out.append(Param("argument", _arg_metavar(p), text.strip()))
        else:
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            term, text = rec
            out.append(Param("option", term, (text or "").strip()))
    return out


def _arg_metavar(p) -> str:
    mv = p.metavar or (p.name or "arg").upper()
    if p.nargs == -1 and not mv.endswith("..."):
        mv += "..."
    if not p.required and not mv.startswith("["):
        mv = f"[{mv}]"
    return mv


def _usage(ctx, command) -> str:
    pieces = []
    help_opt = command.get_help_option(ctx)
    if any(p.param_type_name == "option" and p is not help_opt and not getattr(p, "hidden", False)
           for p in command.get_params(ctx)):
        pieces.append("[OPTIONS]")
    for p in command.get_params(ctx):
        if p.param_type_name == "argument" and not getattr(p, "hidden", False):
            pieces.append(_arg_metavar(p))
    if getattr(command, "list_commands", None) is not None:
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _walk(click, command, ctx, path: list[str]) -> Cmd:
    is_group = hasattr(command, "list_commands")
    help_text = (command.help or "").split("\f")[0].strip()  # click: \f ends the help
    node = Cmd(path=path, usage=_usage(ctx, command), help=help_text,
               short=command.get_short_help_str(limit=300).strip(),
               epilog=(command.epilog or "").strip("\n"),
               params=_params(ctx, command), is_group=is_group)
    if is_group:
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            node.children.append(_walk(click, sub, _ctx(click, sub, name, ctx), [*path, name]))
    return node


def command_tree() -> Cmd:
    import typer
    from typer import _click

    from lecode_memctl.cli.app import app

    root = typer.main.get_command(app)
    return _walk(_click, root, _ctx(_click, root, PROG), [])


def leaves(node: Cmd) -> list[Cmd]:
    """Every command below the root, groups before their subcommands, in name order."""
    out: list[Cmd] = []
    for c in node.children:
        out.append(c)
        out.extend(leaves(c))
    return out


def exit_codes() -> list[tuple[int, str]]:
    """The exit-status table: generated in core/errors.py from the error classes."""
    from lecode_memctl.core.errors import EXIT_CODES

    return list(EXIT_CODES)


# --------------------------------------------------------------------------
# roff
# --------------------------------------------------------------------------

def esc(text: str) -> str:
    """Escape text for roff: backslashes, hyphens (all as \\-, so that options and
    paths copy and paste), and non-ASCII characters as \\[uXXXX]."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\e")
        elif ch == "-":
            out.append("\\-")
        elif ch == "\t":
            out.append("        ")
        elif ord(ch) < 32 or ord(ch) == 127:
            continue
        elif ord(ch) > 126 and unicodedata.category(ch)[0] in "CZ" and ch != "\u00a0":
            # controls, bidi overrides, unassigned, line separators: visible, inert
            out.append(f"<U+{ord(ch):04X}>")
        elif ord(ch) > 126:
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    return "".join(out)


def line(text: str) -> str:
    """One input line of text: escaped, and protected when it would start a request."""
    s = esc(text)
    if s.startswith((".", "'")):
        s = "\\&" + s
    return s


def protect(s: str) -> str:
    return ("\\&" + s) if s.startswith((".", "'")) else s


def fill(roff: str, width: int = 78) -> list[str]:
    """Already-escaped roff text as input lines of at most ``width`` characters
    (breaking at spaces only), each protected against starting a request."""
    import textwrap

    lines = textwrap.wrap(roff, width=width, break_long_words=False, break_on_hyphens=False)
    return [protect(ln) for ln in lines] or [""]


def text_lines(text: str) -> list[str]:
    """Plain text as filled roff lines."""
    return fill(esc(" ".join(text.split())))


def bold(text: str) -> str:
    return f"\\fB{esc(text)}\\fR"


def roff_term(term: str) -> str:
    """'-f, --format FORMAT' -> option names bold, metavar italic."""
    parts = []
    for chunk in re.split(r"(\s+)", term):
        if not chunk or chunk.isspace():
            parts.append(chunk)
        elif chunk.startswith("-"):
            name, comma = (chunk[:-1], ",") if chunk.endswith(",") else (chunk, "")
            parts.append(bold(name) + comma)
        else:
            parts.append(f"\\fI{esc(chunk)}\\fR")
    s = "".join(parts)
    return ("\\&" + s) if s.startswith((".", "'")) else s


def paragraphs(text: str) -> list[tuple[bool, list[str]]]:
    """Split help text like click does: blank lines separate paragraphs; a
    paragraph that starts with a line '\\b' (or whose lines are all indented)
    keeps its line breaks.  Returns (verbatim, lines) pairs."""
    out: list[tuple[bool, list[str]]] = []
    for block in re.split(r"\n[ \t]*\n", text.strip("\n")):
        lines = block.split("\n")
        if lines and lines[0].strip() == "\b":
            lines = lines[1:]
            verbatim = True
        else:
            verbatim = all(ln.startswith((" ", "\t")) for ln in lines if ln.strip())
        lines = [ln.rstrip() for ln in lines]
        if any(ln.strip() for ln in lines):
            out.append((verbatim, lines))
    return out


def roff_text(text: str, first: bool = True) -> list[str]:
    """Help text as roff: .PP before each paragraph (but the first when
    ``first`` is False), verbatim paragraphs in .nf/.fi."""
    out: list[str] = []
    for i, (verbatim, lines) in enumerate(paragraphs(text)):
        if i > 0 or first:
            out.append(".PP")
        if verbatim:
            indent = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
            out.append(".nf")
            out.extend(line(ln[indent:]) if ln.strip() else "" for ln in lines)
            out.append(".fi")
        else:
            out.extend(text_lines(" ".join(ln.strip() for ln in lines if ln.strip())))
    return [ln if ln != "" else "\\&" for ln in out]


def examples_of(epilog: str) -> list[str]:
    """The lines of an epilog's 'Examples:' block."""
    lines = epilog.replace("\b", "").split("\n")
    for i, ln in enumerate(lines):
        if ln.strip().lower().rstrip(":") == "examples":
            block = []
            for ex in lines[i + 1:]:
                if not ex.strip():
                    break
                block.append(ex.rstrip())
            indent = min((len(e) - len(e.lstrip()) for e in block), default=0)
            return [e[indent:] for e in block]
    return []


def align_comments(examples: list[str], cap: int = 44) -> list[str]:
    """'memctl x      what it does' lines with their comments in one column."""
    split = []
    for ex in examples:
        m = re.match(r"^(\S.*?\S)\s{2,}(\S.*)$", ex)
        split.append((m.group(1), m.group(2)) if m else (ex, ""))
    col = min(cap, max((len(c) for c, note in split if note), default=0))
    return [f"{c:<{col}}  {note}" if note else c for c, note in split]


def render_man(tree: Cmd) -> str:
    from lecode_memctl import __version__

    cmds = leaves(tree)
    o: list[str] = []
    o.append(f'.TH MEMCTL 1 "" "memctl {esc(__version__)}" "User Commands"')
    o.append(".\\\" Generated by scripts/gen_docs.py from the command tree; do not edit.")
    o.append(".nh")    # no hyphenation: paths and option names stay whole
    o.append(".ad l")  # ragged right
    o.append(".SH NAME")
    o.append(f"memctl \\- {esc(tree.short.rstrip('.').lower()[:1] + tree.short.rstrip('.')[1:])}")

    o.append(".SH SYNOPSIS")
    o.append(".B memctl")
    o.append("[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...")
    for c in cmds:
        if c.is_group:
            continue
        o.append(".br")
        o.append(f".B {esc(c.name)}")
        if c.usage:
            o.append(line(c.usage))

    o.append(".SH DESCRIPTION")
    o.extend(roff_text(tree.help, first=False))

    o.append(".SH GLOBAL OPTIONS")
    o.extend(fill("These come before the command name: "
                  "\\fBmemctl \\-\\-project\\fR \\fIPATH\\fR \\fBshow\\fR."))
    for p in tree.params:
        o.append(".TP")
        o.append(roff_term(p.term))
        if p.help:
            o.extend(text_lines(p.help))
    o.append(".TP")
    o.append(roff_term("-h, --help"))
    o.extend(fill("Show the help of memctl, or of a command (\\fBmemctl\\fR \\fICOMMAND\\fR "
                  "\\fB\\-\\-help\\fR), and exit."))

    o.append(".SH COMMANDS")
    for c in cmds:
        o.append(f".SS {esc(c.name)}")
        o.append(f".B {esc(c.name)}")
        if c.usage:
            o.append(line(c.usage))
        o.extend(roff_text(c.help))
        args = [p for p in c.params if p.kind == "argument"]
        opts = [p for p in c.params if p.kind == "option"]
        for title, group in (("Arguments:", args), ("Options:", opts)):
            if not group:
                continue
            o.append(".PP")
            o.append(title)
            o.append(".RS 4")
            for p in group:
                o.append(".TP")
                o.append(roff_term(p.term))
                if p.help:
                    o.extend(text_lines(p.help))
            o.append(".RE")
        if c.is_group and c.children:
            o.append(".PP")
            o.extend(fill("Commands: " + ", ".join(bold(ch.name) for ch in c.children) + "."))
        if c.epilog:
            o.extend(roff_text(c.epilog))

    o.append(".SH EXIT STATUS")
    for code, meaning in exit_codes():
        o.append(".TP")
        o.append(f"\\fB{code}\\fR")
        o.extend(text_lines(meaning))

    o.append(".SH ENVIRONMENT")
    for name, text in ENVIRONMENT:
        o.append(".TP")
        o.append(", ".join(f"\\fB{esc(n.strip())}\\fR" for n in name.split(",")))
        o.extend(text_lines(text))

    o.append(".SH FILES")
    files = [
        ("<config dir>/config.toml",
         "lecode's configuration; memctl reads its [memory] section (enabled, max_bytes, "
         "auto_learn, facts_max_bytes).  See memctl config."),
        ("<config dir>/memory/<slug>/",
         "The store of one project.  The slug is the project root's last path component, "
         "lower-cased, with every run of other characters than a-z and 0-9 replaced by "
         "a hyphen and leading and trailing hyphens stripped (at most 40 characters, or "
         "root), a hyphen, and the first 12 hex digits "
         "of the SHA-256 of the root path.  Directories are created 0700, files 0600."),
        ("<store>/MEMORY.md", "Long-term memory."),
        ("<store>/scratchpad.md", "The project checklist."),
        ("<store>/daily/YYYY-MM-DD.md", "Daily logs."),
        ("<store>/notes/<name>.md", "Named notes."),
        ("<store>/<file>.bak", "The previous content of a Markdown file, written before each "
                               "overwrite."),
        ("<store>/facts.sqlite3", "The fact database; created by the first write, never by a read."),
        ("<store>/sessions/<id>.jsonl", "Session transcripts, one JSON record a line."),
        ("<config dir>/memctl-secrets-allowlist",
         "The SHA-256 digests of values memctl secrets leaves out, one a line (when it "
         "exists and --allowlist is not given)."),
        ("<state dir>/stores/<hash>.json",
         "memctl's mark of one store (the state directory: $XDG_STATE_HOME/lecode-memctl, "
         "else ~/.local/state/lecode-memctl): the highest exclusion generation and "
         "exclusion count seen there and the forgotten fact ids, which validate compares "
         "with the store (db.rolled_back).  Remove it when an older facts database was "
         "put back on purpose; validate names it."),
    ]
    o.extend(fill("The config dir is \\fB\\-\\-config\\-dir\\fR, else $LECODE_CONFIG_DIR, else "
                  "$XDG_CONFIG_HOME/lecode, else ~/.config/lecode."))
    for path, text in files:
        o.append(".TP")
        o.append(f"\\fI{esc(path)}\\fR")
        o.extend(text_lines(text))

    o.append(".SH EXAMPLES")
    top = examples_of(tree.epilog)
    if top:
        o.append(".nf")
        o.extend(line(e) for e in top)
        o.append(".fi")
    # (each command's first example that runs memctl: completion's first
    # line makes the directory its script goes in)
    firsts = [(c, [e for e in examples_of(c.epilog) if e.lstrip().startswith("memctl")])
              for c in cmds]
    firsts = [(c, ex) for c, ex in firsts if ex]
    if firsts:
        o.append(".PP")
        o.append("One example of each command (more under COMMANDS):")
        o.append(".PP")
        o.append(".nf")
        o.extend(line(ex) for ex in align_comments([ex[0] for _c, ex in firsts]))
        o.append(".fi")

    o.append(".SH SEE ALSO")
    o.append("\\fBgit\\fR(1), \\fBsqlite3\\fR(1), \\fBjq\\fR(1).")
    o.append(".PP")
    o.extend(fill("docs/FORMAT.md (the store layout) and docs/PERFORMANCE.md in memctl's source "
                  "tree; \\fBmemctl\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR."))
    return "\n".join(o) + "\n"


# --------------------------------------------------------------------------
# completions
# --------------------------------------------------------------------------

#: memctl's changes to typer's completion templates, (old, new) replacements
#: of the filled template, each applied exactly once (gen_docs stops when
#: typer's template no longer has the old text).  bash: send the command line
#: up to the cursor (COMP_LINE), which memctl splits as the shell will
#: (COMP_WORDS is split at ``=`` and ``:`` too; it is still sent, for the
#: requests of older scripts' shape), and that line without readline's word
#: ($2: the text after the last ``:`` or ``=``), so that memctl answers
#: with what replaces that word (completion.bash_answer); its first line
#: says whether an empty answer falls back to file names (``default``) or
#: not (``nofiles``: compopt +o default), and is dropped only when it is
#: one of the two (an older memctl on PATH sends none); read the candidates
#: one a line with mapfile (typer's unquoted ``COMPREPLY=( $(...) )`` glob-
#: expands them against the working directory), and quote each with
#: ``printf %q`` so that it is inserted as one shell word (a name with a
#: space, a quote or a ``$``); after an opening quote (readline inserts the
#: candidate inside it, then closes it), escape it for that quote instead
#: (a ``!`` in a double quote as ``"'!'"`` when history expansion is on;
#: readline drops the opening quote when the candidate starts with that quote
#: and adds no closing one when it ends with it: the quote is doubled there).
#: An empty line (no candidate) is none.
SCRIPT_CHANGES: dict[str, tuple[tuple[str, str], ...]] = {
    "bash": (
        ("""    local IFS=$'\n'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   _MEMCTL_COMPLETE=complete_bash $1 ) )
""",
         r"""    local IFS=$'\n' cur=${COMP_WORDS[COMP_CWORD]} word quoted sq=\' bs=\\
    local line=${COMP_LINE-} head=
    local -a words
    line=${line:0:${COMP_POINT-${#line}}}
    [[ $line == *"${2-}" ]] && head=${line%"${2-}"}
    mapfile -t words < <(env COMP_WORDS="${COMP_WORDS[*]}" \
                   COMP_CWORD=$COMP_CWORD \
                   COMP_LINE="$line" _MEMCTL_BASH_HEAD="$head" \
                   _MEMCTL_COMPLETE=complete_bash $1)
    COMPREPLY=()
    # the head line of this memctl's answer; an older memctl sends none
    case ${words[0]-} in
        nofiles) compopt +o default 2>/dev/null; words=("${words[@]:1}") ;;
        default) words=("${words[@]:1}") ;;
    esac
    for word in "${words[@]}"; do
        if [[ -z $word ]]; then
            continue
        elif [[ $cur == \'* ]]; then
            word=${word//"$sq"/"$sq$bs$sq$sq"}
            # readline drops the opening quote when the candidate starts
            # with one, and adds no closing quote when it ends with one
            [[ $word == \'* ]] && word=\'$word
            [[ $word == *\' ]] && word+=\'
            COMPREPLY+=("$word")
        elif [[ $cur == \"* ]]; then
            word=${word//"$bs"/"$bs$bs"}
            word=${word//"\$"/"$bs\$"}
            word=${word//"\`"/"$bs\`"}
            word=${word//"\""/"$bs\""}
            # history expansion sees a ! inside double quotes: close the
            # quote around a single-quoted one
            [[ $- == *H* ]] && word=${word//\!/"\"$sq"\!"$sq\""}
            [[ $word == \"* ]] && word=\"$word
            [[ $word == *\" ]] && word+=\"
            COMPREPLY+=("$word")
        else
            printf -v quoted %q "$word"
            COMPREPLY+=("$quoted")
        fi
    done
"""),
    ),
    # zsh: quote the command substitution, so that eval reads the output as
    # it is (unquoted, it was split at blanks: two spaces in a value became
    # one); its newlines, between the "value":"help" items, become the one
    # space that the unquoted substitution made of them (the _arguments line
    # stays one line, as before)
    #
    # zsh, too: loaded through fpath (compinit autoloads _memctl for the
    # #compdef line), the file is the body of _memctl, run on the first TAB:
    # after defining the function and the compdef, complete that TAB too
    # (it completed nothing); sourced, only the compdef, as before.  Which
    # of the two is told by $ZSH_EVAL_CONTEXT (...:loadautofunc when
    # autoloaded), not by funcstack, which holds the name a file was
    # sourced by (``source _memctl`` in its directory ran a completion)
    "zsh": (
        ('  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _MEMCTL_COMPLETE=complete_zsh memctl)',
         '  eval "${$(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" '
         '_MEMCTL_COMPLETE=complete_zsh memctl)//$\'\\n\'/ }"'),
        ("\ncompdef _memctl_completion memctl",
         "\nif [[ ${ZSH_EVAL_CONTEXT-} == *loadautofunc ]]; then\n"
         "  # autoloaded as _memctl (fpath): this is the first TAB, complete it too\n"
         "  compdef _memctl_completion memctl\n"
         '  _memctl_completion "$@"\n'
         "else\n"
         "  compdef _memctl_completion memctl\n"
         "fi"),
    ),
    "fish": (),
}


def apply_script_changes(shell: str, body: str) -> str:
    """typer's filled template for SHELL with memctl's :data:`SCRIPT_CHANGES`."""
    for old, new in SCRIPT_CHANGES[shell]:
        if body.count(old) != 1:
            raise SystemExit(f"gen_docs: typer's {shell} completion template changed; "
                             f"update SCRIPT_CHANGES (no single {old!r})")
        body = body.replace(old, new)
    return body


def render_completions() -> dict[str, str]:
    import typer
    from typer._completion_classes import BashComplete, FishComplete, ZshComplete

    from lecode_memctl.cli.app import app

    cli = typer.main.get_command(app)
    out = {}
    for path, cls in ((BASH_PATH, BashComplete), (ZSH_PATH, ZshComplete), (FISH_PATH, FishComplete)):
        comp = cls(cli, {}, PROG, COMPLETE_VAR)
        # ShellComplete.source() fills typer's template; BashComplete.source() also
        # checks the local bash version, which says nothing about the script.
        body = apply_script_changes(cls.name, (comp.source_template % comp.source_vars()).strip("\n"))
        note = (f"# {cls.name} completion for memctl, generated by scripts/gen_docs.py from "
                f"typer's {cls.__name__}"
                + (" with memctl's changes (SCRIPT_CHANGES)" if SCRIPT_CHANGES[cls.name] else "")
                + "; do not edit.\n")
        if cls is ZshComplete and body.startswith("#compdef"):
            first, rest = body.split("\n", 1)
            text = f"{first}\n{note}{rest}\n"
        else:
            text = f"{note}\n{body}\n"
        out[path] = text
    return out


def _completion_options(command, ctx) -> tuple[list, dict, set, bool]:  # noqa: ANN001
    """What click's completion reads of one command's options: (visible
    options as (name, help, parameter name, multiple) in ``get_params``
    order, option name -> (parameter name, takes a value) for every option
    that is not eager, hidden ones included since they parse words, the
    parameters whose names come in no fixed order, whether the command has
    a positional argument).  SystemExit for an option of a shape
    ``fast_complete`` does not know (nargs other than 1)."""
    from typer.core import TyperArgument, TyperOption

    from lecode_memctl.cli.options import CommandWithGlobalOptions

    options = []
    params = {}
    unordered = set()
    has_arguments = False
    help_option = command.get_help_option(ctx)
    # the global options a command takes after its name: hidden from its
    # --help, offered by its completion (CommandWithGlobalOptions.shell_complete)
    offered = (set(map(id, command._globals(ctx)))
               if isinstance(command, CommandWithGlobalOptions) else set())
    for p in command.get_params(ctx):
        if isinstance(p, TyperArgument):
            has_arguments = True
        if not isinstance(p, TyperOption):
            continue
        if p.nargs != 1:
            raise SystemExit(f"gen_docs: option {p.name} of {ctx.command_path} is of a shape "
                             "fast_complete does not know; teach it first")
        names = [*p.opts, *p.secondary_opts]
        if p is help_option:
            # click builds the help option from a set of names: their order
            # changes with the string hash seed, from one process to the next
            unordered.add(p.name)
            names = sorted(names)
        for name in names:
            if not p.hidden or id(p) in offered:
                options.append((name, p.help or None, p.name, bool(p.multiple)))
            if not p.is_eager:
                params[name] = (p.name, not (p.is_flag or p.count))
    return options, params, unordered, has_arguments


def render_completion_table() -> str:
    """``lecode_memctl/cli/completion_table.py``: what typer's completion reads
    from the command tree, taken from the tree itself the way click's
    ``shell_completion`` reads it (the contexts completion makes, with
    ``resilient_parsing``; ``TyperOption`` parameters that are not hidden;
    ``list_commands`` order; ``get_short_help_str()``)."""
    import typer
    from typer.core import TyperGroup

    from lecode_memctl.cli.app import app

    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    ctx = root.make_context(PROG, [], resilient_parsing=True)
    options, params, unordered, _args = _completion_options(root, ctx)
    commands = []
    per_command = []
    prefixes = set(ctx._opt_prefixes)
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        commands.append((name, cmd.get_short_help_str()))
        sub = cmd.make_context(name, [], parent=ctx, resilient_parsing=True)
        prefixes |= sub._opt_prefixes
        c_options, c_params, c_unordered, c_args = _completion_options(cmd, sub)
        unordered |= c_unordered
        per_command.append((name, sub.allow_interspersed_args, c_args, c_options, c_params))

    def tuple_lines(rows: list[tuple], indent: str = "    ") -> str:
        return "".join(f"{indent}{row!r},\n" for row in rows)

    def params_lines(params: dict, indent: str) -> str:
        return "".join(f"{indent}{k!r}: {v!r},\n" for k, v in params.items())

    command_lines = "".join(
        f"    {name!r}: (\n        {inter!r}, {args!r},\n"
        f"        (\n{tuple_lines(opts, ' ' * 12)}        ),\n"
        f"        {{\n{params_lines(prm, ' ' * 12)}        }},\n    ),\n"
        for name, inter, args, opts, prm in per_command)
    return (
        "# ruff: noqa: E501\n"
        '"""memctl\'s command tree as shell completion sees it.\n\n'
        "Generated by scripts/gen_docs.py from typer's command tree; do not edit\n"
        "(``gen_docs.py --check`` fails when it is stale).  ``cli/completion.py``\n"
        "(``fast_complete``) answers a TAB on a command name or an option name from\n"
        'it without typer.\n"""\n\n'
        "#: The characters an option starts with (click's ``Context._opt_prefixes``).\n"
        f"OPT_PREFIXES = {''.join(sorted(p for p in prefixes if len(p) == 1))!r}\n\n"
        "#: (command, short help) of every visible command, in completion's order.\n"
        f"COMMANDS = (\n{tuple_lines(commands)})\n\n"
        "#: (option name, help, parameter name, multiple) of every visible root option.\n"
        f"ROOT_OPTIONS = (\n{tuple_lines(options)})\n\n"
        "#: option name -> (parameter name, takes a value) for the root options that\n"
        "#: are not eager (an eager one, --help or --version, is left to typer).\n"
        "ROOT_PARAMS = {\n" + params_lines(params, "    ") + "}\n\n"
        "#: command -> (interspersed options and arguments, has a positional argument,\n"
        "#: its options completion offers as ROOT_OPTIONS (the global options it takes\n"
        "#: after its name included, after its own), its options that are not eager\n"
        "#: as ROOT_PARAMS (those global options included).\n"
        "COMMAND_OPTIONS = {\n" + command_lines + "}\n\n"
        "#: Parameters whose option names typer lists in an order that changes from one\n"
        "#: process to the next (click builds the help option from a set): a request\n"
        "#: that lists more than one of their names is left to typer.\n"
        f"UNORDERED = {tuple(sorted(unordered))!r}\n"
    )


# --------------------------------------------------------------------------
# README blocks
# --------------------------------------------------------------------------

def md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_command_table(tree: Cmd) -> str:
    rows = ["| command | what it does |", "|---|---|"]
    for c in leaves(tree):
        rows.append(f"| `{md_cell(c.name)}` | {md_cell(c.short)} |")
    return "\n".join(rows)


def render_exit_table() -> str:
    rows = ["| status | meaning |", "|---|---|"]
    for code, meaning in exit_codes():
        rows.append(f"| {code} | {md_cell(meaning)} |")
    return "\n".join(rows)


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"gen_docs: no '{begin}' ... '{end}' block")
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def render_readme(tree: Cmd, current: str) -> str:
    text = replace_block(current, "commands", render_command_table(tree))
    return replace_block(text, "exit-codes", render_exit_table())


# --------------------------------------------------------------------------

def render_fields() -> str:
    """docs/OUTPUT.md's field tables, one per record type of the row model."""
    from lecode_memctl.core.rowmodel import MODELS, SCHEMA_VERSION

    out = [f"Output schema version: **{SCHEMA_VERSION}** (`memctl schema | jq .schema_version`)."]
    for m in MODELS:
        types = " or ".join(f'`"{t}"`' for t in (m.type, *m.alt_types))
        out += ["", f"### `{m.type}` ({m.command})", "", md_cell(m.doc) + f" `type`: {types}."
                + (f"  Id columns (never cut in a table): {', '.join(f'`{i}`' for i in m.ids)}."
                   if m.ids else ""),
                "", "| field | type | null | meaning |", "|---|---|---|---|"]
        for f in m.fields:
            t = f"list of {f.items}" if f.type == "list" else f.type
            out.append(f"| `{f.name}` | {t} | {'yes' if f.nullable else ''} | {md_cell(f.doc)} |")
    return "\n".join(out)


def render_error_codes() -> str:
    """docs/OUTPUT.md's table of the error document's codes."""
    from lecode_memctl.core.errors import ERROR_DOCUMENT_CODES

    rows = ["| code | exit status | meaning |", "|---|---|---|"]
    for code, status, meaning in ERROR_DOCUMENT_CODES:
        rows.append(f"| `{code}` | {status} | {md_cell(meaning)} |")
    return "\n".join(rows)


def generate(readme_source: Path, output_source: Path | None = None) -> dict[str, bytes]:
    """Every generated file, relative path -> bytes."""
    tree = command_tree()
    files = {MAN_PATH: render_man(tree)}
    files.update(render_completions())
    files[COMPLETION_TABLE_PATH] = render_completion_table()
    for src, dst in PACKAGE_COPIES.items():
        files[dst] = files[src]
    files[README_PATH] = render_readme(tree, readme_source.read_text(encoding="utf-8"))
    output_source = output_source or REPO / OUTPUT_DOC_PATH
    output = replace_block(output_source.read_text(encoding="utf-8"), "fields", render_fields())
    files[OUTPUT_DOC_PATH] = replace_block(output, "error-codes", render_error_codes())
    return {k: v.encode("utf-8") for k, v in files.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gen_docs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming the files that differ from what would be written")
    ap.add_argument("--out", type=Path, default=REPO, metavar="DIR",
                    help="write (or check) under DIR instead of the repository root")
    a = ap.parse_args(argv)

    out: Path = a.out
    readme_source = out / README_PATH if (out / README_PATH).exists() else REPO / README_PATH
    output_source = (out / OUTPUT_DOC_PATH if (out / OUTPUT_DOC_PATH).exists()
                     else REPO / OUTPUT_DOC_PATH)
    files = generate(readme_source, output_source)
    if a.check:
        differ = []
        for rel, data in sorted(files.items()):
            p = out / rel
            if not p.is_file() or p.read_bytes() != data:
                differ.append(rel)
        for rel in differ:
            print(f"gen_docs: {rel} is out of date (run: python scripts/gen_docs.py)", file=sys.stderr)
        return 1 if differ else 0
    for rel, data in sorted(files.items()):
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.is_file() or p.read_bytes() != data:
            p.write_bytes(data)
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
