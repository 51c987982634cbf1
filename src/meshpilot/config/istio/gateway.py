"""Gateway: the servers (ports, hosts, TLS) of an ingress or egress gateway."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel

__all__ = ["Gateway", "GatewaySpec", "Server", "ServerPort", "ServerTLSSettings"]


class ServerPort(ApiModel):
    number: int
    protocol: str
    name: str = ""
    target_port: int = 0


class ServerTLSSettings(ApiModel):
    https_redirect: bool = False
    mode: str = "PASSTHROUGH"
    server_certificate: str = ""
    private_key: str = ""
    ca_certificates: str = ""
    ca_crl: str = ""
    credential_name: str = ""
    credential_names: list[str] = Field(default_factory=list)
    subject_alt_names: list[str] = Field(default_factory=list)
    verify_certificate_spki: list[str] = Field(default_factory=list)
    verify_certificate_hash: list[str] = Field(default_factory=list)
    min_protocol_version: str = ""
    max_protocol_version: str = ""
    cipher_suites: list[str] = Field(default_factory=list)


class Server(ApiModel):
    port: ServerPort
    bind: str = ""
    hosts: list[str]
    tls: ServerTLSSettings | None = None
    default_endpoint: str = ""
    name: str = ""


class GatewaySpec(ApiModel):
    servers: list[Server]
    selector: dict[str, str] = Field(default_factory=dict)


class Gateway(TopLevel):
    spec: GatewaySpec
