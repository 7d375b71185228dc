"""``memctl secrets`` reads a store's text files (MEMORY.md, notes, daily
logs) a piece at a time, not whole: a 30 MB MEMORY.md read whole, decoded
and split into its lines took 190 MiB.

The findings are the whole text's: the old code (the file read whole, its
text scanned at once, :func:`_text_hits`) is the reference, with pieces made
small enough that keys, lines and private key blocks are cut every way."""

from __future__ import annotations

import os
import random
import tempfile
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import secrets
from lecode_memctl.core.secrets import KIND_FILE, Detector, _text_hits, scan_file


def _whole_file_hits(detector: Detector, path: str, filename: str
                     ) -> tuple[int, list[tuple[str, str, str, dict[str, Any]]]]:
    """The old ``scan_file`` of a text file: read whole, scanned at once."""
    with open(path, "rb") as fh:
        data = fh.read()
    text = data.decode("utf-8", "surrogateescape")
    return len(data), [(v, d, KIND_FILE, {"line": ln})
                       for v, d, ln in _text_hits(detector, text, filename)]


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_B64 = _ALNUM + "+/"

_aws = st.text(_B32, min_size=16, max_size=16).map(lambda s: f"- key AKIA{s} for the bucket")
_github = st.text(_ALNUM, min_size=36, max_size=40).map(lambda s: f"token: ghp_{s}")
_entropy = st.text(_B64, min_size=24, max_size=60).map(lambda s: f'secret = "{s}"')
_plain = st.sampled_from(["", "", " ", "# Notes", "use tabs, width 4", "café ünïcødé → ✓",
                          "日本語のメモ", "emoji 🔑 here", "a line\r", "-----", "END"])
_raw = st.sampled_from([b"\xff\xfe not utf-8", b"half \xe2\x82", b"\xc3"])


@st.composite
def _pem(draw: Any) -> list[str]:
    """A private key block: BEGIN, base64 lines, maybe an END (maybe far
    below, maybe never: then it runs to an empty line), maybe a PuTTY key."""
    kind = draw(st.sampled_from(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                 "EC PRIVATE KEY"]))
    body = draw(st.lists(st.text(_B64, min_size=1, max_size=64), max_size=6))
    if draw(st.booleans()) and draw(st.booleans()):
        return ["PuTTY-User-Key-File-2: ssh-rsa", *body]
    lines = [draw(st.sampled_from(["", "key: ", "  "])) + f"-----BEGIN {kind}-----", *body]
    if draw(st.integers(0, 3)):
        lines.append(f"-----END {kind}-----")
    return lines


_line = st.one_of(_aws, _github, _entropy, _plain, _plain, _pem(),
                  _raw)


@st.composite
def _markdown(draw: Any) -> bytes:
    parts = draw(st.lists(_line, max_size=30))
    lines: list[bytes] = []
    for p in parts:
        for x in (p if isinstance(p, list) else [p]):
            lines.append(x if isinstance(x, bytes) else x.encode("utf-8"))
    nl = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = nl.join(lines)
    if lines and draw(st.booleans()):
        data += nl
    return data


@pytest.mark.heavy
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=_markdown(), piece=st.integers(1, 200))
def test_pieces_find_what_the_whole_text_does(detector: Detector, data: bytes,
                                              piece: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "MEMORY.md")
        with open(path, "wb") as fh:
            fh.write(data)
        size, want = _whole_file_hits(detector, path, "MEMORY.md")
        with pytest.MonkeyPatch.context() as m:
            m.setattr(secrets, "FILE_PIECE", piece)
            got = scan_file(detector, root, "MEMORY.md")
    assert got.error is None
    assert got.size == size
    assert got.hits == want


