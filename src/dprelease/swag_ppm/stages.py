"""The SWAG-PPM stages, declared once: what each runs, reads, writes and depends on (docs/algorithms.md, B, D).

Round 1 is unweighted; risk turns its posterior into round-2 weights; ``reweight`` fits round 3 (only
with ``ppm.reweight``) and decides which round is released; ``draw`` releases ONE draw from it; ``audit`` is the release's
utility evaluation; ``select`` is private selection (only with a validation split); ``swag_ppm`` is
the round-2 comparison arm.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..config import Params
from ..privacy.stages import key_id_file
from ..release import arm_model_dir
from ..signing import public_key_dep
from ..stage import Stage
from . import arms, evaluate, publish, reweighting, rounds, select
from .rounds import MODEL_CODE, PASS_CODE, RELEASE_CODE

MODEL = ["seed", "model"]
SAMPLING = ["ppm.draws", "ppm.draw_batch"]
EVALUATE_CODE = ["swag_ppm/evaluate.py", "swag_ppm/reweighting.py", "swag_ppm/swag.py", "swag_ppm/diagnostics.py", "backends",
                 "data/splits.py", "utility", "plots.py", "headline.py"]
ARM_CODE = [*RELEASE_CODE, "utility"]


CALIBRATION = ["ppm.calibration", "ppm.prior_precision", "ppm.mechanism", "ppm.censor_epsilon", "ppm.censor_form"]
SWAG_CODE = [*MODEL_CODE, "swag_ppm/swag.py", "swag_ppm/swag_train.py", "swag_ppm/calibrate.py",
             "swag_ppm/temperature.py"]
REWEIGHT_CODE = ["swag_ppm/reweighting.py", "swag_ppm/calibrate.py", "swag_ppm/temperature.py", "swag_ppm/swag.py",
                 "swag_ppm/swag_train.py", "swag_ppm/passes.py", "swag_ppm/ppm.py", "training.py", "backends",
                 "data/splits.py", "utility/metrics.py"]
REWEIGHT_PARAMS = ["ppm.reweight", "ppm.reweight_mode", "ppm.k", "ppm.reweight_form", "ppm.reweight_step",
                   "ppm.reweight_target", "ppm.reweight_tolerance", "ppm.reweight_aim", "ppm.max_refits", "ppm.validation_draws"]


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    feats, labels = f"{a}/features", f"{a}/data"
    key = key_id_file(params)  # stages whose output rests on secret noise (the released draws, selection)
    out: list[Stage] = []
    for r in (1, 2):
        w = [f"{a}/round{r}/weights"] if r > 1 else []
        weighted = CALIBRATION if r > 1 else ["ppm.prior_precision"]  # round 1's objective carries the prior too
        out.append(Stage(f"finetune_r{r}", partial(rounds.finetune, r=r), MODEL + weighted, [labels, feats, *w],
                         [f"{a}/round{r}/finetune"], MODEL_CODE))
        out.append(Stage(f"swag_r{r}", partial(rounds.swag, r=r), MODEL + weighted,
                         [labels, feats, *w, f"{a}/round{r}/finetune"], [f"{a}/round{r}/swag"], SWAG_CODE,
                         metrics=[f"metrics/temperature_r{r}.json"] if r > 1 else []))
        if r == 1:
            out.append(Stage("risk", rounds.risk, MODEL + SAMPLING + ["ppm.c", "ppm.g", "ppm.risk_norm"],
                             [labels, feats, f"{a}/round1/swag"], [f"{a}/round2/weights"], PASS_CODE,
                             metrics=["metrics/risk.json"]))
    out.append(Stage("sensitivity_r2", partial(rounds.sensitivity, r=2), MODEL + SAMPLING + CALIBRATION,
                     [labels, feats, f"{a}/round2/weights", f"{a}/round2/swag"], [f"{a}/round2/sensitivity"],
                     PASS_CODE, metrics=["metrics/sensitivity_r2.json"]))
    out.append(Stage("reweight", reweighting.reweight, MODEL + SAMPLING + CALIBRATION + REWEIGHT_PARAMS,
                     [labels, feats, f"{a}/round2/weights", f"{a}/round2/swag", f"{a}/round2/sensitivity",
                      "metrics/sensitivity_r2.json"],
                     [f"{a}/round3/{x}" for x in ("weights", "finetune", "swag", "sensitivity", "decision.json")],
                     REWEIGHT_CODE,
                     metrics=["metrics/reweight.json", "metrics/sensitivity_r3.json", "metrics/temperature_r3.json"],
                     when=lambda p: p.reweighting, timed=False))
    finals = [f"{a}/round{r}/{x}" for r in (2, 3) for x in ("weights", "swag")]
    histories = [f"{a}/round{r}/{x}" for r in (1, 2, 3) for x in ("finetune", "swag")]
    sens = ["metrics/sensitivity_r2.json", "metrics/sensitivity_r3.json", "metrics/temperature_r2.json",
            "metrics/temperature_r3.json", "metrics/reweight.json", "metrics/data.json"]
    out.append(Stage("draw", rounds.draw, MODEL + ["ppm"], [key, labels, feats, *finals, *sens,
                                                            f"{a}/round2/sensitivity", f"{a}/round3/sensitivity"],
                     [f"{a}/draw"], RELEASE_CODE, metrics=["metrics/release.json"]))
    out.append(Stage("audit", evaluate.audit, MODEL + ["ppm.reweight", "audit"],
                     [labels, feats, f"{a}/draw", *histories, f"{a}/round2/sensitivity", f"{a}/round3/sensitivity",
                      *sens, "metrics/release.json"], ["reports/release"], EVALUATE_CODE,
                     metrics=["metrics/audit.json", "metrics/diagnostics.json", "metrics/headline.json"],
                     plots=["plots/max_delta.png", "plots/f1_violin.png", "plots/per_class_f1.png",
                            "plots/loss_curves.png", "plots/confusion_top_classes.png"]))
    out.append(Stage("publish", publish.publish, ["release", "force_release_path", "ppm.reweight"],
                     [f"{a}/draw", "metrics/data.json", "metrics/audit.json", "reports/release",
                      "metrics/nonprivate.json", "reports/privacy", public_key_dep(params)], [params.release],
                     ["swag_ppm/publish.py", "card.py", "release.py", "release_check.py", "cache.py", "backends",
                      "data/splits.py", "signing.py", "locks.py"]))
    selected = Path(params.release)
    out.append(Stage("select", select.private_select, MODEL + ["ppm", "audit.draws", "selection", "data.validation_size",
                                                               "release"],
                     [key, labels, feats, *finals, *sens], [str(selected.with_name(selected.name + "-selected")),
                                                       f"{a}/selection"],
                     select.SELECT_CODE, metrics=["metrics/selection.json"],
                     when=lambda p: p.selection.enabled, timed=False))
    out.append(Stage("swag_ppm", rounds.round2_arm, MODEL + CALIBRATION,
                     [key, labels, feats, f"{a}/round2/weights", f"{a}/round2/swag", "metrics/sensitivity_r2.json",
                      "metrics/temperature_r2.json"],
                     ["reports/arms/swag_ppm", arm_model_dir(params, "swag_ppm")], ARM_CODE,
                     metrics=["metrics/swag_ppm.json"], group="compare"))
    round2 = [key, labels, feats, f"{a}/round2/weights", f"{a}/round2/swag"]
    out.append(Stage("swag_ppm_uncalibrated", arms.uncalibrated_arm, MODEL + SAMPLING + ["ppm.prior_precision"],
                     round2, ["reports/arms/swag_ppm_uncalibrated", arm_model_dir(params, "swag_ppm_uncalibrated")],
                     arms.ARMS_CODE, metrics=["metrics/swag_ppm_uncalibrated.json"], group="compare"))
    out.append(Stage("swag_ppm_censored", arms.censored_arm, MODEL + SAMPLING + CALIBRATION + ["dpsgd.target_epsilon"],
                     [key, labels, feats, "metrics/release.json"],
                     ["reports/arms/swag_ppm_censored", arm_model_dir(params, "swag_ppm_censored")],
                     arms.ARMS_CODE, metrics=["metrics/swag_ppm_censored.json"], group="compare"))
    return out
