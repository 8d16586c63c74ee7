"""The `head` backend's model (Head, SeededDropout) and the shared helpers in backends.base."""

from __future__ import annotations

import pytest
import torch

from dprelease.core.backends.base import (
    batches,
    get_flat,
    load_features,
    n_records,
    pick_device,
    save_features,
    set_flat,
    take,
    trainable,
)
from dprelease.core.backends.head import Head, HeadBackend, SeededDropout
from dprelease.core.config import HeadParams

CPU = torch.device("cpu")
DIM, C = 384, 5


def unit_rows(n: int, gen: torch.Generator, dim: int = DIM) -> torch.Tensor:
    x = torch.randn(n, dim, generator=gen)
    return x / x.norm(dim=1, keepdim=True)


def head_backend(seed: int = 3, hidden: int = 16, dropout: float = 0.2) -> HeadBackend:
    return HeadBackend(n_classes=C, device=CPU, seed=seed, params=HeadParams(hidden=hidden, dropout=dropout))


def split_draws(model: Head, thetas: torch.Tensor) -> list[torch.Tensor]:
    shapes = [p.shape for p in trainable(model)]
    return [
        chunk.reshape(thetas.shape[0], *shape)
        for chunk, shape in zip(thetas.split([s.numel() for s in shapes], dim=1), shapes)
    ]


# Head.forward_many ----------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [16, 0])
def test_forward_many_equals_forward_draw_by_draw(hidden):
    gen = torch.Generator().manual_seed(11)
    model = head_backend(hidden=hidden).build_model(DIM)
    theta0 = get_flat(model)
    thetas = theta0 + 0.05 * torch.randn(6, theta0.numel(), generator=gen)
    x = unit_rows(9, gen)
    model.eval()
    with torch.no_grad():
        many = model.forward_many(split_draws(model, thetas), x)
        assert many.shape == (6, 9, C)
        for s, theta in enumerate(thetas):
            set_flat(model, theta)
            torch.testing.assert_close(many[s], model(x), rtol=1e-5, atol=1e-5)
    assert (many[0] - many[1]).abs().max() > 1e-3  # the draws really differ


def test_head_layout():
    mlp = Head(DIM, C, hidden=16, dropout=0.1, seed=0)
    assert [tuple(p.shape) for p in trainable(mlp)] == [(16, DIM), (16,), (C, 16), (C,)]
    assert sum(isinstance(m, SeededDropout) for m in mlp.modules()) == 2
    linear = Head(DIM, C, hidden=0, dropout=0.1, seed=0)
    assert [tuple(p.shape) for p in trainable(linear)] == [(C, DIM), (C,)]
    assert get_flat(linear).shape == (C * DIM + C,)


def test_forward_rescales_unit_norm_embeddings():
    """Head.forward multiplies by sqrt(dim) before the first layer (linear head: z = W·(√d x) + b)."""
    model = Head(DIM, C, hidden=0, dropout=0.0, seed=1).eval()
    x = unit_rows(4, torch.Generator().manual_seed(2))
    lin = model.net[-1]
    with torch.no_grad():
        torch.testing.assert_close(model(x), (x * DIM**0.5) @ lin.weight.T + lin.bias)


# initialisation -------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [16, 0])
def test_initialisation_is_a_function_of_the_seed(hidden):
    torch.manual_seed(0)
    a = get_flat(head_backend(seed=3, hidden=hidden).build_model(DIM))
    torch.manual_seed(12345)  # the global RNG state does not matter
    b = get_flat(head_backend(seed=3, hidden=hidden).build_model(DIM))
    c = get_flat(head_backend(seed=4, hidden=hidden).build_model(DIM))
    assert torch.equal(a, b)
    assert a.shape == c.shape and not torch.allclose(a, c)


