"""The SWAG-PPM stages, declared once: what each runs, reads, writes and depends on (spec B, D).

Round 1 is unweighted; risk turns its posterior into round-2 weights; round 3 (re-weighting) runs only
with ``ppm.reweight``; ``draw`` releases ONE draw from the last round; ``audit`` is the release's
utility evaluation; ``select`` is private selection (only with a validation split); ``swag_ppm`` is
the round-2 comparison arm.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..config import Params
from ..release import arm_model_dir
from ..stage import Stage
from . import evaluate, publish, rounds, select
from .rounds import MODEL_CODE, PASS_CODE, RELEASE_CODE

MODEL = ["seed", "model"]
SAMPLING = ["ppm.draws", "ppm.draw_batch"]
SWAG_CODE = [*MODEL_CODE, "swag_ppm/swag.py", "swag_ppm/swag_train.py"]
EVALUATE_CODE = ["swag_ppm/evaluate.py", "swag_ppm/swag.py", "swag_ppm/diagnostics.py", "backends",
                 "data/splits.py", "utility", "plots.py"]
ARM_CODE = [*RELEASE_CODE, "utility"]


def _reweighting(params: Params) -> bool:
    return params.ppm.reweight


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    feats, labels = f"{a}/features", f"{a}/data"
    out: list[Stage] = []
    for r in (1, 2, 3):
        w = [f"{a}/round{r}/weights"] if r > 1 else []
        gate = ["ppm.reweight"] if r == 3 else []
        when = _reweighting if r == 3 else None
        out.append(Stage(f"finetune_r{r}", partial(rounds.finetune, r=r), MODEL + gate, [labels, feats, *w],
                         [f"{a}/round{r}/finetune"], MODEL_CODE, when=when))
        out.append(Stage(f"swag_r{r}", partial(rounds.swag, r=r), MODEL + gate,
                         [labels, feats, *w, f"{a}/round{r}/finetune"], [f"{a}/round{r}/swag"], SWAG_CODE, when=when))
        if r == 1:
            out.append(Stage("risk", rounds.risk, MODEL + SAMPLING + ["ppm.c", "ppm.g", "ppm.risk_norm"],
                             [labels, feats, f"{a}/round1/swag"], [f"{a}/round2/weights"], PASS_CODE,
                             metrics=["metrics/risk.json"]))
        else:
            out.append(Stage(f"sensitivity_r{r}", partial(rounds.sensitivity, r=r), MODEL + SAMPLING + gate,
                             [labels, feats, *w, f"{a}/round{r}/swag"], [f"{a}/round{r}/sensitivity"], PASS_CODE,
                             metrics=[f"metrics/sensitivity_r{r}.json"], when=when))
        if r == 2:
            out.append(Stage("reweight", rounds.reweight, ["ppm.reweight", "ppm.k", "ppm.reweight_form"],
                             [f"{a}/round2/weights", f"{a}/round2/sensitivity"], [f"{a}/round3/weights"],
                             ["swag_ppm/rounds.py", "swag_ppm/ppm.py"], metrics=["metrics/reweight.json"],
                             when=_reweighting))
    finals = [f"{a}/round{r}/{x}" for r in (2, 3) for x in ("weights", "swag")]
    histories = [f"{a}/round{r}/{x}" for r in (1, 2, 3) for x in ("finetune", "swag")]
    sens = ["metrics/sensitivity_r2.json", "metrics/sensitivity_r3.json", "metrics/data.json"]
    out.append(Stage("draw", rounds.draw, MODEL + ["ppm"], [labels, feats, *finals, *sens],
                     [f"{a}/draw"], RELEASE_CODE, metrics=["metrics/release.json"]))
    out.append(Stage("audit", evaluate.audit, MODEL + ["ppm.reweight", "audit"],
                     [labels, feats, f"{a}/draw", *histories, f"{a}/round2/sensitivity", f"{a}/round3/sensitivity",
                      *sens], ["reports/release"], EVALUATE_CODE,
                     metrics=["metrics/audit.json", "metrics/diagnostics.json"],
                     plots=["plots/max_delta.png", "plots/f1_violin.png", "plots/per_class_f1.png",
                            "plots/loss_curves.png", "plots/confusion_top_classes.png"]))
    out.append(Stage("publish", publish.publish, ["release", "force_release_path", "ppm.reweight"],
                     [f"{a}/draw", "metrics/data.json", "metrics/audit.json", "reports/release",
                      "metrics/nonprivate.json", "reports/privacy"], [params.release],
                     ["swag_ppm/publish.py", "card.py", "release.py", "release_check.py", "cache.py", "backends",
                      "data/splits.py"]))
    selected = Path(params.release)
    out.append(Stage("select", select.private_select, MODEL + ["ppm", "selection", "data.validation_size", "release"],
                     [labels, feats, *finals, *sens], [str(selected.with_name(selected.name + "-selected")),
                                                       f"{a}/selection"],
                     select.SELECT_CODE, metrics=["metrics/selection.json"],
                     when=lambda p: p.data.validation_size > 0))
    out.append(Stage("swag_ppm", rounds.round2_arm, MODEL,
                     [labels, feats, f"{a}/round2/weights", f"{a}/round2/swag", "metrics/sensitivity_r2.json"],
                     ["reports/arms/swag_ppm", arm_model_dir(params, "swag_ppm")], ARM_CODE,
                     metrics=["metrics/swag_ppm.json"], group="compare"))
    return out
