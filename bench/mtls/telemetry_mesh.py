"""B6 with telemetry on (`--telemetry`): what issue 23 asks to measure. Istio's standard
metrics (defaultProviders.metrics: prometheus: the stats access logger and the peer header
exchange on both sidecars), access logs of every request (meshConfig accessLogFile
/dev/stdout, Istio's default text format; the bench's Envoys write them to /dev/null, so
formatting is paid and no disk is) and Telemetry tracing at 1% to a zipkin provider (a
Service without endpoints: spans are built, B3 headers added, the reports dropped)."""

from __future__ import annotations

__all__ = ["TELEMETRY_YAML"]

TELEMETRY_YAML = """\
---
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    accessLogFile: /dev/stdout
    defaultProviders:
      metrics: [prometheus]
    extensionProviders:
    - name: zipkin
      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}
---
apiVersion: v1
kind: Service
metadata: {name: zipkin, namespace: istio-system}
spec:
  clusterIP: 10.96.9.11
  selector: {app: zipkin}
  ports: [{name: http-zipkin, port: 9411}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing:
  - providers: [{name: zipkin}]
    randomSamplingPercentage: 1
"""
