"""Every patch memctl applies to typer's (and its vendored click's) private internals.

They live here, in one module, so that a typer upgrade has one place to look at;
tests/test_typer_patches.py checks that each patched attribute still exists with
the shape these patches expect and names the installed typer version when it
does not.  :data:`PATCHED` lists them for that test.

The patches apply only while completing (``_MEMCTL_COMPLETE`` set): a command
run never sees them.
"""

from __future__ import annotations

#: (module, attribute path, parameter names) of every private typer attribute
#: used or replaced here.  ``process_value`` is wrapped on click's
#: ``Parameter`` (and on typer's ``_TyperParameter`` where a typer release has
#: one): typer's argument and option classes must inherit it from there.
PATCHED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("typer._completion_classes", "completion_init", ()),
    ("typer._completion_classes", "_sanitize_help_text", ("text",)),
    ("typer._click.core", "Parameter.process_value", ("self", "ctx", "value")),
    ("typer._completion_classes", "ZshComplete.format_completion", ("self", "item")),
    ("typer._completion_classes", "BashComplete.get_completion_args", ("self",)),
    ("typer._click.shell_completion", "ShellComplete.get_completions",
     ("self", "args", "incomplete")),
    ("typer._click.shell_completion", "_resolve_context", ("cli", "ctx_args", "prog_name", "args")),
    ("typer._click.shell_completion", "_is_incomplete_option", ("ctx", "args", "param")),
    ("typer._completion_classes", "BashComplete.complete", ("self",)),
    ("typer._completion_classes", "ZshComplete.complete", ("self",)),
    ("typer._completion_classes", "FishComplete.complete", ("self",)),
)


def patch_for_completion() -> None:
    """Make typer's ``_MEMCTL_COMPLETE`` protocol work and keep every TAB light."""
    _register_completion_classes()
    _skip_value_processing_while_completing()
    _quote_zsh_apostrophes()
    _rejoin_bash_equals()
    _keep_the_option_before_equals()
    _answer_without_files()


def _register_completion_classes() -> None:
    """The app is built with ``add_completion=False`` (no --install-completion
    options: we ship the scripts), so typer never registers its shell classes;
    register them here.  typer formats zsh/fish completion help through rich
    when it is installed; our help text has no markup, so pass it through
    unchanged and keep every TAB free of rich."""
    try:
        from typer import _completion_classes

        _completion_classes.completion_init()
        _completion_classes._sanitize_help_text = lambda text: text  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover - a typer without the hook needs nothing
        pass


def _skip_value_processing_while_completing() -> None:
    """Completion parses the words typed so far only to find which command and
    parameter is being completed; nothing runs.  typer would still coerce every
    parameter value through a pydantic TypeAdapter (importing pydantic: about
    0.1 s per TAB) and run parameter callbacks; skip both while completing."""
    try:
        from typer import _click, core as typer_core

        classes = [c for c in (getattr(typer_core, "_TyperParameter", None),
                               _click.core.Parameter) if c is not None]
    except Exception:  # pragma: no cover
        return
    for cls in classes:
        original = cls.__dict__.get("process_value")
        if original is None:
            continue

        def process_value(self, ctx, value, _original=original):  # type: ignore[no-untyped-def]
            if getattr(ctx, "resilient_parsing", False):
                return value
            return _original(self, ctx, value)

        cls.process_value = process_value  # type: ignore[method-assign]


def _quote_zsh_apostrophes() -> None:
    """typer's zsh completion writes each value and help inside a single-quoted
    word and turns a ``'`` into ``''``, which zsh reads as two adjacent quoted
    strings: the apostrophe is lost (``odd'quote`` completes as ``oddquote``).
    Escape as :func:`completion.zsh_escape` does (the fast path's too)."""
    try:
        from typer import _completion_classes
    except Exception:  # pragma: no cover
        return
    from .completion import zsh_escape

    def format_completion(self, item):  # type: ignore[no-untyped-def]
        if item.help:
            help_text = _completion_classes._sanitize_help_text(zsh_escape(item.help))
            return f'"{zsh_escape(item.value)}":"{help_text}"'
        return f'"{zsh_escape(item.value)}"'

    _completion_classes.ZshComplete.format_completion = format_completion  # type: ignore[method-assign]


def _rejoin_bash_equals() -> None:
    """bash splits COMP_WORDS at ``=`` and ``:``; read the words from the
    command line instead (:func:`completion.bash_request_words`, as the fast
    path does)."""
    try:
        from typer import _completion_classes
    except Exception:  # pragma: no cover
        return
    from .completion import bash_request_words

    def get_completion_args(self):  # type: ignore[no-untyped-def]
        import os

        return bash_request_words(os.environ)

    _completion_classes.BashComplete.get_completion_args = get_completion_args  # type: ignore[method-assign]


