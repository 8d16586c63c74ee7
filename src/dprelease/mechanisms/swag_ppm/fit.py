"""The fine-tune and SWAG of each SWAG-PPM round, as stage functions (docs/algorithms.md, B.5, A.1): round 1 unweighted,
round 2 weighted by the risk stage's weights. Their code (the import closure of this module) holds no PPM
maths, so editing the risk or sensitivity passes never re-runs a fine-tune.

Every random choice of a fit (initialisation, batch order, dropout, SWAG's SGD) comes from a
:data:`~dprelease.core.seeds.SeedFn`: the pipeline's is the secret key's (``secret.training_seeds``), so an
adversary who re-runs this code on D and on D∖{x} with the public seed does not get the sampler the release
was drawn from (the replay audit, ``replay.py``, plays that adversary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import get_flat, set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import atomic_dir, write_json
from dprelease.core.privacy import secret
from dprelease.core.privacy.censor import Censor
from dprelease.core.seeds import SeedFn
from dprelease.core.training import finetune as run_finetune
from dprelease.mechanisms.swag_ppm import calibrate
from dprelease.mechanisms.swag_ppm.params import ppm_finetune, swag_settings

UNCALIBRATED = "uncalibrated.safetensors"  # a weighted round's SWAG moments before calibration (private)


def release_censor(params: Params) -> Censor | None:
    """The censored mechanism's per-record censoring at κ = ε/2 (None for the asymptotic PPM)."""
    ppm = params.ppm
    return Censor(ppm.censor_epsilon / 2, ppm.censor_form) if ppm.mechanism == "censored" else None


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
    model, hist = _finetune(
        params,
        backend,
        feats,
        y,
        round_weights_tensor(lay, r),
        r=r,
        seeds=secret.training_seeds(lay.artifacts),
        censor=release_censor(params) if r >= 2 else None,
    )
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
    moments, losses, temp, raw = _swag(
        params,
        backend,
        model,
        feats,
        y,
        round_weights_tensor(lay, r),
        r=r,
        seeds=secret.training_seeds(lay.artifacts),
        censor=release_censor(params) if r >= 2 else None,
    )
    with atomic_dir(lay.swag(r), private=True) as tmp:
        moments.save(tmp / "moments.safetensors")
        if raw is not moments:  # SWAG as fitted, for the uncalibrated comparison arm
            raw.save(tmp / UNCALIBRATED)
        write_json(tmp / "history.json", {"epoch_loss": losses})
    if r >= 2:
        write_json(lay.metrics / f"temperature_r{r}.json", {"round": r, **temp})
    return {"round": r, "snapshots": moments.n_models, "rank": moments.rank, "final_loss": losses[-1]}


def _finetune(
    params: Params,
    backend,
    feats,
    y,
    weights: torch.Tensor | None,
    *,
    r: int,
    seeds: SeedFn,
    censor: Censor | None,
    tag: str = "",
):
    model = backend.new_model(feats, init_seed=seeds("init" + tag, r))
    hist = run_finetune(
        backend,
        model,
        feats,
        y,
        weights,
        ppm_finetune(params),
        seed=seeds("finetune" + tag, r),
        progress=True,
        desc=f"fine-tune r{r}{tag}",
        censor=censor,
        prior_precision=params.ppm.prior_precision,
    )
    return model, hist


def _swag(
    params: Params,
    backend,
    model,
    feats,
    y,
    weights: torch.Tensor | None,
    *,
    r: int,
    seeds: SeedFn,
    censor: Censor | None,
    tag: str = "",
):
    return calibrate.swag(
        backend,
        model,
        feats,
        y,
        weights,
        swag_settings(params),
        seed=seeds("swag" + tag, r),
        calibration=params.ppm.calibration if r >= 2 else "none",
        prior_precision=params.ppm.prior_precision,
        desc=f"SWAG r{r}{tag}",
        censor=censor,
        measure=r >= 2,
    )


def refit(
    params: Params,
    backend,
    feats,
    y,
    weights: np.ndarray | None,
    *,
    r: int,
    seeds: SeedFn,
    censor: Censor | None = None,
    tag: str = "",
) -> dict:
    """Fine-tune from the base model, then SWAG (calibrated per ``ppm.calibration`` for weighted rounds), in one
    call: exactly what the ``finetune_r{r}`` and ``swag_r{r}`` stages compute for the same seeds (round 3's
    refits, ``tag`` "#t" for attempt t, and the replay audit's re-fits on D and D∖{x})."""
    w = None if weights is None else torch.from_numpy(np.asarray(weights)).float()
    model, ft = _finetune(params, backend, feats, y, w, r=r, seeds=seeds, censor=censor, tag=tag)
    theta_ft = get_flat(model).cpu().clone()
    moments, swag_losses, summary, _ = _swag(
        params, backend, model, feats, y, w, r=r, seeds=seeds, censor=censor, tag=tag
    )
    return {
        "model": model,
        "theta": theta_ft,
        "finetune_losses": ft.losses,
        "moments": moments,
        "swag_losses": swag_losses,
        "temperature": {"round": r, **summary},
    }
