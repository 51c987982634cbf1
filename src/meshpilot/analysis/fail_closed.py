"""Security policies served as their fail-closed stand-in (config/fail_closed.py): which
workloads they hold, so that `analyze` says what the invalid policy is doing to traffic."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from meshpilot.analysis.findings import finding
from meshpilot.analysis.lookup import selector_matches, workloads
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.fail_closed import FAIL_CLOSED, SECURITY_KINDS
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_fail_closed"]

_SHOWN = 5  # workloads named in a finding; the rest are counted


def check_fail_closed(push: PushContext) -> Iterator[Diagnostic]:
    found = workloads(push)
    root = push.mesh.root_namespace
    for kind in sorted(SECURITY_KINDS):
        for obj in cast(Sequence[ConfigObject[Any]], push.of_kind(kind)):
            if not obj.fail_closed:
                continue
            spec = obj.model.spec
            labels = spec.selector.match_labels if spec.selector is not None else {}
            held = sorted(
                f"{w.name}.{w.namespace}"
                for w in found
                if obj.namespace in (root, w.namespace) and selector_matches(labels, w.labels)
            )
            names = ", ".join(held[:_SHOWN]) + (
                f" and {len(held) - _SHOWN} more" if held[_SHOWN:] else ""
            )
            scope = _scope(obj.namespace, bool(labels), root)
            yield finding(
                obj,
                ("spec",),
                f"invalid, no last good version ({obj.fail_closed}): "
                f"{FAIL_CLOSED[kind].replace('the workloads it selects', scope)}; "
                f"{len(held)} workload(s) affected{': ' + names if held else ''}",
                code="MP0004",
            )


def _scope(namespace: str, selects: bool, root: str) -> str:
    if selects:
        return "the workloads it selects"
    return "every workload of the mesh" if namespace == root else f"every workload of {namespace}"
