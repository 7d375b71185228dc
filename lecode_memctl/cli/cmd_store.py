"""``memctl where`` and ``memctl config``: finding a store and its settings."""


from typing import Annotated

import typer

from .completion import complete_record_type, complete_shell
from .options import FormatOpt, JsonOpt
from .registry import command
from .state import STATE, existing_path


@command(epilog="""\
\b
Examples:
  memctl where                 the store of the current directory's project
  memctl where ~/src/app/lib   the store of another project
  memctl where --json | jq -r .store
""")
def where(
    path: Annotated[str | None, typer.Argument(  # str: "" is refused, not "." (Path(""))
        metavar="PATH", help="A directory (or a file) inside the project (default: --project or the "
        "current directory).",
        show_default=False)] = None,
    json_: JsonOpt = False,
) -> None:
    """Show which project a directory belongs to and where its memory store is.

    Prints the project root and how it was found (main checkout, linked
    worktree of another checkout, submodule, or not a git checkout), the slug,
    the store path, and which layout items exist with their sizes; then the
    directory's legacy store, when there is one (<config
    dir>/memory/<slug of the directory itself>/, which older lecode versions
    kept: 'memctl migrate-legacy' copies it).  Linked worktrees of one
    repository share one store, except those of a repository made with git's
    --separate-git-dir, of a main checkout moved without 'git worktree
    repair', or of one whose .git is a symbolic link (see docs/FORMAT.md,
    "Locating a store").  Creates nothing.

    With --store DIR, says where the slug that its transcripts must name came
    from: --slug, the directory name of a store in a config directory's
    memory/ (<config dir>/memory/<slug>/), the transcript headers (when they
    agree, or the project most of them name), or the directory name; the
    slug is unknown when its sessions/ cannot be listed.  --json adds slug_source (project, option,
    headers, directory, unreadable) and slug_detail; its legacy_store is null then.
    """
    from lecode_memctl.core.identity import resolve_project
    from lecode_memctl.core.inventory import inventory, store_state
    from lecode_memctl.core.layout import Store, existing_legacy_store, memory_root
    from lecode_memctl.core.rowmodel import doc_head

    from .output import echo, emit_json, safe

    cfg = STATE.config_dir()
    if STATE.store_option and path is None:
        store = STATE.store()
        ident = None
    else:
        STATE.check_slug_option()
        ident = resolve_project(existing_path("PATH", path) if path is not None
                                else STATE.project_dir())
        store = Store(memory_root(cfg.path) / ident.slug, ident.slug, ident, "project",
                      "the project root")
    exists, unusable = store_state(store)
    # (nothing below a store directory that is none is read: a link's target
    # is not the store)
    items = inventory(store) if exists and unusable is None else []
    # the working directory's legacy (cwd-scoped) store, when there is one:
    # one lstat (docs/FORMAT.md lists it among what 'where' prints; before
    # 2026-12-07 it was not shown)
    legacy = existing_legacy_store(cfg.path, ident.cwd, store.path) if ident else None
    doc = {
        **doc_head("where"),
        "cwd": str(ident.cwd) if ident else None,
        "root": str(ident.root) if ident else None,
        "kind": ident.kind if ident else "store given with --store",
        "resolved_as": ident.detail if ident else "store given with --store",
        "checkout": str(ident.checkout) if ident else None,
        "slug": store.slug_if_known(),
        "slug_source": store.slug_source,
        "slug_detail": store.slug_detail,
        "config_dir": str(cfg.path),
        "config_dir_source": cfg.source,
        "store": str(store.path),
        "store_exists": exists,
        "store_error": unusable,
        "items": [{"name": i.name, "kind": i.kind, "exists": i.exists, "size": i.size,
                   "count": i.count, "error": i.error} for i in items],
        "legacy_store": str(legacy.path) if legacy is not None else None,
    }
    if json_:
        emit_json(doc)
        return
    if ident:
        echo(f"project root:  {safe(str(ident.root))}")
        echo(f"resolved as:   {safe(ident.detail)}")
        if ident.checkout != ident.root:
            echo(f"checkout:      {safe(str(ident.checkout))}")
    if store.slug_source == "unreadable":
        echo(f"slug:          unknown  ({safe(store.slug_detail)})")
    else:
        echo(f"slug:          {safe(store.slug)}"
             + ("" if ident else f"  (from {safe(store.slug_detail)})"))
    echo(f"config dir:    {safe(str(cfg.path))} (from {cfg.source})")
    echo(f"store:         {safe(str(store.path))}"
         + ("  (does not exist yet)" if not exists
            else f"  ({safe(unusable)})" if unusable is not None else ""))
    if exists:
        for i in items:
            if not i.exists:
                echo(f"  {i.name:<15} -")
            elif i.error is not None:
                echo(f"  {i.name:<15} {safe(i.error)}")
            elif i.kind == "dir":
                echo(f"  {i.name:<15} {i.count} file{'s' if i.count != 1 else ''}, {i.size} bytes")
            else:
                echo(f"  {i.name:<15} {i.size} bytes")
    if legacy is not None:
        echo(f"legacy store:  {safe(str(legacy.path))}  "
             "(memory older lecode kept for this directory; 'memctl migrate-legacy' copies it)")


