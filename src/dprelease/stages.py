"""The pipeline stages. Each is ONE function ``fn(params, root) -> summary`` that reads its inputs from
files and writes its outputs atomically; the Prefect tasks (``tasks/``) and the DVC stages
(``dprelease stage NAME``) both call these. Summaries hold public aggregates only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import data as data_mod
from .backends import make_backend
from .backends.base import get_flat, load_features, save_features, set_flat
from .config import Params
from .io import atomic_dir, read_json, write_json
from .layout import Layout
from .mechanism import ppm
from .mechanism.swag import SwagMoments, iter_samples
from .release import DELTA_TEXT, write_release
from .seeds import stage_seed
from .train import finetune as run_finetune
from .train import swag as run_swag


def label_info(lay: Layout) -> dict:
    return read_json(lay.data / "labels.json")


def backend_for(params: Params, lay: Layout):
    return make_backend(params, len(label_info(lay)["codes"]))


def _train_set(lay: Layout):
    return load_features(lay.features / "train.safetensors")


def _skip(folder: Path, why: str, metrics: Path | None = None) -> dict:
    """Round-3 stages when re-weighting is off: leave a marker so DVC's outputs exist."""
    with atomic_dir(folder) as tmp:
        write_json(tmp / "skipped.json", {"skipped": why})
    if metrics is not None:
        write_json(metrics, {"skipped": why})
    return {"skipped": why}


def _load_weights(lay: Layout, r: int) -> torch.Tensor | None:
    return None if r == 1 else torch.from_numpy(np.load(lay.weights(r) / "weights.npy")).float()


# 1. data ------------------------------------------------------------------------------------------
def stratify(params: Params, root: str | Path = ".") -> dict:
    """Load, stratify (min(N_c, cap) per class), drop tiny classes, split 50/50 (spec D.1–D.3)."""
    lay, d = Layout.from_params(params, root), params.data
    df = data_mod.read_records(Path(root) / d.path, d.text_column, d.label_column)
    sample = data_mod.stratified_sample(df, cap=d.cap, min_class_size=d.min_class_size, seed=params.seed,
                                        limit_classes=d.limit_classes)
    train, test = data_mod.split(sample, test_size=d.test_size, seed=params.seed)
    validation = None
    if d.validation_size > 0:  # held out for private selection scoring (random, not stratified)
        validation = test.sample(frac=d.validation_size, random_state=params.seed)
        test = test.drop(validation.index).reset_index(drop=True)
        validation = validation.reset_index(drop=True)
    codes = sorted(sample["label"].unique(), key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))
    titles = data_mod.load_titles()
    train_sizes = train["label"].value_counts()
    test_sizes = test["label"].value_counts()
    labels = {"codes": codes, "titles": [titles.get(c, c) for c in codes],
              "train_sizes": [int(train_sizes.get(c, 0)) for c in codes],
              "test_sizes": [int(test_sizes.get(c, 0)) for c in codes]}
    summary = {"source_rows": len(df), "rows": len(sample), "classes": len(codes), "train_rows": len(train),
               "test_rows": len(test), "validation_rows": 0 if validation is None else len(validation),
               "train_class_gini": round(data_mod.gini(labels["train_sizes"]), 4),
               "largest_class": max(labels["train_sizes"]), "smallest_class": min(labels["train_sizes"])}
    with atomic_dir(lay.data) as tmp:
        train[["text", "label"]].to_csv(tmp / "train.csv", index=False)
        test[["text", "label"]].to_csv(tmp / "test.csv", index=False)
        if validation is not None:
            validation[["text", "label"]].to_csv(tmp / "validation.csv", index=False)
        write_json(tmp / "labels.json", labels)
    write_json(lay.metrics / "data.json", summary)
    return summary


def featurize(params: Params, root: str | Path = ".") -> dict:
    """Backend features for both splits (head: cached encoder embeddings; full: token ids)."""
    lay = Layout.from_params(params, root)
    codes = label_info(lay)["codes"]
    index = {c: i for i, c in enumerate(codes)}
    backend = backend_for(params, lay)
    with atomic_dir(lay.features) as tmp:
        for split in ("train", "test", "validation"):
            if not (lay.data / f"{split}.csv").is_file():
                continue
            df = pd.read_csv(lay.data / f"{split}.csv", dtype=str, keep_default_na=False)
            feats = backend.featurize(df["text"].tolist(), progress=True)
            y = torch.tensor([index[c] for c in df["label"]], dtype=torch.long)
            save_features(tmp / f"{split}.safetensors", feats, y)
    return {"backend": params.model.backend}


