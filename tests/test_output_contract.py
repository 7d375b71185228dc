"""One output contract for every listing (issue 12, points 1-3 and 5).

For each listing, the JSON field names, the JSONL keys and the CSV/TSV
headers are the row model's fields, every row has a "type", every time is
RFC 3339 UTC with Z, and every row validates against the JSON Schema that
'memctl schema' prints.  Machine formats give every row."""

from __future__ import annotations

import csv
import io
import re
import sqlite3

import orjson
import pytest

from lecode_memctl.core import rowmodel
from lecode_memctl.core.rowmodel import MODELS, TIME_PATTERN

from . import outkit
from .conftest import run_cli

N_FACTS = 30       # more than one 20-fact page


@pytest.fixture
def built(config_dir, tmp_path):
    project = tmp_path / "proj"
    store, ids = outkit.build(config_dir, project, facts=N_FACTS)
    return project, store, ids


def cli(project, *args):
    r = run_cli("-C", str(project), *args)
    assert r.exit_code in (0, 1), (args, r.exit_code, r.stderr)
    return r


def _schema(record_type: str) -> dict:
    return orjson.loads(run_cli("schema", record_type).stdout_bytes)


def _check_against_schema(row: dict, schema: dict) -> None:
    """A small JSON Schema check (the subset memctl's schemas use)."""
    assert set(row) == set(schema["required"]) and not (set(row) - set(schema["properties"]))
    for key, value in row.items():
        prop = schema["properties"][key]
        if "enum" in prop:
            assert value in prop["enum"], (key, value)
            continue
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        ok = {"null": value is None, "string": isinstance(value, str),
              "integer": isinstance(value, int) and not isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool),
              "boolean": isinstance(value, bool), "object": isinstance(value, dict),
              "array": isinstance(value, list)}
        assert any(ok[t] for t in types), (key, value, types)
        if prop.get("format") == "date-time" and value is not None:
            assert re.match(prop["pattern"], value), (key, value)


LISTINGS = [
    # (argv, record type, how to get the rows out of --json)
    (["facts"], "fact", lambda d: d["facts"]),
    (["facts", "--all"], "fact", lambda d: d["facts"]),
    (["sessions"], "session", lambda d: d),
    (["notes"], "note", lambda d: d),
    (["search", "e"], "hit", lambda d: d["hits"]),
    (["history", "{fid}"], "revision", lambda d: d["revisions"]),
    (["usage"], "purpose", lambda d: [*d["purposes"], d["total"]]),
    (["projects"], "project", lambda d: d),
    (["validate"], "finding", lambda d: d["findings"]),
    (["validate", "--list-codes"], "code", lambda d: d),
    (["migrate-legacy", "--dry-run"], "item", lambda d: d["items"]),
    (["config"], "setting", lambda d: d["settings"]),
]


@pytest.mark.parametrize("argv,rtype,rows_of", LISTINGS, ids=lambda x: x if isinstance(x, str) else None)
def test_json_jsonl_csv_tsv_have_the_same_fields(built, argv, rtype, rows_of):
    project, store, ids = built
    if rtype == "item":   # give migrate-legacy something to plan
        legacy = outkit.store_for_project(store.path.parent.parent, project / "sub")
        (project / "sub").mkdir()
        legacy.path.mkdir(parents=True)
        (legacy.path / "notes").mkdir()
        (legacy.path / "notes" / "old.md").write_text("# old\n")
        # (named: outside Git the tree is not walked, every directory is its own project)
        argv = [*argv, "--from", str(legacy.path)]
    argv = [a.replace("{fid}", ids[0]) for a in argv]
    model = next(m for m in MODELS if m.type == rtype)
    schema = _schema(rtype)
    doc = orjson.loads(cli(project, *argv, "--json").stdout_bytes)
    json_rows = rows_of(doc)
    assert json_rows, argv
    if isinstance(doc, dict):
        assert doc.get("type") and doc.get("schema_version") == rowmodel.SCHEMA_VERSION
    jsonl_rows = [orjson.loads(x) for x in cli(project, *argv, "--format", "jsonl").stdout_bytes
                  .splitlines()]
    if rtype == "finding":
        assert jsonl_rows[-1]["type"] == "summary"
        _check_against_schema(jsonl_rows[-1], _schema("summary"))
        jsonl_rows = jsonl_rows[:-1]
    assert jsonl_rows == json_rows
    for row in json_rows:
        assert list(row) == model.names
        assert row["type"] in (model.type, *model.alt_types)
        _check_against_schema(row, schema)
    for fmt, delim in (("csv", ","), ("tsv", "\t")):
        text = cli(project, *argv, "--format", fmt).stdout
        table = list(csv.reader(io.StringIO(text), delimiter=delim))
        assert table[0] == model.names, (fmt, table[0])
        assert len(table) - 1 == len(json_rows)
        for row, cells in zip(json_rows, table[1:], strict=True):
            assert cells == [rowmodel.flat(row[k]) if k != "text" else row[k] for k in model.names] \
                or cells[model.names.index("text")] == row["text"]


