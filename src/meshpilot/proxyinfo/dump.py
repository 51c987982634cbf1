"""Envoy's `/config_dump` (and the control plane's `/debug/config_dump`, same shape): the
resources of each section, as istioctl collects them (dynamic ones first, then static)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshpilot.errors import MeshpilotError
from meshpilot.proxyinfo.fields import JsonObject, obj, objs, text

__all__ = ["ConfigDump", "ConfigDumpError", "DumpedSecret"]


class ConfigDumpError(MeshpilotError):
    """The JSON is not a config dump (no `configs` list)."""


@dataclass(frozen=True, slots=True)
class DumpedSecret:
    name: str
    status: str  # ACTIVE, WARMING or UNINITIALIZED, as istioctl says
    secret: JsonObject  # the envoy.extensions.transport_sockets.tls.v3.Secret


@dataclass(frozen=True, slots=True)
class ConfigDump:
    raw: JsonObject

    @classmethod
    def parse(cls, data: Any, origin: str) -> ConfigDump:
        if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
            raise ConfigDumpError(f"{origin} is not an Envoy config dump (no 'configs' list)")
        return cls(data)

    def section(self, name: str) -> JsonObject:
        """The config of that admin type, e.g. "ClustersConfigDump", or {}."""
        for config in objs(self.raw, "configs"):
            if text(config, "@type").rsplit(".", 1)[-1] == name:
                return config
        return {}

    @property
    def node_id(self) -> str:
        return text(self.section("BootstrapConfigDump"), "bootstrap", "node", "id")

    def clusters(self) -> list[JsonObject]:
        dump = self.section("ClustersConfigDump")
        entries = objs(dump, "dynamic_active_clusters") + objs(dump, "static_clusters")
        return [c for entry in entries if (c := obj(entry, "cluster"))]

    def listeners(self) -> list[JsonObject]:
        dump = self.section("ListenersConfigDump")
        dynamic = [
            obj(entry, "active_state", "listener") for entry in objs(dump, "dynamic_listeners")
        ]
        static = [obj(entry, "listener") for entry in objs(dump, "static_listeners")]
        return [lst for lst in dynamic + static if lst]

    def routes(self) -> list[JsonObject]:
        """RDS route configurations, then those inline in static listeners (no name)."""
        dump = self.section("RoutesConfigDump")
        entries = objs(dump, "dynamic_route_configs") + objs(dump, "static_route_configs")
        return [r for entry in entries if (r := obj(entry, "route_config"))]

    def endpoints(self) -> list[JsonObject]:
        dump = self.section("EndpointsConfigDump")
        entries = objs(dump, "dynamic_endpoint_configs") + objs(dump, "static_endpoint_configs")
        return [e for entry in entries if (e := obj(entry, "endpoint_config"))]

    def secrets(self) -> list[DumpedSecret]:
        dump = self.section("SecretsConfigDump")
        found = []
        for key, status in (
            ("dynamic_warming_secrets", "WARMING"),
            ("dynamic_active_secrets", "ACTIVE"),
        ):
            for entry in objs(dump, key):
                secret = obj(entry, "secret")
                # istioctl's word for an active secret SDS never filled
                uninitialized = text(entry, "version_info") == "uninitialized"
                state = "UNINITIALIZED" if status == "ACTIVE" and uninitialized else status
                name = text(entry, "name") or text(secret, "name")
                found.append(DumpedSecret(name, state, secret))
        return found
