"""The runtime's pod tokens: issued by the control plane's token key, private to the pod."""

from __future__ import annotations

import stat
from pathlib import Path

from meshpilot.runtime.tokens import TOKEN_PATH, project_token
from meshpilot.security.tokens import TokenAuthority


def test_token_is_private_and_names_the_pod(tmp_path: Path) -> None:
    ca_dir = tmp_path / "ca"
    path = project_token(ca_dir, tmp_path / "pod", "default", "reviews", "reviews-v1")
    assert path == tmp_path / "pod" / TOKEN_PATH
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    claims = TokenAuthority.open(ca_dir).verify(path.read_text())
    assert (claims.namespace, claims.service_account, claims.pod) == (
        "default", "reviews", "reviews-v1",
    )  # fmt: skip
