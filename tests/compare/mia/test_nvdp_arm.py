"""The privacy audit's NVDP arm on synthetic membership scores (files in, aggregates out)."""

from __future__ import annotations

import json

import numpy as np
import torch
from conftest import slice_raw
from safetensors.torch import save_file

from dprelease.compare.mia.nvdp_arm import audit_nvdp, membership_dir
from dprelease.core.config import parse_params


def _write(params, root, scores: dict, member: np.ndarray) -> None:
    folder = membership_dir(params, root)
    folder.mkdir(parents=True)
    save_file(
        {**{k: torch.from_numpy(v) for k, v in scores.items()}, "member": torch.from_numpy(member.astype(np.uint8))},
        str(folder / "scores.safetensors"),
    )
    arms = {
        k: {
            "lambda": None if k == "nonprivate" else 0.1,
            "claimed_epsilon": None,
            "guarantee": "none",
            "reference_accountant_epsilon": None if k == "nonprivate" else 10.47,
        }
        for k in scores
    }
    (folder / "arms.json").write_text(json.dumps(arms))


def test_separable_scores_are_caught_and_identical_ones_are_not(tmp_path):
    params = parse_params(slice_raw())
    rng = np.random.default_rng(0)
    member = np.r_[np.ones(400, bool), np.zeros(400, bool)]
    leaky = np.where(member, 0.0, -3.0) + rng.normal(0, 0.3, 800)  # members fit much better
    blind = rng.normal(-1.0, 0.5, 800)  # same distribution for both
    _write(params, tmp_path, {"nonprivate": leaky, "clipped": blind}, member)
    summary = audit_nvdp(params, tmp_path)
    assert summary["nonprivate"] > 0.99 and abs(summary["clipped"] - 0.5) < 0.06
    out = json.loads((tmp_path / "metrics/audit_nvdp.json").read_text())
    assert out["members"] == 400 and out["non_members"] == 400 and out["attack"] == "loss"
    clipped = out["arms"]["clipped"]
    assert clipped["claimed_epsilon"] is None and clipped["reference_accountant_epsilon"] == 10.47
    assert set(clipped["attacks"]) == {"loss"}
    assert (
        out["arms"]["nonprivate"]["attacks"]["loss"]["heuristic_epsilon"]
        > clipped["attacks"]["loss"]["heuristic_epsilon"]
    )
    text = (tmp_path / "reports/privacy_nvdp/report.md").read_text(encoding="utf-8")
    assert "| NVDP clipped | 0.1 | 10.470 |" in text and "HEURISTIC" in text
    assert len(json.dumps(out)) < 20_000  # aggregates only: no per-record score is written out


def test_missing_scores_are_a_skip_not_an_error(tmp_path):
    params = parse_params(slice_raw())
    assert "skipped" in audit_nvdp(params, tmp_path)
    assert "Skipped" in (tmp_path / "reports/privacy_nvdp/report.md").read_text(encoding="utf-8")
