"""What SWAG-PPM adds to the release's record and its readers when it is the declared release, through the hooks
every releasing mechanism has (:class:`dprelease.contracts.mechanism.ReleaseSpec`): its own headline figures (the
point estimate, the tail interval, T̂, the F1 over draws), its registry tag (the released round), the MLflow
run's details of the released round and the summary's lines. Public aggregates of ``metrics/`` only; nothing of a
round that was not released."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.io import read_json
from dprelease.core.privacy.guarantee import Guarantee, coverage_sentence

DRAW = "swag_ppm_draw.json"  # under metrics/: the draw's own record (round, M*, guarantee, Δ̂'s tail), not the release's
RELEASED_ARM = {2: "swag_ppm", 3: "swag_ppm_reweighted"}  # released round → its arm in the privacy audit
_is_number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731 - a number, not a bool


def own_figures(metrics: str | Path) -> dict:
    """SWAG-PPM's headline figures beside ε and the released draw's F1 (:mod:`dprelease.core.headline`'s names),
    from its draw's record and its evaluation."""
    metrics = Path(metrics)
    rel = read_json(metrics / DRAW)
    g = rel["guarantee"]
    q = g.get("quantities", {})
    out = {
        "epsilon": g.get("epsilon"),
        "epsilon_point": q.get("epsilon_point_estimate"),
        "uncertified_index": q.get("uncertified_index") if g.get("kind") == "ppm_uncertified" else None,
        "temperature": q.get("temperature"),
    }
    tail = rel.get("local_sensitivity_tail")
    if tail and g.get("kind") == "ppm_local_asymptotic":  # ε = 2Δ / min(1, T_min): the interval of Δ̂'s tail, so scaled
        cold = (
            q["epsilon_point_estimate"] / q["epsilon_at_temperature_one"]
            if q.get("epsilon_point_estimate") and q.get("epsilon_at_temperature_one")
            else 1.0
        )
        out |= {"epsilon_ci_low": 2 * tail["ci_low"] * cold, "epsilon_ci_high": 2 * tail["ci_high"] * cold}
    if (metrics / "evaluation.json").is_file():
        a = read_json(metrics / "evaluation.json")
        out |= {
            "weighted_f1": a.get("released_weighted_f1"),
            "macro_f1": a.get("released_macro_f1"),
            "weighted_f1_mean": a.get("weighted_f1_mean"),
            "macro_f1_mean": a.get("macro_f1_mean"),
        }
    return {k: v for k, v in out.items() if v is not None}


def released_round(metrics: str | Path) -> int:
    return int(read_json(Path(metrics) / DRAW)["round"])


def details(params: Params, root: str | Path) -> dict:
    """The MLflow run's details of the released round: the metric files, Δ̂ and T̂ of the round, Δ̂'s tail
    interval, weight aggregates, fit diagnostics and the round's training-loss curves."""
    lay = Layout.from_params(params, root)
    out: dict = {}
    for stem in ("reweight", DRAW.removesuffix(".json"), "evaluation"):
        path = lay.metrics / f"{stem}.json"
        if path.is_file():
            out[stem] = {k: v for k, v in read_json(path).items() if _is_number(v)}
    released = released_round(lay.metrics)
    if released >= 2:
        sens = read_json(lay.metrics / f"sensitivity_r{released}.json")
        temp = read_json(lay.metrics / f"temperature_r{released}.json")
        out[f"round{released}"] = {
            "two_delta_hat": 2 * sens["local_sensitivity"],
            "delta_hat": sens["local_sensitivity"],
            "temperature": temp["temperature"]["subspace"],
            "temperature_uncalibrated": temp["temperature_uncalibrated"]["subspace"],
        }
    tail = read_json(lay.metrics / DRAW).get("local_sensitivity_tail")
    if tail:  # aggregates of the per-draw maxima
        out["delta_hat_tail"] = {k: tail[k] for k in ("estimate", "ci_low", "ci_high", "level")}
    risk = read_json(lay.metrics / "risk.json")  # weight aggregates only (no single-record risk values)
    out["weights_round2"] = {k: v for k, v in risk.items() if k.startswith("weight")}
    diag_path = lay.metrics / "diagnostics.json"
    if diag_path.is_file():
        out["diagnostics"] = {k: d for k, d in read_json(diag_path).items() if k.endswith(str(released))}
    out["train_loss"] = {
        f"{phase}_round{released}": read_json(lay.round(released) / phase / "history.json")["epoch_loss"]
        for phase in ("finetune", "swag")
    }
    return out


def summary_lines(params: Params, root: str | Path) -> list[str]:
    """The summary's block of the design's chain: each round's outcome (an unreleased round's outcome only), the
    draw's claim and what it is conditional on, the utility over draws, the plots."""
    lay = Layout.from_params(params, root)
    ev, rel = read_json(lay.metrics / "evaluation.json"), read_json(lay.metrics / DRAW)
    g = Guarantee.from_dict(rel["guarantee"])
    released = params.released.mechanism == "swag_ppm"
    lines = [
        "",
        "SWAG-PPM, the design's chain"
        + (" (the release above)" if released else ", measured beside the release (not released)"),
    ]
    for r in params.ppm.rounds:
        if r >= 2 and r != rel["round"]:  # an unreleased round: its outcome only, never its statistics
            lines.append(f"  round {r}    not released")
        elif r >= 2:
            s = read_json(lay.metrics / f"sensitivity_r{r}.json")
            t = read_json(lay.metrics / f"temperature_r{r}.json")
            label = "weighted" if r == 2 else "re-weighted"
            cmp = "≥" if s["draws"] < params.ppm.draws else "="  # a refit pass stopped early above the bound
            lines.append(
                f"  round {r}    2Δ̂ {cmp} {2 * s['local_sensitivity']:.3f}  (Δ̂ {cmp} {s['local_sensitivity']:.3f}, "
                f"{s['draws']} draws, {label}; SWAG temperature T̂ = {t['temperature']['subspace']:.2f}, "
                f"calibration {t['calibration']})"
            )
    if params.ppm.reweighting:
        rw = read_json(lay.metrics / "reweight.json")
        lines.append(f"  reweight   {rw['mode']}: {rw['reason']}")
    tail = rel["local_sensitivity_tail"]
    tail_txt = (
        "Monte Carlo: too few draws for a tail estimate (smoke test)"
        if tail is None
        else f"Monte Carlo: a fresh draw exceeds Δ̂ with prob. 1/(S+1) = {tail['exceedance_of_max']:.4f}; GEV "
        f"{tail['level']:.4f}-quantile {tail['estimate']:.3f} [{tail['ci_low']:.3f}, {tail['ci_high']:.3f}]"
    )
    t_rel, q = g.quantities.get("temperature"), g.quantities
    point = q.get("epsilon_point_estimate", q.get("uncertified_index_point"))
    return lines + [
        f"  drawn      {g.claim_text} [{g.kind}], δ {g.delta_text}; one draw from round {rel['round']}"
        + (f"; point estimate {point:.4g}" if point is not None else ""),
        f"             {tail_txt}",
        "             conditional on: this database (local), large n (asymptotic), the SWAG approximation "
        + (
            f"at T̂ = {t_rel:.2f}, T_min = {q.get('temperature_min', t_rel):.2f} in SWAG's subspace, "
            f"≥ {q['temperature_min_all']:.3g} over all parameters"
            if t_rel is not None and q.get("temperature_min_all") is not None
            else f"at T̂ = {t_rel:.2f}"
            if t_rel is not None
            else "(not measured)"
        ),
        *([f"             {coverage_sentence(q)}"] if g.kind in ("ppm_local_asymptotic", "ppm_uncertified") else []),
        f"  utility    {'released draw' if released else 'its draw'}: weighted F1 {ev['released_weighted_f1']:.3f}, "
        f"macro F1 {ev['released_macro_f1']:.3f}",
        f"             over {ev['draws']} draws: weighted {ev['weighted_f1_mean']:.3f} ± {ev['weighted_f1_sd']:.3f}, "
        f"macro {ev['macro_f1_mean']:.3f} ± {ev['macro_f1_sd']:.3f}",
        f"  plots      {lay.plots}/max_delta.png, {lay.plots}/f1_violin.png; per-class F1: {lay.evaluation}/per_class_f1.csv",
    ]
