"""DP-SGD with its configuration chosen privately (docs/frontier.md, "Private selection"): the frontier's
``dpsgd_linear_private_selection`` points, whose ε covers the search too.

The base mechanism Q draws a configuration uniformly from the declared grid (dpsgd.grid), trains the linear
head with DP-SGD at that configuration's σ, and scores it by its count of correct validation predictions plus
Gaussian noise N(0, σ_s²) (sensitivity 1 under adding or removing one record). Its RDP curve is the largest of
the configurations' DP-SGD curves (Opacus's RDP analysis) plus the score's λ/(2σ_s²): composition over the
whole data set, conservative whichever split a record is in. The procedure repeats Q K ~ TNB(η, γ) times and
releases the run with the best noisy score; its RDP is Papernot & Steinke's bound
(:mod:`dprelease.core.privacy.tuning`), converted to (ε, δ) with Opacus's conversion. The per-configuration noise
level is one scalar s (each configuration's σ is the one its own DP-SGD would need for ε = s), the largest s
whose total ε ≤ the declared level. K, the draws and the noise come from the secret key and from nothing a run
computes, so they are drawn first (:func:`plan_selection`) and every run of every selection at every level trains
in one batched call; nothing of a run other than the released one leaves the process.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from opacus.accountants.analysis.rdp import compute_rdp

from dprelease.core.privacy import accountants, secret
from dprelease.core.privacy.rdp import ORDERS, rdp_to_epsilon
from dprelease.core.privacy.tuning import draw_repetitions, gaussian_rdp, selection_rdp
from dprelease.core.utility.metrics import f1_summary, mean_sd
from dprelease.core.utility.points import PRIVATE_SELECTION, Point
from dprelease.mechanisms.dpsgd.accounting import noise_multiplier, steps_for
from dprelease.mechanisms.dpsgd.batched import Setting, setting_for

CONVERSION = "opacus"
SMALLEST_LEVEL = 0.25  # the per-run level s the search starts from (the RDP orders up to 63 floor ε near 0.14)


def calibrate(
    configs: list[dict],
    *,
    n: int,
    epsilon: float,
    delta: float,
    eta: float,
    gamma: float,
    score_sigma: float,
    tol: float = 1e-3,
) -> tuple[float, dict, float] | None:
    """(s, {(q, T): σ}, total ε) with the largest per-configuration level s whose selection ε ≤ ``epsilon``, or
    None when even s → 0 cannot meet it (the selection's own cost exceeds the level)."""
    shapes = sorted({(c["batch_size"] / n, steps_for(c["epochs"], c["batch_size"] / n)) for c in configs})

    def total(s: float) -> tuple[float, dict]:
        sigmas = {(q, t): noise_multiplier(s, delta, q, t, CONVERSION) for q, t in shapes}
        base = np.max(
            [compute_rdp(q=q, noise_multiplier=sigmas[(q, t)], steps=t, orders=ORDERS) for q, t in shapes], axis=0
        ) + gaussian_rdp(ORDERS, sigma=score_sigma)
        rdp = selection_rdp(base, ORDERS, eta=eta, gamma=gamma)
        with warnings.catch_warnings():  # "optimal order is the largest alpha": ε' is a bound at any order
            warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
            return rdp_to_epsilon(rdp, ORDERS, delta, CONVERSION), sigmas

    lo, hi = SMALLEST_LEVEL, epsilon
    if epsilon <= lo or total(lo)[0] > epsilon:
        return None
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid)[0] <= epsilon else (lo, mid)
    eps, sigmas = total(lo)
    return lo, sigmas, eps


def plan_selection(
    configs: list[dict],
    sigmas: dict,
    n: int,
    *,
    eta: float,
    gamma: float,
    score_sigma: float,
    artifacts: Path,
    label: str,
) -> list[tuple[dict, Setting, str, float]]:
    """One private selection's K runs of Q before any training: per run its configuration, its DP-SGD setting (σ
    from ``sigmas``), its key label and its score noise. K, the draws and the noise come from the secret key and
    from nothing a run computes, so they can be drawn first and the runs trained together."""
    rng = np.random.default_rng(secret.seed(artifacts, label + "/selection"))
    noise = torch.Generator().manual_seed(secret.seed(artifacts, label + "/score"))
    runs = []
    for k in range(draw_repetitions(rng, eta=eta, gamma=gamma)):
        cfg = configs[int(rng.integers(len(configs)))]
        q = cfg["batch_size"] / n
        setting = setting_for(
            n=n,
            epochs=cfg["epochs"],
            batch_size=cfg["batch_size"],
            lr=cfg["lr"],
            max_grad_norm=cfg["max_grad_norm"],
            target_epsilon=1.0,
            delta=0.5,
            optimizer=cfg["optimizer"],
            momentum=cfg["momentum"],
            sigma=sigmas[(q, steps_for(cfg["epochs"], q))],
        )
        runs.append((cfg, setting, f"{label}/run/{k}", score_sigma * float(torch.randn(1, generator=noise))))
    return runs