@pytest.mark.parametrize("argv,rtype,rows_of", LISTINGS, ids=lambda x: x if isinstance(x, str) else None)
def test_every_listing_takes_format_table(built, argv, rtype, rows_of):
    """README: every listing takes --format table|json|jsonl|csv|tsv."""
    project, _store, ids = built
    argv = [a.replace("{fid}", ids[0]) for a in argv]
    r = run_cli("-C", str(project), *argv, "--format", "table")
    assert r.exit_code in (0, 1), (argv, r.exit_code, r.stderr)
    assert r.stdout


def test_every_time_is_rfc3339_utc_z(built):
    project, _store, ids = built
    times = []
    times += [r[k] for r in orjson.loads(cli(project, "facts", "--json").stdout_bytes)["facts"]
              for k in ("created", "updated")]
    times += [r[k] for r in orjson.loads(cli(project, "sessions", "--json").stdout_bytes)
              for k in ("created", "last_time")]
    times += [r["modified"] for r in orjson.loads(cli(project, "notes", "--json").stdout_bytes)]
    times += [r["last_activity"] for r in orjson.loads(cli(project, "projects", "--json").stdout_bytes)]
    times += [r["created"] for r in orjson.loads(cli(project, "history", ids[0], "--json")
                                                 .stdout_bytes)["revisions"]]
    v = orjson.loads(cli(project, "validate", "--json").stdout_bytes)
    times += [v["generated"], v["projects"][0]["started"], v["projects"][0]["finished"]]
    assert times and all(isinstance(t, str) and re.match(TIME_PATTERN, t) for t in times), times


def test_machine_formats_give_every_fact(built, config_dir):
    project, _store, ids = built
    r = cli(project, "facts", "--format", "jsonl")
    assert [orjson.loads(x)["fact_id"] for x in r.stdout_bytes.splitlines()] == ids
    for fmt in ("csv", "tsv"):
        assert len(cli(project, "facts", "--format", fmt).stdout.splitlines()) == N_FACTS + 1
    doc = orjson.loads(cli(project, "facts", "--json").stdout_bytes)
    assert [r["fact_id"] for r in doc["facts"]] == ids and doc["next_offset"] is None
    # --json has one shape whatever the other options
    doc_all = orjson.loads(cli(project, "facts", "--all", "--json").stdout_bytes)
    assert set(doc_all) == set(doc) and doc_all["facts"] == doc["facts"]
    # --limit/--offset page in every format
    page = orjson.loads(cli(project, "facts", "--json", "--limit", "25", "--offset", "3").stdout_bytes)
    assert [r["fact_id"] for r in page["facts"]] == ids[3:28] and page["next_offset"] == 28
    assert len(cli(project, "facts", "--format", "jsonl", "--offset", "28").stdout_bytes
               .splitlines()) == 2
    # the table stays the agent's page, the next page on stderr
    r = cli(project, "facts")
    assert sum(1 for ln in r.stdout.splitlines() if ln[:16] in ids) == 20
    # (--config-dir: LECODE_CONFIG_DIR, set by the suite, chose it)
    assert f"memctl --config-dir {config_dir} --project {project} facts --offset 20" in r.stderr
    assert "--offset" not in r.stdout


def test_listings_page_and_sort_in_every_format(built):
    project, _store, _ids = built
    rows = orjson.loads(cli(project, "sessions", "--json", "--sort=-id").stdout_bytes)
    assert [r["id"] for r in rows] == ["2026-03-02-beta", "2026-03-01-alpha"]
    rows = orjson.loads(cli(project, "sessions", "--json", "--limit", "1", "--offset", "1").stdout_bytes)
    assert [r["id"] for r in rows] == ["2026-03-02-beta"]
    assert run_cli("-C", str(project), "sessions", "--sort", "nope").exit_code == 2
    assert len(cli(project, "notes", "--format", "csv", "--limit", "1").stdout.splitlines()) == 2


