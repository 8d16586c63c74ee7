"""The GPP ServerApp (the aggregator): owns the utility head ``Q_ψ``; sees only (z, u) batches.

Per round (docs/algorithms.md, G.4, schedule in ``local``): pool the participating clients' pending ``(z, u)``
batches, ``k`` Adam steps on ``Q_ψ`` per received batch, send ``Q_ψ`` down; each reply carries the
client's next batch.
Every message crossing the boundary is measured (protobuf-serialized ``RecordDict`` bytes) and, when
asked, described into ``message_log``. Results go into ``sink`` (a dict owned by the caller).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.common.serde import recorddict_to_proto
from flwr.serverapp import Grid, ServerApp

from dprelease.mechanisms.gpp.federated.local import build_utility_head, generator, head_steps, participants

NODE_WAIT_S = 120.0


def payload_bytes(content: RecordDict) -> int:
    """Serialized size of a message's content (what the transport carries besides its header)."""
    return recorddict_to_proto(content).ByteSize()


def describe(content: RecordDict, *, direction: str, rnd: int, client: int) -> dict[str, Any]:
    """A message's contents for ``message_log``: every array (name, shape, dtype, values), config, metric."""
    arrays, configs, metrics = {}, {}, {}
    for rname, record in content.items():
        if isinstance(record, ArrayRecord):
            for name, arr in record.items():
                value = arr.numpy()
                arrays[f"{rname}/{name}"] = {"shape": tuple(value.shape), "dtype": str(value.dtype), "value": value}
        elif isinstance(record, ConfigRecord):
            configs.update({f"{rname}/{k}": v for k, v in record.items()})
        else:
            metrics.update({f"{rname}/{k}": v for k, v in record.items()})
    return {
        "direction": direction,
        "round": rnd,
        "client": client,
        "arrays": arrays,
        "configs": configs,
        "metrics": metrics,
    }


class Exchange:
    """Send one message per client, wait for all replies, measure and log both directions."""

    def __init__(self, grid: Grid, log: list | None):
        self.grid, self.log = grid, log
        self.node_of: dict[int, int] = {}
        self.up_bytes: dict[str, int] = {}
        self.down_bytes: dict[str, int] = {}
        self.client_compute_s = 0.0

    def __call__(
        self, contents: dict[int, RecordDict], *, rnd: int, phase: str, by_node: bool = False
    ) -> dict[int, RecordDict]:
        messages, client_of = [], {}
        for key, content in contents.items():
            node = key if by_node else self.node_of[key]
            client_of[node] = -1 if by_node else key
            self.down_bytes[phase] = self.down_bytes.get(phase, 0) + payload_bytes(content)
            if self.log is not None:
                self.log.append(describe(content, direction="down", rnd=rnd, client=client_of[node]))
            messages.append(Message(content, dst_node_id=node, message_type="train"))
        replies = list(self.grid.send_and_receive(messages))
        if len(replies) != len(messages):
            raise RuntimeError(f"round {rnd}: {len(replies)} of {len(messages)} clients replied")
        out: dict[int, RecordDict] = {}
        for reply in replies:
            if reply.has_error():
                raise RuntimeError(f"round {rnd}: a client failed: {reply.error.reason}")
            content = reply.content
            m = int(content["client"]["partition"])
            self.node_of[m] = reply.metadata.src_node_id
            self.client_compute_s += float(content["metrics"]["compute_s"])
            self.up_bytes[phase] = self.up_bytes.get(phase, 0) + payload_bytes(content)
            if self.log is not None:
                self.log.append(describe(content, direction="up", rnd=rnd, client=m))
            out[m] = content
        return out


def _batch(content: RecordDict) -> tuple[np.ndarray, np.ndarray] | None:
    if "batch" not in content:
        return None
    return content["batch"]["z"].numpy(), content["batch"]["u"].numpy()


def _wait_for_nodes(grid: Grid, t: int) -> list[int]:
    end = time.monotonic() + NODE_WAIT_S
    while time.monotonic() < end:
        nodes = list(grid.get_node_ids())
        if len(nodes) >= t:
            return nodes[:t]
        time.sleep(0.05)
    raise RuntimeError(f"only {len(nodes)} of {t} Flower nodes came up within {NODE_WAIT_S:.0f} s")


def serve(grid: Grid, spec: dict[str, Any], sink: dict[str, Any], log: list | None) -> None:
    """The aggregator's whole run (Algorithm 2), results into ``sink``."""
    if hasattr(grid, "pull_interval"):
        grid.pull_interval = 0.005  # the in-memory grid's reply polling (default 0.1 s per round)
    steps, t, k = spec["steps"], len(spec["steps"]), spec["k"]
    psi, opt = build_utility_head(
        d_z=spec["d_z"], n_u=spec["n_u"], head_hidden=spec["head_hidden"], lr=spec["lr"], seed=spec["seed"]
    )
    ex = Exchange(grid, log)
    nodes = _wait_for_nodes(grid, t)
    init = ex(
        {node: RecordDict({"cfg": ConfigRecord({"op": "init", "round": 0})}) for node in nodes},
        rnd=0,
        phase="train",
        by_node=True,
    )
    sink["init_done"] = time.perf_counter()
    sink["init_compute_s"] = ex.client_compute_s
    pending = {m: _batch(c) for m, c in init.items()}
    aggregator_s, history = 0.0, []
    for rnd in range(1, max(steps) + 1):
        part = participants(steps, rnd)
        t0 = time.perf_counter()
        z = np.concatenate([pending[m][0] for m in part])
        u = np.concatenate([pending[m][1] for m in part])
        utility_ce = head_steps(
            psi,
            opt,
            z,
            u,
            steps=k * len(part),
            batch_size=spec["batch_size"],
            gen=generator(spec["seed"], -1, rnd, "server"),
        )
        psi_record = ArrayRecord(psi.state_dict())
        aggregator_s += time.perf_counter() - t0
        replies = ex(
            {m: RecordDict({"psi": psi_record, "cfg": ConfigRecord({"op": "step", "round": rnd})}) for m in part},
            rnd=rnd,
            phase="train",
        )
        for m, content in replies.items():
            pending[m] = _batch(content)
        history.append(
            {
                "round": float(rnd),
                "clients": float(len(part)),
                "utility_ce": utility_ce,
                "adversary_ce": float(np.mean([c["metrics"]["adversary_ce"] for c in replies.values()])),
                "encoder_loss": float(np.mean([c["metrics"]["encoder_loss"] for c in replies.values()])),
            }
        )
    final = ex(
        {m: RecordDict({"cfg": ConfigRecord({"op": "release", "round": max(steps) + 1})}) for m in range(t)},
        rnd=max(steps) + 1,
        phase="release",
    )
    sink.update(
        {
            "z_train": {m: c["release"]["z_train"].numpy() for m, c in final.items()},
            "z_test": {m: c["release"]["z_test"].numpy() for m, c in final.items()},
            "history": history,
            "aggregator_s": aggregator_s,
            "client_compute_s": ex.client_compute_s,
            "up_bytes": ex.up_bytes,
            "down_bytes": ex.down_bytes,
            "rounds": max(steps),
            "head_params": sum(p.numel() for p in psi.parameters()),
        }
    )


def make_server_app(spec: dict[str, Any], sink: dict[str, Any], log: list | None) -> ServerApp:
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        sink["main_start"] = time.perf_counter()
        serve(grid, spec, sink, log)

    return app
