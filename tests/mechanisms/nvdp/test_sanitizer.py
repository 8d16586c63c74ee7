"""nvdp.sanitizer: the release holds the NVIB layer and the block only (no task head), verifies before it loads,
and privatizes texts into one draw each that the caller's seed fixes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from safetensors import safe_open

from dprelease.core.errors import ReleaseError
from dprelease.core.release.signing import ensure_key
from dprelease.mechanisms.nvdp.experiment import module_from
from dprelease.mechanisms.nvdp.sanitizer import (
    load_sanitizer,
    privatize,
    public_state,
    verify_sanitizer,
    write_sanitizer,
)

ARCH = {
    "dim_in": 384,
    "dim": 16,
    "heads": 2,
    "n_classes": 3,
    "max_length": 32,
    "variant": "clipped",
    "pair": False,
    "clip": {"mu": 1.0, "sigma_order": None, "alpha_min": None, "alpha_max": None},
}
GUARANTEE = {
    "epsilon": None,
    "delta": None,
    "delta_reason": "none (no differential-privacy claim)",
    "kind": "none",
    "mechanism": "NVDP",
    "quantities": {"reference_accountant_epsilon": 10.47},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("nvdp_sanitizer")
    state = module_from(ARCH).state_dict()
    assert any(k.startswith("head.") for k in state)  # the full model has a task head …
    write_sanitizer(base / "release-nvdp", state, ARCH, GUARANTEE, "# card\n", signer=ensure_key(base / "keys")[0])
    return base / "release-nvdp"


def test_only_the_public_tensors_are_released(folder):
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert keys and all(k.startswith(("nvib.", "block.")) for k in keys)  # … the release has none of it
    assert set(public_state(module_from(ARCH).state_dict())) == keys
    manifest, arch = verify_sanitizer(folder)
    assert manifest["mechanism"] == "nvdp" and manifest["guarantee"] == GUARANTEE and arch["dim"] == 16


def test_a_changed_file_is_refused_before_loading(folder, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "README.md").write_text("# another card\n", encoding="utf-8")
    with pytest.raises(ReleaseError, match="README.md"):
        load_sanitizer(copy)


def test_privatize_gives_one_draw_per_text_fixed_by_the_seed(folder):
    texts = ["Employee fell from a ladder.", "A worker cut a finger on a saw."]
    a, manifest = privatize(folder, texts, seed=1)
    b, _ = privatize(folder, texts, seed=1)
    c, _ = privatize(folder, texts, seed=2)
    assert a.shape == (2, 16) and a.dtype == np.float32 and np.isfinite(a).all()
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert manifest["guarantee"]["kind"] == "none"
    empty, _ = privatize(folder, [], seed=1)
    assert empty.shape == (0, 16)
