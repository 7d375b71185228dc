"""A synthetic user notification (``synthetic: true``, written by the agent)
is no authored text: a correction citing it alone is refused, as the core
refuses it, and the message says so (it blamed tool output alone, which
the cited message is not)."""

from __future__ import annotations

import pytest

from lecode_memctl.core.errors import Conflict
from lecode_memctl.core.facts import require_authored_text
from lecode_memctl.core.sourceref import SourceRef


def test_a_synthetic_notification_alone_is_refused_and_named():
    rec = {"seq": 2, "type": "message", "role": "user", "content": "The user now prefers spaces.",
           "synthetic": True, "epoch": 0}
    with pytest.raises(Conflict, match="nor a synthetic notification"):
        require_authored_text([rec], SourceRef("s1", (2,), "0" * 64))
    require_authored_text([{**rec, "synthetic": False}], SourceRef("s1", (2,), "0" * 64))
