"""Plain scalars typed as kubectl types them, not as YAML 1.1 does.

kubectl, Helm and the API server read YAML with sigs.k8s.io/yaml (go-yaml v2), whose resolver
knows no sexagesimal numbers: `10:20` or an all-digit IPv6 address such as `1:2:3:4:5:6:7:8`
stays a string, where PyYAML's resolver makes it the integer 620 or 2895057742028. It also reads
`1e3`, `+.5`, `0o17` and `08` as numbers, as Go's strconv does. kubectl's `y`/`n` booleans
are kept as strings when read (see read_tag) and quoted when written.
`Loader` resolves tags that way and `plain_value` builds the values of those tags.
"""

from __future__ import annotations

import math
import re

import yaml

__all__ = ["KNOWN_TAGS", "Dumper", "Loader", "plain_tag", "plain_value", "read_tag"]

_TAG = "tag:yaml.org,2002:"
_TRUE = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_NULL = ("", "~", "null", "Null", "NULL")
_SINGLE_LETTERS = ("y", "Y", "n", "N")
_SPECIAL_FLOATS = {
    ".inf": math.inf,
    ".Inf": math.inf,
    ".INF": math.inf,
    "+.inf": math.inf,
    "+.Inf": math.inf,
    "+.INF": math.inf,
    "-.inf": -math.inf,
    "-.Inf": -math.inf,
    "-.INF": -math.inf,
    ".nan": math.nan,
    ".NaN": math.nan,
    ".NAN": math.nan,
}
# strconv.ParseInt(s, 0, 64) after go-yaml drops every `_`: a base prefix, or a leading 0 for octal
_INT = re.compile(r"[-+]?(?:0[bB][01]+|0[oO][0-7]+|0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")  # yamlStyleFloat
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
    r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?"
)
_INT64 = 2**63


def plain_tag(value: str) -> str:
    """The tag go-yaml v2 gives `value` written as a plain scalar (writers quote by it)."""
    return _resolve_plain(value) or f"{_TAG}str"


def read_tag(value: str) -> str:
    """The tag our readers give a plain scalar: go-yaml's, except that `y`/`n` stay strings
    (a label value `y` is kept; a boolean field still reads "y" as true, as kubectl does)."""
    return f"{_TAG}str" if value in _SINGLE_LETTERS else plain_tag(value)


def _resolve_plain(value: str) -> str | None:
    if value in _TRUE or value in _FALSE:
        return f"{_TAG}bool"
    if value in _NULL:
        return f"{_TAG}null"
    if value == "<<":
        return f"{_TAG}merge"
    if value in _SPECIAL_FLOATS:
        return f"{_TAG}float"
    if _TIMESTAMP.fullmatch(value):
        return f"{_TAG}timestamp"
    plain = value.replace("_", "")
    # past 64 bits ParseInt and ParseUint fail, and ParseFloat fails on what overflows to infinity
    if len(plain) < 70 and _INT.fullmatch(plain) and -_INT64 <= _int(plain) < 2 * _INT64:
        return f"{_TAG}int"
    if len(plain) < 400 and _FLOAT.fullmatch(plain) and math.isfinite(float(plain)):
        return f"{_TAG}float"
    return None


def _int(plain: str) -> int:
    sign = -1 if plain.startswith("-") else 1
    digits = plain.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return sign * int(digits, 8)
    return sign * int(digits, 0)


def plain_value(tag: str, value: str) -> int | float | bool | None:
    """The value of a scalar of an int, float, bool or null tag, as go-yaml v2 reads it;
    ValueError when the text is not one (`!!int abc`)."""
    name = tag.removeprefix(_TAG)
    if name == "bool" and (value in _TRUE or value in _FALSE):
        return value in _TRUE
    if name == "null" and value in _NULL:
        return None
    if name == "float" and value in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[value]
    plain = value.replace("_", "")
    if name in ("int", "float") and _INT.fullmatch(plain):
        number = _int(plain)
        return float(number) if name == "float" else number
    if name in ("int", "float") and _FLOAT.fullmatch(plain):
        return float(plain)
    raise ValueError(value)


KNOWN_TAGS = frozenset(f"{_TAG}{name}" for name in ("bool", "null", "int", "float"))


class Loader(yaml.CSafeLoader):
    """libyaml's parser with go-yaml v2's implicit tags (see the module docstring)."""

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return read_tag(value)
        return str(super().resolve(kind, value, implicit))  # type: ignore[no-untyped-call]


class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Writes a string plain only when both go-yaml v2 and PyYAML read it back as a string."""

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        tag = str(super().resolve(kind, value, implicit))
        if kind is yaml.ScalarNode and implicit[0] and tag == f"{_TAG}str":
            return plain_tag(value)
        return tag
