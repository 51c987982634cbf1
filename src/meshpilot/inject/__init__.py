"""Sidecar injection (Istio's pkg/kube/inject): one step per module.

policy.py       whether a pod gets a sidecar (the one decision everywhere)
selector.py     label selectors of the injector config
config.py       the injector ConfigMap (`config` + `values`) and the mesh config, typed
values.py       the injector's `values` (Istio's Helm values the templates read)
data.py         what templates read (Istio's SidecarTemplateData), per-pod ProxyConfig
template.py     built-in templates `sidecar` and `gateway` → a partial pod
containers.py   istio-init and istio-proxy containers of the templates
merge.py        strategic merge of a partial pod, user container overrides, container order
probes.py       app probes rewritten to the agent (ISTIO_KUBE_APP_PROBERS)
pod.py          `inject_pod`: decide, render, merge, post-process (the entry point)
patch.py        RFC 6902 patch original → injected
kube_inject.py  workloads of YAML/JSON documents (istioctl kube-inject)
admission.py    AdmissionReview in → AdmissionReview out (the webhook without HTTP)
webhook.py      the HTTPS webhook server (istiod's 15017) and its refusals
webhook_config.py  MutatingWebhookConfiguration istio-sidecar-injector[-<rev>]
store_injector.py  the injector of a store's ConfigMap and mesh config

Import from the modules (this package imports nothing, so that `policy` stays cheap for
the xds and gitops code that reads it).
"""

from __future__ import annotations

__all__: list[str] = []
