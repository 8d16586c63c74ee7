"""The public model as the agency's release (``released.mechanism: public_only``): softmax regression on every public
report of the label space (:func:`dprelease.core.public_fit.release`, L2 chosen on the public proxy), released as
the head backend's linear head. The model reads no private report. Its test figures are the only thing that does:
noised per-class counts (:mod:`dprelease.core.utility.dp_eval`), one Gaussian mechanism with μ = 1/z, whose exact
(ε, δ) (:func:`dprelease.core.privacy.gaussian.mu_epsilon`) is the release's guarantee."""

from __future__ import annotations

from pathlib import Path

import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core import public_fit
from dprelease.core.backends.head import linear_head
from dprelease.core.config import Params
from dprelease.core.data.splits import head_embeddings, label_info, linear_backend_for, n_public
from dprelease.core.errors import ConfigError
from dprelease.core.io import read_json
from dprelease.core.privacy import guarantee, secret
from dprelease.core.privacy.gaussian import mu_epsilon
from dprelease.core.privacy.target import default_delta
from dprelease.core.public_model import predict
from dprelease.core.release.coverage import UNIT, coverage
from dprelease.core.release.manifest import noised, release_manifest, stage_release
from dprelease.core.utility.dp_eval import dp_scores
from dprelease.core.utility.metrics import f1_summary
from dprelease.core.utility.points import PUBLIC_PROXY

FOLDER = "public_release"  # under the artifacts: the staged (unsigned, private) release
WHO = "the public model's release"


def staged(params: Params) -> str:
    return f"{params.artifacts}/{FOLDER}/release"


def public_release(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    if not public_fit.available(lay):
        raise ConfigError("released.mechanism public_only needs the public period's splits (proxy.until)")
    labels = label_info(lay)
    k = len(labels["codes"])
    sim = public_fit.simulation(lay, grid=params.public_model.l2, who=WHO)
    w, b = public_fit.release(lay, l2=sim.l2, who=WHO)
    xs, ys = head_embeddings(lay, "test", who=WHO)
    pred = predict(w, b, xs).numpy()
    z = params.released.evaluation_noise
    delta = params.released.delta or default_delta(n_public(lay))
    eps = mu_epsilon(1.0 / z, delta)  # the evaluation alone: μ = Δ/sd = √2/(z√2)
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, "public/release/evaluation"))
    covered = dp_scores(ys.numpy(), pred, k, noise_multiplier=z, generator=gen)
    g = guarantee.accountant(
        "the public model",
        eps,
        delta,
        target_epsilon=None,
        training_epsilon=0.0,
        evaluation_noise_multiplier=z,
        accountant="the analytic Gaussian (Balle & Wang 2018)",
        private_reports_read=0,
        unit=UNIT,
        noise_and_sampling="no noise in the model (it reads no private report); the test "
        "figures' Gaussian noise from the project's secret key",
    )
    manifest = release_manifest(
        params,
        lay,
        g,
        mechanism="public_only",
        backend="head (linear, hidden 0)",
        test_f1=noised(covered),
        randomness={
            "public_seed_drives": "the public proxy's split only",
            "secret_key_drives": "each private report's role and the evaluation's noise",
            "release_id": params.released.release_id,
        },
        configuration={
            "l2": sim.l2,
            "l2_grid": list(params.public_model.l2),
            "proxy_validation_weighted_f1": round(sim.score, 4),
            "source": f"L2 strength best of {len(params.public_model.l2)} on the public "
            f"proxy's validation part (reports up to {params.proxy.until}; zero ε)",
        },
        tuning=PUBLIC_PROXY,
        coverage=coverage(
            params, released="the model's weights (from public reports only), the label map, the configuration"
        ),
    )
    exact = f1_summary(ys.numpy(), pred, range(k))  # internal only: never in the release
    stage_release(
        Path(root) / staged(params),
        linear_backend_for(params, lay),
        linear_head(w, b),
        labels,
        manifest,
        closure(__name__),
        exact=exact,
    )
    return {"epsilon": round(eps, 4), "delta": delta, "weighted_f1": covered["weighted_f1"]}


def card(params, root: str | Path, manifest: dict) -> tuple[str, dict]:
    from dprelease.core.release.standard_card import render

    c, g = manifest["configuration"], manifest["guarantee"]
    sections = {
        "Mechanism and configuration": [
            "- softmax regression on the published earlier period's sentence embeddings (every public report of the "
            "label space), logit-adjusted to the private roles' class mix from public counts: no private report is read, "
            "so the model itself costs ε = 0",
            f"- L2 strength {c['l2']:g}; how it was chosen: **{manifest['tuning']}** — {c['source']}",
            f"- the stated ε = {g['epsilon']:.4g} (δ = {g['delta']:.3g}) is the test figures' alone: one Gaussian "
            f"mechanism on the test split's counts (noise multiplier {g['quantities']['evaluation_noise_multiplier']:g})",
        ]
    }
    text = render(
        manifest,
        title="OIICS nature coder — the public model release",
        about="The released model: a linear softmax head on the frozen public MiniLM-L6 encoder's "
        "sentence embeddings, trained on public reports only.",
        data=read_json(Path(root) / "metrics" / "data.json"),
        utility=manifest["test_f1"],
        sections=sections,
    )
    return text, {}


def figures(params, root: str | Path, manifest: dict) -> dict:
    return {**manifest["test_f1"], "arm": None, "diagnostics": {"l2": manifest["configuration"]["l2"]}}
