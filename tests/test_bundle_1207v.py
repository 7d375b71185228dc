"""Bundles of 2026-12-07 (v): export's and verify's private copy is removed
whole even when an interrupt lands while it is removed, and named so that
a later run sweeps it when its process is gone."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from lecode_memctl.core import snapshot

from .conftest import run_proc
from .test_bundle import _members, _rewrite, demo, export, verify  # noqa: F401  (fixtures)

# memctl run with shutil.rmtree patched: the first removal of a private
# directory of KIND (export, verify) gets the signal SIG as it begins, or
# (SIG 0) a KeyboardInterrupt raised inside it once part of the directory
# is gone (a signal Python took in another thread)
_LANDS_IN_REMOVAL = """
import os, runpy, shutil, signal, sys
kind, sig, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
orig = shutil.rmtree
hit = []
def rmtree(p, *a, **k):
    if os.path.basename(str(p)).startswith(f"memctl-{kind}-") and not hit:
        hit.append(p)
        if sig:
            os.kill(os.getpid(), sig)
        else:
            for name in sorted(os.listdir(p))[:1]:
                orig(os.path.join(p, name), ignore_errors=True)
            raise KeyboardInterrupt
    return orig(p, *a, **k)
shutil.rmtree = rmtree
sys.argv = ["memctl", *args]
runpy.run_module("lecode_memctl", run_name="__main__")
"""


def _unpacked(bundle: Path, into: Path) -> Path:
    """``bundle`` unpacked with ``tar -x``'s rules into the new directory ``into``."""
    into.mkdir()
    with tarfile.open(bundle) as tf:
        tf.extractall(into, filter="fully_trusted")
    return into


def _landing(tmp: Path, kind: str, sig: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", _LANDS_IN_REMOVAL, kind, str(sig), *args],
                          capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, -signal.SIGTERM),
                                             (signal.SIGINT, 130), (0, 130)])
def test_an_interrupt_during_exports_clean_up_leaves_no_copy(demo, tmp_path,  # noqa: F811
                                                              sig, status):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _landing(tmp, "export", sig, "--store", str(demo), "export", "-o",
                 str(tmp_path / "b.tar"))
    assert r.returncode == status, r.stderr
    assert b"Traceback" not in r.stderr, r.stderr
    assert os.listdir(tmp) == [], r.stderr


@pytest.mark.parametrize("unpacked", [False, True])
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, -signal.SIGTERM), (0, 130)])
def test_an_interrupt_during_verifys_clean_up_leaves_no_copy(demo, tmp_path, unpacked,  # noqa: F811
                                                              sig, status):
    out = tmp_path / "b.tar"
    export(demo, out)
    if unpacked:
        out = _unpacked(out, tmp_path / "un")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _landing(tmp, "verify", sig, "verify", str(out))
    assert r.returncode == status, r.stderr
    assert b"Traceback" not in r.stderr, r.stderr
    assert os.listdir(tmp) == [], r.stderr


