"""A review of the read commands of 2026-12-07 (second pass): a linked
store's counts, the usage table's costs."""

from __future__ import annotations

import orjson

from .conftest import run_cli


def test_projects_gives_a_linked_store_no_counts_too_low(tmp_path):
    """A store that is a symbolic link is not followed: its sessions, size
    and files are not known (null, '?'), never 0, which sorted it as the
    smallest (the not_a_directory rows had that fix; links did not)."""
    real = tmp_path / "real"
    (real / "sessions").mkdir(parents=True)
    (real / "MEMORY.md").write_text("# Memory\n" + "x" * 5000, encoding="utf-8")
    mem = tmp_path / "cfg" / "memory"
    mem.mkdir(parents=True)
    (mem / "app-0123456789ab").symlink_to(real)
    (mem / "empty-0123456789ab").mkdir()
    r = run_cli("--config-dir", str(tmp_path / "cfg"), "projects", "--json")
    assert r.exit_code == 0, r.stderr
    rows = {p["slug"]: p for p in orjson.loads(r.stdout)}
    link = rows["app-0123456789ab"]
    assert link["kind"] == "symlink"
    assert (link["sessions"], link["size"], link["files"]) == (None, None, None), link
    r = run_cli("--config-dir", str(tmp_path / "cfg"), "projects", "--sort", "size",
                "--format", "jsonl")
    first = orjson.loads(r.stdout.splitlines()[0])
    assert first["slug"] == "empty-0123456789ab", r.stdout


def test_the_usage_table_shows_each_cost_as_the_json_does(tmp_path):
    """The table rounded costs to six significant digits (12345.7 where the
    JSON says 12345.678): the same figure in every format."""
    store = tmp_path / "y"
    (store / "sessions").mkdir(parents=True)
    lines = [
        {"seq": 0, "type": "session", "format": 1, "session_id": "s-1", "project": "y",
         "created": "2026-12-01T09:00:00+00:00"},
        {"seq": 1, "type": "event", "event": "memory_usage", "purpose": "learning",
         "usage": {"input_tokens": 10, "output_tokens": 10, "cost": 12345.678}},
        {"seq": 2, "type": "event", "event": "memory_usage", "purpose": "answering",
         "usage": {"input_tokens": 10, "output_tokens": 10, "cost": 0.0000042}},
    ]
    (store / "sessions" / "s-1.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n"
                                                            for x in lines))
    doc = orjson.loads(run_cli("--store", str(store), "--no-state", "usage", "--json").stdout)
    costs = [orjson.dumps(p["cost"]).decode() for p in doc["purposes"]]
    costs.append(orjson.dumps(doc["total"]["cost"]).decode())
    for fmt in ("table", "plain", "github"):
        r = run_cli("--store", str(store), "--no-state", "usage", "--format", fmt)
        assert r.exit_code == 0, r.stderr
        for c in costs:
            assert c in r.stdout, (fmt, c, r.stdout)
        assert "12345.7 " not in r.stdout
