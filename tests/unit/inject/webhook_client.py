"""A real HTTPS client of the injection webhook (verifies the certificate by name, as
kube-apiserver does with the caBundle), and the AdmissionReviews kube-apiserver sends."""

from __future__ import annotations

import asyncio
import base64
import copy
import http.client
import json
import socket
import ssl
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshpilot.inject.config import Injector
from meshpilot.inject.patch import apply_patch
from meshpilot.inject.webhook import InjectionWebhook
from meshpilot.security.ca import CertificateAuthority

JSON = dict[str, Any]


@dataclass
class Answer:
    status: int
    body: bytes

    @property
    def review(self) -> JSON:
        data: JSON = json.loads(self.body)
        return data

    def patched(self, pod: JSON) -> JSON:
        """`pod` with the answer's patch applied (the pod when there is none)."""
        response = self.review["response"]
        if "patch" not in response:
            return pod
        assert response["patchType"] == "JSONPatch"
        return apply_patch(pod, json.loads(base64.b64decode(response["patch"])))


class _Connection(http.client.HTTPSConnection):
    """To 127.0.0.1, with SNI and the certificate check for the Service name that
    kube-apiserver calls."""

    def __init__(self, port: int, context: ssl.SSLContext, server_name: str) -> None:
        super().__init__("127.0.0.1", port, timeout=30, context=context)
        self.tls, self.server_name = context, server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.server_name)


def post(
    port: int,
    root_pem: bytes,
    body: bytes,
    path: str = "/inject",
    content_type: str | None = "application/json",
    server_name: str = "istiod.istio-system.svc",
    method: str = "POST",
) -> Answer:
    conn = _Connection(port, ssl.create_default_context(cadata=root_pem.decode()), server_name)
    headers = {"Content-Type": content_type} if content_type else {}
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return Answer(response.status, response.read())
    finally:
        conn.close()


def post_head(port: int, root_pem: bytes, length: int) -> Answer:
    """A POST announcing `length` body bytes, without sending them: the answer that comes
    before any body is read (a refusal by size)."""
    context = ssl.create_default_context(cadata=root_pem.decode())
    head = (
        "POST /inject HTTP/1.1\r\nHost: istiod.istio-system.svc\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    data = b""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="istiod.istio-system.svc") as sock,
    ):
        sock.sendall(head.encode())
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return Answer(int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2])


def post_many(port: int, root_pem: bytes, bodies: list[bytes]) -> list[Answer]:
    """The bodies POSTed one after the other on one kept-alive connection, as kube-apiserver
    reuses its connection; fails if the server closes it in between."""
    conn = _Connection(port, ssl.create_default_context(cadata=root_pem.decode()), "localhost")
    answers = []
    try:
        for body in bodies:
            conn.request("POST", "/inject", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            answers.append(Answer(response.status, response.read()))
            assert response.getheader("Connection") == "keep-alive"
            sock = conn.sock
            assert sock is not None  # (http.client reconnects silently when it is None)
    finally:
        conn.close()
    return answers


def review(pod: JSON, version: str = "v1", namespace: str = "default") -> JSON:
    """An AdmissionReview for a pod CREATE, field for field as kube-apiserver sends it."""
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    resource = {"group": "", "version": "v1", "resource": "pods"}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {
            "username": "system:serviceaccount:kube-system:replicaset-controller",
            "uid": "0b2c3d4e",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
        "object": copy.deepcopy(pod),
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if pod.get("metadata", {}).get("name"):
        request["name"] = pod["metadata"]["name"]
    return {
        "kind": "AdmissionReview",
        "apiVersion": f"admission.k8s.io/{version}",
        "request": request,
    }


@asynccontextmanager
async def webhook(
    tmp: Path, injector: Callable[[], Injector] = Injector, revision: str = ""
) -> AsyncIterator[InjectionWebhook]:
    ca = await asyncio.to_thread(CertificateAuthority.open, tmp / "ca")
    server = InjectionWebhook(ca, injector, revision)
    await server.start("127.0.0.1", 0)
    try:
        yield server
    finally:
        await server.stop()
