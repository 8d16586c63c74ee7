"""The SWAG-PPM rounds as stage functions (spec B.5–B.7): weighted fine-tune from the base model,
SWAG, per-record risk, sensitivity ε = 2Δ̂, re-weighting, and the ONE released draw. Round stages
take ``r`` (1 = unweighted, 2 = weighted, 3 = re-weighted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..backends.base import get_flat, set_flat
from ..config import Params
from ..data.splits import backend_for, features, label_info
from ..io import atomic_dir, read_json, write_json
from ..layout import Layout
from ..privacy import guarantee
from ..release import write_arm_model, write_release
from ..seeds import stage_seed
from ..stage import skip_marker, with_common
from ..training import finetune as run_finetune
from ..utility.evaluate import write_arm
from . import ppm
from .passes import posterior_pass
from .swag import SwagMoments, iter_samples
from .swag_train import swag as run_swag

NO_REWEIGHT = "ppm.reweight is false"
# Code (package-relative) that the stages of this module run through; stages.py declares them and
# the release manifest's code_version hashes RELEASE_CODE.
MODEL_CODE = ["swag_ppm/rounds.py", "training.py", "backends", "data/splits.py"]
PASS_CODE = ["swag_ppm/rounds.py", "swag_ppm/passes.py", "swag_ppm/swag.py", "swag_ppm/ppm.py", "backends",
             "data/splits.py"]
RELEASE_CODE = ["swag_ppm/rounds.py", "swag_ppm/swag.py", "swag_ppm/ppm.py", "backends", "data/splits.py",
                "privacy/guarantee.py", "release.py", "release_check.py", "cache.py"]


def _weights(lay: Layout, r: int) -> np.ndarray | None:
    return None if r == 1 else np.load(lay.weights(r) / "weights.npy")


def _weights_tensor(lay: Layout, r: int) -> torch.Tensor | None:
    w = _weights(lay, r)
    return None if w is None else torch.from_numpy(w).float()


def finetune(params: Params, root: str | Path = ".", r: int = 1) -> dict:
    """Round r fine-tune FROM THE BASE MODEL (round 1 unweighted, later rounds weighted, spec B.5)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return skip_marker(lay.finetune(r), NO_REWEIGHT)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    hist = run_finetune(backend, model, feats, y, _weights_tensor(lay, r), params.backend.finetune,
                        seed=stage_seed(params.seed, "finetune", r), progress=True, desc=f"fine-tune r{r}")
    with atomic_dir(lay.finetune(r), private=True) as tmp:
        save_file({"theta": get_flat(model).cpu().contiguous()}, str(tmp / "theta.safetensors"))
        write_json(tmp / "history.json", {"epoch_loss": hist.losses})
    return {"round": r, "final_loss": hist.losses[-1]}


def swag(params: Params, root: str | Path = ".", r: int = 1) -> dict:
    """Round r SWAG phase: constant-lr SGD from the fine-tuned θ, one snapshot per epoch (spec A.1)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return skip_marker(lay.swag(r), NO_REWEIGHT)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    set_flat(model, load_file(str(lay.finetune(r) / "theta.safetensors"))["theta"])
    moments, hist = run_swag(backend, model, feats, y, _weights_tensor(lay, r), params.backend.swag,
                             seed=stage_seed(params.seed, "swag", r), progress=True, desc=f"SWAG r{r}")
    with atomic_dir(lay.swag(r), private=True) as tmp:
        moments.save(tmp / "moments.safetensors")
        write_json(tmp / "history.json", {"epoch_loss": hist.losses})
    return {"round": r, "snapshots": moments.n_models, "rank": moments.rank, "final_loss": hist.losses[-1]}


def risk(params: Params, root: str | Path = ".") -> dict:
    """r̂_i = max over S draws of SWAG_1 of CE_i; w = clip(c(1 − f̃) + g, 0, 1) (spec B.2–B.4)."""
    lay, p = Layout.from_params(params, root), params.ppm
    record_risk, _ = posterior_pass(params, lay, 1, None, "risk")
    w = ppm.weights_from_risk(record_risk, c=p.c, g=p.g, method=p.risk_norm)
    with atomic_dir(lay.weights(2), private=True) as tmp:
        np.save(tmp / "weights.npy", w)
    summary = {"risk_min": float(record_risk.min()), "risk_max": float(record_risk.max()), **_weight_stats(w)}
    write_json(lay.metrics / "risk.json", summary)
    return summary


def _weight_stats(w: np.ndarray) -> dict:
    return {"weight_mean": float(w.mean()), "weight_median": float(np.median(w)),
            "weights_zero": int((w == 0).sum()), "weights_one": int((w == 1).sum())}


def sensitivity(params: Params, root: str | Path = ".", r: int = 2) -> dict:
    """M_s = max_i w_i CE_i(θ^(s)) over S draws of SWAG_r; Δ̂ = max_s M_s; ε = 2Δ̂ (spec B.6)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return skip_marker(lay.sensitivity(r), NO_REWEIGHT, lay.metrics / f"sensitivity_r{r}.json")
    record_max, max_deltas = posterior_pass(params, lay, r, _weights(lay, r), "sensitivity")
    local_sensitivity, eps = ppm.epsilon(max_deltas)
    with atomic_dir(lay.sensitivity(r), private=True) as tmp:
        np.save(tmp / "record_max_loss.npy", record_max)  # private: per-record, feeds re-weighting
        np.save(tmp / "max_deltas.npy", max_deltas)  # per-draw maxima (aggregates) for the max-delta plot
    summary = {"round": r, "local_sensitivity": local_sensitivity, "epsilon": eps, "draws": len(max_deltas)}
    write_json(lay.metrics / f"sensitivity_r{r}.json", summary)
    return summary


