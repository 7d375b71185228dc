"""The output contract on stores the other contract tests do not build: the
demo store damaged in small ways (a transcript line that is not JSON, a fact
whose stored digest no longer matches, a transcript of odd Unicode: a lone
surrogate escaped in JSON, U+2028, NUL, bidi marks, a 10 kB line), and an
empty store; and the values docs/OUTPUT.md names for a few fields."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3

import orjson
import pytest

from lecode_memctl.cli.output import safe
from lecode_memctl.core import rowmodel
from lecode_memctl.core.rowmodel import MODELS

from .conftest import REPO, run_cli
from .test_output_contract import _check_against_schema, _schema


def _damaged_demo(base):
    from lecode_memctl.core.demo import build_demo

    demo = build_demo(base)
    st = demo.store.path
    beta = st / "sessions" / "demo-beta.jsonl"
    lines = beta.read_bytes().split(b"\n")
    lines.insert(2, b"this is {not json")
    beta.write_bytes(b"\n".join(lines))
    con = sqlite3.connect(st / "facts.sqlite3")
    con.execute("UPDATE source_refs SET digest = '00' || substr(digest, 3) "
                "WHERE fact_id = ? AND revision = 1", (demo.facts["verified"],))
    con.commit()
    con.close()
    odd = [{"seq": 0, "type": "session", "format": 1, "session_id": "demo-odd",
            "project": st.name, "created": "2026-12-02T09:00:00+00:00"},
           {"seq": 1, "type": "message", "role": "user", "content": "lone \ud800 surrogate e"},
           {"seq": 2, "type": "message", "role": "user", "content": "line\u2028sep e\u2029para"},
           {"seq": 3, "type": "message", "role": "user", "content": "nul \u0000 here e"},
           {"seq": 4, "type": "message", "role": "user", "content": "rtl \u202e e \u200f \u2066x\u2069"},
           {"seq": 5, "type": "message", "role": "user", "content": ("e" + "x" * 99) * 100},
           {"seq": 6, "type": "message", "role": "user", "content": 'tab\tnew\nline e, "q",c'}]
    with open(st / "sessions" / "demo-odd.jsonl", "w", encoding="utf-8") as fh:
        for rec in odd:
            fh.write(json.dumps(rec, ensure_ascii=True) + "\n")
    (st / "notes" / "odd \u202e name.md").write_text("e\u2028x\x00y\n", encoding="utf-8")
    return demo


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        from .conftest import isolate

        isolate(mp, tmp_path_factory.mktemp("probe"))
        yield _damaged_demo(tmp_path_factory.mktemp("demo") / "d")


LISTINGS = [
    (["facts"], "fact", lambda d: d["facts"], None),
    (["facts", "--status", "stale"], "fact", lambda d: d["facts"], None),
    (["sessions"], "session", lambda d: d, None),
    (["notes"], "note", lambda d: d, None),
    (["projects"], "project", lambda d: d, None),
    (["search", "e"], "hit", lambda d: d["hits"], None),
    (["usage"], "purpose", lambda d: [*d["purposes"], d["total"]], None),
    (["validate", "--deep"], "finding", lambda d: d["findings"], "summary"),
    (["grep", "e", "--include-hidden", "-C", "1"], "match", lambda d: d["hits"], None),
    (["grep", "e", "-c"], "match_count", lambda d: d["sessions"], None),
    (["secrets"], "secret", lambda d: d["findings"], "scan"),
]


def _same_rows_everywhere(glob, argv, rtype, rows_of, after):
    def out(*extra):
        r = run_cli(*glob, *argv, *extra)
        assert r.exit_code in (0, 1), (argv, extra, r.exit_code, r.stderr)
        assert "Traceback" not in r.stderr
        return r

    doc = orjson.loads(out("--json").stdout_bytes)
    rows = rows_of(doc)
    model = next(m for m in MODELS if m.type == rtype)
    for row in rows:
        assert list(row) == model.names, (argv, list(row))
        _check_against_schema(row, _schema(rtype))
    lines = [orjson.loads(x) for x in out("--format", "jsonl").stdout_bytes.splitlines()]
    if after:
        for x in (x for x in lines if x["type"] == after):
            _check_against_schema(x, _schema(after))
        lines = [x for x in lines if x["type"] != after]
    assert lines == rows, argv
    for fmt, delim in (("csv", ","), ("tsv", "\t")):
        table = list(csv.reader(io.StringIO(out("--format", fmt).stdout, newline=""),
                                delimiter=delim))
        assert table[0] == model.names, (argv, fmt)
        assert table[1:] == [[safe(rowmodel.flat(r[k]), keep_newlines=True) for k in model.names]
                             for r in rows], (argv, fmt)
    return rows


@pytest.mark.parametrize("argv,rtype,rows_of,after", LISTINGS,
                         ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_a_damaged_store_gives_the_same_rows_in_every_format(damaged, argv, rtype, rows_of, after):
    glob = ["--config-dir", str(damaged.config_dir), "-C", str(damaged.project)]
    rows = _same_rows_everywhere(glob, argv, rtype, rows_of, after)
    assert rows or argv == ["secrets"], argv     # (the demo holds no credential)


@pytest.mark.parametrize("argv,rtype,rows_of,after", LISTINGS,
                         ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_an_empty_store_gives_a_header_and_no_rows(tmp_path, config_dir, argv, rtype, rows_of,
                                                   after):
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    glob = ["--store", str(empty)]
    rows = _same_rows_everywhere(glob, argv, rtype, rows_of, after)
    assert [r for r in rows if r["type"] not in ("total", "finding")] == []
    # an empty listing is exit 0, but grep's (nothing matched: 1)
    r = run_cli(*glob, *argv, "--format", "jsonl")
    assert r.exit_code == (1 if argv[0] == "grep" else 0), (argv, r.exit_code)


def _documented_meaning(doc_type: str, field: str) -> str:
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    body = text.split(f"### `{doc_type}` document", 1)[1].split("\n#", 1)[0]
    m = re.search(rf"^\| `{field}` \| (.*) \|$", body, re.M)
    assert m, (doc_type, field)
    return m.group(1)


def test_where_sources_are_the_values_the_document_names(tmp_path, config_dir, monkeypatch):
    """docs/OUTPUT.md's `where` table names the values of config_dir_source
    and slug_source; each value memctl prints is one of those it names."""
    store = tmp_path / "memory" / "proj-0123456789ab"
    store.mkdir(parents=True)
    seen_cfg, seen_slug = set(), set()

    def where(*glob, env=None):
        r = run_cli(*glob, "where", "--json", env=env)
        assert r.exit_code == 0, r.stderr
        d = orjson.loads(r.stdout_bytes)
        seen_cfg.add(d["config_dir_source"])
        seen_slug.add(d["slug_source"])

    where("--store", str(store))                                         # LECODE_CONFIG_DIR
    where("--config-dir", str(tmp_path / "c"), "--store", str(store))    # the option
    where("--store", str(store), "--slug", "other-0123456789ab")         # --slug
    monkeypatch.delenv("LECODE_CONFIG_DIR")
    where("--store", str(store), env={"XDG_CONFIG_HOME": str(tmp_path / "x")})
    where("--store", str(store))                                         # HOME
    cfg_doc = _documented_meaning("where", "config_dir_source")
    slug_doc = _documented_meaning("where", "slug_source")
    assert {v for v in seen_cfg if f"`{v}`" not in cfg_doc} == set(), cfg_doc
    assert {v for v in seen_slug if f"`{v}`" not in slug_doc} == set(), slug_doc


def test_a_setting_source_is_the_config_file_path_as_documented(tmp_path, config_dir):
    """A setting's source is the absolute path of config.toml (the config
    document's config_file) or "default"; the row model's description (the
    field table, 'memctl schema setting') said "config.toml or default",
    a value memctl never prints."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text("[memory]\nmax_bytes = 1000\n")
    store = tmp_path / "s"
    store.mkdir()
    doc = orjson.loads(run_cli("--store", str(store), "config", "--json").stdout_bytes)
    sources = {row["key"]: row["source"] for row in doc["settings"]}
    assert sources["memory.max_bytes"] == doc["config_file"] == str(config_dir / "config.toml")
    assert sources["memory.enabled"] == "default"
    desc = _schema("setting")["properties"]["source"]["description"]
    assert "path" in desc and "default" in desc, desc
    assert f"| `source` | string |  | {desc} |" in (REPO / "docs" / "OUTPUT.md").read_text()


