"""ConfigKey: the identity of an object in the store."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.config.kinds import Kind

__all__ = ["ConfigKey"]


@dataclass(frozen=True, slots=True, order=True)
class ConfigKey:
    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"
