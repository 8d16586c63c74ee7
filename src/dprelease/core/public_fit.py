"""The public model, fitted from the public splits a stage wrote (zero ε for the private reports): the simulation fit
and the release fit, both logit-adjusted to the private roles' class mix.

See docs/guarantees.md, T.3."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dprelease.contracts.layout import Layout
from dprelease.core import public_model
from dprelease.core.data.splits import PUBLIC_SPLITS, head_embeddings, label_info
from dprelease.core.io import read_json
from dprelease.core.utility.metrics import f1


@dataclass(frozen=True)
class Simulation:
    weight: torch.Tensor  # [K, d]
    bias: torch.Tensor  # [K], logit-adjusted
    l2: float  # the chosen strength
    scores: list[float]  # every grid strength's proxy-validation weighted F1 (public)

    @property
    def score(self) -> float:
        """The chosen fit's weighted F1 on ``proxy_validation``: the public floor of the simulation."""
        return max(self.scores)


def _xy(lay: Layout, split: str, who: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = head_embeddings(lay, split, who=who)
    return x.float(), y


def target_prior(lay: Layout) -> torch.Tensor:
    """log π of the private roles' class mix, from the public counts and the declared rates."""
    public = read_json(lay.data / "public.json")
    return public_model.target_prior(public["public_counts"], public["rates"], label_info(lay)["codes"])


def available(lay: Layout) -> bool:
    """Whether the stratify stage wrote every public split's features (a proxy period is declared)."""
    return all((lay.features / f"{s}.safetensors").is_file() for s in PUBLIC_SPLITS)


def simulation(lay: Layout, *, grid: list[float], who: str = "the public model") -> Simulation:
    """The public model fit on ``public_rest`` with the L2 of ``grid`` best on ``proxy_validation``."""
    k, prior = len(label_info(lay)["codes"]), target_prior(lay)
    rest, val = _xy(lay, "public_rest", who), _xy(lay, "proxy_validation", who)
    score = lambda y, p: f1(y, p, range(k), average="weighted")  # noqa: E731
    l2, scores = public_model.choose_l2(rest, val, k, grid=grid, prior=prior, score=score)
    w, b = public_model.fit(*rest, k, l2=l2)
    return Simulation(w, b + prior, l2, scores)


def release(lay: Layout, *, l2: float, who: str = "the public model") -> tuple[torch.Tensor, torch.Tensor]:
    """(weights, logit-adjusted biases): the public model on every public report of the label space at ``l2``."""
    parts = [_xy(lay, s, who) for s in PUBLIC_SPLITS]
    x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    w, b = public_model.fit(x, y, len(label_info(lay)["codes"]), l2=l2)
    return w, b + target_prior(lay)
