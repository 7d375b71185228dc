"""Evidence copies work under any name (issue 11, point 1).

``cp -a STORE /evidence/case-42 && memctl --store /evidence/case-42 facts`` must
show what the original shows: with --store the slug comes from --slug, else
from the transcript headers, else from the directory name, and 'where' says
which.  The copy gives the same statuses, digests and findings as the original,
over the demo store and over a store with every finding planted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.layout import Store, store_given

from .conftest import run_cli, tree_hash
from .test_audit import build_planted


def _cp_a(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


def _facts(store: Path, *extra: str) -> tuple[int, list[dict]]:
    r = run_cli("--store", str(store), *extra, "facts", "--json", "--all")
    doc = orjson.loads(r.stdout)   # output schema 2: the facts document, or the error in it
    return r.exit_code, (doc if "error" in doc else doc["facts"])


def _validate(store: Path, *extra: str) -> tuple[int, list[dict], dict]:
    r = run_cli("--store", str(store), "validate", "--deep", "--json", *extra)
    doc = orjson.loads(r.stdout)
    (proj,) = doc["projects"]
    findings = sorted(doc["findings"], key=lambda f: orjson.dumps(f, option=orjson.OPT_SORT_KEYS))
    return r.exit_code, findings, proj


def _same_everywhere(orig: Path, copy: Path, facts_exit: int = 0) -> None:
    code_o, facts_o = _facts(orig)
    code_c, facts_c = _facts(copy)
    assert code_o == code_c == facts_exit
    assert facts_c == facts_o
    assert facts_o, "the store under test has facts"
    vo, fo, po = _validate(orig)
    vc, fc, pc = _validate(copy)
    assert (vc, fc) == (vo, fo)
    assert pc["facts"] == po["facts"] and pc["project"] == po["project"]


def test_demo_copy_under_any_name_reads_like_the_original(demo_template, tmp_path):
    orig = demo_template.store.path
    before = tree_hash(orig)
    copy = _cp_a(orig, tmp_path / "evidence" / "case-42")
    copied = tree_hash(copy)
    _same_everywhere(orig, copy)
    statuses = {f["fact_id"]: f["status"] for f in _facts(copy)[1]}
    assert "valid" in statuses.values() and "hidden" not in statuses.values()
    # direct recall: the same digest, exit 0 (it was 4: refused_project)
    ro = run_cli("--store", str(orig), "read", "demo-alpha", "0", "20", "--json")
    rc = run_cli("--store", str(copy), "read", "demo-alpha", "0", "20", "--json")
    assert ro.exit_code == rc.exit_code == 0, rc.stderr
    assert orjson.loads(rc.stdout)["source"] == orjson.loads(ro.stdout)["source"]
    assert tree_hash(orig) == before and tree_hash(copy) == copied


def test_planted_copy_gives_the_same_findings(config_dir, tmp_path):
    orig = build_planted(config_dir)
    copy = _cp_a(orig, tmp_path / "evidence" / "anything goes")
    # 'facts' lists the dangling current revision as a hidden row alike in both
    _same_everywhere(orig, copy, facts_exit=0)
    _code, fc, pc = _validate(copy)
    assert sum(pc["facts"].values()) == pc["facts_total"] > 0
    refused = [f for f in fc if f["code"] == "session.refused"]
    assert [(f["session_id"], f["reason"]) for f in refused] == [("foreign", "refused_project")]


def test_where_says_where_the_slug_came_from(demo_template, tmp_path):
    slug = demo_template.store.slug
    copy = _cp_a(demo_template.store.path, tmp_path / "case-42")
    doc = orjson.loads(run_cli("--store", str(copy), "where", "--json").stdout)
    assert (doc["slug"], doc["slug_source"]) == (slug, "headers")
    assert "all 3 agree" in doc["slug_detail"]
    r = run_cli("--store", str(copy), "where")
    assert f"slug:          {slug}  (from the transcript headers" in r.stdout
    other = "other-0123456789ab"
    doc = orjson.loads(run_cli("--store", str(copy), "--slug", other, "where", "--json").stdout)
    assert (doc["slug"], doc["slug_source"]) == (other, "option")
    empty = tmp_path / "empty-store"
    empty.mkdir()
    doc = orjson.loads(run_cli("--store", str(empty), "where", "--json").stdout)
    assert (doc["slug"], doc["slug_source"]) == ("empty-store", "directory")
    doc = orjson.loads(run_cli("where", "--json").stdout)
    assert doc["slug_source"] == "project"


def test_slug_option_is_what_transcripts_are_checked_against(demo_template, tmp_path):
    copy = _cp_a(demo_template.store.path, tmp_path / "case-42")
    code, doc = _facts(copy, "--slug", "other-0123456789ab")
    assert code == 0
    assert {(f["status"], f["reason"]) for f in doc} == {("hidden", "refused_project")}
    r = run_cli("--store", str(copy), "--slug", "other-0123456789ab", "read", "demo-alpha", "0", "3")
    assert r.exit_code == 4 and "another project" in r.stderr
    code, doc = _facts(copy, "--slug", demo_template.store.slug)
    assert code == 0 and "valid" in {f["status"] for f in doc}


@pytest.mark.parametrize("args", [
    ("--store", "{copy}", "--slug", "Not A Slug", "facts"),
    ("--store", "{copy}", "--slug", "", "facts"),
    ("--slug", "demo-0123456789ab", "facts"),
    ("--slug", "demo-0123456789ab", "where"),
    ("--slug", "demo-0123456789ab", "validate", "--all-projects"),
])
def test_bad_slug_option_is_a_usage_error(demo_template, tmp_path, args):
    copy = _cp_a(demo_template.store.path, tmp_path / "case-42")
    r = run_cli(*(a.format(copy=copy) for a in args))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("memctl: error: ") and "Traceback" not in r.stderr


def _hdr(sid: str, project: object) -> bytes:
    return orjson.dumps({"seq": 0, "type": "session", "format": 1, "session_id": sid,
                         "project": project, "created": "2026-01-01T00:00:00Z"}) + b"\n"


def _store_with_headers(root: Path, name: str, projects: list[object]) -> Path:
    sd = root / name / "sessions"
    sd.mkdir(parents=True)
    for i, p in enumerate(projects):
        (sd / f"s{i}.jsonl").write_bytes(_hdr(f"s{i}", p))
    return root / name


A, B = "alpha-0123456789ab", "beta-0123456789ab"


@pytest.mark.parametrize("name, projects, slug, source", [
    ("case-42", [A, A, A], A, "headers"),
    ("case-42", [A, A, B], A, "headers"),            # a disagreement: the majority
    (B, [A, A, B], B, "directory"),                  # the directory is one of them
    ("case-42", [A, B], "case-42", "directory"),     # a tie
    ("case-42", [], "case-42", "directory"),
    ("case-42", ["../../etc", 7, None], "case-42", "directory"),   # not slugs: not counted
])
def test_slug_resolution(tmp_path, name, projects, slug, source):
    path = _store_with_headers(tmp_path, name, projects)
    st = store_given(path)
    assert (st.slug, st.slug_source) == (slug, source)
    assert isinstance(st, Store) and st.path == path


@pytest.mark.parametrize("projects", [[A], [A, A, A], [A, B], []])
def test_a_store_in_a_memory_directory_is_named_by_its_slug(tmp_path, projects):
    # <config dir>/memory/<slug>/ is the store of <slug> whatever its transcripts
    # name: --store there refuses what --project refuses (before 2026-12-07 a
    # transcript planted there, naming another project, was taken as valid)
    path = _store_with_headers(tmp_path / "cfg" / "memory", B, projects)
    st = store_given(path)
    assert (st.slug, st.slug_source) == (B, "directory")
    # not slug-shaped, or not in a directory named memory: the headers, as before
    if projects == [A]:
        assert store_given(_store_with_headers(tmp_path / "cfg" / "memory", "case-42", projects)).slug == A
        assert store_given(_store_with_headers(tmp_path / "evidence", B, projects)).slug == A


def test_a_planted_transcript_is_refused_in_the_store_itself(demo_template, tmp_path):
    store = _cp_a(demo_template.store.path, tmp_path / "cfg" / "memory" / demo_template.store.slug)
    for f in (store / "sessions").iterdir():
        f.unlink()
    (store / "sessions" / "x1.jsonl").write_bytes(_hdr("x1", "evil-aaaaaaaaaaaa"))
    before = tree_hash(store)
    r = run_cli("--store", str(store), "read", "x1", "0", "0")
    assert r.exit_code == 4 and "another project" in r.stderr, (r.stdout, r.stderr)
    r = run_cli("--store", str(store), "validate", "--json")
    assert r.exit_code == 1
    assert "session.refused" in {f["code"] for f in orjson.loads(r.stdout)["findings"]}
    doc = orjson.loads(run_cli("--store", str(store), "where", "--json").stdout)
    assert (doc["slug"], doc["slug_source"]) == (demo_template.store.slug, "directory")
    assert tree_hash(store) == before


def test_headers_that_cannot_be_read_do_not_count(tmp_path):
    path = _store_with_headers(tmp_path, "case-42", [A])
    sd = path / "sessions"
    (sd / "bad.jsonl").write_bytes(_hdr("someone-else", B))       # names another session id
    (sd / "torn.jsonl").write_bytes(_hdr("torn", B)[:-1])         # no complete line
    os.symlink("s0.jsonl", sd / "link.jsonl")                      # never followed
    (sd / "dir.jsonl").mkdir()
    before = tree_hash(path)
    st = store_given(path)
    assert (st.slug, st.slug_source) == (A, "headers")
    assert tree_hash(path) == before


def test_copy_keeps_working_after_the_original_is_gone(demo_template, tmp_path):
    orig = _cp_a(demo_template.store.path, tmp_path / "first")
    code_o, facts_o = _facts(orig)
    copy = _cp_a(orig, tmp_path / "second")
    shutil.rmtree(orig)
    code_c, facts_c = _facts(copy)
    assert code_o == code_c == 0 and facts_c == facts_o
