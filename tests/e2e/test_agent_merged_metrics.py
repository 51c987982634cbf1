"""The agent's merged Prometheus endpoint (`:15020/stats/prometheus`, Istio's agent) with the
real Envoy: Envoy's stats, the agent's own metrics and the app's, scraped per its original
prometheus.io annotations (ISTIO_PROMETHEUS_ANNOTATIONS); an app that stops answering is
counted and the rest still served; bad annotations stop the agent with a clear message."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.agent_harness import AgentFactory, agent_factory, http_get, wait_for

from meshpilot.runtime.ports import free_ports

pytestmark = pytest.mark.envoy

APP_METRICS = '# TYPE app_orders_total counter\napp_orders_total{shop="main"} 7\n'


class _App(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = self.path == "/custom/metrics"
        body = APP_METRICS.encode() if found else b"not found\n"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, 1.0)


@pytest.fixture
def app() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _App)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _annotations(port: int) -> str:
    return f'{{"scrape":"true","port":"{port}","path":"/custom/metrics"}}'


def _merged(port: int) -> str:
    status, body = http_get(port, "/stats/prometheus", timeout=10)
    assert status == 200, body
    return body


def test_envoys_agents_and_apps_metrics_in_one_exposition(
    start_agent: AgentFactory, app: http.server.HTTPServer
) -> None:
    port = app.server_address[1]
    assert isinstance(port, int)
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--prometheus-annotations", _annotations(port)
    )
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    body = wait_for(lambda: http_get(agent.ports.agent_status, "/stats/prometheus")[1], "metrics")
    lines = body.splitlines()
    assert any(line.startswith("envoy_server_uptime") for line in lines)  # Envoy's
    assert "# TYPE meshpilot_task_up gauge" in lines  # the agent's own
    assert 'app_orders_total{shop="main"} 7' in lines  # the app's
    assert "istio_agent_app_scrape_errors_total 0" in lines

    app.shutdown()
    app.server_close()
    body = _merged(agent.ports.agent_status)
    assert "app_orders_total" not in body and "envoy_server_uptime" in body
    assert "istio_agent_app_scrape_errors_total 1" in body.splitlines()


def test_no_app_annotations_serves_envoy_and_the_agent(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar", "--interception-mode", "NONE")
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    body = _merged(agent.ports.agent_status)
    assert "envoy_server_uptime" in body and "meshpilot_task_up" in body


def test_bad_annotations_stop_the_agent_with_a_clear_message() -> None:
    (status,) = free_ports(1)
    code = "import sys; from meshpilot.cli.main import main; sys.argv[0] = 'meshpilot'; main()"
    argv = [sys.executable, "-c", code, "proxy", "sidecar", "--pod", "a.default"]
    argv += ["--status-port", str(status), "--interception-mode", "NONE"]
    env_bad = {"ISTIO_PROMETHEUS_ANNOTATIONS": '{"scrape":"true","port":"http"}'}
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, **env_bad}
    )
    assert result.returncode != 0
    assert "ISTIO_PROMETHEUS_ANNOTATIONS: invalid port 'http'" in result.stderr
    assert "Traceback" not in result.stderr
