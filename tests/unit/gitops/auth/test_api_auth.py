"""The GitOps API refuses callers it cannot identify (Argo CD's argocd-server rules): no
token, a self-asserted user header, a wrong password, a forged, expired, revoked or logged
out token all get 401; a login's session and account API tokens work until revoked;
anonymous access only when argocd-cm enables it, under `policy.default`."""

from __future__ import annotations

import base64
import json
import stat
import time
from pathlib import Path

from meshpilot.gitops.auth import Claims, sign, verify
from tests.unit.gitops.auth.env import config_map, put, serving
from tests.unit.gitops.controller.env import app_manifest, make_world

APPS = "/api/v1/applications"


def test_no_token_and_self_asserted_user_headers_get_401(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    put(world, app_manifest(str(world.repo.path)))
    with serving(world) as api:
        status, answer = api.call("GET", APPS)
        assert status == 401 and "no session information" in answer["message"]
        for header in ("X-Meshpilot-User", "X-User", "X-Forwarded-User", "Remote-User"):
            headers = {header: "admin", "X-Meshpilot-Groups": "role:admin"}
            assert api.call("GET", APPS, headers=headers)[0] == 401, header
            status, _ = api.call("POST", APPS + "/argocd/shop/sync", {}, headers=headers)
            assert status == 401, header
        assert (
            api.call("GET", APPS + "/argocd/shop", headers={"Authorization": "Basic x"})[0] == 401
        )
        assert api.call("GET", "/api/v1/no/such/path")[0] == 401  # closed before routing
        for spelled in ("//api/v1/applications", "/api/%761/applications/", "/API/v1/x"):
            assert api.call("GET", spelled)[0] == 401, spelled
        assert api.call("GET", "/healthz")[0] == 200  # not the API


def test_wrong_password_is_401_and_a_login_session_works(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    put(world, app_manifest(str(world.repo.path)))
    with serving(world) as api:
        initial = api.server.auth.ensure_admin_password()
        assert initial is not None and api.server.auth.ensure_admin_password() is None  # once
        assert stat.S_IMODE(Path(initial).stat().st_mode) == 0o600
        password = Path(initial).read_text().strip()
        assert len(password) == 16
        # argocd-secret holds the bcrypt hash, never the password
        secret = (tmp_path / "store" / "Secret" / "argocd" / "argocd-secret.yaml").read_text()
        assert password not in secret
        stored = world.store.manifest(_key("Secret", "argocd-secret"))
        assert stored is not None
        assert base64.b64decode(stored["data"]["admin.password"]).startswith(b"$2b$10$")

        wrong = {"username": "admin", "password": password + "x"}
        status, answer = api.call("POST", "/api/v1/session", wrong)
        assert (status, answer["message"]) == (401, "invalid username or password")
        nobody = {"username": "nobody", "password": password}
        assert api.call("POST", "/api/v1/session", nobody) == (status, answer)

        token = api.login("admin", password)
        status, listed = api.call("GET", APPS, token=token)
        assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["shop"]
        assert api.call("GET", "/api/v1/session/userinfo", token=token) == (
            200,
            {"loggedIn": True, "username": "admin"},
        )
        # a header naming someone else changes nothing: the token says who
        status, _ = api.call(
            "GET", APPS + "/argocd/shop", token=token, headers={"X-Meshpilot-User": "bob"}
        )
        assert status == 200


def test_forged_expired_and_logged_out_tokens_get_401(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    with serving(world) as api:
        token = api.admin_token()
        key = api.server.auth.state.key
        now = int(time.time())
        forged = sign(Claims("admin:login", "x", now, now + 600), b"k" * 32)
        status, answer = api.call("GET", APPS, token=forged)
        assert status == 401 and "signature is invalid" in answer["message"]
        head, payload, mac = token.split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
        claims["sub"] = "alice:login"
        tampered = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        assert api.call("GET", APPS, token=f"{head}.{tampered}.{mac}")[0] == 401
        none_alg = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
        assert api.call("GET", APPS, token=f"{none_alg}.{payload}.")[0] == 401
        assert api.call("GET", APPS, token="not-a-token")[0] == 401

        expired = sign(Claims("admin:login", "y", now - 7200, now - 3600), key)
        status, answer = api.call("GET", APPS, token=expired)
        assert status == 401 and "expired" in answer["message"]

        assert api.call("DELETE", "/api/v1/session", token=token) == (200, {})
        status, answer = api.call("GET", APPS, token=token)
        assert status == 401 and "logged out" in answer["message"]


def test_account_api_tokens_work_until_deleted(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    put(
        world,
        app_manifest(str(world.repo.path)),
        config_map("argocd-cm", {"accounts.ci": "apiKey", "accounts.viewer": "login"}),
        config_map("argocd-rbac-cm", {"policy.csv": "g, ci, role:readonly\n"}),
    )
    with serving(world) as api:
        admin = api.admin_token()
        status, made = api.call(
            "POST", "/api/v1/account/ci/token", {"expiresIn": 3600}, token=admin
        )
        assert status == 200 and made["exp"] - made["iat"] == 3600
        ci = made["token"]
        status, listed = api.call("GET", APPS, token=ci)
        assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["shop"]
        status, answer = api.call("POST", APPS + "/argocd/shop/sync", {}, token=ci)
        assert status == 403
        assert answer["message"] == "permission denied: applications, sync, default/shop, sub: ci"
        # ci may manage its own tokens; it cannot make admin's
        assert api.call("GET", "/api/v1/account/ci", token=ci)[1]["tokens"][0]["id"] == made["id"]
        status, _ = api.call("POST", "/api/v1/account/viewer/token", {}, token=ci)
        assert status == 403
        status, answer = api.call("POST", "/api/v1/account/viewer/token", {}, token=admin)
        assert (status, answer["message"]) == (
            400,
            "account 'viewer' does not have apiKey capability",
        )

        status, _ = api.call("DELETE", f"/api/v1/account/ci/token/{made['id']}", token=admin)
        assert status == 200
        status, answer = api.call("GET", APPS, token=ci)
        assert status == 401 and "revoked" in answer["message"]

        again = api.call("POST", "/api/v1/account/ci/token", {}, token=admin)[1]["token"]
        assert api.call("GET", APPS, token=again)[0] == 200
        put(
            world,
            config_map("argocd-cm", {"accounts.ci": "apiKey", "accounts.ci.enabled": "false"}),
        )
        status, answer = api.call("GET", APPS, token=again)
        assert status == 401 and "disabled" in answer["message"]


def test_anonymous_access_only_when_enabled_and_under_policy_default(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    put(
        world,
        app_manifest(str(world.repo.path)),
        config_map("argocd-rbac-cm", {"policy.default": "role:readonly"}),
    )
    with serving(world) as api:
        assert api.call("GET", APPS)[0] == 401
        put(world, config_map("argocd-cm", {"users.anonymous.enabled": "true"}))
        status, listed = api.call("GET", APPS)
        assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["shop"]
        status, answer = api.call(
            "POST", APPS + "/argocd/shop/sync", {}, headers={"X-Meshpilot-User": "admin"}
        )
        assert status == 403
        assert (
            answer["message"]
            == "permission denied: applications, sync, default/shop, sub: anonymous"
        )
        assert api.call("GET", APPS, token="garbage")[0] == 401  # a bad token is not anonymous


def test_project_role_token_is_limited_to_its_project(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    repo = str(world.repo.path)
    team_app = app_manifest(repo, name="team-app")
    team_app["spec"]["project"] = "team-a"
    project = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "team-a", "namespace": "argocd"},
        "spec": {
            "sourceRepos": ["*"],
            "destinations": [{"server": "*", "namespace": "*"}],
            "roles": [{"name": "ci", "policies": [
                "p, proj:team-a:ci, applications, get, team-a/*, allow",
                "p, proj:team-a:ci, applications, get, default/*, allow",  # not its project
            ]}],
        },
    }  # fmt: skip
    put(world, project, app_manifest(repo), team_app)
    with serving(world) as api:
        admin = api.admin_token()
        path = "/api/v1/projects/team-a/roles/ci/token"
        status, made = api.call("POST", path, {"id": "ci-1"}, token=admin)
        assert status == 200 and made["id"] == "ci-1" and "exp" not in made
        stored = world.store.manifest(_key("AppProject", "team-a"))
        assert stored is not None
        assert [t["id"] for t in stored["spec"]["roles"][0]["jwtTokens"]] == ["ci-1"]
        token = made["token"]
        status, listed = api.call("GET", APPS, token=token)
        assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["team-app"]
        assert api.call("GET", APPS + "/argocd/team-app", token=token)[0] == 200
        status, answer = api.call("GET", APPS + "/argocd/shop", token=token)
        assert status == 403 and answer["message"].endswith("sub: proj:team-a:ci")
        # a role token cannot mint more tokens
        assert api.call("POST", path, {}, token=token)[0] == 403
        assert api.call("DELETE", path + "/ci-1", token=admin)[0] == 200
        status, answer = api.call("GET", APPS, token=token)
        assert status == 401 and "revoked" in answer["message"]


def _key(kind: str, name: str):  # type: ignore[no-untyped-def]
    from meshpilot.config.keys import ConfigKey
    from meshpilot.config.kinds import Kind

    return ConfigKey(Kind(kind), "argocd", name)


def test_session_lifetime_and_a_password_change_ends_sessions(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    put(world, config_map("argocd-cm", {"users.session.duration": "1h"}))
    with serving(world) as api:
        token = api.admin_token()
        claims = verify(token, api.server.auth.state.key)
        assert (claims.sub, claims.exp - claims.iat) == ("admin:login", 3600)
        password = api.server.auth.state.initial_password_file.read_text().strip()
        change = {"currentPassword": "wrong-one", "newPassword": "new-admin-pw"}
        status, answer = api.call("PUT", "/api/v1/account/password", change, token=token)
        assert (status, answer["message"]) == (400, "current password does not match")
        change["currentPassword"] = password
        change["newPassword"] = "short"
        status, answer = api.call("PUT", "/api/v1/account/password", change, token=token)
        assert (status, answer["message"]) == (
            400,
            "the new password must be 8 to 32 characters long",
        )
        change["newPassword"] = "new-admin-pw"
        time.sleep(1.1)  # passwordMtime has a one-second grain, as Argo CD's
        assert api.call("PUT", "/api/v1/account/password", change, token=token) == (200, {})
        status, answer = api.call("GET", APPS, token=token)
        assert status == 401 and "password has changed" in answer["message"]
        assert api.call("GET", APPS, token=api.login("admin", "new-admin-pw"))[0] == 200


def test_repeated_failed_logins_lock_the_name_and_role_names_are_no_accounts(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path)
    put(world, config_map("argocd-cm", {"accounts.role:admin": "login, apiKey"}))
    with serving(world) as api:
        api.server.auth.ensure_admin_password()
        password = api.server.auth.state.initial_password_file.read_text().strip()
        wrong = {"username": "admin", "password": "guess"}
        for _ in range(5):
            assert api.call("POST", "/api/v1/session", wrong)[1]["message"] == (
                "invalid username or password"
            )
        right = {"username": "admin", "password": password}
        status, answer = api.call("POST", "/api/v1/session", right)
        assert status == 401 and "too many failed logins" in answer["message"]
        listed = api.call("GET", "/api/v1/account", token=api.login_after_reset("admin", password))
        assert [a["name"] for a in listed[1]["items"]] == ["admin"]  # not `role:admin`
