"""What DP-SGD releases through the shared publish step when ``released.mechanism: dpsgd``: the card (the
standard layout of :mod:`dprelease.core.release.standard_card`, the guarantee's words from its kind ``dp_accountant``)
and the release record's figures. Aggregates only."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.core.io import read_json


def _model(c: dict) -> str:
    head = "a linear softmax head" if not c.get("hidden") else f"an MLP head ({c['hidden']} hidden units)"
    return (
        f"{head} on the frozen public MiniLM-L6 encoder's mean-pooled sentence embeddings, trained with DP-SGD "
        "(Opacus: per-sample clipping, Poisson sampling, Gaussian noise)"
    )


def card(params, root: str | Path, manifest: dict) -> tuple[str, dict]:
    from dprelease.core.release.standard_card import render

    lay = Layout.from_params(params, root)
    c, t, g = manifest["configuration"], manifest["training"], manifest["guarantee"]
    q = g["quantities"]
    batch = "full batch (sampling rate 1)" if not c["batch_size"] else f"expected batch {c['batch_size']}"
    sections = {
        "Mechanism and configuration": [
            f"- DP-SGD at the declared target ε = {q['target_epsilon']:g} (`released.epsilon`, fixed before the data "
            f"are seen), δ = {g['delta']:.3g}; the accountant ({q['accountant']}, conversion {q['conversion']}) "
            f"gives ε = {g['epsilon']:.4g} for noise multiplier σ = {t['noise_multiplier']:.4g} over {t['steps']} "
            f"steps at sampling rate {t['sample_rate']:.4g}",
            f"- {c['epochs']} epochs, {batch}, optimiser {c['optimizer']} (lr {c['lr']:g}"
            + (f", momentum {c['momentum']:g}" if c.get("optimizer") == "sgd" else "")
            + f"), clipping norm C = "
            f"{c['max_grad_norm']:g}",
            f"- how the configuration was chosen: **{manifest['tuning']}** — {c['source']}",
            f"- {q['noise_and_sampling']}",
        ]
    }
    audit = lay.reports / "privacy" / "audit.csv"
    arm = figures(params, root, manifest)["arm"]
    text = render(
        manifest,
        title="OIICS nature coder — DP-SGD release",
        about=f"The released model: {_model(c)}. It codes a free-text injury narrative into an OIICS "
        "Nature of injury code.",
        data=read_json(lay.metrics / "data.json"),
        utility=manifest["test_f1"],
        sections=sections,
        audit_csv=audit,
        arm=arm,
    )
    return text, {}


def released_arm(params) -> str | None:
    """The audit arm that runs this mechanism as released: ``dpsgd`` when its target ε is the declared release's (δ is
    one declared value for both, ``released.delta``)."""
    return "dpsgd" if params.dpsgd.target_epsilon == params.released.epsilon else None


def figures(params, root: str | Path, manifest: dict) -> dict:
    t = manifest["training"]
    return {
        **manifest["test_f1"],
        "arm": released_arm(params),
        "diagnostics": {
            "noise_multiplier": t["noise_multiplier"],
            "steps": t["steps"],
            "sample_rate": t["sample_rate"],
        },
    }
