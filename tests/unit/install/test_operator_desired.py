"""What `meshpilot operator` would run for the IstioOperators of a store: one control plane per
revision, the first IstioOperator of a revision winning (the other named), none for a profile
without istiod, and an IstioOperator that cannot be installed (the store took it) named."""

from __future__ import annotations

from pathlib import Path

from meshpilot.config.yaml_source import read_text
from meshpilot.install.operator import Operator, desired_revisions, pilot_args
from meshpilot.store.directory import DirectoryStore


def _iop(name: str, spec: str) -> str:
    return (
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\n"
        f"metadata: {{name: {name}, namespace: istio-system}}\nspec: {spec}\n---\n"
    )


def test_one_control_plane_per_revision(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "s")
    text = (
        _iop("a", "{revision: canary, profile: minimal}")
        + _iop("b", "{revision: canary, profile: demo}")
        + _iop("c", "{profile: empty}")
        + _iop("d", "{profile: nope, revision: other}")
        + _iop("e", "{}")
    )
    store.apply(read_text(text, "iops.yaml").documents)
    desired, problems = desired_revisions(store)
    assert sorted(desired) == ["", "canary"]
    assert desired["canary"].key.name == "a" and desired[""].key.name == "e"
    assert problems == [
        "IstioOperator istio-system/b: revision 'canary' is installed by IstioOperator "
        "istio-system/a; ignored",
        "IstioOperator istio-system/d: unknown profile 'nope'; valid profiles: default, "
        "demo, empty, external, minimal, preview, remote",
    ]
    argv = Operator(store, str(tmp_path / "s"), tmp_path / "ca").argv("canary")
    assert argv[3:7] == ["discovery", "--store", str(tmp_path / "s"), "--revision"]
    assert "--xds-port" in argv and argv[argv.index("--xds-port") + 1] == "0"


def test_values_pilot_trace_sampling_reaches_the_control_plane(tmp_path: Path) -> None:
    """istiod's PILOT_TRACE_SAMPLING env, from values.pilot.traceSampling: here a flag of the
    revision's `meshpilot discovery`."""
    store = DirectoryStore(tmp_path / "s")
    text = _iop("a", "{revision: a, values: {pilot: {traceSampling: 10}}}") + _iop(
        "b", "{revision: b, profile: minimal}"
    )
    store.apply(read_text(text, "iops.yaml").documents)
    desired, _ = desired_revisions(store)
    assert pilot_args(desired["a"].resolved) == ["--trace-sampling", "10"]
    assert pilot_args(desired["b"].resolved) == ["--trace-sampling", "1"]  # the profile's 1.0
