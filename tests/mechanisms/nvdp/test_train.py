"""nvdp.train: the task scores, training that lowers the loss on a learnable toy problem, and an evaluation
that scores one draw per input and reports the Rényi statistics and the reference accountant's figure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.mechanisms.nvdp.nvib import Clip, NVDPModule
from dprelease.mechanisms.nvdp.states import Packed
from dprelease.mechanisms.nvdp.train import TrainOptions, evaluate, score, train

DIM = 384


def test_scores_per_task():
    y, pred = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])
    assert score("rte", y, pred) == {"accuracy": 0.75, "score": 0.75}
    mrpc = score("mrpc", y, pred)
    assert mrpc["score"] == 0.75 and mrpc["f1"] == pytest.approx(2 / 3)
    osha = score("osha", np.array([0, 0, 1, 2]), np.array([0, 0, 1, 1]))
    assert osha["score"] == osha["weighted_f1"] and osha["macro_f1"] < osha["weighted_f1"] <= osha["accuracy"]


def _toy(n: int = 48, tokens: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = np.array([i % 2 for i in range(n)])
    states = torch.randn(n * tokens, DIM, generator=g) * 0.5
    states[:, 0] += torch.as_tensor(np.repeat(labels * 4.0 - 2.0, tokens), dtype=torch.float32)  # label in feature 0
    offsets = torch.arange(0, n * tokens + 1, tokens)
    return Packed(states.half(), offsets, torch.device("cpu")), labels


def test_training_lowers_the_loss_and_evaluation_reports_the_privacy_statistics(one_torch_thread):
    torch.manual_seed(0)
    data, labels = _toy()
    clip = Clip(2.0, 1.1, 0.0, 0.5)
    model = NVDPModule(DIM, 8, 2, heads=2, clip=clip)
    losses = train(model, data, labels, TrainOptions(epochs=6, lr=3e-3, batch_size=8, lam=0.01), seed=0)
    assert len(losses) == 6 and losses[-1] < losses[0]
    out = evaluate(model, data, labels, "rte", seed=1, eval_batch=8, clip=clip)
    assert out["score"] > 0.75  # the label is in the states
    assert {"rd_max", "rd_avg", "bdp_epsilon"} <= set(out) and out["rd_max"] >= out["rd_avg"] >= 0
    again = evaluate(model, data, labels, "rte", seed=1, eval_batch=8, clip=clip)
    assert again == out  # the seed fixes every draw
    plain = evaluate(model, data, labels, "rte", seed=1, eval_batch=8, privacy=False)
    assert "bdp_epsilon" not in plain and plain["score"] == out["score"]