def test_initialisation_follows_pytorch_linear_bounds():
    model = Head(DIM, C, hidden=16, dropout=0.0, seed=9)
    first, last = model.net[1], model.net[-1]
    for layer in (first, last):
        bound = 1 / layer.in_features**0.5
        # kaiming_uniform(a=√5) gives U(−1/√fan_in, 1/√fan_in) for the weights too
        assert layer.weight.abs().max() <= bound + 1e-7
        assert layer.bias.abs().max() <= bound + 1e-7
        assert layer.weight.std() > 0.3 * bound


def test_build_model_uses_feature_dim_and_defaults_to_384():
    backend = head_backend()
    assert backend.build_model().dim == 384
    assert backend.build_model(32).dim == 32
    assert backend.new_model({"x": torch.zeros(3, 48)}).dim == 48


# SeededDropout --------------------------------------------------------------------------------
def test_seeded_dropout_identity_in_eval():
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    drop = SeededDropout(0.5).eval()
    assert torch.equal(drop(x), x)
    zero = SeededDropout(0.0).train()
    assert torch.equal(zero(x), x)


def test_seeded_dropout_masks_come_from_its_generator():
    x = torch.ones(20, 50)
    drop = SeededDropout(0.4).train()
    drop.generator = torch.Generator().manual_seed(5)
    a = drop(x)
    drop.generator = torch.Generator().manual_seed(5)
    torch.manual_seed(999)  # the global RNG does not matter
    b = drop(x)
    assert torch.equal(a, b)
    kept = a[a != 0]
    assert kept.numel() > 0 and torch.allclose(kept, torch.full_like(kept, 1 / 0.6))  # inverted scaling
    assert 0.25 < (a == 0).float().mean().item() < 0.55  # drop rate near p
    drop.generator = torch.Generator().manual_seed(6)
    assert not torch.equal(drop(x), a)


def test_head_dropout_eval_identity_and_train_reproducible():
    gen = torch.Generator().manual_seed(3)
    x = unit_rows(16, gen)
    model = head_backend(hidden=16, dropout=0.3).build_model(DIM)
    with torch.no_grad():
        model.eval()
        e1, e2 = model(x), model(x)
        assert torch.equal(e1, e2)
        model.train()
        model.seed_dropout(21)
        t1 = model(x)
        t1_next = model(x)  # the generator advances: a fresh mask
        model.seed_dropout(21)
        t2 = model(x)
        model.seed_dropout(22)
        t3 = model(x)
    assert torch.equal(t1, t2)
    assert not torch.equal(t1, t1_next)
    assert not torch.equal(t1, t3)
    assert not torch.allclose(t1, e1)
    gens = [m.generator for m in model.modules() if isinstance(m, SeededDropout)]
    assert len(gens) == 2 and all(g is not None for g in gens) and gens[0] is not gens[1]


# get_flat / set_flat --------------------------------------------------------------------------
def test_flat_round_trip():
    model = head_backend(hidden=16).build_model(DIM)
    theta = get_flat(model)
    d = sum(p.numel() for p in model.parameters())
    assert theta.shape == (d,) and theta.dtype == torch.float32
    new = torch.randn(d, generator=torch.Generator().manual_seed(1))
    set_flat(model, new)
    assert torch.equal(get_flat(model), new)
    # the order is model.parameters() order
    assert torch.equal(model.net[1].weight.reshape(-1), new[: 16 * DIM])
    assert torch.equal(model.net[-1].bias, new[-C:])
    # get_flat is a detached copy: changing it does not touch the model
    snap = get_flat(model)
    snap.zero_()
    assert torch.equal(get_flat(model), new)
    # float64 input is cast to the parameters' dtype
    set_flat(model, new.double())
    assert get_flat(model).dtype == torch.float32 and torch.equal(get_flat(model), new)


def test_flat_skips_frozen_parameters():
    model = head_backend(hidden=16).build_model(DIM)
    model.net[1].weight.requires_grad_(False)
    theta = get_flat(model)
    assert theta.numel() == 16 + C * 16 + C
    set_flat(model, torch.zeros_like(theta))
    assert model.net[1].weight.abs().sum() > 0 and model.net[-1].weight.abs().sum() == 0


