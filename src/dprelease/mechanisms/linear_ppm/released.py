"""The linear PPM release (docs/linear_ppm.md): stage ``linear_ppm_draw`` samples the declared configuration, refuses
in one line when the chains fail the declared diagnostics, and stages ONE draw chosen with the secret key as a
release-format folder (the head backend's linear head, ``hidden = 0``); stage ``linear_ppm_publish`` adds the model
card and writes the signed release folder ``linear_ppm.release``.

Variant ``risk``: a first, unweighted run's draws give each record's risk r̂_i = max_s CE_i and the weights
(:func:`.maths.risk_weights`); the weighted run is released with ε = 2Δ̂/T (kind ``ppm_local_asymptotic``).
Variant ``censored``: w ≡ 1, each record's loss softly censored at κ = ε·T/2 with ε declared: kind ``ppm_censored``.
Private (0600 in 0700, under ``<artifacts>/linear_ppm``): weights, per-draw statistics, per-chain diagnostics and
per-direction temperatures. Public: the aggregates in ``metrics/linear_ppm.json``, the manifest and the card.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import head_embeddings, label_info, linear_backend_for, n_public
from dprelease.core.io import atomic_dir, read_json, write_json
from dprelease.core.io import private_dir as owner_only
from dprelease.core.privacy import guarantee, secret
from dprelease.core.privacy.target import default_delta
from dprelease.core.release.folder import publish as write_published
from dprelease.core.release.folder import verify_release, write_release
from dprelease.core.release.manifest import release_manifest
from dprelease.core.release.path import check_release_path
from dprelease.core.release.signing import agency_signer
from dprelease.core.utility.dp_eval import separate_figures
from dprelease.core.utility.metrics import f1_summary
from dprelease.mechanisms.linear_ppm import diagnostics, maths, posterior
from dprelease.mechanisms.linear_ppm.card import render

FOLDER = "linear_ppm"  # under the artifacts: private
SECRET_DRAW = "one kept draw, chosen uniformly with a seed from the secret key"


def private_dir(params: Params) -> str:
    return f"{params.artifacts}/{FOLDER}"


def staged(params: Params) -> str:
    return f"{params.artifacts}/{FOLDER}/draw/release"


def load(lay: Layout, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmented features x̃ and labels of one split (the head backend's cached embeddings)."""
    x, y = head_embeddings(lay, split, who="linear_ppm")
    return maths.augment(x), y


def sample_run(params: Params, lay: Layout, target: maths.Target, tag: str) -> posterior.Run:
    """One configuration sampled with the declared sampler settings and secret randomness labelled ``tag``."""
    s = params.linear_ppm.sampler
    return posterior.sample(
        target,
        seeds=lambda what: secret.seed(lay.artifacts, f"linear_ppm/{tag}/{what}"),
        starts_rng=secret.numpy_rng(lay.artifacts, f"linear_ppm/{tag}/starts"),
        chains=s.chains,
        warmup=s.warmup,
        draws=s.draws,
        start_spread=s.start_spread,
        max_tree_depth=s.max_tree_depth,
        target_accept=s.target_accept,
        kind=s.kind,
    )


def require(params: Params, run: posterior.Run, what: str) -> None:
    t = params.linear_ppm.diagnostics
    diagnostics.require(
        run.diagnostics,
        what=what,
        rhat_max=t.rhat_max,
        ess_min=t.ess_min,
        divergences_max=t.divergences_max,
        temperature=run.summary["temperature_all"],
        temperature_tolerance=t.temperature_tolerance,
    )


def write_private(folder: Path, name: str, run: posterior.Run, weights: np.ndarray | None = None) -> None:
    """A run's private detail: per-chain diagnostics, per-draw statistics, per-direction temperatures, weights."""
    owner_only(folder)
    with atomic_dir(folder / name, private=True) as tmp:
        write_json(tmp / "diagnostics.json", {**run.diagnostics, "summary": run.summary}, private=True)
        arrays = {
            "max_loss": run.max_loss,
            "log_posterior": run.log_posterior,
            "record_risk": run.record_risk,
            "temperature": run.temperature,
            **({"weights": weights} if weights is not None else {}),
        }
        with open(tmp / "draws.npz", "wb") as fh:
            np.savez(fh, **arrays)
        (tmp / "draws.npz").chmod(0o600)


