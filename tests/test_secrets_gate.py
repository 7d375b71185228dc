"""The detector's gate (2026-12-06): a regex-based detect-secrets plugin
whose own patterns find nothing in a line is not called on it.  The
plugin's ``analyze_line`` yields only what those patterns' ``findall``
finds, so no hit is lost: the hits are the ungated detector's, on text
made to hold what each pattern matches (hypothesis's ``from_regex``)
among other text, and on the planted store of the other tests."""

from __future__ import annotations

import functools
import re
from typing import Any

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
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector

    d = sec.Detector()
    names = {type(p).__name__: g for p, g in zip(d.plugins, d._gates, strict=True)}
    ((words, least),) = names["KeywordDetector"]     # (its words, as its regexes take them)
    assert words.caseless.pattern == "|".join(keyword.DENYLIST)
    assert words.caseless.flags & re.IGNORECASE and least > 0
    assert names["Base64HighEntropyString"] is None and names["HexHighEntropyString"] is None
    for p, g in zip(d.plugins, d._gates, strict=True):
        if isinstance(p, RegexBasedDetector):
            assert g is not None and tuple(r for r, _ in g) == tuple(p.denylist), type(p).__name__
            assert all(least > 0 for _, least in g), type(p).__name__
    assert sum(g is not None for g in d._gates) >= 20
    least = {type(p).__name__: min(w for _, w in g) for p, g in zip(d.plugins, d._gates,
                                                                      strict=True) if g}
    assert least["AWSKeyDetector"] == 20 and least["GitHubTokenDetector"] == 40


@functools.cache
def _matching(pattern: re.Pattern[str]) -> st.SearchStrategy[str]:
    """``st.from_regex(pattern, fullmatch=True)``, the same strings, drawn cheaper.

    Hypothesis makes each character of a repeat (``[a-z0-9]{64}``) a draw of
    its own, in a list; most of this module's time went to it.  Here a
    repeat of one character is ``st.text`` of that character's strategy,
    with the same bounds, a draw in all: the strings of the repeat are the
    same.  A lookbehind is made empty (below).  Every other node is made as
    hypothesis makes it (its characters by hypothesis's own code), and the
    fullmatch filter is the same.

    It builds on hypothesis's own regex module, which is not its public
    API: where a release moved or changed it, the strategy is
    ``st.from_regex`` itself (slower, the same strings), never an error."""
    try:
        from hypothesis.strategies._internal import regex as hre

        return _cheaper_matching(pattern, hre)
    except (ImportError, AttributeError, TypeError, NotImplementedError):
        return st.from_regex(pattern, fullmatch=True)


def _cheaper_matching(pattern: re.Pattern[str], hre: Any) -> st.SearchStrategy[str]:
    sre = hre.sre
    alphabet = st.characters(codec="utf-8")         # (from_regex's alphabet for text)
    leaf = (sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY)

    def make(codes, flags: int) -> st.SearchStrategy[str]:
        if not isinstance(codes, tuple):
            parts = [make(c, flags) for c in codes]
            if not parts:
                return st.just("")
            return parts[0] if len(parts) == 1 else st.tuples(*parts).map("".join)
        code, value = codes
        if code in leaf:
            return hre._strategy(codes, hre.Context(flags=re.RegexFlag(flags)), True,
                                 alphabet=alphabet)
        if code in (sre.AT, sre.ASSERT_NOT):
            return st.just("")
        if code == sre.ASSERT and value[0] > 0:
            return make(value[1], flags)
        if code == sre.ASSERT:
            # a lookbehind: hypothesis draws a character for it ((?<=\W)),
            # which the fullmatch filter mostly rejects (the pattern's own
            # nodes consume every character of a fullmatch); what it keeps,
            # the nodes around the lookbehind make without it
            return st.just("")
        if code == sre.SUBPATTERN:
            return make(value[-1], (flags | value[1]) & ~value[2])
        if code == sre.BRANCH:
            return st.one_of([make(b, flags) for b in value[1]])
        if code in (sre.MIN_REPEAT, sre.MAX_REPEAT, sre.POSSESSIVE_REPEAT):
            least, most, sub = value
            most = None if most == sre.MAXREPEAT else most
            one = make(sub, flags)
            if least == 0 and most == 1:
                return st.just("") | one
            if len(sub) == 1 and sub[0][0] in leaf:
                return st.text(one, min_size=least, max_size=most)
            return st.lists(one, min_size=least, max_size=most).map("".join)
        raise NotImplementedError(code)      # (no such node in these patterns)

    return make(hre.sre_parse.parse(pattern.pattern, pattern.flags), pattern.flags).filter(
        pattern.fullmatch)


