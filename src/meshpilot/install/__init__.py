"""Installing a control plane: istioctl's IstioOperator, profiles and manifests.

spec.py         the IstioOperator `install.istio.io/v1alpha1` model, checked field by field
values.py       its `values` (Istio's Helm values), typed
k8s_overlay.py  `components.<name>.k8s`: Kubernetes settings laid onto a component
profiles.py     the built-in profiles (default, demo, minimal, empty, preview, remote)
merge.py        istioctl's deep merge of a spec over a profile (gateways by name)
set_path.py     `--set a.b[name:x].c=v` paths written into a spec tree
load.py         file(s) + profile + --set → one validated IstioOperator
crds.py         the Istio CRDs, their schemas generated from the typed config models
render/         the Kubernetes objects of each component (base, pilot, gateways, remote)
manifest.py     all enabled components, ordered for apply as istioctl prints them
diff.py         object-by-object difference of two manifests

Import from the modules; this package imports nothing.
"""

from __future__ import annotations

__all__: list[str] = []
