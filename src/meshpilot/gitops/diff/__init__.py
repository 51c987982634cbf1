"""Comparison of an Application's target manifests with live objects (gitops-engine `diff`):
normalization, ignoreDifferences, per-resource results and diffs with Secret values masked,
tracking of resources to their Application."""

from __future__ import annotations

from meshpilot.gitops.diff.compare import compare_app, diff_objects
from meshpilot.gitops.diff.ignore import (
    IgnoreDifferencesError,
    IgnoreRule,
    parse_ignore_differences,
)
from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of
from meshpilot.gitops.diff.mask import mask_secrets
from meshpilot.gitops.diff.normalize import ManifestNormalizer, Normalizer, normalize
from meshpilot.gitops.diff.result import Comparison, Condition, DiffResult, ResourceResult
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION, owner_of, tracking_id

__all__ = [
    "TRACKING_ANNOTATION",
    "Comparison",
    "Condition",
    "DiffResult",
    "IgnoreDifferencesError",
    "IgnoreRule",
    "Manifest",
    "ManifestNormalizer",
    "Normalizer",
    "ResourceKey",
    "ResourceResult",
    "compare_app",
    "diff_objects",
    "key_of",
    "mask_secrets",
    "normalize",
    "owner_of",
    "parse_ignore_differences",
    "tracking_id",
]