@pytest.mark.parametrize("fmt", ["xx", "JSONL", "github"])
def test_migrate_legacy_names_its_own_formats_for_an_unknown_one(tmp_path, config_dir, fmt):
    """migrate-legacy takes text, table, json, jsonl, csv and tsv, no tabulate
    name; a name it does not know was answered with the listings' message
    ("... or a tabulate format name (plain, github, grid, ...)"), which
    offers names it then refuses ('--format github': another message)."""
    project = tmp_path / "p"
    project.mkdir()
    r = run_cli("-C", str(project), "migrate-legacy", "--dry-run", "--format", fmt)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "tabulate" not in r.stderr, r.stderr
    assert "text, table, json, jsonl, csv or tsv" in r.stderr, r.stderr


def test_usage_lists_a_transcript_without_a_complete_header_as_refused(damaged, tmp_path):
    """An empty transcript, or one whose header line has no newline, is
    refused by every reader (FORMAT.md: refused_header; 'memctl sessions'
    lists it refused, grep lists it in skipped); usage's help says such
    sessions are "skipped and listed", but usage neither counted nor listed
    them: sessions != sessions_counted + refused_sessions."""
    import shutil

    store = tmp_path / "s"
    shutil.copytree(damaged.store.path, store)
    (store / "sessions" / "empty-z.jsonl").write_bytes(b"")
    (store / "sessions" / "torn-w.jsonl").write_bytes(b'{"seq":0,"type":"session"')
    glob = ["--store", str(store), "--slug", damaged.store.slug]
    refused = {r["id"] for r in orjson.loads(run_cli(*glob, "sessions", "--json").stdout_bytes)
               if r["state"] == "refused"}
    assert {"empty-z", "torn-w"} <= refused
    doc = orjson.loads(run_cli(*glob, "usage", "--json").stdout_bytes)
    assert set(doc["refused_sessions"]) == refused, doc["refused_sessions"]
    assert doc["sessions"] == doc["sessions_counted"] + len(doc["refused_sessions"])


