"""No secret value reaches a page or an API answer: an app whose chart gets a password from a
SOPS-encrypted values file (decrypted in memory with the server's age key) renders it into
a Secret; every page and API response is read before the sync, after it, and after the live
Secret drifts, and none holds the plaintext (nor its base64), the drifted live value, or the
login tokens of the API."""

from __future__ import annotations

import base64
import time
from pathlib import Path

from meshpilot.gitops.render.sops.age import parse_identities
from tests.gitops_fixtures import new_age_key, sops_encrypt
from tests.unit.gitops.auth.env import serving
from tests.unit.gitops.controller.env import app_manifest
from tests.unit.ui.env import ADMIN_PASSWORD, Browser, make_ui_world

PLAIN = "s3cr3t-from-sops-4711"
DRIFTED = "drifted-live-value-0815"
CHART = "apiVersion: v2\nname: shop\nversion: 0.1.0\n"
SECRET_TEMPLATE = """\
apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: {{ .Values.password }}
"""
SERVICE_TEMPLATE = """\
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  ports:
  - {port: 5432, name: tcp-db}
"""


def _forbidden(text: str) -> list[str]:
    needles = [PLAIN, DRIFTED, ADMIN_PASSWORD]
    needles += [base64.b64encode(n.encode()).decode() for n in (PLAIN, DRIFTED)]
    return [n for n in needles if n in text]


def test_no_secret_value_on_any_page_or_api_answer(tmp_path: Path) -> None:
    key = new_age_key()
    files = {
        "namespaces/shop/Chart.yaml": CHART,
        "namespaces/shop/templates/secret.yaml": SECRET_TEMPLATE,
        "namespaces/shop/templates/svc.yaml": SERVICE_TEMPLATE,
        "namespaces/shop/common-values-shop.secret.yaml": sops_encrypt(
            {"password": PLAIN}, [key.recipient]
        ),
    }
    world = make_ui_world(
        tmp_path, files, age_identities=parse_identities(key.identity, "test key")
    )
    app = app_manifest(str(world.repo.path), path=".")
    app["spec"]["source"]["plugin"] = {"name": "meshpilot-layered"}
    world.put(app)
    with serving(world, run_controller=True) as served:
        browser = Browser(served.base)
        browser.login("admin", ADMIN_PASSWORD)
        token = browser.cookie.partition("=")[2]
        api = "/api/v1/applications/argocd/shop"

        def read_everything() -> None:
            for path in ("/applications", "/applications/argocd/shop",
                         "/applications/argocd/shop/diff"):  # fmt: skip
                assert browser.get(path).status == 200, path
            browser.get("/applications/argocd/shop/events", read=8192)
            for path in ("/api/v1/applications", api, api + "/diff", api + "/history"):
                status, answer = served.call("GET", path, token=token)
                assert status == 200, (path, answer)
                browser.seen.append(str(answer))

        deadline = time.monotonic() + 30
        while "OutOfSync" not in browser.get("/applications/argocd/shop").body:
            assert time.monotonic() < deadline, browser.seen[-1]
            time.sleep(0.1)
        diff = browser.get("/applications/argocd/shop/diff").body
        assert "Secret shop/db" in diff and "password:" in diff  # the key, shown masked
        read_everything()

        browser.request("POST", "/applications/argocd/shop/sync", {"prune": "on"})
        while (
            'id="sync-status">Synced'
            not in browser.get("/applications/argocd/shop/events", read=8192).body
        ):
            assert time.monotonic() < deadline, browser.seen[-1]
            time.sleep(0.2)
        live = world.live("Secret", "db")
        # Synced: the live Secret holds the value (so the search below would find a leak).
        assert live is not None and _forbidden(str(live)), live
        read_everything()

        # Someone changes the live Secret: the diff shows that it differs, never the values.
        drifted = dict(live)
        drifted["data"] = {"password": base64.b64encode(DRIFTED.encode()).decode()}
        drifted.pop("stringData", None)
        world.put(drifted)
        while "OutOfSync" not in browser.get("/applications/argocd/shop").body:
            assert time.monotonic() < deadline, browser.seen[-1]
            time.sleep(0.1)
        diff = browser.get("/applications/argocd/shop/diff").body
        assert "Secret shop/db" in diff and 'class="changed"' in diff, diff
        read_everything()

    leaks = [(i, _forbidden(text)) for i, text in enumerate(browser.seen) if _forbidden(text)]
    assert not leaks, leaks
