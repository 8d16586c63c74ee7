"""backends.base: flat parameter vectors round-trip, mini-batches cover every record once, features survive a
save and load, and the device choice refuses what is not there."""

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
)


def test_flat_parameters_round_trip_and_skip_frozen_ones():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    model[1].bias.requires_grad_(False)
    theta = get_flat(model)
    assert theta.numel() == 3 * 2 + 2 + 2  # the frozen bias is not in θ
    set_flat(model, torch.arange(theta.numel(), dtype=theta.dtype))
    assert torch.equal(get_flat(model), torch.arange(theta.numel(), dtype=theta.dtype))
    assert model[0].weight.flatten().tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="θ has 3 entries"):
        set_flat(model, torch.zeros(3))


def test_batches_cover_every_record_once_in_a_generator_order():
    got = list(batches(10, 4, torch.Generator().manual_seed(0)))
    assert [len(b) for b in got] == [4, 4, 2]
    assert sorted(torch.cat(got).tolist()) == list(range(10))
    again = list(batches(10, 4, torch.Generator().manual_seed(0)))
    assert all(torch.equal(a, b) for a, b in zip(got, again))
    assert torch.cat(list(batches(5, 2))).tolist() == [0, 1, 2, 3, 4]  # no generator: in order


def test_features_save_load_and_take(tmp_path):
    feats, labels = {"x": torch.randn(5, 3), "mask": torch.ones(5, 2, dtype=torch.long)}, torch.tensor([0, 1, 2, 1, 0])
    save_features(tmp_path / "f.pt", feats, labels)
    back, y = load_features(tmp_path / "f.pt")
    assert n_records(back) == 5 and torch.equal(y, labels) and torch.equal(back["x"], feats["x"])
    part = take(back, torch.tensor([4, 0]), torch.device("cpu"))
    assert torch.equal(part["x"], feats["x"][[4, 0]]) and part["mask"].shape == (2, 2)


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type in {"cpu", "cuda"}
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            pick_device("cuda")
