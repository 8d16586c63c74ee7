"""DP-SGD step throughput against non-private training on the same backend and batch size.

Uses the cached training features of the current project (`artifacts/features`, from `make run`) or,
with ``--synthetic``, random embeddings of the same shape. One run each; prints steps/s and the ratio.

    python benchmarks/bench_dpsgd.py [--steps 60] [--batch 512] [--synthetic]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import torch
import torch.nn.functional as F

from dprelease.core.backends import make_backend
from dprelease.core.backends.base import load_features, trainable
from dprelease.core.config import load_params
from dprelease.mechanisms.dpsgd.accounting import default_delta
from dprelease.mechanisms.dpsgd.train import train_dpsgd


def nonprivate_steps_per_s(backend, feats, y, steps: int, batch: int, lr: float) -> float:
    model = backend.new_model(feats)
    opt = torch.optim.AdamW(trainable(model), lr=lr)
    gen = torch.Generator().manual_seed(0)
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(0, len(y), (batch,), generator=gen)
        loss = F.cross_entropy(backend.forward(model, {k: v[idx] for k, v in feats.items()}), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return steps / (time.perf_counter() - start)


def dpsgd_steps_per_s(backend, feats, y, steps: int, batch: int, lr: float, mode: str) -> float:
    model = backend.new_model(feats)
    n = len(y)
    epochs = max(1, round(steps * batch / n))
    start = time.perf_counter()
    res = train_dpsgd(
        backend,
        model,
        feats,
        y,
        epochs=epochs,
        batch_size=batch,
        lr=lr,
        max_grad_norm=1.0,
        target_epsilon=8.0,
        delta=default_delta(n),
        grad_sample_mode=mode,
        seed=0,
        noise_seed=int.from_bytes(os.urandom(8), "little"),
    )  # benchmark: fresh noise each run
    return res.steps / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="DP-SGD steps timed")
    ap.add_argument("--batch", type=int, default=512, help="expected batch size (Poisson sampling)")
    ap.add_argument("--synthetic", action="store_true", help="random features instead of the OSHA embeddings")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    params = load_params()
    if args.synthetic:
        feats, y = {"x": torch.nn.functional.normalize(torch.randn(2626, 384), dim=1)}, torch.randint(0, 108, (2626,))
        n_classes = 108
    else:
        feats, y = load_features(f"{params.artifacts}/features/train.safetensors")
        n_classes = int(y.max()) + 1
    backend = make_backend(params, n_classes)
    lr = params.dpsgd.run_for(params.model.backend).lr
    base = nonprivate_steps_per_s(backend, feats, y, args.steps, args.batch, lr)
    print(f"backend {params.model.backend}, batch {args.batch}, n {len(y)}")
    print(f"non-private AdamW     {base:8.1f} steps/s")
    for mode in ("ghost", "hooks"):
        dp = dpsgd_steps_per_s(backend, feats, y, args.steps, args.batch, lr, mode)
        print(f"DP-SGD ({mode:<5})       {dp:8.1f} steps/s   ratio DP/non-private = {dp / base:.3f}")


if __name__ == "__main__":
    main()