def test_fact_filters(built, store_session_time=None):
    project, store, ids = built
    valid = orjson.loads(cli(project, "facts", "--status", "valid", "--json").stdout_bytes)["facts"]
    assert len(valid) == 2 and {r["status"] for r in valid} == {"valid"}
    unverified = cli(project, "facts", "--status", "unverified", "--format", "jsonl").stdout_bytes
    assert len(unverified.splitlines()) == N_FACTS - 2
    q = orjson.loads(cli(project, "facts", "--query", "DEPLOYS", "--json").stdout_bytes)["facts"]
    assert [r["text"] for r in q] == ["Deploys happen on Fridays."]
    assert orjson.loads(cli(project, "facts", "--since", "1d", "--json").stdout_bytes)["facts"]
    assert orjson.loads(cli(project, "facts", "--until", "2000-01-01", "--json")
                        .stdout_bytes)["facts"] == []
    assert orjson.loads(cli(project, "facts", "--since", "2999-01-01T00:00:00Z", "--json")
                        .stdout_bytes)["facts"] == []
    for bad in (["--status", "fine"], ["--since", "yesterday"], ["--until", "2026-02-30"],
                ["--query", ""]):
        r = run_cli("-C", str(project), "facts", *bad)
        assert r.exit_code == 2 and "memctl: error:" in r.stderr, bad
    # sessions by the time of their last record
    assert len(orjson.loads(cli(project, "sessions", "--since", "1h", "--json").stdout_bytes)) == 2
    assert orjson.loads(cli(project, "sessions", "--until", "2000-01-01", "--json").stdout_bytes) == []


def test_usage_since_until(config_dir, tmp_path):
    from lecode_memctl.core.layout import store_for_project
    from lecode_memctl.core.sessions import SessionStore

    project = tmp_path / "p"
    project.mkdir()
    store = store_for_project(config_dir, project)
    with SessionStore(store).create("s1", created="2026-05-01T00:00:00Z") as w:
        for day in ("2026-05-01", "2026-05-10", "2026-05-20"):
            w.append_event("memory_usage", purpose="learning", ts=f"{day}T12:00:00Z",
                           usage={"input_tokens": 10, "output_tokens": 1, "cost": 0.5})

    def calls(*a):
        return orjson.loads(run_cli("-C", str(project), "usage", "--json", *a).stdout_bytes)["total"]["calls"]

    assert calls() == 3
    assert calls("--since", "2026-05-10") == 2
    assert calls("--until", "2026-05-10") == 2
    assert calls("--since", "2026-05-05", "--until", "2026-05-15") == 1
    rows = list(csv.reader(io.StringIO(run_cli("-C", str(project), "usage", "--format", "csv").stdout)))
    assert rows[0] == rowmodel.USAGE.names and rows[-1][0] == "total"


def test_lock_wait_gives_up_with_exit_6(built):
    project, store, ids = built
    db = sqlite3.connect(store.facts_db, timeout=0)
    db.execute("BEGIN IMMEDIATE")
    try:
        r = run_cli("-C", str(project), "forget", ids[0], "--yes", "--lock-wait", "0.1")
        assert r.exit_code == 6, (r.exit_code, r.stderr)
    finally:
        db.rollback()
        db.close()
    assert run_cli("-C", str(project), "forget", ids[0], "--yes", "--lock-wait", "5").exit_code == 0


def test_schema_command():
    doc = orjson.loads(run_cli("schema").stdout_bytes)
    assert doc["schema_version"] == rowmodel.SCHEMA_VERSION
    assert set(doc["records"]) == {m.type for m in MODELS}
    assert run_cli("schema", "nope").exit_code == 2


def test_schema_of_every_row_type_a_listing_writes():
    """``memctl schema TYPE`` answers for every value a row's ``type`` may
    take: usage's last row is ``{"type": "total"}``, a purpose record, and
    was refused as an unknown record type."""
    doc = orjson.loads(run_cli("schema").stdout_bytes)
    for name, rec in doc["records"].items():
        for t in rec["schema"]["properties"]["type"].get("enum", [name]):
            r = run_cli("schema", t)
            assert r.exit_code == 0, (t, r.stderr)
            assert orjson.loads(r.stdout_bytes) == rec["schema"], t
    assert orjson.loads(run_cli("schema", "total").stdout_bytes)["$id"].endswith("/purpose")


