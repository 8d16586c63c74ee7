"""SWAG-PPM's points on the privacy/utility frontier, stage ``frontier_swag_ppm``: a trace over the sampling
temperature τ and the risk-weight strength c, each point's ε by the release's own rule. Not one mechanism: the
points do not compose, and none is chosen.

See docs/frontier.md, "Notes from the code", `mechanisms/swag_ppm/frontier.py`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.errors import ConfigError
from dprelease.core.io import read_json
from dprelease.core.privacy import guarantee, secret
from dprelease.core.utility.metrics import f1_summary
from dprelease.core.utility.points import Point, write_points
from dprelease.mechanisms.swag_ppm import claim, extremes, ppm
from dprelease.mechanisms.swag_ppm.fit import refit, release_censor, round_weights
from dprelease.mechanisms.swag_ppm.passes import PassJob, posterior_pass, run_pass
from dprelease.mechanisms.swag_ppm.rounds import SECRET_NOISE, release_tail
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, sample
from dprelease.mechanisms.swag_ppm.temperature import Temperature

SOURCE = "swag_ppm"  # metrics/frontier/swag_ppm.json
MECHANISM = "swag_ppm"
RELEASE_ARM = "swag_ppm_reweighted"  # the audited arm that the (τ = 1, c = ppm.c) point is
ACCOUNTANT = "2Δ / min(1, τ·T_min) — Δ local, measured on posterior draws at τ (claim.py)"
SELECTION = (
    "none: every (c, τ) pair of ppm.frontier is reported; no configuration is chosen from these points, "
    "and none is a DP-selected one (the release's point is the release as made, at τ = 1, c = ppm.c)"
)


@dataclass(frozen=True)
class Sampler:
    """One fitted round at one c, what a row of the trace draws from. Private: never written or logged."""

    c: float
    r: int
    moments: SwagMoments
    weights: np.ndarray
    temp: dict  # its temperature record (Temperature.as_dict) at the moments' own scale
    source: Path | None  # the moments' file (None: a refit held in memory)
    release: bool  # the release's own round

    def __repr__(self) -> str:  # never weights or moments in a log line
        return f"Sampler(c={self.c}, round={self.r}, release={self.release})"

    def label(self, what: str, tau: float | None = None) -> str:
        """The secret stream of one use (seeds are never stored)."""
        t = "" if tau is None else f"/tau={tau!r}"
        return f"frontier/c={self.c!r}{t}/round{self.r}/{what}"


def frontier_swag_ppm(params: Params, root: str | Path = ".") -> dict:
    """Every (c, τ) point of ``ppm.frontier`` (module docstring), written with :func:`write_points`."""
    if release_censor(params) is not None:
        raise ConfigError(
            "frontier_swag_ppm traces the asymptotic PPM; ppm.mechanism: censored has a declared ε "
            "(its comparison arm swag_ppm_censored), not a measured one"
        )
    lay, fr = Layout.from_params(params, root), params.frontier
    cs, taus = _distinct(params.ppm.frontier.c), _distinct(params.ppm.frontier.temperatures)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    model = backend.new_model(feats)
    splits = {
        "test": features(lay, "test"),
        "validation": features(lay, "validation") if (lay.features / "validation.safetensors").is_file() else None,
    }
    points, risk = [], None
    for c in cs:
        if c == params.ppm.c:
            sampler = released_sampler(params, lay, device=backend.device)
        else:
            if risk is None:  # the risk stage's pass, replayed (same secret seed): the release's round-1 risk
                risk, _ = posterior_pass(params, lay, 1, None, "risk")
            sampler = refit_sampler(params, lay, backend, feats, y, risk, c=c)
        for tau in taus:
            points.append(trace_point(params, lay, backend, model, sampler, feats, y, splits, tau=tau, seeds=fr.seeds))
    write_points(root, SOURCE, points, grid_size=len(cs) * len(taus), selection=SELECTION)
    return {"points": len(points), **{f"τ={p.config['temperature']:g},c={p.config['c']:g}": p.kind for p in points}}


def _distinct(values: list[float]) -> list[float]:
    return list(dict.fromkeys(float(v) for v in values))


def released_sampler(params: Params, lay: Layout, *, device) -> Sampler:
    """The round the release was drawn from (``metrics/swag_ppm_draw.json``), as stored: no refit."""
    r = int(read_json(lay.metrics / "swag_ppm_draw.json")["round"])
    source = lay.swag(r) / "moments.safetensors"
    return Sampler(
        c=float(params.ppm.c),
        r=r,
        moments=SwagMoments.load(source, device=device),
        weights=round_weights(lay, r),
        temp=read_json(lay.metrics / f"temperature_r{r}.json")["temperature"],
        source=source,
        release=True,
    )


def refit_sampler(params: Params, lay: Layout, backend, feats, y, risk: np.ndarray, *, c: float) -> Sampler:
    """Round 2 refitted with the weights of strength ``c`` (rounds.risk's map) and secret training seeds of
    its own (``fit.refit``, seed labels tagged with c)."""
    p = params.ppm
    w = ppm.weights_from_risk(risk, c=c, g=p.g, method=p.risk_norm)
    fitted = refit(
        params, backend, feats, y, w, r=2, seeds=secret.training_seeds(lay.artifacts), tag=f"#frontier/c={c!r}"
    )
    return Sampler(
        c=c,
        r=2,
        moments=fitted["moments"],
        weights=w,
        temp=fitted["temperature"]["temperature"],
        source=None,
        release=False,
    )


def measured_claim(params: Params, lay: Layout, backend, model, s: Sampler, feats, y, *, tau: float):
    """(the guarantee at (c, τ), Δ the claim used): Δ̂ from ``ppm.draws`` secret-seeded draws of N(μ, τ·Σ), or for
    the release's own point (τ = 1) the release's pass and released draw, exactly as ``rounds._draw`` claims."""
    p = params.ppm
    temp = Temperature(**s.temp).rescaled(tau).as_dict()  # a hotter sampler: τ·T in every direction
    if s.release and tau == 1.0:
        sens = read_json(lay.metrics / f"sensitivity_r{s.r}.json")
        m_star = read_json(lay.metrics / "swag_ppm_draw.json")["released_draw_max_loss"]
        local, draws, tail = max(sens["local_sensitivity"], m_star), sens["draws"], release_tail(params, lay, s.r)
    else:
        job = PassJob(
            params, lay, s.source if s.source is not None else s.moments, s.weights, None, scale=s.moments.scale * tau
        )
        _, max_deltas = run_pass(
            job,
            draws=p.draws,
            chunk=p.draw_batch,
            seed=secret.seed(lay.artifacts, s.label("sensitivity")),  # common to every τ
            desc=f"frontier c={s.c:g} τ={tau:g} draws",
            local=(backend, model, s.moments, feats, y),
        )
        local, draws = float(max_deltas.max()), len(max_deltas)
        tail = extremes.tail_or_none(max_deltas, seed=secret.seed(lay.artifacts, s.label("tail", tau)))
    g = claim.ppm_claim(
        local,
        temp,
        parameters=int(s.moments.mean.numel()),
        tail=tail,
        posterior_draws=draws,
        round=s.r,
        calibration=p.calibration,
        released_draw_noise=SECRET_NOISE,
    )
    return g, claim.sensitivity_bound(local, tail)[0]


def utility_draws(backend, model, s: Sampler, feats, y, splits: dict, *, tau: float, seeds: list[int]) -> dict:
    """One draw of N(μ, τ·Σ) per secret seed: its test weighted/macro F1, validation weighted F1 and its own
    M* = max_i w_i CE_i on the training records (aggregates only)."""
    classes = list(range(backend.n_classes))
    out: dict[str, list[float]] = {"weighted_f1": [], "macro_f1": [], "validation_weighted_f1": [], "m_star": []}
    for seed in seeds:
        gen = torch.Generator(device=backend.device).manual_seed(seed)
        theta = sample(s.moments, 1, gen, s.moments.scale * tau)
        ce = backend.per_record_ce(model, theta, feats, y).double().numpy()
        out["m_star"].append(float(ppm.max_weighted_loss(ce, s.weights)[0]))
        set_flat(model, theta[0])
        for split, keys in (("test", ("weighted_f1", "macro_f1")), ("validation", ("validation_weighted_f1",))):
            if splits[split] is None:
                continue
            fx, fy = splits[split]
            f1 = f1_summary(fy.numpy(), backend.predict_proba(model, fx).argmax(1).numpy(), classes)
            for key in keys:
                out[key].append(float(f1[key.removeprefix("validation_")]))
    return out


def trace_point(
    params: Params, lay: Layout, backend, model, s: Sampler, feats, y, splits: dict, *, tau: float, seeds: int
) -> Point:
    """The frontier point of sampler ``s`` at temperature ``tau`` (module docstring)."""
    g, bound = measured_claim(params, lay, backend, model, s, feats, y, tau=tau)
    u = utility_draws(
        backend,
        model,
        s,
        feats,
        y,
        splits,
        tau=tau,
        seeds=[secret.seed(lay.artifacts, s.label(f"draw{k}", tau)) for k in range(seeds)],
    )
    q = g.quantities
    config = {
        "c": s.c,
        "temperature": tau,
        "round": s.r,
        "calibration": params.ppm.calibration,
        "refit": not s.release,
        "posterior_draws": q["posterior_draws"],
        "seeds": seeds,
        "local_sensitivity": q["local_sensitivity"],
        "local_sensitivity_bound": q["local_sensitivity_bound"],
        "claim_basis": q["claim_basis"],
        "temperature_min": q["temperature_min"],
        "temperature_min_all": q["temperature_min_all"],
        "certified_directions": q["certified_directions"],
        "parameters": q["parameters"],
        "draws_above_delta": int(sum(m > bound for m in u["m_star"])),
    }
    if g.epsilon is None:
        config |= {
            "uncertified_index": q[guarantee.UNCERTIFIED_INDEX],
            "uncertified_index_point": q["uncertified_index_point"],
        }
    else:
        config["epsilon_point_estimate"] = q["epsilon_point_estimate"]
    val = u["validation_weighted_f1"]
    exact = s.release and tau == 1.0
    return Point(
        mechanism=MECHANISM,
        label=f"SWAG-PPM (τ={tau:g}, c={s.c:g})",
        kind=g.kind,
        epsilon=g.epsilon,
        delta=None,
        accountant=ACCOUNTANT,
        weighted_f1=u["weighted_f1"],
        macro_f1=u["macro_f1"],
        validation_weighted_f1=float(np.mean(val)) if val else None,
        config=config,
        tuning="declared",
        arm=RELEASE_ARM if exact else None,
    )
