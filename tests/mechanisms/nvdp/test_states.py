"""Token-state cache (packed, real tokens only) and the fine-tuned-encoder backend on a tiny slice (CPU)."""

import numpy as np
import pytest
import torch

from dprelease.mechanisms.nvdp.datasets import Split
from dprelease.mechanisms.nvdp.nvib import Clip, NVDPModule
from dprelease.mechanisms.nvdp.states import DIM, EncoderNVDP, Packed, Tokens, encode, tokenize
from dprelease.mechanisms.nvdp.train import TrainOptions, evaluate, train

TEXTS = [
    "Employee fell from a ladder.",
    "A worker cut his finger on a table saw while trimming boards.",
    "burn",
    "The employee was struck by a forklift and fractured a leg.",
]


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


def test_pair_cache_encodes_each_text_on_its_own_and_marks_the_second():
    pair = Split(TEXTS[:2], TEXTS[2:], np.array([0, 1]))
    packed = encode(pair, max_length=16, batch_size=2, device=torch.device("cpu"))
    a = encode(Split(TEXTS[:2], None, np.array([0, 1])), max_length=16, batch_size=2, device=torch.device("cpu"))
    b = encode(Split(TEXTS[2:], None, np.array([0, 1])), max_length=16, batch_size=2, device=torch.device("cpu"))
    first, lens_a, lens_b = packed["first"].tolist(), np.diff(a["offsets"].numpy()), np.diff(b["offsets"].numpy())
    assert first == lens_a.tolist() and np.diff(packed["offsets"].numpy()).tolist() == (lens_a + lens_b).tolist()
    s0 = packed["states"][: lens_a[0] + lens_b[0]].float()
    assert torch.allclose(s0[: lens_a[0]], a["states"][: lens_a[0]].float(), atol=1e-2)
    assert torch.allclose(s0[lens_a[0] :], b["states"][: lens_b[0]].float(), atol=1e-2)
    _, mask = Packed(packed["states"], packed["offsets"], torch.device("cpu"), first=packed["first"]).batch([1])
    n = lens_a[1] + lens_b[1]
    assert mask[0, : lens_a[1]].eq(1).all() and mask[0, lens_a[1] : n].eq(2).all() and mask.shape[1] == n


def test_joint_tokens_carry_the_segment_mask():
    enc = tokenize(Split(["a fall"], ["a burn"], np.array([0])), 16)
    seg = enc["segments"][0].tolist()
    assert seg[0] == 1 and seg[-1] == 2 and seg == sorted(seg) and set(seg) == {1, 2}


@pytest.mark.slow
def test_full_backend_fine_tunes_the_encoder_with_the_same_module():
    from dprelease.core.backends.encoder import load_encoder

    torch.manual_seed(0)
    split = Split(TEXTS, None, np.array([0, 1, 0, 1]))
    model = EncoderNVDP(
        load_encoder(torch.device("cpu")), NVDPModule(DIM, 8, 2, heads=2, clip=Clip(2.0, 1.1, 0.0, 0.5))
    )
    before = model.encoder.embeddings.word_embeddings.weight.detach().clone()
    data = Tokens(split, 16, torch.device("cpu"))
    train(model, data, split.labels, TrainOptions(epochs=1, lr=1e-3, batch_size=2, lam=0.01, encoder_lr=1e-4), seed=0)
    assert not torch.equal(before, model.encoder.embeddings.word_embeddings.weight)
    res = evaluate(model, data, split.labels, "rte", seed=1, eval_batch=2)
    assert 0 <= res["score"] <= 1 and res["bdp_epsilon"] > 0 and res["rd_pairs"] == 4
    pairs = Split(TEXTS[:2], TEXTS[2:], np.array([0, 1]))
    paired = EncoderNVDP(model.encoder, NVDPModule(DIM, 8, 2, heads=2, pair=True))
    logits, _ = paired(*Tokens(pairs, 32, torch.device("cpu")).batch([0, 1]), torch.Generator().manual_seed(0))
    assert logits.shape == (2, 2)
