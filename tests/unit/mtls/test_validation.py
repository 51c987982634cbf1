"""PeerAuthentication is read and validated as Istio does: errors name file, line, object
and field, and an invalid policy is skipped while the rest is served."""

from __future__ import annotations

import pytest

from meshpilot.config.diagnostics import Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_text
from tests.unit.mtls.meshes import peer_authn


def _errors(text: str) -> list[str]:
    loaded = load_text(text, "policies.yaml")
    return [str(d) for d in loaded.diagnostics if d.severity is Severity.ERROR]


def test_a_valid_policy_loads_with_both_api_versions() -> None:
    text = peer_authn("a", "shop", "STRICT", "{app: api}", "{8080: {mode: DISABLE}}")
    beta = peer_authn("b", "shop", "PERMISSIVE")
    text += beta.replace("security.istio.io/v1", "security.istio.io/v1beta1")
    loaded = load_text(text, "policies.yaml")
    assert [d for d in loaded.diagnostics if d.severity is Severity.ERROR] == []
    policies = [o for o in loaded.objects if o.key.kind is Kind.PEER_AUTHENTICATION]
    assert [p.name for p in policies] == ["a", "b"]
    spec = policies[0].model.spec
    assert spec.port_level_mtls is not None and spec.port_level_mtls[8080].mode == "DISABLE"


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (
            peer_authn("ns", "shop", "STRICT", ports="{8080: {mode: DISABLE}}"),
            "spec.portLevelMtls",
            "mesh/namespace peer authentication cannot have port level mTLS",
        ),
        (
            peer_authn("empty", "shop", "STRICT", "{}", "{8080: {mode: DISABLE}}"),
            "spec.portLevelMtls",
            "mesh/namespace peer authentication cannot have port level mTLS",
        ),
        (
            peer_authn("none", "shop", None, "{app: api}", "{}"),
            "spec.portLevelMtls",
            "port level mTLS, if defined, must have at least one element",
        ),
        (
            peer_authn("zero", "shop", None, "{app: api}", "{0: {mode: STRICT}}"),
            "spec.portLevelMtls[0]",
            "port must be in range 1..65535",
        ),
        (
            peer_authn("bad", "shop", "strict"),
            "spec.mtls.mode",
            "invalid value",
        ),
        (
            peer_authn("badport", "shop", None, "{app: api}", "{80: {mode: NOPE}}"),
            "spec.portLevelMtls[80].mode",
            "invalid value",
        ),
        (
            peer_authn("wild", "shop", None, "{app: '*'}"),
            "spec.selector.matchLabels",
            "wildcard is not supported in selector",
        ),
    ],
)
def test_invalid_policies_are_reported_with_their_field(doc: str, field: str, message: str) -> None:
    errors = _errors(doc)
    assert len(errors) == 1, errors
    # The line of the field itself (the document starts with `---` on line 1).
    line = next(i for i, t in enumerate(doc.splitlines(), 1) if field.split(".")[-1][:6] in t)
    assert errors[0].startswith(f"policies.yaml:{line}: error: "), errors[0]
    assert "PeerAuthentication shop/" in errors[0]
    assert field in errors[0] and message in errors[0]


def test_invalid_policy_is_skipped_and_others_served() -> None:
    text = peer_authn("bad", "shop", "STRICT", ports="{8080: {mode: DISABLE}}")
    text += peer_authn("good", "shop", "STRICT")
    loaded = load_text(text, "policies.yaml")
    names = [o.name for o in loaded.objects if o.key.kind is Kind.PEER_AUTHENTICATION]
    assert names == ["good"]


def test_unknown_field_is_refused() -> None:
    errors = _errors(peer_authn("typo", "shop", "STRICT") + "  mtlsMode: STRICT\n")
    assert len(errors) == 1 and "mtlsMode" in errors[0]
