"""DP-SGD comparison arms (docs/algorithms.md, E, H.1): ``dpsgd`` at the declared target ε and ``dpsgd_sweep``
over δ.

The target ε is ``dpsgd.target_epsilon``, a number declared in params.yaml before any run (privacy/target.py):
never the SWAG-PPM release's measured ε, so nothing here reads ``metrics/swag_ppm_draw.json``. δ is ``released.delta``
(the one declared δ) or min(n̂^-1.1, 1/(2n̂)) (:func:`.accounting.default_delta`) with n̂ the PUBLIC expected training size; the
sampling rate and the normaliser use n̂ too, never the private count (docs/guarantees.md, "The boundary").
"""

from __future__ import annotations

from pathlib import Path

import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import ReleaseSpec
from dprelease.contracts.stage import Stage, flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features, label_info, n_public
from dprelease.core.data.stages import period_split, public_design
from dprelease.core.io import write_json
from dprelease.core.privacy import accountants, guarantee, secret
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.privacy.target import declared
from dprelease.core.public_model import predict as public_predict
from dprelease.core.release.coverage import coverage
from dprelease.core.release.folder import arm_model_dir, write_arm_model
from dprelease.core.release.manifest import noised, release_manifest, stage_release
from dprelease.core.utility.dp_eval import dp_scores
from dprelease.core.utility.evaluate import evaluate, score, write_arm
from dprelease.core.utility.metrics import f1_summary
from dprelease.mechanisms.dpsgd import card
from dprelease.mechanisms.dpsgd.accounting import default_delta, spent_epsilon
from dprelease.mechanisms.dpsgd.frontier import frontier_dpsgd
from dprelease.mechanisms.dpsgd.search import release_configuration
from dprelease.mechanisms.dpsgd.train import check_setting, train_dpsgd

NOISE_SOURCE = (
    "Gaussian noise and Poisson sampling seeded from the project's secret key (OS entropy), not the "
    "public seed; Opacus secure_mode not used"
)


def dpsgd_target(params: Params) -> float:
    """DP-SGD's declared target ε (``dpsgd.target_epsilon``); a one-line ConfigError when it is null."""
    return declared(params.dpsgd.target_epsilon, key="dpsgd.target_epsilon", who="DP-SGD")


def preview_train_size(params: Params, root: str | Path = ".") -> int:
    """The PUBLIC expected training size n̂ the stratify stage will record (the public period read in memory)."""
    return public_design(params, period_split(params, root)[1])["expected"]["train"]


def check_dpsgd(params: Params, lay: Layout | None = None, eps: float | None = None, n: int | None = None) -> None:
    """Validate the DP-SGD setting against the data before any training (one-line ValueError)."""
    n = n if n is not None else n_public(lay)
    run = params.dpsgd.run_for(params.model.backend)
    eps = eps if eps is not None else dpsgd_target(params)
    for delta in [params.released.delta or default_delta(n), *params.dpsgd.delta_sweep]:
        check_setting(n, run.batch_size or n, eps, delta)


PLANTED_MARKER = "planted_bugs_allowed"  # written only into a canary run's artifacts (mia/canary.py)


def _dpsgd_once(params: Params, lay: Layout, eps: float, delta: float, tag: str, run=None, extra=(), init=None):
    divisor = params.dpsgd.planted_noise_divisor
    if divisor != 1.0 and not (lay.artifacts / PLANTED_MARKER).is_file():
        raise ValueError("dpsgd.planted_noise_divisor is a planted bug for the privacy audit's canary runs only")
    run = run or params.dpsgd.run_for(params.model.backend)
    backend = backend_for(_with_head(params), lay)
    feats, y = features(lay)
    seeds = secret.training_seeds(lay.artifacts)  # initialisation and dropout: secret, like the noise
    model = backend.new_model(feats, init_seed=seeds("dpsgd-init/" + tag, 0))
    if init is not None:  # the public model's weights (a linear head): DP-SGD refines them
        with torch.no_grad():
            model.net[-1].weight.copy_(init[0])
            model.net[-1].bias.copy_(init[1])
    n_hat = n_public(lay)
    batch = run.batch_size or n_hat  # 0: full batch (q = 1); the normaliser is the public n̂, never the private n
    result = train_dpsgd(
        backend,
        model,
        feats,
        y,
        epochs=run.epochs,
        batch_size=batch,
        expected_size=n_hat,
        extra=extra,
        lr=run.lr,
        max_grad_norm=run.max_grad_norm,
        target_epsilon=eps,
        delta=delta,
        conversion=params.dpsgd.conversion,
        grad_sample_mode=run.grad_sample_mode,
        seed=seeds("dpsgd/" + tag, 0),
        noise_seed=secret.seed(lay.artifacts, f"dpsgd/{tag}"),
        progress=True,
        planted_noise_divisor=divisor,
        optimizer=run.optimizer,
        momentum=run.momentum,
    )
    return backend, model, result


