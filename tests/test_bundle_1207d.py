"""Bundles of 2026-12-07 (d): a bundle's audit is of a frozen copy (no file
in it is "recent", whatever its modification time), and a finding the
manifest lists twice is a problem."""
from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from pathlib import Path

import orjson
import pytest

from .test_bundle import demo, export, verify  # noqa: F401  (fixtures)


def _plant(top: Path) -> None:
    """A torn header, a torn tail, an empty transcript and a temp file,
    all written two hours ago (a live validate's errors/warnings)."""
    s = top / "sessions"
    (s / "s9.jsonl").write_bytes(b'{"seq":0,"type":"session"')
    (s / "s8.jsonl").write_bytes(b"")
    with open(s / "demo-gamma.jsonl", "ab") as f:
        f.write(b'{"seq":99,"type":"mess')
    (top / ".MEMORY.md.tmp-1a2b").write_bytes(b"half")
    old = time.time() - 7200
    for p in (s / "s9.jsonl", s / "s8.jsonl", s / "demo-gamma.jsonl", top / ".MEMORY.md.tmp-1a2b"):
        os.utime(p, (old, old))


def _manifest(bundle: Path) -> dict:
    with tarfile.open(bundle) as tf:
        fh = tf.extractfile("manifest.json")
        assert fh is not None
        return orjson.loads(fh.read())


def test_bundle_audit_is_frozen_whatever_the_mtimes(demo, tmp_path):  # noqa: F811
    _plant(demo)
    out = tmp_path / "b.tar"
    export(demo, out)
    m = _manifest(out)
    found = {(f["code"], f.get("file")): f for f in m["validate"]["findings_list"]}
    codes = {c for c, _ in found}
    # (a temp file is never exported: the audit of the unit test below sees it)
    assert "session.missing_header" in codes and "layout.temp_file" not in codes, codes
    for f in m["validate"]["findings_list"]:
        # the frozen rule: no finding of a bundle is "recent"
        assert "last minute" not in f["message"], f
        assert "in the future" not in f["message"], f
        if f["code"] == "session.missing_header":
            assert f["severity"] == "error", f
        if f["code"] == "layout.temp_file":
            assert f["severity"] == "warning", f
    code, doc = verify(out)
    assert code == 0, doc["problems"]
    un = tmp_path / "x"
    un.mkdir()
    with tarfile.open(out) as tf:
        tf.extractall(un, filter="fully_trusted")
    for when in (time.time(), time.time() - 7200, time.time() + 3600):
        for root, dirs, files in os.walk(un):
            for n in dirs + files:
                os.utime(os.path.join(root, n), (when, when))
        code, doc = verify(un)
        assert code == 0, (when, doc["problems"])


@pytest.mark.parametrize("age", [0.0, 7200.0, -3600.0])
def test_frozen_audit_ignores_mtimes_and_the_clock(demo, age):  # noqa: F811
    """The one switch the bundle's audits pass (``Audit(frozen=True)``): a
    torn header, an empty transcript, a torn tail and a temp file each get
    their not-recent severity and message, modified now, two hours ago or
    an hour in the future (a live audit calls the first recent, the last
    ahead)."""
    from lecode_memctl.core.audit import Audit
    from lecode_memctl.core.layout import store_at

    _plant(demo)
    when = time.time() - age
    for p in list((demo / "sessions").iterdir()) + [demo / ".MEMORY.md.tmp-1a2b"]:
        os.utime(p, (when, when))
    store = store_at(demo)
    want = {"session.missing_header": "error", "session.torn_tail": "error",
            "layout.temp_file": "warning"}
    seen: dict[str, set[str]] = {}
    for f in Audit(store, deep=True, parallel=False, frozen=True).run():
        if f.code in want:
            assert "last minute" not in f.message and "future" not in f.message, f.message
            seen.setdefault(f.code, set()).add(f.severity)
    assert seen == {k: {v} for k, v in want.items()}


def _redigest(src: Path, dst: Path, edit) -> dict:
    """``src`` rewritten to ``dst`` in the same order, its manifest edited
    by ``edit`` and its digest recomputed (the reviewer's repro2.py)."""
    with tarfile.open(src) as tf:
        mem = [(ti, tf.extractfile(ti).read() if ti.isreg() else None)  # type: ignore[union-attr]
               for ti in tf.getmembers()]
    m = orjson.loads(mem[0][1])  # type: ignore[arg-type]
    edit(m)
    del m["digest"]
    m["digest"] = hashlib.sha256(orjson.dumps(m, option=orjson.OPT_SORT_KEYS)).hexdigest()
    data = orjson.dumps(m, option=orjson.OPT_SORT_KEYS) + b"\n"
    mem[0][0].size = len(data)
    mem[0] = (mem[0][0], data)
    with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as t:
        for ti, d in mem:
            t.addfile(ti, io.BytesIO(d) if d is not None else None)
    return m


def _sorted_findings(fl: list) -> None:
    fl.sort(key=lambda f: orjson.dumps(f, option=orjson.OPT_SORT_KEYS))


