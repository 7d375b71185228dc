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