def test_a_private_key_block_cut_by_every_piece(detector: Detector, tmp_path) -> None:
    """Blocks that end far below their BEGIN (an END many pieces on, past an
    empty line: the END wins), never (no END follows: an empty line many
    pieces on), or with the file: found whole, whatever the piece."""
    body = [f"MIIE{i:04d}" + "Qk" * 30 for i in range(40)]
    text = "\n".join([
        "# Keys", "-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----", *body[:5], "", *(["words"] * 50),
        "-----END EC PRIVATE KEY-----", "AKIAQWERTYUIOPASDFGHJ",
        "-----BEGIN PRIVATE KEY-----", *body, "", *(["plain"] * 200),
        "PuTTY-User-Key-File-2: ssh-rsa", *body])
    (tmp_path / "MEMORY.md").write_text(text)
    size, want = _whole_file_hits(detector, str(tmp_path / "MEMORY.md"), "MEMORY.md")
    assert [(h[1], h[3]["line"], len(h[0])) for h in want] == [
        ("private-key", 2, 2821), ("private-key", 44, 705), ("aws-access-key", 102, 21),
        ("private-key", 103, 2787), ("private-key", 345, 2790)], want
    for piece in (1, 7, 64, 300, 1000, 1 << 20):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(secrets, "FILE_PIECE", piece)
            got = scan_file(detector, str(tmp_path), "MEMORY.md")
        assert (got.size, got.hits) == (size, want), piece


def _transient_peak(detector: Detector, root: str, lines: int) -> int:
    """Peak memory of scanning a MEMORY.md of ``lines`` lines (a key on one
    in ten) beyond what the scan keeps: its findings."""
    with open(os.path.join(root, "MEMORY.md"), "w") as fh:
        for i in range(lines):
            fh.write(f"- credential {i}: AKIA{i:016d}\n" if i % 10 == 0 else
                     f"- line {i}: use tabs, width {i % 8}, nothing to see here\n")
    tracemalloc.start()
    try:
        got = scan_file(detector, root, "MEMORY.md")
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got.error is None and len(got.hits) == (lines + 9) // 10
    return peak - kept


@pytest.mark.heavy
def test_memory_follows_the_piece_not_the_file(detector: Detector, tmp_path,
                                               monkeypatch) -> None:
    """The file read whole, decoded and split into lines made the peak grow
    with the file (4x the lines, 4x the memory); a piece at a time it stays."""
    monkeypatch.setattr(secrets, "FILE_PIECE", 2 << 10)
    # (the smaller file is still some five pieces; read whole: 46 and 157 KiB,
    # a piece at a time: some 20 KiB both.  At 8 KiB pieces and four times
    # the lines: 155 and 572 KiB whole, some 48 KiB in pieces, the same
    # ratios, four times the time)
    small = _transient_peak(detector, str(tmp_path), 188)        # ~9 KB
    large = _transient_peak(detector, str(tmp_path), 750)        # ~37 KB
    assert large < 1.5 * small, (small, large)


# A review found that a file of many private key blocks became one piece,
# scanned again block after block: each piece was cut after the last newline
# read, inside the next block, whose END was then read ahead and the piece
# grown again.


def test_many_key_blocks_are_scanned_in_bounded_pieces(tmp_path, monkeypatch):
    piece = 4096
    monkeypatch.setattr(secrets, "FILE_PIECE", piece)
    r = random.Random(1)
    lines = ["# keyring"]
    for i in range(60):        # blocks of ~1.7 KB, END always present
        lines += [f"key {i}:", "-----BEGIN RSA PRIVATE KEY-----",
                  *("".join(r.choice(_B64) for _ in range(64)) for _ in range(25)),
                  "-----END RSA PRIVATE KEY-----"]
    (tmp_path / "MEMORY.md").write_text("\n".join(lines) + "\n")
    size = (tmp_path / "MEMORY.md").stat().st_size
    scanned = []
    real = secrets.Detector.scan

    def counting(self, text, *a, **k):
        scanned.append(len(text))
        return real(self, text, *a, **k)

    monkeypatch.setattr(secrets.Detector, "scan", counting)
    got = secrets.scan_file(secrets.Detector(), str(tmp_path), "MEMORY.md")
    assert got.error is None and len(got.hits) == 60
    longest_block = 26 * 65 + 40
    # a piece is FILE_PIECE (plus the read that found its newline) plus at
    # most one key block run past its end -- not the whole file
    assert max(scanned) <= 3 * piece + longest_block, (max(scanned), size)
    # and the text is scanned a bounded number of times, not once per round
    assert sum(scanned) <= 3 * size, (sum(scanned), size, len(scanned))
