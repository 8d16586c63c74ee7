"""Stage ``frontier_linear_ppm``: the linear PPM's points on the privacy/utility frontier (docs/linear_ppm.md).

Risk-weighted points at each declared (λ, T) of ``linear_ppm.frontier.risk`` (ε = 2Δ̂/T, kind
``ppm_local_asymptotic``; one unweighted run per λ gives the weights, and is itself a point: w ≡ 1, ε = 2Δ̂), and
censored points at each declared ε of ``linear_ppm.frontier.censored_epsilons`` (w ≡ 1, κ = ε/2, T = 1, kind
``ppm_censored``). Each point's test F1 is over ``frontier.seeds`` released draws, each chosen from the kept draws
with its own secret seed (the chains are run once per configuration: the spread is the draw's, not the chains').
A configuration whose chains fail the declared diagnostics is refused: no point, and the selection says so.
"""

from __future__ import annotations

import time
from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import label_info
from dprelease.core.privacy import secret
from dprelease.core.utility.metrics import f1_summary
from dprelease.core.utility.points import Point, write_points
from dprelease.mechanisms.linear_ppm import posterior
from dprelease.mechanisms.linear_ppm.diagnostics import DiagnosticsRefused
from dprelease.mechanisms.linear_ppm.released import load, sample_variant

SOURCE = "linear_ppm"


def _point(params: Params, lay: Layout, run: posterior.Run, g, *, name: str, label: str, config: dict) -> Point:
    xs, ys = load(lay, "test")
    xv, yv = load(lay, "validation")
    k = range(len(label_info(lay)["codes"]))
    test, val = [], []
    for s in range(params.frontier.seeds):
        _, theta = run.draw(secret.numpy_rng(lay.artifacts, f"frontier/linear_ppm/{name}/{s}"))
        test.append(f1_summary(ys.numpy(), posterior.predict(theta, xs).numpy(), k))
        val.append(f1_summary(yv.numpy(), posterior.predict(theta, xv).numpy(), k)["weighted_f1"])
    s = run.summary
    m = f1_summary(ys.numpy(), posterior.predict(run.theta_map, xs).numpy(), k)
    cfg = {
        **config,
        "local_sensitivity": run.delta_hat,
        "map_weighted_f1": m["weighted_f1"],
        "map_macro_f1": m["macro_f1"],
        "seconds": s["seconds"],
        "diagnostics": {
            key: s[key]
            for key in (
                "rhat_max",
                "rhat_log_posterior",
                "rhat_max_loss",
                "ess_bulk_min",
                "ess_tail_min",
                "divergences",
                "acceptance_min",
                "acceptance_max",
                "temperature_all",
                "temperature_all_q05",
                "temperature_all_q95",
            )
        },
        "sampler": s["sampler"],
    }
    return Point(
        mechanism=name,
        label=label,
        kind=g.kind,
        epsilon=g.epsilon,
        delta=None,
        accountant="declared (κ = ε/2)" if g.kind == "ppm_censored" else "2Δ̂/T",
        weighted_f1=[t["weighted_f1"] for t in test],
        macro_f1=[t["macro_f1"] for t in test],
        target_epsilon=g.epsilon if g.kind == "ppm_censored" else None,
        validation_weighted_f1=sum(val) / len(val),
        config=cfg,
        tuning="declared",
    )


def frontier_linear_ppm(params: Params, root: str | Path = ".") -> dict:
    lay, f = Layout.from_params(params, root), params.linear_ppm.frontier
    points, refused, begin = [], [], time.perf_counter()
    first: dict[float, posterior.Run] = {}
    for rp in f.risk:
        lam, temp = rp.prior_precision, rp.temperature
        tag = f"frontier/risk/{lam:g}/{temp:g}"
        try:
            run, g, _ = sample_variant(
                params,
                lay,
                prior_precision=lam,
                temperature=temp,
                variant="risk",
                tag=tag,
                unweighted=first.get(lam),
                keep_first=first,
            )
        except DiagnosticsRefused as e:
            refused.append(str(e))
            continue
        points.append(
            _point(
                params,
                lay,
                run,
                g,
                name=f"linear_ppm_risk_l{lam:g}_t{temp:g}",
                label=f"linear PPM, risk weights (λ {lam:g}, T {temp:g})",
                config={"variant": "risk", "prior_precision": lam, "temperature": temp},
            )
        )
    for lam, run in first.items():  # the unweighted runs: w ≡ 1, T = 1, ε = 2Δ̂ (measured)
        g = run_guarantee(run)
        points.append(
            _point(
                params,
                lay,
                run,
                g,
                name=f"linear_ppm_unweighted_l{lam:g}",
                label=f"linear PPM, no weights (λ {lam:g}, T 1)",
                config={"variant": "unweighted", "prior_precision": lam, "temperature": 1.0},
            )
        )
    for eps in f.censored_epsilons:
        try:
            run, g, _ = sample_variant(
                params,
                lay,
                prior_precision=f.censored_prior_precision,
                temperature=1.0,
                variant="censored",
                epsilon=eps,
                tag=f"frontier/censored/{eps:g}",
            )
        except DiagnosticsRefused as e:
            refused.append(str(e))
            continue
        points.append(
            _point(
                params,
                lay,
                run,
                g,
                name=f"linear_ppm_censored_e{eps:g}",
                label=f"linear PPM censored (strict, λ {f.censored_prior_precision:g})",
                config={
                    "variant": "censored",
                    "prior_precision": f.censored_prior_precision,
                    "temperature": 1.0,
                    "censor_level": eps / 2,
                },
            )
        )
    selection = (
        "no search: every declared configuration is a point (λ, T and the censored ε fixed in params); "
        f"refused by the declared diagnostics: {len(refused)}" + (f" ({' | '.join(refused)})" if refused else "")
    )
    write_points(root, SOURCE, points, grid_size=1, selection=selection)
    out = {"points": len(points), "refused": len(refused), "seconds": round(time.perf_counter() - begin, 1)}
    return out | {f"{p.mechanism}": round(sum(p.weighted_f1) / len(p.weighted_f1), 4) for p in points}


def run_guarantee(run: posterior.Run):
    from dprelease.core.privacy import guarantee
    from dprelease.mechanisms.linear_ppm.released import quantities

    return guarantee.ppm(
        posterior.epsilon(run),
        run.delta_hat,
        mechanism="linear PPM, no weights (MCMC)",
        **quantities(run),
        weights=guarantee.UNIFORM_WEIGHTS,
        temperature_declared=1.0,
    )
