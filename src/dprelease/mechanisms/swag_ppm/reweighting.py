"""Re-weighting (docs/algorithms.md, C, docs/guarantees.md, N) as one stage, ``reweight``: the refits of round 3 and
the choice of the released round; only the decision's outcome is public.

See docs/algorithms.md, I.6."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import atomic_dir, private_dir, read_json, skip_marker, write_json
from dprelease.core.privacy import secret
from dprelease.core.privacy.censor import Censor
from dprelease.core.utility.metrics import f1_summary
from dprelease.mechanisms.swag_ppm import ppm
from dprelease.mechanisms.swag_ppm.fit import refit
from dprelease.mechanisms.swag_ppm.passes import draw_pass
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, iter_samples

NO_REWEIGHT = "ppm.reweight is false (or the censored mechanism, which needs no re-weighting)"


def decide(
    *, mode: str, reached: bool, certified: bool | None, f1_round2: float | None, f1_reweighted: float | None
) -> tuple[bool, str]:
    """(accepted, reason) — the acceptance rule of the module docstring. The reason names the rule that
    decided, never a number (it is published)."""
    if mode == "oneshot":
        return True, "one-shot re-weighting (the paper's procedure): released without an acceptance check"
    if not reached:
        return False, "not accepted: Δ̂ stayed above the target bound within the refit budget; round 2 released"
    if not certified:
        return False, (
            "not accepted: a fresh certification pass after the stop put Δ̂ above the target bound; round 2 released"
        )
    if f1_round2 is None or f1_reweighted is None or f1_reweighted < f1_round2:
        return False, "not accepted: validation weighted F1 below round 2's; round 2 released"
    return True, (
        "accepted: Δ̂ within the target bound on a fresh certification pass, and validation weighted F1 "
        "not below round 2's"
    )


def fit(
    params: Params,
    backend,
    feats,
    y,
    weights: np.ndarray | None,
    r: int,
    attempt: int = 0,
    censor: Censor | None = None,
    *,
    artifacts: Path,
) -> dict:
    """Round r's refit number ``attempt`` (fit.refit), its randomness from the secret key in ``artifacts``."""
    return refit(
        params,
        backend,
        feats,
        y,
        weights,
        r=r,
        seeds=secret.training_seeds(artifacts),
        censor=censor,
        tag=attempt_tag(attempt),
    )


def attempt_tag(attempt: int) -> str:
    """The seed labels' suffix of refit ``attempt`` (0: none, as the round-2 stages)."""
    return "" if attempt == 0 else f"#{attempt}"


def mean_weighted_f1(backend, model, moments: SwagMoments, feats, y: torch.Tensor, *, draws: int, seed: int) -> float:
    """Mean weighted F1 of ``draws`` draws of ``moments`` on (feats, y), classes = the model's outputs."""
    gen = torch.Generator(device=backend.device).manual_seed(seed)
    classes = list(range(backend.n_classes))
    scores = []
    for chunk in iter_samples(moments, draws, 10, gen):
        for theta in chunk:
            set_flat(model, theta)
            scores.append(
                f1_summary(y.numpy(), backend.predict_proba(model, feats).argmax(1).numpy(), classes)["weighted_f1"]
            )
    return float(np.mean(scores))


def validation_f1(params: Params, lay: Layout, backend, model, moments: SwagMoments, r: int) -> float:
    """Mean weighted F1 over ``ppm.validation_draws`` draws of ``moments`` on the validation split."""
    val, y_val = features(lay, "validation")
    return mean_weighted_f1(
        backend,
        model,
        moments,
        val,
        y_val,
        draws=params.ppm.validation_draws,
        seed=secret.seed(lay.artifacts, f"validation/round{r}"),
    )


