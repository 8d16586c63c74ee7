"""Stage ``frontier_ncm``: DP nearest class mean at every declared ε of ``frontier.epsilons`` (:mod:`.maths`),
``frontier.seeds`` releases each with noise from the secret key, scored on the test split (and the validation
split, reported). No configuration is searched: grid size 1."""

from __future__ import annotations

from pathlib import Path

import torch

from ..config import Params
from ..data.splits import features, label_info
from ..frontier.points import Point, write_points
from ..layout import Layout
from ..privacy import secret
from ..privacy.stages import key_id_file
from ..privacy.target import default_delta
from ..stage import Stage
from ..utility.metrics import f1_summary, mean_sd
from . import maths

SOURCE = "ncm"
SELECTION = "no search: nearest class mean has no hyper-parameter (grid size 1)"


def _xy(lay: Layout, split: str):
    feats, y = features(lay, split)
    if set(feats) != {"x"}:
        raise ValueError("frontier: DP nearest class mean needs the head backend's embeddings (model.backend: head)")
    return feats["x"], y.long()


def frontier_ncm(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    k = len(label_info(lay)["codes"])
    (xt, yt), (xv, yv), (xs, ys) = (_xy(lay, s) for s in ("train", "validation", "test"))
    delta = params.dpsgd.delta or default_delta(len(yt))
    points = []
    for eps in params.frontier.epsilons:
        sigma = maths.gaussian_sigma(eps, delta)
        test, val = [], []
        for s in range(params.frontier.seeds):
            gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"frontier/ncm/{eps:g}/{s}"))
            noisy = maths.release(xt, yt, k, sigma=sigma, generator=gen)
            test.append(f1_summary(ys.numpy(), maths.predict(noisy, xs).numpy(), range(k)))
            val.append(f1_summary(yv.numpy(), maths.predict(noisy, xv).numpy(), range(k))["weighted_f1"])
        points.append(Point(mechanism="dp_ncm", label="DP nearest class mean (no tuning)", kind="dp_accountant",
                            epsilon=eps, delta=delta, accountant="analytic Gaussian (Balle & Wang 2018)",
                            weighted_f1=[t["weighted_f1"] for t in test], macro_f1=[t["macro_f1"] for t in test],
                            target_epsilon=eps, validation_weighted_f1=mean_sd(val)[0], config={"sigma": sigma}))
    write_points(root, SOURCE, points, grid_size=1, selection=SELECTION)
    return {"points": len(points), **{f"dp_ncm@{p.epsilon:g}": round(mean_sd(p.weighted_f1)[0], 4) for p in points}}


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [Stage(name="frontier_ncm", run=frontier_ncm, params=["seed", "model.backend", "dpsgd.delta", "frontier"],
                  deps=[key_id_file(params), f"{a}/data", f"{a}/features"], outs=[],
                  metrics=["metrics/frontier/ncm.json"], group="frontier")]
