"""DP-SGD's points on the frontier: a linear head at each declared ε, its configuration chosen on the validation split
from the declared grid, refit with secret seeds and scored on the test split.

See docs/frontier.md, "Notes from the code", `mechanisms/dpsgd/frontier.py`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.core import public_fit
from dprelease.core.config import Params
from dprelease.core.data.splits import label_info, n_public
from dprelease.core.utility.metrics import f1_summary, mean_sd
from dprelease.core.utility.points import PRIVATE_VALIDATION, PUBLIC_PROXY, Point, write_points
from dprelease.mechanisms.dpsgd.accounting import default_delta
from dprelease.mechanisms.dpsgd.forward import forward_check
from dprelease.mechanisms.dpsgd.private_selection import private_points
from dprelease.mechanisms.dpsgd.search import (
    ACCOUNTANTS,
    _Sigmas,
    _weighted_f1,
    _xy,
    configurations,
    fit_many,
    predict,
    proxy_rankings,
    select_all,
)

SOURCE = "dpsgd"
PRIVATE_SELECTION = (
    "the private-selection points choose among the same grid with Papernot & Steinke's random "
    "repetitions and noisy validation counts: their ε covers the search (dpsgd/private_selection.py)"
)
PROXY = (
    "the proxy-tuned points: the grid's best weighted F1 on the public proxy's validation part after one run "
    "per configuration on its training part (of the private training set's size) at the same ε: zero ε, no "
    "private record read; the private selection's shortlist is the proxy's best few"
)
SELECTION = (
    "best validation weighted F1 over the declared grid, one secret-seeded run per configuration and ε; "
    "not private: the validation split's influence on the choice is not covered by ε"
)


@dataclass(frozen=True)
class _Warm:
    jobs: list  # (setting, label) per seed


def warm_series(params: Params, lay: Layout, *, epsilons, delta: float, n: int, configs: list[dict]):
    """The warm-started series (``dpsgd.warm_start`` and a public period): per ε the grid's best configuration in
    the public simulation (runs from the public model fit on ``public_rest``), refit ``frontier.seeds`` times from
    the public model fit on every public report, σ from the first accountant. (series, start) or None."""
    if not (params.dpsgd.warm_start and public_fit.available(lay)):
        return None
    sim = public_fit.simulation(lay, grid=params.public_model.l2, who="DP-SGD's frontier")
    ranked = proxy_rankings(params, lay, epsilons=epsilons, delta=delta, init=(sim.weight, sim.bias))
    fp, acc = params.frontier, params.frontier.accountants[0]
    out = []
    for eps in epsilons:
        index, score = ranked[eps][0]
        setting = _Sigmas(epsilon=eps, delta=delta, conversion=ACCOUNTANTS[acc][0]).setting(configs[index], n)
        jobs = [(setting, f"frontier/dpsgd_warm/{acc}/{eps:g}/refit/{k}") for k in range(fp.seeds)]
        out.append(
            (
                eps,
                "_proxy_warm",
                " · proxy-tuned, from the public model",
                index,
                PUBLIC_PROXY,
                {"proxy_score": score, "public_l2": sim.l2, "public_proxy_score": sim.score},
                acc,
                setting,
                _Warm(jobs),
            )
        )
    return out, public_fit.release(lay, l2=sim.l2, who="DP-SGD's frontier")


def frontier_dpsgd(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD's frontier points (module docstring): the grid at every ε on the private training split (one trainer
    call), on the public proxy (one call), the chosen configurations' refits (one call), private selection (one)."""
    lay = Layout.from_params(params, root)
    fp = params.frontier
    n_classes = len(label_info(lay)["codes"])
    (xt, yt), (xv, yv), (xs, ys) = (_xy(lay, s) for s in ("train", "validation", "test"))
    n = n_public(lay)  # q, σ and the normaliser from the public n̂, never the private count
    delta = params.released.delta or default_delta(n)
    classes = range(n_classes)
    configs = configurations(params.dpsgd.grid, n=n)
    selected = select_all(
        configs,
        fp.accountants[0],
        (xt, yt, xv, yv),
        n_classes,
        epsilons=fp.epsilons,
        delta=delta,
        artifacts=lay.artifacts,
        n=n,
    )
    rankings = proxy_rankings(params, lay, epsilons=fp.epsilons, delta=delta)
    series, jobs, shortlists = [], [], {}  # series: (ε, suffix, tag, grid index, tuning, extra, accountant, setting)
    for eps in fp.epsilons:
        best, best_score = selected[eps]
        ranked = rankings[eps] if rankings else None
        shortlists[eps] = (
            [configs[i] for i, _ in ranked[: params.dpsgd.grid.private_selection.shortlist]] if ranked else configs
        )
        chosen = [("", "", best, PRIVATE_VALIDATION, {"selection_score": best_score})]
        if ranked:
            chosen.append(("_proxy", " · proxy-tuned", ranked[0][0], PUBLIC_PROXY, {"proxy_score": ranked[0][1]}))
        for suffix, tag, index, tuning, extra in chosen:
            for acc in fp.accountants:  # the chosen configuration, σ from each accountant: side by side
                setting = _Sigmas(epsilon=eps, delta=delta, conversion=ACCOUNTANTS[acc][0]).setting(configs[index], n)
                series.append((eps, suffix, tag, index, tuning, extra, acc, setting))
                jobs += [(setting, f"frontier/dpsgd{suffix}/{acc}/{eps:g}/refit/{k}") for k in range(fp.seeds)]
    models = fit_many(jobs, xt, yt, n_classes, artifacts=lay.artifacts)  # every refit of every series: one call
    warm = warm_series(params, lay, epsilons=fp.epsilons, delta=delta, n=n, configs=configs)
    start = None
    if warm is not None:  # from the public model: ranked in simulation (public_rest start), refit from all public
        warm_list, start = warm
        series += warm_list
        models += fit_many(
            [j for s in warm_list for j in s[-1].jobs], xt, yt, n_classes, artifacts=lay.artifacts, init=start
        )
    chosen = {("DP-SGD proxy-tuned, from zero", eps): (r[0][0], None) for eps, r in (rankings or {}).items()}
    chosen |= {("DP-SGD proxy-tuned, from the public model", s[0]): (s[3], start) for s in (warm[0] if warm else [])}
    acc0 = ACCOUNTANTS[fp.accountants[0]][0]
    forward_check(
        params,
        root,
        lay,
        n_classes=n_classes,
        n=n,
        configs=configs,
        chosen=chosen,
        floor=start,
        predict=predict,
        sigmas=lambda eps, cfg, m: _Sigmas(epsilon=eps, delta=delta, conversion=acc0).setting(cfg, m),
        fit=lambda jobs, x, y, init: fit_many(jobs, x, y, n_classes, artifacts=lay.artifacts, init=init),
    )
    points = []
    for j, (eps, suffix, tag, index, tuning, extra, acc, setting, *_) in enumerate(series):
        conversion, accountant = ACCOUNTANTS[acc]
        refits = models[j * fp.seeds : (j + 1) * fp.seeds]
        test = [f1_summary(ys.numpy(), predict(*m, xs).numpy(), classes) for m in refits]
        val = mean_sd([_weighted_f1(m, xv, yv, n_classes) for m in refits])[0]
        points.append(
            Point(
                mechanism=f"dpsgd_linear{suffix}_{acc}",
                label=f"DP-SGD linear head{tag} · {acc.upper()}",
                kind="dp_accountant",
                epsilon=setting.epsilon(delta, conversion),
                delta=delta,
                accountant=accountant,
                weighted_f1=[t["weighted_f1"] for t in test],
                macro_f1=[t["macro_f1"] for t in test],
                target_epsilon=eps,
                validation_weighted_f1=val,
                tuning=tuning,
                proxy_weighted_f1=extra.get("proxy_score"),
                config={
                    **configs[index],
                    "noise_multiplier": setting.noise_multiplier,
                    "steps": setting.steps,
                    "sample_rate": setting.sample_rate,
                    "selected_with": fp.accountants[0],
                    **extra,
                },
            )
        )
    notes = []
    if params.dpsgd.grid.private_selection.enabled:
        private, notes = private_points(
            shortlists,
            {"train": (xt, yt), "validation": (xv, yv), "test": (xs, ys)},
            n_classes,
            grid=params.dpsgd.grid,
            epsilons=fp.epsilons,
            seeds=fp.seeds,
            delta=delta,
            fit_many=fit_many,
            predict=predict,
            artifacts=lay.artifacts,
            n=n,
        )
        points += private
    write_points(
        root,
        SOURCE,
        points,
        grid_size=len(configs),
        selection="; ".join(
            [
                SELECTION,
                PROXY
                if shortlists and any(len(v) < len(configs) for v in shortlists.values())
                else "no public proxy (proxy.until: null)",
                PRIVATE_SELECTION
                if params.dpsgd.grid.private_selection.enabled
                else "no private selection (dpsgd.grid.private_selection.enabled: false)",
                *notes,
            ]
        ),
    )
    return {
        "points": len(points),
        "grid_size": len(configs),
        **{f"{p.mechanism}@{p.target_epsilon:g}": round(mean_sd(p.weighted_f1)[0], 4) for p in points},
    }
