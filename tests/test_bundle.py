"""Evidence bundles (issue 15): ``memctl export`` and ``memctl verify``.

A bundle of the demo store verifies and prints the statuses ``memctl facts``
prints; export changes nothing in the store, also while a writer appends and
commits; each tamper (a flipped byte in a transcript, the database or the
manifest; a deleted, added or reordered member; a truncated archive) is
detected, named and exits 1; unpacking refuses unsafe members and writes
nothing outside its private directory; a bundle verifies on another machine
path (another HOME and config dir).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import orjson
import pytest

from lecode_memctl.core.rowmodel import FACT_CHECK, FINDING, PROBLEM, SCHEMA_VERSION

from .builders import SCHEMA_DAMAGE, copy_demo, damage_schema
from .conftest import isolate, run_cli, run_proc, tree_hash
from .test_audit import build_planted


@pytest.fixture
def demo(demo_template, tmp_path) -> Path:
    """A private copy of the demo (conftest's, built once per run) with its
    config dir; the store directory is named by its slug, as a real store."""
    return copy_demo(demo_template, tmp_path / "demo-copy")


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Where tempfile puts memctl's private directories (to see they are removed)."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setenv("TMPDIR", str(d))     # (export's and verify's: atomic.private_tempdir)
    return d


def export(store: Path, out: Path, *extra: str) -> dict:
    r = run_cli("--store", str(store), "export", "--output", str(out), "--json", *extra)
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["type"] == "export" and doc["schema_version"] == SCHEMA_VERSION
    return doc


def verify(bundle: Path) -> tuple[int, dict]:
    r = run_cli("verify", str(bundle), "--json")
    assert r.stdout, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["exit_code"] == r.exit_code
    # the output contract: a typed, versioned document of typed rows
    assert doc["type"] == "verify" and doc["schema_version"] == SCHEMA_VERSION
    assert all(list(p) == PROBLEM.names for p in doc["problems"])
    assert all(list(f) == FACT_CHECK.names for f in doc["facts"])
    assert all(list(f) == FINDING.names for f in doc["findings"] or [])
    return r.exit_code, doc


def kinds(doc: dict) -> set[tuple[str, str | None]]:
    return {(p["kind"], p["path"]) for p in doc["problems"]}


def fact_statuses(store: Path) -> dict[str, tuple[str, str | None]]:
    r = run_cli("--store", str(store), "facts", "--all", "--json")
    assert r.exit_code == 0, r.stderr
    return {f["fact_id"]: (f["status"], f["reason"]) for f in orjson.loads(r.stdout)["facts"]}


# ---------------------------------------------------------------- the round trip


@pytest.mark.parametrize("name", ["case-42.tar", "case-42.tar.gz"])
def test_demo_bundle_verifies_with_the_statuses_facts_prints(demo, tmp_path, private_tmp, name):
    before = tree_hash(demo)
    out = tmp_path / name
    doc = export(demo, out)
    assert tree_hash(demo) == before
    assert doc["compression"] == ("gzip" if name.endswith(".gz") else None)
    assert (out.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    code, v = verify(out)
    assert code == 0, v["problems"]
    assert v["problems"] == [] and v["files"]["checked"] == doc["files"] > 5
    want = fact_statuses(demo)
    assert {f["fact_id"]: (f["status"], f["reason"]) for f in v["facts"]} == want
    assert {f["fact_id"]: (f["status"], f["reason"]) for f in doc["facts"]} == want
    assert ("stale", "digest_mismatch") in want.values() and ("valid", None) in want.values()
    assert v["manifest_sha256"] == doc["manifest_sha256"]
    # human output: the same statuses, and OK
    r = run_cli("verify", str(out))
    assert r.exit_code == 0
    for fid, (status, reason) in want.items():
        cell = status if reason is None else f"{status} ({reason})"
        assert any(line.startswith(fid) and cell in line for line in r.stdout.splitlines()), r.stdout
    assert r.stdout.rstrip().endswith("OK: the bundle matches its manifest")
    assert os.listdir(private_tmp) == []          # staging and unpacking cleaned up
    assert tree_hash(demo) == before


def test_archive_layout_and_manifest(demo, tmp_path):
    out = tmp_path / "b.tar"
    export(demo, out)
    with tarfile.open(out) as tf:
        members = tf.getmembers()
        manifest = orjson.loads(tf.extractfile(members[0]).read())
    assert members[0].name == "manifest.json"
    files = [m.name for m in members if m.isfile()][1:]
    assert files == [f["path"] for f in manifest["files"]]
    assert all(m.mode == (0o700 if m.isdir() else 0o600) for m in members)
    assert not any(m.issym() or m.islnk() for m in members)
    names = {f["path"] for f in manifest["files"]}
    assert {"store/MEMORY.md", "store/scratchpad.md", "store/facts.sqlite3"} <= names
    assert {n for n in names if n.startswith("store/sessions/")} == {
        f"store/sessions/{p.name}" for p in (demo / "sessions").glob("*.jsonl")}
    assert not any(n.endswith(".bak") or n.endswith(".lock") for n in names)
    assert {s["reason"] for s in manifest["skipped"]} >= {"lock"}
    assert manifest["project"]["slug"] == demo.name
    assert manifest["database"]["copy"] == "backup"
    assert manifest["validate"]["facts_total"] == len(manifest["facts"]["rows"])
    for f in manifest["files"]:
        rel = f["path"][len("store/"):]
        if rel != "facts.sqlite3":
            assert f["size"] == (demo / rel).stat().st_size


def test_with_backups(demo, tmp_path):
    (demo / "MEMORY.md.bak").write_bytes(b"old\n")
    os.chmod(demo / "MEMORY.md.bak", 0o600)
    without = export(demo, tmp_path / "a.tar")
    assert {"path": "MEMORY.md.bak", "reason": "backup"} in without["skipped"]
    export(demo, tmp_path / "b.tar", "--with-backups")
    with tarfile.open(tmp_path / "b.tar") as tf:
        assert "store/MEMORY.md.bak" in tf.getnames()
    assert verify(tmp_path / "b.tar")[0] == 0


def test_a_name_that_is_not_utf8_is_skipped_and_named(demo, tmp_path):
    """A note (and a transcript) named with a 0x9b byte: export gave 70 (the
    manifest is UTF-8 JSON and cannot hold the name).  It is left out, listed
    in ``skipped`` as not_utf8_name with the byte written \\x9b, and the
    bundle verifies; the store is unchanged."""
    src = (demo / "notes" / "release.md").read_bytes()
    for sub, name in ((b"notes", b"bad\x9bname.md"), (b"sessions", b"demo-\x9b.jsonl")):
        with open(os.path.join(os.fsencode(demo), sub, name), "wb") as fh:
            fh.write(src)
    before = tree_hash(demo)
    doc = export(demo, tmp_path / "b.tar")
    assert {"path": "notes/bad\\x9bname.md", "reason": "not_utf8_name"} in doc["skipped"]
    assert {"path": "sessions/demo-\\x9b.jsonl", "reason": "not_utf8_name"} in doc["skipped"]
    with tarfile.open(tmp_path / "b.tar") as tf:
        assert not [n for n in tf.getnames() if "bad" in n or "\udc9b" in n]
    assert verify(tmp_path / "b.tar")[0] == 0
    assert tree_hash(demo) == before
    r = run_cli("--store", str(demo), "export", "--output", str(tmp_path / "c.tar"))
    assert r.exit_code == 0 and "not_utf8_name" in r.stderr + r.stdout, r.stderr
    assert "\x9b" not in r.stderr + r.stdout


def test_torn_tail_is_left_out(demo, tmp_path):
    path = demo / "sessions" / "demo-gamma.jsonl"
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"seq":99,"type":"mess')
    export(demo, tmp_path / "b.tar")
    with tarfile.open(tmp_path / "b.tar") as tf:
        assert tf.extractfile("store/sessions/demo-gamma.jsonl").read() == whole
    assert verify(tmp_path / "b.tar")[0] == 0


def test_bundle_verifies_on_another_machine_path(demo, tmp_path):
    out = tmp_path / "b.tar.gz"
    export(demo, out)
    elsewhere = tmp_path / "elsewhere" / "any name.tgz"
    elsewhere.parent.mkdir()
    shutil.move(out, elsewhere)
    shutil.rmtree(demo)
    home = tmp_path / "other-home"
    home.mkdir()
    p = run_proc("verify", str(elsewhere), "--json", cwd=home,
                 env={"HOME": str(home), "LECODE_CONFIG_DIR": str(tmp_path / "other-config"),
                      "TMPDIR": str(home)})
    doc = orjson.loads(p.stdout)
    assert p.returncode == 0, doc["problems"]
    assert not (tmp_path / "other-config").exists()
    assert os.listdir(home) == []


def test_unpacked_directory_verifies(demo, tmp_path):
    out = tmp_path / "b.tar"
    export(demo, out)
    un = tmp_path / "unpacked"
    un.mkdir()
    subprocess.run(["tar", "xf", str(out), "-C", str(un)], check=True)
    before = tree_hash(un)
    code, doc = verify(un)
    assert code == 0, doc["problems"]
    assert doc["kind"] == "directory"
    assert tree_hash(un) == before
    os.symlink("/etc/passwd", un / "store" / "notes" / "evil.md")
    code, doc = verify(un)
    assert code == 1
    assert ("refused", "store/notes/evil.md") in kinds(doc)


def test_planted_store_round_trip(config_dir, tmp_path):
    """Every finding planted: the bundle leaves out what is not a store file
    (a symlink, a directory named like a transcript, a stray file) and still
    verifies."""
    store = build_planted(config_dir)
    before = tree_hash(store)
    doc = export(store, tmp_path / "p.tar")
    assert tree_hash(store) == before
    assert doc["facts_error"] is None      # a dangling current revision is a hidden row
    assert ("hidden", "invalid_ref") in {(f["status"], f["reason"]) for f in doc["facts"]}
    skipped = {s["path"]: s["reason"] for s in doc["skipped"]}
    assert skipped["notes/link.md"] == "symlink"
    assert skipped["stray.txt"] == "not_in_layout"
    code, v = verify(tmp_path / "p.tar")
    assert code == 0, v["problems"]
    assert v["validate"]["findings"]["error"] > 0


# ---------------------------------------------------------------- a read command


def _crashed_writer_store(tmp_path: Path) -> Path:
    """A store whose facts.sqlite3 has a -wal (a writer that died before
    checkpointing) and no -shm."""
    store = tmp_path / "crashed" / "proj-0123456789ab"
    code = f"""
import os, sys
from pathlib import Path
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.sessions import SessionStore
store = store_at({str(store)!r})
ss = SessionStore(store)
w = ss.create("s1")
w.append_message("user", "remember this")
w.close()
fs = FactStore(store.facts_db)
# (the first write makes the schema in the file's own journal mode and
# switches it to WAL after its commit: the source, a second write, is in the -wal)
fid = fs.add("from the wal").fact.fact_id
fs.attach_source(fid, 1, ss.source_snapshot("s1", 1, 1).ref)
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    shm = store / "facts.sqlite3-shm"
    if shm.exists():
        shm.unlink()
    assert (store / "facts.sqlite3-wal").stat().st_size > 0
    return store


def test_export_of_a_store_with_a_wal_writes_nothing_there(tmp_path, private_tmp):
    store = _crashed_writer_store(tmp_path)
    before = tree_hash(store)
    doc = export(store, tmp_path / "w.tar")
    assert tree_hash(store) == before
    assert not (store / "facts.sqlite3-shm").exists()
    assert [(f["status"], f["reason"]) for f in doc["facts"]] == [("valid", None)]
    code, v = verify(tmp_path / "w.tar")
    assert code == 0, v["problems"]
    assert os.listdir(private_tmp) == []


WRITER = """
import os, sys, time
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.sessions import SessionStore
store = store_at(sys.argv[1])
stop = sys.argv[2]
ss = SessionStore(store)
fs = FactStore(store.facts_db)
w = ss.writer("demo-gamma")
n = 0
print("ready", flush=True)
while not os.path.exists(stop) and n < 3000:
    seq = w.append_message("user", f"note {n}: keep going")
    fs.add(f"live fact {n}", ref=ss.source_snapshot("demo-gamma", seq, seq).ref)
    n += 1
    time.sleep(0.002)
w.close()
fs.close()
print(n, flush=True)
"""


def test_export_while_a_writer_appends_and_commits(demo, tmp_path, private_tmp):
    names_before = set(os.listdir(demo)) | {f"sessions/{n}" for n in os.listdir(demo / "sessions")}
    stop = tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(demo), str(stop)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.1)
        bundles = []
        for i in range(3):
            out = tmp_path / f"live-{i}.tar"
            export(demo, out)
            bundles.append(out)
    finally:
        stop.touch()
        written = int(proc.stdout.readline())
        proc.wait(timeout=60)
    assert written > 0
    names_after = set(os.listdir(demo)) | {f"sessions/{n}" for n in os.listdir(demo / "sessions")}
    # only what a writer itself makes: the -wal and -shm of its connection
    assert names_after - names_before <= {"facts.sqlite3-wal", "facts.sqlite3-shm"}
    sizes = []
    for out in bundles:
        code, v = verify(out)
        assert code == 0, v["problems"]
        sizes.append(len(v["facts"]))
        # every fact committed before the database copy cites records the
        # transcript copy holds: valid, except the demo's planted stale fact
        assert {(f["status"], f["reason"]) for f in v["facts"]} == {
            ("valid", None), ("stale", "digest_mismatch")}
    assert sizes[-1] > 3, sizes        # the writer's facts are in the later bundles
    assert os.listdir(private_tmp) == []