def test_the_facts_documents_learning_members_are_documented(damaged):
    """'memctl facts --help' sends to docs/OUTPUT.md for the fields; the
    document's learning object (the newest learning event) has members the
    page did not name."""
    glob = ["--config-dir", str(damaged.config_dir), "-C", str(damaged.project)]
    doc = orjson.loads(run_cli(*glob, "facts", "--json").stdout_bytes)
    assert doc["learning"] is not None
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `facts` | "))
    m = re.search(r'"learning": \{([^}]*)\}', row)
    assert m, row
    assert re.findall(r'"([a-z_]+)"', m.group(1)) == list(doc["learning"]), row


def test_the_validate_documents_totals_members_are_documented(damaged):
    """'memctl validate --help': "The fields are listed in docs/OUTPUT.md";
    the document's totals object ({error, warning, info, ignored}) was only
    named there, without its members."""
    glob = ["--config-dir", str(damaged.config_dir), "-C", str(damaged.project)]
    doc = orjson.loads(run_cli(*glob, "validate", "--json").stdout_bytes)
    assert doc["stores"] == len(doc["projects"])
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `validate` | "))
    m = re.search(r'"totals": \{([^}]*)\}', row)
    assert m, row
    assert re.findall(r'"([a-z_]+)"', m.group(1)) == list(doc["totals"]), row
    assert sum(doc["totals"][k] for k in ("error", "warning", "info")) == len(doc["findings"])


def test_an_empty_list_is_an_empty_cell_as_documented(damaged):
    """A list's cell is decided by its items (joined with ';', else compact
    JSON), so an empty list, even of a list-of-objects field (history's
    provenance of a source-validated revision), is an empty cell, the cell
    of null: docs/OUTPUT.md's flat encoding now says so, where it read as if
    provenance, a list of objects, were always compact JSON ('[]')."""
    glob = ["--config-dir", str(damaged.config_dir), "-C", str(damaged.project)]
    fid = damaged.facts["preference"]
    rows = orjson.loads(run_cli(*glob, "history", fid, "--json").stdout_bytes)["revisions"]
    assert rows and all(r["provenance"] == [] for r in rows)
    table = list(csv.DictReader(io.StringIO(run_cli(*glob, "history", fid, "--format",
                                                    "csv").stdout, newline="")))
    assert [t["provenance"] for t in table] == [""] * len(rows)
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    para = text.split("- **Flat encoding in CSV/TSV.**", 1)[1].split("\n- **", 1)[0]
    assert "an empty list" in " ".join(para.split()), para


