"""The head release's architecture without torch (dprelease.core.architecture): the shapes it computes are those
of the head the backend builds, and it refuses what the meta-device build refused, with the same messages."""

from __future__ import annotations

import json

import pytest
import torch

from dprelease.core.architecture import check_head_arch, encoder_dir, head_shapes
from dprelease.core.backends.head import Head
from dprelease.core.errors import ReleaseError
from dprelease.core.untrusted import MAX_PARAMETERS, module_shapes

WIDTH = json.loads((encoder_dir() / "config.json").read_text(encoding="utf-8"))["hidden_size"]


def _arch(**dims) -> dict:
    return {
        "backend": "head",
        "dim": WIDTH,
        "hidden": 0,
        "n_classes": 3,
        "max_length": 32,
        "encoder": {"weights_sha256": "0" * 64},
    } | dims


@pytest.mark.parametrize("hidden, n_classes", [(0, 3), (16, 5), (1, 2)], ids=["linear", "hidden", "narrow"])
def test_shapes_are_the_built_heads_in_its_order(tmp_path, hidden, n_classes):
    with torch.device("meta"):
        built = Head(WIDTH, n_classes, hidden, 0.0)
    expected = module_shapes(tmp_path / "model.json", built)
    got = head_shapes(tmp_path, _arch(hidden=hidden, n_classes=n_classes))
    assert list(got.items()) == list(expected.items())  # the same tensors, shapes and order (the first mismatch named)


def test_too_many_parameters_is_refused_as_before(tmp_path):
    hidden, n_classes = 16384, 100_000  # each within its bound; together over MAX_PARAMETERS
    total = hidden * WIDTH + hidden + n_classes * hidden + n_classes
    assert total > MAX_PARAMETERS
    with pytest.raises(ReleaseError) as err:
        head_shapes(tmp_path, _arch(hidden=hidden, n_classes=n_classes))
    assert str(err.value) == (
        f"{tmp_path / 'model.json'}: the architecture has {total:,} parameters, more than a "
        f"release may hold ({MAX_PARAMETERS:,})"
    )


def test_dimension_the_encoder_does_not_have_is_refused(tmp_path):
    with pytest.raises(ReleaseError) as err:
        head_shapes(tmp_path, _arch(dim=WIDTH + 1))
    assert str(err.value) == f"{tmp_path / 'model.json'}: dim={WIDTH + 1} but the encoder's embeddings have {WIDTH}"


@pytest.mark.parametrize(
    "arch, named",
    [
        (_arch(hidden=2_000_000_000), "hidden=2000000000 outside the bounds"),
        (_arch(n_classes="3"), "n_classes must be an integer"),
        ({k: v for k, v in _arch().items() if k != "encoder"}, "no encoder reference (encoder.weights_sha256)"),
    ],
    ids=["out-of-bounds", "not-an-integer", "no-encoder"],
)
def test_bad_dimensions_are_refused_before_any_shape(tmp_path, arch, named):
    with pytest.raises(ReleaseError, match="model.json: ") as err:
        check_head_arch(tmp_path, arch)
    assert named in str(err.value)
    with pytest.raises(ReleaseError):
        head_shapes(tmp_path, arch)


def test_the_backend_and_the_verification_use_these_shapes():
    from dprelease.core.backends import encoder, head

    assert head.head_shapes is head_shapes and head.check_head_arch is check_head_arch
    assert encoder.encoder_dir is encoder_dir
