"""SWAG-PPM's model card (``README.md`` of its release folder): the claim's kind (sentence, how its figure was
measured, its conditions), what a SWAG-PPM ε is conditional on (SWAG's temperatures, the settings that move ε, the
Monte Carlo error of Δ̂ and its GEV interval, the re-weighting decision), the audit, utility and use. Generated from
the release's manifest and public aggregates (:func:`dprelease.mechanisms.swag_ppm.publish.card`); never hand-edited.
A kind declared by any package renders here without an edit (its sentence and lines come from the kind)."""

from __future__ import annotations

from dprelease.core.privacy.guarantee import kind
from dprelease.core.release.card import audit_lines, fixed, replay_lines, short


def implied_interval(g: dict, tail: dict) -> tuple[float, float] | None:
    """The ε implied by the ends of the GEV interval of Δ's tail quantile (as :func:`dprelease.core.headline.headline`
    computes ``epsilon_ci_low/high``): an interval for the tail quantile's ε, whose upper end the claim uses — NOT
    an interval for the point estimate."""
    q = g.get("quantities", {})
    if not tail or g.get("kind") is None or not (k := kind(g["kind"])).tail_headline or not k.claims_epsilon:
        return None
    cold = (
        q["epsilon_point_estimate"] / q["epsilon_at_temperature_one"]
        if q.get("epsilon_point_estimate") and q.get("epsilon_at_temperature_one")
        else 1.0
    )
    return 2 * tail["ci_low"] * cold, 2 * tail["ci_high"] * cold


def _point(g: dict) -> str:
    v = g.get("quantities", {}).get("epsilon_point_estimate")
    return f" {v:.3f}" if v is not None else ""


def conditions(manifest: dict) -> list[str]:
    """What a SWAG-PPM ε is conditional on: temperature, Monte Carlo error, the re-weighting decision; the
    kind's own conditions after the approximation's (:attr:`dprelease.contracts.mechanism.Kind.conditions`)."""
    g = manifest["guarantee"]
    k = kind(g["kind"])
    q, out = g["quantities"], []
    if q.get("temperature") is not None:
        out.append(
            f"* posterior approximation: SWAG's per-direction temperatures against the marginal of a Laplace "
            f"(GGN) posterior with prior N({'θ₀' if manifest.get('backend') == 'full' else '0'}, "
            f"I/{manifest.get('prior_precision')}) in SWAG's subspace: mean "
            f"T̂ = {q['temperature']:.3g}, smallest T_min = {short(q.get('temperature_min'))}; over all parameters "
            f"mean T̂_all = {short(q.get('temperature_all'))}, certified smallest ≥ {short(q.get('temperature_min_all'))} "
            f"(calibration: {manifest.get('calibration')}; 1 = matched)"
        )
    if k.conditions is not None:
        out += k.conditions(manifest)
    knobs = manifest.get("knobs_that_move_epsilon")
    if knobs:
        rw = knobs["reweighting"]
        out.append(
            f"* settings that move ε (a reviewer checks they were fixed before ε was seen): SWAG learning rate "
            f"{knobs['swag_lr']:g}, {knobs['swag_epochs']} epochs, rank {knobs['swag_rank']}, batch "
            f"{knobs['swag_batch_size']}; fine-tune {knobs['finetune_epochs']} epochs; prior λ = "
            f"{knobs['prior_precision']:g}; calibration {knobs['calibration']}; c = {knobs['c']:g}; re-weighting "
            f"{rw['mode'] if rw else 'off'} (all in release.json; `make epsilon-sensitivity` measures ε over a grid)"
        )
    tail = manifest.get("local_sensitivity_uncertainty")
    if tail:
        out.append(
            f"* Monte Carlo error: a fresh posterior draw exceeds Δ̂ with probability 1/(S+1) = "
            f"{tail['exceedance_of_max']:.4f}; extreme-value estimate of the {tail['level']:.4f} quantile of the "
            f"per-draw maximum: {tail['estimate']:.3f} ({tail['confidence']:.0%} interval {tail['ci_low']:.3f}–"
            f"{tail['ci_high']:.3f}), i.e. 2Δ {2 * tail['estimate']:.3f} ({2 * tail['ci_low']:.3f}–"
            f"{2 * tail['ci_high']:.3f})"
            + ("; the stated figure uses the interval's upper end" if k.tail_headline else "")
        )
        implied = implied_interval(g, tail)
        if implied and g.get("epsilon") is not None:
            out.append(
                f"* tail-quantile ε, GEV interval: {implied[0]:.3f}–{implied[1]:.3f}. This is the interval of the "
                f"ε implied by Δ's {tail['level']:.4f} quantile, not an interval for the claimed ε: the claimed "
                f"ε = {g['epsilon']:.3f} is its upper end (or the measured Δ̂'s, if larger), and the point "
                f"estimate{_point(g)} comes from the measured maximum Δ̂, a different quantity"
            )
    sens = manifest.get("epsilon_sensitivity")
    if sens:
        out.append(
            f"* settings: over the `make epsilon-sensitivity` grid near this release's settings ({sens['cells']} "
            f"cells at prior λ = {sens['prior_precision']:g}) the largest {sens['figure']} was "
            f"{sens['maximum']:.3f}, the figure to read beside this release's"
        )
    rw = manifest.get("reweighting")
    if rw:
        out.append(
            f"* re-weighting ({rw['mode']}): {rw['reason']} — this decision depends on the data and is not "
            "covered by ε (only its outcome is published)"
        )
    return out


