"""The request-path page: a source (a pod's sidecar, or a gateway pod) and a URL, explained
over the running control plane as `meshpilot explain --discovery` does: the verdict, each
hop with the objects behind it (file:line, and the GitOps application that manages each),
and Graphviz's diagram of the path."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from meshpilot.errors import MeshpilotError
from meshpilot.explain.live_mesh import explain_live, read_live_mesh, svg_of
from meshpilot.explain.render_dot import render_dot
from meshpilot.explain.request import parse_request
from meshpilot.explain.result import Explanation, ObjectRef

__all__ = ["ExplainForm", "ExplainView", "explain_view"]

# (kind, namespace, name) -> the app page of the Application that manages the object
AppOf = Callable[[str, str, str], str | None]


@dataclass(frozen=True, slots=True)
class ExplainForm:
    source: str = ""  # POD.NAMESPACE
    url: str = ""
    method: str = "GET"
    headers: str = ""  # one `Name: value` a line
    gateway: bool = False

    @classmethod
    def of(cls, query: Mapping[str, list[str]]) -> ExplainForm:
        def one(name: str, default: str = "") -> str:
            return (query.get(name) or [default])[0].strip()

        return cls(one("from"), one("url"), one("method", "GET").upper() or "GET",
                   one("headers"), one("gateway") == "on")  # fmt: skip

    @property
    def asked(self) -> bool:
        return bool(self.source or self.url)


@dataclass(frozen=True, slots=True)
class ObjectLink:
    ref: ObjectRef
    app: str | None  # the managing app's page


@dataclass(frozen=True, slots=True)
class ExplainView:
    form: ExplainForm
    result: Explanation | None = None
    error: str = ""
    objects: dict[int, list[ObjectLink]] = field(default_factory=dict)  # per hop index
    svg_data: str = ""  # data: URL of the diagram ("" when Graphviz is missing)
    svg_error: str = ""


async def explain_view(discovery: str, form: ExplainForm, app_of: AppOf) -> ExplainView:
    if not form.asked:
        return ExplainView(form)
    if not form.source or not form.url:
        return ExplainView(form, error="give both the source pod (POD.NAMESPACE) and the URL")
    try:
        headers = tuple(line for line in form.headers.splitlines() if line.strip())
        request = parse_request(form.url, form.method, headers)
        mesh = await asyncio.to_thread(read_live_mesh, discovery)
        result = await asyncio.to_thread(explain_live, mesh, form.source, request, form.gateway)
    except MeshpilotError as exc:  # ExplainError, the control plane unreachable
        return ExplainView(form, error=str(exc))
    objects = {
        i: [ObjectLink(o, app_of(o.kind, o.namespace, o.name)) for o in hop.objects]
        for i, hop in enumerate(result.hops)
    }
    try:
        svg = await asyncio.to_thread(svg_of, render_dot(result))
    except MeshpilotError as exc:
        return ExplainView(form, result, objects=objects, svg_error=str(exc))
    data = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    return ExplainView(form, result, objects=objects, svg_data=data)
