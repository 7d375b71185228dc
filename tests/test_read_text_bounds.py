"""``read --text`` of huge messages: bounded work.

A tool result is summarised in lines and in characters: a one-line result
of 8 MiB was shown whole (250 MB peak, 8.8 MB of output; 40 MiB: 1.1 GB and
MemoryError under 1 GiB).  A user or assistant message is shown whole, by
design, but wrapped in time and memory linear in its length (textwrap made
a list of every word, and cut a word longer than a line by copying the rest
of it at each cut: 45 s for one word of 8 MiB)."""

from __future__ import annotations

import os
import random
import sys
import textwrap
import time

import pytest

from lecode_memctl.cli import transcript
from lecode_memctl.cli.output import safe
from lecode_memctl.core.layout import store_at

from .conftest import REPO, run_cli
from .test_bad_input import _peak_child_rss

SLUG = "proj-0123456789ab"


@pytest.fixture
def store(tmp_path):
    return store_at(tmp_path / "memory" / SLUG)


def write_session(store, content: str, role: str = "tool", sid: str = "s1") -> None:
    """A transcript: seq 1 a user message, seq 2 ``content`` as a ``role`` message."""
    import orjson

    d = store.path / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    recs = [{"seq": 0, "type": "session", "format": 1, "session_id": sid, "project": SLUG,
             "created": "2026-12-01T09:00:00+00:00"},
            {"seq": 1, "type": "message", "role": "user", "content": "hi"},
            {"seq": 2, "type": "message", "role": role, "content": content, "epoch": 1,
             **({"tool_call_id": "c", "name": "r"} if role == "tool" else {})}]
    (d / f"{sid}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))


def _old_tool_result(text: str, w: int) -> list[str]:
    """The summary before characters bounded it (lines only; a last newline
    ends the last line, it begins no empty one)."""
    rows = text.split("\n")
    more = len(rows) - 3 - (len(rows) > 1 and rows[-1] == "")
    out = transcript._wrap("\n".join(rows[:3]), w)
    if more > 0:
        out.append(f"    [... {more} more line{'s' if more > 1 else ''}, {len(text)} characters "
                   "in all; --json shows the whole result ...]")
    return out


@pytest.mark.parametrize("text, notice", [
    ("a\nb\nc\n", None), ("a\nb\nc", None), ("a\nb\nc\nd", "1 more line, 7"),
    ("a\nb\nc\nd\n", "1 more line, 8"), ("a\nb\nc\nd\ne", "2 more lines, 9"),
    ("\n\n\n\n", "1 more line, 4")])
def test_a_last_newline_is_no_more_line(text, notice):
    """A result that ends in a newline has no empty line after it to count:
    three lines and a newline are shown whole (it said "[... 1 more lines"
    of the nothing after it)."""
    got = transcript._tool_result(text, 80)
    last = got[-1].strip()
    if notice is None:
        assert not last.startswith("[..."), got
    else:
        assert last == (f"[... {notice} characters in all; --json shows the whole result ...]"), got


def tool_block(out: str) -> list[str]:
    lines = out.splitlines()
    i = lines.index("[2] tool r (result of call c)")
    return lines[i + 1:]


def test_a_one_line_tool_result_is_cut_in_characters(store):
    write_session(store, "word " * 2000)          # 10,000 characters, one line
    r = run_cli("--store", str(store.path), "read", "s1", "1", "2", "--text")
    assert r.exit_code == 0, r.stderr
    block = tool_block(r.stdout)
    assert block[-1] == ("    [... the first 1000 of 10000 characters shown; "
                         "--json shows the whole result ...]")
    shown = " ".join(ln.strip() for ln in block[:-1])
    assert shown == ("word " * 200).strip() + " \u2026"
    assert max(map(len, block[:-1])) <= 120


def test_a_tool_result_with_long_lines_is_cut_and_says_how_many_lines_follow(store):
    text = "\n".join(f"{i} " + "y" * 600 for i in range(10))
    write_session(store, text)
    r = run_cli("--store", str(store.path), "read", "s1", "1", "2", "--text")
    assert r.exit_code == 0, r.stderr
    block = tool_block(r.stdout)
    # (cut in the 2nd line: 8 lines not shown; before 2026-12-07 it said 7,
    # as if 3 had been)
    assert block[-1] == (f"    [... the first 1000 of {len(text)} characters shown, 8 more lines; "
                         "--json shows the whole result ...]")
    assert "".join(ln.strip() for ln in block[:-1]) == text[:1000].replace("\n", "") + "\u2026"


@pytest.mark.parametrize("text", [
    "", "one", "a\nb", "a\nb\nc", "a\nb\nc\nd", "\n\n\n\n", "x" * 1000, "x" * 995 + "\nmore",
    "\n".join(["z" * 332] * 3) + "\nrest", ("line of the file\n" * 40).rstrip("\n"),
    "\x1b[31mred\x1b[0m\n\ttabbed\n" + "w " * 400,
])
def test_a_tool_result_within_the_bound_is_shown_as_before(text):
    assert transcript._tool_result(text, 80) == _old_tool_result(text, 80)


class _Wrapper(textwrap.TextWrapper):
    """``textwrap.wrap``'s wrapper, that makes the chunks of a line (its own
    ``_split_chunks``: whitespace munged, then split) once for the widths
    and indents the line is wrapped to: they depend on the line alone
    (these wrappers differ only in width and indent).  Each wrap gets a
    copy (``_wrap_chunks`` consumes its list)."""

    _last: tuple[str, list[str]] = ("", [])

    def _split_chunks(self, text: str) -> list[str]:
        if text is not _Wrapper._last[0]:
            _Wrapper._last = (text, super()._split_chunks(text))
        return list(_Wrapper._last[1])


def _textwrap(line: str, w: int, indent: str) -> list[str]:
    """``textwrap.wrap(line, width=w, ...)``, the wrap ``_wrap_long`` is to match."""
    return _Wrapper(width=w, initial_indent=indent, subsequent_indent=indent,
                    break_long_words=True, break_on_hyphens=False, drop_whitespace=True).wrap(line)


@pytest.mark.heavy
def test_the_linear_wrap_is_textwraps_line_for_line():
    rng = random.Random(16)
    alphabet = ["a", "bc", "xyz", "-", " ", "  ", "\t", "\x0b", "\u00a0", "\u2003", "\u2028",
                "\u3000", "\u00e9", "w" * 50, "q" * 130]
    for _ in range(3000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        for w in (40, 47, 120):
            for indent in ("    ", ""):
                assert transcript._wrap_long(line, w, indent) == _textwrap(line, w, indent), \
                    (line, w, indent)
    # a line over LONG_LINE, through _wrap
    line = "".join(rng.choice(alphabet) for _ in range(4000))
    assert len(line) > transcript.LONG_LINE
    assert transcript._wrap(line, 80) == (_textwrap(safe(line, keep_newlines=True), 80, "    ") or ["    "])


def _peaks(store, content_of, sizes, *args):
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="100")
    env.pop("MEMCTL_DEBUG", None)
    peaks = {}
    for mib in sizes:
        write_session(store, content_of(mib << 20), role=args[0])
        for fmt in ("--text", "--json"):
            t0 = time.monotonic()
            p, peaks[mib, fmt] = _peak_child_rss(
                [sys.executable, "-m", "lecode_memctl", "--store", str(store.path),
                 "read", "s1", "1", "2", fmt], env=env)
            took = time.monotonic() - t0
            assert p.returncode == 0, p.stderr[-500:]
            if fmt == "--text":
                yield mib, p.stdout, took
    growth = {fmt: peaks[sizes[1], fmt] - peaks[sizes[0], fmt] for fmt in ("--text", "--json")}
    print(f"[read --text] {args[0]} message of {sizes[0]} / {sizes[1]} MiB: peak RSS "
          f"{peaks[sizes[0], '--text'] // 1024} / {peaks[sizes[1], '--text'] // 1024} MiB "
          f"(--json {peaks[sizes[0], '--json'] // 1024} / {peaks[sizes[1], '--json'] // 1024})")
    # what --text adds to the read --json makes grows by no more than 32 MiB
    assert growth["--text"] < growth["--json"] + 32 * 1024, peaks


@pytest.mark.heavy
def test_a_huge_one_line_tool_result_costs_what_reading_it_costs(store):
    """8 vs 24 MiB: --text's peak grows as --json's does (by 1.5 GB from 8 to
    64 MiB; shown whole through textwrap again, 242 -> 684 MiB from 8 to 24
    against --json's 57 -> 121).
    (Not 64 MiB: orjson's dumps of the digest then dies of SIGSEGV under the
    1 GiB address-space limit, --json too.)"""
    for mib, out, _took in _peaks(store, lambda n: "abc def ghi " * (n // 12), (8, 24), "tool"):
        assert len(out) < 4096, len(out)
        assert f"of {(mib << 20) // 12 * 12} characters shown;".encode() in out


@pytest.mark.heavy
def test_a_huge_message_of_words_is_wrapped_in_linear_memory(store):
    """1 vs 4 MiB of short words: textwrap's list of every word grew the peak
    by 30 times the message (with it back, some 72 MiB more for the 3 MiB
    more, against the 32 MiB allowed, and 180 MiB for 2 vs 8 MiB; 16 MiB
    showed nothing more; a list of every chunk in _wrap_long: 59 MiB more)."""
    for mib, out, _took in _peaks(store, lambda n: "abc def ghi " * (n // 12), (1, 4), "user"):
        assert out.count(b"\n") > (mib << 20) // 100


@pytest.mark.heavy
def test_a_huge_word_is_wrapped_in_linear_time(store):
    """1 vs 16 MiB without a space, the 16 MiB --text read within 60 s (it
    takes about 2 s): textwrap took 45 s for 8 MiB (quadratic; with it back,
    LONG_LINE = 1 << 62, the 16 MiB read ran past _peak_child_rss's 300 s
    timeout here; textwrap alone, in-process: 9.4 s for 4 MiB).  (It was 48
    MiB against that 300 s timeout alone: 12 s of a run for the same signal.)"""
    for mib, out, took in _peaks(store, lambda n: "x" * n, (1, 16), "assistant"):
        assert out.split(b"\n").count(b" " * 4 + b"x" * 96) == (mib << 20) // 96
        assert took < 60, (mib, took)
