"""ConfigKey: the identity of an object in the store."""

from __future__ import annotations

from dataclasses import dataclass, field

from meshpilot.config.kinds import Kind

__all__ = ["ConfigKey"]


@dataclass(frozen=True, slots=True, order=True)
class ConfigKey:
    kind: Kind
    namespace: str
    name: str
    # Computed once: keys are hashed by every store, snapshot and index dict, and the
    # generated hash goes through Enum.__hash__ each time.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.kind, self.namespace, self.name)))

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"
