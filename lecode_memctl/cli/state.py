"""Global options shared by every command (set by the app callback)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from lecode_memctl.core.config import ConfigDir
    from lecode_memctl.core.layout import Store


class State:
    """The global options of one invocation.  A plain class, not a dataclass:
    a dataclass costs about 0.5 ms to create at import, on every command's
    start-up."""

    _FIELDS = ("config_dir_option", "project", "store_option", "slug_option", "no_color",
               "color_mode", "no_state", "json_errors", "output_started", "quiet",
               "markup_table")

    def __init__(self, config_dir_option: str | None = None, project: str | None = None,
                 store_option: str | None = None, slug_option: str | None = None,
                 no_color: bool = False, color_mode: str = "auto",  # --color auto|always|never
                 no_state: bool = False, json_errors: bool = False,
                 output_started: bool = False, quiet: bool = False,
                 markup_table: bool = False) -> None:
        self.config_dir_option = config_dir_option
        self.project = project
        self.store_option = store_option
        self.slug_option = slug_option
        self.no_color = no_color
        self.color_mode = color_mode
        self.no_state = no_state
        self.json_errors = json_errors
        # the command began writing its output on stdout (a JSON document
        # may be open: an interrupt then prints no second one)
        self.output_started = output_started
        # the command's --quiet (validate): its notes on stderr are not written
        self.quiet = quiet
        # a table in a markup format (github, html, ...) was written on stdout:
        # the lines after it (counts, learning status) go to stderr
        self.markup_table = markup_table
        # value -> marker of the credentials secrets or redact found: masked
        # in any error message (main.report_error); never in repr or ==
        self.hidden_values: dict[str, str] = {}

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"State({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]  # as a dataclass with eq: unhashable

    def store_args(self) -> list[str]:
        """The global options that chose the store, their paths made
        absolute, quoted for a shell: for a command printed for the user to
        run next (``facts``' next page), which lists the same store wherever
        it is run.  With neither --project nor --store, the working directory
        chose the project: it is named as --project; and without --store the
        config directory, however it was chosen (LECODE_CONFIG_DIR,
        XDG_CONFIG_HOME, HOME), is named as --config-dir (before 2026-12-07
        left out: the command run in another environment listed another
        store).  Each value is one shell word (:func:`shell_word`)."""
        project = self.project
        config = self.config_dir_option or None
        if project is None and self.store_option is None:
            try:
                project = os.getcwd()
            except OSError:     # (deleted meanwhile: no store was found there either)
                project = None
        if config is None and self.store_option is None:
            try:
                chosen = self.config_dir()
            except Exception:  # noqa: BLE001 - (no store was found with it either)
                chosen = None
            if chosen is not None:
                config = str(chosen.path)
        return [f"{name} {shell_word(value if name == '--slug' else os.path.abspath(value))}"
                for name, value in (
                    ("--config-dir", config), ("--project", project),
                    ("--store", self.store_option), ("--slug", self.slug_option))
                if value is not None]

    def config_dir(self) -> ConfigDir:
        from lecode_memctl.core.config import resolve_config_dir

        return resolve_config_dir(self.config_dir_option)

    def listed_config_dir(self) -> ConfigDir:
        """The config directory whose every store a command lists
        (``--all-projects``, ``projects``), or whose config.toml ``config``
        shows: one named by ``--config-dir`` that does not exist is
        NotFound (exit 3), a typo, not "no stores" (before 2026-12-07 a
        cron job given a misspelt --config-dir exited 0, ok, with no store
        audited, and ``config`` showed the defaults).  A default or an
        environment variable's that does not exist is a machine where
        lecode never ran: no stores, no config file, exit 0, as before."""
        cfg = self.config_dir()
        if self.config_dir_option and not os.path.isdir(cfg.path):
            from lecode_memctl.core.errors import NotFound, UsageError

            if os.path.lexists(cfg.path):
                raise UsageError(f"--config-dir {cfg.path}: not a directory")
            raise NotFound(f"--config-dir {cfg.path}: no such directory")
        return cfg

    def state_dir(self) -> Path:
        """memctl's own state directory (``core.seen``), outside every store;
        a mark not recorded because its lock was held too long is a note on
        stderr (``seen.busy_note``: the core itself prints nothing)."""
        from lecode_memctl.core import seen

        seen.busy_note = _busy_note
        return seen.state_dir()

    def may_record_marks(self, stores: list[Store]) -> bool:
        """Whether this command records marks for ``stores``: not with
        --no-state, and not when the state directory resolves inside one of
        them (the store must not change; a note on stderr says so, once)."""
        if self.no_state:
            return False
        from lecode_memctl.core.seen import inside_store

        state = self.state_dir()
        inside = next((s for s in stores if inside_store(state, s.path)), None)
        if inside is None:
            return True
        if self.quiet:      # (--quiet: nothing on stderr but errors)
            return False
        from .output import echo, safe

        echo(safe(f"memctl: note: the state directory {state} lies inside the store "
                  f"{inside.path}: the exclusion generation seen is not recorded (as with "
                  "--no-state); set XDG_STATE_HOME outside it"), err=True)
        return False

    def record_mark(self, store: Store, generation: int, exclusions: int,
                    database: str | None, forgotten: dict[str, int] | None = None) -> None:
        """Raise the store's mark after a write memctl made (not with --no-state,
        nor into the store itself: :meth:`may_record_marks`); ``database`` is
        the identity of its facts database (``facts.database_id``),
        ``forgotten`` its forgotten ids (``facts.forgotten_ids``)."""
        if self.may_record_marks([store]):
            from lecode_memctl.core.seen import record

            # (a slug that cannot be known is not recorded: the mark keeps its own)
            record(self.state_dir(), store.path, generation, exclusions,
                   slug=store.slug_if_known(), database=database, forgotten=forgotten)

    def temp_outside(self) -> list[str]:
        """Where memctl's unnamed temporary files must not be made: the store
        named with --store and every store of the config directory (its
        ``memory`` directory), besides the stores a command fences
        (``atomic.fenced``: validate's own --store, export's, verify's
        bundle); a read makes no file in a store, not even one unlinked at
        once (docs/FORMAT.md: a ``$TMPDIR`` inside the store is passed
        over)."""
        out = [self.store_option] if self.store_option else []
        try:
            from lecode_memctl.core.layout import memory_root

            out.append(str(memory_root(self.config_dir().path)))
        except Exception:  # noqa: BLE001 - no config directory: --store's alone
            pass
        return out

    def project_dir(self) -> Path:
        """``-C PATH`` or the working directory.  NotFound (exit 3) with a plain
        message for a missing PATH or a working directory deleted meanwhile;
        a PATH that is a file stands for its directory (:func:`existing_path`)."""
        if self.project:
            return Path(existing_path("--project", self.project))
        from lecode_memctl.core.identity import working_directory

        return Path(working_directory())

    def store(self) -> Store:
        """The store the command works on: ``--store`` or the project's."""
        from lecode_memctl.core.layout import store_for_project, store_given

        if self.store_option:
            return store_given(self.store_option, self.slug_option)
        self.check_slug_option()
        return store_for_project(self.config_dir().path, self.project_dir())

    def existing_store(self) -> Store:
        """The command's store, which must exist (see :func:`require_store`)."""
        return require_store(self.store(), explain=not self.store_option)

    def check_slug_option(self) -> None:
        """``--slug`` names the slug of a ``--store`` directory; alone it means nothing."""
        if self.slug_option is not None and not self.store_option:
            from lecode_memctl.core.errors import UsageError

            raise UsageError("--slug needs --store DIR (a project's own store takes its slug "
                             "from the project root)")

    def color(self) -> bool:
        """Whether colour is allowed at all: not with --no-color, --color never
        or NO_COLOR (unless --color always)."""
        if self.no_color or self.color_mode == "never":
            return False
        return self.color_mode == "always" or not os.environ.get("NO_COLOR")

    def emit_color(self, *, stderr: bool = False) -> bool:
        """Whether to colour this output: --color always or FORCE_COLOR colour
        even in a pipe; auto colours a terminal; never what color() forbids."""
        import sys

        if not self.color():
            return False
        if self.color_mode == "always" or os.environ.get("FORCE_COLOR"):
            return True
        stream = sys.stderr if stderr else sys.stdout
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False


