"""The GPP ClientApp (one agency): its raw records, sensitive labels, encoder and adversary stay here; it replies only
with latents ``z``, ``u`` and batch-mean losses, never ``x`` or ``s``.

See docs/gpp.md, "Notes from the code", `mechanisms/gpp/federated/client_app.py`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from dprelease.mechanisms.gpp.federated.local import (
    ClientModels,
    batch_rows,
    build_client,
    client_step,
    encode,
    generator,
    steps_per_client,
)
from dprelease.mechanisms.gpp.model import head

STATE_KEY = "gpp-client"
_DATA: dict[str, dict[str, np.ndarray]] = {}  # per worker process: partition file → arrays (read once)
_MODELS: dict[str, ClientModels] = {}  # per worker process: partition file → the client's models


def partition_file(data_dir: str | Path, client: int) -> Path:
    return Path(data_dir) / f"client_{client}.npz"


def _data(data_dir: str, client: int) -> dict[str, np.ndarray]:
    key = str(partition_file(data_dir, client))
    if key not in _DATA:
        with np.load(key) as f:
            _DATA[key] = {name: f[name] for name in f.files}
    return _DATA[key]


def respond(
    *,
    op: str,
    client: int,
    spec: dict[str, Any],
    step: int,
    psi_state: dict[str, torch.Tensor] | None = None,
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, float], int]:
    """Client ``client``'s work for one message: ``(arrays going up by record, metrics, step reached)``.

    ``step`` is the encoder step its node recorded; ``psi_state`` the received ``Q_ψ`` (op ``step``)."""
    t0 = time.perf_counter()
    torch.set_num_threads(1)  # small batches: one thread is fastest on a shared machine
    key = str(partition_file(spec["data_dir"], client))
    d = _data(spec["data_dir"], client)
    x, u, s = d["x_train"], d["u_train"], d["s_train"]
    seed, b = spec["seed"], spec["batch_size"]
    if op == "init":
        _MODELS[key] = build_client(
            d_in=x.shape[1],
            d_z=spec["d_z"],
            n_s=spec["n_s"],
            lr=spec["lr"],
            seed=seed,
            encoder_hidden=spec["encoder_hidden"],
            head_hidden=spec["head_hidden"],
            client=client,
        )
    models = _MODELS.get(key)
    if models is None or models.step != step:
        raise RuntimeError(f"client {client}: its models are not in this worker's memory (one engine worker expected)")
    total = steps_per_client([x.shape[0]], epochs=spec["epochs"], batch_size=b)[0]
    up: dict[str, dict[str, np.ndarray]] = {}
    metrics: dict[str, float] = {}
    if op == "step":
        psi = head(spec["d_z"], spec["n_u"], tuple(spec["head_hidden"]))
        psi.load_state_dict(psi_state)
        rows = batch_rows(seed=seed, client=client, step=models.step, n=x.shape[0], batch_size=b)
        metrics.update(
            client_step(
                models,
                psi,
                x=x,
                u=u,
                s=s,
                rows=rows,
                beta=spec["betas"][client],
                lam=spec["lams"][client],
                k=spec["k"],
                batch_size=b,
                seed=seed,
                client=client,
            )
        )
    if op in ("init", "step") and models.step < total:
        rows = batch_rows(seed=seed, client=client, step=models.step, n=x.shape[0], batch_size=b)
        up["batch"] = {
            "z": encode(models.encoder, x[rows], generator(seed, client, models.step, "encode")),
            "u": u[rows].astype(np.int64),
        }
    if op == "release":
        up["release"] = {
            "z_train": encode(models.encoder, x, generator(seed, client, 0, "release")),
            "z_test": encode(models.encoder, d["x_test"], generator(seed, client, 1, "release")),
        }
        _MODELS.pop(key, None)
        _DATA.pop(key, None)
    metrics["compute_s"] = time.perf_counter() - t0
    return up, metrics, models.step


def handle(msg: Message, context: Context, spec: dict[str, Any]) -> Message:
    """Answer one aggregator message (see the module docstring) in Flower's types."""
    op = str(msg.content["cfg"]["op"])
    m = int(context.node_config["partition-id"])
    step = 0 if op == "init" else int(context.state[STATE_KEY]["step"])
    psi_state = msg.content["psi"].to_torch_state_dict() if op == "step" else None
    up, metrics, step = respond(op=op, client=m, spec=spec, step=step, psi_state=psi_state)
    context.state[STATE_KEY] = ConfigRecord({"step": step})
    out = RecordDict({name: ArrayRecord({k: Array(v) for k, v in arrays.items()}) for name, arrays in up.items()})
    out["metrics"] = MetricRecord(metrics)
    out["client"] = ConfigRecord({"partition": m})
    return Message(out, reply_to=msg)


def make_client_app(spec: dict[str, Any]) -> ClientApp:
    """A ClientApp bound to ``spec`` (public configuration and the clients' private-store folder)."""
    app = ClientApp()

    @app.train()
    def _train(msg: Message, context: Context) -> Message:
        return handle(msg, context, spec)

    return app