def reweight(params: Params, root: str | Path = ".") -> dict:
    lay, p = Layout.from_params(params, root), params.ppm
    if not params.ppm.reweighting:
        for part in ("weights", "finetune", "swag"):
            skip_marker(lay.round(3) / part, NO_REWEIGHT)
        for name in ("temperature_r3", "reweight"):
            write_json(lay.metrics / f"{name}.json", {"skipped": NO_REWEIGHT})
        _save_decision(lay, {"skipped": NO_REWEIGHT})
        return skip_marker(lay.sensitivity(3), NO_REWEIGHT, lay.metrics / "sensitivity_r3.json")
    if p.reweight_mode == "iterative" and not (lay.features / "validation.safetensors").is_file():
        raise FileNotFoundError("iterative re-weighting needs a validation split: set data.validation_size > 0")
    backend = backend_for(params, lay)
    feats, y = features(lay)
    w = np.load(lay.weights(2) / "weights.npy")
    L = np.load(lay.sensitivity(2) / "record_max_loss.npy")
    delta2 = read_json(lay.metrics / "sensitivity_r2.json")["local_sensitivity"]
    target = p.reweight_target or delta2
    bound = target * (1 + p.reweight_tolerance)
    refits = 1 if p.reweight_mode == "oneshot" else p.max_refits
    trail = []
    for t in range(refits):
        w = (
            ppm.reweight(w, L, k=p.k, form=p.reweight_form)
            if p.reweight_mode == "oneshot"
            else ppm.reweight_toward(w, L, target=p.reweight_aim * target, step=p.reweight_step)
        )
        fitted = fit(params, backend, feats, y, w, 3, attempt=t, artifacts=lay.artifacts)
        early = None if p.reweight_mode == "oneshot" else bound
        L, max_deltas = draw_pass(
            backend,
            fitted["model"],
            fitted["moments"],
            feats,
            y,
            w,
            draws=p.draws,
            chunk=p.draw_batch,
            seed=secret.seed(lay.artifacts, "sensitivity" + attempt_tag(t) + "/round3"),
            desc=f"sensitivity r3 refit {t + 1}",
            stop_above=early,
            min_draws=p.draws // 2,
        )
        delta = float(max_deltas.max())
        trail.append(
            {"refit": t + 1, "local_sensitivity": delta, "draws": len(max_deltas), "weight_mean": float(w.mean())}
        )
        if delta <= bound:
            break
    reached = delta <= bound
    f2 = f3 = certified = None
    if p.reweight_mode == "iterative" and reached:
        # certification: a separate fresh full pass after the stop (independent of the pass that stopped it)
        L, max_deltas = draw_pass(
            backend,
            fitted["model"],
            fitted["moments"],
            feats,
            y,
            w,
            draws=p.draws,
            chunk=p.draw_batch,
            seed=secret.seed(lay.artifacts, "certify/round3"),
            desc="certify r3",
        )
        delta = float(max_deltas.max())
        certified = delta <= bound
        if certified:
            round2 = SwagMoments.load(lay.swag(2) / "moments.safetensors", device=backend.device)
            f2 = validation_f1(params, lay, backend, fitted["model"], round2, 2)
            f3 = validation_f1(params, lay, backend, fitted["model"], fitted["moments"], 3)
    accepted, reason = decide(
        mode=p.reweight_mode, reached=reached, certified=certified, f1_round2=f2, f1_reweighted=f3
    )
    _save_round3(lay, w, fitted, L, max_deltas)
    write_json(
        lay.metrics / "sensitivity_r3.json",
        {"round": 3, "local_sensitivity": delta, "epsilon": 2 * delta, "draws": len(max_deltas)},
    )  # a stage input (draw), not published
    private = {
        "target": target if p.reweight_mode == "iterative" else None,
        "bound": bound if p.reweight_mode == "iterative" else None,
        "refits": len(trail),
        "trail": trail,
        "reached": reached,
        "certified": certified,
        "certified_local_sensitivity": delta if certified is not None else None,
        "validation_weighted_f1": {"round_2": f2, "round_3": f3},
        "weight_mean": float(w.mean()),
        "weights_one": int((w == 1).sum()),
    }
    _save_decision(lay, private)
    summary = {
        "mode": p.reweight_mode,
        "accepted": accepted,
        "released_round": 3 if accepted else 2,
        "reason": reason,
        "max_refits": refits,
    }
    write_json(lay.metrics / "reweight.json", summary)
    return summary


def _save_decision(lay: Layout, obj: dict) -> None:
    private_dir(lay.round(3))
    write_json(decision_file(lay), obj, private=True)  # 0600 in a 0700 folder


def decision_file(lay: Layout) -> Path:
    """The re-weighting decision's real-valued statistics: private (never published, logged or tracked)."""
    return lay.round(3) / "decision.json"


def _save_round3(lay: Layout, w: np.ndarray, fitted: dict, L: np.ndarray, max_deltas: np.ndarray) -> None:
    with atomic_dir(lay.weights(3), private=True) as tmp:
        np.save(tmp / "weights.npy", w)
    with atomic_dir(lay.finetune(3), private=True) as tmp:
        save_file({"theta": fitted["theta"].contiguous()}, str(tmp / "theta.safetensors"))
        write_json(tmp / "history.json", {"epoch_loss": fitted["finetune_losses"]})
    with atomic_dir(lay.swag(3), private=True) as tmp:
        fitted["moments"].save(tmp / "moments.safetensors")
        write_json(tmp / "history.json", {"epoch_loss": fitted["swag_losses"]})
    write_json(lay.metrics / "temperature_r3.json", fitted["temperature"])
    with atomic_dir(lay.sensitivity(3), private=True) as tmp:
        np.save(tmp / "record_max_loss.npy", L)
        np.save(tmp / "max_deltas.npy", max_deltas)


def released_round(params: Params, lay: Layout) -> int:
    """The round the release is drawn from: 3 when re-weighting ran and was accepted, else 2."""
    if not params.ppm.reweighting:
        return 2
    return int(read_json(lay.metrics / "reweight.json")["released_round"])
