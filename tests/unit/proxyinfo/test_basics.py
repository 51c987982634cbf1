"""The small pieces: tables, raw output, redaction, JSON reads, HTTP fetches, dump shape."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import yaml

from meshpilot.proxyinfo import ConfigDump, ConfigDumpError, FetchError, Table, render_raw
from meshpilot.proxyinfo.fetch import base_url, get_json
from meshpilot.proxyinfo.fields import integer, obj, objs, strings, text
from meshpilot.proxyinfo.redact import REDACTED, redact_private_keys
from meshpilot.runtime.ports import free_port
from tests.unit.proxyinfo.dumps import b64
from tests.unit.proxyinfo.pages import serving

KEY_PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"


def test_table_aligns_columns_like_tabwriter() -> None:
    table = Table.of(("NAME", "PORT", "TYPE"), [("a", "80", "HTTP"), ("longer-name", "15001", "")])
    assert table.render().splitlines() == [
        "NAME            PORT      TYPE",
        "a               80        HTTP",
        "longer-name     15001",
    ]
    assert Table.of(("A", "B"), [("x", "y")], padding=1).render() == "A B\nx y"
    assert Table.of(("A", "B"), []).render() == "A     B"


def test_raw_output_keeps_key_order() -> None:
    data = [{"name": "b", "address": {"port_value": 1}}]
    assert json.loads(render_raw(data, "json")) == data
    text_yaml = render_raw(data, "yaml")
    assert yaml.safe_load(text_yaml) == data and text_yaml.index("name") < text_yaml.index(
        "address"
    )


GONE = {"inline_string": REDACTED}
KEY_B64 = b64(KEY_PEM.encode())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"private_key": {"inline_bytes": KEY_B64}}, {"private_key": GONE}),
        ({"private_key": {"inline_string": "anything"}}, {"private_key": GONE}),
        ({"private_key": GONE}, None),
        ({"private_key": {"filename": "/etc/certs/key.pem"}}, None),
        ({"password": {"inline_string": "s3cret"}}, {"password": GONE}),
        (
            {"generic_secret": {"secret": {"inline_string": "s3cret"}}},
            {"generic_secret": {"secret": GONE}},
        ),
        ({"x": [{"y": KEY_PEM}]}, {"x": [{"y": REDACTED}]}),
        ({"inline_bytes": KEY_B64}, {"inline_bytes": REDACTED}),
        ({"certificate_chain": {"inline_bytes": b64(b"-----BEGIN CERTIFICATE-----")}}, None),
    ],
)
def test_private_keys_are_redacted_wherever_they_are(value: Any, expected: Any) -> None:
    assert redact_private_keys(value) == (value if expected is None else expected)


def test_fields_read_missing_and_mistyped_values_as_empty() -> None:
    data = {"a": {"b": [1, {"c": "x"}], "n": "42", "flag": True}, "s": ["x", 1]}
    assert obj(data, "a", "b") == {} and objs(data, "a", "b") == [{"c": "x"}]
    assert text(data, "a", "b") == "" and text(data, "missing", "deeper") == ""
    assert integer(data, "a", "n") == 42 and integer(data, "a", "flag") == 0
    assert strings(data, "s") == ["x"]


def test_base_url_accepts_host_port() -> None:
    assert base_url("127.0.0.1:15000") == "http://127.0.0.1:15000"
    assert base_url(" http://localhost:15014/ ") == "http://localhost:15014"
    with pytest.raises(FetchError, match="not an http:// address"):
        base_url("unix:///tmp/admin.sock")


def test_fetch_errors_are_one_line_naming_server_and_url() -> None:
    base = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(FetchError) as refused:
        get_json(base, "/debug/syncz", "the control plane")
    assert str(refused.value) == f"cannot reach the control plane at {base}: Connection refused"
    pages = {
        "/bad": (200, b"<html>"),
        "/gone": (404, {"error": "no connected proxy"}),
        "/ok": (200, [1]),
    }
    with serving(pages) as url:
        assert get_json(url, "/ok", "Envoy admin") == [1]
        with pytest.raises(FetchError) as missing:
            get_json(url, "/gone", "Envoy admin")
        assert missing.value.status == 404
        assert (
            str(missing.value)
            == f"Envoy admin at {url} answered GET /gone with 404 Not Found: no connected proxy"
        )
        with pytest.raises(FetchError, match=r"did not answer GET /bad with JSON"):
            get_json(url, "/bad", "Envoy admin")


def test_fetch_times_out() -> None:
    with socket.socket() as sock:  # accepts connections (backlog) but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(FetchError, match=r"no answer within 0.2s"):
            get_json(base, "/config_dump", "Envoy admin", timeout=0.2)


def test_config_dump_shape_is_checked() -> None:
    with pytest.raises(ConfigDumpError, match="is not an Envoy config dump"):
        ConfigDump.parse([], "http://x")
    empty = ConfigDump.parse({"configs": []}, "http://x")
    assert empty.clusters() == [] and empty.node_id == "" and empty.section("Nope") == {}
