"""Issue 11, point 9: a transcript a person can read.

``read --text`` prints role-labelled, wrapped messages (tool calls and
results summarised, binary parts named, hidden positions marked with their
reason), not one line of JSON; ``read --all`` streams every page of a range
without a shell loop."""

from __future__ import annotations

import base64

import orjson
import pytest

from lecode_memctl.core.layout import store_at
from lecode_memctl.core.sessions import SessionStore

from .conftest import run_cli

SLUG = "proj-0123456789ab"
LONG = ("The quick brown fox jumps over the lazy dog and keeps running across the field "
        "until the sun goes down behind the hills of the far country. ") * 3
TOOL_OUT = "\n".join(f"line {i} of the file" for i in range(1, 41))


@pytest.fixture
def store(tmp_path):
    return store_at(tmp_path / "memory" / SLUG)


def cli(store, *args, **kw):
    return run_cli("--store", str(store.path), *args, **kw)


def transcript(store):
    ss = SessionStore(store)
    with ss.create("s1") as w:
        w.append_message("user", "Please read setup.cfg\nand tell me the indent.")          # 1
        w.append_message("assistant", "Reading it.", epoch=0,                                # 2
                         tool_calls=[{"id": "c1", "name": "read",
                                      "arguments": {"path": "setup.cfg"}}])
        w.append_message("tool", TOOL_OUT, epoch=0, tool_call_id="c1", name="read")          # 3
        w.append_message("assistant", LONG, epoch=0)                                          # 4
        w.append_message("user", [{"type": "text", "text": "See the screenshot:"},           # 5
                                  {"type": "binary", "media_type": "image/png",
                                   "data": base64.b64encode(b"\x89PNG" + b"\x00" * 96).decode()}])
        w.append_message("user", "oops, wrong \x1b[31mthing\x1b[0m")                         # 6
        w.append_event("undo", target=[6, 6])                                                 # 7
        w.append_message("user", "thanks")                                                    # 8


def test_read_text_is_a_readable_transcript(store):
    transcript(store)
    r = cli(store, "read", "s1", "1", "8", "--text")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert not out.lstrip().startswith("[[") and '"type":"message"' not in out
    lines = out.splitlines()
    # role labels with their seq, in order
    labels = [ln for ln in lines if ln.startswith("[")]
    assert labels[:1] == ["[1] user"]
    assert [ln.split()[1] for ln in labels] == ["user", "assistant", "tool", "assistant", "user",
                                               "hidden", "user"]
    assert "[6] hidden (undone)" in lines
    assert "oops" not in out and "\x1b" not in out
    # the user's own line break is kept, text indented under its label
    assert "    Please read setup.cfg" in lines and "    and tell me the indent." in lines
    # wrapped: no line longer than the width (COLUMNS=120 in tests)
    assert max(len(ln) for ln in lines) <= 120
    assert sum(1 for ln in lines if "quick brown fox" in ln) >= 3   # one long line, wrapped
    # tool call summarised with name, id and arguments
    assert any("call read" in ln and "c1" in ln and "setup.cfg" in ln for ln in lines)
    # tool result summarised: name, call id, a few lines and how much more
    assert "[3] tool read (result of call c1)" in lines
    assert "    line 1 of the file" in lines and "line 40 of the file" not in out
    assert any("37 more lines" in ln for ln in lines)
    # binary parts named, never dumped
    assert any("binary image/png" in ln and "100 bytes" in ln for ln in lines)
    assert "iVBOR" not in out
    # the header: session, range, digest, hidden summary
    assert "s1" in lines[0] and "1-8" in lines[0]
    assert any(ln.startswith("digest:") for ln in lines)


def test_read_text_of_an_entirely_hidden_range(store):
    transcript(store)
    r = cli(store, "read", "s1", "6", "7", "--text")
    assert r.exit_code == 4
    assert "[6] hidden (undone)" in r.stdout.splitlines()
    assert "no visible message" in r.stderr


def test_read_all_streams_every_page(store):
    ss = SessionStore(store)
    with ss.create("s1") as w:
        for i in range(1, 41):
            w.append_message("user", f"message {i} " + "z" * 900)
    r = cli(store, "read", "s1", "1", "40", "--all")
    assert r.exit_code == 0, r.stderr
    pages = [orjson.loads(ln) for ln in r.stdout_bytes.splitlines()]
    assert len(pages) > 5
    assert all(len(ln) + 1 <= 16384 for ln in r.stdout_bytes.splitlines())
    assert len({p["source"]["digest"] for p in pages}) == 1
    assert [p["offset"] for p in pages[1:]] == [p["next_offset"] for p in pages[:-1]]
    assert pages[-1]["next_offset"] is None and pages[0]["offset"] == 0
    arr = orjson.loads("".join(p["source_text"] for p in pages))
    assert [s for s, _m in arr] == list(range(1, 41))
    # the same as the shell loop over --offset
    o, joined = 0, ""
    while o is not None:
        d = orjson.loads(cli(store, "read", "s1", "1", "40", "--offset", str(o)).stdout_bytes)
        joined += d["source_text"]
        o = d["next_offset"]
    assert joined == "".join(p["source_text"] for p in pages)
    # from an offset, with a limit
    r = cli(store, "read", "s1", "1", "40", "--all", "--offset", str(pages[1]["offset"]),
            "--limit", "1000", "--json")
    more = [orjson.loads(ln) for ln in r.stdout_bytes.splitlines()]
    assert more[0]["offset"] == pages[1]["offset"] and all(len(p["source_text"]) <= 1000
                                                          for p in more)
    assert "".join(p["source_text"] for p in more) == joined[pages[1]["offset"]:]
    # --all with --text: --text prints every page anyway (the whole
    # transcript, once), as --text alone does
    r = cli(store, "read", "s1", "1", "40", "--all", "--text")
    assert r.exit_code == 0 and r.stdout.count("] user") == 40
    assert r.stdout == cli(store, "read", "s1", "1", "40", "--text").stdout
