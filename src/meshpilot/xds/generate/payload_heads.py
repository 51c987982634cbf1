"""Nested length-delimited fields that end with one variable payload, by its length.

A route's trace decorator (`decorator { operation }`) or its `istio` metadata differ from
route to route only in their innermost string: every tag and length before that string
depends on its length alone. The header is worked out once per length, by wrapping
placeholders of that length, and a field is then header + payload: one lookup and one
concatenation instead of a length_delimited call per level (thousands per cold push).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["PayloadHeads"]


class PayloadHeads:
    """`wrap(payload)` for a `wrap` whose output is some bytes decided by the payload's
    length, followed by the payload itself (nested length-delimited fields, the payload
    innermost and last)."""

    __slots__ = ("_heads", "_wrap")

    def __init__(self, wrap: Callable[[bytes], bytes]) -> None:
        self._wrap = wrap
        self._heads: dict[int, bytes] = {}  # by payload length; lengths are few

    def __call__(self, payload: bytes) -> bytes:
        head = self._heads.get(len(payload))
        if head is None:
            head = self._head(len(payload))
        return head + payload

    def _head(self, n: int) -> bytes:
        zeros, ones = self._wrap(bytes(n)), self._wrap(b"\x01" * n)
        head = zeros[: len(zeros) - n]
        # Two placeholders that differ in every byte: the payload must come last, whole,
        # and nothing before it may depend on its content.
        if not (zeros.endswith(bytes(n)) and ones == head + b"\x01" * n):
            raise ValueError("wrap must end with the payload, its header decided by length")
        self._heads[n] = head
        return head
