"""backends.full: the release round trip of the end-to-end transformer (tiny on CPU), padding columns that
change nothing, and edited config files refused before any model is built."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from core.backends.test_backend_registry import CPU, TEXTS, perturbed
from dprelease.core.backends.full import FullBackend, SequenceClassifier, load_release_full
from dprelease.core.config import FullParams
from dprelease.core.errors import ReleaseError


def test_full_release_round_trip(tmp_path):
    backend = FullBackend(n_classes=3, device=CPU, seed=5, params=FullParams(tiny=True), max_length=32)
    model = perturbed(backend.build_model(), seed=2, scale=0.05)
    arch = backend.write_release_model(model, tmp_path)
    assert json.loads((tmp_path / "model.json").read_text()) == arch
    assert arch["backend"] == "full" and arch["tiny"] is True and arch["n_classes"] == 3 and arch["max_length"] == 32
    assert (tmp_path / "config.json").is_file() and (tmp_path / "model.safetensors").is_file()
    assert (tmp_path / "tokenizer" / "vocab.txt").is_file()

    arch = json.loads((tmp_path / "model.json").read_text())
    probs = FullBackend.release_scorer(tmp_path, arch, CPU)(TEXTS)
    assert probs.shape == (3, 3) and probs.dtype == torch.float32
    torch.testing.assert_close(probs.sum(1), torch.ones(3))
    model.train()
    expected = backend.predict_proba(model, backend.featurize(TEXTS))
    torch.testing.assert_close(probs, expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(probs[0], probs[1], atol=1e-4)  # inputs are distinguished


def test_padding_columns_change_nothing():
    backend = FullBackend(n_classes=3, device=CPU, seed=5, params=FullParams(tiny=True), max_length=32)
    model = backend.build_model().eval()
    assert isinstance(model, SequenceClassifier)
    feats = backend.featurize(TEXTS)
    ids, mask = feats["input_ids"], feats["attention_mask"]
    wide_ids = torch.cat([ids, torch.zeros(len(ids), 7, dtype=ids.dtype)], 1)
    wide_mask = torch.cat([mask, torch.zeros(len(mask), 7, dtype=mask.dtype)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(wide_ids, wide_mask), model(ids, mask))


@pytest.mark.parametrize(
    "edit, needle", [({"model_type": "gpt2"}, "model_type"), ({"num_hidden_layers": 10_000}, "num_hidden_layers")]
)
def test_an_edited_config_is_refused_before_building(tmp_path, edit, needle):
    backend = FullBackend(n_classes=3, device=CPU, seed=5, params=FullParams(tiny=True), max_length=32)
    backend.write_release_model(backend.build_model(), tmp_path / "release")
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "release", bad)
    config = json.loads((bad / "config.json").read_text()) | edit
    (bad / "config.json").write_text(json.dumps(config))
    load_release_full(tmp_path / "release", CPU)  # the written one loads
    with pytest.raises(ReleaseError, match=needle):
        load_release_full(bad, CPU)


def test_the_prior_is_centred_at_the_public_base_model_and_leaves_the_rng_alone():
    """The objective's prior N(θ₀, I/λ) (training.py): θ₀ = the pretrained encoder and the head as the PUBLIC seed
    initialises it, whatever (secret) initialisation the fit starts from; building it draws nothing from the
    global generator the fit's dropout uses."""
    from dprelease.core.backends.base import trainable

    backend = FullBackend(n_classes=3, device=CPU, seed=5, params=FullParams(tiny=True), max_length=32)
    model = backend.build_model(seed=123456789)  # a fit's own (secret) initialisation
    torch.manual_seed(99)
    state = torch.get_rng_state()
    centre = backend.prior_center(model)
    assert torch.equal(torch.get_rng_state(), state)
    public = trainable(backend.build_model())
    assert len(centre) == len(public) == len(trainable(model))
    assert all(torch.equal(c, p.detach()) for c, p in zip(centre, public))
    assert any(not torch.equal(c, p.detach()) for c, p in zip(centre, trainable(model)))  # the head's init differs
