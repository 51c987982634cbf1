"""CUSTOM AuthorizationPolicy with an envoyExtAuthzHttp provider, end to end: real Envoy
sidecars in netns pods ask a small authorizer (a pod of its own, see ext_authorizer.py) about
the requests the policy matches; an allowed request reaches the app with the authorizer's
headers, a denied one is 403, requests the policy does not match never reach the authorizer,
and a policy naming a provider that is not defined denies (fail closed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.ext_authorizer import ExtAuthorizer
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for

from meshpilot.demo.manifests import dump
from meshpilot.demo.mesh import DemoMesh

pytestmark = pytest.mark.envoy

PROVIDER = "e2e-authz"


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


def _custom(name: str, provider: str, paths: list[str]) -> dict[str, object]:
    spec = {
        "selector": {"matchLabels": {"app": "ratings"}},
        "action": "CUSTOM",
        "provider": {"name": provider},
        "rules": [{"to": [{"operation": {"paths": paths}}]}],
    }
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": meta, "spec": spec}  # fmt: skip


def _get(mesh: DemoMesh, path: str) -> tuple[int, str]:
    return mesh.get("client", f"http://ratings:9080{path}", full=True)


def test_custom_policy_asks_the_authorizer(mesh: DemoMesh, tmp_path: Path) -> None:
    authz = ExtAuthorizer(mesh, tmp_path)
    assert mesh.workspace is not None
    config = mesh.workspace.config
    config.write("ext-authz.yaml", dump([
        authz.mesh_config(PROVIDER),
        authz.service_entry(),
        _custom("ratings-ext-authz", PROVIDER, ["/headers", "/deny"]),
        _custom("ratings-no-provider", "not-defined", ["/nope"]),
    ]))  # fmt: skip
    try:
        wait_for(lambda: _get(mesh, "/deny")[0] == 403, "the CUSTOM policy in force")
        status, body = _get(mesh, "/headers")
        assert status == 200, body
        # headersToUpstreamOnAllow: the authorizer's headers reach the app
        assert "x-ext-authz-user=alice" in body and "x-ext-authz-check-result=allowed" in body
        assert _get(mesh, "/nope")[0] == 403  # unknown provider: fail closed
        before = len(authz.checks())
        assert _get(mesh, "/")[0] == 200  # no rule matches: the authorizer is not asked
        assert len(authz.checks()) == before
        checks = authz.checks()
        # pathPrefix, the request's own path, and includeAdditionalHeadersInCheck
        assert "GET /check/headers meshpilot" in checks
        assert "GET /check/deny meshpilot" in checks
        assert not [c for c in checks if "/nope" in c or c.endswith("/check/ -")]
        assert_no_nacks(mesh)
    finally:
        config.remove("ext-authz.yaml")
    wait_for(lambda: _get(mesh, "/deny")[0] == 200, "the policy removed")
