"""A writer in another process appends while readers run: no partial record
is ever returned, nothing is reported corrupt, and the lock keeps a second
writer out."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import orjson
import pytest

from lecode_memctl.core.errors import StoreBusy
from lecode_memctl.core.sessions import SessionStore

from .conftest import REPO, run_cli

N = 400


def expected_content(seq: int) -> str:
    return f"{seq}:" + "é😀\"\\" * ((seq * 7919) % 700)


WRITER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {repo!r})
    import orjson
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    from tests.test_sessions_concurrency import expected_content
    mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ss = SessionStore(store_at(path))
    if mode == "core":
        with ss.writer("s1") as w:
            print("locked", flush=True)
            for seq in range(1, n + 1):
                assert w.append_message("user", expected_content(seq)) == seq
    else:
        # A slow appender: each line in three pieces, so readers see torn tails,
        # including cuts inside multi-byte characters.
        fd = os.open(os.path.join(path, "sessions", "s1.jsonl"), os.O_WRONLY | os.O_APPEND)
        print("locked", flush=True)
        for seq in range(1, n + 1):
            line = orjson.dumps({{"seq": seq, "type": "message", "role": "user",
                                 "content": expected_content(seq)}}) + b"\\n"
            a, b = len(line) // 3, 2 * len(line) // 3 + 1
            for piece in (line[:a], line[a:b], line[b:]):
                os.write(fd, piece)
                time.sleep(0.0002)
        os.close(fd)
""")


@pytest.fixture
def store(store):
    """conftest's store with an empty session s1."""
    SessionStore(store).create("s1").close()
    return store


def start_writer(store, mode, n=N):
    p = subprocess.Popen([sys.executable, "-c", WRITER.format(repo=str(REPO)), mode,
                          str(store.path), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=str(REPO))
    assert p.stdout.readline().strip() == b"locked", p.stderr.read()
    return p


def check_records(recs):
    for r in recs:
        if r["seq"] == 0:
            continue
        assert r == {"seq": r["seq"], "type": "message", "role": "user",
                     "content": expected_content(r["seq"])}


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["core", "pieces"])
def test_readers_never_see_partial_records(store, mode):
    ss = SessionStore(store)
    p = start_writer(store, mode)
    seen_records = 0
    reads = 0
    try:
        deadline = time.monotonic() + 30
        while p.poll() is None and time.monotonic() < deadline:
            info = ss.list_sessions()[0]
            assert info.state in ("ok", "torn_tail"), info
            assert info.records >= seen_records
            seen_records = info.records
            last = info.records - 1
            recs = ss.records("s1", max(0, last - 20), last + 50)
            check_records(recs)
            assert [r["seq"] for r in recs] == list(range(recs[0]["seq"], recs[-1]["seq"] + 1))
            if last >= 1:
                snap = ss.source_snapshot("s1", max(1, last - 10), last + 50)
                check_records(snap.records)
                assert ss.validate_source(snap.ref).ok
            if reads % 10 == 0 and last >= 1:
                r = run_cli("--store", str(store.path), "read", "s1", str(max(1, last - 3)),
                            str(last + 3), "--limit", "8192")
                assert r.exit_code == 0, r.stderr
                doc = orjson.loads(r.stdout_bytes)
                if doc["next_offset"] is None:
                    for seq, rec in orjson.loads(doc["source_text"]):
                        assert rec["content"] == expected_content(seq)
                r = run_cli("--store", str(store.path), "sessions", "--json")
                assert r.exit_code == 0 and orjson.loads(r.stdout_bytes)[0]["state"] in ("ok", "torn_tail")
            reads += 1
    finally:
        p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    assert reads > 5
    final = ss.records("s1", 0, N + 10)
    assert len(final) == N + 1
    check_records(final)


def test_second_writer_in_another_process_is_busy(store):
    ss = SessionStore(store)
    p = start_writer(store, "core", n=1)
    p.wait(timeout=60)
    with ss.writer("s1") as w:   # the other process has finished: the lock is free
        held = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {str(REPO)!r})
                from lecode_memctl.core.layout import store_at
                from lecode_memctl.core.sessions import SessionStore
                from lecode_memctl.core.errors import StoreBusy
                try:
                    SessionStore(store_at({str(store.path)!r})).writer("s1")
                except StoreBusy:
                    sys.exit(6)
                sys.exit(0)
            """)], capture_output=True, timeout=60)
        assert held.returncode == 6, held.stderr
        assert w.append_message("user", "mine") == 2
    with pytest.raises(StoreBusy), ss.writer("s1"):
        ss.writer("s1")


def test_writer_cuts_a_crashed_torn_tail(store):
    ss = SessionStore(store)
    with ss.writer("s1") as w:
        w.append_message("user", "a")
    path = store.sessions_dir / "s1.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"seq":2,"type":"message","role":"us')
    with ss.writer("s1") as w:
        assert w.append_message("user", "b") == 2
    assert [r["content"] for r in ss.records("s1", 1, 5)] == ["a", "b"]
    assert not any(i.corrupt for i in ss.scan("s1"))
    assert os.path.getsize(path) == len(path.read_bytes())
