"""VirtualService rules that never apply (IST0130) and matches that repeat an earlier one
(IST0131, Info), in http, tcp and tls routes: Istio finds these while validating a
VirtualService (validation's analyzeUnreachable*Rules) and istioctl reports them by code."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_virtual_service_rules"]


def check_virtual_service_rules(push: PushContext) -> Iterator[Diagnostic]:
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        spec = vs.model.spec
        for field, routes in (("http", spec.http), ("tcp", spec.tcp), ("tls", spec.tls)):
            yield from _unreachable(vs, field, routes)


def _unreachable(vs: ConfigObject[Any], field: str, routes: Sequence[Any]) -> Iterator[Diagnostic]:
    seen: dict[str, int] = {}  # a match (without its name) -> the first rule holding it
    matchless = False
    for index, route in enumerate(routes):
        path = ("spec", field, index)
        if not route.match:
            if matchless:
                yield _rule_not_used(
                    vs, path, _rule(routes, index), "only the last rule can have no matches"
                )
            matchless = True
            continue
        repeated = 0
        for m_index, match in enumerate(route.match):
            key = json.dumps(match.model_dump(mode="json", exclude={"name"}), sort_keys=True)
            first = seen.get(key)
            if first is None:
                seen[key] = index
                continue
            repeated += 1
            name = getattr(match, "name", "")
            yield finding(
                vs,
                (*path, "match", m_index),
                f"VirtualService rule {_rule(routes, index)} match "
                f"{quoted(name) if name else f'#{m_index}'} is not used (duplicate/overlapping "
                f"match in rule {_rule(routes, first)}).",
                code="IST0131",
            )
        if repeated == len(route.match):
            yield _rule_not_used(vs, path, _rule(routes, index), "all matches used by prior rules")


def _rule(routes: Sequence[Any], index: int) -> str:
    """Istio's name of a rule: its quoted name (http routes have one), else `#index`."""
    name = getattr(routes[index], "name", "")
    return quoted(name) if name else f"#{index}"


def _rule_not_used(
    vs: ConfigObject[Any], path: tuple[str | int, ...], rule: str, reason: str
) -> Diagnostic:
    return finding(vs, path, f"VirtualService rule {rule} not used ({reason}).", code="IST0130")
