"""UndoState answers a position in time that does not follow the number of
undo/redo events: grep asks it once per hit and the readers once per cited
record, so a walk over every event made a session with thousands of undo/redo
events quadratic (20,000 events, 20,000 hits: 14 s).  The answers are the
linear definition's: the newest event covering the position, the first added
among events of the same seq."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lecode_memctl.core.sessions import UndoState

from .builders import Counted


def _reference(events: list[dict], pos: int) -> str | None:
    best: tuple[int, str] | None = None
    for ev in events:
        seq, t = ev["seq"], ev["target"]
        first, last = t[0], min(t[1], seq - 1)
        if first <= last and first <= pos <= last and (best is None or seq > best[0]):
            best = (seq, ev["event"])
    return best[1] if best else None


def _events(n: int) -> list[dict]:
    # the events-N shape: message, then an undo (even) or redo (odd) of it
    return [{"seq": 2 * i + 2, "type": "event", "event": "undo" if i % 2 == 0 else "redo",
             "target": [2 * i + 1, 2 * i + 1]} for i in range(n)]


def _comparisons(n: int) -> int:
    us = UndoState(_events(n))
    us.state(1)                       # (any one-off preparation is not the query)
    Counted.calls = 0
    for p in (1, n, 2 * n - 1):
        assert us.state(Counted(p)) == _reference(_events(n), p)
    return Counted.calls


def test_state_does_not_walk_every_event() -> None:
    small, large = _comparisons(1_000), _comparisons(4_000)
    # a walk over the events compares each one (4x as many for 4x the events);
    # a search over sorted bounds adds a couple of comparisons per doubling
    assert large < 2 * small, (small, large)
    assert large < 200, large


_event = st.builds(
    lambda seq, kind, a, w: {"seq": seq, "type": "event", "event": kind, "target": [a, a + w]},
    st.integers(1, 40), st.sampled_from(["undo", "redo"]), st.integers(0, 40), st.integers(0, 12))


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=25), st.lists(st.integers(-2, 60), max_size=10))
def test_state_is_the_linear_definition(events: list[dict], queries: list[int]) -> None:
    us = UndoState()
    done: list[dict] = []
    for ev in events:                 # queries between adds see every add so far
        us.add(ev)
        done.append(ev)
        for p in queries:
            assert us.state(p) == _reference(done, p), (done, p)
    for p in range(-2, 60):
        assert us.state(p) == _reference(done, p), (done, p)


def test_clear_and_ignored_events() -> None:
    us = UndoState([{"seq": 5, "event": "clear"}, {"seq": 3, "event": "clear"},
                    {"seq": 7, "event": "undo", "target": [7, 9]},     # reaches itself: nothing left
                    {"seq": "8", "event": "undo", "target": [1, 2]},   # no integer seq
                    {"seq": 9, "event": "undo", "target": [2, 1]}])    # malformed target
    assert us.clear_seq == 5
    assert [us.state(p) for p in range(12)] == [None] * 12
    assert not us._undo


def test_hides_nothing_only_without_a_clear_or_a_target():
    """grep skips its second visibility check of a hit where the events hide
    nothing: only an UndoState with no clear and no undo/redo target says so
    (an event with a malformed target, or one reaching only itself, adds none)."""
    us = UndoState()
    assert us.hides_nothing()
    us.add({"seq": 5, "type": "event", "event": "undo", "target": "bad"})
    us.add({"seq": 6, "type": "event", "event": "undo", "target": [6, 6]})
    assert us.hides_nothing()
    us.add({"seq": 7, "type": "event", "event": "redo", "target": [1, 2]})
    assert not us.hides_nothing()
    cleared = UndoState([{"seq": 3, "type": "event", "event": "clear"}])
    assert not cleared.hides_nothing()
