"""The model card (``README.md``) of a release folder: generated from the release's own manifest (its
guarantee record) and the public aggregates in ``metrics/`` and ``reports/``; never hand-edited. What
it cannot know yet (no comparison, no privacy audit) it says so, with the command that measures it.

What it says of the guarantee comes from the record's kind (:func:`dprelease.core.privacy.guarantee.kind`: its
sentence, how its figure was measured, its conditions), declared by whoever makes the kind: a mechanism with a
new kind of claim renders here without an edit."""

from __future__ import annotations

import csv
from pathlib import Path

from ..privacy.guarantee import kind

CARD = "README.md"


def _f(v, digits: int = 3) -> str:
    """A number with ``digits`` decimals; None, NaN and empty CSV cells (an empty quartile) as "–"."""
    if isinstance(v, str):
        v = float(v) if v.strip() not in ("", "nan", "NaN") else None
    return "–" if v is None or v != v else f"{v:.{digits}f}"


def _g(v) -> str:
    return "–" if v is None else f"{v:.3g}"


def audit_rows(path: Path, arm: str) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["arm"] == arm]


def _num(r: dict, k: str) -> str:
    return _f(float(r[k])) if r.get(k) not in (None, "", "nan") else "–"


def _count(r: dict, k: str) -> str:
    """A count read back from audit.csv (a float column where other rows have none): 1000.0 → 1000."""
    v = r.get(k)
    return str(int(float(v))) if v not in (None, "", "nan") else "–"


def audit_lines(rows: list[dict], g: dict) -> list[str]:
    """The audit table of this arm and, first, its strongest valid lower bound next to its ε."""
    valid = [r for r in rows if "heuristic" not in r.get("method", "heuristic_l3") and r["epsilon_lower_bound"] != ""]
    out = []
    if valid:
        best = max(valid, key=lambda r: float(r["epsilon_lower_bound"]))
        conf = round(100 * float(best["confidence"]))
        claim = f"ε = {_f(g['epsilon'])}" if g.get("epsilon") is not None else "no ε claimed"
        out += [f"**Strongest audit lower bound: ε_LB = {_num(best, 'epsilon_lower_bound')}** (this release: "
                f"{claim}) — {best['method']} on the {best['attack'].removeprefix('canary_')} canaries, "
                f"{_count(best, 'correct')} of {_count(best, 'guesses')} guesses right, {conf} % confidence each (the largest of "
                f"{len(valid)} bounds), against the canary run's own claim ε = {_num(best, 'claimed_epsilon')}; "
                f"the audit could certify at most {_num(best, 'ceiling')} (its ceiling). A bound far below ε says "
                "what these attacks achieve, not that the claim is tight or loose.", ""]
    out += ["| attack | bound | AUC | TPR @ 1 % FPR | TPR @ 0.1 % FPR | ε lower bound | ceiling |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['attack']} | {r.get('method', '')} | {_num(r, 'auc')} | {_num(r, 'tpr_at_fpr_0.01')} | "
                   f"{_num(r, 'tpr_at_fpr_0.001')} | {_num(r, 'epsilon_lower_bound')} | {_num(r, 'ceiling')} |")
    return out + ["", "Members = training records, non-members = test records. Only the canary bounds are valid "
                  "lower bounds; `heuristic_l3` figures come from one model (see `reports/privacy/report.md`)."]


def replay_lines(replay: dict | None) -> list[str]:
    """The replay audit's two rows (docs/guarantees.md, L.5): can the standard adversary re-fit the sampler?"""
    if not replay:
        return ["Replay audit: not run (`make audit-replay`)."]
    out = ["**Replay audit** (the adversary re-runs the released round's fit on D and on D∖{x} for "
           f"{replay['views']['public']['targets']} records and scores this draw by the likelihood ratio of the two "
           "samplers):", "", "| view | re-fit reproduces the release | decisions right | verdict | covered |",
           "|---|---|---|---|---|"]
    for view, v in replay["views"].items():
        out.append(f"| {view} | {'yes' if v['reproduces_release'] else 'no'} | {v['correct']} of {v['decisions']} | "
                   f"{'convicted' if v['convicted'] else 'not convicted'} | "
                   f"{'yes: the standard adversary' if view == 'public' else 'no: holds the secret key'} |")
    return out


