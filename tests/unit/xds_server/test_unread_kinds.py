"""GitOps status writes land in the store discovery serves; they must not hold back pushes."""

from __future__ import annotations

from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.settings import Settings
from meshpilot.store import FileStore
from meshpilot.store.base import ChangeEvent
from meshpilot.xds.server import DiscoveryServer

SERVICE = """apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ports: [{name: http, port: 8080}]
"""


def _server(tmp: Path) -> DiscoveryServer:
    (tmp / "svc.yaml").write_text(SERVICE)
    store = FileStore([tmp])
    store.load()
    return DiscoveryServer(store, Settings())


def test_application_status_writes_do_not_enqueue_or_restart_a_push(tmp_path: Path) -> None:
    server = _server(tmp_path)
    app = ConfigKey(Kind.APPLICATION, "argocd", "web")
    project = ConfigKey(Kind.APP_PROJECT, "argocd", "default")
    server.on_change(ChangeEvent(frozenset({app, project}), 2))
    assert server.debouncer.pending is None

    vs = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")
    server.on_change(ChangeEvent(frozenset({vs, app}), 3))
    pending = server.debouncer.pending
    assert pending is not None and pending.configs_updated == frozenset({vs})
