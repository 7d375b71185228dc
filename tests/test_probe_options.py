"""Options and arguments given hostile values: each case pins a bug a probe of
every command's options found (empty strings, missing paths, odd bytes,
numbers out of range...), fixed since.  The rest of the probe found nothing:
tests/test_bad_input.py and tests/test_empty_path_options.py hold the corpus."""

from __future__ import annotations

import pytest

from .builders import copy_demo
from .conftest import run_cli, tree_hash


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memctl: error: "), stderr
    return lines[0]


def test_where_an_empty_path_is_a_usage_error(tmp_path, monkeypatch, config_dir):
    """``memctl where ""`` described the working directory's project (typer
    made Path("") of it, which is "."), exit 0, where ``-C ""`` is exit 2."""
    monkeypatch.chdir(tmp_path)
    r = run_cli("where", "")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "empty" in _one_error_line(r.stderr)
    r = run_cli("where", "--json", "")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)


def test_where_a_missing_path_is_not_found(tmp_path, config_dir):
    """``memctl where /no/such`` printed a project root and a store for a
    directory that does not exist, exit 0, where ``-C /no/such where`` says
    "no such directory" (exit 3)."""
    missing = tmp_path / "no" / "such"
    r = run_cli("where", str(missing))
    assert r.exit_code == 3, (r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert str(missing) in line and "no such directory" in line, line
    assert not (config_dir / "memory").exists()
    r = run_cli("where", str(tmp_path))          # an existing one still works
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("args", [
    ["verify", ""],                      # verified the working directory as a bundle: exit 1
    ["demo", "--into", ""],              # built the demo in the working directory
    ["projects", "--root", ""],          # took the working directory as a project
    ["projects", "--root", "/", "--root", ""],
    ["secrets", "--allowlist", ""],      # ".: cannot read the allowlist: Is a directory"
    ["--store", "{store}", "redact", "--dry-run", "--allowlist", ""],
])
def test_an_empty_path_is_a_usage_error_not_the_working_directory(args, tmp_path, monkeypatch,
                                                                   config_dir):
    """typer makes Path("") of an empty PATH, which is "."; a path option or
    argument given "" is refused, as --project and --output are."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "store").mkdir()
    monkeypatch.chdir(work)
    r = run_cli(*(a.replace("{store}", str(tmp_path / "store")) for a in args))
    assert r.exit_code == 2, (args, r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert "empty" in line, line
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("command", [("facts",), ("sessions",), ("usage",), ("grep", "tabs")],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("option", ["--since", "--until"])
def test_an_empty_time_is_a_usage_error_not_no_filter(demo_template, command, option):
    """``--since=`` was taken as no filter at all (the value was tested for
    truth), where an empty ``--query`` or ``--session`` is a usage error."""
    r = run_cli("--store", str(demo_template.store.path), "--no-state", *command, f"{option}=")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert f"{option} ''" in line and "7d" in line, line
    assert r.stdout == ""


def _bounded() -> None:  # the child of a subprocess run: at most 1 GiB of memory
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _run_on(kind: str, tmp_path, store, *args: str) -> str:
    """memctl ``--store STORE ARGS PATH`` as a real process, bounded in time
    and memory, PATH a new FIFO for ``kind`` "fifo", else ``kind`` itself;
    exit 2 with one error line, the store unchanged: that line."""
    import os
    import subprocess
    import sys

    before = tree_hash(store)
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store), *args, path],
                       capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                       preexec_fn=_bounded)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert tree_hash(store) == before
    return _one_error_line(p.stderr.decode())


@pytest.mark.parametrize("kind", ["/dev/full", "/dev/zero"])
@pytest.mark.parametrize("command", [["secrets"], ["redact", "--dry-run"]])
def test_an_allowlist_that_is_not_a_regular_file_is_refused_at_once(kind, command, tmp_path,
                                                                     demo_template):
    """``--allowlist /dev/full`` (or /dev/zero) read zeros until memory ran
    out: the allowlist
    is read as every other file memctl reads, a regular file (or a link to
    one) opened without blocking.  (A real process, bounded in time and
    memory: the bug hangs or eats memory.)"""
    store = copy_demo(demo_template, tmp_path / "demo")
    line = _run_on(kind, tmp_path, store, *command, "--allowlist")
    assert "not a regular file" in line and "allowlist" in line, line


def test_an_allowlist_from_a_pipe_is_read_and_one_with_no_writer_waits_for_none(tmp_path):
    """``--allowlist <(...)`` (a pipe its writer fills: process substitution
    gives ``/dev/fd/N``) is read to its end; a FIFO no process writes is
    empty at once, never waited on (``--allowlist FIFO`` waited forever;
    then, for a while, a pipe was refused, and process substitution with
    it).  At most ALLOWLIST_MOST bytes are read."""
    import os
    import threading
    import time

    from lecode_memctl.core import secrets
    from lecode_memctl.core.errors import UsageError

    def piped(data: bytes) -> tuple[int, threading.Thread]:
        r, w = os.pipe()

        def write() -> None:
            time.sleep(0.2)             # (the reader waits for what comes)
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(w, view):]
            except BrokenPipeError:
                pass                    # (the reader stopped at its bound)
            finally:
                os.close(w)

        t = threading.Thread(target=write)
        t.start()
        return r, t

    digest = "ab" * 32
    r, t = piped(f"# known\nsha256:{digest}\n".encode())
    assert secrets.load_allowlist(f"/dev/fd/{r}") == frozenset({digest})
    os.close(r)
    t.join()
    r, t = piped(b"#" * (secrets.ALLOWLIST_MOST + 1))
    with pytest.raises(UsageError, match="more than"):
        secrets.load_allowlist(f"/dev/fd/{r}")
    os.close(r)             # (the writer's next write fails: it ends)
    t.join()
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    started = time.monotonic()
    assert secrets.load_allowlist(fifo) == frozenset()      # no writer: empty, at once
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", ""])
def test_correct_text_file_that_is_not_a_regular_file_is_refused_at_once(kind, tmp_path,
                                                                          demo_template):
    """``correct --text-file FIFO`` waited forever for a writer, ``--text-file
    /dev/zero`` read until memory ran out (exit 70), and ``--text-file ""``
    said ": cannot read: Is a directory" (Path("") is "."): FILE is read as
    a regular file (or a link to one) or a pipe, a FIFO no process writes
    as empty at once, an empty path is refused; nothing is written."""
    store = copy_demo(demo_template, tmp_path / "demo")
    line = _run_on(kind, tmp_path, store, "correct", demo_template.facts["preference"], "2",
                   "demo-alpha", "1", "1", "--text-file")
    # (a FIFO no process writes is an empty text at once: "fact text is empty")
    assert ("empty" if kind in ("", "fifo") else "not a regular file") in line, line


@pytest.mark.parametrize("name", ["aws-acess-key", "AWS Access Key", "", "*"])
def test_redact_an_unknown_detector_is_a_usage_error(name, tmp_path, demo_template):
    """``redact --detector aws-acess-key`` (a typo) picked nothing and said
    "nothing to do", exit 0: a script believed the key erased.  A name no
    detector has is refused (exit 2) with the names there are."""
    store = copy_demo(demo_template, tmp_path / "demo")
    before = tree_hash(store)
    r = run_cli("--store", str(store), "redact", "--dry-run", "--detector", "private-key",
                "--detector", name)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert "--detector" in line and "aws-access-key" in line, line
    r = run_cli("--store", str(store), "redact", "--dry-run", "--detector", "aws-access-key")
    assert r.exit_code == 0, r.stderr
    assert tree_hash(store) == before


@pytest.mark.parametrize(("command", "bad", "good"), [
    ("notes", "--size", "-size"), ("notes", "---name", "-name"),
    ("sessions", "--created", "-created"), ("projects", "--size", "-size")])
def test_sort_takes_one_minus_only(command, bad, good, demo_template):
    """``--sort --size`` (two dashes, as if SIZE were an option) was taken as
    ``-size``, descending: every leading dash was stripped.  One dash means
    descending; more is not a key."""
    where = ("--config-dir", str(demo_template.config_dir), "-C", str(demo_template.project))
    r = run_cli(*where, command, f"--sort={bad}")
    assert r.exit_code == 2, (bad, r.exit_code, r.stdout, r.stderr)
    assert "--sort" in _one_error_line(r.stderr)
    r = run_cli(*where, command, f"--sort={good}")
    assert r.exit_code == 0, (good, r.stderr)


@pytest.mark.parametrize("extra", [["--sort", "bogus"], ["--sort", "size"], ["--offset", "5"],
                                   ["--limit", "1"]])
def test_notes_name_refuses_the_listing_options(extra, demo_template):
    """``notes NAME --sort bogus`` printed the note, exit 0: --sort, --offset
    and --limit were ignored with NAME (even a --sort no listing takes),
    where --format is refused there ("applies to the listing")."""
    where = ("--config-dir", str(demo_template.config_dir), "-C", str(demo_template.project))
    r = run_cli(*where, "notes", "release", *extra)
    assert r.exit_code == 2, (extra, r.exit_code, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
    assert extra[0] in line and "listing" in line, line
    assert run_cli(*where, "notes", *extra).exit_code == (2 if extra[1] == "bogus" else 0)


@pytest.mark.parametrize(("kind", "status"), [("dangling link", 4), ("under a file", 7),
                                              ("name too long", 7)])
def test_demo_into_that_cannot_be_made_is_not_store_unreadable(kind, status, tmp_path,
                                                               config_dir):
    """``demo --into`` a dangling symbolic link said "File exists", and a DIR
    under a regular file or with a name over 255 bytes "Not a directory" or
    "File name too long", each with exit 5, "store unreadable", which no store
    was: a DIR that exists (a link to nowhere included) is exit 4 as for any
    other, one that cannot be made is a write failure (exit 7)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "file").write_text("x")
    into = {"dangling link": work / "link", "under a file": work / "file" / "demo",
            "name too long": work / ("d" * 300)}[kind]
    if kind == "dangling link":
        into.symlink_to(work / "nowhere")
    r = run_cli("demo", "--into", str(into))
    assert r.exit_code == status, (r.exit_code, r.stderr)
    assert "--into" in _one_error_line(r.stderr)
    assert sorted(p.name for p in work.iterdir()) == sorted(
        ["file"] + (["link"] if kind == "dangling link" else []))


