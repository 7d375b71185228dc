"""One rule for which lines are events (``sessions.event_line``): a record that
parses as an undo from a line the event scans do not read as one -- its type
and event name in JSON escapes, or a ``{"seq":N,"type":"message",...`` prefix
with ``"type"`` repeated later -- is applied by no reader: ``facts``,
``recall``, ``read``, ``grep``, ``validate`` and ``validate --deep`` all
leave the span visible, and ``--deep`` reports the line
(``session.ignored_event``).  The same undo written as lecode writes it hides
the span everywhere (so the test can fail)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli, tree_hash

ESCAPED = b'{"seq":4,"type":"\\u0065vent","\\u0065vent":"undo","target":[1,2]}\n'
TYPED = (b'{"seq":4,"type":"message","role":"user","content":"x",'
         b'"type":"event","event":"undo","target":[1,2]}\n')
PLAIN = b'{"seq":4,"type":"event","event":"undo","target":[1,2]}\n'


def _store(root: Path, undo_line: bytes) -> tuple[Path, str]:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    st = store_at(root / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)
    with sessions.create("s1", created="2026-05-01T10:00:00Z") as w:
        w.append_message("user", "the widget is blue")        # 1
        w.append_message("user", "and the gadget is red")     # 2
        w.append_message("user", "thanks")                    # 3
    path = st.sessions_dir / "s1.jsonl"
    with open(path, "ab") as fh:
        fh.write(undo_line)                                   # 4
    records = [orjson.loads(x) for x in path.read_bytes().splitlines()[1:3]]
    ref = SourceRef("s1", (1, 2), canonical_digest(records))
    fid = facts.add("The widget is blue.", ref=ref).fact.fact_id
    facts.close()
    return st.path, fid


def _views(store: Path, fid: str) -> dict:
    base = ("--store", str(store))
    listing = orjson.loads(run_cli(*base, "facts", "--json").stdout_bytes)
    recall = orjson.loads(run_cli(*base, "recall", fid, "--json").stdout_bytes)
    grep = orjson.loads(run_cli(*base, "grep", "widget", "--json").stdout_bytes)
    out = {"facts": listing["facts"][0]["status"], "recall": recall["status"],
           "grep": [h["seq"] for h in grep["hits"]]}
    for deep in (False, True):
        r = run_cli(*base, "validate", "--json", *(["--deep"] if deep else []))
        found = orjson.loads(r.stdout_bytes)["findings"]
        key = "deep" if deep else "validate"
        out[key] = sorted(f["code"] for f in found if f["code"].startswith(("fact.", "session.")))
        if deep:
            out["ignored"] = [(f["line"], f["seq"]) for f in found
                              if f["code"] == "session.ignored_event"]
    return out


@pytest.mark.parametrize("line", [ESCAPED, TYPED], ids=["escaped", "typed"])
def test_an_event_no_scan_reads_is_applied_by_no_reader(tmp_path, line):
    store, fid = _store(tmp_path, line)
    before = tree_hash(store)
    got = _views(store, fid)
    assert got == {"facts": "valid", "recall": "valid", "grep": [1], "validate": [],
                   "deep": ["session.ignored_event"], "ignored": [(5, 4)]}
    assert tree_hash(store) == before


def test_the_same_undo_as_lecode_writes_it_hides_the_span_everywhere(tmp_path):
    store, fid = _store(tmp_path, PLAIN)
    got = _views(store, fid)
    assert got == {"facts": "hidden", "recall": "hidden", "grep": [], "validate": ["fact.hidden"],
                   "deep": ["fact.hidden"], "ignored": []}


# A compact event behind a prefix naming another type, with a summary, a
# lineage over the cited span and a usage: counted, listed and searched by
# no reader; the same compact as lecode writes it is, everywhere.
def _compact(typed: bool) -> bytes:
    head = b'{"seq":4,"type":"message","role":"user","content":"x",' if typed else b'{"seq":4,'
    return head + (b'"type":"event","event":"compact","summary":"SUMMARY of it",'
                   b'"lineage":[{"session_id":"s1","seqs":[1,2],"digest":"%s"}],"prior":null,'
                   b'"model":"m","usage":{"input_tokens":10,"output_tokens":1,"cost":0.5}}\n')


def _compact_views(tmp_path: Path, typed: bool) -> dict:
    from lecode_memctl.core.sourceref import canonical_digest

    store, fid = _store(tmp_path, b"")
    path = store / "sessions" / "s1.jsonl"
    records = [orjson.loads(x) for x in path.read_bytes().splitlines()[1:3]]
    with open(path, "ab") as fh:
        fh.write(_compact(typed) % canonical_digest(records).encode())
    base = ("--store", str(store))
    usage = orjson.loads(run_cli(*base, "usage", "--json").stdout_bytes)
    preview = orjson.loads(run_cli(*base, "forget", fid, "--dry-run", "--json").stdout_bytes)
    grep = orjson.loads(run_cli(*base, "grep", "SUMMARY", "--json").stdout_bytes)
    listing = orjson.loads(run_cli(*base, "sessions", "--json").stdout_bytes)
    deep = orjson.loads(run_cli(*base, "validate", "--deep", "--json").stdout_bytes)
    return {"usage": (usage["total"]["compact_events"], usage["total"]["calls"]),
            "inert": preview["summaries_inert"], "grep": [h["role"] for h in grep["hits"]],
            "compactions": listing[0]["compactions"],
            "deep": [f["code"] for f in deep["findings"]]}


def test_a_compact_event_no_scan_reads_is_counted_by_no_reader(tmp_path):
    assert _compact_views(tmp_path, typed=True) == {
        "usage": (0, 0), "inert": [], "grep": [], "compactions": 0,
        "deep": ["session.ignored_event"]}
    # (the plain one leaves no message raw after its lineage: compact.few_raw)
    assert _compact_views(tmp_path / "plain", typed=False) == {
        "usage": (1, 1), "inert": [{"session_id": "s1", "seq": 4}], "grep": ["summary"],
        "compactions": 1, "deep": ["compact.few_raw"]}


def test_grep_reads_a_number_beyond_a_double_as_the_other_readers_do(tmp_path):
    """An undo holding 1e400 (valid JSON orjson refuses) is an undo for every
    reader (sessions.load_record), grep and usage included."""
    store, fid = _store(tmp_path, PLAIN[:-2] + b',"x":1e400}\n')
    got = _views(store, fid)
    assert got["facts"] == "hidden" and got["grep"] == []
    usage = orjson.loads(run_cli("--store", str(store), "usage", "--json").stdout_bytes)
    assert usage["corrupt_lines"] == 0


@pytest.mark.parametrize("head", [b'{"seq":9,', b'{"type":"event",', b'{"seq":-1,'],
                         ids=["seq_twice", "no_seq", "negative_seq"])
def test_a_compact_on_a_line_that_is_no_record_is_counted_by_no_reader(tmp_path, head):
    """A compact event whose line is a corrupt line to every reader (its
    first bytes say seq 9 and its parse keeps seq 4, or it has no
    non-negative seq) is no call to ``usage`` either: a corrupt line."""
    from lecode_memctl.core.sourceref import canonical_digest

    store, fid = _store(tmp_path, b"")
    path = store / "sessions" / "s1.jsonl"
    records = [orjson.loads(x) for x in path.read_bytes().splitlines()[1:3]]
    line = _compact(False).replace(b'{"seq":4,', head).replace(b'}}\n', b'},"seq":4}\n')
    if head != b'{"seq":9,':
        line = line.replace(b',"seq":4}\n', b'}\n')
    with open(path, "ab") as fh:
        fh.write(line % canonical_digest(records).encode())
    base = ("--store", str(store))
    usage = orjson.loads(run_cli(*base, "usage", "--json").stdout_bytes)
    grep = orjson.loads(run_cli(*base, "grep", "SUMMARY", "--json").stdout_bytes)
    listing = orjson.loads(run_cli(*base, "sessions", "--json").stdout_bytes)
    deep = orjson.loads(run_cli(*base, "validate", "--deep", "--json").stdout_bytes)
    assert {"usage": (usage["total"]["compact_events"], usage["total"]["calls"],
                      usage["corrupt_lines"]),
            "grep": grep["hits"], "compactions": listing[0]["compactions"],
            "deep": [f["code"] for f in deep["findings"]]} == {
        "usage": (0, 0, 1), "grep": [], "compactions": 0, "deep": ["session.corrupt_line"]}

