"""Plain scalars are typed as kubectl (sigs.k8s.io/yaml, go-yaml v2) types them, not as YAML 1.1
does: an all-digit IPv6 address is a string, not a sexagesimal integer."""

from __future__ import annotations

import pytest

from meshpilot.config.loader import load_text
from meshpilot.config.yaml_load import load_yaml
from tests.conftest import push_from_text

SERVICE_ENTRY = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: v6, namespace: shop}
spec:
  hosts: [db.example]
  addresses:
  - 2001:0:0:0:0:0:0:1
  - 1:2:3:4:5:6:7:8
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - address: 2001:0:0:0:0:0:0:5
  - address: 2001:db8::6
"""


def test_all_digit_ipv6_addresses_are_read_as_kubectl_reads_them() -> None:
    loaded, push = push_from_text(SERVICE_ENTRY)
    assert loaded.diagnostics == []
    [svc] = push.registry.services_for_host("db.example")
    assert svc.addresses == ("2001:0:0:0:0:0:0:1", "1:2:3:4:5:6:7:8")
    endpoints = push.registry.endpoints_of(svc, 5432)
    assert sorted(e.address for e in endpoints) == ["2001:0:0:0:0:0:0:5", "2001:db8::6"]


def test_a_bad_address_is_still_rejected_on_its_line() -> None:
    text = SERVICE_ENTRY.replace("  - 1:2:3:4:5:6:7:8\n", "  - 10:20\n")
    [diag] = load_text(text, "se.yaml").diagnostics
    assert (diag.file, diag.line, diag.field) == ("se.yaml", 8, "spec.addresses[1]")
    assert "10:20" in diag.message


# What kubectl 1.32 (`kubectl label --local -f x.yaml a=b -o json`) made of each plain scalar.
KUBECTL = {
    "10:20": "10:20",
    "-1:30": "-1:30",
    "1:30.5": "1:30.5",
    "190:20:0:0:0:0:0:1": "190:20:0:0:0:0:0:1",
    "0o17": 15,
    "017": 15,
    "0x1F": 31,
    "0b101": 5,
    "1_000": 1000,
    "08": 8,
    "1e3": 1000,
    "+.5": 0.5,
    "On": True,
    "OFF": False,
    "~": None,
    "=": "=",
    "2001-12-14": "2001-12-14",
    "9" * 400: "9" * 400,
}


def test_y_and_n_stay_strings_where_kubectl_makes_booleans() -> None:
    """kubectl sends `y` as true, which a string field (a label value) refuses; reading it as
    "y" keeps such objects loading, and boolean fields still take "y" as true."""
    assert load_yaml("v: [y, n, Y, N]\n", "v.yaml") == {"v": ["y", "n", "Y", "N"]}


@pytest.mark.parametrize("text", list(KUBECTL))
def test_plain_scalars_match_kubectl(text: str) -> None:
    value = load_yaml(f"v: {text}\n", "v.yaml")["v"]
    expected = KUBECTL[text]
    assert value == expected and type(value) in (type(expected), float)


FLOW = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: flow, namespace: shop}
spec:
  hosts: [example.com]
  addresses: [1.2.3.4, 001:db8::]
  ports: [{number: 1234, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: 2001:db8::7}, {address: 2001:db8::8, ports: {http: 8080}}]
"""


def test_flow_list_of_ipv6_addresses_is_read_as_kubectl_reads_it() -> None:
    """libyaml refuses `001:db8::]` ("found unexpected ':'"); kubectl reads `001:db8::`."""
    loaded, push = push_from_text(FLOW)
    assert loaded.diagnostics == []
    [svc] = push.registry.services_for_host("example.com")
    assert svc.addresses == ("1.2.3.4", "001:db8::")


def test_flow_reader_keeps_lines() -> None:
    text = FLOW.replace("  resolution: DNS\n", "  resolution: DNS\n  location: NOWHERE\n")
    [diag] = load_text(text, "flow.yaml").diagnostics
    assert (diag.line, diag.field) == (9, "spec.location")


@pytest.mark.parametrize(
    "text",
    ["a: [001:db8::]\nb: c", "a: [x:]\nb: {k: v}\nc: last", "a: [1:2:]\n# end", "[a:, b::]"],
)
def test_flow_reader_reads_to_the_end_of_the_text(text: str) -> None:
    """The go-yaml-like reader peeks past a colon only while there is text."""
    assert load_yaml(text, "end.yaml") is not None
