"""The mesh's other readers of "does this pod have a sidecar" follow the one policy:
`sidecar.istio.io/inject` parsed as Istio does (label over annotation; y/yes/true/on)."""

from __future__ import annotations

from meshpilot.gitops.preview.proxies import proxy_classes
from meshpilot.xds.resources import _known_sidecars
from tests.unit.authz.helpers import push_of

PODS = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: app
  labels: {{app: {name}{label}}}
  annotations: {{{annotation}}}
status: {{podIP: {ip}}}
"""


def _pods(*specs: tuple[str, str, str]) -> str:
    docs = []
    for i, (name, label, annotation) in enumerate(specs):
        label = f", sidecar.istio.io/inject: '{label}'" if label else ""
        annotation = f"sidecar.istio.io/inject: '{annotation}'" if annotation else ""
        docs.append(
            PODS.format(name=name, label=label, annotation=annotation, ip=f"10.0.0.{i + 1}")
        )
    return "---".join(docs)


CASES = _pods(
    ("plain", "", ""),
    ("no-annotation", "", "no"),  # Istio: any non-empty value but y/yes/true/on opts out
    ("label-true-wins", "true", "false"),  # the label wins over the annotation
    ("label-off", "off", ""),
)


def test_preview_counts_sidecars_by_the_policy() -> None:
    push = push_of(CASES)
    names = {n.split(".")[0] for klass in proxy_classes(push).values() for n in klass.names}
    assert names == {"plain", "label-true-wins"}


def test_prebuild_counts_sidecars_by_the_policy() -> None:
    # one pod per push: the prebuild keeps one proxy per class of alike pods
    def prebuilt(label: str, annotation: str) -> bool:
        return bool(_known_sidecars(push_of(_pods(("pod", label, annotation)))))

    assert prebuilt("", "")
    assert not prebuilt("", "no")
    assert prebuilt("true", "false")
    assert not prebuilt("off", "")
