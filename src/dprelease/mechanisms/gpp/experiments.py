"""The GPP experiments on one data setting: the S003 baseline table, the β / d_z / k sweeps, the noisy
encoder's noise tuning and the audit of each fit. Pure: a :class:`GPPData` and configs in, table rows
(public aggregates) out. The distributed rows are added by the stages (they call ``gpp.federated``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np

from dprelease.mechanisms.gpp.audit import ProbeConfig, audit
from dprelease.mechanisms.gpp.data import GPPData
from dprelease.mechanisms.gpp.train import TrainConfig, release, train_method

SETTING = "centralized"


def row(
    data: GPPData,
    method: str,
    config: TrainConfig,
    figures: dict,
    *,
    setting: str = SETTING,
    clients: int = 1,
    experiment: str = "baseline",
    **extra,
) -> dict:
    """One line of ``reports/gpp/table.csv``."""
    return {
        "dataset": data.name,
        "experiment": experiment,
        "method": method,
        "setting": setting,
        "clients": clients,
        "beta": config.beta if method == "gpp" else None,
        "d_z": None if method == "raw" else config.d_z,
        "k": config.k if method == "gpp" else None,
        "epochs": config.epochs,
        **figures,
        **extra,
    }


def fit_and_audit(
    data: GPPData,
    method: str,
    config: TrainConfig,
    *,
    probe: ProbeConfig,
    seed: int,
    noise: float = 1.0,
    keep_model: bool = False,
) -> tuple[dict, object]:
    """Train one method, release one sanitized draw of train and test, run the G.3 audit."""
    t0 = time.perf_counter()
    model, _ = train_method(
        method,
        data.x_train,
        data.u_train,
        data.s_train,
        n_u=data.n_u,
        n_s=data.n_s,
        config=config,
        seed=seed,
        noise=noise,
    )
    train_s = time.perf_counter() - t0
    z_train, z_test = release(model, data.x_train, seed=seed + 1), release(model, data.x_test, seed=seed + 2)
    figures = audit(
        z_train,
        z_test,
        u_train=data.u_train,
        u_test=data.u_test,
        s_train=data.s_train,
        s_test=data.s_test,
        n_u=data.n_u,
        n_s=data.n_s,
        config=probe,
        seed=seed + 3,
    )
    figures["train_s"] = round(train_s, 2)
    print(
        f"gpp {data.name} {method} (d_z {config.d_z}, β {config.beta:g}, k {config.k}, {config.epochs} epochs): "
        f"utility AUC {figures['utility_auc']}, adversary AUC {figures['adversary_auc']}, train {train_s:.1f} s, "
        f"audit {time.perf_counter() - t0 - train_s:.1f} s",
        file=sys.stderr,
        flush=True,
    )  # aggregates only
    return figures, (model if keep_model else None)


def holdout(data: GPPData, fraction: float, seed: int) -> GPPData:
    """A validation setting carved from the training records only (for tuning; the test set is untouched)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.x_train))
    cut = max(1, int(round(len(order) * (1 - fraction))))
    a, b = order[:cut], order[cut:]
    return replace(
        data,
        x_train=data.x_train[a],
        u_train=data.u_train[a],
        s_train=data.s_train[a],
        client_train=data.client_train[a],
        x_test=data.x_train[b],
        u_test=data.u_train[b],
        s_test=data.s_train[b],
        client_test=data.client_train[b],
    )


def tune_noise(
    data: GPPData, config: TrainConfig, grid: list[float], *, probe: ProbeConfig, seed: int
) -> tuple[float, list[dict]]:
    """S003's noisy encoder: "the noise scale is tuned for best utility-privacy trade-off". Each scale
    in ``grid`` is fitted on 80 % of the training records and audited on the other 20 %; the scale with
    the largest ``utility_auc − adversary_auc`` wins (the test set plays no part)."""
    val = holdout(data, 0.2, seed)
    trials = []
    for scale in grid:
        figures, _ = fit_and_audit(val, "noisy", config, probe=probe, seed=seed, noise=scale)
        trials.append(
            {"noise": scale, "utility_auc": figures["utility_auc"], "adversary_auc": figures["adversary_auc"]}
        )
    best = max(trials, key=lambda t: t["utility_auc"] - t["adversary_auc"])
    return float(best["noise"]), trials


def baseline_table(
    data: GPPData,
    config: TrainConfig,
    *,
    probe: ProbeConfig,
    noise_grid: list[float],
    seed: int,
    tune_config: TrainConfig | None = None,
) -> tuple[list[dict], dict, dict]:
    """S003 Table (baseline comparison): No-Privacy, Random Projection, Noisy Encoder (tuned), GPP, and
    the raw input as a reference.
    Returns the rows, the noise tuning record and the fitted GPP encoder."""
    noise, trials = tune_noise(data, tune_config or config, noise_grid, probe=probe, seed=seed)
    rows, models = [], {}
    for method in ("raw", "noprivacy", "random_projection", "noisy", "gpp"):
        figures, model = fit_and_audit(
            data, method, config, probe=probe, seed=seed, noise=noise, keep_model=method == "gpp"
        )
        extra = {"noise": noise} if method == "noisy" else {}
        rows.append(row(data, method, config, figures, **extra))
        if model is not None:
            models[method] = model
    return rows, {"noise": noise, "trials": trials}, models


def sweeps(data: GPPData, config: TrainConfig, *, grids: dict[str, list], probe: ProbeConfig, seed: int) -> list[dict]:
    """GPP over each grid (``beta``, ``d_z``, ``k``), the other settings held at ``config``'s values;
    a configuration that occurs in several grids is fitted once."""
    rows, done = [], {}
    for name, values in grids.items():
        for v in values:
            cfg = replace(config, **{name: type(getattr(config, name))(v)})
            if cfg not in done:  # the shared point (e.g. β 1, d_z 120, k 2) is fitted once
                done[cfg] = fit_and_audit(data, "gpp", cfg, probe=probe, seed=seed)[0]
            rows.append(row(data, "gpp", cfg, done[cfg], experiment=f"sweep_{name}"))
    return rows
