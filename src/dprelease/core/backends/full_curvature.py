"""The full backend's curvature quantities on the device, by ``torch.func`` (vmap of grad / jvp / vjp): the fast forms
``curvature.py`` dispatches to, each tested equal to its autograd reference.

See docs/algorithms.md, I.2."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, jvp, vjp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from dprelease.core.backends.base import Features, n_records, set_flat

# Per-record gradients materialised at once (one [chunk, d] float32 tensor per parameter, its square and a
# float64 reduction): what bounds a chunk. 22.7 M parameters: ~23 pairs per chunk on a GPU.
PER_SAMPLE_BYTES = {"cuda": 8 << 30}
PER_SAMPLE_BYTES_DEFAULT = 256 << 20
# records per batch of the J v / Jᵀ e passes (each carries one tangent per vector)
CURVATURE_BATCH = {"cuda": 64}
CURVATURE_BATCH_DEFAULT = 16


class Functional:
    """A :class:`~dprelease.core.backends.full.SequenceClassifier` as a function of its trainable parameters (a dict
    in ``trainable()`` order), at the θ it holds now, eval mode."""

    def __init__(self, model: nn.Module) -> None:
        self.hf = model.model
        named = [(n, p) for n, p in self.hf.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.params = {n: p.detach() for n, p in named}
        self.device = named[0][1].device
        self.dim = sum(self.sizes)

    def logits(self, params: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[b, C] float32 logits of [b, w] token ids (long) and their 0/1 mask."""
        pos = torch.arange(ids.shape[-1], device=ids.device).expand_as(ids)
        bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        out = functional_call(
            self.hf,
            params,
            (),
            {"input_ids": ids, "attention_mask": bias, "position_ids": pos, "token_type_ids": torch.zeros_like(ids)},
        )
        return out.logits.float()

    def split(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """[..., d] → one [..., *shape] tensor per parameter (float32, on the model's device)."""
        flat = flat.to(self.device, torch.float32)
        lead = flat.shape[:-1]
        return {n: c.reshape(*lead, *s) for n, c, s in zip(self.names, flat.split(self.sizes, -1), self.shapes)}

    def flatten(self, tensors: dict[str, torch.Tensor], lead: tuple[int, ...] = ()) -> torch.Tensor:
        return torch.cat([tensors[n].reshape(*lead, -1) for n in self.names], -1)


class Records:
    """The records' token ids and masks on the device (moved once), and length-sorted index chunks that each
    pad only to their own longest record."""

    def __init__(self, features: Features, device: torch.device) -> None:
        self.ids = features["input_ids"].to(device).long()
        self.mask = features["attention_mask"].to(device).long()
        self.lengths = features["attention_mask"].sum(1).long()  # host: chunk widths without a device sync

    def sorted(self, idx: torch.Tensor) -> torch.Tensor:
        return idx[torch.argsort(self.lengths[idx], stable=True)]

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(1, int(self.lengths[idx].max()))
        d = idx.to(self.ids.device)
        return self.ids[d, :width], self.mask[d, :width]


def n_classes(f: Functional) -> int:
    return int(f.hf.config.num_labels)


def _weights(weights: torch.Tensor | None, n: int) -> torch.Tensor:
    return torch.ones(n) if weights is None else weights.detach().float().cpu()


def _setup(model: nn.Module, theta: torch.Tensor) -> Functional:
    set_flat(model, theta)
    model.eval()
    return Functional(model)


def _chunk_pairs(f: Functional, per_pair: int = 4) -> int:
    budget = PER_SAMPLE_BYTES.get(f.device.type, PER_SAMPLE_BYTES_DEFAULT)
    return max(1, budget // (per_pair * 4 * f.dim))


def _batch(f: Functional, batch_size: int | None) -> int:
    return batch_size or CURVATURE_BATCH.get(f.device.type, CURVATURE_BATCH_DEFAULT)


@torch.no_grad()
def log_probs(f: Functional, recs: Records, idx: torch.Tensor, batch_size: int) -> torch.Tensor:
    """[len(idx), C] float32 log-probabilities on the device (rows in ``idx`` order)."""
    out = None
    for chunk in recs.sorted(idx).split(batch_size):
        ids, mask = recs.batch(chunk)
        logp = F.log_softmax(f.logits(f.params, ids, mask), -1)
        if out is None:
            out = torch.empty(len(recs.lengths), logp.shape[1], device=f.device)
        out[chunk.to(f.device)] = logp
    return out[idx.to(f.device)]


def _per_pair_sum(f: Functional, recs: Records, rec: torch.Tensor, coef: torch.Tensor, reduce) -> None:
    """For (record i, row v) pairs (``rec`` [m] and ``coef`` [m, C]), a chunk at a time in length order: the
    gradients of v · log_softmax(z_i) on the device, handed to ``reduce(grads, positions)``."""

    def fn(params, ids, mask, v):
        return (v * F.log_softmax(f.logits(params, ids[None], mask[None])[0], -1)).sum()

    per_pair = vmap(grad(fn), in_dims=(None, 0, 0, 0))
    order = torch.argsort(recs.lengths[rec], stable=True)
    with sdpa_kernel([SDPBackend.MATH]):
        for pos in order.split(_chunk_pairs(f)):
            ids, mask = recs.batch(rec[pos])
            reduce(per_pair(f.params, ids, mask, coef[pos.to(coef.device)]), pos.to(f.device))


def ggn_diagonal(
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    *,
    generator: torch.Generator | None = None,
    max_exact_classes: int = 16,
    batch_size: int | None = None,
) -> torch.Tensor:
    """diag G = Σ_i w_i Σ_c p_ic (∇ log p_ic)² (float64 [d], CPU), exact over the classes when there are at
    most ``max_exact_classes``, else one class per record drawn from p_i (an unbiased estimate), drawn as
    the reference draws it: on the host, record by record, from ``generator`` (None: the global generator)."""
    f = _setup(model, theta)
    n = n_records(features)
    w = _weights(weights, n)
    keep = torch.nonzero(w != 0).flatten()
    acc = {name: torch.zeros(shape, dtype=torch.float64, device=f.device) for name, shape in zip(f.names, f.shapes)}
    if len(keep):
        recs = Records(features, f.device)
        logp = log_probs(f, recs, keep, _batch(f, batch_size) * 4)
        classes = logp.shape[1]
        if classes <= max_exact_classes:
            rec = keep.repeat_interleave(classes)
            cls = torch.arange(classes).repeat(len(keep))
            coef = w[rec].to(f.device) * logp.exp().reshape(-1)
        else:
            p = logp.exp().cpu()  # [n, C]: one small copy; the labels are drawn on the host, in record order
            cls = torch.cat([torch.multinomial(p[k], 1, generator=generator) for k in range(len(keep))])
            rec, coef = keep, w[keep].to(f.device)

        rows = F.one_hot(cls, classes).to(f.device, torch.float32)  # v · log p_i = log p_ic

        def reduce(grads, pos):
            cw = coef[pos]
            for name, g in grads.items():
                acc[name] += (g * g * cw.view(-1, *[1] * (g.dim() - 1))).sum(0, dtype=torch.float64)

        _per_pair_sum(f, recs, rec, rows, reduce)
    return f.flatten(acc).cpu()


def gradient_noise(
    model: nn.Module, theta: torch.Tensor, features: Features, labels: torch.Tensor, weights: torch.Tensor | None
) -> tuple[float, float]:
    """(mean_i |∇ℓ_i|², |mean_i ∇ℓ_i|²) for ℓ_i = w_i CE_i(θ): per-record gradients on the device, their
    squared norms and their sum accumulated in float64 there."""
    f = _setup(model, theta)
    n = n_records(features)
    w = _weights(weights, n)
    keep = torch.nonzero(w != 0).flatten()  # a zero weight: a zero gradient (it still counts in the means)
    total = {name: torch.zeros(shape, dtype=torch.float64, device=f.device) for name, shape in zip(f.names, f.shapes)}
    sq = torch.zeros((), dtype=torch.float64, device=f.device)
    if len(keep):
        recs = Records(features, f.device)
        classes = n_classes(f)
        rows = -w[keep, None] * F.one_hot(labels[keep].long(), classes).float()  # v · log p_i = w_i CE_i

        def reduce(grads, pos):
            nonlocal sq
            for name, g in grads.items():
                total[name] += g.sum(0, dtype=torch.float64)
                sq += (g * g).sum(dtype=torch.float64)

        _per_pair_sum(f, recs, keep, rows.to(f.device), reduce)
    mean = f.flatten(total) / n
    return float(sq) / n, float(mean @ mean)


def _jvps(f: Functional, tangents: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[K, b, C] = J t for the K stacked tangents (forward mode, batched over K)."""

    def one(t):
        return jvp(lambda p: f.logits(p, ids, mask), (f.params,), (t,))[1]

    return vmap(one)(tangents)


def ggn_subspace(
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    basis: torch.Tensor,
    *,
    batch_size: int | None = None,
) -> torch.Tensor:
    """[K, K] block B G Bᵀ for the rows of ``basis`` (float64, CPU): per batch J Bᵀ by forward-mode JVPs of
    all K rows at once, the output curvature diag p − ppᵀ, summed over batches in float64."""
    f = _setup(model, theta)
    n = n_records(features)
    w = _weights(weights, n)
    k = basis.shape[0]
    out = torch.zeros(k, k, dtype=torch.float64, device=f.device)
    keep = torch.nonzero(w != 0).flatten()
    if len(keep) and k:
        recs, tangents = Records(features, f.device), f.split(basis)
        with sdpa_kernel([SDPBackend.MATH]):
            for chunk in recs.sorted(keep).split(_batch(f, batch_size)):
                ids, mask = recs.batch(chunk)
                with torch.no_grad():
                    p = torch.softmax(f.logits(f.params, ids, mask), -1).double()
                jd = _jvps(f, tangents, ids, mask).double()  # [K, b, C]
                wb = w[chunk].to(f.device, torch.float64)
                pj = (p * jd).sum(-1)
                out += torch.einsum("n,anc,bnc->ab", wb, jd * p, jd) - torch.einsum("n,an,bn->ab", wb, pj, pj)
    return out.cpu()


def ggn_operator(
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    *,
    batch_size: int | None = None,
):
    """v ↦ G v for the rows of an [r, d] tensor (float64 out, CPU): per batch J V for all r rows by
    forward-mode JVPs, the output curvature, then Jᵀ E for all r rows by one VJP vmapped over them; the
    products are float32, their sum over batches float64 on the device. The vectors cross to the device
    once per call (the reference moved every vector once per batch)."""
    f = _setup(model, theta)
    n = n_records(features)
    w = _weights(weights, n)
    keep = torch.nonzero(w != 0).flatten()
    recs = Records(features, f.device) if len(keep) else None
    chunks = [] if recs is None else list(recs.sorted(keep).split(_batch(f, batch_size)))

    def apply(vectors: torch.Tensor) -> torch.Tensor:
        r = vectors.shape[0]
        acc = torch.zeros(r, f.dim, dtype=torch.float64, device=f.device)
        if r == 0 or not chunks:
            return acc.cpu()
        tangents = f.split(vectors)
        with sdpa_kernel([SDPBackend.MATH]):
            for chunk in chunks:
                ids, mask = recs.batch(chunk)
                logits, pull = vjp(lambda p: f.logits(p, ids, mask), f.params)
                p = torch.softmax(logits.detach(), -1)
                jv = _jvps(f, tangents, ids, mask)  # [r, b, C]
                wb = w[chunk].to(f.device)[:, None]
                e = wb * (p * jv - p * (p * jv).sum(-1, keepdim=True))
                (g,) = vmap(pull)(e)
                acc += f.flatten(g, (r,))
                del g, jv, e, pull
        return acc.cpu()

    return apply
