"""Forward in time: partners code next year's narratives, so beside the random test split the frontier checks the
models trained on the private reports dated before ``frontier.forward_from`` on the test reports from that day on.

The same configurations the frontier chose on the public proxy (cold and warm-started), refit ``frontier.seeds``
times with secret seeds on the earlier training reports; the public model (all public reports) is the floor. q,
σ and the normaliser use a PUBLIC size: n̂ × the share of the public period's reports that fall before the same day
of the year. Each model is scored on the test reports before the day (the random split's protocol) and from it on
(forward). Exact figures on private test reports: the operator's internal analysis (``metrics/forward.json``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.data.stages import joined, period_split
from dprelease.core.io import write_json
from dprelease.core.utility.metrics import f1_summary, mean_sd

FILE = "metrics/forward.json"


def _dates(lay: Layout, private: pd.DataFrame, split: str) -> pd.Series:
    rows = pd.read_csv(lay.data / f"{split}.csv", dtype=str, keep_default_na=False)
    return pd.to_datetime(joined(rows, private.astype({"label": str}))["date"])


def masks(params, root, lay: Layout, cut: pd.Timestamp) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(training reports before ``cut``, test reports before it, test reports from it on, the public share of a
    year's reports before the same day of the year)."""
    private, public = period_split(params, root)
    before = lambda s: torch.tensor((s < cut).to_numpy())  # noqa: E731
    train, test = _dates(lay, private, "train"), _dates(lay, private, "test")
    share = float((public["date"].dt.dayofyear < cut.dayofyear).mean())
    return before(train), before(test), ~before(test), share


def forward_check(
    params, root, lay: Layout, *, n_classes: int, n: int, configs: list[dict], chosen: dict, floor, fit, predict, sigmas
) -> dict | None:
    """``chosen``: {(series name, ε): (grid index, public start or None)}; ``floor``: the public model (w, b);
    ``fit(jobs, x, y, init)`` the frontier's batched trainer; ``sigmas(ε, cfg, n)`` its σ search. Writes FILE."""
    if params.frontier.forward_from is None:
        return None
    cut = pd.Timestamp(params.frontier.forward_from)
    train_early, test_early, test_late, share = masks(params, root, lay, cut)
    (xt, yt), (xs, ys) = (_load(lay, s) for s in ("train", "test"))
    k = range(n_classes)
    n_early = max(1, round(n * share))
    score = lambda pred: {
        "random": f1_summary(ys[test_early].numpy(), pred[test_early].numpy(), k),  # noqa: E731
        "forward": f1_summary(ys[test_late].numpy(), pred[test_late].numpy(), k),
    }
    rows = []
    if floor is not None:
        found = score(predict(*floor, xs))
        rows.append(
            {
                "model": "the public model (reads no private report)",
                "epsilon": 0.0,
                **{f"{part}_weighted_f1": [found[part]["weighted_f1"]] for part in found},
            }
        )
    for (name, eps), (index, start) in chosen.items():
        cfg = configs[index]  # full batch stays full batch; a batch never exceeds the earlier reports' n̂
        cfg = {**cfg, "batch_size": n_early if cfg["batch_size"] >= n else min(cfg["batch_size"], n_early)}
        setting = sigmas(eps, cfg, n_early)
        jobs = [(setting, f"forward/{name}/{eps:g}/{s}") for s in range(params.frontier.seeds)]
        models = fit(jobs, xt[train_early], yt[train_early], start)
        found = [score(predict(*m, xs)) for m in models]
        rows.append(
            {
                "model": name,
                "epsilon": eps,
                **{f"{part}_weighted_f1": [f[part]["weighted_f1"] for f in found] for part in ("random", "forward")},
            }
        )
    for r in rows:
        for part in ("random", "forward"):
            r[f"{part}_mean"], r[f"{part}_sd"] = (round(v, 4) for v in mean_sd(r[f"{part}_weighted_f1"]))
    doc = {
        "internal": "exact test F1 on private test reports: the operator's analysis, never released",
        "forward_from": params.frontier.forward_from,
        "public_share_before": round(share, 4),
        "expected_train_size_before": n_early,
        "rows": rows,
    }
    write_json(Path(root) / FILE, doc)
    return doc


def _load(lay: Layout, split: str):
    from dprelease.core.data.splits import head_embeddings

    x, y = head_embeddings(lay, split, who="the forward-in-time check")
    return x.float(), y