# ---------------------------------------------------------------- tampering


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tf:
        # extractfile returns None only for what is not a file
        return [(m, tf.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
                for m in tf.getmembers()]


def _rewrite(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for m, data in members:
            m.size = len(data)
            tf.addfile(m, io.BytesIO(data) if m.isfile() else None)


def _flip(path: Path, member: str, at: int = 10) -> None:
    with tarfile.open(path) as tf:
        off = tf.getmember(member).offset_data
    data = bytearray(path.read_bytes())
    data[off + at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def bundle_template(demo_template, tmp_path_factory) -> Path:
    """The demo's bundle, exported from a private copy and verified once, in
    the environment each test has (conftest's isolated_env and
    checks_in_a_thread, which a module's fixture does not get): never
    changed, each test tampers with a copy of it (``bundle``)."""
    return exported_demo(demo_template, tmp_path_factory.mktemp("bundle"), verified=True)


def exported_demo(demo_template, base: Path, *, verified: bool = False) -> Path:
    """``base/t.tar``: the demo's bundle, exported from a private copy under
    ``base`` in an environment of its own (``isolate``), the database checks
    run in a thread as each test runs them (a module's fixture does not get
    conftest's ``checks_in_a_thread``); with ``verified``, checked to verify
    there."""
    from lecode_memctl.core.audit import facts as audit_facts

    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base)
        mp.setattr(audit_facts, "AT_ONCE_BYTES", 0)
        out = base / "t.tar"
        export(copy_demo(demo_template, base / "demo-copy"), out)
        if verified:
            assert verify(out)[0] == 0
    return out


@pytest.fixture
def bundle(bundle_template, tmp_path) -> Path:
    """A copy of the verified demo bundle (the same bytes each export of
    the demo made here, exported once instead of once a test)."""
    out = tmp_path / "t.tar"
    shutil.copyfile(bundle_template, out)
    return out


def test_flipped_byte_in_a_transcript(bundle):
    _flip(bundle, "store/sessions/demo-alpha.jsonl", at=40)
    code, doc = verify(bundle)
    assert code == 1
    assert ("changed", "store/sessions/demo-alpha.jsonl") in kinds(doc)


def test_flipped_byte_in_the_database(bundle):
    with tarfile.open(bundle) as tf:
        size = tf.getmember("store/facts.sqlite3").size
    _flip(bundle, "store/facts.sqlite3", at=size - 100)
    code, doc = verify(bundle)
    assert code == 1
    assert ("changed", "store/facts.sqlite3") in kinds(doc)


@pytest.mark.parametrize("where", ["exported", "memctl_version", "digest", "{"])
def test_flipped_byte_in_the_manifest(bundle, where):
    with tarfile.open(bundle) as tf:
        off = tf.getmember("manifest.json").offset_data
        text = tf.extractfile("manifest.json").read()
    at = text.index(where.encode()) + (len(where) + 4 if where != "{" else 0)
    data = bytearray(bundle.read_bytes())
    data[off + at] ^= 0x01
    bundle.write_bytes(bytes(data))
    code, doc = verify(bundle)
    assert code == 1
    assert ("manifest", "manifest.json") in kinds(doc), doc["problems"]


def test_deleted_file(bundle):
    _rewrite(bundle, [(m, d) for m, d in _members(bundle) if m.name != "store/notes/release.md"])
    code, doc = verify(bundle)
    assert code == 1
    assert ("missing", "store/notes/release.md") in kinds(doc)


@pytest.mark.parametrize("name", ["store/notes/extra.md", "README.txt"])
def test_added_file(bundle, name):
    ms = _members(bundle)
    ti = tarfile.TarInfo(name)
    ti.mode = 0o600
    _rewrite(bundle, ms + [(ti, b"planted\n")])
    code, doc = verify(bundle)
    assert code == 1
    assert ("added", name) in kinds(doc)


def test_a_directory_member_over_a_file_is_reported(bundle):
    """A directory member of the name of a file member: tar -x makes the
    file a directory (the file is gone), and verify said the bundle
    matches, skipping every directory member unseen."""
    ms = _members(bundle)
    ti = tarfile.TarInfo("store/MEMORY.md")
    ti.type, ti.mode = tarfile.DIRTYPE, 0o700
    _rewrite(bundle, ms + [(ti, b"")])
    code, doc = verify(bundle)
    assert code == 1
    assert ("duplicate", "store/MEMORY.md") in kinds(doc)


def test_a_member_name_that_is_not_utf8_is_refused_not_a_crash(bundle, tmp_path):
    """A member (or, unpacked, a file) whose name is not UTF-8: verify exited
    70 (the name could not be written to its JSON).  It is refused, named
    with its bytes as \\xNN."""
    ms = _members(bundle)
    with tarfile.open(bundle, "w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tf:
        for m, data in ms:
            m.size = len(data)
            tf.addfile(m, io.BytesIO(data) if m.isfile() else None)
        ti = tarfile.TarInfo("store/notes/q\udcfe.md")
        ti.size, ti.mode = 1, 0o600
        tf.addfile(ti, io.BytesIO(b"x"))
    code, doc = verify(bundle)
    assert code == 1
    assert ("refused", "store/notes/q\\xfe.md") in kinds(doc)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with tarfile.open(bundle) as tf:
        tf.extractall(unpacked, filter="fully_trusted")
    code, doc = verify(unpacked)
    assert code == 1
    assert ("refused", "store/notes/q\\xfe.md") in kinds(doc)


def test_reordered_archive(bundle):
    ms = _members(bundle)
    i = next(k for k, (m, _d) in enumerate(ms) if m.name == "store/MEMORY.md")
    j = next(k for k, (m, _d) in enumerate(ms) if m.name == "store/scratchpad.md")
    ms[i], ms[j] = ms[j], ms[i]
    _rewrite(bundle, ms)
    code, doc = verify(bundle)
    assert code == 1
    assert ("order", "store/scratchpad.md") in kinds(doc)
    assert not {k for k, _p in kinds(doc)} & {"changed", "missing", "added"}


def test_manifest_not_first(bundle):
    ms = _members(bundle)
    _rewrite(bundle, ms[1:] + ms[:1])
    code, doc = verify(bundle)
    assert code == 1
    assert ("order", "manifest.json") in kinds(doc)


def _truncation_points(path: Path) -> dict[str, int]:
    with tarfile.open(path) as tf:
        ms = tf.getmembers()
        last = ms[-1]
        end = last.offset_data + ((last.size + 511) // 512) * 512
        mid = tf.getmember("store/facts.sqlite3")
    return {"inside a member": mid.offset_data + 700,
            "at a member boundary": mid.offset,
            "inside a header": mid.offset + 100,
            "only the end marker": end}


@pytest.mark.parametrize("point", ["inside a member", "at a member boundary", "inside a header",
                                   "only the end marker"])
def test_truncated_archive(bundle, point):
    cut = _truncation_points(bundle)[point]
    with open(bundle, "r+b") as f:
        f.truncate(cut)
    code, doc = verify(bundle)
    assert code == 1
    assert "archive" in {k for k, _p in kinds(doc)}, doc["problems"]
    if point != "only the end marker":
        assert ("missing", "store/sessions/demo-gamma.jsonl") in kinds(doc)


def test_truncated_gzip(demo, tmp_path):
    out = tmp_path / "t.tar.gz"
    export(demo, out)
    data = out.read_bytes()
    out.write_bytes(data[: len(data) * 2 // 3])
    code, doc = verify(out)
    assert code == 1
    assert "archive" in {k for k, _p in kinds(doc)}


def test_not_a_bundle(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"this is not an archive\n" * 100)
    code, doc = verify(junk)
    assert code == 1 and [p["kind"] for p in doc["problems"]] == ["archive"]
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    code, doc = verify(empty)
    assert code == 1 and ("manifest", "manifest.json") in kinds(doc)
    r = run_cli("verify", str(tmp_path / "absent.tar"))
    assert r.exit_code == 3 and r.stderr.startswith("memctl: error: ")
    os.mkfifo(tmp_path / "fifo")
    r = run_cli("verify", str(tmp_path / "fifo"))
    assert r.exit_code == 2 and r.stderr.startswith("memctl: error: ")
    (tmp_path / "no-manifest").mkdir()
    code, doc = verify(tmp_path / "no-manifest")
    assert code == 1 and kinds(doc) == {("manifest", "manifest.json")}


def test_store_without_database(tmp_path):
    store = tmp_path / "fresh-0123456789ab"
    (store / "notes").mkdir(parents=True, mode=0o700)
    (store / "notes" / "todo.md").write_bytes(b"- [ ] a\n")
    doc = export(store, tmp_path / "f.tar")
    assert doc["database"] == {"copy": "none", "note": "no facts database"}
    assert doc["files"] == 1 and doc["facts"] == []
    assert not (store / "facts.sqlite3").exists()
    assert verify(tmp_path / "f.tar")[0] == 0


# ---------------------------------------------------------------- unsafe members


def _evil(kind: str, target: Path) -> tarfile.TarInfo:
    name = {"dotdot": "store/../../escaped.md", "absolute": str(target / "abs.md"),
            "leading-dotdot": "../escaped.md"}.get(kind, "store/notes/evil.md")
    ti = tarfile.TarInfo(name)
    ti.mode = 0o600
    if kind == "symlink":
        ti.type, ti.linkname = tarfile.SYMTYPE, "/etc/passwd"
    elif kind == "hardlink":
        ti.type, ti.linkname = tarfile.LNKTYPE, "store/MEMORY.md"
    elif kind == "fifo":
        ti.type = tarfile.FIFOTYPE
    elif kind == "chardev":
        ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
    elif kind == "blockdev":
        ti.type, ti.devmajor, ti.devminor = tarfile.BLKTYPE, 8, 0
    return ti


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["dotdot", "absolute", "leading-dotdot", "symlink", "hardlink",
                                  "fifo", "chardev", "blockdev"])
def test_unsafe_members_are_refused_and_never_written(bundle, tmp_path, private_tmp, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    ti = _evil(kind, outside)
    ms = _members(bundle)
    ms.insert(3, (ti, b"pwned\n" if ti.isfile() else b""))
    _rewrite(bundle, ms)
    listing = sorted(os.listdir(tmp_path))
    code, doc = verify(bundle)
    assert code == 1
    assert ("refused", ti.name) in kinds(doc), doc["problems"]
    assert os.listdir(outside) == []
    assert sorted(os.listdir(tmp_path)) == listing
    assert os.listdir(private_tmp) == []
    assert not (tmp_path.parent / "escaped.md").exists()


# ---------------------------------------------------------------- export errors


def test_export_refuses_to_overwrite_or_write_into_the_store(demo, tmp_path):
    out = tmp_path / "b.tar"
    out.write_bytes(b"keep me")
    r = run_cli("--store", str(demo), "export", "-o", str(out))
    assert r.exit_code == 4 and out.read_bytes() == b"keep me"
    before = tree_hash(demo)
    for inside in (demo / "b.tar", demo / "sessions" / "b.tar"):
        r = run_cli("--store", str(demo), "export", "-o", str(inside))
        assert r.exit_code == 2, r.stderr
    assert tree_hash(demo) == before
    r = run_cli("--store", str(demo), "export", "--json")
    assert r.exit_code == 2
    r = run_cli("--store", str(tmp_path / "absent"), "export", "-o", str(tmp_path / "c.tar"))
    assert r.exit_code == 3 and not (tmp_path / "c.tar").exists()
    # (a missing directory: exit 7, as for validate's and secrets' --output;
    # it was exit 3, 'not found', the code of a missing store)
    r = run_cli("--store", str(demo), "export", "-o", str(tmp_path / "no-dir" / "c.tar"))
    assert r.exit_code == 7 and "no such directory" in r.stderr
    assert not (tmp_path / "no-dir").exists()
    assert [p for p in os.listdir(tmp_path) if ".tmp-" in p] == []


def test_export_to_stdout(demo, tmp_path):
    p = run_proc("--store", str(demo), "export")
    assert p.returncode == 0, p.stderr
    assert b"manifest sha256:" in p.stderr
    out = tmp_path / "s.tar"
    out.write_bytes(p.stdout)
    assert verify(out)[0] == 0


def _manifest(bundle: Path) -> dict:
    return orjson.loads(_members(bundle)[0][1])


def _put_manifest(bundle: Path, doc: dict) -> None:
    """Write ``doc`` as the bundle's manifest, re-digested (hashes intact)."""
    import hashlib

    from lecode_memctl.core.bundle import canonical

    ms = _members(bundle)
    doc.pop("digest", None)
    doc["digest"] = hashlib.sha256(canonical(doc)).hexdigest()
    ms[0] = (ms[0][0], canonical(doc) + b"\n")
    _rewrite(bundle, ms)


def test_manifest_rewritten_with_other_statuses(bundle):
    """A manifest edited and re-digested (hashes intact) still disagrees with
    the audit verify recomputes: each difference is named."""
    doc = _manifest(bundle)
    row = next(r for r in doc["facts"]["rows"] if r["status"] == "stale")
    row["status"], row["reason"] = "valid", None
    doc["validate"]["by_code"] = {}
    _put_manifest(bundle, doc)
    code, v = verify(bundle)
    assert code == 1
    assert {k for k, _p in kinds(v)} == {"facts", "validate"}, v["problems"]
    assert any(row["fact_id"] in p["detail"] for p in v["problems"] if p["kind"] == "facts")
    (bad,) = [f for f in v["facts"] if not f["same"]]
    assert (bad["status"], bad["manifest_status"]) == ("stale", "valid")


@pytest.mark.parametrize("name", ["integrity", "future", "garbage", "legacy"])
def test_database_findings_round_trip(config_dir, tmp_path, name):
    """A database validate complains about (corrupt index, newer schema, not a
    database, older schema) is carried as it is, and its findings verify,
    wherever the bundle is unpacked."""
    from .test_audit import build_db_stores

    store = build_db_stores(config_dir)[name]
    before = tree_hash(store)
    doc = export(store, tmp_path / f"{name}.tar")
    assert tree_hash(store) == before
    assert doc["database"]["copy"] == ("raw" if name in ("future", "garbage") else "backup")
    assert doc["validate"]["findings"]["error"] + doc["validate"]["findings"]["warning"] == 1
    code, v = verify(tmp_path / f"{name}.tar")
    assert code == 0, v["problems"]
    assert str(tmp_path) not in orjson.dumps(v["findings"]).decode()


def test_duplicate_member(bundle):
    ms = _members(bundle)
    dup = next((m, d) for m, d in ms if m.name == "store/MEMORY.md")
    ti = tarfile.TarInfo(dup[0].name)
    ti.mode = 0o600
    _rewrite(bundle, ms + [(ti, b"a second MEMORY.md\n")])
    code, doc = verify(bundle)
    assert code == 1
    assert ("duplicate", "store/MEMORY.md") in kinds(doc)


def test_a_differing_fact_field_prints_both_values(bundle):
    """Issue 15.3: a fact row that differs from the manifest only in a field
    other than the status printed the same status on both sides ("about_revision
    differ: now stale (...), at export stale (...)"): each differing field is
    named with its value now and at export."""
    doc = _manifest(bundle)
    row = next(r for r in doc["facts"]["rows"] if r["status"] == "stale")
    now = row["about_revision"]
    row["about_revision"] = 9999
    _put_manifest(bundle, doc)
    code, v = verify(bundle)
    assert code == 1
    (detail,) = [p["detail"] for p in v["problems"] if p["kind"] == "facts"]
    assert detail == (f"fact {row['fact_id']}: about_revision now {orjson.dumps(now).decode()}, "
                      "at export 9999")


def test_a_listing_refused_at_export_is_verified_as_refused(config_dir, tmp_path, monkeypatch):
    """When the fact listing fails at export (a database page that cannot be
    read), the manifest keeps its error instead of rows, and verify, which
    fails alike, finds the bundle consistent."""
    from lecode_memctl.core import factview
    from lecode_memctl.core.errors import StoreCorrupt

    store = build_planted(config_dir)

    def unreadable(group):  # noqa: ANN001,ANN202
        raise StoreCorrupt("facts database: a page cannot be read (test)")

    monkeypatch.setattr(factview, "fact_from_group", unreadable)
    doc = export(store, tmp_path / "p.tar")
    assert doc["facts_error"] is not None and doc["facts"] == []
    code, v = verify(tmp_path / "p.tar")
    assert code == 0, v["problems"]


@pytest.mark.parametrize("damage", list(SCHEMA_DAMAGE))
def test_a_database_missing_a_table_or_column_is_exported_with_its_error(demo, tmp_path, damage):
    """A facts database without a table or column memctl reads: export
    exited 5 (SQLite's "no such table" halfway through the fact listing).
    It is exported as a truncated database is: its bytes as they are, the
    manifest's facts.error saying why, no rows; verify agrees."""
    damage_schema(demo / "facts.sqlite3", damage)
    before = tree_hash(demo)
    doc = export(demo, tmp_path / "d.tar")
    assert doc["facts"] == [] and doc["facts_error"]["code"] == "store_corrupt", doc
    assert "not a lecode facts database" in doc["facts_error"]["message"], doc
    assert str(demo) not in doc["facts_error"]["message"]   # (a path of the copy: stripped)
    assert doc["validate"]["findings"]["error"] >= 1
    code, v = verify(tmp_path / "d.tar")
    assert code == 0, v["problems"]
    assert tree_hash(demo) == before


def test_a_table_that_fails_when_read_is_exported_with_its_error(demo, tmp_path):
    """exclusions holds the columns memctl reads but fails at every read (a
    view whose rows overflow, as a damaged page fails): SQLite's own error
    reached export through the fact listing, which stopped with exit 5 and
    no bundle.  The manifest records it in facts.error, classified as the
    fact store classifies SQLite's errors; verify, which meets it alike,
    agrees.  (Since 2026-12-07 a view in a table's place is refused when the
    store opens, before any row is read: the error is that refusal.)"""
    import sqlite3

    db = sqlite3.connect(demo / "facts.sqlite3", isolation_level=None)
    try:
        db.execute("CREATE TABLE ex2 AS SELECT * FROM exclusions")
        assert db.execute("SELECT count(*) FROM ex2").fetchone()[0] > 0
        db.execute("DROP TABLE exclusions")
        db.execute("CREATE VIEW exclusions AS SELECT session_id, seq, generation FROM ex2 "
                   "WHERE abs(-9223372036854775808) > 0")
    finally:
        db.close()
    before = tree_hash(demo)
    doc = export(demo, tmp_path / "v.tar")
    assert doc["facts"] == [] and doc["facts_error"] == {
        "code": "store_corrupt", "message": "facts.sqlite3: table exclusions is a view; "
                                            "not a lecode facts database"}, doc["facts_error"]
    code, v = verify(tmp_path / "v.tar")
    assert code == 0, v["problems"]
    assert tree_hash(demo) == before


def test_manifest_text_cannot_forge_lines_of_the_verify_report(bundle):
    """verify's text header printed the manifest's memctl_version and store
    (a bundle's own, untrusted strings) with newlines kept: a bundle could
    print 'OK: the bundle matches its manifest' lines of its own.  They are
    escaped (\\n, \\t) as verify's problem lines already were."""
    forged = "9\nOK: the bundle matches its manifest\tx"
    members = _members(bundle)
    for m, data in members:
        if m.name == "manifest.json":
            doc = orjson.loads(data)
            doc["memctl_version"] = forged
            doc["project"]["store"] = "/s\nOK: forged"
            members[members.index((m, data))] = (m, orjson.dumps(doc))
    _rewrite(bundle, members)
    r = run_cli("verify", str(bundle))
    lines = r.stdout.splitlines()
    assert not any(line.startswith("OK") for line in lines), r.stdout
    assert any("by memctl 9\\nOK: the bundle matches its manifest\\tx from " in line
               and line.endswith("(/s\\nOK: forged)") for line in lines), r.stdout


@pytest.mark.parametrize("what", ["empty directory", "not a tar archive"])
def test_verify_json_findings_is_an_array_when_no_audit_ran(tmp_path, what):
    """docs/OUTPUT.md: "findings": [finding rows], also when the bundle could
    not be audited ("validate" is null then); it was null before 2026-12-07,
    which ``jq '.findings[]'`` cannot iterate."""
    if what == "empty directory":
        target = tmp_path / "bundle"
        (target / "store").mkdir(parents=True)
    else:
        target = tmp_path / "junk.tar.gz"
        target.write_bytes(b"junk\n")
    r = run_cli("verify", str(target), "--json")
    assert r.exit_code == 1, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert doc["validate"] is None and doc["problems"]
    assert doc["findings"] == [] and doc["facts"] == []
