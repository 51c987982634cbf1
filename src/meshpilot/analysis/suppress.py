"""Istio's two ways to silence an analyzer message: `--suppress CODE=RESOURCE` and the
`galley.istio.io/analyze-suppress` annotation on the resource.

RESOURCE is `Kind name` for cluster-scoped kinds and `Kind name.namespace` otherwise, and
may hold `*` wildcards (`--suppress "IST0107=Pod *.baz"`), as istioctl takes it. The
annotation lists codes separated by commas; `*` silences every code on that resource.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError

__all__ = [
    "SUPPRESS_ANNOTATION",
    "Suppression",
    "SuppressionError",
    "parse_suppression",
    "resource_name",
    "unsuppressed",
]

SUPPRESS_ANNOTATION = "galley.istio.io/analyze-suppress"


class SuppressionError(MeshpilotError):
    """A --suppress value that is not CODE=RESOURCE."""


@dataclass(frozen=True, slots=True)
class Suppression:
    code: str
    resource: str  # a glob over "Kind name" or "Kind name.namespace"

    def matches(self, diag: Diagnostic) -> bool:
        return diag.code == self.code and fnmatch.fnmatchcase(resource_name(diag), self.resource)


def parse_suppression(text: str) -> Suppression:
    code, sep, resource = text.partition("=")
    code, resource = code.strip(), " ".join(resource.split())
    if not sep or not code or len(resource.split(" ")) != 2:
        raise SuppressionError(
            f"--suppress {text!r}: expected CODE=KIND NAME[.NAMESPACE], "
            'e.g. "IST0102=Namespace foo" or "IST0107=Pod *.baz"'
        )
    return Suppression(code, resource)


def resource_name(diag: Diagnostic) -> str:
    """istioctl's name of the resource a message is about: `Kind name[.namespace]`."""
    name = f"{diag.name}.{diag.namespace}" if diag.namespace else diag.name
    return f"{diag.kind} {name}"


def unsuppressed(
    diagnostics: Iterable[Diagnostic],
    suppressions: Iterable[Suppression],
    objects: Iterable[ConfigObject[Any]],
) -> list[Diagnostic]:
    """The diagnostics neither a --suppress value nor the resource's annotation silences."""
    rules = list(suppressions)
    annotated = _annotated_codes(objects)
    out = []
    for diag in diagnostics:
        if diag.code and any(rule.matches(diag) for rule in rules):
            continue
        codes = annotated.get((diag.kind, diag.namespace, diag.name), frozenset())
        if diag.code and (diag.code in codes or "*" in codes):
            continue
        out.append(diag)
    return out


def _annotated_codes(
    objects: Iterable[ConfigObject[Any]],
) -> Mapping[tuple[str, str, str], frozenset[str]]:
    out = {}
    for obj in objects:
        value = obj.model.metadata.annotations.get(SUPPRESS_ANNOTATION)
        if value:
            key: ConfigKey = obj.key
            codes = frozenset(code.strip() for code in value.split(",") if code.strip())
            out[(str(key.kind), key.namespace, key.name)] = codes
    return out
