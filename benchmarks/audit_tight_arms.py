"""The arms of `make audit-tight` (benchmarks/audit_tight.py: the command, its rows and its files): the secret
subsample, the secret coins and calibration runs, R runs of DP-SGD with a gradient canary (honest, or the σ/4
planted bug) and R runs of the non-private fine-tune labelled ε = 1 with an input canary. All audit randomness
comes from the project's secret key (``privacy.secret``); the tests run these arms on synthetic embeddings
(tests/compare/mia/test_tight.py)."""

from __future__ import annotations

import numpy as np
import torch

from dprelease.compare.mia import tight
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import load_features
from dprelease.core.backends.head import Head, HeadBackend
from dprelease.core.privacy import secret
from dprelease.core.training import finetune
from dprelease.mechanisms.dpsgd.accounting import default_delta
from dprelease.mechanisms.dpsgd.batched import Canary, setting_for, train_batched
from dprelease.mechanisms.dpsgd.stages import dpsgd_target

CANARY_NORM = 10.0  # × C: clipping must bring it down to C
PLANTED_DIVISOR = 4.0
NONPRIVATE_CLAIM = 1.0


def subsample(lay: Layout, records: int, classes: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``records`` training embeddings of the ``classes`` largest classes (secret draw), labels 0..K−1, an
    extra zero column for the canary; and n, the size of the whole training split."""
    feats, y = load_features(lay.features / "train.safetensors")
    x = feats["x"]
    top = torch.bincount(y).argsort(descending=True)[:classes]
    pool = torch.nonzero(torch.isin(y, top)).flatten().numpy()
    if len(pool) < records:
        raise SystemExit(f"only {len(pool)} records in the {classes} largest classes (< {records})")
    pick = torch.from_numpy(
        np.sort(secret.numpy_rng(lay.artifacts, "audit_tight/subsample").choice(pool, records, replace=False))
    )
    relabel = {int(c): i for i, c in enumerate(top)}
    xs = torch.cat([x[pick], torch.zeros(records, 1)], dim=1)
    return xs, torch.tensor([relabel[int(c)] for c in y[pick]]), len(y)


def calibration_runs(lay: Layout, label: str, runs: int, share: float) -> np.ndarray:
    """A secret share of the runs that only chooses a test (never evaluated)."""
    calib = np.zeros(runs, dtype=bool)
    calib[
        secret.numpy_rng(lay.artifacts, f"audit_tight/{label}/calibration").permutation(runs)[
            : max(4, int(round(share * runs)))
        ]
    ] = True
    return calib


def coins(lay: Layout, label: str, runs: int) -> np.ndarray:
    """Secret coins: which runs include the canary (probability ½)."""
    return secret.numpy_rng(lay.artifacts, f"audit_tight/{label}/coins").random(runs) < 0.5


def dpsgd_arm(
    params,
    lay: Layout,
    x,
    y,
    n: int,
    *,
    label: str,
    runs: int,
    chunk: int,
    design: int,
    calibration: float,
    divisor: float = 1.0,
) -> dict:
    """R runs of DP-SGD (the DP-SGD stage's q, T, σ; noise σ/divisor) with a gradient canary. Two tests
    (Bonferroni), each the LR score with a threshold designed on ``design`` runs per side simulated before
    the evaluated runs are seen: one for the CLAIMED mechanism (σ, q, T), one for the noise σ̂ measured on
    a share ``calibration`` of the runs (kept out of the evaluation: it adapts to an implementation that
    adds less noise than it claims)."""
    run = params.dpsgd.run_for(params.model.backend)
    delta = params.released.delta or default_delta(n)
    eps_target = dpsgd_target(params)  # the declared target (params.yaml), never the release's ε
    s = setting_for(
        n=n,
        epochs=run.epochs,
        batch_size=run.batch_size or n,
        lr=run.lr,  # 0: full batch
        max_grad_norm=run.max_grad_norm,
        target_epsilon=eps_target,
        delta=delta,
        conversion=params.dpsgd.conversion,
        records=len(x),
        planted_noise_divisor=divisor,
        optimizer=run.optimizer,
        momentum=run.momentum,
    )
    classes, dim = int(y.max()) + 1, x.shape[1]
    init = Head(dim, classes, hidden=0, dropout=0.0, seed=params.seed).net[-1]
    w0, b0 = init.weight.detach().clone(), init.bias.detach().clone()
    w0[:, -1] = 0.0  # the canary coordinates start at 0 (the auditor's initialisation)
    member = coins(lay, label, runs)
    alpha, claim = params.privacy_audit.alpha, s.epsilon(delta, params.dpsgd.conversion)
    calib = calibration_runs(lay, label, runs, calibration)
    evaluated = (int((member & ~calib).sum()), int((~member & ~calib).sum()))

    def designed(sigma: float, tag: str) -> tuple[float, str]:
        """The threshold for the LR with ``sigma``, designed on runs simulated with that noise."""
        sim_in, sim_out = tight.simulate_lr_scores(
            secret.numpy_rng(lay.artifacts, f"audit_tight/{label}/design/{tag}"), design, s.sample_rate, sigma, s.steps
        )
        return tight.choose_test(
            np.concatenate([sim_in, sim_out]),
            np.repeat([True, False], design),
            alpha=alpha / 2,
            delta=delta,
            counts=evaluated,
        )

    simulated = designed(s.noise_multiplier, "claimed")
    traces = []
    for i, start in enumerate(range(0, runs, chunk)):
        r = min(chunk, runs - start)
        gens = {
            k: torch.Generator().manual_seed(secret.seed(lay.artifacts, f"audit_tight/{label}/{i}/{k}"))
            for k in ("sample", "noise", "canary")
        }
        canary = Canary(
            row=0,
            col=dim - 1,
            norm=CANARY_NORM * run.max_grad_norm,
            included=torch.from_numpy(member[start : start + r]),
            generator=gens["canary"],
        )
        _, _, trace = train_batched(
            w0.expand(r, -1, -1),
            b0.expand(r, -1),
            x,
            y,
            s,
            sample_generator=gens["sample"],
            noise_generator=gens["noise"],
            canary=canary,
        )
        traces.append(trace.numpy())
    trace = np.concatenate(traces)
    scores = tight.lr_scores(trace, s.sample_rate, s.noise_multiplier)  # the claimed σ
    # the calibration test: the LR with the noise the calibration runs show (an implementation that adds
    # less noise than it claims is then tested for what it does), designed on runs simulated with that noise
    sigma_hat = float(trace[calib & ~member].std())
    fitted = tight.lr_scores(trace, s.sample_rate, sigma_hat)
    ev = ~calib
    return {
        "claimed_epsilon": claim,
        "delta": delta,
        "sample_rate": s.sample_rate,
        "steps": s.steps,
        "noise_multiplier": s.noise_multiplier,
        "noise_divisor": divisor,
        "records": len(x),
        "n": n,
        "runs": runs,
        "design_runs": 2 * design,
        "calibration_runs": int(calib.sum()),
        "sigma_fitted": sigma_hat,
        "bound": tight.audit(
            member[ev],
            {
                f"LR with the claimed σ, threshold from {2 * design:,} runs simulated from the claimed mechanism": (
                    scores[ev],
                    *simulated,
                ),
                f"LR with σ fitted on {int(calib.sum()):,} calibration runs, threshold from {2 * design:,} runs "
                "simulated with it": (fitted[ev], *designed(sigma_hat, "fitted")),
            },
            alpha=alpha,
            delta=delta,
        ),
        "gdp_fit": tight.gdp_fit(trace.sum(1), member, delta),
    }


def nonprivate_arm(params, lay: Layout, x, y, *, runs: int) -> dict:
    """R runs of the project's non-private fine-tune with an input canary, claimed ε = 1 (planted bug). The
    test is fixed a priori: without the canary no gradient reaches the canary column, which stays at 0
    (AdamW's decay keeps 0 at 0), so "in" iff its norm is > 0."""
    classes, dim = int(y.max()) + 1, x.shape[1]
    backend = HeadBackend(classes, torch.device("cpu"), params.seed, params.model.head)
    opt = params.backend.finetune.model_copy(update={"epochs": params.nonprivate.epochs})
    xc = torch.zeros(1, dim)
    xc[0, -1] = 1.0  # a unit embedding on the column no record uses
    member = coins(lay, "nonprivate", runs)
    scores = np.empty(runs)
    for i in range(runs):
        model = backend.build_model(dim)
        first = next(m for m in model.net if isinstance(m, torch.nn.Linear))
        with torch.no_grad():
            first.weight[:, -1] = 0.0
        xs, ys = (torch.cat([x, xc]), torch.cat([y, torch.zeros(1, dtype=y.dtype)])) if member[i] else (x, y)
        finetune(backend, model, {"x": xs}, ys, None, opt, seed=params.seed + i)
        scores[i] = float(first.weight.detach()[:, -1].norm())
    return {
        "claimed_epsilon": NONPRIVATE_CLAIM,
        "delta": 0.0,
        "records": len(x),
        "runs": runs,
        "epochs": opt.epochs,
        "bound": tight.audit(
            member,
            {
                "norm of the canary column, threshold a priori (it moves only with the canary)": (
                    scores,
                    float(np.finfo(np.float64).tiny),
                    "high",
                )
            },
            alpha=params.privacy_audit.alpha,
        ),
    }