@pytest.mark.skipif(snapshot._owner() is None, reason="no /proc: copies are never swept")
def test_a_gone_exports_and_verifys_copies_are_swept(demo, tmp_path):  # noqa: F811
    """Export's and verify's private directories are named by their process,
    as a snapshot's: one a killed process left is removed by a later run's
    sweep; a live process's, or one named otherwise, is kept."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    owner = snapshot._owner()
    assert owner is not None
    ns, pid, start = owner.split(".")
    gone = [tmp / f"memctl-{kind}-{ns}.{pid}.{int(start) + 1}-00{n}"
            for n, kind in enumerate(("export", "verify"))]
    kept = [tmp / f"memctl-export-{owner}-00aa", tmp / "memctl-export-00bb",
            tmp / f"memctl-other-{ns}.{pid}.{int(start) + 1}-00cc"]
    for d in (*gone, *kept):
        (d / "store").mkdir(parents=True)
        (d / "store" / "facts.sqlite3").write_bytes(b"x")
    r = run_proc("--store", str(demo), "--no-state", "export", "-o", str(tmp_path / "b.tar"),
                 env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp)) == sorted(d.name for d in kept)


@pytest.mark.parametrize("dropped", ["store/notes", "store"])
def test_a_directory_member_export_writes_that_is_missing_is_a_problem(demo, tmp_path,  # noqa: F811
                                                                        dropped):
    """``tar -x`` makes a directory the archive has no member for with the
    umask's mode (0755), which verify of the unpacked directory rejects:
    the archive is not OK either."""
    out = tmp_path / "b.tar"
    export(demo, out)
    members = _members(out)
    assert any(m.name == dropped and m.isdir() for m, _ in members)
    _rewrite(out, [(m, d) for m, d in members if m.name != dropped])
    code, doc = verify(out)
    assert code == 1
    assert [(p["kind"], p["path"]) for p in doc["problems"]] == [("missing", dropped + "/")], \
        doc["problems"]
    assert doc["files"]["missing"] == 1


@pytest.mark.parametrize("records", [
    {"SCHILY.acl.access": "user::rw-,user:1000:rwx,group::---,mask::rwx,other::---"},
    {"SCHILY.xattr.user.evil": "x"},
    {"LIBARCHIVE.xattr.user.evil": "eA=="},
    {"atime": "1700000000"},
])
@pytest.mark.parametrize("where", ["member", "global"])
def test_a_pax_record_export_never_writes_is_a_problem(demo, tmp_path, records,  # noqa: F811
                                                       where):
    """What ``tar -x`` applies beyond the bytes (``tar --acls --xattrs``:
    an ACL, an extended attribute) must be what export writes: export's pax
    headers hold ``path`` and ``size`` at most."""
    out = tmp_path / "b.tar"
    export(demo, out)
    members = _members(out)
    if where == "member":
        for m, _ in members:
            if m.name == "store/MEMORY.md":
                m.pax_headers = dict(records)
        _rewrite(out, members)
    else:
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT, pax_headers=records) as tf:
            for m, data in members:
                tf.addfile(m, io.BytesIO(data) if m.isfile() else None)
    code, doc = verify(out)
    assert code == 1
    got = [(p["kind"], p["path"]) for p in doc["problems"]]
    key = next(iter(records))
    if where == "member":
        assert got == [("changed", "store/MEMORY.md")], doc["problems"]
    else:
        # (a global header's records apply to every member after it)
        assert got and all(k == "changed" for k, _ in got), doc["problems"]
        assert ("changed", "manifest.json") in got
    assert all(key in p["detail"] for p in doc["problems"]), doc["problems"]


def test_the_pax_records_export_writes_verify(demo, tmp_path):  # noqa: F811
    """A name longer than a ustar header holds, or not ASCII, goes in a pax
    ``path`` record: export's own bundle verifies OK."""
    for name in ("n" * 150 + ".md", "caf\u00e9-\u00fcber.md"):
        (demo / "notes" / name).write_text("# a note\n", encoding="utf-8")
    out = tmp_path / "b.tar"
    export(demo, out)
    with tarfile.open(out) as tf:
        keys = {k for m in tf.getmembers() for k in m.pax_headers}
    assert keys == {"path"}, keys
    code, doc = verify(out)
    assert code == 0, doc["problems"]


def test_an_empty_top_level_directory_member_is_added(demo, tmp_path):  # noqa: F811
    out = tmp_path / "b.tar"
    export(demo, out)
    members = _members(out)
    extra = tarfile.TarInfo("extra")
    extra.type, extra.mode = tarfile.DIRTYPE, 0o700
    _rewrite(out, [*members, (extra, b"")])
    code, doc = verify(out)
    assert code == 1
    assert [(p["kind"], p["path"]) for p in doc["problems"]] == [("added", "extra/")], \
        doc["problems"]


def test_an_extra_directory_beside_an_unpacked_bundles_store_is_added(demo, tmp_path):  # noqa: F811
    out = tmp_path / "b.tar"
    export(demo, out)
    un = _unpacked(out, tmp_path / "un")
    (un / "extra" / "deeper").mkdir(parents=True)
    code, doc = verify(un)
    assert code == 1
    assert [(p["kind"], p["path"]) for p in doc["problems"]] == [
        ("added", "extra/"), ("added", "extra/deeper/")], doc["problems"]
    assert doc["files"]["added"] == 2


@pytest.mark.parametrize("at", ["end", "next"])
@pytest.mark.parametrize("unpacked", [False, True])
def test_a_file_the_manifest_lists_twice_is_a_manifest_problem(demo, tmp_path, at,  # noqa: F811
                                                               unpacked):
    """As a fact listed twice: the second entry collapsed into the first
    ("files: 8 checked" of 9 entries), and the bundle verified OK."""
    from .test_bundle_1207d import _redigest

    out = tmp_path / "b.tar"
    export(demo, out)
    forged = tmp_path / "forged.tar"

    def twice(m: dict) -> None:
        first = m["files"][0]
        m["files"].insert(len(m["files"]) if at == "end" else 1, dict(first))

    m = _redigest(out, forged, twice)
    dup = m["files"][0]["path"]
    if unpacked:
        forged = _unpacked(forged, tmp_path / "un")
    code, doc = verify(forged)
    assert code == 1
    assert [(p["kind"], p["path"]) for p in doc["problems"]] == [("manifest", dup)], \
        doc["problems"]
    assert "listed twice" in doc["problems"][0]["detail"]


