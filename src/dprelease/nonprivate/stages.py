"""Stage ``nonprivate``: ordinary fine-tuning from the base model for ``compare.nonprivate_epochs``
epochs (docs/algorithms.md, D.5), evaluated like every other arm. Its guarantee record says there is none."""

from __future__ import annotations

from pathlib import Path

from ..code_scope import closure
from ..config import Params
from ..data.splits import backend_for, features, label_info
from ..layout import Layout
from ..privacy import guarantee
from ..seeds import stage_seed
from ..stage import Stage
from ..training import finetune
from ..release import arm_model_dir, write_arm_model
from ..utility.evaluate import write_arm



def nonprivate(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    opt = params.backend.finetune.model_copy(update={"epochs": params.compare.nonprivate_epochs})
    hist = finetune(backend, model, feats, y, None, opt, seed=stage_seed(params.seed, "nonprivate"),
                    progress=True, desc="non-private")
    g = guarantee.none()
    write_arm_model(lay, "nonprivate", backend, model, g, closure(__name__))
    return write_arm(lay, "nonprivate", backend, model, label_info(lay), g,
                     {"epochs": opt.epochs, "final_loss": hist.losses[-1]})


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [Stage(name="nonprivate", run=nonprivate, params=["seed", "model", "compare.nonprivate_epochs"],
                  deps=[f"{a}/data", f"{a}/features"], outs=["reports/arms/nonprivate", arm_model_dir(params, "nonprivate")],
                  metrics=["metrics/nonprivate.json"], group="compare")]