def test_migrate_legacy_result_is_null_whenever_nothing_was_applied(tmp_path, config_dir):
    """With nothing left to copy, 'migrate-legacy --yes' prints the plan
    (dry_run false, applied false) with every item's result null; the field
    said "null in a dry run", so a script took null for "not a dry run" as a
    missing result.  The description now says: null unless applied."""
    from lecode_memctl.core.demo import build_demo

    demo = build_demo(tmp_path / "d")
    glob = ["--config-dir", str(demo.config_dir), "-C", str(demo.project)]
    first = orjson.loads(run_cli(*glob, "migrate-legacy", "--yes", "--json").stdout_bytes)
    assert first["applied"] is True and all(i["result"] for i in first["items"])
    again = orjson.loads(run_cli(*glob, "migrate-legacy", "--yes", "--json").stdout_bytes)
    assert (again["dry_run"], again["applied"]) == (False, False)
    assert [i["result"] for i in again["items"]] == [None] * len(again["items"])
    desc = _schema("item")["properties"]["result"]["description"]
    assert "applied" in desc.split(";")[0], desc


def test_list_codes_gives_both_severities_of_every_code_reported_at_two(tmp_path, config_dir):
    """session.missing_header is a WARNING when the transcript changed in the
    last 60 s and an ERROR otherwise (FORMAT.md, its meaning), as
    session.torn_tail is; 'validate --list-codes' said "warning or error"
    for torn_tail only and plain "error" for missing_header, so a script
    taking the severities a code can have from it missed the warning."""
    from lecode_memctl.core.demo import build_demo

    demo = build_demo(tmp_path / "d")
    (demo.store.path / "sessions" / "fresh-q.jsonl").write_bytes(b"")   # changed just now
    glob = ["--config-dir", str(demo.config_dir), "-C", str(demo.project)]
    seen = {(f["code"], f["severity"]) for f in orjson.loads(
        run_cli(*glob, "validate", "--json").stdout_bytes)["findings"]}
    assert ("session.missing_header", "warning") in seen
    codes = {r["code"]: r["severity"] for r in orjson.loads(
        run_cli("validate", "--list-codes", "--json").stdout_bytes)}
    for code, severity in seen:
        assert severity in codes[code].split(" or "), (code, severity, codes[code])
    assert codes["session.missing_header"] == codes["session.torn_tail"] == "warning or error"


def test_where_kind_is_one_of_the_values_the_document_names(damaged, tmp_path):
    """The where table said kind is "a git checkout, a worktree, not a git
    checkout, ..."; memctl prints main checkout, linked worktree, submodule,
    not a git checkout, or "store given with --store"."""
    kinds = set()
    for glob in (["-C", str(damaged.project)], ["-C", str(damaged.worktree)],
                 ["-C", str(tmp_path)], ["--store", str(damaged.store.path)]):
        r = run_cli("--config-dir", str(damaged.config_dir), *glob, "where", "--json")
        assert r.exit_code == 0, r.stderr
        kinds.add(orjson.loads(r.stdout_bytes)["kind"])
    assert {"main checkout", "linked worktree", "not a git checkout",
            "store given with --store"} <= kinds
    doc = _documented_meaning("where", "kind")
    assert {k for k in kinds if f"`{k}`" not in doc} == set(), doc


def test_facts_total_is_documented_for_session(damaged):
    """facts --json's total: null with --status, --query, --since, --until;
    with --session alone it is the number of that session's facts (the
    suite's test_facts_session_check relies on it), where the page said
    "null when a filter is given" and lists --session among the filters."""
    glob = ["--config-dir", str(damaged.config_dir), "-C", str(damaged.project)]

    def total(*a):
        return orjson.loads(run_cli(*glob, "facts", *a, "--json").stdout_bytes)["total"]

    assert total("--session", "demo-alpha") == len(orjson.loads(run_cli(
        *glob, "facts", "--session", "demo-alpha", "--json").stdout_bytes)["facts"]) > 0
    for a in (["--status", "valid"], ["--query", "e"], ["--since", "1d"], ["--until", "1d"]):
        assert total(*a) is None, a
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `facts` | "))
    assert "`total` is null when a filter is given" not in row
    assert "`--session`" in row.split("`total`", 1)[1].split(";")[0], row


def test_schema_is_documented_as_json_without_a_json_option():
    """OUTPUT.md's table of each command's '--json' document has a row for
    schema, which takes no --json (usage error, exit 2): it prints JSON
    always.  The row now says so."""
    assert run_cli("schema", "--json").exit_code == 2
    doc = orjson.loads(run_cli("schema").stdout_bytes)
    assert list(doc) == ["schema_version", "records"]
    text = (REPO / "docs" / "OUTPUT.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `schema` | "))
    assert "no `--json`" in row, row