# 2–5. fine-tune and SWAG per round -------------------------------------------------------------------
def finetune(params: Params, r: int, root: str | Path = ".") -> dict:
    """Round r fine-tune FROM THE BASE MODEL (round 1 unweighted, later rounds weighted, spec B.5)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return _skip(lay.finetune(r), "ppm.reweight is false")
    backend = backend_for(params, lay)
    feats, y = _train_set(lay)
    model = backend.new_model(feats)
    hist = run_finetune(backend, model, feats, y, _load_weights(lay, r), params.backend.finetune,
                        seed=stage_seed(params.seed, "finetune", r), progress=True, desc=f"fine-tune r{r}")
    with atomic_dir(lay.finetune(r)) as tmp:
        from safetensors.torch import save_file

        save_file({"theta": get_flat(model).cpu().contiguous()}, str(tmp / "theta.safetensors"))
        write_json(tmp / "history.json", {"epoch_loss": hist.losses})
    return {"round": r, "final_loss": hist.losses[-1]}


def swag(params: Params, r: int, root: str | Path = ".") -> dict:
    """Round r SWAG phase: constant-lr SGD from the fine-tuned θ, one snapshot per epoch (spec A.1)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return _skip(lay.swag(r), "ppm.reweight is false")
    backend = backend_for(params, lay)
    feats, y = _train_set(lay)
    model = _model_at(backend, feats, lay.finetune(r) / "theta.safetensors")
    moments, hist = run_swag(backend, model, feats, y, _load_weights(lay, r), params.backend.swag,
                             seed=stage_seed(params.seed, "swag", r), progress=True, desc=f"SWAG r{r}")
    with atomic_dir(lay.swag(r)) as tmp:
        moments.save(tmp / "moments.safetensors")
        write_json(tmp / "history.json", {"epoch_loss": hist.losses})
    return {"round": r, "snapshots": moments.n_models, "rank": moments.rank, "final_loss": hist.losses[-1]}


def _model_at(backend, feats, theta_path: Path):
    from safetensors.torch import load_file

    model = backend.new_model(feats)
    set_flat(model, load_file(str(theta_path))["theta"])
    return model


def _posterior_pass(params: Params, lay: Layout, r: int, weights: np.ndarray | None, what: str):
    """S draws from SWAG_r → running per-record max CE (L_i) and per-draw max weighted loss (M_s)."""
    backend = backend_for(params, lay)
    feats, y = _train_set(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    model = backend.new_model(feats)
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, what, r))
    S, chunk = params.ppm.draws, params.ppm.draw_batch
    record_max = np.full(len(y), -np.inf)
    max_deltas = []
    with tqdm(total=S, desc=f"{what} r{r} draws", unit="draw") as bar:
        for thetas in iter_samples(moments, S, chunk, gen):
            ce = backend.per_record_ce(model, thetas, feats, y).double().numpy()
            record_max = np.maximum(record_max, ce.max(axis=0))
            if weights is not None:
                max_deltas.append(ppm.max_weighted_loss(ce, weights))
            bar.update(len(thetas))
    return record_max, (np.concatenate(max_deltas) if max_deltas else None)


# 4. risk → weights ----------------------------------------------------------------------------------
def risk(params: Params, root: str | Path = ".") -> dict:
    """r̂_i = max over S draws of SWAG_1 of CE_i; w = clip(c(1 − f̃) + g, 0, 1) (spec B.2–B.4)."""
    lay, p = Layout.from_params(params, root), params.ppm
    record_risk, _ = _posterior_pass(params, lay, 1, None, "risk")
    w = ppm.weights_from_risk(record_risk, c=p.c, g=p.g, method=p.risk_norm)
    with atomic_dir(lay.weights(2)) as tmp:
        np.save(tmp / "weights.npy", w)
    summary = {"risk_min": float(record_risk.min()), "risk_max": float(record_risk.max()), **_weight_stats(w)}
    write_json(lay.metrics / "risk.json", summary)
    return summary


def _weight_stats(w: np.ndarray) -> dict:
    return {"weight_mean": float(w.mean()), "weight_median": float(np.median(w)),
            "weights_zero": int((w == 0).sum()), "weights_one": int((w == 1).sum())}


# 6. sensitivity ------------------------------------------------------------------------------------------
def sensitivity(params: Params, r: int, root: str | Path = ".") -> dict:
    """M_s = max_i w_i CE_i(θ^(s)) over S draws of SWAG_r; Δ = max_s M_s; ε = 2Δ (spec B.6)."""
    lay = Layout.from_params(params, root)
    if r == 3 and not params.ppm.reweight:
        return _skip(lay.sensitivity(r), "ppm.reweight is false", lay.metrics / f"sensitivity_r{r}.json")
    w = np.load(lay.weights(r) / "weights.npy")
    record_max, max_deltas = _posterior_pass(params, lay, r, w, "sensitivity")
    delta, eps = ppm.epsilon(max_deltas)
    with atomic_dir(lay.sensitivity(r)) as tmp:
        np.save(tmp / "record_max_loss.npy", record_max)  # private: per-record, feeds re-weighting
        np.save(tmp / "max_deltas.npy", max_deltas)  # per-draw maxima (aggregates) for the max-delta plot
    summary = {"round": r, "delta": delta, "epsilon": eps, "draws": len(max_deltas)}
    write_json(lay.metrics / f"sensitivity_r{r}.json", summary)
    return summary