def _with_head(params: Params) -> Params:
    """``params`` whose head is DP-SGD's (``dpsgd.head.hidden``: 0 is a linear head; None keeps ``model.head``)."""
    hidden = params.dpsgd.run_for(params.model.backend).hidden
    if hidden is None or params.model.backend != "head":
        return params
    head = params.model.head.model_copy(update={"hidden": hidden})
    return params.model_copy(update={"model": params.model.model_copy(update={"head": head})})


def dpsgd(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD (Opacus) at the declared target ε with δ = ``released.delta`` or ≤ n^-1.1 (docs/algorithms.md, E)."""
    lay = Layout.from_params(params, root)
    eps = dpsgd_target(params)
    check_dpsgd(params, lay, eps)
    delta = params.released.delta or default_delta(n_public(lay))
    run, tuning, _, start = release_configuration(params, lay, epsilon=eps, delta=delta)  # as the release does
    backend, model, res = _dpsgd_once(params, lay, eps, delta, "dpsgd", run=run, init=start)
    g = guarantee.accountant(
        "DP-SGD (Opacus)",
        res.epsilon,
        delta,
        target_epsilon=eps,
        noise_multiplier=res.noise_multiplier,
        steps=res.steps,
        sample_rate=res.sample_rate,
        max_grad_norm=run.max_grad_norm,
        conversion=params.dpsgd.conversion,
        accountant=accountants.get(params.dpsgd.conversion).label,
        optimizer=run.optimizer,
        noise_and_sampling=NOISE_SOURCE,
        tuning=tuning,
        **(
            {"planted_bug": f"noise multiplier divided by {params.dpsgd.planted_noise_divisor:g}"}
            if params.dpsgd.planted_noise_divisor != 1.0
            else {}
        ),
    )
    write_arm_model(lay, "dpsgd", backend, model, g, closure(__name__))
    return write_arm(lay, "dpsgd", backend, model, label_info(lay), g, {"final_loss": res.final_loss})


RELEASE_FOLDER = "dpsgd_release"  # under the artifacts: the staged (unsigned, private) release


def staged(params: Params) -> str:
    return f"{params.artifacts}/{RELEASE_FOLDER}/release"


def dpsgd_release(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD as the agency's release (``released.mechanism: dpsgd``): one model trained so that training and the
    DP test evaluation together meet the declared ``released.epsilon`` (δ = ``released.delta`` or from the public
    n̂), its noise, sampling and initialisation from the secret key and the per-release context, staged as a
    release-format folder whose manifest holds the accountant's guarantee record and only public or covered
    figures."""
    lay = Layout.from_params(params, root)
    eps, n_hat = params.released.epsilon, n_public(lay)
    delta = params.released.delta or default_delta(n_hat)
    z = params.released.evaluation_noise
    evaluation = ((z, 1.0, 1),)  # one Gaussian mechanism on the test split's counts (core/utility/dp_eval.py)
    run, tuning, source, start = release_configuration(params, lay, epsilon=eps, delta=delta)
    check_setting(n_hat, run.batch_size or n_hat, eps, delta)
    backend, model, res = _dpsgd_once(params, lay, eps, delta, "release", run=run, extra=evaluation, init=start)
    conversion = params.dpsgd.conversion
    total = spent_epsilon(res.noise_multiplier, res.sample_rate, res.steps, delta, conversion, evaluation)
    g = guarantee.accountant(
        "DP-SGD (Opacus)",
        total,
        delta,
        target_epsilon=eps,
        noise_multiplier=res.noise_multiplier,
        steps=res.steps,
        sample_rate=res.sample_rate,
        max_grad_norm=run.max_grad_norm,
        conversion=conversion,
        accountant=accountants.get(conversion).label,
        optimizer=run.optimizer,
        noise_and_sampling=NOISE_SOURCE,
        training_epsilon=res.epsilon,
        evaluation_noise_multiplier=z,
        unit="one report of the agency's extract (add or remove)",
        normaliser=f"the public expected training size n̂ = {n_hat}",
    )
    labels = label_info(lay)
    feats, y = features(lay, "test")
    pred = backend.predict_proba(model, feats).argmax(1).numpy()
    exact = score(y.numpy(), pred, labels)[0]  # internal only: never in the release
    floor = (
        None
        if start is None
        else f1_summary(y.numpy(), public_predict(*start, feats["x"]).numpy(), range(len(labels["codes"])))
    )
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, "release/evaluation"))
    covered = dp_scores(y.numpy(), pred, len(labels["codes"]), noise_multiplier=z, generator=gen)
    hidden = run.hidden if run.hidden is not None else params.model.head.hidden
    manifest = release_manifest(
        params,
        lay,
        g,
        mechanism="dpsgd",
        backend=params.model.backend,
        test_f1=noised(covered),
        randomness={
            "public_seed_drives": "the public proxy's split only",
            "secret_key_drives": "each private report's role, initialisation, Poisson sampling, "
            "dropout, the Gaussian noise and the evaluation's noise",
            "release_id": params.released.release_id,
        },
        configuration={**run.model_dump(mode="json"), "hidden": hidden, "conversion": conversion, "source": source},
        tuning=tuning,
        start="the public model (softmax regression on the public period, logit-adjusted)"
        if start is not None
        else "zero",
        training={
            "steps": res.steps,
            "noise_multiplier": res.noise_multiplier,
            "sample_rate": res.sample_rate,
            "expected_records": n_hat,
        },
        coverage=coverage(params),
    )
    stage_release(
        Path(root) / staged(params),
        backend,
        model,
        labels,
        manifest,
        closure(__name__),
        exact=exact,
        public_floor_exact_test_f1=floor,
        warm_start=start is not None,
    )
    write_json(
        lay.metrics / "public_floor.json",
        {  # the operator's view (exact figures on private test reports)
            "internal": "exact test F1 of private reports: the operator's aggregates, never released",
            "public_model": floor,
            "release_exact": exact,
        },
    )
    return {
        "epsilon": g.epsilon,
        "delta": delta,
        "weighted_f1": covered["weighted_f1"],
        "macro_f1": covered["macro_f1"],
    }