def implied_interval(g: dict, tail: dict) -> tuple[float, float] | None:
    """The ε implied by the ends of the GEV interval of Δ's tail quantile (as :func:`dprelease.core.headline.headline`
    computes ``epsilon_ci_low/high``): an interval for the tail quantile's ε, whose upper end the claim uses — NOT
    an interval for the point estimate."""
    q = g.get("quantities", {})
    if not tail or g.get("kind") is None or not (k := kind(g["kind"])).tail_headline or not k.claims_epsilon:
        return None
    cold = (q["epsilon_point_estimate"] / q["epsilon_at_temperature_one"]
            if q.get("epsilon_point_estimate") and q.get("epsilon_at_temperature_one") else 1.0)
    return 2 * tail["ci_low"] * cold, 2 * tail["ci_high"] * cold


def _point(g: dict) -> str:
    v = g.get("quantities", {}).get("epsilon_point_estimate")
    return f" {v:.3f}" if v is not None else ""


def guarantee_sentence(g: dict) -> str:
    """The card's one-sentence claim: its kind's (:attr:`dprelease.pipeline.mechanism.Kind.sentence`)."""
    return kind(g["kind"]).sentence(g)


def _conditions(manifest: dict) -> list[str]:
    """What a SWAG-PPM ε is conditional on: temperature, Monte Carlo error, the re-weighting decision; the
    kind's own conditions after the approximation's (:attr:`dprelease.pipeline.mechanism.Kind.conditions`)."""
    g = manifest["guarantee"]
    k = kind(g["kind"])
    q, out = g["quantities"], []
    if q.get("temperature") is not None:
        out.append(f"* posterior approximation: SWAG's per-direction temperatures against the marginal of a Laplace "
                   f"(GGN) posterior with prior N({'θ₀' if manifest.get('backend') == 'full' else '0'}, "
                   f"I/{manifest.get('prior_precision')}) in SWAG's subspace: mean "
                   f"T̂ = {q['temperature']:.3g}, smallest T_min = {_g(q.get('temperature_min'))}; over all parameters "
                   f"mean T̂_all = {_g(q.get('temperature_all'))}, certified smallest ≥ {_g(q.get('temperature_min_all'))} "
                   f"(calibration: {manifest.get('calibration')}; 1 = matched)")
    if k.conditions is not None:
        out += k.conditions(manifest)
    knobs = manifest.get("knobs_that_move_epsilon")
    if knobs:
        rw = knobs["reweighting"]
        out.append(f"* settings that move ε (a reviewer checks they were fixed before ε was seen): SWAG learning rate "
                   f"{knobs['swag_lr']:g}, {knobs['swag_epochs']} epochs, rank {knobs['swag_rank']}, batch "
                   f"{knobs['swag_batch_size']}; fine-tune {knobs['finetune_epochs']} epochs; prior λ = "
                   f"{knobs['prior_precision']:g}; calibration {knobs['calibration']}; c = {knobs['c']:g}; re-weighting "
                   f"{rw['mode'] if rw else 'off'} (all in release.json; `make epsilon-sensitivity` measures ε over a grid)")
    tail = manifest.get("local_sensitivity_uncertainty")
    if tail:
        out.append(f"* Monte Carlo error: a fresh posterior draw exceeds Δ̂ with probability 1/(S+1) = "
                   f"{tail['exceedance_of_max']:.4f}; extreme-value estimate of the {tail['level']:.4f} quantile of the "
                   f"per-draw maximum: {tail['estimate']:.3f} ({tail['confidence']:.0%} interval {tail['ci_low']:.3f}–"
                   f"{tail['ci_high']:.3f}), i.e. 2Δ {2 * tail['estimate']:.3f} ({2 * tail['ci_low']:.3f}–"
                   f"{2 * tail['ci_high']:.3f})" + ("; the stated figure uses the interval's upper end"
                                                     if k.tail_headline else ""))
        implied = implied_interval(g, tail)
        if implied and g.get("epsilon") is not None:
            out.append(f"* tail-quantile ε, GEV interval: {implied[0]:.3f}–{implied[1]:.3f}. This is the interval of the "
                       f"ε implied by Δ's {tail['level']:.4f} quantile, not an interval for the claimed ε: the claimed "
                       f"ε = {g['epsilon']:.3f} is its upper end (or the measured Δ̂'s, if larger), and the point "
                       f"estimate{_point(g)} comes from the measured maximum Δ̂, a different quantity")
    sens = manifest.get("epsilon_sensitivity")
    if sens:
        out.append(f"* settings: over the `make epsilon-sensitivity` grid near this release's settings ({sens['cells']} "
                   f"cells at prior λ = {sens['prior_precision']:g}) the largest {sens['figure']} was "
                   f"{sens['maximum']:.3f}, the figure to read beside this release's")
    rw = manifest.get("reweighting")
    if rw:
        out.append(f"* re-weighting ({rw['mode']}): {rw['reason']} — this decision depends on the data and is not "
                   "covered by ε (only its outcome is published)")
    return out


