"""DP nearest class mean as the agency's release (``released.mechanism: ncm``): the noisy class sums of the
clipped training embeddings (the analytic Gaussian mechanism at ``released.epsilon``, δ = ``released.delta`` or
≤ n^-1.1; :mod:`.maths`), centred on the PUBLIC proxy's mean when there is one, released as the head backend's
linear head: logits = x·c_k − μ·c_k with c_k = S̃_k/‖S̃_k‖ (its argmax is the cosine rule of :func:`.maths.predict`;
its softmax is a score, not a calibrated probability). The noise comes from the secret key."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import head_embeddings, label_info, linear_backend_for, n_public
from dprelease.core.errors import ConfigError
from dprelease.core.privacy import guarantee, secret
from dprelease.core.privacy.gaussian import mu_epsilon, sigma_beside
from dprelease.core.privacy.target import default_delta
from dprelease.core.release.coverage import UNIT, coverage
from dprelease.core.release.manifest import noised, release_manifest, stage_release
from dprelease.core.utility.dp_eval import dp_scores
from dprelease.core.utility.metrics import f1_summary
from dprelease.core.utility.points import DECLARED, PUBLIC_PROXY
from dprelease.mechanisms.ncm import maths

FOLDER = "ncm_release"  # under the artifacts: the staged (unsigned, private) release


def staged(params: Params) -> str:
    return f"{params.artifacts}/{FOLDER}/release"


def embeddings(lay: Layout, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One split's cached encoder embeddings and labels (the head backend's; one line otherwise)."""
    return head_embeddings(lay, split, who="DP nearest class mean")


def proxy_centre(lay: Layout) -> torch.Tensor | None:
    """The PUBLIC proxy's mean embedding (None without a proxy): subtracting it before clipping is data-independent
    for the private records, so the guarantee is unchanged."""
    if not (lay.features / "proxy_train.safetensors").is_file():
        return None
    return embeddings(lay, "proxy_train")[0].double().mean(0)


def head(centres: torch.Tensor, shift: torch.Tensor | None):
    """The linear head (hidden 0) whose logits are (x − shift)·c_k: the head scales x by √d, so W = c/√d."""
    from dprelease.core.backends.head import linear_head

    k, d = centres.shape
    return linear_head(centres / d**0.5, -(centres @ shift) if shift is not None else torch.zeros(k))


def ncm_release(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    labels = label_info(lay)
    k = len(labels["codes"])
    (xt, yt), (xs, ys) = embeddings(lay, "train"), embeddings(lay, "test")
    eps, n = params.released.epsilon, n_public(lay)  # public n̂: δ never reads the private count
    delta = params.released.delta or default_delta(n)
    z = params.released.evaluation_noise
    try:  # the class sums and the DP evaluation (μ = 1/z) meet (ε, δ) together: exact Gaussian composition
        sigma = sigma_beside(eps, delta, others=(1.0 / z,))
    except ValueError as err:
        raise ConfigError(f"released.epsilon: {err}") from None
    shift = proxy_centre(lay)
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, "ncm/release"))
    noisy = maths.release(xt.double() - shift if shift is not None else xt, yt, k, sigma=sigma, generator=gen)
    centres = noisy / noisy.norm(dim=1, keepdim=True).clamp(min=1e-12)
    model = head(centres, shift)
    with torch.no_grad():
        pred = model(xs.float()).argmax(1)
    exact = f1_summary(ys.numpy(), pred.numpy(), range(k))  # internal only: never in the release
    egen = torch.Generator().manual_seed(secret.seed(lay.artifacts, "ncm/release/evaluation"))
    covered = dp_scores(ys.numpy(), pred.numpy(), k, noise_multiplier=z, generator=egen)
    total = mu_epsilon(math.hypot(1.0 / sigma, 1.0 / z), delta)
    g = guarantee.accountant(
        "DP nearest class mean",
        total,
        delta,
        target_epsilon=eps,
        noise_multiplier=sigma,
        sensitivity=1.0,
        accountant="analytic Gaussian (Balle & Wang 2018), composed exactly with the evaluation (μ² = 1/σ² + 1/z²)",
        unit=UNIT,
        training_epsilon=mu_epsilon(1.0 / sigma, delta),
        evaluation_noise_multiplier=z,
        noise_and_sampling="Gaussian noise on the class sums, seeded from the project's secret key",
    )
    tuning = PUBLIC_PROXY if shift is not None else DECLARED
    manifest = release_manifest(
        params,
        lay,
        g,
        mechanism="ncm",
        backend="head (linear, hidden 0)",
        test_f1=noised(covered),
        randomness={
            "public_seed_drives": "the stratified split only",
            "secret_key_drives": "the Gaussian noise on the class sums",
        },
        configuration={
            "sigma": sigma,
            "clip_norm": 1.0,
            "centred": shift is not None,
            "source": ("embeddings centred on the public proxy's mean (zero ε); no other setting")
            if shift is not None
            else "no setting: nothing chosen",
        },
        tuning=tuning,
        coverage=coverage(params),
    )
    stage_release(
        Path(root) / staged(params),
        linear_backend_for(params, lay),
        model,
        labels,
        manifest,
        closure(__name__),
        exact=exact,
    )
    return {"epsilon": round(total, 4), "delta": delta, "weighted_f1": covered["weighted_f1"]}


def card(params, root: str | Path, manifest: dict) -> tuple[str, dict]:
    from dprelease.core.io import read_json
    from dprelease.core.release.standard_card import render

    c, g = manifest["configuration"], manifest["guarantee"]
    sections = {
        "Mechanism and configuration": [
            f"- the analytic Gaussian mechanism (Balle & Wang 2018) at the declared ε = {g['quantities']['target_epsilon']:g} "
            f"(`released.epsilon`, training and evaluation together), δ = {g['delta']:.3g}: noise σ = {c['sigma']:.4g} on "
            "the per-class sums of the training embeddings, each clipped to norm ≤ 1 (sensitivity 1)",
            f"- how the configuration was chosen: **{manifest['tuning']}** — {c['source']}",
            "- the probability column of `predict` is the softmax of cosine scores: a ranking, not a calibrated probability",
        ]
    }
    text = render(
        manifest,
        title="OIICS nature coder — DP nearest class mean release",
        about="The released model: the noisy class means of the frozen public MiniLM-L6 encoder's sentence "
        "embeddings; a narrative gets the code of the nearest mean by cosine.",
        data=read_json(Path(root) / "metrics" / "data.json"),
        utility=manifest["test_f1"],
        sections=sections,
    )
    return text, {}


def figures(params, root: str | Path, manifest: dict) -> dict:
    return {**manifest["test_f1"], "arm": None, "diagnostics": {"sigma": manifest["configuration"]["sigma"]}}
