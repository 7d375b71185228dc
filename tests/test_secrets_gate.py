"""The detector's gate (2026-12-06): a regex-based detect-secrets plugin
whose own patterns find nothing in a line is not called on it.  The
plugin's ``analyze_line`` yields only what those patterns' ``findall``
finds, so no hit is lost: the hits are the ungated detector's, on text
made to hold what each pattern matches (hypothesis's ``from_regex``)
among other text, and on the planted store of the other tests."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core import secrets as sec


@pytest.fixture(scope="module")
def detectors() -> tuple[sec.Detector, sec.Detector]:
    gated = sec.Detector()
    ungated = sec.Detector()
    ungated._gates = [None] * len(ungated.plugins)
    return gated, ungated


def _patterns() -> list[re.Pattern[str]]:
    """Every pattern of every regex-based plugin (the plugins' own, not the gates')."""
    from detect_secrets.plugins.base import RegexBasedDetector

    return [r for p in sec.Detector().plugins if isinstance(p, RegexBasedDetector)
            for r in p.denylist]


def test_every_regex_plugin_is_gated_and_the_others_are_not():
    from detect_secrets.plugins.base import RegexBasedDetector

    d = sec.Detector()
    names = {type(p).__name__: g for p, g in zip(d.plugins, d._gates, strict=True)}
    assert names["KeywordDetector"] is None
    assert names["Base64HighEntropyString"] is None and names["HexHighEntropyString"] is None
    for p, g in zip(d.plugins, d._gates, strict=True):
        if isinstance(p, RegexBasedDetector):
            assert g is not None and tuple(r for r, _ in g) == tuple(p.denylist), type(p).__name__
            assert all(least > 0 for _, least in g), type(p).__name__
    assert sum(g is not None for g in d._gates) >= 20
    least = {type(p).__name__: min(w for _, w in g) for p, g in zip(d.plugins, d._gates,
                                                                      strict=True) if g}
    assert least["AWSKeyDetector"] == 20 and least["GitHubTokenDetector"] == 40


_LEAST = [pair for gate in sec.Detector()._gates for pair in gate or ()]


@pytest.mark.heavy
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_LEAST).flatmap(
    lambda pair: st.tuples(st.just(pair), st.from_regex(pair[0], fullmatch=True))))
def test_no_pattern_matches_fewer_characters_than_its_gate_says(case):
    """Each gate pattern's least width is a lower bound of its matches."""
    (r, least), text = case
    m = r.search(text)
    assert m is not None and len(m.group()) >= least, (r.pattern, text)


_FILL = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@st.composite
def _texts(draw: st.DrawFn) -> str:
    pats = _patterns_once()
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        parts.append(draw(_FILL))
        if draw(st.booleans()):
            parts.append(draw(st.from_regex(draw(st.sampled_from(pats)), fullmatch=True)))
        parts.append(draw(st.sampled_from(["", " ", "\n", "=", ":", '"', "'", "/"])))
    return "".join(parts)


_CACHE: list[list[re.Pattern[str]]] = []


def _patterns_once() -> list[re.Pattern[str]]:
    if not _CACHE:
        _CACHE.append(_patterns())
    return _CACHE[0]


@pytest.mark.heavy
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts(), st.booleans())
def test_the_gate_loses_no_hit(detectors, text, whole_tokens):
    gated, ungated = detectors
    assert gated.scan(text, whole_tokens=whole_tokens) == ungated.scan(
        text, whole_tokens=whole_tokens)


def test_a_line_without_any_match_calls_no_regex_plugin(detectors, monkeypatch):
    gated, _ = detectors
    called: list[str] = []
    for p, g in zip(gated.plugins, gated._gates, strict=True):
        if g is not None:
            orig, name = p.analyze_line, type(p).__name__

            def spy(*a, _orig=orig, _name=name, **k):  # noqa: ANN002, ANN003, ANN202
                called.append(_name)
                return _orig(*a, **k)

            monkeypatch.setattr(p, "analyze_line", spy)
    assert gated.scan("an ordinary sentence about tabs and spaces") == []
    assert called == []
    hits = gated.scan("the key AKIAQWERTYUIOPASDFGH is live")
    assert [h.detector for h in hits] == ["aws-access-key"]
    assert called == ["AWSKeyDetector"]


@pytest.mark.heavy
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts())
def test_a_plugin_the_gate_skips_finds_nothing(detectors, text):
    """The premise itself, plugin by plugin, before memctl's own filters: a
    plugin whose patterns the gate finds none of in a line yields nothing
    for it."""
    gated, _ = detectors
    for plugin, gate in zip(gated.plugins, gated._gates, strict=True):
        if gate is None:
            continue
        for line in text.split("\n"):
            found = plugin.analyze_line(filename="x", line=line, line_number=0, context=None)
            if found:
                assert any(len(line) >= least and r.search(line) for r, least in gate), (
                    type(plugin).__name__, line)
