"""Host and gateway references: `namespace/host` entries of Gateway servers and Sidecar egress
listeners (Istio's agent.ValidateNamespaceSlashWildcardHostname) and gateway names in
VirtualServices (validateGatewayNames)."""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.config.validation.common import (
    Path,
    Problems,
    fqdn_error,
    is_dns1123_label,
    is_ip,
    partial_wildcard_error,
    quoted,
    wildcard_domain_error,
)

__all__ = ["check_gateway_names", "namespaced_host_errors"]


def namespaced_host_errors(host: str, *, gateway: bool) -> list[str]:
    """Gateways accept `host`, `ns/host`, `./host`, `*/host`; Sidecars need the `ns/` part and
    also accept `~/host`. The host part must be an FQDN or a leading-wildcard name."""
    namespace, slash, name = host.partition("/")
    if not slash:
        if gateway:
            return _host_part_errors(host, gateway=True)
        return [
            (
                f"host {quoted(host)} must be of form "
                f"namespace/dnsName, such as './{host}' or '*/{host}'"
            )
        ]
    errors = []
    if not namespace or not name:
        errors.append("namespace and dnsName in host entry cannot be empty")
    allowed = ("*", ".") if gateway else ("*", ".", "~")
    if namespace and namespace not in allowed and not is_dns1123_label(namespace):
        what = "gateway" if gateway else "sidecar"
        errors.append(f"invalid namespace value {quoted(namespace)} in {what}")
    if name:
        errors.extend(_host_part_errors(name, gateway=gateway))
    return errors


def _host_part_errors(name: str, *, gateway: bool) -> list[str]:
    errors = []
    if name != "*" and "." not in name:
        errors.append(f"short names (non FQDN) are not allowed: {quoted(name)}")
    err = wildcard_domain_error(name)
    if err is not None and not (gateway and is_ip(name)):
        errors.append(err)
    if (partial := partial_wildcard_error(name)) is not None:
        errors.append(partial)
    return errors


def check_gateway_names(p: Problems, path: Path, names: Sequence[str]) -> None:
    """Gateway references: `mesh`, `name`, `namespace/name` (or legacy `name.namespace`)."""
    for index, name in enumerate(names):
        where = (*path, index)
        namespace, slash, short = name.partition("/")
        if not slash:
            if "." in name:
                first, _, rest = name.partition(".")
                p.warning(
                    where,
                    f"using legacy gateway name format {quoted(name)}; prefer <namespace>/<name>: "
                    f"{rest.split('.')[0]}/{first}",
                )
            p.add(where, fqdn_error(name))
            continue
        if not namespace or not short:
            p.error(where, "namespace and gateway name cannot be empty")
            continue
        if not is_dns1123_label(namespace):
            p.error(where, f"invalid namespace {quoted(namespace)} in gateway reference")
        if not is_dns1123_label(short):
            p.error(where, f"invalid gateway name {quoted(short)}")
