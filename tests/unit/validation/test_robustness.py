"""Never a traceback: odd but parseable input (wrong types, nulls, empty specs, extreme values)
always becomes diagnostics, through loading, validation and analysis."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.loader import load_documents, load_text
from meshpilot.config.yaml_source import RawDocument, read_paths
from meshpilot.model.push_context import build_push_context

REPO = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"
KINDS = [
    ("networking.istio.io/v1", "VirtualService"),
    ("networking.istio.io/v1", "DestinationRule"),
    ("networking.istio.io/v1", "Gateway"),
    ("networking.istio.io/v1", "ServiceEntry"),
    ("networking.istio.io/v1", "WorkloadEntry"),
    ("networking.istio.io/v1", "Sidecar"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("v1", "Secret"),
    ("v1", "Endpoints"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("networking.istio.io/v1alpha3", "EnvoyFilter"),
    ("telemetry.istio.io/v1", "Telemetry"),
    ("extensions.istio.io/v1alpha1", "WasmPlugin"),
    ("networking.istio.io/v1beta1", "ProxyConfig"),
    ("networking.istio.io/v1", "WorkloadGroup"),
]
ODD_SPECS = [
    "null",
    "{}",
    "[]",
    "42",
    "''",
    "{hosts: null, http: null, servers: null, host: null, ports: null, egress: null}",
    "{hosts: 7, http: {}, servers: [null], host: [], ports: [7], egress: [{}]}",
    "{hosts: [null], http: [null], tcp: [{route: [{}]}], subsets: [{}], endpoints: [{}]}",
    "{hosts: [''], http: [{route: [{destination: {host: ''}, weight: .nan}]}]}",
    "{host: '', trafficPolicy: {loadBalancer: {consistentHash: {maglev: {tableSize: -7}}}}}",
    "{servers: [{port: {number: -1, protocol: '', name: ''}, hosts: ['']}]}",
    "{hosts: ['*'], resolution: '', location: '', ports: [{number: 0, name: ''}]}",
    "{egress: [{hosts: ['/'], port: {number: -1}}], ingress: [{port: {number: 0}}]}",
    "{ports: [{port: 99999999999999999999}]}",
    "{configPatches: [null, {}, {patch: {}}, {match: {listener: null}, patch: {value: 7}}]}",
    "{tracing: [{customTags: {a: null, b: {}}}], metrics: [{overrides: [{tagOverrides: {}}]}]}",
    "{url: '://', sha256: '', vmConfig: {env: [null, {}]}, match: [{ports: [{}]}]}",
    "{concurrency: -99999999999999999999, environmentVariables: {'': ''}, image: {}}",
    "{template: {address: '', ports: {'': -1}}, probe: {httpGet: {}, exec: {}}}",
]
ODD_VALUES: list[Any] = [
    None,
    "",
    "*",
    "~",
    ".",
    "/",
    "unix://",
    -1,
    0,
    2**64,
    1e308,
    math.nan,
    True,
    [],
    {},
    [None],
    {"": None},
    "x" * 3000,
    "%",
    "(?=",
    "a/b/c",
    "::",
    "10.0.0.0/99",
]


def _problems(diagnostics: list[Diagnostic]) -> list[str]:
    return [str(d) for d in diagnostics if "internal error" in d.message]


@pytest.mark.parametrize("spec", ODD_SPECS)
@pytest.mark.parametrize(("api_version", "kind"), KINDS, ids=[k for _, k in KINDS])
def test_odd_specs_become_diagnostics(api_version: str, kind: str, spec: str) -> None:
    text = (
        f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: odd, namespace: ns}}\n"
        f"spec: {spec}\ndata: {spec}\nsubsets: {spec}\nendpoints: {spec}\nstatus: {spec}\n"
    )
    loaded = load_text(text, "odd.yaml")
    assert loaded.diagnostics, "odd input must be reported"
    assert all(d.file == "odd.yaml" and d.line >= 1 for d in loaded.diagnostics)
    analyze(build_push_context(loaded.objects, loaded.mesh))


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _leaves(value, (*path, index))
    if path and path[0] not in ("apiVersion", "kind"):
        yield path


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    mutated = copy.deepcopy(data)
    target = mutated
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return mutated


def _mutations(documents: list[RawDocument], count: int, seed: int) -> Iterator[RawDocument]:
    rng = random.Random(seed)
    candidates = [(doc, leaf) for doc in documents for leaf in _leaves(doc.data)]
    for doc, leaf in rng.sample(candidates, min(count, len(candidates))):
        value = rng.choice(ODD_VALUES)
        yield RawDocument(doc.file, doc.line, _replace(doc.data, leaf, value), doc.positions)


def test_mutated_fixtures_never_raise() -> None:
    documents = read_paths([FIXTURES]).documents
    for mutated in _mutations(documents, count=4000, seed=7):
        loaded = load_documents([mutated])
        assert not _problems(loaded.diagnostics), mutated.data


def test_mutated_mesh_never_breaks_analysis() -> None:
    documents = read_paths([REPO / "examples" / "bookinfo"]).documents
    for mutated in _mutations(documents, count=400, seed=11):
        others = [d for d in documents if d is not mutated]
        loaded = load_documents([*others, mutated])
        findings = analyze(build_push_context(loaded.objects, loaded.mesh))
        assert not _problems([*loaded.diagnostics, *findings])


def test_secret_values_never_appear_in_messages() -> None:
    text = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\n"
        "type: kubernetes.io/tls\ndata: {tls.crt: 'hunter2-not-base64!', token: 'c2VjcmV0'}\n"
    )
    messages = [str(d) for d in load_text(text, "secret.yaml").diagnostics]
    assert messages
    assert not [m for m in messages if "hunter2" in m or "c2VjcmV0" in m or "secret\n" in m]


def test_an_invalid_object_is_skipped_and_its_neighbours_load() -> None:
    text = (FIXTURES / "gateway.yaml").read_text(encoding="utf-8")
    loaded = load_text(text, "gateway.yaml")
    assert [o.name for o in loaded.objects] == ["valid-gateway"]
    assert any(d.severity is Severity.ERROR for d in loaded.diagnostics)


def test_a_validator_bug_becomes_one_diagnostic() -> None:
    from meshpilot.config.validation.common import guarded

    def broken(model: object, problems: object) -> None:
        raise ZeroDivisionError("division by zero")

    [err] = guarded(broken)(object())
    assert err.path == ()
    assert err.message == (
        "internal error while validating (ZeroDivisionError: division by zero); please report"
    )
