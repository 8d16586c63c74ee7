"""The audit of docs/algorithms.md, G.3: a fresh probe (MLP 256-128, Adam, no tuning) trained on sanitized *training*
representations and evaluated on sanitized *test* representations.

Reports the adversary AUC for the sensitive attribute, and the utility AUC and top-1 accuracy for the
utility attribute (G.4: a low adversary AUC next to a high utility AUC is possible only if Z blurs
classes the AUC does not penalise, so accuracy is reported too). Multi-class AUC is the one-vs-rest
macro average over the classes present in the test labels with both positives and negatives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch.nn import functional as F

from dprelease.mechanisms.gpp.model import head
from dprelease.mechanisms.gpp.params import GPPParams
from dprelease.mechanisms.gpp.train import GPPInputError, check_arrays


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """The probe's settings. No defaults here: they come from ``params.gpp.probe`` (:meth:`from_params`)."""

    hidden: tuple[int, ...]
    epochs: int
    lr: float
    batch_size: int

    @classmethod
    def from_params(cls, gpp: GPPParams) -> "ProbeConfig":
        """``params.gpp``'s probe: its epochs, learning rate and batch size, the heads' hidden widths."""
        p = gpp.probe
        return cls(hidden=tuple(gpp.head_hidden), epochs=p.epochs, lr=p.lr, batch_size=p.batch_size)


def macro_auc(labels: np.ndarray, proba: np.ndarray) -> float:
    """ROC-AUC (binary) or one-vs-rest macro AUC over the classes that have positives and negatives."""
    labels = np.asarray(labels)
    if proba.shape[1] == 2:
        if len(np.unique(labels)) < 2:
            return float("nan")
        return float(roc_auc_score(labels == 1, proba[:, 1]))
    aucs = [
        roc_auc_score(labels == c, proba[:, c])
        for c in range(proba.shape[1])
        if 0 < int((labels == c).sum()) < len(labels)
    ]
    return float(np.mean(aucs)) if aucs else float("nan")


def fit_probe(
    z_train: np.ndarray, y_train: np.ndarray, n_classes: int, *, config: ProbeConfig, seed: int
) -> torch.nn.Module:
    """A fresh probe trained with cross-entropy on (z_train, y_train)."""
    check_arrays(z_train, y_train)
    if y_train.max() >= n_classes:
        raise GPPInputError(f"label {int(y_train.max())} outside the {n_classes} classes")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    zt = torch.tensor(np.asarray(z_train, dtype=np.float32))
    yt = torch.tensor(np.asarray(y_train, dtype=np.int64))
    probe = head(zt.shape[1], n_classes, config.hidden)
    opt = torch.optim.Adam(probe.parameters(), lr=config.lr)
    for _ in range(config.epochs):
        for idx in torch.randperm(zt.shape[0], generator=gen).split(config.batch_size):
            loss = F.cross_entropy(probe(zt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return probe.eval()


@torch.no_grad()
def probe_scores(probe: torch.nn.Module, z: np.ndarray) -> np.ndarray:
    return torch.softmax(probe(torch.as_tensor(np.asarray(z, dtype=np.float32))), dim=1).numpy()


def audit(
    z_train: np.ndarray,
    z_test: np.ndarray,
    *,
    u_train: np.ndarray,
    u_test: np.ndarray,
    s_train: np.ndarray,
    s_test: np.ndarray,
    n_u: int,
    n_s: int,
    config: ProbeConfig,
    seed: int = 0,
) -> dict:
    """Aggregate audit figures of one sanitized release (public: no per-record values)."""
    check_arrays(z_test, u_test, s_test)
    if z_train.shape[1] != z_test.shape[1]:
        raise GPPInputError(f"train and test representations differ in width ({z_train.shape[1]} vs {z_test.shape[1]})")
    p_u = probe_scores(fit_probe(z_train, u_train, n_u, config=config, seed=seed), z_test)
    p_s = probe_scores(fit_probe(z_train, s_train, n_s, config=config, seed=seed + 1), z_test)
    return {
        "utility_auc": round(macro_auc(u_test, p_u), 4),
        "utility_accuracy": round(float((p_u.argmax(1) == u_test).mean()), 4),
        "adversary_auc": round(macro_auc(s_test, p_s), 4),
        "adversary_accuracy": round(float((p_s.argmax(1) == s_test).mean()), 4),
        "adversary_majority": round(float(np.bincount(s_test, minlength=n_s).max() / len(s_test)), 4),
    }
