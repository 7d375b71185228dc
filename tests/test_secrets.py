"""``memctl secrets``: every place once, never a value, allowlist, formats, read-only."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from . import secretstore
from .conftest import run_cli, tree_hash
from .promparse import parse_exposition


@pytest.fixture
def planted(tmp_path) -> secretstore.Planted:
    return secretstore.build(tmp_path, seed=7)


def secrets_cli(p: secretstore.Planted, *args: str):
    return run_cli("--store", str(p.store), "secrets", *args)


def leaks(p: secretstore.Planted, text: str) -> bool:
    """True when any planted value (or a distinctive part of one) is in ``text``."""
    return any(v in text for v in p.values.values())


def test_each_place_once_and_no_value(planted):
    r = secrets_cli(planted, "--json")
    assert r.exit_code == 1
    leaked = leaks(planted, r.stdout) or leaks(planted, r.stderr)
    assert not leaked
    doc = orjson.loads(r.stdout_bytes)
    got = sorted((f["detector"], f["kind"], f["file"], f["session_id"], f["seq"], f["path"],
                  f["fact_id"]) for f in doc["findings"])
    assert got == sorted([
        ("aws-access-key", "transcript", "sessions/s-main.jsonl", "s-main", 3, "$.content", None),
        ("aws-access-key", "transcript", "sessions/s-forgot.jsonl", "s-forgot", 1, "$.content", None),
        ("github-token", "transcript", "sessions/s-main.jsonl", "s-main", 4, "$.content", None),
        ("basic-auth-credentials", "transcript", "sessions/s-main.jsonl", "s-main", 6, "$.content", None),
        ("basic-auth-credentials", "fact", "facts.sqlite3", None, None, None, planted.facts["password"]),
        ("private-key", "file", "notes/keys.md", None, None, None, None),
        ("private-key", "file", "notes/keys.md.bak", None, None, None, None),
    ])
    for f in doc["findings"]:
        assert f["type"] == "secret"
        assert f["length"] > 0 and f["preview"].endswith(f"({f['length']} chars)")
        assert len(f["preview"].split("…")[0]) <= 4


def test_document_and_jsonl_rows_are_typed(planted):
    """The --json document is typed and versioned, 'generated' is RFC 3339 UTC;
    JSONL gives each store's secret rows, then its scan row."""
    import re

    from lecode_memctl.core.rowmodel import SCHEMA_VERSION, SECRET, SECRETS_SCAN, TIME_PATTERN

    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    assert doc["type"] == "secrets" and doc["schema_version"] == SCHEMA_VERSION
    assert isinstance(doc["generated"], str) and re.match(TIME_PATTERN, doc["generated"])
    assert [list(p) for p in doc["projects"]] == [SECRETS_SCAN.names]
    lines = [orjson.loads(x) for x in secrets_cli(planted, "--format", "jsonl")
             .stdout_bytes.splitlines()]
    assert [x["type"] for x in lines] == ["secret"] * len(doc["findings"]) + ["scan"]
    assert lines[:-1] == doc["findings"] and lines[-1] == doc["projects"][0]
    assert all(list(x) == SECRET.names for x in lines[:-1])


@pytest.mark.parametrize("fmt", ["human", "jsonl", "csv", "tsv", "prometheus"])
def test_no_format_prints_a_value(planted, fmt):
    r = secrets_cli(planted, "--format", fmt)
    assert r.exit_code == 1
    leaked = leaks(planted, r.stdout) or leaks(planted, r.stderr)
    assert r.stdout and not leaked


def test_prometheus_and_output_file(planted, tmp_path):
    out = tmp_path / "reports" / "secrets.prom"
    out.parent.mkdir()      # (a missing directory is exit 7, never created: test_output_option)
    r = secrets_cli(planted, "--format", "prometheus", "--output", str(out))
    assert r.exit_code == 1 and r.stdout == ""
    text = out.read_text()
    parse_exposition(text)   # valid exposition format
    assert f'memctl_secrets_ok{{project="{planted.slug}"}} 0' in text
    assert f'memctl_secrets_findings{{project="{planted.slug}",detector="aws-access-key",' \
           f'kind="transcript"}} 2' in text
    leaked = leaks(planted, text)
    assert not leaked
    assert [n for n in os.listdir(out.parent)] == ["secrets.prom"]   # no temp file left


