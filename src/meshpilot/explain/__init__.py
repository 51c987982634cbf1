"""`meshpilot explain`: a request's walk through the Envoy config meshpilot generates, hop by
hop, each hop naming the Istio or Kubernetes object (file, line, field) that produced it.

Pure: no I/O. `build_scene` (build.py) turns a PushContext into what the walk needs;
`explain` (walk.py) walks; render_text, render_svg and `Explanation.to_dict` render.
"""

from __future__ import annotations

from meshpilot.explain.build import build_scene, workload_of
from meshpilot.explain.request import ExplainError, Request, parse_request
from meshpilot.explain.result import SCHEMA, Explanation, Hop, ObjectRef, Outcome
from meshpilot.explain.scene import Scene, Workload
from meshpilot.explain.walk import explain

__all__ = [
    "SCHEMA",
    "ExplainError",
    "Explanation",
    "Hop",
    "ObjectRef",
    "Outcome",
    "Request",
    "Scene",
    "Workload",
    "build_scene",
    "explain",
    "parse_request",
    "workload_of",
]
