"""Crafted archives for ``memctl verify`` (a review of 2026-12-07, second
part): a header whose prefix field ``tar -x`` ignores but ``tarfile``
joins to the name, and member names whose bytes add up to gigabytes of
memory.  Each archive is built from the demo's bundle."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import orjson
import pytest

from .test_bundle import _members, exported_demo, kinds, verify

MiB = 1 << 20


@pytest.fixture(scope="module")
def template_1207b(demo_template, tmp_path_factory) -> Path:
    """The demo's bundle, exported once for this file."""
    return exported_demo(demo_template, tmp_path_factory.mktemp("b1207b"))


@pytest.fixture
def demo_bundle(template_1207b, tmp_path) -> Path:
    """A copy of the demo's bundle, for one test to tamper with."""
    out = tmp_path / "t.tar"
    shutil.copyfile(template_1207b, out)
    return out


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
