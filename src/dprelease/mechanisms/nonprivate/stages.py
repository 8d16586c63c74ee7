"""Stage ``nonprivate``: ordinary fine-tuning from the base model for ``nonprivate.epochs``
epochs (docs/algorithms.md, D.5), evaluated like every other arm. Its guarantee record says there is none."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features, label_info
from dprelease.core.privacy import guarantee, secret
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.release.folder import arm_model_dir, write_arm_model
from dprelease.core.seeds import stage_seed
from dprelease.core.training import finetune
from dprelease.core.utility.evaluate import evaluate, write_arm
from dprelease.core.utility.points import Point, write_points


def nonprivate(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    opt = params.backend.finetune.model_copy(update={"epochs": params.nonprivate.epochs})
    hist = finetune(
        backend,
        model,
        feats,
        y,
        None,
        opt,
        seed=stage_seed(params.seed, "nonprivate"),
        progress=True,
        desc="non-private",
    )
    g = guarantee.none()
    write_arm_model(lay, "nonprivate", backend, model, g, closure(__name__))
    return write_arm(
        lay, "nonprivate", backend, model, label_info(lay), g, {"epochs": opt.epochs, "final_loss": hist.losses[-1]}
    )


def frontier_nonprivate(params: Params, root: str | Path = ".") -> dict:
    """The frontier's ceiling: the non-private arm's training refit with ``frontier.seeds`` seeds from the key."""
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    test_feats, test_y = features(lay, "test")
    val_feats, val_y = features(lay, "validation")
    seeds = secret.training_seeds(lay.artifacts)
    opt = params.backend.finetune.model_copy(update={"epochs": params.nonprivate.epochs})
    test, val = [], []
    for k in range(params.frontier.seeds):
        model = backend.new_model(feats, init_seed=seeds("frontier-nonprivate-init", k))
        finetune(backend, model, feats, y, None, opt, seed=seeds("frontier-nonprivate", k), desc="non-private")
        test.append(evaluate(backend, model, test_feats, test_y, label_info(lay))[0])
        val.append(evaluate(backend, model, val_feats, val_y, label_info(lay))[0]["weighted_f1"])
    point = Point(
        mechanism="nonprivate",
        label="Non-private (ceiling)",
        kind="none",
        epsilon=None,
        delta=None,
        accountant="—",
        weighted_f1=[t["weighted_f1"] for t in test],
        macro_f1=[t["macro_f1"] for t in test],
        validation_weighted_f1=sum(val) / len(val),
        tuning="declared",
        config={"epochs": opt.epochs, "lr": opt.lr, "batch_size": opt.batch_size},
    )
    write_points(root, "nonprivate", [point], grid_size=1, selection="no search: the non-private arm's settings")
    return {"weighted_f1": round(sum(point.weighted_f1) / len(test), 4)}


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [
        Stage(
            name="nonprivate",
            run=nonprivate,
            params=["seed", "model", "nonprivate.epochs"],
            deps=[f"{a}/data", f"{a}/features"],
            outs=["reports/arms/nonprivate", arm_model_dir(params, "nonprivate")],
            metrics=["metrics/nonprivate.json"],
            group="compare",
        ),
        Stage(
            name="frontier_nonprivate",
            run=frontier_nonprivate,
            params=["seed", "model", "nonprivate.epochs", "frontier.seeds"],
            deps=[key_id_file(params), f"{a}/data", f"{a}/features"],
            outs=[],
            metrics=["metrics/frontier/nonprivate.json"],
            group="frontier",
        ),
    ]
