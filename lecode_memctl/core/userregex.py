"""The one compilation of a regular expression a user gives memctl
(``grep PATTERN``, ``search PATTERN``, ``redact --pattern``).

Python's ``re`` warns of some patterns as it compiles them: a
``FutureWarning`` for a set that a later Python may read otherwise
(``[[:alpha:]]``: "Possible nested set", ``[a&&b]``, ``[a||b]``,
``[a~~b]``; ``[a--b]`` is an error).  Left alone, that warning is
Python's own two lines on stderr (the file and line of memctl's
``re.compile``), and an exception with a traceback under
``PYTHONWARNINGS=error``.  Here every
warning of the compilation is caught and told, as one text, to the
caller's ``warn`` (the CLI prints it as one ``memctl: warning:`` line);
without ``warn`` it is dropped.  The pattern is compiled as before: the
warning changes no match and no exit status.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

from .errors import UsageError

# (pattern, flags) -> (compiled, the warnings' messages).  Ours, not only
# re's cache: a pattern compiled before in this process (re's cache hit)
# gives no warning again, and each run of memctl in one process (the
# tests) must say the same.  Bounded as re's own cache is.
_CACHE: dict[tuple[str, int], tuple[re.Pattern[str], tuple[str, ...]]] = {}
_CACHE_MOST = 64


def _compile(pattern: str, flags: int) -> tuple[re.Pattern[str], tuple[str, ...]]:
    key = (pattern, flags)
    got = _CACHE.get(key)
    if got is not None:
        return got
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # (re's cache bypassed: a hit there would not warn)
        re.purge()
        regex = re.compile(pattern, flags)
    said = tuple(dict.fromkeys(str(w.message) for w in caught))
    if len(_CACHE) >= _CACHE_MOST:
        _CACHE.clear()
    _CACHE[key] = (regex, said)
    return regex, said


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
        regex, said = _compile(re.escape(pattern) if fixed else pattern, flags)
    except re.error as exc:
        raise UsageError(f"invalid regular expression{name}: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise UsageError(f"invalid regular expression{name}: {exc}") from None
    if said and warn is not None:
        text = f"the pattern{name} is read as a Python regular expression: {_sentence(said)}"
        if any(m.startswith("Possible ") for m in said):
            text += (" (a later Python may read it otherwise, and [:alpha:] is no POSIX "
                     "class there: write \\[, \\&, \\|, \\~ or \\- for the character itself)")
        warn(text)
    return regex


__all__ = ["compile_user_regex"]
