"""Per-record membership scores of the NVDP classifier on OSHA, for the privacy-audit package's NVDP arm
(``mia/nvdp_arm.py`` reads them as files). The attacker queries the classifier (sanitizer + task head) once per
record, as a partner would, and scores it by the loss-threshold statistic log p_y of the record's true label
(Yeom et al. 2018). Members = the training split, non-members = the test split. Private arrays: they never
leave ``artifacts/``. Pure torch / numpy."""

from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def true_class_log_probs(model, data, labels: np.ndarray, *, seed: int, batch_size: int = 64) -> np.ndarray:
    """log p_y of each record's label under one draw (the deterministic non-private model: no draw)."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.as_tensor(labels, dtype=torch.long)
    out = []
    for s in range(0, len(labels), batch_size):
        idx = np.arange(s, min(s + batch_size, len(labels)))
        logits, _ = model(*data.batch(idx), gen)
        out.append(torch.log_softmax(logits.double(), -1)[torch.arange(len(idx)), y[idx]].cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)
