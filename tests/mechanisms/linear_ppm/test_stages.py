"""The linear PPM's stages and plug-in: declared stages, their groups, the flow ``linear-ppm``."""

from __future__ import annotations

from dprelease.core.config import parse_params
from dprelease.mechanisms.linear_ppm import plugin, stages


def test_declared_stages_and_flow():
    p = parse_params({})
    by = {s.name: s for s in stages.declare(p)}
    assert set(by) == {"linear_ppm_draw", "linear_ppm_publish", "frontier_linear_ppm"}
    assert by["linear_ppm_draw"].group == by["linear_ppm_publish"].group == "linear_ppm"
    assert by["frontier_linear_ppm"].group == "frontier"
    assert by["frontier_linear_ppm"].metrics == ["metrics/frontier/linear_ppm.json"]
    assert by["linear_ppm_publish"].outs == [p.linear_ppm.release]
    assert "artifacts/linear_ppm/draw" in by["linear_ppm_publish"].deps
    flow = plugin.PLUGIN.flows[0]
    assert flow.name == "linear-ppm" and flow.groups == ("linear_ppm",)
