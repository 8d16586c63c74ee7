"""The SWAG-PPM stages, declared once: what each runs, reads, writes and depends on (docs/algorithms.md, B, D).

Round 1 is unweighted; risk turns its posterior into round-2 weights; ``reweight`` fits round 3 (only
with ``ppm.reweight``) and decides which round is released; ``draw`` releases ONE draw from it; ``evaluate`` is the release's
utility evaluation; ``select`` is private selection (only with a validation split); ``swag_ppm`` is
the round-2 comparison arm; ``frontier_swag_ppm`` traces SWAG-PPM's points on the privacy/utility frontier.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from dprelease.contracts.code_scope import closure
from dprelease.contracts.mechanism import ReleaseSpec
from dprelease.contracts.stage import Stage, flat
from dprelease.core.config import Params
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.release.folder import arm_model_dir
from dprelease.mechanisms.swag_ppm import (
    arms,
    evaluate,
    fit,
    publish,
    record,
    released,
    replay,
    reweighting,
    rounds,
    select,
)
from dprelease.mechanisms.swag_ppm.frontier import frontier_swag_ppm
from dprelease.mechanisms.swag_ppm.params import FRONTIER, PPMParams

MODEL = ["seed", "model", "swag"]
SAMPLING = ["ppm.draws", "ppm.draw_batch"]
# every ppm key but its frontier trace (ppm.frontier: read by frontier_swag_ppm alone, so tracing the frontier
# never re-runs the release's draw)
PPM = [f"ppm.{key}" for key in PPMParams.model_fields if key != "frontier"]


CALIBRATION = ["ppm.calibration", "ppm.prior_precision", "ppm.mechanism", "ppm.censor_epsilon", "ppm.censor_form"]
REWEIGHT_PARAMS = [
    "ppm.reweight",
    "ppm.reweight_mode",
    "ppm.k",
    "ppm.reweight_form",
    "ppm.reweight_step",
    "ppm.reweight_target",
    "ppm.reweight_tolerance",
    "ppm.reweight_aim",
    "ppm.max_refits",
    "ppm.validation_draws",
]


def run_name(params: Params, g, claim: str) -> list[str] | None:
    """Its release run's name after mechanism and backend: the round, the claim, c, the calibration and the
    re-weighting mode (None for a guarantee that is not a SWAG-PPM round's: the default words)."""
    if g.quantities.get("round") is None:
        return None
    p = params.ppm
    parts = [f"round {g.quantities['round']}", claim, f"c={p.c:g}", f"calibration={p.calibration}"]
    return parts + ([f"reweight={p.reweight_mode}"] if p.reweighting else [])


def settings(params: Params) -> dict:
    """SWAG-PPM's settings in a release run's MLflow params (its chain runs in every ``make run``): SWAG's for the
    backend in use, the evaluation's, whether its draw is privately selected, and of ``ppm`` what its mechanism and
    re-weighting mode read."""
    ppm, other = params.ppm, ({"head", "full"} - {params.model.backend}).pop()
    drop = {f"swag.{other}.", "ppm.frontier."}
    if ppm.mechanism != "censored":
        drop |= {"ppm.censor_"}
    if not ppm.reweighting:
        drop |= {"ppm.reweight_", "ppm.k", "ppm.max_refits", "ppm.validation_draws"}
    elif ppm.reweight_mode == "iterative":
        drop |= {"ppm.k"}
    else:
        drop |= {"ppm.reweight_step", "ppm.reweight_target", "ppm.reweight_tolerance", "ppm.reweight_aim"}
        drop |= {"ppm.max_refits", "ppm.validation_draws"}
    return flat(params, ["ppm", "swag", "evaluation", "selection.enabled"], drop=tuple(drop))


# released when ``released.mechanism: swag_ppm``: ONE draw from the released round, signed by the shared publish step
SPEC = ReleaseSpec(
    mechanism="swag_ppm",
    stage="draw",
    staged=publish.staged,
    card=publish.card,
    figures=publish.figures,
    deps=publish.deps,
    evidence=lambda params: publish.EVIDENCE,
    params=("ppm.reweight",),
    code=lambda: closure(publish.__name__),
    summary=record.summary_lines,
    settings=settings,
    run_name=run_name,
)


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    feats, labels = f"{a}/features", f"{a}/data"
    key = key_id_file(params)  # every stage whose randomness is the secret key's (fits, passes, draws)
    out: list[Stage] = []
    for r in (1, 2):
        w = [f"{a}/round{r}/weights"] if r > 1 else []
        weighted = CALIBRATION if r > 1 else ["ppm.prior_precision"]  # round 1's objective carries the prior too
        out.append(
            Stage(
                name=f"finetune_r{r}",
                run=partial(fit.finetune, r=r),
                params=MODEL + weighted,
                deps=[key, labels, feats, *w],
                outs=[f"{a}/round{r}/finetune"],
            )
        )
        out.append(
            Stage(
                name=f"swag_r{r}",
                run=partial(fit.swag, r=r),
                params=MODEL + weighted,
                deps=[key, labels, feats, *w, f"{a}/round{r}/finetune"],
                outs=[f"{a}/round{r}/swag"],
                metrics=[f"metrics/temperature_r{r}.json"] if r > 1 else [],
            )
        )
        if r == 1:
            out.append(
                Stage(
                    name="risk",
                    run=rounds.risk,
                    params=MODEL + SAMPLING + ["ppm.c", "ppm.g", "ppm.risk_norm"],
                    deps=[key, labels, feats, f"{a}/round1/swag"],
                    outs=[f"{a}/round2/weights"],
                    metrics=["metrics/risk.json"],
                )
            )
    out.append(
        Stage(
            name="sensitivity_r2",
            run=partial(rounds.sensitivity, r=2),
            params=MODEL + SAMPLING + CALIBRATION,
            deps=[key, labels, feats, f"{a}/round2/weights", f"{a}/round2/swag"],
            outs=[f"{a}/round2/sensitivity"],
            metrics=["metrics/sensitivity_r2.json"],
        )
    )
    out.append(
        Stage(
            name="reweight",
            run=reweighting.reweight,
            params=MODEL + SAMPLING + CALIBRATION + REWEIGHT_PARAMS,
            deps=[
                key,
                labels,
                feats,
                f"{a}/round2/weights",
                f"{a}/round2/swag",
                f"{a}/round2/sensitivity",
                "metrics/sensitivity_r2.json",
            ],
            outs=[f"{a}/round3/{x}" for x in ("weights", "finetune", "swag", "sensitivity", "decision.json")],
            metrics=["metrics/reweight.json", "metrics/sensitivity_r3.json", "metrics/temperature_r3.json"],
            when=lambda p: p.ppm.reweighting,
            timed=False,
        )
    )
    finals = [f"{a}/round{r}/{x}" for r in (2, 3) for x in ("weights", "swag")]
    histories = [f"{a}/round{r}/{x}" for r in (1, 2, 3) for x in ("finetune", "swag")]
    sens = [
        "metrics/sensitivity_r2.json",
        "metrics/sensitivity_r3.json",
        "metrics/temperature_r2.json",
        "metrics/temperature_r3.json",
        "metrics/reweight.json",
        "metrics/data.json",
    ]
    out.append(
        Stage(
            name="draw",
            run=released.draw,
            params=MODEL + PPM,
            deps=[key, labels, feats, *finals, *sens, f"{a}/round2/sensitivity", f"{a}/round3/sensitivity"],
            outs=[f"{a}/draw"],
            metrics=["metrics/swag_ppm_draw.json"],
        )
    )
    out.append(
        Stage(
            name="evaluate",
            run=evaluate.evaluate_release,
            params=MODEL + ["ppm.reweight", "evaluation", "selection.enabled", "data.validation_size"],
            deps=[
                key,
                labels,
                feats,
                f"{a}/draw",
                *histories,
                f"{a}/round2/sensitivity",
                f"{a}/round3/sensitivity",
                *sens,
                "metrics/swag_ppm_draw.json",
            ],
            outs=["reports/release"],
            metrics=["metrics/evaluation.json", "metrics/diagnostics.json", "metrics/headline.json"],
            plots=[
                "plots/max_delta.png",
                "plots/f1_violin.png",
                "plots/per_class_f1.png",
                "plots/loss_curves.png",
                "plots/confusion_top_classes.png",
            ],
        )
    )
    out.append(
        Stage(
            name="audit_replay",
            run=replay.audit_replay,
            params=MODEL + PPM + ["privacy_audit.replay_targets", "privacy_audit.alpha"],
            deps=[key, labels, feats, *finals, *sens, f"{a}/draw", f"{a}/round3/decision.json"],
            outs=[f"{a}/audit/replay"],
            metrics=["metrics/audit_replay.json"],
            group="audit",
        )
    )
    selected = Path(params.release)
    out.append(
        Stage(
            name="select",
            run=select.private_select,
            params=MODEL + PPM + ["evaluation.draws", "selection", "data.validation_size", "release"],
            deps=[key, labels, feats, *finals, *sens],
            outs=[str(selected.with_name(selected.name + "-selected")), f"{a}/selection"],
            metrics=["metrics/selection.json"],
            when=lambda p: p.selection.enabled,
            timed=False,
        )
    )
    out.append(
        Stage(
            name="swag_ppm",
            run=released.round2_arm,
            params=MODEL + CALIBRATION,
            deps=[
                key,
                labels,
                feats,
                f"{a}/round2/weights",
                f"{a}/round2/swag",
                "metrics/sensitivity_r2.json",
                "metrics/temperature_r2.json",
            ],
            outs=["reports/arms/swag_ppm", arm_model_dir(params, "swag_ppm")],
            metrics=["metrics/swag_ppm.json"],
            group="compare",
        )
    )
    round2 = [key, labels, feats, f"{a}/round2/weights", f"{a}/round2/swag"]
    out.append(
        Stage(
            name="swag_ppm_uncalibrated",
            run=arms.uncalibrated_arm,
            params=MODEL + SAMPLING + ["ppm.prior_precision"],
            deps=round2,
            outs=["reports/arms/swag_ppm_uncalibrated", arm_model_dir(params, "swag_ppm_uncalibrated")],
            metrics=["metrics/swag_ppm_uncalibrated.json"],
            group="compare",
        )
    )
    out.append(
        Stage(
            name="swag_ppm_censored",
            run=arms.censored_arm,
            params=MODEL + SAMPLING + CALIBRATION,  # its level: ppm.censor_epsilon (declared)
            deps=[key, labels, feats],
            outs=["reports/arms/swag_ppm_censored", arm_model_dir(params, "swag_ppm_censored")],
            metrics=["metrics/swag_ppm_censored.json"],
            group="compare",
        )
    )
    out.append(
        Stage(
            name=FRONTIER,
            run=frontier_swag_ppm,  # its points on the frontier (dprelease.compare.frontier)
            params=MODEL + ["ppm", "frontier.seeds"],
            deps=[
                key,
                labels,
                feats,
                f"{a}/round1/swag",
                *finals,
                *sens,
                f"{a}/round2/sensitivity",
                f"{a}/round3/sensitivity",
                "metrics/swag_ppm_draw.json",
            ],
            outs=[],
            metrics=["metrics/frontier/swag_ppm.json"],
            group="frontier",
        )
    )
    return out
