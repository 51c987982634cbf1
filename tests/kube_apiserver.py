"""A stand-in Kubernetes API server for the kube:// store's tests (no kube-apiserver runs
here). It speaks the wire protocol the store uses, on loopback, with a bearer token:

    GET    .../<plural>                list: items + metadata.resourceVersion
    GET    .../<plural>?watch=1&resourceVersion=N&allowWatchBookmarks=true
                                       chunked JSON lines: ADDED/MODIFIED/DELETED/BOOKMARK;
                                       N older than the kept history: an ERROR event with a
                                       410 "Expired" Status, as the watch cache answers
    GET    .../<plural>/<name>         one object (404 NotFound Status)
    PATCH  ... application/apply-patch+yaml ?fieldManager=&force=&dryRun=All
                                       server-side apply, a simple model: the applied
                                       configuration is the object (status kept), the manager
                                       and its top-level fields in managedFields; a stale
                                       metadata.resourceVersion or (force unset) another
                                       manager's fields: 409 Conflict; a namespace that
                                       does not exist: 404 (`default` and `kube-system` do)
    DELETE .../<name>                  200 Success / 404

Paths: /api/v1/[namespaces/NS/]PLURAL[/NAME] and /apis/GROUP/VERSION/[...]. Every resource
path is served (no discovery, no schemas: `write_raw` stores anything, like kubectl on a
CRD without a schema). Test hooks: `drop_watches()`, `bookmark()`, `compact()`.
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

__all__ = ["KubeApiServer", "kube_fixture"]

Obj = dict[str, Any]
Coll = tuple[str, str]  # (apiVersion, plural)


@dataclass
class Event:
    rv: int
    coll: Coll
    type: str
    obj: Obj


@dataclass
class KubeApiServer:
    directory: Path
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    objects: dict[Coll, dict[tuple[str, str], Obj]] = field(default_factory=dict)
    history: list[Event] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, url, type
    rv: int = 100
    oldest: int = 100  # a watch from before this resourceVersion is 410 Gone
    watch_generation: int = 0  # bumped by drop_watches()
    bookmark_generation: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def start(self) -> KubeApiServer:
        server = self

        class Handler(_Handler):
            api = server

        with self.cond:
            for ns in ("default", "kube-system"):  # as a new cluster has them
                self._store(("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": ns}})  # fmt: skip
            self.oldest = self.rv
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": self.token}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "tester"}}],
        }  # fmt: skip
        self.directory.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.write_text(yaml.safe_dump(config))
        return self

    def stop(self) -> None:
        self.drop_watches()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    # -- test hooks ----------------------------------------------------------------------

    def drop_watches(self) -> None:
        """Cut every open watch stream (no final chunk), as a restarted server would."""
        with self.cond:
            self.watch_generation += 1
            self.cond.notify_all()

    def bookmark(self) -> None:
        with self.cond:
            self.rv += 1  # other collections moved on meanwhile
            self.bookmark_generation += 1
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget the history: a watch from any older resourceVersion is 410 Gone."""
        with self.cond:
            self.rv += 1
            self.oldest = self.rv
            self.history.clear()

    def write_raw(self, api_version: str, plural: str, obj: Obj) -> None:
        """Store `obj` as it is, no validation (someone else's client, a CRD without a
        schema): an event for every watcher."""
        with self.cond:
            self._store((api_version, plural), copy.deepcopy(obj))

    def get(self, api_version: str, plural: str, namespace: str, name: str) -> Obj | None:
        with self.cond:
            return copy.deepcopy(self.objects.get((api_version, plural), {}).get((namespace, name)))

    # -- the model -----------------------------------------------------------------------

    def _store(self, coll: Coll, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        kind = "MODIFIED" if key in self.objects.setdefault(coll, {}) else "ADDED"
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[coll][key] = obj
        self.history.append(Event(self.rv, coll, kind, copy.deepcopy(obj)))
        self.cond.notify_all()
        return obj

    def delete(self, coll: Coll, namespace: str, name: str) -> Obj | None:
        obj = self.objects.get(coll, {}).pop((namespace, name), None)
        if obj is not None:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.history.append(Event(self.rv, coll, "DELETED", copy.deepcopy(obj)))
            self.cond.notify_all()
        return obj

    def apply(
        self, coll: Coll, ns: str, name: str, body: Obj, q: dict[str, str]
    ) -> tuple[int, Obj]:
        manager = q.get("fieldManager", "")
        if not manager:
            return 400, _status(400, "BadRequest", "PATCH requests must have fieldManager")
        if body.get("apiVersion") != coll[0] or not body.get("kind"):
            return 400, _status(400, "BadRequest", "apiVersion and kind must match the path")
        meta = body.get("metadata") or {}
        if meta.get("name") != name or (ns and meta.get("namespace", ns) != ns):
            return 400, _status(400, "BadRequest", "the name does not match the path")
        if ns and ("", ns) not in self.objects.get(("v1", "namespaces"), {}):
            return 404, _status(404, "NotFound", f'namespaces "{ns}" not found')
        old = self.objects.get(coll, {}).get((ns, name))
        old_meta = (old or {}).get("metadata", {})
        wanted = meta.get("resourceVersion")
        if wanted and wanted != old_meta.get("resourceVersion"):
            message = (
                f'Operation cannot be fulfilled on {coll[1]} "{name}": the object has '
                "been modified; please apply your changes to the latest version"
            )
            return 409, _status(409, "Conflict", message)
        managed = [m for m in old_meta.get("managedFields", []) if m.get("manager") != manager]
        if (
            managed
            and q.get("force") != "true"
            and any(m.get("operation") == "Apply" for m in managed)
        ):
            return 409, _status(
                409, "Conflict", f"Apply failed with conflicts: {managed[0]['manager']}"
            )
        new = copy.deepcopy(body)
        new_meta = new.setdefault("metadata", {})
        new_meta.pop("resourceVersion", None)
        if ns:
            new_meta["namespace"] = ns
        if old is not None and "status" in old and "status" not in new:
            new["status"] = copy.deepcopy(old["status"])
        fields = {f"f:{k}": {} for k in body if k not in ("apiVersion", "kind")}
        entry = {"manager": manager, "operation": "Apply", "apiVersion": coll[0],
                 "fieldsType": "FieldsV1", "fieldsV1": fields}  # fmt: skip
        new_meta["managedFields"] = [*managed, entry]
        for name_ in ("uid", "creationTimestamp"):
            new_meta[name_] = old_meta.get(name_) or (
                str(uuid.uuid4()) if name_ == "uid" else time.strftime("%Y-%m-%dT%H:%M:%SZ")
            )
        if old is not None and _same(old, new):
            return 200, copy.deepcopy(old)  # a no-op apply: no new resourceVersion
        if q.get("dryRun") == "All":
            new_meta["resourceVersion"] = str(self.rv + 1)
            return (201 if old is None else 200), new
        return (201 if old is None else 200), copy.deepcopy(self._store(coll, new))

    def events_after(self, coll: Coll, ns: str, rv: int) -> list[Event]:
        return [e for e in self.history if e.rv > rv and e.coll == coll and
                (not ns or e.obj["metadata"].get("namespace") == ns)]  # fmt: skip


def _same(a: Obj, b: Obj) -> bool:
    def strip(o: Obj) -> Obj:
        o = copy.deepcopy(o)
        for k in ("resourceVersion", "managedFields"):
            o["metadata"].pop(k, None)
        return o

    return strip(a) == strip(b)


def _status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


def _parse(path: str) -> tuple[Coll, str, str] | None:
    """(apiVersion, plural), namespace, name of a resource path."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        version, rest = "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    ns = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if not rest or len(rest) > 2:
        return None
    return (version, rest[0]), ns, (rest[1] if len(rest) == 2 else "")


class _Handler(BaseHTTPRequestHandler):
    api: KubeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _begin(self) -> tuple[Coll, str, str, dict[str, str]] | None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.api.requests.append((self.command, self.path, self.headers.get("Content-Type", "")))
        if self.headers.get("Authorization") != f"Bearer {self.api.token}":
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return None
        parsed = _parse(url.path)
        if parsed is None:
            self._send(404, _status(404, "NotFound", "the server could not find the resource"))
            return None
        coll, ns, name = parsed
        return coll, ns, name, query

    def do_GET(self) -> None:
        begun = self._begin()
        if begun is None:
            return
        coll, ns, name, q = begun
        api = self.api
        if name:
            obj = api.get(coll[0], coll[1], ns, name)
            if obj is None:
                self._send(404, _status(404, "NotFound", f'{coll[1]} "{name}" not found'))
            else:
                self._send(200, obj)
            return
        if q.get("watch") in ("1", "true"):
            self._watch(coll, ns, q)
            return
        with api.cond:
            items = [copy.deepcopy(o) for (o_ns, _), o in sorted(api.objects.get(coll, {}).items())
                     if not ns or o_ns == ns]  # fmt: skip
            rv = api.rv
        if "/" not in coll[0]:  # built-in kinds' list items carry no apiVersion/kind
            for item in items:
                item.pop("apiVersion", None)
                item.pop("kind", None)
        body = {"kind": "List", "apiVersion": coll[0], "metadata": {"resourceVersion": str(rv)},
                "items": items}  # fmt: skip
        self._send(200, body)

    def _watch(self, coll: Coll, ns: str, q: dict[str, str]) -> None:
        api = self.api
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        since = int(q.get("resourceVersion") or 0)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        deadline = time.monotonic() + int(q.get("timeoutSeconds") or 1800)
        with api.cond:
            generation, marks = api.watch_generation, api.bookmark_generation
            if since < api.oldest:
                status = _status(
                    410, "Expired", f"too old resource version: {since} ({api.oldest})"
                )
                self._chunk({"type": "ERROR", "object": status})
                self._end()
                return
        try:
            while time.monotonic() < deadline:
                with api.cond:
                    if api.watch_generation != generation:
                        self.close_connection = True
                        return  # dropped: no final chunk
                    events = api.events_after(coll, ns, since)
                    mark = bookmarks and api.bookmark_generation != marks
                    marks, rv = api.bookmark_generation, api.rv
                    if not events and not mark:
                        api.cond.wait(0.5)
                        continue
                for event in events:
                    self._chunk({"type": event.type, "object": event.obj})
                    since = event.rv
                if mark and not events:
                    obj = {"kind": "Bookmark", "apiVersion": coll[0],
                           "metadata": {"resourceVersion": str(rv)}}  # fmt: skip
                    self._chunk({"type": "BOOKMARK", "object": obj})
                    since = rv
            self._end()
        except OSError:
            self.close_connection = True

    def _chunk(self, event: Obj) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_PATCH(self) -> None:
        begun = self._begin()
        if begun is None:
            return
        coll, ns, name, q = begun
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Type") != "application/apply-patch+yaml":
            self._send(415, _status(415, "UnsupportedMediaType", "only server-side apply here"))
            return
        try:
            body = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            self._send(400, _status(400, "BadRequest", str(exc)))
            return
        with self.api.cond:
            code, out = self.api.apply(coll, ns, name, body, q)
        self._send(code, out)

    def do_DELETE(self) -> None:
        begun = self._begin()
        if begun is None:
            return
        coll, ns, name, q = begun
        with self.api.cond:
            present = self.api.objects.get(coll, {}).get((ns, name))
            obj = present if q.get("dryRun") == "All" else self.api.delete(coll, ns, name)
        if obj is None:
            self._send(404, _status(404, "NotFound", f'{coll[1]} "{name}" not found'))
        else:
            self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})


@pytest.fixture(name="kube")
def kube_fixture(tmp_path: Path) -> Iterator[KubeApiServer]:
    server = KubeApiServer(tmp_path / "kube").start()
    try:
        yield server
    finally:
        server.stop()
