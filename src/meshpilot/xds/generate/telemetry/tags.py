"""Span tags: the ones Istio adds to every span (canonical service and revision, mesh,
namespace, cluster; the dry-run authorization results) and the user's custom tags
(literal, environment variable, request header)."""

from __future__ import annotations

from typing import TypeAlias

from envoy.type.metadata.v3 import metadata_pb2
from envoy.type.tracing.v3 import custom_tag_pb2

from meshpilot.config.istio.telemetry import CustomTag
from meshpilot.config.mesh_telemetry import MeshCustomTag
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext

__all__ = ["istio_tags", "user_tag"]

_Tag: TypeAlias = custom_tag_pb2.CustomTag
RBAC_FILTER = "envoy.filters.http.rbac"
# Istio's Kubernetes cluster id when none is configured.
DEFAULT_CLUSTER_ID = "Kubernetes"


def _literal(tag: str, value: str) -> _Tag:
    return _Tag(tag=tag, literal=_Tag.Literal(value=value))


def _dry_run(tag: str, key: str) -> _Tag:
    return _Tag(
        tag=tag,
        metadata=_Tag.Metadata(
            kind=metadata_pb2.MetadataKind(request=metadata_pb2.MetadataKind.Request()),
            metadata_key=metadata_pb2.MetadataKey(
                key=RBAC_FILTER, path=[metadata_pb2.MetadataKey.PathSegment(key=key)]
            ),
        ),
    )


def istio_tags(push: PushContext, proxy: Proxy) -> list[_Tag]:
    labels = proxy.labels
    return [
        _literal(
            "istio.canonical_revision", labels.get("service.istio.io/canonical-revision", "latest")
        ),
        _literal(
            "istio.canonical_service", labels.get("service.istio.io/canonical-name", "unknown")
        ),
        _literal("istio.mesh_id", push.mesh.trust_domain or "unknown"),
        _literal("istio.namespace", proxy.namespace or "default"),
        _literal("istio.cluster_id", DEFAULT_CLUSTER_ID),
        _dry_run(
            "istio.authorization.dry_run.allow_policy.name",
            "istio_dry_run_allow_shadow_effective_policy_id",
        ),
        _dry_run(
            "istio.authorization.dry_run.allow_policy.result",
            "istio_dry_run_allow_shadow_engine_result",
        ),
        _dry_run(
            "istio.authorization.dry_run.deny_policy.name",
            "istio_dry_run_deny_shadow_effective_policy_id",
        ),
        _dry_run(
            "istio.authorization.dry_run.deny_policy.result",
            "istio_dry_run_deny_shadow_engine_result",
        ),
    ]


def user_tag(name: str, tag: CustomTag | MeshCustomTag) -> _Tag | None:
    """None for a tag that sets no kind (Istio skips it too)."""
    if tag.literal is not None:
        return _literal(name, tag.literal.value)
    if tag.environment is not None:
        return _Tag(
            tag=name,
            environment=_Tag.Environment(
                name=tag.environment.name, default_value=tag.environment.default_value
            ),
        )
    header = tag.header
    if header is None:
        return None
    return _Tag(
        tag=name,
        request_header=_Tag.Header(name=header.name, default_value=header.default_value),
    )
