"""A small store for the output-contract tests: sessions, facts (a few
source-validated, the rest legacy provenance), notes, MEMORY.md and a daily
log, with text that no 8-bit encoding can carry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lecode_memctl.core.facts import FactStore, Provenance
from lecode_memctl.core.layout import store_for_project  # noqa: F401 - re-exported
from lecode_memctl.core.sessions import SessionStore

WIDE = "caf\u00e9 \u2192 \u2713 \u65e5\u672c"      # é, an arrow, a check mark, CJK
DATE = "2026-03-01"


def build(config_dir: Path, project: Path, *, facts: int = 30):
    """The store of ``project`` with ``facts`` facts; returns (store, [fact ids])."""
    project.mkdir(parents=True, exist_ok=True)
    store = store_for_project(config_dir, project)
    ss = SessionStore(store)
    with ss.create("2026-03-01-alpha") as w:
        w.append_message("user", "We use tabs for indentation. " + WIDE)      # 1
        w.append_message("assistant", "Noted.", epoch=0)                      # 2
        w.append_message("user", "Deploys happen on Fridays.")                # 3
    with ss.create("2026-03-02-beta") as w:
        w.append_message("user", "Nothing to see.")
    ids = []
    with FactStore(store.facts_db) as fs:
        ss = SessionStore(store, exclusions=fs)
        for seq, text in ((1, "We use tabs for indentation. " + WIDE), (3, "Deploys happen on Fridays.")):
            ref = ss.source_snapshot("2026-03-01-alpha", seq, seq).ref
            ids.append(fs.remember(text, ref, sessions=ss).fact.fact_id)
        for i in range(max(0, facts - 2)):
            ids.append(fs.add(f"legacy fact number {i} {WIDE}",
                              provenance=[Provenance("2026-03-01-alpha", (2,))]).fact.fact_id)
    (store.path / "notes").mkdir(exist_ok=True)
    (store.path / "notes" / "wide.md").write_text(f"# {WIDE}\n", encoding="utf-8")
    (store.path / "MEMORY.md").write_text(f"# memory {WIDE}\n", encoding="utf-8")
    (store.path / "daily").mkdir(exist_ok=True)
    (store.path / "daily" / f"{DATE}.md").write_text(f"- {WIDE}\n", encoding="utf-8")
    for d, _dirs, files in os.walk(store.path):
        os.chmod(d, 0o700)
        for f in files:
            os.chmod(os.path.join(d, f), 0o600)
    return store, sorted(ids)


def blocked_writing_stdout(pid: int) -> bool:
    """Whether process ``pid`` is blocked in ``write(1, ...)`` (Linux's
    /proc/PID/syscall: a pipe to stdout that nobody reads)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "1" and int(fields[1], 16) == 1


def memctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "lecode_memctl", *args]


def run(*args: str, env: dict | None = None, cwd=None, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(memctl_argv(*args), capture_output=True, env=e, cwd=cwd, timeout=120, **kw)