def test_slug_after_the_command_as_the_readme_says(tmp_path):
    """README: every global option but --version "may also follow the command
    name"; ``memctl where --store DIR --slug SLUG`` said "No such option:
    --slug", though --store was accepted there."""
    import orjson

    store = tmp_path / "copy"
    store.mkdir()
    r = run_cli("where", "--json", "--store", str(store), "--slug", "demo-0123456789ab")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["slug"] == "demo-0123456789ab" and doc["slug_source"] == "option"
    # after the command it wins over the one before, as for the others
    r = run_cli("--store", str(store), "--slug", "demo-aaaaaaaaaaaa", "where", "--json",
                "--slug", "demo-0123456789ab")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout_bytes)["slug"] == "demo-0123456789ab"
    r = run_cli("facts", "--slug", "demo-0123456789ab")   # alone it still means nothing
    assert r.exit_code == 2 and "--slug needs --store" in _one_error_line(r.stderr)


@pytest.mark.parametrize("command", [["validate"], ["validate", "--format", "prometheus"],
                                     ["secrets"], ["secrets", "--format", "jsonl"]])
def test_output_dash_is_stdout_as_for_export(command, tmp_path, monkeypatch, demo_template):
    """``validate --output -`` (and secrets') wrote the report to a file named
    "-" in the working directory, and stdout stayed empty; ``export --output
    -`` and ``correct --text-file -`` take "-" as stdout and stdin.  "-" is
    stdout here too: the same report as without --output, no file made."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    store = copy_demo(demo_template, tmp_path / "demo")
    plain = run_cli("--store", str(store), *command)
    dash = run_cli("--store", str(store), *command, "--output", "-")
    assert dash.exit_code == plain.exit_code, dash.stderr
    assert list(work.iterdir()) == []
    assert _untimed(dash.stdout) == _untimed(plain.stdout) != ""


def _untimed(text: str) -> str:
    """A report without the lines that hold the time of its run."""
    return "\n".join(line for line in text.splitlines()
                     if not any(w in line for w in ("timestamp", "generated", "duration",
                                                    "_seconds")))


def test_memctl_alone_prints_the_help_readably():
    """``memctl`` with no arguments (no_args_is_help) squeezed the whole help
    into one "memctl: error: Usage: ... Options: ... Commands: ..." line of
    several kilobytes on stderr.  It prints the help as --help does, on
    stderr, with the usage status (2: a script that lost its command word
    still fails)."""
    r = run_cli()
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stdout == ""
    assert r.stderr == run_cli("--help").stdout
    assert "memctl: error:" not in r.stderr


@pytest.mark.parametrize("env", [
    {"COMP_WORDS": "memctl facts --", "COMP_CWORD": "abc"},
    {"COMP_WORDS": "memctl facts --", "COMP_CWORD": ""},
    {"COMP_WORDS": "memctl facts --", "COMP_CWORD": "1e3"},
    {"COMP_WORDS": None, "COMP_CWORD": "2"},
    {"COMP_WORDS": "memctl facts --", "COMP_CWORD": None},
])
def test_a_malformed_bash_completion_request_is_a_usage_error(env):
    """A bash completion request (_MEMCTL_COMPLETE=complete_bash) whose
    COMP_CWORD is not an integer, or without COMP_WORDS or COMP_CWORD, went
    from the fast path to typer's, which crashed on it: exit 70, "internal
    error: ValueError: invalid literal for int()" or "KeyError: 'COMP_WORDS'".
    It is refused in one line, exit 2, nothing on stdout."""
    r = run_cli(env={"_MEMCTL_COMPLETE": "complete_bash", **env})
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "COMP_" in _one_error_line(r.stderr)
    assert r.stdout == ""


def _stdin_closed() -> None:  # the child of a subprocess run: started with fd 0 closed
    import os

    os.close(0)


def _run_stdin_closed(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "lecode_memctl", *args], capture_output=True,
                          timeout=60, preexec_fn=_stdin_closed)


def test_a_closed_stdin_is_not_a_terminal_nor_a_crash(tmp_path, demo_template):
    """Started with stdin closed (``memctl ... <&-``), Python leaves
    sys.stdin None: ``forget ID`` (without --yes) crashed on its isatty()
    and ``correct ... --text-file -`` on its .buffer, exit 70.  forget
    refuses as for any stdin that is not a terminal (exit 2), and correct
    says that stdin is closed (exit 2); nothing is written."""
    from . import secretstore

    store = copy_demo(demo_template, tmp_path / "demo")
    before = tree_hash(store)
    fid = demo_template.facts["preference"]
    p = _run_stdin_closed("--store", str(store), "forget", fid)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "not a terminal" in _one_error_line(p.stderr.decode())
    p = _run_stdin_closed("--store", str(store), "correct", fid, "2", "demo-alpha", "1", "1",
                          "--text-file", "-")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "closed" in _one_error_line(p.stderr.decode())
    assert tree_hash(store) == before
    planted = secretstore.build(tmp_path / "secrets")
    before = tree_hash(planted.store)
    p = _run_stdin_closed("--store", str(planted.store), "redact")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "not a terminal" in _one_error_line(p.stderr.decode())
    assert tree_hash(planted.store) == before


def _stderr_closed() -> None:  # the child of a subprocess run: started with fd 2 closed
    import os

    os.close(2)


def test_a_closed_stderr_drops_the_diagnostics_not_the_command(tmp_path, demo_template):
    """Started with stderr closed (``memctl export 2>&- > FILE``), Python
    leaves sys.stderr None: export wrote the whole bundle, then crashed on
    its summary line for stderr, exit 70.  What goes to a closed stderr is
    dropped (as click.echo drops it) and the command ends as it would."""
    import subprocess
    import sys

    store = copy_demo(demo_template, tmp_path / "demo")
    bundle = tmp_path / "bundle.tar"
    with bundle.open("wb") as out:
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                            "export"], stdout=out, stderr=subprocess.DEVNULL, timeout=60,
                           preexec_fn=_stderr_closed)
    assert p.returncode == 0, p.returncode
    assert run_cli("verify", str(bundle)).exit_code == 0
    p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                        "recall", "0123456789abcdef"], capture_output=True, timeout=60,
                       preexec_fn=_stderr_closed)
    assert p.returncode == 3, p.returncode        # an error: its status, its line lost


@pytest.mark.parametrize("how", ["option", "XDG_CONFIG_HOME"])
def test_a_config_dir_that_is_a_file_has_no_config_file(how, tmp_path, monkeypatch, config_dir):
    """``memctl --config-dir FILE config`` (or $XDG_CONFIG_HOME a file) said
    "FILE/config.toml: cannot read: Not a directory", exit 5, "store
    unreadable", where every other command finds no store there (exit 3):
    a config.toml under a file does not exist, and the defaults are shown
    as for a config dir that does not exist.  Since 2026-12-07 a
    --config-dir FILE given on the command line is exit 2, "not a
    directory", as for projects (tests/test_config_history_1207.py)."""
    import orjson

    afile = tmp_path / "afile"
    afile.write_text("x")
    if how == "option":
        args: tuple[str, ...] = ("--config-dir", str(afile))
        r = run_cli(*args, "config", "--json")
        assert r.exit_code == 2, (r.exit_code, r.stderr)
        assert orjson.loads(r.stdout_bytes)["error"]["message"].endswith(": not a directory")
        assert run_cli(*args, "facts").exit_code == 3
        return
    monkeypatch.delenv("LECODE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(afile))
    args = ()
    r = run_cli(*args, "config", "--json")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    assert doc["config_file_exists"] is False and doc["max_bytes"]["source"] == "default"
    assert run_cli(*args, "facts").exit_code == 3


def test_allowlist_dev_null_is_an_empty_allowlist(tmp_path, demo_template):
    """/dev/null is the one device an --allowlist may be: the way to audit
    without the default allowlist, as it read before devices were refused."""
    store = copy_demo(demo_template, tmp_path / "demo")
    r = run_cli("--store", str(store), "secrets", "--allowlist", "/dev/null")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize(("raw", "escaped", "live"), [("unsafehtml", "html", "<script>"),
                                                      ("latex_raw", "latex", "\\input{")])
def test_a_table_format_that_escapes_nothing_is_refused(raw, escaped, live, tmp_path):
    """``--format unsafehtml`` (and ``latex_raw``), tabulate formats that
    write each cell as it is, put a transcript's or a note's text into HTML
    (LaTeX) as live markup: a ``<script>`` in a fact's text ran where the
    table was shown.  Refused, naming the escaping format."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(tmp_path / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1") as w:
        w.append_message("user", "<script>alert(1)</script> \\input{/etc/passwd}")
    ref = SourceRef("s1", (1,), canonical_digest(sessions.records("s1", 1, 1)))
    facts.add("<script>alert(1)</script> \\input{/etc/passwd}", ref=ref)
    facts.close()
    r = run_cli("--store", str(st.path), "facts", "--format", raw)
    assert r.exit_code == 2, (r.exit_code, r.stdout)
    line = _one_error_line(r.stderr)
    assert raw in line and escaped in line, line
    r = run_cli("--store", str(st.path), "facts", "--format", escaped)
    assert r.exit_code == 0, r.stderr
    assert live not in r.stdout and "alert(1)" in r.stdout


@pytest.mark.heavy      # (reads up to its 1 GiB bound from /dev/zero)
def test_correct_text_from_an_endless_stdin_is_refused_not_a_crash(tmp_path, demo_template):
    """``correct ... --text-file - < /dev/zero`` read standard input without
    end and ran out of memory: exit 70.  It reads at most one byte more than
    SQLite stores in one text, and says what is wrong (exit 2); nothing is
    written.  (A real process under a 1 GiB bound.)"""
    import subprocess
    import sys

    store = copy_demo(demo_template, tmp_path / "demo")
    before = tree_hash(store)
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store),
                            "correct", demo_template.facts["preference"], "2", "demo-alpha", "1",
                            "1", "--text-file", "-", "--yes"],
                           capture_output=True, timeout=60, stdin=zero, preexec_fn=_bounded)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    line = _one_error_line(p.stderr.decode())
    assert line.startswith("memctl: error: -: ") and ("memory" in line or "SQLite" in line), line
    assert tree_hash(store) == before


def test_correct_text_file_from_a_pipe(tmp_path, demo_template):
    """``correct ... --text-file <(printf ...)`` (a pipe, as process
    substitution gives it) is read to its end, as a regular file is."""
    import os
    import subprocess
    import sys

    store = copy_demo(demo_template, tmp_path / "demo")
    fid = demo_template.facts["preference"]
    r, w = os.pipe()
    os.write(w, b"We indent with tabs, width 4.\n")
    os.close(w)
    p = subprocess.run([sys.executable, "-m", "lecode_memctl", "--store", str(store), "correct",
                        fid, "2", "demo-alpha", "1", "1", "--text-file", f"/dev/fd/{r}", "--yes",
                        "--json"], capture_output=True, timeout=60, pass_fds=(r,))
    os.close(r)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    shown = run_cli("--store", str(store), "history", fid, "--json").stdout
    assert "We indent with tabs, width 4." in shown
