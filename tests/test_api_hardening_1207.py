"""Hardening of the core's public API after the review of 2026-12-07
(docs/API.md): every error of a documented call is typed, a write never
stores what no later call can undo, the API refuses what memctl refuses,
and the core forks only when the process has no other thread."""

from __future__ import annotations

import pytest

from lecode_memctl.core import errors


def test_position_missing_imports_from_the_errors_module():
    """``read_range`` raises it and ``core.__all__`` names it; it was the one
    session error ``lecode_memctl.core.errors`` did not give."""
    import lecode_memctl.core as core

    assert errors.PositionMissing is core.PositionMissing
    assert issubclass(errors.PositionMissing, errors.NotFound)
    with pytest.raises(AttributeError):
        errors.NoSuchError  # noqa: B018
