"""Gateway: servers, their ports, hosts, binds and TLS settings (Istio's ValidateGateway,
validateServer, validateServerPort, validateServerBind, validateTLSOptions)."""

from __future__ import annotations

from meshpilot.config.istio.gateway import Gateway, Server, ServerTLSSettings
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_enum,
    check_port,
    is_dns1123_label,
    is_ip,
    protocol_error,
    quoted,
    unix_address_error,
)
from meshpilot.config.validation.hostnames import namespaced_host_errors
from meshpilot.config.validation.tls_ciphers import check_cipher_suites

__all__ = ["check_server_tls", "validate_gateway"]

SPEC: Path = ("spec",)
SERVER_TLS_MODES = (
    "PASSTHROUGH",
    "SIMPLE",
    "MUTUAL",
    "AUTO_PASSTHROUGH",
    "ISTIO_MUTUAL",
    "OPTIONAL_MUTUAL",
)
TLS_VERSIONS = ("TLS_AUTO", "TLSV1_0", "TLSV1_1", "TLSV1_2", "TLSV1_3")
_TLS_PROTOCOLS = ("https", "tls")
_HTTP_PROTOCOLS = ("http", "http2", "grpc", "grpc-web", "http_proxy")
_UNIX = "unix://"


def validate_gateway(gw: Gateway, p: Problems) -> None:
    if not is_dns1123_label(gw.metadata.name):
        p.error(
            ("metadata", "name"),
            f"invalid gateway name {quoted(gw.metadata.name)}: use a DNS-1123 label (no dots)",
        )
    servers = gw.spec.servers
    if not servers:
        p.error((*SPEC, "servers"), "gateway must have at least one server")
    port_names: dict[str, int] = {}
    for index, server in enumerate(servers):
        where = (*SPEC, "servers", index)
        _check_server(p, where, server)
        name = server.port.name
        if name in port_names:
            p.error(
                (*where, "port", "name"),
                f"port names in servers must be unique: duplicate name {name} "
                f"(also servers[{port_names[name]}])",
            )
        port_names.setdefault(name, index)
        protocol = server.port.protocol.lower()
        if server.tls is not None and server.tls.https_redirect and protocol not in _HTTP_PROTOCOLS:
            p.warning(
                (*where, "tls", "httpsRedirect"),
                "tls.httpsRedirect should only be used with HTTP servers",
            )


def _check_server(p: Problems, path: Path, server: Server) -> None:
    if not server.hosts:
        p.error((*path, "hosts"), "server config must contain at least one host")
    for index, host in enumerate(server.hosts):
        for message in namespaced_host_errors(host, gateway=True):
            p.error((*path, "hosts", index), message)
    port_ok = _check_server_port(p, path, server)
    _check_bind(p, path, server)
    if server.tls is not None:
        check_server_tls(p, (*path, "tls"), server.tls)
    if not port_ok:
        return
    protocol = server.port.protocol.lower()
    if protocol in _TLS_PROTOCOLS and server.tls is None:
        p.error((*path, "tls"), "server must have TLS settings for HTTPS/TLS protocols")
    elif protocol not in _TLS_PROTOCOLS and server.tls is not None:
        tls = server.tls
        passthrough = tls.mode in ("PASSTHROUGH", "AUTO_PASSTHROUGH")
        certs = tls.ca_certificates or tls.private_key or tls.server_certificate
        if protocol not in _HTTP_PROTOCOLS:
            p.error((*path, "tls"), "server cannot have TLS settings for non HTTPS/TLS ports")
        elif not passthrough or certs:
            p.error(
                (*path, "tls"),
                "server cannot have TLS settings for plain text HTTP ports "
                "(only httpsRedirect is allowed)",
            )


