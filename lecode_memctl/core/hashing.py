"""SHA-256 for the small inputs of a short run, without loading OpenSSL.

``hashlib`` loads OpenSSL's libcrypto, which costs about 2 ms (some 10
million instructions) of every start-up that hashes anything: ``memctl show``
hashes a MEMORY.md of a few hundred bytes, ``facts`` a small database and
a few spans of evidence.  CPython's own SHA-256 (the ``_sha256`` module,
which hashlib itself falls back to) loads in a fraction of that but hashes
about 5x slower (some 3.6 ns more per byte here), so it only pays for a
small total: this module hashes with it while a process has hashed less
than :data:`BUILTIN_BUDGET` bytes in all, and with OpenSSL from then on
(and for any single input larger than what is left, after which OpenSSL
hashes everything).  A run that hashes a lot pays at most the budget's
worth of the slower hashing (under 1 ms) before OpenSSL takes over.  The digests are the same either way.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

BUILTIN_BUDGET = 256 << 10   # bytes a process hashes with _sha256 before OpenSSL
_left = BUILTIN_BUDGET


class Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def sha256(data: bytes = b"", *, size: int | None = None) -> Hash:
    """A new SHA-256 hash object (``update``, ``digest``, ``hexdigest``) of
    ``data``; ``size``: the number of bytes it will hash in all, when more
    will be given to ``update`` (a file hashed as it is read).  Once OpenSSL
    is loaded, it hashes everything: its load is paid, and it is the faster."""
    if _openssl is not None:
        return cast(Hash, _openssl(data))   # (the hot path: a digest per cited span)
    return _first_hashes(data, size)


_openssl: Any = None   # hashlib.sha256, once hashlib is loaded


def _first_hashes(data: bytes, size: int | None) -> Hash:
    global _left, _openssl
    n = len(data) if size is None else max(size, len(data))
    if n <= _left:
        try:
            from _sha256 import sha256 as builtin  # type: ignore[import-not-found]  # no stub
        except ImportError:   # a Python built without it: hashlib has OpenSSL's
            _left = 0
        else:
            _left -= n
            return cast(Hash, builtin(data))
    import hashlib

    _openssl = hashlib.sha256
    return cast(Hash, _openssl(data))
