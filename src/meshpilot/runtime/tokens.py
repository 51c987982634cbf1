"""Pod tokens: what kubelet's projected service account token is in a Kubernetes pod.

The runtime asks the control plane's token authority (the key in its CA dir) for a token
naming the pod's namespace, service account and name, and writes it into the pod's private
directory, 0600 in a 0700 directory, where the pod's agent reads it (`--token-file`) to
prove its identity to the CA. The token value is a secret: it is never logged or returned
in an error.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from meshpilot.security.files import ensure_private_dir, write_private
from meshpilot.security.tokens import DEFAULT_TOKEN_TTL, issue_token

__all__ = ["TOKEN_PATH", "project_token"]

# Istio's path for the istio-ca token, relative to the pod's directory.
TOKEN_PATH = Path("var/run/secrets/tokens/istio-token")


def project_token(
    ca_dir: Path,
    pod_dir: Path,
    namespace: str,
    service_account: str,
    pod: str,
    ttl: dt.timedelta = DEFAULT_TOKEN_TTL,
) -> Path:
    """Issue the pod's token and write it to `<pod_dir>/var/run/secrets/tokens/istio-token`
    (0600, directory 0700, owned by whoever runs this: the agent reading it runs as the
    same user or root); returns the file's path."""
    target = pod_dir / TOKEN_PATH
    ensure_private_dir(target.parent)
    write_private(target, issue_token(ca_dir, namespace, service_account, pod, ttl).encode())
    return target
