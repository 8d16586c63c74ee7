"""Training and evaluation of one NVDP variant, the same for both backends: ``data`` is a batch source
(:class:`~.states.Packed` cached states, or :class:`~.states.Tokens` for the fine-tuned encoder) and
``model`` maps a batch and a generator to (logits, posterior). Evaluation draws once per test input (as a
partner would), scores it, and feeds every test batch to the RD statistics and the BDP accountant."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import accuracy_score, f1_score
from torch import nn

from dprelease.mechanisms.nvdp.accountant import BDPAccountant
from dprelease.mechanisms.nvdp.clipstats import ClipStats
from dprelease.mechanisms.nvdp.nvib import Clip, kl_dirichlet, kl_gaussian
from dprelease.mechanisms.nvdp.renyi import Batch, RDStats


@dataclass(frozen=True)
class TrainOptions:
    epochs: int
    lr: float
    batch_size: int
    lam: float  # λ_G = λ_D (0 for the non-private classifier)
    warmup: float = 0.06
    encoder_lr: float | None = None  # fine-tuned encoder's learning rate (full backend)


def _schedule(opt, total: int, warmup: float):
    w = max(1, int(warmup * total))
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / w, max(0.0, (total - s) / max(1, total - w))))


def train(model: nn.Module, data, labels: np.ndarray, opts: TrainOptions, *, seed: int) -> list[float]:
    """AdamW (no weight decay, as the reference scripts), linear warm-up and decay; loss = CE + λ(L_G + L_D)."""
    gen = torch.Generator(device=_device(model)).manual_seed(seed)
    rng = np.random.default_rng(seed)
    groups = [{"params": [p for n, p in model.named_parameters() if not n.startswith("encoder.")], "lr": opts.lr}]
    enc = [p for n, p in model.named_parameters() if n.startswith("encoder.")]
    if enc:
        groups.append({"params": enc, "lr": opts.encoder_lr or opts.lr})
    opt = torch.optim.AdamW(groups, eps=1e-8, weight_decay=0.0)
    steps = opts.epochs * -(-len(labels) // opts.batch_size)
    sched = _schedule(opt, steps, opts.warmup)
    y_all = torch.as_tensor(labels, dtype=torch.long)
    losses = []
    model.train()
    for _ in range(opts.epochs):
        order = rng.permutation(len(labels))
        total = 0.0
        for s in range(0, len(order), opts.batch_size):
            idx = order[s : s + opts.batch_size]
            logits, post = model(*data.batch(idx), gen)
            loss = nn.functional.cross_entropy(logits, y_all[idx].to(logits.device))
            if opts.lam > 0:
                loss = loss + opts.lam * (kl_gaussian(post).mean() + kl_dirichlet(post).mean())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(labels))
    model.eval()
    return losses


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def score(task: str, y: np.ndarray, pred: np.ndarray) -> dict:
    """The task's headline score (GLUE: accuracy; OSHA: weighted F1) plus the usual companions."""
    out = {"accuracy": float(accuracy_score(y, pred))}
    if task == "mrpc":
        out["f1"] = float(f1_score(y, pred))
    if task == "osha":
        out["weighted_f1"] = float(f1_score(y, pred, average="weighted", zero_division=0))
        out["macro_f1"] = float(f1_score(y, pred, average="macro", zero_division=0))
    out["score"] = out["weighted_f1"] if task == "osha" else out["accuracy"]
    return out


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data,
    labels: np.ndarray,
    task: str,
    *,
    seed: int,
    eval_batch: int = 16,
    privacy: bool = True,
    n_vectors: int | None = None,
    lam: float = 1.1,
    delta: float = 1e-5,
    clip: Clip | None = None,
) -> dict:
    """Score one draw per test input; RD max/avg (unfiltered and the reference's filtered) and BDP ε over
    the test batches in order (sampling rate q = eval batch / test size). ``n_vectors``: the RD/BDP normaliser
    (the reference: max_length + 1). ``clip``: thresholds whose binding rates on the pre-clip posterior are
    reported (:class:`~.clipstats.ClipStats`)."""
    gen = torch.Generator(device=_device(model)).manual_seed(seed)
    rd = RDStats(n_vectors)
    acc = BDPAccountant(q=min(1.0, eval_batch / len(labels)), lam=lam, delta=delta, n_vectors=n_vectors)
    binds = ClipStats(clip) if privacy and clip is not None else None
    preds = []
    for s in range(0, len(labels), eval_batch):
        idx = np.arange(s, min(s + eval_batch, len(labels)))
        logits, post = model(*data.batch(idx), gen)
        preds.append(logits.argmax(-1).cpu().numpy())
        if privacy:
            b = Batch.of(post)
            b = Batch(b.mu.cpu(), b.sigma.cpu(), b.alpha.cpu(), b.mask.cpu())
            rd.add(b, lam)
            acc.add(b)
            if binds is not None:
                binds.add(post)
    out = score(task, labels, np.concatenate(preds))
    if privacy:
        out |= rd.summary() | acc.summary() | (binds.summary() if binds is not None else {})
    return out


@torch.no_grad()
def represent(model: nn.Module, data, n: int, *, seed: int, batch_size: int = 64) -> np.ndarray:
    """One privatized draw per input, as the pooled representation (post-processing of the draw)."""
    gen = torch.Generator(device=_device(model)).manual_seed(seed)
    out = []
    for s in range(0, n, batch_size):
        batch = data.batch(np.arange(s, min(s + batch_size, n)))
        _, rep = model.represent(*batch, gen)
        out.append(rep.float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)
