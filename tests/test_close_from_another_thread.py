"""``close()`` from another thread while a listing is being read (docs/API.md,
"Threads" and "any later use raises UsageError").

A writer's listings (``iter_fact_revisions``, ``iter_fact_groups``,
``factview.iter_fact_rows``) read through a view of the writer
(``FactStore.one_state``), a second connection that took no lock: the
writer's ``close()`` closed that connection while the listing's thread was
inside SQLite on it, and the process died of a segmentation fault.  The view
now takes a lock of its own for each call and row, which the close waits
for.  And a listing gave the rows it had read ahead after the close (62 of
them); its next row now raises UsageError, on a writer, a read-only open and
a session scan alike."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lecode_memctl.core import FactStore, open_project
from lecode_memctl.core.errors import UsageError

REPO = Path(__file__).resolve().parents[1]


def _project(tmp_path: Path, facts: int = 150, proj: Path | None = None):
    """A project of ``facts`` facts, each citing one message of session s1:
    ``proj`` names the project (its slug) and is left empty; the store is
    under ``tmp_path / "cfg"``."""
    if proj is None:
        proj = tmp_path / "proj"
        proj.mkdir()
    p = open_project(proj, config_dir=tmp_path / "cfg")
    with p.sessions.create("s1") as w:
        for i in range(facts + 1):
            w.append_message("user", f"message {i}")
    for i in range(1, facts + 1):
        p.remember(f"fact {i}", p.sessions.source_snapshot("s1", i, i).ref)
    return p


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The 150-fact project built once (0.3 to 0.4 s a build): its config dir
    is copied per test, and the project directory, which names the slug (the
    transcripts' headers carry it), is shared: nothing is written in it."""
    base = tmp_path_factory.mktemp("close_template")
    (base / "proj").mkdir()
    _project(base, proj=base / "proj").close()
    return base


def _copy(template: Path, tmp_path: Path):
    """A private copy of the template's store, opened as the template's project."""
    shutil.copytree(template / "cfg", tmp_path / "cfg", symlinks=True)
    return open_project(template / "proj", config_dir=tmp_path / "cfg")


# The listing's thread is held between two SQLite calls on the view's
# connection (in _text_batches, before the joined query's first fetch) while
# the main thread closes the project.  Before the fix the close went on at
# once and closed the connection under the listing: its fetch then raised
# sqlite3.ProgrammingError, or the process crashed (exit -11).  Now the close
# waits for the listing's call, and the listing's next row raises UsageError
# (the listing sleeps a little between rows, so that the close, waiting for
# the lock, takes it before that row).
_SCRIPT = textwrap.dedent("""
    import sys, threading, time
    from lecode_memctl.core import facts as facts_mod, factview, open_project
    from lecode_memctl.core.errors import UsageError

    proj, cfg, how = sys.argv[1], sys.argv[2], sys.argv[3]
    p = open_project(proj, config_dir=cfg)
    inside, closing = threading.Event(), threading.Event()
    times = {}
    real_batches = facts_mod._text_batches

    def batches(*args, **kwargs):
        if threading.current_thread().name == "lister" and not inside.is_set():
            inside.set()
            closing.wait(10)
            time.sleep(0.3)         # close() runs meanwhile (or waits)
            times["paused until"] = time.monotonic()
        yield from real_batches(*args, **kwargs)

    facts_mod._text_batches = batches
    out = {}

    def lister():
        rows = (factview.iter_fact_rows(p.facts, p.sessions) if how == "rows"
                else p.facts.iter_fact_revisions())
        try:
            for _ in rows:
                time.sleep(0.005)
            out["got"] = "every row"
        except UsageError as exc:
            out["got"] = "UsageError: " + str(exc)
        except Exception as exc:
            out["got"] = type(exc).__name__ + ": " + str(exc)

    t = threading.Thread(target=lister, name="lister")
    t.start()
    assert inside.wait(10), "the listing never reached its query"
    closing.set()
    p.close()
    times["closed"] = time.monotonic()
    t.join(10)
    print(out["got"])
    print("close waited" if times["closed"] >= times["paused until"] else "close did not wait")
""")


