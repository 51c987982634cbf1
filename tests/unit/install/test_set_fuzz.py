"""Any --set text and any IstioOperator spec tree give a result or one IstioOperatorError:
never another exception (a traceback for the user)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from meshpilot.install.load import OperatorFile, resolve
from meshpilot.install.spec import IstioOperatorError

_KEYS = st.sampled_from(
    [
        "values",
        "pilot",
        "global",
        "proxy",
        "components",
        "ingressGateways",
        "egressGateways",
        "k8s",
        "replicaCount",
        "enabled",
        "name",
        "meshConfig",
        "revision",
        "profile",
        "x",
        "",
    ]
)
_SEGMENT = st.tuples(
    _KEYS, st.sampled_from(["", "[0]", "[1]", "[name:istio-ingressgateway]", "[x]", "[", "]"])
)
_PATH = st.lists(_SEGMENT, min_size=1, max_size=5).map(lambda s: ".".join(k + sel for k, sel in s))
_VALUE = st.sampled_from(["true", "false", "3", "-1", "1.5", '"x"', "demo", "", "a=b", "1-15-4"])
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=4))
_TREE: st.SearchStrategy[Any] = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.tuples(_PATH, _VALUE).map("=".join), st.text(max_size=12)), max_size=3)
)
def test_any_set_flags(flags: list[str]) -> None:
    try:
        resolve([], flags)
    except IstioOperatorError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _TREE, max_size=4))
def test_any_spec_tree(spec: dict[str, Any]) -> None:
    try:
        resolve([OperatorFile("iop.yaml", {}, spec)])
    except IstioOperatorError as exc:
        assert str(exc).startswith(("iop.yaml", "unknown profile", "profile", "spec.profile"))