def _keep_the_option_before_equals() -> None:
    """An option's value is completed by that option's completer, also when it
    starts with ``-`` (``--sort=-<TAB>``, ``--sort -<TAB>``: click's parser
    takes it as the value, but click's completion took it for the start of an
    option name and offered ``--sort=--json``...).  And zsh and fish complete
    the whole word ``--color=al`` (bash only ``al``, after readline's split at
    ``=``): click answers the value (``always``), which they match against
    ``--color=al`` and drop; give them ``--color=always``."""
    try:
        from typer import _completion_classes
        from typer._click.shell_completion import (
            CompletionItem,
            ShellComplete,
            _is_incomplete_option,
            _resolve_context,
        )
    except Exception:  # pragma: no cover
        return
    original = ShellComplete.get_completions

    def option_value(self, args, incomplete):  # type: ignore[no-untyped-def]
        """(the option, its incomplete value) when INCOMPLETE is the value of an
        option that takes one, else None."""
        if "--" in args or not incomplete.startswith("-"):
            return None
        ctx = _resolve_context(self.cli, self.ctx_args, self.prog_name, list(args))
        params = [p for p in ctx.command.get_params(ctx)
                  if getattr(p, "param_type_name", "") == "option"]
        name, eq, value = incomplete.partition("=")
        for p in params:
            if eq and name in p.opts and not p.is_flag and not p.count:
                return ctx, p, value
            if not eq and _is_incomplete_option(ctx, list(args), p):
                return ctx, p, incomplete
        return None

    from .completion import LINE_ARGS, NO_FILES

    def get_completions(self, args, incomplete, _prefix=False):  # type: ignore[no-untyped-def]
        LINE_ARGS[:] = args
        NO_FILES[0] = False   # a completer sets it for this request only
        found = option_value(self, args, incomplete)
        if found is None:
            items = original(self, args, incomplete)
        else:
            ctx, param, value = found
            items = param.shell_complete(ctx, value)
        if _prefix and incomplete.startswith("-") and "=" in incomplete:
            name = incomplete.partition("=")[0]
            items = [CompletionItem(f"{name}={i.value}", type=i.type, help=i.help) for i in items]
        return items

    def get_completions_whole_word(self, args, incomplete):  # type: ignore[no-untyped-def]
        return get_completions(self, args, incomplete, _prefix=True)

    def get_completions_bash(self, args, incomplete):  # type: ignore[no-untyped-def]
        # the shipped script trims each candidate to the part readline
        # replaces (completion.bash_answer): it takes whole words
        import os

        from .completion import BASH_HEAD_VAR

        return get_completions(self, args, incomplete, _prefix=BASH_HEAD_VAR in os.environ)

    _completion_classes.BashComplete.get_completions = get_completions_bash  # type: ignore[method-assign]
    for cls in (_completion_classes.ZshComplete, _completion_classes.FishComplete):
        cls.get_completions = get_completions_whole_word  # type: ignore[method-assign]


def _answer_without_files() -> None:
    """When a completer's empty answer is final (:func:`completion.no_file_fallback`),
    no shell may fall back to file names: bash's answer says ``nofiles``
    (:func:`completion.bash_answer`), zsh gets no ``_files``, fish's
    condition (``is-args``) says the argument is handled."""
    try:
        from typer import _completion_classes
    except Exception:  # pragma: no cover
        return
    from .completion import NO_FILES, bash_answer

    def bash_complete(self):  # type: ignore[no-untyped-def]
        import os

        args, incomplete = self.get_completion_args()
        items = self.get_completions(args, incomplete)
        return bash_answer([self.format_completion(i) for i in items], os.environ)

    # typer's own methods, also when patched before (main() called again in
    # one process, as the tests do: wrappers must not nest)
    zsh_original = getattr(_completion_classes.ZshComplete.complete, "typer_original",
                           _completion_classes.ZshComplete.complete)
    fish_original = getattr(_completion_classes.FishComplete.complete, "typer_original",
                            _completion_classes.FishComplete.complete)

    def zsh_complete(self):  # type: ignore[no-untyped-def]
        text = zsh_original(self)
        return "" if text == "_files" and NO_FILES[0] else text

    def fish_complete(self):  # type: ignore[no-untyped-def]
        import os
        import sys

        try:
            return fish_original(self)
        except SystemExit as stop:
            if (stop.code == 1 and NO_FILES[0]
                    and os.environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args"):
                sys.exit(0)
            raise

    zsh_complete.typer_original = zsh_original  # type: ignore[attr-defined]
    fish_complete.typer_original = fish_original  # type: ignore[attr-defined]
    _completion_classes.BashComplete.complete = bash_complete  # type: ignore[method-assign]
    _completion_classes.ZshComplete.complete = zsh_complete  # type: ignore[method-assign]
    _completion_classes.FishComplete.complete = fish_complete  # type: ignore[method-assign]
