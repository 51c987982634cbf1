"""A watched security policy that becomes invalid keeps its last good version; one that
never was valid is served as its fail-closed stand-in, and /debug/configz says which."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.store import FileStore
from meshpilot.xds.debug import configz

GOOD = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-sleep, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  rules:
  - from:
    - source: {principals: [cluster.local/ns/foo/sa/sleep]}
"""
BAD = GOOD.replace("principals:", "principalz:")
KEY = ConfigKey(Kind.AUTHORIZATION_POLICY, "foo", "allow-sleep")


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_invalid_policy_without_last_good_version_is_served_failing_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path / "policy.yaml", BAD)
    store = FileStore([tmp_path])
    with caplog.at_level(logging.ERROR):
        store.load()
    [logged] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.getMessage().startswith("AuthorizationPolicy foo/allow-sleep at ")
    assert logged.getMessage().endswith(
        "is invalid (spec.rules[0].from[0].source.principalz: unknown field 'principalz') and "
        "has no last good version; failing closed: every request to the workloads it selects "
        "is denied until it is fixed"
    )
    snapshot = store.snapshot()
    served = snapshot.objects[KEY]
    assert (
        served.fail_closed == "spec.rules[0].from[0].source.principalz: unknown field 'principalz'"
    )
    assert served.model.spec.action == "DENY"
    [error] = snapshot.diagnostics
    assert str(error).startswith(f"{tmp_path / 'policy.yaml'}:8: error: AuthorizationPolicy ")
    assert error.message.endswith("failing closed: every request to the workloads it selects "
                                  "is denied until it is fixed")  # fmt: skip
    page = configz(snapshot, None)
    assert page["failing_closed"] == [
        "AuthorizationPolicy foo/allow-sleep: "
        "spec.rules[0].from[0].source.principalz: unknown field 'principalz'"
    ]
    [entry] = [o for o in page["objects"] if o["name"] == "allow-sleep"]
    assert entry["fail_closed"] == served.fail_closed


def test_policy_that_becomes_invalid_keeps_its_last_good_version(tmp_path: Path) -> None:
    _write(tmp_path / "policy.yaml", GOOD)
    store = FileStore([tmp_path])
    store.load()
    good = store.snapshot().objects[KEY]
    _write(tmp_path / "policy.yaml", BAD)
    store.load()
    snapshot = store.snapshot()
    assert snapshot.objects[KEY] is good and KEY in snapshot.stale
    [error] = snapshot.diagnostics
    assert error.message == (
        "unknown field 'principalz'; the last good version is kept until it is fixed"
    )
    assert configz(snapshot, None)["failing_closed"] == []
    _write(tmp_path / "policy.yaml", GOOD.replace("sleep]", "curl]"))
    store.load()
    assert not store.snapshot().objects[KEY].fail_closed and not store.snapshot().diagnostics
