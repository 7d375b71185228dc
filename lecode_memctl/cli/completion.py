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
    wins over one given nearer the root.  Then resolves them the way every
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
                values[name] = os.fspath(v)
    if values.get("store"):
        # Completion needs the directory only: not the slug that the command
        # would take from the transcript headers (store_given reads them).
        from lecode_memctl.core.layout import store_at

        return store_at(values["store"])
    return State(config_dir_option=values.get("config_dir"), project=values.get("project")).store()


def complete_session_id(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Session ids of the store that start with what was typed.

    The layout's listing of ``sessions/*.jsonl`` (symbolic links left out);
    opens nothing, writes nothing."""
    try:
        from lecode_memctl.core.layout import session_ids

        store = store_from_context(ctx)
        if os.path.islink(store.sessions_dir):
            return []
        prefix = incomplete or ""
        return [sid for sid in session_ids(store.sessions_dir) if sid.startswith(prefix)
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


def complete_edit_kind(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """The first word of ``memctl edit``."""
    return [k for k in EDIT_KINDS if k.startswith(incomplete or "")]


def complete_note_name(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Note names of the store (notes/*.md, symbolic links left out); reads a directory only."""
    try:
        notes_dir = os.path.join(os.fspath(store_from_context(ctx).path), "notes")
        if os.path.islink(notes_dir):
            return []
        with os.scandir(notes_dir) as it:
            names = [e.name[:-3] for e in it if e.name.endswith(".md") and not e.is_symlink()]
        return sorted(n for n in names if n.startswith(incomplete or ""))
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


def complete_log_date(ctx, args, incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Dates of the store's daily logs (daily/YYYY-MM-DD.md); reads a directory only."""
    import re

    try:
        daily = os.path.join(os.fspath(store_from_context(ctx).path), "daily")
        if os.path.islink(daily):
            return []
        with os.scandir(daily) as it:
            dates = [e.name[:-3] for e in it if re.fullmatch(r"\d{4}-\d\d-\d\d\.md", e.name)
                     and not e.is_symlink()]
        return sorted(d for d in dates if d.startswith(incomplete or ""))
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return []


#: --format values of the listings: the machine formats, then tabulate names.
LISTING_FORMAT_NAMES: tuple[str, ...] = (
    "table", "json", "jsonl", "csv", "tsv", "plain", "simple", "github", "grid", "pipe",
    "rst", "html", "latex", "mediawiki", "orgtbl", "psql")

#: validate --format values.
VALIDATE_FORMAT_NAMES: tuple[str, ...] = ("human", "json", "jsonl", "csv", "tsv", "prometheus")


def complete_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in LISTING_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_validate_format(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    return [n for n in VALIDATE_FORMAT_NAMES if n.startswith(incomplete or "")]


def complete_finding_code(incomplete):  # noqa: ANN001,ANN201 - typer inspects names
    """Finding codes for validate --ignore, then 'group.*' for whole checks."""
    try:
        from lecode_memctl.core.audit import CODES

        groups = sorted({c.split(".")[0] + ".*" for c in CODES})
        return [c for c in [*sorted(CODES), *groups] if c.startswith(incomplete or "")]
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
