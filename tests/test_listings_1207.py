"""Listing fixes of 2026-12-07 (a reviewer's findings), one section per
finding: facts' total without a database; projects' rows for entries that
are no directory, --project checks, legacy roots, undercounts; the facts
next-page hint; --sort, --offset/--limit, --since/--until values."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli, run_proc

# ------------------------------------------------- facts: total without a database


@pytest.mark.parametrize("extra", [(), ("--session", "demo-alpha")])
def test_facts_total_is_0_without_a_database(demo_template, tmp_path, extra):
    """No facts.sqlite3 is no fact: total 0, as a zero-length database and
    context's facts_total say; null is kept for the filters that make a
    total unknown (--status, --query, --since, --until)."""
    store = copy_demo(demo_template, tmp_path / "d")
    (store / "facts.sqlite3").unlink()
    r = run_cli("--store", str(store), "--no-state", "facts", "--json", *extra)
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["total"] == 0 and doc["facts"] == [], doc
    r = run_cli("--store", str(store), "--no-state", "facts", "--json", "--status", "valid")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["total"] is None


# ------------------------------------------------- --project: a missing path, a file


def test_projects_refuses_a_missing_project(tmp_path):
    """--project /nonexistent is exit 3 for projects as for where and facts
    (it was ignored: every store unclaimed, exit 0); only the working
    directory deleted meanwhile is no current project."""
    (tmp_path / "D").mkdir()
    r = run_cli("--config-dir", str(tmp_path / "D"), "--project", str(tmp_path / "nope"),
                "projects")
    assert r.exit_code == 3, (r.exit_code, r.stdout, r.stderr)
    assert f"--project {tmp_path / 'nope'}: no such directory" in r.stderr


@pytest.mark.parametrize("via", ["--project", "where"])
def test_a_file_stands_for_its_directory(tmp_path, via):
    """--project and where's PATH name the project that contains them: a
    file is in its directory's project (outside a Git checkout the file
    itself was taken as the project root: root /etc/passwd, exit 0; a
    review's first fix refused it, which a code review found refused a
    file inside a checkout that had worked)."""
    import subprocess as sp

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    sp.run(["git", "init", "-q", str(repo)], check=True)
    inside = repo / "src" / "main.py"
    inside.write_text("x\n")
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "passwd").write_text("x\n")
    for path, root in ((inside, repo), (loose / "passwd", loose)):
        args = (["--project", str(path), "where", "--json"] if via == "--project"
                else ["where", str(path), "--json"])
        r = run_cli("--config-dir", str(tmp_path / "D"), *args)
        assert r.exit_code == 0, (r.exit_code, r.stderr)
        assert orjson.loads(r.stdout)["root"] == str(root.resolve())
    args = (["--project", str(tmp_path / "none"), "where"] if via == "--project"
            else ["where", str(tmp_path / "none")])
    r = run_cli("--config-dir", str(tmp_path / "D"), *args)
    assert r.exit_code == 3 and "no such directory" in r.stderr, (r.exit_code, r.stderr)


# ------------------------------------------------- an empty --sort


@pytest.mark.parametrize("cmd", ["sessions", "notes", "projects"])
def test_an_empty_sort_is_refused(demo_template, tmp_path, cmd):
    """--sort '' is exit 2, as every other empty value; it was the default."""
    store = copy_demo(demo_template, tmp_path / "d")
    args = ("--store", str(store)) if cmd != "projects" else ()
    for form in (("--sort", ""), ("--sort=",)):
        r = run_cli(*args, "--no-state", cmd, *form)
        assert r.exit_code == 2, (form, r.exit_code, r.stdout, r.stderr)
        assert "--sort needs a key; it was given an empty one" in r.stderr


# ------------------------------------------------- --offset/--limit: ASCII digits


@pytest.mark.parametrize("cmd", ["sessions", "notes", "facts"])
@pytest.mark.parametrize(("opt", "value"), [("--limit", "٥"), ("--limit", "1_0"),
                                            ("--offset", "+5"), ("--offset", " 5"),
                                            ("--limit", "５")])
def test_counts_take_ascii_digits_only(demo_template, tmp_path, cmd, opt, value):
    """int() reads Arabic-Indic and full-width digits, '_' and '+': the
    counts, as read's START/END, take ASCII digits only (exit 2)."""
    store = copy_demo(demo_template, tmp_path / "d")
    r = run_cli("--store", str(store), "--no-state", cmd, opt, value)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert f"Invalid value for '{opt}'" in r.stderr and "ASCII digits" in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [
    ["read", "demo-alpha", "1", "7", "--limit", "٥"], ["read", "demo-alpha", "1", "7", "--offset", "+1"],
    ["recall", "0fae3f4a2974d11f", "--offset", "1_0"], ["grep", "x", "-m", "٣"],
    ["grep", "x", "-C", "+1"], ["search", "x", "-n", "５"], ["secrets", "-j", "٢"],
    ["redact", "--dry-run", "--session", "demo-alpha", "--seq", "٣"],
    ["correct", "0fae3f4a2974d11f", "١", "demo-alpha:1", "text"]])
