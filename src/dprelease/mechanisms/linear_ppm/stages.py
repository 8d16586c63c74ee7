"""The linear PPM's stages (docs/linear_ppm.md): ``linear_ppm_draw`` (sample, check the diagnostics, stage one
secret-chosen draw), ``linear_ppm_publish`` (the signed release folder with its card) and ``frontier_linear_ppm``
(its frontier points)."""

from __future__ import annotations

from dprelease.contracts.code_scope import closure
from dprelease.contracts.mechanism import ReleaseSpec
from dprelease.contracts.stage import Stage, flat
from dprelease.core.config import Params
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.release.signing import public_key_dep
from dprelease.mechanisms.linear_ppm import card, released
from dprelease.mechanisms.linear_ppm.frontier import frontier_linear_ppm
from dprelease.mechanisms.linear_ppm.params import FRONTIER


# released by the shared publish step when ``released.mechanism: linear_ppm`` (its own flow signs linear_ppm.release)
def settings(params: Params) -> dict:
    """The linear PPM's settings in the release's MLflow run: its section, without its frontier's points, its release
    folder (an output path) and, for the risk variant, the censored variant's declared ε."""
    drop = ("linear_ppm.frontier.", "linear_ppm.release")
    if params.linear_ppm.variant != "censored":
        drop += ("linear_ppm.censor_epsilon",)
    return flat(params, ["linear_ppm"], drop=drop)


SPEC = ReleaseSpec(
    mechanism="linear_ppm",
    stage="linear_ppm_draw",
    staged=released.staged,
    card=card.release_card,
    figures=card.figures,
    code=lambda: closure(card.__name__),
    settings=settings,
)


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    deps = [key_id_file(params), f"{a}/data", f"{a}/features"]
    folder = released.private_dir(params)
    return [
        Stage(
            name="linear_ppm_draw",
            run=released.draw,
            params=["seed", "model.backend", "linear_ppm"],
            deps=deps,
            outs=[f"{folder}/draw", f"{folder}/chains"],
            metrics=["metrics/linear_ppm.json"],
            group="linear_ppm",
        ),
        Stage(
            name="linear_ppm_publish",
            run=released.publish,
            params=["linear_ppm.release", "force_release_path"],
            deps=[f"{folder}/draw", "metrics/data.json", public_key_dep(params)],
            outs=[params.linear_ppm.release],
            group="linear_ppm",
            signs=True,
        ),
        Stage(
            name=FRONTIER,
            run=frontier_linear_ppm,
            params=["seed", "model.backend", "linear_ppm", "frontier.seeds"],
            deps=deps,
            outs=[],
            metrics=["metrics/frontier/linear_ppm.json"],
            group="frontier",
        ),
    ]