def sample_variant(
    params: Params,
    lay: Layout,
    *,
    prior_precision: float,
    temperature: float,
    variant: str,
    epsilon: float | None = None,
    tag: str,
    private: Path | None = None,
    unweighted=None,
    keep_first: dict | None = None,
) -> tuple[posterior.Run, guarantee.Guarantee, dict]:
    """Sample one declared configuration (refused in one line when its diagnostics fail) and its guarantee.
    ``unweighted``: a risk variant's first run when the caller already has it (same λ, T = 1, w ≡ 1);
    ``keep_first``: where a passing first run is kept, by λ (the frontier reuses it)."""
    p = params.linear_ppm
    xa, y = load(lay, "train")
    k = len(label_info(lay)["codes"])
    if variant == "censored":
        kappa = maths.kappa_for(epsilon, temperature)
        run = sample_run(
            params,
            lay,
            maths.Target(
                xa=xa, y=y, n_classes=k, prior_precision=prior_precision, temperature=temperature, kappa=kappa
            ),
            tag,
        )
        if private is not None:
            write_private(private, tag, run)
        require(params, run, f"linear PPM censored ε {epsilon:g}")
        g = guarantee.censored(
            epsilon,
            run.delta_hat,
            weights=guarantee.UNIFORM_WEIGHTS,
            mechanism="linear PPM censored (MCMC)",
            **quantities(run),
            censor_level=kappa,
            temperature_declared=temperature,
            sampler_error="diagnostics only (R-hat, ESS, divergences): not a δ",
        )
        return run, g, {}
    first = unweighted or sample_run(
        params, lay, maths.Target(xa=xa, y=y, n_classes=k, prior_precision=prior_precision), f"{tag}/unweighted"
    )
    if private is not None and unweighted is None:
        write_private(private, f"{tag}-unweighted", first)  # beside the weighted run's folder, not inside it
    require(params, first, "linear PPM risk (unweighted run)")
    if keep_first is not None:
        keep_first[prior_precision] = first
    w = maths.risk_weights(first.record_risk, c=p.c, g=p.g, norm=p.risk_norm)
    run = sample_run(
        params,
        lay,
        maths.Target(
            xa=xa,
            y=y,
            n_classes=k,
            prior_precision=prior_precision,
            temperature=temperature,
            weights=torch.from_numpy(w).float(),
        ),
        tag,
    )
    if private is not None:
        write_private(private, tag, run, weights=w)
    require(params, run, f"linear PPM risk λ {prior_precision:g} T {temperature:g}")
    eps = posterior.epsilon(run)
    g = guarantee.ppm(
        eps,
        run.delta_hat,
        mechanism="linear PPM (MCMC)",
        **quantities(run),
        weights=guarantee.RISK_WEIGHTS.replace("(round 2)", "(an unweighted run's draws)"),
        temperature_declared=temperature,
        weight_mean=float(w.mean()),
        sampler_error="diagnostics only (R-hat, ESS, divergences): not a δ",
    )
    return run, g, {"first_run": first.summary}


def quantities(run: posterior.Run) -> dict:
    s = run.summary
    # the temperature is checked over all directions ON AVERAGE (equipartition, refused outside 1 ± tolerance);
    # no per-direction certificate is claimed, so no ``certified_directions``/``parameters`` pair is recorded
    return {
        "prior_precision": run.target.prior_precision,
        "dimension": s["parameters"],
        "temperature_all": s["temperature_all"],
        "temperature_all_q05": s["temperature_all_q05"],
        "temperature_all_q95": s["temperature_all_q95"],
        "sampler": f"{s['sampler']['sampler']} Markov chain",
        "kept_draws": int(run.max_loss.size),
        "rhat_max": s["rhat_max"],
        "ess_bulk_min": s["ess_bulk_min"],
        "ess_tail_min": s["ess_tail_min"],
        "divergences": s["divergences"],
    }


