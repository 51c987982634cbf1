"""A security policy meshpilot cannot use never widens access (issue 18, item 3).

With no last good version, an invalid AuthorizationPolicy denies every request to the
workloads it selects (its own RBAC filter, stats under `invalid_policy_<ns>_<name>`), an
invalid PeerAuthentication is STRICT, and an invalid RequestAuthentication rejects every
token; the errors name file, line, object and field and say "failing closed"."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.config.loader import load_paths, load_text
from meshpilot.envoy.validate import validate_config
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.generate.security import InboundSecurity, inbound_security
from tests.unit.authz.envoy_harness import running_envoy, running_tcp_envoy_admin, tcp_echo_server
from tests.unit.authz.helpers import as_dict

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"
POD = "httpbin-v1-5f6b8d7c9-abcde"
MESHPILOT = str(Path(sys.executable).parent / "meshpilot")

# The case: the workload's only ALLOW policy has a field meshpilot does not know.
BAD_ALLOW = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-sleep, namespace: foo}
spec:
  selector:
    matchLabels: {app: httpbin}
  action: ALLOW
  rules:
  - from:
    - source:
        principals: [cluster.local/ns/foo/sa/sleep]
        sourceWorkloads: [sleep]
"""
ALLOW_ALL = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-all, namespace: foo}
spec:
  rules: [{}]
"""
OTHER_POD = """apiVersion: v1
kind: Pod
metadata:
  name: other
  namespace: foo
  labels: {app: other}
spec: {serviceAccountName: default}
status: {podIP: 10.1.0.11}
"""


def _push(*texts: str) -> PushContext:
    base = load_paths([MESH])
    extra = load_text("---\n".join(texts), "policies.yaml")
    return build_push_context([*base.objects, *extra.served], base.mesh)


def _security(push: PushContext, pod: str = POD) -> InboundSecurity:
    found = push.pod("foo", pod)
    assert found is not None
    proxy = proxy_from_pod(found, ProxyType.SIDECAR)
    return inbound_security(push, proxy, push.sidecar_scope(proxy))


def _rbac(security: InboundSecurity) -> list[dict[str, Any]]:
    return [as_dict(f)["typed_config"] for f in security.http if f.name.endswith(".rbac")]


def test_unknown_field_error_names_file_line_field_and_says_failing_closed() -> None:
    loaded = load_text(BAD_ALLOW, "policies.yaml")
    [error] = loaded.errors
    assert str(error) == (
        "policies.yaml:12: error: AuthorizationPolicy foo/allow-sleep: "
        "spec.rules[0].from[0].source.sourceWorkloads: unknown field 'sourceWorkloads'; "
        "failing closed: every request to the workloads it selects is denied until it is fixed"
    )
    assert not loaded.objects and [o.key.name for o in loaded.served] == ["allow-sleep"]


def test_invalid_allow_policy_denies_everything_with_a_stat_prefix_saying_why() -> None:
    [deny_all, *rest] = _rbac(_security(_push(BAD_ALLOW, ALLOW_ALL)))
    assert deny_all["rules_stat_prefix"] == "invalid_policy_foo_allow-sleep"
    assert deny_all["rules"] == {
        "action": "DENY",
        "policies": {
            "ns[foo]-policy[allow-sleep]-invalid-deny-all": {
                "permissions": [{"any": True}],
                "principals": [{"any": True}],
            }
        },
    }
    assert [r["rules"].get("action", "ALLOW") for r in rest] == ["ALLOW"]  # the valid policy stays
    tcp = [as_dict(f)["typed_config"] for f in _security(_push(BAD_ALLOW)).network]
    assert [t["stat_prefix"] for t in tcp] == ["tcp.invalid_policy_foo_allow-sleep."]


def test_audit_policy_that_is_invalid_is_skipped_as_it_cannot_widen_access() -> None:
    audit = BAD_ALLOW.replace("action: ALLOW", "action: AUDIT")
    loaded = load_text(audit, "policies.yaml")
    assert loaded.errors and not loaded.served
    assert "failing closed" not in loaded.errors[0].message


def test_unreadable_selector_fails_closed_for_the_whole_namespace_or_mesh() -> None:
    bad_selector = BAD_ALLOW.replace("matchLabels: {app: httpbin}", "matchLabels: app=httpbin")
    push = _push(bad_selector, OTHER_POD)
    assert _rbac(_security(push, "other"))[0]["rules_stat_prefix"].startswith("invalid_policy_")
    in_root = bad_selector.replace("namespace: foo", "namespace: istio-system")
    push = _push(in_root, OTHER_POD)
    prefix = _rbac(_security(push, "other"))[0]["rules_stat_prefix"]
    assert prefix == "invalid_policy_istio-system_allow-sleep"
    # A readable selector keeps the stand-in to the workloads the policy selected.
    assert _security(_push(BAD_ALLOW, OTHER_POD), "other").empty


def test_invalid_peer_authentication_is_strict() -> None:
    permissive = """apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: foo, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  mtls: {mode: PERMISSIVE}
"""
    bad = """apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: httpbin, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  mtls: {mode: STRIKT}