# (the keyword gate's pattern as IGNORECASE takes it)
_LEAST = [(getattr(r, "caseless", r), least) for gate in sec.Detector()._gates
          for r, least in gate or ()]


@pytest.mark.heavy
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_LEAST).flatmap(
    lambda pair: st.tuples(st.just(pair), _matching(pair[0]))))
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
            parts.append(draw(_matching(draw(st.sampled_from(pats)))))
        parts.append(draw(st.sampled_from(["", " ", "\n", "=", ":", '"', "'", "/",
                                           'password = "', 'paſſword: "', "api_KEY='"])))
    return "".join(parts)


_CACHE: list[list[re.Pattern[str]]] = []


def _patterns_once() -> list[re.Pattern[str]]:
    if not _CACHE:
        _CACHE.append(_patterns())
    return _CACHE[0]


@pytest.mark.heavy
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts(), st.booleans())
def test_the_gate_loses_no_hit_and_a_plugin_it_skips_finds_nothing(detectors, text,
                                                                   whole_tokens):
    """Two properties of the same drawn texts (600 of them, each drawn once:
    the drawing was most of the time of the two tests they were):

    * the premise itself, plugin by plugin, before memctl's own filters: a
      plugin whose patterns the gate finds none of in a line yields nothing
      for it;
    * and so the gate loses no hit: the gated detector's hits are the
      ungated one's."""
    gated, ungated = detectors
    for plugin, gate in zip(gated.plugins, gated._gates, strict=True):
        if gate is None:
            continue
        for line in text.split("\n"):
            found = plugin.analyze_line(filename="x", line=line, line_number=0, context=None)
            if found:
                assert any(len(line) >= least and r.search(line) for r, least in gate), (
                    type(plugin).__name__, line)
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


@pytest.mark.parametrize("line", ['paſſword = "Zx9kQ2mN7pLq4"', 'PAſſWORD: "Zx9kQ2mN7pLq4"',
                                  'password = "Zx9kQ2mN7pLq4"'])
def test_a_keyword_the_plugin_matches_case_insensitively_is_not_skipped(line):
    """KeywordDetector matches its words case-insensitively on the line as
    it is (re.IGNORECASE: 'ſ' is an 's'); the gate looked for them in the
    line lower-cased ('ſ' stays 'ſ'), and skipped a hit the plugin finds
    (2026-12-06, found reading the gate again)."""
    d = sec.Detector()
    kw = next(p for p in d.plugins if type(p).__name__ == "KeywordDetector")
    assert kw.analyze_line(filename="x.py", line=line, line_number=0, context=None)
    assert [h.detector for h in d.scan(line, "x.py")] == ["secret-keyword"]


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from("aAsSſkKKıİiI_ ?-wordpassecrtyn=:\"'ñÑ"), max_size=24))
def test_the_keyword_gate_finds_what_ignorecase_finds(text):
    """The keyword gate's quick way (lines lower-cased) finds a word
    exactly where re.IGNORECASE does."""
    from detect_secrets.plugins import keyword

    words = sec._CaselessWords(keyword.DENYLIST)
    assert (words.search(text) is None) == (words.caseless.search(text) is None)


@pytest.mark.heavy
def test_the_fold_table_is_what_ignorecase_adds_to_lower_case():
    """Every character to U+10FFFF that re.IGNORECASE matches to a letter of
    the keyword words, other than the letter's own lower case, is in
    ``utf8.CASE_FOLD`` as that letter; and no other character lowers to more than one."""
    from detect_secrets.plugins import keyword

    from lecode_memctl.core.utf8 import CASE_FOLD

    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    # the keyword words' letters, and every ASCII letter (grep -i's literals)
    letters = {c for w in keyword.DENYLIST for c in w if c.isalpha()}
    letters |= set("abcdefghijklmnopqrstuvwxyz")
    extra = {}
    for letter in letters:
        for m in re.finditer(re.escape(letter), every, re.IGNORECASE):
            if m.group().lower() != letter:
                extra[ord(m.group())] = letter
    assert extra == CASE_FOLD
    assert [c for c in every if len(c.lower()) > 1] == ["\u0130"]
