"""The RFC 6902 JSON patch from a pod to its injected form (what the webhook answers).

Computed as a diff of the two documents (Istio's jsonpatch.CreatePatch), with the
maintained `jsonpatch` library: a diff only names paths that exist, so it always applies.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

__all__ = ["apply_patch", "make_patch", "patch_bytes"]

JSON = dict[str, Any]


def make_patch(original: JSON, injected: JSON) -> list[JSON]:
    """The operations that turn `original` into `injected`."""
    ops: list[JSON] = jsonpatch.make_patch(original, injected).patch
    return ops


def patch_bytes(original: JSON, injected: JSON) -> bytes:
    """The patch as the JSON bytes an AdmissionResponse carries (base64-encoded there)."""
    return json.dumps(make_patch(original, injected), separators=(",", ":")).encode()


def apply_patch(document: JSON, ops: list[JSON]) -> JSON:
    """`document` with the patch applied (a new object; the input is left as it is).

    Copied through JSON, not deepcopy: a document built in Python may share one sub-object
    at two places (deepcopy keeps that), and a patch to one place must not change both."""
    copy: JSON = json.loads(json.dumps(document))
    result: JSON = jsonpatch.apply_patch(copy, ops, in_place=True)
    return result
