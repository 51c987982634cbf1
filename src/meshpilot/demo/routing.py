"""The demo's traffic rules (DestinationRules and VirtualServices), one file per service, so
that a test or a user can edit one and watch traffic follow.

reviews: `end-user: jason` goes to v2; everyone else is split 80/20 between v1 and v2
(`reviews_rules(v1_weight=...)` renders other splits).
ratings: header `x-demo-fault: abort` is answered 418 by the sidecar; `x-demo-fault: delay`
waits 1 s; `/slow` times out after 500 ms; `/flaky` is retried (3 attempts on 5xx), unless
`x-demo-retries: off`, which disables retries (Istio retries 503s twice by default).
"""

from __future__ import annotations

from typing import Any

from meshpilot.demo.topology import NAMESPACE

__all__ = [
    "FAULT_DELAY_SECONDS",
    "TIMEOUT_SECONDS",
    "ratings_rules",
    "reviews_rules",
]

NETWORKING = "networking.istio.io/v1"
FAULT_DELAY_SECONDS = 1.0
TIMEOUT_SECONDS = 0.5
FAULT_ABORT_STATUS = 418


def _meta(name: str) -> dict[str, str]:
    return {"name": name, "namespace": NAMESPACE}


def _to(host: str, subset: str = "", weight: int | None = None) -> dict[str, Any]:
    destination: dict[str, Any] = {"host": host}
    if subset:
        destination["subset"] = subset
    route: dict[str, Any] = {"destination": destination}
    if weight is not None:
        route["weight"] = weight
    return route


def reviews_rules(v1_weight: int = 80) -> list[dict[str, Any]]:
    """reviews' subsets and routes: jason → v2, the rest v1/v2 by weight."""
    split = [_to("reviews", "v1", v1_weight), _to("reviews", "v2", 100 - v1_weight)]
    split = [route for route in split if route["weight"] > 0]
    if len(split) == 1:
        del split[0]["weight"]
    return [
        {
            "apiVersion": NETWORKING,
            "kind": "DestinationRule",
            "metadata": _meta("reviews"),
            "spec": {
                "host": f"reviews.{NAMESPACE}.svc.cluster.local",
                "subsets": [
                    {"name": "v1", "labels": {"version": "v1"}},
                    {"name": "v2", "labels": {"version": "v2"}},
                ],
            },
        },
        {
            "apiVersion": NETWORKING,
            "kind": "VirtualService",
            "metadata": _meta("reviews"),
            "spec": {
                "hosts": ["reviews"],
                "http": [
                    {
                        "name": "jason",
                        "match": [{"headers": {"end-user": {"exact": "jason"}}}],
                        "route": [_to("reviews", "v2")],
                    },
                    {"name": "split", "route": split},
                ],
            },
        },
    ]


def _header(name: str, value: str) -> dict[str, Any]:
    return {"headers": {name: {"exact": value}}}


def ratings_rules() -> list[dict[str, Any]]:
    """ratings' resilience rules: fault injection, a timeout and retries."""
    route = [_to("ratings")]
    http: list[dict[str, Any]] = [
        {
            "name": "fault-abort",
            "match": [_header("x-demo-fault", "abort")],
            "fault": {"abort": {"httpStatus": FAULT_ABORT_STATUS, "percentage": {"value": 100}}},
            "route": route,
        },
        {
            "name": "fault-delay",
            "match": [_header("x-demo-fault", "delay")],
            "fault": {
                "delay": {
                    "fixedDelay": f"{FAULT_DELAY_SECONDS:g}s",
                    "percentage": {"value": 100},
                }
            },
            "route": route,
        },
        {
            "name": "timeout",
            "match": [{"uri": {"prefix": "/slow"}}],
            "timeout": f"{int(TIMEOUT_SECONDS * 1000)}ms",
            "retries": {"attempts": 0},
            "route": route,
        },
        {
            "name": "no-retries",
            "match": [{"uri": {"exact": "/flaky"}, **_header("x-demo-retries", "off")}],
            "retries": {"attempts": 0},
            "route": route,
        },
        {
            "name": "retries",
            "match": [{"uri": {"exact": "/flaky"}}],
            "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "5xx"},
            "route": route,
        },
        {"name": "default", "route": route},
    ]
    return [
        {
            "apiVersion": NETWORKING,
            "kind": "VirtualService",
            "metadata": _meta("ratings"),
            "spec": {"hosts": ["ratings"], "http": http},
        }
    ]