def require_store(store: Store, *, explain: bool = False) -> Store:
    """``store`` if its directory exists.  Every command that needs a store
    says the same when there is none: NotFound (exit 3), "no memory store for
    <project> (expected at <dir>)"; a symbolic link is refused (exit 5).
    ``explain`` adds the hint that 'memctl where' explains the lookup (not
    when the store was named with --store)."""
    from lecode_memctl.core.errors import NotFound

    try:
        return store.require()
    except NotFound as exc:
        if not explain or os.path.lexists(store.path):
            raise
        hint = "'memctl where' explains the lookup"
        namesakes = _namesakes(store)
        if namesakes:
            # (a checkout moved or renamed: its old store is under another
            # slug, the same name; before 2026-12-07 nothing pointed at it)
            shown = (", ".join(str(store.path.parent / n) for n in namesakes[:3])
                     + (f" (and {len(namesakes) - 3} more)" if len(namesakes) > 3 else ""))
            hint += (f"; a project of the same name has a store: {shown}: a moved "
                     "checkout's? (--store DIR works on it)")
        raise NotFound(exc.message, hint=hint) from None


def _namesakes(store: Store) -> list[str]:
    """The other slug-shaped stores beside ``store`` whose name part (the
    slug before its hash) is the same: the store of a checkout that was
    moved or renamed is one.  Nothing when the directory cannot be listed."""
    from lecode_memctl.core.layout import looks_like_slug

    name = store.slug.rpartition("-")[0] if isinstance(store.slug, str) else ""
    if not name:
        return []
    try:
        entries = sorted(os.listdir(store.path.parent))
    except OSError:
        return []
    parent = store.path.parent
    # (real directories only: --store refuses a link or a file in a store's place)
    return [e for e in entries if e != store.path.name and e.rpartition("-")[0] == name
            and looks_like_slug(e) and os.path.isdir(parent / e)
            and not os.path.islink(parent / e)]


