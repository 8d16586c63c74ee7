"""Which representation head for sentence pairs (MRPC, RTE)? Compared on a held-out 15 % of the TRAINING pairs
(GLUE dev is never used here): the denoising block over the draw with each sentence's outputs mean-pooled (what
``NVDPModule(pair=True)`` does, the paper's block) against each sentence's draw averaged with its Dirichlet weights
(no block), both reading [u, v, |u−v|, u⊙v]; non-private and clipped NVDP at λ = 0.01, the default latent width,
epochs and learning rate. Needs the token-state cache (``dprelease stage nvdp_states``).

    python benchmarks/nvdp_pair_head.py
"""

from __future__ import annotations

import numpy as np
import torch

from dprelease.core.config import load_params
from dprelease.core.seeds import stage_seed
from dprelease.mechanisms.nvdp import experiment as ex
from dprelease.mechanisms.nvdp.nvib import NVDPModule, segments
from dprelease.mechanisms.nvdp.states import DIM, nvdp_dir
from dprelease.mechanisms.nvdp.train import TrainOptions, evaluate, train

HELD_OUT = 0.15


def weighted_pool(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    w = w[:, 1:].unsqueeze(-1)
    return (z[:, 1:] * w).sum(1) / w.sum(1).clamp_min(1e-12)


class WeightedPairs(NVDPModule):
    """The alternative: each sentence's draw averaged with its Dirichlet weights, no block."""

    def represent(self, x, mask, gen):
        valid, second = segments(mask)
        post, z, pi = self.nvib(x, valid, gen)
        pad = valid.new_zeros(valid.shape[0], 1)
        u = weighted_pool(z, pi * torch.cat([pad, valid - second], 1))
        v = weighted_pool(z, pi * torch.cat([pad, second], 1))
        return post, torch.cat([u, v, (u - v).abs(), u * v], -1)


class Rows:
    """A subset of a batch source."""

    def __init__(self, data, rows: np.ndarray):
        self.data, self.rows = data, rows

    def batch(self, idx):
        return self.data.batch(self.rows[np.asarray(idx)])


def main() -> None:
    params = load_params()
    n = params.nvdp
    torch.set_num_threads(2)
    sdir = nvdp_dir(params, ".", "states")
    for task in ("mrpc", "rte"):
        tr, y, _, _ = ex.sources(params, sdir, task, None, torch.device("cpu"))
        perm = np.random.default_rng(stage_seed(params.seed, f"pair-head-{task}")).permutation(len(y))
        k = int(HELD_OUT * len(y))
        fit_rows, val_rows = perm[k:], perm[:k]
        majority = np.bincount(y[val_rows]).max() / k
        for variant, lam in (("nonprivate", 0.0), ("clipped", 0.01)):
            for name, cls in (("block, mean-pooled", NVDPModule), ("Dirichlet-weighted draw", WeightedPairs)):
                model = ex.seeded_init(
                    cls(
                        DIM,
                        n.dim,
                        2,
                        heads=n.heads,
                        clip=ex.clip_for(params, task, variant),
                        stochastic=variant != "nonprivate",
                        pair=True,
                    ),
                    stage_seed(params.seed, "ph", 1),
                )
                train(
                    model,
                    Rows(tr, fit_rows),
                    y[fit_rows],
                    TrainOptions(n.epochs, n.lr, n.batch_size, lam),
                    seed=stage_seed(params.seed, "ph", 2),
                )
                acc = evaluate(
                    model, Rows(tr, val_rows), y[val_rows], task, seed=stage_seed(params.seed, "ph", 3), privacy=False
                )["accuracy"]
                print(
                    f"{task} {variant:10s} {name:24s} held-out accuracy {acc:.3f} (majority {majority:.3f}, {k} pairs)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
