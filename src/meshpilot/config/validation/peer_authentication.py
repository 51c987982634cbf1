"""PeerAuthentication: selector, mode values, portLevelMtls (Istio's ValidatePeerAuthentication)."""

from __future__ import annotations

from meshpilot.config.istio.peer_authentication import MtlsMode, MutualTls, PeerAuthentication
from meshpilot.config.validation.common import Path, Problems, check_enum, check_selector

__all__ = ["validate_peer_authentication"]

SPEC: Path = ("spec",)
_MODES = tuple(m.value for m in MtlsMode)


def validate_peer_authentication(pa: PeerAuthentication, p: Problems) -> None:
    spec = pa.spec
    if spec.mtls is not None:
        _check_mode(p, (*SPEC, "mtls", "mode"), spec.mtls)
    levels = spec.port_level_mtls
    if levels is not None:
        where = (*SPEC, "portLevelMtls")
        if not spec.has_selector and levels:
            p.error(where, "mesh/namespace peer authentication cannot have port level mTLS")
        if not levels:
            p.error(where, "port level mTLS, if defined, must have at least one element")
        for port, mtls in levels.items():
            if not 1 <= port <= 65535:
                p.error((*where, port), "port must be in range 1..65535")
            _check_mode(p, (*where, port, "mode"), mtls)
    if spec.selector is not None:
        check_selector(
            p, (*SPEC, "selector", "matchLabels"), spec.selector.match_labels, "PeerAuthentication"
        )


def _check_mode(p: Problems, path: Path, mtls: MutualTls) -> None:
    check_enum(p, path, mtls.mode, _MODES)
