"""data.splits: the label map and the per-split features as the stages read them."""

from __future__ import annotations

import pytest
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import save_features
from dprelease.core.backends.full import FullBackend
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import parse_params
from dprelease.core.data.splits import SPLITS, backend_for, features, label_info, n_train
from dprelease.core.io import write_json

LABELS = {
    "codes": ["10", "11", "1972"],
    "titles": ["Fractures", "Amputations", "Other"],
    "train_sizes": [5, 3, 2],
    "test_sizes": [4, 3, 1],
}


@pytest.fixture
def lay(tmp_path) -> Layout:
    lay = Layout.from_params(parse_params({}), tmp_path)
    write_json(lay.data / "labels.json", LABELS)
    gen = torch.Generator().manual_seed(0)
    for split, n in (("train", 10), ("test", 8)):
        x = torch.randn(n, 6, generator=gen)
        y = torch.randint(0, 3, (n,), generator=gen)
        save_features(lay.features / f"{split}.safetensors", {"x": x}, y)
    return lay


def test_layout_paths(tmp_path):
    lay = Layout.from_params(parse_params({"artifacts": "arts"}), tmp_path)
    assert lay.data == tmp_path / "arts" / "data"
    assert lay.features == tmp_path / "arts" / "features"


def test_label_info_round_trip(lay):
    assert label_info(lay) == LABELS


def test_features_round_trip(lay):
    gen = torch.Generator().manual_seed(0)
    x_train = torch.randn(10, 6, generator=gen)
    y_train = torch.randint(0, 3, (10,), generator=gen)
    feats, y = features(lay, "train")
    assert set(feats) == {"x"}
    assert torch.equal(feats["x"], x_train)
    assert torch.equal(y, y_train) and y.dtype == torch.long
    default_feats, default_y = features(lay)  # train is the default split
    assert torch.equal(default_feats["x"], x_train) and torch.equal(default_y, y_train)
    test_feats, test_y = features(lay, "test")
    assert test_feats["x"].shape == (8, 6) and test_y.shape == (8,)


def test_features_several_tensors_round_trip(tmp_path):
    lay = Layout.from_params(parse_params({}), tmp_path)
    ids = torch.arange(12, dtype=torch.long).reshape(3, 4)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    save_features(
        lay.features / "validation.safetensors", {"input_ids": ids, "attention_mask": mask}, torch.tensor([2, 0, 1])
    )
    feats, y = features(lay, "validation")
    assert set(feats) == {"input_ids", "attention_mask"}
    assert torch.equal(feats["input_ids"], ids) and torch.equal(feats["attention_mask"], mask)
    assert y.tolist() == [2, 0, 1]


@pytest.mark.parametrize("split", ["bogus", "Train", "", "../train"])
def test_features_unknown_split(lay, split):
    with pytest.raises(ValueError) as err:
        features(lay, split)
    assert repr(split) in str(err.value)
    assert all(s in str(err.value) for s in SPLITS)


def test_features_missing_file(lay):
    with pytest.raises(FileNotFoundError, match="validation.safetensors"):  # never written
        features(lay, "validation")


def test_n_train_sums_train_sizes(lay):
    assert n_train(lay) == 10
    write_json(lay.data / "sizes.json", {"train_sizes": [100, 0, 7]})  # the private counts live beside the label map
    assert n_train(lay) == 107


def test_backend_for_head(lay):
    params = parse_params({"model": {"backend": "head", "device": "cpu", "head": {"hidden": 4}}, "seed": 11})
    backend = backend_for(params, lay)
    assert isinstance(backend, HeadBackend)
    assert backend.n_classes == 3
    assert backend.seed == 11 and backend.device == torch.device("cpu")
    model = backend.new_model(features(lay)[0])
    assert model(torch.zeros(2, 6)).shape == (2, 3)


def test_backend_for_full_class_count(lay):
    write_json(lay.data / "labels.json", LABELS | {"codes": ["1", "2", "3", "4", "5"]})
    params = parse_params({"model": {"backend": "full", "device": "cpu"}})
    backend = backend_for(params, lay)
    assert isinstance(backend, FullBackend)
    assert backend.n_classes == 5