def stdin_is_tty() -> bool:
    """Whether standard input is a terminal a prompt may read: not when
    memctl was started with it closed (``<&-``: ``sys.stdin`` is None) or
    it cannot say."""
    import sys

    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def path_option(option: str, value: str | None) -> str | None:
    """A path option's value: None when not given; an empty path is a usage
    error (it is not the working directory, as ``Path("")`` would make it)."""
    if value is None:
        return None
    if value == "":
        from lecode_memctl.core.errors import UsageError

        raise UsageError(f"{option} needs a path; it was given an empty one")
    return value


def shell_word(value: str) -> str:
    """``value`` as one word a POSIX shell (bash, zsh) reads back to the same
    bytes, on one line and printable: ``shlex.quote`` when it is printable
    text; else bash's ANSI-C quoting, ``$'...'``, each byte that is not
    printable ASCII (a control character, a newline, a byte of a name that
    is not UTF-8, any non-ASCII character beside them) written ``\\xHH``
    (before 2026-12-07 a hint printed such a path raw: an escape sequence
    reached the terminal, a newline split the command, and an undecodable
    byte became text naming another directory)."""
    import shlex

    if value.isprintable():     # (a lone surrogate, an undecodable byte, is not)
        return shlex.quote(value)
    out = []
    for b in os.fsencode(value):
        ch = chr(b)
        if ch in "\\'":
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\x{b:02x}")
    return "$'" + "".join(out) + "'"


def existing_path(option: str, value: str) -> str:
    """A project path given as ``option`` (``--project``, ``where``'s PATH):
    an empty one is a usage error (:func:`path_option`); a missing one is
    NotFound (exit 3), never a project made up for it; a file that is not a
    directory stands for the directory that holds it, so the project is
    the one that contains it (before 2026-12-07 the file itself was taken
    as the project root outside a Git checkout: ``--project /etc/passwd``
    gave the root ``/etc/passwd``)."""
    from lecode_memctl.core.errors import NotFound

    path_option(option, value)
    if not os.path.exists(value):
        raise NotFound(f"{option} {value}: no such directory")
    if not os.path.isdir(value):
        return os.path.dirname(os.path.abspath(value))
    return value


def output_file(value: str | None, stores: Sequence[Store], *, command: str,
                config_dir: Path | None = None) -> Path | None:
    """The ``--output FILE`` of ``validate`` and ``secrets``, checked before
    any work (one rule for both; docs/FORMAT.md): None when not given or
    "-" (stdout, as for ``export --output -``); an
    empty path is a usage error (:func:`path_option`); so is a FILE inside
    one of the ``stores`` audited, or with ``config_dir`` (--all-projects)
    inside its ``memory/`` (``atomic.refuse_inside``, export's check: a
    read command writes nothing in a store); and then what FILE itself may
    be (:func:`_check_output_target`)."""
    value = path_option("--output", value)
    if value is None or value == "-":   # "-": stdout, as for export's --output
        return None
    from lecode_memctl.core.atomic import refuse_inside

    fences: list[tuple[str | Path, str]] = [(st.path, f"the store {st.path}") for st in stores]
    if config_dir is not None:
        from lecode_memctl.core.layout import memory_root

        root = memory_root(config_dir)
        fences.append((root, f"{root}, the directory of the stores"))
    refuse_inside(value, fences, command=command)
    _check_output_target(value)
    return Path(value)


def _check_output_target(value: str) -> None:
    """What ``--output FILE`` may name, as the report is written (a new file
    renamed over FILE): a regular file, or a new name in a directory that
    exists.  A symbolic link is a usage error (the rename would replace the
    link, not what it points to: give the file itself), and so is a
    directory or another kind of file (a device, a FIFO).  A name that
    cannot be looked up (too long, a missing or unsearchable directory) is
    exit 7, "cannot write"; a missing directory is never created."""
    import stat

    from lecode_memctl.core.atomic import file_kind
    from lecode_memctl.core.errors import StoreWriteError, UsageError

    try:
        st = os.lstat(value)
    except FileNotFoundError:
        parent = os.path.dirname(value) or "."
        if not os.path.isdir(parent):
            raise StoreWriteError(f"--output {value}: cannot write: no such directory "
                                  f"{parent}") from None
        return
    except OSError as exc:
        raise StoreWriteError(f"--output {value}: cannot write: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"--output {value}: is a symbolic link; give the file itself (the "
                         "report is renamed over FILE, which would replace the link, not "
                         "what it points to)")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--output {value}: is {file_kind(st.st_mode)}; give a regular file "
                         "or a new name")


STATE = State()


def reset() -> None:
    """Fresh global state (each in-process invocation, e.g. in tests)."""
    global STATE
    STATE.__dict__.update(State().__dict__)


def _busy_note(message: str) -> None:
    """``core.seen``'s word that a mark was not recorded, as a note on stderr
    (none with --quiet, which prints nothing but errors)."""
    if STATE.quiet:
        return
    from .output import echo, safe

    echo(safe(f"memctl: note: {message}"), err=True)
