"""memctl search streams its hits: every format gives them as they are
found, in memory that follows a piece and the longest line, not the number
of hits or the size of the file.  ``search --format jsonl`` of a 250,000-line
MEMORY.md of matching lines peaked at 217 MiB, of 1,000,000 lines at 801
MiB: each file's hits were collected until it was found UTF-8 to its end,
then every hit of the search, then every output row.

What a file that is not UTF-8 gives stays as it was: nothing (it is skipped
whole, its hits neither given nor counted by --offset), so a file is checked
before its first hit is given -- a small one in memory, a large one by a
first read, then searched by a second read of the same descriptor."""

from __future__ import annotations

import csv
import io
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import markdown, markdown_search
from lecode_memctl.core.markdown_search import SearchHit, SearchResult, SkippedFile

from .builders import traced_peak
from .test_search_pieces import _FILES, _store, _whole_file_search

_EVERY = 2**62      # the machine formats' limit when --limit is not given
_FORMATS = ("text", "json", "jsonl", "csv", "tsv")


class _Sink(io.RawIOBase):
    """A stdout that keeps only a count of its bytes: what the output holds
    must not be charged to the search."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # noqa: ANN001
        self.size += len(b)
        return len(b)


def _peak_of_the_command(store_dir: Path, *args: str) -> tuple[int, int]:
    """(the bytes ``memctl --store STORE ARGS`` wrote, the peak of its Python
    allocations), run in this process with stdout and stderr thrown away."""
    from lecode_memctl.cli.main import main

    sink = _Sink()
    out = io.TextIOWrapper(io.BufferedWriter(sink), encoding="utf-8", newline="\n")
    err = io.TextIOWrapper(io.BufferedWriter(_Sink()), encoding="utf-8", newline="\n")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        code = main(["--store", str(store_dir), "--no-state", *args])
        out.flush()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        sys.stdout, sys.stderr = saved
    assert code == 0
    return sink.size, peak


def _lines(n: int) -> bytes:
    return "".join(f"- line {i}: use tabs, width {i % 8}\n" for i in range(n)).encode()


@pytest.mark.heavy
@pytest.mark.parametrize("args", [("--format", "jsonl"), ("--json",), ("--format", "csv"),
                                  ("--format", "text", "--limit", str(_EVERY))])
def test_memory_does_not_follow_the_number_of_hits(tmp_path, args):
    """5,000 and 20,000 matching lines (0.17 and 0.7 MB) give four times the
    output in about the same peak (measured: 3.0 and 2.7 MB at 20,000 and
    80,000); it was about four times as large (every hit, then every row,
    held to the end: 9.5 and 38 MB at 10,000 and 40,000, --json 15 and 62
    MB; with every hit and row held again, 5,000 and 20,000 fail the bound
    as those did)."""
    n = 5_000
    # (a first run imports what the command needs: not part of either peak)
    _peak_of_the_command(_store(tmp_path / "warm", {"MEMORY.md": b"tabs\n"}).path,
                         "search", "tabs", *args)
    small, peak_small = _peak_of_the_command(
        _store(tmp_path / "a", {"MEMORY.md": _lines(n)}).path, "search", "tabs", *args)
    large, peak_large = _peak_of_the_command(
        _store(tmp_path / "b", {"MEMORY.md": _lines(4 * n)}).path, "search", "tabs", *args)
    assert large > 3.9 * small
    assert peak_large < 1.5 * peak_small + (1 << 20), (peak_small, peak_large)
    assert peak_large < 8 << 20, peak_large


@pytest.mark.heavy
def test_memory_does_not_follow_the_file(tmp_path, monkeypatch):
    """The core's stream, drained: the same peak for a file four times as
    large, also when it is kept whole (small) against read twice (large)."""
    def peak(n: int) -> tuple[int, int]:
        store = _store(tmp_path / str(n), {"MEMORY.md": _lines(n)})
        run = markdown_search.stream_search(store, "tabs", limit=_EVERY)
        return traced_peak(lambda: sum(1 for _ in run.hits()))

    (n1, p1), (n4, p4) = peak(15_000), peak(60_000)
    assert (n1, n4) == (15_000, 60_000)
    assert p4 < 1.5 * p1 + (1 << 20), (p1, p4)


# ---------------------------------------------------------------- the same output

def _expected(store, pattern: str, fmt: str, *, limit: int | None, offset: int,
              refs: dict[Any, Any] | None = None
              ) -> tuple[bytes, list[str], dict | None]:
    """(stdout, stderr's lines, the parsed --json document) as the search
    gave them when it held every hit: the reference is each file read
    whole, decoded and split (test_search_pieces), formatted here.
    ``refs``: the references already made for this store, pattern and
    offset, by the number of hits asked (the formats of one window share
    them: the store does not change between them), with their rows and the
    cells of their csv and tsv rows (the same for both)."""
    from lecode_memctl.cli.output import safe
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION, flat

    cap = limit if limit is not None else (_EVERY if fmt != "text" else 50)
    if refs is None:
        refs = {}
    if cap not in refs:
        refs[cap] = _whole_file_search(store, pattern, limit=cap, offset=offset)
    ref = refs[cap]
    err = [f"memctl: warning: {safe(s.file, keep_newlines=True)}: "
           f"{safe(s.reason, keep_newlines=True)}; skipped" for s in ref.skipped]
    if ("rows", cap) not in refs:
        refs["rows", cap] = [{"type": "hit", "file": h.file, "line": h.line, "text": h.text}
                             for h in ref.hits]
    rows = refs["rows", cap]
    doc = None
    if fmt == "json":
        doc = {"type": "search", "schema_version": SCHEMA_VERSION, "pattern": pattern,
               "offset": offset, "limit": limit, "truncated": ref.truncated,
               "files_searched": ref.files_searched, "hits": rows,
               "skipped": [{"file": s.file, "reason": s.reason} for s in ref.skipped]}
        return b"", err, doc
    if fmt == "text":
        out = "".join(f"{safe(h.file, keep_newlines=True)}:{h.line}: "
                      f"{safe(h.text, keep_newlines=True)}\n" for h in ref.hits).encode()
    elif fmt == "jsonl":
        out = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    else:
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        w.writerow(["type", "file", "line", "text"])
        if ("cells", cap) not in refs:
            refs["cells", cap] = [[safe(flat(r[c]), keep_newlines=True)
                                   for c in ("type", "file", "line", "text")] for r in rows]
        w.writerows(refs["cells", cap])
        out = buf.getvalue().encode()
    if ref.truncated:
        err.append(f"memctl: stopped after {cap} hits; more exist (use --limit N, or "
                   f"--offset {offset + cap} for the next hits)")
    elif not ref.hits:
        what = f"no hits past --offset {offset}" if offset else "no matches"
        err.append(f"memctl: {what} in {ref.files_searched} Markdown files")
    return out, err, doc


def _check_every_format(store, pattern: str, *, limit: int | None = None, offset: int = 0):
    from .conftest import run_cli

    refs: dict[Any, Any] = {}
    for fmt in _FORMATS:
        args = ["--store", str(store.path), "--no-state", "search", pattern, "--format", fmt,
                "--offset", str(offset)]
        if limit is not None:
            args += ["--limit", str(limit)]
        r = run_cli(*args)
        assert r.exit_code == 0, r.stderr
        out, err, doc = _expected(store, pattern, fmt, limit=limit, offset=offset, refs=refs)
        assert r.stderr.splitlines() == err, (fmt, limit, offset)
        if fmt == "json":
            assert orjson.loads(r.stdout_bytes) == doc, (limit, offset)
        else:
            assert r.stdout_bytes == out, (fmt, limit, offset)


_STORES = {
    "mixed": {
        "MEMORY.md": b"tabs one\nnothing\ntabs two\n",
        "scratchpad.md": b"tabs hidden\n\xff tabs\ntabs hidden too\n",     # not UTF-8
        "daily/2026-01-01.md": "tabs caf\u00e9\nno\ntabs last".encode(),  # no final newline
        "notes/n.md": b"",                                              # empty
    },
    "empty files": {"MEMORY.md": b"", "scratchpad.md": b"", "notes/n.md": b""},
    "a bad byte at the very end": {
        "MEMORY.md": b"tabs\n" * 40 + b"\xe6\x97",
        "notes/n.md": b"tabs in a note\n" * 3,
    },
}
_WINDOWS = [(None, 0), (1, 0), (2, 1), (3, 2), (1, 4), (4, 0), (None, 3), (10, 1), (None, 100)]


@pytest.mark.heavy
@pytest.mark.parametrize("keep", [None, 8])
@pytest.mark.parametrize("case", sorted(_STORES))
def test_every_format_gives_what_it_gave(tmp_path, monkeypatch, case, keep):
    """Hits, skipped files with their warnings, --offset and --limit across
    file boundaries, the notes on stderr: as when every hit was held.  With
    ``keep`` the files larger than 8 bytes take the two-read path, in pieces
    of 5 bytes."""
    if keep is not None:
        monkeypatch.setattr(markdown_search, "_KEEP", keep, raising=False)
        monkeypatch.setattr(markdown_search, "_PIECE", 5)
    store = _store(tmp_path, _STORES[case])
    for pattern in ("tabs", "^$", "nomatch"):
        for limit, offset in _WINDOWS:
            _check_every_format(store, pattern, limit=limit, offset=offset)


@pytest.mark.heavy
def test_a_big_file_read_twice_gives_what_it_gave(tmp_path):
    """A MEMORY.md of 1.3 MB (over the size kept in memory) between a note
    that is not UTF-8 and one that is: the same output at the real sizes."""
    data = _lines(36_000) + b"tabs without a final newline"
    store = _store(tmp_path, {"MEMORY.md": data, "scratchpad.md": b"tabs\n\xc3\x28tabs\n",
                              "notes/n.md": b"tabs\n" * 3})
    assert len(data) > getattr(markdown_search, "_KEEP", 0)
    for limit, offset in ((None, 0), (5, 35_998), (2, 36_000), (3, 36_002), (100, 0)):
        _check_every_format(store, "tabs", limit=limit, offset=offset)


_CHUNKS = st.sampled_from([b"tabs", b"t", b"abs", b"\n", b"\r\n", b"x", b" ",
                           "\u00e9".encode(), "\u65e5".encode(), b"\xe6", b"\x97", b"\xff"])


@pytest.mark.heavy
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_CHUNKS, max_size=30).map(b"".join), min_size=1, max_size=4),
       st.sampled_from([1, 2, 5, 64, 1 << 20]), st.sampled_from([0, 3, 16, 1 << 20]),
       st.sampled_from(["tabs", "^$", r"^t", r"\r$", "\u00e9|\u65e5"]),
       st.integers(1, 5), st.integers(0, 4))
def test_the_stream_is_the_whole_file_search(tmp_path, monkeypatch, contents, piece, keep,
                                             pattern, limit, offset):
    """The core's stream (its hits, then truncated, files_searched and
    skipped) and ``search()`` built on it are the reference search, for any
    bytes, pieces and sizes kept in memory."""
    store = _store(tmp_path, dict(zip(_FILES, contents, strict=False)))
    monkeypatch.setattr(markdown_search, "_PIECE", piece)
    monkeypatch.setattr(markdown_search, "_KEEP", keep)
    want = _whole_file_search(store, pattern, limit=limit, offset=offset)
    seen: list[SkippedFile] = []
    run = markdown_search.stream_search(store, pattern, limit=limit, offset=offset,
                                        on_skip=seen.append)
    hits = list(run.hits())
    assert SearchResult(pattern, limit, hits, run.truncated, run.files_searched,
                        run.skipped) == want
    assert seen == want.skipped
    assert markdown_search.search(store, pattern, limit=limit, offset=offset) == want


def test_the_json_members_that_only_the_end_knows_follow_the_hits(tmp_path):
    from .conftest import run_cli

    store = _store(tmp_path, {"MEMORY.md": b"tabs\n" * 3, "notes/n.md": b"\xff"})
    r = run_cli("--store", str(store.path), "--no-state", "search", "tabs", "--json")
    assert r.exit_code == 0, r.stderr
    assert list(orjson.loads(r.stdout_bytes)) == [
        "type", "schema_version", "pattern", "offset", "limit", "hits", "truncated",
        "files_searched", "skipped"]
    assert r.stdout_bytes.count(b"\n") == 3 + 2       # one hit a line


# ---------------------------------------------------------------- changed between the reads

def _change_after_the_check(monkeypatch, path: Path, new: bytes) -> None:
    """Rewrite ``path`` in place once its UTF-8 check (the first read) is done."""
    real = markdown.check_read

    def checked(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        out = real(*a, **kw)
        with open(path, "r+b") as fh:
            fh.truncate(0)
            fh.write(new)
        return out

    monkeypatch.setattr(markdown_search, "check_read", checked)


@pytest.mark.parametrize("new,what", [
    (b"tabs 1\ntabs 2\ntabs 3\n", "shorter than when it was checked, at line 4"),
    (b"tabs 1\ntabs 2\ntabs 3\n\xff\xff\xff\xff\xff\n" + b"tabs\n" * 6,
     "no longer valid UTF-8, at line 4"),
])
def test_a_file_changed_in_place_between_the_reads(tmp_path, monkeypatch, new, what):
    """A file rewritten in place after its check: the hits given before the
    change stay given (they cannot be taken back), the rest of it is
    skipped with a warning saying so, and it is not counted as searched.
    The files after it are searched."""
    from .conftest import run_cli

    monkeypatch.setattr(markdown_search, "_KEEP", 8)
    monkeypatch.setattr(markdown_search, "_PIECE", 7)
    data = b"tabs 1\ntabs 2\ntabs 3\n" + b"tabs\n" * 10
    store = _store(tmp_path, {"MEMORY.md": data, "notes/n.md": b"tabs in a note\n"})
    _change_after_the_check(monkeypatch, store.path / "MEMORY.md", new)
    r = run_cli("--store", str(store.path), "--no-state", "search", "tabs", "--json")
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout_bytes)
    assert [(h["file"], h["line"]) for h in doc["hits"]] == [
        ("MEMORY.md", 1), ("MEMORY.md", 2), ("MEMORY.md", 3), ("notes/n.md", 1)]
    reason = (f"changed in place while it was searched ({what}); "
              "only its hits before line 4 were given")
    assert doc["skipped"] == [{"file": "MEMORY.md", "reason": reason}]
    assert doc["files_searched"] == 1
    assert r.stderr == f"memctl: warning: MEMORY.md: {reason}; skipped\n"


def test_an_append_after_the_check_is_not_half_seen(tmp_path, monkeypatch):
    """The second read stops at the size the check read: lines appended
    meanwhile are not searched (the file as it was when checked)."""
    monkeypatch.setattr(markdown_search, "_KEEP", 8)
    data = b"tabs 1\ntabs 2\n"
    store = _store(tmp_path, {"MEMORY.md": data})
    _change_after_the_check(monkeypatch, store.path / "MEMORY.md", data + b"tabs \xff\ntabs 4\n")
    run = markdown_search.stream_search(store, "tabs", limit=10)
    assert list(run.hits()) == [SearchHit("MEMORY.md", 1, "tabs 1"),
                                SearchHit("MEMORY.md", 2, "tabs 2")]
    assert run.skipped == [] and run.files_searched == 1
