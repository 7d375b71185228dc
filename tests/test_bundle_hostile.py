"""Crafted archives ``memctl verify`` must judge, not trip over (a review of
2026-12-07): malformed and sparse members, headers and tails that cost
memory or disk, what ``tar -x`` applies beyond the bytes (modes, owners,
directories), and manifests forged with their digest recomputed; then
(a second review, the end of the file) a header whose prefix field ``tar
-x`` ignores but ``tarfile`` joins to the name, and member names whose
bytes add up to gigabytes of memory.  Each archive is built from the
demo's bundle."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import orjson
import pytest

from .builders import copy_demo
from .conftest import run_cli
from .test_bundle import _members, export, exported_demo, kinds, verify

MiB = 1 << 20


@pytest.fixture(scope="module")
def hostile_template(demo_template, tmp_path_factory) -> Path:
    """The demo's bundle, exported once (as test_bundle's ``bundle_template``)."""
    return exported_demo(demo_template, tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def demo_bundle(hostile_template, tmp_path) -> Path:
    """A copy of the demo's bundle, for one test to tamper with."""
    out = tmp_path / "t.tar"
    shutil.copyfile(hostile_template, out)
    return out


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    """The members as a pax archive's bytes (each member's size its data's)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for m, data in members:
            if m.isfile() and m.sparse is None and not m.pax_headers.get("GNU.sparse.major"):
                m.size = len(data)
            tf.addfile(m, io.BytesIO(data) if m.size else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"", *, mode: int = 0o600,
          pax: dict[str, str] | None = None) -> tuple[tarfile.TarInfo, bytes]:
    ti = tarfile.TarInfo(name)
    ti.mode, ti.size = mode, len(data)
    if pax:
        ti.pax_headers = pax
    return ti, data


def _problem_lines(bundle_path: Path) -> list[str]:
    r = run_cli("verify", str(bundle_path))
    assert r.exit_code == 1 and r.stderr == "", (r.exit_code, r.stderr)
    return [ln for ln in r.stdout.splitlines() if ln.startswith("  ") and ln.split()[0] in (
        "archive", "manifest", "changed", "missing", "added", "refused", "order", "duplicate",
        "validate", "facts")]


# ---------------------------------------------------------------- malformed headers


def _malformed_sparse(kind: str) -> tuple[tarfile.TarInfo, bytes]:
    if kind == "map":     # GNU sparse 0.1: the map in a pax record
        return _file("store/notes/sparse.md", b"x", pax={
            "GNU.sparse.map": "x", "GNU.sparse.size": "1", "GNU.sparse.numblocks": "1"})
    # GNU sparse 1.0: the map at the start of the data, here cut short
    ti, data = _file("store/notes/sparse.md", b"5\n1\n", pax={
        "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
        "GNU.sparse.name": "store/notes/sparse.md", "GNU.sparse.realsize": "1"})
    return ti, data


@pytest.mark.parametrize("where", ["first", "later"])
@pytest.mark.parametrize("kind", ["map", "cut 1.0 map"])
def test_a_malformed_sparse_header_is_an_archive_problem(demo_bundle, kind, where):
    """tarfile raises ValueError on a GNU sparse map it cannot parse (in
    ``tarfile.open`` for the first member, in ``next()`` after): verify
    exited 70, "internal error".  It is an ``archive`` problem, exit 1."""
    ms = _members(demo_bundle)
    bad = _malformed_sparse(kind)
    ms = [bad, *ms] if where == "first" else [*ms[:3], bad, *ms[3:]]
    demo_bundle.write_bytes(_tar(ms))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert "archive" in {k for k, _p in kinds(doc)}, doc["problems"]


# ---------------------------------------------------------------- sparse members


@pytest.fixture
def written(monkeypatch) -> list[str]:  # noqa: ANN001
    """The names verify unpacks to disk, as it writes them."""
    from lecode_memctl.core import bundle as core

    names: list[str] = []
    real_write = core._Unpacker.write

    def write(self, name, src):  # noqa: ANN001, ANN202
        names.append(name)
        return real_write(self, name, src)

    monkeypatch.setattr(core._Unpacker, "write", write)
    return names


@pytest.mark.parametrize("version", ["0.1", "1.0"])
def test_a_sparse_member_is_refused_not_unpacked(demo_bundle, version, written):
    """A GNU sparse member (pax headers; tarfile gives it as a regular file
    with ``sparse`` set) unpacks to its real size, zeros where the map has
    holes: a 100 KB archive gave 4 GiB in the temporary directory.  Export
    never writes one: it is refused, as links and devices are."""
    name = "store/notes/big.md"
    if version == "0.1":
        member = _file(name, b"x", pax={"GNU.sparse.map": f"{4 * MiB - 1},1",
                                        "GNU.sparse.size": str(4 * MiB)})
    else:
        smap = b"1\n%d\n1\n" % (4 * MiB - 1)
        member = _file("store/notes/GNUSparseFile.0/big.md", smap.ljust(512, b"\0") + b"x", pax={
            "GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
            "GNU.sparse.realsize": str(4 * MiB)})
    demo_bundle.write_bytes(_tar([*_members(demo_bundle), member]))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert ("refused", name) in kinds(doc), doc["problems"]
    assert name not in written


# ---------------------------------------------------------------- memory: headers read whole


def _with_big_header(archive: bytes, kind: bytes, size: int) -> bytes:
    """``archive`` after a header of type ``kind`` (pax ``x``/``g``, GNU
    long name ``L``) declaring ``size`` bytes of zeros, which follow."""
    ti = tarfile.TarInfo("././@PaxHeader")
    ti.type, ti.size = kind, size
    pad = -size % tarfile.BLOCKSIZE
    return ti.tobuf(tarfile.USTAR_FORMAT) + bytes(size + pad) + archive


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME],
                         ids=["pax", "pax global", "GNU long name"])
def test_a_header_of_megabytes_is_refused_not_read_whole(demo_bundle, tmp_path, kind, gz):
    """tarfile reads a pax header or a GNU long name whole, in one read: a
    1 MB .tar.gz declaring a 1 GiB pax header of zeros took 1 GB of memory
    (and verified OK).  A read of more than 1 MiB is refused: an
    ``archive`` problem, one line, exit 1."""
    import gzip

    data = _with_big_header(demo_bundle.read_bytes(), kind, 3 * MiB)
    out = tmp_path / ("h.tar.gz" if gz else "h.tar")
    out.write_bytes(gzip.compress(data, 1) if gz else data)
    lines = _problem_lines(out)
    assert len(lines) == 1 and lines[0].split()[0] == "archive", lines
    assert "header of 3145728 bytes" in lines[0], lines


# ---------------------------------------------------------------- after the end-of-archive marker


def _extra_archive() -> bytes:
    return _tar([_file("store/notes/after-the-end.md", b"read by tar -i\n")])


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
def test_members_after_the_end_of_archive_marker_are_an_archive_problem(demo_bundle, tmp_path,
                                                                        gz):
    """``cat b.tar extra.tar`` (or two gzip streams) verified OK, although
    ``tar -xi`` unpacks the second archive's members too: what follows the
    two zero blocks must be zeros (tar's padding), else ``archive``."""
    import gzip

    good, extra = demo_bundle.read_bytes(), _extra_archive()
    out = tmp_path / ("x.tar.gz" if gz else "x.tar")
    out.write_bytes(gzip.compress(good, 1) + gzip.compress(extra, 1) if gz else good + extra)
    code, doc = verify(out)
    assert code == 1
    (p,) = [p for p in doc["problems"] if p["kind"] == "archive"]
    assert f"at offset {len(good)}" in p["detail"], p
    # tar's own padding after the marker (zero blocks up to a record) is fine
    out.write_bytes(gzip.compress(good + bytes(20 * 512), 1) if gz else good + bytes(20 * 512))
    code, doc = verify(out)
    assert code == 0, doc["problems"]


# ---------------------------------------------------------------- disk: what is unpacked


def test_a_member_not_listed_or_of_another_size_is_hashed_not_unpacked(demo_bundle, written):
    """Only a listed member of its listed size is unpacked (the audit reads
    those); any other is hashed as it is read, and named ``added`` or
    ``changed``: before, each was written to the temporary directory
    whatever its size."""
    ms = _members(demo_bundle)
    ms = [(m, d + b"more\n" if m.name == "store/MEMORY.md" else d) for m, d in ms]
    ms += [_file("store/notes/planted.md", b"x" * 5000), _file("README.txt", b"hello\n")]
    demo_bundle.write_bytes(_tar(ms))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert {("changed", "store/MEMORY.md"), ("added", "store/notes/planted.md"),
            ("added", "README.txt")} <= kinds(doc), doc["problems"]
    assert not {"store/MEMORY.md", "store/notes/planted.md", "README.txt"} & set(written)
    assert "store/scratchpad.md" in written and "manifest.json" in written


def test_members_before_a_late_manifest_are_unpacked_once_it_is_read(demo_bundle, written):
    """The manifest last (an ``order`` problem): the members before it are
    hashed as they come, then those listed at their size are read again
    and unpacked, so the audit still sees the whole store (no ``validate``
    or ``facts`` problem); one not listed is never written."""
    ms = _members(demo_bundle)
    ms = [*ms[1:], _file("store/notes/planted.md", b"planted\n"), ms[0]]
    demo_bundle.write_bytes(_tar(ms))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert kinds(doc) == {("order", "manifest.json"), ("added", "store/notes/planted.md")}, \
        doc["problems"]
    assert "store/notes/planted.md" not in written
    assert doc["files"]["checked"] == len([m for m, _d in ms if m.isfile()]) - 2
    assert written[0] == "manifest.json" and "store/facts.sqlite3" in written


def test_a_late_manifest_in_a_gzip_archive_is_read_again_from_the_start(demo_bundle, tmp_path,
                                                                        written):
    import gzip

    ms = _members(demo_bundle)
    out = tmp_path / "late.tar.gz"
    out.write_bytes(gzip.compress(_tar([*ms[1:], ms[0]]), 1))
    code, doc = verify(out)
    assert kinds(doc) == {("order", "manifest.json")}, doc["problems"]
    assert "store/facts.sqlite3" in written


# ---------------------------------------------------------------- what tar -x applies


def _retouched(ms, name: str, **attrs):  # noqa: ANN001, ANN003, ANN202
    out = []
    for m, d in ms:
        if m.name.rstrip("/") == name.rstrip("/"):
            for k, v in attrs.items():
                setattr(m, k, v)
        out.append((m, d))
    return out


@pytest.mark.parametrize("change, path, said", [
    (dict(mode=0o4755), "store/MEMORY.md", "mode 4755"),
    (dict(mode=0o644), "manifest.json", "mode 0644"),
    (dict(uid=1000, gid=1000), "store/notes/release.md", "owner 1000:1000"),
    (dict(uname="root"), "store/scratchpad.md", "owner 0:0 (root:)"),
    (dict(mode=0o777), "store/", "mode 0777"),
    (dict(mode=0o2700), "store/sessions/", "mode 2700"),
], ids=["setuid", "readable by all", "uid", "uname", "store dir 0777", "setgid dir"])
def test_a_member_mode_or_owner_export_does_not_write_is_changed(demo_bundle, change, path, said):
    """A member's mode and owner are applied by ``tar -x`` (a setuid file, a
    directory open to all), which ``validate`` of the result, or verify of
    the directory, reports; the archive's verify did not look.  Export
    writes files 0600, directories 0700, owner 0:0 without names: anything
    else is ``changed``."""
    demo_bundle.write_bytes(_tar(_retouched(_members(demo_bundle), path, **change)))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert kinds(doc) == {("changed", path)}, doc["problems"]
    assert said in doc["problems"][0]["detail"]


def test_a_directory_member_no_listed_file_is_in_is_added(demo_bundle):
    """``store/evil/`` (no listed file in it): ``tar -x`` makes it, and
    ``validate`` of the result reports it; verify passed the archive."""
    ti, _d = _file("store/evil/", mode=0o700)
    ti.type = tarfile.DIRTYPE
    ms = _members(demo_bundle)
    demo_bundle.write_bytes(_tar([*ms, (ti, b"")]))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert kinds(doc) == {("added", "store/evil/")}, doc["problems"]


# ---------------------------------------------------------------- export: a linked database


def test_a_linked_facts_database_is_skipped_as_a_symlink(demo_template, tmp_path):
    """FORMAT.md: symbolic links are skipped with reason ``symlink``; the
    facts database as a link was ``not_regular``."""
    store = copy_demo(demo_template, tmp_path / "demo")
    target = tmp_path / "elsewhere.sqlite3"
    (store / "facts.sqlite3").rename(target)
    (store / "facts.sqlite3").symlink_to(target)
    doc = export(store, tmp_path / "b.tar")
    assert {"path": "facts.sqlite3", "reason": "symlink"} in doc["skipped"], doc["skipped"]
    assert doc["database"]["copy"] == "none"


def test_verify_documents_each_exit_status_it_gives(tmp_path):
    """``verify FIFO`` exits 2 (a usage error: neither a file nor a
    directory), which its help and FORMAT.md did not list."""
    import os

    os.mkfifo(tmp_path / "fifo")
    r = run_cli("verify", str(tmp_path / "fifo"))
    assert r.exit_code == 2 and "not a file or directory" in r.stderr
    text = " ".join(run_cli("verify", "--help").stdout.split())
    assert "2 usage (BUNDLE neither a file nor a directory: a FIFO, a device)" in text, text
    fmt = " ".join((Path(__file__).parents[1] / "docs" / "FORMAT.md").read_text().split())
    assert "2 when BUNDLE is neither a file nor a directory" in fmt


# ---------------------------------------------------------------- forged manifests (digest recomputed)


def _forged(bundle_path: Path, change) -> None:  # noqa: ANN001
    from .test_bundle import _manifest, _put_manifest

    doc = _manifest(bundle_path)
    change(doc)
    _put_manifest(bundle_path, doc)


@pytest.mark.parametrize("version", [True, 1.0], ids=["true", "1.0"])
def test_a_version_that_is_not_the_integer_1_is_refused(demo_bundle, version):
    """``true == 1`` and ``1.0 == 1`` in Python: both were read as version 1."""
    _forged(demo_bundle, lambda d: d.update(version=version))
    code, doc = verify(demo_bundle)
    assert code == 1
    assert kinds(doc) == {("manifest", "manifest.json")}, doc["problems"]
    assert "bundle format version" in doc["problems"][0]["detail"]


def test_a_size_that_is_not_an_integer_is_a_malformed_manifest(demo_bundle):
    """``"size": true`` passed as 1 and was printed as Python's ``True`` in
    the ``changed`` line."""
    def change(d):  # noqa: ANN001, ANN202
        d["files"][0]["size"] = True

    _forged(demo_bundle, change)
    r = run_cli("verify", str(demo_bundle))
    assert r.exit_code == 1 and "True" not in r.stdout, r.stdout
    code, doc = verify(demo_bundle)
    assert kinds(doc) == {("manifest", "manifest.json")}, doc["problems"]


def test_a_fact_row_listed_twice_is_a_manifest_problem(demo_bundle):
    """The rows were compared by id, the second of the same id replacing
    the first: the bundle verified OK."""
    def change(d):  # noqa: ANN001, ANN202
        rows = d["facts"]["rows"]
        rows.insert(1, dict(rows[0]))

    _forged(demo_bundle, change)
    code, doc = verify(demo_bundle)
    assert code == 1
    assert kinds(doc) == {("manifest", "manifest.json")}, doc["problems"]
    assert "listed twice" in doc["problems"][0]["detail"]


def test_a_fact_id_that_is_not_text_gives_a_check_row_of_text(demo_bundle):
    """``"fact_id": 12`` gave a ``fact_check`` row whose ``fact_id`` was the
    number 12 (the schema says a string): the id is shown as its JSON text,
    and the difference named (the row is in the manifest, not the database)."""
    def change(d):  # noqa: ANN001, ANN202
        d["facts"]["rows"][0]["fact_id"] = 12

    _forged(demo_bundle, change)
    code, doc = verify(demo_bundle)
    assert code == 1
    assert all(type(f["fact_id"]) is str for f in doc["facts"]), doc["facts"]
    assert any(p["detail"].startswith("fact 12: in the manifest, not in the database")
               for p in doc["problems"]), doc["problems"]


# ---------------------------------------------------------------- the prefix field


MAGICS = {"gnu": b"ustar  \0", "v7": bytes(8)}


def _split_header(data: bytes, member: bytes, magic: bytes) -> bytes:
    """``data`` (a tar archive) with the header named ``member`` (its own
    header, after any pax or GNU long name header) rewritten as the review
    did: the name field the last component, the prefix field (bytes
    345-500) the directory, ``magic`` at 257-265, the checksum recomputed."""
    d = bytearray(data)
    off = 0
    done = False
    while d[off:off + 512] != bytes(512):
        h = d[off:off + 512]
        size = int(h[124:136].rstrip(b"\0 ") or b"0", 8)
        if h[:100].rstrip(b"\0") == member:
            head, _, tail = member.rpartition(b"/")
            h[0:100] = tail.ljust(100, b"\0")
            h[345:500] = head.ljust(155, b"\0")
            h[257:265] = magic
            h[148:156] = b" " * 8
            h[148:156] = b"%06o\0 " % sum(h)
            d[off:off + 512] = h
            done = True
        off += 512 + -(-size // 512) * 512
    assert done, member
    return bytes(d)


def _tar_x_names(archive: Path, into: Path) -> set[str] | None:
    """What GNU tar's ``tar -x`` makes of ``archive`` (None: no GNU tar here)."""
    tar = shutil.which("tar")
    if tar is None:
        return None
    version = subprocess.run([tar, "--version"], capture_output=True, text=True).stdout
    if "GNU tar" not in version:
        return None
    into.mkdir()
    subprocess.run([tar, "-xf", str(archive), "-C", str(into)], check=True,
                   capture_output=True)
    return {str(p.relative_to(into)) for p in into.rglob("*")}


@pytest.mark.parametrize("magic", sorted(MAGICS))
def test_a_prefix_field_outside_a_posix_ustar_header_is_refused(demo_bundle, tmp_path, magic):
    """``store/facts.sqlite3`` as name ``facts.sqlite3`` and prefix ``store``
    in a GNU (``ustar  \\0``) or V7 (zeros) header: tarfile joins the
    prefix whatever the magic, GNU tar only in a POSIX ustar header, and
    unpacks ``facts.sqlite3`` at the top.  verify said OK, exit 0.  The
    member is ``refused`` now, exit 1."""
    evil = tmp_path / "evil.tar"
    evil.write_bytes(_split_header(demo_bundle.read_bytes(), b"store/facts.sqlite3",
                                   MAGICS[magic]))
    unpacked = _tar_x_names(evil, tmp_path / "x")
    if unpacked is not None:       # (the premise: tar -x puts it elsewhere)
        assert "facts.sqlite3" in unpacked and "store/facts.sqlite3" not in unpacked
    code, doc = verify(evil)
    assert code == 1, doc["problems"]
    (p,) = [p for p in doc["problems"] if p["kind"] == "refused"]
    assert p["path"] == "store/facts.sqlite3", p
    assert "prefix" in p["detail"] and "facts.sqlite3" in p["detail"], p
    assert ("missing", "store/facts.sqlite3") in kinds(doc)


def test_a_prefix_field_is_looked_for_in_the_members_own_header(demo_bundle, tmp_path):
    """After a pax extended header (``x``, a POSIX ustar header itself),
    the member's own header is the one judged."""
    ms = _members(demo_bundle)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for m, data in ms:
            if m.name == "store/facts.sqlite3":
                m.pax_headers = {"comment": "a pax header before the member"}
            tf.addfile(m, io.BytesIO(data) if m.isfile() else None)
    evil = tmp_path / "evil.tar"
    evil.write_bytes(_split_header(buf.getvalue(), b"store/facts.sqlite3", MAGICS["gnu"]))
    code, doc = verify(evil)
    assert code == 1
    assert ("refused", "store/facts.sqlite3") in kinds(doc), doc["problems"]


def test_export_writes_posix_ustar_headers_and_its_bundle_verifies(demo_bundle):
    """Every header export writes (the pax ones too) is POSIX ustar with an
    empty prefix field, and the bundle verifies OK."""
    data = demo_bundle.read_bytes()
    off = 0
    while data[off:off + 512] != bytes(512):
        h = data[off:off + 512]
        assert h[257:265] == b"ustar\x0000", h[:100]
        assert h[345:500] == bytes(155), h[:100]
        size = int(h[124:136].rstrip(b"\0 ") or b"0", 8)
        off += 512 + -(-size // 512) * 512
    code, doc = verify(demo_bundle)
    assert code == 0, doc["problems"]


# ---------------------------------------------------------------- memory: the members' names

LONG = 1_000_000        # a name's characters, under the 1 MiB a header may hold


def _with_long_names(bundle_path: Path, out: Path, count: int, length: int = LONG) -> None:
    """The reviewer's archive: the demo's members, then ``count`` empty
    members each named ``store/notes/`` + ``length`` 'a' + ``N.md`` (pax
    path headers), gzip-compressed."""
    with tarfile.open(bundle_path) as src, \
            tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT, compresslevel=1) as o:
        for ti in src.getmembers():
            o.addfile(ti, src.extractfile(ti) if ti.isfile() else None)
        for i in range(count):
            ti = tarfile.TarInfo("store/notes/" + "a" * length + f"{i}.md")
            ti.mode = 0o600
            o.addfile(ti)


_PEAK = """\
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, timeout=300)
sys.stdout.buffer.write(r.stdout)
sys.stderr.write(f"{r.returncode} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n")
"""


def test_many_long_member_names_end_quickly_in_bounded_memory(demo_bundle, tmp_path):
    """A 300 KB .tar.gz of 300 empty members, each a 1,000,000-character
    name (each header under the 1 MiB cap): every name was held (the
    members, the names seen, each problem) and encoded in one document:
    1.8 GB for the review's 600, a segfault or exit 70 under ``ulimit -v
    1048576``.  A name over 4096 bytes is refused, shown cut (its length
    and SHA-256), and never held; the headers' total is capped.  Peak RSS
    under 400 MiB (measured in a child), exit 1, one JSON document."""
    import hashlib
    import time

    out = tmp_path / "names.tar.gz"
    _with_long_names(demo_bundle, out, 300)
    assert out.stat().st_size < 2 * MiB
    began = time.monotonic()
    r = subprocess.run([sys.executable, "-c", _PEAK, sys.executable, "-m", "lecode_memctl",
                        "verify", str(out), "--json"], capture_output=True, timeout=320)
    took = time.monotonic() - began
    code, peak_kib = map(int, r.stderr.decode().split()[-2:])
    assert code == 1, r.stderr[-2000:]
    assert peak_kib < 400 * 1024, f"peak RSS {peak_kib} KiB"
    assert took < 120, took
    doc = orjson.loads(r.stdout)
    assert doc["exit_code"] == 1
    assert len(r.stdout) < 8 * MiB, len(r.stdout)
    long_ones = [p for p in doc["problems"] if p["path"] and "aaaa" in p["path"]]
    assert long_ones
    first = "store/notes/" + "a" * LONG + "0.md"
    want_sha = hashlib.sha256(first.encode()).hexdigest()
    p0 = long_ones[0]
    assert p0["kind"] == "refused", p0["kind"]
    assert len(p0["path"]) < 4096 + 200, len(p0["path"])
    assert f"{len(first)} bytes" in p0["path"] and want_sha in p0["path"], p0["path"][-200:]
    assert all(len(p["path"] or "") + len(p["detail"]) < 8192 + 400 for p in doc["problems"])


def test_a_name_over_4096_bytes_is_refused_and_shown_cut(demo_bundle, tmp_path):
    """One member named with 5,000 bytes: refused (no path is that long),
    its name in the report cut to 4096 characters with its length and
    SHA-256; the text report too."""
    import hashlib

    from .conftest import run_cli

    out = tmp_path / "one.tar"
    _with_long_names(demo_bundle, out, 1, length=5000)
    name = "store/notes/" + "a" * 5000 + "0.md"
    code, doc = verify(out)
    assert code == 1
    (p,) = [p for p in doc["problems"] if "aaaa" in (p["path"] or "")]
    assert p["kind"] == "refused", p
    assert p["path"].startswith(name[:4096]) and name not in p["path"]
    assert f"({len(name)} bytes, sha256 {hashlib.sha256(name.encode()).hexdigest()})" \
        in p["path"], p["path"][4096:]
    r = run_cli("verify", str(out))
    assert r.exit_code == 1 and name not in r.stdout
    assert hashlib.sha256(name.encode()).hexdigest() in r.stdout


def test_headers_over_the_cap_are_one_archive_problem_and_reading_stops(demo_bundle,
                                                                        monkeypatch):
    """The headers (everything but the members' data) may total so many
    bytes: past it, one ``archive`` problem, the rest not read; exit 1."""
    from lecode_memctl.core import bundle as core

    monkeypatch.setattr(core, "HEADERS_CAP", 4 * 512)
    monkeypatch.setattr(core, "HEADERS_PER_FILE", 0)
    code, doc = verify(demo_bundle)
    assert code == 1
    (p,) = [p for p in doc["problems"] if p["kind"] == "archive"]
    assert "headers" in p["detail"] and "2048 bytes" in p["detail"], p
    assert "not read" in p["detail"], p


def test_a_posix_ustar_magic_with_another_version_keeps_its_prefix(demo_bundle, tmp_path):
    """GNU tar takes the prefix by the 6 bytes ``ustar\\0`` whatever the
    version field holds (``\\0\\0`` here), as tarfile does: the member is
    where export put it, and the bundle verifies.  The first check of the
    version refused it ("tar -x ignores it", which it does not)."""
    other = tmp_path / "other.tar"
    other.write_bytes(_split_header(demo_bundle.read_bytes(), b"store/facts.sqlite3",
                                    b"ustar\x00\x00\x00"))
    unpacked = _tar_x_names(other, tmp_path / "x")
    if unpacked is not None:
        assert "store/facts.sqlite3" in unpacked
    code, doc = verify(other)
    assert code == 0, doc["problems"]


def test_the_headers_cap_does_not_grow_past_its_most_with_the_manifest(demo_bundle,
                                                                        monkeypatch):
    """64 MiB + 4 KiB a listed file had no most: a manifest of millions of
    entries (a few hundred KB gzipped) allowed gigabytes of names."""
    from lecode_memctl.core import bundle as core

    monkeypatch.setattr(core, "HEADERS_CAP", 4 * 512)
    monkeypatch.setattr(core, "HEADERS_PER_FILE", 1 << 30)   # (as if it listed millions)
    monkeypatch.setattr(core, "HEADERS_MAX", 6 * 512)
    code, doc = verify(demo_bundle)
    assert code == 1
    (p,) = [p for p in doc["problems"] if p["kind"] == "archive"]
    assert "3072 bytes" in p["detail"], p
