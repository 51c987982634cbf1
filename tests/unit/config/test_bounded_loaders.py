"""The other YAML/JSON entry points (SOPS and values files, notification settings, webhook
and request bodies) answer hostile input with their own error naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot import bounded_json
from meshpilot.gitops.notify import NotificationConfigError, load_notifications_file
from meshpilot.gitops.render.sops import SopsError, load_tree
from meshpilot.gitops.server.webhook import WebhookError, WebhookSecrets, parse_webhook
from meshpilot.http1 import BadRequest, Request
from tests.unit.config.test_yaml_hostile import LAUGHS

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LAUGHS, "values.yaml:4: invalid YAML/JSON in SOPS file: too many aliases"),
        ("a: &a {b: *a}\n", "values.yaml:1: invalid YAML/JSON in SOPS file: an anchor's value"),
        ("a:\n  b: !!bool maybe\n", "values.yaml:2: invalid YAML/JSON in SOPS file: !!bool"),
    ],
)
def test_sops_and_values_files(text: str, expected: str) -> None:
    with pytest.raises(SopsError) as caught:
        load_tree(text, "values.yaml")
    assert str(caught.value).startswith(expected), caught.value


def test_deep_json_values_file() -> None:
    with pytest.raises(SopsError, match=r"^values\.json:1: .*nested deeper than 200 levels"):
        load_tree(DEEP_JSON.decode(), "values.json")


def test_notifications_file(tmp_path: Path) -> None:
    path = tmp_path / "notify.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\ndata:\n  x: !!int many\n")
    with pytest.raises(NotificationConfigError, match=rf"^{path}:4: invalid YAML: !!int 'many'"):
        load_notifications_file(path)


def test_json_nested_past_the_limit_is_refused() -> None:
    assert bounded_json.loads("[" * 200 + "]" * 200) is not None
    for text in ("[" * 201 + "]" * 201, DEEP_JSON):
        with pytest.raises(ValueError, match="nested deeper than 200 levels"):
            bounded_json.loads(text)
    with pytest.raises(BadRequest, match="nests deeper than 64 levels"):
        Request("POST", "/api/v1/applications/x/sync", body=DEEP_JSON).json()


def test_webhook_with_a_deep_payload_is_a_400() -> None:
    headers = {"x-github-event": "push"}
    with pytest.raises(WebhookError, match="webhook payload nests deeper than 64") as caught:
        parse_webhook(headers, DEEP_JSON, WebhookSecrets())
    assert caught.value.status == 400
