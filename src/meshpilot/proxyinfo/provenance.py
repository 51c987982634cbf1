"""Which Istio object made a resource: the `istio` filter metadata's `config` path
(`/apis/networking.istio.io/<version>/namespaces/<ns>/<kind>/<name>`) as `<name>.<ns>`,
istioctl's DESTINATION RULE and VIRTUAL SERVICE columns."""

from __future__ import annotations

from meshpilot.proxyinfo.fields import JsonObject, text

__all__ = ["config_owner"]

_PREFIX = "/apis/networking.istio.io/"


def config_owner(metadata: JsonObject) -> str:
    path = text(metadata, "filter_metadata", "istio", "config")
    if not path:
        return ""
    if not path.startswith(_PREFIX):
        return "<unknown>"
    pieces = path.split("/")
    if len(pieces) != 8 or pieces[4] != "namespaces":
        return ""
    return f"{pieces[7]}.{pieces[5]}"
