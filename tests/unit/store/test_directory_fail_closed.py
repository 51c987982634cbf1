"""A security policy file of a directory store edited by hand into something invalid: a
handle that read it before keeps the last good version; a handle that never saw a good one
serves its fail-closed stand-in (config/fail_closed.py), never nothing."""

from __future__ import annotations

from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.store.directory import DirectoryStore

POLICY = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-sleep, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  rules:
  - from:
    - source: {principals: [cluster.local/ns/foo/sa/sleep]}
"""
KEY = ConfigKey(Kind.AUTHORIZATION_POLICY, "foo", "allow-sleep")


def test_hand_edited_invalid_policy_fails_closed_without_a_last_good_version(
    tmp_path: Path,
) -> None:
    writer = DirectoryStore(tmp_path / "live")
    writer.apply(read_text(POLICY, "in.yaml").documents)
    good = writer.snapshot().objects[KEY]
    [path] = (tmp_path / "live").rglob("allow-sleep.yaml")
    path.write_text(path.read_text().replace("principals:", "principalz:"))
    writer.refresh()
    assert writer.snapshot().objects[KEY].model == good.model  # its last good version
    fresh = DirectoryStore(tmp_path / "live").snapshot()
    stand_in = fresh.objects[KEY]
    assert stand_in.fail_closed.endswith("unknown field 'principalz'")
    assert stand_in.model.spec.action == "DENY"
    [error] = [d for d in fresh.diagnostics if d.name == "allow-sleep"]
    assert error.message.endswith("is denied until it is fixed")
