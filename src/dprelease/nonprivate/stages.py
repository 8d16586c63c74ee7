"""Stage ``nonprivate``: ordinary fine-tuning from the base model for ``compare.nonprivate_epochs``
epochs (spec D.5), evaluated like every other arm. Its guarantee record says there is none."""

from __future__ import annotations

from pathlib import Path

from ..config import Params
from ..data.splits import backend_for, features, label_info
from ..layout import Layout
from ..privacy import guarantee
from ..seeds import stage_seed
from ..stage import Stage
from ..training import finetune
from ..utility.evaluate import write_arm


def nonprivate(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    opt = params.backend.finetune.model_copy(update={"epochs": params.compare.nonprivate_epochs})
    hist = finetune(backend, model, feats, y, None, opt, seed=stage_seed(params.seed, "nonprivate"),
                    progress=True, desc="non-private")
    return write_arm(lay, "nonprivate", backend, model, label_info(lay), guarantee.none(),
                     {"epochs": opt.epochs, "final_loss": hist.losses[-1]})


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [Stage("nonprivate", nonprivate, ["seed", "model", "compare.nonprivate_epochs"],
                  [f"{a}/data", f"{a}/features"], ["reports/arms/nonprivate"],
                  ["nonprivate", "training.py", "backends", "data/splits.py", "privacy/guarantee.py", "utility"],
                  metrics=["metrics/nonprivate.json"], group="compare")]
