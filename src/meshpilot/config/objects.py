"""ConfigObject: a validated, typed object with its key and where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from meshpilot.config.base import TopLevel
from meshpilot.config.diagnostics import Origin
from meshpilot.config.keys import ConfigKey

__all__ = ["ConfigObject"]

M = TypeVar("M", bound=TopLevel, covariant=True)


@dataclass(frozen=True, slots=True)
class ConfigObject(Generic[M]):
    key: ConfigKey
    model: M
    origin: Origin
    # Set on a stand-in for a security policy that failed validation (config/fail_closed.py):
    # why it is there; the stand-in denies what the policy could have allowed.
    fail_closed: str = ""

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def namespace(self) -> str:
        return self.key.namespace

    @property
    def labels(self) -> dict[str, str]:
        return self.model.metadata.labels

    @property
    def location(self) -> str:
        return f"{self.origin.file}:{self.origin.line}"
