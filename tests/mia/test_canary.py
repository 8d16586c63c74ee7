"""mia.canary: the bound fixed in advance for the gate, and the claim a canary run is audited against."""

from __future__ import annotations

import pytest

from dprelease.errors import OneLineError
from dprelease.mia.canary import AuditError, _claim, gate_method


@pytest.mark.parametrize("delta, method", [(0.0, "steinke"), (1.9e-4, "fdp"), (0.5, "fdp")])
def test_gate_method_is_steinke_without_delta_and_fdp_with_it(delta, method):
    assert gate_method(delta) == method


def test_the_claim_is_read_from_the_manifest_guarantee():
    manifest = {"guarantee": {"epsilon": 7.14, "delta": None, "kind": "ppm_local_asymptotic", "quantities": {}}}
    assert _claim(manifest) == {"epsilon": 7.14, "delta": None, "guarantee": "ppm_local_asymptotic"}


def test_an_audit_contradiction_is_a_one_line_error():
    assert issubclass(AuditError, OneLineError)
    assert str(AuditError("honest DP-SGD\nbound above its ε")) == "honest DP-SGD bound above its ε"
