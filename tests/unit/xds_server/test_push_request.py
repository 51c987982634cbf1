"""Which pushes are EDS-only: endpoint changes of EDS services; anything else is full."""

from __future__ import annotations

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.push_request import classify_endpoint_push, request_for_change
from tests.conftest import push_from_text

BASE = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.20
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec: {serviceAccountName: web}
status: {podIP: 10.0.0.1}
"""

WEB_2 = """
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: default, labels: {app: web}}
spec: {serviceAccountName: web}
status: {podIP: 10.0.0.2}
"""


def push(text: str) -> PushContext:
    return push_from_text(text)[1]


def pod(name: str) -> ConfigKey:
    return ConfigKey(Kind.POD, "default", name)


def client(ip: str = "10.0.0.9", name: str = "client") -> Proxy:
    return Proxy(ProxyType.SIDECAR, (ip,), name, "default")


def test_new_pod_of_an_eds_service_is_eds_only() -> None:
    req = classify_endpoint_push(
        request_for_change(frozenset({pod("web-2")})), push(BASE), push(BASE + WEB_2)
    )
    assert not req.full
    assert req.changed_addresses == {"10.0.0.2"}
    assert not req.full_for(client())
    # The new pod's own proxy, and a proxy at that address, get everything.
    assert req.full_for(client("10.0.0.2"))
    assert req.full_for(client(name="web-2"))


def test_pod_of_a_headless_service_needs_a_full_push() -> None:
    db = WEB_2.replace("web-2", "db-1").replace("app: web", "app: db").replace(".2}", ".3}")
    req = classify_endpoint_push(
        request_for_change(frozenset({pod("db-1")})), push(BASE), push(BASE + db)
    )
    assert req.full, "headless services get a listener per endpoint"


def test_new_service_account_changes_the_service_and_is_full() -> None:
    other = WEB_2.replace("serviceAccountName: web", "serviceAccountName: web-canary")
    req = classify_endpoint_push(
        request_for_change(frozenset({pod("web-2")})), push(BASE), push(BASE + other)
    )
    assert req.full, "the SAN list of the service's clusters changed"


def test_config_changes_are_full() -> None:
    key = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")
    req = classify_endpoint_push(request_for_change(frozenset({key})), push(BASE), push(BASE))
    assert req.full and req.reasons == {"config"}


def test_unrelated_pod_changes_nothing_but_stays_eds() -> None:
    lonely = WEB_2.replace("app: web", "app: lonely")
    req = classify_endpoint_push(
        request_for_change(frozenset({pod("web-2")})), push(BASE), push(BASE + lonely)
    )
    assert not req.full and req.changed_addresses == frozenset()
