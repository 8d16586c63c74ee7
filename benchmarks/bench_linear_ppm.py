"""The linear PPM's sampling cost: one or more frontier configurations sampled with the declared sampler settings,
printing wall seconds per configuration, the diagnostics the release checks (R-hat, ESS, divergences, T̂_all),
the acceptance and step sizes, and Δ̂.

Data: the project's cached head-backend embeddings when they exist (``<artifacts>/features``, ``make run`` first);
otherwise a synthetic stand-in of the default data's shape (2,626 unit-norm 384-d embeddings, 108 classes with
Zipf-like frequencies, an anisotropic spectrum), so the cost per gradient and the dimension (41,580) are those of
the default frontier even where the encoder's features are absent. Seeds are fixed (not the secret key's).

    python benchmarks/bench_linear_ppm.py [--configs risk censored8 ...] [--kind hmc_split|hmc_leapfrog|nuts_pyro]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# λ = 100 each; "risk" is the default release's configuration: an unweighted run, then the risk-weighted one (T 1)
CONFIGS = {
    "unweighted": {},
    "risk": {},
    "tempered": {"temperature": 0.5},
    "censored4": {"kappa": 2.0},
    "censored8": {"kappa": 4.0},
    "censored16": {"kappa": 8.0},
}


def surrogate(n: int = 2626, d: int = 384, k: int = 108, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-norm embeddings with class structure: shared offset + class centroid + noise, on a decaying spectrum."""
    g = torch.Generator().manual_seed(seed)
    y = torch.multinomial(1.0 / torch.arange(1, k + 1).float() ** 0.8, n, replacement=True, generator=g)
    spectrum = torch.arange(1, d + 1).float() ** -0.7
    basis = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
    centroids = torch.randn(k, d, generator=g) * spectrum @ basis.T
    noise = torch.randn(n, d, generator=g) * spectrum @ basis.T
    x = F.normalize(0.5 * torch.randn(d, generator=g) + centroids[y] + 1.2 * noise, dim=1)
    return x, y


def data(root: Path) -> tuple[torch.Tensor, torch.Tensor, int, str]:
    from dprelease.contracts.layout import Layout
    from dprelease.core.config import load_params

    lay = Layout.from_params(load_params(root / "params.yaml"), root)
    if (lay.features / "train.safetensors").exists():
        from dprelease.core.data.splits import label_info
        from dprelease.mechanisms.linear_ppm.released import load

        xa, y = load(lay, "train")
        return xa, y, len(label_info(lay)["codes"]), "the project's cached embeddings (train split)"
    x, y = surrogate()
    return x, y, 108, "synthetic stand-in of the default data's shape (no cached embeddings here)"


def main(argv: list[str] | None = None) -> int:
    from dprelease.mechanisms.linear_ppm import maths, posterior
    from dprelease.mechanisms.linear_ppm.params import LinearPPMParams

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["risk"], choices=list(CONFIGS), help="configurations to time")
    ap.add_argument("--kind", default=None, help="linear_ppm.sampler.kind (default: the declared default)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads (default: torch's)")
    ap.add_argument("--root", type=Path, default=Path("."), help="project root holding the cached embeddings")
    ap.add_argument("--seed", type=int, default=1000, help="chain c's seed is SEED + c (the starts' too: SEED)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    x, y, k, what = data(a.root)
    xa = x if x.shape[1] == 385 else maths.augment(x)
    s = LinearPPMParams().sampler
    kw = {
        "chains": s.chains,
        "warmup": s.warmup,
        "draws": s.draws,
        "start_spread": s.start_spread,
        "max_tree_depth": s.max_tree_depth,
        "target_accept": s.target_accept,
    }
    if a.kind is not None and "kind" in inspect.signature(posterior.sample).parameters:
        kw["kind"] = a.kind
    print(
        f"data: {what}; n {len(y)}, classes {k}, parameters {k * xa.shape[1]}; torch threads {a.threads}, "
        f"load average {', '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    jobs = [(name, CONFIGS[name], a.seed) for name in a.configs]
    while jobs:
        name, config, seed = jobs.pop(0)
        target = maths.Target(xa=xa, y=y, n_classes=k, prior_precision=100.0, **config)
        begin = time.perf_counter()
        run = posterior.sample(
            target,
            seeds=lambda label, seed=seed: seed + int(label.removeprefix("chain")),
            starts_rng=np.random.default_rng(seed),
            **kw,
        )
        seconds = time.perf_counter() - begin
        if name == "risk":  # the unweighted run just done gives the weights of the weighted run, next
            weights = torch.from_numpy(maths.risk_weights(run.record_risk)).float()
            jobs.insert(0, ("risk-weighted", {"weights": weights}, seed + 100))
            name = "risk-unweighted"
        s_ = run.summary
        keep = (
            "rhat_log_posterior",
            "rhat_max_loss",
            "ess_bulk_min",
            "ess_tail_min",
            "divergences",
            "acceptance_min",
            "acceptance_max",
            "temperature_all",
            "temperature_all_q05",
            "temperature_all_q95",
        )
        out = {
            "config": name,
            "seed": seed,
            "seconds": round(seconds, 1),
            "sampling_seconds": s_["sampler"]["sampling_seconds"],
            "delta_hat": round(run.delta_hat, 3),
            **{key: round(float(s_[key]), 4) for key in keep},
            "step_size": [round(s_["sampler"]["step_size_min"], 4), round(s_["sampler"]["step_size_max"], 4)],
            "sampler": s_["sampler"]["sampler"],
            **(
                {"gradients_per_chain": s_["sampler"]["gradients_per_chain"]}
                if "gradients_per_chain" in s_["sampler"]
                else {}
            ),
        }
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