def test_verifys_text_says_when_the_bundles_facts_could_not_be_read(demo, tmp_path):  # noqa: F811
    """A bundle of a store whose database is not one (copied byte for byte,
    ``database.copy`` raw): verify's text said "facts: 0" and OK, as for a
    store with no facts, where export's summary named the reason."""
    from .conftest import run_cli

    for p in demo.glob("facts.sqlite3*"):
        p.unlink()
    (demo / "facts.sqlite3").write_bytes(b"not a database at all\n" * 300)
    out = tmp_path / "b.tar"
    doc = export(demo, out)
    assert doc["database"]["copy"] == "raw"
    r = run_cli("verify", str(out))
    assert r.exit_code == 0, r.stdout
    lines = r.stdout.splitlines()
    said = [line for line in lines if line.startswith("facts: ")]
    assert said == ["facts: facts.sqlite3: facts database unreadable: file is not a database; "
                    "no fact, and no fact's evidence, could be checked"], r.stdout
    assert lines.index(said[0]) == next(i for i, x in enumerate(lines)
                                        if x.startswith("validate: ")) + 1
    code, v = verify(out)
    assert code == 0 and v["manifest"]["database"]["copy"] == "raw"


def test_verifys_text_of_a_bundle_whose_facts_were_read_says_nothing_more(demo, tmp_path):  # noqa: F811
    from .conftest import run_cli

    out = tmp_path / "b.tar"
    export(demo, out)
    r = run_cli("verify", str(out))
    assert r.exit_code == 0, r.stdout
    assert not [line for line in r.stdout.splitlines() if line.startswith("facts: ")]
    assert "could be checked" not in r.stdout


# ---------------------------------------------------------------- code review: the held signals


# memctl run with shutil.rmtree patched: each of the first two removals of a
# private directory of KIND sends SIGINT to memctl as it begins, then removes
# (a Ctrl-C, and a second one, while the copy is removed)
_TWICE_IN_REMOVAL = """
import os, runpy, shutil, signal, sys
kind, args = sys.argv[1], sys.argv[2:]
orig = shutil.rmtree
calls = []
def rmtree(p, *a, **k):
    if os.path.basename(str(p)).startswith(f"memctl-{kind}-") and len(calls) < 2:
        calls.append(p)
        os.kill(os.getpid(), signal.SIGINT)
    return orig(p, *a, **k)
shutil.rmtree = rmtree
sys.argv = ["memctl", *args]
runpy.run_module("lecode_memctl", run_name="__main__")
"""


def test_a_second_ctrl_c_during_the_removal_waits_for_it(demo, tmp_path):  # noqa: F811
    """The signals are held back while the copy is removed: a Ctrl-C there
    waits, and a second one (which ends memctl at once elsewhere) cannot
    kill memctl halfway through the removal.  Without the block, the first
    one raised inside the removal, and the second, in its retry, ended the
    process by SIGINT with the copy left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", _TWICE_IN_REMOVAL, "export", "--store", str(demo),
                        "export", "-o", str(tmp_path / "b.tar")],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.count(b"memctl: error: interrupted") == 1, r.stderr
    assert os.listdir(tmp) == [], r.stderr


@pytest.mark.skipif(snapshot._owner() is None, reason="no /proc: copies are never swept")
def test_an_interrupt_during_the_sweep_leaves_not_the_new_copy(demo, tmp_path):  # noqa: F811
    """A Ctrl-C that lands while the sweep removes a killed process's copy
    (held back until that removal is done) stops the command before export
    knows its own fresh directory: that directory is removed too, not left
    until a later run's sweep."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    owner = snapshot._owner()
    assert owner is not None
    ns, pid, start = owner.split(".")
    gone = tmp / f"memctl-export-{ns}.{pid}.{int(start) + 1}-00aa"
    (gone / "store").mkdir(parents=True)
    (gone / "store" / "MEMORY.md").write_text("a killed export's copy\n")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    script = _TWICE_IN_REMOVAL.replace("len(calls) < 2", "len(calls) < 1")
    r = subprocess.run([sys.executable, "-c", script, "export", "--store", str(demo),
                        "export", "-o", str(tmp_path / "b.tar")],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 130, r.stderr
    assert os.listdir(tmp) == [], (os.listdir(tmp), r.stderr)
