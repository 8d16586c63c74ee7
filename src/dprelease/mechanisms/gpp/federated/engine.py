"""``run_distributed``: Algorithm 2 on Flower's simulation engine (Ray backend), fully offline.

Each client's partition (its raw inputs, utility and sensitive labels, test inputs) is written to its
own owner-only file in a private temporary folder that only that client's ClientApp reads; the
aggregator (ServerApp, in this process) never opens it. Flower is imported here lazily, so importing
``dprelease.mechanisms.gpp.federated`` stays cheap. Telemetry and runtime dependency installation are switched off
before Flower loads; Ray runs on 127.0.0.1 without its dashboard or usage reporting.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from dprelease.core.errors import DataError
from dprelease.mechanisms.gpp.federated import offline
from dprelease.mechanisms.gpp.federated.local import build_client, n_params, steps_per_client
from dprelease.mechanisms.gpp.federated.result import DistributedResult

ENGINE_CPUS = 1  # one Ray actor: clients run one after another (their compute is summable), one thread each


def _check(*, x_train, u_train, s_train, client_train, x_test, client_test, betas, lams, n_u, n_s) -> int:
    n = x_train.shape[0]
    if x_train.ndim != 2 or x_test.ndim != 2 or x_test.shape[1] != x_train.shape[1]:
        raise DataError("run_distributed: x_train and x_test must be 2-D with the same width")
    if not (u_train.shape == s_train.shape == client_train.shape == (n,)) or client_test.shape != (x_test.shape[0],):
        raise DataError("run_distributed: labels and client ids must be 1-D, one per row of their inputs")
    ids = np.unique(client_train)
    t = len(ids)
    if t < 1 or not np.array_equal(ids, np.arange(t)):
        raise DataError(f"run_distributed: client_train must hold ids 0..t-1 (got {ids[:10].tolist()})")
    if not np.isin(client_test, ids).all():
        raise DataError("run_distributed: client_test holds a client with no training records")
    if len(betas) != t or len(lams) != t:
        raise DataError(f"run_distributed: {t} clients need {t} betas and lams (got {len(betas)}, {len(lams)})")
    if u_train.min() < 0 or u_train.max() >= n_u or s_train.min() < 0 or s_train.max() >= n_s:
        raise DataError("run_distributed: u_train must lie in [0, n_u) and s_train in [0, n_s)")
    return t


def _write_partitions(folder: Path, t: int, x_train, u_train, s_train, client_train, x_test, client_test) -> None:
    from dprelease.mechanisms.gpp.federated.client_app import partition_file

    for m in range(t):
        path = partition_file(folder, m)
        np.savez(
            path,
            x_train=x_train[client_train == m].astype(np.float32),
            u_train=u_train[client_train == m].astype(np.int64),
            s_train=s_train[client_train == m].astype(np.int64),
            x_test=x_test[client_test == m].astype(np.float32),
        )
        os.chmod(path, 0o600)


def run_distributed(
    *,
    x_train: np.ndarray,
    u_train: np.ndarray,
    s_train: np.ndarray,
    client_train: np.ndarray,
    x_test: np.ndarray,
    client_test: np.ndarray,
    n_u: int,
    n_s: int,
    betas: Sequence[float],
    lams: Sequence[float],
    d_z: int,
    encoder_hidden: Sequence[int] = (512, 256),
    head_hidden: Sequence[int] = (256, 128),
    k: int = 2,
    epochs: int = 50,
    batch_size: int = 64,
    lr: float = 1e-4,
    seed: int = 0,
    message_log: list | None = None,
) -> DistributedResult:
    """Distributed GPP (docs/algorithms.md, G.4, Algorithm 2) on Flower's simulation engine; see ``local`` for the
    round/epoch schedule and ``DistributedResult`` for what comes back.

    Clients are the distinct values of ``client_train`` (0..t-1); client ``m`` uses ``betas[m]``,
    ``lams[m]`` and sanitizes its own training and test records (``client_test``) with its final
    encoder. Upward messages carry only ``(z, u)`` batches (and, at the end, ``z`` draws); downward only
    ``Q_ψ``'s weights and the round's public config. ``message_log`` (a list) receives a description of
    every message crossing the client/aggregator boundary, arrays included."""
    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    u_train, s_train = np.asarray(u_train), np.asarray(s_train)
    client_train, client_test = np.asarray(client_train), np.asarray(client_test)
    t = _check(
        x_train=x_train,
        u_train=u_train,
        s_train=s_train,
        client_train=client_train,
        x_test=x_test,
        client_test=client_test,
        betas=betas,
        lams=lams,
        n_u=n_u,
        n_s=n_s,
    )
    if epochs < 1 or batch_size < 1 or k < 0 or d_z < 1:
        raise DataError("run_distributed: epochs, batch_size, d_z must be ≥ 1 and k ≥ 0")
    offline.apply()  # before Flower/Ray load (and inherited by Ray's workers)
    from flwr.simulation import run_simulation

    from dprelease.mechanisms.gpp.federated.client_app import make_client_app
    from dprelease.mechanisms.gpp.federated.server_app import make_server_app

    counts = np.bincount(client_train, minlength=t)
    steps = steps_per_client(counts.tolist(), epochs=epochs, batch_size=batch_size)
    spec = {
        "d_z": d_z,
        "n_u": n_u,
        "n_s": n_s,
        "encoder_hidden": list(encoder_hidden),
        "head_hidden": list(head_hidden),
        "k": k,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "betas": [float(b) for b in betas],
        "lams": [float(v) for v in lams],
        "steps": steps,
    }
    sink: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpp-clients-") as folder:
        os.chmod(folder, 0o700)
        _write_partitions(Path(folder), t, x_train, u_train, s_train, client_train, x_test, client_test)
        spec["data_dir"] = folder
        backend = {
            "client_resources": {"num_cpus": ENGINE_CPUS, "num_gpus": 0.0},
            "init_args": {
                "num_cpus": ENGINE_CPUS,
                "num_gpus": 0,
                "include_dashboard": False,
                "_node_ip_address": "127.0.0.1",
                "log_to_driver": False,
                "_temp_dir": str(Path(folder) / "ray"),
            },
        }  # Ray's session files go with the run
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the aggregator's small steps: one thread is fastest on a shared machine
        start = time.perf_counter()
        try:
            run_simulation(
                server_app=make_server_app(spec, sink, message_log),
                client_app=make_client_app(spec),
                num_supernodes=t,
                backend_config=backend,
            )
        finally:
            wall = time.perf_counter() - start
            torch.set_num_threads(threads)
            _shutdown_ray()  # Flower's Ray backend shuts Ray down itself; this covers a run that failed early
    if "z_train" not in sink:
        raise RuntimeError("run_distributed: the Flower run ended without the clients' release")
    z_train = np.zeros((x_train.shape[0], d_z), dtype=np.float32)
    z_test = np.zeros((x_test.shape[0], d_z), dtype=np.float32)
    for m in range(t):
        z_train[client_train == m] = sink["z_train"][m]
        z_test[client_test == m] = sink["z_test"][m]
    rounds = sink["rounds"]
    theta = n_params(
        build_client(
            d_in=x_train.shape[1],
            d_z=d_z,
            n_s=n_s,
            encoder_hidden=encoder_hidden,
            head_hidden=head_hidden,
            lr=lr,
            seed=seed,
            client=0,
        ).encoder
    )
    train_s = sink["client_compute_s"] + sink["aggregator_s"]
    return DistributedResult(
        z_train=z_train,
        z_test=z_test,
        rounds=rounds,
        clients=t,
        bytes_up_per_round=sink["up_bytes"].get("train", 0) / rounds,
        bytes_down_per_round=sink["down_bytes"].get("train", 0) / rounds,
        fedavg_bytes_per_round=float(2 * t * theta * 4),
        engine_overhead_s=max(wall - train_s, 0.0),
        train_s=train_s,
        history=sink["history"],
        wall_s=wall,
        engine_start_s=max(sink["init_done"] - start - sink["init_compute_s"], 0.0),
        clients_compute_s=sink["client_compute_s"],
        aggregator_s=sink["aggregator_s"],
        release_bytes=sink["up_bytes"].get("release", 0) + sink["down_bytes"].get("release", 0),
        encoder_params=theta,
        head_params=sink["head_params"],
        steps_per_client=steps,
    )


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
