"""DP-SGD of a linear head for many runs at once, each with its own setting: the frontier's grid trainer. Each run
draws exactly what it would draw alone, so results do not depend on how runs are grouped.

See docs/frontier.md, "Notes from the code", `mechanisms/dpsgd/grid.py`."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dprelease.mechanisms.dpsgd.batched import CLIP_EPS, Setting, adam_moments

CHUNK = 32  # runs per chunk: a chunk's logits are chunk × records × K floats, its gathered batches chunk × B × d
TINY = 1e-20  # inputs and softmax probabilities at or below it count as 0 (module docstring)
LOG_FLOOR = -70.0  # logits further below their row's largest are raised to it: e^-70 ≈ 4e-31 < TINY (then 0)


def train_grid(
    x: torch.Tensor,
    y: torch.Tensor,
    settings: Sequence[Setting],
    *,
    generators: Sequence[tuple[torch.Generator, torch.Generator]],
    n_classes: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    chunk: int = CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """R = len(settings) DP-SGD runs on records ``x`` [m, d] (raw embeddings; the head scales them by √d) with
    labels ``y`` [m]: run r with ``settings[r]``, its batches from ``generators[r][0]`` and its noise from
    ``generators[r][1]``, from ``weight`` [R, K, d] and ``bias`` [R, K] (default zero). Returns the final weights
    [R, K, d] and biases [R, K] in the order of ``settings``."""
    runs, dim = len(settings), x.shape[1]
    if len(generators) != runs:
        raise ValueError(f"one (sample, noise) generator pair per run: {len(generators)} pairs for {runs} runs")
    w = torch.zeros(runs, n_classes, dim) if weight is None else weight.detach().clone().float()
    b = torch.zeros(runs, n_classes) if bias is None else bias.detach().clone().float()
    if w.shape != (runs, n_classes, dim) or b.shape != (runs, n_classes) or len(y) != len(x) or chunk < 1:
        raise ValueError(
            f"shapes: {runs} settings, weight {tuple(w.shape)}, bias {tuple(b.shape)}, "
            f"x {tuple(x.shape)}, y {tuple(y.shape)}, {n_classes} classes (chunk {chunk})"
        )
    xs = x.float() * dim**0.5
    data = (xs.masked_fill(xs.abs() <= TINY, 0.0), ((xs * xs).sum(1) + 1.0).sqrt_(), y.long())  # ‖(x√d, 1)‖
    groups: dict[tuple[str, bool], list[int]] = {}
    for r, s in enumerate(settings):
        groups.setdefault((s.optimizer, s.sample_rate >= 1.0), []).append(r)
    for (_, full), members in groups.items():
        members.sort(key=lambda r: -settings[r].steps)  # stable: equal T keep their order
        for start in range(0, len(members), chunk):
            idx = torch.tensor(members[start : start + chunk])
            cw, cb = w[idx], b[idx]
            _train_chunk(
                cw, cb, data, [settings[r] for r in idx.tolist()], [generators[r] for r in idx.tolist()], full=full
            )
            w[idx], b[idx] = cw, cb
    return w, b


def _train_chunk(
    w: torch.Tensor, b: torch.Tensor, data: tuple, settings: list[Setting], generators: list, *, full: bool
) -> None:
    """Train one chunk in place: one optimizer, all full batch or all sampled, sorted by T descending."""
    xs, feat_norm, y = data
    (m, dim), classes, runs = xs.shape, w.shape[1], len(settings)
    col = lambda values: torch.tensor(values, dtype=torch.float32)  # noqa: E731  one number per run
    clip, lr, rate = (
        col([s.max_grad_norm for s in settings]),
        col([s.lr for s in settings]),
        col([s.sample_rate for s in settings]),
    )
    batch, momentum = col([s.expected_batch_size for s in settings]), col([s.momentum for s in settings])
    std = col([s.noise_multiplier / s.planted_noise_divisor * s.max_grad_norm for s in settings])
    steps = [s.steps for s in settings]
    adamw = settings[0].optimizer == "adamw"
    mw, vw, mb, vb = (torch.zeros_like(t) for t in (w, w, b, b))
    coins, noise_w, noise_b = torch.empty(runs, m), torch.zeros(runs, classes, dim), torch.zeros(runs, classes)
    for t in range(steps[0]):
        r = sum(1 for s in steps if s > t)  # the runs still stepping: a prefix (sorted by T)
        if full:  # [m, r, K]: every record against every run's weights in one product
            logits = torch.addmm(b[:r].reshape(1, -1), xs, w[:r].reshape(r * classes, dim).T).view(m, r, classes)
            g = _softmax_(logits)  # dCE/dlogits = softmax − onehot: one taken off at each record's label
            g.view(-1)[
                (torch.arange(m)[:, None] * (r * classes) + torch.arange(r)[None, :] * classes + y[:, None]).view(-1)
            ] -= 1.0
            fnorm, valid = feat_norm[:, None], None
        else:  # [r, B, K]: each run's Poisson batch, gathered and padded to the largest
            for i in range(r):  # each run's coins from its own generator, as train_batched draws them
                coins[i].uniform_(generator=generators[i][0])
            mask = coins[:r] < rate[:r, None]
            counts = mask.sum(1)
            rows = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, : int(counts.max())]  # batch first
            width = rows.shape[1]
            valid = torch.arange(width)[None, :] < counts[:, None]  # [r, B]: padding is not in the batch
            xr = xs.index_select(0, rows.reshape(-1)).view(r, width, dim)
            g = _softmax_(torch.baddbmm(b[:r, None, :], xr, w[:r].transpose(1, 2)))
            g.view(-1)[(torch.arange(r * width) * classes + y[rows].reshape(-1))] -= 1.0
            fnorm = feat_norm[rows]
        norms = torch.linalg.vector_norm(g, dim=-1).mul_(fnorm)  # per-sample gradient norms
        factor = (
            (clip[:r] / (norms + CLIP_EPS)).clamp_(max=1.0)
            if full
            else (clip[:r, None] / (norms + CLIP_EPS)).clamp_(max=1.0).mul_(valid)
        )
        g.mul_(factor[..., None])  # clipped
        if full:
            gw = (g.view(m, r * classes).T @ xs).view(r, classes, dim)
            gb = g.sum(0)
        else:
            gw, gb = torch.bmm(g.transpose(1, 2), xr), g.sum(1)
        for i in range(r):  # each run's noise from its own generator, weight then bias (none when σ = 0)
            if std[i]:
                noise_w[i].normal_(generator=generators[i][1])
                noise_b[i].normal_(generator=generators[i][1])
        gw.addcmul_(noise_w[:r], std[:r, None, None]).div_(batch[:r, None, None])
        gb.addcmul_(noise_b[:r], std[:r, None]).div_(batch[:r, None])
        if adamw:
            _adamw(w[:r], gw, mw[:r], vw[:r], t + 1, lr[:r])
            _adamw(b[:r], gb, mb[:r], vb[:r], t + 1, lr[:r])
        else:
            _sgd(w[:r], gw, mw[:r], t + 1, lr[:r], momentum[:r])
            _sgd(b[:r], gb, mb[:r], t + 1, lr[:r], momentum[:r])


def _softmax_(z: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, in place, with probabilities ≤ TINY set to 0. A logit more than 70 below
    its row's largest is raised to that floor first: its probability is below TINY either way (it becomes 0) and
    the row's sum (≥ 1) does not change in float32, but exp never produces a subnormal number."""
    z.sub_(z.amax(-1, keepdim=True)).clamp_(min=LOG_FLOOR).exp_()
    z.div_(z.sum(-1, keepdim=True))
    return torch.nn.functional.threshold_(z, TINY, 0.0)


def _per_run(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape(-1, *([1] * (like.dim() - 1)))


def _adamw(p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int, lr: torch.Tensor) -> None:
    """torch.optim.AdamW's update with weight decay 0 and one learning rate per run, in place."""
    denom, bc1 = adam_moments(g, m, v, step)
    p.sub_(_per_run(lr / bc1, p) * m / denom)


def _sgd(
    p: torch.Tensor, g: torch.Tensor, buf: torch.Tensor, step: int, lr: torch.Tensor, momentum: torch.Tensor
) -> None:
    """torch.optim.SGD's update (weight decay 0, dampening 0, no Nesterov) with one learning rate and momentum per
    run, in place: the buffer starts at g; momentum 0 is plain SGD (the buffer is then g itself)."""
    if step == 1:
        buf.copy_(g)
    else:
        buf.mul_(_per_run(momentum, buf)).add_(g)
    p.sub_(_per_run(lr, p) * buf)
