"""The GitOps API refuses bodies of the wrong shape with a 400 that names the field (never
a 500): the sync and rollback calls, and GitHub, GitLab and Bitbucket webhook payloads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.server import GitopsServer
from tests.unit.gitops.controller.env import app_manifest, make_world

APP = "/api/v1/applications/argocd/shop"
GITHUB = {"X-GitHub-Event": "push"}
GITLAB = {"X-Gitlab-Event": "Push Hook"}
BITBUCKET = {"X-Event-Key": "repo:push"}

CASES: list[tuple[str, dict[str, str], bytes, int, str]] = [
    (APP + "/sync", {}, b"[]", 400, "valid dictionary"),
    (APP + "/sync", {}, b'{"prune": "yes"}', 400, "field 'prune'"),
    (APP + "/sync", {}, b'{"dryRun": 1}', 400, "field 'dryRun'"),
    (APP + "/sync", {}, b'{"prun": true}', 400, "field 'prun': Extra inputs"),
    (APP + "/sync", {}, b'{"revision": ["main"]}', 400, "field 'revision'"),
    (APP + "/sync", {}, b'{"resources": [{"kind": "Service"}]}', 400, "field 'resources.0.name'"),
    (APP + "/sync", {}, b'{"resources": "all"}', 400, "field 'resources'"),
    (APP + "/sync", {}, b"[" * 10_000 + b"]" * 10_000, 400, "deeper than 64"),
    (APP + "/sync", {}, b"prune=true", 400, "not JSON"),
    (APP + "/rollback", {}, b"{}", 400, "field 'id': Field required"),
    (APP + "/rollback", {}, b'{"id": "one"}', 400, "field 'id'"),
    (APP + "/rollback", {}, b"null", 400, "valid dictionary"),
    ("/api/webhook", GITHUB, b'{"repository": "acme/shop"}', 400, "field 'repository'"),
    ("/api/webhook", GITHUB, b'{"ref": 7}', 400, "field 'ref'"),
    ("/api/webhook", GITHUB, b'{"commits": [{"added": 5}]}', 400, "field 'commits.0"),
    ("/api/webhook", GITHUB, b'{"head_commit": []}', 400, "field 'head_commit'"),
    ("/api/webhook", GITHUB, b"[]", 400, "not a JSON object"),
    ("/api/webhook", GITHUB, b'{"a":' * 100 + b"1" + b"}" * 100, 400, "deeper than 64"),
    ("/api/webhook", GITHUB, b"[" * 100_000, 400, "webhook payload"),
    (
        "/api/webhook",
        {"X-GitHub-Event": "pull_request"},
        b'{"pull_request": {"head": "abc"}}',
        400,
        "field 'pull_request.head'",
    ),
    ("/api/webhook", GITLAB, b'{"project": []}', 400, "field 'project'"),
    ("/api/webhook", GITLAB, b'{"commits": {"message": "x"}}', 400, "field 'commits'"),
    ("/api/webhook", BITBUCKET, b'{"push": {"changes": {"new": 1}}}', 400, "field 'push.changes'"),
    ("/api/webhook", BITBUCKET, b'{"repository": {"links": 3}}', 400, "field 'repository.links'"),
]


async def _post(port: int, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(
        f"POST {path} HTTP/1.1\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body
    )
    data = await reader.read()
    writer.close()
    status, _, payload = data.partition(b"\r\n\r\n")
    return int(status.split(b" ")[1]), json.loads(payload)


def _admin_token(server: GitopsServer) -> str:
    """A session of `admin`, with the initial password the server generates."""
    path = server.auth.ensure_admin_password() or str(server.auth.state.initial_password_file)
    return server.auth.login("admin", Path(path).read_text(encoding="utf-8").strip())


@pytest.mark.parametrize(("path", "headers", "body", "code", "reason"), CASES)
def test_wrong_body_shapes_get_400_naming_the_field(
    tmp_path: Path, path: str, headers: dict[str, str], body: bytes, code: int, reason: str
) -> None:
    world = make_world(tmp_path)
    server = GitopsServer(world.controller)

    async def scenario() -> None:
        world.put(app_manifest(str(world.repo.path)))
        key = ConfigKey(Kind.APPLICATION, "argocd", "shop")
        await world.until(lambda: world.store.get(key) is not None, what="the app is seen")
        port = await server.start("127.0.0.1", 0)
        try:
            sent = dict(headers)
            if path.startswith("/api/v1/"):  # an authenticated caller: the body is what is wrong
                sent["Authorization"] = f"Bearer {await asyncio.to_thread(_admin_token, server)}"
            status, answer = await _post(port, path, sent, body)
            assert (status, answer["code"]) == (code, code), answer
            assert reason in answer["message"], answer
        finally:
            await server.stop()

    asyncio.run(scenario())