def test_every_count_and_position_takes_ascii_digits_only(demo_template, tmp_path, argv):
    """The other counts too (the review fixed the listings' first; read's,
    recall's, grep's -m/-C, search's -n, --jobs, redact's --seq and
    correct's REVISION still read what int() reads until then)."""
    store = copy_demo(demo_template, tmp_path / "d")
    r = run_cli("--store", str(store), "--no-state", *argv)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "ASCII digits" in r.stderr, r.stderr


@pytest.mark.parametrize(("opt", "value", "code"), [
    ("--offset", "0", 0), ("--offset", "007", 0), ("--limit", "1", 0),
    ("--limit", "0", 2), ("--offset", str((1 << 63) - 1), 0),
    ("--offset", str(1 << 63), 2), ("--limit", "9" * 5000, 2)])
def test_counts_keep_their_bounds(demo_template, tmp_path, opt, value, code):
    store = copy_demo(demo_template, tmp_path / "d")
    r = run_cli("--store", str(store), "--no-state", "sessions", opt, value)
    assert r.exit_code == code, (r.exit_code, r.stderr)
    if code:
        assert len(r.stderr) < 400 and "is not in the range" in r.stderr, r.stderr


# ------------------------------------------------- --since/--until: RFC 3339 only


@pytest.mark.parametrize(("value", "want"), [
    ("2026-12-07t00:00:00z", "2026-12-07T00:00:00.000Z"),
    ("2026-12-07T00:00:00z", "2026-12-07T00:00:00.000Z"),
    ("2026-12-07t01:00:00+01:00", "2026-12-07T00:00:00.000Z"),
    ("2026-12-07 12:00:00.5Z", "2026-12-07T12:00:00.500Z"),
    ("2026-12-07T12:00:00", "2026-12-07T12:00:00.000Z"),
    ("2026-12-07T12:30Z", "2026-12-07T12:30:00.000Z"),
])
def test_rfc3339_times_in_either_case(value, want):
    """RFC 3339 5.6: 'T' and 'Z' may be lower case."""
    from lecode_memctl.core.rowmodel import parse_when, utc_time

    assert utc_time(parse_when(value)) == want


@pytest.mark.parametrize("value", ["2026-12-07T1200Z", "2026-12-07T00:00:00+0100",
                                   "2026-12-07T12", "2026-12-07T12:00:00,5Z",
                                   "2026-12-07x12:00:00Z", "2026-12-07T12:00:00+01"])
def test_basic_format_times_are_refused(value):
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.rowmodel import parse_when

    with pytest.raises(UsageError, match="RFC 3339"):
        parse_when(value)


