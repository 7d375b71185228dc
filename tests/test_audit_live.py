"""validate while another process appends to a session: no false error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import orjson
import pytest

from .builders import SLUG
from .conftest import run_cli, tree_hash
from .test_audit import build_clean

WRITER = textwrap.dedent("""
    import os, sys, threading, time
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore
    ss = SessionStore(store_at(sys.argv[1]))
    w = ss.create("live")
    stop = threading.Event()    # (stdin closed: the validations are over)
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    deadline = time.time() + float(sys.argv[2])
    i = 0
    while time.time() < deadline and not stop.is_set():
        w.append_message("user", "line %d " % i + "x" * (i % 300))
        if i % 7 == 0:
            w.append_event("memory_usage", purpose="learning", model="m", usage=None)
        i += 1
    w.close()
""")


@pytest.mark.heavy
def test_validate_during_live_writer(config_dir):
    path = build_clean(config_dir)
    # (the writer appends until the validations are over: its stdin closed;
    # 30 s at most, for a validation loop that never ends)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "30"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        runs = 0
        t_end = time.time() + 2.5
        while time.time() < t_end:
            for extra in ((), ("--deep",)):
                r = run_cli("validate", "--store", str(path), "--json", *extra)
                doc = orjson.loads(r.stdout)
                errors = [f for f in doc["findings"] if f["severity"] == "error"]
                assert errors == [], errors
                assert r.exit_code == 0
                # a torn tail may be seen mid-append: then only as a warning
                assert {f["code"] for f in doc["findings"]} <= {"session.torn_tail"}
                runs += 1
        assert runs >= 2
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0
    # and a quiet store afterwards is clean
    before = tree_hash(path)
    r = run_cli("validate", "--store", str(path), "--deep", "--strict", "-q")
    assert r.exit_code == 0
    assert tree_hash(path) == before
    assert SLUG in str(path)