def dpsgd_sweep(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD at the same declared target ε for each δ of ``dpsgd.delta_sweep`` (seed 004 Table 4)."""
    lay = Layout.from_params(params, root)
    eps = dpsgd_target(params)
    check_dpsgd(params, lay, eps)
    feats, y = features(lay, "test")
    rows = []
    for delta in params.dpsgd.delta_sweep:
        backend, model, res = _dpsgd_once(params, lay, eps, delta, f"dpsgd-sweep-{delta}")
        f1, _, _ = evaluate(backend, model, feats, y, label_info(lay))
        rows.append(
            {
                "delta": delta,
                "target_epsilon": eps,
                "epsilon": res.epsilon,
                "noise_multiplier": res.noise_multiplier,
                **f1,
            }
        )
    summary = {"target_epsilon": eps, "rows": rows}
    write_json(lay.metrics / "dpsgd_sweep.json", summary)
    return summary


def settings(params: Params) -> dict:
    """DP-SGD's settings in the release's MLflow run: its section for the backend in use (its grid included: the
    release's configuration is the public proxy's best of it) and the accountants the frontier ranks with; not the
    δ sweep, the planted bug or the grid's private selection, which the release does not read."""
    other = ({"head", "full"} - {params.model.backend}).pop()
    drop = ("dpsgd.delta_sweep", "dpsgd.planted", "dpsgd.grid.private_selection", f"dpsgd.{other}.")
    return flat(params, ["dpsgd", "frontier.accountants"], drop=drop)


# released by the shared publish step when ``released.mechanism: dpsgd`` (the default)
SPEC = ReleaseSpec(
    mechanism="dpsgd",
    stage="dpsgd_release",
    staged=staged,
    card=card.card,
    figures=card.figures,
    evidence=lambda params: ["reports/privacy"],
    params=("dpsgd.target_epsilon",),
    code=lambda: closure(card.__name__),
    settings=settings,
)


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    deps = [key_id_file(params), f"{a}/data", f"{a}/features"]  # the target is declared: no release to read
    return [
        Stage(
            name="dpsgd",
            run=dpsgd,
            params=["seed", "model", "dpsgd", "proxy", "frontier.accountants"],
            deps=deps,
            outs=["reports/arms/dpsgd", arm_model_dir(params, "dpsgd")],
            metrics=["metrics/dpsgd.json"],
            group="compare",
        ),
        Stage(
            name="dpsgd_sweep",
            run=dpsgd_sweep,
            params=["seed", "model", "dpsgd"],
            deps=deps,
            outs=[],
            metrics=["metrics/dpsgd_sweep.json"],
            group="compare",
        ),
        Stage(
            name="dpsgd_release",
            run=dpsgd_release,
            params=[
                "seed",
                "model",
                "dpsgd",
                "released",
                "proxy",
                "public_model",
                "frontier.accountants",
            ],
            deps=deps,
            outs=[f"{a}/{RELEASE_FOLDER}"],
            metrics=["metrics/public_floor.json"],
            group="dpsgd_release",
        ),
        Stage(
            name="frontier_dpsgd",
            run=frontier_dpsgd,
            params=[
                "seed",
                "data",
                "model.backend",
                "released.delta",
                "dpsgd.warm_start",
                "dpsgd.grid",
                "public_model",
                "proxy",
                "frontier",
            ],
            deps=[*deps, params.data.path],  # the forward check reads the reports' dates
            outs=[],
            metrics=["metrics/frontier/dpsgd.json", "metrics/forward.json"],
            group="frontier",
        ),
    ]