def test_facts_since_lower_case(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    r = run_cli("--store", str(store), "--no-state", "facts", "--json",
                "--since", "2026-12-07t00:00:00z")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["filters"]["since"] == "2026-12-07T00:00:00.000Z"


# ------------------------------------------------- the facts next-page hint


def test_the_next_page_hint_names_the_same_list(demo_template, tmp_path):
    """The hint lists the same store and facts wherever and whenever it is
    run: an age (--since 3650d) is given as the absolute time it meant,
    and a config directory LECODE_CONFIG_DIR chose is named."""
    from datetime import datetime

    from lecode_memctl.core.rowmodel import parse_when

    cfg = str(demo_template.config_dir)
    before = datetime.now().astimezone()
    r = run_cli("--project", str(demo_template.project), "--no-state", "facts", "--limit", "1",
                "--since", "3650d", "--until", "2999-01-01", env={"LECODE_CONFIG_DIR": cfg})
    after = datetime.now().astimezone()
    assert r.exit_code == 0, r.stderr
    hint = [ln for ln in r.stderr.splitlines() if ln.startswith("memctl: more facts: ")]
    assert len(hint) == 1, r.stderr
    words = hint[0].split()
    assert words[words.index("--config-dir") + 1] == cfg, hint
    since = words[words.index("--since") + 1]
    assert "T" in since and since.endswith("Z"), hint
    t = parse_when(since)
    assert parse_when("3650d", now=before) <= t <= parse_when("3650d", now=after)
    assert words[words.index("--until") + 1] == "2999-01-01", hint
    # the command given, run elsewhere with another environment, lists the next page
    args = [a.strip("'") for a in words[3:]]
    r2 = run_cli(*args[1:], env={"LECODE_CONFIG_DIR": str(tmp_path / "other")})
    assert r2.exit_code == 0, r2.stderr
    assert "facts 2-2" in r2.stdout, r2.stdout


def test_the_hint_names_a_config_dir_home_chose_and_is_one_shell_word_each(demo_template,
                                                                           tmp_path):
    """A code review: a config directory chosen through HOME was left out of
    the hint (run with LECODE_CONFIG_DIR set it listed another store); a
    path holding an escape, a newline or a byte that is not UTF-8 was
    printed raw.  Each value is now one word bash reads back to its bytes."""
    import subprocess as sp

    home = tmp_path / "h\x1b[31m\nx\xff".encode("latin-1").decode("utf-8", "surrogateescape")
    cfg = Path(home) / ".config" / "lecode"
    shutil.copytree(demo_template.config_dir, cfg, symlinks=True)
    env = {"HOME": str(home), "LECODE_CONFIG_DIR": "", "XDG_CONFIG_HOME": ""}
    r = run_cli("--project", str(demo_template.project), "--no-state", "facts", "--limit", "1",
                env=env)
    assert r.exit_code == 0, r.stderr
    (hint,) = [ln for ln in r.stderr.splitlines() if ln.startswith("memctl: more facts: ")]
    assert "\x1b" not in hint and "\udcff" not in hint and hint.isprintable(), hint
    assert "--config-dir $'" in hint, hint
    # bash reads the word back to the directory's bytes
    word = hint.split("--config-dir ", 1)[1].split(" --project", 1)[0]
    out = sp.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
    assert out == os.fsencode(str(cfg)), (out, word)


def test_a_position_of_many_leading_zeros_is_a_number_not_an_internal_error(demo_template,
                                                                            tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    z = "0" * 5000 + "1"
    r = run_cli("--store", str(store), "--no-state", "read", "demo-alpha", "1", z)
    assert r.exit_code == 0, (r.exit_code, r.stderr)     # 1..1 (exit 70 before)
    r = run_cli("--store", str(store), "--no-state", "sessions", "--limit", z)
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    r = run_cli("--store", str(store), "--no-state", "sessions", "--limit", "9" * 5000)
    assert r.exit_code == 2 and len(r.stderr) < 300, r.stderr
    r = run_cli("--store", str(store), "--no-state", "read", "demo-alpha", "1", "9" * 5000)
    assert r.exit_code == 2 and len(r.stderr) < 300, r.stderr


# ------------------------------------------------- sessions: invalid_ref documented


def test_a_file_name_that_is_no_session_id_is_documented(demo_template, tmp_path):
    """A transcript named 'bad name.jsonl' is listed refused, reason
    invalid_ref; the reason is named where the others are."""
    store = copy_demo(demo_template, tmp_path / "d")
    shutil.copy(store / "sessions" / "demo-beta.jsonl", store / "sessions" / "bad name.jsonl")
    r = run_cli("--store", str(store), "--no-state", "sessions", "--format", "jsonl")
    rows = [orjson.loads(ln) for ln in r.stdout.splitlines()]
    bad = [x for x in rows if x["id"] == "bad name"]
    assert [(x["state"], x["reason"]) for x in bad] == [("refused", "invalid_ref")], rows
    r = run_cli("sessions", "--help")
    assert "invalid_ref" in r.stdout
    from lecode_memctl.core.rowtables import SESSION

    assert "invalid_ref" in next(f.doc for f in SESSION.fields if f.name == "reason")
    root = Path(__file__).resolve().parent.parent
    # (the sentences that say it of a transcript's name: invalid_ref was in
    # FORMAT.md before, for hidden facts, so a bare name could not fail)
    said = {"docs/OUTPUT.md": "or invalid_ref, a *.jsonl whose file name is not a valid session id",
            "docs/FORMAT.md": "is listed under that name, `refused` with the reason `invalid_ref`"}
    for doc, sentence in said.items():
        text = " ".join((root / doc).read_text().split())
        assert sentence in text, doc


def test_an_unreadable_session_s_reason_is_documented(demo_template, tmp_path):
    store = copy_demo(demo_template, tmp_path / "d")
    (store / "sessions" / "dir-x.jsonl").mkdir()
    r = run_cli("--store", str(store), "--no-state", "sessions", "--format", "jsonl")
    rows = [orjson.loads(ln) for ln in r.stdout.splitlines()]
    assert [(x["state"], x["reason"]) for x in rows if x["id"] == "dir-x"] == [
        ("unreadable", "session_unreadable")], rows
    assert "session_unreadable" in " ".join(run_cli("sessions", "--help").stdout.split())
    from lecode_memctl.core.rowtables import SESSION

    assert "session_unreadable" in next(f.doc for f in SESSION.fields if f.name == "reason")


# ------------------------------------------------- projects: entries that are no directory


def test_projects_lists_every_entry(tmp_path):
    """A file or FIFO where a store should be is a row (kind
    not_a_directory, its file kind in facts_error as a link's is), as
    validate --all-projects reports it; it was left out."""
    mem = tmp_path / "C" / "memory"
    mem.mkdir(parents=True)
    (mem / "app-0123456789ab").write_text("x\n")
    os.mkfifo(mem / "fifo-0123456789ab")
    (mem / "link-0123456789ab").symlink_to("/nowhere")
    (mem / "dir-0123456789ab").mkdir()
    r = run_cli("--config-dir", str(tmp_path / "C"), "projects", "--json")
    assert r.exit_code == 0, r.stderr
    rows = {x["slug"]: x for x in orjson.loads(r.stdout)}
    assert sorted(rows) == ["app-0123456789ab", "dir-0123456789ab", "fifo-0123456789ab",
                            "link-0123456789ab"], rows
    assert rows["dir-0123456789ab"]["kind"] == "unclaimed"
    assert rows["link-0123456789ab"]["kind"] == "symlink"
    for name, what in (("app-0123456789ab", "a regular file"), ("fifo-0123456789ab", "a FIFO")):
        row = rows[name]
        assert row["kind"] == "not_a_directory", row
        assert row["facts_error"] == f"the store is {what}, not a directory", row
        # (not known: null, never a count too low; a code review)
        assert (row["root"], row["sessions"], row["facts"], row["size"], row["files"]) == \
            (None, None, None, None, None), row
    r = run_cli("--config-dir", str(tmp_path / "C"), "projects", "-f", "csv")
    assert r.stdout.count("not_a_directory") == 2, r.stdout


# ------------------------------------------------- projects: a legacy store and its project


def test_a_legacy_store_gives_its_project_the_root(tmp_path):
    """A legacy store's header names a directory inside the project: the
    legacy row keeps that directory in legacy_directory alone (it is no
    project root), and the project's row takes the verified root that
    legacy_of names (it had root null, root_exists null)."""
    from lecode_memctl.core.demo import build_demo

    demo = build_demo(tmp_path / "D")
    src = demo.project / "src"
    legacy = next(p for p in (demo.config_dir / "memory").iterdir() if p.name.startswith("src-"))
    (legacy / "sessions").mkdir(exist_ok=True)
    head = {"seq": 0, "type": "session", "format": 1, "session_id": "old-1",
            "project": legacy.name, "created": "2026-11-01T09:00:00+00:00", "cwd": str(src)}
    (legacy / "sessions" / "old-1.jsonl").write_bytes(orjson.dumps(head) + b"\n")
    r = run_proc("--config-dir", str(demo.config_dir), "projects", "--json", cwd="/")
    assert r.returncode == 0, r.stderr
    rows = {x["slug"]: x for x in orjson.loads(r.stdout)}
    old = rows[legacy.name]
    assert old["kind"] == "legacy", old
    assert (old["root"], old["root_source"], old["root_exists"]) == (None, None, None), old
    assert old["legacy_of"] == str(demo.project) and old["legacy_directory"] == str(src), old
    proj = rows[demo.store.path.name]
    assert proj["kind"] == "project", proj
    assert (proj["root"], proj["root_exists"]) == (str(demo.project), True), proj
    assert proj["root_source"] == "session header", proj


# ------------------------------------------------- projects: a part it could not list


_DROP = ["--inh-caps=-dac_override,-dac_read_search",
         "--bounding-set=-dac_override,-dac_read_search"]


def _projects_without_dac(cfg: Path) -> subprocess.CompletedProcess:
    """``memctl --config-dir CFG projects --json`` as a user the modes hold
    back (root without the DAC capabilities)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, "-m", "lecode_memctl", "--config-dir", str(cfg), "projects", "--json"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is missing: cannot drop the DAC capabilities")
        cmd = ["setpriv", *_DROP, *cmd]
    return subprocess.run(cmd, capture_output=True, env=env, timeout=60, cwd="/")


@pytest.mark.parametrize("part", ["notes", "sessions"])
def test_a_part_that_cannot_be_listed_is_not_counted_low(demo_template, tmp_path, part):
    """notes/ or sessions/ of mode 000: size and files are null (not known),
    and sessions too for sessions/, never a silent undercount (sessions 0,
    size 0, files 0 before)."""
    store = copy_demo(demo_template, tmp_path / "d")
    cfg = store.parent.parent
    r = _projects_without_dac(cfg)
    assert r.returncode == 0, r.stderr
    whole = {x["slug"]: x for x in orjson.loads(r.stdout)}[store.name]
    assert whole["size"] and whole["files"] and whole["sessions"] == 3, whole
    (store / part).chmod(0)
    try:
        r = _projects_without_dac(cfg)
        probe = subprocess.run(["setpriv", *_DROP, "ls", str(store / part)],
                               capture_output=True) if os.geteuid() == 0 else None
    finally:
        (store / part).chmod(0o700)
    if probe is not None and probe.returncode == 0:
        pytest.skip("the DAC capabilities could not be dropped here")
    assert r.returncode == 0, r.stderr
    row = {x["slug"]: x for x in orjson.loads(r.stdout)}[store.name]
    assert (row["size"], row["files"]) == (None, None), row
    assert row["sessions"] == (None if part == "sessions" else 3), row
    assert row["facts"] == whole["facts"], row


# ------------------------------------------------- a code review of the last fixes

@pytest.mark.parametrize(("argv", "said"), [
    (["read", "--", "demo-alpha", "2", "-7"], "END must be a non-negative integer, not '-7'"),
    (["read", "demo-alpha:3--5"], "must be a non-negative integer"),
    (["read", "--", "demo-alpha", "-0", "3"], "START must be a non-negative integer, not '-0'"),
    (["facts", "--offset=-0"], "'-0' is not a whole number in ASCII digits"),
    (["facts", "--offset=-3"], "-3 is not in the range 0<=x")])
def test_a_negative_position_is_not_called_too_large(demo_template, tmp_path, argv, said):
    store = copy_demo(demo_template, tmp_path / "d")
    r = run_cli("--store", str(store), "--no-state", *argv)
    assert r.exit_code == 2 and said in r.stderr and "too large" not in r.stderr, r.stderr


def test_the_namesake_hint_names_directories_only_and_counts_the_rest(tmp_path):
    cfg = tmp_path / "cfg"
    mem = cfg / "memory"
    mem.mkdir(parents=True)
    (mem / "zz-0123456789ab").write_text("x\n")              # --store refuses a file
    (mem / "zz-1123456789ab").symlink_to(tmp_path)            # and a link
    for i in range(5):
        (mem / f"zz-{i}a23456789ab").mkdir()
    (tmp_path / "p" / "zz").mkdir(parents=True)
    r = run_cli("--config-dir", str(cfg), "--project", str(tmp_path / "p" / "zz"), "facts")
    assert r.exit_code == 3, r.stderr
    assert "zz-0123456789ab" not in r.stderr and "zz-1123456789ab" not in r.stderr, r.stderr
    assert "zz-0a23456789ab" in r.stderr and "(and 2 more)" in r.stderr, r.stderr


def test_forget_of_a_fact_already_forgotten_asks_nothing(demo_template, tmp_path, monkeypatch):
    import lecode_memctl.cli.cmd_facts as cmd_facts

    store = copy_demo(demo_template, tmp_path / "d")
    fid = demo_template.facts["verified"]
    assert run_cli("--store", str(store), "--no-state", "forget", fid, "--yes").exit_code == 0
    monkeypatch.setattr(cmd_facts, "_stdin_is_tty", lambda: True)
    r = run_cli("--store", str(store), "--no-state", "forget", fid)    # no input: a prompt aborts
    assert r.exit_code == 0 and "already forgotten" in r.stdout + r.stderr, (r.exit_code, r.stderr)
    assert "exclude its evidence?" not in r.stderr


def test_the_all_projects_conflict_comes_before_the_config_dir_and_a_file_is_no_directory(
        tmp_path):
    r = run_cli("--config-dir", str(tmp_path / "nope"), "--store", str(tmp_path), "validate",
                "--all-projects")
    assert r.exit_code == 2 and "conflicts" in r.stderr, r.stderr
    f = tmp_path / "afile"
    f.write_text("x\n")
    r = run_cli("--config-dir", str(f), "projects")
    assert r.exit_code == 2 and f"--config-dir {f}: not a directory" in r.stderr, r.stderr