def released(
    runs: list[tuple[dict, Setting, str, float]], models: list, xv: torch.Tensor, yv: torch.Tensor, *, predict
) -> tuple[tuple, dict]:
    """The run with the best noisy score (count of correct validation predictions + its score noise; the first on
    a tie): its model and its configuration with σ. Nothing of the other runs leaves this function."""
    best, best_score = None, -np.inf
    for (cfg, setting, _, noise), model in zip(runs, models, strict=True):
        score = float((predict(*model, xv) == yv).sum()) + noise
        if score > best_score:
            best, best_score = (model, {**cfg, "noise_multiplier": setting.noise_multiplier}), score
    return best


def run_selection(
    configs: list[dict],
    sigmas: dict,
    data: tuple,
    n_classes: int,
    *,
    fit_many,
    predict,
    eta: float,
    gamma: float,
    score_sigma: float,
    artifacts: Path,
    label: str,
) -> tuple[tuple, dict]:
    """One private selection: K runs of Q (one ``fit_many`` call), the best noisy score's model and configuration."""
    xt, yt, xv, yv = data
    runs = plan_selection(
        configs, sigmas, len(yt), eta=eta, gamma=gamma, score_sigma=score_sigma, artifacts=artifacts, label=label
    )
    models = fit_many([(s, run_label) for _, s, run_label, _ in runs], xt, yt, n_classes, artifacts=artifacts)
    return released(runs, models, xv, yv, predict=predict)


def private_points(
    shortlists: dict,
    splits: dict,
    n_classes: int,
    *,
    grid,
    epsilons,
    seeds: int,
    delta: float,
    fit_many,
    predict,
    artifacts: Path,
    n: int | None = None,
) -> tuple[list[Point], list[str]]:
    """One point per declared ε the selection can meet (``seeds`` independent selections each), and notes.
    ``shortlists``: per ε, the configurations the selection draws from (the public proxy's best few, or the grid).
    Every run of every selection at every ε is trained in one ``fit_many`` call."""
    (xt, yt), (xv, yv), (xs, ys) = splits["train"], splits["validation"], splits["test"]
    n = n or len(yt)  # the public n̂ when the caller has one (q and the normaliser never read the private count)
    ps, plans, notes = grid.private_selection, [], []
    for eps in epsilons:
        configs = shortlists[eps]
        found = calibrate(
            configs, n=n, epsilon=eps, delta=delta, eta=ps.eta, gamma=ps.gamma, score_sigma=ps.score_sigma
        )
        if found is None:
            notes.append(f"private selection cannot meet ε {eps:g}: its own cost exceeds it")
            continue
        s, sigmas, total = found
        plans.append(
            (
                eps,
                len(configs),
                s,
                total,
                [
                    plan_selection(
                        configs,
                        sigmas,
                        n,
                        eta=ps.eta,
                        gamma=ps.gamma,
                        score_sigma=ps.score_sigma,
                        artifacts=artifacts,
                        label=f"frontier/dpsgd/private/{eps:g}/{k}",
                    )
                    for k in range(seeds)
                ],
            )
        )
    jobs = [(setting, label) for *_, selections in plans for runs in selections for _, setting, label, _ in runs]
    models, points = iter(fit_many(jobs, xt, yt, n_classes, artifacts=artifacts) if jobs else []), []
    for eps, candidates, s, total, selections in plans:
        chosen = [released(runs, [next(models) for _ in runs], xv, yv, predict=predict) for runs in selections]
        test = [f1_summary(ys.numpy(), predict(*m, xs).numpy(), range(n_classes)) for m, _ in chosen]
        val = [f1_summary(yv.numpy(), predict(*m, xv).numpy(), range(n_classes))["weighted_f1"] for m, _ in chosen]
        points.append(
            Point(
                mechanism="dpsgd_linear_private_selection",
                label="DP-SGD linear head · private selection",
                kind="dp_accountant",
                epsilon=total,
                delta=delta,
                accountant=f"{accountants.get(CONVERSION).label} + Papernot–Steinke selection (η {ps.eta:g}, γ {ps.gamma:g})",
                weighted_f1=[t["weighted_f1"] for t in test],
                macro_f1=[t["macro_f1"] for t in test],
                target_epsilon=eps,
                validation_weighted_f1=mean_sd(val)[0],
                tuning=PRIVATE_SELECTION,
                config={
                    "candidates": candidates,
                    "per_run_epsilon": s,
                    "eta": ps.eta,
                    "gamma": ps.gamma,
                    "score_sigma": ps.score_sigma,
                    "chosen": [c for _, c in chosen],
                },
            )
        )
    return points, notes
