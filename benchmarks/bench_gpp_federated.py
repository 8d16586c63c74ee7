"""Distributed GPP on Flower (Algorithm 2, simulation engine): engine overhead vs training time, and the
measured uplink/downlink bytes per round against FedAvg of the encoder's weights (S003 §V-F).

Data: the digits paper check's composite (two scikit-learn ``load_digits`` images side by side, 128
pixels; U = their sum, 19 classes; S = parity), random client partitions, heterogeneous β optional.
Peak RSS is sampled over this process and all its descendants (Ray's GCS, raylet and worker).

    python benchmarks/bench_gpp_federated.py [--clients 5] [--epochs 5] [--n-train 6000] [--d-z 120] [--hetero]
"""

from __future__ import annotations

import argparse
import threading

import numpy as np
import psutil
from sklearn.datasets import load_digits

from dprelease.mechanisms.gpp.federated import run_distributed


def composites(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    i, j = rng.integers(0, len(d.target), n), rng.integers(0, len(d.target), n)
    x = np.concatenate([d.images[i], d.images[j]], axis=2).reshape(n, -1) / 16.0
    return x.astype(np.float32), (d.target[i] + d.target[j]).astype(np.int64)


class PeakRSS(threading.Thread):
    """Largest summed RSS of this process tree, sampled every 0.2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.stop = 0, threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stop.wait(0.2):
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=5, help="Flower clients")
    ap.add_argument("--epochs", type=int, default=5, help="training epochs (rounds)")
    ap.add_argument("--n-train", type=int, default=6000, help="training examples")
    ap.add_argument("--n-test", type=int, default=2000, help="test examples")
    ap.add_argument("--d-z", type=int, default=120, help="representation size")
    ap.add_argument("--batch-size", type=int, default=64, help="batch size")
    ap.add_argument("--hetero", action="store_true", help="client-specific β (0.5 … 2.0)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x, u = composites(args.n_train + args.n_test, rng)
    s = u % 2
    client = rng.integers(0, args.clients, len(u))
    tr, te = slice(0, args.n_train), slice(args.n_train, None)
    t = args.clients
    betas = list(np.linspace(0.5, 2.0, t)) if args.hetero else [1.0] * t
    rss = PeakRSS()
    rss.start()
    res = run_distributed(
        x_train=x[tr],
        u_train=u[tr],
        s_train=s[tr],
        client_train=client[tr],
        x_test=x[te],
        client_test=client[te],
        n_u=19,
        n_s=2,
        betas=betas,
        lams=[0.01] * t,
        d_z=args.d_z,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=1e-3,
        seed=0,
    )
    rss.stop.set()
    rss.join()
    b, per_client_up = args.batch_size, res.bytes_up_per_round / t
    print(
        f"distributed GPP on Flower: {t} clients, {args.n_train} training records, {args.epochs} epochs, "
        f"{res.rounds} rounds, d_z {args.d_z}, batch {b}, encoder |θ| {res.encoder_params:,}, "
        f"utility head |ψ| {res.head_params:,}"
    )
    print(
        f"  wall {res.wall_s:.1f} s = training compute {res.train_s:.1f} s (clients {res.clients_compute_s:.1f} s, "
        f"aggregator {res.aggregator_s:.1f} s) + engine overhead {res.engine_overhead_s:.1f} s"
    )
    print(
        f"  engine overhead: start-up {res.engine_start_s:.1f} s, messaging "
        f"{res.engine_overhead_s - res.engine_start_s:.1f} s = "
        f"{1000 * (res.engine_overhead_s - res.engine_start_s) / res.rounds:.0f} ms per round"
    )
    print(
        f"  uplink {res.bytes_up_per_round / 1e3:.1f} kB/round (all clients; {per_client_up / 1e3:.1f} kB per "
        f"client and round ≈ b(d_z+d_u) = {b * (args.d_z + 1) * 4 / 1e3:.1f} kB as float32), "
        f"downlink {res.bytes_down_per_round / 1e3:.1f} kB/round (Q_ψ broadcast)"
    )
    print(
        f"  FedAvg of the encoder: {res.fedavg_bytes_per_round / 1e6:.2f} MB/round (up + down); GPP moves "
        f"{(res.bytes_up_per_round + res.bytes_down_per_round) / 1e6:.3f} MB/round: "
        f"{res.fedavg_bytes_per_round / (res.bytes_up_per_round + res.bytes_down_per_round):.1f}x less; "
        f"uplink alone {res.fedavg_bytes_per_round / 2 / res.bytes_up_per_round:.1f}x less"
    )
    print(
        f"  final release of the draws: {res.release_bytes / 1e6:.2f} MB once; peak RSS (process tree) "
        f"{rss.peak / 2**30:.2f} GiB"
    )


if __name__ == "__main__":
    main()
