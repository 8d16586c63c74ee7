"""Stage ``frontier_ncm``: DP nearest class mean at every declared ε of ``frontier.epsilons`` (:mod:`.maths`),
``frontier.seeds`` releases each with noise from the secret key, scored on the test split (and the validation
split, reported). No configuration is searched: grid size 1. With a public proxy, a second variant centres the
embeddings on the proxy's mean (docs/frontier.md), and both report their score on the proxy (zero ε)."""

from __future__ import annotations

from pathlib import Path

import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import ReleaseSpec
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.data.splits import label_info, n_public
from dprelease.core.privacy import secret
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.privacy.target import default_delta
from dprelease.core.utility.metrics import f1_summary, mean_sd
from dprelease.core.utility.points import DECLARED, PUBLIC_PROXY, Point, write_points
from dprelease.mechanisms.ncm import maths, released
from dprelease.mechanisms.ncm.released import embeddings, proxy_centre

# released by the shared publish step when ``released.mechanism: ncm``
SPEC = ReleaseSpec(
    mechanism="ncm",
    stage="ncm_release",
    staged=released.staged,
    card=released.card,
    figures=released.figures,
    code=lambda: closure(released.__name__),
    settings=lambda params: {},  # its release reads the shared sections only (model, released, proxy)
)

SOURCE = "ncm"
SELECTION = (
    "no search: nearest class mean has no hyper-parameter (grid size 1); with a public proxy, a second "
    "variant centres every embedding on the proxy's mean before clipping (a public, data-independent shift)"
)


def _score(x, y, xv, yv, k: int, *, sigma: float, centre, generator) -> dict:
    """Release noisy class sums from (x, y) (centred on ``centre`` when given) and score them on (xv, yv)."""
    shift = (lambda v: v.double() - centre) if centre is not None else (lambda v: v)
    noisy = maths.release(shift(x), y, k, sigma=sigma, generator=generator)
    return f1_summary(yv.numpy(), maths.predict(noisy, shift(xv)).numpy(), range(k))


def frontier_ncm(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    k = len(label_info(lay)["codes"])
    (xt, yt), (xv, yv), (xs, ys) = (embeddings(lay, s) for s in ("train", "validation", "test"))
    centre = proxy_centre(lay)
    proxy = (embeddings(lay, "proxy_train"), embeddings(lay, "proxy_validation")) if centre is not None else None
    delta = params.released.delta or default_delta(n_public(lay))  # public n̂
    variants = [("dp_ncm", "DP nearest class mean (no tuning)", None, DECLARED)]
    if centre is not None:
        variants.append(
            ("dp_ncm_proxy_centred", "DP nearest class mean · centred on the public proxy", centre, PUBLIC_PROXY)
        )
    points = []
    for eps in params.frontier.epsilons:
        sigma = maths.gaussian_sigma(eps, delta)
        for name, label, c, tuning in variants:
            test, val = [], []
            for s in range(params.frontier.seeds):
                gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"frontier/{name}/{eps:g}/{s}"))
                noisy = maths.release(xt.double() - c if c is not None else xt, yt, k, sigma=sigma, generator=gen)
                shift = (lambda v, c=c: v.double() - c) if c is not None else (lambda v: v)
                test.append(f1_summary(ys.numpy(), maths.predict(noisy, shift(xs)).numpy(), range(k)))
                val.append(f1_summary(yv.numpy(), maths.predict(noisy, shift(xv)).numpy(), range(k))["weighted_f1"])
            proxy_score = None
            if proxy is not None:  # the same mechanism run on the public proxy at this ε: its score there (zero ε)
                (xpt, ypt), (xpv, ypv) = proxy
                gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"proxy/{name}/{eps:g}"))
                proxy_score = _score(xpt, ypt, xpv, ypv, k, sigma=sigma, centre=c, generator=gen)["weighted_f1"]
            points.append(
                Point(
                    mechanism=name,
                    label=label,
                    kind="dp_accountant",
                    epsilon=eps,
                    delta=delta,
                    accountant="analytic Gaussian (Balle & Wang 2018)",
                    tuning=tuning,
                    weighted_f1=[t["weighted_f1"] for t in test],
                    macro_f1=[t["macro_f1"] for t in test],
                    target_epsilon=eps,
                    validation_weighted_f1=mean_sd(val)[0],
                    proxy_weighted_f1=proxy_score,
                    config={"sigma": sigma, "centred": c is not None},
                )
            )
    write_points(root, SOURCE, points, grid_size=1, selection=SELECTION)
    return {
        "points": len(points),
        **{f"{p.mechanism}@{p.epsilon:g}": round(mean_sd(p.weighted_f1)[0], 4) for p in points},
    }


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    deps = [key_id_file(params), f"{a}/data", f"{a}/features"]
    return [
        Stage(
            name="frontier_ncm",
            run=frontier_ncm,
            params=["seed", "model.backend", "released.delta", "frontier", "proxy"],
            deps=deps,
            outs=[],
            metrics=["metrics/frontier/ncm.json"],
            group="frontier",
        ),
        Stage(
            name="ncm_release",
            run=released.ncm_release,
            params=["seed", "model", "released", "proxy"],
            deps=deps,
            outs=[f"{a}/{released.FOLDER}"],
            group="ncm",
        ),
    ]
