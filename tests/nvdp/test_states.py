"""Token-state cache (packed, real tokens only) and the fine-tuned-encoder backend on a tiny slice (CPU)."""

import numpy as np
import pytest
import torch

from dprelease.nvdp.nvib import Clip, NVDPModule
from dprelease.nvdp.states import DIM, EncoderNVDP, Packed, Tokens, encode
from dprelease.nvdp.tasks import Split
from dprelease.nvdp.train import TrainOptions, evaluate, train

TEXTS = ["Employee fell from a ladder.", "A worker cut his finger on a table saw while trimming boards.",
         "burn", "The employee was struck by a forklift and fractured a leg."]


def test_packed_cache_keeps_only_real_tokens_in_input_order():
    split = Split(TEXTS, None, np.array([0, 1, 0, 1]))
    packed = encode(split, max_length=16, batch_size=3, device=torch.device("cpu"))
    lens = np.diff(packed["offsets"].numpy())
    assert packed["states"].dtype == torch.float16 and packed["states"].shape == (lens.sum(), DIM)
    assert lens[2] < lens[1] <= 16  # "burn" is short; the long text is truncated to max_length
    x, mask = Packed(packed["states"], packed["offsets"], torch.device("cpu")).batch([2, 0])
    assert x.shape == (2, lens[0], DIM) and mask.sum(1).tolist() == [lens[2], lens[0]]
    single = encode(Split(TEXTS[:1], None, np.array([0])), max_length=16, batch_size=1, device=torch.device("cpu"))
    assert torch.allclose(single["states"].float(), packed["states"][: lens[0]].float(), atol=1e-2)


@pytest.mark.slow
def test_full_backend_fine_tunes_the_encoder_with_the_same_module():
    from dprelease.backends.encoder import load_encoder

    torch.manual_seed(0)
    split = Split(TEXTS, None, np.array([0, 1, 0, 1]))
    model = EncoderNVDP(load_encoder(torch.device("cpu")), NVDPModule(DIM, 8, 2, heads=2, clip=Clip(2.0, 1.1, 0.0, 0.5)))
    before = model.encoder.embeddings.word_embeddings.weight.detach().clone()
    data = Tokens(split, 16, torch.device("cpu"))
    train(model, data, split.labels, TrainOptions(epochs=1, lr=1e-3, batch_size=2, lam=0.01, encoder_lr=1e-4), seed=0)
    assert not torch.equal(before, model.encoder.embeddings.word_embeddings.weight)
    res = evaluate(model, data, split.labels, "rte", seed=1, eval_batch=2)
    assert 0 <= res["score"] <= 1 and res["bdp_epsilon"] > 0 and res["rd_pairs"] == 4
