"""The one compilation of a regular expression a user gives memctl
(``grep PATTERN``, ``search PATTERN``, ``redact --pattern``).

Python's ``re`` warns of some patterns as it compiles them: a
``FutureWarning`` for a set that a later Python may read otherwise
(``[[:alpha:]]``: "Possible nested set", ``[a&&b]``, ``[a||b]``,
``[a~~b]``; ``[a--b]`` is an error).  Left alone, that warning is
Python's own two lines on stderr (the file and line of memctl's
``re.compile``), and an exception with a traceback under
``PYTHONWARNINGS=error``.  Given a ``warn``, every warning of the
compilation is caught and told to it as one text (the CLI prints it as one
``memctl: warning:`` line, compiling before it starts any thread).  The
pattern is compiled as before: the warning changes no match and no exit
status.

Without ``warn`` (the library's callers, the agent among them) the pattern
is compiled by ``re.compile`` alone, its warnings Python's as the caller's
filters say: catching them changes process-wide state
(``warnings.catch_warnings`` is not thread-safe: another thread's warnings
were taken, and two at once could leave every later warning of the
process lost), and ``re``'s cache is never purged (the caller's compiled
patterns are kept).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

from .errors import UsageError

# (pattern, flags) -> (compiled, the warnings' messages), for the
# compilations whose warnings were caught (a ``warn`` given).  A pattern
# compiled before in this process is a hit of re's cache, which warns of
# nothing again: each run of memctl in one process (the tests) must say the
# same, so the messages are kept here.  Bounded as re's own cache is.
_CACHE: dict[tuple[str, int], tuple[re.Pattern[str], tuple[str, ...]]] = {}
_CACHE_MOST = 64


def _compile(pattern: str, flags: int, catch: bool) -> tuple[re.Pattern[str], tuple[str, ...]]:
    key = (pattern, flags)
    got = _CACHE.get(key)
    if got is not None:
        return got
    if not catch:
        return re.compile(pattern, flags), ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        regex = re.compile(pattern, flags)
    said = tuple(dict.fromkeys(str(w.message) for w in caught))
    if len(_CACHE) >= _CACHE_MOST:
        _CACHE.clear()
    _CACHE[key] = (regex, said)
    return regex, said


def _error_text(exc: BaseException, shown: str | None) -> str:
    """What a refused pattern's error says after ``invalid regular
    expression``: ``re``'s message with the pattern quoted (``shown``), or,
    for a pattern that may be a credential (``shown`` None), only where
    ``re`` stopped: its message names pieces of the pattern (a group's
    name, an escape, a character name)."""
    if shown is not None:
        return f" {shown}: {exc}"
    pos = getattr(exc, "pos", None)
    return f" (at position {pos})" if isinstance(pos, int) else ""


def _sentence(messages: tuple[str, ...]) -> str:
    return "; ".join(m[:1].lower() + m[1:] for m in messages)


def compile_user_regex(pattern: str, flags: int = 0, *, fixed: bool = False,
                       shown: str | None = None,
                       warn: Callable[[str], None] | None = None) -> re.Pattern[str]:
    """``pattern`` compiled with ``flags`` (``fixed``: as literal text).  A
    pattern ``re`` refuses is a :class:`UsageError` (``invalid regular
    expression``, followed by ``shown``, the pattern as the error may show
    it, when given: ``redact`` shows none, its pattern may be the
    credential).  Whatever ``re`` warns of is told to ``warn`` as one
    sentence, the pattern then compiled all the same."""
    name = f" {shown}" if shown is not None else ""
    try:
        regex, said = _compile(re.escape(pattern) if fixed else pattern, flags, warn is not None)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        raise UsageError(f"invalid regular expression{_error_text(exc, shown)}") from None
    if said and warn is not None:
        text = f"the pattern{name} is read as a Python regular expression: {_sentence(said)}"
        if any(m.startswith("Possible ") for m in said):
            text += " (a later Python may read it otherwise"
            if any(m.startswith("Possible nested set") for m in said):
                text += ", and [:alpha:] is no POSIX class there"
            text += ": write \\[, \\&, \\|, \\~ or \\- for the character itself)"
        warn(text)
    return regex


__all__ = ["compile_user_regex"]
