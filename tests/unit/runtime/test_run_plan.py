"""What `meshpilot run` starts for an injected pod: the capture from istio-init's args, the
agent from istio-proxy's args and env with `$(VAR)` expanded as kubelet does and its file
paths inside the pod's directory, the apps' commands in order, the hold's postStart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from meshpilot.inject.config import parse_injector
from meshpilot.inject.kube_inject import inject_object
from meshpilot.runtime.run.env import PodFacts, RunSpecError, container_env, expand
from meshpilot.runtime.run.plan import downward_file, plan_pod

JSON = dict[str, Any]
DIR = Path("/run/pods/shop/web-0")
FACTS = PodFacts("web-0", "shop", "10.44.0.7", host_ip="10.44.0.1", node_name="box")


def deployment(annotations: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": annotations or {}},
                "spec": {
                    "serviceAccountName": "web-sa",
                    "containers": [
                        {
                            "name": "web",
                            "image": "python:3",
                            "command": ["python3", "-m", "http.server"],
                            "args": ["$(PORT)", "--bind", "$(POD_IP)", "$$(PORT)", "$(NOPE)"],
                            "env": [
                                {"name": "PORT", "value": "8080"},
                                {"name": "URL", "value": "http://$(POD_IP):$(PORT)/"},
                                {
                                    "name": "POD_IP",
                                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                },
                                {
                                    "name": "APP",
                                    "valueFrom": {
                                        "fieldRef": {"fieldPath": "metadata.labels['app']"}
                                    },
                                },
                            ],
                        },
                        {"name": "tail", "image": "busybox", "command": ["sleep", "infinity"]},
                    ],
                },
            },
        },
    }


def injected(annotations: dict[str, str] | None = None) -> JSON:
    template: JSON = inject_object(deployment(annotations), parse_injector(), [])["spec"][
        "template"
    ]
    return template


def test_expand_as_kubelet() -> None:
    env = {"A": "1", "B": "x y"}
    assert expand("$(A)-$(B)", env) == "1-x y"
    assert expand("$$(A) $(C) $ $x $(", env) == "$(A) $(C) $ $x $("
    assert expand("a$$$(A)", env) == "a$1"


def test_env_in_order_with_field_refs() -> None:
    pod = injected()
    web = pod["spec"]["containers"][0]
    env = container_env(web, pod, FACTS)
    # URL refers to POD_IP before it is defined: kept as written, as kubelet does
    assert env == {
        "PORT": "8080",
        "URL": "http://$(POD_IP):8080/",
        "POD_IP": "10.44.0.7",
        "APP": "web",
    }


def test_plan_of_an_injected_deployment_pod() -> None:
    pod = injected()
    plan = plan_pod(pod, FACTS, DIR)
    assert [c.name for c in plan.init_containers] == ["istio-init"]
    assert plan.init_containers[0].argv[:2] == ("meshpilot", "iptables")
    assert "-u" in plan.init_containers[0].argv
    assert [c.name for c in plan.containers] == ["web", "tail", "istio-proxy"]
    web = plan.containers[0]
    assert web.argv == (
        "python3",
        "-m",
        "http.server",
        "8080",
        "--bind",
        "10.44.0.7",
        "$(PORT)",
        "$(NOPE)",
    )
    proxy = plan.proxy
    assert proxy is not None and proxy.run_as_proxy and not proxy.post_start
    args = dict(zip(proxy.argv[3::2], proxy.argv[4::2], strict=False))
    assert proxy.argv[:3] == ("meshpilot", "proxy", "sidecar")
    assert args["--service-account"] == "web-sa"
    assert args["--ip"] == "10.44.0.7"
    assert args["--workload-name"] == "web"
    assert args["--labels-file"] == str(DIR / "volumes/istio-podinfo/labels")
    assert args["--root-cert"] == str(DIR / "volumes/istiod-ca-cert/root-cert.pem")
    assert args["--token-file"] == str(DIR / "volumes/istio-token/istio-token")
    assert proxy.env["POD_NAME"] == "web-0" and proxy.env["POD_NAMESPACE"] == "shop"
    assert proxy.env["ISTIO_META_NODE_NAME"] == "box"
    volumes = {v.name: v for v in plan.volumes}
    assert (
        volumes["istio-token"].kind == "token"
        and volumes["istio-token"].token_file == "istio-token"
    )
    assert volumes["istiod-ca-cert"].kind == "ca-root"
    labels = volumes["istio-podinfo"].files["labels"]
    assert 'app="web"' in labels.splitlines()
    assert 'security.istio.io/tlsMode="istio"' in labels.splitlines()


def test_hold_puts_the_proxy_first_with_its_wait() -> None:
    pod = injected({"proxy.istio.io/config": "holdApplicationUntilProxyStarts: true"})
    plan = plan_pod(pod, FACTS, DIR)
    assert [c.name for c in plan.containers] == ["istio-proxy", "web", "tail"]
    assert plan.containers[0].post_start == ("meshpilot", "proxy", "wait")


def test_downward_file_quotes_as_go() -> None:
    assert downward_file({"b": 'say "hi"', "a": "x\ny"}) == 'a="x\\ny"\nb="say \\"hi\\""'


def test_what_cannot_run_is_refused_by_name() -> None:
    pod = injected()
    pod["spec"]["containers"][1].pop("command")
    with pytest.raises(RunSpecError, match=r"pod shop/web-0 container 'tail': no command"):
        plan_pod(pod, FACTS, DIR)
    pod = injected()
    pod["spec"]["containers"][0]["env"].append(
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    )
    with pytest.raises(
        RunSpecError, match=r"container 'web': env PW: secretKeyRef is not supported"
    ):
        plan_pod(pod, FACTS, DIR)
    pod = injected()
    pod["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "d"}})
    with pytest.raises(RunSpecError, match=r"volume 'data': persistentVolumeClaim volumes"):
        plan_pod(pod, FACTS, DIR)
