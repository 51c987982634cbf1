"""PeerAuthentication (security.istio.io): which mutual TLS a workload's sidecar accepts.

`mtls.mode` applies to every port; `portLevelMtls` overrides it per workload (target) port
and needs a selector. UNSET (or no `mtls`) inherits from the level above: workload policy
from namespace policy, namespace policy from the mesh policy in the root namespace, which
defaults to PERMISSIVE.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.common import WorkloadSelector

__all__ = ["MtlsMode", "MutualTls", "PeerAuthentication", "PeerAuthenticationSpec"]


class MtlsMode(StrEnum):
    UNSET = "UNSET"
    DISABLE = "DISABLE"
    PERMISSIVE = "PERMISSIVE"
    STRICT = "STRICT"


class MutualTls(ApiModel):
    # A plain string: an unknown mode is reported by validation with the field's path.
    mode: str = MtlsMode.UNSET.value

    @property
    def is_unset(self) -> bool:
        return self.mode in ("", MtlsMode.UNSET)


class PeerAuthenticationSpec(ApiModel):
    selector: WorkloadSelector | None = None
    mtls: MutualTls | None = None
    # Keys are workload ports; YAML gives them as ints or strings, both accepted.
    port_level_mtls: dict[int, MutualTls] | None = None

    @property
    def has_selector(self) -> bool:
        return self.selector is not None and bool(self.selector.match_labels)

    @property
    def is_unset(self) -> bool:
        return self.mtls is None or self.mtls.is_unset


class PeerAuthentication(TopLevel):
    spec: PeerAuthenticationSpec = Field(default_factory=PeerAuthenticationSpec)