@command(epilog="""\
\b
Examples:
  memctl config
  memctl config --json | jq .facts_max_bytes.value
""")
def config(json_: JsonOpt = False, fmt: FormatOpt = None) -> None:
    """Show the effective [memory] settings and where each came from.

    Reads <config dir>/config.toml.  Keys: enabled (default true), max_bytes
    (32768, the whole memory section, valid 0..2147483647), auto_learn
    (false), facts_max_bytes (8192, valid 0..65536).  An out-of-range or
    mistyped value is an error naming the key (exit 2), as is a config.toml
    larger than 1 MiB.  --json prints one object (the config dir and
    file, each key as {value, default, source}, and "settings": the rows);
    jsonl, csv and tsv give the setting rows {type, key, value, default,
    source}.  A key of [memory] that is none of these (max_byte), or a
    table spelled [Memory], is ignored, with a note on stderr.  A config
    dir named on the command line that does not exist is exit 3 (a typo,
    not the defaults), one that is not a directory exit 2; one the
    environment or the default names that does not exist has no file:
    the defaults.
    """
    from lecode_memctl.core.config import MEMORY_KEYS
    from lecode_memctl.core.memory_config import load_memory_config
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION, SETTING

    from .output import check_format, echo, emit_json, render_records, safe

    fmt_name = check_format(fmt, json_flag=json_)
    # (a --config-dir that does not exist is a typo: exit 3, not the
    # defaults, exit 0, as before 2026-12-07)
    cfg_dir = STATE.listed_config_dir()
    mc = load_memory_config(cfg_dir.path)
    for name in mc.unknown:
        what = (f"table {name} is not [memory] (TOML names are case-sensitive)"
                if name.startswith("[") else
                f"key {name} is none of memory.{', memory.'.join(MEMORY_KEYS)}")
        echo(f"memctl: note: {safe(str(mc.path))}: "
             f"{safe(what)}; ignored", err=True)
    rows = [SETTING.row(key=f"memory.{s.key}", value=s.value, default=s.default, source=s.source)
            for s in mc.settings]
    if fmt_name == "json":
        emit_json({
            "type": "config", "schema_version": SCHEMA_VERSION,
            "config_dir": str(cfg_dir.path), "config_dir_source": cfg_dir.source,
            "config_file": str(cfg_dir.path / "config.toml"),
            "config_file_exists": mc.path is not None,
            **{s.key: {"value": s.value, "default": s.default, "source": s.source}
               for s in mc.settings},
            "settings": rows})
        return
    render_records(SETTING, rows, fmt_name)


# ---------------------------------------------------------------- installed files
# The man page and the completion scripts ship inside the package
# (lecode_memctl/share/, written by scripts/gen_docs.py), so a pip-installed
# memctl can print them.

