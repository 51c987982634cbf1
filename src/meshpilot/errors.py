"""Exceptions raised by meshpilot's library code.

    MeshpilotError                 base of everything below
    ├── InputError                 a file could not be read or parsed at all (names the file)
    │   └── YAMLInputError         (config/yaml_load.py) not YAML this reader takes: file:line
    ├── ProxyNotFoundError         --proxy names no Pod (or WorkloadEntry) in the input
    ├── EnvoyError                 the Envoy binary is missing or refused a configuration
    ├── CaptureConfigError         (capture/rules.py) istio-iptables flags that cannot work
    ├── CommandError               (runtime/commands.py) ip/iptables failed: command, stderr
    ├── HostSupportError           (runtime/commands.py) not root, or ip/iptables missing
    ├── NetworkError               (runtime/network.py) no free subnet, bridge problems
    ├── PodError                   (runtime/pod.py) a pod could not start or stop
    ├── ClusterError               (runtime/cluster.py) pods of one run: names, teardown
    └── HttpError                  (http1.py) a request refused with its 4xx status
        ├── BadRequest             400: unreadable request, not JSON, a body of the wrong shape
        ├── PayloadTooLarge        413
        └── UnsupportedMediaType   415

Exceptions raised by one module live in that module; all derive from MeshpilotError, so the
CLI prints them as one line.

Per-object problems in otherwise readable input are never raised: they are returned as
`config.diagnostics.Diagnostic` values so that the rest of the input keeps translating.
"""

from __future__ import annotations

__all__ = ["EnvoyError", "InputError", "MeshpilotError", "ProxyNotFoundError"]


class MeshpilotError(Exception):
    """Base class of meshpilot errors; the CLI prints these without a traceback."""


class InputError(MeshpilotError):
    """An input file could not be read or is not YAML/JSON at all."""


class ProxyNotFoundError(MeshpilotError):
    """The proxy named on the command line is not among the input objects."""


class EnvoyError(MeshpilotError):
    """Envoy could not be run, or rejected a configuration."""
