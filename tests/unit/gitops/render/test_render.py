"""Rendering through the Renderer: real git repos, a real Helm chart (helm-python-sdk),
plugins as real processes, the seed team's layered layout with real SOPS/age files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from meshpilot.gitops.render import (
    AppContext,
    DirectoryOptions,
    HelmOptions,
    HelmParameter,
    LayeredOptions,
    ManifestParseError,
    PluginCommand,
    PluginError,
    PluginOptions,
    PluginSpec,
    Renderer,
    RendererConfig,
    RenderRequest,
    SecretDecryptError,
    SourceType,
)
from meshpilot.gitops.render.sops import parse_identities
from meshpilot.gitops.repo import RepoService
from tests.gitops_fixtures import GitRepo, make_repo, new_age_key, sops_encrypt

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: '{v}'\n"
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "values.yaml": "replicas: 1\nimage: {tag: v1}\npassword: ''\n",
    "templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n"
        "  replicas: {{ .Values.replicas | quote }}\n  tag: {{ .Values.image.tag | quote }}\n"
    ),
    "templates/secret.yaml": (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-db\n"
        "stringData:\n  password: {{ .Values.password | quote }}\n"
    ),
    "templates/NOTES.txt": "thanks\n",
    "crds/crd.yaml": (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata:\n  name: widgets.example.com\n"
    ),
}
APP = AppContext(name="web", namespace="shop")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _renderer(workdir: Path, **config: object) -> Renderer:
    return Renderer(
        RepoService(workdir / "cache"),
        RendererConfig(temp_dir=workdir / "tmp", chart_cache_dir=workdir / "charts", **config),  # type: ignore[arg-type]
    )


def _files(prefix: str, files: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}/{k}": v for k, v in files.items()}


def test_directory_recurse_include_exclude_and_list(workdir: Path) -> None:
    repo = make_repo(
        workdir / "repo",
        {
            "app/a.yaml": CM.format(name="a", v=1) + "---\n" + CM.format(name="b", v=2),
            "app/sub/c.yaml": CM.format(name="c", v=3),
            "app/sub/skip.yaml": CM.format(name="skip", v=0),
            "app/list.json": '{"apiVersion": "v1", "kind": "List", "items": ['
            '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}}]}',
            "app/notes.txt": "not yaml",
        },
    )
    renderer = _renderer(workdir)
    flat = renderer.render(RenderRequest(repo_url=str(repo.path), path="app"))
    assert [m.name for m in flat.manifests] == ["a", "b", "d"]
    assert flat.manifests[1].location == "app/a.yaml:8"
    deep = renderer.render(
        RenderRequest(
            repo_url=str(repo.path),
            path="app",
            directory=DirectoryOptions(
                recurse=True, include="{*.yaml,sub/*}", exclude="**/skip.yaml"
            ),
        )
    )
    assert [m.name for m in deep.manifests] == ["a", "b", "c"]


def test_invalid_yaml_names_file_and_line(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/bad.yaml": "apiVersion: v1\nkind: [\n  x: y\n"})
    with pytest.raises(ManifestParseError, match=r"app/bad\.yaml:\d+: invalid YAML"):
        _renderer(workdir).render(RenderRequest(repo_url=str(repo.path), path="app"))


def test_unchanged_commit_renders_once(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/a.yaml": CM.format(name="a", v=1)})
    renderer = _renderer(workdir)
    request = RenderRequest(repo_url=str(repo.path), revision="main", path="app")
    first, second = renderer.render(request), renderer.render(request)
    assert not first.cached and second.cached and second.manifests == first.manifests
    repo.commit({"app/a.yaml": CM.format(name="a", v=2)})
    third = renderer.render(request)
    assert not third.cached and third.manifests[0].data["data"]["v"] == "2"


def test_helm_values_order_parameters_crds_and_release(workdir: Path) -> None:
    repo = make_repo(
        workdir / "repo",
        {
            **_files("chart", CHART),
            "chart/values-a.yaml": "replicas: 2\nimage: {tag: a}\n",
            "chart/values-b.yaml": "replicas: 3\n",
        },
    )
    helm = HelmOptions(
        value_files=("values-a.yaml", "values-b.yaml"),
        values="image: {tag: inline}\n",
        parameters=(HelmParameter("replicas", "7"),),
    )
    result = _renderer(workdir).render(
        RenderRequest(
            repo_url=str(repo.path), path="chart", source_type=SourceType.HELM, app=APP, helm=helm
        )
    )
    kinds = [m.kind for m in result.manifests]
    assert kinds[0] == "CustomResourceDefinition" and "NOTES" not in str(result.manifests)
    cm = next(m for m in result.manifests if m.kind == "ConfigMap")
    assert cm.name == "web" and cm.namespace == "shop"
    assert cm.data["data"] == {"replicas": "7", "tag": "inline"}
    assert cm.file == "web/templates/cm.yaml"
    skip = _renderer(workdir).render(
        RenderRequest(
            repo_url=str(repo.path),
            path="chart",
            source_type=SourceType.HELM,
            app=APP,
            helm=HelmOptions(skip_crds=True, release_name="other"),
        )
    )
    assert "CustomResourceDefinition" not in [m.kind for m in skip.manifests]
    assert {m.name for m in skip.manifests} == {"other", "other-db"}


def test_helm_dependencies_come_from_the_chart_cache(workdir: Path) -> None:
    lib = {
        "Chart.yaml": "apiVersion: v2\nname: lib\nversion: 1.0.0\n",
        "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lib\n",
    }
    deps = "dependencies:\n- name: lib\n  version: 1.0.0\n  repository: file://../lib\n"
    chart = {**CHART, "Chart.yaml": CHART["Chart.yaml"] + deps}
    repo = make_repo(workdir / "repo", {**_files("chart", chart), **_files("lib", lib)})
    result = _renderer(workdir).render(
        RenderRequest(repo_url=str(repo.path), path="chart", source_type=SourceType.HELM, app=APP)
    )
    assert "lib" in [m.name for m in result.manifests]


def _plugin(script: str, timeout: float = 10.0) -> PluginSpec:
    return PluginSpec(
        name="gen",
        generate=PluginCommand(("/bin/sh", "-c"), (script,)),
        init=PluginCommand(("/bin/sh", "-c"), ("touch initialized",)),
        timeout_seconds=timeout,
    )


def _plugin_request(repo: GitRepo) -> RenderRequest:
    return RenderRequest(
        repo_url=str(repo.path),
        path="app",
        source_type=SourceType.PLUGIN,
        app=APP,
        plugin=PluginOptions("gen", env=(("COLOR", "blue"),)),
    )


def test_plugin_gets_argocd_environment_in_a_private_copy(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/x.txt": "x"})
    script = (
        "test -f initialized && test -f x.txt && touch generated && "
        "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s\\n"
        "data:\\n  ns: %s\\n  color: %s\\n  rev: %s\\n' "
        '"$ARGOCD_APP_NAME" "$ARGOCD_APP_NAMESPACE" "$ARGOCD_ENV_COLOR" "$ARGOCD_APP_REVISION"'
    )
    renderer = _renderer(workdir, plugins={"gen": _plugin(script)})
    result = renderer.render(_plugin_request(repo))
    (cm,) = result.manifests
    assert cm.name == "web"
    assert cm.data["data"] == {"ns": "shop", "color": "blue", "rev": result.commit}
    assert list((workdir / "tmp").iterdir()) == []


def test_plugin_failure_shows_exit_code_and_stderr(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/x.txt": "x"})
    renderer = _renderer(workdir, plugins={"gen": _plugin("echo broken chart >&2; exit 3")})
    with pytest.raises(PluginError, match="generate failed with exit code 3: broken chart"):
        renderer.render(_plugin_request(repo))
    assert list((workdir / "tmp").iterdir()) == []


def test_plugin_timeout_kills_it_and_cleans_up(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/x.txt": "x"})
    script = "echo plaintext > decrypted.yaml; sleep 30 & wait"
    renderer = _renderer(workdir, plugins={"gen": _plugin(script, timeout=0.5)})
    with pytest.raises(PluginError, match=r"timed out after 0\.5s"):
        renderer.render(_plugin_request(repo))
    assert list((workdir / "tmp").iterdir()) == []


def test_unknown_plugin(workdir: Path) -> None:
    repo = make_repo(workdir / "repo", {"app/x.txt": "x"})
    with pytest.raises(PluginError, match="plugin 'gen' is not configured"):
        _renderer(workdir).render(_plugin_request(repo))


def _layered_repo(workdir: Path, recipient: str) -> GitRepo:
    ns = "namespaces/namespace-a"
    cl = "clusters/dev-cluster/namespace-a"
    return make_repo(
        workdir / "repo",
        {
            **_files(ns, CHART),
            f"{ns}/common-values-a.yaml": "replicas: 2\nimage: {tag: common}\n",
            f"{ns}/common-values-a.secret.yaml": sops_encrypt(
                {"password": "common-pass-111", "image": {"tag": "common-secret"}}, [recipient]
            ),
            f"{cl}/dev-values-a.yaml": "replicas: 3\n",
            f"{cl}/dev-values-a.secret.yaml": sops_encrypt(
                {"password": "dev-pass-222"}, [recipient]
            ),
        },
    )


def _layered_request(repo: GitRepo) -> RenderRequest:
    return RenderRequest(
        repo_url=str(repo.path),
        source_type=SourceType.LAYERED,
        app=APP,
        layered=LayeredOptions(cluster="dev-cluster", namespace="namespace-a"),
    )


def _no_plaintext_left(workdir: Path, *secrets: str) -> None:
    """Nothing in the temp area, and no file anywhere in the test's tree (git repo, mirror
    cache, chart cache) holds a decrypted value."""
    assert list((workdir / "tmp").iterdir()) == []
    for path in workdir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), path


def test_layered_merges_in_order_and_leaves_no_plaintext(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = new_age_key()
    repo = _layered_repo(workdir, key.recipient)
    ids = parse_identities(key.identity, "test")
    caplog.set_level(logging.DEBUG)
    result = _renderer(workdir, age_identities=ids).render(_layered_request(repo))
    cm = next(m for m in result.manifests if m.kind == "ConfigMap")
    secret = next(m for m in result.manifests if m.kind == "Secret")
    assert cm.data["data"] == {"replicas": "3", "tag": "common-secret"}
    assert secret.data["stringData"]["password"] == "dev-pass-222"
    assert "dev-pass-222" not in caplog.text and "common-pass-111" not in caplog.text
    _no_plaintext_left(workdir, "dev-pass-222", "common-pass-111")


def test_layered_wrong_key_fails_clearly_without_leaks(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = _layered_repo(workdir, new_age_key().recipient)
    ids = parse_identities(new_age_key().identity, "test")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SecretDecryptError) as err:
        _renderer(workdir, age_identities=ids).render(_layered_request(repo))
    assert "namespaces/namespace-a/common-values-a.secret.yaml" in str(err.value)
    assert "pass" not in str(err.value) and "pass-" not in caplog.text
    _no_plaintext_left(workdir, "dev-pass-222", "common-pass-111")


def test_layered_refuses_plaintext_secret_file(workdir: Path) -> None:
    repo = make_repo(
        workdir / "repo",
        {
            **_files("namespaces/ns", CHART),
            "namespaces/ns/common-values-ns.secret.yaml": "password: oops\n",
        },
    )
    request = RenderRequest(
        repo_url=str(repo.path),
        source_type=SourceType.LAYERED,
        app=APP,
        layered=LayeredOptions(cluster="dev", namespace="ns"),
    )
    with pytest.raises(SecretDecryptError, match=r"named \.secret\.yaml but not SOPS-encrypted"):
        _renderer(workdir).render(request)
