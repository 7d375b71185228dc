"""Paging of source text: every printed page fits 16,384 bytes and the pages
concatenate to exactly the expected array."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lecode_memctl.core.errors import UsageError
from lecode_memctl.core.paging import (
    MAX_LIMIT,
    MAX_OUTPUT_BYTES,
    omit_binary,
    page_document,
    page_source,
    source_array,
)

META = {"session_id": "s1", "start": 0, "end": 199,
        "source": {"session_id": "s1", "seqs": list(range(1, 200)), "digest": "a" * 64}}


def all_pages(items, limit=4096, meta=META):
    offset, docs = 0, []
    while True:
        doc, page = page_document(meta, items, offset=offset, limit=limit)
        docs.append(doc)
        if page.next_offset is None:
            return docs
        assert page.next_offset > offset
        offset = page.next_offset


def printed_sizes(doc):
    return (len(orjson.dumps(doc)) + 1,
            len(orjson.dumps(doc, option=orjson.OPT_INDENT_2)) + 1)


text_st = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300) | st.sampled_from(
    ["\"" * 5000, "\\" * 9000, "\x00\x01\x1f" * 3000, "é" * 7000, "😀" * 5000, "a" * 20000])
part_st = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text_st),
    st.builds(lambda b: {"type": "binary", "media_type": "image/png",
                         "data": base64.b64encode(b).decode()}, st.binary(max_size=3000)),
)
msg_st = st.builds(
    lambda role, content, extra: {"type": "message", "role": role, "content": content, **extra},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    text_st | st.lists(part_st, max_size=4),
    st.dictionaries(st.sampled_from(["name", "tool_call_id", "epoch", "synthetic"]),
                    st.integers(0, 9) | text_st, max_size=2),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(st.lists(msg_st, min_size=1, max_size=6), st.integers(500, 12000))
def test_pages_fit_and_concatenate(msgs, limit):
    items = [(i + 1, dict(m, seq=i + 1)) for i, m in enumerate(msgs)]
    docs = all_pages(items, limit=limit)
    for doc in docs:
        assert max(printed_sizes(doc)) <= MAX_OUTPUT_BYTES
        assert len(doc["source_text"]) <= min(limit, MAX_LIMIT)
    joined = "".join(d["source_text"] for d in docs)
    assert orjson.loads(joined) == source_array(items)
    assert docs[-1]["next_offset"] is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=3), st.integers(1, 40))
def test_tiny_pages_concatenate(texts, limit):
    items = [(i, {"seq": i, "type": "message", "role": "user", "content": t})
             for i, t in enumerate(texts)]
    docs = all_pages(items, limit=limit)
    assert orjson.loads("".join(d["source_text"] for d in docs)) == source_array(items)


def test_binary_payload_omitted():
    data = base64.b64encode(b"\x89PNG" + bytes(100)).decode()
    msg = {"seq": 1, "type": "message", "role": "user",
           "content": [{"type": "binary", "media_type": "image/png", "data": data}]}
    out = omit_binary(msg)
    assert out["content"] == [{"type": "binary", "media_type": "image/png", "omitted_bytes": 104}]
    assert "data" in msg["content"][0]  # the original is untouched


def test_default_and_clamped_limits():
    items = [(1, {"seq": 1, "type": "message", "role": "user", "content": "x" * 20000})]
    assert page_source(items, budget=100000).limit == 4096
    assert len(page_source(items, budget=100000).source_text) == 4096
    assert len(page_source(items, limit=100000, budget=100000).source_text) == MAX_LIMIT


def test_escaping_shrinks_page():
    items = [(1, {"seq": 1, "type": "message", "role": "user", "content": "\\" * 9000})]
    doc, page = page_document(META, items, limit=8192)
    assert page.chars < 8192
    assert max(printed_sizes(doc)) <= MAX_OUTPUT_BYTES


@pytest.mark.parametrize("kw", [{"offset": -1}, {"offset": 10**9}, {"limit": 0}, {"limit": -5}])
def test_bad_offset_or_limit(kw):
    items = [(1, {"seq": 1, "type": "message", "role": "user", "content": "x"})]
    with pytest.raises(UsageError):
        page_source(items, budget=1000, **kw)