# 7. re-weighting -------------------------------------------------------------------------------------------
def reweight(params: Params, root: str | Path = ".") -> dict:
    """Round-3 weights pulled toward the database bound with strength k (spec C.2)."""
    lay, p = Layout.from_params(params, root), params.ppm
    if not p.reweight:
        return _skip(lay.weights(3), "ppm.reweight is false", lay.metrics / "reweight.json")
    w = np.load(lay.weights(2) / "weights.npy")
    L = np.load(lay.sensitivity(2) / "record_max_loss.npy")
    w_new = ppm.reweight(w, L, k=p.k, form=p.reweight_form)
    with atomic_dir(lay.weights(3)) as tmp:
        np.save(tmp / "weights.npy", w_new)
    summary = {"k": p.k, "form": p.reweight_form, **_weight_stats(w_new)}
    write_json(lay.metrics / "reweight.json", summary)
    return summary


# 8. the released draw -----------------------------------------------------------------------------------------
def draw_from_round(params: Params, lay: Layout, r: int):
    """One independent draw θ* from SWAG_r, its M* = max_i w_i CE_i(θ*), and Δ̂ = max(Δ̂_r, M*)."""
    backend = backend_for(params, lay)
    feats, y = _train_set(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, "release", r))
    theta = next(iter_samples(moments, 1, 1, gen))
    model = backend.new_model(feats)
    ce = backend.per_record_ce(model, theta, feats, y).double().numpy()
    m_star = float(ppm.max_weighted_loss(ce, np.load(lay.weights(r) / "weights.npy"))[0])
    delta = max(read_json(lay.metrics / f"sensitivity_r{r}.json")["delta"], m_star)
    set_flat(model, theta[0])
    summary = {"round": r, "released_draw_max_loss": m_star, "delta": delta, "epsilon": 2 * delta}
    return backend, model, theta[0], summary


def draw(params: Params, root: str | Path = ".") -> dict:
    """ONE independent draw θ* from the last SWAG; its own M* enters Δ (spec B.7b step 7)."""
    lay = Layout.from_params(params, root)
    backend, model, theta, summary = draw_from_round(params, lay, params.final_round)
    with atomic_dir(lay.draw) as tmp:
        from safetensors.torch import save_file

        save_file({"theta": theta.cpu().contiguous()}, str(tmp / "theta.safetensors"))
    labels = label_info(lay)
    write_release(lay.release, backend, model, labels["codes"], labels["titles"],
                  release_manifest(params, lay, summary))
    write_json(lay.metrics / "release.json", summary)
    return summary


def release_manifest(params: Params, lay: Layout, summary: dict) -> dict:
    p, data = params.ppm, read_json(lay.metrics / "data.json")
    eps_rounds = {f"round_{k}": read_json(lay.metrics / f"sensitivity_r{k}.json")["epsilon"]
                  for k in params.rounds if k >= 2}
    return {
        "mechanism": "SWAG-PPM (Bayesian pseudo posterior mechanism, one posterior draw)",
        "epsilon": summary["epsilon"], "delta": DELTA_TEXT, "local_sensitivity": summary["delta"],
        "epsilon_by_round": eps_rounds, "released_from_round": summary["round"],
        "c": p.c, "g": p.g, "k": p.k if p.reweight else None, "reweight": p.reweight, "risk_norm": p.risk_norm,
        "draws": p.draws, "seed": params.seed, "backend": params.model.backend,
        "dataset": {key: data[key] for key in ("rows", "classes", "train_rows", "test_rows", "train_class_gini")},
    }


STAGE_FUNCS = {"stratify": stratify, "featurize": featurize, "risk": risk, "reweight": reweight, "draw": draw}
ROUND_FUNCS = {"finetune": finetune, "swag": swag, "sensitivity": sensitivity}


def run_stage(name: str, params: Params, root: str | Path = ".") -> dict:
    """Run a stage by its DVC name (``finetune_r2`` = ``finetune(params, 2)``)."""
    from .audit import audit
    from .baselines import ARM_FUNCS
    from .report import compare_report

    if name == "audit":
        return audit(params, root)
    if name in ARM_FUNCS:
        return ARM_FUNCS[name](params, root)
    if name == "compare_report":
        return compare_report(params, root)
    if name == "select":
        from .private_selection import private_select

        return private_select(params, root)
    if name in STAGE_FUNCS:
        return STAGE_FUNCS[name](params, root)
    base, _, rnd = name.rpartition("_r")
    if base in ROUND_FUNCS and rnd in {"1", "2", "3"}:
        return ROUND_FUNCS[base](params, int(rnd), root)
    raise KeyError(f"unknown stage {name!r}")
