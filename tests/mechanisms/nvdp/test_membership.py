"""nvdp.membership: log p_y per record from one draw, batched, the draw fixed by the seed."""

from __future__ import annotations

import numpy as np
import torch

from dprelease.mechanisms.nvdp.membership import true_class_log_probs


class _Data:
    def __init__(self, x: torch.Tensor):
        self.x = x

    def batch(self, idx):
        return (self.x[idx],)


class _NoisyModel(torch.nn.Module):
    """Logits x·W plus noise from the caller's generator (a stand-in for the sanitizer's draw)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))

    def forward(self, x, gen):
        return x @ self.w + 0.1 * torch.randn(len(x), 3, generator=gen), None


def test_scores_are_the_true_class_log_probability_and_the_seed_fixes_the_draw():
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(1))
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    model = _NoisyModel()
    got = true_class_log_probs(model, _Data(x), labels, seed=5, batch_size=4)
    assert got.shape == (10,) and got.dtype == np.float64 and (got <= 0).all()
    assert np.array_equal(got, true_class_log_probs(model, _Data(x), labels, seed=5, batch_size=4))
    assert not np.array_equal(got, true_class_log_probs(model, _Data(x), labels, seed=6, batch_size=4))
    gen = torch.Generator().manual_seed(5)
    by_hand = [torch.log_softmax(model(x[s : s + 4], gen)[0].double(), -1) for s in (0, 4, 8)]
    want = torch.cat(by_hand)[torch.arange(10), torch.as_tensor(labels)].detach().numpy()
    assert np.allclose(got, want)


def test_no_records_give_an_empty_array():
    assert true_class_log_probs(_NoisyModel(), _Data(torch.zeros(0, 4)), np.zeros(0, dtype=int), seed=0).shape == (0,)
