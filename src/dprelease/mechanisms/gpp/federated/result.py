"""What a distributed GPP run returns (no Flower import: callers can type against it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class DistributedResult:
    """Sanitized draws and the run's public accounting (aggregates only).

    ``z_train`` / ``z_test``: one draw per record, in the row order of ``x_train`` / ``x_test``, each
    made by the final encoder of the record's own client. Bytes are measured serialized Flower
    payloads (all clients together); ``fedavg_bytes_per_round`` is what FedAvg of the encoder's weights
    would move per round (every client uploads and downloads |θ| float32). Times: ``train_s`` is the
    clients' and the aggregator's compute; ``engine_overhead_s`` the rest of the wall time (engine
    start-up, actor set-up, serialization, messaging, polling), of which ``engine_start_s`` is the part
    before the first replies arrived. ``history``: per-round aggregate losses only."""

    z_train: np.ndarray
    z_test: np.ndarray
    rounds: int
    clients: int
    bytes_up_per_round: float
    bytes_down_per_round: float
    fedavg_bytes_per_round: float
    engine_overhead_s: float
    train_s: float
    history: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    engine_start_s: float = 0.0
    clients_compute_s: float = 0.0
    aggregator_s: float = 0.0
    release_bytes: int = 0
    encoder_params: int = 0
    head_params: int = 0
    steps_per_client: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        """The public scalars (for a report row or an MLflow run)."""
        return {
            "rounds": float(self.rounds),
            "clients": float(self.clients),
            "bytes_up_per_round": self.bytes_up_per_round,
            "bytes_down_per_round": self.bytes_down_per_round,
            "fedavg_bytes_per_round": self.fedavg_bytes_per_round,
            "uplink_vs_fedavg_upload": (self.fedavg_bytes_per_round / 2) / max(self.bytes_up_per_round, 1.0),
            "engine_overhead_s": self.engine_overhead_s,
            "engine_start_s": self.engine_start_s,
            "train_s": self.train_s,
            "wall_s": self.wall_s,
            "encoder_params": float(self.encoder_params),
            "head_params": float(self.head_params),
        }
