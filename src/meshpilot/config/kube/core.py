"""Namespace, ServiceAccount, ConfigMap and Secret."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel

__all__ = ["REDACTED", "ConfigMap", "Namespace", "Secret", "ServiceAccount"]

REDACTED = "[redacted]"


class NamespaceSpec(ApiModel):
    finalizers: list[str] = Field(default_factory=list)


class Namespace(TopLevel):
    spec: NamespaceSpec = NamespaceSpec()
    status: dict[str, Any] = Field(default_factory=dict)


class ServiceAccount(TopLevel):
    secrets: list[dict[str, Any]] = Field(default_factory=list)
    image_pull_secrets: list[dict[str, Any]] = Field(default_factory=list)
    automount_service_account_token: bool | None = None


class ConfigMap(TopLevel):
    data: dict[str, str] = Field(default_factory=dict)
    binary_data: dict[str, str] = Field(default_factory=dict)
    immutable: bool | None = None


class Secret(TopLevel):
    type: str = "Opaque"
    data: dict[str, str] = Field(default_factory=dict)
    string_data: dict[str, str] = Field(default_factory=dict)
    immutable: bool | None = None

    def public_dump(self) -> dict[str, Any]:
        """The object as JSON for debug pages: keys kept, every value replaced."""
        dump = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        for field_name in ("data", "stringData"):
            if field_name in dump:
                dump[field_name] = dict.fromkeys(dump[field_name], REDACTED)
        return dump

    def __repr__(self) -> str:  # secret values never reach a log line through repr
        return f"Secret({self.metadata.namespace}/{self.metadata.name}, type={self.type})"

    __str__ = __repr__
