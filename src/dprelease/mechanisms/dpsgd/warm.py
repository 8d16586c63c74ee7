"""DP-SGD from the public model (docs/guarantees.md, "Public first"): the release starts from softmax regression
on the public period and spends ε only on what the private reports add.

Two starts, both from public reports only (zero ε):

- the **simulation start**: the public model fit on ``public_rest`` (the public reports outside the proxy's parts),
  from which the declared grid is run on ``proxy_train`` (a pseudo-private set of the private training size) and
  scored on ``proxy_validation``: the configuration is chosen as it will be used;
- the **release start**: the same fit on every public report of the label space, the L2 strength the simulation
  chose; DP-SGD then refines it on the private training reports.

Both are logit-adjusted to the private roles' class mix (public counts × inclusion rates).
"""

from __future__ import annotations

import torch

from dprelease.core import public_model
from dprelease.core.data.splits import PUBLIC_SPLITS, head_embeddings, label_info
from dprelease.core.io import read_json
from dprelease.core.utility.metrics import f1
from dprelease.pipeline.layout import Layout


def _xy(lay: Layout, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = head_embeddings(lay, split, who="DP-SGD's warm start")
    return x.float(), y


def _prior(lay: Layout) -> torch.Tensor:
    public = read_json(lay.data / "public.json")
    return public_model.target_prior(public["public_counts"], public["rates"], label_info(lay)["codes"])


def available(lay: Layout) -> bool:
    return all((lay.features / f"{s}.safetensors").is_file() for s in PUBLIC_SPLITS)


def simulation_start(params, lay: Layout) -> tuple[torch.Tensor, torch.Tensor, float, list[float]]:
    """(weights, biases, chosen L2, every L2's proxy-validation weighted F1): the public model fit on
    ``public_rest`` with the L2 of ``dpsgd.public_l2`` best on ``proxy_validation``."""
    k, prior = len(label_info(lay)["codes"]), _prior(lay)
    rest, val = _xy(lay, "public_rest"), _xy(lay, "proxy_validation")
    score = lambda y, p: f1(y, p, range(k), average="weighted")  # noqa: E731
    l2, scores = public_model.choose_l2(rest, val, k, grid=params.dpsgd.public_l2, prior=prior, score=score)
    w, b = public_model.fit(*rest, k, l2=l2)
    return w, b + prior, l2, scores


def release_start(lay: Layout, *, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The public model on every public report of the label space at ``l2``, logit-adjusted: the floor and the
    release's start."""
    parts = [_xy(lay, s) for s in PUBLIC_SPLITS]
    x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    w, b = public_model.fit(x, y, len(label_info(lay)["codes"]), l2=l2)
    return w, b + _prior(lay)
