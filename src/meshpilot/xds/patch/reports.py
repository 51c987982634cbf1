"""Patches that could not be applied: reported once per push, naming the EnvoyFilter and the
index of the patch, and skipped (the rest of the configuration is served).

The problems of a push are kept in its memo (for /debug and tests) and logged once each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from meshpilot.model.push_context import PushContext

__all__ = ["PatchProblem", "patch_problems", "quiet", "report"]

log = logging.getLogger(__name__)
_MEMO_KEY = "xds.patch.problems"
_QUIET_KEY = "xds.patch.quiet"


@dataclass(frozen=True, slots=True, order=True)
class PatchProblem:
    namespace: str
    name: str
    index: int
    message: str
    location: str = ""

    def __str__(self) -> str:
        where = f" ({self.location})" if self.location else ""
        return (
            f"EnvoyFilter {self.namespace}/{self.name}{where} configPatches[{self.index}] "
            f"skipped: {self.message}"
        )


def patch_problems(push: PushContext) -> list[PatchProblem]:
    """The patches skipped so far in this push, in order."""
    found = push.memo.get(_MEMO_KEY)
    return sorted(found) if isinstance(found, set) else []


def quiet(push: PushContext) -> None:
    """Keep the problems of this push without logging them (`analyze` shows them itself)."""
    push.memo[_QUIET_KEY] = True


def report(push: PushContext, problem: PatchProblem) -> None:
    found = push.memo.setdefault(_MEMO_KEY, set())
    assert isinstance(found, set)
    if problem not in found:
        found.add(problem)
        if not push.memo.get(_QUIET_KEY):
            log.warning("%s", problem)
