"""DP-SGD's search over its declared grid (``dpsgd.grid``): the grid as configurations, the runs that score
them (one trainer call for many runs, each its own generators from the secret key, or from the public seed on the
public proxy) and the choice among them, on the validation split or on the public proxy. The frontier stage
(:mod:`.frontier`) and the release's configuration (:mod:`.stages`) both choose here."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import product
from pathlib import Path

import torch

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import head_embeddings, label_info, n_public
from dprelease.core.privacy import accountants, secret
from dprelease.core.utility.metrics import f1
from dprelease.core.utility.points import PRIVATE_VALIDATION, PUBLIC_PROXY
from dprelease.mechanisms.dpsgd import warm as warm_start
from dprelease.mechanisms.dpsgd.accounting import noise_multiplier, steps_for
from dprelease.mechanisms.dpsgd.batched import Setting, setting_for
from dprelease.mechanisms.dpsgd.grid import train_grid

# frontier.accountants' names → (the accountant DP-SGD's σ is calibrated with, its label: the registry's)
ACCOUNTANTS = {
    name: (accountant, accountants.get(accountant).label) for name, accountant in (("rdp", "opacus"), ("prv", "prv"))
}


def configurations(grid, *, n: int) -> list[dict]:
    """The declared grid as configurations (batch size 0, or one beyond the n records: full batch, n). The same
    grid index is the same declared configuration whatever n (the proxy's training set and the private one)."""
    optimisers = [("sgd", lr, grid.momentum) for lr in grid.sgd_lrs] + [("adamw", lr, 0.0) for lr in grid.adamw_lrs]
    return [
        {"batch_size": min(b, n) if b else n, "epochs": e, "max_grad_norm": c, "optimizer": o, "lr": lr, "momentum": m}
        for b, e, c, (o, lr, m) in product(grid.batch_sizes, grid.epochs, grid.max_grad_norms, optimisers)
    ]


def _xy(lay: Layout, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = head_embeddings(lay, split, who="DP-SGD's frontier stage")
    return x.float(), y


def _public(seed: int, label: str) -> int:
    """A 64-bit seed from the public seed: the proxy's runs read public reports only, so their randomness (and the
    configuration they choose) is public — the same for every private extract, by construction."""
    return int.from_bytes(hashlib.sha256(f"dprelease public run {seed}\0{label}".encode()).digest()[:8], "little")


def predict(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The linear head's classes for one run's weights [K, d] and biases [K] (the head scales x by √d)."""
    return ((x * x.shape[1] ** 0.5) @ w.T + b).argmax(1)


def fit_many(
    jobs: Sequence[tuple[Setting, str]],
    x: torch.Tensor,
    y: torch.Tensor,
    n_classes: int,
    *,
    artifacts: Path,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
    public_seed: int | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """DP-SGD runs from zero in one trainer call (:func:`dprelease.mechanisms.dpsgd.grid.train_grid`): run i with
    ``jobs[i]``'s setting, its batches and noise from the secret key under ``jobs[i]``'s label (each run its own
    generators: the draws do not depend on the other runs of the call). Returns each run's (weights, biases)."""
    seed = (
        (lambda label: secret.seed(artifacts, label))
        if public_seed is None
        else (lambda label: _public(public_seed, label))
    )  # runs on public data only: a public choice
    gens = [
        (torch.Generator().manual_seed(seed(label + "/batches")), torch.Generator().manual_seed(seed(label + "/noise")))
        for _, label in jobs
    ]
    start = (
        {}
        if init is None
        else {"weight": init[0].expand(len(jobs), *init[0].shape), "bias": init[1].expand(len(jobs), *init[1].shape)}
    )  # a public start
    w, b = train_grid(x, y, [s for s, _ in jobs], generators=gens, n_classes=n_classes, **start)
    return list(zip(w, b))


def fit(
    setting: Setting, x: torch.Tensor, y: torch.Tensor, n_classes: int, *, artifacts: Path, label: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """One DP-SGD run from zero, its batches and noise from the secret key (``label`` names the run)."""
    return fit_many([(setting, label)], x, y, n_classes, artifacts=artifacts)[0]


class _Sigmas:
    """σ per (q, T) for one (ε, δ, accountant): the search is shared by every configuration with that (q, T)."""

    def __init__(self, *, epsilon: float, delta: float, conversion: str) -> None:
        self.epsilon, self.delta, self.conversion, self.cache = epsilon, delta, conversion, {}

    def setting(self, cfg: dict, n: int) -> Setting:
        q = cfg["batch_size"] / n
        key = (q, steps_for(cfg["epochs"], q))
        if key not in self.cache:
            self.cache[key] = noise_multiplier(self.epsilon, self.delta, *key, self.conversion)
        return setting_for(
            n=n,
            epochs=cfg["epochs"],
            batch_size=cfg["batch_size"],
            lr=cfg["lr"],
            max_grad_norm=cfg["max_grad_norm"],
            target_epsilon=self.epsilon,
            delta=self.delta,
            conversion=self.conversion,
            optimizer=cfg["optimizer"],
            momentum=cfg["momentum"],
            sigma=self.cache[key],
        )


def _weighted_f1(model: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor, y: torch.Tensor, n_classes: int) -> float:
    """The weighted F1 of one run's predictions on (x, y) (not the macro F1 :func:`f1_summary` adds)."""
    return f1(y.numpy(), predict(*model, x).numpy(), range(n_classes), average="weighted")


def grid_scores(
    configs: list[dict],
    accountant: str,
    data: tuple,
    n_classes: int,
    *,
    epsilons: Sequence[float],
    delta: float,
    artifacts: Path,
    labels: Sequence[str],
    n: int | None = None,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
    public_seed: int | None = None,
) -> dict[float, list[float]]:
    """Per ε of ``epsilons``: each configuration's weighted F1 on the validation pair of ``data`` = (xt, yt, xv, yv)
    after one DP-SGD run on (xt, yt) at that ε (σ from ``accountant``), the run of configuration i at
    ``epsilons[j]`` labelled ``labels[j]/i``; every run of every ε in one trainer call. The scores a choice is made
    from (kept in this process). ``n``: the size q and the normaliser use (the public n̂ for private data; default:
    the training pair's length, for public data)."""
    xt, yt, xv, yv = data
    n = n or len(yt)
    jobs = []
    for eps, label in zip(epsilons, labels, strict=True):
        sigmas = _Sigmas(epsilon=eps, delta=delta, conversion=ACCOUNTANTS[accountant][0])
        jobs += [(sigmas.setting(cfg, n), f"{label}/{i}") for i, cfg in enumerate(configs)]
    f1 = [
        _weighted_f1(m, xv, yv, n_classes)
        for m in fit_many(jobs, xt, yt, n_classes, artifacts=artifacts, init=init, public_seed=public_seed)
    ]
    return {eps: f1[j * len(configs) : (j + 1) * len(configs)] for j, eps in enumerate(epsilons)}


def scores(
    configs: list[dict],
    accountant: str,
    xt,
    yt,
    xv,
    yv,
    n_classes: int,
    *,
    epsilon: float,
    delta: float,
    artifacts: Path,
    label: str,
) -> list[float]:
    """Each configuration's weighted F1 on (xv, yv) after one DP-SGD run on (xt, yt) at ``epsilon`` (σ from
    ``accountant``): :func:`grid_scores` at one ε."""
    return grid_scores(
        configs,
        accountant,
        (xt, yt, xv, yv),
        n_classes,
        epsilons=[epsilon],
        delta=delta,
        artifacts=artifacts,
        labels=[label],
    )[epsilon]


def _best(s: list[float]) -> tuple[int, float]:
    best = max(range(len(s)), key=lambda i: (s[i], -i))
    return best, s[best]


def select_all(
    configs: list[dict],
    accountant: str,
    data: tuple,
    n_classes: int,
    *,
    epsilons: Sequence[float],
    delta: float,
    artifacts: Path,
    n: int | None = None,
) -> dict[float, tuple[int, float]]:
    """Per ε: the configuration with the best validation weighted F1 (σ from ``accountant``) and its score; the
    whole grid at every ε in one trainer call."""
    found = grid_scores(
        configs,
        accountant,
        data,
        n_classes,
        epsilons=epsilons,
        delta=delta,
        artifacts=artifacts,
        labels=[f"frontier/dpsgd/{accountant}/{eps:g}/select" for eps in epsilons],
        n=n,
    )
    return {eps: _best(s) for eps, s in found.items()}


def select(
    configs: list[dict],
    accountant: str,
    xt,
    yt,
    xv,
    yv,
    n_classes: int,
    *,
    epsilon: float,
    delta: float,
    artifacts: Path,
) -> tuple[int, float]:
    """The configuration with the best validation weighted F1 at ``epsilon`` (σ from ``accountant``), and its score."""
    return select_all(
        configs, accountant, (xt, yt, xv, yv), n_classes, epsilons=[epsilon], delta=delta, artifacts=artifacts
    )[epsilon]


def proxy_rankings(
    params: Params,
    lay: Layout,
    *,
    epsilons: Sequence[float],
    delta: float,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[float, list[tuple[int, float]]] | None:
    """Per ε: the declared grid ranked on the PUBLIC proxy at that ε (zero ε: no private record is read): (index
    into :func:`configurations`, proxy weighted F1), best first; None without a proxy (``proxy.until: null``). The
    proxy's training set is at most the private one's size; a configuration keeps its grid index on both. Every
    run of every ε in one trainer call."""
    if not (lay.features / "proxy_train.safetensors").is_file():
        return None
    (xt, yt), (xv, yv) = _xy(lay, "proxy_train"), _xy(lay, "proxy_validation")
    found = grid_scores(
        configurations(params.dpsgd.grid, n=len(yt)),
        params.frontier.accountants[0],
        (xt, yt, xv, yv),
        len(label_info(lay)["codes"]),
        epsilons=epsilons,
        delta=delta,
        artifacts=lay.artifacts,
        labels=[f"proxy/dpsgd/{eps:g}" for eps in epsilons],
        init=init,
        public_seed=params.seed,
    )
    return {eps: sorted(enumerate(s), key=lambda t: (-t[1], t[0])) for eps, s in found.items()}


def proxy_ranking(
    params: Params, lay: Layout, *, epsilon: float, delta: float, init: tuple[torch.Tensor, torch.Tensor] | None = None
) -> list[tuple[int, float]] | None:
    """:func:`proxy_rankings` at one ε: the declared grid ranked on the public proxy, best first (None: no proxy);
    ``init``: every run starts from that public model (the warm start's simulation)."""
    ranked = proxy_rankings(params, lay, epsilons=[epsilon], delta=delta, init=init)
    return None if ranked is None else ranked[epsilon]


DECLARED_RECIPE = (
    "declared in params.yaml (dpsgd.head) before this run: the frontier's validation choice at ε 8 on "
    "an earlier run of this data (docs/frontier.md), a choice on private records that no ε covers"
)


def release_configuration(params: Params, lay: Layout, *, epsilon: float, delta: float):
    """(the DP-SGD run settings, how they were chosen, in words, the public start or None): the PUBLIC proxy's best
    configuration of the declared grid ``dpsgd.grid`` at ``epsilon`` (zero ε) for a linear head; with
    ``dpsgd.warm_start`` each configuration is simulated as it will be used: from the public model fit on
    ``public_rest``, on the pseudo-private ``proxy_train``, scored on ``proxy_validation`` (dpsgd/warm.py).
    Otherwise the declared recipe ``dpsgd.head``, whose values were chosen on this data's validation split."""
    run = params.dpsgd.run_for(params.model.backend)
    hidden = run.hidden if run.hidden is not None else params.model.head.hidden
    linear = params.model.backend == "head" and not hidden
    warm = linear and params.dpsgd.warm_start and warm_start.available(lay)
    start, l2, start_note, floor = None, None, "", None
    if warm:
        sim = warm_start.simulation_start(params, lay)
        start, l2, floor = (sim.weight, sim.bias), sim.l2, sim.score
        start_note = (
            f", each run started from the public model fit on the rest of the public period (L2 {l2:g}, "
            f"chosen on the proxy's validation part from {len(params.public_model.l2)}; the public model alone scores "
            f"{floor:.3f} there)"
        )
    ranked = proxy_ranking(params, lay, epsilon=epsilon, delta=delta, init=start) if linear else None
    if not ranked:
        return run, PRIVATE_VALIDATION + " (not covered)", DECLARED_RECIPE, None
    n = n_public(lay)
    grid = params.dpsgd.grid
    cfg = configurations(grid, n=n)[ranked[0][0]]
    chosen = run.model_copy(
        update={
            "epochs": cfg["epochs"],
            "batch_size": 0 if cfg["batch_size"] >= n else cfg["batch_size"],
            "lr": cfg["lr"],
            "max_grad_norm": cfg["max_grad_norm"],
            "optimizer": cfg["optimizer"],
            "momentum": cfg["momentum"],
            "hidden": 0,
        }
    )
    release_start = warm_start.release_start(lay, l2=l2) if warm else None
    return (
        chosen,
        PUBLIC_PROXY,
        (
            f"the best of the declared {len(ranked)}-configuration grid (dpsgd.grid) on the "
            f"public proxy (reports up to {params.proxy.until}) at ε {epsilon:g}{start_note}: "
            f"weighted F1 {ranked[0][1]:.3f} on its validation part, zero ε (no private record "
            "read)"
        ),
        release_start,
    )