def test_output_doc_field_tables_match_the_row_model():
    """docs/OUTPUT.md's field tables are generated from the row model: no drift."""
    import subprocess
    import sys

    from .conftest import REPO

    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    for m in MODELS:
        assert f"### `{m.type}` ({m.command})" in text
        for f in m.fields:
            assert f"| `{f.name}` |" in text
    assert f"**{rowmodel.SCHEMA_VERSION}**" in text
    assert f"### Schema version {rowmodel.SCHEMA_VERSION}" in text   # the changes are listed


def test_an_error_mid_stream_still_ends_one_json_document(config_dir, monkeypatch):
    """facts --json streams; a database error after the first bytes ends the
    document as valid JSON carrying the error (and no second document)."""
    from lecode_memctl.core import factview
    from lecode_memctl.core.errors import StoreCorrupt

    from .test_audit import build_planted

    store = build_planted(config_dir)
    # a fact that is no plain row (its current revision has no row) fails
    # where the listing reaches it, as a page that cannot be read would

    def unreadable(group):  # noqa: ANN001,ANN202
        raise StoreCorrupt("facts database: a page cannot be read (test)")

    monkeypatch.setattr(factview, "fact_from_group", unreadable)
    r = run_cli("--store", str(store), "facts", "--json")
    assert r.exit_code == 5
    doc = orjson.loads(r.stdout_bytes)    # exactly one document
    assert doc["type"] == "facts" and doc["error"]["exit_code"] == 5
    assert r.stderr.startswith("memctl: error: ") and r.stderr.count("\n") == 1


def _raw_sqlite_error() -> Exception:
    import sqlite3

    return sqlite3.OperationalError("no such table: exclusions")


@pytest.mark.parametrize(("make", "code", "status", "message"), [
    (_raw_sqlite_error, "store_corrupt", 5, "database error: no such table: exclusions"),
    (lambda: PermissionError(13, "Permission denied", "/x/sessions/s.jsonl"), "store_corrupt", 5,
     "/x/sessions/s.jsonl: Permission denied"),
    (lambda: RuntimeError("a bug (test)"), "internal", 70, "internal error: RuntimeError: a bug (test)"),
], ids=["sqlite", "oserror", "internal"])
@pytest.mark.parametrize("argv", [["facts", "--json"], ["facts", "--all", "--format", "json"]])
def test_any_error_mid_stream_ends_the_document_as_main_reports_it(config_dir, monkeypatch, argv,
                                                                   make, code, status, message):
    """Not only a MemctlError: an error the core let through unclassified
    (SQLite's "no such table"), a file's OSError or a bug, raised after the
    document began, ended up inside the facts array as a second document,
    and the first was never closed.  The document now ends with the error
    main reports (code, message, exit status), and main adds none."""
    from lecode_memctl.core import factview

    from .test_audit import build_planted

    store = build_planted(config_dir)

    def failing(group):  # noqa: ANN001,ANN202
        raise make()

    monkeypatch.setattr(factview, "fact_from_group", failing)
    r = run_cli("--store", str(store), *argv)
    assert r.exit_code == status, r.stderr
    doc = orjson.loads(r.stdout_bytes)    # exactly one document
    assert doc["type"] == "facts" and doc["facts"] == [] and doc["next_offset"] is None
    assert doc["error"] == {"code": code, "message": message, "exit_code": status}
    assert r.stderr == f"memctl: error: {message}\n"


@pytest.mark.parametrize("argv", [["validate"], ["facts"], ["facts", "--format", "jsonl"],
                                  ["history", "{fid}"], ["context"],
                                  ["read", "2026-03-01-alpha", "1", "3"], ["grep", "tabs"],
                                  ["export", "-o", "{tmp}/b.tar"]])
