"""mia.canary: the bound fixed in advance for the gate, the claim a canary run is audited against, and a canary
run whose drawn subset is empty (a one-line error before any stage runs)."""

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


def _pool(root, params, members: dict[str, list[bool]]):
    import numpy as np
    import torch

    from dprelease.backends.base import save_features
    from dprelease.layout import Layout
    from dprelease.mia.canary import SETS
    from dprelease.mia.population import audit_dir

    pool = audit_dir(Layout.from_params(params, root)) / "pool"
    pool.mkdir(parents=True)
    for kind, member in members.items():
        feats, flags = SETS[kind]
        save_features(pool / feats, {"x": torch.randn(len(member), 384)}, torch.zeros(len(member), dtype=torch.long))
        np.save(pool / flags, np.array(member, dtype=bool))


def test_a_canary_run_with_no_included_canary_is_a_one_line_error_before_any_stage(tmp_path, monkeypatch):
    """The secret coins can leave every canary out (probability 2^-m): the canary run would audit nothing."""
    from conftest import slice_raw
    from dprelease.config import parse_params
    from dprelease.mia import canary

    params = parse_params(slice_raw())
    _pool(tmp_path, params, {"mislabelled": [False] * 5, "input": [False] * 3})
    monkeypatch.setattr(canary, "run_other", lambda *a, **k: pytest.fail("a stage ran for an empty canary run"))
    with pytest.raises(AuditError, match="none of the 8 canaries was drawn into the canary run") as info:
        canary.canary_runs(params, tmp_path)
    assert "\n" not in str(info.value) and not (tmp_path / params.artifacts / "audit" / "canary_run").exists()


def test_a_set_with_none_included_is_audited_beside_one_that_has_some():
    import numpy as np

    from dprelease.mia.canary import check_included

    check_included({"input": (None, None, np.zeros(3, bool)), "mislabelled": (None, None, np.array([0, 1], bool))})
    with pytest.raises(AuditError, match="none of the 0 canaries"):
        check_included({})
