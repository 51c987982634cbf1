"""VirtualService header operations (set/add/remove) -> Envoy header mutations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from envoy.config.core.v3 import base_pb2

from meshpilot.config.istio.virtual_service import Headers

__all__ = ["HeaderOperations", "header_operations"]

_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
_APPEND = base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD


@dataclass(frozen=True, slots=True)
class HeaderOperations:
    request_add: list[base_pb2.HeaderValueOption] = field(default_factory=list)
    response_add: list[base_pb2.HeaderValueOption] = field(default_factory=list)
    request_remove: list[str] = field(default_factory=list)
    response_remove: list[str] = field(default_factory=list)
    authority: str = ""  # a request `host`/`:authority` set or add: becomes a host rewrite


def _is_internal(key: str) -> bool:
    """Pseudo-headers and Host cannot be mutated by Envoy's header options."""
    return key.startswith(":") or key.lower() == "host"


def _is_authority(key: str) -> bool:
    return key.lower() in (":authority", "host")


def _options(
    headers: Mapping[str, str], append: bool
) -> tuple[list[base_pb2.HeaderValueOption], str]:
    authority = ""
    out = []
    for key, value in headers.items():
        if _is_authority(key):
            authority = value
        if _is_internal(key):
            continue
        out.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, value=value),
                append_action=_APPEND if append else _OVERWRITE,
            )
        )
    out.sort(key=lambda o: o.header.key)
    return out, authority


def header_operations(headers: Headers) -> HeaderOperations:
    """Istio's TranslateHeadersOperations: `set` options first, then `add`, each sorted."""
    request, response = headers.request, headers.response
    req_set, set_authority = _options(request.set if request else {}, append=False)
    req_add, add_authority = _options(request.add if request else {}, append=True)
    resp_set, _ = _options(response.set if response else {}, append=False)
    resp_add, _ = _options(response.add if response else {}, append=True)
    return HeaderOperations(
        request_add=req_set + req_add,
        response_add=resp_set + resp_add,
        request_remove=[k for k in (request.remove if request else []) if not _is_internal(k)],
        response_remove=[k for k in (response.remove if response else []) if not _is_internal(k)],
        # `set` wins over `add` when both name the authority.
        authority=set_authority or add_authority,
    )
