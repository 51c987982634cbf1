"""EnvoyFilter patches applied to generated resources, after the generators and before the
cache of serialized resources (generators stay ignorant of EnvoyFilter).

Modules, one idea each: values (a patch value as its Envoy message), selection (which
patches apply to a proxy, in order), matching (a patch's `match` against one object),
merge (MERGE semantics), lists (ordered list operations), listeners / routes / clusters
(patches per object kind), checks (the proto rules Envoy enforces), reports (skipped
patches), apply (the entry point and its per-push cache).
"""

from meshpilot.xds.patch.apply import PATCHED_TYPES, apply_patches
from meshpilot.xds.patch.reports import PatchProblem, patch_problems

__all__ = ["PATCHED_TYPES", "PatchProblem", "apply_patches", "patch_problems"]