def reweight(params: Params, root: str | Path = ".") -> dict:
    """Round-3 weights pulled toward the database bound with strength k (spec C.2)."""
    lay, p = Layout.from_params(params, root), params.ppm
    if not p.reweight:
        return skip_marker(lay.weights(3), NO_REWEIGHT, lay.metrics / "reweight.json")
    w = np.load(lay.weights(2) / "weights.npy")
    L = np.load(lay.sensitivity(2) / "record_max_loss.npy")
    w_new = ppm.reweight(w, L, k=p.k, form=p.reweight_form)
    with atomic_dir(lay.weights(3), private=True) as tmp:
        np.save(tmp / "weights.npy", w_new)
    summary = {"k": p.k, "form": p.reweight_form, **_weight_stats(w_new)}
    write_json(lay.metrics / "reweight.json", summary)
    return summary


def draw_from_round(params: Params, lay: Layout, r: int, tag: str = "release"):
    """One independent draw θ* from SWAG_r with its guarantee: M* = max_i w_i CE_i(θ*) enters
    Δ̂ = max(Δ̂_r, M*), ε = 2Δ̂. Returns (backend, model at θ*, θ*, M*, guarantee)."""
    backend = backend_for(params, lay)
    feats, y = features(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, tag, r))
    theta = next(iter_samples(moments, 1, 1, gen))
    model = backend.new_model(feats)
    ce = backend.per_record_ce(model, theta, feats, y).double().numpy()
    m_star = float(ppm.max_weighted_loss(ce, _weights(lay, r))[0])
    sens = read_json(lay.metrics / f"sensitivity_r{r}.json")
    local_sensitivity = max(sens["local_sensitivity"], m_star)
    set_flat(model, theta[0])
    g = guarantee.ppm(2 * local_sensitivity, local_sensitivity, posterior_draws=sens["draws"], round=r)
    return backend, model, theta[0], m_star, g


def draw(params: Params, root: str | Path = ".") -> dict:
    """ONE independent draw θ* from the last SWAG; its own M* enters Δ̂ (spec B.7b step 7)."""
    lay, r = Layout.from_params(params, root), params.final_round
    backend, model, theta, m_star, g = draw_from_round(params, lay, r)
    labels = label_info(lay)
    with atomic_dir(lay.draw, private=True) as tmp:
        save_file({"theta": theta.cpu().contiguous()}, str(tmp / "theta.safetensors"))
        # the release as it will be shared, staged privately: the privacy audit loads it from here and
        # the `publish` stage adds the model card and writes it to params.release
        write_release(tmp / "release", backend, model, labels["codes"], labels["titles"],
                      release_manifest(params, lay, g), with_common(RELEASE_CODE))
    summary = {"round": r, "released_draw_max_loss": m_star, "guarantee": g.as_dict()}
    write_json(lay.metrics / "release.json", summary)
    return summary


def release_manifest(params: Params, lay: Layout, g: guarantee.Guarantee) -> dict:
    """The public manifest of a SWAG-PPM release: its guarantee record plus public config and aggregates."""
    p, data = params.ppm, read_json(lay.metrics / "data.json")
    eps_rounds = {f"round_{k}": read_json(lay.metrics / f"sensitivity_r{k}.json")["epsilon"]
                  for k in params.rounds if k >= 2}
    return {
        "guarantee": g.as_dict(), "released_from_round": g.quantities["round"], "epsilon_by_round": eps_rounds,
        "c": p.c, "g": p.g, "k": p.k if p.reweight else None, "reweight": p.reweight, "risk_norm": p.risk_norm,
        "draws": p.draws, "smoke_test": p.smoke_test, "seed": params.seed, "backend": params.model.backend,
        "dataset": {key: data[key] for key in ("rows", "classes", "train_rows", "test_rows", "train_class_gini")},
    }


def round2_arm(params: Params, root: str | Path = ".") -> dict:
    """Comparison arm ``swag_ppm``: an independent draw from SWAG 2 (what the release is with
    ``ppm.reweight: false``), with its own M* in Δ̂, evaluated on the test split."""
    lay = Layout.from_params(params, root)
    backend, model, _, _, g = draw_from_round(params, lay, 2)
    write_arm_model(lay, "swag_ppm", backend, model, g, with_common(RELEASE_CODE))
    return write_arm(lay, "swag_ppm", backend, model, label_info(lay), g, {"round": 2})
