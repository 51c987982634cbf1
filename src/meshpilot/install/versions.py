"""The Istio version of an installation and istioctl's upgrade rule: a revision-based
(canary) upgrade may move at most two minor versions (spec lifecycle §6.6)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshpilot.install.spec import IstioOperator
from meshpilot.istio_version import ISTIO_VERSION

__all__ = ["MAX_MINOR_SKEW", "Skew", "installed_version", "minor_skew", "parse_version"]

MAX_MINOR_SKEW = 2
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def installed_version(operator: IstioOperator) -> str:
    """The version an IstioOperator installs: its image tag when that is a version (the
    seed's `tag: 1.15.4`), else the Istio version meshpilot speaks."""
    global_values = operator.spec.values.global_
    tag = str(operator.spec.tag or (global_values.tag if global_values else "") or "")
    return tag if parse_version(tag) is not None else ISTIO_VERSION


@dataclass(frozen=True, slots=True)
class Skew:
    old: str
    new: str
    minors: int  # signed: new minor - old minor (same major), or 99 across majors

    @property
    def too_far(self) -> bool:
        return abs(self.minors) > MAX_MINOR_SKEW


def minor_skew(old: str, new: str) -> Skew | None:
    """The move from `old` to `new`; None when either is not a version or they are equal."""
    a, b = parse_version(old), parse_version(new)
    if a is None or b is None or a == b:
        return None
    minors = b[1] - a[1] if a[0] == b[0] else 99 * (1 if b > a else -1)
    return Skew(old, new, minors)
