"""``secrets`` and ``redact``: every quoted keyword assignment of a line is
a finding, not the first of each of detect-secrets' patterns (review of
2026-12-07, the limit the thirty-ninth pass documented)."""

from __future__ import annotations

import functools
from pathlib import Path

from hypothesis import given, settings, strategies as st

from .conftest import tree_hash
from .test_secrets_redact_1207b import _call_store, _redact, _secrets

# short values of letters and a digit or two: no entropy detector finds
# them, only the keyword detector does
LINE = '{"db_password": "hunter2horse", "api_secret": "swordfish9lake", "x": 1}'


def _keywords(text: str) -> list[str]:
    from lecode_memctl.core.secrets import Detector

    return [text[h.start:h.end] for h in Detector().scan(text)
            if h.detector == "secret-keyword"]


def test_every_quoted_assignment_of_a_line_is_found():
    assert _keywords(LINE) == ["hunter2horse", "swordfish9lake"]


def test_each_pattern_finds_every_assignment_not_only_its_first():
    # ``=`` assignments (one pattern), ``:`` members (another), mixed on a line
    line = ('password = "alpha1bravo" and secret = "charlie2delta"; '
            '"passwd": "echo3foxtrot", "api_key": "golf4hotel"')
    assert _keywords(line) == ["alpha1bravo", "charlie2delta", "echo3foxtrot", "golf4hotel"]


def test_a_long_line_of_many_assignments_gives_each_one():
    values = [f"v{i:05d}zq{i % 7}" for i in range(2000)]
    line = ", ".join(f'"password{i}": "{v}"' for i, v in enumerate(values))
    assert _keywords(line) == values


def test_redact_erases_every_assignment_of_a_note_line_and_secrets_is_then_clean(tmp_path):
    from lecode_memctl.core.layout import store_at

    st = store_at(tmp_path / "store")
    Path(st.path).mkdir(parents=True)
    (Path(st.path) / "MEMORY.md").write_text(f"# Memory\n\nconfig: {LINE}\n", encoding="utf-8")
    code, found = _secrets(Path(st.path))
    assert code == 1
    assert sorted(f["detector"] for f in found) == ["secret-keyword", "secret-keyword"]
    code, _doc = _redact(Path(st.path), "--yes")
    assert code == 0, _doc
    text = (Path(st.path) / "MEMORY.md").read_text(encoding="utf-8")
    assert "hunter2horse" not in text and "swordfish9lake" not in text
    before = tree_hash(Path(st.path))
    assert _secrets(Path(st.path)) == (0, [])
    assert tree_hash(Path(st.path)) == before


def test_two_keyed_members_in_one_string_argument_are_both_found(tmp_path):
    store = _call_store(tmp_path, {"body": LINE})
    code, found = _secrets(store, "--jobs", "1")
    assert code == 1
    assert len([f for f in found if f["detector"] == "secret-keyword"]) == 2, found


_PIECES = ["_id", "_ID", "_ids", "id", "Id", "myid", "userid", "s", "-", "_", "=", " ", '"',
           "x", "9", "pw", "ß", "İ", "ab12cd"]


@functools.cache
def _detector():
    from lecode_memctl.core.secrets import Detector

    return Detector()


@given(st.lists(st.sampled_from(_PIECES), max_size=24), st.lists(st.sampled_from(_PIECES),
                                                                   min_size=1, max_size=4),
       st.integers(0, 3))
@settings(max_examples=400, deadline=None)
def test_the_id_filter_answers_as_detect_secrets_does(pieces, secret_pieces, seen_before):
    # (one Detector asks of several values of each line, line after line:
    # a line's first id match is found once, each value decided from it)
    from detect_secrets.filters.heuristic import is_likely_id_string
    from detect_secrets.plugins.keyword import KeywordDetector

    d = _detector()
    plugin = KeywordDetector()
    line = "".join(pieces)
    secret = "".join(secret_pieces)
    for other in pieces[:seen_before]:
        assert d._likely_id(other, line, plugin) == is_likely_id_string(other, line, plugin)
    assert d._likely_id(secret, line, plugin) == is_likely_id_string(secret, line, plugin)