def test_set_flat_wrong_length_names_sizes():
    model = head_backend(hidden=0).build_model(DIM)
    d = C * DIM + C
    before = get_flat(model)
    with pytest.raises(ValueError, match=rf"\b{d - 1}\b.*\b{d}\b"):
        set_flat(model, torch.zeros(d - 1))
    with pytest.raises(ValueError, match=rf"\b{d + 3}\b.*\b{d}\b"):
        set_flat(model, torch.zeros(d + 3))
    assert torch.equal(get_flat(model), before)  # untouched


# features on disk -----------------------------------------------------------------------------
def test_save_load_features_round_trip(tmp_path):
    gen = torch.Generator().manual_seed(4)
    feats = {
        "x": unit_rows(6, gen),
        "input_ids": torch.randint(0, 30000, (6, 9), generator=gen, dtype=torch.int32),
        "attention_mask": torch.ones(6, 9, dtype=torch.int8),
    }
    labels = torch.tensor([0, 3, 1, 1, 4, 2])
    path = tmp_path / "sub" / "train.safetensors"
    path.parent.mkdir()
    save_features(path, feats, labels)
    assert path.is_file()
    assert not [p for p in path.parent.iterdir() if p != path]  # atomic write left no temp file
    got, y = load_features(path)
    assert set(got) == set(feats)
    for k, v in feats.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v)
    assert y.dtype == torch.long and torch.equal(y, labels)


def test_save_features_non_contiguous(tmp_path):
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6).T  # [6, 4], not contiguous
    y = torch.arange(6)[::2]
    save_features(tmp_path / "f.safetensors", {"x": x}, y)
    got, yy = load_features(tmp_path / "f.safetensors")
    assert torch.equal(got["x"], x) and torch.equal(yy, y)


# devices --------------------------------------------------------------------------------------
def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto").type == expected
    assert pick_device().type == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_pick_device_cuda_unavailable_raises():
    with pytest.raises(RuntimeError, match="cuda"):
        pick_device("cuda")


# batches / take -------------------------------------------------------------------------------
@pytest.mark.parametrize("n,size", [(10, 3), (9, 3), (1, 4), (7, 7), (5, 100)])
def test_batches_cover_every_index_once(n, size):
    plain = list(batches(n, size))
    assert torch.equal(torch.cat(plain), torch.arange(n))  # in order without a generator
    assert all(len(b) == size for b in plain[:-1]) and 1 <= len(plain[-1]) <= size
    assert len(plain) == -(-n // size)

    shuffled = list(batches(n, size, torch.Generator().manual_seed(8)))
    flat = torch.cat(shuffled)
    assert sorted(flat.tolist()) == list(range(n))
    assert [len(b) for b in shuffled] == [len(b) for b in plain]
    again = torch.cat(list(batches(n, size, torch.Generator().manual_seed(8))))
    assert torch.equal(flat, again)  # reproducible for a seed


def test_batches_shuffle_depends_on_generator():
    a = torch.cat(list(batches(50, 8, torch.Generator().manual_seed(1))))
    b = torch.cat(list(batches(50, 8, torch.Generator().manual_seed(2))))
    assert not torch.equal(a, b) and not torch.equal(a, torch.arange(50))


def test_batches_empty():
    assert list(batches(0, 4)) == []


def test_take_and_n_records():
    feats = {"x": torch.arange(12.0).reshape(6, 2), "m": torch.arange(6, dtype=torch.int8)}
    assert n_records(feats) == 6
    idx = torch.tensor([4, 0, 5])
    sub = take(feats, idx, CPU)
    assert torch.equal(sub["x"], feats["x"][idx]) and torch.equal(sub["m"], feats["m"][idx])
    assert sub["m"].dtype == torch.int8