@pytest.mark.parametrize("how", ["revisions", "rows"])
def test_close_waits_for_the_views_call_and_the_listing_ends(template, tmp_path, how):
    _copy(template, tmp_path).close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(template / "proj"),
                        str(tmp_path / "cfg"), how],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    got, waited = r.stdout.splitlines()
    assert got == "UsageError: the fact store is closed"
    assert waited == "close waited"


def _nothing_after_close(it, close) -> None:
    """``it`` gives its first item, then ``close()``; its next is UsageError."""
    next(it)
    close()
    with pytest.raises(UsageError, match="closed"):
        next(it)


def test_a_writers_listing_gives_no_row_after_close(template, tmp_path):
    p = _copy(template, tmp_path)
    _nothing_after_close(p.facts.iter_fact_revisions(), p.close)


def test_a_writers_iter_facts_gives_no_row_after_close(template, tmp_path):
    p = _copy(template, tmp_path)
    _nothing_after_close(p.facts.iter_facts(), p.facts.close)


@pytest.mark.parametrize("which", ["iter_fact_revisions", "iter_fact_groups"])
def test_a_read_only_listing_gives_no_row_after_close(template, tmp_path, which):
    p = _copy(template, tmp_path)
    fs = FactStore.open_readonly(p.store.facts_db)
    p.close()
    _nothing_after_close(getattr(fs, which)(), fs.close)


def test_a_session_scan_gives_no_item_after_close(tmp_path):
    p = _project(tmp_path, facts=3)
    _nothing_after_close(p.sessions.scan("s1"), p.close)


def test_a_session_listing_gives_no_entry_after_close(tmp_path):
    p = _project(tmp_path, facts=3)
    with p.sessions.create("s2") as w:
        w.append_message("user", "hello")
    _nothing_after_close(p.sessions.iter_sessions(), p.close)


def _fds() -> int:
    """The descriptors this process holds, counted after a garbage collection:
    an earlier test's garbage (a store in a reference cycle) is let go first,
    so a collection during the measured loop cannot close its descriptors and
    make the count fall."""
    import gc

    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_read_only_store_read_many_times_holds_no_connection_per_listing(tmp_path):
    """Each listing of a read-only open (and each whole-store evaluation of
    its sources) took a second connection to its snapshot for its sorts, kept
    until the store was closed: 50 listings held 100 more descriptors.  The
    connection is let go once the listing is read, or left."""
    from lecode_memctl.core import factview

    p = _project(tmp_path, facts=30)
    fs = FactStore.open_readonly(p.store.facts_db)
    list(fs.iter_fact_revisions())
    list(factview.iter_fact_rows(fs, p.sessions))
    before = _fds()
    for _ in range(20):
        list(fs.iter_fact_revisions())
        list(factview.iter_fact_rows(fs, p.sessions))
        half = fs.iter_fact_groups()
        next(half)
        half.close()                        # a listing left half read
    assert _fds() == before
    assert len(fs._siblings) == 0 and len(fs._listings) == 0
    fs.close()
    p.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_listing_made_and_never_read_holds_nothing(tmp_path):
    """``iter_fact_groups()`` of a read-only open started its listing at
    once (a connection and a thread for its sorts); made and dropped unread,
    it held them until close (20 listings: 40 descriptors, and ``may_fork``
    false).  It starts at its first row now."""
    import gc

    p = _project(tmp_path, facts=10)
    fs = FactStore.open_readonly(p.store.facts_db)
    p.close()
    before = _fds()
    for _ in range(20):
        fs.iter_fact_groups()
        fs.iter_fact_revisions()
    gc.collect()
    assert _fds() == before
    assert fs._listings == [] and fs._siblings == []
    fs.close()
