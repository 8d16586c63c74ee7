"""The model card of a declared release that is not SWAG-PPM's (DP-SGD, the linear PPM, …): one layout for every
mechanism, rendered from the release's own manifest. What it says of the guarantee comes from the record's kind
(:func:`dprelease.core.privacy.guarantee.kind`: its sentence, conditions and how its figure was measured); the mechanism
adds what only it knows (its model, its configuration and how that was chosen, its diagnostics) as plain lines.
Aggregates only: never a per-record quantity."""

from __future__ import annotations

from dprelease.core.privacy.guarantee import kind
from dprelease.core.release.card import audit_lines, audit_rows
from dprelease.core.release.card import fixed as _f


def coverage_lines(manifest: dict) -> list[str]:
    """The card's "what the guarantee covers" section, from the manifest's ``coverage`` (public words)."""
    c = manifest.get("coverage")
    if not c:
        return []
    g = manifest["guarantee"]
    q = g.get("quantities", {})
    total = (
        f"ε = {g['epsilon']:.4g} in total (training ε {q['training_epsilon']:.4g} composed with the test "
        f"evaluation's Gaussian mechanism by the accountant), δ = {g['delta']:.3g}"
        if q.get("training_epsilon") is not None
        else f"ε = {g.get('epsilon')}, δ = {g.get('delta')}"
    )
    return [
        "## What the guarantee covers",
        "",
        f"- **Unit of privacy**: {c['unit']}.",
        f"- **Neighbouring relation**: {c['relation']}.",
        f"- **Total**: {total}.",
        f"- **Public inputs** (no ε spent on them): {c['public']}.",
        f"- **Released**: {c['released']}.",
        f"- **Not released**: {c['not_released']}.",
        "",
    ]


def render(
    manifest: dict,
    *,
    title: str,
    about: str,
    data: dict,
    utility: dict,
    sections: dict[str, list[str]],
    audit_csv=None,
    arm: str | None = None,
) -> str:
    """The card: title, what the model is, the guarantee (from its kind), the mechanism's own ``sections``
    (heading → lines), the test-split utility, the data, the audit when it ran (``audit_csv`` rows of ``arm``)."""
    g = manifest["guarantee"]
    k = kind(g["kind"])
    delta = (
        "δ: none"
        if g.get("delta") is None and k.claims_epsilon
        else f"δ = {g['delta']:.3g}"
        if g.get("delta") is not None
        else "no ε, no δ"
    )
    lines = [
        f"# {title}",
        "",
        about,
        "",
        "## Privacy",
        "",
        k.sentence(g),
        "",
        f"Kind `{g['kind']}` ({k.meaning}); {delta}.",
        "",
    ]
    if k.conditions is not None:
        lines += [*k.conditions(manifest), ""]
    if k.measured is not None:
        lines += [*k.measured(manifest), ""]
    for heading, body in sections.items():
        lines += [f"## {heading}", "", *body, ""]
    lines += coverage_lines(manifest)
    lines += [
        "## Utility (test split)",
        "",
        "| model | weighted F1 | macro F1 |",
        "|---|---|---|",
        f"| the released model | {_f(utility.get('weighted_f1'))} | {_f(utility.get('macro_f1'))} |",
        "",
    ]
    if utility.get("kind") == "dp_noised_counts":
        lines += [
            f"Computed from the test split's per-class TP / FP / FN counts with Gaussian noise (sd "
            f"{utility['count_noise_sd']:g} per count, noise multiplier {utility['noise_multiplier']:g} at L2 "
            "sensitivity √2), covered by the stated ε; the exact figures are not released.",
            "",
        ]
    public = data.get("public", {})
    lines += [
        f"Label space: {public.get('classes', data.get('classes'))} OIICS codes, fixed from the public period "
        f"(reports up to {public.get('until', '–')}) before any private report was read.",
        "",
    ]
    rows = audit_rows(audit_csv, arm) if audit_csv is not None and arm else []
    lines += ["## Privacy audit", ""]
    lines += (
        audit_lines(rows, g)
        if rows
        else [
            "Not audited yet: `make audit` runs membership inference and the one-run canary audit of this "
            "mechanism's arm and adds the bounds here.",
            "",
        ]
    )
    r = manifest.get("randomness") or {}
    if r:
        lines += [
            "## Randomness",
            "",
            f"Public seed {r.get('public_seed')} drives {r.get('public_seed_drives')}; "
            f"the agency's secret key (id {str(r.get('secret_key_id'))[:16]}) drives {r.get('secret_key_drives')}.",
            "",
        ]
    lines += ["Per-record quantities, gradients and training text are kept private by the agency.", ""]
    return "\n".join(lines)
