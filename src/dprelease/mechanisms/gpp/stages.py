"""The GPP stages (issue 12): ``gpp_digits`` and ``gpp_osha`` (baselines, sweeps, distributed rows on
Flower), ``gpp_release`` (the sanitizer release: OSHA encoder + model card) and ``gpp_report``
(``reports/gpp/table.csv``, ``report.md`` and the β trade-off figure). Also :func:`sanitize`, the entry
point of ``dprelease sanitize`` for a GPP sanitizer release. Every output is a public aggregate."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.errors import ConfigError
from dprelease.core.io import atomic_dir, private_dir, write_json
from dprelease.core.release.signing import public_key_dep
from dprelease.core.seeds import stage_seed
from dprelease.core.threads import torch_threads
from dprelease.mechanisms.gpp.audit import ProbeConfig, audit
from dprelease.mechanisms.gpp.data import GPPData, digits_composites
from dprelease.mechanisms.gpp.experiments import baseline_table, row, sweeps
from dprelease.mechanisms.gpp.train import TrainConfig


def train_config(params: Params, d_z: int, *, epochs: int | None = None) -> TrainConfig:
    return TrainConfig.from_params(params.gpp, d_z=d_z, epochs=epochs or params.gpp.epochs)


def probe_config(params: Params) -> ProbeConfig:
    return ProbeConfig.from_params(params.gpp)


def encoder_dir(params: Params, root: str | Path = ".") -> Path:
    """Where ``gpp_osha`` keeps the fitted OSHA encoder for the release stage (private artifacts)."""
    return Path(root) / params.artifacts / "gpp" / "osha"


def distributed_rows(data: GPPData, params: Params, config: TrainConfig, seed: int) -> tuple[list[dict], dict]:
    """Algorithm 2 on Flower (``gpp.federated.run_distributed``): β shared, then client-specific β.
    Returns audited rows and the communication / overhead figures (or a note when it is unavailable)."""
    if not params.gpp.distributed.enabled:
        return [], {"skipped": "gpp.distributed.enabled is false"}
    try:
        from dprelease.mechanisms.gpp.federated import run_distributed
    except ImportError as e:
        return [], {"skipped": f"gpp.federated.run_distributed unavailable ({e})"}
    t = len(data.clients)
    hetero = [params.gpp.distributed.hetero_betas[m % len(params.gpp.distributed.hetero_betas)] for m in range(t)]
    rows, comm = [], {}
    for setting, betas in (("distributed", [config.beta] * t), ("distributed_hetero_beta", hetero)):
        t0 = time.perf_counter()
        res = run_distributed(
            x_train=data.x_train,
            u_train=data.u_train,
            s_train=data.s_train,
            client_train=data.client_train,
            x_test=data.x_test,
            client_test=data.client_test,
            n_u=data.n_u,
            n_s=data.n_s,
            betas=betas,
            lams=[config.lam] * t,
            d_z=config.d_z,
            encoder_hidden=config.encoder_hidden,
            head_hidden=config.head_hidden,
            k=config.k,
            epochs=config.epochs,
            batch_size=config.batch_size,
            lr=config.lr,
            seed=seed,
        )
        wall = time.perf_counter() - t0
        print(
            f"gpp {data.name} {setting} on Flower ({t} clients, {res.rounds} rounds): wall {wall:.1f} s, engine "
            f"overhead {res.engine_overhead_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        figures = audit(
            res.z_train,
            res.z_test,
            u_train=data.u_train,
            u_test=data.u_test,
            s_train=data.s_train,
            s_test=data.s_test,
            n_u=data.n_u,
            n_s=data.n_s,
            config=probe_config(params),
            seed=seed + 3,
        )
        figures["train_s"] = round(float(res.train_s), 2)
        extra = {"betas": "/".join(f"{b:g}" for b in betas)} if setting != "distributed" else {}
        rows.append(row(data, "gpp", config, figures, setting=setting, clients=t, experiment="distributed", **extra))
        comm[setting] = {
            "clients": t,
            "rounds": int(res.rounds),
            "wall_s": round(wall, 2),
            "engine_overhead_s": round(float(res.engine_overhead_s), 2),
            "train_s": round(float(res.train_s), 2),
            "bytes_up_per_round": int(res.bytes_up_per_round),
            "bytes_down_per_round": int(res.bytes_down_per_round),
            "fedavg_bytes_per_round": int(res.fedavg_bytes_per_round),
        }
    return rows, comm


def run_setting(data: GPPData, params: Params, d_z: int, seed: int, *, sweep_grids: dict) -> tuple[dict, dict]:
    """Baselines + sweeps + distributed rows of one dataset; returns (metrics, fitted models)."""
    with torch_threads(1):  # small MLPs on a shared 2-core machine: one thread is much faster than two
        return _run_setting(data, params, d_z, seed, sweep_grids=sweep_grids)


def _run_setting(data: GPPData, params: Params, d_z: int, seed: int, *, sweep_grids: dict) -> tuple[dict, dict]:
    g = params.gpp
    config = train_config(params, d_z)
    quick = train_config(params, d_z, epochs=g.sweep_epochs)
    t0 = time.perf_counter()
    rows, noise, models = baseline_table(
        data, config, probe=probe_config(params), noise_grid=list(g.noise_grid), seed=seed, tune_config=quick
    )
    rows += sweeps(data, quick, grids=sweep_grids, probe=probe_config(params), seed=seed)
    central_s = time.perf_counter() - t0
    dist_rows, comm = distributed_rows(data, params, config, seed)
    metrics = {
        "data": data.summary(),
        "rows": rows + dist_rows,
        "noise_tuning": noise,
        "communication": comm,
        "centralized_s": round(central_s, 1),
    }
    return metrics, models


def gpp_digits(params: Params, root: str | Path = ".") -> dict:
    g = params.gpp
    data = digits_composites(
        n_train=g.digits.n_train,
        n_test=g.digits.n_test,
        clients=g.digits.clients,
        seed=stage_seed(params.seed, "gpp_digits_data") % 2**31,
    )
    grids = {"beta": list(g.sweep_beta), "d_z": list(g.sweep_d_z), "k": list(g.sweep_k)}
    metrics, _ = run_setting(
        data, params, g.digits.d_z, stage_seed(params.seed, "gpp_digits") % 2**31, sweep_grids=grids
    )
    write_json(Layout.from_params(params, root).metrics / "gpp_digits.json", metrics)
    return {"rows": len(metrics["rows"]), "centralized_s": metrics["centralized_s"]}


def gpp_osha(params: Params, root: str | Path = ".") -> dict:
    from dprelease.mechanisms.gpp.osha import osha_data
    from dprelease.mechanisms.gpp.sanitizer import save_encoder

    g, lay = params.gpp, Layout.from_params(params, root)
    if not g.osha.enabled:
        write_json(lay.metrics / "gpp_osha.json", {"skipped": "gpp.osha.enabled is false", "rows": []})
        with atomic_dir(encoder_dir(params, root), private=True) as tmp:
            write_json(tmp / "skipped.json", {"skipped": "gpp.osha.enabled is false"})
        return {"skipped": True}
    data = osha_data(params, root)
    metrics, models = run_setting(
        data, params, g.osha.d_z, stage_seed(params.seed, "gpp_osha") % 2**31, sweep_grids={"beta": list(g.sweep_beta)}
    )
    private_dir(Path(root) / params.artifacts)
    with atomic_dir(encoder_dir(params, root), private=True) as tmp:
        save_encoder(tmp, models["gpp"], d_in=int(data.x_train.shape[1]), config=train_config(params, g.osha.d_z))
    gpp_row = next(r for r in metrics["rows"] if r["method"] == "gpp" and r["experiment"] == "baseline")
    metrics["release_audit"] = {k: gpp_row[k] for k in ("utility_auc", "utility_accuracy", "adversary_auc")}
    write_json(lay.metrics / "gpp_osha.json", metrics)
    return {"rows": len(metrics["rows"]), "centralized_s": metrics["centralized_s"]}


def gpp_release(params: Params, root: str | Path = ".") -> dict:
    from dprelease.mechanisms.gpp.sanitizer import write_sanitizer_release

    return write_sanitizer_release(params, root, encoder_dir(params, root), code=closure(__name__))


def gpp_report(params: Params, root: str | Path = ".") -> dict:
    from dprelease.mechanisms.gpp.report import write_report

    return write_report(params, root)


def sanitize(release_dir: Path, texts: list[str], *, seed: int) -> tuple[pd.DataFrame, dict]:
    """One sanitized draw z per text from a GPP sanitizer release (contract shared with NVDP)."""
    from dprelease.mechanisms.gpp.sanitizer import sanitize_texts

    return sanitize_texts(Path(release_dir), texts, seed=seed)


def check(params: Params) -> None:
    if params.gpp.osha.enabled and params.model.backend != "head":
        raise ConfigError("gpp.osha needs model.backend: head (the cached MiniLM embeddings)")


def declare(params: Params) -> list[Stage]:
    a, rel = params.artifacts, params.gpp.release
    common = ["seed", "gpp"]
    # the OSHA setting reads the release pipeline's split and features (so the gpp flow plans those stages)
    osha = [params.data.path, params.gpp.osha.regions, f"{a}/data", f"{a}/features"] if params.gpp.osha.enabled else []
    return [
        Stage(
            name="gpp_digits",
            run=gpp_digits,
            params=common,
            deps=[],
            outs=[],
            metrics=["metrics/gpp_digits.json"],
            group="gpp",
        ),
        Stage(
            name="gpp_osha",
            run=gpp_osha,
            params=common + ["data", "model.backend"],
            deps=osha,
            outs=[f"{a}/gpp/osha"],
            metrics=["metrics/gpp_osha.json"],
            group="gpp",
        ),
        Stage(
            name="gpp_release",
            run=gpp_release,
            params=common,
            deps=[f"{a}/gpp/osha", "metrics/gpp_osha.json", public_key_dep(params)],
            outs=[rel],
            group="gpp",
            when=lambda p: p.gpp.osha.enabled,
            signs=True,
        ),
        Stage(
            name="gpp_report",
            run=gpp_report,
            params=common,
            deps=["metrics/gpp_digits.json", "metrics/gpp_osha.json"],
            outs=["reports/gpp"],
            group="gpp",
        ),
    ]
