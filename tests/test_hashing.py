"""core.hashing: the same SHA-256 as hashlib, without OpenSSL's load for the
small inputs of a short run (see its docstring)."""

from __future__ import annotations

import hashlib

import pytest

from lecode_memctl.core import hashing

from .test_startup import probe


@pytest.fixture
def budget(monkeypatch):
    monkeypatch.setattr(hashing, "_left", hashing.BUILTIN_BUDGET)
    monkeypatch.setattr(hashing, "_openssl", None)


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 4096, hashing.BUILTIN_BUDGET,
                                  hashing.BUILTIN_BUDGET + 1, 3 << 20])
def test_the_digests_are_hashlibs(budget, size):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    h = hashing.sha256(data)
    assert h.hexdigest() == hashlib.sha256(data).hexdigest()
    assert h.digest() == hashlib.sha256(data).digest()


def test_streamed_updates_give_the_same_digest(budget):
    chunks = [b"a" * 1000, b"", b"b" * 70000, b"c"]
    h = hashing.sha256(size=sum(map(len, chunks)))
    for c in chunks:
        h.update(c)
    assert h.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()


def test_the_budget_is_spent_then_openssl_hashes(budget):
    small = hashing.sha256(b"x" * 1000)
    assert type(small).__module__ == "_sha256"
    assert hashing._left == hashing.BUILTIN_BUDGET - 1000
    hashing.sha256(b"y" * (hashing.BUILTIN_BUDGET - 2000))
    assert hashing._left == 1000
    assert type(hashing.sha256(b"z" * 1000)).__module__ == "_sha256"
    assert hashing._left == 0
    assert type(hashing.sha256(b"z")) is type(hashlib.sha256())


def test_an_input_larger_than_what_is_left_loads_openssl_for_good(budget):
    # it spends nothing, and from then on OpenSSL (loaded, and the faster)
    # hashes every input, however small
    big = hashing.sha256(size=hashing.BUILTIN_BUDGET + 1)
    assert type(big) is type(hashlib.sha256())
    assert hashing._left == hashing.BUILTIN_BUDGET
    assert type(hashing.sha256(b"z")) is type(hashlib.sha256())


@pytest.mark.parametrize("args", [["show"], ["facts"], ["context"], ["validate", "-q"]],
                         ids=" ".join)
def test_read_commands_on_a_small_store_do_not_load_openssl(tmp_path, args):
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    (store / "MEMORY.md").write_text("# Memory\n\n- the build uses make\n")
    rc, modules, out = probe(tmp_path, ["--store", str(store), *args])
    assert rc in (0, 1), (args, out)
    assert ("_hashlib" in modules, "hashlib" in modules) == (False, False)