def test_lock_wait_reaches_the_snapshot_of_a_live_database(built, monkeypatch, argv, tmp_path):
    """With a live writer (an open -wal), a read takes a private snapshot and waits
    --lock-wait seconds for it to be stable, not the fixed 5 s busy timeout."""
    from lecode_memctl.core import facts as facts_mod
    from lecode_memctl.core.errors import StoreBusy
    from lecode_memctl.core.facts import FactStore

    project, store, ids = built
    seen = []

    def busy_snapshot(path, wal, timeout, made=None):  # noqa: ANN001,ANN202
        seen.append(timeout)
        raise StoreBusy(f"{path}: kept changing (test)")

    monkeypatch.setattr(facts_mod, "private_snapshot", busy_snapshot)
    writer = FactStore(store.facts_db, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    try:
        writer.add("a fact a live writer has not checkpointed")
        argv = [a.replace("{fid}", ids[0]).replace("{tmp}", str(tmp_path)) for a in argv]
        r = run_cli("-C", str(project), *argv, "--lock-wait", "0.25")
        assert r.exit_code == 6, (r.exit_code, r.stderr)
        assert seen and set(seen) == {0.25}
    finally:
        writer.close()


@pytest.mark.parametrize("argv", [["secrets", "--json"], ["redact", "--yes", "--json"]])
def test_lock_wait_reaches_the_snapshot_in_secrets_and_redact(built, monkeypatch, argv):
    """secrets reads the facts through a snapshot: with --lock-wait it waits that
    long; a database that stayed busy is the busy store's exit 6 for secrets
    of one store (as for validate; before 2026-12-07 the scan was "not OK",
    exit 1, as if the store hid a value), and redact refuses to change
    anything, exit 6 (exit 5, a corrupt store, before 2026-12-05), as every
    other read of it."""
    from lecode_memctl.core import facts as facts_mod
    from lecode_memctl.core.errors import StoreBusy
    from lecode_memctl.core.facts import FactStore

    project, store, _ids = built
    seen = []

    def busy_snapshot(path, wal, timeout, made=None):  # noqa: ANN001,ANN202
        seen.append(timeout)
        raise StoreBusy(f"{path}: kept changing (test)")

    monkeypatch.setattr(facts_mod, "private_snapshot", busy_snapshot)
    writer = FactStore(store.facts_db, on_connect=lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
    try:
        writer.add("a fact a live writer has not checkpointed")
        r = run_cli("-C", str(project), *argv, "--jobs", "1", "--lock-wait", "0.25")
        assert r.exit_code == 6, (r.exit_code, r.stderr)
        assert "kept changing" in r.stdout + r.stderr
        assert seen and set(seen) == {0.25}
    finally:
        writer.close()


def test_redact_waits_lock_wait_for_the_database_lock(tmp_path, monkeypatch):
    """redact's writes (forgetting a fact whose text holds a value, cleaning the
    database) wait --lock-wait seconds for the lock, then exit 6; not a fixed 5 s."""
    from lecode_memctl.core import redact as redact_mod
    from lecode_memctl.core.facts import FactStore

    from . import secretstore

    timeouts: list[tuple[str, float]] = []
    real_init, real_clean = FactStore.__init__, redact_mod.clean_database

    def init(self, path, *, busy_timeout=5.0, **kw):  # noqa: ANN001,ANN202
        timeouts.append(("facts", busy_timeout))
        real_init(self, path, busy_timeout=busy_timeout, **kw)

    def clean(store, timeout=5.0):  # noqa: ANN001,ANN202
        timeouts.append(("clean", timeout))
        real_clean(store, timeout)

    monkeypatch.setattr(FactStore, "__init__", init)
    monkeypatch.setattr(redact_mod, "clean_database", clean)
    p = secretstore.build(tmp_path, seed=7)
    timeouts.clear()
    db = sqlite3.connect(p.store / "facts.sqlite3", timeout=0)
    db.execute("BEGIN IMMEDIATE")
    try:
        r = run_cli("--store", str(p.store), "redact", "--yes", "--jobs", "1", "--lock-wait", "0.1")
        assert r.exit_code == 6, (r.exit_code, r.stderr)
    finally:
        db.rollback()
        db.close()
    assert timeouts and {t for _k, t in timeouts} == {0.1}
    timeouts.clear()
    r = run_cli("--store", str(p.store), "redact", "--yes", "--jobs", "1", "--lock-wait", "4.5")
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    assert ("clean", 4.5) in timeouts and {t for _k, t in timeouts} == {4.5}


# ---------------------------------------------------------------- grep, secrets, redact,
# export, verify (built beside the contract, joined in schema version 3)

NEWER = [
    # (argv, record type of the rows, JSONL extra row type after each store, rows of --json)
    (["grep", "e"], "match", None, lambda d: d["hits"]),
    (["grep", "e", "-C", "1", "--include-hidden"], "match", None, lambda d: d["hits"]),
    (["grep", "e", "-c"], "match_count", None, lambda d: d["sessions"]),
    (["grep", "e", "-l"], "match_count", None, lambda d: d["sessions"]),
    (["secrets"], "secret", "scan", lambda d: d["findings"]),
]


@pytest.fixture
def planted(tmp_path):
    from . import secretstore

    return secretstore.build(tmp_path, seed=11)


def _leaks(planted, data: bytes) -> bool:
    return any(v.encode() in data for v in planted.values.values())


@pytest.mark.parametrize("argv,rtype,after,rows_of", NEWER,
                         ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_newer_commands_json_jsonl_csv_tsv_have_the_same_fields(planted, argv, rtype, after,
                                                                rows_of):
    from lecode_memctl.cli.output import safe

    def run(*extra):
        r = run_cli("--store", str(planted.store), *argv, *extra)
        assert r.exit_code in (0, 1), (argv, extra, r.exit_code, r.stderr)
        if argv[0] == "secrets":
            assert not _leaks(planted, r.stdout_bytes), (argv, extra)   # never a value
        return r

    model = next(m for m in MODELS if m.type == rtype)
    schema = _schema(rtype)
    doc = orjson.loads(run("--json").stdout_bytes)
    assert doc["type"] == argv[0] and doc["schema_version"] == rowmodel.SCHEMA_VERSION
    json_rows = rows_of(doc)
    assert json_rows, argv
    for row in json_rows:
        assert list(row) == model.names
        _check_against_schema(row, schema)
    lines = [orjson.loads(x) for x in run("--format", "jsonl").stdout_bytes.splitlines()]
    assert lines and all(isinstance(x, dict) and x.get("type") for x in lines)
    if after:
        assert lines[-1]["type"] == after
        _check_against_schema(lines[-1], _schema(after))
        assert [x for x in lines if x["type"] == after] == doc["projects"]
        lines = [x for x in lines if x["type"] != after]
    assert lines == json_rows
    for fmt, delim in (("csv", ","), ("tsv", "\t")):
        table = list(csv.reader(io.StringIO(run("--format", fmt).stdout), delimiter=delim))
        assert table[0] == model.names, (fmt, table[0])
        assert table[1:] == [[safe(rowmodel.flat(r[k]), keep_newlines=True) for k in model.names]
                             for r in json_rows]


@pytest.mark.parametrize("argv", sorted({tuple(a[0]) for a in NEWER}), ids=" ".join)
def test_newer_commands_take_format_table_as_their_text_report(planted, argv):
    """grep and secrets, like validate: --format table is their text report
    (also named human, the default), not a usage error."""
    def run(*extra):
        return run_cli("--store", str(planted.store), *argv, *extra)

    base = run()
    for fmt in ("table", "human"):
        r = run("--format", fmt)
        assert (r.exit_code, r.stdout) == (base.exit_code, base.stdout), (fmt, r.stderr)
    assert base.exit_code in (0, 1) and base.stdout


def test_newer_documents_are_typed_versioned_and_timed(planted, tmp_path):
    """redact --dry-run, export and verify: one typed document each, its rows typed
    and valid against 'memctl schema', times RFC 3339 UTC Z, never a value."""
    store = str(planted.store)

    def doc_of(*argv, code=(0,)):
        r = run_cli(*argv, "--json")
        assert r.exit_code in code, (argv, r.exit_code, r.stderr)
        assert not _leaks(planted, r.stdout_bytes), argv
        d = orjson.loads(r.stdout_bytes)
        assert d["type"] == argv[2 if argv[0] == "--store" else 0]
        assert d["schema_version"] == rowmodel.SCHEMA_VERSION
        return d

    plan = doc_of("--store", store, "redact", "--dry-run")["plan"]
    assert plan["files"]
    for row in plan["files"]:
        assert list(row) == rowmodel.REWRITE.names
        _check_against_schema(row, _schema("rewrite"))
    bundle = tmp_path / "b.tar"
    exp = doc_of("--store", store, "export", "--output", str(bundle))
    assert re.match(TIME_PATTERN, exp["exported"])
    ver = doc_of("verify", str(bundle))
    assert ver["ok"] is True and ver["facts"] and ver["findings"] is not None
    for key, rtype in (("facts", "fact_check"), ("findings", "finding")):
        model = next(m for m in MODELS if m.type == rtype)
        for row in ver[key]:
            assert list(row) == model.names
            _check_against_schema(row, _schema(rtype))
    # a changed member gives typed problem rows
    import tarfile

    bad = tmp_path / "bad.tar"
    with tarfile.open(bundle) as src, tarfile.open(bad, "w") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.startswith("store/notes/") and data:
                data = data + b"tampered\n"
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    ver = doc_of("verify", str(bad), code=(1,))
    assert ver["problems"]
    for row in ver["problems"]:
        assert list(row) == rowmodel.PROBLEM.names
        _check_against_schema(row, _schema("problem"))


def _documented_fields(doc_type: str) -> list[str]:
    """The field names of the table under ``### `TYPE` document`` in docs/OUTPUT.md."""
    from .conftest import REPO

    text = (REPO / "docs" / "OUTPUT.md").read_text()
    head = f"### `{doc_type}` document"
    assert head in text, head
    body = text.split(head, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", body, re.M)


def test_every_document_is_typed_versioned_and_documented(built, tmp_path):
    """recall, read, where, context, correct, forget and show/log/notes NAME:
    each --json document has "type" and "schema_version" first, and its
    fields are the ones docs/OUTPUT.md lists for it (issue 12.1)."""
    project, store, ids = built
    fid = ids[0]
    docs: dict[str, list[dict]] = {}

    def doc_of(*argv, code=(0,)):
        r = run_cli("-C", str(project), *argv, "--json")
        assert r.exit_code in code, (argv, r.exit_code, r.stderr)
        d = orjson.loads(r.stdout_bytes)
        assert list(d)[:2] == ["type", "schema_version"], (argv, list(d))
        assert d["schema_version"] == rowmodel.SCHEMA_VERSION
        docs.setdefault(d["type"], []).append(d)
        return d

    assert len(doc_of("recall", fid)["source_text"]) > 0
    assert doc_of("read", "2026-03-01-alpha", "1", "3")["status"] == "valid"
    r = run_cli("-C", str(project), "read", "2026-03-01-alpha", "1", "3", "--all")
    lines = [orjson.loads(x) for x in r.stdout_bytes.splitlines()]
    assert lines and all(list(x)[:2] == ["type", "schema_version"] for x in lines)
    doc_of("where")
    doc_of("context")
    doc_of("forget", fid, "--dry-run")
    doc_of("show")
    doc_of("notes", "wide")
    doc_of("log", outkit.DATE)
    # a correction from a user message (seq 3), then a forget
    fixed = "Deploys happen on Fridays, after noon."
    other = ids[1]
    rec = orjson.loads(run_cli("-C", str(project), "recall", other, "--json").stdout_bytes)
    doc_of("correct", other, str(rec["revision"]), "2026-03-01-alpha", "3", "3", fixed, "--yes")
    doc_of("forget", fid, "--yes")
    # read of a hidden range (the forgotten fact's evidence) still exits 4 with its document
    hidden = doc_of("read", "2026-03-01-alpha", "1", "1", code=(4,))
    assert hidden["status"] == "hidden"
    assert docs["recall"][0]["type"] == "recall"
    for doc_type in ("recall", "read", "where", "context", "correct", "forget", "markdown"):
        listed = _documented_fields(doc_type)
        seen: set[str] = set()
        for d in docs[doc_type]:
            assert set(d) <= set(listed), (doc_type, sorted(set(d) - set(listed)))
            seen |= set(d)
        assert listed[:2] == ["type", "schema_version"]
        # every documented field appears in some document (recall's not-valid
        # about_revision is checked in test_facts_cli)
        assert set(listed) - seen <= {"about_revision", "seq"}, (doc_type, set(listed) - seen)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("argv", [["grep", "x", "--session", "nosuch"],
                                  ["usage", "--session", "nosuch"],
                                  ["facts", "--session", "nosuch"]],
                         ids=["grep", "usage", "facts"])
def test_an_error_before_the_first_row_leaves_csv_empty(built, argv, fmt):
    """CSV and TSV print nothing on stdout when the command fails before its
    first row (an unknown --session): the header came first, so a script
    reading the output took a header and nothing for an empty listing."""
    project, _store, _ids = built
    r = run_cli("-C", str(project), *argv, "--format", fmt)
    assert r.exit_code == 3, r.stderr
    assert r.stdout == "", r.stdout
