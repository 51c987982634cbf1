"""The `redirect` and `directResponse` actions of a VirtualService HTTP route."""

from __future__ import annotations

import base64
import binascii

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.virtual_service import HTTPDirectResponse, HTTPRedirect

__all__ = ["apply_direct_response", "apply_redirect"]

_CODES = {
    0: rc.RedirectAction.MOVED_PERMANENTLY,
    301: rc.RedirectAction.MOVED_PERMANENTLY,
    302: rc.RedirectAction.FOUND,
    303: rc.RedirectAction.SEE_OTHER,
    307: rc.RedirectAction.TEMPORARY_REDIRECT,
    308: rc.RedirectAction.PERMANENT_REDIRECT,
}


def apply_redirect(out: rc.Route, redirect: HTTPRedirect, port: int, is_tls: bool) -> bool:
    """False for a redirect code Envoy cannot express (Istio then leaves the route without
    an action, which Envoy rejects, so the caller drops the route)."""
    code = _CODES.get(redirect.redirect_code)
    if code is None:
        return False
    action = rc.RedirectAction(
        host_redirect=redirect.authority, path_redirect=redirect.uri, response_code=code
    )
    if redirect.scheme:
        action.scheme_redirect = redirect.scheme
    if redirect.port or redirect.derive_port:
        if redirect.port:
            action.port_redirect = redirect.port
        elif redirect.derive_port == "FROM_REQUEST_PORT":
            # Envoy cannot derive the port, but routes are built per listener port.
            action.port_redirect = port
        scheme = redirect.scheme or ("https" if is_tls else "http")
        # No explicit :80 for http or :443 for https.
        if (action.port_redirect, scheme) in ((80, "http"), (443, "https")):
            action.port_redirect = 0
    out.redirect.CopyFrom(action)
    return True


def apply_direct_response(out: rc.Route, response: HTTPDirectResponse) -> None:
    action = rc.DirectResponseAction(status=response.status)
    body = response.body
    if body is not None and body.string is not None:
        action.body.CopyFrom(base_pb2.DataSource(inline_string=body.string))
    elif body is not None and body.bytes is not None:
        # `bytes` is base64 in YAML/JSON, as protobuf JSON writes bytes fields.
        try:
            raw = base64.b64decode(body.bytes, validate=True)
        except binascii.Error:
            raw = body.bytes.encode()
        action.body.CopyFrom(base_pb2.DataSource(inline_bytes=raw))
    out.direct_response.CopyFrom(action)
