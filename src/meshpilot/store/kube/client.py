"""Requests to the API server through the `kubernetes` client: its kubeconfig loader (or
in-cluster config), authentication and TLS, with paths built here (kinds.py) so that every
kind, core or custom, goes the same way. Answers are plain JSON dicts."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from meshpilot.store.kube.target import KubeError, KubeTarget

__all__ = ["FIELD_MANAGER", "KubeApiError", "KubeClient", "WatchStream"]

FIELD_MANAGER = "meshpilot"
_TIMEOUT = 30.0
# One watch per kind runs at a time, beside the writes: more than urllib3's default pool.
_POOL = 64


class KubeApiError(KubeError):
    """The API server answered with an error Status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status, self.reason = status, reason
        super().__init__(message)


@dataclass
class WatchStream:
    """An open watch: its events as dicts; `close()` ends it from another thread."""

    response: Any

    def events(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self.response:
                if line.strip():
                    yield json.loads(line)
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"the watch stream was cut: {exc}") from exc

    def close(self) -> None:
        """Release the connection (the thread that reads it)."""
        with contextlib.suppress(Exception):
            self.response.close()

    def interrupt(self) -> None:
        """End the stream from another thread: shut its socket down (closing the response
        would wait for the reader's lock), so the reader sees the end of the stream."""
        sock = getattr(getattr(self.response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class KubeClient:
    def __init__(self, target: KubeTarget) -> None:
        self.target = target
        self.api = _api_client(target)

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, Any]]:
        """The status and JSON body of one request (errors are returned, not raised)."""
        response = self._send(method, path, query, body, content_type, _TIMEOUT)
        raw = response.read()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"message": raw.decode(errors="replace")[:200]}
        return response.status, data if isinstance(data, dict) else {}

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> WatchStream:
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        response = self._send("GET", path, query, None, None, (_TIMEOUT, timeout_seconds + 30))
        if response.status != 200:
            raw = response.read()
            raise api_error(response.status, _json(raw), path)
        return WatchStream(response.response)

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None,
        body: Any,
        content_type: str | None,
        timeout: Any,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        try:
            _, url, headers, body, _ = self.api.param_serialize(
                method, path, query_params=query or [], header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            return self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=timeout)  # fmt: skip
        except (urllib3.exceptions.HTTPError, OSError, k8s.ApiException) as exc:
            raise KubeError(f"{self.target.display()} ({self.server}): {_reason(exc)}") from exc


def api_error(status: int, data: dict[str, Any], what: str) -> KubeApiError:
    reason = str(data.get("reason") or "")
    message = str(data.get("message") or reason or f"HTTP {status}")
    return KubeApiError(status, reason, f"{what}: {message} ({status} {reason})".strip())


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _reason(exc: Exception) -> str:
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return f"cannot reach the API server: {exc.reason}"
    return str(exc) or type(exc).__name__


def _api_client(target: KubeTarget) -> Any:
    """An ApiClient from the kubeconfig (the context named, or its current one); without
    a kubeconfig and a context, the pod's service account (in-cluster)."""
    configuration = k8s.Configuration()
    configuration.connection_pool_maxsize = _POOL
    try:
        return k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(target.kubeconfig) if target.kubeconfig else None,
            context=target.context,
            client_configuration=configuration,
        )
    except (ConfigException, OSError) as exc:
        if target.context is not None or target.kubeconfig is not None:
            raise KubeError(f"{target.display()}: {exc}") from exc
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except ConfigException as inner:
            raise KubeError(
                f"kube://: no kubeconfig ({exc}) and not in a cluster ({inner})"
            ) from inner
        return k8s.ApiClient(configuration)
