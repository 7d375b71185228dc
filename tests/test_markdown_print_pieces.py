"""``show``, ``log`` and ``notes NAME`` print a Markdown file in pieces.

They read the file whole, decoded it and printed it: a 32 MB MEMORY.md
peaked at 74 MiB (8 MB: 35 MiB).  A file larger than ``WHOLE_UPTO`` is now
checked in a first pass and printed from a second (``markdown.read_pieces``):
the same output, the same errors before any output, and an error after it
when the file was written to in place between the two."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.cli.output import safe
from lecode_memctl.core import markdown
from lecode_memctl.core.errors import StoreCorrupt
from lecode_memctl.core.layout import store_at
from lecode_memctl.core.rowmodel import doc_head

from .builders import SLUG, traced_peak
from .conftest import REPO, run_cli

_RELS = {"show": ("MEMORY.md",), "log": ("daily", "2026-01-01.md"), "notes": ("notes", "n.md")}
_ARGS = {"show": ("show",), "log": ("log", "2026-01-01"), "notes": ("notes", "n")}


def _store(tmp_path):
    store = store_at(tmp_path / "memory" / SLUG)
    for sub in ("daily", "notes"):
        (store.path / sub).mkdir(parents=True, exist_ok=True)
    return store


def _small_pieces(monkeypatch, whole: int = 64, piece: int = 7) -> None:
    monkeypatch.setattr(markdown, "WHOLE_UPTO", whole)
    monkeypatch.setattr(markdown, "PIECE_BYTES", piece)


def _expected(text: str, path, json_: bool) -> bytes:
    if json_:
        return orjson.dumps({**doc_head("markdown"), "path": str(path), "text": text}) + b"\n"
    out = safe(text, keep_newlines=True)
    return (out + ("\n" if out and not out.endswith("\n") else "")).encode()


_TEXTS = [
    "",
    "one line, no newline",
    "# Memory\n- tabs\there\n" * 20,
    "é→😀 multi-byte characters cut anywhere\n" * 30,
    "\x1b[31mred\x1b[0m \u202e reversed \x9b csi\n" * 10 + "end without newline é",
    "\n\n\n" * 50,
]


@pytest.mark.parametrize("command", sorted(_RELS))
@pytest.mark.parametrize("json_", [False, True])
@pytest.mark.parametrize("text", _TEXTS)
def test_the_same_output_as_the_whole_file(tmp_path, monkeypatch, command, json_, text):
    store = _store(tmp_path)
    path = store.path.joinpath(*_RELS[command])
    path.write_bytes(text.encode())
    _small_pieces(monkeypatch)
    r = run_cli("--store", str(store.path), *_ARGS[command], *(["--json"] if json_ else []))
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes == _expected(text, path, json_)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(exclude_categories=["Cs"]), max_size=300),
       whole=st.integers(0, 40), piece=st.integers(1, 9))
def test_the_pieces_join_to_the_text_read_whole(tmp_path, monkeypatch, text, whole, piece):
    store = _store(tmp_path)
    (store.path / "MEMORY.md").write_bytes(text.encode())
    _small_pieces(monkeypatch, whole, piece)
    path, pieces = markdown.read_pieces(store, markdown.memory_target())
    got = list(pieces)
    assert path == store.path / "MEMORY.md"
    assert "".join(got) == markdown.read_memory(store).text == text
    assert len(got) == 1 or len(text.encode()) > whole


@pytest.mark.parametrize("at", [0, 5, 63, 64, 65, 200, 399])
def test_a_file_that_is_not_utf8_is_refused_before_any_output(tmp_path, monkeypatch, at):
    store = _store(tmp_path)
    data = bytearray(("é" * 200).encode())
    data[at] = 0xFF
    (store.path / "MEMORY.md").write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt) as whole:
        markdown.read_memory(store)
    _small_pieces(monkeypatch)
    r = run_cli("--store", str(store.path), "show")
    assert (r.exit_code, r.stdout) == (5, ""), r.stderr
    assert whole.value.message in r.stderr
    r = run_cli("--store", str(store.path), "show", "--json")
    assert r.exit_code == 5
    assert orjson.loads(r.stdout_bytes)["error"]["message"] == whole.value.message


def _written_between_passes(monkeypatch, path, change) -> None:
    """Run ``change(path)`` once the first pass has checked the file."""
    first_pass = markdown.utf8_problem

    def then_change(pieces):
        got = first_pass(pieces)
        change(path)
        return got

    monkeypatch.setattr(markdown, "utf8_problem", then_change)


def _in_place(path) -> None:
    with open(path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"CHANGED")


def _append(path) -> None:
    with open(path, "ab") as fh:
        fh.write(b"more\n")


def _truncate(path) -> None:
    os.truncate(path, 150)


def _touch(path) -> None:
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.mark.parametrize("change", [_append, _touch])
def test_an_append_or_a_touch_between_the_reads_is_no_change(tmp_path, monkeypatch, change):
    """The bytes printed are the file's as the first read found them (a
    review: an append or a touch made it exit 5, checked by size and
    modification time)."""
    store = _store(tmp_path)
    path = store.path / "MEMORY.md"
    path.write_bytes(b"- a line of memory\n" * 40)
    _small_pieces(monkeypatch, whole=64, piece=64)
    _written_between_passes(monkeypatch, path, change)
    r = run_cli("--store", str(store.path), "show")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "- a line of memory\n" * 40, "")


def _same_size_rewrite(path) -> None:
    data = path.read_bytes()
    with open(path, "r+b") as fh:
        fh.write(data.replace(b"memory", b"MEMORY"))


@pytest.mark.parametrize("change", [_in_place, _truncate, _same_size_rewrite])
@pytest.mark.parametrize("json_", [False, True])
def test_a_file_written_in_place_while_printed_ends_in_an_error(tmp_path, monkeypatch, change,
                                                                json_):
    store = _store(tmp_path)
    path = store.path / "MEMORY.md"
    path.write_bytes(b"- a line of memory\n" * 40)
    _small_pieces(monkeypatch, whole=64, piece=64)
    _written_between_passes(monkeypatch, path, change)
    r = run_cli("--store", str(store.path), "show", *(["--json"] if json_ else []))
    assert r.exit_code == 5
    assert "changed while it was printed" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    if json_:
        # one document, ended as a streamed listing ends: the text given so
        # far, then the error
        doc = orjson.loads(r.stdout_bytes)
        assert doc["error"]["code"] == "store_corrupt" and doc["error"]["exit_code"] == 5
        assert "changed while it was printed" in doc["error"]["message"]
        assert doc["text"] and doc["text"].startswith("- a line of ")
    else:
        assert r.stdout.startswith("- a line of ")


def test_a_file_replaced_while_printed_is_printed_as_opened(tmp_path, monkeypatch):
    """lecode and ``memctl edit`` replace a file by a rename: the open
    descriptor still reads the file as it was, which is one version."""
    store = _store(tmp_path)
    path = store.path / "MEMORY.md"
    old = "- the old memory\n" * 40
    path.write_text(old)
    _small_pieces(monkeypatch, whole=64, piece=64)

    def replace(p) -> None:
        tmp = p.with_name("MEMORY.md.tmp")
        tmp.write_text("- new\n")
        os.replace(tmp, p)

    _written_between_passes(monkeypatch, path, replace)
    r = run_cli("--store", str(store.path), "show")
    assert (r.exit_code, r.stdout) == (0, old), r.stderr


def test_the_text_read_whole_is_checked_once(tmp_path, monkeypatch):
    """A file of at most WHOLE_UPTO bytes is read once: a change after its
    read is no error (it was printed as it was read)."""
    store = _store(tmp_path)
    path = store.path / "MEMORY.md"
    path.write_bytes(b"- small\n")
    _written_between_passes(monkeypatch, path, _in_place)
    r = run_cli("--store", str(store.path), "show")
    assert (r.exit_code, r.stdout) == (0, "- small\n"), r.stderr


def test_reading_the_pieces_holds_a_piece_not_the_file(tmp_path, monkeypatch):
    store = _store(tmp_path)
    monkeypatch.setattr(markdown, "WHOLE_UPTO", 1 << 16)
    monkeypatch.setattr(markdown, "PIECE_BYTES", 1 << 16)
    line = "- a line of memory, é and 😀\n"
    peaks = []
    for n in (1, 4):
        (store.path / "MEMORY.md").write_text(line * (40_000 * n))

        def consume():
            _path, pieces = markdown.read_pieces(store, markdown.memory_target())
            return sum(map(len, pieces))

        size, peak = traced_peak(consume)
        assert size == len(line) * 40_000 * n
        peaks.append(peak)
    assert peaks[1] < 1.3 * peaks[0] + (64 << 10), peaks
    assert peaks[1] < 1 << 20, peaks


def _peak_rss_kib(argv: list[str]) -> int:
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
            "assert p.returncode == 0, p.returncode\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, env=env,
                         timeout=120, check=True)
    return int(out.stdout)


@pytest.mark.heavy
@pytest.mark.parametrize("args", [["show"], ["show", "--json"], ["notes", "n"]])
def test_the_command_peak_does_not_follow_the_file(tmp_path, args):
    """At 8 and 32 MB the peak was 35 and 74 MiB; at 6 and 18 MB, read whole
    (WHOLE_UPTO past the file), 38 and 75 MiB: 37 MiB apart against the 8
    allowed.  Both sizes stay above WHOLE_UPTO (4 MiB)."""
    store = _store(tmp_path)
    line = b"- a line of memory with tabs and words to pad it out, width 8\n"
    peaks = []
    for mb in (6, 18):
        data = line * ((mb << 20) // len(line))
        (store.path / "MEMORY.md").write_bytes(data)
        (store.path / "notes" / "n.md").write_bytes(data)
        peaks.append(_peak_rss_kib([sys.executable, "-m", "lecode_memctl", "--no-state",
                                    "--store", str(store.path), *args]))
    assert peaks[1] - peaks[0] < 8 << 10, peaks


def test_pieces_dropped_unread_close_the_file(tmp_path, monkeypatch):
    """A generator never started never runs its ``finally``: the second
    read's descriptor is owned by a file object, closed when the pieces
    are dropped (found by a review: it stayed open for the process's life)."""
    import gc

    store = _store(tmp_path)
    (store.path / "MEMORY.md").write_text("foo\nbar\nbaz\n")
    _small_pieces(monkeypatch, whole=4, piece=3)
    before = sorted(os.listdir("/proc/self/fd"))
    _path, pieces = markdown.read_pieces(store, markdown.memory_target())
    assert len(os.listdir("/proc/self/fd")) == len(before) + 1
    del pieces
    gc.collect()
    assert sorted(os.listdir("/proc/self/fd")) == before
    _path, pieces = markdown.read_pieces(store, markdown.memory_target())
    assert next(pieces) == "foo"
    pieces.close()
    assert sorted(os.listdir("/proc/self/fd")) == before
