"""The linear PPM release's model card (``README.md``), rendered from its own manifest: the guarantee, the sampler,
its diagnostics and the all-direction temperature, the test F1 of the released draw. Aggregates only.

The guarantee's sentence is the one its kind registers (:func:`dprelease.core.privacy.guarantee.kind`; the pseudo
posterior kinds are the core's and name the record's ``sampler``); the lines after it say what this mechanism
adds: the declared censoring level or the measured Δ̂, and that the chain's error is a diagnostic, not a δ."""

from __future__ import annotations

from dprelease.core.privacy.guarantee import kind


def _f(v, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def claim(g: dict) -> str:
    q = g["quantities"]
    if g["kind"] == "ppm_censored":
        return (
            f"ε = {g['epsilon']:.4g}, declared before any run: every record's log-likelihood is softly censored "
            f"into [−κ, 0] with κ = {q['censor_level']:.4g} and the weights are 1, so ONE exact draw from the "
            "tempered pseudo posterior is ε-differentially private on every pair of neighbouring databases "
            "(Wang, Fienberg & Smola 2015; Hu, Williams & Savitsky). δ: none for an exact draw. The draw comes "
            "from a Markov chain: its distance from the exact posterior is not bounded; the diagnostics below "
            "are the evidence that it is small, not a δ."
        )
    return (
        f"ε = {g['epsilon']:.4g} = 2Δ̂/T, local and measured (kind ppm_local_asymptotic): Δ̂ = "
        f"{q['local_sensitivity']:.4g} is the largest weighted loss w_i·CE_i over {q['kept_draws']} kept draws "
        f"and every training record, T = {q['temperature_declared']:g}. The risk weights were computed from the "
        "same data (an unweighted run's draws), which no ε covers; δ is asymptotic and not quantified; the "
        "draw comes from a Markov chain whose error is a diagnostic, not a δ."
    )


def _evaluation(f1: dict) -> list[str]:
    """How the utility figures were computed: noised counts, their own ε for the test reports (or, in an older
    record without them, exact figures)."""
    if f1.get("kind") != "dp_noised_counts":
        return ["Exact figures on the test split (an older record: no DP evaluation).", ""]
    return [
        f"Computed from the test split's per-class TP / FP / FN counts with Gaussian noise (sd "
        f"{f1['count_noise_sd']:g} per count): ε = {f1['evaluation_epsilon']:.4g}, δ = {f1['evaluation_delta']:.3g} "
        "for the test reports (one Gaussian mechanism). A report has one role, so this and the training claim above "
        "hold in parallel; the exact figures are not released.",
        "",
    ]


def render(manifest: dict, *, data: dict) -> str:
    g, s = manifest["guarantee"], manifest["sampling"]
    th, f1 = manifest["diagnostics_thresholds"], manifest["test_f1"]
    public = data.get("public", {})
    sm = s["sampler"]
    lines = [
        "# OIICS nature coder — linear PPM release",
        "",
        "A softmax head (with bias) on the frozen public MiniLM encoder's sentence embeddings. The released weights "
        f"are ONE draw from the pseudo posterior, sampled by {sm['sampler']}, chosen with the agency's secret "
        "key.",
        "",
        "## Privacy",
        "",
        kind(g["kind"]).sentence(g),
        "",
        claim(g),
        "",
        f"Prior N(0, I/λ) with λ = {manifest['prior_precision']:g}; temperature T = {manifest['temperature']:g} "
        "(declared: the likelihood is raised to 1/T).",
        "",
        "## Sampler and diagnostics",
        "",
        f"- {sm['sampler']}: {sm['chains']} chains from over-dispersed starts (secret), {sm['warmup']} warm-up + "
        f"{sm['draws']} kept draws each, {sm['preconditioner']} (it changes mixing, not the target)",
        f"- split R-hat (rank-normalised) worst {_f(s['rhat_max'])} (log posterior {_f(s['rhat_log_posterior'])}, "
        f"per-draw max-loss {_f(s['rhat_max_loss'])}); declared ≤ {th['rhat_max']:g}",
        f"- ESS bulk ≥ {s['ess_bulk_min']:.0f}, tail ≥ {s['ess_tail_min']:.0f}; declared ≥ {th['ess_min']:g}",
        f"- divergent transitions {s['divergences']}; declared ≤ {th['divergences_max']}",
        f"- acceptance {_f(s['acceptance_min'], 2)}–{_f(s['acceptance_max'], 2)}",
        f"- temperature over ALL {s['parameters']:,} parameter directions (equipartition, E[(z−z̄)·∂U/∂z] = 1 for "
        f"exact draws): mean {_f(s['temperature_all'])} (5–95% of directions {_f(s['temperature_all_q05'], 2)}–"
        f"{_f(s['temperature_all_q95'], 2)}); declared |T̂ − 1| ≤ {th['temperature_tolerance']:g}",
        f"- sampling time {s['seconds']:.0f} s",
        "",
        "## Utility (test split)",
        "",
        "| model | weighted F1 | macro F1 |",
        "|---|---|---|",
        f"| released draw | {_f(f1['released_draw']['weighted_f1'])} | {_f(f1['released_draw']['macro_f1'])} |",
        "",
        *_evaluation(f1["released_draw"]),
        f"Label space: {public.get('classes', data.get('classes'))} OIICS codes, fixed from the public period (reports "
        f"up to {public.get('until', '–')}); expected training size n̂ = {public.get('expected_train_size', '–')} "
        "(from public counts; the private counts are not released).",
        "",
        "Per-record quantities, weights, per-draw statistics and per-chain diagnostics are kept private by the agency.",
        "",
    ]
    return "\n".join(lines)


def release_card(params, root, manifest: dict) -> tuple[str, dict]:
    """The card when the shared publish step releases the linear PPM (``released.mechanism: linear_ppm``)."""
    from pathlib import Path

    from dprelease.core.io import read_json

    return render(manifest, data=read_json(Path(root) / "metrics" / "data.json")), {}


def figures(params, root, manifest: dict) -> dict:
    """The release record's figures: the released draw's test F1 and the chains' worst diagnostics."""
    s = manifest["sampling"]
    return {
        **manifest["test_f1"]["released_draw"],
        "arm": None,
        "diagnostics": {
            k: s.get(k) for k in ("rhat_max", "ess_bulk_min", "ess_tail_min", "divergences", "temperature_all")
        },
    }
