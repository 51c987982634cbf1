"""Traffic capture for sidecar pods: istio-iptables' rules, built and applied.

rules.py   CaptureConfig, CaptureRules and their restore text (pure)
build.py   CaptureConfig → CaptureRules (pure; golden-tested against istio's output)
flags.py   istio-iptables flag strings → CaptureConfig
apply.py   install / remove the rules with the real iptables in a network namespace
"""

from __future__ import annotations

from meshpilot.capture.apply import IptablesTarget, apply_capture, remove_capture
from meshpilot.capture.build import build_rules
from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.capture.rules import (
    CaptureConfig,
    CaptureConfigError,
    CaptureRules,
    InterceptionMode,
)

__all__ = [
    "CaptureConfig",
    "CaptureConfigError",
    "CaptureFlags",
    "CaptureRules",
    "InterceptionMode",
    "IptablesTarget",
    "apply_capture",
    "build_rules",
    "config_from_flags",
    "remove_capture",
]
