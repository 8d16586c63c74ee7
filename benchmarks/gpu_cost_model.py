"""The probe and the cost model of ``gpu_paper_scale.py``: seconds per training step and per evaluation pass
measured on this machine, the release's predicted time from them, and the settings that fit a budget."""

from __future__ import annotations

import math
import time

MIN_EPOCHS_FT, MIN_EPOCHS_SWAG, MIN_DRAWS_SCALED, MIN_DRAWS_EPSILON = 1, 3, 20, 100


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def probe(params, lay) -> dict:
    """Seconds per training step at the fine-tune's batch size, per evaluation pass over the training records
    (with and without autocast), per model build, and per float64 element of the host-side conjugate-gradient
    arithmetic (swag_ppm/temperature.py runs it in numpy): what the cost model scales."""
    import numpy as np
    import torch

    from dprelease.core.data.splits import backend_for, features
    from dprelease.core.training import epoch

    backend = backend_for(params, lay)
    feats, y = features(lay)
    n = len(y)
    t = time.perf_counter()
    model = backend.new_model(feats)
    sync()
    t_build = time.perf_counter() - t
    bs = params.backend.finetune.batch_size
    steps = 6 if params.model.full.tiny else 30
    sub = {k: v[: bs * steps] for k, v in feats.items()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6, fused=True)  # as training.py
    gen = torch.Generator().manual_seed(0)
    epoch(backend, model, {k: v[: bs * 2] for k, v in sub.items()}, y[: bs * 2], None, opt, bs, gen)  # warm-up
    sync()
    t = time.perf_counter()
    epoch(backend, model, sub, y[: len(sub["input_ids"])], None, opt, bs, gen)
    sync()
    t_step = (time.perf_counter() - t) / math.ceil(len(sub["input_ids"]) / bs)
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])[None]
    backend.per_record_ce(model, theta, {k: v[:8] for k, v in feats.items()}, y[:8])  # warm-up
    out = {"n_train": n, "t_step": t_step, "dim": theta.numel(), "t_build": t_build}
    for key, amp in (("t_pass", backend.amp), ("t_pass32", False)):
        backend.amp = amp
        sync()
        t = time.perf_counter()
        backend.per_record_ce(model, theta, feats, y)
        sync()
        out[key] = time.perf_counter() - t
    a, b = np.ones((4, 1 << 22)), np.ones((4, 1 << 22))  # one CG update's numpy mix on [r, d] float64 rows
    t = time.perf_counter()
    a += 0.5 * b
    b -= 0.5 * a
    np.einsum("ij,ij->i", a, b)
    out["t_host_elem"] = (time.perf_counter() - t) / a.size
    return out


SAFETY = 1.5  # the cost model's margin: the plan keeps SAFETY × prediction within the budget


def predict(params, pr: dict, ft: int, sw: int, draws: int, refits: int) -> dict:
    """Seconds per part of the release (a model, not a measurement: printed beside the measured times)."""
    p = params.ppm
    steps = math.ceil(pr["n_train"] / params.backend.finetune.batch_size)
    refits = refits if params.ppm.reweighting else 0
    fits = 2 + refits
    k = min(getattr(params.swag, params.model.backend).rank, sw)
    r, cg_iters = max(k - 1, 1), 40 + 2
    # curvature of one weighted fit, in fp32 evaluation passes: per-record gradients (~3 passes, plus
    # materialising them), the K-row J B block (~2K), CG's J v + Jᵀ e for r = K − 1 rows per iteration (~3r);
    # and CG's own float64 arithmetic on [r, d] arrays on the host (~6 update mixes per iteration)
    calib = 0.0
    if p.calibration != "none":
        calib = (6 + 2 * k + 3 * r * cg_iters) * pr["t_pass32"] + 6 * cg_iters * r * pr["dim"] * pr["t_host_elem"]
    return {
        "fits": fits * (ft + sw) * steps * pr["t_step"],
        "calibration": (fits - 1) * calib,
        "passes": ((2 + refits) * draws + (p.validation_draws * refits + params.evaluation.draws) * 0.5) * pr["t_pass"],
        "overhead": (12 + 3 * refits) * pr["t_build"],
    }


def plan(params, pr: dict, budget: float) -> tuple[dict, list[str], dict, dict]:
    """The settings whose predicted time (× SAFETY) fits the budget: the fine-tune and SWAG epochs and the
    re-weighting refits (the fits and the calibration, which grows with SWAG's rank = its snapshots) are scaled
    down together first; the posterior draws (cheap) only once those are at their minimum, to 100 (the least
    with a meaningful ε) and then to 20."""
    ft0, sw0 = params.backend.finetune.epochs, getattr(params.swag, params.model.backend).epochs
    d0, r0 = params.ppm.draws, params.ppm.max_refits
    full = predict(params, pr, ft0, sw0, d0, r0)
    fits = lambda c: SAFETY * sum(c.values()) <= budget  # noqa: E731
    f = 1.0
    while True:
        ft = max(MIN_EPOCHS_FT, min(ft0, round(ft0 * f)))
        sw = max(min(MIN_EPOCHS_SWAG, sw0), min(sw0, round(sw0 * f)))
        r = max(min(1, r0), min(r0, round(r0 * f)))
        floor = (ft, sw, r) == (min(MIN_EPOCHS_FT, ft0), min(MIN_EPOCHS_SWAG, sw0), min(1, r0))
        if fits(predict(params, pr, ft, sw, d0, r)) or floor:
            break
        f *= 0.85
    d = d0
    for least in (min(MIN_DRAWS_EPSILON, d0), min(MIN_DRAWS_SCALED, d0)):
        while d > least and not fits(predict(params, pr, ft, sw, d, r)):
            d = max(least, int(d * 0.85))
    chosen = (ft, sw, d, r)
    changes, overrides = [], {}
    for name, key, before, after in (
        ("fine-tune epochs", "finetune.epochs", ft0, chosen[0]),
        ("SWAG epochs", "swag.epochs", sw0, chosen[1]),
        ("posterior draws", "ppm.draws", d0, chosen[2]),
        ("re-weighting refits", "ppm.max_refits", r0, chosen[3]),
    ):
        if after != before:
            changes.append(f"{name} {before}→{after}")
            overrides[key] = after
    return overrides, changes, full, predict(params, pr, *chosen)