def head_model(theta: torch.Tensor, dim: int):
    """The released linear head (:class:`dprelease.core.backends.head.Head`, ``hidden = 0``) holding θ = [W, b]."""
    from dprelease.core.backends.head import linear_head

    return linear_head(theta[:, :dim], theta[:, dim])


def _linear_backend(params: Params, lay: Layout):
    if params.model.backend != "head":
        raise ValueError("linear_ppm releases a head on the frozen encoder (model.backend: head)")
    return linear_backend_for(params, lay)


def draw(params: Params, root: str | Path = ".") -> dict:
    """Sample the declared configuration, refuse on failed diagnostics, stage ONE secret-chosen draw."""
    lay, p = Layout.from_params(params, root), params.linear_ppm
    run, g, extra = sample_variant(
        params,
        lay,
        prior_precision=p.prior_precision,
        temperature=p.temperature,
        variant=p.variant,
        epsilon=p.censor_epsilon if p.variant == "censored" else None,
        tag=f"release/{p.variant}",
        private=Path(root) / private_dir(params) / "chains",
    )
    index, theta = run.draw(secret.numpy_rng(lay.artifacts, f"linear_ppm/release/{p.variant}/draw"))
    labels = label_info(lay)
    xs, ys = load(lay, "test")
    k = range(len(labels["codes"]))
    drawn = posterior.predict(theta, xs).numpy()
    exact = {
        "map": f1_summary(ys.numpy(), posterior.predict(run.theta_map, xs).numpy(), k),  # internal only
        "released_draw": f1_summary(ys.numpy(), drawn, k),
    }
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"linear_ppm/release/{p.variant}/evaluation"))
    utility = {
        "released_draw": separate_figures(
            ys.numpy(),
            drawn,
            len(k),
            noise_multiplier=params.released.evaluation_noise,
            delta=params.released.delta or default_delta(n_public(lay)),
            generator=gen,
        )
    }
    manifest = release_manifest(
        params,
        lay,
        g,
        mechanism="linear_ppm",
        backend="head (linear, hidden 0)",
        test_f1=utility,
        randomness={
            "public_seed_drives": "the stratified split only",
            "secret_key_drives": "chain starts, momenta, trajectory jitter (HMC) or directions "
            "(NUTS), Metropolis coins, the released draw",
            "released_draw": SECRET_DRAW,
        },
        variant=p.variant,
        prior_precision=p.prior_precision,
        temperature=p.temperature,
        censor_epsilon=p.censor_epsilon if p.variant == "censored" else None,
        risk_weights={"c": p.c, "g": p.g, "norm": p.risk_norm} if p.variant == "risk" else None,
        sampling=run.summary,
        **extra,
        diagnostics_thresholds=p.diagnostics.model_dump(),
    )
    backend = _linear_backend(params, lay)
    with atomic_dir(Path(root) / private_dir(params) / "draw", private=True) as tmp:
        write_release(
            tmp / "release",
            backend,
            head_model(theta, xs.shape[1] - 1),
            labels["codes"],
            labels["titles"],
            manifest,
            closure(__name__),
        )
    summary = {
        "guarantee": g.as_dict(),
        "test_f1": utility,
        "sampling": run.summary,
        **extra,
        "internal": {"exact_test_f1": exact, "note": "un-noised figures on private test reports: the operator's"},
    }
    write_json(lay.metrics / "linear_ppm.json", summary)
    return {
        "epsilon": g.epsilon,
        "kind": g.kind,
        "weighted_f1": utility["released_draw"]["weighted_f1"],
        "rhat_max": run.summary["rhat_max"],
        "temperature_all": run.summary["temperature_all"],
    }


def publish(params: Params, root: str | Path = ".") -> dict:
    """The signed release folder ``linear_ppm.release``: the staged draw plus its model card."""
    target = check_release_path(params, root, params.linear_ppm.release)
    staging = Path(root) / staged(params)
    manifest = verify_release(staging)
    data = read_json(Path(root) / "metrics" / "data.json")
    write_published(staging, target, render(manifest, data=data), signer=agency_signer(params, root))
    return {"release": str(target), "epsilon": manifest["guarantee"]["epsilon"]}
