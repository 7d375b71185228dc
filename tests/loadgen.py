"""An agent-like writer for the mixed-load test (tests/test_mixed_load.py).

Run as a separate process::

    python tests/loadgen.py CONFIG_DIR PROJECT SECONDS LOG [SEED]

For SECONDS it does what lecode's agent does to a project's store, through
the core's own writers (``SessionStore`` and ``FactStore``, default busy
timeout): it appends user and assistant messages to session transcripts
(a new session every ``PER_SESSION`` turns, the writer held open meanwhile,
as the agent holds it for a session), remembers a fact from each user
message it wrote, and every third turn corrects one of its earlier facts
with a new user message as evidence.

Every operation is logged to LOG, one JSON object per line, written only
after the operation returned (so the log is what the agent *knows* was
persisted):

    {"op": "create",   "session": SID}
    {"op": "append",   "session": SID, "seq": N, "role": R, "text": T}
    {"op": "remember", "fact_id": F, "revision": 1, "text": T, "created": bool}
    {"op": "correct",  "fact_id": F, "revision": N, "text": T}
    {"op": "correct_lost", "fact_id": F, "error": E}   # forgotten meanwhile
    {"op": "error",    "where": W, "error": E, "exit_code": N}
    {"op": "done",     "turns": N}

A ``correct`` of a fact that a concurrent ``memctl forget`` removed fails
with NotFound (or a Conflict on excluded evidence or a generation change):
that is the expected outcome, logged as ``correct_lost``.  Anything else
that goes wrong (a busy database above all) is logged as ``error``; the test
asserts there is none.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

PER_SESSION = 25


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import orjson

    from lecode_memctl.core.errors import Conflict, MemctlError, NotFound
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_for_project
    from lecode_memctl.core.sessions import SessionStore

    cfg, project, seconds, log_path = Path(argv[0]), Path(argv[1]), float(argv[2]), argv[3]
    seed = int(argv[4]) if len(argv) > 4 else 0
    rnd = random.Random(seed)
    store = store_for_project(cfg, project)
    fs = FactStore(store.facts_db)
    ss = SessionStore(store, exclusions=fs)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(**kw: object) -> None:
        os.write(log_fd, orjson.dumps(kw) + b"\n")

    def error(where: str, exc: BaseException) -> None:
        emit(op="error", where=where, error=f"{type(exc).__name__}: {exc}",
             exit_code=getattr(exc, "exit_code", None))

    mine: dict[str, tuple[int, str]] = {}     # fact id -> (revision, text), believed alive
    deadline = time.monotonic() + seconds
    turn = 0
    writer = None
    sid = ""
    try:
        while time.monotonic() < deadline:
            try:
                if turn % PER_SESSION == 0:
                    if writer is not None:
                        writer.close()
                    sid = f"load-{seed}-{turn // PER_SESSION:03d}"
                    writer = ss.create(sid)
                    emit(op="create", session=sid)
                assert writer is not None
                text = f"Remember: component {turn} of run {seed} uses setting {rnd.randrange(10**6)}."
                u = writer.append_message("user", text)
                emit(op="append", session=sid, seq=u, role="user", text=text)
                reply = f"Noted component {turn}."
                a = writer.append_message("assistant", reply, epoch=fs.generation())
                emit(op="append", session=sid, seq=a, role="assistant", text=reply)
                ref = ss.source_snapshot(sid, u, u).ref
                r = fs.remember(text, ref, sessions=ss)
                mine[r.fact.fact_id] = (r.fact.revision, text)
                emit(op="remember", fact_id=r.fact.fact_id, revision=r.fact.revision, text=text,
                     created=r.created)
                if turn % 3 == 2 and mine:
                    fid = rnd.choice(sorted(mine))
                    rev, _old = mine[fid]
                    new = f"Correction {turn}: {fid} now uses setting {rnd.randrange(10**6)}."
                    c = writer.append_message("user", new)
                    emit(op="append", session=sid, seq=c, role="user", text=new)
                    cref = ss.source_snapshot(sid, c, c).ref
                    try:
                        f = fs.correct(fid, new, expected_revision=rev, ref=cref, sessions=ss)
                    except (NotFound, Conflict) as exc:
                        del mine[fid]
                        emit(op="correct_lost", fact_id=fid, error=f"{type(exc).__name__}: {exc}")
                    else:
                        mine[fid] = (f.revision, new)
                        emit(op="correct", fact_id=fid, revision=f.revision, text=new)
            except MemctlError as exc:
                error(f"turn {turn}", exc)
            turn += 1
            time.sleep(0.002)
    finally:
        if writer is not None:
            writer.close()
        fs.close()
        emit(op="done", turns=turn)
        os.close(log_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
