"""MutatingWebhookConfiguration (admissionregistration.k8s.io/v1): the injector webhooks of
each revision and the revision tags (`istio-revision-tag-<tag>`) live in the store as these."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel

__all__ = [
    "MutatingWebhook",
    "MutatingWebhookConfiguration",
    "ServiceReference",
    "WebhookClientConfig",
]


class ServiceReference(ApiModel):
    name: str
    namespace: str
    path: str | None = None
    port: int = 443


class WebhookClientConfig(ApiModel):
    url: str | None = None
    service: ServiceReference | None = None
    ca_bundle: str = ""


class MutatingWebhook(ApiModel):
    name: str
    client_config: WebhookClientConfig
    rules: list[dict[str, Any]] = Field(default_factory=list)
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    match_policy: Literal["Exact", "Equivalent"] | None = None
    namespace_selector: dict[str, Any] = Field(default_factory=dict)
    object_selector: dict[str, Any] = Field(default_factory=dict)
    side_effects: Literal["None", "NoneOnDryRun", "Some", "Unknown"] = "None"
    timeout_seconds: int | None = Field(default=None, ge=1, le=30)
    admission_review_versions: list[str] = Field(default_factory=list)
    reinvocation_policy: Literal["Never", "IfNeeded"] | None = None
    match_conditions: list[dict[str, Any]] = Field(default_factory=list)


class MutatingWebhookConfiguration(TopLevel):
    webhooks: list[MutatingWebhook] = Field(default_factory=list)