def render(manifest: dict, *, data: dict, utility: dict | None, quartiles: list[dict] | None,
           nonprivate: dict | None, audit_rows: list[dict], labels: dict, replay: dict | None = None) -> str:
    g, q = manifest["guarantee"], manifest["guarantee"]["quantities"]
    k = kind(g["kind"])
    lines = [
        "<!-- Generated by dprelease from release.json and the run's public aggregates; do not edit. -->",
        "# Model card: OIICS nature-of-injury autocoder", "",
        "## What it does", "",
        f"Codes a free-text injury narrative into one of {len(labels['codes'])} OIICS *Nature of injury* codes "
        f"(`labels.json`: codes and titles). Trained on {data['train_rows']:,} narratives of the OSHA Severe "
        f"Injury Reports 2015–2016 (half of a class-stratified sample of {data['rows']:,} rows over "
        f"{data['classes']} classes; the other half is the test split), backend `{manifest.get('backend')}`.", "",
        "## Privacy guarantee", "", k.sentence(g), "",
        f"* mechanism: {g['mechanism']}; kind: `{g['kind']}`; δ: {g['delta'] if g['delta'] is not None else g['delta_reason']}",
    ]
    if k.measured is not None:
        lines += k.measured(manifest)
    if q.get("released_draw_noise"):
        lines.append(f"* the released draw's randomness: {q['released_draw_noise']}, so nobody without the agency's "
                     "key can re-derive it from the code, the parameters and the data")
    lines += _conditions(manifest)
    lines += ["", "## What an attacker can do (privacy audit of this release)", ""]
    if audit_rows:
        lines += audit_lines(audit_rows, g)
    else:
        lines.append("Not audited yet: run `make audit` (membership inference and one-run canary audits).")
    lines += ["", *replay_lines(replay)]
    lines += ["", "## Utility (test split)", ""]
    if utility:
        lines.append(f"This draw: weighted F1 {_f(utility['released_weighted_f1'])}, macro F1 "
                     f"{_f(utility['released_macro_f1'])} (over {utility['draws']} further draws: "
                     f"{_f(utility['weighted_f1_mean'])} ± {_f(utility['weighted_f1_sd'])} / "
                     f"{_f(utility['macro_f1_mean'])} ± {_f(utility['macro_f1_sd'])}).")
    if quartiles:
        np_q = {k: nonprivate.get(k) for k in ("top_quartile_weighted_f1", "top_quartile_macro_f1",
                                                "bottom_quartile_weighted_f1", "bottom_quartile_macro_f1")} if nonprivate else {}
        lines += ["", "By class size (disparate impact: rare classes are where privacy costs most):", "",
                  "| classes by training size | this release weighted / macro F1 | non-private weighted / macro F1 |",
                  "|---|---|---|"]
        for row in quartiles:
            key = {"top quartile": "top", "bottom quartile": "bottom"}.get(row["group"])
            ref = (f"{_f(np_q.get(f'{key}_quartile_weighted_f1'))} / {_f(np_q.get(f'{key}_quartile_macro_f1'))}"
                   if key and np_q else (f"{_f(nonprivate['weighted_f1'])} / {_f(nonprivate['macro_f1'])}"
                                         if nonprivate and row["group"] == "all classes" else "not measured (`make compare`)"))
            lines.append(f"| {row['group']} ({row['n_classes']} classes) | {_f(row['weighted_f1'])} / "
                         f"{_f(row['macro_f1'])} | {ref} |")
    lines += ["", "## Intended use and limits", "",
              "* Intended: suggesting OIICS nature codes for injury narratives, with a human coder reviewing "
              "low-probability and rare-class suggestions.",
              "* Rare classes are coded poorly (see the bottom quartile); do not use it to estimate counts of rare "
              "injuries without review.",
              "* The guarantee covers the training records only, under the stated assumptions; it says nothing about "
              "records outside the training data, and a very small ε is not implied by a small audit bound.", "",
              "## How to run it", "",
              "```bash", "dprelease verify --release <this folder> --key agency.pub",
              "dprelease predict --release <this folder> --key agency.pub --input narratives.csv --output coded.csv",
              "```", "",
              "`verify` checks the agency's signature (`release.sig`, Ed25519 over `release.json`) with the public key "
              "the agency gave you, and prints who signed the folder, the manifest's sha256 and the guarantee. `predict` "
              "verifies every file of this folder against the sha256 in `release.json` and, given `--key`, the "
              "signature too; it refuses a tampered, incomplete or wrongly signed release.", ""]
    return "\n".join(lines)
