"""A page of ``read`` and ``recall`` is at most 16,384 bytes as printed, on a
terminal too, where the document is pretty and the C1 and bidi characters
are written as 6-byte ``\\uXXXX`` escapes (``output.terminal_json``); in a
pipe a page is cut as before.  (Before: a page was sized for the pipe, and
a message of U+202E or U+0085 printed on a terminal took up to 32,228
bytes.)"""

from __future__ import annotations

import orjson
import pytest

from lecode_memctl.cli import output
from lecode_memctl.core.facts import FactStore
from lecode_memctl.core.paging import MAX_OUTPUT_BYTES
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli

# store, ss: conftest (an empty store at <tmp>/memory/SLUG and its SessionStore)

CONTENTS = {
    "rlo": "\u202e" * 6000,                 # 3 bytes raw, 6 escaped
    "nel": "\u0085" * 6000,                 # 2 bytes raw, 6 escaped
    "mix": "ab é 😀 \u202e\u0085\u009b\u2066\u200f \" \\ \x01 " * 700,
    "plain": "line \"quoted\" \\ é 😀 text " * 600,
}


def cli(store, *args, tty=False, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr(output, "stdout_is_tty", lambda: tty)
    r = run_cli("--store", str(store.path), *args)
    assert r.exit_code == 0, r.stderr
    return r


def write(ss, content, sid="s1"):
    with ss.create(sid) as w:
        w.append_message("user", content)                   # 1
        w.append_message("assistant", "Noted.", epoch=0)    # 2


def pages(store, monkeypatch, tty, *args):
    """Every page of ``memctl ARGS`` from offset 0, as printed."""
    out, offset = [], 0
    while offset is not None:
        r = cli(store, *args, "--offset", str(offset), tty=tty, monkeypatch=monkeypatch)
        out.append(r.stdout_bytes)
        offset = orjson.loads(r.stdout_bytes)["next_offset"]
    return out


def check_pages(store, monkeypatch, *args):
    """On a terminal every page fits, escapes and all; the pages join to
    the same source text as in a pipe, where every page fits too."""
    joined = {}
    for tty in (True, False):
        printed = pages(store, monkeypatch, tty, *args)
        sizes = [len(p) for p in printed]
        assert max(sizes) <= MAX_OUTPUT_BYTES, (tty, sizes)
        joined[tty] = "".join(orjson.loads(p)["source_text"] for p in printed)
    assert joined[True] == joined[False]
    return orjson.loads(joined[True])


@pytest.mark.parametrize("limit", [None, "8192", "3000"])
@pytest.mark.parametrize("name", list(CONTENTS))
def test_read_on_a_terminal_fits(ss, store, monkeypatch, name, limit):
    write(ss, CONTENTS[name])
    args = ("read", "s1", "1", "2") + (("--limit", limit) if limit else ())
    arr = check_pages(store, monkeypatch, *args)
    assert arr[0][1]["content"] == CONTENTS[name]


@pytest.mark.parametrize("name", list(CONTENTS))
def test_read_all_on_a_terminal_fits(ss, store, monkeypatch, name):
    write(ss, CONTENTS[name])
    r = cli(store, "read", "s1", "1", "2", "--all", "--limit", "8192", tty=True,
            monkeypatch=monkeypatch)
    lines = r.stdout_bytes.splitlines(keepends=True)
    assert max(map(len, lines)) <= MAX_OUTPUT_BYTES
    text = "".join(orjson.loads(line)["source_text"] for line in lines)
    assert orjson.loads(text)[0][1]["content"] == CONTENTS[name]


@pytest.mark.parametrize("limit", [None, "8192"])
@pytest.mark.parametrize("name", list(CONTENTS))
def test_recall_on_a_terminal_fits(ss, store, monkeypatch, name, limit):
    write(ss, CONTENTS[name])
    with FactStore(store.facts_db) as fs:
        sessions = SessionStore(store, exclusions=fs)
        ref = sessions.source_snapshot("s1", 1, 1).ref
        fact = fs.remember("A fact \u202e with its source.", ref, sessions=sessions).fact
    args = ("recall", fact.fact_id) + (("--limit", limit) if limit else ())
    arr = check_pages(store, monkeypatch, *args)
    assert arr == [[1, arr[0][1]]] and arr[0][1]["content"] == CONTENTS[name]


def _as_before(doc, following):
    """The page is the one the rule before this fix gives: the most
    characters (up to the limit) whose pretty document, with a newline and
    ``next_offset`` as wide as ``total_chars``, is at most 16,384 bytes
    (``following``: the next page's text)."""
    def size(d):
        return len(orjson.dumps(d, option=orjson.OPT_INDENT_2)) + 1

    assert size(doc) <= MAX_OUTPUT_BYTES
    if doc["next_offset"] is None or len(doc["source_text"]) == doc["limit"]:
        return True
    more = dict(doc, source_text=doc["source_text"] + following[0],
                next_offset=doc["total_chars"])
    return size(more) > MAX_OUTPUT_BYTES


@pytest.mark.parametrize("name", list(CONTENTS))
def test_pipe_pages_as_before(ss, store, monkeypatch, name):
    """In a pipe the page is cut as before (compact, the exact text): the
    same bytes as when measured as before, and as large as the rule before
    allowed."""
    def old_measure(obj):   # the measure before: pretty JSON and a newline
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"

    write(ss, CONTENTS[name])
    for args in (("read", "s1", "1", "2", "--limit", "8192"), ("read", "s1", "1", "2")):
        printed = pages(store, monkeypatch, False, *args)
        with monkeypatch.context() as m:
            m.setattr(output, "page_bytes", old_measure, raising=False)
            assert pages(store, monkeypatch, False, *args) == printed
        docs = [orjson.loads(p) for p in printed]
        for p, doc, after in zip(printed, docs, [*docs[1:], None], strict=True):
            assert p == orjson.dumps(doc) + b"\n"          # compact, nothing escaped
            assert _as_before(doc, after and after["source_text"]), len(doc["source_text"])


def test_terminal_page_of_plain_text_as_in_a_pipe(ss, store, monkeypatch):
    """Text with nothing to escape: a terminal page holds what a pipe page
    holds (both are measured pretty)."""
    write(ss, CONTENTS["plain"])
    tty = cli(store, "read", "s1", "1", "2", "--limit", "8192", tty=True, monkeypatch=monkeypatch)
    pipe = cli(store, "read", "s1", "1", "2", "--limit", "8192", tty=False,
               monkeypatch=monkeypatch)
    assert orjson.loads(tty.stdout_bytes) == orjson.loads(pipe.stdout_bytes)
