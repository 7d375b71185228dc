"""memctl projects: every store, verified roots only, legacy stores recognised."""

from __future__ import annotations

import orjson

from lecode_memctl.core.atomic import atomic_write
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.identity import slug
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .conftest import make_repo, run_cli, tree_hash


def _projects(*args):
    r = run_cli(*args, "projects", "--json")
    assert r.exit_code == 0, r.stderr
    return {d["slug"]: d for d in orjson.loads(r.stdout)}


def test_projects_listing(config_dir, tmp_path):
    repo = make_repo(tmp_path / "app")
    sub = repo / "lib"
    sub.mkdir()
    mem = config_dir / "memory"
    # the project's own store: one session, one fact
    st = store_at(mem / slug(str(repo)))
    ss = SessionStore(st)
    w = ss.create("s1")
    w.append_message("user", "We use tabs.")
    w.close()
    fs = FactStore(st.facts_db)
    fs.remember("We use tabs.", ss.source_snapshot("s1", 1, 1).ref, sessions=ss)
    fs.close()
    # a legacy cwd-scoped store of app/lib: Markdown only
    legacy = mem / slug(str(sub))
    atomic_write(legacy / "MEMORY.md", b"old notes\n")
    # a store of a project nobody names, Markdown only
    orphan = mem / "gone-0123456789ab"
    atomic_write(orphan / "MEMORY.md", b"x\n")
    # a store whose session header records a root that no longer exists
    vanished = str(tmp_path / "vanished")
    vs = store_at(mem / slug(vanished))
    w = SessionStore(vs).create("h1")
    w.close()
    hdr = vs.sessions_dir / "h1.jsonl"
    rec = orjson.loads(hdr.read_bytes())
    rec["project_root"] = vanished
    hdr.write_bytes(orjson.dumps(rec) + b"\n")
    before = tree_hash(config_dir)

    got = _projects("-C", str(sub))
    assert tree_hash(config_dir) == before
    p = got[slug(str(repo))]
    assert p["kind"] == "project" and p["root"] == str(repo) and p["root_exists"] is True
    assert p["root_source"] == "current project"
    assert p["sessions"] == 1 and p["facts"] == 1 and p["size"] > 0 and p["last_activity"]
    lg = got[slug(str(sub))]
    assert lg["kind"] == "legacy" and lg["legacy_of"] == str(repo)
    assert lg["legacy_directory"] == str(sub)
    o = got["gone-0123456789ab"]
    assert o["kind"] == "unclaimed" and o["root"] is None and o["root_exists"] is None
    assert o["possibly_legacy"] is True and o["facts"] == 0
    v = got[slug(vanished)]
    assert v["root"] == vanished and v["root_exists"] is False
    assert v["root_source"] == "session header"

    # from elsewhere, the project is unknown unless named with --root
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = _projects("-C", str(elsewhere))
    assert got[slug(str(repo))]["root"] is None
    r = run_cli("-C", str(elsewhere), "projects", "--root", str(repo), "--json")
    got = {d["slug"]: d for d in orjson.loads(r.stdout)}
    assert got[slug(str(repo))]["root_source"] == "--root"
    assert got[slug(str(sub))]["kind"] == "legacy"


def test_projects_human_and_empty(config_dir, tmp_path):
    r = run_cli("projects")
    assert r.exit_code == 0
    atomic_write(config_dir / "memory" / "gone-0123456789ab" / "MEMORY.md", b"x\n")
    (config_dir / "memory" / "gone-0123456789ab" / "facts.sqlite3").write_bytes(b"junk" * 100)
    r = run_cli("-C", str(tmp_path), "projects")
    assert r.exit_code == 0
    line = next(x for x in r.stdout.splitlines() if x.startswith("gone-0123456789ab"))
    assert "unknown" in line and "?" in line
    doc = orjson.loads(run_cli("projects", "--json").stdout)
    assert doc[0]["facts"] is None and doc[0]["facts_error"]


def test_a_header_root_with_a_nul_byte_is_no_candidate(config_dir, tmp_path):
    """A session header's ``project_root`` (``root``, ``cwd``) holding a NUL
    ended ``projects`` in 'internal error: ValueError: embedded null byte'
    (exit 70): it names no directory, so it is no candidate root."""
    mem = config_dir / "memory"
    st = store_at(mem / "gone-0123456789ab")
    w = SessionStore(st).create("h1")
    w.close()
    hdr = st.sessions_dir / "h1.jsonl"
    rec = orjson.loads(hdr.read_bytes())
    for key in ("project_root", "root", "cwd"):
        rec[key] = str(tmp_path / "x\x00y")
    hdr.write_bytes(orjson.dumps(rec) + b"\n")
    got = _projects("--config-dir", str(config_dir))
    assert got["gone-0123456789ab"]["root"] is None
