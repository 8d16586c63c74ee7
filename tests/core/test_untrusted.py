"""The bounded reading of files this process did not write (dprelease.core.untrusted): the safetensors header
reader and the dimension bounds, no release needed."""

from __future__ import annotations

import json
import random

import pytest
import torch
from safetensors.torch import save_file

from dprelease.core.errors import ReleaseError
from dprelease.core.untrusted import BOUNDS, safetensors_header


@pytest.fixture
def weights_file(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.ones(3, 4), "b": torch.zeros(5)}, str(path))
    return path


def test_header_of_a_good_file(weights_file):
    assert safetensors_header(weights_file) == {"a": ("F32", (3, 4)), "b": ("F32", (5,))}


@pytest.mark.parametrize("cut", [0, 4, 8, 30, -1], ids=["empty", "4-bytes", "8-bytes", "in-header", "last-byte"])
def test_header_of_a_truncated_file(weights_file, cut):
    data = weights_file.read_bytes()
    weights_file.write_bytes(data[:cut] if cut >= 0 else data[:-1])
    with pytest.raises(ReleaseError) as info:
        safetensors_header(weights_file)
    assert "w.safetensors" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("seed", range(5))
def test_header_of_random_bytes(weights_file, seed):
    weights_file.write_bytes(random.Random(seed).randbytes(weights_file.stat().st_size))
    with pytest.raises(ReleaseError, match="w.safetensors"):
        safetensors_header(weights_file)


def test_header_with_a_lying_length(weights_file):
    """A header whose JSON promises more data than the file holds."""
    header = {"a": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}
    blob = json.dumps(header).encode()
    weights_file.write_bytes(len(blob).to_bytes(8, "little") + blob + b"\x00" * 16)
    with pytest.raises(ReleaseError, match="truncated"):
        safetensors_header(weights_file)


def test_bounds_are_documented_in_one_place():
    assert BOUNDS["head"]["hidden"] == (0, 16384) and BOUNDS["head"]["dim"] == (1, 4096)
    assert BOUNDS["head"]["n_classes"] == (2, 100_000) and BOUNDS["head"]["max_length"] == (8, 512)
    assert BOUNDS["config.json"]["num_hidden_layers"][1] == 48 and BOUNDS["config.json"]["vocab_size"][1] == 250_000