def test_allowlist_holds_hashes_only(planted, tmp_path):
    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    gh = next(f["hash"] for f in doc["findings"] if f["detector"] == "github-token")
    allow = tmp_path / "allow"
    allow.write_text(f"# the test token\nsha256:{gh}\n")
    doc2 = orjson.loads(secrets_cli(planted, "--json", "--allowlist", str(allow)).stdout_bytes)
    assert [f for f in doc2["findings"] if f["detector"] == "github-token"] == []
    assert doc2["projects"][0]["allowlisted"] == 1
    # a value pasted into the allowlist is refused, and not echoed back
    allow.write_text(planted.values["ghp"] + "\n")
    r = secrets_cli(planted, "--allowlist", str(allow))
    leaked = leaks(planted, r.stderr + r.stdout)
    assert r.exit_code == 2 and not leaked


def test_the_text_reports_short_hash_pasted_says_where_the_whole_one_is(planted, tmp_path):
    """The text report shows ``sha256:`` and 12 hex digits; pasted into the
    allowlist it was "not a SHA-256 hex digest", with no word of where the
    whole hash is.  It now says so, and the line is still not echoed."""
    text = secrets_cli(planted).stdout
    short = next(w for w in text.split() if w.startswith("sha256:"))
    assert len(short) == len("sha256:") + 12
    allow = tmp_path / "allow"
    allow.write_text(short + "\n")
    r = secrets_cli(planted, "--allowlist", str(allow))
    assert r.exit_code == 2, r.stderr
    assert "line 1 holds 12 hex digits, not a whole SHA-256" in r.stderr, r.stderr
    assert "--json" in r.stderr and short[7:] not in r.stderr


def test_free_pages_of_the_database(planted):
    """A forgotten fact's text stays in the database file's free pages (SQLite
    without secure_delete, the default of most builds): found there."""
    from lecode_memctl.core.facts import FactStore

    fs = FactStore(planted.store / "facts.sqlite3",
                   on_connect=lambda db: db.execute("PRAGMA secure_delete = OFF"))
    fs.forget(planted.facts["password"])
    fs.close()
    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    kinds = {(f["kind"], f["file"]) for f in doc["findings"] if f["detector"] == "basic-auth-credentials"}
    assert ("fact", "facts.sqlite3") not in kinds
    assert any(k == "database" for k, _f in kinds)


def test_clean_store_exit_0_and_read_only(planted, tmp_path):
    before = tree_hash(planted.store)
    secrets_cli(planted)
    secrets_cli(planted, "--json")
    assert tree_hash(planted.store) == before
    clean = tmp_path / "clean"
    (clean / "notes").mkdir(parents=True)
    (clean / "MEMORY.md").write_text("# memory\n\n- nothing secret here\n")
    r = run_cli("--store", str(clean), "secrets")
    assert r.exit_code == 0, r.stdout