def render(
    manifest: dict,
    *,
    data: dict,
    utility: dict | None,
    quartiles: list[dict] | None,
    nonprivate: dict | None,
    audit_rows: list[dict],
    labels: dict,
    replay: dict | None = None,
) -> str:
    g, q = manifest["guarantee"], manifest["guarantee"]["quantities"]
    k = kind(g["kind"])
    public = data.get("public", {})
    lines = [
        "<!-- Generated by dprelease from release.json and the run's public aggregates; do not edit. -->",
        "# Model card: OIICS nature-of-injury autocoder",
        "",
        "## What it does",
        "",
        f"Codes a free-text injury narrative into one of {len(labels['codes'])} OIICS *Nature of injury* codes "
        f"(`labels.json`: codes and titles). Trained on the private training reports of the OSHA Severe Injury "
        f"Reports after {public.get('until', '–')} (each report's role a keyed hash of its own content; expected "
        f"training size n̂ = {public.get('expected_train_size', '–')}, from public counts; the private counts are not "
        f"released), backend `{manifest.get('backend')}`.",
        "",
        "## Privacy guarantee",
        "",
        k.sentence(g),
        "",
        f"* mechanism: {g['mechanism']}; kind: `{g['kind']}`; δ: {g['delta'] if g['delta'] is not None else g['delta_reason']}",
    ]
    if k.measured is not None:
        lines += k.measured(manifest)
    if q.get("released_draw_noise"):
        lines.append(
            f"* the released draw's randomness: {q['released_draw_noise']}, so nobody without the agency's "
            "key can re-derive it from the code, the parameters and the data"
        )
    lines += conditions(manifest)
    lines += ["", "## What an attacker can do (privacy audit of this release)", ""]
    if audit_rows:
        lines += audit_lines(audit_rows, g)
    else:
        lines.append("Not audited yet: run `make audit` (membership inference and one-run canary audits).")
    lines += ["", *replay_lines(replay)]
    lines += ["", "## Utility (test split)", ""]
    if utility:
        lines.append(
            f"This draw: weighted F1 {fixed(utility['released_weighted_f1'])}, macro F1 "
            f"{fixed(utility['released_macro_f1'])} (over {utility['draws']} further draws: "
            f"{fixed(utility['weighted_f1_mean'])} ± {fixed(utility['weighted_f1_sd'])} / "
            f"{fixed(utility['macro_f1_mean'])} ± {fixed(utility['macro_f1_sd'])})."
        )
    if quartiles:
        np_q = (
            {
                k: nonprivate.get(k)
                for k in (
                    "top_quartile_weighted_f1",
                    "top_quartile_macro_f1",
                    "bottom_quartile_weighted_f1",
                    "bottom_quartile_macro_f1",
                )
            }
            if nonprivate
            else {}
        )
        lines += [
            "",
            "By class size (disparate impact: rare classes are where privacy costs most):",
            "",
            "| classes by training size | this release weighted / macro F1 | non-private weighted / macro F1 |",
            "|---|---|---|",
        ]
        for row in quartiles:
            key = {"top quartile": "top", "bottom quartile": "bottom"}.get(row["group"])
            ref = (
                f"{fixed(np_q.get(f'{key}_quartile_weighted_f1'))} / {fixed(np_q.get(f'{key}_quartile_macro_f1'))}"
                if key and np_q
                else (
                    f"{fixed(nonprivate['weighted_f1'])} / {fixed(nonprivate['macro_f1'])}"
                    if nonprivate and row["group"] == "all classes"
                    else "not measured (`make compare`)"
                )
            )
            lines.append(
                f"| {row['group']} ({row['n_classes']} classes) | {fixed(row['weighted_f1'])} / "
                f"{fixed(row['macro_f1'])} | {ref} |"
            )
    lines += [
        "",
        "## Intended use and limits",
        "",
        "* Intended: suggesting OIICS nature codes for injury narratives, with a human coder reviewing "
        "low-probability and rare-class suggestions.",
        "* Rare classes are coded poorly (see the bottom quartile); do not use it to estimate counts of rare "
        "injuries without review.",
        "* The guarantee covers the training records only, under the stated assumptions; it says nothing about "
        "records outside the training data, and a very small ε is not implied by a small audit bound.",
        "",
        "## How to run it",
        "",
        "```bash",
        "dprelease verify --release <this folder> --key agency.pub",
        "dprelease predict --release <this folder> --key agency.pub --input narratives.csv --output coded.csv",
        "```",
        "",
        "`verify` checks the agency's signature (`release.sig`, Ed25519 over `release.json`) with the public key "
        "the agency gave you, and prints who signed the folder, the manifest's sha256 and the guarantee. `predict` "
        "verifies every file of this folder against the sha256 in `release.json` and, given `--key`, the "
        "signature too; it refuses a tampered, incomplete or wrongly signed release.",
        "",
    ]
    return "\n".join(lines)