def test_a_finding_listed_twice_is_a_manifest_problem(demo, tmp_path):  # noqa: F811
    _plant(demo)
    out = tmp_path / "b.tar"
    export(demo, out)

    def twice(m: dict) -> None:
        fl = m["validate"]["findings_list"]
        fl.append(fl[0])
        _sorted_findings(fl)

    bad = tmp_path / "twice.tar"
    m = _redigest(out, bad, twice)
    first = m["validate"]["findings_list"][0]
    code, doc = verify(bad)
    assert code == 1, doc
    assert any(p["kind"] == "manifest" and "listed 2 times" in p["detail"]
               and first["code"] in p["detail"] for p in doc["problems"]), doc["problems"]
    # the list against the summary's counts: one more than it says
    assert any(p["kind"] == "manifest" and "findings_list" in p["detail"]
               for p in doc["problems"]), doc["problems"]
    # (no finding "no longer found": the manifest's problem, as a fact row's)
    assert not any(p["kind"] == "validate" for p in doc["problems"]), doc["problems"]


def test_a_findings_list_that_disagrees_with_its_summary_is_a_manifest_problem(demo, tmp_path):  # noqa: F811
    _plant(demo)
    out = tmp_path / "b.tar"
    export(demo, out)

    def summary_off(m: dict) -> None:
        m["validate"]["findings"]["warning"] += 1

    bad = tmp_path / "off.tar"
    _redigest(out, bad, summary_off)
    code, doc = verify(bad)
    assert code == 1, doc
    assert any(p["kind"] == "manifest" and "findings_list" in p["detail"]
               for p in doc["problems"]), doc["problems"]


def test_a_bundle_exported_before_the_frozen_rule_still_verifies(demo, tmp_path,  # noqa: F811
                                                                  monkeypatch):
    """A bundle an earlier memctl exported audited its fresh copy: a torn
    header there was the "recent" warning.  The frozen audit called that
    untouched archive DIFFERS (a code review): verify audits as its
    manifest was made, the recent form in its findings the mark of the
    earlier rule (FORMAT.md, "Evidence bundles")."""
    from lecode_memctl.core import bundle

    _plant(demo)
    real = bundle.audit_store

    def earlier(*a, **k):  # noqa: ANN002,ANN003,ANN202
        return real(*a, **{**k, "frozen": False})

    out = tmp_path / "old.tar"
    monkeypatch.setattr(bundle, "audit_store", earlier)
    export(demo, out)
    monkeypatch.setattr(bundle, "audit_store", real)
    m = _manifest(out)
    assert any("last minute" in f["message"] for f in m["validate"]["findings_list"]), m
    code, doc = verify(out)
    assert code == 0, doc["problems"]


@pytest.mark.parametrize(("finding", "earlier"), [
    ({"code": "session.missing_header", "severity": "warning",
      "message": "no complete first line: the session header is missing (modified in the last "
                 "minute: a writer may be creating it)"}, True),
    ({"code": "session.torn_tail", "severity": "warning",
      "message": "last line (12 bytes) has no newline: a writer may be appending (modified in "
                 "the last minute)"}, True),
    ({"code": "layout.temp_file", "severity": "info",
      "message": "temporary file of a write in progress? (modified in the last minute)"}, True),
    # the frozen forms, and the phrase anywhere else, are no mark
    ({"code": "session.missing_header", "severity": "error",
      "message": "no complete first line: the session header is missing"}, False),
    ({"code": "session.torn_tail", "severity": "error",
      "message": "last line (12 bytes) has no newline: an interrupted append (not modified "
                 "for over a minute)"}, False),
    ({"code": "layout.unexpected_file", "severity": "warning",
      "message": "notes/modified in the last minute.md: (modified in the last minute)"}, False),
    ({"code": "session.torn_tail", "severity": "error",
      "message": "a writer may be appending (modified in the last minute)"}, False),
])
def test_only_a_recent_form_marks_a_bundle_of_the_earlier_rule(finding, earlier):
    """The mark that switches verify to the clock is one of the three
    messages a "recent" file gave, with its severity: a name or text a
    finding quotes holding the phrase never makes a new bundle's verify
    depend on the clock."""
    from lecode_memctl.core.bundle import _made_before_frozen

    assert _made_before_frozen({"validate": {"findings_list": [finding]}}) is earlier


def test_a_header_naming_the_phrase_does_not_make_a_new_bundle_depend_on_the_clock(
        demo, tmp_path):  # noqa: F811
    """A transcript whose header names the project 'modified in the last
    minute' (session.refused quotes it) and an empty transcript two hours
    old: the new bundle verifies at once, and its unpacked directory with
    any times (the first mark, any message holding the phrase, sent verify
    to the clock: DIFFERS on an untouched bundle; a code review)."""
    s = demo / "sessions"
    (s / "s7.jsonl").write_bytes(b'{"seq":0,"type":"session","format":1,"session_id":"s7",'
                                 b'"project":"modified in the last minute"}\n')
    (s / "s8.jsonl").write_bytes(b"")
    old = time.time() - 7200
    for p in (s / "s7.jsonl", s / "s8.jsonl"):
        os.utime(p, (old, old))
    out = tmp_path / "b.tar"
    export(demo, out)
    code, doc = verify(out)
    assert code == 0, doc["problems"]
    un = tmp_path / "u"
    un.mkdir()
    with tarfile.open(out) as tf:
        tf.extractall(un, filter="tar")
    for when in (time.time(), time.time() - 7200, time.time() + 3600):
        for root, _dirs, files in os.walk(un):
            for name in files:
                os.utime(os.path.join(root, name), (when, when))
        code, doc = verify(un)
        assert code == 0, (when, doc["problems"])
