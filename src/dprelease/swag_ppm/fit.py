"""The fine-tune and SWAG of each SWAG-PPM round, as stage functions (docs/algorithms.md, B.5, A.1): round 1 unweighted,
round 2 weighted by the risk stage's weights. Their code (the import closure of this module) holds no PPM
maths, so editing the risk or sensitivity passes never re-runs a fine-tune."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..backends.base import get_flat, set_flat
from ..config import Params
from ..data.splits import backend_for, features
from ..io import atomic_dir, write_json
from ..layout import Layout
from ..seeds import stage_seed
from ..training import finetune as run_finetune
from . import calibrate

UNCALIBRATED = "uncalibrated.safetensors"  # a weighted round's SWAG moments before calibration (private)


def round_weights(lay: Layout, r: int) -> np.ndarray | None:
    return None if r == 1 else np.load(lay.weights(r) / "weights.npy")


def round_weights_tensor(lay: Layout, r: int) -> torch.Tensor | None:
    w = round_weights(lay, r)
    return None if w is None else torch.from_numpy(w).float()


def finetune(params: Params, root: str | Path = ".", r: int = 1) -> dict:
    """Round r fine-tune FROM THE BASE MODEL (round 1 unweighted, round 2 weighted, docs/algorithms.md, B.5); the
    censored mechanism censors each record's weighted loss at ε/2 (docs/guarantees.md, P). Round 3's refits run in
    the ``reweight`` stage (reweighting.py)."""
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    hist = run_finetune(backend, model, feats, y, round_weights_tensor(lay, r), params.ppm_finetune,
                        seed=stage_seed(params.seed, "finetune", r), progress=True, desc=f"fine-tune r{r}",
                        censor=params.censor if r >= 2 else None, prior_precision=params.ppm.prior_precision)
    with atomic_dir(lay.finetune(r), private=True) as tmp:
        save_file({"theta": get_flat(model).cpu().contiguous()}, str(tmp / "theta.safetensors"))
        write_json(tmp / "history.json", {"epoch_loss": hist.losses})
    return {"round": r, "final_loss": hist.losses[-1]}


def swag(params: Params, root: str | Path = ".", r: int = 1) -> dict:
    """Round r SWAG phase: constant-lr SGD from the fine-tuned θ, one snapshot per epoch (docs/algorithms.md, A.1);
    for the weighted round its temperature T̂ is measured and, per ``ppm.calibration``, calibrated."""
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    set_flat(model, load_file(str(lay.finetune(r) / "theta.safetensors"))["theta"])
    moments, losses, temp, raw = calibrate.swag(
        backend, model, feats, y, round_weights_tensor(lay, r), params.backend.swag, seed=stage_seed(params.seed, "swag", r),
        calibration=params.ppm.calibration if r >= 2 else "none", prior_precision=params.ppm.prior_precision,
        desc=f"SWAG r{r}", censor=params.censor if r >= 2 else None, measure=r >= 2)
    with atomic_dir(lay.swag(r), private=True) as tmp:
        moments.save(tmp / "moments.safetensors")
        if raw is not moments:  # SWAG as fitted, for the uncalibrated comparison arm
            raw.save(tmp / UNCALIBRATED)
        write_json(tmp / "history.json", {"epoch_loss": losses})
    if r >= 2:
        write_json(lay.metrics / f"temperature_r{r}.json", {"round": r, **temp})
    return {"round": r, "snapshots": moments.n_models, "rank": moments.rank, "final_loss": losses[-1]}