def test_symlink_not_followed(planted, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(f"token {planted.values['ghp']}\n")
    os.symlink(outside, planted.store / "notes" / "link.md")
    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    assert not any(f["file"] == "notes/link.md" for f in doc["findings"])
    assert any(s["file"] == "notes/link.md" for s in doc["projects"][0]["skipped"])


@pytest.mark.parametrize("args,code", [
    (["--format", "yaml"], 2), (["--allowlist", "/nonexistent/allow"], 2),
])
def test_bad_input(planted, args, code):
    r = secrets_cli(planted, *args)
    assert r.exit_code == code and r.stderr.startswith("memctl: error: ")


def test_no_store(tmp_path):
    r = run_cli("--store", str(tmp_path / "nope"), "secrets")
    assert r.exit_code == 3


def test_unreadable_file_fails_the_audit(planted, monkeypatch):
    """A file that cannot be read (EACCES here, simulated: the tests run as root)
    may hide a value: secrets is not OK, redact refuses (exit 5) and changes nothing."""
    import errno

    from lecode_memctl.core import secrets as core_secrets

    (planted.store / "notes" / "locked.md").write_text("nothing\n")
    real = core_secrets.open_owned

    def fake(path, *args, **kwargs):
        if path.endswith("locked.md"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(core_secrets, "open_owned", fake)
    before = tree_hash(planted.store)
    doc = orjson.loads(secrets_cli(planted, "--json", "--jobs", "1").stdout_bytes)
    assert doc["projects"][0]["unreadable"] == 1 and doc["ok"] is False
    r = run_cli("--store", str(planted.store), "redact", "--yes", "--jobs", "1")
    assert r.exit_code == 5 and "notes/locked.md" in r.stderr
    assert tree_hash(planted.store) == before


def test_all_projects(tmp_path, config_dir):
    """--all-projects audits every store under <config dir>/memory/, one summary each."""
    mem = config_dir / "memory"
    mem.mkdir(parents=True)
    p = secretstore.build(tmp_path / "b", seed=3)
    os.rename(p.store, mem / "app-0123456789ab")
    (mem / "clean-0123456789ab").mkdir()
    (mem / "clean-0123456789ab" / "MEMORY.md").write_text("# nothing here\n")
    r = run_cli("secrets", "--all-projects", "--json")
    assert r.exit_code == 1
    doc = orjson.loads(r.stdout_bytes)
    assert [(s["project"], s["ok"]) for s in doc["projects"]] == [
        ("app-0123456789ab", False), ("clean-0123456789ab", True)]
    assert {f["project"] for f in doc["findings"]} == {"app-0123456789ab"}
    assert run_cli("--store", str(tmp_path), "secrets", "--all-projects").exit_code == 2


def test_a_finding_never_carries_its_value_into_generic_output(planted):
    """repr, dataclasses.asdict and the CLI's generic JSON encoder see no value."""
    import dataclasses

    from lecode_memctl.cli.output import dumps
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import scan_store

    report = scan_store(store_at(planted.store))
    texts = [repr(report), dumps(report).decode(), str(dataclasses.asdict(report))]
    leaked = any(leaks(planted, t) for t in texts)
    assert report.findings and not leaked


def test_another_applications_database_still_scanned_raw(planted):
    """facts.sqlite3 that is not lecode's: its facts cannot be read (the audit is
    not OK), but its raw bytes are still searched, and nothing is changed."""
    import sqlite3

    db = planted.store / "facts.sqlite3"
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES (?)", (f"token {planted.values['ghp']}",))
    con.commit()
    con.close()
    before = tree_hash(planted.store)
    r = secrets_cli(planted, "--json")
    doc = orjson.loads(r.stdout_bytes)
    assert r.exit_code == 1 and doc["projects"][0]["unreadable"] == 1
    assert any(f["kind"] == "database" and f["detector"] == "github-token" for f in doc["findings"])
    assert tree_hash(planted.store) == before


def test_a_long_token_is_found_whole(planted):
    """Issue 14.3: detect-secrets' JWT pattern stops after the payload (the
    signature was neither counted nor redacted); GitHub, Stripe, OpenAI and
    Discord patterns stop at a fixed length; a detector's second pattern (the
    Slack webhook, AWS's quoted secret key) was never used for the span.  The
    finding is the whole token: its hash and length are the planted value's."""
    from lecode_memctl.core.secrets import value_hash

    values = secretstore.plant_long_tokens(planted, seed=5)
    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    found = {(f["hash"], f["length"]) for f in doc["findings"] if f["file"] == "MEMORY.md"}
    missing = {name: len(v) for name, v in values.items() if (value_hash(v), len(v)) not in found}
    assert missing == {}
    assert sum(f["file"] == "MEMORY.md" for f in doc["findings"]) == len(values)


def test_a_span_never_ends_inside_a_token():
    """Each planted value scanned alone in a line: one hit, exactly the value."""
    from lecode_memctl.core.secrets import Detector

    det = Detector()
    for name, (line, value) in secretstore.long_tokens(seed=9).items():
        text = f"see {line} then stop.\n"
        hits = det.scan(text)
        got = [text[h.start:h.end] for h in hits]
        assert got == [value], (name, [len(g) for g in got], len(value))


def test_a_long_token_in_a_fact_is_reported_once(planted):
    """A fact's text runs on into the next column's bytes in the raw database
    pages (no separator): the whole-token rule does not apply there, and the
    value, which is the live fact's, is not reported again as a database hit."""
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.secrets import value_hash
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    toks = secretstore.long_tokens(seed=4)
    fs = FactStore(planted.store / "facts.sqlite3")
    ss = SessionStore(store_at(planted.store), exclusions=fs)
    ref = SourceRef("s-other", (1,), canonical_digest(ss.records("s-other", 1, 1)))
    for name in ("ghp", "stripe", "jwt"):
        fs.add(f"The {name} token is {toks[name][1]}", ref=ref)
    fs.close()
    doc = orjson.loads(secrets_cli(planted, "--json").stdout_bytes)
    hashes = {value_hash(toks[n][1]) for n in ("ghp", "stripe", "jwt")}
    facts = [f for f in doc["findings"] if f["kind"] == "fact" and f["hash"] in hashes]
    assert len(facts) == 3
    assert [f for f in doc["findings"] if f["kind"] == "database"] == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "wal_fifo"])
