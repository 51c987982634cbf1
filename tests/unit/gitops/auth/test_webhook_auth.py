"""Webhooks verified as Argo CD verifies them when argocd-secret sets their secret: GitLab's
X-Gitlab-Token, Bitbucket Cloud's X-Hook-UUID, Bitbucket Server's X-Hub-Signature (HMAC
SHA-256), GitHub's X-Hub-Signature-256; refused with 401 without it or with a wrong one.
Through a real server; a verified Bitbucket Server push refreshes the app it concerns."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

from meshpilot.gitops.server import WebhookSecrets
from tests.unit.gitops.auth.env import Served, put, serving
from tests.unit.gitops.controller.env import app_manifest, make_world

SECRETS = WebhookSecrets(
    github="gh-secret",
    gitlab="gl-secret",
    bitbucket_uuid="{4b1f-uuid}",
    bitbucket_server="bbs-secret",
)


def _sig(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _hook(api: Served, body: bytes, headers: dict[str, str]) -> tuple[int, object]:
    return api.call("POST", "/api/webhook", raw=body, headers=headers)


def _bbs_push(repo: str) -> bytes:
    return json.dumps({
        "eventKey": "repo:refs_changed",
        "repository": {"slug": "mesh", "links": {"clone": [{"href": repo, "name": "http"}]}},
        "changes": [{"ref": {"id": "refs/heads/main", "displayId": "main", "type": "BRANCH"},
                     "toHash": "0" * 40, "type": "UPDATE"}],
    }).encode()  # fmt: skip


def test_each_webhook_kind_needs_its_secret_when_one_is_set(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    repo = str(world.repo.path)
    put(world, app_manifest(repo))
    gitlab = json.dumps({"ref": "refs/heads/main", "project": {"git_http_url": repo}}).encode()
    cloud = json.dumps({"repository": {"full_name": "acme/mesh"}, "push": {"changes": []}}).encode()
    github = json.dumps({"ref": "refs/heads/main", "repository": {"clone_url": repo}}).encode()
    server_push = _bbs_push(repo)
    with serving(world, SECRETS, run_controller=True) as api:
        deadline = time.monotonic() + 20
        while not world.controller.apps:  # the controller knows the app
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cases = [
            # (body, headers without the secret, the same with it, with a wrong one)
            (gitlab, {"X-Gitlab-Event": "Push Hook"}, {"X-Gitlab-Token": "gl-secret"},
             {"X-Gitlab-Token": "gl-secreT"}),
            (cloud, {"X-Event-Key": "repo:push"}, {"X-Hook-UUID": "{4b1f-uuid}"},
             {"X-Hook-UUID": "{other}"}),
            (server_push, {"X-Event-Key": "repo:refs_changed"},
             {"X-Hub-Signature": _sig("bbs-secret", server_push)},
             {"X-Hub-Signature": _sig("other", server_push)}),
            (github, {"X-GitHub-Event": "push"},
             {"X-Hub-Signature-256": _sig("gh-secret", github)},
             {"X-Hub-Signature-256": _sig("other", github)}),
        ]  # fmt: skip
        for body, base, right, wrong in cases:
            status, answer = _hook(api, body, base)
            assert status == 401, (base, answer)
            status, answer = _hook(api, body, {**base, **wrong})
            assert status == 401, (base, answer)
            status, answer = _hook(api, body, {**base, **right})
            assert status == 200, (base, answer)
        signed = {
            "X-Event-Key": "repo:refs_changed",
            "X-Hub-Signature": _sig("bbs-secret", server_push),
        }
        assert _hook(api, server_push, signed) == (200, {"refreshed": ["argocd/shop"]})
        # A signature over another body is no signature for this one.
        assert _hook(api, server_push.replace(b"UPDATE", b"ADD"), signed)[0] == 401


def test_without_secrets_webhooks_are_accepted_unverified(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    with serving(world) as api:
        body = _bbs_push(str(world.repo.path))
        assert _hook(api, body, {"X-Event-Key": "repo:refs_changed"}) == (200, {"refreshed": []})
        ping = {"X-Event-Key": "diagnostics:ping"}
        assert _hook(api, b"{}", ping) == (200, {"refreshed": []})
