"""Types shared by several Istio kinds."""

from __future__ import annotations

from pydantic import Field, model_validator

from meshpilot.config.base import ApiModel

__all__ = ["NetworkingWorkloadSelector", "PortSelector", "StringMatch", "WorkloadSelector"]


class StringMatch(ApiModel):
    """Exactly one of exact, prefix or regex (RE2 syntax)."""

    exact: str | None = None
    prefix: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> StringMatch:
        if sum(v is not None for v in (self.exact, self.prefix, self.regex)) > 1:
            raise ValueError("only one of exact, prefix or regex may be set")
        return self


class PortSelector(ApiModel):
    number: int = 0


class WorkloadSelector(ApiModel):
    """istio.type.v1beta1.WorkloadSelector (DestinationRule, security kinds): `matchLabels`."""

    match_labels: dict[str, str] = Field(default_factory=dict)


class NetworkingWorkloadSelector(ApiModel):
    """networking.v1 WorkloadSelector (ServiceEntry, Sidecar): `labels`."""

    labels: dict[str, str] = Field(default_factory=dict)