def _check_server_port(p: Problems, path: Path, server: Server) -> bool:
    port, where = server.port, (*path, "port")
    before = len(p.items)
    if port.protocol == "" or protocol_error(port.protocol) is not None:
        p.error(
            (*where, "protocol"),
            f"invalid protocol {quoted(port.protocol)}, supported protocols are HTTP, HTTP2, GRPC, "
            "GRPC-WEB, HTTPS, TLS, MONGO, REDIS, MYSQL, TCP",
        )
    if port.number > 0 or not server.bind.startswith(_UNIX):
        check_port(p, (*where, "number"), port.number)
    if port.target_port > 0:
        p.error((*where, "targetPort"), "targetPort has no impact on Gateways")
    if not port.name:
        p.error((*where, "name"), "port name must be set")
    return len(p.items) == before


def _check_bind(p: Problems, path: Path, server: Server) -> None:
    bind = server.bind
    if bind.startswith(_UNIX):
        p.add((*path, "bind"), unix_address_error(bind.removeprefix(_UNIX)))
        if server.port.number != 0:
            p.error((*path, "port", "number"), "port number must be 0 for unix domain socket")
    elif bind and not is_ip(bind):
        p.error((*path, "bind"), f"{bind} is not a valid IP")


def check_server_tls(p: Problems, path: Path, tls: ServerTLSSettings) -> None:
    """Istio's validateTLSOptions (Gateway servers and Sidecar ingress listeners)."""
    check_enum(p, (*path, "mode"), tls.mode, SERVER_TLS_MODES)
    for field, version in (
        ("minProtocolVersion", tls.min_protocol_version),
        ("maxProtocolVersion", tls.max_protocol_version),
    ):
        if version:
            check_enum(p, (*path, field), version, TLS_VERSIONS)
    _check_versions(p, path, tls)
    check_cipher_suites(p, (*path, "cipherSuites"), tls.cipher_suites)
    credential = tls.credential_name or tls.credential_names
    if tls.credential_name and tls.credential_names:
        p.error(path, "only one of credentialName or credentialNames may be set")
    if tls.mode == "ISTIO_MUTUAL":
        for field, value in (
            ("serverCertificate", tls.server_certificate),
            ("privateKey", tls.private_key),
            ("caCertificates", tls.ca_certificates),
            ("credentialName", credential),
        ):
            if value:
                p.error((*path, field), f"ISTIO_MUTUAL TLS cannot have associated {field}")
        return
    if tls.mode in ("PASSTHROUGH", "AUTO_PASSTHROUGH"):
        if (
            tls.ca_crl
            or tls.server_certificate
            or tls.private_key
            or tls.ca_certificates
            or credential
        ):
            p.warning(path, f"{tls.mode} mode does not use certificates, they will be ignored")
        return
    if tls.ca_crl and credential:
        p.error(
            (*path, "caCrl"), "CRL is not supported with credentialName; put it in the credential"
        )
    if tls.ca_crl and tls.mode == "SIMPLE":
        p.error((*path, "caCrl"), "CRL is not supported with SIMPLE TLS")
    if credential:
        return  # certificates come from the credential (a Secret)
    _check_certificate_files(p, path, tls)


def _check_certificate_files(p: Problems, path: Path, tls: ServerTLSSettings) -> None:
    mode = "MUTUAL" if tls.mode == "OPTIONAL_MUTUAL" else tls.mode
    if mode not in ("SIMPLE", "MUTUAL"):
        return
    if not tls.server_certificate:
        p.error(path, f"{mode} TLS requires credentialName or a serverCertificate")
    if not tls.private_key:
        p.error(path, f"{mode} TLS requires credentialName or a privateKey")
    if mode == "MUTUAL" and not tls.ca_certificates:
        p.error(path, "MUTUAL TLS requires credentialName or a client CA bundle (caCertificates)")


def _check_versions(p: Problems, path: Path, tls: ServerTLSSettings) -> None:
    low, high = tls.min_protocol_version, tls.max_protocol_version
    if low in TLS_VERSIONS[1:] and high in TLS_VERSIONS[1:] and low > high:
        p.error(path, f"minProtocolVersion {low} is higher than maxProtocolVersion {high}")
    if low in ("TLSV1_0", "TLSV1_1") and not tls.cipher_suites:
        p.warning(
            (*path, "minProtocolVersion"),
            "TLS versions below TLSV1_2 need compatible cipherSuites: the defaults no longer "
            "include any",
        )
