"""The Kubernetes objects of each IstioOperator component, one module per component.

context.py    names, labels and images of one installation (revision suffixes)
overlay.py    `components.<name>.k8s` laid onto a rendered Deployment, Service, PDB, HPA
base.py       component Base: the Istio CRDs and the istio-reader account
istiod.py     component Pilot: istiod's Deployment, Service, PDB and HPA
rbac.py       istiod's ServiceAccount, ClusterRole/Binding, Role/Binding
configmaps.py ConfigMaps `istio-<rev>` (mesh config) and `istio-sidecar-injector-<rev>`
webhooks.py   the injector MutatingWebhookConfiguration and the ValidatingWebhookConfiguration
gateways.py   ingress and egress gateways
remote.py     component IstiodRemote: the injector webhook pointing at an external istiod
"""

from __future__ import annotations

__all__: list[str] = []