"""
    loaded = load_text(bad, "pa.yaml")
    assert [str(d) for d in loaded.errors] == [
        'pa.yaml:6: error: PeerAuthentication foo/httpbin: spec.mtls.mode: invalid value "STRIKT"'
        "; use one of: UNSET, DISABLE, PERMISSIVE, STRICT; failing closed: mutual TLS only "
        "(STRICT) for the workloads it selects until it is fixed"
    ]
    push = _push(permissive, bad)
    index = peer_authn(push)
    assert index.for_workload("foo", {"app": "httpbin"}).mode is MtlsMode.STRICT
    # An unreadable namespace-wide one wins over the older valid one of its level.
    unreadable = bad.replace("  selector: {matchLabels: {app: httpbin}}\n", "").replace(
        "name: httpbin", "name: broken"
    )
    assert peer_authn(_push(permissive, unreadable)).namespace_mode("foo") is MtlsMode.STRICT


def test_policy_with_trust_domains_translates() -> None:
    policy = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: same-td, namespace: foo}
spec:
  rules:
  - from:
    - source: {trustDomains: [cluster.local, "*.example.org"], notTrustDomains: [old.td]}
"""
    loaded = load_text(policy, "policies.yaml")
    assert not loaded.diagnostics
    [allow] = _rbac(_security(_push(policy)))
    [principal] = allow["rules"]["policies"]["ns[foo]-policy[same-td]-rule[0]"]["principals"]
    regexes = json.dumps(principal)
    assert '"regex": "spiffe://cluster\\\\.local/.*"' in regexes
    assert '"regex": "spiffe://[^/]*\\\\.example\\\\.org/.*"' in regexes
    assert '"not_id"' in regexes and "spiffe://old\\\\.td/.*" in regexes
    bad = load_text(policy.replace("old.td", "spiffe://old.td"), "p.yaml").errors
    assert [d.field for d in bad] == ["spec.rules[0].from[0].source.notTrustDomains[0]"]


def test_translate_and_analyze_report_and_fail_closed(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text(BAD_ALLOW)
    args = ["-f", str(MESH), "-f", str(bad)]
    result = _run("translate", *args, "--proxy", f"{POD}.foo")
    assert f"{bad}:12: error: AuthorizationPolicy foo/allow-sleep: " in result.stderr
    assert "failing closed" in result.stderr
    assert "ns[foo]-policy[allow-sleep]-invalid-deny-all" in result.stdout
    analyzed = _run("analyze", *args)
    assert analyzed.returncode == 79
    # findings on stdout (a report file keeps them), the summary on stderr
    assert (
        "Schema validation error: spec.rules[0].from[0].source.sourceWorkloads: unknown field "
        "'sourceWorkloads'; failing closed" in analyzed.stdout
    )
    assert (
        "Warning [MP0004] (AuthorizationPolicy foo/allow-sleep "
        f"{bad}:4) invalid, no last good version (" in analyzed.stdout
    )
    assert "1 workload(s) affected: httpbin-v1-5f6b8d7c9-abcde.foo" in analyzed.stdout
    assert "1 error, 1 warning" in analyzed.stderr


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([MESHPILOT, *args], capture_output=True, text=True, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def envoy_statuses() -> Iterator[dict[str, int]]:
    """What a client sees through real Envoy for each invalid policy."""
    bad_jwt = """apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: foo}
spec:
  jwtRules:
  - issuer: https://issuer.test
    jwksUri: https://jwks.example.com:8443/keys
    fromHeaders: [{name: x-token}]
    timeout: soon
"""
    out: dict[str, int] = {}
    with running_envoy(_security(_push(BAD_ALLOW, ALLOW_ALL)).http) as envoy:
        out["authz"] = envoy.status("/get")
        stats = envoy.stats("invalid_policy")
        out["denied stat"] = stats.get(
            "http.authz_test.rbac.invalid_policy_foo_allow-sleep.denied", -1
        )
    with (
        tcp_echo_server() as upstream,
        running_tcp_envoy_admin(_security(_push(BAD_ALLOW)).network, upstream) as tcp,
    ):
        out["tcp echo"] = len(tcp.exchange(b"hello"))
        out["tcp denied stat"] = tcp.stats("invalid_policy").get(
            "tcp.invalid_policy_foo_allow-sleep.rbac.denied", -1
        )
    with running_envoy(_security(_push(bad_jwt)).http) as envoy:
        out["no token"] = envoy.status("/get")
        out["bearer"] = envoy.status("/get", headers={"Authorization": "Bearer a.b.c"})
        out["x-token"] = envoy.status("/get", headers={"x-token": "a.b.c"})
    yield out


@pytest.mark.envoy
def test_envoy_denies_every_request_under_an_invalid_allow_policy(
    envoy_statuses: dict[str, int],
) -> None:
    assert envoy_statuses["authz"] == 403
    assert envoy_statuses["denied stat"] == 1  # the RBAC stats say why
    assert envoy_statuses["tcp echo"] == 0  # a TCP connection is closed unanswered
    assert envoy_statuses["tcp denied stat"] == 1


@pytest.mark.envoy
def test_envoy_rejects_every_token_under_an_invalid_request_authentication(
    envoy_statuses: dict[str, int],
) -> None:
    expected = {"no token": 200, "bearer": 401, "x-token": 401}
    assert {k: envoy_statuses[k] for k in expected} == expected


@pytest.mark.envoy
def test_envoy_accepts_the_whole_config_of_a_proxy_under_every_kind_of_stand_in() -> None:
    bad_pa = """apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: httpbin, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  portLevelMtls: {"80": {mode: NOPE}}
"""
    bad_ra = """apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: foo}
spec:
  jwtRules: [{issuer: x, fromParams: [token], fromCookies: [session], audience: y}]
"""
    push = _push(BAD_ALLOW, bad_pa, bad_ra)
    found = push.pod("foo", POD)
    assert found is not None
    proxy = proxy_from_pod(found, ProxyType.SIDECAR)
    config = generate_proxy_config(push, proxy)
    assert "invalid_policy_foo_allow-sleep" in json.dumps(config.to_dict())
    validate_config(config, node_id=proxy.node_id)