def test_a_database_that_is_not_a_regular_file_is_unreadable(tmp_path, kind):
    """facts.sqlite3 (or its -wal) a FIFO or a directory: the facts cannot be
    read and may hold a value, so the scan is not OK (exit 1, 'could not read'),
    never a silent skip with exit 0; redact refuses (exit 5)."""
    store = tmp_path / "store"
    (store / "notes").mkdir(parents=True)
    (store / "MEMORY.md").write_text("# memory\n\n- nothing secret here\n")
    name = "facts.sqlite3-wal" if kind == "wal_fifo" else "facts.sqlite3"
    if kind == "directory":
        (store / name).mkdir()
    else:
        os.mkfifo(store / name)

    def state() -> list[tuple[str, int, int, bytes | None]]:
        # tree_hash would open the FIFO (and block)
        out = []
        for dirpath, dirnames, filenames in os.walk(store):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                data = Path(p).read_bytes() if os.path.isfile(p) and not os.path.islink(p) else None
                out.append((p, st.st_mode, st.st_mtime_ns, data))
        return sorted(out)

    before = state()
    r = run_cli("--store", str(store), "secrets", "--json", "--jobs", "1")
    assert r.exit_code == 1, (r.exit_code, r.stdout, r.stderr)
    doc = orjson.loads(r.stdout_bytes)
    proj = doc["projects"][0]
    assert doc["ok"] is False and proj["unreadable"] == 1 and not doc["findings"]
    assert any(s["file"] == name and s["unreadable"] for s in proj["skipped"])
    r = run_cli("--store", str(store), "secrets")
    assert r.exit_code == 1 and name in r.stdout + r.stderr
    assert run_cli("--store", str(store), "redact", "--yes", "--jobs", "1").exit_code == 5
    assert state() == before


def test_a_transcript_is_scanned_a_line_at_a_time(tmp_path):
    """A transcript is read a line at a time, not whole: memory follows its
    longest line (a 1 GiB transcript took 1 GiB and more), and the hits, the
    line numbers and the size are those of the whole file."""
    import tracemalloc

    from lecode_memctl.core import secrets as core_secrets

    root = tmp_path / "store"
    (root / "sessions").mkdir(parents=True)
    path = root / "sessions" / "big.jsonl"
    pad = b" " * (1 << 20)          # JSON whitespace: a 1 MiB line with nothing to scan
    key = "AKIA" + "QWERTYUIOPASDFGH"
    with open(path, "wb") as fh:
        fh.write(b'{"seq":0,"type":"session","format":1,"session_id":"big","project":"p"}\n')
        for seq in range(1, 33):
            fh.write(b'{"seq":%d,"type":"message","role":"user","content":"hi"%s}\n' % (seq, pad))
        fh.write(orjson.dumps({"seq": 33, "type": "message", "role": "user",
                               "content": f"aws_access_key_id = {key}"}) + b"\n")
        fh.write(b"torn " + key.encode())             # a last line without its newline: text
    tracemalloc.start()
    try:
        scan = core_secrets.scan_file(core_secrets.Detector(), str(root), "sessions/big.jsonl")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scan.error is None and scan.size == path.stat().st_size
    found = [(v, loc.get("seq"), loc.get("line"), loc.get("path")) for v, _d, _k, loc in scan.hits]
    assert (key, 33, 34, "$.content") in found and (key, None, 35, None) in found, found
    assert peak < 16 << 20, f"{peak >> 20} MiB for a {path.stat().st_size >> 20} MiB transcript"


