"""Validation of Istio networking objects: one module per kind, registered here by kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshpilot.config.diagnostics import FieldError
from meshpilot.config.kinds import Kind
from meshpilot.config.validation.authorization_policy import validate_authorization_policy
from meshpilot.config.validation.common import guarded
from meshpilot.config.validation.destination_rule import validate_destination_rule
from meshpilot.config.validation.envoy_filter import validate_envoy_filter
from meshpilot.config.validation.gateway import validate_gateway
from meshpilot.config.validation.peer_authentication import validate_peer_authentication
from meshpilot.config.validation.proxy_config_kind import validate_proxy_config
from meshpilot.config.validation.request_authentication import validate_request_authentication
from meshpilot.config.validation.service_entry import (
    validate_service_entry,
    validate_workload_entry,
)
from meshpilot.config.validation.sidecar import validate_sidecar
from meshpilot.config.validation.telemetry import validate_telemetry
from meshpilot.config.validation.virtual_service import validate_virtual_service
from meshpilot.config.validation.wasm_plugin import validate_wasm_plugin
from meshpilot.config.validation.workload_group import validate_workload_group

__all__ = ["VALIDATORS"]

VALIDATORS: dict[Kind, Callable[[Any], list[FieldError]]] = {
    Kind.VIRTUAL_SERVICE: guarded(validate_virtual_service),
    Kind.DESTINATION_RULE: guarded(validate_destination_rule),
    Kind.GATEWAY: guarded(validate_gateway),
    Kind.SERVICE_ENTRY: guarded(validate_service_entry),
    Kind.WORKLOAD_ENTRY: guarded(validate_workload_entry),
    Kind.SIDECAR: guarded(validate_sidecar),
    Kind.AUTHORIZATION_POLICY: guarded(validate_authorization_policy),
    Kind.REQUEST_AUTHENTICATION: guarded(validate_request_authentication),
    Kind.PEER_AUTHENTICATION: guarded(validate_peer_authentication),
    Kind.ENVOY_FILTER: guarded(validate_envoy_filter),
    Kind.TELEMETRY: guarded(validate_telemetry),
    Kind.WASM_PLUGIN: guarded(validate_wasm_plugin),
    Kind.PROXY_CONFIG: guarded(validate_proxy_config),
    Kind.WORKLOAD_GROUP: guarded(validate_workload_group),
}