SHELL_FILES = {"bash": "memctl.bash", "zsh": "_memctl", "fish": "memctl.fish"}


def _share(name: str) -> bytes:
    from importlib import resources

    from lecode_memctl.core.errors import NotFound

    try:
        return resources.files("lecode_memctl").joinpath("share", name).read_bytes()
    except (FileNotFoundError, OSError):
        raise NotFound(f"{name} is not installed with this memctl "
                       "(lecode_memctl/share/ is missing)") from None


@command(epilog="""\
\b
Examples:
  mkdir -p ~/.local/share/bash-completion/completions
  memctl completion bash > ~/.local/share/bash-completion/completions/memctl
  mkdir -p ~/.config/fish/completions
  memctl completion fish > ~/.config/fish/completions/memctl.fish
  mkdir -p ~/.zsh && memctl completion zsh > ~/.zsh/_memctl
                    then in ~/.zshrc: autoload -Uz compinit; compinit; source ~/.zsh/_memctl
  eval "$(memctl completion bash)"              this shell only
""")
def completion(
    shell: Annotated[str, typer.Argument(
        metavar="SHELL", help="bash, zsh or fish.", autocompletion=complete_shell,
        show_default=False)],
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    The script asks memctl itself for candidates (commands, options,
    --format values, fact and session ids, note names, log dates, finding
    codes for --ignore), so memctl must be on your PATH.  Save it where your
    shell loads completions (see the examples); nothing is installed for
    you.
    """
    from lecode_memctl.core.errors import UsageError

    from .output import write_bytes

    if shell not in SHELL_FILES:
        raise UsageError(f"unknown shell {shell!r}; use bash, zsh or fish")
    write_bytes(_share(SHELL_FILES[shell]))


@command(epilog="""\
\b
Examples:
  memctl man | man -l -             read it
  mkdir -p ~/.local/share/man/man1
  memctl man > ~/.local/share/man/man1/memctl.1
""")
def man_page() -> None:
    """Print the manual page (roff) that 'man memctl' shows.

    A pip-installed memctl carries the page inside its package: read it
    with 'memctl man | man -l -', or save it as memctl.1 in a man1
    directory on your MANPATH (for example ~/.local/share/man/man1/).
    """
    from .output import write_bytes

    write_bytes(_share("memctl.1"))


@command(epilog="""\
\b
Examples:
  memctl schema | jq .schema_version        check it in a script
  memctl schema fact                        the JSON Schema of a facts row
""")
def schema(
    record: Annotated[str | None, typer.Argument(
        metavar="TYPE", help="Only this record type (fact, session, finding, ...).",
        autocompletion=complete_record_type,
        show_default=False)] = None,
) -> None:
    """Print the output schema: its version and the JSON Schema of every record.

    Every listing is built from one row model: the JSON field names, the
    JSONL keys and the CSV/TSV headers are the same, and each record carries
    a "type".  This prints {"schema_version": N, "records": {TYPE:
    {"command", "schema"}}} (or, with TYPE, that record's JSON Schema:
    TYPE is a row's "type", so 'total', usage's last row, gives the purpose
    record's).
    schema_version changes whenever a field is renamed, removed or changes
    meaning; docs/OUTPUT.md lists the fields and the changes.
    """
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.rowmodel import schema_document

    from .output import emit_json

    doc = schema_document()
    if record is None:
        emit_json(doc)
        return
    records = doc["records"]
    # (a row's "type" names its record, or is one of the types a record
    # allows: usage's "total" row is a purpose record)
    named = record if record in records else next(
        (name for name, r in records.items()
         if record in r["schema"].get("properties", {}).get("type", {}).get("enum", ())), None)
    if named is None:
        raise UsageError(f"unknown record type {record!r}; use one of "
                         f"{', '.join(sorted(records))} (or a row's type such as total)")
    emit_json(records[named]["schema"])