@pytest.mark.heavy
def test_a_pool_only_for_a_store_worth_one(tmp_path, monkeypatch):
    """Workers are forked for a store whose files take long enough to scan to
    pay for them (POOL_BYTES), not for every store of two files or more:
    secrets --all-projects over 3,000 small stores forked 3,000 pools (250 s
    against 1 s with --jobs 1).  The findings are the same either way."""
    from lecode_memctl.core import pools, secrets as core_secrets
    from lecode_memctl.core.layout import store_at

    made = []
    real = pools.process_pool

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pools, "process_pool", counted)
    p = secretstore.build(tmp_path / "small", seed=7)
    small = core_secrets.scan_store(store_at(p.store), jobs=2)
    assert made == []
    serial = core_secrets.scan_store(store_at(p.store), jobs=1)
    assert [f.to_json() for f in small.findings] == [f.to_json() for f in serial.findings]
    # (lines of blanks: the size that pays for a pool, which its bytes need
    # not cost -- 0.02 s to scan, not the 1.4 s of a MB of words)
    with open(p.store / "notes" / "big.md", "w") as fh:
        fh.write((" " * 1000 + "\n") * (core_secrets.POOL_BYTES // 1001 + 1))
    pooled = core_secrets.scan_store(store_at(p.store), jobs=2)
    assert made == [1]
    assert pooled.findings and [f.to_json() for f in pooled.findings] == [
        f.to_json() for f in core_secrets.scan_store(store_at(p.store), jobs=1).findings]


# ---------------------------------------------------------------- a credential as a JSON object key

def key_store(tmp_path) -> tuple[Path, str, str]:
    """A store whose one tool call carries a GitHub token as an object *key*
    (an environment map written as ``{token: "set"}``), and an AWS key id
    as a value under that key."""
    from lecode_memctl.core import open_project

    root = tmp_path / "K" / "r-00000000000k"
    root.mkdir(parents=True)
    ghp = "ghp_" + "Zq8wE3rT5yU7iO9pA1sD3fG5hJ7kL9zX2cV4"
    aws = "AKIA" + "Q7W3E5R7T9Y2U4I6O8P1"
    with open_project(store=str(root)) as p, p.sessions.create("s-keys") as w:
        w.append_message("user", "deploy it")                                          # 1
        w.append_message("assistant", "", epoch=p.generation(), tool_calls=[
            {"id": "c1", "name": "shell",
             "arguments": {"env": {ghp: "set", "nested": {ghp: {"id": aws}}}}}])      # 2
    return root, ghp, aws


def test_a_credential_in_an_object_key_is_found_and_never_shown(tmp_path):
    """A key is scanned like a string leaf: the token is found where it is a
    key (each member once), and no path shows it, neither the key's own
    path nor the path of the value found under it: the marker stands in the
    value's place there.  redact erases it, and the scan after finds nothing."""
    root, ghp, aws = key_store(tmp_path)
    r = run_cli("--store", str(root), "secrets", "--json")
    assert r.exit_code == 1, r.stderr
    assert ghp not in r.stdout + r.stderr and aws not in r.stdout + r.stderr
    doc = orjson.loads(r.stdout_bytes)
    g = "[REDACTED:github-token:" + hashlib.sha256(ghp.encode()).hexdigest()[:6] + "]"
    got = sorted((f["detector"], f["seq"], f["path"]) for f in doc["findings"])
    args = "$.tool_calls[0].arguments.env"
    assert got == sorted([
        ("github-token", 2, f'{args}["{g}"]'),
        ("github-token", 2, f'{args}.nested["{g}"]'),
        ("aws-access-key", 2, f'{args}.nested["{g}"].id'),
    ])
    for fmt in ("jsonl", "csv", "tsv", "table", "prometheus"):
        out = run_cli("--store", str(root), "secrets", "--format", fmt)
        assert ghp not in out.stdout + out.stderr, fmt
    human = run_cli("--store", str(root), "secrets")
    assert ghp not in human.stdout + human.stderr and g in human.stdout

    done = run_cli("--store", str(root), "redact", "--yes", "-j1")
    assert done.exit_code == 0, done.stderr
    assert ghp not in done.stdout + done.stderr
    data = (root / "sessions" / "s-keys.jsonl").read_bytes()
    assert ghp.encode() not in data and aws.encode() not in data
    again = run_cli("--store", str(root), "secrets", "--json")
    assert again.exit_code == 0, again.stdout


def test_the_kept_hits_of_short_strings_change_no_finding(tmp_path, monkeypatch):
    """A transcript's short strings have their hits kept (secrets.SHORT_TEXT,
    SHORT_KEPT): the findings, and the generic outputs' lack of any value,
    are those of a scan that keeps none, and of one whose store of them is
    emptied at every string."""
    import dataclasses

    from lecode_memctl.core import secrets
    from lecode_memctl.core.layout import store_at

    root, ghp, aws = key_store(tmp_path)
    planted = secretstore.build(tmp_path / "p", seed=3)

    def scan(where: Path) -> list[dict]:
        report = secrets.scan_store(store_at(where))
        assert ghp not in repr(report) + str(dataclasses.asdict(report))
        return [f.to_json() for f in report.findings]

    kept = [scan(root), scan(planted.store)]
    monkeypatch.setattr(secrets, "SHORT_KEPT", 1)
    assert [scan(root), scan(planted.store)] == kept
    monkeypatch.setattr(secrets, "SHORT_TEXT", -1)
    assert [scan(root), scan(planted.store)] == kept
    assert len(kept[0]) == 3 and len(kept[1]) == 7


def test_all_projects_lists_a_symlinked_store_as_skipped(tmp_path, config_dir):
    """A symbolic link under <config dir>/memory/ is not followed, and is
    listed, as the help says of links: a scan row whose one skipped entry is
    the store itself (validate --all-projects reports it as layout.symlink).
    It was left out silently: no row, as if it were not there."""
    mem = config_dir / "memory"
    mem.mkdir(parents=True)
    p = secretstore.build(tmp_path / "b", seed=3)
    os.rename(p.store, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", mem / "app-0123456789ab")
    (mem / "clean-0123456789ab").mkdir()
    (mem / "clean-0123456789ab" / "MEMORY.md").write_text("# nothing here\n")
    before = tree_hash(tmp_path / "elsewhere")
    r = run_cli("secrets", "--all-projects", "--json")
    assert r.exit_code == 0, r.stdout       # (skipped on purpose, as a link in a store is)
    doc = orjson.loads(r.stdout_bytes)
    rows = {s["project"]: s for s in doc["projects"]}
    assert list(rows) == ["app-0123456789ab", "clean-0123456789ab"]
    link = rows["app-0123456789ab"]
    assert link["ok"] is True and link["files_scanned"] == 0 and link["findings"] == 0
    assert [(s["file"], s["unreadable"]) for s in link["skipped"]] == [(".", False)]
    assert "symbolic link" in link["skipped"][0]["reason"]
    assert doc["findings"] == []
    human = run_cli("secrets", "--all-projects")
    assert "app-0123456789ab: OK" in human.stdout and "skipped .: " in human.stdout
    assert tree_hash(tmp_path / "elsewhere") == before
