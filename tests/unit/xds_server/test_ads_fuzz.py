"""Malformed ADS requests over a real gRPC channel to a real in-process control plane
(examples/bookinfo): bytes that are not a DiscoveryRequest, type URLs the server does not
serve, resource names no Envoy sends. Every such stream ends with INVALID_ARGUMENT and the
reason, logged in one line (rate-limited), never a traceback; the rest are served; the
server keeps serving a normal client. The fuzzing is derandomized and bounded."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from envoy.service.discovery.v3 import discovery_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.request_shape import SERVED_TYPES

REPO = Path(__file__).resolve().parents[3]
SERVICE = "/envoy.service.discovery.v3.AggregatedDiscoveryService/"
SOTW, DELTA = SERVICE + "StreamAggregatedResources", SERVICE + "DeltaAggregatedResources"
NODE = "sidecar~10.0.0.9~productpage-v1.default~default.svc.cluster.local"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Ads:
    """The control plane on an event loop in a thread; a plain gRPC client in the test's."""

    def __init__(self, discovery: Discovery, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{discovery.xds_port}")
        self.discovery, self.loop = discovery, loop
        self.log = Records()

    def call(self, method: str, messages: list[bytes]) -> tuple[grpc.StatusCode, str, int]:
        """Send `messages`, end the stream; (status, details, responses received)."""
        stream = self.channel.stream_stream(
            method, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        responses = stream(iter(messages), timeout=20)
        count = 0
        try:
            for _ in responses:
                count += 1
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", count
        return responses.code(), responses.details() or "", count


@pytest.fixture(scope="module")
def ads() -> Iterator[Ads]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    discovery = Discovery([REPO / "examples" / "bookinfo"], Settings(ports=Ports(0, monitoring=0)))
    asyncio.run_coroutine_threadsafe(discovery.start(), loop).result(60)
    handle = Ads(discovery, loop)
    logging.getLogger().addHandler(handle.log)
    try:
        yield handle
    finally:
        logging.getLogger().removeHandler(handle.log)
        handle.channel.close()
        asyncio.run_coroutine_threadsafe(discovery.stop(0), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def sotw(type_url: str, names: list[str] = [], node: str | None = NODE) -> bytes:  # noqa: B006
    request = discovery_pb2.DiscoveryRequest(type_url=type_url, resource_names=names)
    if node is not None:
        request.node.id = node
    return request.SerializeToString()


def delta(type_url: str, names: list[str] = [], node: str | None = NODE) -> bytes:  # noqa: B006
    request = discovery_pb2.DeltaDiscoveryRequest(type_url=type_url, resource_names_subscribe=names)
    if node is not None:
        request.node.id = node
    return request.SerializeToString()


INVALID = grpc.StatusCode.INVALID_ARGUMENT
CASES = [
    (SOTW, [b"\xff\xff\xff"], "not a DiscoveryRequest"),
    (SOTW, [sotw(TypeUrl.CLUSTER), b"\x0a\xff"], "not a DiscoveryRequest"),
    (SOTW, [b"\x0a\x02\xc3\x28"], "not a DiscoveryRequest"),  # a version that is not UTF-8
    (SOTW, [sotw("type.googleapis.com/nope")], "type_url 'type.googleapis.com/nope' is not"),
    (SOTW, [sotw("")], "type_url empty is not"),
    (SOTW, [sotw(TypeUrl.ENDPOINT, ["a\x00b"])], "name 'a\\x00b' has control characters"),
    (SOTW, [sotw(TypeUrl.ROUTE, ["x" * 5000])], "a name of 5000 characters"),
    (SOTW, [sotw(TypeUrl.CLUSTER, node="nope")], "node id 'nope'"),
    (DELTA, [b"\xff\xff\xff"], "not a DeltaDiscoveryRequest"),
    (DELTA, [delta(TypeUrl.CLUSTER), b"\x12\x01"], "not a DeltaDiscoveryRequest"),
    (DELTA, [delta("x")], "type_url 'x' is not"),
    (DELTA, [delta(TypeUrl.ENDPOINT, ["\n"])], "resource_names_subscribe: name '\\n'"),
]


@pytest.mark.parametrize(("method", "messages", "reason"), CASES)
def test_malformed_request_is_invalid_argument_with_the_reason(
    ads: Ads, method: str, messages: list[bytes], reason: str
) -> None:
    code, details, _ = ads.call(method, messages)
    assert (code, reason in details) == (INVALID, True), details


def test_bad_streams_are_logged_in_a_few_lines_without_tracebacks(ads: Ads) -> None:
    start = len(ads.log.records)
    for i in range(300):
        method, messages, _ = CASES[i % len(CASES)]
        assert ads.call(method, messages)[0] == INVALID
    records = ads.log.records[start:]
    assert not [r for r in records if r.exc_info or r.levelno >= logging.ERROR]
    refused = [r for r in records if "malformed request" in r.getMessage()]
    assert len(refused) <= 10, [r.getMessage() for r in refused]  # 5 per 10 s, then a count
    logged = [r.getMessage() for r in ads.log.records if "refused a malformed" in r.getMessage()]
    assert logged and "ADS: refused a malformed request from ipv4:127.0.0.1:" in logged[0]
    assert all("\n" not in line for line in logged)


names = st.lists(st.text(max_size=12) | st.sampled_from(["*", "", "x" * 5000]), max_size=4)
type_urls = st.sampled_from(sorted(SERVED_TYPES)) | st.text(max_size=20)
nodes = st.none() | st.just(NODE) | st.text(max_size=40)
sotw_messages = st.builds(sotw, type_urls, names, nodes)
delta_messages = st.builds(delta, type_urls, names, nodes)
junk = st.binary(max_size=40)


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    method = draw(st.sampled_from([SOTW, DELTA]))
    valid = sotw_messages if method == SOTW else delta_messages
    messages = draw(st.lists(valid | junk, min_size=1, max_size=3))
    return method, messages


@settings(
    max_examples=120,
    derandomize=True,
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(stream=streams())
def test_fuzzed_streams_end_invalid_argument_or_are_served(
    ads: Ads, stream: tuple[str, list[bytes]]
) -> None:
    code, details, _ = ads.call(*stream)
    assert code in (grpc.StatusCode.OK, INVALID), (code, details, stream)


def test_a_normal_client_is_served_after_the_fuzzing(ads: Ads) -> None:
    code, _, received = ads.call(SOTW, [sotw(TypeUrl.CLUSTER)])
    assert (code, received) == (grpc.StatusCode.OK, 1)
    errors = [r for r in ads.log.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
