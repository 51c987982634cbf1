"""HTTP header names and values, and string matches (VirtualService matches and header ops).

Follows Istio's ValidateHTTPHeaderName*, ValidateHTTPHeaderValue (a port of Envoy's
header_parser.cc: `%VAR%` / `%VAR(args)%` substitutions, `%%` for a literal percent sign)
and validateStringMatch.
"""

from __future__ import annotations

import re

from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import HeaderOperations, Headers
from meshpilot.config.validation.common import Path, Problems, quoted
from meshpilot.config.validation.re2 import regex_error

__all__ = [
    "check_header_name",
    "check_headers",
    "check_string_match",
    "header_value_error",
    "is_header_name",
    "is_jwt_claim",
]

_HEADER_NAME = re.compile(r"^[-_A-Za-z0-9]+$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_JWT_CLAIM = re.compile(r"^@request\.auth\.claims(?:\.[^.\[\]]+|(?:\[[^\[\]]+\])+)$")


def is_header_name(name: str) -> bool:
    return _HEADER_NAME.match(name) is not None


def is_jwt_claim(name: str) -> bool:
    """`@request.auth.claims.<name>` or `@request.auth.claims[<a>][<b>]` (gateway routing)."""
    return _JWT_CLAIM.match(name) is not None


def check_header_name(p: Problems, path: Path, name: str, *, allow_claims: bool = False) -> None:
    """A header to match on: letters, digits, '-' and '_' (lower case per the Istio API)."""
    if name == "":
        p.error(path, "header name cannot be empty")
    elif allow_claims and is_jwt_claim(name):
        return
    elif not _HEADER_NAME.match(name):
        p.error(path, f"header name {quoted(name)} is not a valid header name")
    elif name != name.lower():
        p.warning(
            path, f"header name {quoted(name)} should be lower case, as the Istio API requires"
        )


def check_string_match(
    p: Problems, path: Path, match: StringMatch | None, *, allow_empty_prefix: bool = False
) -> None:
    if match is None:
        return
    if match.prefix == "" and not allow_empty_prefix:
        p.error((*path, "prefix"), "prefix string match should not be empty")
    if match.regex is not None:
        if match.regex == "":
            p.error((*path, "regex"), "regex string match should not be empty")
        else:
            p.add((*path, "regex"), regex_error(match.regex))


def header_value_error(value: str) -> str | None:
    """Envoy's rules for a header value with `%...%` substitutions."""
    if _CONTROL.search(value):
        return f"header value {quoted(value)} contains control characters"
    pos, length = 0, len(value)
    while pos < length:
        if value[pos] != "%":
            pos += 1
            continue
        if value.startswith("%%", pos):
            pos += 2
            continue
        end = _variable_end(value, pos + 1)
        if end < 0:
            return (
                f"invalid header value {quoted(value)}: unterminated variable expression "
                "(write '%%' for a literal percent sign)"
            )
        pos = end + 1
    return None


def _variable_end(value: str, start: int) -> int:
    """The index of the `%` closing `%VAR%` or `%VAR(args)%` that starts at `start`, or -1."""
    index, length = start, len(value)
    while index < length and value[index] not in "%(":
        index += 1
    if index >= length or value[index] == "%":
        return index if index < length else -1
    quoted = False
    index += 1
    while index < length and (quoted or value[index] != ")"):
        if quoted and value[index] == "\\":
            index += 1  # skip the escaped character
        elif value[index] == '"':
            quoted = not quoted
        index += 1
    index += 1  # past ")"
    while index < length and value[index] == " ":
        index += 1
    return index if index < length and value[index] == "%" else -1


def check_headers(p: Problems, path: Path, headers: Headers | None) -> None:
    """Header manipulation: request add/set may set :authority/host; nothing removes them."""
    if headers is None:
        return
    if headers.request is not None:
        _check_ops(p, (*path, "request"), headers.request, request=True)
    if headers.response is not None:
        _check_ops(p, (*path, "response"), headers.response, request=False)


def _check_ops(p: Problems, path: Path, ops: HeaderOperations, *, request: bool) -> None:
    for op in ("set", "add"):
        for name, value in getattr(ops, op).items():
            field = (*path, op, name)
            p.add(field, _op_name_error(name, allow_authority=request))
            p.add(field, header_value_error(value))
    for index, name in enumerate(ops.remove):
        p.add((*path, "remove", index), _op_name_error(name, allow_authority=False))


def _op_name_error(name: str, *, allow_authority: bool) -> str | None:
    if name == "":
        return "header name cannot be empty"
    authority = name.lower() in (":authority", "host")
    if authority and allow_authority:
        return None
    if name.lower() == "host":
        return f"invalid header {quoted(name)}: cannot set Host header"
    if name.startswith(":"):
        return f"invalid header {quoted(name)}: header cannot have ':' prefix"
    return None
