"""Comparison arms as pipeline stages (spec D.5, E, H.1): non-private, SWAG-PPM without re-weighting,
DP-SGD at a matched ε, and DP-SGD's δ sweep. Each arm writes ``metrics/<arm>.json`` and
``reports/arms/<arm>/`` (per-class F1 and quartile tables), the same audit outputs as the release.
The re-weighted SWAG-PPM arm is the release itself (``metrics/release.json`` + ``metrics/audit.json``).
"""

from __future__ import annotations

from pathlib import Path

from .audit import evaluate, quartile_summary, write_tables
from .backends.base import load_features
from .config import Params
from .dpsgd import check_setting, default_delta, train_dpsgd
from .io import read_json, write_json
from .layout import Layout
from .seeds import stage_seed
from .stages import backend_for, draw_from_round, label_info
from .train import finetune as run_finetune

DELTA_PPM = "asymptotic, not quantified"


def arm_dir(lay: Layout, arm: str) -> Path:
    return lay.reports / "arms" / arm


def _evaluate_and_write(params: Params, lay: Layout, arm: str, backend, model, extra: dict) -> dict:
    feats, y = load_features(lay.features / "test.safetensors")
    f1, per_class, quartiles = evaluate(backend, model, feats, y, label_info(lay))
    write_tables(arm_dir(lay, arm), per_class, quartiles)
    summary = {"arm": arm, **extra, **f1, **quartile_summary(quartiles)}
    write_json(lay.metrics / f"{arm}.json", summary)
    return summary


def nonprivate(params: Params, root: str | Path = ".") -> dict:
    """Ordinary fine-tuning from the base model for ``compare.nonprivate_epochs`` epochs (spec D.5)."""
    lay = Layout.from_params(params, root)
    backend = backend_for(params, lay)
    feats, y = load_features(lay.features / "train.safetensors")
    model = backend.new_model(feats)
    opt = params.backend.finetune.model_copy(update={"epochs": params.compare.nonprivate_epochs})
    hist = run_finetune(backend, model, feats, y, None, opt, seed=stage_seed(params.seed, "nonprivate"),
                        progress=True, desc="non-private")
    return _evaluate_and_write(params, lay, "nonprivate", backend, model,
                               {"epsilon": None, "delta": "none (not private)", "epochs": opt.epochs,
                                "final_loss": hist.losses[-1]})


def swag_ppm_round2(params: Params, root: str | Path = ".") -> dict:
    """SWAG-PPM without re-weighting: an independent draw from SWAG 2 (what the release would be with
    ``ppm.reweight: false``), with its own M* in Δ̂."""
    lay = Layout.from_params(params, root)
    backend, model, _, summary = draw_from_round(params, lay, 2)
    return _evaluate_and_write(params, lay, "swag_ppm", backend, model,
                               {"epsilon": summary["epsilon"], "delta": DELTA_PPM, "round": 2})


def target_epsilon(params: Params, lay: Layout) -> float:
    """The configured target, else the ε of the SWAG-PPM release it is compared with."""
    if params.dpsgd.target_epsilon is not None:
        return params.dpsgd.target_epsilon
    path = lay.metrics / "release.json"
    if not path.is_file():
        raise FileNotFoundError("dpsgd.target_epsilon is not set and there is no SWAG-PPM release to match "
                                "(run the release flow first, or set dpsgd.target_epsilon)")
    return float(read_json(path)["epsilon"])


def _n_train(lay: Layout) -> int:
    return sum(read_json(lay.data / "labels.json")["train_sizes"])


def preview_train_size(params: Params, root: str | Path = ".") -> int:
    """Training-set size the stratify stage will produce (read + sample + split in memory, ~1 s)."""
    from . import data as data_mod

    d = params.data
    df = data_mod.read_records(Path(root) / d.path, d.text_column, d.label_column)
    sample = data_mod.stratified_sample(df, cap=d.cap, min_class_size=d.min_class_size, seed=params.seed,
                                        limit_classes=d.limit_classes)
    return len(data_mod.split(sample, test_size=d.test_size, seed=params.seed)[0])


def check_dpsgd(params: Params, lay: Layout | None = None, eps: float | None = None, n: int | None = None) -> None:
    """Validate the DP-SGD setting against the data before any training (one-line ValueError)."""
    n = n if n is not None else _n_train(lay)
    run = params.dpsgd_run
    eps = eps if eps is not None else (params.dpsgd.target_epsilon or 1.0)
    for delta in [params.dpsgd.delta or default_delta(n), *params.dpsgd.delta_sweep]:
        check_setting(n, run.batch_size, eps, delta)


def _dpsgd_once(params: Params, lay: Layout, eps: float, delta: float, tag: str):
    backend = backend_for(params, lay)
    feats, y = load_features(lay.features / "train.safetensors")
    model = backend.new_model(feats)
    run = params.dpsgd_run
    result = train_dpsgd(backend, model, feats, y, epochs=run.epochs, batch_size=run.batch_size, lr=run.lr,
                         max_grad_norm=run.max_grad_norm, target_epsilon=eps, delta=delta,
                         conversion=params.dpsgd.conversion, grad_sample_mode=run.grad_sample_mode,
                         seed=stage_seed(params.seed, tag), progress=True)
    return backend, model, result


def dpsgd(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD (Opacus) at the target ε with δ = ``dpsgd.delta`` or 1/(2n) (spec E)."""
    lay = Layout.from_params(params, root)
    eps = target_epsilon(params, lay)
    check_dpsgd(params, lay, eps)
    delta = params.dpsgd.delta or default_delta(_n_train(lay))
    backend, model, res = _dpsgd_once(params, lay, eps, delta, "dpsgd")
    return _evaluate_and_write(params, lay, "dpsgd", backend, model, {
        "target_epsilon": eps, "epsilon": res.epsilon, "delta": delta, "noise_multiplier": res.noise_multiplier,
        "steps": res.steps, "sample_rate": res.sample_rate, "conversion": params.dpsgd.conversion,
        "final_loss": res.final_loss})


def dpsgd_sweep(params: Params, root: str | Path = ".") -> dict:
    """DP-SGD at the same target ε for each δ of ``dpsgd.delta_sweep`` (seed 004 Table 4)."""
    lay = Layout.from_params(params, root)
    eps = target_epsilon(params, lay)
    check_dpsgd(params, lay, eps)
    feats, y = load_features(lay.features / "test.safetensors")
    rows = []
    for delta in params.dpsgd.delta_sweep:
        backend, model, res = _dpsgd_once(params, lay, eps, delta, f"dpsgd-sweep-{delta}")
        f1, _, _ = evaluate(backend, model, feats, y, label_info(lay))
        rows.append({"delta": delta, "target_epsilon": eps, "epsilon": res.epsilon,
                     "noise_multiplier": res.noise_multiplier, **f1})
    summary = {"target_epsilon": eps, "rows": rows}
    write_json(lay.metrics / "dpsgd_sweep.json", summary)
    return summary


ARM_FUNCS = {"nonprivate": nonprivate, "swag_ppm": swag_ppm_round2, "dpsgd": dpsgd, "dpsgd_sweep": dpsgd_sweep}
